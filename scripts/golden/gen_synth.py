#!/usr/bin/env python3
"""Synthetic small models of architectures we have no real weights for, and their llama.cpp
reference log-probs (tests/golden/synth/, formats in tests/golden/README.md).

For each model in MODELS: random weights of the architecture's real tensor layout and metadata
(fixed seed, numpy), written as GGUF with the gguf package, with a tokenizer borrowed from the
default model (SmolLM2: its first N_VOCAB tokens and the merges that build them, a consistent
smaller byte-level BPE); the first N_TOK tokens of tests/golden/text_en.txt (tokenized by
llama.cpp with that tokenizer) are evaluated by llama.cpp (llama-cpp-python, fp16 KV cache,
flash attention off): the first N_TOK - N_SINGLE in one batch, the rest one token per decode
call. Top-32 log-probs per position go to <name>_logits.bin (reserved header field = N_SINGLE).

  qwen3      q/k RMSNorm per head before RoPE, NEOX RoPE, no biases, head_dim != n_embd/n_head,
             tied embeddings
  phi3       fused attn_qkv, ffn_up holding gate and up (2 n_ff rows), q scaled before the
             product; phi3.attention.sliding_window is written but llama.cpp disables Phi-3's
             window (src/models/phi3.cpp), so the reference is full attention
  llama_swa  llama (Mistral style) with llama.attention.sliding_window = WINDOW < N_TOK.
             llama.cpp's llama architecture ignores that key, so the reference comes from the
             same tensors run as llama.cpp's "granite_swa" architecture (the llama graph with
             a per-layer window: every layer windowed here, attention sinks of -inf, logit scale
             1, which leave the arithmetic unchanged). The file's own full-attention llama.cpp
             run is printed for contrast (how much the window changes the output).
  unsupported_mamba.gguf  a tiny file of an architecture the engine does not run (CLI test)

All matrices are Q4_1, the weight type whose dot product the engine computes in ggml's exact
operation order (tests/golden/README.md), so the comparison can be bit-exact; embeddings that
only feed get_rows use other types (Q5_0, Q8_0: dequantized exactly on both sides).

Requires numpy, gguf, llama-cpp-python (tests/golden/README.md). NOT run by CI: outputs are
committed. Deterministic: a rerun writes byte-identical files.
  python3 scripts/golden/gen_synth.py [--model SmolLM2.gguf] [--out tests/golden/synth]
"""
import argparse
import hashlib
import math
import os
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_golden  # noqa: E402

