/* test_eval_kvmem.c — the analytic KV-memory estimate (vq_kv_estimate) equals, field by field,
 * what a real vq_cache reports (vq_cache_memory) after appending ctx tokens of random data,
 * for every method, several bit widths, KIVI windows and sinks, asymmetric K/V, per-layer
 * bits, and contexts that end inside and on block/window boundaries. */
#include "test.h"

#include "eval/kvmem.h"

struct cfg {
    enum vq_method km;
    int kb;
    enum vq_method vm;
    int vb;
    int group_size, residual_length, n_sink_tokens; /* 0 = default */
};

static const struct cfg CFGS[] = {
    {VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 0, 0, 0},
    {VQ_METHOD_FP32, 32, VQ_METHOD_FP32, 32, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_MSE, 1, VQ_METHOD_TURBOQUANT_MSE, 1, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_MSE, 2, VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_MSE, 3, VQ_METHOD_TURBOQUANT_MSE, 3, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_MSE, 4, VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_PROD, 2, VQ_METHOD_TURBOQUANT_PROD, 2, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_PROD, 3, VQ_METHOD_TURBOQUANT_PROD, 4, 0, 0, 0},
    {VQ_METHOD_QJL, 1, VQ_METHOD_FP16, 16, 0, 0, 0},
    {VQ_METHOD_POLAR, 4, VQ_METHOD_POLAR, 4, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_RVQ, 1, VQ_METHOD_TURBOQUANT_RVQ, 1, 0, 0, 0},
    {VQ_METHOD_TURBOQUANT_RVQ, 2, VQ_METHOD_TURBOQUANT_RVQ, 2, 0, 0, 0},
    {VQ_METHOD_KIVI, 2, VQ_METHOD_KIVI, 2, 0, 0, 0},
    {VQ_METHOD_KIVI, 4, VQ_METHOD_KIVI, 4, 32, 64, 0},
    {VQ_METHOD_KIVI, 3, VQ_METHOD_KIVI, 3, 16, 0, 0}, /* no residual window */
    {VQ_METHOD_KIVI_SINK, 2, VQ_METHOD_KIVI_SINK, 2, 0, 0, 0},
    {VQ_METHOD_KIVI_SINK, 2, VQ_METHOD_TURBOQUANT_MSE, 3, 32, 32, 3},
    {VQ_METHOD_TURBOQUANT_MSE, 4, VQ_METHOD_KIVI_SINK, 2, 0, 0, 7},
};

/* full-precision edge layers applied by params() (fp16_edge_layers sets them) */
static int fp16_first_ = 0, fp16_last_ = 0;

static struct vq_cache_params params(const struct cfg *c, int layers, int kv, int d) {
    struct vq_cache_params p = vq_cache_params_default();
    p.fp16_first_layers = fp16_first_;
    p.fp16_last_layers = fp16_last_;
    p.n_layers = layers;
    p.n_kv_heads = kv;
    p.head_dim = d;
    p.max_tokens = 4096;
    p.key.method = c->km;
    p.key.bits = c->kb;
    p.value.method = c->vm;
    p.value.bits = c->vb;
    if (c->group_size) p.key.group_size = p.value.group_size = c->group_size;
    if (c->residual_length || c->group_size)
        p.key.residual_length = p.value.residual_length = c->residual_length;
    if (c->n_sink_tokens) p.key.n_sink_tokens = p.value.n_sink_tokens = c->n_sink_tokens;
    return p;
}

static uint64_t rs = 0x1234567;
static float rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static int same(const struct vq_cache_memory *a, const struct vq_cache_memory *b) {
    return a->key_bytes == b->key_bytes && a->value_bytes == b->value_bytes &&
           a->window_bytes == b->window_bytes && a->total_bytes == b->total_bytes &&
           a->fp16_bytes == b->fp16_bytes && a->fp16_key_bytes == b->fp16_key_bytes &&
           a->key_total_bytes == b->key_total_bytes && a->allocated_bytes == b->allocated_bytes &&
           a->center_bytes == b->center_bytes;
}

static void dump(const char *tag, const struct vq_cache_memory *m) {
    fprintf(stderr,
            "  %s: key %zu value %zu window %zu total %zu fp16 %zu fp16k %zu ktot %zu alloc %zu\n",
            tag, m->key_bytes, m->value_bytes, m->window_bytes, m->total_bytes, m->fp16_bytes,
            m->fp16_key_bytes, m->key_total_bytes, m->allocated_bytes);
}

