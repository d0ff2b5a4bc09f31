"""Methods, named configs, codecs and the compressed KV cache."""
import ctypes as C

import numpy as np

from . import _lib as L
from .errors import InvalidArgumentError, raise_for

_KEY, _VALUE = 0, 1
_F32 = 0


def _status_msg(st, what):
    return f"{what}: {L.status_str(st).decode()}"


def version():
    """The library version string ("MAJOR.MINOR.PATCH")."""
    return L.version().decode()


def cpu():
    """This machine as the library sees it, one line: the CPU's brand, family and model and the
    kernel variant it runs ("...; kernels: avx512 (vnni, vbmi)"; $VQ_ISA forces one)."""
    n = L.cpu_describe(None, 0)
    buf = C.create_string_buffer(n + 1)
    L.cpu_describe(buf, n + 1)
    return buf.value.decode()


def methods():
    """Every KV-cache method of the library: a list of dicts with name, params, bits_per_elem
    (the formula, d = head_dim), needs_calibration, implemented, and for built methods
    default_bits, min_bits, max_bits (and frac_bits where a half width exists) — the data of
    `veloxquant methods --json`."""
    out = []
    m = 0
    info = L.MethodInfo()
    while L.method_info_get(m, C.byref(info)) == 0:
        d = {"name": info.name.decode(), "params": (info.params or b"").decode(),
             "bits_per_elem": (info.bits_formula or b"").decode(),
             "needs_calibration": bool(info.needs_calibration),
             "implemented": bool(info.implemented)}
        if info.default_bits:
            d.update(default_bits=info.default_bits, min_bits=info.min_bits,
                     max_bits=info.max_bits)
            if info.frac_bits > 0:
                d["frac_bits"] = info.frac_bits
        out.append(d)
        m += 1
    return out


def presets():
    """The library's named KV configs (what `--kv NAME` takes): a list of dicts with name, config
    (what it stands for in the config grammar), description, max_bits (the presets kv8..kv2:
    their bits/elem budget) and tier (True for kv8..kv2). fp16 (the baseline) comes first."""
    out = []
    info = L.PresetInfo()
    for i in range(L.preset_count()):
        if L.preset_get(i, C.byref(info)) != 0:
            break
        out.append({"name": info.name.decode(), "config": info.config.decode(),
                    "description": info.description.decode(), "max_bits": info.max_bits,
                    "tier": bool(info.tier)})
    return out


def check_kv_name(kv):
    """Parses a KV config name with the library's grammar (vq_kv_spec_parse); raises
    InvalidArgumentError with the library's reason ("did you mean ...") if it is not one."""
    spec = L.KvSpec()
    err = C.create_string_buffer(512)
    st = L.kv_spec_parse(kv.encode(), C.byref(spec), err, 512)
    raise_for(st, err.value.decode() or _status_msg(st, kv))
    return spec


def kv_bits_per_elem(kv, n_layers, n_kv_heads, head_dim, n_tokens):
    """Exact stored bits per element (keys and values together: codes, side data, windows,
    centering and scale vectors) of the KV config kv on a geometry after n_tokens tokens: the
    library's formula (vq_kv_spec_bits_per_elem, docs/FORMAT.md), the one `veloxquant methods`
    and estimate-memory print."""
    spec = check_kv_name(kv)
    bits = C.c_double(0)
    st = L.kv_spec_bits_per_elem(C.byref(spec), int(n_layers), int(n_kv_heads), int(head_dim),
                                 int(n_tokens), C.byref(bits))
    raise_for(st, _status_msg(st, f"bits per element of {kv}"))
    return bits.value


def kv_bytes(kv, n_layers, n_kv_heads, head_dim, n_tokens):
    """Exact bytes of a cache of config kv holding n_tokens tokens on a geometry (keys and
    values), from kv_bits_per_elem: what Cache.nbytes reports for the same tokens."""
    if n_tokens < 1:
        return 0
    elems = 2 * int(n_layers) * int(n_kv_heads) * int(head_dim) * int(n_tokens)
    return int(round(kv_bits_per_elem(kv, n_layers, n_kv_heads, head_dim, n_tokens) * elems / 8))


_SUFFIX = {"group_size": "g", "residual_length": "res", "n_sink_tokens": "sink", "jl_dim": "jl",
           "seed": "seed"}


def config_name(method, bits=None, **params):
    """The config-grammar name of a method, its width and codec options: config_name(
    "kivi", 4, group_size=64) == "kivi-4+g64". A name that already is a config ("kv4") passes
    through (with any options appended)."""
    name = method if bits is None else f"{method}-{bits:g}"
    for k, v in params.items():
        if k not in _SUFFIX:
            raise InvalidArgumentError(f"unknown codec option '{k}' (options: "
                                       f"{', '.join(sorted(_SUFFIX))})")
        name += f"+{_SUFFIX[k]}{int(v)}"
    return name


