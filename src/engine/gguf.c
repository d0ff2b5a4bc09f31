/*
 * gguf.c — GGUF v2/v3 reader (see gguf.h for the contract).
 *
 * The whole file is parsed and validated at open time: every length, count, offset and type id
 * is checked against the bytes that remain, so that every accessor afterwards is a plain,
 * bounds-safe lookup. Arrays of strings get an offset index built once at open time.
 * Nested arrays are rejected (UNSUPPORTED); so are big-endian files and GGUF v1.
 */
#include "engine/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "engine/ggml.h"

#define VQ_GGUF_MAGIC 0x46554747u /* "GGUF" as little-endian uint32 */
#define VQ_GGUF_DEFAULT_ALIGNMENT 32u
#define VQ_GGUF_MAX_NAME 64u /* tensor name bytes (ggml GGML_MAX_NAME) */
#define VQ_GGUF_MAX_ALIGNMENT (1u << 20)

struct vq_gguf {
    const uint8_t *base; /* (size) file bytes */
    size_t size;
    void *map; /* the file's mapping or read_huge copy, or NULL (caller buffer) */
    size_t map_len;
    int copy; /* 1: map is a read_huge copy (vq_gguf_set_writable may open it) */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_off; /* start of the tensor data section */
    int64_t n_kv;
    struct vq_gguf_kv *kv; /* (n_kv) */
    uint64_t **str_idx;    /* (n_kv) string-array element offsets (from base) or NULL */
    int64_t n_tensors;
    struct vq_gguf_tensor *tensors; /* (n_tensors) */
};

static _Thread_local char g_err[256];

static void set_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

/* Reports the last open failure of this thread. */
const char *vq_gguf_last_error(void) { return g_err; }

static uint16_t rd_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd_le64(const uint8_t *p) {
    return (uint64_t)rd_le32(p) | ((uint64_t)rd_le32(p + 4) << 32);
}

/* ---- cursor ---------------------------------------------------------------------------- */

struct cur {
    const uint8_t *base;
    size_t size, pos;
};

static size_t cur_left(const struct cur *c) { return c->size - c->pos; }

static int cur_u32(struct cur *c, uint32_t *v) {
    if (cur_left(c) < 4) return 0;
    *v = rd_le32(c->base + c->pos);
    c->pos += 4;
    return 1;
}
static int cur_u64(struct cur *c, uint64_t *v) {
    if (cur_left(c) < 8) return 0;
    *v = rd_le64(c->base + c->pos);
    c->pos += 8;
    return 1;
}
static int cur_str(struct cur *c, struct vq_gguf_str *s) {
    uint64_t len;
    if (!cur_u64(c, &len)) return 0;
    if (len > cur_left(c)) return 0;
    s->ptr = (const char *)(c->base + c->pos);
    s->len = len;
    c->pos += (size_t)len;
    return 1;
}

static size_t scalar_size(uint32_t t) {
    switch (t) {
    case VQ_GGUF_U8:
    case VQ_GGUF_I8:
    case VQ_GGUF_BOOL: return 1;
    case VQ_GGUF_U16:
    case VQ_GGUF_I16: return 2;
    case VQ_GGUF_U32:
    case VQ_GGUF_I32:
    case VQ_GGUF_F32: return 4;
    case VQ_GGUF_U64:
    case VQ_GGUF_I64:
    case VQ_GGUF_F64: return 8;
    default: return 0;
    }
}

/* ---- open ------------------------------------------------------------------------------ */

void vq_gguf_close(vq_gguf *g) {
    if (!g) return;
    if (g->str_idx) {
        for (int64_t i = 0; i < g->n_kv; i++) free(g->str_idx[i]);
        free(g->str_idx);
    }
    free(g->kv);
    free(g->tensors);
    if (g->map) munmap(g->map, g->map_len);
    free(g);
}

