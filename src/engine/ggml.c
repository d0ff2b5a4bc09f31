/*
 * ggml.c — ggml type traits and scalar reference kernels (see ggml.h).
 */
#include "engine/ggml.h"

#include <string.h>

#include "cache/ggml_attn.h"
#include "core/core.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- type traits --------------------------------------------------------------------- */

static const char *const g_type_names[] = {
    [0] = "F32",     [1] = "F16",      [2] = "Q4_0",   [3] = "Q4_1",    [6] = "Q5_0",
    [7] = "Q5_1",    [8] = "Q8_0",     [9] = "Q8_1",   [10] = "Q2_K",   [11] = "Q3_K",
    [12] = "Q4_K",   [13] = "Q5_K",    [14] = "Q6_K",  [15] = "Q8_K",   [16] = "IQ2_XXS",
    [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
    [22] = "IQ2_S",  [23] = "IQ4_XS",  [24] = "I8",    [25] = "I16",    [26] = "I32",
    [27] = "I64",    [28] = "F64",     [29] = "IQ1_M", [30] = "BF16",   [34] = "TQ1_0",
    [35] = "TQ2_0",  [39] = "MXFP4",   [40] = "NVFP4", [41] = "Q1_0",   [42] = "Q2_0",
};

/* Returns the ggml name of a type id ("Q4_K"), or "unknown". */
const char *vq_ggml_type_name(uint32_t type) {
    if (type < sizeof g_type_names / sizeof g_type_names[0] && g_type_names[type])
        return g_type_names[type];
    return "unknown";
}

static const struct vq_ggml_type_info g_info[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [9] = {"Q8_1", 32, 36},    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},      [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},      [30] = {"BF16", 1, 2},
};

const struct vq_ggml_type_info *vq_ggml_type_info(uint32_t type) {
    if (type < sizeof g_info / sizeof g_info[0] && g_info[type].name) return &g_info[type];
    return NULL;
}

/* ---- ISA choice ---------------------------------------------------------------------- */

#include <math.h>
#include <stdlib.h>

/* The engine follows the library-wide choice (core/cpu.c: cpuid + xgetbv, $VQ_ISA). */
int vq_ggml_isa_available(enum vq_isa isa) {
    if (isa == VQ_ISA_AUTO) return 0;
    return vq_isa_available(isa);
}

enum vq_isa vq_ggml_isa_default(void) { return vq_isa_default(); }

/* ---- dequantization (reference) ------------------------------------------------------ */

void vq_dequantize_row_f32_ref(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void vq_dequantize_row_f16_ref(const void *x, float *y, int64_t n) {
    const vq_half *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = vq_ggml_h2f(h[i]);
}

void vq_dequantize_row_bf16_ref(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = vq_ggml_bf2f(h[i]);
}

void vq_dequantize_row_q4_0_ref(const void *x, float *y, int64_t n) {
    const vq_block_q4_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = vq_ggml_h2f(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((b[i].qs[j] & 15) - 8);
            y[j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

void vq_dequantize_row_q4_1_ref(const void *x, float *y, int64_t n) {
    const vq_block_q4_1 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = vq_ggml_h2f(b[i].d), m = vq_ggml_h2f(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(b[i].qs[j] & 15) + m;
            y[j + 16] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void vq_dequantize_row_q5_0_ref(const void *x, float *y, int64_t n) {
    const vq_block_q5_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = vq_ggml_h2f(b[i].d);
        uint32_t qh = rd32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (b[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)(lo - 16);
            y[j + 16] = d * (float)(hi - 16);
        }
    }
}

void vq_dequantize_row_q5_1_ref(const void *x, float *y, int64_t n) {
    const vq_block_q5_1 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = vq_ggml_h2f(b[i].d), m = vq_ggml_h2f(b[i].m);
        uint32_t qh = rd32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (b[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)lo + m;
            y[j + 16] = d * (float)hi + m;
        }
    }
}

void vq_dequantize_row_q8_0_ref(const void *x, float *y, int64_t n) {
    const vq_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = vq_ggml_h2f(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)b[i].qs[j];
    }
}

/* 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K super-block. */
static void get_scale_min_k4(int s, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (s < 4) {
        *sc = q[s] & 63;
        *m = q[s + 4] & 63;
    } else {
        *sc = (uint8_t)((q[s + 4] & 15) | ((q[s - 4] >> 6) << 4));
        *m = (uint8_t)((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
    }
}

void vq_dequantize_row_q4_K_ref(const void *x, float *y, int64_t n) {
    const vq_block_q4_K *b = x;
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        float d = vq_ggml_h2f(b[i].d), dmin = vq_ggml_h2f(b[i].dmin);
        for (int e = 0; e < VQ_QK_K; e++) {
            int p = e / 64, l = e % 32, s = e / 32;
            int nib = (e % 64) < 32 ? (b[i].qs[32 * p + l] & 15) : (b[i].qs[32 * p + l] >> 4);
            uint8_t sc, m;
            get_scale_min_k4(s, b[i].scales, &sc, &m);
            y[i * VQ_QK_K + e] = d * (float)sc * (float)nib - dmin * (float)m;
        }
    }
}

void vq_dequantize_row_q5_K_ref(const void *x, float *y, int64_t n) {
    const vq_block_q5_K *b = x;
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        float d = vq_ggml_h2f(b[i].d), dmin = vq_ggml_h2f(b[i].dmin);
        for (int e = 0; e < VQ_QK_K; e++) {
            int p = e / 64, l = e % 32, s = e / 32;
            int nib = (e % 64) < 32 ? (b[i].qs[32 * p + l] & 15) : (b[i].qs[32 * p + l] >> 4);
            int q = nib + 16 * ((b[i].qh[l] >> s) & 1);
            uint8_t sc, m;
            get_scale_min_k4(s, b[i].scales, &sc, &m);
            y[i * VQ_QK_K + e] = d * (float)sc * (float)q - dmin * (float)m;
        }
    }
}

void vq_dequantize_row_q6_K_ref(const void *x, float *y, int64_t n) {
    const vq_block_q6_K *b = x;
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        float d = vq_ggml_h2f(b[i].d);
        for (int e = 0; e < VQ_QK_K; e++) {
            int h = e / 128, g = (e % 128) / 32, l = e % 32;
            int ql = b[i].ql[64 * h + 32 * (g & 1) + l];
            int low4 = g < 2 ? (ql & 15) : (ql >> 4);
            int hi2 = (b[i].qh[32 * h + l] >> (2 * g)) & 3;
            int q = (low4 | (hi2 << 4)) - 32;
            y[i * VQ_QK_K + e] = d * (float)b[i].scales[e / 16] * (float)q;
        }
    }
}

/* ---- quantization (reference) -------------------------------------------------------- */

/* Round to nearest, ties to even (as lrintf in the default mode) for |f| < 2^22, without a
 * libm call: adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. */
static inline int nearest_int(float f) {
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

void vq_quantize_row_q8a_ref(const float *x, void *y, int64_t n) {
    vq_block_q8a *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) {
            float a = x[j] < 0 ? -x[j] : x[j];
            amax = a > amax ? a : amax;
        }
        float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int q = nearest_int(x[j] * id);
            b[i].qs[j] = (int8_t)q;
            sum += q;
        }
        b[i].d = vq_ggml_h2f(vq_ggml_f2h(d));
        b[i].s = vq_ggml_h2f(vq_ggml_f2h(d * (float)sum));
    }
}

