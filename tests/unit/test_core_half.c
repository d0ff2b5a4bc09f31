/* test_core_half.c — fp16 / bf16 / sf16 conversions: exhaustive round trips, round-to-nearest-
 * even checked against neighbouring codes in double arithmetic, subnormals, overflow, NaN,
 * sf16 monotonicity / relative error / saturation, and the SIMD row converters vs scalar. */
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "core/core.h"

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s;
}

TEST(fp16_roundtrip_all) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = vq_fp16_to_fp32((uint16_t)h);
        uint16_t back = vq_fp32_to_fp16(f);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) { /* NaN: stays NaN, quiet bit set */
            if (!isnan(f) || back != (uint16_t)(h | 0x200u)) bad++;
        } else if (back != h) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
}

/* Checks that h16 is the nearest fp16 to f with ties to even (finite, in range). */
static int check_rne16(float f, uint16_t h) {
    double x = f, v = vq_fp16_to_fp32(h);
    if (isinf(v)) return fabs(x) >= 65520.0;
    double e = fabs(x - v);
    for (int dlt = -1; dlt <= 1; dlt += 2) {
        int nh = (int)(h & 0x7fff) + dlt;
        if (nh < 0 || nh > 0x7bff) continue;
        double w = vq_fp16_to_fp32((uint16_t)((h & 0x8000) | nh));
        double e2 = fabs(x - w);
        if (e2 < e) return 0;
        if (e2 == e && (h & 1)) return 0; /* tie must go to even mantissa */
    }
    /* -0 vs +0 sign kept */
    return signbit(f) == signbit(vq_fp16_to_fp32(h)) || v == 0.0 ? 1 : 0;
}

TEST(fp16_rne_sweep) {
    int bad = 0;
    /* Every float with stride 4099 (~1M values) below the NaN range, both signs. */
    for (uint64_t u = 0; u < 0x7f800000ull; u += 4099) {
        float f = u2f((uint32_t)u);
        if (!check_rne16(f, vq_fp32_to_fp16(f))) bad++;
        if (!check_rne16(-f, vq_fp32_to_fp16(-f))) bad++;
    }
    /* Exact ties around every fp16 value (midpoints). */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double a = vq_fp16_to_fp32((uint16_t)h), b = vq_fp16_to_fp32((uint16_t)(h + 1));
        float mid = (float)(0.5 * (a + b));
        uint16_t r = vq_fp32_to_fp16(mid);
        if (r != ((h & 1) ? h + 1 : h)) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
}

TEST(fp16_special) {
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.0p-24f), 0x0001);
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.0p-25f), 0x0000);   /* tie -> even (0) */
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.8p-24f), 0x0002);   /* 1.5 ulp -> 2 */
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.0p-14f), 0x0400);   /* min normal */
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.ffcp-15f), 0x0400); /* rounds up into normal */
    ASSERT_EQ_INT(vq_fp32_to_fp16(65504.0f), 0x7bff);
    ASSERT_EQ_INT(vq_fp32_to_fp16(65519.0f), 0x7bff);
    ASSERT_EQ_INT(vq_fp32_to_fp16(65520.0f), 0x7c00);
    ASSERT_EQ_INT(vq_fp32_to_fp16(-1e9f), 0xfc00);
    ASSERT_EQ_INT(vq_fp32_to_fp16(INFINITY), 0x7c00);
    ASSERT_EQ_INT(vq_fp32_to_fp16(-0.0f), 0x8000);
    ASSERT_EQ_INT(vq_fp32_to_fp16(1.0f), 0x3c00);
    ASSERT_EQ_INT(vq_fp32_to_fp16(-2.0f), 0xc000);
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.002p0f), 0x3c00); /* tie -> even */
    ASSERT_EQ_INT(vq_fp32_to_fp16(0x1.006p0f), 0x3c02); /* tie -> even (up) */
    ASSERT(isnan(vq_fp16_to_fp32(vq_fp32_to_fp16(NAN))));
    ASSERT_NEAR(vq_fp16_to_fp32(0x0001), 0x1.0p-24, 0);
    ASSERT_NEAR(vq_fp16_to_fp32(0x03ff), 1023.0 * 0x1.0p-24, 0);
}

TEST(bf16_all) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = vq_bf16_to_fp32((uint16_t)h);
        uint16_t back = vq_fp32_to_bf16(f);
        if (isnan(f)) {
            if (!isnan(vq_bf16_to_fp32(back))) bad++;
        } else if (back != h) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
    uint32_t s = 7;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = lcg(&s) & 0x7f7fffffu;
        float f = u2f(u);
        uint16_t h = vq_fp32_to_bf16(f);
        if (isinf(vq_bf16_to_fp32(h))) { /* overflow only from the top half-ulp */
            if (u < 0x7f7f8000u) bad++;
            continue;
        }
        double e = fabs((double)f - vq_bf16_to_fp32(h));
        double lo = vq_bf16_to_fp32((uint16_t)(h - 1)), hi = vq_bf16_to_fp32((uint16_t)(h + 1));
        if (fabs((double)f - lo) < e || (!isinf(hi) && fabs((double)f - hi) < e)) bad++;
        if (e > 0 && (fabs((double)f - lo) == e || fabs((double)f - hi) == e) && (h & 1)) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
    ASSERT_EQ_INT(vq_fp32_to_bf16(1.0f), 0x3f80);
    ASSERT_EQ_INT(vq_fp32_to_bf16(u2f(0x3f808000u)), 0x3f80); /* tie -> even */
    ASSERT_EQ_INT(vq_fp32_to_bf16(u2f(0x3f818000u)), 0x3f82); /* tie -> even (up) */
    ASSERT_EQ_INT(vq_fp32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); /* overflow -> inf */
}

