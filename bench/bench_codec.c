/*
 * bench_codec.c — per-codec attention kernel timing on one thread: score, softmax and
 * accumulate(+finish) over n tokens of one head (keys and values both in the codec), median
 * of repeats, for fp16, turboquant_mse b=1..6 and 8, int8, turboquant_rvq b=1,2, vecinfer
 * b=1,1.5,2,3,4 and spectral b=2,3 (water-filling) on every available ISA (the ISA order is
 * scalar, avx2, avx512; VQ_ISA does not restrict it).
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

#include "bench_util.h"
#include "veloxquant.h"

static double now_us(void) { return bench_now_s() * 1e6; }

/* 64-byte aligned, zeroed (the layout the cache gives the kernels); NULL when out of memory. */
static void *alloc64(size_t bytes) {
    void *p = NULL;
    const size_t n = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    if (posix_memalign(&p, 64, n) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

/* N(0, 1) draws (xorshift64* + Box-Muller), deterministic for the seed. */
static double normal(uint64_t *s) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        u[i] = ((double)((*s * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* The codec of one case: method by name, width (fractional allowed), isa; ref: its scalar
 * reference kernels (NULL when it has none). */
static vq_codec *make(const char *method, int d, double bits, enum vq_isa isa, int ref) {
    struct vq_codec_params p = vq_codec_params_default();
    enum vq_method m;
    if (vq_method_from_name(method, &m) != VQ_STATUS_OK ||
        vq_codec_params_set_method(&p, m) != VQ_STATUS_OK ||
        vq_codec_params_set_bits(&p, bits) != VQ_STATUS_OK)
        return NULL;
    p.head_dim = d;
    p.isa = isa;
    vq_status st;
    vq_codec *c = vq_codec_create(&p, &st);
    if (c && ref && vq_codec_use_ref_kernels(c) != VQ_STATUS_OK) {
        vq_codec_free(c);
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

/* The inputs of every case: n keys, values (n, d) and one query, plus timing scratch. */
struct bench {
    int64_t n;
    int d, reps;
    double cold_mib;
    float *k, *v, *q, *s, *out; /* (n, d), (n, d), (d), (n) scores, (d) */
    double *ts;                 /* (3, reps) */
};

/* One pass: score, softmax, accumulate + finish over keys kc and values vc; the three times
 * in us go to t (when not NULL). */
static void attend_once(const struct bench *b, const vq_codec *c, const void *qs, const uint8_t *kc,
                        const uint8_t *vc, float *acc, double *t) {
    const double t0 = now_us();
    vq_codec_score(c, qs, kc, b->n, b->s);
    const double t1 = now_us();
    softmax(b->s, b->n, 1.0f / sqrtf((float)b->d));
    const double t2 = now_us();
    memset(acc, 0, sizeof(float) * vq_codec_acc_floats(c));
    vq_codec_accumulate(c, vc, b->n, b->s, acc);
    vq_codec_finish(c, acc, b->out);
    const double t3 = now_us();
    if (t) {
        t[0] = t1 - t0;
        t[1] = t2 - t1;
        t[2] = t3 - t2;
    }
}

/* Times codec c: med (score, softmax, accumulate medians, warm) and the cold total median
 * (H copies of the encoded head, >= cold_mib MiB, visited round-robin; 0 when they do not
 * fit in memory). Returns 0, or 1 when encoding fails. */
static int time_case(const struct bench *b, const vq_codec *c, double med[3], double *cold) {
    const int reps = b->reps;
    const size_t bb = vq_codec_block_bytes(c), hb = bb * (size_t)b->n;
    uint8_t *kc = alloc64(hb), *vc = alloc64(hb);
    void *qs = alloc64(vq_codec_query_bytes(c));
    float *acc = alloc64(sizeof(float) * vq_codec_acc_floats(c));
    if (vq_codec_encode(c, b->k, b->n, kc) != VQ_STATUS_OK ||
        vq_codec_encode(c, b->v, b->n, vc) != VQ_STATUS_OK) {
        fprintf(stderr, "encode failed\n");
        return 1;
    }
    vq_codec_prepare_query(c, b->q, qs);
    double t[3];
    for (int r = 0; r < reps + 2; r++) { /* two warm-up passes */
        attend_once(b, c, qs, kc, vc, acc, t);
        for (int j = 0; r >= 2 && j < 3; j++) b->ts[j * reps + r - 2] = t[j];
    }
    for (int j = 0; j < 3; j++) {
        bench_sort(b->ts + j * reps, (size_t)reps);
        med[j] = b->ts[j * reps + reps / 2];
    }
    const int H = (int)(b->cold_mib * 1048576.0 / (2.0 * (double)hb)) + 1;
    uint8_t *big = alloc64(2 * hb * (size_t)H);
    *cold = 0.0;
    if (big) {
        for (int h = 0; h < H; h++) {
            memcpy(big + (size_t)(2 * h) * hb, kc, hb);
            memcpy(big + (size_t)(2 * h + 1) * hb, vc, hb);
        }
        for (int r = 0; r < reps + 2; r++) {
            const uint8_t *kh = big + (size_t)(2 * (r % H)) * hb;
            const double t0 = now_us();
            attend_once(b, c, qs, kh, kh + hb, acc, NULL);
            if (r >= 2) b->ts[r - 2] = now_us() - t0;
        }
        bench_sort(b->ts, (size_t)reps);
        *cold = b->ts[reps / 2];
        free(big);
    }
    free(kc);
    free(vc);
    free(qs);
    free(acc);
    return 0;
}

int main(int argc, char **argv) {
    struct bench b = {.n = argc > 1 ? atoll(argv[1]) : 8192,
                      .d = argc > 2 ? atoi(argv[2]) : 128,
                      .reps = argc > 3 ? atoi(argv[3]) : 31,
                      .cold_mib = argc > 4 ? atof(argv[4]) : 256.0};
    const char *filter = argc > 5 ? argv[5] : NULL;
    const int64_t n = b.n;
    const int d = b.d;
    if (n < 1 || d < 8 || d > 1024 || b.reps < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    static const struct {
        const char *method;
        double bits;
    } cases[] = {{"fp16", 16},          {"turboquant_mse", 1}, {"turboquant_mse", 2},
                 {"turboquant_mse", 3}, {"turboquant_mse", 4}, {"turboquant_mse", 5},
                 {"turboquant_mse", 6}, {"turboquant_mse", 8}, {"int8", 8},
                 {"turboquant_rvq", 1}, {"turboquant_rvq", 2}, {"vecinfer", 1},
                 {"vecinfer", 1.5},     {"vecinfer", 2},       {"vecinfer", 3},
                 {"vecinfer", 4},       {"spectral", 2},       {"spectral", 3}};
    fprintf(stderr,
            "bench_codec: vecinfer/spectral use their data-free fallback (no calibration)\n");
    b.k = malloc(sizeof(float) * (size_t)(n * d));
    b.v = malloc(sizeof(float) * (size_t)(n * d));
    b.q = malloc(sizeof(float) * (size_t)d);
    b.s = malloc(sizeof(float) * (size_t)n);
    b.out = malloc(sizeof(float) * (size_t)d);
    b.ts = malloc(sizeof(double) * (size_t)b.reps * 3);
    if (!b.k || !b.v || !b.q || !b.s || !b.out || !b.ts) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t g = 1;
    for (int64_t i = 0; i < n * d; i++) {
        b.k[i] = (float)normal(&g);
        b.v[i] = (float)normal(&g);
    }
    for (int i = 0; i < d; i++) b.q[i] = (float)normal(&g);
    printf(
        "codec,bits,isa,d,n,bytes_per_token,score_us,softmax_us,acc_us,total_us,total_vs_fp16,"
        "cold_total_us,cold_vs_fp16\n");
    for (int isa = VQ_ISA_SCALAR - 1; isa < VQ_ISA_COUNT; isa++) {
        const int ref = isa == VQ_ISA_SCALAR - 1; /* reference kernels of the calibrated codecs */
        if (!ref && !vq_isa_available((enum vq_isa)isa)) continue;
        double fp16_total = 0.0, fp16_cold = 0.0;
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
            enum vq_method m = VQ_METHOD_COUNT;
            vq_method_from_name(cases[ci].method, &m);
            const int base = (vq_method_flags(m) & VQ_METHOD_F_FP16_ROWS) != 0; /* fp16 */
            if (filter && !base && !strstr(cases[ci].method, filter)) continue;
            /* ref: the reference kernels of the codecs that have their own (fp16 as the base) */
            vq_codec *c = make(cases[ci].method, d, cases[ci].bits,
                               ref ? VQ_ISA_SCALAR : (enum vq_isa)isa, ref && !base);
            if (!c) {
                if (!ref) fprintf(stderr, "skip %s b=%g\n", cases[ci].method, cases[ci].bits);
                continue;
            }
            double med[3], cold;
            if (time_case(&b, c, med, &cold)) return 1;
            const double total = med[0] + med[1] + med[2];
            if (base) {
                fp16_total = total;
                fp16_cold = cold;
            }
            printf("%s,%g,%s,%d,%lld,%zu,%.1f,%.1f,%.1f,%.1f,%.3f,%.1f,%.3f\n", cases[ci].method,
                   cases[ci].bits, ref ? "ref" : vq_isa_name((enum vq_isa)isa), d, (long long)n,
                   vq_codec_block_bytes(c), med[0], med[1], med[2], total,
                   fp16_total > 0 ? total / fp16_total : 0.0, cold,
                   fp16_cold > 0 ? cold / fp16_cold : 0.0);
            fflush(stdout);
            vq_codec_free(c);
        }
    }
    free(b.k);
    free(b.v);
    free(b.q);
    free(b.s);
    free(b.out);
    free(b.ts);
    return 0;
}
