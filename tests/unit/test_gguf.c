/* test_gguf.c — GGUF reader: valid in-memory images, every truncation, corrupted fields. */
#include "test.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ggml.h"
#include "engine/gguf.h"

/* ---- a tiny GGUF writer ---- */
struct wb {
    uint8_t p[8192];
    size_t n;
};
static void put(struct wb *b, const void *v, size_t n) {
    if (b->n + n > sizeof b->p) {
        fprintf(stderr, "wb overflow\n");
        exit(2);
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
}
static void put_u32(struct wb *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(struct wb *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_f32(struct wb *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void put_str(struct wb *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void pad(struct wb *b, size_t a) {
    while (b->n % a) {
        uint8_t z = 0;
        put(b, &z, 1);
    }
}

/* Offsets of interesting fields in the image built by build_valid(). */
struct layout {
    size_t n_tensors_at, n_kv_at, strlen_at, arrcount_at, align_val_at, t_ndims_at, t_ne0_at,
        t_type_at, t_off_at, t2_type_at, t2_off_at, data_at;
};

/* Builds a valid v3 file: 7 kvs, 3 tensors (F32 4x2, Q8_0 32, F16 3), last tensor ends at EOF. */
static void build_valid(struct wb *b, struct layout *L, uint32_t version) {
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    put_u32(b, version);
    L->n_tensors_at = b->n;
    put_u64(b, 3);
    L->n_kv_at = b->n;
    put_u64(b, 7);
    put_str(b, "general.architecture");
    put_u32(b, VQ_GGUF_STRING);
    L->strlen_at = b->n;
    put_str(b, "llama");
    put_str(b, "general.alignment");
    put_u32(b, VQ_GGUF_U32);
    L->align_val_at = b->n;
    put_u32(b, 64);
    put_str(b, "llama.block_count");
    put_u32(b, VQ_GGUF_I32);
    put_u32(b, 30);
    put_str(b, "llama.rope.freq_base");
    put_u32(b, VQ_GGUF_F32);
    put_f32(b, 10000.0f);
    put_str(b, "tokenizer.ggml.tokens");
    put_u32(b, VQ_GGUF_ARRAY);
    put_u32(b, VQ_GGUF_STRING);
    L->arrcount_at = b->n;
    put_u64(b, 3);
    put_str(b, "a");
    put_str(b, "bc");
    put_str(b, "");
    put_str(b, "tokenizer.ggml.scores");
    put_u32(b, VQ_GGUF_ARRAY);
    put_u32(b, VQ_GGUF_F32);
    put_u64(b, 2);
    put_f32(b, -1.5f);
    put_f32(b, 2.0f);
    put_str(b, "tokenizer.ggml.token_type");
    put_u32(b, VQ_GGUF_ARRAY);
    put_u32(b, VQ_GGUF_I32);
    put_u64(b, 2);
    put_u32(b, 1);
    put_u32(b, (uint32_t)-3);
    /* tensors */
    put_str(b, "w.f32");
    L->t_ndims_at = b->n;
    put_u32(b, 2);
    L->t_ne0_at = b->n;
    put_u64(b, 4);
    put_u64(b, 2);
    L->t_type_at = b->n;
    put_u32(b, VQ_GGML_F32);
    L->t_off_at = b->n;
    put_u64(b, 0);
    put_str(b, "w.q8");
    put_u32(b, 1);
    put_u64(b, 32);
    L->t2_type_at = b->n;
    put_u32(b, VQ_GGML_Q8_0);
    L->t2_off_at = b->n;
    put_u64(b, 64);
    put_str(b, "w.f16");
    put_u32(b, 1);
    put_u64(b, 3);
    put_u32(b, VQ_GGML_F16);
    put_u64(b, 128);
    pad(b, 64);
    L->data_at = b->n;
    for (int i = 0; i < 8; i++) put_f32(b, (float)i + 0.5f); /* 32 bytes */
    while (b->n < L->data_at + 64) {
        uint8_t z = 0;
        put(b, &z, 1);
    }
    uint16_t d = 0x3c00;
    put(b, &d, 2); /* Q8_0: d = 1.0 */
    for (int i = 0; i < 32; i++) {
        int8_t q = (int8_t)(i - 16);
        put(b, &q, 1);
    }
    while (b->n < L->data_at + 128) {
        uint8_t z = 0;
        put(b, &z, 1);
    }
    uint16_t h[3] = {0x3c00, 0x4000, 0xc000};
    put(b, h, 6); /* 1, 2, -2 */
}

static void set_u32(struct wb *b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) b->p[at + i] = (uint8_t)(v >> (8 * i));
}
static void set_u64(struct wb *b, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++) b->p[at + i] = (uint8_t)(v >> (8 * i));
}

static vq_status open_status(const struct wb *b, size_t n) {
    vq_status st = 12345;
    vq_gguf *g = vq_gguf_open_mem(b->p, n, &st);
    if (g) {
        vq_gguf_close(g);
        ASSERT_STATUS(st, VQ_STATUS_OK);
        return VQ_STATUS_OK;
    }
    ASSERT(st != VQ_STATUS_OK && st != 12345);
    ASSERT(vq_gguf_last_error()[0] != 0);
    return st;
}

TEST(valid_file) {
    for (uint32_t ver = 2; ver <= 3; ver++) {
        struct wb b;
        struct layout L;
        build_valid(&b, &L, ver);
        vq_status st;
        vq_gguf *g = vq_gguf_open_mem(b.p, b.n, &st);
        ASSERT(g != NULL);
        if (!g) {
            fprintf(stderr, "%s\n", vq_gguf_last_error());
            return;
        }
        ASSERT_STATUS(st, VQ_STATUS_OK);
        ASSERT_EQ_INT(vq_gguf_version(g), ver);
        ASSERT_EQ_INT(vq_gguf_n_kv(g), 7);
        ASSERT_EQ_INT(vq_gguf_n_tensors(g), 3);
        struct vq_gguf_str s;
        ASSERT_STATUS(vq_gguf_get_str(g, "general.architecture", &s), VQ_STATUS_OK);
        ASSERT(s.len == 5 && !memcmp(s.ptr, "llama", 5));
        uint32_t u;
        ASSERT_STATUS(vq_gguf_get_u32(g, "general.alignment", &u), VQ_STATUS_OK);
        ASSERT_EQ_INT(u, 64);
        ASSERT_STATUS(vq_gguf_get_u32(g, "llama.block_count", &u), VQ_STATUS_OK); /* i32 -> u32 */
        ASSERT_EQ_INT(u, 30);
        ASSERT_STATUS(vq_gguf_get_u32(g, "nope", &u), VQ_STATUS_NOT_FOUND);
        ASSERT_STATUS(vq_gguf_get_u32(g, "general.architecture", &u), VQ_STATUS_BAD_FORMAT);
        float f;
        ASSERT_STATUS(vq_gguf_get_f32(g, "llama.rope.freq_base", &f), VQ_STATUS_OK);
        ASSERT_NEAR(f, 10000.0, 0);
        ASSERT_STATUS(vq_gguf_get_str(g, "llama.block_count", &s), VQ_STATUS_BAD_FORMAT);
        const struct vq_gguf_kv *tok = vq_gguf_find(g, "tokenizer.ggml.tokens");
        ASSERT(tok && tok->type == VQ_GGUF_ARRAY && tok->arr_type == VQ_GGUF_STRING &&
               tok->arr_count == 3);
        ASSERT_STATUS(vq_gguf_arr_str(g, tok, 1, &s), VQ_STATUS_OK);
        ASSERT(s.len == 2 && !memcmp(s.ptr, "bc", 2));
        ASSERT_STATUS(vq_gguf_arr_str(g, tok, 2, &s), VQ_STATUS_OK);
        ASSERT_EQ_INT(s.len, 0);
        ASSERT_STATUS(vq_gguf_arr_str(g, tok, 3, &s), VQ_STATUS_RANGE);
        ASSERT_STATUS(vq_gguf_arr_f32(g, tok, 0, &f), VQ_STATUS_BAD_FORMAT);
        const struct vq_gguf_kv *sc = vq_gguf_find(g, "tokenizer.ggml.scores");
        ASSERT_STATUS(vq_gguf_arr_f32(g, sc, 1, &f), VQ_STATUS_OK);
        ASSERT_NEAR(f, 2.0, 0);
        ASSERT_STATUS(vq_gguf_arr_f32(g, sc, 2, &f), VQ_STATUS_RANGE);
        int32_t i32;
        const struct vq_gguf_kv *tt = vq_gguf_find(g, "tokenizer.ggml.token_type");
        ASSERT_STATUS(vq_gguf_arr_i32(g, tt, 1, &i32), VQ_STATUS_OK);
        ASSERT_EQ_INT(i32, -3);
        ASSERT_STATUS(vq_gguf_arr_str(g, tt, 0, &s), VQ_STATUS_BAD_FORMAT);
        ASSERT(vq_gguf_kv_at(g, 7) == NULL && vq_gguf_kv_at(g, -1) == NULL &&
               vq_gguf_kv_at(g, 0) != NULL);

        const struct vq_gguf_tensor *t = vq_gguf_tensor_find(g, "w.f32");
        ASSERT(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 2 && t->ne[2] == 1 &&
               t->nbytes == 32);
        ASSERT(t && (const uint8_t *)t->data == b.p + L.data_at);
        float v;
        memcpy(&v, (const uint8_t *)t->data + 12, 4);
        ASSERT_NEAR(v, 3.5, 0);
        t = vq_gguf_tensor_find(g, "w.q8");
        ASSERT(t && t->type == VQ_GGML_Q8_0 && t->nbytes == 34);
        t = vq_gguf_tensor_find(g, "w.f16");
        ASSERT(t && t->nbytes == 6 && (const uint8_t *)t->data + 6 == b.p + b.n);
        ASSERT(vq_gguf_tensor_find(g, "w") == NULL);
        ASSERT(vq_gguf_tensor_at(g, 3) == NULL);
        ASSERT(!strcmp(vq_ggml_type_name(VQ_GGML_Q4_K), "Q4_K"));
        ASSERT(!strcmp(vq_ggml_type_name(4), "unknown"));
        vq_gguf_close(g);
    }
    vq_gguf_close(NULL);
}

TEST(every_truncation_fails) {
    struct wb b;
    struct layout L;
    build_valid(&b, &L, 3);
    for (size_t n = 0; n < b.n; n++) {
        vq_status st = open_status(&b, n);
        if (st == VQ_STATUS_OK) {
            fprintf(stderr, "prefix %zu of %zu opened\n", n, b.n);
            ASSERT(0);
            break;
        }
    }
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_OK);
}

TEST(corrupted_fields) {
    struct wb b;
    struct layout L;
#define CASE(stmt, want) \
    do { \
        build_valid(&b, &L, 3); \
        stmt; \
        ASSERT_STATUS(open_status(&b, b.n), want); \
    } while (0)
    CASE(b.p[0] = 'X', VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, 4, 1), VQ_STATUS_UNSUPPORTED);
    CASE(set_u32(&b, 4, 0x03000000u), VQ_STATUS_UNSUPPORTED); /* big-endian */
    CASE(set_u32(&b, 4, 4), VQ_STATUS_UNSUPPORTED);
    CASE(set_u64(&b, L.n_tensors_at, UINT64_MAX), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.n_tensors_at, 1ull << 40), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.n_tensors_at, 4), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.n_kv_at, UINT64_MAX), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.n_kv_at, 8), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.strlen_at, UINT64_MAX), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.strlen_at, 1ull << 63), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.arrcount_at, UINT64_MAX), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.arrcount_at, UINT64_MAX / 8 + 1), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.arrcount_at, 1000), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.align_val_at, 0), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.align_val_at, 48), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.align_val_at, 1u << 31), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.t_ndims_at, 5), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.t_ndims_at, 0), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.t_ne0_at, 0), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.t_ne0_at, UINT64_MAX), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.t_ne0_at, 1ull << 39), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.t_ne0_at, 1000), VQ_STATUS_BAD_FORMAT); /* data beyond EOF */
    CASE(set_u64(&b, L.t_off_at, 32), VQ_STATUS_BAD_FORMAT);   /* misaligned (64) */
    CASE(set_u64(&b, L.t_off_at, 1ull << 62), VQ_STATUS_BAD_FORMAT);
    CASE(set_u64(&b, L.t2_off_at, UINT64_MAX - 63), VQ_STATUS_BAD_FORMAT);
    CASE(set_u32(&b, L.t2_type_at, 4), VQ_STATUS_UNSUPPORTED);  /* removed id */
    CASE(set_u32(&b, L.t2_type_at, 16), VQ_STATUS_UNSUPPORTED); /* IQ2_XXS */
    CASE(set_u32(&b, L.t2_type_at, 0xFFFFFFFFu), VQ_STATUS_UNSUPPORTED);
    CASE(set_u32(&b, L.t2_type_at, VQ_GGML_Q4_K), VQ_STATUS_BAD_FORMAT); /* 32 % 256 != 0 */
    CASE(b.n -= 1, VQ_STATUS_BAD_FORMAT);