TEST(sf16_monotonic_and_roundtrip) {
    int bad = 0;
    float prev = -1.0f;
    for (uint32_t h = 0; h < 0x8000; h++) {
        float f = vq_sf16_to_fp32((uint16_t)h);
        if (!(f > prev) || !isfinite(f)) bad++;
        prev = f;
        if (vq_fp32_to_sf16(f) != h) bad++;
        if (vq_fp32_to_sf16(-f) != (uint16_t)(h | 0x8000u) && h != 0) bad++;
        if (vq_sf16_to_fp32((uint16_t)(h | 0x8000u)) != -f) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
    ASSERT_NEAR(vq_sf16_to_fp32(0x7fff), VQ_SF16_MAX, 0);
    ASSERT_NEAR(vq_sf16_to_fp32(0x0001), 0x1.0p-39, 0);
    ASSERT_NEAR(vq_sf16_to_fp32(0x0200), 0x1.0p-30, 0); /* min normal */
    ASSERT_NEAR(vq_sf16_to_fp32(31 << 9), 1.0, 0);      /* 1.0 = exp 31 */
}

TEST(sf16_rel_error_and_rne) {
    uint32_t s = 99;
    double worst = 0.0;
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        /* log-uniform over [2^-30, 2^32] */
        double x = ldexp(1.0 + (lcg(&s) >> 8) * 0x1.0p-24, (int)(lcg(&s) % 62) - 30);
        float f = (float)x;
        if (f > VQ_SF16_MAX) continue;
        uint16_t h = vq_fp32_to_sf16(f);
        double v = vq_sf16_to_fp32(h), e = fabs(v - f);
        worst = fmax(worst, e / f);
        /* nearest, ties to even */
        if (h > 0) {
            double lo = vq_sf16_to_fp32((uint16_t)(h - 1));
            if (fabs(f - lo) < e || (fabs(f - lo) == e && (h & 1))) bad++;
        }
        if (h < 0x7fff) {
            double hi = vq_sf16_to_fp32((uint16_t)(h + 1));
            if (fabs(f - hi) < e || (fabs(f - hi) == e && (h & 1))) bad++;
        }
    }
    ASSERT_LE(worst, 0x1.0p-10);
    ASSERT_EQ_INT(bad, 0);
    /* subnormals: absolute error <= 2^-40 */
    for (int i = 0; i < 10000; i++) {
        float f = (float)((lcg(&s) >> 8) * 0x1.0p-24 * 0x1.0p-30);
        double e = fabs(vq_sf16_to_fp32(vq_fp32_to_sf16(f)) - f);
        ASSERT_LE(e, 0x1.0p-40);
    }
}

TEST(sf16_saturation) {
    ASSERT_EQ_INT(vq_fp32_to_sf16(1e10f), 0x7fff);
    ASSERT_EQ_INT(vq_fp32_to_sf16(-1e10f), 0xffff);
    ASSERT_EQ_INT(vq_fp32_to_sf16(INFINITY), 0x7fff);
    ASSERT_EQ_INT(vq_fp32_to_sf16(-INFINITY), 0xffff);
    ASSERT_EQ_INT(vq_fp32_to_sf16(NAN), 0);
    ASSERT_EQ_INT(vq_fp32_to_sf16(VQ_SF16_MAX), 0x7fff);
    ASSERT_EQ_INT(vq_fp32_to_sf16(0x1.0p32f), 63 << 9);
    ASSERT_EQ_INT(vq_fp32_to_sf16(0x1.ffcp32f), 0x7fff); /* just above max saturates */
    ASSERT(vq_sf16_fits(8.5e9f));
    ASSERT(vq_sf16_fits(-8.5e9f));
    ASSERT(!vq_sf16_fits(8.6e9f));
    ASSERT(!vq_sf16_fits(NAN));
    ASSERT(!vq_sf16_fits(INFINITY));
    ASSERT(vq_sf16_fits(0.0f));
    ASSERT_NEAR(vq_sf16_to_fp32(vq_fp32_to_sf16(1e6f)), 1e6, 1e6 * 0x1.0p-10);
}

TEST(rows_match_scalar) {
    enum { N = 65536 + 13 };
    static uint16_t h[N], h2[N];
    static float f[N], g[N];
    for (int i = 0; i < N; i++) h[i] = (uint16_t)(i * 40503u);
    vq_fp16_to_fp32_row(h, f, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float r = vq_fp16_to_fp32(h[i]);
        if (memcmp(&r, &f[i], 4) != 0) bad++;
    }
    uint32_t s = 5;
    for (int i = 0; i < N; i++) {
        uint32_t u = lcg(&s);
        if (i % 3 == 0)
            u = (u & 0x80000000u) | (0x33000000u + (u % 0x15000000u)); /* near fp16 range */
        g[i] = u2f(u);
    }
    vq_fp32_to_fp16_row(g, h2, N);
    for (int i = 0; i < N; i++) {
        uint16_t r = vq_fp32_to_fp16(g[i]);
        if (r != h2[i]) bad++;
    }
    vq_bf16_to_fp32_row(h, f, N);
    for (int i = 0; i < N; i++) {
        float r = vq_bf16_to_fp32(h[i]);
        if (memcmp(&r, &f[i], 4) != 0) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
}

int main(void) {
    RUN(fp16_roundtrip_all);
    RUN(fp16_rne_sweep);
    RUN(fp16_special);
    RUN(bf16_all);
    RUN(sf16_monotonic_and_roundtrip);
    RUN(sf16_rel_error_and_rne);
    RUN(sf16_saturation);
    RUN(rows_match_scalar);
    return TEST_REPORT();
}
