#!/usr/bin/env python3
"""llama.cpp's KV-cache quantization measured with `veloxquant perplexity`'s protocol.

For each config (llama.cpp cache types type_k / type_v, flash attention on or off) this runs
llama.cpp (llama-cpp-python, built from source) over the same text, tokens, ctx and chunks as
`veloxquant perplexity` (docs/EVALUATION.md "Protocol", src/eval/ppl.c):

- the text is tokenized by llama.cpp with add_special=True, parse_special=False (what
  `perplexity` does with its own tokenizer, which matches llama.cpp's for SmolLM2);
- non-overlapping chunks of ctx tokens, each from an empty cache; when the vocabulary adds
  BOS, the chunk's first token is replaced by BOS (SmolLM2 adds none);
- the whole chunk in one llama_decode (n_batch = ctx, n_ubatch 512 as llama-perplexity),
  logits requested for positions ctx/2 .. ctx-2, each scored against the next token.

The logits of every scored position are streamed (format VQRAWLG1, see
tools/veloxquant/cmd_score_logits.c) into `veloxquant score-logits`, which scores them with the
same C code as `perplexity`: perplexity, and KL(base || run) over the base's top-k ids plus the
remainder mass, top-1 agreement. The f16 run (flash attention off, llama.cpp's default) is the
base: it is saved as OUT/f16.logits (--top-k entries, the `perplexity --save-logits` format),
and every other config is compared with it. The f16 run also keeps the full logits of its
scored positions (OUT/f16.full.f32, float32, n_pos x n_vocab, --full-kl) so that each other
config also gets the exact full-vocabulary KL (computed here in float64), to show how much the
top-k estimator misses.

Writes OUT/llamacpp.json (one object per config; rerunning skips finished configs unless
--force), OUT/results.json (the same rows in `veloxquant sweep`'s results.json schema with
config.engine "llama.cpp", docs/results.schema.json: `veloxquant report` merges it with a sweep
of the same model, and its quality figure draws both engines' KL frontiers), and prints one
JSON line per config.

  python3 scripts/llamacpp_ppl.py --ctx 2048 --chunks 20 -t 1 --out out/llamacpp-ctx2048

llama.cpp's AVX-512 build SIGILLs on this project's AMX CPU (tests/golden/README.md): the
script compiles scripts/golden/noamx.c and re-executes itself with it in LD_PRELOAD.
"""
import argparse
import ctypes
import datetime
import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
DEFAULT_MODEL = os.path.join(
    os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models")),
    "SmolLM2-135M-Instruct.Q4_1.gguf")

# name -> (type_k, type_v, flash_attn); quantized V needs flash attention in llama.cpp
# (llama_init_from_model refuses it otherwise), so those configs run with it on.
CONFIGS = {
    "f16": ("f16", "f16", False),
    "f16-fa": ("f16", "f16", True),
    "q8_0": ("q8_0", "q8_0", True),
    "q5_1": ("q5_1", "q5_1", True),
    "q5_0": ("q5_0", "q5_0", True),
    "q4_1": ("q4_1", "q4_1", True),
    "iq4_nl": ("iq4_nl", "iq4_nl", True),
    "q4_0": ("q4_0", "q4_0", True),
    "k-q8_0-v-q4_0": ("q8_0", "q4_0", True),
}
# bits per element of each cache type (block bytes * 8 / block elements), and nominal bits
BITS = {"f16": 16.0, "q8_0": 8.5, "q5_1": 6.0, "q5_0": 5.5, "q4_1": 5.0, "iq4_nl": 4.5,
        "q4_0": 4.5}
NOMINAL = {"f16": 16, "q8_0": 8, "q5_1": 5, "q5_0": 5, "q4_1": 4, "iq4_nl": 4, "q4_0": 4}


def ensure_noamx():
    """Re-executes under LD_PRELOAD of noamx.so (built next to the outputs) unless done."""
    if os.environ.get("VQ_NOAMX_DONE") == "1":
        return
    so = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vq-noamx-%d.so" % os.getuid())
    if not os.path.exists(so):
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2",
                        os.path.join(HERE, "golden", "noamx.c"), "-o", so, "-ldl"], check=True)
    env = dict(os.environ)
    env["LD_PRELOAD"] = (so + " " + env.get("LD_PRELOAD", "")).strip()
    env["VQ_NOAMX_DONE"] = "1"
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def ggml_type(name):
    import llama_cpp
    return getattr(llama_cpp, "GGML_TYPE_" + name.upper())