#undef CASE
    /* unknown type id is named in the error text */
    build_valid(&b, &L, 3);
    set_u32(&b, L.t2_type_at, 23);
    vq_status st;
    ASSERT(vq_gguf_open_mem(b.p, b.n, &st) == NULL);
    ASSERT(strstr(vq_gguf_last_error(), "23") != NULL);
    ASSERT(strstr(vq_gguf_last_error(), "IQ4_XS") != NULL);
}

TEST(structural_errors) {
    struct wb b;
    vq_status st;
    /* duplicate key */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 2);
    put_str(&b, "k");
    put_u32(&b, VQ_GGUF_U8);
    put(&b, "\1", 1);
    put_str(&b, "k");
    put_u32(&b, VQ_GGUF_U8);
    put(&b, "\2", 1);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_BAD_FORMAT);
    /* nested array */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "k");
    put_u32(&b, VQ_GGUF_ARRAY);
    put_u32(&b, VQ_GGUF_ARRAY);
    put_u64(&b, 0);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_UNSUPPORTED);
    /* unknown value type */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "k");
    put_u32(&b, 13);
    put_u32(&b, 0);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_BAD_FORMAT);
    /* empty key */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "");
    put_u32(&b, VQ_GGUF_U8);
    put(&b, "\1", 1);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_BAD_FORMAT);
    /* duplicate tensor names; alignment not u32 */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 2);
    put_u64(&b, 0);
    for (int i = 0; i < 2; i++) {
        put_str(&b, "t");
        put_u32(&b, 1);
        put_u64(&b, 1);
        put_u32(&b, VQ_GGML_F32);
        put_u64(&b, 32u * (unsigned)i);
    }
    pad(&b, 32);
    for (int i = 0; i < 36; i++) put(&b, "\0", 1);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_BAD_FORMAT);
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, VQ_GGUF_U64);
    put_u64(&b, 32);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_BAD_FORMAT);
    /* empty file with no tensors and no kvs is valid */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 0);
    ASSERT_STATUS(open_status(&b, b.n), VQ_STATUS_OK);
    ASSERT(vq_gguf_open_mem(NULL, 5, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(vq_gguf_open("/nonexistent/x.gguf", &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_IO);
    ASSERT(vq_gguf_open("/", &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_IO);
}

/* Opens b in memory and checks its values: the status of the first step that fails. */
static vq_status open_check(const uint8_t *p, size_t n) {
    vq_status st;
    vq_gguf *g = vq_gguf_open_mem(p, n, &st);
    if (g) st = vq_gguf_check_values(g);
    vq_gguf_close(g);
    return st;
}

/* Opens b (and checks its values) and expects BAD_FORMAT with msg in the error text. */
static void expect_bad(const struct wb *b, const char *msg) {
    vq_status st = open_check(b->p, b->n);
    ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
    if (!strstr(vq_gguf_last_error(), msg))
        fprintf(stderr, "want '%s' in: %s\n", msg, vq_gguf_last_error());
    ASSERT(strstr(vq_gguf_last_error(), msg) != NULL);
}

/* Tensor data must tile the data section in offset order: padding up to the alignment is
 * fine, overlaps and larger gaps (a wrong size from a relabelled type or shape) are not. */
TEST(tensor_layout) {
    struct wb b;
    struct layout L;
    vq_status st;
    /* the valid image pads the 32-byte F32 tensor to 64; tensor infos out of offset order
     * are fine as long as the data tiles (Q8_0 first, then the F32 tensor) */
    build_valid(&b, &L, 3);
    set_u64(&b, L.t_off_at, 64);
    set_u64(&b, L.t2_off_at, 0);
    vq_gguf *g = vq_gguf_open_mem(b.p, b.n, &st);
    ASSERT(g != NULL);
    if (!g) fprintf(stderr, "%s\n", vq_gguf_last_error());
    vq_gguf_close(g);
    build_valid(&b, &L, 3);
    set_u64(&b, L.t2_off_at, 0); /* w.q8 on top of w.f32 */
    expect_bad(&b, "overlaps tensor 'w.q8' at 0");
    build_valid(&b, &L, 3);
    set_u32(&b, L.align_val_at, 32); /* w.f32 ends at 32, w.q8 starts at 64 */
    expect_bad(&b, "leaves a gap before tensor 'w.q8' at 64: the next tensor should start at 32");
    build_valid(&b, &L, 3);
    set_u32(&b, L.t2_type_at, VQ_GGML_Q4_0); /* 18 of 34 bytes: still inside the padding */
    g = vq_gguf_open_mem(b.p, b.n, &st);
    ASSERT(g != NULL); /* undetectable: both fit the 64-byte slot */
    vq_gguf_close(g);
    build_valid(&b, &L, 3);
    set_u64(&b, L.t_ne0_at, 12); /* 12x2 F32 = 96 bytes, over w.q8 at 64 */
    expect_bad(&b, "tensor 'w.f32' (F32, 96 bytes) at data offset 0 overlaps");
    /* the first tensor must start the data section */
    memset(&b, 0, sizeof b);
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 1);
    put_u64(&b, 0);
    put_str(&b, "t");
    put_u32(&b, 1);
    put_u64(&b, 8);
    put_u32(&b, VQ_GGML_F32);
    put_u64(&b, 32);
    pad(&b, 32);
    for (int i = 0; i < 64; i++) put(&b, "\0", 1);
    expect_bad(&b, "starts at data offset 32, not 0");
}

/* Block scales and plain float values must be finite (ggml validate_row_data). */
TEST(non_finite_values) {
    struct wb b;
    struct layout L;
    build_valid(&b, &L, 3);
    b.p[L.data_at + 64] = 0x00;
    b.p[L.data_at + 65] = 0x7c; /* Q8_0 d = +Inf */
    expect_bad(&b, "tensor 'w.q8' (Q8_0) has a non-finite scale at block 0");
    build_valid(&b, &L, 3);
    float nan = NAN;
    memcpy(b.p + L.data_at + 20, &nan, 4); /* F32 element 5 */
    expect_bad(&b, "tensor 'w.f32' (F32) has a non-finite value at element 5");
    build_valid(&b, &L, 3);
    b.p[L.data_at + 128 + 4] = 0x01;
    b.p[L.data_at + 128 + 5] = 0xfc; /* F16 element 2 NaN */
    expect_bad(&b, "tensor 'w.f16' (F16) has a non-finite value at element 2");
    ASSERT_STATUS(vq_gguf_check_values(NULL), VQ_STATUS_INVALID_ARG);
}

/* Q4_0 data relabelled as Q4_K has the same size (144 bytes per 256 weights), so the layout
 * cannot tell; the Q4_K dmin of each super-block is then made of quant nibbles, Inf/NaN for
 * about one super-block in 32, so the scale check refuses a tensor of any real size. */
TEST(relabelled_type) {
    enum { NE0 = 256, NE1 = 512 };
    const size_t nbytes = (size_t)NE0 * NE1 / 32 * 18;
    static uint8_t img[80 * 1024];
    struct wb *b = malloc(sizeof *b);
    float *x = malloc(sizeof(float) * NE0);
    ASSERT(b && x && nbytes + 256 < sizeof img);
    if (!b || !x) {
        free(b);
        free(x);
        return;
    }
    for (int type = VQ_GGML_Q4_0; type <= VQ_GGML_Q4_K; type += VQ_GGML_Q4_K - VQ_GGML_Q4_0) {
        memset(b, 0, sizeof *b);
        put(b, "GGUF", 4);
        put_u32(b, 3);
        put_u64(b, 1);
        put_u64(b, 0);
        put_str(b, "w");
        put_u32(b, 2);
        put_u64(b, NE0);
        put_u64(b, NE1);
        put_u32(b, (uint32_t)type);
        put_u64(b, 0);
        pad(b, 32);
        memcpy(img, b->p, b->n);
        uint64_t s = 12345;
        for (int r = 0; r < NE1; r++) {
            for (int i = 0; i < NE0; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
            }
            vq_quantize_row_q4_0_ref(x, img + b->n + (size_t)r * NE0 / 32 * 18, NE0);
        }
        vq_status st;
        vq_gguf *g = vq_gguf_open_mem(img, b->n + nbytes, &st);
        ASSERT(g != NULL); /* same size: the layout is fine */
        if (type == VQ_GGML_Q4_0) {
            ASSERT_STATUS(vq_gguf_check_values(g), VQ_STATUS_OK); /* the true type */
        } else {
            ASSERT_STATUS(vq_gguf_check_values(g), VQ_STATUS_BAD_FORMAT);
            ASSERT(strstr(vq_gguf_last_error(), "(Q4_K) has a non-finite scale") != NULL);
        }
        vq_gguf_close(g);
    }
    free(b);
    free(x);
}

/* A FIFO (or any non-regular file) is refused at once; opening one for reading would
 * otherwise block until a writer appears. alarm() turns a hang into a failure. */
TEST(fifo_refused) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/vq_test_gguf_fifo.%ld", (long)getpid());
    unlink(path);
    ASSERT(mkfifo(path, 0600) == 0);
    alarm(20);
    vq_status st;
    ASSERT(vq_gguf_open(path, &st) == NULL);
    alarm(0);
    ASSERT_STATUS(st, VQ_STATUS_IO);
    ASSERT(strstr(vq_gguf_last_error(), "is not a regular file (a FIFO)") != NULL);
    unlink(path);
    ASSERT(vq_gguf_open("/", &st) == NULL);
    ASSERT(strstr(vq_gguf_last_error(), "(a directory)") != NULL);
}

/* Random byte mutations of the valid image: must never crash; accessors on a successfully
 * opened mutant stay in bounds (ASan checks that). */
TEST(random_mutations) {
    struct wb b0;
    struct layout L;
    build_valid(&b0, &L, 3);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int opened = 0;
    for (int it = 0; it < 20000; it++) {
        struct wb b = b0;
        int nmut = 1 + (int)(s % 4);
        for (int k = 0; k < nmut; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            size_t at = (size_t)(s % b.n);
            b.p[at] = (uint8_t)(s >> 32);
        }
        vq_status st;
        vq_gguf *g = vq_gguf_open_mem(b.p, b.n, &st);
        if (!g) {
            ASSERT(st != VQ_STATUS_OK);
            continue;
        }
        opened++;
        for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) {
            const struct vq_gguf_kv *kv = vq_gguf_kv_at(g, i);
            struct vq_gguf_str str;
            float f;
            int32_t x;
            for (uint64_t j = 0; j < kv->arr_count && j < 8; j++) {
                vq_gguf_arr_str(g, kv, j, &str);
                vq_gguf_arr_f32(g, kv, j, &f);
                vq_gguf_arr_i32(g, kv, j, &x);
            }
        }
        for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
            const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
            volatile uint8_t sink = 0;
            for (uint64_t j = 0; j < t->nbytes; j++) sink ^= ((const uint8_t *)t->data)[j];
            (void)sink;
        }
        vq_gguf_close(g);
    }
    ASSERT(opened > 0);
}

