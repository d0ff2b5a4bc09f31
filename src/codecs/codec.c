/*
 * codec.c — the codec registry and every public vq_codec_* entry point.
 *
 * The registry is a table indexed by enum vq_method holding the codec vtables
 * (struct vq_codec_i, codec_impl.h). A method whose slot is NULL is known by name but has no
 * implementation in this build (vq_codec_create returns VQ_STATUS_UNSUPPORTED).
 *
 * Adding a codec: define `const struct vq_codec_i vq_codec_<method>` in
 * src/codecs/<method>.c, add the extern declaration below and its slot in vq_registry_.
 *
 * Contract for iface->init (called by vq_codec_create with c->p, c->iface and c->isa filled
 * and everything else zero): validate the method-specific parameters (returning
 * INVALID_ARG / UNSUPPORTED), resolve defaults in c->p, and fill block_tokens, block_bytes,
 * query_bytes, acc_floats, impl and all six kernel pointers. On failure init frees whatever
 * it allocated itself (destroy is NOT called after a failed init). After a successful init,
 * destroy (if non-NULL) is called exactly once by vq_codec_free.
 */
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"

/* ---- registry ------------------------------------------------------------------------ */

extern const struct vq_codec_i vq_codec_fp16;
extern const struct vq_codec_i vq_codec_fp32;
extern const struct vq_codec_i vq_codec_turboquant_prod;
extern const struct vq_codec_i vq_codec_qjl;
extern const struct vq_codec_i vq_codec_polar;
extern const struct vq_codec_i vq_codec_kivi;
extern const struct vq_codec_i vq_codec_kivi_sink;
extern const struct vq_codec_i vq_codec_turboquant_mse;
extern const struct vq_codec_i vq_codec_turboquant_rvq;
extern const struct vq_codec_i vq_codec_vecinfer;
extern const struct vq_codec_i vq_codec_spectral;
extern const struct vq_codec_i vq_codec_int8;

static const struct vq_codec_i *const vq_registry_[VQ_METHOD_COUNT] = {
    [VQ_METHOD_FP16] = &vq_codec_fp16,
    [VQ_METHOD_FP32] = &vq_codec_fp32,
    [VQ_METHOD_TURBOQUANT_PROD] = &vq_codec_turboquant_prod,
    [VQ_METHOD_QJL] = &vq_codec_qjl,
    [VQ_METHOD_POLAR] = &vq_codec_polar,
    [VQ_METHOD_KIVI] = &vq_codec_kivi,
    [VQ_METHOD_KIVI_SINK] = &vq_codec_kivi_sink,
    [VQ_METHOD_TURBOQUANT_MSE] = &vq_codec_turboquant_mse,
    [VQ_METHOD_TURBOQUANT_RVQ] = &vq_codec_turboquant_rvq,
    [VQ_METHOD_VECINFER] = &vq_codec_vecinfer,
    [VQ_METHOD_SPECTRAL] = &vq_codec_spectral,
    [VQ_METHOD_INT8] = &vq_codec_int8,
};

/* Method names; every enum value has one, whether or not it is implemented. */
static const char *const vq_method_names_[VQ_METHOD_COUNT] = {
    [VQ_METHOD_FP16] = "fp16",
    [VQ_METHOD_FP32] = "fp32",
    [VQ_METHOD_TURBOQUANT_MSE] = "turboquant_mse",
    [VQ_METHOD_TURBOQUANT_PROD] = "turboquant_prod",
    [VQ_METHOD_QJL] = "qjl",
    [VQ_METHOD_POLAR] = "polar",
    [VQ_METHOD_TURBOQUANT_RVQ] = "turboquant_rvq",
    [VQ_METHOD_KIVI] = "kivi",
    [VQ_METHOD_KIVI_SINK] = "kivi_sink",
    [VQ_METHOD_VECINFER] = "vecinfer",
    [VQ_METHOD_SPECTRAL] = "spectral",
    [VQ_METHOD_INT8] = "int8",
};

/* Returns the vtable of method m, or NULL if m is out of range or not built. Thread-safe. */
const struct vq_codec_i *vq_codec_iface(enum vq_method m) {
    if ((int)m < 0 || (int)m >= VQ_METHOD_COUNT) return NULL;
    return vq_registry_[m];
}

/* ---- names and defaults ---------------------------------------------------------------- */