static int str_eq(struct vq_gguf_str s, const char *z) {
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

static int str_cmp(struct vq_gguf_str a, struct vq_gguf_str b) {
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int r = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (r) return r;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return str_cmp(**(const struct vq_gguf_str *const *)a, **(const struct vq_gguf_str *const *)b);
}

/* Returns 1 if two entries share a name (n log n via sorting pointers), 0 if all distinct,
 * -1 on allocation failure. stride: bytes between names. */
static int has_duplicates(const void *first, int64_t n, size_t stride, struct vq_gguf_str *dup) {
    if (n < 2) return 0;
    const struct vq_gguf_str **v = malloc((size_t)n * sizeof *v);
    if (!v) return -1;
    for (int64_t i = 0; i < n; i++)
        v[i] = (const struct vq_gguf_str *)((const uint8_t *)first + (size_t)i * stride);
    qsort(v, (size_t)n, sizeof *v, cmp_str_ptr);
    int found = 0;
    for (int64_t i = 1; i < n && !found; i++)
        if (str_cmp(*v[i - 1], *v[i]) == 0) {
            found = 1;
            *dup = *v[i];
        }
    free(v);
    return found;
}

static vq_status parse_kv(vq_gguf *g, struct cur *c, int64_t i) {
    struct vq_gguf_kv *kv = &g->kv[i];
    uint32_t t;
    if (!cur_str(c, &kv->key)) {
        set_err("gguf: metadata key %lld truncated", (long long)i);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (kv->key.len == 0) {
        set_err("gguf: metadata key %lld is empty", (long long)i);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (!cur_u32(c, &t)) {
        set_err("gguf: metadata %lld type truncated", (long long)i);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (t >= VQ_GGUF_TYPE_COUNT) {
        set_err("gguf: metadata '%.*s' has unknown value type %u", (int)kv->key.len, kv->key.ptr,
                t);
        return VQ_STATUS_BAD_FORMAT;
    }
    kv->type = (enum vq_gguf_type)t;
    kv->arr_type = VQ_GGUF_U8;
    kv->arr_count = 0;
    if (t == VQ_GGUF_STRING) {
        struct vq_gguf_str s;
        kv->data = c->base + c->pos;
        if (!cur_str(c, &s)) goto trunc;
        return VQ_STATUS_OK;
    }
    if (t != VQ_GGUF_ARRAY) {
        size_t sz = scalar_size(t);
        if (cur_left(c) < sz) goto trunc;
        kv->data = c->base + c->pos;
        c->pos += sz;
        return VQ_STATUS_OK;
    }
    uint32_t et;
    uint64_t n;
    if (!cur_u32(c, &et) || !cur_u64(c, &n)) goto trunc;
    if (et >= VQ_GGUF_TYPE_COUNT) {
        set_err("gguf: array '%.*s' has unknown element type %u", (int)kv->key.len, kv->key.ptr,
                et);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (et == VQ_GGUF_ARRAY) {
        set_err("gguf: nested array '%.*s' not supported", (int)kv->key.len, kv->key.ptr);
        return VQ_STATUS_UNSUPPORTED;
    }
    kv->arr_type = (enum vq_gguf_type)et;
    kv->arr_count = n;
    kv->data = c->base + c->pos;
    if (et == VQ_GGUF_STRING) {
        /* each element needs at least its 8-byte length */
        if (n > cur_left(c) / 8) goto trunc;
        uint64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
        if (!idx) {
            set_err("gguf: out of memory");
            return VQ_STATUS_NO_MEMORY;
        }
        g->str_idx[i] = idx;
        for (uint64_t j = 0; j < n; j++) {
            struct vq_gguf_str s;
            idx[j] = c->pos;
            if (!cur_str(c, &s)) goto trunc;
        }
        return VQ_STATUS_OK;
    }
    size_t es = scalar_size(et);
    if (n > cur_left(c) / es) goto trunc;
    c->pos += (size_t)(n * es);
    return VQ_STATUS_OK;
trunc:
    set_err("gguf: metadata '%.*s' truncated or length exceeds file (offset %zu of %zu)",
            (int)kv->key.len, kv->key.ptr, c->pos, c->size);
    return VQ_STATUS_BAD_FORMAT;
}

static vq_status parse_tensor(vq_gguf *g, struct cur *c, int64_t i) {
    struct vq_gguf_tensor *t = &g->tensors[i];
    if (!cur_str(c, &t->name)) {
        set_err("gguf: tensor %lld name truncated", (long long)i);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (t->name.len == 0 || t->name.len > VQ_GGUF_MAX_NAME) {
        set_err("gguf: tensor %lld name length %llu invalid (1..%u)", (long long)i,
                (unsigned long long)t->name.len, VQ_GGUF_MAX_NAME);
        return VQ_STATUS_BAD_FORMAT;
    }
    int nl = (int)t->name.len;
    if (!cur_u32(c, &t->n_dims)) goto trunc;
    if (t->n_dims < 1 || t->n_dims > 4) {
        set_err("gguf: tensor '%.*s' has %u dims (1..4)", nl, t->name.ptr, t->n_dims);
        return VQ_STATUS_BAD_FORMAT;
    }
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (!cur_u64(c, &t->ne[d])) goto trunc;
        if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 40)) {
            set_err("gguf: tensor '%.*s' dim %u = %llu out of range", nl, t->name.ptr, d,
                    (unsigned long long)t->ne[d]);
            return VQ_STATUS_BAD_FORMAT;
        }
    }
    if (!cur_u32(c, &t->type) || !cur_u64(c, &t->offset)) goto trunc;
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type);
    if (!ti) {
        set_err("gguf: tensor '%.*s' has unsupported ggml type %u (%s)", nl, t->name.ptr, t->type,
                vq_ggml_type_name(t->type));
        return VQ_STATUS_UNSUPPORTED;
    }
    if (t->ne[0] % (uint64_t)ti->block_size) {
        set_err("gguf: tensor '%.*s' row length %llu is not a multiple of the %s block size %d", nl,
                t->name.ptr, (unsigned long long)t->ne[0], ti->name, ti->block_size);
        return VQ_STATUS_BAD_FORMAT;
    }
    /* nbytes = ne1*ne2*ne3 * (ne0/bs) * type_size, with overflow checks against the file size */
    uint64_t rows = 1;
    for (int d = 1; d < 4; d++) {
        if (t->ne[d] > UINT64_MAX / rows) goto big;
        rows *= t->ne[d];
    }
    uint64_t row_bytes = t->ne[0] / (uint64_t)ti->block_size * (uint64_t)ti->type_size;
    if (rows > UINT64_MAX / row_bytes) goto big;
    t->nbytes = rows * row_bytes;
    if (t->nbytes > c->size) goto big;
    if (t->offset % g->alignment) {
        set_err("gguf: tensor '%.*s' offset %llu not a multiple of alignment %u", nl, t->name.ptr,
                (unsigned long long)t->offset, g->alignment);
        return VQ_STATUS_BAD_FORMAT;
    }
    return VQ_STATUS_OK;
big:
    set_err("gguf: tensor '%.*s' size exceeds the file", nl, t->name.ptr);
    return VQ_STATUS_BAD_FORMAT;
trunc:
    set_err("gguf: tensor '%.*s' info truncated", nl, t->name.ptr);
    return VQ_STATUS_BAD_FORMAT;
}

/* ---- tensor data checks ----------------------------------------------------------------
 * What a file says about its tensors is checked against itself, as far as that is cheap and
 * sound:
 * - layout: taken in offset order, the tensors tile the data section: the first starts at 0
 *   and each next one starts exactly where the previous one ends, rounded up to the
 *   alignment (ggml's gguf reader demands the same, in tensor-info order). Overlapping data,
 *   and a type or shape that makes a tensor larger or smaller than the room it has (beyond
 *   alignment padding), are refused. Bytes after the last tensor are allowed.
 *   This is part of every open (it reads only the tensor infos).
 * - values (vq_gguf_check_values, called by the model loader, not by open: it reads the whole
 *   data section, 30-45 ms for the 97 MB default model, which `info` does not need): as ggml's
 *   validate_row_data, every fp16/fp32 block scale (Q4_0..Q8_K: d, and m / dmin / s where
 *   the type has them) and every element of F16, BF16, F32 and F64 tensors must be finite.
 *   This catches a relabelling between types of equal size that the layout cannot see
 *   (Q4_0 <-> Q4_K, Q5_0 <-> Q5_K read each other's quant bytes as scales, Inf/NaN for about
 *   one block in 32). It cannot catch F16 <-> BF16 or integer types, whose bytes are valid
 *   either way, nor relabels inside alignment padding of tiny tensors.
 */

static int cmp_tensor_off(const void *a, const void *b) {
    const struct vq_gguf_tensor *x = *(const struct vq_gguf_tensor *const *)a;
    const struct vq_gguf_tensor *y = *(const struct vq_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x < y ? -1 : x > y; /* ties in file order: deterministic messages */
}

static vq_status check_layout(vq_gguf *g) {
    if (g->n_tensors == 0) return VQ_STATUS_OK;
    const struct vq_gguf_tensor **v = malloc((size_t)g->n_tensors * sizeof *v);
    if (!v) {
        set_err("gguf: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) v[i] = &g->tensors[i];
    qsort(v, (size_t)g->n_tensors, sizeof *v, cmp_tensor_off);
    const uint64_t a = g->alignment;
    uint64_t want = 0; /* where the next tensor must start */
    const struct vq_gguf_tensor *prev = NULL;
    vq_status s = VQ_STATUS_OK;
    for (int64_t i = 0; i < g->n_tensors && s == VQ_STATUS_OK; i++) {
        const struct vq_gguf_tensor *t = v[i];
        if (t->offset != want) {
            s = VQ_STATUS_BAD_FORMAT;
            if (!prev)
                set_err(
                    "gguf: the first tensor's data ('%.*s') starts at data offset %llu, "
                    "not 0",
                    (int)t->name.len, t->name.ptr, (unsigned long long)t->offset);
            else
                set_err(
                    "gguf: tensor '%.*s' (%s, %llu bytes) at data offset %llu %s tensor "
                    "'%.*s' at %llu: the next tensor should start at %llu (overlapping "
                    "data, or a wrong type or shape)",
                    (int)prev->name.len, prev->name.ptr, vq_ggml_type_name(prev->type),
                    (unsigned long long)prev->nbytes, (unsigned long long)prev->offset,
                    t->offset < want ? "overlaps" : "leaves a gap before", (int)t->name.len,
                    t->name.ptr, (unsigned long long)t->offset, (unsigned long long)want);
        }
        /* offset + nbytes <= data section size (checked), so this cannot overflow */
        want = (t->offset + t->nbytes + a - 1) / a * a;
        prev = t;
    }
    free(v);
    return s;
}

/* Where a block type keeps its scales: n fp16 scales at byte offsets off[], or one f32. */
struct scale_pos {
    uint32_t type;
    int n;
    uint16_t off[2];
    int f32;
};
static const struct scale_pos g_scales[] = {
    {VQ_GGML_Q4_0, 1, {0, 0}, 0},   {VQ_GGML_Q4_1, 2, {0, 2}, 0},   {VQ_GGML_Q5_0, 1, {0, 0}, 0},
    {VQ_GGML_Q5_1, 2, {0, 2}, 0},   {VQ_GGML_Q8_0, 1, {0, 0}, 0},   {VQ_GGML_Q8_1, 2, {0, 2}, 0},
    {VQ_GGML_Q2_K, 2, {80, 82}, 0}, {VQ_GGML_Q3_K, 1, {108, 0}, 0}, {VQ_GGML_Q4_K, 2, {0, 2}, 0},
    {VQ_GGML_Q5_K, 2, {0, 2}, 0},   {VQ_GGML_Q6_K, 1, {208, 0}, 0}, {VQ_GGML_Q8_K, 1, {0, 0}, 1},
};

static int half_finite(const uint8_t *p) { return (rd_le16(p) & 0x7C00u) != 0x7C00u; }
static int bf16_finite(const uint8_t *p) { return (rd_le16(p) & 0x7F80u) != 0x7F80u; }
static int f32_finite(const uint8_t *p) { return (rd_le32(p) & 0x7F800000u) != 0x7F800000u; }
static int f64_finite(const uint8_t *p) {
    return (rd_le64(p) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull;
}

/* Index of the first element (plain types) or block (block types) of t holding a non-finite
 * value or scale, or -1. */
static int64_t first_non_finite(const struct vq_gguf_tensor *t) {
    const uint8_t *p = t->data;
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type);
    const uint64_t ts = (uint64_t)ti->type_size, n = t->nbytes / ts;
    int (*fin)(const uint8_t *) = NULL;
    switch (t->type) {
    case VQ_GGML_F16: fin = half_finite; break;
    case VQ_GGML_BF16: fin = bf16_finite; break;
    case VQ_GGML_F32: fin = f32_finite; break;
    case 28 /* F64 */: fin = f64_finite; break;
    default: break;
    }
    if (fin) {
        for (uint64_t i = 0; i < n; i++)
            if (!fin(p + i * ts)) return (int64_t)i;
        return -1;
    }
    for (size_t k = 0; k < sizeof g_scales / sizeof g_scales[0]; k++) {
        const struct scale_pos *sp = &g_scales[k];
        if (sp->type != t->type) continue;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *b = p + i * ts;
            const int ok = sp->f32 ? f32_finite(b)
                                   : half_finite(b + sp->off[0]) &&
                                         (sp->n == 1 || half_finite(b + sp->off[1]));
            if (!ok) return (int64_t)i;
        }
    }
    return -1; /* integer types: every bit pattern is a value */
}

static vq_status check_values(const struct vq_gguf_tensor *t) {
    const int64_t bad = first_non_finite(t);
    if (bad < 0) return VQ_STATUS_OK;
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type); /* known: parse_tensor */
    set_err(
        "gguf: tensor '%.*s' (%s) has a non-finite %s at %s %lld (corrupt data, or the "
        "wrong type)",
        (int)t->name.len, t->name.ptr, ti->name, ti->block_size > 1 ? "scale" : "value",
        ti->block_size > 1 ? "block" : "element", (long long)bad);
    return VQ_STATUS_BAD_FORMAT;
}

static vq_status parse(vq_gguf *g) {
    struct cur c = {g->base, g->size, 0};
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    if (!cur_u32(&c, &magic) || magic != VQ_GGUF_MAGIC) {
        set_err("gguf: bad magic (not a GGUF file)");
        return VQ_STATUS_BAD_FORMAT;
    }
    if (!cur_u32(&c, &version)) {
        set_err("gguf: header truncated");
        return VQ_STATUS_BAD_FORMAT;
    }
    if (version == 1) {
        set_err("gguf: version 1 not supported");
        return VQ_STATUS_UNSUPPORTED;
    }
    if (version != 2 && version != 3) {
        if ((version & 0xFFFFu) == 0 && (version >> 16) != 0)
            set_err("gguf: big-endian file (version bytes 0x%08x) not supported", version);
        else set_err("gguf: unsupported version %u", version);
        return VQ_STATUS_UNSUPPORTED;
    }
    g->version = version;
    if (!cur_u64(&c, &n_tensors) || !cur_u64(&c, &n_kv)) {
        set_err("gguf: header truncated");
        return VQ_STATUS_BAD_FORMAT;
    }
    /* every kv takes >= 8+1+4+1 bytes and every tensor info >= 8+1+4+8+4+8 bytes */
    if (n_kv > cur_left(&c) / 14) {
        set_err("gguf: metadata count %llu exceeds the file", (unsigned long long)n_kv);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (n_tensors > cur_left(&c) / 33) {
        set_err("gguf: tensor count %llu exceeds the file", (unsigned long long)n_tensors);
        return VQ_STATUS_BAD_FORMAT;
    }
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->str_idx = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->str_idx);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->str_idx || !g->tensors) {
        set_err("gguf: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }

    for (int64_t i = 0; i < g->n_kv; i++) VQ_RETURN_IF_ERR(parse_kv(g, &c, i));
    struct vq_gguf_str dup;
    int d = has_duplicates(&g->kv[0].key, g->n_kv, sizeof g->kv[0], &dup);
    if (d < 0) {
        set_err("gguf: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    if (d) {
        set_err("gguf: duplicate metadata key '%.*s'", (int)dup.len, dup.ptr);
        return VQ_STATUS_BAD_FORMAT;
    }

    g->alignment = VQ_GGUF_DEFAULT_ALIGNMENT;
    const struct vq_gguf_kv *al = vq_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != VQ_GGUF_U32) {
            set_err("gguf: general.alignment is not u32");
            return VQ_STATUS_BAD_FORMAT;
        }
        uint32_t a = rd_le32(al->data);
        if (a == 0 || (a & (a - 1)) || a > VQ_GGUF_MAX_ALIGNMENT) {
            set_err("gguf: general.alignment %u is not a power of two in 1..%u", a,
                    VQ_GGUF_MAX_ALIGNMENT);
            return VQ_STATUS_BAD_FORMAT;
        }
        g->alignment = a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++) VQ_RETURN_IF_ERR(parse_tensor(g, &c, i));
    d = has_duplicates(&g->tensors[0].name, g->n_tensors, sizeof g->tensors[0], &dup);
    if (d < 0) {
        set_err("gguf: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    if (d) {
        set_err("gguf: duplicate tensor name '%.*s'", (int)dup.len, dup.ptr);
        return VQ_STATUS_BAD_FORMAT;
    }

    uint64_t off = c.pos;
    off = (off + g->alignment - 1) / g->alignment * g->alignment;
    g->data_off = off;
    if (g->n_tensors == 0) return VQ_STATUS_OK;
    if (off > g->size) {
        set_err("gguf: data section starts beyond the end of the file");
        return VQ_STATUS_BAD_FORMAT;
    }
    uint64_t avail = g->size - off;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct vq_gguf_tensor *t = &g->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            set_err("gguf: tensor '%.*s' data [%llu, +%llu) exceeds the data section (%llu bytes)",
                    (int)t->name.len, t->name.ptr, (unsigned long long)t->offset,
                    (unsigned long long)t->nbytes, (unsigned long long)avail);
            return VQ_STATUS_BAD_FORMAT;
        }
        t->data = g->base + off + t->offset;
    }
    return check_layout(g);
}

static vq_gguf *open_common(vq_gguf *g, vq_status *st) {
    vq_status s = parse(g);
    if (st) *st = s;
    if (s != VQ_STATUS_OK) {
        vq_gguf_close(g);
        return NULL;
    }
    g_err[0] = 0;
    return g;
}

/* Parses a caller-owned buffer (must outlive the handle). */
vq_gguf *vq_gguf_open_mem(const void *buf, size_t len, vq_status *st) {
    if (!buf && len) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        set_err("gguf: NULL buffer");
        return NULL;
    }
    vq_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (st) *st = VQ_STATUS_NO_MEMORY;
        set_err("gguf: out of memory");
        return NULL;
    }
    static const uint8_t empty[1];
    g->base = buf ? buf : empty;
    g->size = len;
    return open_common(g, st);
}

