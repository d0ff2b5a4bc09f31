/*
 * bench_attn_step.c — the attention of one decode step at depth N on a cache shaped like
 * SmolLM2-135M's (30 layers, 3 kv heads, 9 query heads, head_dim 64), fp16 and the kv presets,
 * one query per layer through vq_cache_attend, with a read of sweep_mib MiB (the model's
 * weights: 94 MiB for SmolLM2 Q4_1) spread between the layers, as the matmuls do in a real
 * step, so that the codes come from memory and not from the caches. Median of repeats, and
 * each config's ratio against fp16's median in the same run.
 *
 * The cache is filled with synthetic keys and values (normal; keys with per-channel scales
 * exp(0.4 z), z normal, and queries N(0, 1), so that kv4 learns tables of 3-4 width classes
 * per head, e.g. 24 channels at 3 bits, 24 at 4, 8 at 5, 8 at 6, as kv4 does on SmolLM2),
 * appended in batches of 512 after one observed query per layer. The kernels' work does not
 * depend on the values, only on the width classes; a real decode step adds the matmuls,
 * norms and sampling (bench/llama_bench.sh times whole steps).
 *
 * Configs: any KV config name the library resolves (vq_kv_spec_parse: fp16, the kv presets,
 * named configs, the config grammar, as `--kv` takes them); default: the kv presets. A method
 * name alone means keys and values at its default bits (vecinfer and spectral on their
 * data-free fallback: the same code widths and kernels as calibrated, the work does not
 * depend on the calibration).
 * Shape: VQ_BENCH_SHAPE=qwen25 models Qwen2.5-1.5B instead (28 layers, 2 kv heads, 12 query
 * heads, head_dim 128; its Q4_K_M weights are 1066 MiB: pass that as sweep_mib to match).
 * Usage: bench_attn_step [depth=8192] [repeats=15] [threads=1] [sweep_mib=94] [config...]
 * Output: one CSV line per config: config,depth,threads,attn_ms,attn_ms_min,vs_fp16
 * (vs_fp16 = fp16's median / this median; fp16 always runs first).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "veloxquant.h"

/* The cache's shape: SmolLM2-135M's by default; VQ_BENCH_SHAPE=qwen25 gives Qwen2.5-1.5B's
 * (28 layers, 2 kv heads, 12 query heads, head_dim 128: 6 query heads per kv head). */
enum { MAX_Q = 12, MAX_DIM = 128 };
static int N_LAYERS = 30, N_KV = 3, N_Q = 9, HEAD_DIM = 64;

/* The sweep's sum goes here so that the reads are kept. */
static volatile float g_sink;

static double now_ms(void) { return bench_now_s() * 1e3; }

