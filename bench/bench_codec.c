/*
 * bench_codec.c — per-codec attention kernel timing on one thread: score, softmax and
 * accumulate(+finish) over n tokens of one head (keys and values both in the codec), median
 * of repeats, for fp16, turboquant_mse b=1..4, turboquant_rvq b=1,2, vecinfer b=1,1.5,2,3,4 and
 * spectral b=2,3 (water-filling) on every available ISA (the ISA order is scalar, avx2,
 * avx512; VQ_ISA does not restrict it).
 * vecinfer and spectral run on their data-free fallback (vecinfer: random N(0,1) codebook,
 * lambda = 1; spectral: U = I, flat spectrum): the kernels' work does not depend on the
 * calibration (same code widths, table sizes and field layout), only the quality would.
 * Usage: bench_codec [n_tokens=8192] [head_dim=128] [repeats=31] [cold_mib=256] [filter]
 * filter (optional): only codecs whose name contains it (fp16 always runs).
 * vecinfer and spectral also get an isa "ref" row before the scalar one: their scalar
 * reference kernels (vq_vi_*_ref / vq_sp_*_ref, the code before the SIMD work).
 * Two regimes per case:
 *   warm — the same head's keys/values every repeat (they stay in L2/L3: compute-bound);
 *   cold — each repeat uses the next of H heads whose keys+values total >= cold_mib MiB, so
 *          the codes stream from DRAM as in a real decode step over all layers and heads.
 * Output: one CSV line per case (times are medians, microseconds per head):
 *   codec,bits,isa,d,n,bytes_per_token,score_us,softmax_us,acc_us,total_us,total_vs_fp16,
 *   cold_total_us,cold_vs_fp16
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codecs/codec_impl.h"
#include "codecs/lutsum_kernels.h"

extern const struct vq_codec_i vq_codec_turboquant_mse;
extern const struct vq_codec_i vq_codec_turboquant_rvq;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static vq_codec *make(enum vq_method m, int d, int bits, int pq_c, int pq_v, enum vq_isa isa) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.head_dim = d;
    p.bits = bits;
    p.pq_codeword_bits = pq_c;
    p.pq_subvec_dim = pq_v;
    p.isa = isa;
    vq_status st;
    if (vq_codec_iface(m)) return vq_codec_create(&p, &st);
    /* not registered in this build: create through the vtable directly */
    const struct vq_codec_i *it = m == VQ_METHOD_TURBOQUANT_MSE ? &vq_codec_turboquant_mse
                                : m == VQ_METHOD_TURBOQUANT_RVQ ? &vq_codec_turboquant_rvq
                                                                : NULL;
    if (!it) return NULL;
    struct vq_codec *c = (struct vq_codec *)vq_alloc(sizeof(*c));
    c->p = p;
    c->iface = it;
    c->isa = vq_isa_resolve(isa);
    c->p.isa = c->isa;
    if (it->init(c) != VQ_STATUS_OK) {
        vq_free(c);
        return NULL;
    }
    return c;
}

