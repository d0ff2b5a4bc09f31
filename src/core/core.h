/*
 * core.h — internal numerics shared by every codec: assertions, aligned allocation, CPU
 * feature dispatch, seeded RNG, randomized Hadamard rotation (power-of-two, Kronecker
 * K*2^n for K in {12,20,28}, block-diagonal otherwise), Lloyd-Max codebooks, bit packing.
 * Not part of the public API.
 */
#ifndef VQ_CORE_H
#define VQ_CORE_H

#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

/* ---- assertions (always on; abort with file:line) ---- */
void vq_assert_fail(const char *expr, const char *file, int line);
#define VQ_ASSERT(x) ((x) ? (void)0 : vq_assert_fail(#x, __FILE__, __LINE__))
#if defined(VQ_DEBUG) && VQ_DEBUG >= 1
#define VQ_DASSERT(x) VQ_ASSERT(x)
#else
#define VQ_DASSERT(x) ((void)0)
#endif
#define VQ_RETURN_IF_ERR(expr) \
    do { \
        vq_status st_ = (expr); \
        if (st_ != VQ_STATUS_OK) return st_; \
    } while (0)

/* The status of a parallel loop: item i's status s, kept when it fails at a lower index than
 * the failure kept so far (*first: the loop's item count or more at the start, *st: OK), so
 * that the loop reports the first failing item's status whatever the threads' order. Callable
 * from any thread of the loop (an OpenMP critical section). */
static inline void vq_first_error(int64_t i, vq_status s, int64_t *first, vq_status *st) {
    if (s == VQ_STATUS_OK) return;
#ifdef _OPENMP
#pragma omp critical(vq_first_error)
#endif
    if (i < *first) {
        *first = i;
        *st = s;
    }
}

/* ---- memory: 64-byte aligned, zeroed; vq_free(NULL) is a no-op ---- */
/* Asks for the cache line holding p to be brought into every cache level (read). Never
 * faults, so p may lie past the end of its allocation. On x86 a PREFETCHT0 asm statement:
 * gcc 12 deleted __builtin_prefetch / _mm_prefetch calls of several kernels as dead code
 * (their objects held no prefetch at all). Thread-safe. */
static inline void vq_prefetch(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 0, 3);
#endif
}
/* Same as vq_prefetch, into L2 and the levels below it but not L1 (x86 PREFETCHT1): for
 * streams read once, whose lines in L1 would hold the fill buffers the loads need. An asm
 * statement for the reason above: gcc 12 also deleted a static inline helper of
 * __builtin_prefetch calls (judged free of side effects) where it was not inlined before
 * dead-code elimination. Thread-safe. */
static inline void vq_prefetch_l2(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht1 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 0, 2);
#endif
}
void *vq_alloc(size_t bytes);
void vq_free(void *p);
/* Returns bytes (> 0) of zeroed memory aligned to 4096 bytes whose physical pages are taken
 * only as they are first written (an anonymous private mapping where the OS has one, else
 * vq_alloc), or NULL when out of memory or address space: for an arena carved on demand, whose
 * untouched end costs no memory. Release with vq_unmap(p, bytes), the same bytes. Thread-safe. */
void *vq_map(size_t bytes);
/* vq_map(bytes) for a range that may stay mostly unwritten: also advised against transparent
 * huge pages (MADV_NOHUGEPAGE), so that with Linux THP in "always" mode a first write backs
 * 4 KiB, not 2 MiB. Same return and release as vq_map. Thread-safe. */
void *vq_map_sparse(size_t bytes);
/* Releases memory from vq_map(bytes); NULL is a no-op. Thread-safe. */
void vq_unmap(void *p, size_t bytes);
/* Returns bytes (> 0) of zeroed private memory aligned to 2 MiB and advised for transparent
 * huge pages (MADV_HUGEPAGE), so that the OS can back it with 2 MiB pages (one TLB entry per
 * 2 MiB: data streamed in full every step, such as model weights, then walks no page tables);
 * NULL when out of memory or where the OS has no such advice. Pages are taken as they are
 * first written. Release with vq_unmap(p, bytes). Thread-safe. */
void *vq_map_huge(size_t bytes);
/* 1 when the OS gives vq_map_huge memory huge pages (Linux transparent huge pages in "always"
 * or "madvise" mode), else 0. Reads /sys once per call. Thread-safe. */
int vq_huge_pages(void);

/* ---- CPU dispatch ---- */
/* Resolves VQ_ISA_AUTO to the default variant (honours $VQ_ISA); returns the variant itself
 * if it is available, else VQ_ISA_SCALAR. */
