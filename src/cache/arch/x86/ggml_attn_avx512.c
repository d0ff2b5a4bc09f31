/*
 * ggml_attn_avx512.c — AVX-512 variants of the llama.cpp-identical fp16 attention kernels
 * (see ggml_attn.h): ggml's own AVX-512 sequences, bit-identical to the scalar references.
 */
#include <immintrin.h>

#include "cache/ggml_attn.h"
#include "cache/arch/x86/ggml_x86.h"

/* Score rows asked for this many rows ahead (4 KB at head_dim 64): pages are separate
 * allocations and the hardware prefetchers restart at every 4 KB boundary. */
#define VQ_PF_ROWS 32

void vq_ggml_dot_f16_avx512(const float *q, int G, const uint16_t *k, int d, int b1, float *out) {
    if (!b1) {
        enum { GM = 8 };
        for (int h0 = 0; h0 < G; h0 += GM) {
            const int g = G - h0 < GM ? G - h0 : GM;
            __m512 acc[GM];
            for (int h = 0; h < g; h++) acc[h] = _mm512_setzero_ps();
            for (int s = 0; s < d; s += 16) {
                const __m512 kv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + s)));
                for (int h = 0; h < g; h++)
                    acc[h] = _mm512_fmadd_ps(
                        kv, _mm512_loadu_ps(q + (size_t)(h0 + h) * (size_t)d + s), acc[h]);
            }
            for (int h = 0; h < g; h++) out[h0 + h] = _mm512_reduce_add_ps(acc[h]);
        }
        return;
    }
    const int np = d & ~63;
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * (size_t)d;
        __m512 x[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                       _mm512_setzero_ps()};
        for (int s = 0; s < np; s += 64)
            for (int j = 0; j < 4; j++)
                x[j] = _mm512_fmadd_ps(
                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + s + 16 * j))),
                    _mm512_loadu_ps(qh + s + 16 * j), x[j]);
        x[0] = _mm512_add_ps(x[0], x[2]);
        x[1] = _mm512_add_ps(x[1], x[3]);
        x[0] = _mm512_add_ps(x[0], x[1]);
        double sum = (double)_mm512_reduce_add_ps(x[0]);
        for (int i = np; i < d; i++) sum += (double)(_cvtsh_ss(k[i]) * qh[i]);
        out[h] = (float)sum;
    }
}

/* Four tokens' 16-lane accumulators reduced at once with the pairings of gcc's
 * _mm512_reduce_add_ps: (v[i+8] + v[i]), then (t[i+4] + t[i]), then (u0 + u2) + (u1 + u3);
 * the results land in lanes 0, 4, 8 and 12. */
static inline __m512 reduce16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
    const __m512 tab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0xEE),
                                     _mm512_shuffle_f32x4(a, b, 0x44));
    const __m512 tcd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0xEE),
                                     _mm512_shuffle_f32x4(c, d, 0x44));
    const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(tab, tcd, 0xDD),
                                   _mm512_shuffle_f32x4(tab, tcd, 0x88));
    const __m512 x = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
    return _mm512_add_ps(x, _mm512_permute_ps(x, 0xB1));
}

/* Scores of query rows h0 .. h0 + g - 1 against the 4 keys t .. t + 3 (batch order: one
 * 16-lane fma chain per row and key over d, reduce16x4, times scale). Each key is converted
 * once for the g rows. */
static inline __attribute__((always_inline)) void scores4(const float *q, const int g,
                                                          const uint16_t *k, int64_t t, int d,
                                                          float scale, float *w, size_t ws) {
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[6][4];
    for (int h = 0; h < g; h++)
        for (int r = 0; r < 4; r++) acc[h][r] = _mm512_setzero_ps();
    for (int s = 0; s < d; s += 16) {
        __m512 kv[4];
        for (int r = 0; r < 4; r++)
            kv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + (t + r) * d + s)));
        for (int h = 0; h < g; h++) {
            const __m512 qv = _mm512_loadu_ps(q + (size_t)h * (size_t)d + s);
            for (int r = 0; r < 4; r++) acc[h][r] = _mm512_fmadd_ps(kv[r], qv, acc[h][r]);
        }
    }
    for (int h = 0; h < g; h++) {
        const __m512 red = _mm512_permutexvar_ps(
            pick, reduce16x4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]));
        _mm_storeu_ps(w + (size_t)h * ws + (size_t)t,
                      _mm_mul_ps(_mm512_castps512_ps128(red), _mm_set1_ps(scale)));
    }
}

