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

static _Thread_local char g_err[320];

void vq_engine_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

const char *vq_engine_last_error(void) { return g_err; }

const vq_gguf *vq_model_gguf(const vq_model *m) { return m->gguf; }

const struct vq_model_info *vq_model_info_get(const vq_model *m) { return &m->info; }

void vq_model_free(vq_model *m) {
    if (!m) return;
    free(m->layers);
    free(m->owned);
    vq_gguf_close(m->gguf);
    free(m);
}

struct loader {
    vq_model *m;
    size_t owned_used, owned_cap;
};

static vq_status get_u32_req(const vq_gguf *g, const char *arch, const char *suffix, uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_u32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) vq_engine_set_error("model: missing metadata '%s'", key);
    else if (st != VQ_STATUS_OK) vq_engine_set_error("model: metadata '%s' has the wrong type", key);
    return st;
}

static vq_status get_u32_opt(const vq_gguf *g, const char *arch, const char *suffix, uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_u32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) return VQ_STATUS_OK;
    if (st != VQ_STATUS_OK) vq_engine_set_error("model: metadata '%s' has the wrong type", key);
    return st;
}

static vq_status get_f32_opt(const vq_gguf *g, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    vq_status st = vq_gguf_get_f32(g, key, out);
    if (st == VQ_STATUS_NOT_FOUND) return VQ_STATUS_OK;
    if (st != VQ_STATUS_OK || !isfinite(*out)) {
        vq_engine_set_error("model: metadata '%s' has the wrong type or is not finite", key);
        return VQ_STATUS_BAD_FORMAT;
    }
    return VQ_STATUS_OK;
}

/* Finds a 2-D weight named name with ne = (cols, rows); checks its type has kernels. */
static vq_status bind_matrix(const vq_model *m, const char *name, int64_t rows, int64_t cols,
                             enum vq_isa isa, struct vq_weight *w) {
    const struct vq_gguf_tensor *t = vq_gguf_tensor_find(m->gguf, name);
    if (!t) { vq_engine_set_error("model: missing tensor '%s'", name); return VQ_STATUS_BAD_FORMAT; }
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 || t->ne[3] != 1) {
        vq_engine_set_error("model: tensor '%s' has shape [%llu, %llu, %llu], expected [%lld, %lld]",
                            name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                            (unsigned long long)t->ne[2], (long long)cols, (long long)rows);
        return VQ_STATUS_BAD_FORMAT;
    }
    const struct vq_ggml_kernels *k = vq_ggml_kernels(t->type, isa);
    if (!k) {
        vq_engine_set_error("model: tensor '%s' has ggml type %u (%s), which the engine does not support",
                            name, t->type, vq_ggml_type_name(t->type));
        return VQ_STATUS_UNSUPPORTED;
    }
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(t->type);
    w->data = t->data;
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)(cols / ti->block_size) * (size_t)ti->type_size;
    w->k = k;
    return VQ_STATUS_OK;
}

/* Binds a 1-D fp32 vector (norm weight, bias) of n elements; other float/quant types are
 * converted once into the model-owned buffer. optional: absent -> *out = NULL, OK. */
static vq_status bind_vector(struct loader *L, const char *name, int64_t n, int optional,
                             const float **out) {
    vq_model *m = L->m;
    const struct vq_gguf_tensor *t = vq_gguf_tensor_find(m->gguf, name);
    *out = NULL;
    if (!t) {
        if (optional) return VQ_STATUS_OK;
        vq_engine_set_error("model: missing tensor '%s'", name);
        return VQ_STATUS_BAD_FORMAT;
    }
    if (t->ne[0] != (uint64_t)n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1) {
        vq_engine_set_error("model: tensor '%s' has %llu elements, expected %lld", name,
                            (unsigned long long)t->ne[0], (long long)n);
        return VQ_STATUS_BAD_FORMAT;
    }
    const struct vq_ggml_kernels *k = vq_ggml_kernels(t->type, VQ_ISA_SCALAR);
    if (!k) {
        vq_engine_set_error("model: tensor '%s' has unsupported ggml type %u (%s)", name, t->type,
                            vq_ggml_type_name(t->type));
        return VQ_STATUS_UNSUPPORTED;
    }
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
        if (!isfinite((*out)[i])) {
            vq_engine_set_error("model: tensor '%s' holds a non-finite value at %lld", name, (long long)i);
            return VQ_STATUS_BAD_FORMAT;
        }
    return VQ_STATUS_OK;
}

