/* test_calib_kernels.c — kernels of the calibrated codecs (vecinfer, spectral) on every
 * available ISA against their scalar reference kernels (vq_vi_*_ref / vq_sp_*_ref), on fresh
 * random codes, queries, weights and inputs with odd token counts (tails of the 8/16-lane
 * kernels): prepared query tables, encoded codes, scores, accumulators (onto a non-zero
 * accumulator, twice), finish outputs and spectral decodes are all bitwise equal to the
 * reference (the kernels do the reference's float operations in its order), except the scores
 * and accumulators of the coordinate-domain multi-query kernels (spectral on AVX-512 VBMI,
 * vecinfer on AVX-512: within 1e-5 of the sum of the terms' magnitudes, the accumulator
 * through finish);
 * for every vecinfer (c, v) preset (bits 1, 1.5 = (12, 8), 2, 3, 4) plus odd (c, v), keys
 * (with calibrated smoothing) and values, d = 64 / 80 / 128, and spectral bits 1..4 with and
 * without water-filling (calibrated, so code widths 0..6 occur), d = 64 / 128.
 * Then a 2-layer cache per ISA: fused attention == decode-then-dot reference (1e-4). */
#include "test.h"
#include "veloxquant.h"
#include "core/core.h"
#include "codecs/codec_impl.h"
#include "codecs/lutsum_kernels.h"
#include "multi_check.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const enum vq_isa isas[3] = {VQ_ISA_SCALAR, VQ_ISA_AVX2, VQ_ISA_AVX512};
static const int64_t ns[] = {1, 7, 16, 17, 37};
static vq_rng R;

static float nrand(void) { return (float)vq_rng_normal(&R); }

static void random_codes(uint8_t *codes, size_t bytes, int spectral, size_t bb) {
    for (size_t i = 0; i < bytes; i++) codes[i] = (uint8_t)(vq_rng_u64(&R) >> 56);
    if (!spectral) return;
    for (size_t t = 0; t < bytes / bb; t++)
        for (int g = 0; g < 2; g++) {
            const uint16_t h = vq_fp32_to_sf16(2.0f * nrand());
            codes[t * bb + 2 * (size_t)g] = (uint8_t)h;
            codes[t * bb + 2 * (size_t)g + 1] = (uint8_t)(h >> 8);
        }
}

/* clears the sign bits of the two sf16 scales of every spectral record */
static void abs_scales(uint8_t *codes, size_t bytes, size_t bb) {
    for (size_t t = 0; t < bytes / bb; t++) {
        codes[t * bb + 1] &= 0x7F;
        codes[t * bb + 3] &= 0x7F;
    }
}

