#!/usr/bin/env python3
"""Read tests/golden/smollm2_logits.bin (reference reader for the format in
tests/golden/README.md), validate it, and measure how much llama.cpp itself moves when
the same text is evaluated with a different batch split or thread count.

  python3 scripts/golden/check_golden.py [--model PATH] [--golden tests/golden] [--n-batch 1,64]
  (--n-batch "" skips the llama.cpp drift runs)

Without llama-cpp-python installed it only parses and validates the file. The drift it
prints is a floor for the tolerance an independent engine can be held to.
"""
import argparse
import hashlib
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def read_logits(path):
    """Parse smollm2_logits.bin. Returns dict with header fields, text_ids (uint32 array)
    and per-position arrays token (n_eval), top_ids (n_eval, k), top_lp (n_eval, k),
    log_rest (n_eval)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"VQGLOGIT":
        raise ValueError("bad magic")
    version, n_vocab, n_text, n_eval, k, n_ctx, flags, _ = struct.unpack_from("<8I", data, 8)
    if version != 1:
        raise ValueError("unsupported version %d" % version)
    off = 40
    text_ids = np.frombuffer(data, dtype="<u4", count=n_text, offset=off)
    off += 4 * n_text
    rec = np.dtype([("token", "<u4"), ("top_ids", "<u4", (k,)), ("top_lp", "<f4", (k,)),
                    ("log_rest", "<f4")])
    if len(data) != off + rec.itemsize * n_eval:
        raise ValueError("size mismatch: %d != %d" % (len(data), off + rec.itemsize * n_eval))
    r = np.frombuffer(data, dtype=rec, count=n_eval, offset=off)
    return dict(version=version, n_vocab=n_vocab, n_text=n_text, n_eval=n_eval, k=k, n_ctx=n_ctx,
                flags=flags, text_ids=text_ids, token=r["token"], top_ids=r["top_ids"],
                top_lp=r["top_lp"], log_rest=r["log_rest"])


def write_logits(path, text_ids, logprobs, n_ctx, flags, k=32, reserved=0):
    """Write a smollm2_logits.bin-format file. logprobs: float64 [n_eval, n_vocab] natural-log
    next-token probabilities for positions 0..n_eval-1 (rows already normalized). reserved: the
    header's last field (synthetic models: positions evaluated one token per decode call)."""
    n_eval, n_vocab = logprobs.shape
    with open(path, "wb") as f:
        f.write(b"VQGLOGIT" + struct.pack("<8I", 1, n_vocab, len(text_ids), n_eval, k, n_ctx, flags,
                                          reserved))
        f.write(struct.pack("<%dI" % len(text_ids), *[int(t) for t in text_ids]))
        for i in range(n_eval):
            lp = logprobs[i]
            order = np.argsort(-lp, kind="stable")[:k]
            rest = np.logaddexp.reduce(np.delete(lp, order))
            f.write(struct.pack("<I", int(text_ids[i])))
            f.write(struct.pack("<%dI" % k, *[int(t) for t in order]))
            f.write(struct.pack("<%df" % k, *[float(v) for v in lp[order]]))
            f.write(struct.pack("<f", float(rest)))


MANIFEST_FILES = ["text_en.txt", "smollm2_logits.bin", "smollm2_logits_ref64.bin",
                  "tokenizer_ids.json", "greedy.json", "gemma3_logits.bin",
                  "gemma3_tokenizer_ids.json", "gemma3_greedy.json", "qwen25_logits.bin",
                  "qwen25_tokenizer_ids.json", "qwen25_greedy.json"]


def write_manifest(golden_dir):
    """(Re)write golden_dir/SHA256SUMS over the data files in MANIFEST_FILES that exist."""
    with open(os.path.join(golden_dir, "SHA256SUMS"), "w") as f:
        for n in MANIFEST_FILES:
            p = os.path.join(golden_dir, n)
            if os.path.exists(p):
                with open(p, "rb") as ff:
                    f.write("%s  %s\n" % (hashlib.sha256(ff.read()).hexdigest(), n))


