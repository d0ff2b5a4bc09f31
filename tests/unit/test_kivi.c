/* test_kivi.c — KIVI codecs at every width 2..8: byte layout (hand-made rows of every plane
 * layout), bits/elem, parameter validation, encode errors, reconstruction quality and the
 * per-element round-trip bound, fused score / accumulate against decode-then-dot, code-row
 * pack / unpack of every code value, SIMD kernels against the scalar reference (odd sizes),
 * keys with per-channel widths (channel_bits: validation, layout, per-channel bound, fused vs
 * decode on every ISA), and kivi_sink protection of planted sink tokens in the cache. */
#include "test.h"
#include "veloxquant.h"
#include "codecs/codec_impl.h"
#include "codecs/kivi.h"

#define VQ_TEST_SEED 0x853C49E6748FEA9Bull
#include "test_data.h"

static vq_codec *mk(enum vq_method m, enum vq_role role, int d, int bits, int g, int r,
                    vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.role = role;
    p.head_dim = d;
    p.bits = bits;
    p.group_size = g;
    p.residual_length = r;
    return vq_codec_create(&p, st);
}

TEST(sizes_and_validation) {
    const int dims[] = {64, 128, 96};
    for (int b = 2; b <= 8; b++)
        for (int di = 0; di < 3; di++)
            for (int g = 16; g <= 32; g += 16) {
                const int d = dims[di];
                vq_codec *k = mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, d, b, g, 4 * g, NULL);
                vq_codec *v = mk(VQ_METHOD_KIVI_SINK, VQ_ROLE_VALUE, d, b, g, 4 * g, NULL);
                ASSERT(k && v);
                if (!k || !v) {
                    vq_codec_free(k);
                    vq_codec_free(v);
                    continue;
                }
                ASSERT_EQ_INT(vq_codec_block_tokens(k), g);
                ASSERT_EQ_INT(vq_codec_block_tokens(v), 1);
                ASSERT_EQ_INT(vq_codec_block_bytes(k), 4 * d + g * d * b / 8);
                ASSERT_EQ_INT(vq_codec_block_bytes(v), 4 * d / g + d * b / 8);
                ASSERT_NEAR(vq_codec_bits_per_elem(k), b + 32.0 / g, 1e-12);
                ASSERT_NEAR(vq_codec_bits_per_elem(v), b + 32.0 / g, 1e-12);
                vq_codec_free(k);
                vq_codec_free(v);
            }
    vq_status st;
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 64, 1, 32, 128, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 64, 9, 32, 128, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_KIVI_SINK, VQ_ROLE_VALUE, 64, 9, 32, 128, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    struct vq_method_info mi;
    const enum vq_method ms[2] = {VQ_METHOD_KIVI, VQ_METHOD_KIVI_SINK};
    for (int m = 0; m < 2; m++) {
        ASSERT_STATUS(vq_method_info_get(ms[m], &mi), VQ_STATUS_OK);
        ASSERT_EQ_INT(mi.min_bits, 2);
        ASSERT_EQ_INT(mi.max_bits, 8);
    }
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 64, 2, 0, 128, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 64, 2, 32, 100, &st) == NULL); /* R % G != 0 */
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 64, 2, 32, -32, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_KIVI, VQ_ROLE_VALUE, 80, 2, 32, 128, &st) == NULL); /* d % G != 0 */
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    vq_codec *ok = mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 80, 2, 32, 128, &st); /* keys: any d */
    ASSERT(ok != NULL);
    vq_codec_free(ok);
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_KIVI_SINK;
    p.n_sink_tokens = VQ_KIVI_MAX_SINKS + 1;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p.n_sink_tokens = -1;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

TEST(byte_layout) {
    /* keys d = 8, G = 2, 2 bits: channel c holds c (token 0) and c + 3 (token 1):
     * s = 1, z = c, codes 0 and 3. */
    vq_codec *k = mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, 8, 2, 2, 0, NULL);
    float x[16];
    for (int c = 0; c < 8; c++) {
        x[c] = (float)c;
        x[8 + c] = (float)c + 3.0f;
    }
    uint8_t blk[64];
    ASSERT_EQ_INT(vq_codec_block_bytes(k), 32 + 4);
    ASSERT_STATUS(vq_codec_encode(k, x, 2, blk), VQ_STATUS_OK);
    int bad = 0;
    for (int c = 0; c < 8; c++) {
        bad += rd16(blk + 2 * c) != vq_fp32_to_sf16(1.0f);
        bad += rd16(blk + 16 + 2 * c) != vq_fp32_to_sf16((float)c);
    }
    ASSERT_EQ_INT(bad, 0);
    /* one tile of 2 tokens: per channel pair the fields (token 0: c, c + 1; token 1: c, c + 1)
     * = codes 0, 0, 3, 3 -> 0xF0 */
    ASSERT_EQ_INT(blk[32], 0xF0);
    ASSERT_EQ_INT(blk[33], 0xF0);
    ASSERT_EQ_INT(blk[34], 0xF0);
    ASSERT_EQ_INT(blk[35], 0xF0);
    float y[16];
    ASSERT_STATUS(vq_codec_decode(k, blk, 2, y), VQ_STATUS_OK);
    ASSERT(memcmp(x, y, sizeof x) == 0);
    vq_codec_free(k);

    /* values d = 8, G = 8, 3 bits: x_c = c gives z = 0, s = 1, codes c; 2-bit plane then
     * 1-bit plane. */
    vq_codec *v = mk(VQ_METHOD_KIVI, VQ_ROLE_VALUE, 8, 3, 8, 0, NULL);
    ASSERT_EQ_INT(vq_codec_block_bytes(v), 4 + 3);
    ASSERT_STATUS(vq_codec_encode(v, x, 1, blk), VQ_STATUS_OK);
    ASSERT_EQ_INT(rd16(blk), vq_fp32_to_sf16(1.0f));
    ASSERT_EQ_INT(rd16(blk + 2), vq_fp32_to_sf16(0.0f));
    ASSERT_EQ_INT(blk[4], 0xE4);
    ASSERT_EQ_INT(blk[5], 0xE4);
    ASSERT_EQ_INT(blk[6], 0xF0);
    ASSERT_STATUS(vq_codec_decode(v, blk, 1, y), VQ_STATUS_OK);
    ASSERT(memcmp(x, y, 8 * sizeof(float)) == 0);
    /* constant group: s = 0, decodes to z exactly */
    for (int c = 0; c < 8; c++) x[c] = 5.25f;
    ASSERT_STATUS(vq_codec_encode(v, x, 1, blk), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_decode(v, blk, 1, y), VQ_STATUS_OK);
    ASSERT(memcmp(x, y, 8 * sizeof(float)) == 0);
    vq_codec_free(v);

    /* 5..8 bits, values d = 8, G = 8: codes 0 and 2^b - 1 present, so s = 1, z = 0 and the
     * codes are the inputs. Expected rows written out by hand from the layout in kivi.c:
     * 4-bit plane (low nibble first), then the 2-bit plane (bits 4-5), then the 1-bit plane. */
    static const uint8_t wc[4][8] = {{0, 31, 16, 15, 1, 17, 8, 24},
                                     {0, 63, 16, 32, 48, 5, 42, 21},
                                     {0, 127, 64, 16, 32, 80, 99, 7},
                                     {0, 255, 128, 1, 77, 200, 16, 99}};
    static const uint8_t wrow[4][8] = {{0xF0, 0xF0, 0x11, 0x88, 0xA6},
                                       {0xF0, 0x00, 0x50, 0x5A, 0x9C, 0x63},
                                       {0xF0, 0x00, 0x00, 0x73, 0x4C, 0x26, 0x66},
                                       {0x00, 0xFF, 0x80, 0x01, 0x4D, 0xC8, 0x10, 0x63}};
    for (int b = 5; b <= 8; b++) {
        vq_codec *vb = mk(VQ_METHOD_KIVI_SINK, VQ_ROLE_VALUE, 8, b, 8, 0, NULL);
        ASSERT_EQ_INT(vq_codec_block_bytes(vb), 4 + b);
        for (int c = 0; c < 8; c++) x[c] = (float)wc[b - 5][c];
        memset(blk, 0xAA, sizeof blk);
        ASSERT_STATUS(vq_codec_encode(vb, x, 1, blk), VQ_STATUS_OK);
        ASSERT_EQ_INT(rd16(blk), vq_fp32_to_sf16(1.0f));
        ASSERT_EQ_INT(rd16(blk + 2), vq_fp32_to_sf16(0.0f));
        ASSERT(memcmp(blk + 4, wrow[b - 5], (size_t)b) == 0);
        ASSERT_EQ_INT(blk[4 + b], 0xAA); /* nothing written past the block */
        ASSERT_STATUS(vq_codec_decode(vb, blk, 1, y), VQ_STATUS_OK);
        ASSERT(memcmp(x, y, 8 * sizeof(float)) == 0);
        uint8_t back[8];
        vq_kivi_unpack_row(wrow[b - 5], 8, b, back);
        ASSERT(memcmp(back, wc[b - 5], 8) == 0);
        vq_codec_free(vb);
    }
}

