/*
 * ggml_attn_avx2.c — AVX2/FMA/F16C twins of the llama.cpp-identical fp16 attention kernels
 * (see ggml_attn.h): ggml's AVX-512 sequences on two 8-lane halves, bit-identical to the
 * scalar references and the AVX-512 variants.
 */
#include <immintrin.h>

#include "cache/ggml_attn.h"
#include "cache/arch/x86/ggml_x86.h"

/* gcc's _mm512_reduce_add_ps order on lanes lo (0..7) and hi (8..15). */
static inline float reduce16(__m256 lo, __m256 hi) { return hsum256(_mm256_add_ps(hi, lo)); }

static inline __m256 ld_h8(const uint16_t *k) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)k));
}

void vq_ggml_dot_f16_avx2(const float *q, int G, const uint16_t *k, int d, int b1, float *out) {
    if (!b1) {
        enum { GM = 4 };
        for (int h0 = 0; h0 < G; h0 += GM) {
            const int g = G - h0 < GM ? G - h0 : GM;
            __m256 lo[GM], hi[GM];
            for (int h = 0; h < g; h++) lo[h] = hi[h] = _mm256_setzero_ps();
            for (int s = 0; s < d; s += 16) {
                const __m256 k0 = ld_h8(k + s), k1 = ld_h8(k + s + 8);
                for (int h = 0; h < g; h++) {
                    const float *qh = q + (size_t)(h0 + h) * (size_t)d + s;
                    lo[h] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(qh), lo[h]);
                    hi[h] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(qh + 8), hi[h]);
                }
            }
            for (int h = 0; h < g; h++) out[h0 + h] = reduce16(lo[h], hi[h]);
        }
        return;
    }
    const int np = d & ~63;
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * (size_t)d;
        __m256 x[8];
        for (int j = 0; j < 8; j++) x[j] = _mm256_setzero_ps();
        for (int s = 0; s < np; s += 64)
            for (int j = 0; j < 8; j++)
                x[j] = _mm256_fmadd_ps(ld_h8(k + s + 8 * j), _mm256_loadu_ps(qh + s + 8 * j), x[j]);
        /* 16-lane accumulators j' = (x[2j'], x[2j'+1]): j'0 + j'2, j'1 + j'3, then their sum */
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(x[0], x[4]), _mm256_add_ps(x[2], x[6]));
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(x[1], x[5]), _mm256_add_ps(x[3], x[7]));
        double sum = (double)reduce16(lo, hi);
        for (int i = np; i < d; i++) sum += (double)(_cvtsh_ss(k[i]) * qh[i]);
        out[h] = (float)sum;
    }
}

/* The 8-lane halves (lo: elements s .. s + 7 of every 16-element step s, hi: s + 8 .. s + 15)
 * of the 16-lane chains of rows 0 .. G - 1 against the 4 keys k + r d (r < 4): half h0 8 is
 * one pass over d with G x 4 accumulators in registers (the two halves are independent
 * chains, so running them one after the other changes no bits). */
static inline __attribute__((always_inline)) void half_chains(const float *q, const int G,
                                                              const uint16_t *k, int d, int off,
                                                              __m256 acc[3][4]) {
    for (int h = 0; h < G; h++)
        for (int r = 0; r < 4; r++) acc[h][r] = _mm256_setzero_ps();
    for (int s = off; s < d; s += 16) {
        __m256 qv[3];
        for (int h = 0; h < G; h++) qv[h] = _mm256_loadu_ps(q + (size_t)h * (size_t)d + s);
        for (int r = 0; r < 4; r++) {
            const __m256 kv = ld_h8(k + (size_t)r * (size_t)d + s);
            for (int h = 0; h < G; h++) acc[h][r] = _mm256_fmadd_ps(kv, qv[h], acc[h][r]);
        }
    }
}

/* reduce16 (hsum256(hi + lo): lo128 + hi128, then lanes (0 + 2, 1 + 3), then their sum) of
 * four (lo, hi) pairs at once, with the same additions; the four sums in r[0..3]. */
