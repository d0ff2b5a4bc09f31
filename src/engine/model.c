/*
 * model.c — loads a GGUF model: architecture and hyper-parameters from metadata, every tensor
 * checked for presence, type (kernels exist) and shape before use. Weights stay in the mapping.
 */
#include "engine/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "engine/tokenizer.h"

static _Thread_local char g_err[320];

void vq_engine_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

const char *vq_engine_last_error(void) { return g_err; }

/* Check mode (vq_model_check): set on this thread while a file is checked. */
struct check {
    vq_model_problem_fn fn;
    void *user;
    int n;
    int names_only; /* no usable geometry: tensors are checked for presence only */
};
static _Thread_local struct check *g_check;

/* Records a load problem: the message for vq_engine_last_error and, in check mode, a report to
 * the caller's function. Returns st; in check mode OK when go_on (loading goes on so that every
 * problem is found; the model is never used then). Through fail (go on) and stop (nothing
 * further can be checked). */
static vq_status report(vq_status st, int go_on, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    if (!g_check) return st;
    g_check->n++;
    g_check->fn(g_check->user, g_err);
    return go_on ? VQ_STATUS_OK : st;
}
#define fail(st, ...) report(st, 1, __VA_ARGS__)
#define stop(st, ...) report(st, 0, __VA_ARGS__)

const vq_gguf *vq_model_gguf(const vq_model *m) { return m->gguf; }

const struct vq_model_info *vq_model_info_get(const vq_model *m) { return m ? &m->info : NULL; }

int vq_model_layer_window(const vq_model *m, int layer) {
    if (!m || layer < 0 || layer >= m->info.n_layers) return -1;
    return m->layer_window ? m->layer_window[layer] : 0;
}

void vq_model_free(vq_model *m) {
    if (!m) return;
    vq_model_text_free(atomic_load(&m->text));
    free(m->layers);
    free(m->layer_window);
    free(m->gelu_f16);
    free(m->owned);
    free(m->path);
    vq_gguf_close(m->gguf);
    free(m);
}

struct loader {
    vq_model *m;
    size_t owned_used, owned_cap;
};

static vq_status get_u32_req(const vq_gguf *g, const char *arch, const char *suffix,
                             uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_u32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) return fail(st, "model: missing metadata '%s'", key);
    if (st != VQ_STATUS_OK) return fail(st, "model: metadata '%s' has the wrong type", key);
    return st;
}

static vq_status get_u32_opt(const vq_gguf *g, const char *arch, const char *suffix,
                             uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_u32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) return VQ_STATUS_OK;
    if (st != VQ_STATUS_OK) return fail(st, "model: metadata '%s' has the wrong type", key);
    return st;
}

static vq_status get_f32_opt(const vq_gguf *g, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_f32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) return VQ_STATUS_OK;
    if (st != VQ_STATUS_OK || !isfinite(*out))
        return fail(VQ_STATUS_BAD_FORMAT,
                    "model: metadata '%s' has the wrong type or is not "
                    "finite",
                    key);
    return VQ_STATUS_OK;
}

/* The kernels read weights in place through block structs and float pointers, so a tensor's
 * data must start at a multiple of its element or block alignment: 4 bytes when the type's
 * size is a multiple of 4 (f32, q4_1, q5_1, ...), else 2 (f16, q4_0, q8_0, ...; every block
 * opens with an fp16 scale). A file with general.alignment 1 or 2 can place data where that
 * fails; it is refused naming the tensor (a load through misaligned pointers is undefined). */
static vq_status check_data_alignment(const char *name, const struct vq_gguf_tensor *t) {
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type);
    if (!ti) return VQ_STATUS_OK; /* unknown types are reported by the callers */
    const unsigned need = ti->type_size % 4 == 0 ? 4u : ti->type_size % 2 == 0 ? 2u : 1u;
    if ((uintptr_t)t->data % need == 0) return VQ_STATUS_OK;
    return fail(VQ_STATUS_UNSUPPORTED,
                "model: tensor '%s' (%s) data at offset %llu of the data section is not a "
                "multiple of %u bytes (general.alignment too small): the kernels read it in "
                "place and need that alignment",
                name, ti->name, (unsigned long long)t->offset, need);
}

