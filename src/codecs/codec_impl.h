/*
 * codec_impl.h — the small vtable every KV codec implements, and the registry.
 * A codec file (src/codecs/<method>.c) defines one `const struct vq_codec_i vq_codec_<method>`
 * and is listed in codec.c's registry. Kernels: a scalar `_ref` version always exists; ISA
 * variants live in src/codecs/arch/x86/<method>_{avx2,avx512}.c and are picked at create time
 * from params.isa (resolved through vq_isa_resolve).
 */
#ifndef VQ_CODEC_IMPL_H
#define VQ_CODEC_IMPL_H

#include "core/core.h"

/* Everything the library and the CLI know about a method lives here: adding a method means one
 * codec file (this vtable + kernels), its test and one registry line in codec.c. The traits
 * below are published through vq_method_info_get (methods.c); tests/unit/test_codec_api.c
 * checks that min_bits..max_bits is exactly what init accepts. */
struct vq_codec_i {
    const char *name;         /* CLI name, e.g. "turboquant_mse" */
    const char *params_doc;   /* e.g. "bits=1..4 unbiased_scale" */
    const char *bits_formula; /* e.g. "b + 16/d" */
    int needs_calibration;    /* must equal !!(flags & VQ_METHOD_F_CALIBRATION) */
    int default_bits;         /* the width every command uses when none is given */
    int min_bits, max_bits;   /* integer widths init accepts (min = max: bits is ignored) */
    double frac_bits;         /* one non-integer width (needs set_bits / bits_of); 0 = none */
    unsigned flags;           /* VQ_METHOD_F_* (veloxquant.h) */
    /* Optional (NULL = plain p->bits): sets the codec-specific fields of a width already
     * checked against the traits, and reads the nominal width back. */
    void (*set_bits)(struct vq_codec_params *p, double bits);
    double (*bits_of)(const struct vq_codec_params *p);
    /* Validates p and fills c->impl / c->block_tokens / c->block_bytes / c->query_bytes /
     * c->acc_floats and the kernel pointers below. */
    vq_status (*init)(struct vq_codec *c);
    void (*destroy)(struct vq_codec *c);
    /* Optional (NULL = the scalar kernels are the reference): sets the kernel pointers of an
     * initialised codec to the scalar reference (_ref) kernels (vq_codec_use_ref_kernels). */
    void (*use_ref_kernels)(struct vq_codec *c);
};

struct vq_codec {
    struct vq_codec_params p; /* resolved parameters */
    const struct vq_codec_i *iface;
    enum vq_isa isa; /* resolved variant */
    int block_tokens;
    size_t block_bytes;
    size_t query_bytes;
    size_t acc_floats;
    void *impl; /* codec-private state (rotation, codebooks, sketch) */
    /* kernels, set by init (may depend on isa) */
    vq_status (*encode)(const struct vq_codec *c, const float *x, int64_t n_blocks, uint8_t *dst);
    void (*decode)(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x);
    void (*prepare_query)(const struct vq_codec *c, const float *q, void *qs);
    void (*score)(const struct vq_codec *c, const void *qs, const uint8_t *codes, int64_t n_tokens,
                  float *scores);
    /* the most queries (weight vectors) score_multi / accumulate_multi take in one call
     * (0: 4) */
    int multi_max;
    /* optional (NULL: score per query): nq (1..multi_max) prepared queries over the same
     * codes, each score bit-identical to score's for that query alone */
    void (*score_multi)(const struct vq_codec *c, const void *const *qs, int nq,
                        const uint8_t *codes, int64_t n_tokens, float *const *scores);
    void (*accumulate)(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                       const float *w, float *acc);
    /* optional (NULL: accumulate per weight vector): nq (1..multi_max) weight vectors over
     * the same codes into their own accumulators, each the same bits as accumulate's alone */
    void (*accumulate_multi)(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                             const float *const *w, int nq, float *const *acc);
    void (*finish)(const struct vq_codec *c, const float *acc, float *out);
};

/* vq_codec_score for nq >= 1 prepared queries qs[j] over the same codes into scores[j]: the
 * codec's score_multi in groups of up to multi_max queries where it has one, else one score
 * per query; the same bits as nq vq_codec_score calls. Hot path: preconditions are asserts. */
void vq_codec_score_multi(const vq_codec *c, const void *const *qs, int nq, const void *codes,
                          int64_t n_tokens, float *const *scores);

/* vq_codec_accumulate for nq >= 1 weight vectors w[j] into acc[j] over the same codes, in
 * groups of up to multi_max where the codec has accumulate_multi; the same bits as nq calls. */
void vq_codec_accumulate_multi(const vq_codec *c, const void *codes, int64_t n_tokens,
                               const float *const *w, int nq, float *const *acc);

/* Registry lookup (NULL if the method has no implementation in this build). */
const struct vq_codec_i *vq_codec_iface(enum vq_method m);

#endif
