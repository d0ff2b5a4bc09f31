/*
 * vq_engine.h — a small GGUF inference engine whose KV cache is a veloxquant vq_cache.
 *
 * Overview
 *   vq_model_load reads a GGUF file into private memory in 2 MiB huge pages where Linux gives
 *   them (else, or with VQ_WEIGHTS=mmap in the environment, maps it read-only; the weights are
 *   used in place either way, never converted) and validates architecture, hyper-parameters
 *   and every tensor shape/type it needs.
 *   vq_ctx_create allocates everything a forward pass needs once (activations, scratch, RoPE
 *   tables, logits) plus a vq_cache whose geometry (layers, kv heads, head_dim, max_tokens) the
 *   engine fills; the caller picks the K/V methods and bits. vq_ctx_eval runs a batch of tokens
 *   (prefill: many tokens per forward pass, split into chunks of n_batch) or a single token
 *   (decode). Post-RoPE keys/values go to the cache (vq_cache_append) and attention reads the
 *   cache (vq_cache_attend): the engine keeps no full-precision copy of K/V.
 *   Numerics: the engine repeats ggml's CPU arithmetic (Q8_1/Q8_0 activation quantization,
 *   its dot-product and reduction orders, rms_norm, the rope cache, SwiGLU with ggml_v_expf) on
 *   every ISA. Attention is vq_cache_attend for every layer: on a layer whose K and V are
 *   plain fp16 rows the cache computes llama.cpp's arithmetic (q and softmax output rounded to
 *   fp16; tinyBLAS order for chunks of >= 2 tokens, vec_dot_f16 order for a single token; see
 *   veloxquant.h), so an fp16 cache yields llama.cpp's logits; like llama.cpp, results then
 *   depend on whether a prompt chunk holds one token or more.
 *   Architectures: "llama" (SmolLM2, Llama: RoPE on adjacent pairs), "qwen2" (NEOX RoPE,
 *   q/k/v biases), "qwen3" (NEOX, per-head RMSNorm of q and k before RoPE) and "phi3" (NEOX,
 *   fused attn_qkv and gate+up tensors, q scaled before the product as llama.cpp does) and
 *   "gemma3" (NEOX, q/k RMSNorm, q pre-scaled, sliding-window layers with their own RoPE base,
 *   RMSNorm after attention and FFN too, GELU-gated FFN through ggml's fp16 GELU table,
 *   embeddings scaled by sqrt(n_embd)). RMSNorm, GQA, SwiGLU or GEGLU, tied or separate output
 *   head; any of them may store q/k/v fused.
 *
 * Example
 *     vq_status st;
 *     vq_model *m = vq_model_load("SmolLM2-135M-Instruct.Q4_1.gguf", &st);
 *     if (!m) { fprintf(stderr, "%s\n", vq_engine_last_error()); return 1; }
 *     struct vq_ctx_params cp = vq_ctx_params_default();
 *     cp.n_ctx = 512; cp.n_threads = 2;
 *     cp.cache.key.method = VQ_METHOD_TURBOQUANT_MSE; cp.cache.key.bits = 4;
 *     vq_ctx *c = vq_ctx_create(m, &cp, &st);
 *     float *logits = malloc(sizeof(float) * vq_model_info_get(m)->n_vocab);
 *     st = vq_ctx_eval(c, prompt, n_prompt, logits);           // prefill, logits of last token
 *     struct vq_sampler_params sp = vq_sampler_params_default();   // greedy
 *     vq_sampler *s = vq_sampler_create(&sp, vq_model_info_get(m)->n_vocab, &st);
 *     int32_t tok = vq_sampler_sample(s, logits);
 *     st = vq_ctx_eval(c, &tok, 1, logits);                     // decode
 *     vq_sampler_free(s); vq_ctx_free(c); vq_model_free(m);
 *
 * Ownership and threading
 *   Whoever creates a handle frees it; *_free(NULL) is a no-op. A model is immutable after load
 *   and may be shared by any number of contexts in any threads; it must outlive them. A context
 *   or sampler is used by one thread at a time; vq_ctx_eval itself uses n_threads OpenMP threads.
 *
 * Errors
 *   Statuses from veloxquant.h. Load/create failures also leave a message for
 *   vq_engine_last_error() (thread-local). The engine never prints and never exits.
 */