def _f32_rows(x, d, what):
    """x as a C-contiguous float32 (n, d) array: float32 C-contiguous input is used as is (no
    copy); float16, float64 or bfloat16 given as uint16 are converted once."""
    a = np.asarray(x)
    if a.dtype == np.uint16:  # bfloat16 bits
        a = (a.astype(np.uint32) << 16).view(np.float32)
    elif a.dtype not in (np.float32, np.float16, np.float64):
        raise ValueError(f"{what}: dtype {a.dtype} (want float32, float16, float64 or bfloat16 "
                         f"as uint16)")
    if a.ndim != 2 or a.shape[1] != d:
        raise ValueError(f"{what}: shape {a.shape} (want (n, {d}))")
    return np.ascontiguousarray(a, dtype=np.float32)


class Codes:
    """Encoded vectors: .data (uint8 bytes in the codec's block layout, docs/FORMAT.md),
    .n_tokens, .nbytes (exact bytes: blocks x block_bytes), .codec."""

    def __init__(self, codec, data, n_tokens):
        self.codec, self.data, self.n_tokens = codec, data, n_tokens

    @property
    def nbytes(self):
        return int(self.data.nbytes)

    def __len__(self):
        return self.n_tokens


class Codec:
    """One KV codec: Codec(method, bits=None, head_dim=128, role="key", **options).

    method is a method name ("turboquant_mse", "kivi", "qjl", ...) or any KV config name
    ("kv4", "turboquant_mse-3", "kivi-4:turboquant_mse-4"); role picks the config's key or value
    side. options: group_size, residual_length, n_sink_tokens, jl_dim, seed (the config
    grammar's +g, +res, +sink, +jl, +seed). Resolved by the library (vq_codec_create_kv), so a
    name means here what it means in the CLI. Thread-safe for concurrent encode/decode/scores."""

    def __init__(self, method, bits=None, head_dim=128, role="key", **options):
        if role not in ("key", "value"):
            raise ValueError(f"role '{role}' (want 'key' or 'value')")
        self.name = config_name(method, bits, **options)
        self.head_dim = int(head_dim)
        self.role = role
        err = C.create_string_buffer(512)
        st = C.c_int(0)
        self._c = L.codec_create_kv(self.name.encode(), _KEY if role == "key" else _VALUE,
                                    self.head_dim, err, 512, C.byref(st))
        if not self._c:
            raise_for(st.value, err.value.decode() or _status_msg(st.value, self.name))
        self.block_tokens = L.codec_block_tokens(self._c)
        self.block_bytes = L.codec_block_bytes(self._c)

    def __del__(self):
        if getattr(self, "_c", None):
            L.codec_free(self._c)
            self._c = None

    def __repr__(self):
        return f"Codec({self.name!r}, head_dim={self.head_dim}, role={self.role!r})"

    @property
    def bits_per_elem(self):
        """Stored bits per element of the codes (codes and side data, docs/FORMAT.md)."""
        return float(L.codec_bits_per_elem(self._c))

    def nbytes_for(self, n_tokens):
        """Exact bytes of n_tokens encoded vectors (a multiple of block_tokens)."""
        return n_tokens // self.block_tokens * self.block_bytes

    def encode(self, x):
        """Encodes x, an (n, head_dim) array (float32 is passed without a copy when
        C-contiguous; float16/float64/bfloat16-as-uint16 are converted once), n a multiple of
        block_tokens. Returns Codes."""
        a = _f32_rows(x, self.head_dim, "encode")
        n = a.shape[0]
        if n % self.block_tokens:
            raise ValueError(f"encode: {n} vectors, not a multiple of the codec's block of "
                             f"{self.block_tokens} tokens")
        out = np.empty(self.nbytes_for(n), dtype=np.uint8)
        st = L.codec_encode(self._c, a.ctypes.data_as(L.c_float_p), n, out.ctypes.data)
        raise_for(st, _status_msg(st, f"encode ({self.name})"))
        return Codes(self, out, n)

    def _check(self, codes):
        if not isinstance(codes, Codes) or codes.codec is not self:
            if not isinstance(codes, Codes) or codes.codec.name != self.name or \
                    codes.codec.head_dim != self.head_dim:
                raise ValueError("codes were not made by this codec")

    def decode(self, codes):
        """The (n, head_dim) float32 vectors the codes stand for (the reference decoder)."""
        self._check(codes)
        out = np.empty((codes.n_tokens, self.head_dim), dtype=np.float32)
        st = L.codec_decode(self._c, codes.data.ctypes.data, codes.n_tokens,
                            out.ctypes.data_as(L.c_float_p))
        raise_for(st, _status_msg(st, f"decode ({self.name})"))
        return out

    def scores(self, q, codes):
        """Inner products <q_i, x_t> estimated straight from the codes: q is (head_dim,) or
        (m, head_dim); returns (n,) or (m, n) float32 (no softmax scale)."""
        self._check(codes)
        qa = np.asarray(q, dtype=np.float32)
        one = qa.ndim == 1
        qa = _f32_rows(qa.reshape(1, -1) if one else qa, self.head_dim, "scores")
        qb = L.codec_query_bytes(self._c)
        buf = np.empty(qb + 64, dtype=np.uint8)
        qs = buf.ctypes.data + (-buf.ctypes.data % 64)  # 64-byte aligned prepared query
        out = np.empty((qa.shape[0], codes.n_tokens), dtype=np.float32)
        for i in range(qa.shape[0]):
            L.codec_prepare_query(self._c, qa[i].ctypes.data_as(L.c_float_p), qs)
            L.codec_score(self._c, qs, codes.data.ctypes.data, codes.n_tokens,
                          out[i].ctypes.data_as(L.c_float_p))
        return out[0] if one else out