/* Standard normal from a 64-bit LCG (Box-Muller). */
static double gauss(uint64_t *s) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* Cache params of a config name (any name the library's KV specs parse: vq_kv_spec_parse);
 * 0 after printing why not. */
static int config(const char *name, int64_t depth, int threads, struct vq_cache_params *p) {
    struct vq_kv_spec spec;
    struct vq_kv_layer_bits lb;
    char err[256];
    if (vq_kv_spec_parse(name, &spec, err, sizeof err) != VQ_STATUS_OK ||
        vq_kv_spec_cache_params(&spec, N_LAYERS, N_KV, HEAD_DIM, NULL, p, &lb, err, sizeof err) !=
            VQ_STATUS_OK) {
        fprintf(stderr, "bench_attn_step: %s\n", err);
        vq_kv_layer_bits_free(&lb);
        return 0;
    }
    if (lb.key_bits || lb.value_bits) { /* the cache copies them, but keep this simple */
        fprintf(stderr, "bench_attn_step: %s: per-layer widths are not timed here\n", name);
        vq_kv_layer_bits_free(&lb);
        return 0;
    }
    p->max_tokens = depth + 64;
    p->n_threads = threads;
    return 1;
}

/* Median (and min in *mn) attention milliseconds per step of config name. */
static double run(const char *name, int64_t depth, int reps, int threads, const float *sweep,
                  size_t sweep_floats, double *mn) {
    struct vq_cache_params p;
    if (!config(name, depth, threads, &p)) exit(2);
    vq_status st;
    vq_cache *c = vq_cache_create(&p, &st);
    if (!c) {
        fprintf(stderr, "bench_attn_step: %s: %s\n", name, vq_status_str(st));
        exit(1);
    }
    const size_t row = (size_t)N_KV * HEAD_DIM, batch = 512;
    float *k = malloc(batch * row * sizeof(float)), *v = malloc(batch * row * sizeof(float));
    float q[MAX_Q * MAX_DIM], out[MAX_Q * MAX_DIM], cs[MAX_Q * MAX_DIM];
    double *t = malloc((size_t)reps * sizeof(double));
    if (!k || !v || !t) {
        fprintf(stderr, "bench_attn_step: out of memory\n");
        exit(1);
    }
    uint64_t s = 42;
    for (size_t i = 0; i < row; i++) cs[i] = (float)exp(0.4 * gauss(&s));
    for (int i = 0; i < N_Q * HEAD_DIM; i++) q[i] = (float)gauss(&s);
    for (int l = 0; l < N_LAYERS; l++) {
        vq_cache_observe_queries(c, l, q, N_Q, 1);
        for (int64_t t0 = 0; t0 < depth; t0 += (int64_t)batch) {
            const int64_t m = depth - t0 < (int64_t)batch ? depth - t0 : (int64_t)batch;
            for (size_t i = 0; i < (size_t)m * row; i++) {
                k[i] = (float)gauss(&s) * cs[i % row];
                v[i] = (float)gauss(&s);
            }
            st = vq_cache_append(c, l, k, v, VQ_DTYPE_F32, m);
            if (st != VQ_STATUS_OK) {
                fprintf(stderr, "bench_attn_step: append: %s\n", vq_status_str(st));
                exit(1);
            }
        }
    }
    const size_t per = sweep_floats / N_LAYERS;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        double ms = 0;
        for (int l = 0; l < N_LAYERS; l++) {
            float a = 0;
            for (size_t i = 0; i < per; i += 16) a += sweep[(size_t)l * per + i];
            g_sink += a;
            const double t0 = now_ms();
            st = vq_cache_attend(c, l, q, N_Q, 1, NULL, (float)(1.0 / sqrt(HEAD_DIM)), out);
            ms += now_ms() - t0;
            if (st != VQ_STATUS_OK) {
                fprintf(stderr, "bench_attn_step: attend: %s\n", vq_status_str(st));
                exit(1);
            }
        }
        if (r >= 0) t[r] = ms;
    }
    bench_sort(t, (size_t)reps);
    const double med = t[reps / 2];
    *mn = t[0];
    free(k);
    free(v);
    free(t);
    vq_cache_free(c);
    return med;
}

int main(int argc, char **argv) {
    const int64_t depth = argc > 1 ? atoll(argv[1]) : 8192;
    const int reps = argc > 2 ? atoi(argv[2]) : 15, threads = argc > 3 ? atoi(argv[3]) : 1;
    const char *shape = getenv("VQ_BENCH_SHAPE");
    if (shape && !strcmp(shape, "qwen25")) {
        N_LAYERS = 28, N_KV = 2, N_Q = 12, HEAD_DIM = 128;
    } else if (shape && *shape && strcmp(shape, "smollm2")) {
        fprintf(stderr, "bench_attn_step: VQ_BENCH_SHAPE=%s: use smollm2 or qwen25\n", shape);
        return 2;
    }
    const int sweep_mib = argc > 4 ? atoi(argv[4]) : 94;
    if (depth < 1 || depth > (1 << 20) || reps < 1 || threads < 1 || sweep_mib < 0) {
        fprintf(stderr,
                "usage: bench_attn_step [depth=8192] [repeats=15] [threads=1] "
                "[sweep_mib=94] [config...]\n");
        return 2;
    }
    const char *all[16]; /* default: the library's kv presets (kv8 ... kv2) */
    int n_all = 0;
    struct vq_kv_preset_info pi;
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK && n_all < 16; i++)
        if (pi.tier) all[n_all++] = pi.name;
    const char *const *cfg = argc > 5 ? (const char *const *)argv + 5 : all;
    const int n_cfg = argc > 5 ? argc - 5 : n_all;
    const size_t sweep_floats = ((size_t)sweep_mib << 20) / sizeof(float) + N_LAYERS * 16;
    float *sweep = malloc(sweep_floats * sizeof(float));
    if (!sweep) {
        fprintf(stderr, "bench_attn_step: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < sweep_floats; i++) sweep[i] = (float)(i & 7);
    printf("config,depth,threads,attn_ms,attn_ms_min,vs_fp16\n");
    double mn;
    const double f = run("fp16", depth, reps, threads, sweep, sweep_floats, &mn);
    printf("fp16,%lld,%d,%.3f,%.3f,1.00\n", (long long)depth, threads, f, mn);
    fflush(stdout);
    for (int i = 0; i < n_cfg; i++) {
        if (!strcmp(cfg[i], "fp16")) continue;
        const double m = run(cfg[i], depth, reps, threads, sweep, sweep_floats, &mn);
        printf("%s,%lld,%d,%.3f,%.3f,%.2f\n", cfg[i], (long long)depth, threads, m, mn, f / m);
        fflush(stdout);
    }
    free(sweep);
    return 0;
}