#ifndef VQ_ENGINE_H
#define VQ_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vq_model vq_model;
typedef struct vq_ctx vq_ctx;
typedef struct vq_sampler vq_sampler;

/* RoPE pairing: NORM rotates (x[2i], x[2i+1]) (llama GGUFs); NEOX rotates (x[i], x[i+d/2]). */
enum vq_rope_type { VQ_ROPE_NORM = 0, VQ_ROPE_NEOX = 2 };

struct vq_model_info {
    char arch[32]; /* general.architecture, e.g. "llama" */
    char name[96]; /* general.name (may be empty) */
    int n_layers;
    int n_heads; /* query heads */
    int n_kv_heads;
    int head_dim;
    int n_embd;
    int n_ff;
    int n_vocab;
    int64_t n_ctx_train;
    float rope_theta; /* {arch}.rope.freq_base */
    int rope_dim;     /* rotated dims per head (<= head_dim) */
    enum vq_rope_type rope_type;
    float rms_eps;
    int tied_embeddings; /* 1 when output.weight is absent and token_embd is reused */
    int has_qkv_bias;
    int has_qk_norm;   /* per-head RMSNorm of q and k before RoPE (qwen3) */
    int fused_qkv;     /* q/k/v weights stored as one attn_qkv tensor (phi3) */
    int fused_gate_up; /* FFN gate and up stored as one ffn_up tensor (phi3) */
    /* Sliding-window attention: swa_window W > 0 for the n_swa_layers layers that attend only
     * to the last W positions (vq_model_layer_window tells which); 0 / 0 when every layer
     * attends to the whole context. llama: llama.attention.sliding_window (Mistral), every
     * layer. */
    int swa_window;
    int n_swa_layers;
    float rope_theta_swa; /* RoPE base of the windowed layers (gemma3: 10000; else rope_theta) */
    uint32_t file_type;   /* general.file_type (ggml ftype) or 0 */
    size_t weight_bytes;  /* bytes of all tensors */
    /* bytes of the tensors a decode step reads whole: all of them, less the token embedding
     * when the model has its own output matrix (then one embedding row is read per token) */
    size_t step_weight_bytes;
};

/* Loads and validates a GGUF model. The file's bytes go to private read-only memory advised
 * for transparent huge pages when Linux gives them ("always" or "madvise" mode) and the file is
 * at most half the physical memory: a decode step reads every weight, and with 2 MiB pages it
 * walks no page tables for them (decode at depth 8192 on SmolLM2, one thread: the weight
 * matmuls ~20 % faster, docs/ALGORITHMS.md §9.14). Otherwise, or with VQ_WEIGHTS=mmap in the
 * environment, the file is mapped read-only (shared page cache, pages read on first use).
 * Returns NULL with *st = IO (cannot be
 * opened, or not a regular file: a FIFO is refused without blocking) / BAD_FORMAT
 * (truncated or corrupt file, tensor data that overlaps or does not tile the data section as
 * its type and shape say, a non-finite block scale or float weight, missing tensor, shape
 * mismatch) / UNSUPPORTED (architecture, tensor type) / NO_MEMORY, and a message in
 * vq_engine_last_error(). Loading reads every block scale once (a strided pass over the
 * weights: 30-45 ms for the 97 MB default model on a shared 2-vCPU machine).
 * Caller-owned. */
VQ_API vq_model *vq_model_load(const char *path, vq_status *st);
/* Frees a model (NULL: no-op). Every context of the model must be freed first. */
VQ_API void vq_model_free(vq_model *m);
/* Hyper-parameters of a loaded model (library-owned, valid until vq_model_free); NULL for
 * NULL. */
VQ_API const struct vq_model_info *vq_model_info_get(const vq_model *m);
/* Attention window of a layer: W > 0 when a query at position p attends to positions
 * p-W+1 .. p only (sliding window), 0 for full attention, -1 for a bad layer index or a NULL
 * model. The context passes these to its cache (vq_cache_params.layer_window). Thread-safe. */
