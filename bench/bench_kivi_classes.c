/*
 * bench_kivi_classes.c — key score of KIVI blocks with per-channel widths (channel_bits,
 * docs/ALGORITHMS.md §8.8) against one width and fp16, one thread, one head whose codes stay
 * in the CPU caches: prepare_query + score over n tokens, median of repeats, on every
 * available ISA. Cases at head_dim 64, mean 4 bits, G 64: one width (kivi-4); 3 classes
 * (16 channels at 5, 32 at 4, 16 at 3); 6 classes (8 at 8, 6, 5, 4, 3 bits and 24 at 2, the
 * channels scattered); a table kv4 learns on SmolLM2 (8 at 6, 8 at 5, 24 at 4, 24 at 3: two
 * classes of 8 mod 16 channels, whose last 8 channels the AVX-512 kernel takes two rows at a
 * time). The widths the cache learns on SmolLM2 use 3 or 4 classes.
 * Usage: bench_kivi_classes [n_tokens=4096] [repeats=31]
 * Output: one CSV line per case: isa,case,score_us,vs_fp16 (fp16 score time / this time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "veloxquant.h"


/* Median time (microseconds) of prepare_query + score over the n tokens x encode. */
static double time_score(vq_codec *c, const float *x, int n, const float *q, int reps) {
    const int bt = vq_codec_block_tokens(c);
    uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)(n / bt));
    void *qs = malloc(vq_codec_query_bytes(c));
    float *sc = malloc((size_t)n * sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double));
    if (!codes || !qs || !sc || !t || vq_codec_encode(c, x, n, codes) != VQ_STATUS_OK) {
        fprintf(stderr, "bench_kivi_classes: setup failed\n");
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        const double t0 = bench_now_s();
        for (int k = 0; k < 10; k++) {
            vq_codec_prepare_query(c, q, qs);
            vq_codec_score(c, qs, codes, n, sc);
        }
        t[r] = (bench_now_s() - t0) / 10 * 1e6;
    }
    bench_sort(t, (size_t)reps);
    const double med = t[reps / 2];
    free(codes);
    free(qs);
    free(sc);
    free(t);
    return med;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) / 64 * 64 : 4096, reps = argc > 2 ? atoi(argv[2]) : 31;
    if (n < 64 || reps < 1) {
        fprintf(stderr, "usage: bench_kivi_classes [n_tokens >= 64] [repeats >= 1]\n");
        return 2;
    }
    const int d = 64;
    float *x = malloc(sizeof(float) * (size_t)n * d), q[64];
    uint64_t s = 42;
    for (int i = 0; i < n * d; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < d; i++) q[i] = x[i] * 2.0f;
    uint8_t w3[64], w6[64], wl[64];
    static const uint8_t cls6[8] = {8, 6, 5, 4, 3, 2, 2, 2};
    static const uint8_t clsl[8] = {6, 5, 4, 4, 4, 3, 3, 3};
    for (int c = 0; c < d; c++) {
        w3[c] = (uint8_t)(c < 16 ? 5 : c < 48 ? 4 : 3);
        w6[(c * 37) % 64] = cls6[c / 8];
        wl[(c * 23) % 64] = clsl[c / 8];
    }
    const uint8_t *tables[4] = {NULL, w3, w6, wl};
    static const char *const names[4] = {"kivi-4", "kivi-4 3 classes", "kivi-4 6 classes",
                                         "kivi-4 SmolLM2 8@6 8@5 24@4 24@3"};
    static const char *const isas[VQ_ISA_COUNT] = {"auto", "scalar", "avx2", "avx512"};
    printf("isa,case,score_us,vs_fp16\n");
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        struct vq_codec_params f = vq_codec_params_default();
        f.method = VQ_METHOD_FP16;
        f.head_dim = d;
        f.isa = (enum vq_isa)isa;
        vq_codec *cf = vq_codec_create(&f, NULL);
        const double tf = time_score(cf, x, n, q, reps);
        printf("%s,fp16,%.2f,1.00\n", isas[isa], tf);
        vq_codec_free(cf);
        for (int k = 0; k < 4; k++) {
            struct vq_codec_params p = vq_codec_params_default();
            p.method = VQ_METHOD_KIVI;
            p.role = VQ_ROLE_KEY;
            p.head_dim = d;
            p.bits = 4;
            p.group_size = 64;
            p.residual_length = 0;
            p.isa = (enum vq_isa)isa;
            p.channel_bits = tables[k];
            vq_codec *c = vq_codec_create(&p, NULL);
            if (!c) {
                fprintf(stderr, "bench_kivi_classes: codec create failed\n");
                return 1;
            }
            const double t = time_score(c, x, n, q, reps);
            printf("%s,%s,%.2f,%.2f\n", isas[isa], names[k], t, tf / t);
            vq_codec_free(c);
        }
    }
    free(x);
    return 0;
}