/* vq_gguf_open_read (the model loader's open: the bytes read into huge-page memory where the
 * OS has it) opens what vq_gguf_open opens, with the same tensors and bytes, and refuses the
 * same files with the same status. */
static void check_open_read(const char *path, const vq_gguf *mapped, vq_status st_mapped) {
    vq_status st;
    vq_gguf *g = vq_gguf_open_read(path, &st);
    ASSERT(!!g == !!mapped);
    if (!g || !mapped) {
        if (!g && !mapped) ASSERT_STATUS(st, st_mapped);
        vq_gguf_close(g);
        return;
    }
    ASSERT_EQ_INT(vq_gguf_n_tensors(g), vq_gguf_n_tensors(mapped));
    ASSERT_EQ_INT(vq_gguf_n_kv(g), vq_gguf_n_kv(mapped));
    int same = 1;
    for (int64_t i = 0; i < vq_gguf_n_tensors(g) && i < vq_gguf_n_tensors(mapped); i++) {
        const struct vq_gguf_tensor *a = vq_gguf_tensor_at(g, i), *b = vq_gguf_tensor_at(mapped, i);
        same &= a->nbytes == b->nbytes && a->data != b->data &&
                !memcmp(a->data, b->data, (size_t)a->nbytes);
    }
    ASSERT(same);
    vq_gguf_close(g);
}

