/*
 * ggml.h — ggml weight block formats (ALGORITHMS.md §9): type traits, row dequantization
 * (scalar _ref, the normative spec) and dot-product kernels for matrix-vector / matrix-matrix
 * products that never dequantize a whole matrix. Not part of the public API.
 */
#ifndef VQ_GGML_H
#define VQ_GGML_H

#include <stddef.h>
#include <stdint.h>
#include "engine/gguf.h"

/* Storage traits of a ggml type. block_size elements take type_size bytes. */
struct vq_ggml_type_info {
    const char *name;
    int block_size;
    int type_size;
};

/* Traits of a ggml type id whose layout this reader knows, or NULL (unknown / removed ids). */
const struct vq_ggml_type_info *vq_ggml_type_info(uint32_t type);

#endif