/* ggml's quantize_row_q8_K_ref: the scale comes from the first element of largest magnitude
 * with its sign (iscale = -127 / max, d = 1 / iscale), so the codes carry the opposite sign of
 * that element; an all-zero block gets d = 0. */
void vq_quantize_row_q8_K_ref(const float *x, void *y, int64_t n) {
    vq_block_q8_K *b = y;
    for (int64_t i = 0; i < n / VQ_QK_K; i++, x += VQ_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < VQ_QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        memset(&b[i], 0, sizeof b[i]);
        if (amax == 0) continue;
        const float iscale = -127.0f / max;
        for (int j = 0; j < VQ_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            b[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1 / iscale;
    }
}

void vq_quantize_row_q8_0_ref(const float *x, void *y, int64_t n) {
    vq_block_q8_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)nearest_int(x[j] * id);
        b[i].d = vq_ggml_f2h(d);
    }
}

/* Element of largest magnitude, sign kept. */
static float signed_absmax(const float *x, int n) {
    float amax = 0, v = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            v = x[j];
        }
    return v;
}

void vq_quantize_row_q4_0_ref(const float *x, void *y, int64_t n) {
    vq_block_q4_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float d = signed_absmax(x, 32) / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = vq_ggml_f2h(d);
        for (int j = 0; j < 16; j++) {
            int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void vq_quantize_row_q4_1_ref(const float *x, void *y, int64_t n) {
    vq_block_q4_1 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) {
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        float d = (mx - mn) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = vq_ggml_f2h(d);
        b[i].m = vq_ggml_f2h(mn);
        for (int j = 0; j < 16; j++) {
            int q0 = (int)((x[j] - mn) * id + 0.5f), q1 = (int)((x[j + 16] - mn) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void vq_quantize_row_q5_0_ref(const float *x, void *y, int64_t n) {
    vq_block_q5_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float d = signed_absmax(x, 32) / -16.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = vq_ggml_f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (int)(x[j] * id + 16.5f), q1 = (int)(x[j + 16] * id + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            b[i].qs[j] = (uint8_t)((q0 & 15) | ((q1 & 15) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
        }
        for (int k = 0; k < 4; k++) b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

void vq_quantize_row_q5_1_ref(const float *x, void *y, int64_t n) {
    vq_block_q5_1 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) {
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        float d = (mx - mn) / 31.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = vq_ggml_f2h(d);
        b[i].m = vq_ggml_f2h(mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (int)((x[j] - mn) * id + 0.5f), q1 = (int)((x[j + 16] - mn) * id + 0.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            b[i].qs[j] = (uint8_t)((q0 & 15) | ((q1 & 15) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
        }
        for (int k = 0; k < 4; k++) b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

/* ---- dot products (reference) -------------------------------------------------------- */

float vq_vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * y[i];
    return (float)s;
}

float vq_vec_dot_f16_f32_ref(int64_t n, const void *w, const void *a) {
    const vq_half *x = w;
    const float *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)vq_ggml_h2f(x[i]) * y[i];
    return (float)s;
}

float vq_vec_dot_bf16_f32_ref(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)vq_ggml_bf2f(x[i]) * y[i];
    return (float)s;
}

/* ggml's x86 float order for the legacy 32-element types (ggml_vec_dot_q4_0/q5_0/q8_0_q8_0 with
 * AVX2, the same per output in tinyBLAS's batched Q0 kernel): per block, 8 int32 lanes of the 4
 * products of elements 4k..4k+3, lane k = fma(d_w * d_a, lane sum, lane k) in block order; the
 * lanes are summed at the end by hsum8_ref. w holds the block's 32 signed weights. */
static inline void lanes8_block(const int8_t *w, const int8_t *a, float dd, float acc[8]) {
    for (int k = 0; k < 8; k++) {
        int l = 0;
        for (int j = 4 * k; j < 4 * k + 4; j++) l += w[j] * a[j];
        acc[k] = fmaf(dd, (float)l, acc[k]);
    }
}

/* ggml's hsum_float_8: high + low halves, then (0 + 2) + (1 + 3). */
static inline float hsum8_ref(const float acc[8]) {
    return ((acc[4] + acc[0]) + (acc[6] + acc[2])) + ((acc[5] + acc[1]) + (acc[7] + acc[3]));
}

float vq_vec_dot_q4_0_q8a_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q4_0 *x = w;
    const vq_block_q8a *y = a;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n / 32; i++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((x[i].qs[j] & 15) - 8);
            q[j + 16] = (int8_t)((x[i].qs[j] >> 4) - 8);
        }
        lanes8_block(q, y[i].qs, vq_ggml_h2f(x[i].d) * y[i].d, acc);
    }
    return hsum8_ref(acc);
}

/* In ggml's x86 operation order (ggml_vec_dot_q4_1_q8_1): 8 lanes of 4 integer products per
 * block, lane = fma(d_w * d_a, lane_sum, lane) over blocks, m * s chained by fma, then the lanes
 * summed as (l4 + l0 + l6 + l2) + (l5 + l1 + l7 + l3) — see arch/x86/ggml_avx512.c for why. */
float vq_vec_dot_q4_1_q8a_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y = a;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, summs = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(x[i].qs[j] & 15);
            q[j + 16] = (int8_t)(x[i].qs[j] >> 4);
        }
        summs = fmaf(vq_ggml_h2f(x[i].m), y[i].s, summs);
        lanes8_block(q, y[i].qs, vq_ggml_h2f(x[i].d) * y[i].d, acc);
    }
    return hsum8_ref(acc) + summs;
}

float vq_vec_dot_q5_0_q8a_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q5_0 *x = w;
    const vq_block_q8a *y = a;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh = rd32(x[i].qh);
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(((x[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4)) - 16);
            q[j + 16] = (int8_t)(((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16);
        }
        lanes8_block(q, y[i].qs, vq_ggml_h2f(x[i].d) * y[i].d, acc);
    }
    return hsum8_ref(acc);
}

float vq_vec_dot_q5_1_q8a_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q5_1 *x = w;
    const vq_block_q8a *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh = rd32(x[i].qh);
        int sum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (x[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            sum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        s += vq_ggml_h2f(x[i].d) * y[i].d * (float)sum + vq_ggml_h2f(x[i].m) * y[i].s;
    }
    return s;
}

float vq_vec_dot_q8_0_q8a_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q8_0 *x = w;
    const vq_block_q8a *y = a;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n / 32; i++)
        lanes8_block(x[i].qs, y[i].qs, vq_ggml_h2f(x[i].d) * y[i].d, acc);
    return hsum8_ref(acc);
}

/* Integer parts of one Q4_K x Q8_K super-block per 64-element chunk p (sub-blocks 2p, 2p+1):
 * isum[p] = sum of scale x (q . a), imin[p] = sum of min x block sum (exact). */
static void q4_K_chunk_ints(const vq_block_q4_K *x, const vq_block_q8_K *y, int isum[4],
                            int imin[4]) {
    for (int p = 0; p < 4; p++) {
        isum[p] = imin[p] = 0;
        for (int sb = 2 * p; sb < 2 * p + 2; sb++) {
            uint8_t sc, m;
            get_scale_min_k4(sb, x->scales, &sc, &m);
            int dot = 0;
            for (int l = 0; l < 32; l++)
                dot += ((sb & 1) ? (x->qs[32 * p + l] >> 4) : (x->qs[32 * p + l] & 15)) *
                       y->qs[32 * sb + l];
            isum[p] += sc * dot;
            imin[p] += m * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
        }
    }
}

/* In the order of ggml's x86 Q4_K kernels for weights repacked 8 rows at a time (llama.cpp's
 * CPU_REPACK buffers, used for every Q4_K matrix whose row count is a multiple of 8 on AVX2
 * CPUs): the exact integer sums of scale x dot and of min x block sum are chained by fma with
 * (d_w * d_a) resp. (dmin_w * d_a), and the result is the difference of the two chains. The
 * single-row kernel (ggml_gemv_q4_K_8x8_q8_K: the activation rows past the last multiple of 4)
 * takes one fma per super-block, the four-row one (ggml_gemm_q4_K_8x8_q8_K: rows in groups of
 * 4) one per 64-element chunk — so, as in llama.cpp, a row's result depends on its place in
 * the batch. */
float vq_vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    return vq_q4_K_gemv_chain(q4_K_chunk_ints, n, w, a);
}

