/*
 * model.h — internal view of a loaded model (weights bound by pointer into the GGUF mapping)
 * shared by model.c (loading/validation) and context.c (forward pass). Not public.
 */
#ifndef VQ_ENGINE_MODEL_H
#define VQ_ENGINE_MODEL_H

#include <stdatomic.h>

#include "engine/ggml.h"
#include "engine/gguf.h"
#include "vq_engine.h"

/* One weight matrix: rows of cols elements (ggml ne[1] x ne[0]), used in place. */
struct vq_weight {
    const void *data; /* (rows, row_bytes) in the mapping */
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const struct vq_ggml_kernels *k; /* kernels for the model's ISA */
};

struct vq_layer {
    const float *attn_norm;       /* (n_embd) */
    const float *ffn_norm;        /* (n_embd) */
    const float *q_norm, *k_norm; /* (head_dim) per-head RMSNorm before RoPE or NULL */
    const float *attn_post_norm;  /* (n_embd) RMSNorm of the attention output, or NULL */
    const float *ffn_post_norm;   /* (n_embd) RMSNorm of the FFN output, or NULL */
    /* (n_heads*hd, n_embd), (n_kv*hd, n_embd) x2, (n_embd, n_heads*hd); wq/wk/wv may be
     * consecutive row ranges of one fused attn_qkv tensor (phi3) */
    struct vq_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv; /* (n_heads*hd), (n_kv*hd) x2: biases (qwen2) or NULL */
    /* (n_ff, n_embd) x2, (n_embd, n_ff); w_gate/w_up may be the two halves of one ffn_up
     * tensor of 2*n_ff rows, gate first (phi3) */
    struct vq_weight w_gate, w_up, w_down;
    int rope; /* index into vq_model.rope (1: windowed layer) */
};

/* One RoPE frequency set: theta_i = pos * freq_scale * base^(-2i / rope_dim). */
struct vq_rope_cfg {
    float base;
    float freq_scale;
};

/* FFN activation of the gate: SiLU (SwiGLU) or ggml's tanh-GELU through its fp16 table (GEGLU). */
enum vq_ffn_act { VQ_FFN_SILU = 0, VQ_FFN_GELU = 1 };

struct vq_model {
    vq_gguf *gguf; /* owns the mapping */
    char *path;    /* the file it was loaded from (artifact lookup by its SHA-256) */
    struct vq_model_info info;
    struct vq_weight tok_embd; /* (n_vocab, n_embd) */
    struct vq_weight output;   /* (n_vocab, n_embd); = tok_embd when tied */
    const float *output_norm;  /* (n_embd) */
    struct vq_layer *layers;   /* (n_layers) */
    float *owned;              /* norm/bias vectors converted to fp32 (non-F32 files) */
    /* 1: q is multiplied by q_scale after RoPE and attention runs with scale 1 (llama.cpp's
     * order for phi3: fp16(q * s) . k); 0: attention scale 1/sqrt(head_dim) on the scores */
    int q_prescale;
    float q_scale;
    struct vq_rope_cfg rope[2]; /* full-attention layers, then sliding-window layers */
    int n_rope;                 /* rope configs in use (1 or 2) */
    float embd_scale;           /* token embeddings multiplied by this (1: none) */
    enum vq_ffn_act ffn_act;
    uint16_t *gelu_f16; /* (VQ_GELU_TABLE_LEN) ggml's GELU table for VQ_FFN_GELU, else NULL */
    int *layer_window;  /* (n_layers) attention window W per layer (0: full),
                                            * NULL when no layer has one; the cache's
                                            * vq_cache_params.layer_window */
    /* tokenizer and chat template, created on first use by textgen.c (NULL until then);
     * freed with the model */
    _Atomic(struct vq_model_text *) text;
};

/* Frees what textgen.c attached to a model (NULL: no-op). */
struct vq_model_text;
void vq_model_text_free(struct vq_model_text *t);

/* Records an engine error message for vq_engine_last_error (printf-style). */
void vq_engine_set_error(const char *fmt, ...);
/* Hands calibration sets the context's cache reads to the context, which frees them with
 * itself (vq_ctx_create_kv; NULL entries allowed). */
void vq_ctx_own_calib(vq_ctx *c, vq_calib_data *a, vq_calib_data *b);

#endif
