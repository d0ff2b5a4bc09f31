/*
 * veloxquant.h — KV-cache compression with attention computed on the compressed codes.
 *
 * Overview
 *   A *codec* turns one head's key or value vectors (head_dim floats per token) into packed
 *   bytes and back, and — the point of the library — scores a query against the packed bytes
 *   and accumulates softmax-weighted values without ever rebuilding an fp16 copy.
 *   A *cache* (vq_cache) holds the codes of every (layer, kv-head) of a model in pages that
 *   grow up to max_tokens, keeps optional fp16 windows (recent tokens, sink tokens), and runs
 *   attention for one layer with GQA and causal masking.
 *
 * Example
 *     struct vq_cache_params cp = vq_cache_params_default();
 *     cp.n_layers = 30; cp.n_kv_heads = 3; cp.head_dim = 64; cp.max_tokens = 4096;
 *     cp.key.method = VQ_METHOD_TURBOQUANT_MSE;   cp.key.bits = 4;
 *     cp.value.method = VQ_METHOD_TURBOQUANT_MSE; cp.value.bits = 4;
 *     vq_status st;
 *     vq_cache *c = vq_cache_create(&cp, &st);
 *     if (!c) { fprintf(stderr, "%s\n", vq_status_str(st)); return 1; }
 *     // per layer: append post-RoPE K/V of n new tokens, (n, n_kv_heads, head_dim) each
 *     st = vq_cache_append(c, layer, k, v, VQ_DTYPE_F32, n);
 *     // attend: q is (n_q, n_q_heads, head_dim), out the same shape
 *     st = vq_cache_attend(c, layer, q, n_q_heads, n_q, NULL, 1.0f / sqrtf(64), out);
 *     vq_cache_free(c);
 *
 * Ownership
 *   Whoever creates a handle frees it; every *_free(NULL) is a no-op. Pointers passed in are
 *   borrowed for the duration of the call unless a comment says otherwise.
 *
 * Threading
 *   Handles carry no global state. A codec is immutable after creation: any number of threads
 *   may encode/score/accumulate with one codec at once (each with its own buffers). A cache
 *   may be used by one thread at a time; vq_cache_attend itself uses OpenMP threads across
 *   heads (n_threads in the params, 0 = OpenMP default). The only process-wide state is the
 *   ISA dispatch choice, made once (thread-safe) on first use.
 *
 * Errors
 *   Functions return enum vq_status (0 = OK, negative = error); vq_status_str() names it.
 *   The library never exits and never prints to stdout. A failed append leaves the cache as
 *   it was.
 *
 * Environment
 *   VQ_ISA=scalar|avx2|avx512  forces a kernel variant (default: best the CPU supports).
 *
 * Limits
 *   head_dim: 8..1024 and a multiple of 8; power-of-two or K*2^n with K in {12, 20, 28} use a
 *   Hadamard rotation, other multiples of 8 use block-diagonal power-of-two blocks.
 *   Stored scale/norm values use vq_sf16 (see docs/FORMAT.md): |v| <= 8.5e9, never inf.
 */
#ifndef VELOXQUANT_H
#define VELOXQUANT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(VQ_BUILD) && defined(__GNUC__)
#define VQ_API __attribute__((visibility("default")))
#else
#define VQ_API
#endif

#define VQ_VERSION_MAJOR 0
#define VQ_VERSION_MINOR 1
#define VQ_VERSION_PATCH 0

/* Returns the library version as "MAJOR.MINOR.PATCH" (static string). Thread-safe. */
VQ_API const char *vq_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Status codes (one list generates the enum and the strings).                               */

#define VQ_STATUS_LIST(X) \
    X(OK, 0, "ok") \
    X(INVALID_ARG, -1, "invalid argument") \
    X(NO_MEMORY, -2, "out of memory") \
    X(UNSUPPORTED, -3, "unsupported feature or configuration") \
    X(IO, -4, "i/o error") \
    X(BAD_FORMAT, -5, "malformed or truncated file") \
    X(NON_FINITE, -6, "input contains NaN or Inf") \
    X(RANGE, -7, "value out of representable range") \
    X(CAPACITY, -8, "capacity exceeded (max_tokens / context)") \
    X(NOT_FOUND, -9, "not found") \
    X(INTERNAL, -10, "internal error")

enum vq_status_e {
#define VQ_STATUS_ENUM_(name, val, str) VQ_STATUS_##name = val,
    VQ_STATUS_LIST(VQ_STATUS_ENUM_)
#undef VQ_STATUS_ENUM_
};
typedef int vq_status;

/* Returns a static, human-readable string for a status (unknown codes give "unknown status"). */
VQ_API const char *vq_status_str(vq_status st);
/* Index of the entry of names[0..n) nearest to name when it is close enough to be a likely
 * typo (edit distance, an adjacent swap counting as one edit, at most a third of name's length
 * and at least one), else -1; NULL entries are skipped. For "did you mean ...?" messages.
 * Pure, thread-safe. */
VQ_API int vq_nearest_name(const char *name, const char *const *names, int n);

/* ---------------------------------------------------------------------------------------- */
/* Element types of caller buffers.                                                          */

enum vq_dtype { VQ_DTYPE_F32 = 0, VQ_DTYPE_F16 = 1, VQ_DTYPE_BF16 = 2 };

/* Kernel variants. VQ_ISA_AUTO picks the best available (or VQ_ISA from the environment). */
enum vq_isa {
    VQ_ISA_AUTO = 0,
    VQ_ISA_SCALAR = 1,
    VQ_ISA_AVX2 = 2,
    VQ_ISA_AVX512 = 3,
    VQ_ISA_COUNT
};

/* Returns the ISA chosen for VQ_ISA_AUTO on this machine (honours $VQ_ISA). Thread-safe. */
VQ_API enum vq_isa vq_isa_default(void);
/* Returns 1 if this CPU (and build) can run the variant, else 0. Thread-safe. */
VQ_API int vq_isa_available(enum vq_isa isa);
/* Returns "scalar", "avx2", "avx512" or "auto". */
VQ_API const char *vq_isa_name(enum vq_isa isa);
/* Writes a one-line description of this machine as the library sees it into buf (at most cap
 * bytes, always NUL-terminated when cap > 0): the CPU's brand string with its family and model
 * (x86; "unknown CPU" elsewhere) and the kernel variant VQ_ISA_AUTO runs, e.g. "AMD EPYC (family
 * 26 model 2); kernels: avx512 (vnni, vbmi)", then " (VQ_ISA=value)" when $VQ_ISA is set (the
 * variant named is what the request resolved to, as in vq_isa_default). Returns the length the
 * full line needs (snprintf's contract). For benchmark records and bug reports. Thread-safe. */
VQ_API int vq_cpu_describe(char *buf, size_t cap);
/* The threads a call given n_threads runs on: n_threads when > 0, else the OpenMP default
 * (omp_get_max_threads(): OMP_NUM_THREADS or the cores), 1 in a build without OpenMP. What the
 * cache and the engine use for n_threads = 0, so tools print and record what ran. Thread-safe. */
VQ_API int vq_threads_resolve(int n_threads);

/* ---------------------------------------------------------------------------------------- */
/* Methods and codecs.                                                                       */

/* Append only; never renumber. */
enum vq_method {
    VQ_METHOD_FP16 = 0,
    VQ_METHOD_FP32 = 1,
    VQ_METHOD_TURBOQUANT_MSE = 2,
    VQ_METHOD_TURBOQUANT_PROD = 3,
    VQ_METHOD_QJL = 4,
    VQ_METHOD_POLAR = 5,
    VQ_METHOD_TURBOQUANT_RVQ = 6,
    VQ_METHOD_KIVI = 7,
    VQ_METHOD_KIVI_SINK = 8,
    VQ_METHOD_VECINFER = 9,  /* needs calibration (vq_calib_data); see below */
    VQ_METHOD_SPECTRAL = 10, /* needs calibration (vq_calib_data); see below */
    VQ_METHOD_INT8 = 11,     /* rotated per-token int8 */
    VQ_METHOD_COUNT
};