def tokenize(llm, path):
    with open(path, "rb") as f:
        data = f.read()
    return llm.tokenize(data, add_bos=True, special=False)


def run_config(args, name, tokens, n_chunks, out_dir, full_base):
    """Runs one config; streams the scored logits into veloxquant score-logits. Returns the
    result object."""
    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    tk, tv, fa = CONFIGS[name]
    ctx_n = args.ctx
    llm = Llama(model_path=args.model, n_ctx=ctx_n, n_batch=ctx_n, n_ubatch=args.ubatch,
                n_threads=args.threads, n_threads_batch=args.threads, logits_all=False,
                type_k=ggml_type(tk), type_v=ggml_type(tv), flash_attn=fa, seed=0,
                verbose=False)
    ctx = llm._ctx.ctx
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llm.n_vocab()
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    bos = llama_cpp.llama_vocab_bos(vocab)
    first = ctx_n // 2
    per_chunk = ctx_n - 1 - first
    n_pos = per_chunk * n_chunks

    cmd = [args.veloxquant, "score-logits", "--json"]
    is_base = name == "f16"
    base_path = os.path.join(out_dir, "f16.logits")
    if is_base:
        cmd += ["--save-logits", base_path, "--top-k", str(args.top_k)]
    else:
        cmd += ["--kl-base", base_path]
    if args.kl_base:
        cmd = [args.veloxquant, "score-logits", "--json", "--kl-base", args.kl_base]
        if is_base:
            cmd += ["--save-logits", base_path, "--top-k", str(args.top_k)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(b"VQRAWLG1" + struct.pack("<IIIIQ", 1, n_vocab, ctx_n, n_chunks, 0))

    full = None
    kl_full = []
    if is_base and args.full_kl:
        full = np.lib.format.open_memmap(full_base + ".tmp.npy", mode="w+", dtype=np.float32,
                                         shape=(n_pos, n_vocab))
    elif not is_base and args.full_kl and os.path.exists(full_base):
        full = np.load(full_base, mmap_mode="r")

    batch = llama_cpp.llama_batch_init(ctx_n, 0, 1)
    mem = llama_cpp.llama_get_memory(ctx)
    t_eval = 0.0
    try:
        for ch in range(n_chunks):
            chunk = list(tokens[ch * ctx_n:(ch + 1) * ctx_n])
            if add_bos:
                chunk[0] = bos
            llama_cpp.llama_memory_clear(mem, True)
            batch.n_tokens = ctx_n
            for i in range(ctx_n):
                batch.token[i] = chunk[i]
                batch.pos[i] = i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if first <= i < ctx_n - 1 else 0
            t0 = time.perf_counter()
            rc = llama_cpp.llama_decode(ctx, batch)
            t_eval += time.perf_counter() - t0
            if rc != 0:
                raise RuntimeError("llama_decode failed (%d) in chunk %d" % (rc, ch))
            p = llama_cpp.llama_get_logits(ctx)
            rows = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)),
                                         shape=(per_chunk, n_vocab))
            rows = np.array(rows, dtype=np.float32, copy=True)
            tg = np.asarray(chunk[first + 1:ctx_n], dtype=np.uint32)
            buf = bytearray()
            for j in range(per_chunk):
                buf += struct.pack("<I", int(tg[j]))
                buf += rows[j].tobytes()
            proc.stdin.write(buf)
            r0 = ch * per_chunk
            if full is not None and is_base:
                full[r0:r0 + per_chunk] = rows
            elif full is not None:
                for j0 in range(0, per_chunk, 128):
                    j1 = min(per_chunk, j0 + 128)
                    b = np.asarray(full[r0 + j0:r0 + j1], dtype=np.float64)
                    q = rows[j0:j1].astype(np.float64)
                    lb = b - logsumexp(b)
                    lq = q - logsumexp(q)
                    kl_full.extend(np.sum(np.exp(lb) * (lb - lq), axis=1).tolist())
            print("%s: chunk %d/%d (%.0f s in llama_decode)" % (name, ch + 1, n_chunks, t_eval),
                  file=sys.stderr, flush=True)
    finally:
        llama_cpp.llama_batch_free(batch)
        proc.stdin.close()
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise RuntimeError("veloxquant score-logits failed for %s" % name)
    res = json.loads(out)
    if full is not None and is_base:
        full.flush()
        del full
        os.replace(full_base + ".tmp.npy", full_base)
    del llm
    bits = (BITS[tk] + BITS[tv]) / 2
    row = {"config": name, "type_k": tk, "type_v": tv, "flash_attn": fa,
           "k_bits": BITS[tk], "v_bits": BITS[tv], "bits_per_elem": bits,
           "ctx": ctx_n, "chunks": n_chunks, "tokens_scored": res["tokens_scored"],
           "ppl": res["ppl"], "ppl_stderr": res["ppl_stderr"], "nll_mean": res["nll_mean"],
           "prefill_tok_s": n_chunks * ctx_n / t_eval if t_eval > 0 else None,
           "threads": args.threads}
    for k in ("kld_mean", "kld_median", "kld_p99", "top1", "kl_top_k"):
        if k in res:
            row[k] = res[k]
    if kl_full:
        kf = np.asarray(kl_full)
        row["kld_full_mean"] = float(kf.mean())
        row["kld_full_median"] = float(np.median(kf))
    return row


