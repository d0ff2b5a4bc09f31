/*
 * fuzz_codec.c — libFuzzer target for the codecs' round trip on every ISA against the reference.
 * The input picks a method, width, head size, role and block count, then the vectors (finite
 * mostly, NaN / Inf now and then). The scalar codec with its reference kernels is the reference;
 * for every ISA this CPU has, a codec of the same parameters must accept exactly what the
 * reference accepts (same status), encode deterministically (twice, same bytes), decode the
 * reference's codes to the reference's vectors and score a query against them to the
 * reference's scores (within float rounding of the SIMD sums), and its own round trip must not
 * be much worse than the reference's. Replayed over fuzz/corpus/codec/ by ctest
 * (replay_fuzz_codec).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "veloxquant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const enum vq_method METHODS[] = {
    VQ_METHOD_FP16,      VQ_METHOD_FP32,     VQ_METHOD_TURBOQUANT_MSE, VQ_METHOD_TURBOQUANT_PROD,
    VQ_METHOD_QJL,       VQ_METHOD_POLAR,    VQ_METHOD_TURBOQUANT_RVQ, VQ_METHOD_KIVI,
    VQ_METHOD_KIVI_SINK, VQ_METHOD_VECINFER, VQ_METHOD_SPECTRAL,       VQ_METHOD_INT8,
};
enum { N_METHODS = sizeof METHODS / sizeof METHODS[0] };
static const int DIMS[] = {8, 16, 24, 32, 48, 64, 96, 128};

/* Creates a codec of p on isa (scalar with reference kernels when ref); NULL if refused. */
static vq_codec *make(struct vq_codec_params p, enum vq_isa isa, int ref, vq_status *st) {
    p.isa = isa;
    vq_codec *c = vq_codec_create(&p, st);
    if (c && ref) (void)vq_codec_use_ref_kernels(c); /* UNSUPPORTED: its kernels are the ref */
    return c;
}

static double norm2(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 6) return 0;
    struct vq_codec_params p = vq_codec_params_default();
    p.method = METHODS[data[0] % N_METHODS];
    p.bits = 1 + data[1] % 8;
    p.head_dim = DIMS[data[2] % 8];
    p.role = data[3] & 1 ? VQ_ROLE_VALUE : VQ_ROLE_KEY;
    p.seed = data[3] >> 1;
    if (data[3] & 2) p.group_size = 8, p.residual_length = 16;
    const int n_blocks = 1 + data[4] % 3;
    const int nonfinite = data[5] == 0xff;
    data += 6;
    size -= 6;
    vq_status st;
    vq_codec *rc = make(p, VQ_ISA_SCALAR, 1, &st);
    if (!rc) {
        if (st == VQ_STATUS_OK) abort();
        /* refused parameters are refused on every ISA alike */
        for (int isa = VQ_ISA_SCALAR + 1; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_isa_available((enum vq_isa)isa)) continue;
            vq_codec *c = make(p, (enum vq_isa)isa, 0, &st);
            if (c) abort();
        }
        return 0;
    }
    const int d = p.head_dim;
    const int64_t nt = (int64_t)n_blocks * vq_codec_block_tokens(rc);
    if (nt > 4096) {
        vq_codec_free(rc);
        return 0;
    }
    const size_t nf = (size_t)nt * (size_t)d, bytes = (size_t)n_blocks * vq_codec_block_bytes(rc);
    float *x = malloc(nf * sizeof *x), *yr = malloc(nf * sizeof *yr), *y = malloc(nf * sizeof *y);
    float *q = malloc((size_t)d * sizeof *q);
    float *sr = malloc((size_t)nt * sizeof *sr), *s = malloc((size_t)nt * sizeof *s);
    uint8_t *cr = malloc(bytes), *c1 = malloc(bytes), *c2 = malloc(bytes);
    if (!x || !yr || !y || !q || !sr || !s || !cr || !c1 || !c2) abort();
    for (size_t i = 0; i < nf; i++) {
        const int8_t v = i < size ? (int8_t)data[i] : (int8_t)(i * 37u);
        x[i] = (float)v / 8.0f;
    }
    if (nonfinite && nf > 3) x[nf / 2] = NAN;
    for (int i = 0; i < d; i++) q[i] = (float)((i * 7) % 11) - 5.0f;
    const vq_status sref = vq_codec_encode(rc, x, nt, cr);
    double err_ref = 0;
    void *qs = NULL;
    if (sref == VQ_STATUS_OK) {
        if (vq_codec_decode(rc, cr, nt, yr) != VQ_STATUS_OK) abort();
        for (size_t i = 0; i < nf; i++) err_ref += ((double)yr[i] - x[i]) * ((double)yr[i] - x[i]);
        qs = malloc(vq_codec_query_bytes(rc) ? vq_codec_query_bytes(rc) : 1);
        if (!qs) abort();
        vq_codec_prepare_query(rc, q, qs);
        vq_codec_score(rc, qs, cr, nt, sr);
    }
    const double xn = norm2(x, nf), qn = sqrt(norm2(q, (size_t)d));
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        vq_codec *c = make(p, (enum vq_isa)isa, 0, &st);
        if (!c || vq_codec_block_bytes(c) != vq_codec_block_bytes(rc) ||
            vq_codec_block_tokens(c) != vq_codec_block_tokens(rc))
            abort();
        if (vq_codec_encode(c, x, nt, c1) != sref) abort();
        if (sref != VQ_STATUS_OK) {
            vq_codec_free(c);
            continue;
        }
        if (vq_codec_encode(c, x, nt, c2) != VQ_STATUS_OK || memcmp(c1, c2, bytes)) abort();
        /* the reference's codes decode to the reference's vectors */
        if (vq_codec_decode(c, cr, nt, y) != VQ_STATUS_OK) abort();
        for (int64_t t = 0; t < nt; t++) {
            const float *a = yr + t * d, *b = y + t * d;
            const double tol = 1e-4 * (1.0 + sqrt(norm2(a, (size_t)d)));
            for (int i = 0; i < d; i++)
                if (!(fabs((double)a[i] - b[i]) <= tol)) abort();
        }
        /* and score to the reference's scores */
        void *qi = malloc(vq_codec_query_bytes(c) ? vq_codec_query_bytes(c) : 1);
        if (!qi) abort();
        vq_codec_prepare_query(c, q, qi);
        vq_codec_score(c, qi, cr, nt, s);
        for (int64_t t = 0; t < nt; t++) {
            const double tol = 2e-3 * (1.0 + qn * sqrt(norm2(yr + t * d, (size_t)d)));
            if (!(fabs((double)sr[t] - s[t]) <= tol)) abort();
        }
        free(qi);
        /* its own round trip: no worse than the reference's, up to rounding of the codes */
        if (vq_codec_decode(c, c1, nt, y) != VQ_STATUS_OK) abort();
        double err = 0;
        for (size_t i = 0; i < nf; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        if (!(err <= 1.5 * err_ref + 1e-3 * (xn + 1.0))) abort();
        vq_codec_free(c);
    }
    free(qs);
    free(x);
    free(yr);
    free(y);
    free(q);
    free(sr);
    free(s);
    free(cr);
    free(c1);
    free(c2);
    vq_codec_free(rc);
    return 0;
}