/* Whether a codec stores keys or values (KIVI groups keys per channel, values per token). */
enum vq_role { VQ_ROLE_KEY = 0, VQ_ROLE_VALUE = 1 };

/* Calibration data (codebooks, smoothing factors, PCA rotations, layer sensitivities) fitted
 * offline for one model; opaque, see the "Calibration" section below. */
typedef struct vq_calib_data vq_calib_data;

/* Configuration of one codec. Start from vq_codec_params_default() and set what you need. */
struct vq_codec_params {
    enum vq_method method; /* default VQ_METHOD_FP16 */
    enum vq_role role;     /* default VQ_ROLE_KEY */
    int head_dim;          /* elements per vector; default 128 */
    int bits;              /* bits per coordinate (method-specific range); default 4 */
    uint64_t seed;         /* rotation / sketch seed; default 42 */
    int unbiased_scale;    /* turboquant_mse: store n/<y,yhat> instead of n; default 1 */
    int jl_dim;            /* qjl / turboquant_prod sketch size m; 0 = head_dim */
    int group_size;        /* kivi: G; default 32 */
    int residual_length;   /* kivi: fp16 recent window R (multiple of G); default 128 */
    int n_sink_tokens;     /* kivi_sink: tokens kept fp16 by key norm; default 5 */
    int polar_bits[4];     /* polar: bits of level 1..4 angles; default {4,2,2,2} */
    enum vq_isa isa;       /* kernel variant; default VQ_ISA_AUTO */
    /* Calibrated methods (vecinfer, spectral). calib: borrowed, read-only, may be shared by
     * any number of codecs/threads; it must stay alive as long as any codec or cache created
     * from these params (the current codecs copy what they need at create time, but callers
     * must not rely on that). NULL = the method's data-free fallback (documented per method;
     * poor quality, meant for shape/contract tests). calib_layer selects the layer whose
     * entries (for this role) the codec uses; vq_cache_create overrides it with each layer's
     * index whenever calib is set (one codec per layer). */
    const vq_calib_data *calib; /* default NULL */
    int calib_layer;            /* default 0 */
    /* vecinfer: product-VQ codeword bits c and sub-vector length v (bits/elem = c/v).
     * 0 = preset from bits: 1 -> (8,8), 2 -> (8,4), 3 -> (12,4), 4 -> (8,2); "1.5 bits" is
     * (12,8). With calib the layer's codebook must have exactly 2^c entries of length v. */
    int pq_codeword_bits; /* default 0 */
    int pq_subvec_dim;    /* default 0 */
    /* spectral: 1 = water-filling bit allocation over PCA coordinates from the calibrated
     * eigenvalues (sum of bits = head_dim * bits, each coordinate 0..6 bits); 0 = every
     * coordinate at `bits` bits (the paper's SQ_noQJL configuration). Default 1. */
    int spectral_waterfill;
    /* kivi / kivi_sink keys: the width of each channel (head_dim entries, each 2..8, summing to
     * head_dim * bits, every width used by a multiple of 8 channels; docs/ALGORITHMS.md §8.8).
     * Block bytes and bits/elem are those of `bits`. Borrowed: the codec copies the widths at
     * create (vq_codec_params_get then points at that copy). NULL = every channel at `bits`
     * (default). Values, other methods or a bad table: INVALID_ARG. */
    const uint8_t *channel_bits;
};

/* Returns the defaults listed above. Thread-safe. */
VQ_API struct vq_codec_params vq_codec_params_default(void);

/* Method name as used on the command line ("turboquant_mse"), or NULL if out of range. */
VQ_API const char *vq_method_name(enum vq_method m);
/* Parses a method name; returns VQ_STATUS_NOT_FOUND for unknown names. */
VQ_API vq_status vq_method_from_name(const char *name, enum vq_method *out);

typedef struct vq_codec vq_codec;

/* Capability flags of a method (vq_method_info.flags), declared by its codec. The cache, the
 * memory estimate and the CLI read these instead of comparing method ids. */
enum {
    VQ_METHOD_F_QUANTIZED = 1u << 0,        /* stores codes, not exact rows (not fp16/fp32) */
    VQ_METHOD_F_FP16_ROWS = 1u << 1,        /* stores every row as plain fp16 (fp16) */
    VQ_METHOD_F_CALIBRATION = 1u << 2,      /* needs a calibration artifact (vq_calib_data) */
    VQ_METHOD_F_CENTERED = 1u << 3,         /* centered when center_keys/values = -1 (auto) */
    VQ_METHOD_F_WINDOWED = 1u << 4,         /* residual_length newest tokens kept in fp16 */
    VQ_METHOD_F_SINKS = 1u << 5,            /* n_sink_tokens high-key-norm tokens kept in fp16 */
    VQ_METHOD_F_OUTLIER_TOKENS = 1u << 6,   /* the cache can bypass outlier tokens on this side */
    VQ_METHOD_F_OUTLIER_CHANNELS = 1u << 7, /* keys can take the int8 outlier-channel split */
    VQ_METHOD_F_PER_CHANNEL_KEYS = 1u << 8, /* keys quantized per channel over token groups */
    VQ_METHOD_F_SKETCH = 1u << 9,           /* uses a JL sketch of jl_dim rows */
    VQ_METHOD_F_CALIB_CODEBOOK = 1u << 10,  /* calibration: product-VQ codebooks (vecinfer) */
    VQ_METHOD_F_CALIB_PCA = 1u << 11        /* calibration: PCA rotation + spectrum (spectral) */
};

/* What `veloxquant methods` prints about a method, and its traits. Strings are static.
 * Bit-widths: `bits` of vq_codec_params accepts the integers min_bits..max_bits (a choice
 * only when min_bits < max_bits; methods whose size is set otherwise, e.g. qjl by jl_dim or
 * polar by polar_bits, have min = max = default), plus frac_bits when nonzero (vecinfer 1.5,
 * set with vq_codec_params_set_bits). default_bits is the width every CLI command uses when
 * none is given. */
struct vq_method_info {
    const char *name;         /* CLI name */
    const char *params;       /* accepted parameters and ranges */
    const char *bits_formula; /* bits/elem of the quantized part, d = head_dim */
    int needs_calibration;    /* 1 if the method needs a calibration artifact */
    int implemented;          /* 0 if listed but not available in this build */
    /* appended (the fields below are 0 for methods not built) */
    int default_bits;       /* e.g. turboquant_mse 4, kivi 2, fp16 16 */
    int min_bits, max_bits; /* accepted integer widths */
    double frac_bits;       /* an accepted non-integer width (vecinfer 1.5); 0 = none */
    unsigned flags;         /* VQ_METHOD_F_* */
};
/* Fills *out for method m; returns INVALID_ARG if m is out of range. Thread-safe. */
VQ_API vq_status vq_method_info_get(enum vq_method m, struct vq_method_info *out);
/* Flags of method m (VQ_METHOD_F_*); 0 if m is out of range or not built. Thread-safe. */
VQ_API unsigned vq_method_flags(enum vq_method m);
/* Default bits of method m (vq_method_info.default_bits); 0 if out of range / not built. */
VQ_API int vq_method_default_bits(enum vq_method m);

/* Sets p->method to m and p->bits to its default width (fractional-width fields cleared).
 * Returns INVALID_ARG if m is out of range, UNSUPPORTED if it is not built. */
VQ_API vq_status vq_codec_params_set_method(struct vq_codec_params *p, enum vq_method m);
/* Sets the width of p (method already set): an integer in min_bits..max_bits sets p->bits
 * (and clears a fractional width); the method's frac_bits (vecinfer 1.5) sets the method's
 * fields for it (vecinfer: bits 2, pq_codeword_bits 12, pq_subvec_dim 8). Returns RANGE for
 * a width the method does not accept (p unchanged), INVALID_ARG for NULL / bad method. */
VQ_API vq_status vq_codec_params_set_bits(struct vq_codec_params *p, double bits);
/* Nominal width of p: p->bits, or the method's own reading of its fields (vecinfer with an
 * explicit product-VQ shape: c / v, e.g. 1.5). Pure, thread-safe. */