/* Compares codec c's kernels with the reference ones; returns mismatches, counts checks. */
static int check_codec(const vq_codec *c, int spectral, int *checks) {
    const int d = vq_codec_params_get(c)->head_dim;
    const size_t bb = vq_codec_block_bytes(c), qb = vq_codec_query_bytes(c);
    const size_t af = vq_codec_acc_floats(c);
    const int64_t nmax = 37;
    uint8_t *codes = malloc(bb * nmax), *cabs = malloc(bb * nmax), *e1 = malloc(bb * nmax),
            *e2 = malloc(bb * nmax);
    float *qs = vq_alloc(qb), *qr = vq_alloc(qb), *qa = vq_alloc(qb);
    float *acc = malloc(af * sizeof(float)), *accr = malloc(af * sizeof(float));
    float *acca = malloc(af * sizeof(float));
    float *x = malloc(sizeof(float) * (size_t)(nmax * d)),
          *y = malloc(sizeof(float) * (size_t)(nmax * d));
    float *yr = malloc(sizeof(float) * (size_t)(nmax * d));
    float q[1024], sc[37], scr[37], sca[37], w[37], wa[37], out[1024], outr[1024];
    int bad = 0;
    void (*score_ref)(const struct vq_codec *, const void *, const uint8_t *, int64_t,
                      float *) = spectral ? vq_sp_score_ref : vq_vi_score_ref;
    void (*acc_ref)(const struct vq_codec *, const uint8_t *, int64_t, const float *,
                    float *) = spectral ? vq_sp_accumulate_ref : vq_vi_accumulate_ref;
    void (*prep_ref)(const struct vq_codec *, const float *,
                     void *) = spectral ? vq_sp_prepare_query_ref : vq_vi_prepare_query_ref;
    void (*fin_ref)(const struct vq_codec *, const float *, float *) = spectral ? vq_sp_finish_ref
                                                                                : vq_vi_finish_ref;
    vq_status (*enc_ref)(const struct vq_codec *, const float *, int64_t,
                         uint8_t *) = spectral ? vq_sp_encode_ref : vq_vi_encode_ref;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int64_t n = ns[ni];
        /* prepared tables: bitwise */
        for (int i = 0; i < d; i++) q[i] = nrand();
        c->prepare_query(c, q, qs);
        prep_ref(c, q, qr);
        /* the coordinate-domain kernels' prepare writes only the whitened / transformed query
         * they read (the score check below covers it), not the tables */
        if (!c->score_multi) {
            bad += memcmp(qs, qr, qb) != 0;
            (*checks)++;
        }
        for (size_t i = 0; i < qb / sizeof(float); i++) qa[i] = fabsf(qr[i]);
        /* score */
        random_codes(codes, bb * (size_t)n, spectral, bb);
        memcpy(cabs, codes, bb * (size_t)n);
        if (spectral) abs_scales(cabs, bb * (size_t)n, bb);
        c->score(c, qs, codes, n, sc);
        score_ref(c, qr, codes, n, scr);
        score_ref(c, qa, cabs, n, sca); /* sum of |terms| */
        /* spectral on AVX-512 VBMI and vecinfer on AVX-512 score and accumulate in the
         * coordinate domain (the multi-query kernels): the reference within float rounding */
        const int coord = c->score_multi != NULL;
        for (int64_t t = 0; t < n; t++, (*checks)++) {
            if (coord) bad += !(fabsf(sc[t] - scr[t]) <= 1e-5f * sca[t] + 1e-30f);
            else bad += memcmp(&sc[t], &scr[t], sizeof(float)) != 0; /* bitwise */
            bad += !(fabsf(scr[t]) <= sca[t] * 1.0001f + 1e-30f);    /* sane reference */
        }
        /* accumulate (onto a non-zero accumulator, twice) and finish */
        for (int64_t t = 0; t < n; t++) {
            w[t] = t % 5 == 2 ? 0.0f : nrand();
            wa[t] = fabsf(w[t]);
        }
        for (size_t i = 0; i < af; i++) {
            acc[i] = accr[i] = 0.01f * nrand();
            acca[i] = fabsf(acc[i]);
        }
        for (int rep = 0; rep < 2; rep++) {
            c->accumulate(c, codes, n, w, acc);
            acc_ref(c, codes, n, w, accr);
            acc_ref(c, cabs, n, wa, acca);
        }
        for (size_t i = 0; i < af; i++, (*checks)++) {
            if (!coord) bad += memcmp(&acc[i], &accr[i], sizeof(float)) != 0;
            bad += !(fabsf(accr[i]) <= acca[i] * 1.0001f + 1e-30f);
        }
        c->finish(c, accr, out);
        fin_ref(c, accr, outr);
        bad += memcmp(out, outr, (size_t)d * sizeof(float)) != 0;
        (*checks)++;
        if (coord) { /* the coordinate-domain accumulator, through finish */
            c->finish(c, acc, out);
            double l1 = 0;
            for (int i = 0; i < d; i++) l1 += fabs(outr[i]);
            for (int i = 0; i < d; i++, (*checks)++)
                bad += !(fabs(out[i] - outr[i]) <= 1e-5 * l1 + 1e-30);
        }
        if (c->score_multi || c->accumulate_multi) { /* each query of a pass: its own bits */
            bad += multi_check_bits(c, codes, (int)n, d, 3, &R);
            (*checks)++;
        }
        /* encode (bitwise codes) and, for spectral, decode (equal values) */
        for (int64_t i = 0; i < n * d; i++) x[i] = 3.0f * nrand();
        ASSERT_STATUS(c->encode(c, x, n, e1), VQ_STATUS_OK);
        ASSERT_STATUS(enc_ref(c, x, n, e2), VQ_STATUS_OK);
        bad += memcmp(e1, e2, bb * (size_t)n) != 0;
        (*checks)++;
        if (spectral) {
            c->decode(c, codes, n, y);
            vq_sp_decode_ref(c, codes, n, yr);
            bad += memcmp(y, yr, sizeof(float) * (size_t)(n * d)) != 0;
            (*checks)++;
        }
    }
    free(codes);
    free(cabs);
    free(e1);
    free(e2);
    vq_free(qs);
    vq_free(qr);
    vq_free(qa);
    free(acc);
    free(accr);
    free(acca);
    free(x);
    free(y);
    free(yr);
    return bad;
}