/* scores4 for b1 (ggml's vec_dot_f16: four 16-lane chains j over the 64-element chunks of d,
 * summed (x0 + x2) + (x1 + x3), then reduce16x4) for query rows h0 .. h0 + g - 1 against the
 * 4 keys t .. t + 3; each 16-element piece of a key is converted once for the g rows. */
static inline __attribute__((always_inline)) void scores4_b1(const float *q, const int g,
                                                             const uint16_t *k, int64_t t, int d,
                                                             float scale, float *w, size_t ws) {
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 y[6][4];
    for (int r = 0; r < 4; r++) {
        __m512 x[6][4];
        for (int h = 0; h < g; h++)
            for (int j = 0; j < 4; j++) x[h][j] = _mm512_setzero_ps();
        for (int s = 0; s < d; s += 64)
            for (int j = 0; j < 4; j++) {
                const __m512 kv = _mm512_cvtph_ps(
                    _mm256_loadu_si256((const __m256i *)(k + (t + r) * d + s + 16 * j)));
                for (int h = 0; h < g; h++)
                    x[h][j] = _mm512_fmadd_ps(
                        kv, _mm512_loadu_ps(q + (size_t)h * (size_t)d + s + 16 * j), x[h][j]);
            }
        for (int h = 0; h < g; h++)
            y[h][r] = _mm512_add_ps(_mm512_add_ps(x[h][0], x[h][2]),
                                    _mm512_add_ps(x[h][1], x[h][3]));
    }
    for (int h = 0; h < g; h++) {
        const __m512 red = _mm512_permutexvar_ps(pick,
                                                 reduce16x4(y[h][0], y[h][1], y[h][2], y[h][3]));
        _mm_storeu_ps(w + (size_t)h * ws + (size_t)t,
                      _mm_mul_ps(_mm512_castps512_ps128(red), _mm_set1_ps(scale)));
    }
}

/* scores4 (b1 = 0) or scores4_b1 for g (1..6) rows: the row count a compile-time constant. */
static inline __attribute__((always_inline)) void scores4_g(const float *q, int g,
                                                            const uint16_t *k, int64_t t, int d,
                                                            int b1, float scale, float *w,
                                                            size_t ws) {
#define VQ_SCORES4(G) \
    b1 ? scores4_b1(q, G, k, t, d, scale, w, ws) : scores4(q, G, k, t, d, scale, w, ws)
    switch (g) {
    case 1: VQ_SCORES4(1); break;
    case 2: VQ_SCORES4(2); break;
    case 3: VQ_SCORES4(3); break;
    case 4: VQ_SCORES4(4); break;
    case 5: VQ_SCORES4(5); break;
    default: VQ_SCORES4(6); break;
    }
#undef VQ_SCORES4
}

void vq_ggml_scores_f16_avx512(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                               float scale, float *w, size_t ws) {
    int64_t t = 0;
    /* any number of rows (a batch's queries, a decode step's GQA group), 6 at a time against
     * 4 keys: 24 accumulators (b1: d a multiple of 64, else the rows one by one below) */
    if (!b1 || d % 64 == 0)
        for (; t + 4 <= n; t += 4) {
            if (b1 && t + VQ_PF_ROWS + 4 <= n) /* decode: 4 rows, VQ_PF_ROWS ahead */
                for (int64_t o = 0; o < 4 * (int64_t)d; o += 32)
                    vq_prefetch(k + (t + VQ_PF_ROWS) * d + o);
            for (int h0 = 0; h0 < G; h0 += 6)
                scores4_g(q + (size_t)h0 * (size_t)d, G - h0 < 6 ? G - h0 : 6, k, t, d, b1, scale,
                          w + (size_t)h0 * ws, ws);
        }
    if (t < n)
        vq_ggml_scores_rows(vq_ggml_dot_f16_avx512, q, G, k + t * d, n - t, d, b1, scale, w + t,
                            ws);
}