/* Finds a 2-D weight named name with ne = (cols, rows); checks its type has kernels. */
static vq_status bind_matrix(const vq_model *m, const char *name, int64_t rows, int64_t cols,
                             enum vq_isa isa, struct vq_weight *w) {
    const struct vq_gguf_tensor *t = vq_gguf_tensor_find(m->gguf, name);
    if (!t) return fail(VQ_STATUS_BAD_FORMAT, "model: missing tensor '%s'", name);
    if (g_check && g_check->names_only) return VQ_STATUS_OK;
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(VQ_STATUS_BAD_FORMAT,
                    "model: tensor '%s' has shape [%llu, %llu, %llu], "
                    "expected [%lld, %lld]",
                    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                    (unsigned long long)t->ne[2], (long long)cols, (long long)rows);
    const struct vq_ggml_kernels *k = vq_ggml_kernels(t->type, isa);
    if (!k && g_check) return VQ_STATUS_OK; /* reported once per type by vq_model_check */
    if (!k)
        return fail(VQ_STATUS_UNSUPPORTED,
                    "model: tensor '%s' has ggml type %u (%s), which the "
                    "engine does not support",
                    name, t->type, vq_ggml_type_name(t->type));
    VQ_RETURN_IF_ERR(check_data_alignment(name, t));
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type);
    w->data = t->data;
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)(cols / ti->block_size) * (size_t)ti->type_size;
    w->k = k;
    return VQ_STATUS_OK;
}

/* The n rows r0 .. r0+n-1 of w as a weight of their own (rows are contiguous in the file). */
static struct vq_weight weight_rows(const struct vq_weight *w, int64_t r0, int64_t n) {
    struct vq_weight v = *w;
    v.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    v.rows = n;
    return v;
}

/* Binds a 1-D fp32 vector (norm weight, bias) of n elements; other float/quant types are
 * converted once into the model-owned buffer. optional: absent -> *out = NULL, OK. */
static vq_status bind_vector(struct loader *L, const char *name, int64_t n, int optional,
                             const float **out) {
    vq_model *m = L->m;
    const struct vq_gguf_tensor *t = vq_gguf_tensor_find(m->gguf, name);
    *out = NULL;
    if (!t && optional) return VQ_STATUS_OK;
    if (!t) return fail(VQ_STATUS_BAD_FORMAT, "model: missing tensor '%s'", name);
    if (g_check && g_check->names_only) return VQ_STATUS_OK;
    if (t->ne[0] != (uint64_t)n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(VQ_STATUS_BAD_FORMAT, "model: tensor '%s' has %llu elements, expected %lld",
                    name, (unsigned long long)t->ne[0], (long long)n);
    const struct vq_ggml_kernels *k = vq_ggml_kernels(t->type, VQ_ISA_SCALAR);
    if (!k && g_check) return VQ_STATUS_OK; /* reported once per type by vq_model_check */
    if (!k)
        return fail(VQ_STATUS_UNSUPPORTED, "model: tensor '%s' has unsupported ggml type %u (%s)",
                    name, t->type, vq_ggml_type_name(t->type));
    VQ_RETURN_IF_ERR(check_data_alignment(name, t));
    float *dst;
    if (t->type == VQ_GGML_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        dst = NULL;
    } else {
        if (L->owned_used + (size_t)n > L->owned_cap) {
            vq_engine_set_error("model: internal vector budget exceeded");
            return VQ_STATUS_INTERNAL;
        }
        dst = m->owned + L->owned_used;
        L->owned_used += (size_t)n;
        k->to_float(t->data, dst, n);
        *out = dst;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((*out)[i]))
            return fail(VQ_STATUS_BAD_FORMAT, "model: tensor '%s' holds a non-finite value at %lld",
                        name, (long long)i);
    return VQ_STATUS_OK;
}

/* ---- architectures -------------------------------------------------------------------
 * What differs between the supported architectures, as data (llama.cpp src/models/<arch>.cpp).
 * Every one has RMSNorm, GQA attention with RoPE and a SiLU-gated FFN; q/k/v come from three
 * tensors or from one fused attn_qkv (any architecture, as llama.cpp's create_tensor_qkv). */
enum {
    ARCH_QK_NORM = 1,       /* attn_q_norm / attn_k_norm (head_dim): RMSNorm per head before RoPE */
    ARCH_Q_PRESCALE = 2,    /* q scaled by 1/sqrt(head_dim) after RoPE, attention scale 1 */
    ARCH_GATE_UP_FUSED = 4, /* ffn_up holds 2*n_ff rows, gate first; no ffn_gate (LLM_FFN_SWIGLU) */
    ARCH_SWA = 8, /* {arch}.attention.sliding_window W > 0 windows the layers of swa_pattern */
    ARCH_EMBD_SCALE = 16, /* token embeddings multiplied by sqrtf(n_embd) */
    ARCH_POST_NORMS = 32, /* post_attention_norm / post_ffw_norm: RMSNorm of each sub-block's
                             * output before it is added to the residual stream */
    ARCH_GELU = 64,       /* GELU-gated FFN (GEGLU) instead of SwiGLU */
};

struct arch_desc {
    const char *name;
    enum vq_rope_type rope;
    unsigned flags;
    /* ARCH_SWA: default layer pattern P (llama.cpp's set_swa_pattern): layer l is windowed when
     * l % P < P - 1 (the last of every P layers attends fully); P = 0: every layer windowed.
     * {arch}.attention.sliding_window_pattern (a number or one bool per layer) overrides it. */
    int swa_pattern;
    float rope_base_swa; /* RoPE base of windowed layers without {arch}.rope.freq_base_swa
                             * (0: the file's rope.freq_base) */
};

#define ARCH_NAMES "llama, qwen2, qwen3, phi3, gemma3"
/* Windows: llama.cpp's llama graph ignores llama.attention.sliding_window, but Mistral-style
 * files carry it and mean it (every layer); phi3.attention.sliding_window is not applied, as
 * llama.cpp disables Phi-3's window (src/models/phi3.cpp, "Phi SWA is currently disabled"). */
static const struct arch_desc g_archs[] = {
    {"llama", VQ_ROPE_NORM, ARCH_SWA, 0, 0},
    {"qwen2", VQ_ROPE_NEOX, 0, 0, 0}, /* + optional q/k/v biases */
    {"qwen3", VQ_ROPE_NEOX, ARCH_QK_NORM, 0, 0},
    {"phi3", VQ_ROPE_NEOX, ARCH_GATE_UP_FUSED | ARCH_Q_PRESCALE, 0, 0}, /* + fused attn_qkv */
    {"gemma3", VQ_ROPE_NEOX,
     ARCH_QK_NORM | ARCH_Q_PRESCALE | ARCH_EMBD_SCALE | ARCH_POST_NORMS | ARCH_GELU | ARCH_SWA, 6,
     10000.0f},
};

static const struct arch_desc *arch_find(const char *name) {
    for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++)
        if (!strcmp(g_archs[i].name, name)) return &g_archs[i];
    return NULL;
}