static vq_codec *mk(enum vq_method m, int d, enum vq_role role, int bits, int c, int v, int wf,
                    const vq_calib_data *cd, enum vq_isa isa) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.head_dim = d;
    p.role = role;
    p.bits = bits;
    p.pq_codeword_bits = c;
    p.pq_subvec_dim = v;
    p.spectral_waterfill = wf;
    p.calib = cd;
    p.isa = isa;
    return vq_codec_create(&p, NULL);
}

TEST(vecinfer_kernels_vs_ref) {
    /* (c, v): presets of bits 1, 1.5, 2, 3, 4, then odd widths / tails */
    const int cv[][2] = {{8, 8}, {12, 8}, {8, 4}, {12, 4}, {8, 2}, {3, 2}, {5, 16}, {10, 4}};
    const int dims[] = {64, 80, 128};
    vq_rng_seed(&R, 11);
    for (int di = 0; di < 3; di++) {
        const int d = dims[di];
        /* calibrated key smoothing + (8, 4) codebooks: lambda != 1 in the key path */
        enum { NC = 300 };
        float *cal = malloc(sizeof(float) * NC * (size_t)d);
        for (int i = 0; i < NC * d; i++) cal[i] = nrand() * (1.0f + (float)(i % d == 5) * 6.0f);
        vq_calib_data *cd = vq_calib_data_create(1, d, NULL);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 0, VQ_ROLE_KEY, cal, NC, 8, 4, 3), VQ_STATUS_OK);
        free(cal);
        for (int ii = 0; ii < 3; ii++) {
            if (!vq_isa_available(isas[ii])) continue;
            int bad = 0, checks = 0;
            for (size_t k = 0; k < sizeof cv / sizeof *cv; k++) {
                if (d % cv[k][1]) continue;
                for (int role = 0; role < 2; role++) {
                    vq_codec *c = mk(VQ_METHOD_VECINFER, d, role ? VQ_ROLE_VALUE : VQ_ROLE_KEY, 2,
                                     cv[k][0], cv[k][1], 1, NULL, isas[ii]);
                    ASSERT(c != NULL);
                    if (!c) continue;
                    const int b = check_codec(c, 0, &checks);
                    if (b)
                        fprintf(stderr, "  vecinfer d=%d c=%d v=%d role=%d %s: %d mismatches\n", d,
                                cv[k][0], cv[k][1], role, vq_isa_name(isas[ii]), b);
                    bad += b;
                    vq_codec_free(c);
                }
            }
            vq_codec *c = mk(VQ_METHOD_VECINFER, d, VQ_ROLE_KEY, 2, 0, 0, 1, cd, isas[ii]);
            ASSERT(c != NULL);
            if (c) bad += check_codec(c, 0, &checks);
            vq_codec_free(c);
            fprintf(stderr, "  vecinfer d=%d %s: %d checks\n", d, vq_isa_name(isas[ii]), checks);
            ASSERT_EQ_INT(bad, 0);
            ASSERT_GE(checks, 5000);
        }
        vq_calib_data_free(cd);
    }
}