/* The seed corpus means what its names say: valid_* open, bad_* and trunc_* fail. */
TEST(seed_corpus) {
    static const char *const names[] = {
        "valid_meta_v3", "valid_meta_v2",    "valid_empty",      "valid_all_types",
        "trunc_header",  "trunc_meta",       "trunc_data",       "bad_magic",
        "bad_version1",  "bad_bigendian",    "bad_tensor_count", "bad_kv_count",
        "bad_strlen",    "bad_unknown_type", "bad_offset",       "bad_misaligned",
        "bad_alignment", "bad_nested_array", "bad_dup_key",      "bad_ndims",
        "bad_row_block", "bad_overlap",      "bad_gap",          "bad_relabel_size",
        "bad_nan_scale", "bad_inf_value"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/fuzz/corpus/gguf/%s.gguf", VQ_SOURCE_DIR, names[i]);
        vq_status st;
        vq_gguf *g = vq_gguf_open(path, &st);
        check_open_read(path, g, st);
        if (g && (st = vq_gguf_check_values(g)) != VQ_STATUS_OK) {
            vq_gguf_close(g);
            g = NULL;
        }
        int want_ok = !strncmp(names[i], "valid", 5);
        if (!!g != want_ok)
            fprintf(stderr, "%s: %s\n", names[i], g ? "opened" : vq_gguf_last_error());
        ASSERT(!!g == want_ok);
        if (g && !strcmp(names[i], "valid_all_types")) ASSERT_EQ_INT(vq_gguf_n_tensors(g), 11);
        if (!g) ASSERT(st == VQ_STATUS_BAD_FORMAT || st == VQ_STATUS_UNSUPPORTED);
        vq_gguf_close(g);
    }
}

int main(void) {
    RUN(seed_corpus);
    RUN(valid_file);
    RUN(every_truncation_fails);
    RUN(corrupted_fields);
    RUN(structural_errors);
    RUN(tensor_layout);
    RUN(non_finite_values);
    RUN(relabelled_type);
    RUN(fifo_refused);
    RUN(random_mutations);
    return TEST_REPORT();
}