/* Which layers use the sliding window info.swa_window (> 0): the pattern metadata or the
 * architecture's default; fills m->layer_window (n_layers), layers[l].rope (1: windowed) and
 * info.n_swa_layers. */
static vq_status load_swa(vq_model *m, const struct arch_desc *ad) {
    struct vq_model_info *I = &m->info;
    char key[128];
    uint32_t pat = (uint32_t)ad->swa_pattern;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", I->arch);
    const struct vq_gguf_kv *kv = vq_gguf_find(m->gguf, key);
    const uint8_t *per_layer = NULL;
    if (kv && kv->type == VQ_GGUF_ARRAY) {
        if (kv->arr_type != VQ_GGUF_BOOL || kv->arr_count != (uint64_t)I->n_layers)
            return fail(VQ_STATUS_BAD_FORMAT, "model: '%s' must hold one bool per layer", key);
        per_layer = kv->data;
    } else if (kv && vq_gguf_get_u32(m->gguf, key, &pat) != VQ_STATUS_OK) {
        return fail(VQ_STATUS_BAD_FORMAT, "model: metadata '%s' has the wrong type", key);
    }
    m->layer_window = malloc(sizeof *m->layer_window * (size_t)I->n_layers);
    if (!m->layer_window) {
        vq_engine_set_error("model: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    I->n_swa_layers = 0;
    for (int l = 0; l < I->n_layers; l++) {
        const int swa = per_layer ? per_layer[l] != 0 : pat == 0 || (uint32_t)l % pat < pat - 1;
        m->layer_window[l] = swa ? I->swa_window : 0;
        m->layers[l].rope = swa && I->rope_theta_swa != I->rope_theta;
        I->n_swa_layers += swa;
    }
    if (!I->n_swa_layers) I->swa_window = 0;
    if (I->n_swa_layers && I->rope_theta_swa != I->rope_theta) m->n_rope = 2;
    return VQ_STATUS_OK;
}

static vq_status load_hparams(vq_model *m) {
    const vq_gguf *g = m->gguf;
    struct vq_model_info *I = &m->info;
    struct vq_gguf_str s;
    if (vq_gguf_get_str(g, "general.architecture", &s) != VQ_STATUS_OK) {
        return stop(VQ_STATUS_BAD_FORMAT, "model: missing string 'general.architecture'");
    }
    if (s.len >= sizeof I->arch) s.len = sizeof I->arch - 1;
    memcpy(I->arch, s.ptr, (size_t)s.len);
    I->arch[s.len] = 0;
    if (strlen(I->arch) != s.len)
        return stop(VQ_STATUS_BAD_FORMAT, "model: architecture name holds a NUL");
    const struct arch_desc *ad = arch_find(I->arch);
    if (!ad) { /* check mode goes on with the llama layout (what the engine would need) */
        VQ_RETURN_IF_ERR(fail(VQ_STATUS_UNSUPPORTED,
                              "model: architecture '%s' is not supported "
                              "(%s)%s",
                              I->arch, ARCH_NAMES,
                              g_check ? "; checked against the llama layout" : ""));
        ad = &g_archs[0];
    }
    I->rope_type = ad->rope;
    if (vq_gguf_get_str(g, "general.name", &s) == VQ_STATUS_OK) {
        size_t n = s.len < sizeof I->name - 1 ? (size_t)s.len : sizeof I->name - 1;
        memcpy(I->name, s.ptr, n);
        I->name[n] = 0;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)I->name[i] < 32) I->name[i] = ' ';
    }
    uint32_t n_layers, n_embd, n_ff, n_heads, n_kv = 0, ctx_train = 0, key_len = 0, val_len = 0,
                                              rope_dim = 0, ftype = 0;
    const int n_reported = g_check ? g_check->n : 0;
    VQ_RETURN_IF_ERR(get_u32_req(g, I->arch, "block_count", &n_layers));
    VQ_RETURN_IF_ERR(get_u32_req(g, I->arch, "embedding_length", &n_embd));
    VQ_RETURN_IF_ERR(get_u32_req(g, I->arch, "feed_forward_length", &n_ff));
    VQ_RETURN_IF_ERR(get_u32_req(g, I->arch, "attention.head_count", &n_heads));
    VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "attention.head_count_kv", &n_kv));
    VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "context_length", &ctx_train));
    VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "attention.key_length", &key_len));
    VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "attention.value_length", &val_len));
    VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "rope.dimension_count", &rope_dim));
    if (vq_gguf_get_u32(g, "general.file_type", &ftype) != VQ_STATUS_OK) ftype = 0;
    if (g_check && g_check->n > n_reported) return VQ_STATUS_BAD_FORMAT; /* no geometry */
    if (n_kv == 0) n_kv = n_heads;
    if (n_layers < 1 || n_layers > 1024 || n_embd < 1 || n_embd > 65536 || n_ff < 1 ||
        n_ff > 1048576 || n_heads < 1 || n_heads > 1024 || n_kv < 1 || n_heads % n_kv)
        return stop(VQ_STATUS_BAD_FORMAT,
                    "model: implausible hyper-parameters (layers %u, embd %u, "
                    "ff %u, heads %u, kv heads %u)",
                    n_layers, n_embd, n_ff, n_heads, n_kv);
    uint32_t hd = key_len ? key_len : n_embd / n_heads;
    if ((!key_len && n_embd % n_heads) || (val_len && val_len != hd) || hd < 2 || hd > 1024 ||
        hd % 2)
        return stop(VQ_STATUS_UNSUPPORTED,
                    "model: unsupported head geometry (embd %u, heads %u, "
                    "key_length %u, value_length %u)",
                    n_embd, n_heads, key_len, val_len);
    if (rope_dim == 0) rope_dim = hd;
    if (rope_dim > hd || rope_dim % 2)
        return stop(VQ_STATUS_BAD_FORMAT, "model: rope.dimension_count %u invalid for head_dim %u",
                    rope_dim, hd);
    I->n_layers = (int)n_layers;
    I->n_embd = (int)n_embd;
    I->n_ff = (int)n_ff;
    I->n_heads = (int)n_heads;
    I->n_kv_heads = (int)n_kv;
    I->head_dim = (int)hd;
    I->rope_dim = (int)rope_dim;
    I->n_ctx_train = ctx_train ? ctx_train : 2048;
    I->file_type = ftype;
    I->rope_theta = 10000.0f;
    I->rms_eps = 1e-5f;
    VQ_RETURN_IF_ERR(get_f32_opt(g, I->arch, "rope.freq_base", &I->rope_theta));
    VQ_RETURN_IF_ERR(get_f32_opt(g, I->arch, "attention.layer_norm_rms_epsilon", &I->rms_eps));
    if (!(I->rope_theta > 1.0f) || !(I->rms_eps > 0.0f) || I->rms_eps > 1.0f)
        return stop(VQ_STATUS_BAD_FORMAT, "model: rope.freq_base %g or rms epsilon %g out of range",
                    I->rope_theta, I->rms_eps);
    if (ad->flags & ARCH_SWA) { /* W: a query at p attends to p-W+1 .. p (llama.cpp's SWA) */
        uint32_t w = 0;
        VQ_RETURN_IF_ERR(get_u32_opt(g, I->arch, "attention.sliding_window", &w));
        if (w > (1u << 24))
            return stop(VQ_STATUS_BAD_FORMAT, "model: %s.attention.sliding_window %u out of range",
                        I->arch, w);
        I->swa_window = (int)w; /* which layers: load_swa */
    }
    float rope_factor = 0;
    I->rope_theta_swa = ad->rope_base_swa > 0 ? ad->rope_base_swa : I->rope_theta;
    VQ_RETURN_IF_ERR(get_f32_opt(g, I->arch, "rope.freq_base_swa", &I->rope_theta_swa));
    VQ_RETURN_IF_ERR(get_f32_opt(g, I->arch, "rope.scaling.factor", &rope_factor));
    if (!(I->rope_theta_swa > 1.0f) || rope_factor < 0 || rope_factor > 1024)
        return stop(VQ_STATUS_BAD_FORMAT,
                    "model: rope.freq_base_swa %g or rope.scaling.factor %g "
                    "out of range",
                    I->rope_theta_swa, rope_factor);
    /* the full-attention layers take the file's linear scaling; windowed layers never do
     * (llama.cpp's rope_freq_scale_train_swa) */
    m->rope[0] = (struct vq_rope_cfg){I->rope_theta, rope_factor > 0 ? 1.0f / rope_factor : 1.0f};
    m->rope[1] = (struct vq_rope_cfg){I->rope_theta_swa, 1.0f};
    m->n_rope = 1;
    m->embd_scale = ad->flags & ARCH_EMBD_SCALE ? sqrtf((float)I->n_embd) : 1.0f;
    m->ffn_act = ad->flags & ARCH_GELU ? VQ_FFN_GELU : VQ_FFN_SILU;
    m->q_prescale = (ad->flags & ARCH_Q_PRESCALE) != 0;
    m->q_scale = 1.0f / sqrtf((float)I->head_dim);
    I->has_qk_norm = (ad->flags & ARCH_QK_NORM) != 0;
    return VQ_STATUS_OK;
}

