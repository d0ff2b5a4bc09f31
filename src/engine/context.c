/*
 * context.c — inference context and the transformer forward pass (llama / qwen2).
 *
 * Per layer, for a batch of n tokens at positions p0..p0+n-1:
 *   h = RMSNorm(x) * attn_norm
 *   q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv); RoPE on q and k (NORM or NEOX pairing)
 *   vq_cache_append(k, v); a = vq_cache_attend(q) (GQA + causal mask inside the cache)
 *   x += a Wo
 *   h = RMSNorm(x) * ffn_norm; x += (SiLU(h Wgate) * (h Wup)) Wdown
 * then logits = RMSNorm(x) * output_norm Wout. Activations are quantized once per row to the
 * weight kernels' activation format (Q8A / Q8K / F32) and every matmul runs over all rows of
 * the batch with the weights streamed once (vq_ggml_matmul). All buffers come from ctx create.
 * An optional layer hook (vq_ctx_set_layer_hook) sees q, k, v and the attention output of each
 * layer after attend; without one the cost is a NULL test per layer. With params.timings the
 * pass adds each phase's wall time to the context's totals (lap(), vq_ctx_get_timings).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "engine/model.h"

#ifdef _OPENMP
#include <omp.h>
#define VQ_OMP_FOR(nt) _Pragma("omp parallel for num_threads(nt) schedule(static)")
#else
#define VQ_OMP_FOR(nt) (void)(nt); /* serial build: the loop that follows runs as is */
#endif

struct vq_ctx {
    vq_calib_data *own_calib[2]; /* calibration the cache reads, owned (vq_ctx_create_kv) */
    const vq_model *m;
    struct vq_ctx_params p;
    vq_cache *cache;
    int n_threads;
    int64_t n_past;
    int32_t *ids; /* (n_ctx) token ids evaluated, n_past of them valid (vq_ctx_tokens); not
                   * in scratch_bytes: pages are touched only as far as the context fills */
    /* activations, n_batch rows each */
    float *x;          /* (n_batch, n_embd) residual stream */
    float *h;          /* (n_batch, n_embd) normalized input of a sub-block */
    float *q;          /* (n_batch, n_heads * head_dim) */
    float *k;          /* (n_batch, n_kv_heads * head_dim) */
    float *v;          /* (n_batch, n_kv_heads * head_dim) */
    float *att;        /* (n_batch, n_heads * head_dim) attention output */
    float *g;          /* (n_batch, n_ff) gate, then SiLU(gate) * up */
    float *u;          /* (n_batch, n_ff) up */
    void *act;         /* (n_batch, act row bytes of the widest input) quantized activations */
    size_t act_stride; /* bytes per activation row */
    /* cos / sin of the RoPE angles of the batch's positions, per rope config of the model
     * (filled at the start of each forward pass: sized by the batch, not by n_ctx) */
    float *rope_cos;                     /* (n_rope, n_batch, rope_dim / 2) */
    float *rope_sin;                     /* (n_rope, n_batch, rope_dim / 2) */
    const struct vq_ggml_nn_kernels *nn; /* llama.cpp-identical SwiGLU */
    float *wrow; /* (n_threads, widest weight row) dequantized rows (f32_activations) */
    size_t wrow_floats;
    const struct vq_ggml_kernels *dot32; /* fp32 x fp32 dot (f32_activations) */
    size_t scratch_bytes;
    const vq_ctx *scratch_owner; /* NULL: x .. wrow are this context's; else owner's (shared) */
    int scratch_lent;            /* 1: other contexts use this one's buffers */
    vq_layer_hook_fn hook;       /* optional per-layer observer (vq_ctx_set_layer_hook) */
    void *hook_user;
    struct vq_ctx_timings tm; /* per-phase totals (p.timings) */
    int rowwise; /* 1 while a vq_ctx_eval_batch runs on this context's buffers (mm_rowwise) */
};

struct vq_ctx_params vq_ctx_params_default(void) {
    struct vq_ctx_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 512;
    p.n_threads = 0;
    p.n_batch = 512;
    p.logits_all = 0;
    p.isa = VQ_ISA_AUTO;
    p.cache = vq_cache_params_default();
    return p;
}

void vq_ctx_own_calib(vq_ctx *c, vq_calib_data *a, vq_calib_data *b) {
    c->own_calib[0] = a;
    c->own_calib[1] = b;
}

/* The activation buffers, unless they are another context's (vq_ctx_share_scratch). */
static void free_scratch(vq_ctx *c) {
    if (c->scratch_owner) return;
    vq_free(c->x);
    vq_free(c->h);
    vq_free(c->q);
    vq_free(c->k);
    vq_free(c->v);
    vq_free(c->att);
    vq_free(c->g);
    vq_free(c->u);
    vq_free(c->act);
    vq_free(c->rope_cos);
    vq_free(c->rope_sin);
    vq_free(c->wrow);
}