static void softmax(float *s, int64_t n, float scale) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = s[i] * scale > mx ? s[i] * scale : mx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        s[i] = expf(s[i] * scale - mx);
        sum += s[i];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) s[i] *= inv;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 8192;
    int d = argc > 2 ? atoi(argv[2]) : 128;
    int reps = argc > 3 ? atoi(argv[3]) : 31;
    double cold_mib = argc > 4 ? atof(argv[4]) : 256.0;
    const char *filter = argc > 5 ? argv[5] : NULL;
    if (n < 1 || d < 8 || d > 1024 || reps < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    struct {
        enum vq_method m;
        int bits, pq_c, pq_v;
        const char *label;
    } cases[] = {{VQ_METHOD_FP16, 16, 0, 0, "16"},         {VQ_METHOD_TURBOQUANT_MSE, 1, 0, 0, "1"},
                 {VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, "2"}, {VQ_METHOD_TURBOQUANT_MSE, 3, 0, 0, "3"},
                 {VQ_METHOD_TURBOQUANT_MSE, 4, 0, 0, "4"}, {VQ_METHOD_TURBOQUANT_RVQ, 1, 0, 0, "1"},
                 {VQ_METHOD_TURBOQUANT_RVQ, 2, 0, 0, "2"}, {VQ_METHOD_VECINFER, 1, 0, 0, "1"},
                 {VQ_METHOD_VECINFER, 2, 12, 8, "1.5"},    {VQ_METHOD_VECINFER, 2, 0, 0, "2"},
                 {VQ_METHOD_VECINFER, 3, 0, 0, "3"},       {VQ_METHOD_VECINFER, 4, 0, 0, "4"},
                 {VQ_METHOD_SPECTRAL, 2, 0, 0, "2"},       {VQ_METHOD_SPECTRAL, 3, 0, 0, "3"}};
    fprintf(stderr,
            "bench_codec: vecinfer/spectral use their data-free fallback (no calibration)\n");
    float *k = malloc(sizeof(float) * (size_t)(n * d)),
          *v = malloc(sizeof(float) * (size_t)(n * d));
    float *q = malloc(sizeof(float) * (size_t)d), *s = malloc(sizeof(float) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)d);
    double *ts = malloc(sizeof(double) * (size_t)reps * 3);
    vq_rng g;
    vq_rng_seed(&g, 1);
    for (int64_t i = 0; i < n * d; i++) {
        k[i] = (float)vq_rng_normal(&g);
        v[i] = (float)vq_rng_normal(&g);
    }
    for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(&g);
    printf(
        "codec,bits,isa,d,n,bytes_per_token,score_us,softmax_us,acc_us,total_us,total_vs_fp16,"
        "cold_total_us,cold_vs_fp16\n");
    for (int isa = VQ_ISA_SCALAR - 1; isa < VQ_ISA_COUNT; isa++) {
        const int ref = isa == VQ_ISA_SCALAR - 1; /* reference kernels of the calibrated codecs */
        if (!ref && !vq_isa_available((enum vq_isa)isa)) continue;
        double fp16_total = 0.0, fp16_cold = 0.0;
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
            if (filter && cases[ci].m != VQ_METHOD_FP16 &&
                !strstr(vq_method_name(cases[ci].m), filter))
                continue;
            if (ref && cases[ci].m != VQ_METHOD_FP16 && cases[ci].m != VQ_METHOD_VECINFER &&
                cases[ci].m != VQ_METHOD_SPECTRAL)
                continue;
            vq_codec *c = make(cases[ci].m, d, cases[ci].bits, cases[ci].pq_c, cases[ci].pq_v,
                               ref ? VQ_ISA_SCALAR : (enum vq_isa)isa);
            if (c && ref && cases[ci].m == VQ_METHOD_VECINFER) {
                c->encode = vq_vi_encode_ref;
                c->prepare_query = vq_vi_prepare_query_ref;
                c->score = vq_vi_score_ref;
                c->accumulate = vq_vi_accumulate_ref;
                c->finish = vq_vi_finish_ref;
            } else if (c && ref && cases[ci].m == VQ_METHOD_SPECTRAL) {
                c->encode = vq_sp_encode_ref;
                c->decode = vq_sp_decode_ref;
                c->prepare_query = vq_sp_prepare_query_ref;
                c->score = vq_sp_score_ref;
                c->accumulate = vq_sp_accumulate_ref;
                c->finish = vq_sp_finish_ref;
            }
            if (!c) {
                fprintf(stderr, "skip %s b=%s\n", vq_method_name(cases[ci].m), cases[ci].label);
                continue;
            }
            size_t bb = vq_codec_block_bytes(c);
            uint8_t *kc = vq_alloc(bb * (size_t)n), *vc = vq_alloc(bb * (size_t)n);
            void *qs = vq_alloc(vq_codec_query_bytes(c));
            float *acc = vq_alloc(sizeof(float) * vq_codec_acc_floats(c));
            if (vq_codec_encode(c, k, n, kc) != VQ_STATUS_OK ||
                vq_codec_encode(c, v, n, vc) != VQ_STATUS_OK) {
                fprintf(stderr, "encode failed\n");
                return 1;
            }
            vq_codec_prepare_query(c, q, qs);
            for (int r = 0; r < reps + 2; r++) {
                double t0 = now_us();
                vq_codec_score(c, qs, kc, n, s);
                double t1 = now_us();
                softmax(s, n, 1.0f / sqrtf((float)d));
                double t2 = now_us();
                memset(acc, 0, sizeof(float) * vq_codec_acc_floats(c));
                vq_codec_accumulate(c, vc, n, s, acc);
                vq_codec_finish(c, acc, out);
                double t3 = now_us();
                if (r >= 2) { /* warm-up */
                    ts[r - 2] = t1 - t0;
                    ts[reps + r - 2] = t2 - t1;
                    ts[2 * reps + r - 2] = t3 - t2;
                }
            }
            double med[3];
            for (int j = 0; j < 3; j++) {
                qsort(ts + j * reps, (size_t)reps, sizeof(double), cmp_d);
                med[j] = ts[j * reps + reps / 2];
            }
            double total = med[0] + med[1] + med[2];
            /* cold: H copies of the encoded head, visited round-robin */
            int H = (int)(cold_mib * 1048576.0 / (2.0 * (double)bb * (double)n)) + 1;
            uint8_t *big = vq_alloc(2 * bb * (size_t)n * (size_t)H);
            double cold = 0.0;
            if (big) {
                for (int h = 0; h < H; h++) {
                    memcpy(big + (size_t)(2 * h) * bb * (size_t)n, kc, bb * (size_t)n);
                    memcpy(big + (size_t)(2 * h + 1) * bb * (size_t)n, vc, bb * (size_t)n);
                }
                for (int r = 0; r < reps + 2; r++) {
                    const uint8_t *kh = big + (size_t)(2 * (r % H)) * bb * (size_t)n;
                    double t0 = now_us();
                    vq_codec_score(c, qs, kh, n, s);
                    softmax(s, n, 1.0f / sqrtf((float)d));
                    memset(acc, 0, sizeof(float) * vq_codec_acc_floats(c));
                    vq_codec_accumulate(c, kh + bb * (size_t)n, n, s, acc);
                    vq_codec_finish(c, acc, out);
                    if (r >= 2) ts[r - 2] = now_us() - t0;
                }
                qsort(ts, (size_t)reps, sizeof(double), cmp_d);
                cold = ts[reps / 2];
                vq_free(big);
            }
            if (cases[ci].m == VQ_METHOD_FP16) {
                fp16_total = total;
                fp16_cold = cold;
            }
            printf("%s,%s,%s,%d,%lld,%zu,%.1f,%.1f,%.1f,%.1f,%.3f,%.1f,%.3f\n",
                   vq_method_name(cases[ci].m), cases[ci].label,
                   ref ? "ref" : vq_isa_name((enum vq_isa)isa), d, (long long)n, bb, med[0], med[1],
                   med[2], total, fp16_total > 0 ? total / fp16_total : 0.0, cold,
                   fp16_cold > 0 ? cold / fp16_cold : 0.0);
            fflush(stdout);
            vq_free(kc);
            vq_free(vc);
            vq_free(qs);
            vq_free(acc);
            vq_codec_free(c);
        }
    }
    free(k);
    free(v);
    free(q);
    free(s);
    free(out);
    free(ts);
    return 0;
}