/* Appends ctx tokens (in pieces of `step`, the first piece holding everything for sink
 * configs) to every layer and compares. Returns 1 if the config was compared, 0 if the cache
 * could not be created (then the estimate must fail too). */
static int check_geo(const struct cfg *c, int64_t ctx, int64_t step, const int *kbits, int layers,
                     int kv, int d) {
    struct vq_cache_params p = params(c, layers, kv, d);
    p.key_bits_per_layer = kbits;
    vq_status st;
    vq_cache *cache = vq_cache_create(&p, &st);
    struct vq_cache_memory est;
    vq_status est_st = vq_kv_estimate(&p, ctx, &est);
    if (!cache) {
        fprintf(stderr, "  %s/%s k%d v%d: cache create failed: %s\n", vq_method_name(c->km),
                vq_method_name(c->vm), c->kb, c->vb, vq_status_str(st));
        ASSERT(est_st != VQ_STATUS_OK); /* the estimate rejects what the cache rejects */
        return 0;
    }
    ASSERT_STATUS(est_st, VQ_STATUS_OK);
    float *k = malloc((size_t)(ctx + 1) * kv * d * sizeof *k),
          *v = malloc((size_t)(ctx + 1) * kv * d * sizeof *v);
    for (int64_t i = 0; i < ctx * kv * d; i++) {
        k[i] = rnd();
        v[i] = rnd();
    }
    for (int l = 0; l < layers; l++)
        for (int64_t t = 0; t < ctx; t += step) {
            int64_t n = ctx - t < step ? ctx - t : step;
            ASSERT_STATUS(
                vq_cache_append(cache, l, k + t * kv * d, v + t * kv * d, VQ_DTYPE_F32, n),
                VQ_STATUS_OK);
        }
    struct vq_cache_memory got;
    vq_cache_memory(cache, &got);
    if (!same(&got, &est)) {
        fprintf(stderr, "  mismatch %s(%d)/%s(%d) ctx %lld step %lld:\n", vq_method_name(c->km),
                c->kb, vq_method_name(c->vm), c->vb, (long long)ctx, (long long)step);
        dump("cache   ", &got);
        dump("estimate", &est);
    }
    ASSERT(same(&got, &est));
    free(k);
    free(v);
    vq_cache_free(cache);
    return 1;
}

static int check(const struct cfg *c, int64_t ctx, int64_t step, const int *kbits) {
    return check_geo(c, ctx, step, kbits, 3, 2, 64);
}

TEST(smollm2_geometry) {
    /* the default model's geometry (30 layers, 3 kv heads, head_dim 64) at 1000 tokens */
    for (size_t i = 0; i < sizeof CFGS / sizeof CFGS[0]; i++)
        ASSERT(check_geo(&CFGS[i], 1000, 1000, NULL, 30, 3, 64));
}

TEST(estimate_equals_cache) {
    const int64_t ctxs[] = {0, 1, 31, 32, 127, 128, 200, 256, 300, 513};
    int built = 0, total = 0;
    for (size_t i = 0; i < sizeof CFGS / sizeof CFGS[0]; i++) {
        const struct cfg *c = &CFGS[i];
        const int sinks = c->km == VQ_METHOD_KIVI_SINK || c->vm == VQ_METHOD_KIVI_SINK;
        int ok = 1;
        for (size_t j = 0; j < sizeof ctxs / sizeof ctxs[0] && ok; j++) {
            ok = check(c, ctxs[j], ctxs[j] ? ctxs[j] : 1, NULL);
            /* decode-style growth: one prefill, then single tokens (sinks come from the prefill) */
            if (ok && ctxs[j] > 40) check(c, ctxs[j], sinks ? ctxs[j] : 40, NULL);
        }
        built += ok;
        total++;
    }
    fprintf(stderr, "  %d of %d configs built and compared\n", built, total);
    ASSERT_EQ_INT(built, total); /* every method of the list is built into the library */
}