TEST(encode_errors) {
    for (int cfg = 0; cfg < 2 * 7; cfg++) { /* (keys, values) x bits 2..8 */
        const int role = cfg % 2;
        vq_codec *c = mk(VQ_METHOD_KIVI, (enum vq_role)role, 16, 2 + cfg / 2, 8, 0, NULL);
        const int n = role == 0 ? 8 : 2;
        float x[8 * 16];
        for (int i = 0; i < 8 * 16; i++) x[i] = nrand();
        uint8_t *buf = malloc(vq_codec_block_bytes(c) * 8);
        ASSERT_STATUS(vq_codec_encode(c, x, n, buf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_encode(c, x, 3, buf),
                      role == 0 ? VQ_STATUS_INVALID_ARG : VQ_STATUS_OK);
        x[17] = NAN;
        ASSERT_STATUS(vq_codec_encode(c, x, n, buf), VQ_STATUS_NON_FINITE);
        x[17] = INFINITY;
        ASSERT_STATUS(vq_codec_encode(c, x, n, buf), VQ_STATUS_NON_FINITE);
        x[17] = -1e10f; /* zero point beyond vq_sf16 */
        ASSERT_STATUS(vq_codec_encode(c, x, n, buf), VQ_STATUS_RANGE);
        x[17] = -3e38f; /* max - min overflows */
        x[18] = 3e38f;
        ASSERT_STATUS(vq_codec_encode(c, x, n, buf), VQ_STATUS_RANGE);
        free(buf);
        vq_codec_free(c);
    }
}

static double mean_cos(const float *x, const float *y, int64_t n, int d) {
    double acc = 0;
    for (int64_t t = 0; t < n; t++) {
        double xy = 0, xx = 0, yy = 0;
        for (int i = 0; i < d; i++) {
            xy += (double)x[t * d + i] * y[t * d + i];
            xx += (double)x[t * d + i] * x[t * d + i];
            yy += (double)y[t * d + i] * y[t * d + i];
        }
        acc += xy / sqrt(xx * yy + 1e-30);
    }
    return acc / (double)n;
}

/* Worst |x - x̂| over one group beyond its bound, elements x[i*stride] (n of them), side
 * values (s16, z16): code rounding gives ŝ/2; clamping adds what the sf16 rounding of the
 * side values moved, qmax |s - ŝ| at the top and |min - ẑ| at the bottom, with s = (max -
 * min) / qmax from the data; plus float rounding. Returns max(0, |x - x̂| - bound). */
static double group_excess(const float *x, const float *y, int64_t stride, int n, int bits,
                           uint16_t s16, uint16_t z16) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = fminf(lo, x[i * stride]);
        hi = fmaxf(hi, x[i * stride]);
    }
    const double qmax = (double)((1 << bits) - 1);
    const double sh = vq_sf16_to_fp32(s16), zh = vq_sf16_to_fp32(z16);
    const double s = ((double)hi - lo) / qmax;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const double xi = x[i * stride];
        const double bound = sh / 2 + qmax * fabs(s - sh) + fabs((double)lo - zh) +
                             1e-6 * (fabs(xi) + fabs(zh) + qmax * sh);
        const double e = fabs(xi - (double)y[i * stride]) - bound;
        if (e > worst) worst = e;
    }
    return worst;
}

