/*
 * gguf.h — GGUF v2/v3 reader over a read-only mmap (or a caller buffer, for fuzzing).
 * Every offset, length, count, string and type id is validated against the file size at open
 * time; accessors afterwards never read out of bounds. Not part of the public API.
 */
#ifndef VQ_GGUF_H
#define VQ_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

enum vq_gguf_type {
    VQ_GGUF_U8 = 0,
    VQ_GGUF_I8 = 1,
    VQ_GGUF_U16 = 2,
    VQ_GGUF_I16 = 3,
    VQ_GGUF_U32 = 4,
    VQ_GGUF_I32 = 5,
    VQ_GGUF_F32 = 6,
    VQ_GGUF_BOOL = 7,
    VQ_GGUF_STRING = 8,
    VQ_GGUF_ARRAY = 9,
    VQ_GGUF_U64 = 10,
    VQ_GGUF_I64 = 11,
    VQ_GGUF_F64 = 12,
    VQ_GGUF_TYPE_COUNT
};

/* ggml tensor type ids (subset we know; see docs/ALGORITHMS.md §9.3). */
enum vq_ggml_type {
    VQ_GGML_F32 = 0,
    VQ_GGML_F16 = 1,
    VQ_GGML_Q4_0 = 2,
    VQ_GGML_Q4_1 = 3,
    VQ_GGML_Q5_0 = 6,
    VQ_GGML_Q5_1 = 7,
    VQ_GGML_Q8_0 = 8,
    VQ_GGML_Q8_1 = 9,
    VQ_GGML_Q2_K = 10,
    VQ_GGML_Q3_K = 11,
    VQ_GGML_Q4_K = 12,
    VQ_GGML_Q5_K = 13,
    VQ_GGML_Q6_K = 14,
    VQ_GGML_Q8_K = 15,
    VQ_GGML_BF16 = 30
};

struct vq_gguf_str {
    const char *ptr;
    uint64_t len;
}; /* not NUL-terminated; borrowed */

struct vq_gguf_kv {
    struct vq_gguf_str key;
    enum vq_gguf_type type;
    enum vq_gguf_type arr_type; /* for arrays */
    uint64_t arr_count;         /* for arrays */
    const uint8_t *data;        /* raw little-endian value bytes (array: first element) */
};

struct vq_gguf_tensor {
    struct vq_gguf_str name;
    uint32_t n_dims;
    uint64_t ne[4];  /* ne[0] innermost; unused dims = 1 */
    uint32_t type;   /* enum vq_ggml_type */
    uint64_t offset; /* relative to data section */
    uint64_t nbytes;
    const void *data; /* pointer into the mapping */
};

typedef struct vq_gguf vq_gguf;

/* Opens and validates a GGUF file (mmap, read-only). Only regular files are opened (a FIFO
 * or device is refused without blocking). Besides every length and offset, the tensor layout
 * is checked: in offset order the tensors tile the data section (the first at 0, each next
 * one where the previous ends rounded up to general.alignment), so overlapping data and a
 * type or shape that does not match the room a tensor has are refused. Returns NULL and
 * *st = IO / BAD_FORMAT / UNSUPPORTED / NO_MEMORY, with a message retrievable by
 * vq_gguf_last_error(). */
vq_gguf *vq_gguf_open(const char *path, vq_status *st);
/* Same, but the file's bytes are read into private memory advised for transparent huge pages
 * (vq_map_huge, 2 MiB pages; read-only once filled) when the OS gives huge pages and the file
 * is at most half the physical memory; otherwise (or when that memory or the read fails) the
 * file is mapped as by vq_gguf_open. For the model loader: weights read in full every decode
 * step then miss the TLB once per 2 MiB instead of once per 4 KiB. */
vq_gguf *vq_gguf_open_read(const char *path, vq_status *st);
/* Opens (on = 1) or closes (0) the tensor data of a vq_gguf_open_read copy for writing, so
 * that the model loader can rewrite weights in place (vq_ggml_repack_x16). Returns 0, or -1
 * when g's bytes are a file mapping or a caller buffer (never writable) or the protection
 * cannot be changed. Not thread-safe against readers of g while open. */
int vq_gguf_set_writable(vq_gguf *g, int on);
/* Same over a caller buffer that must outlive the handle (fuzzing, tests). */
vq_gguf *vq_gguf_open_mem(const void *buf, size_t len, vq_status *st);
void vq_gguf_close(vq_gguf *g);
/* Checks the tensor data as ggml's validate_row_data: every block scale of the quantized
 * types and every value of F16 / BF16 / F32 / F64 tensors must be finite. Reads the whole
 * data section (one pass; the model loader calls it, metadata readers need not). Returns OK,
 * or BAD_FORMAT naming the tensor and block in vq_gguf_last_error(); INVALID_ARG for NULL.
 * Thread-safe (read-only). */
vq_status vq_gguf_check_values(const vq_gguf *g);
/* Thread-local description of the last open failure (static storage). */
const char *vq_gguf_last_error(void);

uint32_t vq_gguf_version(const vq_gguf *g);
int64_t vq_gguf_n_kv(const vq_gguf *g);
const struct vq_gguf_kv *vq_gguf_kv_at(const vq_gguf *g, int64_t i);
const struct vq_gguf_kv *vq_gguf_find(const vq_gguf *g, const char *key); /* NULL if absent */
/* Typed getters: return NOT_FOUND if absent, BAD_FORMAT on type mismatch (integer types are
 * converted when the value fits). */
vq_status vq_gguf_get_u32(const vq_gguf *g, const char *key, uint32_t *out);
vq_status vq_gguf_get_f32(const vq_gguf *g, const char *key, float *out);
vq_status vq_gguf_get_str(const vq_gguf *g, const char *key, struct vq_gguf_str *out);
/* Array element access (bounds-checked; string elements are walked once and indexed). */
vq_status vq_gguf_arr_str(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i,
                          struct vq_gguf_str *out);
vq_status vq_gguf_arr_f32(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i, float *out);
vq_status vq_gguf_arr_i32(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i, int32_t *out);

int64_t vq_gguf_n_tensors(const vq_gguf *g);
const struct vq_gguf_tensor *vq_gguf_tensor_at(const vq_gguf *g, int64_t i);
const struct vq_gguf_tensor *vq_gguf_tensor_find(const vq_gguf *g, const char *name);
const char *vq_ggml_type_name(uint32_t type); /* "Q4_K", or "unknown" */

/* The GGUF handle of a loaded model (its tokenizer, chat template and metadata): borrowed,
 * valid until vq_model_free. Defined in model.c; declared here so that a reader of model
 * metadata needs no model internals. */
struct vq_model;
const vq_gguf *vq_model_gguf(const struct vq_model *m);

#endif