void vq_vec_dot4_q4_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out) {
    vq_q4_K_gemm_chain(q4_K_chunk_ints, n, w, a, a_stride, out);
}

float vq_vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q5_K *x = w;
    const vq_block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        int sumq = 0, summ = 0;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            get_scale_min_k4(sb, x[i].scales, &sc, &m);
            int p = sb / 2, hi = sb & 1, acc = 0;
            for (int l = 0; l < 32; l++) {
                int q = hi ? (x[i].qs[32 * p + l] >> 4) : (x[i].qs[32 * p + l] & 15);
                q += 16 * ((x[i].qh[l] >> sb) & 1);
                acc += q * y[i].qs[32 * sb + l];
            }
            sumq += sc * acc;
            summ += m * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
        }
        s += y[i].d * (vq_ggml_h2f(x[i].d) * (float)sumq - vq_ggml_h2f(x[i].dmin) * (float)summ);
    }
    return s;
}

/* In the order of ggml_vec_dot_q6_K_q8_K (x86 AVX2): per super-block 8 int32 lanes, lane k
 * holding scale x (unsigned 6-bit q) x a over elements e with (e mod 32) / 4 == k, minus
 * 32 x (scale x block sum) of the 16-element blocks 2k and 2k+1; lane k = fma(d_a * d_w,
 * lane, lane k) over super-blocks; hsum8_ref at the end. */