void vq_ctx_free(vq_ctx *c) {
    if (!c) return;
    vq_cache_free(c->cache);
    vq_calib_data_free(c->own_calib[0]);
    vq_calib_data_free(c->own_calib[1]);
    free_scratch(c);
    free(c->ids);
    free(c);
}

vq_status vq_ctx_share_scratch(vq_ctx *c, vq_ctx *donor) {
    if (!c || !donor || c == donor || c->m != donor->m || c->scratch_owner || c->scratch_lent ||
        donor->scratch_owner || donor->p.n_batch < c->p.n_batch ||
        donor->p.f32_activations != c->p.f32_activations ||
        (c->p.f32_activations && donor->n_threads < c->n_threads)) {
        vq_engine_set_error(
            "vq_ctx_share_scratch: NULL, the same context, another model, a "
            "sharing or lending context, a smaller n_batch or other activations");
        return VQ_STATUS_INVALID_ARG;
    }
    free_scratch(c);
    c->x = donor->x;
    c->h = donor->h;
    c->q = donor->q;
    c->k = donor->k;
    c->v = donor->v;
    c->att = donor->att;
    c->g = donor->g;
    c->u = donor->u;
    c->act = donor->act;
    c->rope_cos = donor->rope_cos;
    c->rope_sin = donor->rope_sin;
    c->wrow = donor->wrow;
    c->scratch_bytes = 0;
    c->scratch_owner = donor;
    donor->scratch_lent = 1;
    return VQ_STATUS_OK;
}

static void *alloc_track(vq_ctx *c, size_t bytes, int *ok) {
    void *p = vq_alloc(bytes ? bytes : 64);
    if (!p) *ok = 0;
    c->scratch_bytes += bytes;
    return p;
}