DEFAULT_MODEL = os.path.join(
    os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models")),
    "SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = os.path.join(HERE, "..", "..", "tests", "golden", "text_en.txt")

N_VOCAB = 512     # SmolLM2: 17 special + 235 byte tokens, then merge i makes token 252 + i
N_TOK = 256       # positions evaluated
N_SINGLE = 16     # of which the last ones one token per decode call
N_CTX = 256
TOP_K = 32
WINDOW = 32       # llama_swa sliding window (a query at p sees p-WINDOW+1 .. p)
SEED = 20261201

Q = gguf.GGMLQuantizationType

# name -> architecture, hyper-parameters, tensor types, weight scales
MODELS = {
    "qwen3": dict(arch="qwen3", name="Qwen 3 style", n_layer=2, n_embd=128, n_head=2,
                  n_head_kv=1, head_dim=128, n_ff=256, rope_base=1000000.0, eps=1e-6,
                  tied=True, embd_type=Q.Q4_1),
    "phi3": dict(arch="phi3", name="Phi 3 style", n_layer=2, n_embd=192, n_head=2,
                 n_head_kv=1, head_dim=96, n_ff=256, rope_base=10000.0, eps=1e-5,
                 tied=False, embd_type=Q.Q5_0, sliding_window=48),
    "llama_swa": dict(arch="llama", name="Mistral style", n_layer=3, n_embd=128, n_head=2,
                      n_head_kv=1, head_dim=64, n_ff=256, rope_base=10000.0, eps=1e-5,
                      tied=False, embd_type=Q.Q8_0, sliding_window=WINDOW),
}


def quantize(rng, rows, cols, std, qtype):
    """Gaussian weights (rows, cols) of the given std, quantized to qtype by gguf-py."""
    w = (rng.standard_normal((rows, cols)) * std).astype(np.float32)
    if qtype == Q.F32:
        return w
    return gguf.quants.quantize(w, qtype)


def borrowed_tokenizer(path):
    """The first N_VOCAB tokens of the default model's tokenizer and the merges among them."""
    r = gguf.GGUFReader(path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    idx = {t: i for i, t in enumerate(tokens)}
    # merge i produces token 252 + i in SmolLM2 (checked here, not assumed)
    for i, mg in enumerate(merges[:N_VOCAB - 252]):
        a, b = mg.split(" ", 1)
        if idx.get(a + b) != 252 + i or idx[a] >= 252 + i or idx[b] >= 252 + i:
            raise SystemExit("tokenizer layout not as expected at merge %d (%r)" % (i, mg))
    return dict(model=f["tokenizer.ggml.model"].contents(), pre=f["tokenizer.ggml.pre"].contents(),
                tokens=tokens[:N_VOCAB], types=types[:N_VOCAB], merges=merges[:N_VOCAB - 252],
                bos=f["tokenizer.ggml.bos_token_id"].contents(),
                eos=f["tokenizer.ggml.eos_token_id"].contents(),
                unk=f["tokenizer.ggml.unknown_token_id"].contents(),
                pad=f["tokenizer.ggml.padding_token_id"].contents())


def finish(w):
    """Writes header, metadata and tensors of a GGUFWriter and closes it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def add_tokenizer(w, tok):
    w.add_tokenizer_model(tok["model"])
    w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_bos_token_id(tok["bos"])
    w.add_eos_token_id(tok["eos"])
    w.add_unk_token_id(tok["unk"])
    w.add_pad_token_id(tok["pad"])
    w.add_add_bos_token(False)
    w.add_add_space_prefix(False)


def model_tensors(spec, seed):
    """Ordered (name, array, qtype) of a model: norms F32 around 1, matrices Q4_1 with scales
    chosen so that attention is neither uniform nor one-hot and the logits are not flat."""
    rng = np.random.default_rng(seed)
    E, L, F = spec["n_embd"], spec["n_layer"], spec["n_ff"]
    hd, nh, nkv = spec["head_dim"], spec["n_head"], spec["n_head_kv"]
    NQ, NK = nh * hd, nkv * hd
    qk_std = 1.5 / math.sqrt(E)          # q, k elements of std ~1.5 for unit-rms inputs
    out = []

    def norm(name, n, spread=0.25, center=1.0):
        out.append((name, (center + spread * rng.standard_normal(n)).astype(np.float32), Q.F32))

    def mat(name, rows, cols, std, qtype=Q.Q4_1):
        out.append((name, quantize(rng, rows, cols, std, qtype), qtype))

    logit_std = 3.0 / math.sqrt(E)       # logits of std ~3 from the unit-rms final state
    mat("token_embd.weight", N_VOCAB, E, logit_std if spec["tied"] else 1.0, spec["embd_type"])
    for l in range(L):
        p = "blk.%d." % l
        norm(p + "attn_norm.weight", E)
        if spec["arch"] == "phi3":
            mat(p + "attn_qkv.weight", NQ + 2 * NK, E, qk_std)
        else:
            mat(p + "attn_q.weight", NQ, E, qk_std)
            mat(p + "attn_k.weight", NK, E, qk_std)
            mat(p + "attn_v.weight", NK, E, 1.0 / math.sqrt(E))
        if spec["arch"] == "qwen3":
            norm(p + "attn_q_norm.weight", hd, 0.3, 1.5)   # unit-rms heads: scores of std ~2
            norm(p + "attn_k_norm.weight", hd, 0.3, 1.5)
        mat(p + "attn_output.weight", E, NQ, 0.6 / math.sqrt(NQ))
        norm(p + "ffn_norm.weight", E)
        if spec["arch"] == "phi3":
            mat(p + "ffn_up.weight", 2 * F, E, 1.0 / math.sqrt(E))
        else:
            mat(p + "ffn_gate.weight", F, E, 1.0 / math.sqrt(E))
            mat(p + "ffn_up.weight", F, E, 1.0 / math.sqrt(E))
        mat(p + "ffn_down.weight", E, F, 0.6 / math.sqrt(F))
    norm("output_norm.weight", E, 0.1)
    if not spec["tied"]:
        mat("output.weight", N_VOCAB, E, logit_std)
    return out


def write_gguf(path, arch, spec, tensors, tok, extra=None):
    w = gguf.GGUFWriter(path, arch)
    # (a name containing "phi3" makes llama.cpp look up Phi-3's own special tokens)
    w.add_name("veloxquant synthetic %s" % spec["name"])
    w.add_block_count(spec["n_layer"])
    w.add_context_length(4096)
    w.add_embedding_length(spec["n_embd"])
    w.add_feed_forward_length(spec["n_ff"])
    w.add_head_count(spec["n_head"])
    w.add_head_count_kv(spec["n_head_kv"])
    if spec["head_dim"] * spec["n_head"] != spec["n_embd"]:
        w.add_key_length(spec["head_dim"])
        w.add_value_length(spec["head_dim"])
    w.add_rope_dimension_count(spec["head_dim"])
    w.add_rope_freq_base(spec["rope_base"])
    w.add_layer_norm_rms_eps(spec["eps"])
    w.add_vocab_size(N_VOCAB)
    w.add_file_type(3)  # MOSTLY_Q4_1
    if "sliding_window" in spec:
        w.add_sliding_window(spec["sliding_window"])
    for fn in (extra or []):
        fn(w)
    add_tokenizer(w, tok)
    for name, arr, qt in tensors:
        w.add_tensor(name, arr, raw_dtype=qt)
    finish(w)


def granite_swa_twin(path, spec, tensors, tok):
    """The same tensors as llama.cpp's granite_swa architecture with every layer windowed."""
    L, nh = spec["n_layer"], spec["n_head"]
    sinks = [("blk.%d.attn_sinks.weight" % l, np.full(nh, -np.inf, dtype=np.float32), Q.F32)
             for l in range(L)]

    def extra(w):
        w.add_sliding_window_pattern([True] * L)
        w.add_logit_scale(1.0)
    write_gguf(path, "granite_swa", spec, tensors + sinks, tok, [extra])


def write_unsupported(path):
    """A tiny GGUF of an architecture the engine does not run (mamba), with one tensor type
    that has no engine kernels (Q3_K): `veloxquant info` must still list it."""
    rng = np.random.default_rng(SEED)
    w = gguf.GGUFWriter(path, "mamba")
    w.add_name("veloxquant synthetic mamba")
    w.add_block_count(1)
    w.add_context_length(1024)
    w.add_embedding_length(256)
    w.add_uint32("mamba.ssm.conv_kernel", 4)
    w.add_uint32("mamba.ssm.inner_size", 512)
    w.add_uint32("mamba.ssm.state_size", 16)
    w.add_uint32("mamba.ssm.time_step_rank", 16)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("token_embd.weight", rng.standard_normal((8, 256)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(256, dtype=np.float32))
    q3k = rng.integers(0, 256, (16, 110), dtype=np.uint8)   # 16 rows of one Q3_K block
    q3k[:, 108:110] = np.full(16, 0.01, dtype=np.float16).view(np.uint8).reshape(16, 2)  # d
    w.add_tensor("blk.0.ssm_in.weight", q3k, raw_dtype=Q.Q3_K)
    w.add_tensor("blk.0.ssm_conv1d.weight", rng.standard_normal((512, 4)).astype(np.float32))
    finish(w)


def tokenize(path, text):
    """The first N_TOK llama.cpp token ids of text with the file's (borrowed) tokenizer."""
    plain_cpu_weights()
    from llama_cpp import Llama
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)[:N_TOK]
    if len(ids) < N_TOK or max(ids) >= N_VOCAB:
        raise SystemExit("text gives %d tokens (max id %d)" % (len(ids), max(ids)))
    return ids


def plain_cpu_weights():
    """llama.cpp model params with use_extra_bufts off: weights stay in plain CPU buffers, so the
    matmuls run ggml's ordinary x86 kernels (the ones the engine repeats), not AMX tiles or
    repacked layouts. On an AMX machine (Sapphire Rapids) a GGML_NATIVE build otherwise runs Q4_1
    through its AMX kernel, which crashed here (SIGILL at tilezero); with the flag off this
    llama.cpp reproduces tests/golden/smollm2_logits.bin (AMD EPYC, default params) to 5e-7."""
    import llama_cpp.llama_cpp as C
    if getattr(C.llama_model_default_params, "_plain", False):
        return
    orig = C.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p
    params._plain = True
    C.llama_model_default_params = params


def run_llamacpp(path, ids):
    """log-probs (float64, [len(ids), n_vocab]): a batch, then one token per decode call."""
    plain_cpu_weights()
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_threads=2,
                n_threads_batch=2, logits_all=True, flash_attn=False, swa_full=True,
                seed=SEED, verbose=False)
    llm.eval(ids[:len(ids) - N_SINGLE])
    for t in ids[len(ids) - N_SINGLE:]:
        llm.eval([t])
    sc = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    return sc - np.logaddexp.reduce(sc, axis=1)[:, None], llm


def stats(lp, ids):
    p = np.exp(lp)
    ent = -(p * lp).sum(axis=1)
    nll = -lp[np.arange(len(ids) - 1), ids[1:]]
    return "entropy mean %.2f nats (min %.2f), top-1 prob mean %.2f, ppl %.1f" % (
        ent.mean(), ent.min(), p.max(axis=1).mean(), math.exp(nll.mean()))


def kl_top1(a, b, lo=0):
    """mean KL(a || b) and top-1 agreement over positions lo.. (full vocabulary)."""
    kl = (np.exp(a[lo:]) * (a[lo:] - b[lo:])).sum(axis=1)
    return kl.mean(), (a[lo:].argmax(axis=1) == b[lo:].argmax(axis=1)).mean()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help="GGUF whose tokenizer is borrowed")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "golden", "synth"))
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(MODELS))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    import llama_cpp
    print("llama-cpp-python", llama_cpp.__version__)
    tok = borrowed_tokenizer(args.model)
    with open(TEXT, encoding="utf-8", newline="") as f:
        text = f.read()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    files = []
    for k, name in enumerate(names):
        spec = MODELS[name]
        tensors = model_tensors(spec, SEED + k)
        path = os.path.join(out, name + ".gguf")
        write_gguf(path, spec["arch"], spec, tensors, tok)
        ids = tokenize(path, text)
        if spec["arch"] == "llama" and "sliding_window" in spec:
            with tempfile.TemporaryDirectory() as td:
                twin = os.path.join(td, "twin.gguf")
                granite_swa_twin(twin, spec, tensors, tok)
                lp, _ = run_llamacpp(twin, ids)
            full, _ = run_llamacpp(path, ids)
            kl, t1 = kl_top1(lp, full, spec["sliding_window"])
            print("  %s: llama.cpp without the window vs with it, positions >= %d: mean KL %.3g, "
                  "top-1 agreement %.3f" % (name, spec["sliding_window"], kl, t1))
        else:
            lp, _ = run_llamacpp(path, ids)
        binp = os.path.join(out, name + "_logits.bin")
        check_golden.write_logits(binp, ids, lp, N_CTX, 0, TOP_K, reserved=N_SINGLE)
        print("%s: %d bytes GGUF, %s" % (name, os.path.getsize(path), stats(lp, np.asarray(ids))))
        files += [name + ".gguf", name + "_logits.bin"]
    if not args.only:
        write_unsupported(os.path.join(out, "unsupported_mamba.gguf"))
        files.append("unsupported_mamba.gguf")
        with open(os.path.join(out, "SHA256SUMS"), "w") as f:
            for n in files:
                f.write("%s  %s\n" % (sha256(os.path.join(out, n)), n))


if __name__ == "__main__":
    main()