enum vq_isa vq_isa_resolve(enum vq_isa want);
/* 1 if VQ_ISA_AVX512 is available and the CPU also has AVX512_VBMI (VPERMB, VPERMI2B,
 * VPMULTISHIFTQB), for kernels that pick a VBMI variant inside the AVX-512 one; else 0.
 * Thread-safe (computed once with the ISA detection). */
int vq_cpu_avx512vbmi(void);
/* 1 if VQ_ISA_AVX512 is available and the CPU also has AVX512_VNNI (VPDPBUSD), for the
 * engine's int8 weight kernels, which pick a VNNI variant inside the AVX-512 one; else 0.
 * Thread-safe. */
int vq_cpu_avx512vnni(void);
/* Bytes ahead of its position that a kernel streaming weights from memory asks for each line
 * (the repacked K-quant kernels, engine/arch/x86/kquant_x86.h): chosen once per process from
 * the CPU (2048, or 6144 on AMD Zen 5 and later), $VQ_PF_BYTES (64 .. 65536) overriding; a
 * multiple of 64. Thread-safe (computed once with the ISA detection). */
size_t vq_cpu_stream_prefetch(void);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), for intervals only. Thread-safe. */
double vq_clock_s(void);

/* ---- seeded RNG: splitmix64-seeded xoshiro256** ---- */
typedef struct vq_rng {
    uint64_t s[4];
} vq_rng;
void vq_rng_seed(vq_rng *r, uint64_t seed);
uint64_t vq_rng_u64(vq_rng *r);
double vq_rng_uniform(vq_rng *r); /* [0, 1) */
double vq_rng_normal(vq_rng *r);  /* N(0, 1) */

/* ---- randomized Hadamard rotation ---- */
/* y = (1/sqrt(d)) H (D x) for power-of-two d; Kronecker H_K (x) H_{2^n} for d = K*2^n,
 * K in {12, 20, 28}; otherwise a random permutation followed by independent power-of-two
 * blocks (each normalized by its own size). Orthogonal in every case: ||y|| = ||x||. */
typedef struct vq_rht {
    int d;
    int kind;     /* 0 = pow2, 1 = kronecker, 2 = block-diagonal */
    int K, P;     /* kronecker: d = K*P */
    float *signs; /* (d) +-1 */
    float *hk;    /* (K*K) kronecker matrix, or NULL */
    int *perm;    /* (d) block-diagonal permutation, or NULL */
    int n_blocks;
    int blk_off[16], blk_len[16];
} vq_rht;
vq_status vq_rht_init(vq_rht *r, int d, uint64_t seed);
void vq_rht_free(vq_rht *r);
void vq_rht_forward(const vq_rht *r, const float *x, float *y); /* x may equal y */
void vq_rht_inverse(const vq_rht *r, const float *y, float *x); /* x may equal y */
/* In-place unnormalized fast Walsh-Hadamard transform of n = 2^k floats. */
void vq_fwht(float *v, int n);

/* ---- Lloyd-Max codebooks (computed at start-up, cached, thread-safe) ---- */
enum vq_law { VQ_LAW_GAUSS = 0, VQ_LAW_LAPLACE = 1, VQ_LAW_SPHERE = 2 };
/* Returns 2^bits centroids (ascending) and 2^bits - 1 boundaries for the law at unit scale:
 * GAUSS = N(0,1); LAPLACE = Laplace with scale 1 (variance 2); SPHERE = sqrt(d) * coordinate
 * of a random unit vector in R^d (d used only for SPHERE). bits 1..8 (LAPLACE 1..6, SPHERE 1..4).
 * Pointers are library-owned, valid for the process lifetime. */
vq_status vq_lloyd_max(enum vq_law law, int bits, int d, const float **centroids,
                       const float **boundaries);
/* Index = number of boundaries strictly below v (n_bounds = 2^bits - 1). */
static inline int vq_lm_encode(float v, const float *bounds, int n_bounds) {
    int idx = 0;
    for (int i = 0; i < n_bounds; i++) idx += v > bounds[i];
    return idx;
}

/* ---- bit packing: LSB-first little-endian bit stream; code j at bit offset j*bits ---- */
size_t vq_pack_bytes(int64_t n, int bits); /* ceil(n*bits/8) */
void vq_pack(const uint8_t *codes, int64_t n, int bits, uint8_t *dst);
void vq_unpack(const uint8_t *src, int64_t n, int bits, uint8_t *codes);

/* ---- fp16/bf16 row conversion (ISA-dispatched) ---- */
void vq_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void vq_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);
void vq_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);

#endif