def validate(g):
    assert g["n_eval"] <= g["n_text"] and g["n_eval"] <= g["n_ctx"]
    assert np.array_equal(g["token"], g["text_ids"][: g["n_eval"]])
    assert (g["top_ids"] < g["n_vocab"]).all()
    for i in range(g["n_eval"]):
        assert len(set(g["top_ids"][i].tolist())) == g["k"]
        lp = g["top_lp"][i].astype(np.float64)
        assert (np.diff(lp) <= 0).all(), "top-k not sorted at %d" % i
        total = np.logaddexp.reduce(np.append(lp, float(g["log_rest"][i])))
        assert abs(total) < 1e-4, "mass does not sum to 1 at %d: %g" % (i, total)
    nll = []
    for i in range(g["n_eval"] - 1):
        nxt = g["text_ids"][i + 1]
        hit = np.nonzero(g["top_ids"][i] == nxt)[0]
        nll.append(-float(g["top_lp"][i][hit[0]]) if len(hit) else None)
    inside = [x for x in nll if x is not None]
    return len(inside), len(nll)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", default=os.path.join(HERE, "..", "..", "tests", "golden"))
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models")),
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--n-batch", default="1,64")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    ref = os.path.join(args.golden, "smollm2_logits_ref64.bin")
    if os.path.exists(ref):
        r = read_logits(ref)
        n_in, n_all = validate(r)
        print("ok: smollm2_logits_ref64.bin n_eval=%d flags=%d; next token in top-%d at %d/%d positions"
              % (r["n_eval"], r["flags"], r["k"], n_in, n_all))
    g = read_logits(os.path.join(args.golden, "smollm2_logits.bin"))
    n_in, n_all = validate(g)
    print("ok: n_vocab=%d n_text=%d n_eval=%d k=%d n_ctx=%d flags=%d; next token in top-%d at %d/%d positions"
          % (g["n_vocab"], g["n_text"], g["n_eval"], g["k"], g["n_ctx"], g["flags"], g["k"], n_in, n_all))
    with open(os.path.join(args.golden, "SHA256SUMS")) as f:
        for line in f:
            h, name = line.split()
            with open(os.path.join(args.golden, name), "rb") as ff:
                assert hashlib.sha256(ff.read()).hexdigest() == h, name
    print("SHA256SUMS ok")
    try:
        from llama_cpp import Llama
    except ImportError:
        print("llama-cpp-python not installed: drift check skipped")
        return
    ids = [int(t) for t in g["text_ids"][: g["n_eval"]]]
    for nb in [int(x) for x in args.n_batch.split(",") if x]:
        llm = Llama(model_path=args.model, n_ctx=g["n_ctx"], n_batch=nb, n_ubatch=nb,
                    n_threads=args.threads, n_threads_batch=args.threads, logits_all=True,
                    flash_attn=False, verbose=False)
        llm.eval(ids)
        sc = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
        lse = np.logaddexp.reduce(sc, axis=1)
        lp = sc - lse[:, None]
        got = np.take_along_axis(lp, g["top_ids"].astype(np.int64), axis=1)
        d = np.abs(got - g["top_lp"])
        top1 = np.mean(np.argmax(sc, axis=1) == g["top_ids"][:, 0])
        # KL(golden top-k + rest || new) restricted to the stored support (rest lumped)
        p = np.exp(g["top_lp"].astype(np.float64))
        q_rest = np.log1p(-np.minimum(np.exp(got).sum(axis=1), 1 - 1e-12))
        kl = (p * (g["top_lp"] - got)).sum(axis=1) + np.exp(g["log_rest"]) * (g["log_rest"] - q_rest)
        print("n_batch=%d threads=%d: max|dlogp| top-32 %.5f, mean %.6f, top-1 agree %.4f, "
              "KL mean %.2e max %.2e" % (nb, args.threads, d.max(), d.mean(), top1, kl.mean(), kl.max()))
        del llm


if __name__ == "__main__":
    sys.exit(main())
