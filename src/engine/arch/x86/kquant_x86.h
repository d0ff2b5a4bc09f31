/*
 * kquant_x86.h — pieces shared by the repacked Q4_K / Q6_K kernels of every x86 ISA
 * (ggml_kquant_avx512vnni.c, ggml_kquant_avx2.c; layout in engine/ggml.h): the
 * prefetch of their weight stream and the Q8_K block-pair sums. Include only from files
 * compiled with AVX2 or more.
 */
#ifndef VQ_KQUANT_X86_H
#define VQ_KQUANT_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "core/core.h"
#include "engine/ggml.h"

/* Asks for the line pf bytes past p into L1 (pf = vq_cpu_stream_prefetch(), read once per
 * kernel call), one request for each line the repacked Q4_K / Q6_K kernels
 * (ggml_kquant_avx512vnni.c, ggml_kquant_avx2.c) read (the groups of a thread's tiles follow
 * each other in memory, so the stream runs on across groups and tiles). The hardware's L2
 * streamer brings the lines from memory; the request has to be early enough to cover what it
 * leaves, and on Intel a request far enough ahead to miss in L2 holds a fill buffer for a
 * memory round trip. One thread streaming 800 MB of a Q4_K / Q6_K matrix from huge-page memory
 * on one token (Intel Xeon, idle; plain read 17.8 GB/s, bench/bench_read_bw.c), GB/s of
 * weights: 2048 B ahead 17.2-17.5 (Q4_K) and 17.0-17.4 (Q6_K); 1024 B 16.5-16.8 / 16.3-16.6;
 * 2816 B 16.1-16.5 / 15.7; 3360 B 13.2-15.3 / 13.6; 4096 B 11-12; none 14.8-15.8 / 13.5. On the
 * AVX2-only AMD EPYC VM Qwen2.5 decode was the same within noise with 1024, 2048 and 4096; on
 * the Zen 5 VM (AVX-512) the median decode step went from 33.5 ms (2048) to 30.3 (6144) and 30.0
 * (8192) on one thread, 25.7 to 24.2 and 25.4 on two: hence the per-CPU choice. */
static inline __attribute__((always_inline)) void pf_x16(size_t pf, const uint8_t *p) {
    _mm_prefetch((const char *)(p + pf), _MM_HINT_T0);
}

/* The 8 block-pair sums of a Q8_K block as int16: BS[s] = bsums[2s] + bsums[2s + 1], the
 * activation sum of 32-element sub-block s (exact: |BS| <= 32 x 128). */
static inline __m128i q8_K_pair_sums(const vq_block_q8_K *y) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_hadd_epi16(b, b), 0x08));
}

#endif