/* What a non-regular file is, for error messages. */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m)  ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a plain file";
}

/* The len bytes of fd in private huge-page memory (vq_map_huge), read-only once filled; NULL
 * when the OS gives no huge pages, the file is more than half the physical memory, that
 * memory cannot be had or the read fails (the caller then maps the file). */
static void *read_huge(int fd, size_t len) {
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (!vq_huge_pages() || pages <= 0 || psz <= 0 ||
        (double)len > 0.5 * (double)pages * (double)psz)
        return NULL;
    uint8_t *a = vq_map_huge(len);
    if (!a) return NULL;
    for (size_t got = 0; got < len;) {
        const ssize_t r = pread(fd, a + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            vq_unmap(a, len);
            return NULL;
        }
        got += (size_t)r;
    }
    mprotect(a, len, PROT_READ);
    return a;
}

/* Maps path read-only (or reads it into huge pages: read_huge) and parses it. */
static vq_gguf *open_file(const char *path, int read, vq_status *st) {
    if (!path) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        set_err("gguf: NULL path");
        return NULL;
    }
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; the
     * type check below then refuses it (the flag has no effect on regular files) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        set_err("gguf: cannot open '%s': %s", path, strerror(errno));
        if (st) *st = VQ_STATUS_IO;
        return NULL;
    }
    struct stat sb;
    const int stat_ok = fstat(fd, &sb) == 0;
    if (!stat_ok || !S_ISREG(sb.st_mode)) {
        if (!stat_ok) set_err("gguf: cannot stat '%s': %s", path, strerror(errno));
        else set_err("gguf: '%s' is not a regular file (%s)", path, file_kind(sb.st_mode));
        close(fd);
        if (st) *st = VQ_STATUS_IO;
        return NULL;
    }
    if (sb.st_size < 24) {
        close(fd);
        set_err("gguf: '%s' is too small (%lld bytes) to be a GGUF file", path,
                (long long)sb.st_size);
        if (st) *st = VQ_STATUS_BAD_FORMAT;
        return NULL;
    }
    void *m = read ? read_huge(fd, (size_t)sb.st_size) : NULL;
    const int copy = m != NULL;
    if (!m) m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        set_err("gguf: mmap of '%s' failed: %s", path, strerror(errno));
        if (st) *st = VQ_STATUS_IO;
        return NULL;
    }
    vq_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(m, (size_t)sb.st_size);
        if (st) *st = VQ_STATUS_NO_MEMORY;
        set_err("gguf: out of memory");
        return NULL;
    }
    g->map = m;
    g->map_len = (size_t)sb.st_size;
    g->copy = copy;
    g->base = m;
    g->size = (size_t)sb.st_size;
    return open_common(g, st);
}

