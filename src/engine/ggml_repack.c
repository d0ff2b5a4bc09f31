/*
 * ggml_repack.c — weights repacked in 16-row groups (ggml.h, "repacked weights"): the in-place
 * rewrite, the row dequantization and the scalar reference kernel of the layout, which unpacks
 * each row's blocks and runs the type's own _ref kernels (the normative arithmetic).
 */
#include "engine/ggml.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Bytes of one repacked Q4_K super-block of a group (16 rows x 144). */
#define X16_Q4_K_SB (VQ_X16_ROWS * (int64_t)sizeof(vq_block_q4_K))

/* Block i of the 16 rows src[r] into the group layout at dst (ggml.h). */
static void pack_q4_K(const vq_block_q4_K *const src[VQ_X16_ROWS], uint8_t *dst) {
    for (int r = 0; r < VQ_X16_ROWS; r++) {
        memcpy(dst + 2 * r, &src[r]->d, 2);
        memcpy(dst + 32 + 2 * r, &src[r]->dmin, 2);
        for (int j = 0; j < 3; j++) memcpy(dst + 64 + 64 * j + 4 * r, src[r]->scales + 4 * j, 4);
        for (int p = 0; p < 4; p++)
            for (int k = 0; k < 8; k++)
                memcpy(dst + 256 + 64 * (8 * p + k) + 4 * r, src[r]->qs + 32 * p + 4 * k, 4);
    }
}

/* Row r's block back from one repacked super-block src. */
static void unpack_q4_K(const uint8_t *src, int r, vq_block_q4_K *out) {
    memcpy(&out->d, src + 2 * r, 2);
    memcpy(&out->dmin, src + 32 + 2 * r, 2);
    for (int j = 0; j < 3; j++) memcpy(out->scales + 4 * j, src + 64 + 64 * j + 4 * r, 4);
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 8; k++)
            memcpy(out->qs + 32 * p + 4 * k, src + 256 + 64 * (8 * p + k) + 4 * r, 4);
}

/* Bytes of one repacked Q6_K super-block of a group (16 rows x 210). */
#define X16_Q6_K_SB (VQ_X16_ROWS * (int64_t)sizeof(vq_block_q6_K))

/* Q6_K group layout (ggml.h): d[16] at 0; scale j of row r at 32 + 16 j + r; then per word
 * k (0..7) 384 bytes, in the kernel's reading order: for h = 0, 1 the ql bytes
 * 64 h + 4 k .. + 3, 64 h + 32 + 4 k .. + 3 and the qh bytes 32 h + 4 k .. + 3 of every row
 * (row r at + 4 r of each 64-byte piece). */
static size_t q6_K_ql_at(int h, int s, int k) {
    return 288 + 384 * (size_t)k + 64 * (size_t)(3 * h + s);
}
static size_t q6_K_qh_at(int h, int k) { return 288 + 384 * (size_t)k + 64 * (size_t)(3 * h + 2); }

static void pack_q6_K(const vq_block_q6_K *const src[VQ_X16_ROWS], uint8_t *dst) {
    for (int r = 0; r < VQ_X16_ROWS; r++) {
        memcpy(dst + 2 * r, &src[r]->d, 2);
        for (int j = 0; j < 16; j++) dst[32 + 16 * j + r] = (uint8_t)src[r]->scales[j];
        for (int k = 0; k < 8; k++)
            for (int h = 0; h < 2; h++) {
                for (int s = 0; s < 2; s++)
                    memcpy(dst + q6_K_ql_at(h, s, k) + 4 * r, src[r]->ql + 64 * h + 32 * s + 4 * k,
                           4);
                memcpy(dst + q6_K_qh_at(h, k) + 4 * r, src[r]->qh + 32 * h + 4 * k, 4);
            }
    }
}

static void unpack_q6_K(const uint8_t *src, int r, vq_block_q6_K *out) {
    memcpy(&out->d, src + 2 * r, 2);
    for (int j = 0; j < 16; j++) out->scales[j] = (int8_t)src[32 + 16 * j + r];
    for (int k = 0; k < 8; k++)
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 2; s++)
                memcpy(out->ql + 64 * h + 32 * s + 4 * k, src + q6_K_ql_at(h, s, k) + 4 * r, 4);
            memcpy(out->qh + 32 * h + 4 * k, src + q6_K_qh_at(h, k) + 4 * r, 4);
        }
}