TEST(quality) {
    rng_ = VQ_TEST_SEED; /* the figures printed (and quoted in docs/ALGORITHMS.md §7.5) */
    const int d = 128, n = 512, g = 32;
    float *x = malloc((size_t)n * d * sizeof(float)), *y = malloc((size_t)n * d * sizeof(float));
    float off[128];
    for (int c = 0; c < d; c++) off[c] = 2.0f * nrand();
    uint8_t *buf = malloc((size_t)n * d * 2);
    double kc[9] = {0}, vc[9] = {0};
    for (int b = 2; b <= 8; b++) {
        /* keys: Gaussian with per-channel offsets, per-channel groups of 32 tokens */
        for (int t = 0; t < n; t++)
            for (int c = 0; c < d; c++) x[t * d + c] = nrand() + off[c];
        vq_codec *k = mk(VQ_METHOD_KIVI, VQ_ROLE_KEY, d, b, g, 128, NULL);
        ASSERT_STATUS(vq_codec_encode(k, x, n, buf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(k, buf, n, y), VQ_STATUS_OK);
        kc[b] = mean_cos(x, y, n, d);
        double excess = 0;
        for (int blk = 0; blk < n / g; blk++) {
            const uint8_t *h = buf + (size_t)blk * vq_codec_block_bytes(k);
            for (int c = 0; c < d; c++)
                excess = fmax(excess, group_excess(x + blk * g * d + c, y + blk * g * d + c, d, g,
                                                   b, rd16(h + 2 * c), rd16(h + 2 * d + 2 * c)));
        }
        vq_codec_free(k);
        /* values: iid Gaussian, per-token groups of 32 channels */
        for (int i = 0; i < n * d; i++) x[i] = nrand();
        vq_codec *v = mk(VQ_METHOD_KIVI, VQ_ROLE_VALUE, d, b, g, 128, NULL);
        ASSERT_STATUS(vq_codec_encode(v, x, n, buf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(v, buf, n, y), VQ_STATUS_OK);
        vc[b] = mean_cos(x, y, n, d);
        const int ng = d / g;
        for (int t = 0; t < n; t++) {
            const uint8_t *h = buf + (size_t)t * vq_codec_block_bytes(v);
            for (int j = 0; j < ng; j++)
                excess = fmax(excess, group_excess(x + t * d + j * g, y + t * d + j * g, 1, g, b,
                                                   rd16(h + 2 * j), rd16(h + 2 * ng + 2 * j)));
        }
        vq_codec_free(v);
        if (excess > 0) fprintf(stderr, "  %d bits: error %.3g beyond the bound\n", b, excess);
        ASSERT(excess == 0);
    }
    fprintf(stderr, "  key cos 2..8 bits: %.4f %.4f %.4f %.5f %.5f %.6f %.6f\n", kc[2], kc[3],
            kc[4], kc[5], kc[6], kc[7], kc[8]);
    fprintf(stderr, "  value cos 2..8 bits: %.4f %.4f %.4f %.5f %.5f %.6f %.6f\n", vc[2], vc[3],
            vc[4], vc[5], vc[6], vc[7], vc[8]);
    ASSERT_GE(kc[2], 0.90);
    ASSERT_GE(kc[4], 0.99);
    ASSERT_GE(vc[2], 0.90);
    ASSERT_GE(vc[4], 0.99);
    for (int b = 3; b <= 8; b++) { /* each extra bit cuts 1 - cos by at least 2.5x */
        ASSERT_LE(1.0 - kc[b], (1.0 - kc[b - 1]) / 2.5);
        ASSERT_LE(1.0 - vc[b], (1.0 - vc[b - 1]) / 2.5);
    }
    free(x);
    free(y);
    free(buf);
}

TEST(sf16_inline_exact) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = vq_kivi_sf16((uint16_t)h), b = vq_sf16_to_fp32((uint16_t)h);
        bad += memcmp(&a, &b, sizeof a) != 0;
    }
    ASSERT_EQ_INT(bad, 0);
}

TEST(pack_roundtrip) {
    /* every code value of every width (codes (37c + off) mod 2^b cover 0..2^b-1 once d >= 2^b,
     * then random codes), rows of exactly d*b/8 bytes (a canary after the row stays) */
    static const int dims[] = {8, 16, 24, 40, 64, 72, 128, 136, 256, 264, 512, 1000, 1024};
    uint8_t codes[1024], back[1024], row[1024 + 1];
    for (int b = 2; b <= 8; b++) {
        int all_values = 0;
        for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
            const int d = dims[di], qm = (1 << b) - 1;
            for (int rep = 0; rep < 2; rep++) {
                int seen[256] = {0}, nseen = 0;
                for (int c = 0; c < d; c++) {
                    codes[c] = (uint8_t)(rep == 0 ? (37 * c + b) & qm : (int)(urand() * (qm + 1)));
                    nseen += !seen[codes[c]];
                    seen[codes[c]] = 1;
                }
                all_values += rep == 0 && nseen == qm + 1;
                const size_t rb = vq_kivi_row_bytes(d, b);
                ASSERT_EQ_INT(rb, (size_t)d * b / 8);
                row[rb] = 0x5C;
                vq_kivi_pack_row(codes, d, b, row);
                ASSERT_EQ_INT(row[rb], 0x5C);
                vq_kivi_unpack_row(row, d, b, back);
                ASSERT(memcmp(codes, back, (size_t)d) == 0);
            }
        }
        ASSERT_GE(all_values, 4); /* all 2^b values went through >= 4 row sizes */
    }
    /* key tiles: m = 1..16 tokens x n channels, every width, exactly m*n*b/8 bytes; a
     * 16-token tile of 8 channels at 5 bits written out by hand from the layout in kivi.c */
    static uint8_t tc[16 * 1024], tb[16 * 1024], tile[16 * 1024 + 1];
    static const int tn[] = {8, 16, 24, 40, 64, 1024};
    for (int b = 2; b <= 8; b++)
        for (size_t ni = 0; ni < sizeof tn / sizeof *tn; ni++)
            for (int m = 1; m <= 16; m += (m < 3 ? 1 : 6)) {
                const int n = tn[ni];
                for (int i = 0; i < m * n; i++) tc[i] = (uint8_t)(urand() * (1 << b));
                const size_t tbytes = vq_kivi_tile_bytes(m, n, b);
                tile[tbytes] = 0x5C;
                vq_kivi_pack_tile(tc, (size_t)n, m, n, b, tile);
                ASSERT_EQ_INT(tile[tbytes], 0x5C);
                memset(tb, 0xEE, (size_t)m * (size_t)n);
                vq_kivi_unpack_tile(tile, m, n, b, tb, (size_t)n);
                ASSERT(memcmp(tc, tb, (size_t)m * (size_t)n) == 0);
            }
    /* 8 channels, 16 tokens, 5 bits, code(t, c) = (t + 2c) & 31: the 4-bit plane (64 bytes;
     * byte 16p + t = code(t, 2p) & 15 | (code(t, 2p + 1) & 15) << 4), then the 1-bit plane
     * (16 bytes; bit 32p + 2t + e = bit 4 of code(t, 2p + e)) */
    for (int t = 0; t < 16; t++)
        for (int c = 0; c < 8; c++) tc[t * 8 + c] = (uint8_t)((t + 2 * c) & 31);
    vq_kivi_pack_tile(tc, 8, 16, 8, 5, tile);
    int lay_bad = 0;
    for (int p = 0; p < 4; p++)
        for (int t = 0; t < 16; t++) {
            const int c0 = (t + 4 * p) & 31, c1 = (t + 4 * p + 2) & 31;
            lay_bad += tile[16 * p + t] != ((c0 & 15) | (c1 & 15) << 4);
            for (int e = 0; e < 2; e++) {
                const int bit = 32 * p + 2 * t + e, code = e ? c1 : c0;
                lay_bad += ((tile[64 + bit / 8] >> (bit % 8)) & 1) != (code >> 4);
            }
        }
    ASSERT_EQ_INT(lay_bad, 0);
}

/* Runs a codec's fused score (into sc) and accumulate + finish over n encoded tokens (codes)
 * and counts the mismatches against decode-then-dot on the decoded vectors y (n x d): a score
 * or output channel off by more than 1e-5 of its sum of |products|. Adds the comparisons made
 * to *checks. */