float vq_vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a) {
    const vq_block_q6_K *x = w;
    const vq_block_q8_K *y = a;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        int lane[8];
        for (int k = 0; k < 8; k++)
            lane[k] = -32 * (x[i].scales[2 * k] * y[i].bsums[2 * k] +
                             x[i].scales[2 * k + 1] * y[i].bsums[2 * k + 1]);
        for (int e = 0; e < VQ_QK_K; e++) {
            int h = e / 128, g = (e % 128) / 32, l = e % 32;
            int ql = x[i].ql[64 * h + 32 * (g & 1) + l];
            int low4 = g < 2 ? (ql & 15) : (ql >> 4);
            int hi2 = (x[i].qh[32 * h + l] >> (2 * g)) & 3;
            lane[l / 4] += x[i].scales[e / 16] * (low4 | (hi2 << 4)) * y[i].qs[e];
        }
        const float d = y[i].d * vq_ggml_h2f(x[i].d);
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return hsum8_ref(acc);
}

/* ---- GELU (ggml's fp16 table) --------------------------------------------------------- */

void vq_ggml_gelu_table_init(uint16_t *table) {
    const float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = vq_ggml_h2f((vq_half)h);
        /* gcc contracts 1 + (a x) x into one fma in ggml's -march=native build */
        const float y = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f)));
        table[h] = vq_ggml_f2h(y);
    }
    table[65536] = 0;
}

void vq_ggml_geglu_ref(const uint16_t *table, float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) g[i] = 0.0f;
        else if (x >= 10.0f) g[i] = x * u[i];
        else g[i] = vq_ggml_h2f(table[vq_ggml_f2h(x)]) * u[i];
    }
}

/* ---- tables -------------------------------------------------------------------------- */

size_t vq_ggml_act_row_bytes(enum vq_ggml_act act, int64_t n) {
    switch (act) {
    case VQ_ACT_Q8A: return (size_t)(n / 32) * sizeof(vq_block_q8a);
    case VQ_ACT_Q8K: return (size_t)(n / VQ_QK_K) * sizeof(vq_block_q8_K);
    default: return (size_t)n * sizeof(float);
    }
}

void vq_ggml_quantize_act_isa(enum vq_isa isa, enum vq_ggml_act act, const float *x, void *y,
                              int64_t n) {
#ifdef VQ_HAVE_X86
    if (act == VQ_ACT_Q8K) {
        if (isa == VQ_ISA_AUTO) isa = vq_ggml_isa_default();
        if (isa == VQ_ISA_AVX512 && vq_ggml_isa_available(isa)) {
            vq_quantize_row_q8_K_avx512(x, y, n);
            return;
        }
        if (isa == VQ_ISA_AVX2 && vq_ggml_isa_available(isa)) {
            vq_quantize_row_q8_K_avx2(x, y, n);
            return;
        }
    }
    if (act == VQ_ACT_Q8A) {
        if (isa == VQ_ISA_AUTO) isa = vq_ggml_isa_default();
        if (isa == VQ_ISA_AVX512 && vq_ggml_isa_available(isa)) {
            vq_quantize_row_q8a_avx512(x, y, n);
            return;
        }
        if (isa == VQ_ISA_AVX2 && vq_ggml_isa_available(isa)) {
            vq_quantize_row_q8a_avx2(x, y, n);
            return;
        }
    }
#else
    (void)isa;
#endif
    vq_ggml_quantize_act(act, x, y, n);
}

void vq_ggml_quantize_act(enum vq_ggml_act act, const float *x, void *y, int64_t n) {
    switch (act) {
    case VQ_ACT_Q8A: vq_quantize_row_q8a_ref(x, y, n); break;
    case VQ_ACT_Q8K: vq_quantize_row_q8_K_ref(x, y, n); break;
    default: memcpy(y, x, (size_t)n * sizeof(float)); break;
    }
}

#define K_(t, act, deq, dot) \
    { t, act, deq, dot, NULL, NULL, NULL, NULL, NULL, NULL }
#define K4_(t, act, deq, dot, dot4) \
    { t, act, deq, dot, dot4, NULL, NULL, NULL, NULL, NULL }
#define KR_(t, act, deq, dot, dot4, dot_r4, dot_r4x4, dot_r4x8) \
    { t, act, deq, dot, dot4, dot_r4, dot_r4x4, dot_r4x8, NULL, NULL }
