/*
 * bench_read_bw.c — the machine's read bandwidth as a decode step sees it: a STREAM-like "sum"
 * kernel (read only, no writes) over a buffer much larger than the caches, in memory advised
 * for transparent huge pages as the model weights are (docs/ALGORITHMS.md §9.14), each thread
 * summing its own contiguous slice with 8 independent 64-bit accumulators; best of the passes.
 * The decode step of a model whose weights do not fit in the caches cannot read them faster
 * (docs/RESULTS.md compares generate's step_weight_bytes x decode tok/s with this figure).
 * Usage: bench_read_bw [mib=2048] [threads=1] [passes=5]
 * Output: one line: threads, MiB, best GB/s (1e9 bytes), median GB/s.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const long mib = argc > 1 ? atol(argv[1]) : 2048;
    const int nt = argc > 2 ? atoi(argv[2]) : 1, passes = argc > 3 ? atoi(argv[3]) : 5;
    if (mib < 1 || nt < 1 || passes < 1 || passes > 100) {
        fprintf(stderr, "usage: bench_read_bw [mib>=1] [threads>=1] [passes 1..100]\n");
        return 2;
    }
    const size_t n = (size_t)mib << 20, words = n / 8;
    uint64_t *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) {
        fprintf(stderr, "bench_read_bw: cannot map %ld MiB\n", mib);
        return 1;
    }
#ifdef MADV_HUGEPAGE
    madvise(b, n, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < words; i++) b[i] = i; /* every page backed before timing */
    double gbs[100];
    uint64_t check = 0;
    for (int p = 0; p < passes; p++) {
        const double t0 = now();
        uint64_t tot = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) reduction(+ : tot)
#endif
        {
#ifdef _OPENMP
            const int id = omp_get_thread_num(), k = omp_get_num_threads();
#else
            const int id = 0, k = 1;
#endif
            const size_t lo = words / (size_t)k * (size_t)id,
                         hi = id == k - 1 ? words : words / (size_t)k * (size_t)(id + 1);
            uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            size_t i = lo;
            for (; i + 8 <= hi; i += 8)
                for (int j = 0; j < 8; j++) a[j] += b[i + (size_t)j];
            for (; i < hi; i++) a[0] += b[i];
            for (int j = 0; j < 8; j++) tot += a[j];
        }
        gbs[p] = (double)n / (now() - t0) / 1e9;
        check += tot;
    }
    qsort(gbs, (size_t)passes, sizeof gbs[0], cmp_d);
    printf("threads %d, %ld MiB: read best %.2f GB/s, median %.2f GB/s (checksum %llu)\n", nt, mib,
           gbs[passes - 1], gbs[passes / 2], (unsigned long long)(check & 0xffff));
    munmap(b, n);
    return 0;
}