VQ_API int vq_model_layer_window(const vq_model *m, int layer);
/* Receives one problem of vq_model_check: a one-line message, valid during the call only. */
typedef void (*vq_model_problem_fn)(void *user, const char *problem);
/* Checks whether the engine can run a GGUF file and reports every reason it cannot, not only
 * the first as vq_model_load does: an unsupported architecture (the file is then checked against
 * the llama layout, what the engine would need), each missing or mistyped metadata key (missing
 * geometry keys end the check: tensor shapes cannot be derived), each missing or misshapen
 * tensor, tensors of layers beyond block_count, each ggml tensor type without engine kernels
 * (once per type, with its tensor count), and, when the file has tokenizer metadata
 * (tokenizer.ggml.model or .tokens), the tokenizer the tools build from it (every reason it is
 * refused: 'bert' or empty model, tokens missing, arrays of another type or count, pieces over
 * the limit; and a token count other than the model's vocabulary). A file without any
 * tokenizer metadata runs through this API on token ids and is not reported for it. fn is
 * called once per problem, on the calling thread; user is passed through. Returns the number
 * of problems (0: the file loads and its tokenizer, if any, is usable), or -1 when path or fn
 * is NULL or the file is not readable GGUF (message in vq_engine_last_error()). Thread-safe. */
VQ_API int vq_model_check(const char *path, vq_model_problem_fn fn, void *user);
/* Thread-local text of the last load/create failure ("" if none). */
VQ_API const char *vq_engine_last_error(void);

struct vq_ctx_params {
    int64_t n_ctx;   /* max tokens (prompt + generated); default 512; <= n_ctx_train * 8 */
    int n_threads;   /* OpenMP threads for matmuls and attention; 0 = OpenMP default */
    int n_batch;     /* max tokens per forward pass (prefill chunk); default 512 */
    int logits_all;  /* 1: vq_ctx_eval writes (n, n_vocab) logits; 0 (default): last row */
    enum vq_isa isa; /* weight kernels; default VQ_ISA_AUTO */
    /* 0 (default): activations quantized to int8 before every matmul, as ggml does (llama.cpp's
     * numerics and speed). 1: exact activations: each weight row is dequantized to fp32 once per
     * forward pass and multiplied in fp32 (prefill ~1.3x, decode ~6x slower), which removes the
     * int8 rounding noise that makes small KV perturbations grow — for studying KV methods on
     * the model's own float math (agrees with a float64 forward to KL ~5e-7). */
    int f32_activations;
    /* K/V storage: methods, bits, windows, page size, per-layer bits. The engine overwrites
     * n_layers, n_kv_heads, head_dim, max_tokens (= n_ctx), n_threads, layer_window (the
     * model's sliding windows, vq_model_layer_window) and key_scale_pairs / key_scale_rope_dim
     * (the model's RoPE pairing); with key_scales = 2 or key_channel_bits it shows every layer
     * the queries of the batch before appending it (vq_cache_observe_queries). Default fp16. */
    struct vq_cache_params cache;
    /* 1: time every phase of every forward pass (vq_ctx_get_timings), about 200 clock reads per
     * pass; 0 (default): no clock is read */
    int timings;
};

/* Defaults listed above. Thread-safe. */
VQ_API struct vq_ctx_params vq_ctx_params_default(void);

/* Creates a context: allocates every buffer of the forward pass and the KV cache. Returns NULL
 * with *st = INVALID_ARG (bad n_ctx / n_batch / threads) or the cache's status (e.g. UNSUPPORTED
 * codec configuration for this head_dim). Caller-owned; the model must outlive it. */
VQ_API vq_ctx *vq_ctx_create(const vq_model *m, const struct vq_ctx_params *p, vq_status *st);
/* Frees a context (NULL: no-op). */
VQ_API void vq_ctx_free(vq_ctx *c);