static vq_status load_tensors(struct loader *L, enum vq_isa isa) {
    vq_model *m = L->m;
    struct vq_model_info *I = &m->info;
    const struct arch_desc *ad = arch_find(I->arch);
    const unsigned flags = ad ? ad->flags : 0; /* unknown: check mode, llama layout */
    const struct vq_gguf_tensor *te = vq_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (g_check && g_check->names_only) {
        if (!te) fail(VQ_STATUS_BAD_FORMAT, "model: missing tensor 'token_embd.weight'");
    } else {
        if (!te) return stop(VQ_STATUS_BAD_FORMAT, "model: missing tensor 'token_embd.weight'");
        if (te->ne[1] < 1 || te->ne[1] > (1u << 24))
            return stop(VQ_STATUS_BAD_FORMAT, "model: vocabulary size %llu out of range",
                        (unsigned long long)te->ne[1]);
        I->n_vocab = (int)te->ne[1];
    }
    const int64_t E = I->n_embd, HD = I->head_dim, NQ = (int64_t)I->n_heads * HD,
                  NK = (int64_t)I->n_kv_heads * HD;
    VQ_RETURN_IF_ERR(bind_matrix(m, "token_embd.weight", I->n_vocab, E, isa, &m->tok_embd));
    if (vq_gguf_tensor_find(m->gguf, "output.weight")) {
        VQ_RETURN_IF_ERR(bind_matrix(m, "output.weight", I->n_vocab, E, isa, &m->output));
        I->tied_embeddings = 0;
    } else {
        m->output = m->tok_embd;
        I->tied_embeddings = 1;
    }
    VQ_RETURN_IF_ERR(bind_vector(L, "output_norm.weight", E, 0, &m->output_norm));
    /* per-frequency RoPE factors (Llama 3.x rope_freqs, Phi-3 LongRoPE) divide every angle in
     * llama.cpp; the engine's RoPE has no such factors, so it refuses rather than differ */
    static const char *const rope_factors[] = {"rope_freqs.weight", "rope_factors_long.weight",
                                               "rope_factors_short.weight"};
    for (size_t i = 0; i < sizeof rope_factors / sizeof rope_factors[0]; i++)
        if (vq_gguf_tensor_find(m->gguf, rope_factors[i]))
            VQ_RETURN_IF_ERR(fail(VQ_STATUS_UNSUPPORTED,
                                  "model: tensor '%s' (RoPE frequency "
                                  "factors) is not supported",
                                  rope_factors[i]));
    m->layers = calloc((size_t)I->n_layers, sizeof *m->layers);
    if (!m->layers) {
        vq_engine_set_error("model: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    if (ad && I->swa_window) VQ_RETURN_IF_ERR(load_swa(m, ad));
    if (m->ffn_act == VQ_FFN_GELU) {
        m->gelu_f16 = malloc(VQ_GELU_TABLE_LEN * sizeof *m->gelu_f16);
        if (!m->gelu_f16) {
            vq_engine_set_error("model: out of memory");
            return VQ_STATUS_NO_MEMORY;
        }
        vq_ggml_gelu_table_init(m->gelu_f16);
    }
    int n_bias = 0;
    for (int l = 0; l < I->n_layers; l++) {
        struct vq_layer *ly = &m->layers[l];
        char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), nm)
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_norm.weight"), E, 0, &ly->attn_norm));
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("ffn_norm.weight"), E, 0, &ly->ffn_norm));
        if (vq_gguf_tensor_find(m->gguf, NAME("attn_qkv.weight"))) {
            /* fused: rows q (NQ), k (NK), v (NK); bias fused alike, or separate */
            struct vq_weight qkv;
            VQ_RETURN_IF_ERR(bind_matrix(m, nm, NQ + 2 * NK, E, isa, &qkv));
            ly->wq = weight_rows(&qkv, 0, NQ);
            ly->wk = weight_rows(&qkv, NQ, NK);
            ly->wv = weight_rows(&qkv, NQ + NK, NK);
            const float *b;
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_qkv.bias"), NQ + 2 * NK, 1, &b));
            if (b) {
                ly->bq = b;
                ly->bk = b + NQ;
                ly->bv = b + NQ + NK;
            }
            I->fused_qkv = 1;
        } else {
            VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_q.weight"), NQ, E, isa, &ly->wq));
            VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_k.weight"), NK, E, isa, &ly->wk));
            VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_v.weight"), NK, E, isa, &ly->wv));
        }
        if (!ly->bq) {
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_q.bias"), NQ, 1, &ly->bq));
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_k.bias"), NK, 1, &ly->bk));
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_v.bias"), NK, 1, &ly->bv));
        }
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_output.weight"), E, NQ, isa, &ly->wo));
        if (flags & ARCH_QK_NORM) {
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_q_norm.weight"), HD, 0, &ly->q_norm));
            VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_k_norm.weight"), HD, 0, &ly->k_norm));
        }
        if (flags & ARCH_POST_NORMS) {
            VQ_RETURN_IF_ERR(
                bind_vector(L, NAME("post_attention_norm.weight"), E, 0, &ly->attn_post_norm));
            VQ_RETURN_IF_ERR(
                bind_vector(L, NAME("post_ffw_norm.weight"), E, 0, &ly->ffn_post_norm));
        }
        if (flags & ARCH_GATE_UP_FUSED) {
            struct vq_weight gu;
            VQ_RETURN_IF_ERR(
                bind_matrix(m, NAME("ffn_up.weight"), 2 * (int64_t)I->n_ff, E, isa, &gu));
            ly->w_gate = weight_rows(&gu, 0, I->n_ff);
            ly->w_up = weight_rows(&gu, I->n_ff, I->n_ff);
        } else {
            VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_gate.weight"), I->n_ff, E, isa, &ly->w_gate));
            VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_up.weight"), I->n_ff, E, isa, &ly->w_up));
        }
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_down.weight"), E, I->n_ff, isa, &ly->w_down));
#undef NAME
        n_bias += (ly->bq != NULL) + (ly->bk != NULL) + (ly->bv != NULL);
        /* every activation row fed to a quantized weight must fill whole activation blocks */
        const struct vq_weight *ws[] = {&ly->wq,     &ly->wk,   &ly->wv,    &ly->wo,
                                        &ly->w_gate, &ly->w_up, &ly->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0] && ws[i]->k; i++) { /* k NULL: check mode */
            int64_t bs = ws[i]->k->act == VQ_ACT_Q8A ? 32 : ws[i]->k->act == VQ_ACT_Q8K ? 256 : 1;
            VQ_ASSERT(ws[i]->cols % bs == 0); /* guaranteed by the ggml block size */
        }
    }
    I->has_qkv_bias = n_bias > 0;
    I->fused_gate_up = (flags & ARCH_GATE_UP_FUSED) != 0;
    size_t total = 0;
    for (int64_t i = 0; i < vq_gguf_n_tensors(m->gguf); i++)
        total += (size_t)vq_gguf_tensor_at(m->gguf, i)->nbytes;
    I->weight_bytes = total;
    I->step_weight_bytes = total;
    if (!I->tied_embeddings && te) I->step_weight_bytes -= (size_t)te->nbytes;
    return VQ_STATUS_OK;
}

