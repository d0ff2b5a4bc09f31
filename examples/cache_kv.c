/*
 * cache_kv.c — a compressed KV cache through the public API alone: the "kv4" preset by name
 * (vq_cache_create_kv; what the name stands for is the library's) beside an "fp16" cache of the
 * same random keys and values.
 * Prints the largest attention-output difference and the bytes of each; exits 1 when the
 * difference is implausible for 4 bits. Build: cc cache_kv.c $(pkg-config --cflags --libs
 * veloxquant) -lm. Usage: cache_kv [N_TOKENS] (default 512).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "veloxquant.h"

enum { N_LAYERS = 4, N_KV = 2, N_Q = 6, HEAD_DIM = 64 };

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float gauss(void) { /* Box-Muller on a 64-bit LCG: the same numbers everywhere */
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        u[i] = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static vq_cache *make(const char *kv, int64_t n, vq_status *st) {
    char err[256];
    vq_cache *c = vq_cache_create_kv(kv, N_LAYERS, N_KV, HEAD_DIM, n, 0, err, sizeof err, st);
    if (!c) fprintf(stderr, "%s\n", err);
    return c;
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 512, row = (int64_t)N_KV * HEAD_DIM;
    if (n < 64 || n > 1 << 20) return fprintf(stderr, "N_TOKENS: 64..1048576\n"), 2;
    vq_status st;
    vq_cache *c = make("kv4", n, &st), *ref = c ? make("fp16", n, &st) : NULL;
    float *k = malloc(sizeof(float) * (size_t)(n * row)),
          *v = malloc(sizeof(float) * (size_t)(n * row));
    float q[N_Q * HEAD_DIM], out[N_Q * HEAD_DIM], want[N_Q * HEAD_DIM];
    if (!c || !ref || !k || !v) return fprintf(stderr, "create: %s\n", vq_status_str(st)), 1;
    double max_err = 0, max_ref = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        for (int64_t i = 0; i < n * row; i++) { /* keys with a few loud channels, as in LLMs */
            k[i] = gauss() * (i % HEAD_DIM < 4 ? 8.0f : 1.0f);
            v[i] = gauss();
        }
        for (int i = 0; i < N_Q * HEAD_DIM; i++) q[i] = gauss();
        /* kv4 weighs each key channel by the queries: show them before the keys */
        st = vq_cache_observe_queries(c, l, q, N_Q, 1);
        if (st == VQ_STATUS_OK) st = vq_cache_append(c, l, k, v, VQ_DTYPE_F32, n);
        if (st == VQ_STATUS_OK) st = vq_cache_append(ref, l, k, v, VQ_DTYPE_F32, n);
        const float scale = 1.0f / sqrtf(HEAD_DIM);
        if (st == VQ_STATUS_OK) st = vq_cache_attend(c, l, q, N_Q, 1, NULL, scale, out);
        if (st == VQ_STATUS_OK) st = vq_cache_attend(ref, l, q, N_Q, 1, NULL, scale, want);
        if (st != VQ_STATUS_OK) return fprintf(stderr, "layer %d: %s\n", l, vq_status_str(st)), 1;
        for (int i = 0; i < N_Q * HEAD_DIM; i++) {
            max_err = fmax(max_err, fabs((double)out[i] - want[i]));
            max_ref = fmax(max_ref, fabs((double)want[i]));
        }
    }
    struct vq_cache_memory m, mr;
    vq_cache_memory(c, &m);
    vq_cache_memory(ref, &mr);
    printf("kv4 vs fp16 cache: %d layers x %d kv heads x %lld tokens, head_dim %d\n", N_LAYERS,
           N_KV, (long long)n, HEAD_DIM);
    printf("attention output: max abs error %.4g (max |fp16 output| %.4g)\n", max_err, max_ref);
    printf("bytes: kv4 %zu, fp16 %zu (%.2fx smaller)\n", m.total_bytes, mr.total_bytes,
           (double)mr.total_bytes / (double)m.total_bytes);
    vq_cache_free(c);
    vq_cache_free(ref);
    free(k);
    free(v);
    /* 4-bit codes: a few percent of the output's scale; far more means something is broken */
    if (!(max_err < 0.25 * max_ref) || !(m.total_bytes < mr.total_bytes / 2))
        return fprintf(stderr, "implausible: error or size too large\n"), 1;
    return 0;
}