TEST(per_layer_bits) {
    const struct cfg c = {VQ_METHOD_TURBOQUANT_MSE, 3, VQ_METHOD_TURBOQUANT_MSE, 3, 0, 0, 0};
    const int kbits[3] = {4, 2, 3};
    ASSERT(check(&c, 300, 300, kbits));
    /* and the per-layer bits matter: the total differs from the uniform-bits estimate */
    struct vq_cache_params p = params(&c, 3, 2, 64);
    struct vq_cache_memory a, b;
    ASSERT_STATUS(vq_kv_estimate(&p, 300, &a), VQ_STATUS_OK);
    const int kb2[3] = {4, 4, 4};
    p.key_bits_per_layer = kb2;
    ASSERT_STATUS(vq_kv_estimate(&p, 300, &b), VQ_STATUS_OK);
    ASSERT(b.key_bytes > a.key_bytes && b.value_bytes == a.value_bytes);
}

TEST(fp16_edge_layers) {
    /* fp16 first/last layers with every method on the other layers, with per-layer bits */
    const int kbits[3] = {4, 2, 3};
    const int edges[3][2] = {{1, 0}, {0, 1}, {1, 1}};
    for (int e = 0; e < 3; e++) {
        fp16_first_ = edges[e][0];
        fp16_last_ = edges[e][1];
        for (size_t i = 0; i < sizeof CFGS / sizeof CFGS[0]; i++) {
            ASSERT(check(&CFGS[i], 300, 300, NULL));
            ASSERT(check(&CFGS[i], 129, 40, NULL));
        }
        const struct cfg c = {VQ_METHOD_TURBOQUANT_MSE, 3, VQ_METHOD_TURBOQUANT_MSE, 3, 0, 0, 0};
        ASSERT(check(&c, 300, 300, kbits));
        ASSERT(check_geo(&c, 512, 512, NULL, 30, 3, 64));
    }
    /* an edge layer costs exactly fp16: 1 of 3 layers fp16 = uniform + (fp16 - tq) / 3 */
    const struct cfg c = {VQ_METHOD_TURBOQUANT_MSE, 2, VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, 0};
    fp16_first_ = fp16_last_ = 0;
    struct vq_cache_params p = params(&c, 3, 2, 64);
    p.center_keys = p.center_values = 0;
    struct vq_cache_memory a, b, f;
    ASSERT_STATUS(vq_kv_estimate(&p, 256, &a), VQ_STATUS_OK);
    p.fp16_first_layers = 1;
    ASSERT_STATUS(vq_kv_estimate(&p, 256, &b), VQ_STATUS_OK);
    p.fp16_first_layers = 3;
    ASSERT_STATUS(vq_kv_estimate(&p, 256, &f), VQ_STATUS_OK);
    ASSERT_EQ_INT(f.total_bytes, f.fp16_bytes);
    ASSERT_EQ_INT(3 * b.total_bytes, 2 * a.total_bytes + f.total_bytes);
    fp16_first_ = fp16_last_ = 0;
}

TEST(bad_params) {
    struct vq_cache_params p = vq_cache_params_default();
    struct vq_cache_memory m;
    ASSERT_STATUS(vq_kv_estimate(&p, -1, &m), VQ_STATUS_INVALID_ARG);
    p.key.method = VQ_METHOD_KIVI;
    p.key.bits = 9;
    ASSERT(vq_kv_estimate(&p, 10, &m) != VQ_STATUS_OK);
    p = vq_cache_params_default();
    p.head_dim = 7;
    ASSERT(vq_kv_estimate(&p, 10, &m) != VQ_STATUS_OK);
    /* fp16 is exact arithmetic: 2 bytes * 2 (K, V) * layers * heads * d * ctx */
    p = vq_cache_params_default();
    p.n_layers = 30;
    p.n_kv_heads = 3;
    p.head_dim = 64;
    ASSERT_STATUS(vq_kv_estimate(&p, 1000, &m), VQ_STATUS_OK);
    ASSERT_EQ_INT(m.total_bytes, 2ull * 2 * 30 * 3 * 64 * 1000);
    ASSERT_EQ_INT(m.fp16_bytes, m.total_bytes);
}

int main(void) {
    RUN(estimate_equals_cache);
    RUN(smollm2_geometry);
    RUN(per_layer_bits);
    RUN(fp16_edge_layers);
    RUN(bad_params);
    return TEST_REPORT();
}