class Cache:
    """A compressed KV cache: Cache(n_layers, n_kv_heads, head_dim, kv="kv4", max_tokens=4096,
    threads=0) or with key= / value= configs for each side ("turboquant_mse-4", "kivi-2").

    append(layer, k, v) takes (n, n_kv_heads, head_dim) keys and values (post-RoPE), attend(
    layer, q) runs attention on the codes for (n_q, n_heads, head_dim) queries (n_heads a
    multiple of n_kv_heads: GQA), causal over the last n_q positions. One caller at a time."""

    def __init__(self, n_layers, n_kv_heads, head_dim, kv=None, key=None, value=None,
                 max_tokens=4096, threads=0):
        if kv is None:
            kv = "fp16" if key is None and value is None else \
                f"{key or 'fp16'}:{value or 'fp16'}"
        elif key is not None or value is not None:
            raise ValueError("give kv= or key=/value=, not both")
        self.kv = kv
        self.n_layers, self.n_kv_heads, self.head_dim = int(n_layers), int(n_kv_heads), \
            int(head_dim)
        self.max_tokens = int(max_tokens)
        err = C.create_string_buffer(512)
        st = C.c_int(0)
        self._c = L.cache_create_kv(kv.encode(), self.n_layers, self.n_kv_heads, self.head_dim,
                                    self.max_tokens, int(threads), err, 512, C.byref(st))
        if not self._c:
            raise_for(st.value, err.value.decode() or _status_msg(st.value, kv))
        self._observed = set()

    def __del__(self):
        if getattr(self, "_c", None):
            L.cache_free(self._c)
            self._c = None

    def __repr__(self):
        return (f"Cache({self.n_layers}, {self.n_kv_heads}, {self.head_dim}, kv={self.kv!r}, "
                f"max_tokens={self.max_tokens})")

    def _layer(self, layer):
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer {layer} (the cache has {self.n_layers})")

    def _rows(self, x, heads, what):
        a = np.asarray(x)
        if a.dtype not in (np.float32, np.float16, np.float64):
            raise ValueError(f"{what}: dtype {a.dtype} (want float32, float16 or float64)")
        if a.ndim != 3 or a.shape[2] != self.head_dim or (heads and a.shape[1] != heads):
            raise ValueError(f"{what}: shape {a.shape} (want (n, {heads or 'n_heads'}, "
                             f"{self.head_dim}))")
        return np.ascontiguousarray(a, dtype=np.float32)

    def observe_queries(self, layer, q):
        """Shows layer the queries (n_q, n_heads, head_dim) of a batch before the batch is
        appended: configs whose key widths or scales learn from the queries (kv5..kv2) use
        them at the first append (attend() of the first batch does this for you when the
        queries are known; call it yourself before append() otherwise)."""
        self._layer(layer)
        qa = self._rows(q, 0, "observe_queries")
        st = L.cache_observe_queries(self._c, layer, qa.ctypes.data_as(L.c_float_p),
                                     qa.shape[1], qa.shape[0])
        raise_for(st, _status_msg(st, "observe_queries"))
        self._observed.add(layer)

    def append(self, layer, k, v):
        """Appends n tokens' keys and values, each (n, n_kv_heads, head_dim)."""
        self._layer(layer)
        ka = self._rows(k, self.n_kv_heads, "append k")
        va = self._rows(v, self.n_kv_heads, "append v")
        if ka.shape != va.shape:
            raise ValueError(f"append: k {ka.shape} and v {va.shape} differ")
        st = L.cache_append(self._c, layer, ka.ctypes.data, va.ctypes.data, _F32, ka.shape[0])
        raise_for(st, _status_msg(st, f"append to layer {layer}"))

    def attend(self, layer, q, scale=None, causal=True):
        """Attention of queries q (n_q, n_heads, head_dim) over the layer's tokens, computed on
        the stored codes: query i sits at position n_tokens - n_q + i and sees tokens up to it
        (causal=True) or every token (causal=False). scale defaults to 1/sqrt(head_dim).
        Returns (n_q, n_heads, head_dim) float32."""
        self._layer(layer)
        qa = self._rows(q, 0, "attend q")
        nq, nh = qa.shape[0], qa.shape[1]
        if nh % self.n_kv_heads:
            raise ValueError(f"attend: {nh} query heads, not a multiple of {self.n_kv_heads}")
        n = self.n_tokens(layer)
        if nq > n:
            raise ValueError(f"attend: {nq} queries but the layer holds {n} tokens")
        pos = None
        if not causal:
            pos = np.full(nq, n - 1, dtype=np.int64)
        out = np.empty_like(qa)
        sc = float(scale) if scale is not None else 1.0 / float(np.sqrt(self.head_dim))
        st = L.cache_attend(self._c, layer, qa.ctypes.data_as(L.c_float_p), nh, nq,
                            pos.ctypes.data_as(L.c_int64_p) if pos is not None else None, sc,
                            out.ctypes.data_as(L.c_float_p))
        raise_for(st, _status_msg(st, f"attend on layer {layer}"))
        return out

    def n_tokens(self, layer=0):
        """Positions appended to a layer so far."""
        self._layer(layer)
        return int(L.cache_n_tokens(self._c, layer))

    def read(self, layer):
        """The layer's keys and values decoded to float32: two (n, n_kv_heads, head_dim)
        arrays (codes through the reference decoders; fp16 windows and sinks as stored)."""
        self._layer(layer)
        n = self.n_tokens(layer)
        k = np.empty((self.n_kv_heads, n, self.head_dim), dtype=np.float32)
        v = np.empty_like(k)
        for h in range(self.n_kv_heads):
            st = L.cache_read(self._c, layer, h, k[h].ctypes.data_as(L.c_float_p),
                              v[h].ctypes.data_as(L.c_float_p))
            raise_for(st, _status_msg(st, f"read layer {layer}"))
        return k.transpose(1, 0, 2).copy(), v.transpose(1, 0, 2).copy()

    def memory(self):
        """Exact byte counts now (dict of struct vq_cache_memory: total_bytes, fp16_bytes,
        key_bytes, value_bytes, window_bytes, ...)."""
        m = L.CacheMemory()
        L.cache_memory(self._c, C.byref(m))
        return {n: int(getattr(m, n)) for n, _ in L.CacheMemory._fields_}

    @property
    def nbytes(self):
        """Bytes the cache holds for its tokens (codes, side data, fp16 windows)."""
        return self.memory()["total_bytes"]

    def reset(self):
        """Forgets every token."""
        L.cache_reset(self._c)


