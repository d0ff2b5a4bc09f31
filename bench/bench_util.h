/*
 * bench_util.h — the clock and the sort the benchmarks under bench/ share (header only; each
 * bench is one .c file).
 */
#ifndef VQ_BENCH_UTIL_H
#define VQ_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Monotonic time in seconds. */
static inline double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts n times ascending in place: t[0] is the minimum, t[n / 2] the median. */
static inline void bench_sort(double *t, size_t n) { qsort(t, n, sizeof *t, bench_cmp_d); }

#endif
