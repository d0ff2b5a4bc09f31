"""The package against the library and the CLI: methods and presets are the library's, codecs
round-trip with the stated sizes and score from their codes, the cache attends as a NumPy
softmax over its decoded keys and values, and errors are the documented exceptions."""
import json
import subprocess

import numpy as np
import pytest

import veloxquant as vq


def test_cpu_names_the_kernels():
    line = vq.cpu()
    assert "; kernels: " in line and line.split("; kernels: ")[1].split()[0] in (
        "scalar", "avx2", "avx512"), line


def test_methods_match_cli(cli):
    ours = {m["name"]: m for m in vq.methods()}
    theirs = json.loads(subprocess.check_output([cli, "methods", "--json"]))
    for m in theirs:
        if m["name"] not in ours:  # the cache modifiers and the presets, listed after them
            assert m["name"].startswith("kv") or m["params"].startswith("modifier:"), m["name"]
            continue
        o = ours[m["name"]]
        for k in ("needs_calibration", "implemented", "default_bits", "min_bits", "max_bits"):
            if k in m:
                assert o[k] == m[k], (m["name"], k)
        assert o["bits_per_elem"] == m["bits_per_elem"]


def test_presets_match_cli(cli):
    names = [ln.split()[0] for ln in
             subprocess.check_output([cli, "methods", "--configs"], text=True).splitlines()]
    assert [p["name"] for p in vq.presets()] == names
    assert [p["name"] for p in vq.presets() if p["tier"]] == ["kv8", "kv5", "kv4", "kv3", "kv2"]


CODECS = [("turboquant_mse", 4), ("turboquant_mse", 2), ("turboquant_prod", 3), ("qjl", None),
          ("polar", None), ("turboquant_rvq", 2), ("kivi", 4), ("int8", None), ("fp16", None)]


