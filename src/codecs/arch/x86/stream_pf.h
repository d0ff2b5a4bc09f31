/*
 * stream_pf.h — software prefetch for the value-accumulate kernels of the x86 codec files.
 *
 * In decode every coded value row of a layer is read once per step, a stream of a few MB per
 * step that no cache keeps between steps. Pages are separate allocations and a page's rows
 * are read in one pass, so the hardware prefetchers alone leave the kernel waiting on its
 * loads (on this project's Xeon about half of the turboquant accumulate time, perf); asking
 * for the rows VQ_PF_RECS records ahead keeps the stream in flight. Prefetches do not fault,
 * so asking past the end of a page or allocation is harmless (those lines are simply not
 * used). Arithmetic is untouched: the results are the same bits.
 */
#ifndef VQ_STREAM_PF_H
#define VQ_STREAM_PF_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* Records ahead (of 34 bytes at d = 64, 4 bits: about 2 KB, several hundred ns of work).
 * 64 since a codec call covers a run of pages (docs/ALGORITHMS.md §9.12): at depth 8192 the
 * attention of a kv4 step took 7.6 ms instead of 8.1 with 32 (96 or 128: no better). */
#define VQ_PF_RECS 64

/* Asks for the n bytes from p (1 <= n <= 128: every line of a span that short holds p, its
 * middle or its last byte) into every cache level (vq_prefetch). */
static inline void vq_pf_span(const uint8_t *p, size_t n) {
    vq_prefetch(p);
    vq_prefetch(p + n / 2);
    vq_prefetch(p + n - 1);
}

/* Asks for every line of the n bytes from p (any n >= 1) into every cache level: for steps of
 * several records (vq_pf_span's three requests would leave lines of a longer span to the
 * hardware prefetchers, which stop at each 4 KB page). */
static inline void vq_pf_lines(const uint8_t *p, size_t n) {
    const uintptr_t e = (uintptr_t)p + n;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < e; a += 64) vq_prefetch((const void *)a);
}

/* The bytes [p, p + bytes) asked for in n (< 1: 1) steps of equal whole lines (the last may be
 * shorter or empty): a kernel working through n pieces of one block asks for the next block a
 * step per piece, a steady stream instead of a burst (the KIVI key tiles: a step per width
 * class of each tile; at most 3 lines at a time there, where a burst of 9 per tile had the
 * prefetches waiting for fill buffers). One division at init; p NULL: nothing. */
struct vq_pf_steps {
    const uint8_t *p;
    size_t o, bytes, step;
};
static inline struct vq_pf_steps vq_pf_steps_init(const uint8_t *p, size_t bytes, int n) {
    const size_t k = n > 1 ? (size_t)n : 1, lines = (bytes + 63) / 64, per = (lines + k - 1) / k;
    const struct vq_pf_steps s = {p, 0, p ? bytes : 0, 64 * per};
    return s;
}
static inline void vq_pf_step(struct vq_pf_steps *s) {
    const size_t e = s->o + s->step < s->bytes ? s->o + s->step : s->bytes;
    for (; s->o < e; s->o += 64) vq_prefetch(s->p + s->o);
}

#endif
