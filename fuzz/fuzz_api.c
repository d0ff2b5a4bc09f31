/*
 * fuzz_api.c — libFuzzer target for the public library API as a caller drives it: the input is
 * a script of calls with sizes and counts taken from its bytes (including negative, zero and
 * oversized ones), on a KV cache (vq_cache_create / append / attend / read / truncate / reset /
 * memory) and on an engine context over a tiny synthetic llama model (vq_ctx_eval / truncate /
 * reset). Every buffer passed is exactly as large as the call's own counts say, so any read or
 * write past it is the library's (ASan); every call must return a status, and the documented
 * invariants are checked: a failed append leaves the layer's length unchanged, no layer grows
 * past max_tokens, a refused vq_ctx_eval (bad n, ids or capacity) leaves n_past unchanged.
 * Replayed over fuzz/corpus/api/ by ctest (replay_fuzz_api).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "veloxquant.h"
#include "vq_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- input reader ---- */
struct in {
    const uint8_t *p;
    size_t n, i;
};
static unsigned u8(struct in *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static float fval(struct in *r) {
    const int v = (int)(int8_t)u8(r);
    if (v == -128 && u8(r) == 0xff) return NAN; /* a non-finite input, now and then */
    return (float)v / 16.0f;
}

/* ---- a tiny llama model (E 32, 2 heads of 16, 1 kv head, FF 32, vocab 16, 1 layer) ---- */
enum { E = 32, NH = 2, NKV = 1, HD = 16, FF = 32, NV = 16 };
struct wb {
    uint8_t *p;
    size_t n, cap;
};
static void put(struct wb *b, const void *v, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        uint8_t *np = realloc(b->p, b->cap);
        if (!np) abort();
        b->p = np;
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
}
static void put_u32(struct wb *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct wb *b, uint64_t v) { put(b, &v, 8); }
static void put_str(struct wb *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_u32(struct wb *b, const char *k, uint32_t v) {
    put_str(b, k);
    put_u32(b, 4); /* GGUF u32 */
    put_u32(b, v);
}
static void kv_f32(struct wb *b, const char *k, float v) {
    put_str(b, k);
    put_u32(b, 6); /* GGUF f32 */
    put(b, &v, 4);
}

static const struct {
    const char *name;
    int rows, cols;
} TENSORS[] = {
    {"token_embd.weight", NV, E},        {"output_norm.weight", 1, E},
    {"blk.0.attn_norm.weight", 1, E},    {"blk.0.ffn_norm.weight", 1, E},
    {"blk.0.attn_q.weight", NH *HD, E},  {"blk.0.attn_k.weight", NKV *HD, E},
    {"blk.0.attn_v.weight", NKV *HD, E}, {"blk.0.attn_output.weight", E, NH *HD},
    {"blk.0.ffn_gate.weight", FF, E},    {"blk.0.ffn_up.weight", FF, E},
    {"blk.0.ffn_down.weight", E, FF},
};
enum { N_TENSORS = sizeof TENSORS / sizeof TENSORS[0] };

/* Writes the model once per process to a temp file and loads it; NULL if that fails. */
static vq_model *tiny_model(void) {
    static vq_model *m;
    static int tried;
    if (tried) return m;
    tried = 1;
    struct wb b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, N_TENSORS);
    put_u64(&b, 9);
    put_str(&b, "general.architecture");
    put_u32(&b, 8); /* GGUF string */
    put_str(&b, "llama");
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.embedding_length", E);
    kv_u32(&b, "llama.feed_forward_length", FF);
    kv_u32(&b, "llama.attention.head_count", NH);
    kv_u32(&b, "llama.attention.head_count_kv", NKV);
    kv_u32(&b, "llama.context_length", 64);
    kv_f32(&b, "llama.rope.freq_base", 10000.0f);
    kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    uint64_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        put_str(&b, TENSORS[i].name);
        if (TENSORS[i].rows == 1) {
            put_u32(&b, 1);
            put_u64(&b, (uint64_t)TENSORS[i].cols);
        } else {
            put_u32(&b, 2);
            put_u64(&b, (uint64_t)TENSORS[i].cols);
            put_u64(&b, (uint64_t)TENSORS[i].rows);
        }
        put_u32(&b, 0); /* F32 */
        put_u64(&b, off);
        off += ((uint64_t)TENSORS[i].rows * (uint64_t)TENSORS[i].cols * 4 + 31) / 32 * 32;
    }
    while (b.n % 32) put(&b, "", 1);
    uint32_t s = 12345;
    for (int i = 0; i < N_TENSORS; i++) {
        const size_t start = b.n, n = (size_t)TENSORS[i].rows * (size_t)TENSORS[i].cols;
        for (size_t j = 0; j < n; j++) {
            s = s * 1664525u + 1013904223u;
            float w = TENSORS[i].rows == 1 ? 1.0f : ((float)(s >> 9) / 8388608.0f - 0.5f) * 0.5f;
            put(&b, &w, 4);
        }
        while ((b.n - start) % 32) put(&b, "", 1);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/vq_fuzz_api_%ld.gguf", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (f) {
        const int ok = fwrite(b.p, 1, b.n, f) == b.n;
        if (fclose(f) == 0 && ok) m = vq_model_load(path, NULL);
        remove(path);
    }
    free(b.p);
    return m;
}