vq_ctx *vq_ctx_create(const vq_model *m, const struct vq_ctx_params *p, vq_status *st) {
    struct vq_ctx_params dp = vq_ctx_params_default();
    if (!p) p = &dp;
    if (!m) {
        vq_engine_set_error("ctx: NULL model");
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    const struct vq_model_info *I = &m->info;
    if (p->n_ctx < 1 || p->n_ctx > (int64_t)1 << 24) {
        vq_engine_set_error("ctx: n_ctx %lld out of range (1..16777216)", (long long)p->n_ctx);
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    if (p->n_batch < 1 || p->n_batch > 65536 || p->n_threads < 0 || p->n_threads > 1024 ||
        p->isa < VQ_ISA_AUTO || p->isa >= VQ_ISA_COUNT) {
        vq_engine_set_error("ctx: n_batch %d (1..65536), n_threads %d (0..1024) or isa %d invalid",
                            p->n_batch, p->n_threads, (int)p->isa);
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        vq_engine_set_error("ctx: out of memory");
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    c->m = m;
    c->p = *p;
    if (c->p.n_batch > c->p.n_ctx) c->p.n_batch = (int)c->p.n_ctx;
    c->n_threads = vq_threads_resolve(p->n_threads);
    c->p.n_threads = c->n_threads;

    c->p.cache.n_layers = I->n_layers;
    c->p.cache.n_kv_heads = I->n_kv_heads;
    c->p.cache.head_dim = I->head_dim;
    c->p.cache.key.head_dim = I->head_dim;
    c->p.cache.value.head_dim = I->head_dim;
    c->p.cache.max_tokens = c->p.n_ctx;
    c->p.cache.n_threads = c->n_threads;
    c->p.cache.layer_window = m->layer_window; /* sliding windows (NULL: none); copied */
    c->p.cache.key_scale_pairs = I->rope_type == VQ_ROPE_NEOX ? 2 : 1; /* key_scales pooling */
    c->p.cache.key_scale_rope_dim = I->rope_dim;
    vq_status s = VQ_STATUS_OK;
    c->cache = vq_cache_create(&c->p.cache, &s);
    if (!c->cache) {
        vq_engine_set_error(
            "ctx: KV cache creation failed: %s (key %s/%d bits, value %s/%d bits, head_dim %d)",
            vq_status_str(s),
            vq_method_name(c->p.cache.key.method) ? vq_method_name(c->p.cache.key.method) : "?",
            c->p.cache.key.bits,
            vq_method_name(c->p.cache.value.method) ? vq_method_name(c->p.cache.value.method) : "?",
            c->p.cache.value.bits, I->head_dim);
        free(c);
        if (st) *st = s;
        return NULL;
    }

    const size_t B = (size_t)c->p.n_batch, E = (size_t)I->n_embd, HD = (size_t)I->head_dim;
    const size_t NQ = (size_t)I->n_heads * HD, NK = (size_t)I->n_kv_heads * HD, F = (size_t)I->n_ff;
    size_t widest = E > NQ ? E : NQ;
    if (F > widest) widest = F;
    /* fp32 is the widest activation format (Q8A 1.25 B/elem, Q8K 1.14 B/elem); each row slot
     * holds two formats (matmul_shared with weights of mixed types) */
    c->act_stride = 2 * ((widest * sizeof(float) + 63) / 64 * 64);
    int ok = 1;
    c->x = alloc_track(c, B * E * sizeof(float), &ok);
    c->h = alloc_track(c, B * E * sizeof(float), &ok);
    c->q = alloc_track(c, B * NQ * sizeof(float), &ok);
    c->k = alloc_track(c, B * NK * sizeof(float), &ok);
    c->v = alloc_track(c, B * NK * sizeof(float), &ok);
    c->att = alloc_track(c, B * NQ * sizeof(float), &ok);
    c->g = alloc_track(c, B * F * sizeof(float), &ok);
    c->u = alloc_track(c, B * F * sizeof(float), &ok);
    c->act = alloc_track(c, B * c->act_stride, &ok);
    const size_t rope_floats = (size_t)m->n_rope * B * ((size_t)I->rope_dim / 2);
    c->rope_cos = alloc_track(c, rope_floats * sizeof(float), &ok);
    c->rope_sin = alloc_track(c, rope_floats * sizeof(float), &ok);
    c->ids = malloc((size_t)c->p.n_ctx * sizeof *c->ids);
    if (!c->ids) ok = 0;
    c->nn = vq_ggml_nn_kernels(c->p.isa);
    if (c->p.f32_activations) {
        c->wrow_floats = (widest + 15) / 16 * 16;
        c->wrow = alloc_track(c, (size_t)c->n_threads * c->wrow_floats * sizeof(float), &ok);
        c->dot32 = vq_ggml_kernels(VQ_GGML_F32, c->p.isa);
    }
    if (!ok) {
        vq_engine_set_error("ctx: out of memory for activations (n_batch %d, n_ctx %lld)",
                            c->p.n_batch, (long long)c->p.n_ctx);
        vq_ctx_free(c);
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    if (st) *st = VQ_STATUS_OK;
    return c;
}

int64_t vq_ctx_n_past(const vq_ctx *c) { return c ? c->n_past : 0; }
const int32_t *vq_ctx_tokens(const vq_ctx *c) { return c ? c->ids : NULL; }
int64_t vq_ctx_n_ctx(const vq_ctx *c) { return c ? c->p.n_ctx : 0; }
const vq_model *vq_ctx_model(const vq_ctx *c) { return c ? c->m : NULL; }

void vq_ctx_reset(vq_ctx *c) {
    if (!c) return;
    vq_cache_reset(c->cache);
    c->n_past = 0;
}

vq_status vq_ctx_truncate(vq_ctx *c, int64_t n) {
    if (!c || n < 0 || n > c->n_past) return VQ_STATUS_INVALID_ARG;
    VQ_RETURN_IF_ERR(vq_cache_truncate(c->cache, n));
    c->n_past = n;
    return VQ_STATUS_OK;
}

const vq_cache *vq_ctx_cache(const vq_ctx *c) { return c ? c->cache : NULL; }
void vq_ctx_set_layer_hook(vq_ctx *c, vq_layer_hook_fn fn, void *user) {
    if (!c) return;
    c->hook = fn;
    c->hook_user = fn ? user : NULL;
}
void *vq_ctx_layer_hook_user(const vq_ctx *c) { return c ? c->hook_user : NULL; }
const struct vq_cache_params *vq_ctx_cache_params(const vq_ctx *c) {
    return c ? &c->p.cache : NULL;
}
size_t vq_ctx_scratch_bytes(const vq_ctx *c) { return c ? c->scratch_bytes : 0; }
int vq_ctx_n_threads(const vq_ctx *c) { return c ? c->n_threads : 0; }
enum vq_isa vq_ctx_isa(const vq_ctx *c) { return vq_isa_resolve(c ? c->p.isa : VQ_ISA_AUTO); }

void vq_ctx_get_timings(const vq_ctx *c, struct vq_ctx_timings *t) {
    if (!t) return;
    if (c) *t = c->tm;
    else memset(t, 0, sizeof *t);
}
void vq_ctx_reset_timings(vq_ctx *c) {
    if (c) memset(&c->tm, 0, sizeof c->tm);
}

const char *vq_phase_name(enum vq_phase ph) {
    static const char *const names[VQ_PHASE_COUNT] = {"qkv", "attention", "attn_out",
                                                      "ffn", "output",    "other"};
    return (unsigned)ph < VQ_PHASE_COUNT ? names[ph] : NULL;
}

/* Per-phase clock of one forward pass: lap() adds the time since the last lap to phase ph of
 * the pass's kind (one token or more); no clock is read when the context does not time. */
struct phase_clock {
    double *sec; /* c->tm.seconds[kind], NULL: not timing */
    double t;
};

static struct phase_clock clock_start(vq_ctx *c, int64_t n) {
    struct phase_clock pc = {NULL, 0};
    if (!c->p.timings) return pc;
    const int kind = n > 1;
    c->tm.tokens[kind] += n;
    c->tm.passes[kind]++;
    pc.sec = c->tm.seconds[kind];
    pc.t = vq_clock_s();
    return pc;
}

static void lap(struct phase_clock *pc, enum vq_phase ph) {
    if (!pc->sec) return;
    const double t = vq_clock_s();
    pc->sec[ph] += t - pc->t;
    pc->t = t;
}

/* ---- building blocks ----------------------------------------------------------------- */

/* Threads for a row-parallel step of `work` floats: the context's above 64 Ki floats (a
 * prefill batch) or 8 Ki in a batch of sequences (c->rowwise: the other threads would only wait
 * at the next product), else 1 (decode: a fork would cost more than the work). Rows are
 * independent, so the split never changes the bits. */
static int row_threads(const vq_ctx *c, int64_t work) {
    return work < (c->rowwise ? 8192 : 65536) ? 1 : c->n_threads;
}

static void rmsnorm(const vq_ctx *c, const float *x, const float *w, float *y, int64_t n_rows,
                    int64_t n, float eps) {
    const int nt = row_threads(c, n_rows * n);
    VQ_OMP_FOR(nt)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        /* ggml's rms_norm: float squares summed in double, the mean rounded to float, 1/sqrtf */
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)(xr[i] * xr[i]);
        const float mean = (float)(ss / (double)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * scale * w[i];
    }
}

/* f32_activations: y = x W^T with each weight row dequantized once (per-thread buffer) and
 * dotted in fp32 with every token's activations. */
static void matmul_f32(vq_ctx *c, const struct vq_weight *w, const float *x, int64_t n_tok,
                       float *y) {
    const int nt = c->n_threads;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int64_t r = 0; r < w->rows; r++) {
#ifdef _OPENMP
        float *row = c->wrow + (size_t)omp_get_thread_num() * c->wrow_floats;
#else
        float *row = c->wrow;
#endif
        if (w->k->vec_dot_x16) /* repacked 16-row groups (ggml.h) */
            vq_ggml_dequantize_row_x16(
                w->type, (const uint8_t *)w->data + (size_t)(r - r % VQ_X16_ROWS) * w->row_bytes,
                (int)(r % VQ_X16_ROWS), row, w->cols);
        else w->k->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, row, w->cols);
        for (int64_t t = 0; t < n_tok; t++)
            y[t * w->rows + r] = c->dot32->vec_dot(w->cols, row, x + t * w->cols);
    }
}

/* The n_tok rows of x in w's activation format, one per c->act_stride bytes from dst. */
static void quantize_rows(const vq_ctx *c, const struct vq_weight *w, const float *x, int64_t n_tok,
                          void *dst) {
    const int nt = row_threads(c, n_tok * w->cols);
    VQ_OMP_FOR(nt)
    for (int64_t t = 0; t < n_tok; t++)
        vq_ggml_quantize_act_isa(c->p.isa, w->k->act, x + t * w->cols,
                                 (uint8_t *)dst + (size_t)t * c->act_stride, w->cols);
}

/* Kernels whose four-token (gemm) results differ from one-token (gemv) results: Q4_K
 * (ggml.h); a batch of decode rows of several sequences (c->rowwise) runs them row by row. */
static int mm_rowwise(const vq_ctx *c, const struct vq_weight *w) {
    return c->rowwise && w->k->type == VQ_GGML_Q4_K;
}

/* y (n_tok rows, ld floats apart) = x (n_tok, w->cols) W^T, quantizing x into c->act. */
static void mm_ld(vq_ctx *c, const struct vq_weight *w, const float *x, int64_t n_tok, float *y,
                  int64_t ld) {
    quantize_rows(c, w, x, n_tok, c->act);
    const struct vq_ggml_mm_job j = {w->k,    w->data,          w->row_bytes,  w->rows,
                                     w->cols, c->act,           c->act_stride, y,
                                     ld,      mm_rowwise(c, w), NULL};
    vq_ggml_matmul_multi(&j, 1, n_tok, c->n_threads);
}

/* y (n_tok, w->rows) = x (n_tok, w->cols) W^T, quantizing x into c->act first. */
static void matmul(vq_ctx *c, const struct vq_weight *w, const float *x, int64_t n_tok, float *y) {
    if (c->p.f32_activations) {
        matmul_f32(c, w, x, n_tok, y);
        return;
    }
    mm_ld(c, w, x, n_tok, y, w->rows);
}

/* Products sharing one input (q/k/v, gate/up) in one parallel loop; the input is quantized
 * once per activation format (a second format, if any, goes to the upper half of c->act). */
static void matmul_shared(vq_ctx *c, const struct vq_weight *const *ws, float *const *ys, int n,
                          const float *x, int64_t n_tok) {
    struct vq_ggml_mm_job jobs[4];
    int fmt_done[3] = {0, 0, 0};
    const void *fmt_buf[3] = {NULL, NULL, NULL};
    int n_fmt = 0;
    VQ_ASSERT(n <= 4);
    if (c->p.f32_activations) {
        for (int i = 0; i < n; i++) matmul_f32(c, ws[i], x, n_tok, ys[i]);
        return;
    }
    for (int i = 0; i < n; i++) {
        const struct vq_weight *w = ws[i];
        int a = (int)w->k->act;
        if (!fmt_done[a]) {
            /* a second format goes to the second half of each row slot */
            uint8_t *base = (uint8_t *)c->act + (n_fmt ? c->act_stride / 2 : 0);
            VQ_ASSERT(n_fmt < 2 && vq_ggml_act_row_bytes(w->k->act, w->cols) <= c->act_stride / 2);
            quantize_rows(c, w, x, n_tok, base);
            fmt_done[a] = 1;
            fmt_buf[a] = base;
            n_fmt++;
        }
        jobs[i] = (struct vq_ggml_mm_job){w->k,    w->data,          w->row_bytes,  w->rows,
                                          w->cols, fmt_buf[a],       c->act_stride, ys[i],
                                          w->rows, mm_rowwise(c, w), NULL};
    }
    vq_ggml_matmul_multi(jobs, n, n_tok, c->n_threads);
}

static void add_bias(float *y, const float *b, int64_t n_tok, int64_t n) {
    if (!b) return;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b[i];
}

/* cos / sin of the angles of positions p0 .. p0+n-1 for every rope config of the model:
 * theta_i = pos * base^(-2i / rope_dim) as ggml's rope cache computes it (float theta,
 * multiplied by base^(-2 / rope_dim) per pair, times freq_scale, cosf / sinf: llama.cpp's
 * angles bit for bit). */
static void rope_tables(vq_ctx *c, int64_t p0, int64_t n, vq_ctx *const *rows) {
    const vq_model *m = c->m;
    const size_t half = (size_t)m->info.rope_dim / 2;
    for (int r = 0; r < m->n_rope; r++) {
        const float theta_scale = powf(m->rope[r].base, -2.0f / (float)m->info.rope_dim);
        const float fs = m->rope[r].freq_scale;
        for (int64_t t = 0; t < n; t++) {
            float *cs = c->rope_cos + ((size_t)r * (size_t)c->p.n_batch + (size_t)t) * half;
            float *sn = c->rope_sin + ((size_t)r * (size_t)c->p.n_batch + (size_t)t) * half;
            float th = (float)(rows ? rows[t]->n_past : p0 + t); /* batch: each row's own */
            for (size_t i = 0; i < half; i++) {
                cs[i] = cosf(fs * th);
                sn[i] = sinf(fs * th);
                th *= theta_scale;
            }
        }
    }
}

/* Rotates n_heads vectors of head_dim per token (rope_dim leading dims) of the batch's n_tok
 * tokens with the angles of rope config r (rope_tables). */
static void rope(const vq_ctx *c, float *x, int64_t n_tok, int n_heads, int r) {
    const struct vq_model_info *I = &c->m->info;
    const int hd = I->head_dim, half = I->rope_dim / 2;
    const int nt = row_threads(c, n_tok * n_heads * hd);
    VQ_OMP_FOR(nt)
    for (int64_t t = 0; t < n_tok; t++) {
        const size_t row = ((size_t)r * (size_t)c->p.n_batch + (size_t)t) * (size_t)half;
        const float *cs = c->rope_cos + row, *sn = c->rope_sin + row;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * hd;
            if (I->rope_type == VQ_ROPE_NEOX) {
                for (int i = 0; i < half; i++) {
                    float a = v[i], b = v[i + half];
                    v[i] = fmaf(a, cs[i], -(b * sn[i]));
                    v[i + half] = fmaf(a, sn[i], b * cs[i]);
                }
            } else {
                /* x0 cos - x1 sin, x0 sin + x1 cos with the FMAs gcc forms in ggml's rope */
                for (int i = 0; i < half; i++) {
                    float a = v[2 * i], b = v[2 * i + 1];
                    v[2 * i] = fmaf(a, cs[i], -(b * sn[i]));
                    v[2 * i + 1] = fmaf(a, sn[i], b * cs[i]);
                }
            }
        }
    }
}

