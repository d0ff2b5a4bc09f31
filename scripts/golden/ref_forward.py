#!/usr/bin/env python3
"""Independent NumPy float64 forward pass of a llama-architecture GGUF (F32/F16/Q4_0/Q4_1/Q8_0
weights), used to judge how close llama.cpp's own logits (tests/golden/smollm2_logits.bin) are
to exact arithmetic on the dequantized weights.

  python3 scripts/golden/ref_forward.py [--model PATH] [--n 256] [--kv f64|f16]

Compares against smollm2_logits.bin (batch path) and against llama.cpp evaluated with
n_batch = 1 (the single-token decode path) when llama-cpp-python is installed.
--write tests/golden/smollm2_logits_ref64.bin --n 1024 produces the committed float64 reference
(same format, flags bit 1 set). K and V are rounded to fp16 (--kv f16, default) like an fp16 KV cache.
Slow-ish (float64, ~1 s per 10 positions per core); not run by CI.
"""
import argparse
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_golden import read_logits, write_logits, write_manifest  # noqa: E402


class Gguf:
    """Minimal GGUF v2/v3 reader: metadata dict and tensor (name -> (dims, type, offset))."""

    def __init__(self, path):
        self.f = open(path, "rb")
        self.buf = self.f.read()
        self.pos = 0
        assert self.buf[:4] == b"GGUF"
        self.pos = 4
        self.version = self._r("I")
        nt, nkv = self._r("Q"), self._r("Q")
        self.meta = {}
        for _ in range(nkv):
            k = self._s()
            t = self._r("I")
            self.meta[k] = self._v(t)
        self.tensors = {}
        for _ in range(nt):
            name = self._s()
            nd = self._r("I")
            dims = [self._r("Q") for _ in range(nd)]
            typ = self._r("I")
            off = self._r("Q")
            self.tensors[name] = (dims, typ, off)
        align = self.meta.get("general.alignment", 32)
        self.data = (self.pos + align - 1) // align * align

    def _r(self, fmt):
        v = struct.unpack_from("<" + fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return v

    def _s(self):
        n = self._r("Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def _v(self, t):
        scal = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t == 8:
            return self._s()
        if t == 9:
            at, n = self._r("I"), self._r("Q")
            return [self._v(at) for _ in range(n)]
        return self._r(scal[t])

    def tensor(self, name):
        """Dequantized float64 array with numpy shape reversed from GGUF dims ([rows, cols])."""
        dims, typ, off = self.tensors[name]
        n = int(np.prod(dims))
        base = self.data + off
        if typ == 0:
            x = np.frombuffer(self.buf, "<f4", n, base).astype(np.float64)
        elif typ == 1:
            x = np.frombuffer(self.buf, "<f2", n, base).astype(np.float64)
        elif typ in (2, 3, 8):
            nb = n // 32
            if typ == 2:    # Q4_0: d f16, 16 bytes nibbles; x = d*(q-8)
                b = np.frombuffer(self.buf, np.dtype([("d", "<f2"), ("qs", "u1", 16)]), nb, base)
            elif typ == 3:  # Q4_1: d f16, m f16, 16 bytes nibbles; x = d*q + m
                b = np.frombuffer(self.buf, np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)]), nb, base)
            else:           # Q8_0: d f16, 32 int8; x = d*q
                b = np.frombuffer(self.buf, np.dtype([("d", "<f2"), ("qs", "i1", 32)]), nb, base)
            d = b["d"].astype(np.float64)[:, None]
            if typ == 8:
                x = d * b["qs"].astype(np.float64)
            else:
                qs = b["qs"]
                q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float64)
                x = d * (q - 8) if typ == 2 else d * q + b["m"].astype(np.float64)[:, None]
            x = x.reshape(-1)
        else:
            raise NotImplementedError("tensor type %d" % typ)
        return x.reshape(list(reversed(dims)))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, ndim):
    """llama.cpp 'normal' RoPE (mode 0): rotates adjacent pairs (2i, 2i+1). x: [T, H, D]."""
    d = np.arange(0, ndim, 2, dtype=np.float64)
    theta = pos[:, None] * base ** (-d / ndim)  # [T, ndim/2]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    x = x.copy()
    x0, x1 = x[..., 0:ndim:2].copy(), x[..., 1:ndim:2].copy()
    x[..., 0:ndim:2] = x0 * c - x1 * s
    x[..., 1:ndim:2] = x0 * s + x1 * c
    return x