/* ---- the script ---- */
static const enum vq_method METHODS[] = {
    VQ_METHOD_FP16, VQ_METHOD_FP32,           VQ_METHOD_TURBOQUANT_MSE, VQ_METHOD_TURBOQUANT_PROD,
    VQ_METHOD_QJL,  VQ_METHOD_POLAR,          VQ_METHOD_TURBOQUANT_RVQ, VQ_METHOD_KIVI,
    VQ_METHOD_INT8, VQ_METHOD_TURBOQUANT_MSE,
};
enum { N_METHODS = sizeof METHODS / sizeof METHODS[0] };

static void cache_script(struct in *r) {
    struct vq_cache_params p = vq_cache_params_default();
    static const int DIMS[] = {8, 16, 32, 64};
    p.n_layers = 1 + (int)(u8(r) % 3);
    p.n_kv_heads = 1 + (int)(u8(r) % 2);
    p.head_dim = DIMS[u8(r) % 4];
    p.max_tokens = 1 + (int64_t)(u8(r) % 96);
    p.key.method = METHODS[u8(r) % N_METHODS];
    p.value.method = METHODS[u8(r) % N_METHODS];
    p.key.bits = 1 + (int)(u8(r) % 8);
    p.value.bits = 1 + (int)(u8(r) % 8);
    p.value.role = VQ_ROLE_VALUE;
    if (u8(r) & 1) p.key.group_size = p.value.group_size = 8, p.key.residual_length = 8;
    vq_status st;
    vq_cache *c = vq_cache_create(&p, &st);
    if (!c) {
        if (st == VQ_STATUS_OK) abort();
        return;
    }
    const int L = p.n_layers, H = p.n_kv_heads, d = p.head_dim;
    for (int step = 0; step < 48 && r->i < r->n; step++) {
        const unsigned op = u8(r) % 7;
        const int layer = (int)(u8(r) % (unsigned)(L + 1)); /* L: an invalid layer */
        switch (op) {
        case 0: { /* append n tokens: mostly 0..15, else -8..119 (beyond max_tokens too) */
            const unsigned b = u8(r);
            const int64_t n = b & 0x80 ? (int64_t)(b % 128) - 8 : (int64_t)(b % 16);
            const size_t cnt = (size_t)(n > 0 ? n : 0) * (size_t)H * (size_t)d;
            float *k = malloc((cnt ? cnt : 1) * sizeof *k),
                  *v = malloc((cnt ? cnt : 1) * sizeof *v);
            if (!k || !v) abort();
            for (size_t i = 0; i < cnt; i++) {
                k[i] = fval(r);
                v[i] = (float)(i % 7) - 3.0f;
            }
            const int64_t before = vq_cache_n_tokens(c, layer);
            st = vq_cache_append(c, layer, k, v, VQ_DTYPE_F32, n);
            const int64_t after = vq_cache_n_tokens(c, layer);
            if (st == VQ_STATUS_OK && layer < L && after != before + n) abort();
            if (st != VQ_STATUS_OK && after != before) abort(); /* unchanged on error */
            if (after > p.max_tokens) abort();
            free(k);
            free(v);
            break;
        }
        case 1: { /* attend n_q queries of n_q_heads heads (a multiple of H or not) */
            const int64_t nq = (int64_t)(u8(r) % 5);
            const int nqh = 1 + (int)(u8(r) % (unsigned)(2 * H + 1));
            const size_t qn = (size_t)nq * (size_t)nqh * (size_t)d;
            float *q = malloc((qn ? qn : 1) * sizeof *q),
                  *out = malloc((qn ? qn : 1) * sizeof *out);
            int64_t *pos = malloc((size_t)(nq ? nq : 1) * sizeof *pos);
            if (!q || !out || !pos) abort();
            for (size_t i = 0; i < qn; i++) q[i] = fval(r);
            for (int64_t i = 0; i < nq; i++) pos[i] = (int64_t)(u8(r) % 100) - 2;
            (void)vq_cache_attend(c, layer, q, nqh, nq, u8(r) & 1 ? pos : NULL,
                                  1.0f / sqrtf((float)d), out);
            free(q);
            free(out);
            free(pos);
            break;
        }
        case 2: { /* read one head back */
            const int head = (int)(u8(r) % (unsigned)(H + 1));
            const int64_t nt = vq_cache_n_tokens(c, layer);
            const size_t cnt = (size_t)nt * (size_t)d;
            float *k = malloc((cnt ? cnt : 1) * sizeof *k),
                  *v = malloc((cnt ? cnt : 1) * sizeof *v);
            if (!k || !v) abort();
            (void)vq_cache_read(c, layer, head, k, v);
            free(k);
            free(v);
            break;
        }
        case 3: (void)vq_cache_truncate(c, (int64_t)(u8(r) % 100) - 2); break;
        case 4:
            if (u8(r) % 4 == 0) vq_cache_reset(c);
            break;
        case 5: {
            struct vq_cache_memory m;
            vq_cache_memory(c, &m);
            break;
        }
        default: (void)vq_cache_n_stored(c, layer); break;
        }
    }
    vq_cache_free(c);
}