/* g = act(g) * u over n_tok rows of n_ff, row by row as ggml does: ggml_vec_swiglu_f32 (SiLU)
 * or ggml_vec_geglu_f32 (GELU through the fp16 table). */
static void ffn_gate_act(const vq_ctx *c, float *g, const float *u, int64_t n_tok, int64_t n_ff) {
    const vq_model *m = c->m;
    const int nt = row_threads(c, n_tok * n_ff);
    VQ_OMP_FOR(nt)
    for (int64_t t = 0; t < n_tok; t++) {
        if (m->ffn_act == VQ_FFN_GELU) c->nn->geglu(m->gelu_f16, g + t * n_ff, u + t * n_ff, n_ff);
        else c->nn->swiglu(g + t * n_ff, u + t * n_ff, n_ff);
    }
}

/* Attention of one layer for one row of a batch: token t of the batch, on rows[t]'s cache at
 * its position. */
static vq_status attend_row(vq_ctx *c, vq_ctx *r, int64_t t, int l, float scale) {
    const struct vq_model_info *I = &c->m->info;
    const int64_t NQ = (int64_t)I->n_heads * I->head_dim, NK = (int64_t)I->n_kv_heads * I->head_dim;
    float *q = c->q + t * NQ;
    if (r->p.cache.key_scales == 2 || r->p.cache.key_channel_bits)
        VQ_RETURN_IF_ERR(vq_cache_observe_queries(r->cache, l, q, I->n_heads, 1));
    VQ_RETURN_IF_ERR(vq_cache_append(r->cache, l, c->k + t * NK, c->v + t * NK, VQ_DTYPE_F32, 1));
    return vq_cache_attend(r->cache, l, q, I->n_heads, 1, NULL, scale, c->att + t * NQ);
}