/* Runs n tokens (n >= 1) at positions n_past .. n_past+n-1 through the model, appending their
 * keys/values to the cache. logits (may be NULL): (n, n_vocab) when logits_all, else (n_vocab)
 * for the last token. Returns INVALID_ARG (c or tokens NULL, n < 1, token id out of range),
 * CAPACITY (n_past + n > n_ctx: checked before any token id is read, so a wrong, large n never
 * reads past the caller's buffer), or a cache status (NON_FINITE, RANGE). On error the tokens
 * of this call are dropped from the cache again (vq_ctx_n_past is unchanged) when the cache can
 * truncate that far; otherwise (outlier-channel statistics of an earlier batch of the call
 * within the first n_calib_tokens) only the failing batch of n_batch tokens is dropped and
 * vq_ctx_n_past reports the tokens kept; for codecs that cannot re-open a multi-token block
 * (KIVI), n_past reports what the cache kept.
 * Buffers come from vq_ctx_create (no allocation here). */
VQ_API vq_status vq_ctx_eval(vq_ctx *c, const int32_t *tokens, int64_t n, float *logits);
/* Tokens evaluated so far (the cache length); 0 for NULL. */
VQ_API int64_t vq_ctx_n_past(const vq_ctx *c);
/* Forgets every token (the cache keeps its pages). NULL is a no-op. */
VQ_API void vq_ctx_reset(vq_ctx *c);
/* Keeps the first n tokens (see vq_cache_truncate for codecs with multi-token blocks).
 * INVALID_ARG for c NULL or n outside [0, vq_ctx_n_past]. */
VQ_API vq_status vq_ctx_truncate(vq_ctx *c, int64_t n);
/* The context's cache (for vq_cache_memory); owned by the context. NULL for NULL. */
VQ_API const vq_cache *vq_ctx_cache(const vq_ctx *c);
/* The cache parameters actually used (geometry filled in). NULL for NULL. */
VQ_API const struct vq_cache_params *vq_ctx_cache_params(const vq_ctx *c);
/* Bytes the context allocated for activations and scratch (excluding the cache); 0 for NULL. */
VQ_API size_t vq_ctx_scratch_bytes(const vq_ctx *c);

/* ---- per-phase timings (diagnostics; off by default) ----
 *
 * With vq_ctx_params.timings = 1 a context adds the wall time of each phase of each forward
 * pass to a running total, kept apart for passes of one token (decode) and of more (prefill
 * batches), so that a caller can tell what the KV cache costs in a step (VQ_PHASE_ATTN) from
 * what the weights cost (the rest), e.g. `veloxquant generate --timings`. A phase's time
 * includes its OpenMP regions, fork and join. */

/* The phases of a forward pass. */
enum vq_phase {
    VQ_PHASE_QKV,      /* q / k / v projections (input quantized once, biases) */
    VQ_PHASE_ATTN,     /* the KV cache: query statistics, append of the new K / V, attention */
    VQ_PHASE_ATTN_OUT, /* the attention output projection */
    VQ_PHASE_FFN,      /* gate / up projections, activation, down projection */
    VQ_PHASE_OUTPUT,   /* final norm and the output head (logits) */
    VQ_PHASE_OTHER,    /* embedding, RMSNorms, RoPE, residual adds, the layer hook */
    VQ_PHASE_COUNT
};

/* Running totals since the context was created or vq_ctx_reset_timings. */
struct vq_ctx_timings {
    double seconds[2][VQ_PHASE_COUNT]; /* [0]: passes of one token, [1]: passes of more */
    int64_t tokens[2];                 /* tokens those passes evaluated */
    int64_t passes[2];                 /* forward passes (vq_ctx_eval splits at n_batch) */
};

/* Copies the context's totals into *t (all zero when the context was created with timings =
 * 0). A failed pass counts the phases before the one that failed. Not thread-safe with respect to a
 * running vq_ctx_eval of the same context. */
VQ_API void vq_ctx_get_timings(const vq_ctx *c, struct vq_ctx_timings *t);
/* Sets the totals to zero (vq_ctx_reset does not). */
VQ_API void vq_ctx_reset_timings(vq_ctx *c);
/* A phase's short name ("qkv", "attention", "attn_out", "ffn", "output", "other"); NULL out of
 * range. Static storage; thread-safe. */
VQ_API const char *vq_phase_name(enum vq_phase ph);