VQ_API double vq_codec_params_bits(const struct vq_codec_params *p);
/* vecinfer's product-VQ shape for params p (the codebook a calibration must fit): (c, v) =
 * (pq_codeword_bits, pq_subvec_dim) when both are set, else the preset of p->bits (1: (8,8),
 * 2: (8,4), 3: (12,4), 4: (8,2)). Returns INVALID_ARG for a NULL argument, when only one of
 * c, v is set or bits has no preset; does not check head_dim. Pure, thread-safe. */
VQ_API vq_status vq_vecinfer_shape(const struct vq_codec_params *p, int *c, int *v);
/* Display label of a codec config: "turboquant_mse/4-bit", "vecinfer/1.5-bit", "qjl"
 * (methods without a choice of width have no "/B-bit"). Returns the length it needs (like
 * snprintf); out is always terminated when cap > 0. Thread-safe. */
VQ_API int vq_codec_params_label(const struct vq_codec_params *p, char *out, size_t cap);


/* Creates a codec. Validates every parameter against the method (bits range, head_dim rules,
 * group sizes); on failure returns NULL and writes the reason to *st (if st != NULL).
 * The codec is immutable and owned by the caller (vq_codec_free). Thread-safe. */
VQ_API vq_codec *vq_codec_create(const struct vq_codec_params *p, vq_status *st);
/* Frees a codec; NULL is a no-op. */
VQ_API void vq_codec_free(vq_codec *c);
/* Returns the parameters the codec was created with (defaults resolved, e.g. jl_dim). */
VQ_API const struct vq_codec_params *vq_codec_params_get(const vq_codec *c);

/* Tokens encoded together in one block: 1 for per-token codecs, group_size for KIVI keys. */
VQ_API int vq_codec_block_tokens(const vq_codec *c);
/* Exact bytes of one encoded block (codes + side data); no padding beyond the documented
 * layout (docs/FORMAT.md). */
VQ_API size_t vq_codec_block_bytes(const vq_codec *c);
/* Stored bits per element of the quantized part: 8 * block_bytes / (block_tokens * head_dim). */
VQ_API double vq_codec_bits_per_elem(const vq_codec *c);

/* Encodes n_tokens vectors x (n_tokens, head_dim) into dst (n_tokens / block_tokens blocks).
 * n_tokens must be a multiple of block_tokens. Returns VQ_STATUS_NON_FINITE for NaN/Inf input,
 * VQ_STATUS_RANGE when a stored scale would not fit vq_sf16; dst content is unspecified on
 * error. Deterministic for a given codec (seed). Thread-safe. */
VQ_API vq_status vq_codec_encode(const vq_codec *c, const float *x, int64_t n_tokens, void *dst);
/* Decodes n_tokens vectors (multiple of block_tokens) from src into x (n_tokens, head_dim).
 * This is the reference path; attention does not use it. Thread-safe. */
VQ_API vq_status vq_codec_decode(const vq_codec *c, const void *src, int64_t n_tokens, float *x);

/* Size in bytes of the prepared-query state (rotated query, lookup tables). */
VQ_API size_t vq_codec_query_bytes(const vq_codec *c);
/* Prepares query q (head_dim floats) into qs (query_bytes, 64-byte aligned, caller-owned):
 * rotates once and builds lookup tables. Thread-safe. */
VQ_API void vq_codec_prepare_query(const vq_codec *c, const float *q, void *qs);
/* Scores n_tokens encoded tokens (whole blocks) against a prepared query:
 * scores[t] = estimate of <q, x_t> (no softmax scale applied). Thread-safe. */
VQ_API void vq_codec_score(const vq_codec *c, const void *qs, const void *codes, int64_t n_tokens,
                           float *scores);
/* Floats in the value accumulator (head_dim for most codecs; larger for histogram forms). */
VQ_API size_t vq_codec_acc_floats(const vq_codec *c);
/* Adds sum_t w[t] * x_t to the accumulator acc (acc_floats, zeroed by the caller before the
 * first call) in the codec's own domain (e.g. rotated). n_tokens whole blocks. Thread-safe. */
VQ_API void vq_codec_accumulate(const vq_codec *c, const void *codes, int64_t n_tokens,
                                const float *w, float *acc);
/* Maps the accumulator to the output domain: out (head_dim) = sum_t w[t] * xhat_t. */
VQ_API void vq_codec_finish(const vq_codec *c, const float *acc, float *out);
/* Switches c to its scalar reference kernels (the `_ref` functions: the normative spec that
 * the generic and ISA kernels are tested against), for benchmarks and kernel tests. Returns
 * OK, UNSUPPORTED when the method has no reference kernels apart from its scalar ones (c
 * unchanged), INVALID_ARG for NULL. The codes and results stay those of the method (the
 * kernels are tested to agree); only the speed changes. Not thread-safe: call before c is
 * used by more than one thread. */
VQ_API vq_status vq_codec_use_ref_kernels(vq_codec *c);

/* ---------------------------------------------------------------------------------------- */
/* Cache.                                                                                    */

