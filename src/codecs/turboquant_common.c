/* turboquant_common.c — layout helpers and scalar reference kernels shared by the
 * turboquant_mse and turboquant_rvq codecs (contract in turboquant_kernels.h). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/turboquant_kernels.h"

#ifdef VQ_HAVE_X86
/* 1 if k's integer accumulate runs here (its layout, a CPU with AVX512_VNNI and VBMI). */
static int vq_tq_i16_cpu(const vq_tq_kern *k) {
    return k->i16 && vq_cpu_avx512vnni() && vq_cpu_avx512vbmi();
}
#endif

/* Fills the kernel description and picks the score mode (see turboquant_kernels.h). */
void vq_tq_kern_init(vq_tq_kern *k, int d, int bits_a, int bits_b, int off_a, int off_b, int rec,
                     const float *levels, enum vq_isa isa) {
    VQ_ASSERT(d % 8 == 0 && (bits_a == 1 || bits_a == 2 || bits_a == 4));
    VQ_ASSERT(bits_b >= 0 && bits_b <= 2 && bits_a + bits_b <= 4);
    memset(k, 0, sizeof(*k));
    k->d = d;
    k->n_chunks = (d + VQ_TQ_CHUNK - 1) / VQ_TQ_CHUNK;
    k->dpad = k->n_chunks * VQ_TQ_CHUNK;
    k->bits_a = bits_a;
    k->bits_b = bits_b;
    k->off_a = off_a;
    k->off_b = off_b;
    k->rec = rec;
    int L = 1 << (bits_a + bits_b);
    for (int i = 0; i < 16; i++) k->lut[i] = levels[i & (L - 1)];
    k->score_mode = VQ_TQ_SCORE_LUT;
    k->q_floats = k->dpad;
    /* integer accumulate: levels as integers of at most VQ_TQ_I16_LMAX, replicated with the
     * code period over 32 entries (a VPERMW table reads 5 index bits) */
    float lmax = 0.0f;
    for (int i = 0; i < L; i++) lmax = fmaxf(lmax, fabsf(levels[i]));
    const int lay = bits_a * 4 + bits_b;
    k->i16 = d % 64 == 0 && d <= 1024 && lay == 9 && lmax > 0.0f && lmax <= FLT_MAX;
    if (k->i16) {
        /* the scale (levels per integer step) whose rounded levels lie closest to the levels,
         * among 4096 scales from half the full range to the full range: the levels' rounding
         * is a bias that does not average out over tokens, so it is kept small */
        double best = INFINITY, sbest = VQ_TQ_I16_LMAX / (double)lmax;
        for (int i = 0; i < 4096; i++) {
            const double sc = VQ_TQ_I16_LMAX / (double)lmax * (1.0 - i / 8192.0);
            double worst = 0;
            for (int j = 0; j < L; j++)
                worst = fmax(worst, fabs(levels[j] - rint(levels[j] * sc) / sc));
            if (worst < best) best = worst, sbest = sc;
        }
        for (int i = 0; i < 32; i++) k->lq[i] = (int16_t)rint(levels[i & (L - 1)] * sbest);
        k->dl = (float)(1.0 / sbest);
        /* The 2+1 layout: plane A's 16 bytes are broadcast to the four 128-bit lanes and
         * plane B's 8 to every qword (loads only, no shuffle), so coordinate c's code goes to
         * byte P(c) of a qword holding its plane-A bits: c < 32 (plane A qword 0) to qwords 0,
         * 2, 4, 6, c >= 32 to 1, 3, 5, 7. */
        for (int c = 0; c < 64; c++) {
            const int pc = 8 * (2 * ((c % 32) / 8) + c / 32) + c % 8;
            k->i16_ca[pc] = (uint8_t)((c * bits_a) & 63);
            k->i16_cb[pc] = (uint8_t)((c * bits_b - bits_a) & 63); /* bits_b = 1: one qword */
        }
        /* vector g, lane i: coordinate 8i + 2g (i < 8) or 8(i - 8) + 2g + 1 of the 64, i.e.
         * accumulator floats 32g + i and 32g + 16 + (i - 8) past the group's 8 lanes */
        for (int g = 0; g < 4; g++)
            for (int i = 0; i < 16; i++) {
                const int c = i < 8 ? 8 * i + 2 * g : 8 * (i - 8) + 2 * g + 1;
                const int pc = 8 * (2 * ((c % 32) / 8) + c / 32) + c % 8;
                k->i16_pair[g][4 * i] = k->i16_pair[g][4 * i + 1] = (uint8_t)pc;
                k->i16_pair[g][4 * i + 2] = k->i16_pair[g][4 * i + 3] = (uint8_t)(64 + pc);
            }
    }
    /* NIB score mode: plane widths 1-2 bits and levels additive across the planes */
    if (bits_a <= 2 && (bits_b == 0 || bits_b == bits_a) &&
        !(isa == VQ_ISA_AVX512 && bits_a == 2)) {
        const int La = 1 << bits_a, Lb = 1 << bits_b;
        float mx = 0.0f;
        for (int i = 0; i < L; i++) mx = fmaxf(mx, fabsf(levels[i]));
        for (int a = 0; a < La; a++) k->lev_a[a] = levels[a];
        for (int b = 0; b < Lb; b++) k->lev_b[b] = levels[b << bits_a] - levels[0];
        int additive = 1;
        for (int a = 0; a < La; a++)
            for (int b = 0; b < Lb; b++)
                additive &= fabsf(k->lev_a[a] + k->lev_b[b] - levels[a | b << bits_a]) <=
                            1e-6f * mx;
        if (additive) {
            k->score_mode = VQ_TQ_SCORE_NIB;
            k->nib_a = d * bits_a / 4;
            k->nib_b = d * bits_b / 4;
            k->q_floats = 16 * (k->nib_a + k->nib_b);
        }
    }
}