@pytest.mark.parametrize("method,bits", CODECS)
def test_codec_round_trip(method, bits):
    rng = np.random.default_rng(3)
    c = vq.Codec(method, bits, head_dim=128)
    n = 4 * c.block_tokens * (1 if c.block_tokens > 1 else 64)
    x = rng.standard_normal((n, 128)).astype(np.float32)
    codes = c.encode(x)
    assert codes.nbytes == n // c.block_tokens * c.block_bytes
    assert codes.nbytes * 8 == pytest.approx(c.bits_per_elem * n * 128)
    y = c.decode(codes)
    assert y.shape == x.shape and y.dtype == np.float32
    cos = np.sum(x * y, 1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
    floor = {"fp16": 0.9999, "int8": 0.999, "qjl": 0.0}.get(method, 0.85)
    assert cos.mean() > floor, cos.mean()
    # scores straight from the codes: the inner products with the decoded vectors
    q = rng.standard_normal((3, 128)).astype(np.float32)
    s = c.scores(q, codes)
    assert s.shape == (3, n)
    if method not in ("qjl", "turboquant_prod"):  # unbiased estimators are not q . decode
        ref = q @ y.T
        assert np.abs(s - ref).max() <= 1e-3 * np.abs(ref).max() + 1e-4
    assert np.array_equal(c.scores(q[0], codes), s[0])


def test_codec_inputs():
    c = vq.Codec("turboquant_mse", 4, head_dim=64)
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    a = c.decode(c.encode(x))
    assert np.array_equal(c.decode(c.encode(x.astype(np.float16).astype(np.float32))),
                          c.decode(c.encode(x.astype(np.float16))))
    bf = (x.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits (truncated)
    xb = (bf.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(c.decode(c.encode(bf)), c.decode(c.encode(xb)))
    assert np.array_equal(c.decode(c.encode(np.asfortranarray(x))), a)  # copied once
    with pytest.raises(ValueError):
        c.encode(x[:, :32])
    with pytest.raises(ValueError):
        c.encode(x.astype(np.int32))
    with pytest.raises(vq.NonFiniteError):
        bad = x.copy()
        bad[3, 5] = np.nan
        c.encode(bad)
    k = vq.Codec("kivi", 2, head_dim=64)
    with pytest.raises(ValueError, match="multiple"):
        k.encode(x[:7])


def test_codec_names():
    assert vq.config_name("kivi", 4, group_size=64, residual_length=0) == "kivi-4+g64+res0"
    c = vq.Codec("kv4", head_dim=64, role="value")
    assert "turboquant_mse" in repr(c) or c.bits_per_elem > 4
    with pytest.raises(vq.InvalidArgumentError, match="did you mean kv4"):
        vq.Codec("kv44")
    with pytest.raises(vq.InvalidArgumentError, match="fixed width"):
        vq.Codec("polar", 7)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        vq.Codec("turboquant_mse", 9)
    with pytest.raises(vq.InvalidArgumentError):
        vq.Codec("kivi", 2, colour=3)


def softmax_attention(q, k, v, scale, causal=True):
    """NumPy reference: q (nq, nh, d), k/v (n, nkv, d); query i at position n - nq + i."""
    nq, nh, d = q.shape
    n, nkv, _ = k.shape
    g = nh // nkv
    out = np.zeros_like(q, dtype=np.float64)
    for i in range(nq):
        last = n - nq + i if causal else n - 1
        for h in range(nh):
            s = k[: last + 1, h // g] @ q[i, h].astype(np.float64) * scale
            w = np.exp(s - s.max())
            w /= w.sum()
            out[i, h] = w @ v[: last + 1, h // g]
    return out


@pytest.mark.parametrize("kv", ["fp16", "kv4", "turboquant_mse-3", "kivi-2"])
def test_cache_attention_matches_numpy(kv):
    rng = np.random.default_rng(5)
    cache = vq.Cache(2, 2, 64, kv=kv, max_tokens=512)
    k = rng.standard_normal((200, 2, 64)).astype(np.float32)
    v = rng.standard_normal((200, 2, 64)).astype(np.float32)
    q = rng.standard_normal((5, 6, 64)).astype(np.float32)  # GQA: 3 query heads per kv head
    cache.observe_queries(1, q)
    cache.append(1, k[:150], v[:150])
    cache.append(1, k[150:], v[150:])
    assert cache.n_tokens(1) == 200 and cache.n_tokens(0) == 0
    kd, vd = cache.read(1)
    assert kd.shape == (200, 2, 64)
    for causal in (True, False):
        out = cache.attend(1, q, causal=causal)
        ref = softmax_attention(q, kd, vd, 1 / 8, causal)
        tol = 2e-3 if kv == "fp16" else 1e-4  # fp16: llama.cpp rounds q and the weights
        assert np.abs(out - ref).max() <= tol * max(1.0, np.abs(ref).max()), kv
    m = cache.memory()
    assert cache.nbytes == m["total_bytes"] > 0
    if kv != "fp16":
        assert m["total_bytes"] < m["fp16_bytes"]
    cache.reset()
    assert cache.n_tokens(1) == 0


def test_cache_errors():
    c = vq.Cache(1, 2, 64, kv="kv4", max_tokens=64)
    k = np.zeros((65, 2, 64), dtype=np.float32)
    with pytest.raises(vq.CapacityError):
        c.append(0, k, k)
    with pytest.raises(ValueError):
        c.append(0, k[:, :1], k[:, :1])
    with pytest.raises(ValueError):
        c.append(3, k[:4], k[:4])
    with pytest.raises(ValueError):
        c.attend(0, np.zeros((1, 3, 64), dtype=np.float32))  # 3 heads, 2 kv heads
    with pytest.raises(vq.InvalidArgumentError, match="did you mean"):
        vq.Cache(1, 1, 64, kv="kv33")
    c2 = vq.Cache(1, 1, 64, key="turboquant_mse-4", value="kivi-2")
    assert c2.kv == "turboquant_mse-4:kivi-2"


def _bench_cos(x, y):
    """bench's mean cosine (tools/veloxquant/cmd_bench.c rows_cos): float products summed in
    double in index order (np.cumsum is sequential), rows in order, 0 for a zero row."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    xy = np.cumsum(x * y, axis=1)[:, -1]
    nx = np.sqrt(np.cumsum(x * x, axis=1)[:, -1])
    ny = np.sqrt(np.cumsum(y * y, axis=1)[:, -1])
    ok = (nx > 0) & (ny > 0)
    per = np.where(ok, xy / np.where(ok, nx * ny, 1.0), 0.0)
    return float(np.cumsum(per)[-1] / len(per))


BENCH = [("turboquant_mse", 4), ("turboquant_mse", 2), ("turboquant_prod", 3), ("kivi", 2),
         ("polar", None), ("int8", None)]


@pytest.mark.parametrize("method,bits", BENCH)
def test_codec_cosine_equals_bench(cli, method, bits):
    """The cosine of decode(encode(x)) on bench's own synthetic vectors (the library's vq_synth,
    drawn in bench's order by vq.bench_data) equals `veloxquant bench --json`'s cosine_k and
    cosine_v for the same seed and shape (cJSON prints within one ulp: rel 1e-14)."""
    T, d, seed = 600, 128, 7
    cmd = [cli, "bench", "--method", method, "--seq-len", str(T), "--head-dim", str(d), "--seed",
           str(seed), "--repeats", "1", "--json"]
    if bits is not None:
        cmd += ["--bits", str(bits)]
    row = json.loads(subprocess.check_output(cmd, stderr=subprocess.DEVNULL))["rows"][0]
    k, v, _ = vq.bench_data(T, d, seed=seed)
    for role, x, want in (("key", k[:, 0], row["cosine_k"]), ("value", v[:, 0], row["cosine_v"])):
        c = vq.Codec(method, bits, head_dim=d, role=role)
        n = min(T, 2048) // c.block_tokens * c.block_tokens
        got = _bench_cos(x[:n], c.decode(c.encode(x[:n])))
        assert got == pytest.approx(want, rel=1e-14, abs=0), (method, bits, role, got, want)


def test_synth_is_the_library_stream():
    """Synth draws one stream: keys then values continue where the previous call stopped, the
    keys carry the +4 outlier channels, and a seed repeats its data."""
    a = vq.Synth(3)
    k, v = a.keys(4, 16), a.normal(4, 16)
    b = vq.Synth(3)
    both = b.normal(8 * 16)
    assert np.array_equal(v.ravel(), both[64:])
    out = np.tile(np.arange(16) % 4 == 3, 4)  # the outlier channels of d = 16
    assert np.array_equal(k.ravel()[~out], both[:64][~out])
    assert np.allclose(k.ravel()[out] - both[:64][out], 4.0, atol=1e-5)
    k2, v2, q2 = vq.bench_data(5, 16, seed=9)
    k3, v3, q3 = vq.bench_data(5, 16, seed=9)
    assert k2.shape == v2.shape == (5, 1, 16) and q2.shape == (1, 16)
    assert np.array_equal(k2, k3) and np.array_equal(v2, v3) and not np.array_equal(v2, q2[0])
