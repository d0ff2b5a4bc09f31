/* pack.c — LSB-first bit packing: code j occupies bits [j*bits, (j+1)*bits) of a
 * little-endian bit stream (byte k holds stream bits 8k..8k+7). bits 1..8. */
#include <string.h>

#include "core/core.h"

/* Bytes needed for n codes of `bits` bits: ceil(n*bits/8). */
size_t vq_pack_bytes(int64_t n, int bits) { return (size_t)((n * bits + 7) / 8); }

/* Packs n codes (each < 2^bits; higher bits are ignored) into dst (vq_pack_bytes bytes,
 * fully written, padding bits zero). bits 1..8. */
void vq_pack(const uint8_t *codes, int64_t n, int bits, uint8_t *dst) {
    VQ_ASSERT(bits >= 1 && bits <= 8);
    size_t nb = vq_pack_bytes(n, bits);
    uint8_t mask = (uint8_t)((1u << bits) - 1u);
    if (bits == 8) {
        memcpy(dst, codes, (size_t)n);
        return;
    }
    if (bits == 1 || bits == 2 || bits == 4) {
        int per = 8 / bits;
        int64_t j = 0;
        for (size_t k = 0; k < nb; k++) {
            unsigned v = 0;
            for (int i = 0; i < per && j < n; i++, j++)
                v |= (unsigned)(codes[j] & mask) << (i * bits);
            dst[k] = (uint8_t)v;
        }
        return;
    }
    memset(dst, 0, nb);
    uint64_t acc = 0;
    int nacc = 0;
    size_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        acc |= (uint64_t)(codes[j] & mask) << nacc;
        nacc += bits;
        while (nacc >= 8) {
            dst[k++] = (uint8_t)acc;
            acc >>= 8;
            nacc -= 8;
        }
    }
    if (nacc > 0) dst[k] = (uint8_t)acc;
}

/* Unpacks n codes of `bits` bits from src (vq_pack_bytes bytes) into codes. bits 1..8. */
void vq_unpack(const uint8_t *src, int64_t n, int bits, uint8_t *codes) {
    VQ_ASSERT(bits >= 1 && bits <= 8);
    unsigned mask = (1u << bits) - 1u;
    if (bits == 8) {
        memcpy(codes, src, (size_t)n);
        return;
    }
    if (bits == 1 || bits == 2 || bits == 4) {
        int per = 8 / bits;
        for (int64_t j = 0; j < n; j++)
            codes[j] = (uint8_t)((src[j / per] >> ((j % per) * bits)) & mask);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t bit = j * bits;
        unsigned v = src[bit >> 3];
        int sh = (int)(bit & 7);
        if (sh + bits > 8) v |= (unsigned)src[(bit >> 3) + 1] << 8;
        codes[j] = (uint8_t)((v >> sh) & mask);
    }
}