def forward(g, ids, kv="f64", dtype=np.float64):
    """Log-probs [T, n_vocab] (float64) of the next token after each of ids; compute in dtype."""
    dt = np.dtype(dtype)

    def W(name):
        return g.tensor(name).astype(dt, copy=False)

    a = g.meta["general.architecture"]
    L = g.meta[a + ".block_count"]
    nh = g.meta[a + ".attention.head_count"]
    nkv = g.meta[a + ".attention.head_count_kv"]
    eps = g.meta[a + ".attention.layer_norm_rms_epsilon"]
    base = g.meta.get(a + ".rope.freq_base", 10000.0)
    emb = W("token_embd.weight")
    E = emb.shape[1]
    hd = E // nh
    ndim = g.meta.get(a + ".rope.dimension_count", hd)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = emb[np.asarray(ids)]
    mask = np.triu(np.full((T, T), -np.inf, dtype=dt), 1)
    for layer in range(L):
        p = "blk.%d." % layer
        h = rmsnorm(x, W(p + "attn_norm.weight"), eps)
        q = (h @ W(p + "attn_q.weight").T).reshape(T, nh, hd)
        k = (h @ W(p + "attn_k.weight").T).reshape(T, nkv, hd)
        v = (h @ W(p + "attn_v.weight").T).reshape(T, nkv, hd)
        q, k = rope(q, pos, base, ndim).astype(dt), rope(k, pos, base, ndim).astype(dt)
        if kv == "f16":
            k = k.astype(np.float16).astype(dt)
            v = v.astype(np.float16).astype(dt)
        out = np.empty((T, nh, hd), dtype=dt)
        for hh in range(nh):
            kh = hh // (nh // nkv)
            s = q[:, hh, :] @ k[:, kh, :].T * dt.type(1 / np.sqrt(hd)) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, hh, :] = s @ v[:, kh, :]
        x = x + out.reshape(T, E) @ W(p + "attn_output.weight").T
        h = rmsnorm(x, W(p + "ffn_norm.weight"), eps)
        gt = h @ W(p + "ffn_gate.weight").T
        up = h @ W(p + "ffn_up.weight").T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ W(p + "ffn_down.weight").T
    h = rmsnorm(x, W("output_norm.weight"), eps)
    outw = W("output.weight") if "output.weight" in g.tensors else emb
    lp = np.empty((T, outw.shape[0]))
    for i in range(0, T, 128):  # chunked to bound memory
        z = (h[i:i + 128] @ outw.T).astype(np.float64)
        lp[i:i + 128] = z - np.logaddexp.reduce(z, axis=1)[:, None]
    return lp


def compare(name, lp_full, gold, n, against="golden"):
    got = np.take_along_axis(lp_full, gold["top_ids"][:n].astype(np.int64), axis=1)
    d = np.abs(got - gold["top_lp"][:n])
    top1 = np.mean(np.argmax(lp_full, axis=1) == gold["top_ids"][:n, 0])
    print("%-26s vs %-7s: mean|dlogp| top-32 %.5f  max %.4f  top-1 agree %.4f"
          % (name, against, d.mean(), d.max(), top1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models")),
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--golden", default=os.path.join(HERE, "..", "..", "tests", "golden"))
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--kv", default="f16", choices=["f64", "f16"])
    ap.add_argument("--write", metavar="FILE",
                    help="also write the reference in the smollm2_logits.bin format (flags bit 1 set)")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                    help="compute precision (float32: check how far fp32 arithmetic is from ref64)")
    ap.add_argument("--ref64", action="store_true",
                    help="also compare with the committed smollm2_logits_ref64.bin")
    ap.add_argument("--no-llama", action="store_true", help="skip the llama.cpp comparison")
    args = ap.parse_args()
    gold = read_logits(os.path.join(args.golden, "smollm2_logits.bin"))
    n = min(args.n, gold["n_eval"])
    ids = [int(t) for t in gold["text_ids"][:n]]
    g = Gguf(args.model)
    ref = forward(g, ids, args.kv, np.dtype(args.dtype))
    compare("numpy %s (kv %s)" % (args.dtype, args.kv), ref, gold, n)
    if args.ref64:
        compare("numpy %s (kv %s)" % (args.dtype, args.kv), ref,
                read_logits(os.path.join(args.golden, "smollm2_logits_ref64.bin")), n, "ref64")
    nll = -ref[np.arange(n - 1), np.asarray(ids[1:])]
    print("numpy perplexity over %d predictions: %.4f" % (n - 1, float(np.exp(nll.mean()))))
    if args.write:
        write_logits(args.write, gold["text_ids"], ref, gold["n_ctx"], gold["flags"] | 2)
        print("wrote", args.write)
        if os.path.abspath(os.path.dirname(args.write)) == os.path.abspath(args.golden):
            write_manifest(args.golden)
    if args.no_llama:
        return
    try:
        from llama_cpp import Llama
    except ImportError:
        return
    for nb in (1, 512):
        llm = Llama(model_path=args.model, n_ctx=1024, n_batch=nb, n_ubatch=nb, n_threads=2,
                    logits_all=True, flash_attn=False, verbose=False)
        llm.eval(ids)
        sc = np.asarray(llm.scores[:n], dtype=np.float64)
        lp = sc - np.logaddexp.reduce(sc, axis=1)[:, None]
        d = np.abs(lp - ref)
        top = np.argsort(-ref, axis=1)[:, :32]
        dt = np.take_along_axis(d, top, axis=1)
        kl = (np.exp(ref) * (ref - lp)).sum(axis=1)
        print("llama.cpp n_batch=%-3d vs numpy f64: mean|dlogp| top-32 %.5f  max %.4f  KL mean %.2e max %.2e  "
              "top-1 agree %.4f" % (nb, dt.mean(), dt.max(), kl.mean(), kl.max(),
                                    np.mean(np.argmax(lp, 1) == np.argmax(ref, 1))))
        del llm


if __name__ == "__main__":
    main()
