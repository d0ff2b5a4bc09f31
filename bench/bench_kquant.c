/*
 * bench_kquant.c — the compute ceiling of the repacked Q4_K / Q6_K weight kernels
 * (vec_dot_x16, docs/ALGORITHMS.md §9.19) on one core: 16-row groups of random weights small
 * enough to stay in L2 (default 256 rows x 1536 columns: 221 KB of Q4_K, 323 KB of Q6_K) against
 * T activation rows, repeated; GB/s of weights read and G weights/s, best and median of the
 * repeats, for every kernel variant this CPU runs. A decode step streams its weights from
 * memory; if a kernel's ceiling here is not well above the per-thread share of the machine's
 * read bandwidth (bench_read_bw), the kernel, not memory, bounds the step.
 * Usage: bench_kquant [cols=1536] [rows=256] [reps=200]
 * Output: one line per (ISA, type, T): T 1, 2, 4 in the one-row float order (decode, small
 * batches), T 8 in the four-row order (prefill).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "vq_tools.h"

/* Random blocks of type with sane fp16 scales (0x2000 = 2^-7), repacked into 16-row groups. */
static uint8_t *make_weights(uint32_t type, int64_t rows, int64_t cols, size_t *bytes) {
    const size_t bsz = type == VQ_GGML_Q4_K ? sizeof(vq_block_q4_K) : sizeof(vq_block_q6_K);
    const int64_t nb = rows * (cols / 256);
    uint8_t *w = aligned_alloc(64, (size_t)nb * bsz);
    if (!w) return NULL;
    for (size_t i = 0; i < (size_t)nb * bsz; i++) w[i] = (uint8_t)rand();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + (size_t)b * bsz;
        const uint16_t h = 0x2000;
        if (type == VQ_GGML_Q4_K) {
            memcpy(blk, &h, 2);
            memcpy(blk + 2, &h, 2);
        } else {
            memcpy(blk + offsetof(vq_block_q6_K, d), &h, 2);
        }
    }
    if (vq_ggml_repack_x16(type, w, rows, cols)) {
        free(w);
        return NULL;
    }
    *bytes = (size_t)nb * bsz;
    return w;
}

static void run(enum vq_isa isa, uint32_t type, int64_t rows, int64_t cols, int reps) {
    const struct vq_ggml_kernels *k = vq_ggml_kernels_x16(type, isa);
    size_t wbytes = 0;
    uint8_t *w = make_weights(type, rows, cols, &wbytes);
    const size_t ab = (size_t)(cols / 256) * sizeof(vq_block_q8_K);
    uint8_t *a = aligned_alloc(64, ab * 8);
    float *x = malloc(sizeof(float) * (size_t)cols), *out = malloc(sizeof(float) * 16 * 8);
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!k || !w || !a || !x || !out || !t) {
        fprintf(stderr, "bench_kquant: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < 8; r++) {
        for (int64_t i = 0; i < cols; i++) x[i] = (float)(rand() & 0xffff) / 65536.0f - 0.5f;
        vq_quantize_row_q8_K_ref(x, a + (size_t)r * ab, cols);
    }
    const size_t gbytes = wbytes / (size_t)(rows / 16);
    static const int Ts[] = {1, 2, 4, 8};
    for (int ti = 0; ti < 4; ti++) {
        const int T = Ts[ti], gemm = T == 8;
        for (int r = 0; r < reps; r++) {
            const double t0 = bench_now_s();
            for (int64_t g = 0; g < rows / 16; g++)
                k->vec_dot_x16(cols, w + (size_t)g * gbytes, a, ab, T, gemm, out, 16);
            t[r] = bench_now_s() - t0;
        }
        bench_sort(t, (size_t)reps);
        printf("%-6s %s T=%d: best %6.1f GB/s (%6.1f G weights/s), median %6.1f GB/s\n",
               vq_isa_name(isa), type == VQ_GGML_Q4_K ? "Q4_K" : "Q6_K", T,
               (double)wbytes / t[0] / 1e9, (double)(rows * cols) / t[0] / 1e9,
               (double)wbytes / t[reps / 2] / 1e9);
    }
    free(w);
    free(a);
    free(x);
    free(out);
    free(t);
}

int main(int argc, char **argv) {
    const int64_t cols = argc > 1 ? atoll(argv[1]) : 1536;
    const int64_t rows = argc > 2 ? atoll(argv[2]) : 256;
    const int reps = argc > 3 ? atoi(argv[3]) : 200;
    if (cols < 256 || cols % 256 || cols > VQ_X16_MAX_COLS || rows < 16 || rows % 16 || reps < 1) {
        fprintf(stderr,
                "usage: bench_kquant [cols=1536, a multiple of 256] [rows=256, a multiple "
                "of 16] [reps=200]\n");
        return 2;
    }
    char cpu[256];
    vq_cpu_describe(cpu, sizeof cpu);
    printf("bench_kquant: %s; %lld rows x %lld columns, one thread, %d repeats\n", cpu,
           (long long)rows, (long long)cols, reps);
    static const enum vq_isa isas[] = {VQ_ISA_AVX512, VQ_ISA_AVX2, VQ_ISA_SCALAR};
    for (int i = 0; i < 3; i++) {
        if (!vq_isa_available(isas[i])) continue;
        run(isas[i], VQ_GGML_Q4_K, rows, cols, reps);
        run(isas[i], VQ_GGML_Q6_K, rows, cols, reps);
    }
    return 0;
}