/* ---- observation hook (diagnostics; off by default) ----
 *
 * A context can call one caller-supplied function after every layer's attention, so that a
 * diagnostic (src/eval/observer.h: shadow full-precision K/V, cosine, inner-product error,
 * attention KL, key norms) sees the real queries, keys and values of a run without the
 * engine keeping any full-precision copy itself. With no hook set the forward pass pays one
 * NULL test per layer. */

/* What a hook sees for one layer of one forward pass (all pointers borrowed: valid only
 * during the call, owned by the context; the hook must not modify them). */
struct vq_layer_event {
    int layer;        /* 0 .. n_layers-1, in increasing order within a forward pass */
    int64_t pos0;     /* position of the first token of this forward pass */
    int64_t n_tokens; /* tokens of this forward pass (1 .. n_batch) */
    int n_heads;      /* query heads */
    int n_kv_heads;
    int head_dim;
    float scale;           /* softmax scale the attention used (1/sqrt(head_dim)) */
    const float *q;        /* (n_tokens, n_heads, head_dim) post-RoPE queries */
    const float *k;        /* (n_tokens, n_kv_heads, head_dim) post-RoPE keys, as appended */
    const float *v;        /* (n_tokens, n_kv_heads, head_dim) values, as appended */
    const float *attn_out; /* (n_tokens, n_heads, head_dim) attention output, read from the
                               * (possibly compressed) cache by vq_cache_attend */
    const vq_cache *cache; /* the context's cache; this layer now holds tokens
                               * 0 .. pos0 + n_tokens - 1 (read it with vq_cache_read) */
};

/* Hook signature. Called by vq_ctx_eval on the calling thread, outside any OpenMP region,
 * after vq_cache_append and vq_cache_attend of ev->layer succeeded. Return VQ_STATUS_OK to go
 * on; any other status aborts the evaluation, which then returns that status and drops the
 * tokens of the call from the cache as for any failed eval (so a hook sees the same positions
 * again after an error, a vq_ctx_truncate or a vq_ctx_reset: ev->pos0 can go backwards). */
typedef vq_status (*vq_layer_hook_fn)(void *user, const struct vq_layer_event *ev);

/* Sets (fn != NULL) or removes (fn == NULL) the context's layer hook; user is passed back to
 * every call (borrowed; it must stay valid while the hook is set). One hook per context; a
 * new call replaces the previous hook. Not thread-safe with respect to a running vq_ctx_eval
 * of the same context. */
VQ_API void vq_ctx_set_layer_hook(vq_ctx *c, vq_layer_hook_fn fn, void *user);
/* The user pointer of the context's current layer hook (NULL if none or c is NULL), so an
 * observer can tell whether the hook is still its own before removing it. */
VQ_API void *vq_ctx_layer_hook_user(const vq_ctx *c);

/* ---- sampling ---- */

struct vq_sampler_params {
    float temperature; /* <= 0: greedy (argmax, lowest id on ties); default 0 */
    int top_k;         /* keep the k most likely tokens; 0 = all; default 40 */
    float top_p;       /* nucleus: smallest set with mass >= top_p; 1 = off; default 0.95 */
    uint64_t seed;     /* default 42 */
};

/* Defaults listed above. Thread-safe. */
VQ_API struct vq_sampler_params vq_sampler_params_default(void);
/* Creates a sampler for n_vocab logits (buffers allocated here). NULL with INVALID_ARG for
 * temperature NaN, top_k < 0, top_p outside (0, 1], n_vocab < 1. Caller-owned. */
VQ_API vq_sampler *vq_sampler_create(const struct vq_sampler_params *p, int n_vocab, vq_status *st);
VQ_API void vq_sampler_free(vq_sampler *s);
/* Picks a token id from logits (n_vocab floats; NaN logits are never picked unless all are).
 * Deterministic for a seed and the sequence of calls. No allocation. -1 for s or logits NULL. */
VQ_API int32_t vq_sampler_sample(vq_sampler *s, const float *logits);
/* Restarts the random stream from seed. NULL is a no-op. */
VQ_API void vq_sampler_reseed(vq_sampler *s, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* VQ_ENGINE_H */