/* Chooses score/accumulate kernels for k's score mode and isa; unavailable variants use the
 * reference. */
void vq_tq_kern_select(const vq_tq_kern *k, enum vq_isa isa, vq_tq_score_fn *score,
                       vq_tq_acc_fn *acc) {
    const int nib = k->score_mode == VQ_TQ_SCORE_NIB;
    *score = nib ? vq_tq_nib_score_ref : vq_tq_score_generic;
    *acc = vq_tq_accumulate_generic;
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX512) {
        *score = nib ? vq_tq_nib_score_avx512 : vq_tq_score_avx512;
        *acc = vq_tq_i16_cpu(k) ? vq_tq_accumulate1_i16_avx512icl : vq_tq_accumulate_avx512;
    } else if (isa == VQ_ISA_AVX2) {
        *score = nib ? vq_tq_nib_score_avx2 : vq_tq_score_avx2;
        *acc = vq_tq_accumulate_avx2;
    }
#else
    (void)isa;
#endif
}

/* Builds the 16-entry tables of one plane (bits 1 or 2): nibble p holds the codes of
 * coordinates p*per .. p*per+per-1 (per = 4/bits); T_p[v] = sum_i y[p*per+i] * lev[code_i(v)]. */
static void nib_tables(const float *y, int n_nib, int bits, const float *lev, float *T) {
    VQ_ASSERT(bits == 1 || bits == 2);
    for (int p = 0; p < n_nib; p++) {
        float *t = T + 16 * p;
        if (bits == 1) { /* T[v] = T[v without its lowest set bit] + y_i * (lev1 - lev0) */
            const float *yp = y + 4 * p, dl = lev[1] - lev[0];
            t[0] = (yp[0] + yp[1] + yp[2] + yp[3]) * lev[0];
            for (int v = 1; v < 16; v++)
                t[v] = t[v & (v - 1)] + yp[__builtin_ctz((unsigned)v)] * dl;
        } else { /* bits == 2: two codes per nibble */
            const float *yp = y + 2 * p;
            float a[4], b[4];
            for (int i = 0; i < 4; i++) {
                a[i] = yp[0] * lev[i];
                b[i] = yp[1] * lev[i];
            }
            for (int v = 0; v < 16; v++) t[v] = a[v & 3] + b[v >> 2];
        }
    }
}

/* qs = RHT(q) prepared for k's score mode (LUT: chunk-interleaved with zero padding; NIB:
 * nibble tables). */
void vq_tq_prepare_query(const vq_tq_kern *k, const vq_rht *r, const float *q, float *qs) {
    float y[4096];
    vq_rht_forward(r, q, y);
    if (k->score_mode == VQ_TQ_SCORE_NIB) {
        nib_tables(y, k->nib_a, k->bits_a, k->lev_a, qs);
        if (k->bits_b) nib_tables(y, k->nib_b, k->bits_b, k->lev_b, qs + 16 * k->nib_a);
        return;
    }
    for (int i = k->d; i < k->dpad; i++) qs[vq_tq_pos(i)] = 0.0f;
    for (int j = 0; j < k->d; j++) qs[vq_tq_pos(j)] = y[j];
}

/* out = RHT^-1(acc in natural order). */
void vq_tq_finish(const vq_tq_kern *k, const vq_rht *r, const float *acc, float *out) {
    float y[4096];
    for (int j = 0; j < k->d; j++) y[j] = acc[vq_tq_pos(j)];
    vq_rht_inverse(r, y, out);
}