/* Attention of one layer for rows of a batch of several sequences (vq_ctx_eval_batch): row t
 * is one token of rows[t], at its position rows[t]->n_past, on its own cache, exactly as a
 * one-token forward pass of rows[t] would run it. The rows run in parallel, one thread each
 * (distinct contexts: no cache is shared); a cache's own parallel regions then run on the one
 * thread (OpenMP nests inactive by default), with the work split its n_threads decides, so
 * the bits are those of the one-token pass. The status is the first failing row's. */
static vq_status attend_rows(vq_ctx *c, vq_ctx *const *rows, int64_t n, int l, float scale) {
    int64_t bad = n;
    vq_status st = VQ_STATUS_OK;
    const int nt = n > 1 ? c->n_threads : 1;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
#endif
    for (int64_t t = 0; t < n; t++) {
        vq_first_error(t, attend_row(c, rows[t], t, l, scale), &bad, &st);
    }
    return st;
}

/* One forward pass over n <= n_batch tokens at positions n_past..; logits may be NULL.
 * rows != NULL: a batch of several sequences in c's buffers (vq_ctx_eval_batch): token t
 * belongs to rows[t] (attention on its cache at its position, attend_rows) and its logits go to
 * row_logits[t]; c's own cache is not touched unless c is one of the rows. */