static int fused_mismatches(const vq_codec *c, const uint8_t *codes, const float *y, int n, int d,
                            const float *q, const float *w, float *sc, int *checks) {
    float *qs = vq_alloc(vq_codec_query_bytes(c));
    float *acc = calloc(vq_codec_acc_floats(c), sizeof(float)), out[1024];
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, codes, n, sc);
    vq_codec_accumulate(c, codes, n, w, acc);
    vq_codec_finish(c, acc, out);
    int bad = 0;
    /* keys score with the query rounded to int16 per width class (kivi.c): a channel's term
     * is off by at most delta/2 * code <= max_c |q_c| range_c / (2 qmax), qmax >= the class
     * bound at d channels and 8 bits; range_c over all n tokens covers every block's */
    double qr = 0;
    if (c->p.role == VQ_ROLE_KEY)
        for (int i = 0; i < d; i++) {
            float lo = y[i], hi = y[i];
            for (int t = 1; t < n; t++) {
                lo = y[t * d + i] < lo ? y[t * d + i] : lo;
                hi = y[t * d + i] > hi ? y[t * d + i] : hi;
            }
            const double e = fabs((double)q[i]) * (hi - lo);
            qr = e > qr ? e : qr;
        }
    const double key_slack = (double)d * qr / (2.0 * vq_kivi_qmax(d, 8));
    for (int t = 0; t < n; t++, (*checks)++) {
        double ref = 0, mag = 0;
        for (int i = 0; i < d; i++) {
            ref += (double)q[i] * y[t * d + i];
            mag += fabs((double)q[i] * y[t * d + i]);
        }
        bad += fabs(sc[t] - ref) > 1e-5 * mag + key_slack;
    }
    for (int i = 0; i < d; i++, (*checks)++) {
        double ref = 0, mag = 0;
        for (int t = 0; t < n; t++) {
            ref += (double)w[t] * y[t * d + i];
            mag += fabs((double)w[t] * y[t * d + i]);
        }
        bad += fabs(out[i] - ref) > 1e-5 * mag;
    }
    vq_free(qs);
    free(acc);
    return bad;
}

/* Fused score / accumulate of a codec (every ISA) against decode-then-dot on the decoded
 * vectors: keys (n = 3 blocks of G tokens) and values (37 tokens), every width. */
TEST(fused_vs_decode) {
    const int d = 72, n_v = 37;
    int checks = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (int b = 2; b <= 8; b++)
            for (int role = 0; role < 2; role++) {
                const int g = role == 0 ? 16 : 24, n = role == 0 ? 3 * g : n_v;
                struct vq_codec_params p = vq_codec_params_default();
                p.method = VQ_METHOD_KIVI;
                p.role = (enum vq_role)role;
                p.head_dim = d;
                p.bits = b;
                p.group_size = g;
                p.residual_length = 0;
                p.isa = (enum vq_isa)isa;
                vq_codec *c = vq_codec_create(&p, NULL);
                ASSERT(c != NULL);
                if (!c) continue;
                float x[48 * 72], y[48 * 72], q[72], w[48], sc[48];
                for (int i = 0; i < n * d; i++) x[i] = nrand() + (float)(i % d % 5);
                for (int i = 0; i < d; i++) q[i] = nrand();
                for (int t = 0; t < n; t++) w[t] = t % 5 == 2 ? 0.0f : (float)urand();
                uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)n);
                ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
                ASSERT_STATUS(vq_codec_decode(c, codes, n, y), VQ_STATUS_OK);
                const int bad = fused_mismatches(c, codes, y, n, d, q, w, sc, &checks);
                if (bad)
                    fprintf(stderr, "  %s %d bits role %d: %d mismatches\n",
                            vq_isa_name((enum vq_isa)isa), b, role, bad);
                ASSERT_EQ_INT(bad, 0);
                free(codes);
                vq_codec_free(c);
            }
    }
    ASSERT_GE(checks, 7 * 2 * 100);
}

/* Widths of the per-channel test table at d = 64, mean 4: eight channels each at 8, 6, 5, 4
 * and 3 bits and 24 at 2 (64+48+40+32+24+48 = 256 = 64*4), scattered over the channels. */
static void scattered_widths(uint8_t *w) {
    static const uint8_t cls[8] = {8, 6, 5, 4, 3, 2, 2, 2};
    for (int c = 0; c < 64; c++) w[(c * 37) % 64] = cls[c / 8];
}

/* Keys with per-channel widths (vq_codec_params.channel_bits): validation; the same block
 * bytes as the uniform width; an all-equal table gives the uniform codec's bytes; the layout
 * (position order = decreasing width, ascending channel); every element within half a step
 * of its own channel's width; fused score / accumulate against decode-then-dot on every ISA
 * and every ISA's scores equal to the scalar ones. */