void vq_ggml_scale_round_f16_avx512(float *x, int64_t n, float scale) {
    int64_t i = 0;
    const __m512 s = _mm512_set1_ps(scale);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(
            x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(x + i), s),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) x[i] = _cvtsh_ss(_cvtss_sh(x[i] * scale, _MM_FROUND_TO_NEAREST_INT));
}

double vq_ggml_softmax_exp_avx512(float *w, int64_t n, float max) {
    double sum = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = ggml_v_expf512(_mm512_sub_ps(_mm512_loadu_ps(w + i), _mm512_set1_ps(max)));
        _mm512_storeu_ps(w + i, v);
        sum += (double)_mm512_reduce_add_ps(v);
    }
    return sum;
}

/* One slot's chain for heads h0 .. h0 + NG - 1 and channels j0 .. j0 + 16 NJ - 1 over the
 * tokens first, first + S, ... < n (NG, NJ compile-time: the accumulators stay in registers). */
static inline __attribute__((always_inline)) void pv_slot(float *acc, const uint16_t *v,
                                                          const float *p, size_t ps, int64_t first,
                                                          int64_t n, int d, int S, int slot, int j0,
                                                          int h0, const int NG, const int NJ) {
    __m512 a[4][4];
    float *const blk = acc + (size_t)slot * (size_t)d + (size_t)j0; /* head h: + h S d */
    for (int h = 0; h < NG; h++)
        for (int j = 0; j < NJ; j++)
            a[h][j] = _mm512_loadu_ps(blk + (size_t)(h0 + h) * (size_t)S * (size_t)d + 16 * j);
    for (int64_t t = first; t < n; t += S) {
        __m512 vv[4];
        for (int j = 0; j < NJ; j++)
            vv[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + t * d + j0 + 16 * j)));
        for (int h = 0; h < NG; h++) {
            const __m512 pt = _mm512_set1_ps(p[(size_t)(h0 + h) * ps + (size_t)t]);
            for (int j = 0; j < NJ; j++) a[h][j] = _mm512_fmadd_ps(vv[j], pt, a[h][j]);
        }
    }
    for (int h = 0; h < NG; h++)
        for (int j = 0; j < NJ; j++)
            _mm512_storeu_ps(blk + (size_t)(h0 + h) * (size_t)S * (size_t)d + 16 * j, a[h][j]);
}

/* Slot-major: each of the S lane chains (tokens t = slot mod S) runs in registers over the
 * tokens of this call, in ascending order, so every chain sees exactly the fma sequence of the
 * token-major reference. Blocks of up to 4 heads x 64 channels, specialized by size. */
void vq_ggml_pv_f16_avx512(float *acc, int G, const uint16_t *v, const float *p, size_t ps,
                           int64_t t0, int64_t n, int d, int b1, int s0, int s1) {
    const int S = b1 ? 64 : 16;
    for (int slot = s0; slot < s1; slot++) {
        const int64_t first = (int64_t)((slot - (t0 & (S - 1)) + S) & (S - 1));
        if (slot + VQ_PV_PF_SLOTS < s1) pv_prefetch_slot(v, t0, n, d, S, slot + VQ_PV_PF_SLOTS);
        if (first >= n) continue;
        for (int j0 = 0; j0 < d; j0 += 64) {
            const int nj = d - j0 < 64 ? (d - j0) / 16 : 4;
            for (int h0 = 0; h0 < G; h0 += 4) {
                const int g = G - h0 < 4 ? G - h0 : 4;
#define PV_SLOT(NG, NJ) pv_slot(acc, v, p, ps, first, n, d, S, slot, j0, h0, NG, NJ)
#define PV_NJ(NG) \
    do { \
        switch (nj) { \
        case 1: PV_SLOT(NG, 1); break; \
        case 2: PV_SLOT(NG, 2); break; \
        case 3: PV_SLOT(NG, 3); break; \
        default: PV_SLOT(NG, 4); break; \
        } \
    } while (0)
                switch (g) {
                case 1: PV_NJ(1); break;
                case 2: PV_NJ(2); break;
                case 3: PV_NJ(3); break;
                default: PV_NJ(4); break;
                }
#undef PV_NJ
#undef PV_SLOT
            }
        }
    }
}