int vq_ggml_repack_x16(uint32_t type, void *data, int64_t rows, int64_t cols) {
    if ((type != VQ_GGML_Q4_K && type != VQ_GGML_Q6_K) || rows <= 0 || rows % VQ_X16_ROWS ||
        cols <= 0 || cols % VQ_QK_K || cols > VQ_X16_MAX_COLS)
        return -1;
    const int q4 = type == VQ_GGML_Q4_K;
    const size_t bs = q4 ? sizeof(vq_block_q4_K) : sizeof(vq_block_q6_K);
    const int64_t nb = cols / VQ_QK_K;
    const size_t row_bytes = (size_t)nb * bs;
    uint8_t *tmp = malloc(VQ_X16_ROWS * row_bytes);
    if (!tmp) return -1;
    for (int64_t g = 0; g < rows / VQ_X16_ROWS; g++) {
        uint8_t *grp = (uint8_t *)data + (size_t)g * VQ_X16_ROWS * row_bytes;
        memcpy(tmp, grp, VQ_X16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++) {
            const void *src[VQ_X16_ROWS];
            for (int r = 0; r < VQ_X16_ROWS; r++)
                src[r] = tmp + (size_t)r * row_bytes + (size_t)i * bs;
            if (q4) pack_q4_K((const vq_block_q4_K *const *)src, grp + (size_t)i * X16_Q4_K_SB);
            else pack_q6_K((const vq_block_q6_K *const *)src, grp + (size_t)i * X16_Q6_K_SB);
        }
    }
    free(tmp);
    return 0;
}

void vq_ggml_dequantize_row_x16(uint32_t type, const void *group, int r, float *y, int64_t n) {
    VQ_ASSERT((type == VQ_GGML_Q4_K || type == VQ_GGML_Q6_K) && r >= 0 && r < VQ_X16_ROWS);
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        if (type == VQ_GGML_Q4_K) {
            vq_block_q4_K b;
            unpack_q4_K((const uint8_t *)group + (size_t)i * X16_Q4_K_SB, r, &b);
            vq_dequantize_row_q4_K_ref(&b, y + i * VQ_QK_K, VQ_QK_K);
        } else {
            vq_block_q6_K b;
            unpack_q6_K((const uint8_t *)group + (size_t)i * X16_Q6_K_SB, r, &b);
            vq_dequantize_row_q6_K_ref(&b, y + i * VQ_QK_K, VQ_QK_K);
        }
    }
}

enum { MAX_NB = VQ_X16_MAX_COLS / VQ_QK_K };

void vq_vec_dot_x16_q4_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                                  int n_tok, int gemm, float *out, size_t ld_out) {
    const int64_t nb = n / VQ_QK_K;
    VQ_ASSERT(nb <= MAX_NB && n_tok >= 1 && n_tok <= 8 && (!gemm || n_tok % 4 == 0));
    static _Thread_local vq_block_q4_K row[MAX_NB];
    const uint8_t *act = a;
    for (int r = 0; r < VQ_X16_ROWS; r++) {
        for (int64_t i = 0; i < nb; i++)
            unpack_q4_K((const uint8_t *)w + (size_t)i * X16_Q4_K_SB, r, &row[i]);
        for (int t = 0; t < n_tok; t += gemm ? 4 : 1) {
            if (gemm) {
                float o4[4];
                vq_vec_dot4_q4_K_q8_K_ref(n, row, act + (size_t)t * a_stride, a_stride, o4);
                for (int q = 0; q < 4; q++) out[(size_t)(t + q) * ld_out + (size_t)r] = o4[q];
            } else
                out[(size_t)t * ld_out + (size_t)r] = vq_vec_dot_q4_K_q8_K_ref(
                    n, row, act + (size_t)t * a_stride);
        }
    }
}

void vq_vec_dot_x16_q6_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                                  int n_tok, int gemm, float *out, size_t ld_out) {
    const int64_t nb = n / VQ_QK_K;
    VQ_ASSERT(nb <= MAX_NB && n_tok >= 1 && n_tok <= 8);
    (void)gemm; /* one order (vec_dot's) for every token */
    static _Thread_local vq_block_q6_K row[MAX_NB];
    const uint8_t *act = a;
    for (int r = 0; r < VQ_X16_ROWS; r++) {
        for (int64_t i = 0; i < nb; i++)
            unpack_q6_K((const uint8_t *)w + (size_t)i * X16_Q6_K_SB, r, &row[i]);
        for (int t = 0; t < n_tok; t++)
            out[(size_t)t * ld_out + (size_t)r] = vq_vec_dot_q6_K_q8_K_ref(
                n, row, act + (size_t)t * a_stride);
    }
}