static vq_status load_hparams(vq_model *m) {
    const vq_gguf *g = m->gguf;
    struct vq_model_info *I = &m->info;
    struct vq_gguf_str s;
    if (vq_gguf_get_str(g, "general.architecture", &s) != VQ_STATUS_OK) {
        vq_engine_set_error("model: missing string 'general.architecture'");
        return VQ_STATUS_BAD_FORMAT;
    }
    if (s.len >= sizeof I->arch) s.len = sizeof I->arch - 1;
    memcpy(I->arch, s.ptr, (size_t)s.len);
    I->arch[s.len] = 0;
    if (strlen(I->arch) != s.len) { vq_engine_set_error("model: architecture name holds a NUL"); return VQ_STATUS_BAD_FORMAT; }
    if (!strcmp(I->arch, "llama")) {
        I->rope_type = VQ_ROPE_NORM;
    } else if (!strcmp(I->arch, "qwen2")) {
        I->rope_type = VQ_ROPE_NEOX;
    } else {
        vq_engine_set_error("model: architecture '%s' is not supported (llama, qwen2)", I->arch);
        return VQ_STATUS_UNSUPPORTED;
    }
    if (vq_gguf_get_str(g, "general.name", &s) == VQ_STATUS_OK) {
        size_t n = s.len < sizeof I->name - 1 ? (size_t)s.len : sizeof I->name - 1;
        memcpy(I->name, s.ptr, n);
        I->name[n] = 0;
        for (size_t i = 0; i < n; i++) if ((unsigned char)I->name[i] < 32) I->name[i] = ' ';
    }
    uint32_t n_layers, n_embd, n_ff, n_heads, n_kv = 0, ctx_train = 0, key_len = 0, val_len = 0, rope_dim = 0, ftype = 0;
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
    if (n_kv == 0) n_kv = n_heads;
    if (n_layers < 1 || n_layers > 1024 || n_embd < 1 || n_embd > 65536 || n_ff < 1 ||
        n_ff > 1048576 || n_heads < 1 || n_heads > 1024 || n_kv < 1 || n_heads % n_kv) {
        vq_engine_set_error("model: implausible hyper-parameters (layers %u, embd %u, ff %u, heads %u, kv heads %u)",
                            n_layers, n_embd, n_ff, n_heads, n_kv);
        return VQ_STATUS_BAD_FORMAT;
    }
    uint32_t hd = key_len ? key_len : n_embd / n_heads;
    if ((!key_len && n_embd % n_heads) || (val_len && val_len != hd) || hd < 2 || hd > 1024 || hd % 2) {
        vq_engine_set_error("model: unsupported head geometry (embd %u, heads %u, key_length %u, value_length %u)",
                            n_embd, n_heads, key_len, val_len);
        return VQ_STATUS_UNSUPPORTED;
    }
    if (rope_dim == 0) rope_dim = hd;
    if (rope_dim > hd || rope_dim % 2) {
        vq_engine_set_error("model: rope.dimension_count %u invalid for head_dim %u", rope_dim, hd);
        return VQ_STATUS_BAD_FORMAT;
    }
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
    if (!(I->rope_theta > 1.0f) || !(I->rms_eps > 0.0f) || I->rms_eps > 1.0f) {
        vq_engine_set_error("model: rope.freq_base %g or rms epsilon %g out of range", I->rope_theta, I->rms_eps);
        return VQ_STATUS_BAD_FORMAT;
    }
    return VQ_STATUS_OK;
}