struct vq_codec_params vq_codec_params_default(void) {
    struct vq_codec_params p;
    memset(&p, 0, sizeof p);
    p.method = VQ_METHOD_FP16;
    p.role = VQ_ROLE_KEY;
    p.head_dim = 128;
    p.bits = 4;
    p.seed = 42;
    p.unbiased_scale = 1;
    p.jl_dim = 0;
    p.group_size = 32;
    p.residual_length = 128;
    p.n_sink_tokens = 5;
    p.polar_bits[0] = 4;
    p.polar_bits[1] = 2;
    p.polar_bits[2] = 2;
    p.polar_bits[3] = 2;
    p.isa = VQ_ISA_AUTO;
    p.calib = NULL;
    p.calib_layer = 0;
    p.pq_codeword_bits = 0;
    p.pq_subvec_dim = 0;
    p.spectral_waterfill = 1;
    p.channel_bits = NULL;
    return p;
}

const char *vq_method_name(enum vq_method m) {
    if ((int)m < 0 || (int)m >= VQ_METHOD_COUNT) return NULL;
    return vq_method_names_[m];
}

vq_status vq_method_from_name(const char *name, enum vq_method *out) {
    if (!name || !out) return VQ_STATUS_INVALID_ARG;
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (vq_method_names_[m] && strcmp(vq_method_names_[m], name) == 0) {
            *out = (enum vq_method)m;
            return VQ_STATUS_OK;
        }
    }
    return VQ_STATUS_NOT_FOUND;
}

/* ---- create / free ------------------------------------------------------------------------ */

static vq_codec *vq_codec_fail_(vq_status *st, vq_status code) {
    if (st) *st = code;
    return NULL;
}

vq_codec *vq_codec_create(const struct vq_codec_params *p, vq_status *st) {
    if (!p) return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);
    if ((int)p->method < 0 || (int)p->method >= VQ_METHOD_COUNT)
        return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);
    if (p->role != VQ_ROLE_KEY && p->role != VQ_ROLE_VALUE)
        return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);
    if (p->head_dim < 8 || p->head_dim > 1024 || p->head_dim % 8 != 0)
        return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);
    if ((int)p->isa < 0 || (int)p->isa >= VQ_ISA_COUNT)
        return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);
    if (p->isa != VQ_ISA_AUTO && !vq_isa_available(p->isa))
        return vq_codec_fail_(st, VQ_STATUS_UNSUPPORTED);
    const struct vq_codec_i *iface = vq_codec_iface(p->method);
    if (!iface || !iface->init) return vq_codec_fail_(st, VQ_STATUS_UNSUPPORTED);
    /* per-channel widths: only codecs with per-channel key groups read them (kivi.c) */
    if (p->channel_bits && !(iface->flags & VQ_METHOD_F_PER_CHANNEL_KEYS))
        return vq_codec_fail_(st, VQ_STATUS_INVALID_ARG);

    struct vq_codec *c = vq_alloc(sizeof *c);
    if (!c) return vq_codec_fail_(st, VQ_STATUS_NO_MEMORY);
    c->p = *p;
    c->iface = iface;
    c->isa = vq_isa_resolve(p->isa);
    c->p.isa = c->isa;
    c->score_multi = NULL; /* optional kernels: init sets them where it has them */
    c->accumulate_multi = NULL;
    vq_status s = iface->init(c);
    if (s != VQ_STATUS_OK) {
        vq_free(c);
        return vq_codec_fail_(st, s);
    }
    /* The vtable contract: a successful init fills every field the dispatchers rely on. */
    if (c->block_tokens < 1 || c->block_bytes == 0 || c->acc_floats == 0 || !c->encode ||
        !c->decode || !c->prepare_query || !c->score || !c->accumulate || !c->finish) {
        vq_codec_free(c);
        return vq_codec_fail_(st, VQ_STATUS_INTERNAL);
    }
    if (st) *st = VQ_STATUS_OK;
    return c;
}

void vq_codec_free(vq_codec *c) {
    if (!c) return;
    if (c->iface && c->iface->destroy) c->iface->destroy(c);
    vq_free(c);
}

/* ---- queries ------------------------------------------------------------------------------ */

const struct vq_codec_params *vq_codec_params_get(const vq_codec *c) { return c ? &c->p : NULL; }

int vq_codec_block_tokens(const vq_codec *c) { return c ? c->block_tokens : 0; }

size_t vq_codec_block_bytes(const vq_codec *c) { return c ? c->block_bytes : 0; }

double vq_codec_bits_per_elem(const vq_codec *c) {
    if (!c) return 0.0;
    return 8.0 * (double)c->block_bytes / ((double)c->block_tokens * (double)c->p.head_dim);
}

size_t vq_codec_query_bytes(const vq_codec *c) { return c ? c->query_bytes : 0; }

