/*
 * kivi_avx512vbmi.c — the AVX-512 KIVI kernels (kivi_avx512.c) compiled again with AVX512_VBMI:
 * vq_kivi_*_avx512vbmi, whose 5..7-bit rows build 64 codes at a time as bytes (see
 * kivi_avx512.c). Chosen at run time only where the CPU has VBMI (vq_cpu_avx512vbmi); contract
 * in codecs/kivi.h.
 */
#define VQ_KIVI_VBMI 1
#include "kivi_avx512.c"
