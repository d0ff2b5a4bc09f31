/* test_cache_window.c — sliding windows (vq_cache_params.layer_window) and StreamingLLM
 * eviction (stream_window + stream_sinks) in vq_cache, for every codec, modifier and ISA:
 *   - a window covering the whole context equals full attention bit for bit;
 *   - windowed attention equals the reference computed by masking (vq_cache_attend_ref, which
 *     decodes every held token and skips the masked ones), with prefill batches, decode and
 *     split decode, sinks, outlier tokens / channels and centering;
 *   - fp16 layers stay llama.cpp-exact: equal bit for bit to the ggml kernels run over one
 *     full, position-ordered buffer with masked scores set to -inf (llama.cpp, swa_full);
 *   - memory stays bounded when appending 10 x W tokens: n_stored, bytes held and pages
 *     allocated stop growing, and the analytic estimate (vq_kv_estimate) equals
 *     vq_cache_memory for a prefill of the window followed by decode;
 *   - queries and truncation that would need freed tokens are refused (INVALID_ARG /
 *     UNSUPPORTED, the cache unchanged); truncate to the last append's start and to 0 work. */
#include "test.h"
#include "veloxquant.h"
#include "cache/ggml_attn.h"
#include "codecs/codec_impl.h"
#include "eval/kvmem.h"
#include "fused_tol.h"

static uint64_t rng_ = 0x5851F42D4C957F2Dull;
static double urand(void) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return (double)(rng_ >> 11) / 9007199254740992.0;
}
static float nrand(void) {
    double s = 0;
    for (int i = 0; i < 4; i++) s += urand() - 0.5;
    return (float)(s * 1.7320508);
}
/* (n, n_kv, d) key-like rows: noise plus per-channel offsets; token 3 a large-norm sink. */
static float *gen(int64_t n, int n_kv, int d, float offset) {
    float *x = malloc((size_t)(n * n_kv * d) * sizeof(float));
    for (int64_t i = 0; i < n * n_kv * d; i++) {
        x[i] = nrand() + offset * (float)((i % d) % 7 - 3) / 3.0f;
        if (i / (n_kv * d) == 3) x[i] *= 6.0f;
    }
    return x;
}

enum { D_ = 64, H_ = 2, QH_ = 6, PT_ = 16 };

static struct vq_cache_params mkp(enum vq_method m, enum vq_isa isa, int64_t max_tokens) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = H_;
    p.head_dim = D_;
    p.max_tokens = max_tokens;
    p.page_tokens = PT_;
    p.key.method = p.value.method = m;
    if (m == VQ_METHOD_TURBOQUANT_RVQ) {
        p.key.bits = 2;
        p.value.bits = 1;
    }
    p.key.isa = p.value.isa = isa;
    p.key.group_size = p.value.group_size = 8;
    p.key.residual_length = p.value.residual_length = 16;
    p.key.n_sink_tokens = p.value.n_sink_tokens = 3;
    p.n_threads = 2;
    return p;
}

/* max over output vectors of ||a - b|| / ||b|| */
static double rel_err(const float *a, const float *b, int64_t n_vec) {
    double worst = 0;
    for (int64_t v = 0; v < n_vec; v++) {
        double e = 0, r = 0;
        for (int i = 0; i < D_; i++) {
            const double df = (double)a[v * D_ + i] - b[v * D_ + i];
            e += df * df;
            r += (double)b[v * D_ + i] * b[v * D_ + i];
        }
        const double rel = sqrt(e) / (sqrt(r) + 1e-12);
        if (rel > worst) worst = rel;
    }
    return worst;
}

/* fp16 layers compute llama.cpp's roundings (q and weights in fp16), codecs their own float
 * math: bound of the fused-vs-reference error. */