static vq_status forward(vq_ctx *c, const int32_t *tokens, int64_t n, float *logits,
                         vq_ctx *const *rows, float *const *row_logits) {
    const vq_model *m = c->m;
    const struct vq_model_info *I = &m->info;
    const int64_t E = I->n_embd, HD = I->head_dim;
    const int64_t NQ = (int64_t)I->n_heads * HD, NK = (int64_t)I->n_kv_heads * HD;
    const int64_t p0 = c->n_past;
    /* softmax scale; with q_prescale it is applied to q (fp32, before the fp16 rounding) */
    const float attn_scale = m->q_prescale ? 1.0f : 1.0f / sqrtf((float)HD);
    /* rows carried through the last layer after attention: logits wanted for all, one, none */
    const int64_t n_out = rows ? n : !logits ? 0 : c->p.logits_all ? n : 1;
    int64_t nr = n;
    struct phase_clock pc = {NULL, 0}; /* batches of several sequences are not timed */
    if (!rows) pc = clock_start(c, n);

    for (int64_t t = 0; t < n; t++)
        m->tok_embd.k->to_float(
            (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes,
            c->x + t * E, E);
    if (m->embd_scale != 1.0f)
        for (int64_t i = 0; i < n * E; i++) c->x[i] *= m->embd_scale;
    rope_tables(c, p0, n, rows);

    for (int l = 0; l < I->n_layers; l++) {
        const struct vq_layer *ly = &m->layers[l];
        rmsnorm(c, c->x, ly->attn_norm, c->h, n, E, I->rms_eps);
        lap(&pc, VQ_PHASE_OTHER);
        const struct vq_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
        float *const outs[3] = {c->q, c->k, c->v};
        matmul_shared(c, qkv, outs, 3, c->h, n);
        add_bias(c->q, ly->bq, n, NQ);
        add_bias(c->k, ly->bk, n, NK);
        add_bias(c->v, ly->bv, n, NK);
        lap(&pc, VQ_PHASE_QKV);
        if (ly->q_norm) { /* per head, in place: rows of head_dim */
            rmsnorm(c, c->q, ly->q_norm, c->q, n * I->n_heads, HD, I->rms_eps);
            rmsnorm(c, c->k, ly->k_norm, c->k, n * I->n_kv_heads, HD, I->rms_eps);
        }
        rope(c, c->q, n, I->n_heads, ly->rope);
        rope(c, c->k, n, I->n_kv_heads, ly->rope);
        if (m->q_prescale)
            for (int64_t i = 0; i < n * NQ; i++) c->q[i] *= m->q_scale;
        lap(&pc, VQ_PHASE_OTHER);
        if (rows) {
            VQ_RETURN_IF_ERR(attend_rows(c, rows, n, l, attn_scale));
            lap(&pc, VQ_PHASE_ATTN);
        } else {
            /* query moments for the layer's key scales / per-channel key widths */
            if (c->p.cache.key_scales == 2 || c->p.cache.key_channel_bits)
                VQ_RETURN_IF_ERR(vq_cache_observe_queries(c->cache, l, c->q, I->n_heads, n));
            VQ_RETURN_IF_ERR(vq_cache_append(c->cache, l, c->k, c->v, VQ_DTYPE_F32, n));
            /* plain fp16 layers: llama.cpp's arithmetic inside the cache (vq_cache_attend), windows
         * (layer_window) masked there */
            VQ_RETURN_IF_ERR(
                vq_cache_attend(c->cache, l, c->q, I->n_heads, n, NULL, attn_scale, c->att));
            lap(&pc, VQ_PHASE_ATTN);
            if (c->hook) {
                const struct vq_layer_event ev = {
                    l,          p0,   n,    I->n_heads, I->n_kv_heads, (int)HD,
                    attn_scale, c->q, c->k, c->v,       c->att,        c->cache};
                VQ_RETURN_IF_ERR(c->hook(c->hook_user, &ev));
                lap(&pc, VQ_PHASE_OTHER);
            }
        }
        matmul(c, &ly->wo, c->att, n, c->h);
        lap(&pc, VQ_PHASE_ATTN_OUT);
        if (l == I->n_layers - 1 && n_out < n) {
            /* the last layer's rest only for the rows whose logits are wanted (none or the last),
             * as llama.cpp's inp_out_ids: its matmuls then see the same rows (a K-quant row's
             * result depends on its batch, ggml.h) */
            if (n_out == 0) {
                lap(&pc, VQ_PHASE_OTHER);
                return VQ_STATUS_OK;
            }
            memmove(c->h, c->h + (n - 1) * E, sizeof(float) * (size_t)E);
            memmove(c->x, c->x + (n - 1) * E, sizeof(float) * (size_t)E);
            nr = 1;
        }
        if (ly->attn_post_norm) rmsnorm(c, c->h, ly->attn_post_norm, c->h, nr, E, I->rms_eps);
        for (int64_t i = 0; i < nr * E; i++) c->x[i] += c->h[i];

        rmsnorm(c, c->x, ly->ffn_norm, c->h, nr, E, I->rms_eps);
        lap(&pc, VQ_PHASE_OTHER);
        const struct vq_weight *gu[2] = {&ly->w_gate, &ly->w_up};
        float *const gu_out[2] = {c->g, c->u};
        matmul_shared(c, gu, gu_out, 2, c->h, nr);
        ffn_gate_act(c, c->g, c->u, nr, I->n_ff);
        matmul(c, &ly->w_down, c->g, nr, c->h);
        lap(&pc, VQ_PHASE_FFN);
        if (ly->ffn_post_norm) rmsnorm(c, c->h, ly->ffn_post_norm, c->h, nr, E, I->rms_eps);
        for (int64_t i = 0; i < nr * E; i++) c->x[i] += c->h[i];
    }
    lap(&pc, VQ_PHASE_OTHER);
    if (rows) {
        /* each row's logits to its own buffer: one product when the buffers are equally
         * spaced, else one per row (the output matrix read n times) */
        rmsnorm(c, c->x, m->output_norm, c->h, n, E, I->rms_eps);
        const ptrdiff_t ld = n > 1 ? row_logits[1] - row_logits[0] : I->n_vocab;
        int even = ld >= I->n_vocab;
        for (int64_t t = 1; t < n && even; t++) even = row_logits[t] - row_logits[t - 1] == ld;
        const struct vq_weight *w = &m->output;
        quantize_rows(c, w, c->h, n, c->act);
        const struct vq_ggml_mm_job j = {w->k,
                                         w->data,
                                         w->row_bytes,
                                         w->rows,
                                         w->cols,
                                         c->act,
                                         c->act_stride,
                                         even ? row_logits[0] : NULL,
                                         even ? (int64_t)ld : 0,
                                         even ? mm_rowwise(c, w) : 1,
                                         even ? NULL : row_logits};
        vq_ggml_matmul_multi(&j, 1, n, c->n_threads);
        return VQ_STATUS_OK;
    }
    if (!logits) return VQ_STATUS_OK;
    /* nr rows of logits: all n (logits_all) or the last token's */
    rmsnorm(c, c->x, m->output_norm, c->h, nr, E, I->rms_eps);
    matmul(c, &m->output, c->h, nr, logits);
    lap(&pc, VQ_PHASE_OUTPUT);
    return VQ_STATUS_OK;
}

vq_status vq_ctx_eval(vq_ctx *c, const int32_t *tokens, int64_t n, float *logits) {
    if (!c || !tokens || n < 1) return VQ_STATUS_INVALID_ARG;
    const struct vq_model_info *I = &c->m->info;
    /* the count against the room left first: a wrong, large n must not read past the
     * caller's buffer while the ids are checked */
    if (n > c->p.n_ctx - c->n_past) return VQ_STATUS_CAPACITY;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= I->n_vocab) return VQ_STATUS_INVALID_ARG;
    const int64_t start = c->n_past;
    memcpy(c->ids + start, tokens, (size_t)n * sizeof *tokens); /* positions start.. */
    for (int64_t done = 0; done < n;) {
        int64_t chunk = n - done < c->p.n_batch ? n - done : c->p.n_batch;
        int last = done + chunk == n;
        float *lg = NULL;
        if (logits && c->p.logits_all) lg = logits + done * (int64_t)I->n_vocab;
        else if (logits && last) lg = logits;
        vq_status st = forward(c, tokens + done, chunk, lg, NULL, NULL);
        if (st != VQ_STATUS_OK) {
            /* drop whatever part of the call reached the cache; when the cache cannot cut that
             * far back (outlier-channel statistics of an earlier chunk), drop at least this
             * chunk (the cache keeps a one-step undo for them); if even that fails (a KIVI
             * group that cannot re-open), report what the last layer kept */
            if (vq_cache_truncate(c->cache, start) == VQ_STATUS_OK) c->n_past = start;
            else if (vq_cache_truncate(c->cache, c->n_past) != VQ_STATUS_OK)
                c->n_past = vq_cache_n_tokens(c->cache, I->n_layers - 1);
            return st;
        }
        c->n_past += chunk;
        done += chunk;
    }
    return VQ_STATUS_OK;
}