/* Opens path and runs the loader (hyper-parameters, then every tensor) into a new model; on
 * failure the model is freed. In check mode the model comes back half-bound (never use it). */
/* Tensors of layers the file does not declare: "blk.N.*" with N >= block_count. A smaller
 * block_count than the layers present would run the model with layers silently left out.
 * Reports the first such tensor with the count of them (BAD_FORMAT). */
static vq_status check_extra_layers(const vq_model *m) {
    const vq_gguf *g = m->gguf;
    const int nl = m->info.n_layers;
    int64_t count = 0, first = -1;
    int top = -1;
    for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
        const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
        const char *p = t->name.ptr;
        if (t->name.len < 6 || memcmp(p, "blk.", 4) || p[4] < '0' || p[4] > '9') continue;
        long long idx = 0;
        size_t k = 4;
        while (k < t->name.len && p[k] >= '0' && p[k] <= '9' && idx < 1000000)
            idx = idx * 10 + (p[k++] - '0');
        if (idx < nl) continue;
        if (first < 0) first = i;
        if (idx > top) top = (int)idx;
        count++;
    }
    if (first < 0) return VQ_STATUS_OK;
    const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, first);
    return fail(VQ_STATUS_BAD_FORMAT,
                "model: %lld tensor%s of layers beyond %s.block_count = %d (e.g. '%.*s', layers up "
                "to %d): the file holds more layers than it declares",
                (long long)count, count > 1 ? "s" : "", m->info.arch, nl,
                (int)(t->name.len < 120 ? t->name.len : 120), t->name.ptr, top);
}