static inline void reduce16x4(const __m256 lo[4], const __m256 hi[4], float r[4]) {
    __m256 v[4];
    for (int i = 0; i < 4; i++) v[i] = _mm256_add_ps(hi[i], lo[i]);
    /* [a0 | a1], [a2 | a3]: a_i = lo128(v_i) + hi128(v_i) */
    const __m256 a01 = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x20),
                                     _mm256_permute2f128_ps(v[0], v[1], 0x31));
    const __m256 a23 = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[3], 0x20),
                                     _mm256_permute2f128_ps(v[2], v[3], 0x31));
    /* per 128-bit lane: (a[0] + a[2], a[1] + a[3]) of a0, a2 | a1, a3 */
    const __m256 b = _mm256_add_ps(_mm256_shuffle_ps(a01, a23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(a01, a23, _MM_SHUFFLE(3, 2, 3, 2)));
    /* (b[0] + b[1]) per row: c0, c2 in lanes 0, 1; c1, c3 in lanes 4, 5 */
    const __m256 c = _mm256_add_ps(_mm256_shuffle_ps(b, b, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(b, b, _MM_SHUFFLE(3, 1, 3, 1)));
    float f[8];
    _mm256_storeu_ps(f, c);
    r[0] = f[0];
    r[1] = f[4];
    r[2] = f[1];
    r[3] = f[5];
}

/* Scores of G (1..3) rows against the 4 keys t .. t + 3 (b1 = 0): each key piece converted once
 * for the G rows, the four keys' reductions done together. */
static inline __attribute__((always_inline)) void scores4(const float *q, const int G,
                                                          const uint16_t *k, int64_t t, int d,
                                                          float scale, float *w, size_t ws) {
    __m256 lo[3][4], hi[3][4];
    half_chains(q, G, k + t * d, d, 0, lo);
    half_chains(q, G, k + t * d, d, 8, hi);
    for (int h = 0; h < G; h++) {
        float r[4];
        reduce16x4(lo[h], hi[h], r);
        for (int i = 0; i < 4; i++) w[(size_t)h * ws + (size_t)t + (size_t)i] = r[i] * scale;
    }
}

void vq_ggml_scores_f16_avx2(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                             float scale, float *w, size_t ws) {
    int64_t t = 0;
    if (!b1) /* rows 3 at a time against 4 keys (12 accumulators per half) */
        for (; t + 4 <= n; t += 4)
            for (int h0 = 0; h0 < G; h0 += 3) {
                const float *qh = q + (size_t)h0 * (size_t)d;
                float *wh = w + (size_t)h0 * ws;
                switch (G - h0 < 3 ? G - h0 : 3) {
                case 1: scores4(qh, 1, k, t, d, scale, wh, ws); break;
                case 2: scores4(qh, 2, k, t, d, scale, wh, ws); break;
                default: scores4(qh, 3, k, t, d, scale, wh, ws); break;
                }
            }
    if (t < n)
        vq_ggml_scores_rows(vq_ggml_dot_f16_avx2, q, G, k + t * d, n - t, d, b1, scale, w + t, ws);
}

void vq_ggml_scale_round_f16_avx2(float *x, int64_t n, float scale) {
    int64_t i = 0;
    const __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i,
                         _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), s),
                                                         _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) x[i] = _cvtsh_ss(_cvtss_sh(x[i] * scale, _MM_FROUND_TO_NEAREST_INT));
}

double vq_ggml_softmax_exp_avx2(float *w, int64_t n, float max) {
    double sum = 0;
    const __m256 m = _mm256_set1_ps(max);
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 lo = ggml_v_expf8(_mm256_sub_ps(_mm256_loadu_ps(w + i), m));
        const __m256 hi = ggml_v_expf8(_mm256_sub_ps(_mm256_loadu_ps(w + i + 8), m));
        _mm256_storeu_ps(w + i, lo);
        _mm256_storeu_ps(w + i + 8, hi);
        sum += (double)reduce16(lo, hi);
    }
    return sum;
}

/* Slot-major, as the AVX-512 twin: every lane chain in registers, tokens ascending. */
void vq_ggml_pv_f16_avx2(float *acc, int G, const uint16_t *v, const float *p, size_t ps,
                         int64_t t0, int64_t n, int d, int b1, int s0, int s1) {
    const int S = b1 ? 64 : 16;
    for (int slot = s0; slot < s1; slot++) {
        const int64_t first = (int64_t)((slot - (t0 & (S - 1)) + S) & (S - 1));
        if (slot + VQ_PV_PF_SLOTS < s1) pv_prefetch_slot(v, t0, n, d, S, slot + VQ_PV_PF_SLOTS);
        if (first >= n) continue;
        for (int j0 = 0; j0 < d; j0 += 16) {
            for (int h0 = 0; h0 < G; h0 += 4) {
                const int g = G - h0 < 4 ? G - h0 : 4;
                __m256 a[4][2];
                for (int h = 0; h < g; h++)
                    for (int j = 0; j < 2; j++)
                        a[h][j] = _mm256_loadu_ps(
                            acc + ((size_t)(h0 + h) * (size_t)S + (size_t)slot) * (size_t)d + j0 +
                            8 * j);
                for (int64_t t = first; t < n; t += S) {
                    const __m256 v0 = ld_h8(v + t * d + j0), v1 = ld_h8(v + t * d + j0 + 8);
                    for (int h = 0; h < g; h++) {
                        const __m256 pt = _mm256_set1_ps(p[(size_t)(h0 + h) * ps + (size_t)t]);
                        a[h][0] = _mm256_fmadd_ps(v0, pt, a[h][0]);
                        a[h][1] = _mm256_fmadd_ps(v1, pt, a[h][1]);
                    }
                }
                for (int h = 0; h < g; h++)
                    for (int j = 0; j < 2; j++)
                        _mm256_storeu_ps(
                            acc + ((size_t)(h0 + h) * (size_t)S + (size_t)slot) * (size_t)d + j0 +
                                8 * j,
                            a[h][j]);
            }
        }
    }
}
