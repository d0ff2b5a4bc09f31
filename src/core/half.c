/* half.c — scalar fp16 / bf16 / sf16 conversions and the ISA-dispatched row converters.
 * All fp32 -> 16-bit conversions round to nearest even. Bit manipulation only (plus one
 * float addition per subnormal, which relies on the default IEEE rounding mode). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/arch/x86/core_x86.h"

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- IEEE binary16 ---- */

/* fp32 -> binary16, round to nearest even; overflow gives +-inf, NaN stays a (quiet) NaN
 * keeping the top payload bits (same result as the F16C instruction). Thread-safe. */
uint16_t vq_fp32_to_fp16(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf / NaN */
        return (uint16_t)(sign | 0x7c00u |
                          (x > 0x7f800000u ? (0x200u | ((x >> 13) & 0x3ffu)) : 0u));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {                                   /* below 2^-14: subnormal */
        float v = u2f(x) + 0.5f;                             /* ulp(0.5) = 2^-24: RNE */
        return (uint16_t)(sign | (f2u(v) - 0x3f000000u));
    }
    uint32_t odd = (x >> 13) & 1u;
    x += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    return (uint16_t)(sign | (x >> 13));
}

/* binary16 -> fp32 (exact; a NaN comes back quiet, as with F16C). Thread-safe. */
float vq_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1.0p-24f;
        return u2f(f2u(v) | sign);
    }
    if (e == 31) return u2f(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u)); /* quiet NaN */
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- bfloat16 ---- */

/* fp32 -> bfloat16, round to nearest even; NaN stays a quiet NaN. Thread-safe. */
uint16_t vq_fp32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* bfloat16 -> fp32 (exact). Thread-safe. */
float vq_bf16_to_fp32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* ---- sf16: sign | 6-bit exponent (bias 31) | 9-bit mantissa; subnormals; no inf/NaN ----
 * value = (-1)^s * (1 + m/512) * 2^(e-31) for e >= 1, (-1)^s * m * 2^-39 for e == 0. */

/* 1 if f is finite and |f| <= VQ_SF16_MAX (so vq_fp32_to_sf16 does not saturate). */
int vq_sf16_fits(float f) { return isfinite(f) && fabsf(f) <= VQ_SF16_MAX; }

/* fp32 -> sf16, round to nearest even. Saturates to +-VQ_SF16_MAX beyond the range
 * (including +-inf); NaN maps to 0. Thread-safe. */
uint16_t vq_fp32_to_sf16(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return 0;     /* NaN */
    if (x < 0x30800000u) {             /* below 2^-30: subnormal, units of 2^-39 */
        float v = u2f(x) + 0x1.0p-16f; /* ulp(2^-16) = 2^-39: RNE */
        return (uint16_t)(sign | (f2u(v) - 0x37800000u));
    }
    if (x >= 0x50000000u) return (uint16_t)(sign | 0x7fffu); /* >= 2^33: beyond the range */
    uint32_t odd = (x >> 14) & 1u;
    x = x - ((uint32_t)(127 - 31) << 23) + 0x1fffu + odd;
    uint32_t r = x >> 14;
    if (r > 0x7fffu) r = 0x7fffu;
    return (uint16_t)(sign | r);
}

/* sf16 -> fp32 (exact). Thread-safe. */
float vq_sf16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 9) & 0x3fu, m = h & 0x1ffu;
    if (e == 0) {
        float v = (float)m * 0x1.0p-39f;
        return u2f(f2u(v) | sign);
    }
    return u2f(sign | ((e + 127u - 31u) << 23) | (m << 14));
}

/* ---- rows ---- */

/* Converts n binary16 values to fp32 (exact; SIMD when available). src and dst must not
 * overlap. Thread-safe. */
void vq_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
#ifdef VQ_HAVE_X86
    if (vq_isa_default() >= VQ_ISA_AVX2) {
        vq_fp16_to_fp32_row_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = vq_fp16_to_fp32(src[i]);
}

/* Converts n fp32 values to binary16 (RNE, bit-identical to vq_fp32_to_fp16). Thread-safe. */
void vq_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
#ifdef VQ_HAVE_X86
    if (vq_isa_default() >= VQ_ISA_AVX2) {
        vq_fp32_to_fp16_row_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = vq_fp32_to_fp16(src[i]);
}

/* Converts n bfloat16 values to fp32 (exact). Thread-safe. */
void vq_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
#ifdef VQ_HAVE_X86
    if (vq_isa_default() >= VQ_ISA_AVX2) {
        vq_bf16_to_fp32_row_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = vq_bf16_to_fp32(src[i]);
}