def logsumexp(x):
    import numpy as np
    m = x.max(axis=1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def model_geometry(path):
    """(arch, n_layers, n_kv_heads, head_dim) from the GGUF metadata."""
    import gguf
    r = gguf.GGUFReader(path)

    def val(key):
        f = r.fields[key]
        return f.parts[f.data[0]]

    arch = bytes(val("general.architecture")).decode()
    n_layers = int(val(arch + ".block_count")[0])
    n_head = int(val(arch + ".attention.head_count")[0])
    n_kv = int(val(arch + ".attention.head_count_kv")[0])
    n_embd = int(val(arch + ".embedding_length")[0])
    key_len = arch + ".attention.key_length"
    head_dim = int(val(key_len)[0]) if key_len in r.fields else n_embd // n_head
    return arch, n_layers, n_kv, head_dim


def write_results(path, doc, args, model_sha):
    """The rows as a results.json of schema veloxquant.results.v1 (engine llama.cpp)."""
    import platform
    arch, n_layers, n_kv, head_dim = model_geometry(args.model)
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1048576.0
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    proto = doc["protocol"]
    out = {"schema": "veloxquant.results.v1",
           "created_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "git_commit": commit,
           "hardware": {"cpu": cpu[:120], "cores": args.threads, "isa": "auto",
                        "ram_mb": round(ram_mb)},
           "model": {"file": args.model, "sha256": model_sha, "arch": arch,
                     "n_layers": n_layers, "n_kv_heads": n_kv, "head_dim": head_dim},
           "protocol": {"prompts": [], "corpus": proto["text"], "ctx": proto["ctx"],
                        "chunks": proto["chunks"], "max_tokens": 0, "seed": 0},
           "results": []}
    for r in doc["rows"]:
        tk, tv = r["type_k"], r["type_v"]
        e = {"config": {"name": "llama.cpp " + r["config"], "engine": "llama.cpp",
                        "k_method": tk, "v_method": tv, "k_bits": NOMINAL[tk],
                        "v_bits": NOMINAL[tv], "options": {"flash_attn": int(r["flash_attn"])}},
             "bits_per_elem": r["bits_per_elem"],
             "kv_bytes": int(round(n_layers * n_kv * head_dim * proto["ctx"] *
                                   (BITS[tk] + BITS[tv]) / 8)),
             "key_x": 16.0 / BITS[tk], "fullKV_x": 32.0 / (BITS[tk] + BITS[tv]),
             "ppl": r["ppl"]}
        for k in ("kld_mean", "kld_median", "kld_p99", "top1", "kld_full_mean",
                  "prefill_tok_s"):
            if r.get(k) is not None:
                e[k] = r[k]
        out["results"].append(e)
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)