TEST(channel_widths) {
    const int d = 64, g = 16, n = 3 * g;
    uint8_t w[64];
    scattered_widths(w);
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_KIVI;
    p.role = VQ_ROLE_KEY;
    p.head_dim = d;
    p.bits = 4;
    p.group_size = g;
    p.residual_length = 0;
    vq_status st;
    /* validation, one fault each: widths 1 (and 7), 9 (and 2, 3), classes of 4 channels, a
     * wrong sum, values */
    uint8_t bad[64];
    for (int k = 0; k < 5; k++) {
        struct vq_codec_params q = p;
        memset(bad, 4, sizeof bad);
        for (int c = 0; c < 32; c++) {
            if (k == 0 && c < 16) bad[c] = c < 8 ? 1 : 7;
            if (k == 1) bad[c] = c < 8 ? 9 : c < 24 ? 2 : 3;
            if (k == 2 && c < 8) bad[c] = c < 4 ? 5 : 3;
            if (k == 3 && c < 8) bad[c] = 5;
        }
        if (k == 4) q.role = VQ_ROLE_VALUE;
        q.channel_bits = bad;
        ASSERT(vq_codec_create(&q, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
    struct vq_codec_params tq = vq_codec_params_default();
    tq.method = VQ_METHOD_TURBOQUANT_MSE;
    tq.head_dim = d;
    tq.channel_bits = w;
    ASSERT(vq_codec_create(&tq, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);

    float x[48 * 64], y[48 * 64];
    for (int t = 0; t < n; t++)
        for (int c = 0; c < d; c++) x[t * d + c] = (float)(c % 7) + (1.0f + 0.1f * c) * nrand();
    /* an all-4 table is the uniform codec, byte for byte */
    uint8_t four[64];
    memset(four, 4, sizeof four);
    struct vq_codec_params pu = p, p4 = p;
    p4.channel_bits = four;
    vq_codec *cu = vq_codec_create(&pu, NULL), *c4 = vq_codec_create(&p4, NULL);
    ASSERT(cu && c4);
    if (!cu || !c4) return;
    const size_t bb = vq_codec_block_bytes(cu);
    uint8_t *b1 = malloc(3 * bb), *b2 = malloc(3 * bb);
    ASSERT_STATUS(vq_codec_encode(cu, x, n, b1), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_encode(c4, x, n, b2), VQ_STATUS_OK);
    ASSERT(memcmp(b1, b2, 3 * bb) == 0);
    vq_codec_free(c4);

    int checks = 0, pos_ok = 1;
    float sc_scalar[48], q[64], wt[48];
    for (int i = 0; i < d; i++) q[i] = nrand();
    for (int t = 0; t < n; t++) wt[t] = t % 5 == 2 ? 0.0f : (float)urand();
    int n_isa = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        n_isa++;
        struct vq_codec_params pc = p;
        uint8_t wcopy[64];
        memcpy(wcopy, w, sizeof wcopy);
        pc.channel_bits = wcopy;
        pc.isa = (enum vq_isa)isa;
        vq_codec *c = vq_codec_create(&pc, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        memset(wcopy, 0, sizeof wcopy); /* the codec keeps its own copy */
        ASSERT(memcmp(vq_codec_params_get(c)->channel_bits, w, 64) == 0);
        ASSERT_EQ_INT(vq_codec_block_bytes(c), bb);
        ASSERT_NEAR(vq_codec_bits_per_elem(c), vq_codec_bits_per_elem(cu), 1e-12);
        ASSERT_STATUS(vq_codec_encode(c, x, n, b2), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(c, b2, n, y), VQ_STATUS_OK);
        /* layout: position i's zero is the minimum of channel perm[i] over the block, with
         * positions in decreasing width, ascending channel within a width */
        for (int i = 0, b = 8; b >= 2; b--)
            for (int ch = 0; ch < d; ch++) {
                if (w[ch] != b) continue;
                float lo = x[ch];
                for (int t = 1; t < g; t++) lo = x[t * d + ch] < lo ? x[t * d + ch] : lo;
                pos_ok &= rd16(b2 + 2 * d + 2 * i) == vq_fp32_to_sf16(lo);
                i++;
            }
        /* bound: |x - x̂| <= ŝ_c / 2 (+ the sf16 rounding slack of the top code) */
        int over = 0;
        for (int blk = 0; blk < 3; blk++)
            for (int ch = 0; ch < d; ch++) {
                float lo = INFINITY, hi = -INFINITY;
                for (int t = blk * g; t < (blk + 1) * g; t++) {
                    lo = x[t * d + ch] < lo ? x[t * d + ch] : lo;
                    hi = x[t * d + ch] > hi ? x[t * d + ch] : hi;
                }
                const double step = (hi - lo) / ((1 << w[ch]) - 1);
                for (int t = blk * g; t < (blk + 1) * g; t++)
                    over += fabs(x[t * d + ch] - y[t * d + ch]) > 0.5 * step * 1.01 + 1e-3 * step;
            }
        ASSERT_EQ_INT(over, 0);
        float sc[48];
        ASSERT_EQ_INT(fused_mismatches(c, b2, y, n, d, q, wt, sc, &checks), 0);
        if (isa == VQ_ISA_SCALAR) memcpy(sc_scalar, sc, sizeof sc);
        else
            for (int t = 0; t < n; t++)
                ASSERT_LE(fabs(sc[t] - sc_scalar[t]), 1e-5 * (1.0 + fabs(sc_scalar[t])));
        vq_codec_free(c);
    }
    ASSERT(pos_ok);
    ASSERT_GE(checks, n_isa * (48 + 64)); /* every ISA of this build */
    vq_codec_free(cu);
    free(b1);
    free(b2);
}

/* Keys with 0-bit channels (key_channel_bits = 2, docs/ALGORITHMS.md §8.8): a table of widths
 * 4, 2 and 0 at mean 2 is valid (an all-0 one is not); a 0-bit channel decodes to its group's
 * mean (sf16) and stores no code; the others stay within half a step; fused score / accumulate
 * against decode-then-dot on every ISA, every ISA's scores equal to the scalar ones, and the
 * multi-query score equal to one query at a time. */
TEST(channel_widths_zero) {
    const int d = 64, g = 16, n = 3 * g;
    uint8_t w[64], zeros[64] = {0};
    for (int c = 0; c < d; c++) w[(c * 37) % 64] = c < 24 ? 4 : c < 40 ? 2 : 0;
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_KIVI;
    p.role = VQ_ROLE_KEY;
    p.head_dim = d;
    p.bits = 2;
    p.group_size = g;
    p.residual_length = 0;
    vq_status st;
    struct vq_codec_params pz = p;
    pz.channel_bits = zeros;
    pz.bits = 0;
    ASSERT(vq_codec_create(&pz, &st) == NULL);
    memset(zeros, 0, sizeof zeros);
    for (int c = 0; c < 16; c++) zeros[c] = 8; /* sums to d * 2, but 48 channels carry nothing */
    pz = p;
    pz.channel_bits = zeros;
    vq_codec *cz = vq_codec_create(&pz, &st);
    ASSERT(cz != NULL); /* valid: one coded class */
    vq_codec_free(cz);

    float x[48 * 64], y[48 * 64];
    for (int t = 0; t < n; t++)
        for (int c = 0; c < d; c++) x[t * d + c] = (float)(c % 5) + (0.5f + 0.05f * c) * nrand();
    int checks = 0, over = 0, mean_bad = 0;
    float sc_scalar[48], q[6][64], wt[48];
    for (int j = 0; j < 6; j++)
        for (int i = 0; i < d; i++) q[j][i] = nrand();
    for (int t = 0; t < n; t++) wt[t] = t % 5 == 2 ? 0.0f : (float)urand();
    int n_isa = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        n_isa++;
        struct vq_codec_params pc = p;
        pc.channel_bits = w;
        pc.isa = (enum vq_isa)isa;
        vq_codec *c = vq_codec_create(&pc, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        const size_t bb = vq_codec_block_bytes(c);
        ASSERT_EQ_INT(bb, 4 * (size_t)d + (size_t)g * (size_t)d * 2 / 8);
        uint8_t *b2 = malloc(3 * bb);
        ASSERT_STATUS(vq_codec_encode(c, x, n, b2), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(c, b2, n, y), VQ_STATUS_OK);
        for (int blk = 0; blk < 3; blk++)
            for (int ch = 0; ch < d; ch++) {
                float lo = INFINITY, hi = -INFINITY;
                double m = 0;
                for (int t = blk * g; t < (blk + 1) * g; t++) {
                    lo = x[t * d + ch] < lo ? x[t * d + ch] : lo;
                    hi = x[t * d + ch] > hi ? x[t * d + ch] : hi;
                    m += x[t * d + ch];
                }
                m /= g;
                if (w[ch] == 0) {
                    for (int t = blk * g; t < (blk + 1) * g; t++)
                        mean_bad += y[t * d + ch] != vq_sf16_to_fp32(vq_fp32_to_sf16((float)m));
                    continue;
                }
                const double step = (hi - lo) / ((1 << w[ch]) - 1);
                for (int t = blk * g; t < (blk + 1) * g; t++)
                    over += fabs(x[t * d + ch] - y[t * d + ch]) > 0.5 * step * 1.01 + 1e-3 * step;
            }
        float sc[48];
        ASSERT_EQ_INT(fused_mismatches(c, b2, y, n, d, q[0], wt, sc, &checks), 0);
        if (isa == VQ_ISA_SCALAR) memcpy(sc_scalar, sc, sizeof sc);
        else
            for (int t = 0; t < n; t++)
                ASSERT_LE(fabs(sc[t] - sc_scalar[t]), 1e-5 * (1.0 + fabs(sc_scalar[t])));
        /* up to 6 queries at once: each the bits of its own single-query score */
        for (int nq = 1; nq <= 6; nq++) {
            void *qs[6];
            float one[6][48], many[6][48], *outs[6];
            for (int j = 0; j < nq; j++) {
                qs[j] = vq_alloc(vq_codec_query_bytes(c));
                vq_codec_prepare_query(c, q[j], qs[j]);
                vq_codec_score(c, qs[j], b2, n, one[j]);
                outs[j] = many[j];
            }
            vq_codec_score_multi(c, (const void *const *)qs, nq, b2, n, outs);
            for (int j = 0; j < nq; j++) {
                ASSERT(memcmp(one[j], many[j], (size_t)n * sizeof(float)) == 0);
                vq_free(qs[j]);
            }
        }
        free(b2);
        vq_codec_free(c);
    }
    ASSERT_EQ_INT(over, 0);
    ASSERT_EQ_INT(mean_bad, 0);
    ASSERT_GE(checks, n_isa * (48 + 64)); /* every ISA of this build */
}

#ifdef VQ_HAVE_X86
/* The key-tile kernels against the reference, bit for bit: random class layouts (1..7
 * classes of 8..40 channels, widths 2..8 in any order), G of 1..150 tokens (full tiles, groups
 * of four and a partial last one), 1..4 queries with int16 entries up to each class's qmax,
 * random deltas, a prefetch pointer or none. */
TEST(tiles_vs_ref) {
    const vq_kivi_score_tiles_fn fns[3] = {vq_kivi_score_tiles_avx2, vq_kivi_score_tiles_avx512,
                                           vq_kivi_score_tiles_avx512vnni};
    const enum vq_isa isas[3] = {VQ_ISA_AVX2, VQ_ISA_AVX512, VQ_ISA_AVX512};
    uint8_t *area = malloc(150 * 7 * 40), codes[150 * 40];
    for (int v = 0; v < 3; v++) {
        if (!vq_isa_available(isas[v]) || (v == 2 && !vq_cpu_avx512vnni())) continue;
        int bad = 0, checks = 0;
        for (int rep = 0; rep < 300; rep++) {
            const int ncls = 1 + rep % 7,
                      g = rep % 5 == 0 ? 64 : 1 + (int)(urand() * (rep % 2 ? 150 : 70));
            const int nq = 1 + rep % VQ_KIVI_MAX_Q;
            int bits[7], nch[7];
            size_t off[7], o0 = 0;
            for (int k = 0; k < ncls; k++) {
                bits[k] = 2 + (int)(urand() * 7);
                nch[k] = 8 * (1 + (int)(urand() * 5));
                off[k] = o0;
                for (int t = 0; t < g; t++)
                    for (int c = 0; c < nch[k]; c++)
                        codes[t * nch[k] + c] = (uint8_t)(urand() * (1 << bits[k]));
                for (int t0 = 0; t0 < g; t0 += VQ_KIVI_TILE)
                    vq_kivi_pack_tile(codes + t0 * nch[k], (size_t)nch[k],
                                      g - t0 < VQ_KIVI_TILE ? g - t0 : VQ_KIVI_TILE, nch[k],
                                      bits[k],
                                      area + o0 +
                                          (size_t)(t0 / VQ_KIVI_TILE) *
                                              vq_kivi_tile_bytes(VQ_KIVI_TILE, nch[k], bits[k]));
                o0 += vq_kivi_tile_bytes(g, nch[k], bits[k]);
            }
            int16_t qb[VQ_KIVI_MAX_Q][7 * 40];
            float db[VQ_KIVI_MAX_Q][7], bias[VQ_KIVI_MAX_Q], ob[VQ_KIVI_MAX_Q][150],
                rb[VQ_KIVI_MAX_Q][150];
            const int16_t *qi[VQ_KIVI_MAX_Q];
            const float *dl[VQ_KIVI_MAX_Q];
            float *o[VQ_KIVI_MAX_Q], *r[VQ_KIVI_MAX_Q];
            for (int j = 0; j < VQ_KIVI_MAX_Q; j++)
                qi[j] = qb[j], dl[j] = db[j], o[j] = ob[j], r[j] = rb[j];
            for (int j = 0; j < nq; j++) {
                for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++) {
                    const int qm = vq_kivi_qmax(nch[k], bits[k]);
                    for (int c = 0; c < nch[k]; c++)
                        qb[j][c0 + c] = (int16_t)(rep % 3 == 0 ? (c % 2 ? qm : -qm)
                                                               : (int)((2 * urand() - 1) * qm));
                    db[j][k] = (float)urand() * 1e-3f;
                }
                bias[j] = nrand();
            }
            vq_kivi_score_tiles_ref(qi, dl, nq, area, ncls, bits, nch, off, g, bias, r, NULL, 0);
            fns[v](qi, dl, nq, area, ncls, bits, nch, off, g, bias, o, rep % 2 ? area : NULL, o0);
            for (int j = 0; j < nq; j++, checks++)
                bad += memcmp(ob[j], rb[j], (size_t)g * sizeof(float)) != 0;
        }
        if (bad)
            fprintf(stderr, "  tiles %s%s: %d of %d mismatches\n", vq_isa_name(isas[v]),
                    v == 2 ? " vnni" : "", bad, checks);
        ASSERT_EQ_INT(bad, 0);
        ASSERT_GE(checks, 500);
    }
    free(area);
}

/* The per-block integer queries (vq_kivi_prep_*) against the reference: qi and delta bit for
 * bit, bias within rounding of it and bit for bit the family's fold; random class layouts of
 * 8..1024 channels and of 64 (some followed by channels of no class, as a 0-bit class), sf16 scales
 * with subnormals and negatives, 1..4 queries, some all zero, some with a huge or non-finite
 * entry. */
TEST(prep_vs_ref) {
    const vq_kivi_prep_fn fns[3] = {vq_kivi_prep_avx2, vq_kivi_prep_avx512,
                                    vq_kivi_prep_avx512vbmi};
    const vq_kivi_fold_fn folds[3] = {vq_kivi_fold_avx2, vq_kivi_fold_avx512,
                                      vq_kivi_fold_avx512vbmi};
    const enum vq_isa isas[3] = {VQ_ISA_AVX2, VQ_ISA_AVX512, VQ_ISA_AVX512};
    static float qb[VQ_KIVI_MAX_Q][1024], qf[1024];
    static int16_t r16[VQ_KIVI_MAX_Q][1024], o16[VQ_KIVI_MAX_Q][1024];
    static uint8_t hdr[4 * 1024];
    for (int v = 0; v < 3; v++) {
        if (!vq_isa_available(isas[v]) || (v == 2 && !vq_cpu_avx512vbmi())) continue;
        int bad = 0, checks = 0;
        for (int rep = 0; rep < 300; rep++) {
            const int ncls = 1 + rep % 5, nq = 1 + rep % VQ_KIVI_MAX_Q;
            int nch[5], qmax[5], d = 0;
            for (int k = 0; k < ncls; k++) {
                nch[k] = 8 * (1 + (int)(urand() * (rep % 10 == 0 ? 50 : 6)));
                if (d + nch[k] > 1024) nch[k] = 8;
                qmax[k] = vq_kivi_qmax(nch[k], 2 + (int)(urand() * 7));
                d += nch[k];
            }
            if (rep % 3 == 1) { /* head size 64 (SmolLM2's, decode's shape): even classes */
                d = 0;
                for (int k = 0; k < ncls; k++) {
                    const int left = 64 - d - 2 * (ncls - 1 - k);
                    nch[k] = k == ncls - 1 ? left : 2 * (1 + (int)(urand() * (left / 2 - 1)));
                    if (rep % 7 == 5 && k == ncls - 1 && nch[k] > 2) nch[k] -= 2;
                    qmax[k] = vq_kivi_qmax(nch[k], 2 + (int)(urand() * 7));
                    d += nch[k];
                }
            }
            const int dq = d; /* a 0-bit class after the others: channels without codes */
            if (rep % 3 == 1) d = 64;
            else if (rep % 7 == 5 && d <= 1024 - 24) d += 8 * (1 + rep % 3);
            for (int i = 0; i < 2 * d; i++) {
                uint16_t h = (uint16_t)(urand() * 65536.0);
                if (i % 5 == 0) h &= 0x81FF; /* subnormal */
                if (h == 0x7FFF || h == 0xFFFF) h = 0x1234;
                hdr[2 * i] = (uint8_t)h;
                hdr[2 * i + 1] = (uint8_t)(h >> 8);
            }
            const float *q[VQ_KIVI_MAX_Q];
            for (int j = 0; j < VQ_KIVI_MAX_Q; j++) q[j] = qb[j];
            for (int j = 0; j < nq; j++)
                for (int c = 0; c < d; c++) qb[j][c] = rep % 13 == 4 && j == 1 ? 0.0f : nrand();
            if (rep % 17 == 3) qb[0][rep % d] = rep % 2 ? INFINITY : 3e38f;
            float rd[VQ_KIVI_MAX_Q][5], od[VQ_KIVI_MAX_Q][5], rb[VQ_KIVI_MAX_Q], ob[VQ_KIVI_MAX_Q];
            int16_t *ri[VQ_KIVI_MAX_Q], *oi[VQ_KIVI_MAX_Q];
            float *rdp[VQ_KIVI_MAX_Q], *odp[VQ_KIVI_MAX_Q];
            for (int j = 0; j < VQ_KIVI_MAX_Q; j++)
                ri[j] = r16[j], oi[j] = o16[j], rdp[j] = rd[j], odp[j] = od[j];
            vq_kivi_prep_ref(q, nq, hdr, hdr + 2 * d, d, ncls, nch, qmax, ri, rdp, rb);
            fns[v](q, nq, hdr, hdr + 2 * d, d, ncls, nch, qmax, oi, odp, ob);
            for (int j = 0; j < nq; j++, checks++) {
                bad += memcmp(r16[j], o16[j], (size_t)dq * sizeof(int16_t)) != 0;
                bad += memcmp(rd[j], od[j], (size_t)ncls * sizeof(float)) != 0;
                double mag = 0;
                for (int c = 0; c < d; c++)
                    mag += fabs(qb[j][c] * vq_sf16_to_fp32((uint16_t)(hdr[2 * (d + c)] |
                                                                      hdr[2 * (d + c) + 1] << 8)));
                bad += isfinite(rb[j]) ? !(fabs((double)ob[j] - rb[j]) <= 1e-5 * mag)
                                       : !(isnan(ob[j]) || isinf(ob[j]));
                const float fb = folds[v](q[j], hdr, hdr + 2 * d, d, qf); /* its family's fold */
                bad += !isnan(fb) && memcmp(&fb, &ob[j], sizeof fb) != 0;
            }
        }
        if (bad)
            fprintf(stderr, "  prep %s%s: %d of %d mismatches\n", vq_isa_name(isas[v]),
                    v == 2 ? " vbmi" : "", bad, checks);
        ASSERT_EQ_INT(bad, 0);
        ASSERT_GE(checks, 600);
    }
}

TEST(kernels_vs_ref) {
    /* [2]: the AVX-512 kernels built with VBMI, where the CPU has it */
    const vq_kivi_acc_row_fn accs[3] = {vq_kivi_acc_row_avx2, vq_kivi_acc_row_avx512,
                                        vq_kivi_acc_row_avx512vbmi};
    const enum vq_isa isas[3] = {VQ_ISA_AVX2, VQ_ISA_AVX512, VQ_ISA_AVX512};
    const int dims[] = {8, 16, 24, 40, 64, 72, 80, 96, 128, 136, 1024};
    const int gs[] = {8, 16, 24, 32, 4};
    uint8_t *rows = malloc(3 * 1024), codes[1024];
    float a[256], acc_ref[1024], acc[1024];
    for (int v = 0; v < 3; v++) {
        if (!vq_isa_available(isas[v]) || (v == 2 && !vq_cpu_avx512vbmi())) continue;
        int bad = 0, checks = 0;
        for (int b = 2; b <= 8; b++)
            for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
                const int d = dims[di];
                const size_t rb = vq_kivi_row_bytes(d, b);
                for (int64_t t = 0; t < 3; t++) {
                    for (int c = 0; c < d; c++) codes[c] = (uint8_t)(urand() * (1 << b));
                    vq_kivi_pack_row(codes, d, b, rows + t * rb);
                }
                for (size_t gi = 0; gi < sizeof gs / sizeof *gs; gi++) {
                    const int g = gs[gi];
                    if (d % g) continue;
                    for (int h = 0; h < d / g; h++) a[h] = nrand();
                    for (int c = 0; c < d; c++) acc_ref[c] = acc[c] = nrand();
                    for (int t = 0; t < 3; t++) {
                        vq_kivi_acc_row_ref(rows + t * rb, d, b, g, a, acc_ref);
                        accs[v](rows + t * rb, d, b, g, a, acc);
                    }
                    for (int c = 0; c < d; c++, checks++)
                        bad += fabsf(acc[c] - acc_ref[c]) > 1e-5f * 3.0f * (float)(1 << b) * 4.0f;
                }
            }
        /* fold: scale-folded query is exact (bitwise), bias within rounding; sf16 values
         * include subnormals and negatives */
        const vq_kivi_fold_fn folds[3] = {vq_kivi_fold_avx2, vq_kivi_fold_avx512,
                                          vq_kivi_fold_avx512vbmi};
        for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
            const int d = dims[di];
            uint8_t hdr[4 * 1024];
            float q[1024], qp_ref[1024], qp2[1024];
            for (int i = 0; i < 2 * d; i++) {
                uint16_t h = (uint16_t)(urand() * 65536.0);
                if (i % 5 == 0) h &= 0x81FF; /* subnormal */
                hdr[2 * i] = (uint8_t)h;
                hdr[2 * i + 1] = (uint8_t)(h >> 8);
            }
            for (int c = 0; c < d; c++) q[c] = nrand();
            const float b_ref = vq_kivi_fold_ref(q, hdr, hdr + 2 * d, d, qp_ref);
            const float b = folds[v](q, hdr, hdr + 2 * d, d, qp2);
            checks++;
            bad += memcmp(qp2, qp_ref, (size_t)d * sizeof(float)) != 0;
            double mag = 0;
            for (int c = 0; c < 2 * d; c++)
                mag += fabs(q[c % d] *
                            vq_sf16_to_fp32((uint16_t)(hdr[2 * c] | hdr[2 * c + 1] << 8)));
            bad += fabs((double)b - b_ref) > 1e-5 * mag;
        }
        /* acc_vals: whole value-accumulation path over n blocks */
        const vq_kivi_acc_vals_fn avs[3] = {vq_kivi_acc_vals_avx2, vq_kivi_acc_vals_avx512,
                                            vq_kivi_acc_vals_avx512vbmi};
        for (int b = 2; b <= 8; b++)
            for (size_t di = 0; di < sizeof dims / sizeof *dims; di++)
                for (size_t gi = 0; gi < sizeof gs / sizeof *gs; gi++) {
                    const int d = dims[di], g = gs[gi];
                    if (d % g || d / g > 128) continue;
                    const int ng = d / g;
                    const size_t bb = 4 * (size_t)ng + vq_kivi_row_bytes(d, b);
                    const int64_t n = 37;
                    uint8_t *blocks = malloc(bb * (size_t)n);
                    float w[37], *ar = calloc((size_t)(d + ng), sizeof(float)),
                                 *av = calloc((size_t)(d + ng), sizeof(float));
                    for (int64_t t = 0; t < n; t++) {
                        uint8_t *blk = blocks + (size_t)t * bb;
                        for (int h = 0; h < 2 * ng; h++) {
                            const uint16_t x = vq_fp32_to_sf16(nrand());
                            blk[2 * h] = (uint8_t)x;
                            blk[2 * h + 1] = (uint8_t)(x >> 8);
                        }
                        for (int c = 0; c < d; c++) codes[c] = (uint8_t)(urand() * (1 << b));
                        vq_kivi_pack_row(codes, d, b, blk + 4 * ng);
                        w[t] = t % 7 == 3 ? 0.0f : (float)urand();
                    }
                    vq_kivi_acc_vals_ref(blocks, bb, n, w, d, b, g, ar);
                    avs[v](blocks, bb, n, w, d, b, g, av);
                    for (int c = 0; c < d + ng; c++, checks++)
                        bad += fabsf(av[c] - ar[c]) > 1e-5f * (float)n * 3.0f * (float)(1 << b);
                    free(blocks);
                    free(ar);
                    free(av);
                }
        if (bad)
            fprintf(stderr, "  %s%s: %d of %d mismatches\n", vq_isa_name(isas[v]),
                    v == 2 ? " vbmi" : "", bad, checks);
        else if (v == 2) fprintf(stderr, "  avx512 vbmi kernels: %d checks\n", checks);
        ASSERT_EQ_INT(bad, 0);
        ASSERT_GE(checks, 1000);
    }
    free(rows);
}
#endif

/* Attention error against exact fp32 attention on keys with planted high-norm sink tokens. */
static double sink_attn_err(enum vq_method m, const float *k, const float *v, int64_t n, int n_kv,
                            int d, const float *q, int nq, struct vq_cache_memory *mem) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_kv_heads = n_kv;
    p.head_dim = d;
    p.max_tokens = 256;
    p.page_tokens = 64;
    p.key.method = p.value.method = m;
    p.key.bits = p.value.bits = 2;
    p.key.group_size = p.value.group_size = 32;
    p.key.residual_length = p.value.residual_length = 32;
    p.key.n_sink_tokens = p.value.n_sink_tokens = 2;
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (!c) return 1e9;
    ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
    vq_cache_memory(c, mem);
    float *o = malloc((size_t)(nq * n_kv * d) * sizeof(float));
    float *o_ref = malloc((size_t)(nq * n_kv * d) * sizeof(float));
    const float scale = 1.0f / sqrtf((float)d);
    ASSERT_STATUS(vq_cache_attend(c, 0, q, n_kv, nq, NULL, scale, o), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_attend_ref(c, 0, q, n_kv, nq, NULL, scale, o_ref), VQ_STATUS_OK);
    double e = 0, r = 0, er = 0;
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < n_kv; h++) {
            const int64_t pos = n - nq + i;
            const float *qq = q + (i * n_kv + h) * d;
            double s[256], mx = -1e300, sum = 0, ex[128] = {0};
            for (int64_t t = 0; t <= pos; t++) {
                double dot = 0;
                for (int j = 0; j < d; j++) dot += (double)qq[j] * k[(t * n_kv + h) * d + j];
                s[t] = dot * scale;
                if (s[t] > mx) mx = s[t];
            }
            for (int64_t t = 0; t <= pos; t++) {
                s[t] = exp(s[t] - mx);
                sum += s[t];
            }
            for (int64_t t = 0; t <= pos; t++)
                for (int j = 0; j < d; j++) ex[j] += s[t] / sum * v[(t * n_kv + h) * d + j];
            for (int j = 0; j < d; j++) {
                const double df = o[(i * n_kv + h) * d + j] - ex[j];
                e += df * df;
                r += ex[j] * ex[j];
                const double dr = o[(i * n_kv + h) * d + j] - o_ref[(i * n_kv + h) * d + j];
                er += dr * dr;
            }
        }
    ASSERT_LE(sqrt(er / r), 1e-4); /* fused == reference, sinks included */
    free(o);
    free(o_ref);
    vq_cache_free(c);
    return sqrt(e / r);
}