static inline unsigned get_bits(const uint8_t *plane, int j, int bits) {
    /* bits in {1, 2, 4}: a code never straddles a byte */
    int bit = j * bits;
    return (plane[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1u);
}

/* Combined level index of coordinate j: a | b << bits_a. */
int vq_tq_code(const vq_tq_kern *k, const uint8_t *rec, int j) {
    unsigned a = get_bits(rec + k->off_a, j, k->bits_a);
    unsigned b = k->bits_b ? get_bits(rec + k->off_b, j, k->bits_b) : 0u;
    return (int)(a | b << k->bits_a);
}

/* Scalar reference score (the normative definition). */
void vq_tq_score_ref(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                     float *scores) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float s = vq_tq_sf16(rec), sum = 0.0f;
        for (int j = 0; j < k->d; j++) sum += qs[vq_tq_pos(j)] * k->lut[vq_tq_code(k, rec, j)];
        scores[t] = s * sum;
    }
}

/* Scalar reference accumulate (the normative definition). */
void vq_tq_accumulate_ref(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                          float *acc) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float ws = w[t] * vq_tq_sf16(rec);
        for (int j = 0; j < k->d; j++) acc[vq_tq_pos(j)] += ws * k->lut[vq_tq_code(k, rec, j)];
    }
}

void vq_tq_accumulate_i16_ref(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                              const float *const *w, int nq, float *const *acc) {
    VQ_ASSERT(k->i16 && nq >= 1 && nq <= 4);
    const int d = k->d;
    for (int64_t t0 = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK) {
        const int m = n - t0 < VQ_TQ_I16_CHUNK ? (int)(n - t0) : VQ_TQ_I16_CHUNK;
        float s[VQ_TQ_I16_CHUNK], u[VQ_TQ_I16_CHUNK];
        int16_t uq[VQ_TQ_I16_CHUNK];
        for (int t = 0; t < m; t++) s[t] = vq_tq_sf16(codes + (t0 + t) * k->rec);
        for (int j = 0; j < nq; j++) {
            float mx = 0.0f;
            int bad = 0;
            for (int t = 0; t < m; t++) {
                u[t] = w[j][t0 + t] * s[t];
                const float a = fabsf(u[t]);
                bad |= !(a <= FLT_MAX);
                mx = a > mx ? a : mx;
            }
            if (bad) {
                for (int c = 0; c < d; c++) acc[j][vq_tq_pos(c)] += NAN;
                continue;
            }
            if (mx == 0.0f) continue;
            const float inv = (float)VQ_TQ_I16_WMAX / mx, f = mx / (float)VQ_TQ_I16_WMAX * k->dl;
            for (int t = 0; t < m; t++) uq[t] = (int16_t)lrintf(u[t] * inv);
            for (int c = 0; c < d; c++) {
                int32_t sum = 0;
                for (int t = 0; t < m; t++)
                    sum += (int32_t)uq[t] * k->lq[vq_tq_code(k, codes + (t0 + t) * k->rec, c)];
                const float p = (float)sum * f;
                acc[j][vq_tq_pos(c)] += p;
            }
        }
    }
}

/* NIB score mode reference: sum of one table entry per nibble of each plane. */
void vq_tq_nib_score_ref(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                         float *scores) {
    const float *tb = qs + 16 * k->nib_a;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        const uint8_t *pa = rec + k->off_a, *pb = rec + k->off_b;
        float sum = 0.0f;
        for (int p = 0; p < k->nib_a; p++) sum += qs[16 * p + ((pa[p >> 1] >> ((p & 1) * 4)) & 15)];
        for (int p = 0; p < k->nib_b; p++) sum += tb[16 * p + ((pb[p >> 1] >> ((p & 1) * 4)) & 15)];
        scores[t] = vq_tq_sf16(rec) * sum;
    }
}

/* Codes of coordinates 8g .. 8g+7 of a plane with `bits` bits per code, as one integer
 * (code i at bits [i*bits, (i+1)*bits)). */
static inline uint32_t group_word(const uint8_t *plane, int g, int bits) {
    const uint8_t *p = plane + g * bits;
    uint32_t v = p[0];
    if (bits >= 2) v |= (uint32_t)p[1] << 8;
    if (bits == 4) v |= (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return v;
}

/* Float position of coordinate 8g in the chunk-interleaved layout; coordinate 8g+i is at
 * that position + 16*i. */
static inline int group_pos(int g) { return (g >> 4) * VQ_TQ_CHUNK + (g & 15); }

/* Portable LUT-mode score: 8 codes per group word. */
void vq_tq_score_generic(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                         float *scores) {
    const int ng = k->d / 8, ba = k->bits_a, bb = k->bits_b;
    const uint32_t ma = (1u << ba) - 1u, mb = (1u << bb) - 1u;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float sum = 0.0f;
        for (int g = 0; g < ng; g++) {
            const uint32_t wa = group_word(rec + k->off_a, g, ba);
            const uint32_t wb = bb ? group_word(rec + k->off_b, g, bb) : 0u;
            const float *q = qs + group_pos(g);
            for (int i = 0; i < 8; i++)
                sum += q[16 * i] * k->lut[((wa >> (i * ba)) & ma) | ((wb >> (i * bb)) & mb) << ba];
        }
        scores[t] = vq_tq_sf16(rec) * sum;
    }
}

