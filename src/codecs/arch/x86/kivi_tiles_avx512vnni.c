/*
 * kivi_tiles_avx512vnni.c — the AVX-512 key-tile scores (kivi_tiles_avx512.c) compiled again
 * with AVX512_VNNI: vq_kivi_score_tiles_avx512vnni, one VPDPWSSD per channel pair and query.
 * Chosen at run time only where the CPU has VNNI (vq_cpu_avx512vnni); contract in
 * codecs/kivi.h.
 */
#define VQ_KIVI_VNNI 1
#include "kivi_tiles_avx512.c"