/* Rewrites the Q4_K / Q6_K layer matrices (and a separate output matrix) that are whole
 * tensors with a multiple of 16 rows into the 16-row groups of the ISA's repacked kernels
 * (ggml.h), in place in the read copy of the file
 * (no extra memory), when that copy is writable (not a file mapping: VQ_WEIGHTS=mmap or no
 * huge pages keep the rows as they are) and the ISA has a vector kernel for the layout. The
 * token embedding (and a tied output) stays in its rows (looked up by token). The results are
 * those of the original rows bit for bit (vec_dot_x16's contract). */
static void repack_weights(vq_model *m, enum vq_isa isa) {
    const char *env = getenv("VQ_REPACK");
    if (env && !strcmp(env, "0")) return;
    int any = 0;
    for (uint32_t ty = VQ_GGML_Q4_K; ty <= VQ_GGML_Q6_K; ty++) {
        const struct vq_ggml_kernels *k16 = vq_ggml_kernels_x16(ty, isa);
        any |= k16 && k16 != vq_ggml_kernels_x16(ty, VQ_ISA_SCALAR);
    }
    if (!any || vq_gguf_set_writable(m->gguf, 1) != 0) return;
    for (int l = -1; l < m->info.n_layers; l++) {
        struct vq_layer *ly = &m->layers[l < 0 ? 0 : l];
        /* l = -1: a separate output matrix (a tied one is the token embedding) */
        struct vq_weight *head[] = {&m->output};
        struct vq_weight *lw[] = {&ly->wq,     &ly->wk,   &ly->wv,    &ly->wo,
                                  &ly->w_gate, &ly->w_up, &ly->w_down};
        struct vq_weight **ws = l < 0 ? head : lw;
        const size_t nw = l < 0 ? (m->output.data != m->tok_embd.data) : 7;
        for (size_t i = 0; i < nw; i++) {
            struct vq_weight *w = ws[i];
            const struct vq_ggml_kernels *k16 = vq_ggml_kernels_x16(w->type, isa);
            if (!k16 || k16 == vq_ggml_kernels_x16(w->type, VQ_ISA_SCALAR) || w->k->vec_dot_x16)
                continue;
            const struct vq_gguf_tensor *t = NULL;
            for (int64_t j = 0; j < vq_gguf_n_tensors(m->gguf) && !t; j++) {
                const struct vq_gguf_tensor *c = vq_gguf_tensor_at(m->gguf, j);
                if (c->data == w->data && c->ne[1] == (uint64_t)w->rows) t = c;
            }
            if (t && vq_ggml_repack_x16(w->type, (void *)(uintptr_t)w->data, w->rows, w->cols) == 0)
                w->k = k16;
        }
    }
    vq_gguf_set_writable(m->gguf, 0);
}