/* Fused vs masked reference for n_q queries (NULL positions or pos); returns rel_err. */
static double check(vq_cache *c, int layer, int64_t n_q, const int64_t *pos) {
    float *q = malloc(sizeof(float) * (size_t)(n_q * QH_ * D_));
    float *o1 = malloc(sizeof(float) * (size_t)(n_q * QH_ * D_)),
          *o2 = malloc(sizeof(float) * (size_t)(n_q * QH_ * D_));
    for (int64_t i = 0; i < n_q * QH_ * D_; i++) q[i] = nrand();
    ASSERT_STATUS(vq_cache_attend(c, layer, q, QH_, n_q, pos, 0.125f, o1), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_attend_ref(c, layer, q, QH_, n_q, pos, 0.125f, o2), VQ_STATUS_OK);
    const double e = rel_err(o1, o2, n_q * QH_);
    free(q);
    free(o1);
    free(o2);
    return e;
}

/* Layer 0 full attention, layer 1 windowed with W >= the context (and, in a second cache,
 * StreamingLLM with W >= the context and no sinks): same appends, same queries, same bits. */
TEST(window_covering_context_equals_full) {
    const int64_t n = 70;
    int cases = 0;
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        for (int mode = 0; mode < 2; mode++) {
            struct vq_cache_params p = mkp((enum vq_method)m, VQ_ISA_AUTO, 96);
            const int lw[2] = {0, 70};
            vq_cache *c = vq_cache_create(&p, NULL), *cw;
            if (mode == 0) {
                p.layer_window = lw;
            } else {
                p.stream_window = 71;
            }
            cw = vq_cache_create(&p, NULL);
            ASSERT(c && cw);
            if (!c || !cw) {
                vq_cache_free(c);
                vq_cache_free(cw);
                continue;
            }
            float *k = gen(n, H_, D_, 2.0f), *v = gen(n, H_, D_, 0.0f);
            const int64_t parts[4] = {33, 1, 29, 7};
            int64_t at = 0;
            for (int i = 0; i < 4; i++) {
                for (int l = 0; l < 2; l++) {
                    ASSERT_STATUS(vq_cache_append(c, l, k + at * H_ * D_, v + at * H_ * D_,
                                                  VQ_DTYPE_F32, parts[i]),
                                  VQ_STATUS_OK);
                    ASSERT_STATUS(vq_cache_append(cw, l, k + at * H_ * D_, v + at * H_ * D_,
                                                  VQ_DTYPE_F32, parts[i]),
                                  VQ_STATUS_OK);
                }
                at += parts[i];
                float q[5 * QH_ * D_], o1[5 * QH_ * D_], o2[5 * QH_ * D_];
                for (int j = 0; j < 5 * QH_ * D_; j++) q[j] = nrand();
                const int64_t nq = parts[i] < 5 ? parts[i] : 5;
                ASSERT_STATUS(vq_cache_attend(c, 1, q, QH_, nq, NULL, 0.125f, o1), VQ_STATUS_OK);
                ASSERT_STATUS(vq_cache_attend(cw, 1, q, QH_, nq, NULL, 0.125f, o2), VQ_STATUS_OK);
                ASSERT_EQ_INT(memcmp(o1, o2, sizeof(float) * (size_t)(nq * QH_ * D_)), 0);
            }
            struct vq_cache_memory m1, m2;
            vq_cache_memory(c, &m1);
            vq_cache_memory(cw, &m2);
            ASSERT_EQ_INT(m1.total_bytes, m2.total_bytes);
            ASSERT_EQ_INT(vq_cache_n_stored(cw, 1), n);
            free(k);
            free(v);
            vq_cache_free(c);
            vq_cache_free(cw);
            cases++;
        }
    }
    fprintf(stderr, "  %d codec x mode cases bit-identical to full attention\n", cases);
}

/* Every codec (and ISA) with a window W = 24 over 130 tokens (prefill chunks of 37 / 11, then
 * decode): fused == masked reference, incl. explicit positions inside the valid range. */
