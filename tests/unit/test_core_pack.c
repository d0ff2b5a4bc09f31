/* test_core_pack.c — LSB-first bit packing: lossless round trips for bits 1..8 and odd
 * lengths, exact byte layout of known examples, zero padding, byte counts. */
#include "test.h"
#include "core/core.h"

TEST(roundtrip) {
    uint8_t codes[515], back[515], buf[520];
    vq_rng g;
    vq_rng_seed(&g, 11);
    int bad = 0;
    for (int bits = 1; bits <= 8; bits++) {
        for (int n = 1; n <= 515; n += (n < 40 ? 1 : 37)) {
            for (int i = 0; i < n; i++) codes[i] = (uint8_t)(vq_rng_u64(&g) & ((1u << bits) - 1));
            size_t nb = vq_pack_bytes(n, bits);
            if (nb != (size_t)((n * bits + 7) / 8)) bad++;
            memset(buf, 0xAB, sizeof(buf));
            vq_pack(codes, n, bits, buf);
            if (buf[nb] != 0xAB) bad++; /* no overrun */
            int pad = (int)(nb * 8 - (size_t)n * bits);
            if (pad && (buf[nb - 1] >> (8 - pad)) != 0) bad++; /* padding zero */
            vq_unpack(buf, n, bits, back);
            if (memcmp(codes, back, (size_t)n) != 0) bad++;
        }
    }
    ASSERT_EQ_INT(bad, 0);
}

TEST(layout) {
    uint8_t c3[3] = {1, 2, 3}, out[2];
    vq_pack(c3, 3, 3, out);
    ASSERT_EQ_INT(out[0], 1 | 2 << 3 | (3 & 3) << 6);
    ASSERT_EQ_INT(out[1], 3 >> 2);
    uint8_t c4[3] = {0xA, 0x5, 0xF}, o4[2];
    vq_pack(c4, 3, 4, o4);
    ASSERT_EQ_INT(o4[0], 0x5A);
    ASSERT_EQ_INT(o4[1], 0x0F);
    uint8_t c1[9] = {1, 0, 0, 0, 0, 0, 0, 1, 1}, o1[2];
    vq_pack(c1, 9, 1, o1);
    ASSERT_EQ_INT(o1[0], 0x81);
    ASSERT_EQ_INT(o1[1], 0x01);
    uint8_t c2[5] = {3, 0, 1, 2, 1}, o2[2];
    vq_pack(c2, 5, 2, o2);
    ASSERT_EQ_INT(o2[0], 3 | 0 << 2 | 1 << 4 | 2 << 6);
    ASSERT_EQ_INT(o2[1], 1);
    /* high bits of codes are ignored */
    uint8_t cx[2] = {0xFF, 0xFE}, ox[1];
    vq_pack(cx, 2, 2, ox);
    ASSERT_EQ_INT(ox[0], 3 | 2 << 2);
}

int main(void) {
    RUN(roundtrip);
    RUN(layout);
    return TEST_REPORT();
}
