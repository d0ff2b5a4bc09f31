"""Compares three KV codecs on keys recorded from a real model: runs a prompt through the
default model with an exact fp32 cache, reads every layer's post-RoPE keys, encodes them with
each codec and prints bits/elem, reconstruction cosine and the relative error of q.k scores
computed straight from the codes (queries: the recorded keys themselves, a stand-in with the
keys' channel structure).

    python compare_codecs.py [MODEL.gguf]   (default: $VQ_MODELS or ~/.cache/veloxquant/models)
"""
import os
import sys

import numpy as np

import veloxquant as vq

CODECS = [("turboquant_mse", 4), ("kivi", 4), ("turboquant_mse", 2)]
TEXT = ("The history of astronomy is the story of how people came to understand the sky: the "
        "motions of the sun, the moon and the planets, the nature of the stars, and finally the "
        "size and age of the universe itself. Early observers kept careful records of eclipses.")


def main():
    d = os.environ.get("VQ_MODELS") or os.path.expanduser("~/.cache/veloxquant/models")
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
    with vq.Model(path, kv="fp32", n_ctx=512, threads=0) as m:
        m.generate(TEXT, max_tokens=1)
        info = m.info
        keys = [m.read_kv(layer)[0] for layer in range(info["n_layers"])]
    hd = info["head_dim"]
    print(f"{info['name'] or path}: {info['n_layers']} layers, {len(keys[0])} tokens, "
          f"head_dim {hd}")
    print(f"{'codec':<22} {'bits/elem':>9} {'cosine':>8} {'score rel. err':>15}")
    for method, bits in CODECS:
        c = vq.Codec(method, bits, head_dim=hd, group_size=32) if method == "kivi" else \
            vq.Codec(method, bits, head_dim=hd)
        cos, err = [], []
        for k in keys:
            x = k.transpose(1, 0, 2).reshape(-1, hd)  # (heads * tokens, head_dim)
            x = x[: len(x) // c.block_tokens * c.block_tokens]
            codes = c.encode(x)
            y = c.decode(codes)
            cos.append(np.mean(np.sum(x * y, 1) / (np.linalg.norm(x, axis=1) *
                                                   np.linalg.norm(y, axis=1) + 1e-30)))
            q = x[:: max(1, len(x) // 8)][:8]
            s, ref = c.scores(q, codes), q @ x.T
            err.append(np.linalg.norm(s - ref) / np.linalg.norm(ref))
        print(f"{c.name:<22} {c.bits_per_elem:>9.3f} {np.mean(cos):>8.4f} {np.mean(err):>15.4f}")


if __name__ == "__main__":
    main()