static void windowed_vs_reference(int sinks, int ot, int oc, int center) {
    const int64_t n = 130;
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        if (oc && !(m == VQ_METHOD_TURBOQUANT_MSE || m == VQ_METHOD_QJL || m == VQ_METHOD_POLAR))
            continue;
        if (ot && (m == VQ_METHOD_FP16 || m == VQ_METHOD_FP32 || m == VQ_METHOD_KIVI_SINK))
            continue;
        for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_isa_available((enum vq_isa)isa)) continue;
            if ((ot || oc || center) && isa != (int)vq_isa_default()) continue;
            struct vq_cache_params p = mkp((enum vq_method)m, (enum vq_isa)isa, 160);
            const int lw[2] = {24, 0};
            if (sinks) {
                p.stream_window = 24;
                p.stream_sinks = 5;
            } else {
                p.layer_window = lw;
            }
            if (ot) p.outlier_token_k = 1.5f;
            if (oc) {
                p.n_outlier_channels = 4;
                p.n_calib_tokens = 20;
            }
            p.center_keys = p.center_values = center ? 1 : 0;
            vq_status st;
            vq_cache *c = vq_cache_create(&p, &st);
            if (!c) {
                fprintf(stderr, "  %s: %s\n", vq_method_name((enum vq_method)m), vq_status_str(st));
                ASSERT(c != NULL);
                continue;
            }
            float *k = gen(n, H_, D_, 2.0f), *v = gen(n, H_, D_, 0.0f);
            double worst = 0, e;
            int64_t at = 0;
            while (at < n) {
                const int64_t step = at < 74 ? (at % 2 ? 11 : 37) : 1;
                const int64_t cnt = n - at < step ? n - at : step;
                ASSERT_STATUS(
                    vq_cache_append(c, 0, k + at * H_ * D_, v + at * H_ * D_, VQ_DTYPE_F32, cnt),
                    VQ_STATUS_OK);
                at += cnt;
                if (cnt > 1 || at % 5 == 0) {
                    e = check(c, 0, cnt < 4 ? cnt : 4, NULL);
                    worst = e > worst ? e : worst;
                }
                if (at % 9 == 0) { /* explicit positions within the valid range */
                    const int64_t pos[3] = {at - 1, at - cnt,
                                            at - 1 - (int64_t)(urand() * (double)cnt)};
                    e = check(c, 0, 3, pos);
                    worst = e > worst ? e : worst;
                }
            }
            if (worst > fused_tol((enum vq_method)m))
                fprintf(stderr, "  %s isa=%s sinks=%d ot=%d oc=%d center=%d: rel err %.3g\n",
                        vq_method_name((enum vq_method)m), vq_isa_name((enum vq_isa)isa), sinks, ot,
                        oc, center, worst);
            ASSERT_LE(worst, fused_tol((enum vq_method)m));
            /* split decode: more threads than (query, head) pairs */
            vq_cache_free(c);
            p.n_threads = 7;
            c = vq_cache_create(&p, NULL);
            ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, 100), VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(c, 0, k + 100 * H_ * D_, v + 100 * H_ * D_, VQ_DTYPE_F32, 1),
                VQ_STATUS_OK);
            float q[H_ * D_], o1[H_ * D_], o2[H_ * D_];
            for (int i = 0; i < H_ * D_; i++) q[i] = nrand();
            ASSERT_STATUS(vq_cache_attend(c, 0, q, H_, 1, NULL, 0.125f, o1), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(c, 0, q, H_, 1, NULL, 0.125f, o2), VQ_STATUS_OK);
            ASSERT_LE(rel_err(o1, o2, H_), fused_tol((enum vq_method)m));
            free(k);
            free(v);
            vq_cache_free(c);
        }
    }
}

TEST(windowed_equals_masked_reference) { windowed_vs_reference(0, 0, 0, 0); }
TEST(stream_sinks_equal_masked_reference) { windowed_vs_reference(1, 0, 0, 0); }
TEST(window_with_modifiers) {
    windowed_vs_reference(0, 1, 0, 0); /* outlier tokens */
    windowed_vs_reference(1, 0, 1, 0); /* outlier channels, sinks */
    windowed_vs_reference(0, 0, 0, 1); /* centering */
}