struct vq_cache_params {
    int n_layers;       /* >= 1 */
    int n_kv_heads;     /* >= 1 */
    int head_dim;       /* overrides key.head_dim / value.head_dim */
    int64_t max_tokens; /* capacity per layer; pages are allocated as the cache grows */
    int page_tokens;    /* tokens per page (multiple of the codecs' block tokens); default 256 */
    struct vq_codec_params key;
    struct vq_codec_params value;
    const int *key_bits_per_layer; /* optional (n_layers), overrides key.bits per layer; copied */
    const int
        *value_bits_per_layer; /* optional (n_layers), overrides value.bits per layer; copied */
    int n_threads;             /* threads used by vq_cache_attend; 0 = OpenMP default */
    /* Centering (keys / values separately): -1 = auto (default), 0 = off, 1 = on. A centered
     * stream subtracts a per-(layer, kv-head) vector mu — the mean of the tokens of the
     * layer's first append, stored in fp16, frozen afterwards — from every row before it is
     * stored. Exact for attention: q.mu_K shifts all scores of a query equally (softmax
     * ignores it), and mu_V is added back to the output (weights sum to 1); decoding adds mu
     * back. It helps codecs whose error scales with ||x|| when a head's rows share a large
     * common part (real LLM keys: |mean key| ~1.4x the mean deviation on SmolLM2).
     * auto = on for turboquant_mse/prod/rvq and qjl (SmolLM2-135M, ctx 256: tq_mse-4 KL
     * 0.040 -> 0.031, tq_mse-3 0.177 -> 0.113, tq_prod-3 0.387 -> 0.229), off for polar (no
     * gain), kivi* (worse: per-channel key groups already absorb it, values lose), fp16/fp32,
     * vecinfer, spectral. The stored state depends on the first append's tokens (as sinks do).
     * mu is cleared by vq_cache_reset and by a vq_cache_truncate to 0 tokens (the next append
     * learns it again); a truncate to n > 0 keeps it. mu costs head_dim * 2 bytes per (layer,
     * kv-head, centered stream), counted in vq_cache_memory.center_bytes once the layer
     * holds tokens (and in allocated_bytes from creation). */
    int center_keys;
    int center_values;
    /* Outlier-token bypass (docs/ALGORITHMS.md §7.6). 0 = off (default); k > 0: in every append of
     * n >= 2 tokens, the tokens whose key norm (L2 norm of the raw, uncentered key, averaged
     * over the kv-heads: a token is an outlier in all heads of its layer or in none) exceeds
     * mean + k * std of that append (population std over its n tokens) keep fp16 copies of
     * their key and value rows (centered if the side is) in a per-stream side store; attention
     * scores such a token from its fp16 key and takes its fp16 value (its codec slot stays in
     * the position-indexed pages, holds the code of the row, and is ignored). Single-token
     * appends (decode) never add outliers. A side whose method is fp16/fp32 keeps no copies.
     * Works with every codec except kivi_sink (which already keeps its high-norm tokens in
     * fp16): vq_cache_create returns UNSUPPORTED for kivi_sink on either side or when both
     * sides are fp16/fp32 (nothing to bypass), INVALID_ARG for k < 0 or non-finite k. Inputs
     * beyond the fp16 range give RANGE (as for windowed streams). Outliers beyond a truncation
     * point are dropped; reset drops all. Bytes: 2 * head_dim per outlier token, kv-head and
     * side, counted in vq_cache_memory.outlier_bytes. */
    float outlier_token_k;
    /* Outlier-channel two-stream keys (docs/ALGORITHMS.md §8.4); keys only, values unchanged.
     * 0 = off (default); n_out in 1..min(64, head_dim / 2). Per (layer, kv-head) the mean of
     * |k_c| (of the rows as stored, i.e. centered when center_keys is on) over the layer's first
     * n_calib_tokens tokens is accumulated; when token n_calib_tokens - 1 is appended, the n_out
     * channels of largest mean (ties: lower channel) are fixed for that (layer, kv-head).
     * Tokens at positions < n_calib_tokens are stored by the plain codec (their outlier record
     * is zero); every later key is split: its n_out outlier values as int8 with one vq_sf16
     * abs-max scale (scale = max|v|/127, q = clamp(round(v/scale), -127, 127)), the rest (those
     * channels zeroed) through the key codec. Score = codec estimate + scale * sum q_c * q[c].
     * The split depends only on positions, not on how a sequence is cut into appends. Every
     * key token carries its record: exactly 2 + n_out bytes = (8 n_out + 16) / head_dim extra
     * bits/elem, plus 2 * n_out bytes of channel list per (layer, kv-head) once fixed (both in
     * vq_cache_memory.outlier_bytes; layout in docs/FORMAT.md). Supported key methods:
     * turboquant_mse, turboquant_prod, turboquant_rvq, qjl, polar; others give UNSUPPORTED
     * (fp16/fp32: nothing to split; kivi/kivi_sink quantize keys per channel already;
     * vecinfer/spectral are calibrated on whole keys). vq_cache_truncate to n tokens with
     * 0 < n < min(stored, n_calib_tokens) returns UNSUPPORTED (the channel statistics cannot
     * be un-accumulated exactly); truncate to 0 and reset restart the calibration. */
    int n_outlier_channels;
    int n_calib_tokens; /* default 200; >= 1 when n_outlier_channels > 0 */
    /* Full-precision edge layers (default 0, 0): layers 0..fp16_first_layers-1 and the last
     * fp16_last_layers layers store keys and values with the fp16 codec (no centering unless
     * center_keys/center_values = 1), ignoring key/value params and the per-layer bits there.
     * Each in 0..n_layers (overlap = every layer fp16). Counted exactly by vq_cache_memory. */
    int fp16_first_layers;
    int fp16_last_layers;
    /* Sliding-window attention (per layer). Optional (n_layers), copied; 0 = full attention;
     * W > 0: a query at position p attends to positions p-W+1 .. p only (llama.cpp's standard
     * SWA rule: masked when p - t >= W). Positions stay absolute (vq_cache_n_tokens counts
     * every appended position; keys are stored post-RoPE). A windowed layer keeps what later
     * queries can still see: after an append that started at position n0, every stream frees
     * (and recycles for its next pages) its whole pages of coded tokens below n0 - W + 1, so it
     * holds at most W - 1 + (tokens of the last append) + page_tokens - 1 coded tokens at any
     * context, plus its fp16 window (KIVI residual / partial block) and side stores.
     * Consequences: queries at positions p with p - W + 1 below the last append's n0 - W + 1
     * (they would see freed tokens) give INVALID_ARG in vq_cache_attend / _ref;
     * vq_cache_truncate to n > 0 with n - W + 1 below that point gives UNSUPPORTED (the tokens
     * a query at n would see are gone; truncate to 0 / reset always work); vq_cache_read gives
     * zero rows for freed positions. Outlier tokens whose position fell below that point are
     * dropped; kivi_sink sinks and centering vectors stay. vq_cache_n_stored counts the
     * positions still held; vq_cache_memory counts the bytes held. Plain fp16 layers stay
     * llama.cpp-exact: masked scores are -inf in a position-ordered buffer (see
     * vq_cache_attend), i.e. what llama.cpp computes with swa_full = true. W must be 0 or
     * >= 1; negative W gives INVALID_ARG. */
    const int *layer_window;
    /* StreamingLLM-style eviction (attention sinks + window) on every full-attention layer
     * (layer_window absent or 0 there; model-defined SWA layers keep their own window and get
     * no sinks). stream_window = 0 (default): off. W > 0: a query at position p attends to
     * positions 0 .. S-1 (S = stream_sinks, the attention sinks) and p-W+1 .. p; memory as for
     * layer_window W, plus the first S positions of every stream kept as fp16 rows (centered
     * if the side is), which are also the rows attended for positions < S whatever the codec.
     * Positions are not re-assigned: keys keep their original RoPE rotation (a "rolling cache
     * without re-rotation"), so a query sees its sinks at their true distance; within the
     * model's trained context this is exactly windowed attention plus sinks. stream_sinks in
     * 0..1024 (INVALID_ARG otherwise). stream_sinks S > 0 with stream_window 0: sinks alone,
     * full attention, the first S positions of those layers attended from their fp16 rows
     * instead of their codes (attention-sink protection: the first tokens draw much of the
     * attention mass, so their code error weighs most; docs/ALGORITHMS.md §8.9). */
    int stream_window;
    int stream_sinks;
    /* Per-channel key scales (docs/ALGORITHMS.md §8.6); keys only. 0 = off (default), 1 = from
     * the keys, 2 = from the keys and the queries given to vq_cache_observe_queries. Per
     * (layer, kv-head) a vector s is learned from the layer's first append (as mu is; kept
     * only if the append succeeds; cleared by reset / truncate to 0): b_i = mean of
     * (k_i - mu_i)^2 over its tokens, a_i = mean of q_i^2 over the queries observed for the
     * kv-head's query heads (1 in mode 1 or when none were observed), both averaged over each
     * RoPE pair (key_scale_pairs) and floored at 1e-3 of their mean; s_i = (b_i / a_i)^(1/4),
     * divided by the geometric mean of s, clamped to [1/16, 16], rounded to fp16. A first
     * append of fewer than 8 tokens gives s = 1. Every stored key row (codec blocks, fp16
     * windows, sinks, outlier copies) is (k - mu) / s and attention scores it with q * s, so
     * q.k is unchanged. Why this s: a rotation codec's error on k/s is near isotropic with
     * variance ~ ||k/s||^2, so the score error E[(q*s . err)^2] ~ (sum_i a_i s_i^2)(sum_j b_j
     * / s_j^2), which Cauchy-Schwarz minimizes at s_i^2 = sqrt(b_i / a_i). Applies to every
     * layer except fp16_first/last layers; any key method (the fp16 / fp32 ones then take the
     * codec path, not the llama.cpp-exact one). INVALID_ARG outside 0..2. Bytes: head_dim * 2
     * per (layer, kv-head) once learned, counted in vq_cache_memory.center_bytes. */
    int key_scales;
    /* RoPE pairing of the key channels for key_scales (scales equal within a rotary pair, so
     * they do not depend on where a position's rotation put the pair's energy): 0 = none
     * (default), 1 = adjacent (2i, 2i+1), 2 = halves (i, i + r/2); over the first r =
     * key_scale_rope_dim channels (0 = head_dim; even, <= head_dim). The engine sets both
     * from the model. INVALID_ARG otherwise. */
    int key_scale_pairs;
    int key_scale_rope_dim;
    /* Per-channel KIVI key widths (docs/ALGORITHMS.md §8.8): 0 = off (default), 1 = on, 2 = on
     * with 0-bit channels (key method kivi or kivi_sink, else UNSUPPORTED; INVALID_ARG outside
     * 0..2). Per (layer, kv-head), at the append that brings the layer to G tokens or more
     * (kept only if it succeeds; cleared by reset / truncate to 0), each key channel c gets its
     * own width b_c in 2..8
     * (mode 2: 0 or 2..8; a 0-bit channel stores its group's mean and no code) with the
     * layer's key width as mean (bytes and bits/elem unchanged), water-filled on
     * w_c = a_c R_c^2: R_c^2 the mean squared range (max - min) of the channel over the
     * whole groups of G tokens the layer holds then, a_c the mean q_c^2 of the queries given
     * to vq_cache_observe_queries for the kv-head's query heads since the layer was emptied
     * (1 when none were observed). A layer at 8 bits, or (mode 1) at 2 bits, keeps one width.
     * Applies to every layer except fp16_first/last layers.
     * Bytes: head_dim per (layer, kv-head) of every layer it applies to once the layer holds
     * G tokens (the width table, whether or not the widths differ), counted in
     * vq_cache_memory.center_bytes. */
    int key_channel_bits;
};