TEST(spectral_kernels_vs_ref) {
    const int dims[] = {64, 128};
    vq_rng_seed(&R, 12);
    for (int di = 0; di < 2; di++) {
        const int d = dims[di];
        enum { NC = 400 };
        float *cal = malloc(sizeof(float) * NC * (size_t)d);
        for (int t = 0; t < NC; t++) /* decaying spectrum: water-filling gives widths 0..6 */
            for (int i = 0; i < d; i++) cal[t * d + i] = nrand() * 8.0f * expf(-0.1f * (float)i);
        vq_calib_data *cd = vq_calib_data_create(1, d, NULL);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, 0, VQ_ROLE_KEY, cal, NC), VQ_STATUS_OK);
        free(cal);
        for (int ii = 0; ii < 3; ii++) {
            if (!vq_isa_available(isas[ii])) continue;
            int bad = 0, checks = 0;
            for (int bits = 1; bits <= 4; bits++)
                for (int wf = 0; wf <= 1; wf++)
                    for (int cal_on = 0; cal_on <= 1; cal_on++) {
                        vq_codec *c = mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_KEY, bits, 0, 0, wf,
                                         cal_on ? cd : NULL, isas[ii]);
                        ASSERT(c != NULL);
                        if (!c) continue;
                        const int b = check_codec(c, 1, &checks);
                        if (b)
                            fprintf(stderr, "  spectral d=%d b=%d wf=%d cal=%d %s: %d mismatches\n",
                                    d, bits, wf, cal_on, vq_isa_name(isas[ii]), b);
                        bad += b;
                        vq_codec_free(c);
                    }
            fprintf(stderr, "  spectral d=%d %s: %d checks\n", d, vq_isa_name(isas[ii]), checks);
            ASSERT_EQ_INT(bad, 0);
            ASSERT_GE(checks, 5000);
        }
        vq_calib_data_free(cd);
    }
}

/* vq_cache_attend == vq_cache_attend_ref (decode-then-dot) for a 2-layer cache on one ISA */
static double cache_err(enum vq_method m, int d, int bits, int pq_c, int pq_v, int wf,
                        const vq_calib_data *cd, enum vq_isa isa) {
    enum { NKV = 2, NQH = 4, T = 77, NQ = 3 };
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = NKV;
    p.head_dim = d;
    p.max_tokens = 128;
    p.page_tokens = 32;
    p.key.method = p.value.method = m;
    p.key.bits = p.value.bits = bits;
    p.key.pq_codeword_bits = p.value.pq_codeword_bits = pq_c;
    p.key.pq_subvec_dim = p.value.pq_subvec_dim = pq_v;
    p.key.spectral_waterfill = p.value.spectral_waterfill = wf;
    p.key.calib = p.value.calib = cd;
    p.key.isa = p.value.isa = isa;
    vq_status st;
    vq_cache *c = vq_cache_create(&p, &st);
    if (!c) return 1e9;
    float *k = malloc(sizeof(float) * T * NKV * (size_t)d),
          *v = malloc(sizeof(float) * T * NKV * (size_t)d);
    float *q = malloc(sizeof(float) * NQ * NQH * (size_t)d);
    float *o = malloc(sizeof(float) * NQ * NQH * (size_t)d),
          *oref = malloc(sizeof(float) * NQ * NQH * (size_t)d);
    double worst = 0;
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < T * NKV * d; i++) {
            k[i] = nrand() * (1.0f + 3.0f * (float)(i % d < 4));
            v[i] = nrand();
        }
        if (vq_cache_append(c, l, k, v, VQ_DTYPE_F32, T) != VQ_STATUS_OK) worst = 1e9;
        for (int i = 0; i < NQ * NQH * d; i++) q[i] = 0.3f * nrand();
        const int64_t pos[NQ] = {T - 40, T - 2, T - 1};
        if (vq_cache_attend(c, l, q, NQH, NQ, pos, 0.125f, o) != VQ_STATUS_OK ||
            vq_cache_attend_ref(c, l, q, NQH, NQ, pos, 0.125f, oref) != VQ_STATUS_OK)
            worst = 1e9;
        double e = 0, s = 0;
        for (int i = 0; i < NQ * NQH * d; i++) {
            e += ((double)o[i] - oref[i]) * ((double)o[i] - oref[i]);
            s += (double)oref[i] * oref[i];
        }
        if (sqrt(e / s) > worst) worst = sqrt(e / s);
    }
    free(k);
    free(v);
    free(q);
    free(o);
    free(oref);
    vq_cache_free(c);
    return worst;
}