/* llama.cpp's arithmetic over a full, position-ordered fp16 buffer of nv rows with the scores
 * of masked positions (visible: t < sh or t >= lo) set to -inf: the scalar kernels in one
 * call each, no chunk skipped. */
static void flat_masked(const uint16_t *K, const uint16_t *V, const float *q, int G, int64_t nv,
                        int64_t sh, int64_t lo, int b1, float *out) {
    const struct vq_ggml_attn_kernels *r = vq_ggml_attn_kernels(VQ_ISA_SCALAR);
    const int64_t np = (nv + 15) / 16 * 16;
    const size_t S = b1 ? 64 : 16;
    float *q16 = malloc(sizeof(float) * (size_t)(G * D_)),
          *w = malloc(sizeof(float) * (size_t)(G * np));
    float *acc = calloc((size_t)G * S * D_, sizeof(float));
    memcpy(q16, q, sizeof(float) * (size_t)(G * D_));
    r->scale_round_f16(q16, (int64_t)G * D_, 1.0f);
    r->scores_f16(q16, G, K, nv, D_, b1, 0.125f, w, (size_t)np);
    for (int h = 0; h < G; h++) {
        float *wh = w + h * np, mx = -INFINITY;
        for (int64_t t = 0; t < np; t++) {
            if (t >= nv || (t >= sh && t < lo)) wh[t] = -INFINITY;
            mx = wh[t] > mx ? wh[t] : mx;
        }
        r->scale_round_f16(wh, nv, (float)(1.0 / r->softmax_exp(wh, np, mx)));
    }
    r->pv_f16(acc, G, V, w, (size_t)np, 0, nv, D_, b1, 0, b1 ? 64 : 16);
    for (int h = 0; h < G; h++) vq_ggml_pv_finish(acc + (size_t)h * S * D_, D_, b1, out + h * D_);
    free(q16);
    free(w);
    free(acc);
}

/* fp16 windowed / streaming layers: bit for bit the full masked buffer (llama.cpp with
 * swa_full), batches and single queries, every ISA, windows and sinks not 16-aligned. */
TEST(fp16_window_is_llama_exact) {
    const int64_t n = 150;
    const int G = QH_ / H_;
    float *k = gen(n, H_, D_, 1.0f), *v = gen(n, H_, D_, 0.0f);
    uint16_t *K = malloc(2 * (size_t)(n * D_ * H_)), *V = malloc(2 * (size_t)(n * D_ * H_));
    for (int h = 0; h < H_; h++)
        for (int64_t t = 0; t < n; t++)
            for (int j = 0; j < D_; j++) {
                K[((size_t)h * n + t) * D_ + j] = vq_fp32_to_fp16(k[((size_t)t * H_ + h) * D_ + j]);
                V[((size_t)h * n + t) * D_ + j] = vq_fp32_to_fp16(v[((size_t)t * H_ + h) * D_ + j]);
            }
    const int wins[3] = {21, 37, 40}, sinks[3] = {0, 3, 18};
    int cases = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (int wi = 0; wi < 3; wi++) {
            struct vq_cache_params p = mkp(VQ_METHOD_FP16, (enum vq_isa)isa, 160);
            p.stream_window = wins[wi];
            p.stream_sinks = sinks[wi];
            p.n_threads = 1 + wi;
            vq_cache *c = vq_cache_create(&p, NULL);
            int64_t at = 0;
            while (at < n) {
                const int64_t cnt = at < 100 ? 25 : 1;
                ASSERT_STATUS(
                    vq_cache_append(c, 0, k + at * H_ * D_, v + at * H_ * D_, VQ_DTYPE_F32, cnt),
                    VQ_STATUS_OK);
                at += cnt;
                float q[25 * QH_ * D_], o[25 * QH_ * D_], ref[QH_ * D_];
                for (int i = 0; i < 25 * QH_ * D_; i++) q[i] = nrand();
                ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, cnt, NULL, 0.125f, o), VQ_STATUS_OK);
                int bad = 0;
                for (int64_t i = 0; i < cnt; i++) {
                    const int64_t pos = at - cnt + i,
                                  ws = pos - wins[wi] + 1 > 0 ? pos - wins[wi] + 1 : 0;
                    const int64_t sh = sinks[wi] < pos + 1 ? sinks[wi] : pos + 1;
                    for (int g = 0; g < H_; g++)
                        flat_masked(K + (size_t)g * n * D_, V + (size_t)g * n * D_,
                                    q + (size_t)(i * QH_ + g * G) * D_, G, pos + 1, sh,
                                    ws > sh ? ws : sh, cnt == 1, ref + g * G * D_);
                    bad += memcmp(o + (size_t)i * QH_ * D_, ref, sizeof ref) != 0;
                }
                ASSERT_EQ_INT(bad, 0);
            }
            vq_cache_free(c);
            cases++;
        }
    }
    fprintf(stderr, "  %d fp16 window configurations bit-identical to the masked full buffer\n",
            cases);
    free(k);
    free(v);
    free(K);
    free(V);
}