def sha256_file(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("-f", "--text", default=os.path.join(ROOT, "data", "corpus_en.txt"))
    ap.add_argument("-c", "--ctx", type=int, default=2048)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--ubatch", type=int, default=512, help="llama.cpp n_ubatch (default 512)")
    ap.add_argument("--top-k", type=int, default=256, help="entries per position of f16.logits")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="comma-separated subset of: " + ", ".join(CONFIGS))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "llamacpp"))
    ap.add_argument("--veloxquant", default=os.path.join(ROOT, "build", "veloxquant"))
    ap.add_argument("--no-full-kl", dest="full_kl", action="store_false",
                    help="do not keep the f16 run's full logits (4 GB at ctx 2048 x 20)")
    ap.add_argument("--kl-base", default=None,
                    help="compare every config (f16 included) with this --save-logits file "
                         "instead (e.g. veloxquant's own fp16 run, to check bit identity)")
    ap.add_argument("--force", action="store_true", help="rerun finished configs")
    args = ap.parse_args()
    try:
        import gguf  # noqa: F401
        import llama_cpp  # noqa: F401
    except ImportError as e:
        sys.exit("llamacpp_ppl: %s: run `make llamacpp-venv` (scripts/install_llamacpp.sh), then "
                 "this script with build/llama-venv/bin/python" % e)
    ensure_noamx()
    import llama_cpp
    from llama_cpp import Llama

    names = [n for n in args.configs.split(",") if n]
    for n in names:
        if n not in CONFIGS:
            sys.exit("llamacpp_ppl: unknown config %r (known: %s)" % (n, ", ".join(CONFIGS)))
    if args.ctx < 4 or args.ctx % 2:
        sys.exit("llamacpp_ppl: --ctx must be even and >= 4")
    if not os.access(args.veloxquant, os.X_OK):
        sys.exit("llamacpp_ppl: %s not found (build veloxquant first)" % args.veloxquant)
    os.makedirs(args.out, exist_ok=True)
    vocab_llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    tokens = tokenize(vocab_llm, args.text)
    del vocab_llm
    avail = len(tokens) // args.ctx
    if avail < 1:
        sys.exit("llamacpp_ppl: %s has %d tokens, fewer than one chunk" % (args.text, len(tokens)))
    n_chunks = min(args.chunks, avail) if args.chunks > 0 else avail

    res_path = os.path.join(args.out, "llamacpp.json")
    doc = {"engine": "llama.cpp", "rows": []}
    if os.path.exists(res_path):
        with open(res_path) as f:
            doc = json.load(f)
    proto = {"model": os.path.basename(args.model), "text": os.path.relpath(args.text, ROOT),
             "ctx": args.ctx, "chunks": n_chunks, "n_ubatch": args.ubatch,
             "top_k": args.top_k, "kl_base": args.kl_base or "f16"}
    if doc.get("protocol") not in (None, proto):
        if not args.force:
            sys.exit("llamacpp_ppl: %s was made with another protocol (use --force)" % res_path)
        doc["rows"] = []
    doc.update({"engine": "llama.cpp", "protocol": proto,
                "llama_cpp_python": llama_cpp.__version__,
                "llama_cpp_commit": "0c1e57098 (vendored in llama-cpp-python 0.3.36)"
                if llama_cpp.__version__ == "0.3.36" else "unknown",
                "text_tokens": len(tokens)})
    done = {r["config"] for r in doc["rows"]}
    model_sha = sha256_file(args.model)
    full_base = os.path.join(args.out, "f16.full.npy")
    if "f16" not in names and not os.path.exists(os.path.join(args.out, "f16.logits")) \
            and not args.kl_base:
        names.insert(0, "f16")
    if "f16" in names:  # the base first
        names.remove("f16")
        names.insert(0, "f16")
    for name in names:
        if name in done and not args.force:
            continue
        row = run_config(args, name, tokens, n_chunks, args.out, full_base)
        row["date"] = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
        doc["rows"] = [r for r in doc["rows"] if r["config"] != name] + [row]
        with open(res_path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(res_path + ".tmp", res_path)
        write_results(os.path.join(args.out, "results.json"), doc, args, model_sha)
        print(json.dumps(row), flush=True)
    if doc["rows"]:
        write_results(os.path.join(args.out, "results.json"), doc, args, model_sha)


if __name__ == "__main__":
    main()