/* Portable LUT-mode accumulate: 8 codes per group word. */
void vq_tq_accumulate_generic(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                              float *acc) {
    const int ng = k->d / 8, ba = k->bits_a, bb = k->bits_b;
    const uint32_t ma = (1u << ba) - 1u, mb = (1u << bb) - 1u;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        const float ws = w[t] * vq_tq_sf16(rec);
        float lw[16];
        for (int v = 0; v < 16; v++) lw[v] = ws * k->lut[v];
        for (int g = 0; g < ng; g++) {
            const uint32_t wa = group_word(rec + k->off_a, g, ba);
            const uint32_t wb = bb ? group_word(rec + k->off_b, g, bb) : 0u;
            float *a = acc + group_pos(g);
            for (int i = 0; i < 8; i++)
                a[16 * i] += lw[((wa >> (i * ba)) & ma) | ((wb >> (i * bb)) & mb) << ba];
        }
    }
}

/* ---- codec slots shared by turboquant_mse and turboquant_rvq ---- */

void vq_tq_codec_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    const int d = c->p.head_dim;
    float y[1024];
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *r = src + t * (int64_t)c->block_bytes;
        float s = vq_tq_sf16(r);
        for (int j = 0; j < d; j++) y[j] = s * m->k.lut[vq_tq_code(&m->k, r, j)];
        vq_rht_inverse(&m->rht, y, x + t * d);
    }
}

void vq_tq_codec_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    vq_tq_prepare_query(&m->k, &m->rht, q, (float *)qs);
}

void vq_tq_codec_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    m->score(&m->k, (const float *)qs, codes, n_tokens, scores);
}

void vq_tq_codec_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    m->acc(&m->k, codes, n_tokens, w, acc);
}

#ifdef VQ_HAVE_X86
static void tq_codec_accumulate_multi(const struct vq_codec *c, const uint8_t *codes,
                                      int64_t n_tokens, const float *const *w, int nq,
                                      float *const *acc) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    vq_tq_accumulate_multi_avx512(&m->k, codes, n_tokens, w, nq, acc);
}

static void tq_codec_accumulate_multi_avx2(const struct vq_codec *c, const uint8_t *codes,
                                           int64_t n_tokens, const float *const *w, int nq,
                                           float *const *acc) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    vq_tq_accumulate_multi_avx2(&m->k, codes, n_tokens, w, nq, acc);
}

static void tq_codec_accumulate_multi_i16(const struct vq_codec *c, const uint8_t *codes,
                                          int64_t n_tokens, const float *const *w, int nq,
                                          float *const *acc) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    vq_tq_accumulate_i16_avx512icl(&m->k, codes, n_tokens, w, nq, acc);
}
#endif

void vq_tq_codec_set_multi(struct vq_codec *c, const vq_tq_kern *k) {
    c->accumulate_multi = NULL;
#ifdef VQ_HAVE_X86
    const int lay = k->bits_a * 4 + k->bits_b;
    if (c->isa == VQ_ISA_AVX512 && vq_tq_i16_cpu(k))
        c->accumulate_multi = tq_codec_accumulate_multi_i16;
    else if (c->isa == VQ_ISA_AVX512 &&
             (lay == 4 || lay == 8 || lay == 16 || lay == 9 || lay == 5 || lay == 10)) {
        c->accumulate_multi = tq_codec_accumulate_multi;
        c->multi_max = k->d > 64 ? 6 : 4; /* a GQA group of 6 (Qwen2.5) in one pass */
    } else if (c->isa == VQ_ISA_AVX2 &&
               (lay == 4 || lay == 8 || lay == 16 || lay == 9 || lay == 5 || lay == 10)) {
        c->accumulate_multi = tq_codec_accumulate_multi_avx2; /* groups of 3 inside */
        c->multi_max = 6;
    }
#else
    (void)k;
#endif
}

void vq_tq_codec_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct vq_tq_base *m = (const struct vq_tq_base *)c->impl;
    vq_tq_finish(&m->k, &m->rht, acc, out);
}

void vq_tq_codec_destroy(struct vq_codec *c) {
    struct vq_tq_base *m = (struct vq_tq_base *)c->impl;
    if (!m) return;
    vq_rht_free(&m->rht);
    vq_free(m);
    c->impl = NULL;
}