TEST(cache_fused_vs_ref_every_isa) {
    vq_rng_seed(&R, 13);
    const int dims[] = {64, 128};
    for (int di = 0; di < 2; di++) {
        const int d = dims[di];
        enum { NC = 300 };
        float *cal = malloc(sizeof(float) * NC * (size_t)d);
        for (int t = 0; t < NC; t++)
            for (int i = 0; i < d; i++) cal[t * d + i] = nrand() * 4.0f * expf(-0.05f * (float)i);
        vq_calib_data *cd = vq_calib_data_create(2, d, NULL);
        for (int l = 0; l < 2; l++)
            for (int r = 0; r < 2; r++) {
                ASSERT_STATUS(vq_calib_fit_spectral(cd, l, (enum vq_role)r, cal, NC), VQ_STATUS_OK);
            }
        free(cal);
        for (int ii = 0; ii < 3; ii++) {
            if (!vq_isa_available(isas[ii])) continue;
            /* data-free codebooks (calibrated vecinfer in a cache: test_spectral.c) */
            const struct {
                int bits, c, v, cal;
            } vi[] = {{1, 0, 0, 0}, {2, 12, 8, 0}, {2, 0, 0, 0}, {3, 0, 0, 0}, {4, 0, 0, 0}};
            for (size_t k = 0; k < sizeof vi / sizeof *vi; k++) {
                const double e = cache_err(VQ_METHOD_VECINFER, d, vi[k].bits, vi[k].c, vi[k].v, 1,
                                           vi[k].cal ? cd : NULL, isas[ii]);
                if (e > 1e-4)
                    fprintf(stderr, "  vecinfer d=%d bits=%d (%d,%d) %s: rel err %.3g\n", d,
                            vi[k].bits, vi[k].c, vi[k].v, vq_isa_name(isas[ii]), e);
                ASSERT_LE(e, 1e-4);
            }
            for (int bits = 2; bits <= 3; bits++)
                for (int wf = 0; wf <= 1; wf++) {
                    const double e = cache_err(VQ_METHOD_SPECTRAL, d, bits, 0, 0, wf, cd, isas[ii]);
                    if (e > 1e-4)
                        fprintf(stderr, "  spectral d=%d bits=%d wf=%d %s: rel err %.3g\n", d, bits,
                                wf, vq_isa_name(isas[ii]), e);
                    ASSERT_LE(e, 1e-4);
                }
        }
        vq_calib_data_free(cd);
    }
}

int main(void) {
#ifdef _OPENMP
    omp_set_num_threads(1); /* tiny calibration fits: no spin-waits on a shared machine */
#endif
    RUN(vecinfer_kernels_vs_ref);
    RUN(spectral_kernels_vs_ref);
    RUN(cache_fused_vs_ref_every_isa);
    return TEST_REPORT();
}