/* Defaults: 1 layer, 1 kv head, head_dim 128, max_tokens 4096, page 256, fp16 keys and values. */
VQ_API struct vq_cache_params vq_cache_params_default(void);

typedef struct vq_cache vq_cache;

/* Creates an empty cache (no pages yet). Returns NULL and sets *st on invalid parameters.
 * Caller-owned (vq_cache_free). */
VQ_API vq_cache *vq_cache_create(const struct vq_cache_params *p, vq_status *st);
/* Frees a cache; NULL is a no-op. */
VQ_API void vq_cache_free(vq_cache *c);

/* Appends n_tokens new tokens to one layer. k and v are (n_tokens, n_kv_heads, head_dim) in
 * dtype, post-RoPE. Returns INVALID_ARG (bad layer/size/NULL), NON_FINITE (NaN/Inf),
 * RANGE (magnitude beyond vq_sf16), CAPACITY (beyond max_tokens), NO_MEMORY; on any error the
 * cache is unchanged. */
VQ_API vq_status vq_cache_append(vq_cache *c, int layer, const void *k, const void *v,
                                 enum vq_dtype dtype, int64_t n_tokens);

/* Shows the cache the queries of a batch before that batch is appended to a layer, for
 * key_scales = 2 and key_channel_bits: the per-channel means of q^2 (per kv-head, over its
 * query heads: head h belongs to kv-head h / (n_q_heads / n_kv_heads)) are kept over the
 * queries shown while the layer is empty (each call on an empty layer starts over) and, with
 * key_channel_bits, also while its key widths wait for the first G tokens (the calls add up);
 * otherwise (or with neither option) a no-op. q is (n_q, n_q_heads, head_dim) fp32 as in
 * vq_cache_attend. Returns INVALID_ARG (bad layer, NULL q with n_q > 0, n_q_heads not a multiple of
 * n_kv_heads) or NON_FINITE; the cache is unchanged on error. One caller per cache. */
VQ_API vq_status vq_cache_observe_queries(vq_cache *c, int layer, const float *q, int n_q_heads,
                                          int64_t n_q);

/* Attention for one layer on the stored codes. q is (n_q, n_q_heads, head_dim) fp32,
 * n_q_heads a multiple of n_kv_heads (query head h uses kv head h / (n_q_heads/n_kv_heads)).
 * q_pos (n_q) gives each query's position: it attends to tokens 0..q_pos[i]; NULL means the
 * last n_q positions (n_tokens - n_q + i). out is (n_q, n_q_heads, head_dim) fp32.
 * scale multiplies the scores before softmax (usually 1/sqrt(head_dim)).
 * fp16 layers: a layer whose keys and values are both plain fp16 rows (method fp16, no
 * centering; e.g. an fp16 cache or the fp16_first/last_layers) with head_dim % 16 == 0 is
 * attended in llama.cpp's CPU arithmetic (ggml, non-flash path), bit for bit on every ISA:
 * q rounded to fp16, scores by ggml's fp16 dot times scale, softmax with ggml_v_expf and a
 * double sum over 16-wide chunks counted from position 0, the weights times (float)(1 / sum)
 * rounded to fp16, then V^T P. The dot and V^T P orders depend on n_q alone: n_q == 1 uses
 * ggml_vec_dot_f16's order (llama.cpp's single-token batch), n_q >= 2 the tinyBLAS order of
 * its batched kernels (as in llama.cpp, a query's output thus depends on whether it comes
 * alone or in a batch, by float rounding). The result does not depend on q_pos order, page
 * size, threads or how the tokens were appended. Other layers use the codecs' fused kernels
 * (float32 scores and weights) for few queries (fewer than 16 query heads x queries per kv
 * head: decode), and for batches (prefill, scoring) decode each page of codes once to fp32
 * for all queries and run dense fp32 products with an online softmax (the decode-once path;
 * $VQ_PREFILL_ATTEND=fused at vq_cache_create keeps the fused kernels for batches too); both
 * equal vq_cache_attend_ref to float rounding. Thread-safety: one caller per cache; OpenMP
 * inside. */
VQ_API vq_status vq_cache_attend(vq_cache *c, int layer, const float *q, int n_q_heads, int64_t n_q,
                                 const int64_t *q_pos, float scale, float *out);
/* Same contract, computed by decoding every stored token to fp32 first and doing plain
 * dot products (reference for tests and `bench --compare_optimized`). Slow. */
VQ_API vq_status vq_cache_attend_ref(vq_cache *c, int layer, const float *q, int n_q_heads,
                                     int64_t n_q, const int64_t *q_pos, float scale, float *out);

/* Decodes every token stored in (layer, kv_head) into k and v ((n_tokens, head_dim) fp32
 * each; either may be NULL) with the codecs' reference decoders, fp16 windows and sinks as
 * stored. With fp32 K/V methods this returns exactly what was appended (used to record
 * calibration activations). Returns INVALID_ARG for a bad layer/head or NULL cache. */
VQ_API vq_status vq_cache_read(const vq_cache *c, int layer, int kv_head, float *k, float *v);

/* The key scales s of (layer, kv_head) (vq_cache_params.key_scales) into s (head_dim fp32):
 * stored rows are (k - mu) / s and queries are scored as q * s. All 1 when key scaling is off
 * for the layer or not learned yet. Returns INVALID_ARG for a bad layer/head or NULL
 * arguments. Thread-safe against other readers. */
VQ_API vq_status vq_cache_key_scales(const vq_cache *c, int layer, int kv_head, float *s);

/* The per-channel key widths of (layer, kv_head) (vq_cache_params.key_channel_bits) into bits
 * (head_dim entries). Every entry 0 while the layer has none (option off, an fp16 edge layer,
 * fewer than G tokens appended since it was emptied, or widths all equal to the layer's
 * width). Returns INVALID_ARG for a bad layer/head or NULL arguments. Thread-safe
 * against other readers. */
VQ_API vq_status vq_cache_key_channel_bits(const vq_cache *c, int layer, int kv_head,
                                           uint8_t *bits);

/* Positions appended to a layer so far (absolute: windows do not lower it). 0 for a bad
 * layer or NULL cache. */
VQ_API int64_t vq_cache_n_tokens(const vq_cache *c, int layer);
/* Positions whose keys and values a layer still holds: n_tokens, less the positions a
 * windowed layer (layer_window / stream_window) has freed (the stream sinks stay held). For
 * KIVI, whose keys and values flush differently, the larger of the two streams. 0 for a bad
 * layer or NULL cache. */
VQ_API int64_t vq_cache_n_stored(const vq_cache *c, int layer);

struct vq_cache_memory {
    size_t key_bytes;       /* packed key blocks (codes + side data) of all layers/heads */
    size_t value_bytes;     /* packed value blocks */
    size_t window_bytes;    /* fp16 windows (recent, sink) of keys and values */
    size_t total_bytes;     /* key_bytes + value_bytes + window_bytes + center_bytes */
    size_t fp16_bytes;      /* an fp16 cache of the same tokens and windows (K + V) */
    size_t fp16_key_bytes;  /* fp16 bytes of the keys alone */
    size_t key_total_bytes; /* stored key bytes including key windows */
    size_t allocated_bytes; /* bytes of pages actually allocated (>= total_bytes) */
    size_t center_bytes;    /* fp16 centering vectors (keys + values) and key scale vectors
                            * (key_scales) of layers holding tokens; the key part is also in
                            * key_total_bytes */
    size_t outlier_bytes;   /* outlier modifiers: fp16 rows of outlier tokens (K and V),
                            * outlier-channel records (2 + n_out bytes per key token) and channel
                            * lists; in total_bytes, the key parts also in key_total_bytes */
};
/* Fills *m with exact byte counts for the tokens stored now. */
VQ_API void vq_cache_memory(const vq_cache *c, struct vq_cache_memory *m);