static void ctx_script(struct in *r) {
    vq_model *m = tiny_model();
    if (!m) return;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 1 + (int64_t)(u8(r) % 40);
    cp.n_batch = 1 + (int)(u8(r) % 8);
    cp.logits_all = (int)(u8(r) & 1);
    cp.n_threads = 1;
    cp.cache.key.method = METHODS[u8(r) % N_METHODS];
    cp.cache.value.method = METHODS[u8(r) % N_METHODS];
    cp.cache.key.bits = 1 + (int)(u8(r) % 8);
    cp.cache.value.bits = 1 + (int)(u8(r) % 8);
    vq_status st;
    vq_ctx *c = vq_ctx_create(m, &cp, &st);
    if (!c) {
        if (st == VQ_STATUS_OK) abort();
        return;
    }
    for (int step = 0; step < 24 && r->i < r->n; step++) {
        const unsigned op = u8(r) % 4;
        if (op == 0 || op == 1) {     /* eval: a buffer of exactly n ids (n may be < 1 or > room) */
            const unsigned b = u8(r); /* mostly 1..8 tokens, else -2..45 */
            const int64_t n = b & 0x80 ? (int64_t)(b % 48) - 2 : 1 + (int64_t)(b % 8);
            int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
            const size_t nl = (size_t)(cp.logits_all && n > 0 ? n : 1) * NV;
            float *lg = malloc(nl * sizeof *lg);
            if (!ids || !lg) abort();
            for (int64_t i = 0; i < n; i++) /* now and then an id out of range */
                ids[i] = u8(r) % 32 == 0 ? (int32_t)(u8(r) % 3) * NV - 1 : (int32_t)(u8(r) % NV);
            const int64_t before = vq_ctx_n_past(c);
            st = vq_ctx_eval(c, n > 0 ? ids : NULL, n, u8(r) & 1 ? lg : NULL);
            if ((st == VQ_STATUS_INVALID_ARG || st == VQ_STATUS_CAPACITY) &&
                vq_ctx_n_past(c) != before)
                abort();
            if (st == VQ_STATUS_OK && vq_ctx_n_past(c) != before + n) abort();
            if (vq_ctx_n_past(c) > cp.n_ctx) abort();
            free(ids);
            free(lg);
        } else if (op == 2) (void)vq_ctx_truncate(c, (int64_t)(u8(r) % 48) - 2);
        else if (u8(r) % 4 == 0) vq_ctx_reset(c);
    }
    vq_ctx_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct in r = {data, size, 0};
    if (u8(&r) & 1) ctx_script(&r);
    else cache_script(&r);
    return 0;
}