/* 10 x W tokens appended as a prefill of W then decode: n_stored and the bytes held stay
 * bounded (by the window, one page and the codec's fp16 window), pages allocated stop growing,
 * and vq_kv_estimate equals vq_cache_memory at several lengths; same for prefill chunks. */
TEST(memory_bounded) {
    const int W = 40, S = 4;
    const int64_t n = 10 * W;
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        for (int mode = 0; mode < 3; mode++) { /* layer window, stream (sinks), + modifiers */
            struct vq_cache_params p = mkp((enum vq_method)m, VQ_ISA_AUTO, n);
            const int lw[2] = {W, W};
            if (mode == 0) p.layer_window = lw;
            else {
                p.stream_window = W;
                p.stream_sinks = S;
            }
            if (mode == 2) {
                if (m == VQ_METHOD_TURBOQUANT_MSE || m == VQ_METHOD_QJL) {
                    p.n_outlier_channels = 4;
                    p.n_calib_tokens = 10;
                }
                p.center_keys = p.center_values = 1;
            }
            vq_cache *c = vq_cache_create(&p, NULL);
            ASSERT(c != NULL);
            if (!c) continue;
            float *k = gen(n, H_, D_, 1.0f), *v = gen(n, H_, D_, 0.0f);
            size_t alloc_at_3w = 0, peak_total = 0;
            int64_t at = 0;
            int est_bad = 0;
            while (at < n) {
                const int64_t cnt = at == 0 ? W : 1;
                for (int l = 0; l < 2; l++)
                    ASSERT_STATUS(vq_cache_append(c, l, k + at * H_ * D_, v + at * H_ * D_,
                                                  VQ_DTYPE_F32, cnt),
                                  VQ_STATUS_OK);
                at += cnt;
                ASSERT_EQ_INT(vq_cache_n_tokens(c, 0), at);
                /* held: window W - 1 + this append, page rounding, KIVI's fp16 window */
                ASSERT_LE(vq_cache_n_stored(c, 0), W - 1 + cnt + PT_ - 1 + 16 + S);
                struct vq_cache_memory mm, e;
                vq_cache_memory(c, &mm);
                if (at == 3 * W) alloc_at_3w = mm.allocated_bytes;
                if (at > 3 * W) ASSERT_EQ_INT(mm.allocated_bytes, alloc_at_3w);
                if (at > W && mm.total_bytes > peak_total) peak_total = mm.total_bytes;
                if (at % 13 == 0 || at == n) {
                    ASSERT_STATUS(vq_kv_estimate(&p, at, &e), VQ_STATUS_OK);
                    est_bad += e.total_bytes != mm.total_bytes ||
                               e.allocated_bytes != mm.allocated_bytes ||
                               e.key_total_bytes != mm.key_total_bytes ||
                               e.window_bytes != mm.window_bytes || e.fp16_bytes != mm.fp16_bytes ||
                               e.outlier_bytes != mm.outlier_bytes;
                }
            }
            if (est_bad)
                fprintf(stderr, "  %s mode %d: estimate differs\n",
                        vq_method_name((enum vq_method)m), mode);
            ASSERT_EQ_INT(est_bad, 0);
            /* bounded: the last W x 9 appends never held more than the first ones after W */
            struct vq_cache_memory full;
            struct vq_cache_params pf = mkp((enum vq_method)m, VQ_ISA_AUTO, n);
            ASSERT_STATUS(vq_kv_estimate(&pf, n, &full), VQ_STATUS_OK);
            ASSERT(peak_total * 3 < full.total_bytes); /* vs the unwindowed cache of n tokens */
            /* prefill chunks of 64: held <= W - 1 + 64 + page + window */
            vq_cache_reset(c);
            ASSERT_EQ_INT(vq_cache_n_stored(c, 0), 0);
            for (at = 0; at < n; at += 64) {
                const int64_t cnt = n - at < 64 ? n - at : 64;
                ASSERT_STATUS(
                    vq_cache_append(c, 0, k + at * H_ * D_, v + at * H_ * D_, VQ_DTYPE_F32, cnt),
                    VQ_STATUS_OK);
                ASSERT_LE(vq_cache_n_stored(c, 0), W - 1 + cnt + PT_ - 1 + 16 + S);
            }
            free(k);
            free(v);
            vq_cache_free(c);
        }
    }
}