#define KR16_(t, act, deq, dot, dot4, dot_r4, dot_r4x4, dot_r4x8, dot_r16) \
    { t, act, deq, dot, dot4, dot_r4, dot_r4x4, dot_r4x8, dot_r16, NULL }
static const struct vq_ggml_kernels g_ref[] = {
    K_(VQ_GGML_F32, VQ_ACT_F32, vq_dequantize_row_f32_ref, vq_vec_dot_f32_f32_ref),
    K_(VQ_GGML_F16, VQ_ACT_F32, vq_dequantize_row_f16_ref, vq_vec_dot_f16_f32_ref),
    K_(VQ_GGML_BF16, VQ_ACT_F32, vq_dequantize_row_bf16_ref, vq_vec_dot_bf16_f32_ref),
    K_(VQ_GGML_Q4_0, VQ_ACT_Q8A, vq_dequantize_row_q4_0_ref, vq_vec_dot_q4_0_q8a_ref),
    K_(VQ_GGML_Q4_1, VQ_ACT_Q8A, vq_dequantize_row_q4_1_ref, vq_vec_dot_q4_1_q8a_ref),
    K_(VQ_GGML_Q5_0, VQ_ACT_Q8A, vq_dequantize_row_q5_0_ref, vq_vec_dot_q5_0_q8a_ref),
    K_(VQ_GGML_Q5_1, VQ_ACT_Q8A, vq_dequantize_row_q5_1_ref, vq_vec_dot_q5_1_q8a_ref),
    K_(VQ_GGML_Q8_0, VQ_ACT_Q8A, vq_dequantize_row_q8_0_ref, vq_vec_dot_q8_0_q8a_ref),
    K4_(VQ_GGML_Q4_K, VQ_ACT_Q8K, vq_dequantize_row_q4_K_ref, vq_vec_dot_q4_K_q8_K_ref,
        vq_vec_dot4_q4_K_q8_K_ref),
    K_(VQ_GGML_Q5_K, VQ_ACT_Q8K, vq_dequantize_row_q5_K_ref, vq_vec_dot_q5_K_q8_K_ref),
    K_(VQ_GGML_Q6_K, VQ_ACT_Q8K, vq_dequantize_row_q6_K_ref, vq_vec_dot_q6_K_q8_K_ref),
};
#define N_KERNELS (sizeof g_ref / sizeof g_ref[0])

#ifdef VQ_HAVE_X86
static const struct vq_ggml_kernels g_avx2[] = {
    K_(VQ_GGML_F32, VQ_ACT_F32, vq_dequantize_row_f32_ref, vq_vec_dot_f32_f32_avx2),
    K_(VQ_GGML_F16, VQ_ACT_F32, vq_dequantize_row_f16_ref, vq_vec_dot_f16_f32_avx2),
    K_(VQ_GGML_BF16, VQ_ACT_F32, vq_dequantize_row_bf16_ref, vq_vec_dot_bf16_f32_avx2),
    K4_(VQ_GGML_Q4_0, VQ_ACT_Q8A, vq_dequantize_row_q4_0_ref, vq_vec_dot_q4_0_q8a_avx2,
        vq_vec_dot4_q4_0_q8a_avx2),
    K4_(VQ_GGML_Q4_1, VQ_ACT_Q8A, vq_dequantize_row_q4_1_ref, vq_vec_dot_q4_1_q8a_avx2,
        vq_vec_dot4_q4_1_q8a_avx2),
    K4_(VQ_GGML_Q5_0, VQ_ACT_Q8A, vq_dequantize_row_q5_0_ref, vq_vec_dot_q5_0_q8a_avx2,
        vq_vec_dot4_q5_0_q8a_avx2),
    K_(VQ_GGML_Q5_1, VQ_ACT_Q8A, vq_dequantize_row_q5_1_ref, vq_vec_dot_q5_1_q8a_avx2),
    K4_(VQ_GGML_Q8_0, VQ_ACT_Q8A, vq_dequantize_row_q8_0_ref, vq_vec_dot_q8_0_q8a_avx2,
        vq_vec_dot4_q8_0_q8a_avx2),
    K4_(VQ_GGML_Q4_K, VQ_ACT_Q8K, vq_dequantize_row_q4_K_ref, vq_vec_dot_q4_K_q8_K_avx2,
        vq_vec_dot4_q4_K_q8_K_avx2),
    K_(VQ_GGML_Q5_K, VQ_ACT_Q8K, vq_dequantize_row_q5_K_ref, vq_vec_dot_q5_K_q8_K_ref),
    K_(VQ_GGML_Q6_K, VQ_ACT_Q8K, vq_dequantize_row_q6_K_ref, vq_vec_dot_q6_K_q8_K_avx2),
};
/* AVX-512 variants where they exist; AVX2 otherwise. One list for both AVX-512 tables: with
 * VNNI (g_avx512vnni) the int8-activation types also get the four-row kernels, R4 / R4X4 of
 * their type name (ggml_avx512vnni.c); without, those entries are NULL. */
