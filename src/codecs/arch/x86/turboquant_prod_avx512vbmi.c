/*
 * turboquant_prod_avx512vbmi.c — the multi-query kernels of turboquant_prod and qjl
 * (prod_multi_x86.h) compiled again with AVX512_VBMI (VQ_PROD_VBMI):
 * vq_prod_score_multi_avx512vbmi / vq_prod_acc_multi_avx512vbmi, the same results as the
 * AVX-512 ones with the MSE codes read by VPERMB + VPSRLVD. Chosen at run time only where the
 * CPU has VBMI (vq_cpu_avx512vbmi); contracts in codecs/qjl.h.
 */
#define VQ_PROD_VBMI 1
#include "codecs/arch/x86/prod_multi_x86.h"