/* Queries and truncation needing freed tokens are refused; what is still held works. */
TEST(refusals_and_truncate) {
    const int W = 20;
    const enum vq_method ms[3] = {VQ_METHOD_FP16, VQ_METHOD_KIVI, VQ_METHOD_TURBOQUANT_MSE};
    for (int mi = 0; mi < 3; mi++) {
        struct vq_cache_params p = mkp(ms[mi], VQ_ISA_AUTO, 200);
        const int lw[2] = {W, 0};
        p.layer_window = lw;
        vq_cache *c = vq_cache_create(&p, NULL);
        float *k = gen(150, H_, D_, 1.0f), *v = gen(150, H_, D_, 0.0f);
        for (int l = 0; l < 2; l++) {
            ASSERT_STATUS(vq_cache_append(c, l, k, v, VQ_DTYPE_F32, 90), VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(c, l, k + 90 * H_ * D_, v + 90 * H_ * D_, VQ_DTYPE_F32, 30),
                VQ_STATUS_OK);
        }
        ASSERT(vq_cache_n_stored(c, 0) < 120);
        ASSERT_EQ_INT(vq_cache_n_stored(c, 1), 120);
        float q[QH_ * D_], o[QH_ * D_], o2[QH_ * D_];
        for (int i = 0; i < QH_ * D_; i++) q[i] = nrand();
        const int64_t old_pos = 50, ok_pos = 90; /* the last append started at 90 */
        ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, 1, &old_pos, 0.125f, o), VQ_STATUS_INVALID_ARG);
        ASSERT_STATUS(vq_cache_attend_ref(c, 0, q, QH_, 1, &old_pos, 0.125f, o),
                      VQ_STATUS_INVALID_ARG);
        ASSERT_STATUS(vq_cache_attend(c, 1, q, QH_, 1, &old_pos, 0.125f, o),
                      VQ_STATUS_OK); /* full layer */
        ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, 1, &ok_pos, 0.125f, o), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, 31, NULL, 0.125f, o), VQ_STATUS_INVALID_ARG);
        /* truncate below the window of position 90: refused, nothing changes */
        struct vq_cache_memory m0, m1;
        vq_cache_memory(c, &m0);
        ASSERT_STATUS(vq_cache_truncate(c, 60), VQ_STATUS_UNSUPPORTED);
        vq_cache_memory(c, &m1);
        ASSERT(memcmp(&m0, &m1, sizeof m0) == 0);
        ASSERT_EQ_INT(vq_cache_n_tokens(c, 0), 120);
        const vq_status st = vq_cache_truncate(c, 90); /* the last append's start */
        if (ms[mi] == VQ_METHOD_KIVI) ASSERT(st == VQ_STATUS_OK || st == VQ_STATUS_UNSUPPORTED);
        else ASSERT_STATUS(st, VQ_STATUS_OK);
        if (st == VQ_STATUS_OK) {
            ASSERT_EQ_INT(vq_cache_n_tokens(c, 0), 90);
            /* position 89 would need position 70, freed by the append at 90 */
            ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, 1, NULL, 0.125f, o), VQ_STATUS_INVALID_ARG);
            for (int l = 0; l < 2; l++)
                ASSERT_STATUS(
                    vq_cache_append(c, l, k + 90 * H_ * D_, v + 90 * H_ * D_, VQ_DTYPE_F32, 30),
                    VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend(c, 0, q, QH_, 1, &ok_pos, 0.125f, o2), VQ_STATUS_OK);
        }
        ASSERT_STATUS(vq_cache_truncate(c, 0), VQ_STATUS_OK);
        ASSERT_EQ_INT(vq_cache_n_stored(c, 0), 0);
        ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, 30), VQ_STATUS_OK);
        ASSERT_LE(check(c, 0, 3, NULL), fused_tol(ms[mi]));
        /* freed positions read back as zero rows, held ones as stored */
        float *kr = calloc((size_t)150 * D_, sizeof(float));
        ASSERT_STATUS(vq_cache_append(c, 0, k + 30 * H_ * D_, v + 30 * H_ * D_, VQ_DTYPE_F32, 60),
                      VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(c, 0, k + 90 * H_ * D_, v + 90 * H_ * D_, VQ_DTYPE_F32, 1),
                      VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_read(c, 0, 0, kr, NULL), VQ_STATUS_OK);
        double z = 0;
        for (int i = 0; i < 64 * D_; i++) z += fabs(kr[i]);
        ASSERT(z == 0.0); /* pages below 90 - 20 + 1 = 71 freed */
        ASSERT(fabs(kr[89 * D_]) > 0.0);
        free(kr);
        free(k);
        free(v);
        vq_cache_free(c);
    }
    /* parameter validation */
    struct vq_cache_params p = mkp(VQ_METHOD_FP16, VQ_ISA_AUTO, 64);
    const int bad[2] = {-1, 0};
    vq_status st;
    p.layer_window = bad;
    ASSERT(vq_cache_create(&p, &st) == NULL && st == VQ_STATUS_INVALID_ARG);
    p.layer_window = NULL;
    p.stream_sinks = 2; /* sinks without a window: full attention with fp16 sink rows */
    vq_cache *ok = vq_cache_create(&p, &st);
    ASSERT(ok != NULL && st == VQ_STATUS_OK);
    vq_cache_free(ok);
    p.stream_window = -3;
    ASSERT(vq_cache_create(&p, &st) == NULL && st == VQ_STATUS_INVALID_ARG);
    p.stream_window = 8;
    p.stream_sinks = 5000;
    ASSERT(vq_cache_create(&p, &st) == NULL && st == VQ_STATUS_INVALID_ARG);
    struct vq_cache_memory e;
    p.stream_sinks = -1;
    ASSERT_STATUS(vq_kv_estimate(&p, 10, &e), VQ_STATUS_INVALID_ARG);
}

int main(void) {
    RUN(window_covering_context_equals_full);
    RUN(windowed_equals_masked_reference);
    RUN(stream_sinks_equal_masked_reference);
    RUN(window_with_modifiers);
    RUN(fp16_window_is_llama_exact);
    RUN(memory_bounded);
    RUN(refusals_and_truncate);
    return TEST_REPORT();
}