#define NO_R4(t) NULL
#define VNNI_R4(t) vq_vec_dotr4_##t##_q8a_avx512vnni
#define VNNI_R4X4(t) vq_vec_dotr4x4_##t##_q8a_avx512vnni
#define VNNI_R4X8(t) vq_vec_dotr4x8_##t##_q8a_avx512vnni
#define VNNI_R16(t) vq_vec_dotr16_##t##_q8a_avx512vnni
#define VNNI_R4X4K(t) vq_vec_dotr4x4_##t##_q8_K_avx512vnni
#define VNNI_R4K(t) vq_vec_dotr4_##t##_q8_K_avx512vnni
#define AVX512_TABLE(R4, R4X4, R4X8, R16, R4K, R4X4K) \
    { \
        K_(VQ_GGML_F32, VQ_ACT_F32, vq_dequantize_row_f32_ref, vq_vec_dot_f32_f32_avx512), \
            K_(VQ_GGML_F16, VQ_ACT_F32, vq_dequantize_row_f16_ref, vq_vec_dot_f16_f32_avx2), \
            K_(VQ_GGML_BF16, VQ_ACT_F32, vq_dequantize_row_bf16_ref, vq_vec_dot_bf16_f32_avx2), \
            KR16_(VQ_GGML_Q4_0, VQ_ACT_Q8A, vq_dequantize_row_q4_0_ref, vq_vec_dot_q4_0_q8a_avx2, \
                  vq_vec_dot4_q4_0_q8a_avx2, R4(q4_0), R4X4(q4_0), R4X8(q4_0), R16(q4_0)), \
            KR16_(VQ_GGML_Q4_1, VQ_ACT_Q8A, vq_dequantize_row_q4_1_ref, \
                  vq_vec_dot_q4_1_q8a_avx512, vq_vec_dot4_q4_1_q8a_avx512, R4(q4_1), R4X4(q4_1), \
                  R4X8(q4_1), R16(q4_1)), \
            KR_(VQ_GGML_Q5_0, VQ_ACT_Q8A, vq_dequantize_row_q5_0_ref, vq_vec_dot_q5_0_q8a_avx2, \
                vq_vec_dot4_q5_0_q8a_avx2, R4(q5_0), R4X4(q5_0), R4X8(q5_0)), \
            K_(VQ_GGML_Q5_1, VQ_ACT_Q8A, vq_dequantize_row_q5_1_ref, vq_vec_dot_q5_1_q8a_avx2), \
            KR16_(VQ_GGML_Q8_0, VQ_ACT_Q8A, vq_dequantize_row_q8_0_ref, vq_vec_dot_q8_0_q8a_avx2, \
                  vq_vec_dot4_q8_0_q8a_avx2, R4(q8_0), R4X4(q8_0), R4X8(q8_0), R16(q8_0)), \
            KR_(VQ_GGML_Q4_K, VQ_ACT_Q8K, vq_dequantize_row_q4_K_ref, vq_vec_dot_q4_K_q8_K_avx2, \
                vq_vec_dot4_q4_K_q8_K_avx2, R4K(q4_K), R4X4K(q4_K), NULL), \
            K_(VQ_GGML_Q5_K, VQ_ACT_Q8K, vq_dequantize_row_q5_K_ref, vq_vec_dot_q5_K_q8_K_ref), \
            KR_(VQ_GGML_Q6_K, VQ_ACT_Q8K, vq_dequantize_row_q6_K_ref, vq_vec_dot_q6_K_q8_K_avx2, \
                NULL, R4K(q6_K), R4X4K(q6_K), NULL), \
    }
static const struct vq_ggml_kernels g_avx512[] = AVX512_TABLE(NO_R4, NO_R4, NO_R4, NO_R4, NO_R4,
                                                              NO_R4);
static const struct vq_ggml_kernels g_avx512vnni[] = AVX512_TABLE(VNNI_R4, VNNI_R4X4, VNNI_R4X8,
                                                                  VNNI_R16, VNNI_R4K, VNNI_R4X4K);
static_assert(sizeof g_avx2 == sizeof g_ref && sizeof g_avx512 == sizeof g_ref &&
                  sizeof g_avx512vnni == sizeof g_ref,
              "tables");
#endif

/* Repacked Q4_K / Q6_K (ggml.h): the scalar references everywhere, the VNNI kernels where
 * they run. */
#define KX_(t, dot) \
    { t, VQ_ACT_Q8K, NULL, NULL, NULL, NULL, NULL, NULL, NULL, dot }
static const struct vq_ggml_kernels g_x16_ref[] = {KX_(VQ_GGML_Q4_K, vq_vec_dot_x16_q4_K_q8_K_ref),
                                                   KX_(VQ_GGML_Q6_K, vq_vec_dot_x16_q6_K_q8_K_ref)};
#ifdef VQ_HAVE_X86
static const struct vq_ggml_kernels g_x16_avx2[] = {
    KX_(VQ_GGML_Q4_K, vq_vec_dot_x16_q4_K_q8_K_avx2),
    KX_(VQ_GGML_Q6_K, vq_vec_dot_x16_q6_K_q8_K_avx2)};
static const struct vq_ggml_kernels g_x16_vnni[] = {
    KX_(VQ_GGML_Q4_K, vq_vec_dot_x16_q4_K_q8_K_avx512vnni),
    KX_(VQ_GGML_Q6_K, vq_vec_dot_x16_q6_K_q8_K_avx512vnni)};
#endif

const struct vq_ggml_kernels *vq_ggml_kernels_x16(uint32_t type, enum vq_isa isa) {
    if (type != VQ_GGML_Q4_K && type != VQ_GGML_Q6_K) return NULL;
    const int i = type == VQ_GGML_Q6_K;
    if (isa == VQ_ISA_AUTO) isa = vq_ggml_isa_default();
    if (!vq_ggml_isa_available(isa)) isa = VQ_ISA_SCALAR;
    if (isa == VQ_ISA_SCALAR) return &g_x16_ref[i];
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX512 && vq_cpu_avx512vnni()) return &g_x16_vnni[i];
    return &g_x16_avx2[i]; /* AVX2, or AVX-512 without VNNI */
