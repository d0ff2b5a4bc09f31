"""Python binding overhead on encode: Codec.encode of N vectors (default 1,000,000 of d = 128 at
4 bits, turboquant_mse) against the C library's own encode of the same vectors (vq_codec_encode
called directly through ctypes on the same buffers, no Python work around it), and the CLI's
`veloxquant bench` encode rate on its synthetic keys for reference. Medians of repeats; prints
the ratio Codec.encode / direct C call. Run with the package installed (make test-python builds
a venv): build/venv/bin/python bench/python_encode.py [N] [repeats]."""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import veloxquant as vq
from veloxquant import _lib as L


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    d, method, bits = 128, "turboquant_mse", 4
    x = np.random.default_rng(42).standard_normal((n, d)).astype(np.float32)
    codec = vq.Codec(method, bits, head_dim=d)
    out = np.empty(codec.nbytes_for(n), dtype=np.uint8)
    t_py, t_c = [], []
    for _ in range(reps):  # alternated, so both see the same machine state
        t0 = time.perf_counter()
        codec.encode(x)
        t_py.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        st = L.codec_encode(codec._c, x.ctypes.data_as(L.c_float_p), n, out.ctypes.data)
        t_c.append(time.perf_counter() - t0)
        assert st == 0
    py, c = statistics.median(t_py), statistics.median(t_c)
    print(f"encode {n} x {d} {method}-{bits}: Codec.encode {py * 1e3:.1f} ms, direct C call "
          f"{c * 1e3:.1f} ms, ratio {py / c:.3f} (medians of {reps})")
    cli = os.environ.get("VQ_CLI", os.path.join(os.path.dirname(__file__), "..", "build",
                                                "veloxquant"))
    if os.access(cli, os.X_OK):
        r = json.loads(subprocess.check_output(
            [cli, "bench", "--method", method, "--bits", str(bits), "--head_dim", str(d),
             "--seq_len", "100000", "--repeats", str(reps), "--json"],
            stderr=subprocess.DEVNULL))
        ms = r["rows"][0]["encode_ms"]
        print(f"veloxquant bench: encode of 100000 synthetic keys {ms:.1f} ms "
              f"({ms * n / 100000:.0f} ms scaled to {n}; includes the cache append)")


if __name__ == "__main__":
    main()