/* Keeps the first n_tokens tokens of every layer (n_tokens <= stored). Dropping tokens that
 * were encoded in a multi-token block re-opens that block only if its fp16 source is still in
 * the window; otherwise returns UNSUPPORTED and leaves the cache unchanged. Windowed layers
 * (layer_window / stream_window W): 0 < n_tokens with n_tokens - W + 1 below the layer's
 * keep_from (the tokens a query at n_tokens would see were freed) is UNSUPPORTED too; cutting
 * back to the start of the last append and to 0 always passes this check. */
VQ_API vq_status vq_cache_truncate(vq_cache *c, int64_t n_tokens);
/* Empties every layer (pages are kept for reuse). */
VQ_API void vq_cache_reset(vq_cache *c);

/* ---------------------------------------------------------------------------------------- */
/* Calibration.                                                                              */
/*
 * A vq_calib_data holds, per (layer, role), whatever calibrated methods need:
 *   - smoothing factors lambda (head_dim) for vecinfer keys: lambda_c = sqrt(max_t |K[t,c]|),
 *     floored at 1e-4;
 *   - a product-VQ codebook (2^c x v floats) for vecinfer, trained by k-means on the
 *     sub-vectors of the transformed keys (WHT(K / lambda)) or of the raw values;
 *   - a PCA basis for spectral: eigenvectors U (head_dim x head_dim, descending eigenvalues),
 *     eigenvalues, and the signal dimension d_s = ceil(participation ratio);
 * and per layer a sensitivity w_i (mean ||k||^2, RateQuant). Heads are pooled: samples are
 * vectors of head_dim floats from any kv-head of the layer, post-RoPE for keys.
 * Fitting and loading are deterministic for a seed. A vq_calib_data is mutable only through
 * the vq_calib_fit_* functions (one thread at a time); once fitted or loaded it is read-only
 * and may be shared by any number of threads and codecs.
 */

/* Creates an empty calibration set for a model geometry (n_layers >= 1, head_dim as for
 * codecs). Returns NULL and sets *st on invalid input or allocation failure. Caller-owned. */
VQ_API vq_calib_data *vq_calib_data_create(int n_layers, int head_dim, vq_status *st);
/* Frees a calibration set; NULL is a no-op. */
VQ_API void vq_calib_data_free(vq_calib_data *cd);
/* Geometry of a calibration set (0 for NULL). */
VQ_API int vq_calib_data_n_layers(const vq_calib_data *cd);
VQ_API int vq_calib_data_head_dim(const vq_calib_data *cd);

/* Fits vecinfer data for (layer, role) from x (n, head_dim) samples: for keys the smoothing
 * factors and a codebook on WHT(x / lambda) sub-vectors, for values a codebook on raw value
 * sub-vectors. k-means: 2^codeword_bits centroids of length subvec_dim (must divide
 * head_dim, <= 16; codeword_bits 1..12), random-sample init from seed, 30 Lloyd iterations,
 * empty clusters reseeded. Needs n * head_dim / subvec_dim >= 2^codeword_bits. Replaces any
 * previous vecinfer entry for (layer, role). NON_FINITE on NaN/Inf input. */
VQ_API vq_status vq_calib_fit_vecinfer(vq_calib_data *cd, int layer, enum vq_role role,
                                       const float *x, int64_t n, int codeword_bits, int subvec_dim,
                                       uint64_t seed);
/* Fits the spectral PCA basis for (layer, role) from x (n >= 2, head_dim) samples: the
 * (uncentered) second-moment matrix E[x x^T], its eigendecomposition (Jacobi), and
 * d_s = ceil((sum lambda)^2 / sum lambda^2). */
VQ_API vq_status vq_calib_fit_spectral(vq_calib_data *cd, int layer, enum vq_role role,
                                       const float *x, int64_t n);
/* Signal dimension d_s of the spectral entry of (layer, role), or 0 if not fitted. */
VQ_API int vq_calib_signal_dims(const vq_calib_data *cd, int layer, enum vq_role role);
/* Sets the RateQuant sensitivity of a layer to the mean of ||x_t||^2 over the n key samples
 * x (n, head_dim). */
VQ_API vq_status vq_calib_fit_sensitivity(vq_calib_data *cd, int layer, const float *x, int64_t n);
/* Returns the sensitivities (n_layers) if every layer has one, else NULL (library-owned,
 * valid until vq_calib_data_free). */
VQ_API const double *vq_calib_sensitivities(const vq_calib_data *cd);

/* RateQuant per-layer bit allocation (docs/ALGORITHMS.md §8.3). w (n >= 1, all > 0):
 * sensitivities; b_avg: target mean bits; allowed (n_allowed >= 1, strictly ascending):
 * the permitted bit-widths; beta > 1: distortion ratio per bit (D(b) ~ beta^-b), or <= 0 to
 * use the Lloyd-Max Gaussian fit over b = 1..3 (vq_ratequant_fit_beta). Writes bits_out (n):
 * closed form b_i = b_avg + (ln w_i - mean ln w) / ln beta, clamped and snapped to the
 * allowed set, then greedy one-step moves on the largest rounding gaps until
 * sum bits = round(n * b_avg); the sum equals that target whenever the allowed set makes it
 * reachable (always for consecutive integers covering b_avg), otherwise it is the closest
 * reachable sum not above it. Larger w never gets fewer bits. Thread-safe. */
VQ_API vq_status vq_ratequant_allocate(const double *w, int n, double b_avg, const int *allowed,
                                       int n_allowed, double beta, int *bits_out);
/* Least-squares fit of log D(b) = log alpha - b log beta on Gaussian Lloyd-Max distortions
 * for the n_bits bit-widths in bits (1..6, n_bits >= 2); writes beta. Thread-safe. */
VQ_API vq_status vq_ratequant_fit_beta(const int *bits, int n_bits, double *beta);

/* Artifact files (docs/FORMAT.md "Calibration artifact"): header (magic, format version,
 * method tag, model sha256, geometry, parameters, payload length), payload, FNV-1a-64
 * checksum. method: a short tag ("vecinfer", "spectral", "ratequant"; <= 15 chars,
 * [a-z0-9_]); params: up to 6 method parameters recorded in the header (may be NULL).
 * Written atomically (temp file in the same folder, fsync, rename); missing folders are
 * created. On IO, errno holds the cause (for a message naming it). */
VQ_API vq_status vq_calib_data_save(const vq_calib_data *cd, const char *path, const char *method,
                                    const uint8_t model_sha256[32], const uint32_t params[6]);
/* Loads and fully validates an artifact (untrusted input). model_sha256 (may be NULL to
 * skip the check) must match the header. Returns NULL and sets *st: IO (cannot read),
 * BAD_FORMAT (bad magic, truncated, corrupted, checksum, inconsistent records),
 * UNSUPPORTED (newer format version), NOT_FOUND (model hash or method tag differ: a stale
 * artifact). method (may be NULL) must match the header's tag. Caller-owned result. */
VQ_API vq_calib_data *vq_calib_data_load(const char *path, const char *method,
                                         const uint8_t model_sha256[32], vq_status *st);
/* Finds calibration for a cache configuration in the artifact cache: for cp->key and cp->value
 * (roles set accordingly) whose method needs calibration and whose calib is NULL, loads the
 * first artifact (by file name) of <root>/<method>/<model sha256>/ that can serve that codec
 * on every layer 0..n_layers-1 (head_dim, entries of the role, codebook shapes, per-layer
 * bits) and sets calib. model_sha256_hex: 64 hex digits. The sets loaded are returned in
 * owned[0..1] (NULL where nothing was loaded; a set used by both sides appears once): the
 * caller frees them with vq_calib_data_free after every cache/codec made from cp.
 * Returns OK (also when nothing needs calibration), INVALID_ARG, or NOT_FOUND (no usable
 * artifact: run `veloxquant calibrate -m MODEL`); on error cp's calib fields are unchanged
 * and nothing is owned. Not thread-safe with respect to cp. */