#else
    return NULL;
#endif
}

const struct vq_ggml_kernels *vq_ggml_kernels(uint32_t type, enum vq_isa isa) {
    if (isa == VQ_ISA_AUTO) isa = vq_ggml_isa_default();
    if (!vq_ggml_isa_available(isa)) isa = VQ_ISA_SCALAR;
    const struct vq_ggml_kernels *tab = g_ref;
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX2) tab = g_avx2;
    if (isa == VQ_ISA_AVX512) tab = vq_cpu_avx512vnni() ? g_avx512vnni : g_avx512;
#endif
    for (size_t i = 0; i < N_KERNELS; i++)
        if (tab[i].type == type) return &tab[i];
    return NULL;
}


/* ---- llama.cpp numerics outside the matmuls (see ggml.h) ------------------------------ */

void vq_ggml_swiglu_ref(float *g, const float *u, int64_t n) {
    const int64_t nv = n / 16 * 16;
    int64_t i = 0;
    for (; i < nv; i++) g[i] = (g[i] / (1.0f + vq_ggml_expf_ref(0.0f - g[i]))) * u[i];
    for (; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

static const struct vq_ggml_nn_kernels g_nn_ref = {vq_ggml_swiglu_ref, vq_ggml_geglu_ref};
#ifdef VQ_HAVE_X86
static const struct vq_ggml_nn_kernels g_nn_avx2 = {vq_ggml_swiglu_avx2, vq_ggml_geglu_ref};
static const struct vq_ggml_nn_kernels g_nn_avx512 = {vq_ggml_swiglu_avx512, vq_ggml_geglu_avx512};
#endif

const struct vq_ggml_nn_kernels *vq_ggml_nn_kernels(enum vq_isa isa) {
    if (isa == VQ_ISA_AUTO) isa = vq_ggml_isa_default();
    if (!vq_ggml_isa_available(isa)) isa = VQ_ISA_SCALAR;
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX2) return &g_nn_avx2;
    if (isa == VQ_ISA_AVX512) return &g_nn_avx512;
#endif
    return &g_nn_ref;
}

/* ---- matrix product ------------------------------------------------------------------ */

#define VQ_MM_TILE 16 /* vec_dot_r16 takes whole tiles */
/* Tokens from which a tile runs through vec_dot_r16 (its repack then costs less than it saves) */
#ifndef VQ_MM_R16_MIN_TOK
#define VQ_MM_R16_MIN_TOK 2
#endif

void vq_ggml_matmul(const struct vq_ggml_kernels *k, const void *w, size_t w_row_bytes,
                    int64_t n_rows, int64_t n_cols, const void *act, size_t act_stride,
                    int64_t n_tok, float *out, int64_t ld_out, int n_threads) {
    const struct vq_ggml_mm_job j = {k,          w,   w_row_bytes, n_rows, n_cols, act,
                                     act_stride, out, ld_out,      0,      NULL};
    vq_ggml_matmul_multi(&j, 1, n_tok, n_threads);
}

/* Row r of one job against the 4 tokens t..t+3: vec_dot4, or vec_dot per token for a type
 * whose four-row kernels equal vec_dot (no one-row batched twin). */
static void mm_row_x4(const struct vq_ggml_mm_job *j, int64_t r, int64_t t) {
    const uint8_t *wr = (const uint8_t *)j->w + (size_t)r * j->w_row_bytes;
    const uint8_t *a = (const uint8_t *)j->act + (size_t)t * j->act_stride;
    float o4[4];
    if (j->k->vec_dot4) j->k->vec_dot4(j->n_cols, wr, a, j->act_stride, o4);
    else
        for (int q = 0; q < 4; q++)
            o4[q] = j->k->vec_dot(j->n_cols, wr, a + (size_t)q * j->act_stride);
    for (int q = 0; q < 4; q++) j->out[(t + q) * j->ld_out + r] = o4[q];
}

/* A whole tile of 16 rows against every token through vec_dot_r16, in groups of at most
 * VQ_R16_MAX_TOK tokens of about equal size (each group repacks the tile's weights once). */
static void mm_tile_r16(const struct vq_ggml_mm_job *j, int64_t r0, int64_t n_tok) {
    const int64_t n_grp = (n_tok + VQ_R16_MAX_TOK - 1) / VQ_R16_MAX_TOK;
    const int64_t per = (n_tok + n_grp - 1) / n_grp;
    float *o[VQ_R16_MAX_TOK];
    for (int64_t t = 0; t < n_tok; t += per) {
        const int nt = (int)(n_tok - t < per ? n_tok - t : per);
        for (int q = 0; q < nt; q++)
            o[q] = (j->out_rows ? j->out_rows[t + q] : j->out + (t + q) * j->ld_out) + r0;
        j->k->vec_dot_r16(j->n_cols, (const uint8_t *)j->w + (size_t)r0 * j->w_row_bytes,
                          j->w_row_bytes, (const uint8_t *)j->act + (size_t)t * j->act_stride,
                          j->act_stride, nt, o);
    }
}

/* Computes rows [r0, r1) of one job for every token: a whole tile against VQ_MM_R16_MIN_TOK or
 * more tokens through vec_dot_r16 (equal to vec_dot: rowwise jobs too); else tokens in groups
 * of 8 (vec_dot_r4x8) or 4 (vec_dot_r4x4 / vec_dot4) while they last, as ggml's gemm, the rest
 * one by one (gemv). */
static void mm_tile(const struct vq_ggml_mm_job *j, int64_t r0, int64_t r1, int64_t n_tok) {
    const uint8_t *wb = j->w, *ab = j->act;
    int64_t t = 0;
    if (j->k->vec_dot_x16) { /* one repacked 16-row group: gemm by 8 or 4 tokens, then gemv */
        const uint8_t *g = wb + (size_t)r0 * j->w_row_bytes;
        VQ_DASSERT(r1 - r0 == VQ_X16_ROWS && VQ_MM_TILE == VQ_X16_ROWS);
        for (int nt; !j->rowwise && t + 4 <= n_tok; t += nt) {
            nt = t + 8 <= n_tok ? 8 : 4;
            j->k->vec_dot_x16(j->n_cols, g, ab + (size_t)t * j->act_stride, j->act_stride, nt, 1,
                              j->out + t * j->ld_out + r0, (size_t)j->ld_out);
        }
        for (int nt; t < n_tok; t += nt) {
            nt = n_tok - t < 8 ? (int)(n_tok - t) : 8;
            if (!j->out_rows) {
                j->k->vec_dot_x16(j->n_cols, g, ab + (size_t)t * j->act_stride, j->act_stride, nt,
                                  0, j->out + t * j->ld_out + r0, (size_t)j->ld_out);
                continue;
            }
            /* rows scattered over their own buffers: the 8 tokens' 16 results here, then out */
            float o[8 * VQ_X16_ROWS];
            j->k->vec_dot_x16(j->n_cols, g, ab + (size_t)t * j->act_stride, j->act_stride, nt, 0, o,
                              VQ_X16_ROWS);
            for (int q = 0; q < nt; q++)
                memcpy(j->out_rows[t + q] + r0, o + q * VQ_X16_ROWS, sizeof(float) * VQ_X16_ROWS);
        }
        return;
    }
    if (j->k->vec_dot_r16 && r1 - r0 == VQ_MM_TILE && n_tok >= VQ_MM_R16_MIN_TOK) {
        mm_tile_r16(j, r0, n_tok);
        return;
    }
    if (!j->rowwise && (j->k->vec_dot4 || j->k->vec_dot_r4x4)) {
        while (t + 4 <= n_tok) {
            const int nt = j->k->vec_dot_r4x8 && t + 8 <= n_tok ? 8 : 4;
            const vq_ggml_vec_dot_r4x4_fn f = nt == 8 ? j->k->vec_dot_r4x8 : j->k->vec_dot_r4x4;
            int64_t r = r0;
            if (f)
                for (; r + 4 <= r1; r += 4)
                    f(j->n_cols, wb + (size_t)r * j->w_row_bytes, j->w_row_bytes,
                      ab + (size_t)t * j->act_stride, j->act_stride, j->out + t * j->ld_out + r,
                      (size_t)j->ld_out);
            for (; r < r1; r++)
                for (int q = 0; q < nt; q += 4) mm_row_x4(j, r, t + q);
            t += nt;
        }
    }
    for (; t < n_tok; t++) {
        const void *a = ab + (size_t)t * j->act_stride;
        float *o = j->out_rows ? j->out_rows[t] : j->out + t * j->ld_out;
        int64_t r = r0;
        if (j->k->vec_dot_r4)
            for (; r + 4 <= r1; r += 4)
                j->k->vec_dot_r4(j->n_cols, wb + (size_t)r * j->w_row_bytes, j->w_row_bytes, a,
                                 o + r);
        for (; r < r1; r++) o[r] = j->k->vec_dot(j->n_cols, wb + (size_t)r * j->w_row_bytes, a);
    }
}

void vq_ggml_matmul_multi(const struct vq_ggml_mm_job *jobs, int n_jobs, int64_t n_tok,
                          int n_threads) {
    int64_t first[8 + 1];
    VQ_ASSERT(n_jobs >= 1 && n_jobs <= 8);
    first[0] = 0;
    for (int i = 0; i < n_jobs; i++)
        first[i + 1] = first[i] + (jobs[i].n_rows + VQ_MM_TILE - 1) / VQ_MM_TILE;
    const int64_t n_tiles = first[n_jobs];
#ifdef _OPENMP
    /* guided: large contiguous runs of tiles first (each thread streams its weights in long
     * runs), then smaller ones, so that a thread slowed down (a Q6_K tile among Q4_K ones, a
     * descheduled vCPU, its share of the memory bus) does not leave the other waiting at the
     * end; rows are independent, so the split never changes the bits */
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    if (n_tiles * n_tok < 8) nt = 1;
#pragma omp parallel for num_threads(nt) schedule(guided)
#else
    (void)n_threads;
#endif
    for (int64_t tile = 0; tile < n_tiles; tile++) {
        int i = 0;
        while (tile >= first[i + 1]) i++;
        const int64_t r0 = (tile - first[i]) * VQ_MM_TILE;
        const int64_t r1 = r0 + VQ_MM_TILE < jobs[i].n_rows ? r0 + VQ_MM_TILE : jobs[i].n_rows;
        mm_tile(&jobs[i], r0, r1, n_tok);
    }
}