int vq_gguf_set_writable(vq_gguf *g, int on) {
    if (!g || !g->copy) return -1;
    return mprotect(g->map, g->map_len, on ? PROT_READ | PROT_WRITE : PROT_READ) == 0 ? 0 : -1;
}

vq_gguf *vq_gguf_open(const char *path, vq_status *st) { return open_file(path, 0, st); }
vq_gguf *vq_gguf_open_read(const char *path, vq_status *st) { return open_file(path, 1, st); }

vq_status vq_gguf_check_values(const vq_gguf *g) {
    if (!g) return VQ_STATUS_INVALID_ARG;
    for (int64_t i = 0; i < g->n_tensors; i++) VQ_RETURN_IF_ERR(check_values(&g->tensors[i]));
    return VQ_STATUS_OK;
}

/* ---- accessors ------------------------------------------------------------------------- */

uint32_t vq_gguf_version(const vq_gguf *g) { return g->version; }
int64_t vq_gguf_n_kv(const vq_gguf *g) { return g->n_kv; }

const struct vq_gguf_kv *vq_gguf_kv_at(const vq_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_kv) ? &g->kv[i] : NULL;
}

const struct vq_gguf_kv *vq_gguf_find(const vq_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

/* Reads an integer-typed value at p of type t into *v (signed 128-bit-free: separate sign). */
static int read_int(const uint8_t *p, uint32_t t, int64_t *sv, uint64_t *uv, int *is_signed) {
    *is_signed = 0;
    switch (t) {
    case VQ_GGUF_U8:
    case VQ_GGUF_BOOL: *uv = p[0]; return 1;
    case VQ_GGUF_I8:
        *sv = (int8_t)p[0];
        *is_signed = 1;
        return 1;
    case VQ_GGUF_U16: *uv = rd_le16(p); return 1;
    case VQ_GGUF_I16:
        *sv = (int16_t)rd_le16(p);
        *is_signed = 1;
        return 1;
    case VQ_GGUF_U32: *uv = rd_le32(p); return 1;
    case VQ_GGUF_I32:
        *sv = (int32_t)rd_le32(p);
        *is_signed = 1;
        return 1;
    case VQ_GGUF_U64: *uv = rd_le64(p); return 1;
    case VQ_GGUF_I64:
        *sv = (int64_t)rd_le64(p);
        *is_signed = 1;
        return 1;
    default: return 0;
    }
}

vq_status vq_gguf_get_u32(const vq_gguf *g, const char *key, uint32_t *out) {
    const struct vq_gguf_kv *kv = vq_gguf_find(g, key);
    if (!kv) return VQ_STATUS_NOT_FOUND;
    int64_t sv = 0;
    uint64_t uv = 0;
    int sg;
    if (!read_int(kv->data, kv->type, &sv, &uv, &sg) || kv->type == VQ_GGUF_BOOL)
        return VQ_STATUS_BAD_FORMAT;
    if (sg) {
        if (sv < 0 || sv > (int64_t)UINT32_MAX) return VQ_STATUS_BAD_FORMAT;
        *out = (uint32_t)sv;
    } else {
        if (uv > UINT32_MAX) return VQ_STATUS_BAD_FORMAT;
        *out = (uint32_t)uv;
    }
    return VQ_STATUS_OK;
}

static float rd_f32(const uint8_t *p) {
    uint32_t u = rd_le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double rd_f64(const uint8_t *p) {
    uint64_t u = rd_le64(p);
    double f;
    memcpy(&f, &u, 8);
    return f;
}

vq_status vq_gguf_get_f32(const vq_gguf *g, const char *key, float *out) {
    const struct vq_gguf_kv *kv = vq_gguf_find(g, key);
    if (!kv) return VQ_STATUS_NOT_FOUND;
    if (kv->type == VQ_GGUF_F32) {
        *out = rd_f32(kv->data);
        return VQ_STATUS_OK;
    }
    if (kv->type == VQ_GGUF_F64) {
        *out = (float)rd_f64(kv->data);
        return VQ_STATUS_OK;
    }
    return VQ_STATUS_BAD_FORMAT;
}

vq_status vq_gguf_get_str(const vq_gguf *g, const char *key, struct vq_gguf_str *out) {
    const struct vq_gguf_kv *kv = vq_gguf_find(g, key);
    if (!kv) return VQ_STATUS_NOT_FOUND;
    if (kv->type != VQ_GGUF_STRING) return VQ_STATUS_BAD_FORMAT;
    out->len = rd_le64(kv->data);
    out->ptr = (const char *)kv->data + 8;
    return VQ_STATUS_OK;
}

/* Index of kv inside g (kv must come from this handle), or -1. */
static int64_t kv_index(const vq_gguf *g, const struct vq_gguf_kv *kv) {
    if (!kv || kv < g->kv || kv >= g->kv + g->n_kv) return -1;
    return kv - g->kv;
}

vq_status vq_gguf_arr_str(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i,
                          struct vq_gguf_str *out) {
    int64_t k = kv_index(g, kv);
    if (k < 0) return VQ_STATUS_INVALID_ARG;
    if (kv->type != VQ_GGUF_ARRAY || kv->arr_type != VQ_GGUF_STRING) return VQ_STATUS_BAD_FORMAT;
    if (i >= kv->arr_count) return VQ_STATUS_RANGE;
    const uint8_t *p = g->base + g->str_idx[k][i];
    out->len = rd_le64(p);
    out->ptr = (const char *)p + 8;
    return VQ_STATUS_OK;
}

vq_status vq_gguf_arr_f32(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i, float *out) {
    if (kv_index(g, kv) < 0) return VQ_STATUS_INVALID_ARG;
    if (kv->type != VQ_GGUF_ARRAY) return VQ_STATUS_BAD_FORMAT;
    if (i >= kv->arr_count) return VQ_STATUS_RANGE;
    if (kv->arr_type == VQ_GGUF_F32) {
        *out = rd_f32(kv->data + 4 * i);
        return VQ_STATUS_OK;
    }
    if (kv->arr_type == VQ_GGUF_F64) {
        *out = (float)rd_f64(kv->data + 8 * i);
        return VQ_STATUS_OK;
    }
    return VQ_STATUS_BAD_FORMAT;
}

vq_status vq_gguf_arr_i32(const vq_gguf *g, const struct vq_gguf_kv *kv, uint64_t i, int32_t *out) {
    if (kv_index(g, kv) < 0) return VQ_STATUS_INVALID_ARG;
    if (kv->type != VQ_GGUF_ARRAY) return VQ_STATUS_BAD_FORMAT;
    if (i >= kv->arr_count) return VQ_STATUS_RANGE;
    size_t es = scalar_size(kv->arr_type);
    int64_t sv = 0;
    uint64_t uv = 0;
    int sg;
    if (!es || kv->arr_type == VQ_GGUF_F32 || kv->arr_type == VQ_GGUF_F64 ||
        !read_int(kv->data + es * i, kv->arr_type, &sv, &uv, &sg))
        return VQ_STATUS_BAD_FORMAT;
    if (sg) {
        if (sv < INT32_MIN || sv > INT32_MAX) return VQ_STATUS_BAD_FORMAT;
        *out = (int32_t)sv;
    } else {
        if (uv > INT32_MAX) return VQ_STATUS_BAD_FORMAT;
        *out = (int32_t)uv;
    }
    return VQ_STATUS_OK;
}

int64_t vq_gguf_n_tensors(const vq_gguf *g) { return g->n_tensors; }

const struct vq_gguf_tensor *vq_gguf_tensor_at(const vq_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_tensors) ? &g->tensors[i] : NULL;
}

const struct vq_gguf_tensor *vq_gguf_tensor_find(const vq_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}