size_t vq_codec_acc_floats(const vq_codec *c) { return c ? c->acc_floats : 0; }

/* ---- encode / decode -------------------------------------------------------------------- */

vq_status vq_codec_encode(const vq_codec *c, const float *x, int64_t n_tokens, void *dst) {
    if (!c || n_tokens < 0 || n_tokens % c->block_tokens != 0) return VQ_STATUS_INVALID_ARG;
    if (n_tokens == 0) return VQ_STATUS_OK;
    if (!x || !dst) return VQ_STATUS_INVALID_ARG;
    return c->encode(c, x, n_tokens / c->block_tokens, (uint8_t *)dst);
}

vq_status vq_codec_decode(const vq_codec *c, const void *src, int64_t n_tokens, float *x) {
    if (!c || n_tokens < 0 || n_tokens % c->block_tokens != 0) return VQ_STATUS_INVALID_ARG;
    if (n_tokens == 0) return VQ_STATUS_OK;
    if (!src || !x) return VQ_STATUS_INVALID_ARG;
    c->decode(c, (const uint8_t *)src, n_tokens / c->block_tokens, x);
    return VQ_STATUS_OK;
}

/* ---- fused attention kernels (hot: preconditions are asserts, not statuses) ------------- */

void vq_codec_prepare_query(const vq_codec *c, const float *q, void *qs) {
    VQ_ASSERT(c && q && qs);
    c->prepare_query(c, q, qs);
}

void vq_codec_score(const vq_codec *c, const void *qs, const void *codes, int64_t n_tokens,
                    float *scores) {
    VQ_ASSERT(c && n_tokens >= 0 && n_tokens % c->block_tokens == 0);
    if (n_tokens == 0) return;
    VQ_ASSERT(qs && codes && scores);
    c->score(c, qs, (const uint8_t *)codes, n_tokens, scores);
}

/* The most queries one score_multi / accumulate_multi call of c takes (codec_impl.h). */
static inline int multi_max(const vq_codec *c) { return c->multi_max > 0 ? c->multi_max : 4; }

void vq_codec_score_multi(const vq_codec *c, const void *const *qs, int nq, const void *codes,
                          int64_t n_tokens, float *const *scores) {
    VQ_ASSERT(c && nq >= 1 && n_tokens >= 0 && n_tokens % c->block_tokens == 0);
    if (n_tokens == 0) return;
    VQ_ASSERT(qs && codes && scores);
    if (!c->score_multi || nq == 1) {
        for (int j = 0; j < nq; j++)
            c->score(c, qs[j], (const uint8_t *)codes, n_tokens, scores[j]);
        return;
    }
    const int mx = multi_max(c);
    for (int j = 0; j < nq; j += mx)
        c->score_multi(c, qs + j, nq - j < mx ? nq - j : mx, (const uint8_t *)codes, n_tokens,
                       scores + j);
}

void vq_codec_accumulate(const vq_codec *c, const void *codes, int64_t n_tokens, const float *w,
                         float *acc) {
    VQ_ASSERT(c && n_tokens >= 0 && n_tokens % c->block_tokens == 0);
    if (n_tokens == 0) return;
    VQ_ASSERT(codes && w && acc);
    c->accumulate(c, (const uint8_t *)codes, n_tokens, w, acc);
}

void vq_codec_accumulate_multi(const vq_codec *c, const void *codes, int64_t n_tokens,
                               const float *const *w, int nq, float *const *acc) {
    VQ_ASSERT(c && nq >= 1 && n_tokens >= 0 && n_tokens % c->block_tokens == 0);
    if (n_tokens == 0) return;
    VQ_ASSERT(codes && w && acc);
    if (!c->accumulate_multi || nq == 1) {
        for (int j = 0; j < nq; j++)
            c->accumulate(c, (const uint8_t *)codes, n_tokens, w[j], acc[j]);
        return;
    }
    const int mx = multi_max(c);
    for (int j = 0; j < nq; j += mx)
        c->accumulate_multi(c, (const uint8_t *)codes, n_tokens, w + j, nq - j < mx ? nq - j : mx,
                            acc + j);
}

void vq_codec_finish(const vq_codec *c, const float *acc, float *out) {
    VQ_ASSERT(c && acc && out);
    c->finish(c, acc, out);
}

vq_status vq_codec_use_ref_kernels(vq_codec *c) {
    if (!c) return VQ_STATUS_INVALID_ARG;
    if (!c->iface->use_ref_kernels) return VQ_STATUS_UNSUPPORTED;
    c->iface->use_ref_kernels(c);
    return VQ_STATUS_OK;
}