static vq_model *load(const char *path, vq_status *st) {
    vq_status s = VQ_STATUS_OK;
    vq_model *m = calloc(1, sizeof *m);
    if (!m) {
        vq_engine_set_error("model: out of memory");
        *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    /* weights in huge pages unless VQ_WEIGHTS=mmap (a check reads no weights: mapped) */
    const char *wenv = getenv("VQ_WEIGHTS");
    m->gguf = g_check || (wenv && !strcmp(wenv, "mmap")) ? vq_gguf_open(path, &s)
                                                         : vq_gguf_open_read(path, &s);
    if (m->gguf) s = vq_gguf_check_values(m->gguf); /* finite scales and float weights */
    if (m->gguf && s != VQ_STATUS_OK) s = fail(s, "%s", vq_gguf_last_error()); /* check: go on */
    if (!m->gguf || s != VQ_STATUS_OK) {
        vq_engine_set_error("%s", vq_gguf_last_error());
        vq_gguf_close(m->gguf);
        free(m);
        *st = s;
        return NULL;
    }
    s = load_hparams(m);
    uint32_t n_layers = 0;
    if (s != VQ_STATUS_OK && g_check && m->info.arch[0]) {
        /* check mode without a usable geometry: which tensors of the layout are there at all */
        char key[128];
        snprintf(key, sizeof key, "%s.block_count", m->info.arch);
        if (vq_gguf_get_u32(m->gguf, key, &n_layers) != VQ_STATUS_OK || n_layers < 1 ||
            n_layers > 1024)
            n_layers = 1;
        m->info.n_layers = (int)n_layers;
        g_check->names_only = 1;
        struct loader L = {m, 0, 0};
        load_tensors(&L, VQ_ISA_SCALAR);
    } else if (s == VQ_STATUS_OK) {
        /* per layer 2 norms, 3 biases (or one fused) and 2 head norms; + output norm */
        struct loader L = {m, 0, 0};
        const struct vq_model_info *I = &m->info;
        L.owned_cap = (size_t)I->n_layers *
                          (4 * (size_t)I->n_embd +
                           (size_t)(I->n_heads + 2 * I->n_kv_heads + 2) * (size_t)I->head_dim) +
                      (size_t)I->n_embd;
        m->owned = malloc(L.owned_cap * sizeof(float));
        if (!m->owned) {
            vq_engine_set_error("model: out of memory");
            s = VQ_STATUS_NO_MEMORY;
        } else s = load_tensors(&L, vq_ggml_isa_default());
        if (s == VQ_STATUS_OK) s = check_extra_layers(m);
        if (s == VQ_STATUS_OK) repack_weights(m, vq_ggml_isa_default());
    }
    *st = s;
    return m;
}

int vq_model_default_path(char *buf, size_t cap) {
    const char *dir = getenv("VQ_MODELS");
    char tmp[4096];
    int n;
    if (dir && *dir) n = snprintf(tmp, sizeof tmp, "%s/%s", dir, VQ_DEFAULT_MODEL_FILE);
    else {
        const char *home = getenv("HOME");
        n = snprintf(tmp, sizeof tmp, "%s/.cache/veloxquant/models/%s", home ? home : ".",
                     VQ_DEFAULT_MODEL_FILE);
    }
    if (n < 0 || (size_t)n >= sizeof tmp || !buf || (size_t)n + 1 > cap) return -(n + 1);
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}

vq_model *vq_model_load(const char *path, vq_status *st) {
    vq_status s = VQ_STATUS_OK;
    if (!path) {
        vq_engine_set_error("model: NULL path");
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_model *m = load(path, &s);
    if (s == VQ_STATUS_OK && !(m->path = strdup(path))) {
        vq_engine_set_error("model: out of memory");
        s = VQ_STATUS_NO_MEMORY;
    }
    if (s != VQ_STATUS_OK) {
        vq_model_free(m);
        if (st) *st = s;
        return NULL;
    }
    g_err[0] = 0;
    if (st) *st = VQ_STATUS_OK;
    return m;
}

int vq_model_check(const char *path, vq_model_problem_fn fn, void *user) {
    if (!path || !fn) {
        vq_engine_set_error("model: NULL path or report function");
        return -1;
    }
    struct check ck = {fn, user, 0, 0};
    vq_status s;
    g_check = &ck;
    vq_model *m = load(path, &s);
    g_check = NULL;
    if (!m || !m->gguf) {
        vq_model_free(m);
        return -1;
    }                                     /* not readable GGUF: g_err says why */
    if (s != VQ_STATUS_OK && ck.n == 0) { /* a failure no check reported (out of memory) */
        ck.n++;
        fn(user, g_err);
    }
    /* the tokenizer, by the checks generate runs (vq_tok_create and the vocabulary size), when
     * the file has one at all: a file without tokenizer metadata runs through the API on ids */
    const vq_gguf *g = m->gguf;
    vq_status ts;
    const int has_tok = vq_gguf_find(g, "tokenizer.ggml.model") != NULL ||
                        vq_gguf_find(g, "tokenizer.ggml.tokens") != NULL;
    vq_tokenizer *tok = has_tok ? vq_tok_create(g, &ts) : NULL;
    char msg[sizeof g_err + 32];
    if (has_tok && !tok) {
        snprintf(msg, sizeof msg, "model has no usable %s", g_err);
        ck.n++;
        fn(user, msg);
    } else if (tok && s == VQ_STATUS_OK && vq_tok_n_vocab(tok) != m->info.n_vocab) {
        snprintf(msg, sizeof msg,
                 "the tokenizer has %d tokens but the model's vocabulary (token embedding / "
                 "output layer) has %d",
                 vq_tok_n_vocab(tok), m->info.n_vocab);
        ck.n++;
        fn(user, msg);
    }
    vq_tok_free(tok);
    /* every ggml type without engine kernels, once, with its tensor count and an example */
    for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
        const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
        int64_t first = -1, count = 0;
        for (int64_t j = 0; j < vq_gguf_n_tensors(g); j++)
            if (vq_gguf_tensor_at(g, j)->type == t->type) {
                if (first < 0) first = j;
                count++;
            }
        if (first != i || vq_ggml_kernels(t->type, VQ_ISA_SCALAR)) continue;
        snprintf(msg, sizeof msg,
                 "model: %lld tensor%s of ggml type %u (%s), which the engine does not "
                 "support (e.g. '%.*s')",
                 (long long)count, count > 1 ? "s" : "", t->type, vq_ggml_type_name(t->type),
                 (int)(t->name.len < 160 ? t->name.len : 160), t->name.ptr);
        ck.n++;
        fn(user, msg);
    }
    vq_model_free(m);
    g_err[0] = 0;
    return ck.n;
}