TEST(sink_protection) {
    rng_ = VQ_TEST_SEED ^ 1; /* the figures printed (and quoted in docs/ALGORITHMS.md §7.6) */
    const int d = 64, n_kv = 2;
    const int64_t n = 96;
    float *k = malloc((size_t)(n * n_kv * d) * sizeof(float)),
          *v = malloc((size_t)(n * n_kv * d) * sizeof(float));
    for (int64_t i = 0; i < n * n_kv * d; i++) {
        k[i] = nrand();
        v[i] = nrand();
    }
    /* planted sinks at tokens 5 and 40: 25x norm keys */
    const int64_t sinks[2] = {5, 40};
    for (int s = 0; s < 2; s++)
        for (int h = 0; h < n_kv; h++)
            for (int j = 0; j < d; j++) k[(sinks[s] * n_kv + h) * d + j] *= 25.0f;
    float q[4 * 2 * 64];
    for (int i = 0; i < 4 * n_kv * d; i++) q[i] = nrand();
    struct vq_cache_memory m0, m1;
    const double e_kivi = sink_attn_err(VQ_METHOD_KIVI, k, v, n, n_kv, d, q, 4, &m0);
    const double e_sink = sink_attn_err(VQ_METHOD_KIVI_SINK, k, v, n, n_kv, d, q, 4, &m1);
    fprintf(stderr, "  attention rel err with planted sinks: kivi %.4f, kivi_sink %.4f\n", e_kivi,
            e_sink);
    ASSERT_LE(e_sink, 0.5 * e_kivi);
    /* sink side store: 2 tokens x (K + V) x n_kv heads x d fp16 */
    ASSERT_EQ_INT(m1.window_bytes - m0.window_bytes, 2 * 2 * n_kv * d * 2);
    ASSERT_EQ_INT(m1.key_bytes, m0.key_bytes);
    free(k);
    free(v);
}

int main(void) {
    RUN(sizes_and_validation);
    RUN(byte_layout);
    RUN(encode_errors);
    RUN(quality);
    RUN(sf16_inline_exact);
    RUN(pack_roundtrip);
    RUN(fused_vs_decode);
    RUN(channel_widths);
    RUN(channel_widths_zero);
#ifdef VQ_HAVE_X86
    RUN(kernels_vs_ref);
    RUN(tiles_vs_ref);
    RUN(prep_vs_ref);
#endif
    RUN(sink_protection);
    return TEST_REPORT();
}