/* The batch of vq_ctx_eval_batch that fits c's buffers: n <= c's n_batch rows of distinct
 * contexts of c's model, each with room for one more token. */
static vq_status eval_rows(vq_ctx *c, vq_ctx *const *ctxs, const int32_t *tokens, int n,
                           float *const *logits) {
    c->rowwise = 1;
    vq_status st = forward(c, tokens, n, NULL, ctxs, logits);
    c->rowwise = 0;
    for (int i = 0; i < n; i++) {
        vq_ctx *r = ctxs[i];
        if (st == VQ_STATUS_OK) {
            r->ids[r->n_past++] = tokens[i];
            continue;
        }
        /* drop the layers this token reached in every row's cache (a one-token append can
         * always be cut back: the single-token eval relies on the same) */
        if (vq_cache_truncate(r->cache, r->n_past) != VQ_STATUS_OK)
            r->n_past = vq_cache_n_tokens(r->cache, r->m->info.n_layers - 1);
    }
    return st;
}

vq_status vq_ctx_eval_batch(vq_ctx *const *ctxs, const int32_t *tokens, int n,
                            float *const *logits) {
    if (!ctxs || !tokens || !logits || n < 1) return VQ_STATUS_INVALID_ARG;
    for (int i = 0; i < n; i++) {
        const vq_ctx *r = ctxs[i];
        if (!r || !logits[i] || r->m != ctxs[0]->m || tokens[i] < 0 ||
            tokens[i] >= r->m->info.n_vocab)
            return VQ_STATUS_INVALID_ARG;
        for (int j = 0; j < i; j++)
            if (ctxs[j] == r) return VQ_STATUS_INVALID_ARG;
    }
    for (int i = 0; i < n; i++)
        if (ctxs[i]->n_past >= ctxs[i]->p.n_ctx) return VQ_STATUS_CAPACITY;
    vq_ctx *c = ctxs[0];
    /* hooks, exact activations and timings see one sequence per pass: those rows run alone */
    int plain = 1;
    for (int i = 0; i < n; i++)
        if (ctxs[i]->hook || ctxs[i]->p.f32_activations || ctxs[i]->p.timings) plain = 0;
    if (!plain || n == 1) {
        for (int i = 0; i < n; i++)
            VQ_RETURN_IF_ERR(vq_ctx_eval(ctxs[i], &tokens[i], 1, logits[i]));
        return VQ_STATUS_OK;
    }
    for (int done = 0; done < n;) {
        const int chunk = n - done < c->p.n_batch ? n - done : c->p.n_batch;
        VQ_RETURN_IF_ERR(eval_rows(c, ctxs + done, tokens + done, chunk, logits + done));
        done += chunk;
    }
    return VQ_STATUS_OK;
}