VQ_API vq_status vq_calib_attach(struct vq_cache_params *cp, int n_layers, int head_dim,
                                 const char *model_sha256_hex, vq_calib_data *owned[2]);
/* Writes the default artifact path "<root>/<method>/<model_sha256 hex>/<name>.vqcal" into buf
 * (cap bytes, NUL-terminated); root = $VQ_CACHE_DIR if set and non-empty, else
 * $HOME/.cache/veloxquant. method and name: 1..63 chars of [A-Za-z0-9_.-], not starting with
 * '.'. Returns OK, INVALID_ARG (bad tag/name/NULL), NOT_FOUND (neither variable set) or
 * RANGE (cap too small). Reads the environment; thread-safe if nobody modifies it. */
VQ_API vq_status vq_calib_artifact_path(const char *method, const uint8_t model_sha256[32],
                                        const char *name, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------- */
/* KV specs: named cache configurations (presets and the config-name grammar).               */
/*
 * A KV spec is what a user names: a preset ("kv8", "kv5", "kv4", "kv3", "kv2"), the fp16
 * baseline ("fp16"), a named configuration ("turboquant_mse-3", "asym-k4v2", "qjl",
 * "ratequant-2.5", ...) or the config grammar
 *     METHOD | METHOD-B | METHOD-kBvB' | KMETHOD-B:VMETHOD-B' | PRESET   followed by
 *     "+..." modifiers: +gG group size, +resR KIVI fp16 window, +sinkN kivi_sink sinks, +jlM
 *     sketch size, +seedS codec seed, +kbDIGITS / +vbDIGITS per-layer widths spread over the
 *     depth, +fp16fAlB fp16 edge layers, +rqB RateQuant mean key bits (+rqv_even, +rqv_off),
 *     +ot[K] outlier tokens, +ocN[tT] outlier channels, +wW[sS] window (+ sinks), +sS fp16
 *     attention sinks, +ks / +ksk key scales, +kc / +kcz per-channel KIVI key widths
 * (docs/EVALUATION.md "Config names"). Every command of the CLI, the benchmarks and the
 * bindings resolve names through these functions, so a name means one cache everywhere.
 *
 * Resolution: vq_kv_spec_parse (name -> spec), then vq_kv_spec_cache_params (spec + a
 * model's geometry, and RateQuant layer weights where the spec needs them -> cache params).
 * Methods that need calibration artifacts (vecinfer, spectral) get them attached afterwards
 * (vq_calib_attach). vq_kv_spec_name prints a spec back as its canonical name, which parses
 * to the same spec. All functions are pure (no global state) and thread-safe.
 */

/* Per-layer list capacity of a spec (layers of a model the per-layer options can describe). */
#define VQ_KV_MAX_LAYERS 512
/* RateQuant value widths: follow the key allocation, spread evenly to the same mean, or off
 * (values keep their uniform width). */
enum vq_kv_rq_values {
    VQ_KV_RQ_VALUES_KEYS = 0,
    VQ_KV_RQ_VALUES_EVEN = 1,
    VQ_KV_RQ_VALUES_OFF = 2
};

/* A parsed KV configuration. "Not given" fields keep the codec's or cache's default. Fill it
 * with vq_kv_spec_init / vq_kv_spec_parse (or set fields after init, as the CLI's options do);
 * plain data, copyable by value. */
struct vq_kv_spec {
    int has_method, has_k_method, has_v_method; /* 1 = the method below was given */
    enum vq_method method, k_method, v_method;  /* both sides / keys / values */
    double bits, k_bits, v_bits;                /* 0 = not given; whole or half (vecinfer 1.5) */
    int group_size, residual_length, n_sink_tokens, jl_dim; /* codec options; -1 = not given */
    int has_seed;
    uint64_t seed; /* codec rotation / sketch seed when has_seed */
    /* per-layer widths: n entries (0 = not given); a pattern (from "+kbDIGITS") is spread over
     * the model's depth (layer i of n takes entry floor(i * len / n)), an explicit list must
     * have one entry per layer */
    int n_k_bpl, n_v_bpl;
    int k_bpl_pattern, v_bpl_pattern;
    int k_bpl[VQ_KV_MAX_LAYERS], v_bpl[VQ_KV_MAX_LAYERS];
    int fp16_first, fp16_last; /* fp16 edge layers (0 = none) */
    double ratequant;          /* RateQuant mean key bits; 0 = off */
    int rq_values;             /* enum vq_kv_rq_values */
    int calib_tokens;          /* tokens of text when RateQuant weights are built; 0 = default */
    float outlier_token_k;     /* vq_cache_params.outlier_token_k; < 0 = not given */
    int n_outlier_channels, n_calib_tokens; /* vq_cache_params fields; -1 = not given */
    int stream_window, stream_sinks;        /* -1 = not given */
    int key_scales;                         /* 0..2; -1 = not given */
    int key_channel_bits;                   /* 0..2; -1 = not given */
    int preset; /* 1 + index of the preset the spec was parsed from (vq_kv_preset_get), else 0 */
};

/* The empty spec: nothing given (fp16 keys and values). */
VQ_API void vq_kv_spec_init(struct vq_kv_spec *s);
/* Parses a name (see above) into *s. Returns OK, or INVALID_ARG with a one-line reason in err
 * (cap bytes, NUL-terminated; may be NULL) that names the offending part and, for an unknown
 * name, the nearest valid one ("unknown KV config 'kv44': did you mean kv4?"). Only the
 * syntax, method names and ranges of the grammar are checked here; widths a method does not
 * accept are refused by vq_kv_spec_codecs / vq_kv_spec_cache_params. On error *s is the empty
 * spec. */
VQ_API vq_status vq_kv_spec_parse(const char *name, struct vq_kv_spec *s, char *err, size_t cap);
/* Writes the canonical name of s into out (cap bytes): the preset name when s is exactly a
 * preset's spec, else the config grammar ("turboquant_mse-3", "kivi-4:turboquant_mse-4+g64",
 * ...). Returns the length, or -(length + 1) when cap is too small. Per-layer lists given
 * one entry per layer have no name ("+kbpl" / "+vbpl" is written and does not parse back). */
VQ_API int vq_kv_spec_name(const struct vq_kv_spec *s, char *out, size_t cap);
/* Key and value codec params of s (head_dim left at the codec default: the cache sets it).
 * Methods not given are fp16; widths not given are the method's default
 * (vq_method_default_bits), floor(ratequant) with RateQuant. Returns OK or INVALID_ARG with a
 * reason in err (a width outside the method's accepted widths, e.g. "key bits 7: polar
 * accepts 4 only"). */
VQ_API vq_status vq_kv_spec_codecs(const struct vq_kv_spec *s, struct vq_codec_params *key,
                                   struct vq_codec_params *value, char *err, size_t cap);
/* Sets the cache-level fields s gives (outlier tokens / channels, windows, sinks, key scales,
 * key channel bits, fp16 edge layers) in cp; leaves the others alone. */
VQ_API void vq_kv_spec_apply_modifiers(const struct vq_kv_spec *s, struct vq_cache_params *cp);
/* NULL if the modifiers of cp suit its key / value methods and head_dim, else a static
 * reason (the combinations vq_cache_create refuses with UNSUPPORTED). */
VQ_API const char *vq_kv_modifier_error(const struct vq_cache_params *cp);

/* Per-layer widths resolved for one model: arrays owned here (malloc), pointed to by the
 * cache params vq_kv_spec_cache_params filled; keep them until the cache (or context) is
 * created: vq_cache_create copies them. */
struct vq_kv_layer_bits {
    int n_layers;
    int *key_bits, *value_bits; /* (n_layers) or NULL when not per-layer */
    double ratequant_mean;      /* RateQuant mean key bits, 0 = off */
};
/* Frees the arrays of lb and zeroes it (NULL or zeroed: no-op). */
VQ_API void vq_kv_layer_bits_free(struct vq_kv_layer_bits *lb);
/* 1 when s needs per-layer weights to be resolved (RateQuant: the layers' key sensitivities,
 * e.g. vq_calib_sensitivities of a "ratequant" artifact), else 0. */
VQ_API int vq_kv_spec_needs_layer_weights(const struct vq_kv_spec *s);
/* Turns s into cache params for a model geometry: *out = vq_cache_params_default() with
 * n_layers, n_kv_heads, head_dim, the codecs (vq_kv_spec_codecs), the modifiers and the
 * per-layer widths (lists, patterns, fp16 edge layers; RateQuant allocates the key widths
 * over the widths the key codec accepts from layer_weights, n_layers entries, which may be
 * NULL only when vq_kv_spec_needs_layer_weights(s) is 0). lb receives the per-layer arrays
 * (caller frees with vq_kv_layer_bits_free, also after an error). max_tokens, page size and
 * threads stay at their defaults for the caller (or vq_ctx_create) to set. Returns OK,
 * INVALID_ARG (a reason in err: a list of the wrong length, a width a codec refuses, fp16
 * layers beyond the model, modifiers that do not combine, missing layer weights),
 * NO_MEMORY. */
VQ_API vq_status vq_kv_spec_cache_params(const struct vq_kv_spec *s, int n_layers, int n_kv_heads,
                                         int head_dim, const double *layer_weights,
                                         struct vq_cache_params *out, struct vq_kv_layer_bits *lb,
                                         char *err, size_t cap);
/* Exact KV bits per element (keys and values together: codes, side data, windows, centering
 * and scale vectors) of s on a geometry after n_tokens tokens (RateQuant with equal layer
 * weights). Returns OK or the status of vq_kv_spec_cache_params. */
VQ_API vq_status vq_kv_spec_bits_per_elem(const struct vq_kv_spec *s, int n_layers, int n_kv_heads,
                                          int head_dim, int64_t n_tokens, double *bits);

/* A cache of the named config kv for a geometry, in one call: vq_kv_spec_parse +
 * vq_kv_spec_cache_params (no layer weights: RateQuant names are refused; calibrated methods
 * run on their data-free fallback unless calibration is attached the long way) +
 * vq_cache_create with max_tokens and n_threads (0 = vq_threads_resolve's default). Returns
 * NULL with *st (INVALID_ARG with the reason in err, or vq_cache_create's status). Configs
 * whose keys learn from queries (key_channel_bits, key_scales = 2, as kv5..kv2 do) are best
 * shown the first batch's queries with vq_cache_observe_queries before its first append.
 * Caller-owned (vq_cache_free). */
VQ_API vq_cache *vq_cache_create_kv(const char *kv, int n_layers, int n_kv_heads, int head_dim,
                                    int64_t max_tokens, int n_threads, char *err, size_t cap,
                                    vq_status *st);
/* One side of the named config kv as a codec for vectors of head_dim: its key codec (role
 * VQ_ROLE_KEY) or value codec (VQ_ROLE_VALUE), as vq_kv_spec_codecs resolves it (cache-level
 * modifiers such as sinks, windows or key channel widths do not apply to a lone codec).
 * Returns NULL with *st (INVALID_ARG with the reason in err, or vq_codec_create's status).
 * Caller-owned (vq_codec_free). */
VQ_API vq_codec *vq_codec_create_kv(const char *kv, enum vq_role role, int head_dim, char *err,
                                    size_t cap, vq_status *st);

/* The named configurations. Presets (tier = 1) are the quality-per-bit choices "kv8" ...
 * "kv2": each the config with the lowest KL measured at <= max_bits bits/elem (K and V
 * together, side data included; docs/EVALUATION.md). The others (tier = 0) are fp16 (the
 * baseline) and the named configurations a `sweep` runs by default. */
struct vq_kv_preset_info {
    const char *name;        /* "kv4", "fp16", "turboquant_mse-3", ... (static storage) */
    const char *config;      /* what it stands for in the config grammar (static) */
    const char *description; /* one line (static) */
    double max_bits;         /* tier presets: the bits/elem budget; else 0 */
    int tier;                /* 1 = a kv preset, 0 = a named sweep configuration */
};
/* The known name nearest to name (edit distance, an adjacent swap counting as one edit) when
 * it is close enough to be a likely typo (at most a third of its length, at least one edit),
 * else NULL: among the method names when methods_only, else among the named configurations
 * and the methods. Static storage. For "did you mean ...?" messages. Thread-safe. */
VQ_API const char *vq_kv_nearest_name(const char *name, int methods_only);
/* Number of named configurations. */
VQ_API int vq_kv_preset_count(void);
/* Entry i (0 .. count-1): fp16 first, then the tier presets kv8 to kv2, then the other named
 * configurations. OK or INVALID_ARG. */
VQ_API vq_status vq_kv_preset_get(int i, struct vq_kv_preset_info *out);

/* ---------------------------------------------------------------------------------------- */
/* Synthetic vectors: the data of `veloxquant bench`.                                        */

/* The generator behind every number `veloxquant bench` prints (docs/BENCHMARK.md), public so
 * that a binding or another benchmark draws exactly the same vectors for the same seed and
 * shape instead of copying the generator. xorshift64 (shifts 13, 7, 17) gives uniforms
 * u = ((s >> 11) + 0.5) / 2^53 in (0, 1); a normal is (float)(sqrt(-2 ln u1) cos(2 pi u2)) from
 * two of them (no second value kept). Plain state, no hidden globals: a generator is used by
 * one thread at a time; distinct generators are independent. The sequence is part of the
 * contract (changing it changes the benchmark's published figures).
 *
 * `veloxquant bench --seed S --head-dim D --seq-len T --kv-heads H` draws, from
 * vq_synth_seed(S): keys vq_synth_keys(T*H rows), then values vq_synth_normal(T*H*D), then the
 * H queries vq_synth_normal(H*D), then the score-statistics queries; its cosine_k / cosine_v are
 * the mean cosines between the first min(T, 2048) rows (rounded down to the codec's block) of the
 * keys / values and their decoded codes (vq_codec_encode, vq_codec_decode), dot products summed
 * in double in index order. Calibrated methods first fit on a separate draw seeded with
 * S ^ 0x63616c6962 ("calib"). */
typedef struct vq_synth {
    uint64_t state;
} vq_synth;
/* Seeds g: state = seed * 0x9E3779B97F4A7C15 + 1 (mod 2^64). */
VQ_API void vq_synth_seed(vq_synth *g, uint64_t seed);
/* n i.i.d. N(0, 1) floats into x, in order. */
VQ_API void vq_synth_normal(vq_synth *g, float *x, int64_t n);
/* n synthetic key rows of d floats into x (row-major): N(0, 1) draws in order, plus 4.0f on the
 * channels j with j % max(d / 4, 1) == 3 (four channel-aligned outliers, as real keys have). */
VQ_API void vq_synth_keys(vq_synth *g, float *x, int64_t n, int d);

/* ---------------------------------------------------------------------------------------- */
/* Scalars.                                                                                  */

/* IEEE binary16 and bfloat16 conversion (round to nearest even). Thread-safe. */
VQ_API uint16_t vq_fp32_to_fp16(float f);
VQ_API float vq_fp16_to_fp32(uint16_t h);
VQ_API uint16_t vq_fp32_to_bf16(float f);
VQ_API float vq_bf16_to_fp32(uint16_t h);
/* vq_sf16: the 16-bit scale format of stored norms/scales: sign, 6-bit exponent (bias 31),
 * 9-bit mantissa, subnormals, no inf/NaN; |v| <= VQ_SF16_MAX, relative step 2^-9.
 * vq_fp32_to_sf16 saturates; callers check vq_sf16_fits() first. */
#define VQ_SF16_MAX 8581545984.0f /* 2^32 * (1 + 511/512) */
VQ_API uint16_t vq_fp32_to_sf16(float f);
VQ_API float vq_sf16_to_fp32(uint16_t h);
VQ_API int vq_sf16_fits(float f);

#ifdef __cplusplus
}
#endif
#endif /* VELOXQUANT_H */