static vq_status load_tensors(struct loader *L, enum vq_isa isa) {
    vq_model *m = L->m;
    struct vq_model_info *I = &m->info;
    const struct vq_gguf_tensor *te = vq_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!te) { vq_engine_set_error("model: missing tensor 'token_embd.weight'"); return VQ_STATUS_BAD_FORMAT; }
    if (te->ne[1] < 1 || te->ne[1] > (1u << 24)) { vq_engine_set_error("model: vocabulary size %llu out of range", (unsigned long long)te->ne[1]); return VQ_STATUS_BAD_FORMAT; }
    I->n_vocab = (int)te->ne[1];
    const int64_t E = I->n_embd, HD = I->head_dim, NQ = (int64_t)I->n_heads * HD, NK = (int64_t)I->n_kv_heads * HD;
    VQ_RETURN_IF_ERR(bind_matrix(m, "token_embd.weight", I->n_vocab, E, isa, &m->tok_embd));
    if (vq_gguf_tensor_find(m->gguf, "output.weight")) {
        VQ_RETURN_IF_ERR(bind_matrix(m, "output.weight", I->n_vocab, E, isa, &m->output));
        I->tied_embeddings = 0;
    } else {
        m->output = m->tok_embd;
        I->tied_embeddings = 1;
    }
    VQ_RETURN_IF_ERR(bind_vector(L, "output_norm.weight", E, 0, &m->output_norm));
    m->layers = calloc((size_t)I->n_layers, sizeof *m->layers);
    if (!m->layers) { vq_engine_set_error("model: out of memory"); return VQ_STATUS_NO_MEMORY; }
    int n_bias = 0;
    for (int l = 0; l < I->n_layers; l++) {
        struct vq_layer *ly = &m->layers[l];
        char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), nm)
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_norm.weight"), E, 0, &ly->attn_norm));
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("ffn_norm.weight"), E, 0, &ly->ffn_norm));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_q.weight"), NQ, E, isa, &ly->wq));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_k.weight"), NK, E, isa, &ly->wk));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_v.weight"), NK, E, isa, &ly->wv));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("attn_output.weight"), E, NQ, isa, &ly->wo));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_gate.weight"), I->n_ff, E, isa, &ly->w_gate));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_up.weight"), I->n_ff, E, isa, &ly->w_up));
        VQ_RETURN_IF_ERR(bind_matrix(m, NAME("ffn_down.weight"), E, I->n_ff, isa, &ly->w_down));
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_q.bias"), NQ, 1, &ly->bq));
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_k.bias"), NK, 1, &ly->bk));
        VQ_RETURN_IF_ERR(bind_vector(L, NAME("attn_v.bias"), NK, 1, &ly->bv));
#undef NAME
        n_bias += (ly->bq != NULL) + (ly->bk != NULL) + (ly->bv != NULL);
        /* every activation row fed to a quantized weight must fill whole activation blocks */
        const struct vq_weight *ws[] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->w_gate, &ly->w_up, &ly->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            int64_t bs = ws[i]->k->act == VQ_ACT_Q8A ? 32 : ws[i]->k->act == VQ_ACT_Q8K ? 256 : 1;
            VQ_ASSERT(ws[i]->cols % bs == 0);   /* guaranteed by the ggml block size */
        }
    }
    I->has_qkv_bias = n_bias > 0;
    size_t total = 0;
    for (int64_t i = 0; i < vq_gguf_n_tensors(m->gguf); i++) total += (size_t)vq_gguf_tensor_at(m->gguf, i)->nbytes;
    I->weight_bytes = total;
    return VQ_STATUS_OK;
}

vq_model *vq_model_load(const char *path, vq_status *st) {
    vq_status s = VQ_STATUS_OK;
    if (!path) { vq_engine_set_error("model: NULL path"); if (st) *st = VQ_STATUS_INVALID_ARG; return NULL; }
    vq_model *m = calloc(1, sizeof *m);
    if (!m) { vq_engine_set_error("model: out of memory"); if (st) *st = VQ_STATUS_NO_MEMORY; return NULL; }
    m->gguf = vq_gguf_open(path, &s);
    if (m->gguf) s = vq_gguf_check_values(m->gguf);   /* finite scales and float weights */
    if (!m->gguf || s != VQ_STATUS_OK) {
        vq_engine_set_error("%s", vq_gguf_last_error());
        vq_gguf_close(m->gguf);
        free(m);
        if (st) *st = s;
        return NULL;
    }
    s = load_hparams(m);
    if (s == VQ_STATUS_OK) {
        /* norms and biases: 2 per layer + output norm + 3 biases per layer */
        struct loader L = {m, 0, 0};
        const struct vq_model_info *I = &m->info;
        L.owned_cap = (size_t)I->n_layers * (2 * (size_t)I->n_embd +
                      (size_t)(I->n_heads + 2 * I->n_kv_heads) * (size_t)I->head_dim) + (size_t)I->n_embd;
        m->owned = malloc(L.owned_cap * sizeof(float));
        if (!m->owned) { vq_engine_set_error("model: out of memory"); s = VQ_STATUS_NO_MEMORY; }
        else s = load_tensors(&L, vq_ggml_isa_default());
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