class Synth:
    """The library's synthetic-vector generator (vq_synth, veloxquant.h), the data every number
    of `veloxquant bench` is measured on: Synth(seed) then draws in order, so that the same calls
    give the same float32 arrays as the C benchmark, bit for bit. Not thread-safe (one stream)."""

    def __init__(self, seed=42):
        self._g = L.Synth()
        L.synth_seed(C.byref(self._g), int(seed) & (2 ** 64 - 1))

    def normal(self, *shape):
        """A float32 array of the given shape, i.i.d. N(0, 1) in C order."""
        out = np.empty(shape, dtype=np.float32)
        L.synth_normal(C.byref(self._g), out.ctypes.data_as(L.c_float_p), out.size)
        return out

    def keys(self, n, d):
        """(n, d) float32 synthetic keys: N(0, 1) plus 4.0 on the channels j % max(d // 4, 1)
        == 3 (channel-aligned outliers, as real keys have)."""
        out = np.empty((int(n), int(d)), dtype=np.float32)
        L.synth_keys(C.byref(self._g), out.ctypes.data_as(L.c_float_p), out.shape[0], out.shape[1])
        return out


def bench_data(seq_len, head_dim=128, seed=42, kv_heads=1):
    """The keys, values and queries `veloxquant bench --seq-len T --head-dim D --seed S
    --kv-heads H` draws (docs/BENCHMARK.md): keys and values (T, H, D), queries (H, D), from the
    library's generator in the benchmark's order. bench's cosine_k / cosine_v are the mean
    cosines between the first min(T, 2048) rows of keys[:, 0] / values[:, 0] (H = 1), rounded
    down to the codec's block, and their decoded codes."""
    g = Synth(seed)
    t, h, d = int(seq_len), int(kv_heads), int(head_dim)
    k = g.keys(t * h, d).reshape(t, h, d)
    v = g.normal(t, h, d)
    q = g.normal(h, d)
    return k, v, q
