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
 *   Text: a model reads its tokenizer and chat template from the GGUF file on first use;
 *   vq_generate turns a prompt into text (sampling, stop strings, a streaming callback) and a
 *   vq_conversation keeps a multi-turn chat whose turns evaluate only their new tokens (section
 *   "text" below).
 *   Evaluation: vq_perplexity scores a token stream with llama.cpp's perplexity protocol on a
 *   context of its own (section "evaluation" below), the one implementation the CLI and the
 *   Python package call.
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
/* The default model's file name (SmolLM2-135M-Instruct Q4_1, the model every test and
 * benchmark of the project runs on; scripts/fetch_models.sh fetches it). Static. */
#define VQ_DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
/* Writes the default model's path into buf (cap bytes, NUL-terminated): $VQ_MODELS/FILE when
 * VQ_MODELS is set and not empty, else $HOME/.cache/veloxquant/models/FILE. Returns the
 * length, or -(length + 1) when cap is too small. Reads the environment; thread-safe if nobody
 * modifies it. */
VQ_API int vq_model_default_path(char *buf, size_t cap);
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
/* Creates a context whose KV cache is the named config kv ("kv4", "fp16", "turboquant_mse-3",
 * any name vq_kv_spec_parse takes; NULL = p's own cache params): the spec is resolved for the
 * model's geometry (vq_kv_spec_cache_params) and replaces p->cache (p's other fields are used
 * as given; p may be NULL for the defaults). Configs that read calibration get it from the
 * artifact cache (vq_calib_artifact_path) by the SHA-256 of the model file: vecinfer /
 * spectral codebooks (vq_calib_attach), RateQuant layer sensitivities ("ratequant/<sha>/
 * sens.vqcal"); the context owns what it loads. Returns NULL with *st = INVALID_ARG (unknown
 * name, a width the method does not take, a config that does not fit the model: the message
 * in vq_engine_last_error() names it), NOT_FOUND (calibration missing: run `veloxquant
 * calibrate -m MODEL`), or vq_ctx_create's statuses. Caller-owned (vq_ctx_free). */
VQ_API vq_ctx *vq_ctx_create_kv(const vq_model *m, const struct vq_ctx_params *p, const char *kv,
                                vq_status *st);

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
/* One decode step of n sequences at once: token tokens[i] is evaluated on context ctxs[i] at
 * its own position (vq_ctx_n_past) and its logits (n_vocab) written to logits[i]. The contexts
 * are distinct, of one model, each with room for one more token; their caches may differ (fp16,
 * kv4, ...). The weight matmuls run once over all n rows (in batches of ctxs[0]'s n_batch, in
 * ctxs[0]'s buffers and threads: the weights are read once per step, not n times); each row's
 * attention runs on its own context's cache. The results equal n calls vq_ctx_eval(ctxs[i],
 * &tokens[i], 1, logits[i]) bit for bit (the four-token kernels of Q4_K, whose float order
 * differs, are run one token at a time here). Contexts with a layer hook, f32_activations or
 * timings, and n == 1, are evaluated one by one with vq_ctx_eval. The output matrix is read
 * once either way; logits rows equally spaced (one (n, n_vocab) array) let it run in four-token
 * groups, rows in separate buffers one token at a time per weight tile (slower).
 * Returns INVALID_ARG (NULL arguments, n < 1, a token id out of range, a context repeated or
 * of another model), CAPACITY (a context is full; nothing evaluated), or a cache status; on an
 * error the rows of the failing batch keep none of its token (earlier batches of n_batch rows
 * keep theirs). Uses the contexts from one thread; no allocation. */
VQ_API vq_status vq_ctx_eval_batch(vq_ctx *const *ctxs, const int32_t *tokens, int n,
                                   float *const *logits);
/* Tokens evaluated so far (the cache length); 0 for NULL. */
VQ_API int64_t vq_ctx_n_past(const vq_ctx *c);
/* The context's size in tokens (vq_ctx_params.n_ctx); 0 for NULL. */
VQ_API int64_t vq_ctx_n_ctx(const vq_ctx *c);
/* The model the context was created on (borrowed); NULL for NULL. */
VQ_API const vq_model *vq_ctx_model(const vq_ctx *c);
/* Forgets every token (the cache keeps its pages). NULL is a no-op. */
VQ_API void vq_ctx_reset(vq_ctx *c);
/* Keeps the first n tokens (see vq_cache_truncate for codecs with multi-token blocks).
 * INVALID_ARG for c NULL or n outside [0, vq_ctx_n_past]. */
VQ_API vq_status vq_ctx_truncate(vq_ctx *c, int64_t n);
/* The context's cache (for vq_cache_memory); owned by the context. NULL for NULL. */
VQ_API const vq_cache *vq_ctx_cache(const vq_ctx *c);
/* The cache parameters actually used (geometry filled in). NULL for NULL. */
VQ_API const struct vq_cache_params *vq_ctx_cache_params(const vq_ctx *c);
/* Threads the context runs on (vq_ctx_params.n_threads resolved: vq_threads_resolve); 0 for
 * NULL. */
VQ_API int vq_ctx_n_threads(const vq_ctx *c);
/* Kernel variant the context runs (vq_ctx_params.isa resolved: AUTO is vq_isa_default(), which
 * honours $VQ_ISA; an explicit variant this CPU lacks falls back to scalar). */
VQ_API enum vq_isa vq_ctx_isa(const vq_ctx *c);
/* Bytes the context allocated for activations and scratch (excluding the cache); 0 for NULL
 * and for a context that uses another's (vq_ctx_share_scratch). */
VQ_API size_t vq_ctx_scratch_bytes(const vq_ctx *c);
/* Makes c use donor's activation buffers (the forward pass's scratch: residual stream, q/k/v,
 * FFN rows, quantized activations, RoPE tables; n_batch rows each) instead of its own, which
 * are freed: contexts that never evaluate at the same time (a server's slots, run by one
 * scheduler thread) then hold one set of buffers instead of one each. Nothing is kept in them
 * between calls, so results do not change. donor: a context of the same model, not itself
 * sharing, with an n_batch at least c's and the same f32_activations (with them, at least c's
 * threads); it must outlive c, and no two contexts among donor and those sharing its buffers
 * may be evaluated at the same time. Returns OK, or INVALID_ARG (NULL, c == donor, another
 * model, c or donor already sharing, c already a donor, a smaller n_batch, other activations).
 * Call it while neither context is being evaluated. */
VQ_API vq_status vq_ctx_share_scratch(vq_ctx *c, vq_ctx *donor);

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

/* Order of the steps (llama.cpp's common sampler chain): repetition penalty over the recent
 * tokens, then greedy (temperature <= 0) or top-k, top-p, min-p, temperature and a draw. */
struct vq_sampler_params {
    float temperature; /* <= 0: greedy (argmax, lowest id on ties); default 0 */
    int top_k;         /* keep the k most likely tokens; 0 = all; default 40 */
    float top_p;       /* nucleus: smallest set with mass >= top_p; 1 = off; default 0.95 */
    uint64_t seed;     /* default 42 */
    /* min-p: keep the tokens whose probability is at least min_p times the most likely one's
     * (llama.cpp: logit >= max logit + log(min_p), before temperature); 0 = off (default);
     * in [0, 1] */
    float min_p;
    /* repetition penalty (llama.cpp's penalty_repeat): each distinct token among the last
     * repeat_last_n accepted tokens (vq_sampler_accept) gets its logit divided by
     * repeat_penalty when positive, multiplied when negative or zero; applies to greedy too.
     * 1 = off (default); > 0 and finite. */
    float repeat_penalty;
    int repeat_last_n; /* tokens the penalty looks back on; 0 = off; default 64; >= 0 */
};

/* Defaults listed above. Thread-safe. */
VQ_API struct vq_sampler_params vq_sampler_params_default(void);
/* Creates a sampler for n_vocab logits (buffers allocated here). NULL with INVALID_ARG for
 * temperature NaN, top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repeat_penalty not
 * finite and > 0, repeat_last_n < 0 or > 2^24, n_vocab < 1. Caller-owned. */
VQ_API vq_sampler *vq_sampler_create(const struct vq_sampler_params *p, int n_vocab, vq_status *st);
VQ_API void vq_sampler_free(vq_sampler *s);
/* Picks a token id from logits (n_vocab floats, not modified; NaN logits are never picked unless
 * all are). Deterministic for a seed and the sequence of calls. The pick is not recorded for
 * the repetition penalty: call vq_sampler_accept. No allocation. -1 for s or logits NULL. */
VQ_API int32_t vq_sampler_sample(vq_sampler *s, const float *logits);
/* Records a token of the text (prompt or generated) in the sampler's window of the last
 * repeat_last_n tokens that the repetition penalty reads; a no-op when the penalty is off or s
 * is NULL. No allocation. */
VQ_API void vq_sampler_accept(vq_sampler *s, int32_t token);
/* Restarts the random stream from seed (the repetition window is kept). NULL is a no-op. */
VQ_API void vq_sampler_reseed(vq_sampler *s, uint64_t seed);

/* ---- text: tokenizer, chat template, generation, conversations ----
 *
 * A model reads its tokenizer (tokenizer.ggml.*) and chat template (tokenizer.chat_template)
 * from the GGUF file on first use of any function below, once (thread-safe; later calls share
 * it). A model without a tokenizer, or whose tokenizer does not have the model's vocabulary
 * size, fails them with NOT_FOUND / BAD_FORMAT and a message in vq_engine_last_error().
 * Text is bytes (UTF-8 for the supported models); outputs that are not NUL-terminated say so.
 * The functions that take a model are thread-safe; the ones that take a context, a
 * detokenizer or a conversation use it from one thread at a time. */

/* Returned by the int64_t text functions below on an error (no tokenizer, NULL arguments,
 * out of memory); the reason is in vq_engine_last_error(). */
#define VQ_TEXT_ERROR INT64_MIN

/* Tokenizes len bytes of text. add_special: prepend BOS (and append EOS) where the model's
 * metadata asks for it (llama_tokenize's add_special; SmolLM2 asks for neither, Gemma for
 * BOS). parse_special: match control tokens such as <|im_start|> in the text (needed for
 * chat-templated text); user-defined tokens always match. Writes at most cap ids to out (out
 * may be NULL when cap is 0). Returns the number of ids, -(number needed) when cap is too
 * small (out then holds the first cap ids), or VQ_TEXT_ERROR. Thread-safe. */
VQ_API int64_t vq_tokenize(const vq_model *m, const char *text, size_t len, int add_special,
                           int parse_special, int32_t *out, int64_t cap);
/* Detokenizes n ids into buf (not NUL-terminated), as llama_detokenize: remove_special drops a
 * leading BOS / trailing EOS the model adds itself; unparse_special renders control tokens as
 * their text (else they give nothing). Returns the byte count, -(bytes needed) when cap is too
 * small (buf content then unspecified), or VQ_TEXT_ERROR. Thread-safe. */
VQ_API int64_t vq_detokenize(const vq_model *m, const int32_t *ids, int64_t n, char *buf,
                             size_t cap, int remove_special, int unparse_special);
/* The bytes of one token (not NUL-terminated; may be part of a UTF-8 character). Control
 * tokens give their text only when special is set; ids out of range give nothing. Returns the
 * byte count, -(bytes needed) when cap is too small (nothing written), or VQ_TEXT_ERROR.
 * Thread-safe. */
VQ_API int64_t vq_token_to_piece(const vq_model *m, int32_t id, char *buf, size_t cap, int special);
/* 1 when id ends generation (EOS, end-of-turn and the tokens llama.cpp recognises by their text:
 * <|im_end|>, <|eot_id|>, <end_of_turn>, ...), else 0 (also for a model without tokenizer). */
VQ_API int vq_token_is_eog(const vq_model *m, int32_t id);
/* Beginning- / end-of-sequence token ids; -1 when the model has none or no tokenizer. */
VQ_API int32_t vq_token_bos(const vq_model *m);
VQ_API int32_t vq_token_eos(const vq_model *m);
/* 1 when vq_tokenize with add_special prepends BOS (the tokenizer's add_bos_token: Gemma yes,
 * SmolLM2 no), else 0 (also for a model without tokenizer). Thread-safe. */
VQ_API int vq_token_add_bos(const vq_model *m);

/* Incremental detokenizer: turns ids one at a time into text that is always whole UTF-8
 * characters (a byte-level BPE token may hold part of a character; up to 3 bytes are held
 * back until the character completes; bytes that can never complete one are passed on).
 * The concatenated outputs of push and flush equal the concatenated pieces of the ids. */
typedef struct vq_detok vq_detok;
/* Creates one for model m (borrowed: it must outlive the detokenizer); special: control tokens
 * give their text (else nothing). NULL with *st = NOT_FOUND / BAD_FORMAT (no usable tokenizer)
 * / NO_MEMORY. Caller-owned: vq_detok_free. */
VQ_API vq_detok *vq_detok_create(const vq_model *m, int special, vq_status *st);
/* Frees (NULL: no-op). */
VQ_API void vq_detok_free(vq_detok *d);
/* Appends token id; writes to buf (not NUL-terminated) the bytes that now form complete
 * characters. Returns bytes written, or -(bytes needed) when cap is too small, in which case
 * nothing changed and the call can be repeated with a larger buffer (cap >= the token's
 * piece length + 4 always suffices), or VQ_TEXT_ERROR for a NULL d. No allocation. */
VQ_API int64_t vq_detok_push(vq_detok *d, int32_t id, char *buf, size_t cap);
/* Writes the held-back bytes of an unfinished character (<= 4) and starts over. Returns bytes
 * written, -(bytes needed) or VQ_TEXT_ERROR for a NULL d. */
VQ_API int64_t vq_detok_flush(vq_detok *d, char *buf, size_t cap);

/* One message of a chat (both strings NUL-terminated, borrowed for the call). Roles: "system",
 * "user", "assistant" (others pass through where the template allows). */
struct vq_chat_message {
    const char *role;
    const char *content;
};

/* Writes the model's chat-template prompt for n messages into buf, NUL-terminated, followed by
 * the assistant turn header when add_generation_prompt. The template is recognised from the
 * GGUF's tokenizer.chat_template (ChatML: SmolLM2, Qwen2; Llama 2; Llama 3; Gemma, also for a
 * Gemma file without one); unknown or missing templates get ChatML. The template's own default
 * system prompt (SmolLM2's) is inserted when the messages do not start with a system message,
 * as the Jinja template does; Gemma merges system text into the first user turn. Tokenize the
 * result with parse_special = 1 (and add_special = 1: BOS is not written). Returns the length
 * in bytes (without the NUL), -(length + 1) when cap is too small (call again with a buffer of
 * that size), or VQ_TEXT_ERROR (NULL role / content). Thread-safe. */
VQ_API int64_t vq_model_chat_apply(const vq_model *m, const struct vq_chat_message *msgs, size_t n,
                                   int add_generation_prompt, char *buf, size_t cap);

/* Why a generation ended. */
enum vq_finish_reason {
    VQ_FINISH_NONE = 0,     /* not finished (an error returned before generating) */
    VQ_FINISH_STOP = 1,     /* an end-of-generation token, or a stop string */
    VQ_FINISH_LENGTH = 2,   /* max_tokens generated */
    VQ_FINISH_CONTEXT = 3,  /* the context is full (n_ctx tokens) */
    VQ_FINISH_CALLBACK = 4, /* on_piece returned nonzero */
};
/* "stop", "length", "context", "callback" ("none" for NONE, NULL out of range). Static. */
VQ_API const char *vq_finish_reason_name(enum vq_finish_reason f);

/* Receives generated text as it becomes final: len > 0 bytes of whole UTF-8 characters (not
 * NUL-terminated; valid during the call only), never any part of a stop string or of what
 * follows it. Return 0 to go on, nonzero to stop (finish CALLBACK; text not yet delivered is
 * dropped, so the pieces delivered always concatenate to vq_gen_result.text). Called on the
 * thread of vq_generate. */
typedef int (*vq_piece_fn)(void *user, const char *piece, size_t len);

struct vq_gen_params {
    struct vq_sampler_params sampling; /* default vq_sampler_params_default(): greedy */
    int64_t max_tokens; /* tokens to generate at most; 0: prefill only; default 256 */
    /* Stop strings (n_stop of them, each NUL-terminated; empty ones are ignored): generation
     * ends (STOP) where the text first contains one; it and whatever follows are dropped from
     * the text. Text that could be the start of a stop string is held back until it is known
     * not to be. Borrowed for the call. */
    const char *const *stop;
    int n_stop;
    int add_special;      /* vq_generate: tokenize the prompt with add_special; default 1 */
    int parse_special;    /* vq_generate: match control tokens in the prompt; default 0 */
    vq_piece_fn on_piece; /* optional streaming callback */
    void *user;           /* passed to on_piece */
};
/* Defaults listed above. Thread-safe. */
VQ_API struct vq_gen_params vq_gen_params_default(void);

struct vq_gen_result {
    int64_t n_prompt;    /* tokens of the prompt sequence (cached + evaluated) */
    int64_t n_evaluated; /* prompt tokens this call evaluated (the prefill) */
    int64_t n_cached;    /* prompt tokens reused from the context's cache (not evaluated) */
    int64_t n_generated; /* tokens generated (an end-of-generation token not counted) */
    int64_t n_decoded;   /* decode steps: generated tokens evaluated one at a time (the last
                          * one is not evaluated when the generation stops at max_tokens, a
                          * full context, a stop string or the callback) */
    enum vq_finish_reason finish;
    int stop_index; /* index in vq_gen_params.stop of the stop string that ended it, else -1 */
    double prefill_s, decode_s; /* wall seconds of the prefill and of the decode loop */
    /* per-phase times of this call's prefill and decode (vq_ctx_timings; all zero unless the
     * context was created with timings = 1) */
    struct vq_ctx_timings prefill_timings, decode_timings;
    /* generated text, NUL-terminated, text_len bytes, stop strings removed; library-owned
     * (malloc), released by vq_gen_result_free; "" after a generation of no text, NULL after
     * an error */
    char *text;
    size_t text_len;
};
/* Frees r->text and zeroes *r (NULL: no-op). */
VQ_API void vq_gen_result_free(struct vq_gen_result *r);

/* Generates text from a prompt on context c: tokenizes the prompt (p->add_special,
 * p->parse_special), then as vq_generate_tokens. p NULL: defaults. *r is overwritten (free a
 * previous result first). Returns OK (r->finish says why it stopped), INVALID_ARG (NULL c /
 * prompt / r, an empty prompt, bad sampling parameters, NULL stop entries), NOT_FOUND /
 * BAD_FORMAT (no usable tokenizer), CAPACITY (the prompt does not fit: message "context full:
 * N tokens needed, M free"), NO_MEMORY, or an evaluation status; message in
 * vq_engine_last_error(). */
VQ_API vq_status vq_generate(vq_ctx *c, const char *prompt, const struct vq_gen_params *p,
                             struct vq_gen_result *r);
/* Generates from a prompt of n >= 1 token ids. The context keeps the ids it evaluated
 * (vq_ctx_tokens): the longest common prefix of those and ids (at most n - 1 tokens, so that
 * the last prompt token is evaluated for its logits) is kept, the rest of the cache is cut
 * (vq_ctx_truncate; where a codec cannot cut there, at the nearest point before it that it can,
 * or from 0), and only the remaining prompt tokens are evaluated, in batches of n_batch. (A
 * reused prefix makes the numerics of a fresh run differ slightly, as in llama.cpp: the same
 * tokens evaluated in other batches.) Then it samples (p->sampling; the sampler first accepts
 * the prompt's last repeat_last_n ids), streams through p->on_piece and evaluates one token per
 * step until an end-of-generation token, a stop string, max_tokens, a full context (the token
 * sampled when n_past reaches n_ctx is the last one) or the callback. No allocation per token
 * besides the amortized growth of the text. On an error the context keeps the tokens it
 * evaluated (vq_ctx_n_past) and *r holds the counts so far with text NULL. Statuses as
 * vq_generate. */
VQ_API vq_status vq_generate_tokens(vq_ctx *c, const int32_t *ids, int64_t n,
                                    const struct vq_gen_params *p, struct vq_gen_result *r);

/* ---- step-wise generation: a session ----
 *
 * The loop of vq_generate_tokens in steps, so that a caller (a server's scheduler) can run many
 * generations on many contexts and evaluate their next tokens together (vq_ctx_eval_batch):
 *     vq_gen_session *g = vq_gen_begin(ctx, ids, n, &gp, &st);     // prefix reuse, no eval
 *     while (vq_gen_prefill_left(g)) st = vq_gen_prefill(g, 512);  // the prompt, in chunks
 *     for (int32_t t; !vq_gen_next(g, &t) && t >= 0;)              // sample, stream, stop?
 *         vq_gen_decoded(g, vq_ctx_eval(ctx, &t, 1, vq_gen_logits(g)));
 *     st = vq_gen_end(g, &r);                                      // the result; frees g
 * vq_generate_tokens is exactly this loop (prefill in one call), so a session computes what it
 * computes. A session uses its context from one thread at a time; sessions on distinct contexts
 * are independent. */
typedef struct vq_gen_session vq_gen_session;
/* Starts a generation from n >= 1 prompt ids on c as vq_generate_tokens does (validation, the
 * cache cut back to the longest reusable prefix, sampler set up) without evaluating anything.
 * p (NULL: defaults) is copied; its stop strings and user pointer stay borrowed until
 * vq_gen_end. NULL with *st = vq_generate_tokens's statuses (INVALID_ARG, CAPACITY, NOT_FOUND,
 * BAD_FORMAT, NO_MEMORY) and a message in vq_engine_last_error(). Caller-owned: vq_gen_end. */
VQ_API vq_gen_session *vq_gen_begin(vq_ctx *c, const int32_t *ids, int64_t n,
                                    const struct vq_gen_params *p, vq_status *st);
/* Prompt tokens still to evaluate (0 once the prefill is done or after an error). */
VQ_API int64_t vq_gen_prefill_left(const vq_gen_session *g);
/* Evaluates the next max_tokens (0: all) prompt tokens; the last chunk leaves the logits of the
 * last prompt token in vq_gen_logits. Chunks of a multiple of the context's n_batch give the
 * numerics of one call. Returns OK (also when nothing is left) or the evaluation's status (the
 * session then only ends: vq_gen_end returns it). */
VQ_API vq_status vq_gen_prefill(vq_gen_session *g, int64_t max_tokens);
/* One decode step after the prefill: samples a token from vq_gen_logits, streams its text
 * (on_piece), checks end-of-generation, stop strings, max_tokens and the context. *token is the
 * sampled id that the caller must now evaluate on vq_gen_ctx(g) into vq_gen_logits(g) (alone
 * or in a vq_ctx_eval_batch) and report with vq_gen_decoded, or -1 when the generation is
 * finished. Returns OK, INVALID_ARG (NULL arguments, prefill not done, the previous token not
 * reported), NO_MEMORY, or the session's earlier error. */
VQ_API vq_status vq_gen_next(vq_gen_session *g, int32_t *token);
/* Reports the status of the evaluation of the token vq_gen_next returned: OK counts a decode
 * step; an error ends the session with that status. Returns it (INVALID_ARG with no token
 * pending). */
VQ_API vq_status vq_gen_decoded(vq_gen_session *g, vq_status eval_status);
/* 1 when vq_gen_next has no more tokens to give (finished or failed), else 0. */
VQ_API int vq_gen_finished(const vq_gen_session *g);
/* The session's logits row (n_vocab floats, owned by the session) and its context. */
VQ_API float *vq_gen_logits(vq_gen_session *g);
VQ_API vq_ctx *vq_gen_ctx(const vq_gen_session *g);
/* Ends a session and frees it (NULL: INVALID_ARG). *r (may be NULL) receives what
 * vq_generate_tokens would return: counts, times, finish, the text (caller frees with
 * vq_gen_result_free); the last text held back for stop strings is delivered to on_piece here.
 * A session ended before it finished is cancelled: finish CALLBACK, the text delivered so far.
 * Returns OK or the session's error (r->text NULL). */
VQ_API vq_status vq_gen_end(vq_gen_session *g, struct vq_gen_result *r);

/* The ids the context evaluated, in order (vq_ctx_n_past of them; after vq_ctx_truncate the
 * first n_past). Borrowed, valid until the next eval, truncate, reset or free of c. */
VQ_API const int32_t *vq_ctx_tokens(const vq_ctx *c);

/* ---- multi-turn conversations ----
 *
 * A conversation holds the messages of a chat and its exact token history on one context (borrowed:
 * it must outlive the conversation; other use of the context between turns is allowed and costs the
 * next turn the tokens it removed from the cache). Each turn appends the user message, applies the
 * chat template (vq_model_chat_apply with the generation prompt) and evaluates only what the cache
 * lacks: when the new prompt text extends the text of the tokens already known (the previous
 * prompt, the reply's tokens, its end-of-turn token), the new part is tokenized alone (no BOS,
 * control tokens parsed) and appended, so the cache is reused whole; where the texts differ (a
 * template that trims the reply, a stop string that cut a token, a control token inside the reply),
 * the known tokens are kept up to the last token boundary before the difference and the rest is
 * tokenized again; the cache then keeps what vq_generate_tokens keeps. The reply is recorded as the
 * assistant message. */
typedef struct vq_conversation vq_conversation;
/* Creates a conversation on c; system (may be NULL: the template's default, if any) becomes the
 * first message (copied). NULL with *st = INVALID_ARG (NULL c), NOT_FOUND / BAD_FORMAT (no
 * usable tokenizer) or NO_MEMORY. Caller-owned: vq_conversation_free. */
VQ_API vq_conversation *vq_conversation_create(vq_ctx *c, const char *system, vq_status *st);
/* Frees (NULL: no-op); the context and its cache stay as they are. */
VQ_API void vq_conversation_free(vq_conversation *v);
/* One turn: appends user_text (NUL-terminated, copied), generates the assistant's reply with p
 * (NULL: defaults; add_special / parse_special are not used: the template decides) into *r as
 * vq_generate_tokens does, and records the reply. Turn k (counted from create or reset, 0 first)
 * samples with p->sampling.seed XOR k * 0x9E3779B97F4A7C15: a conversation replays exactly for a
 * seed and the same inputs, and later turns do not repeat the first turn's random draws.
 * r->n_prompt counts the whole templated conversation, r->n_cached the tokens reused,
 * r->n_evaluated the new ones. Returns OK, or
 * INVALID_ARG, CAPACITY (the prompt does not fit: "context full: N tokens needed, M free"),
 * NO_MEMORY or an evaluation status; on an error the conversation's messages are unchanged
 * (the cache may hold fewer tokens; the next turn evaluates what it lacks). A reply cut by a
 * full context, max_tokens or the callback is recorded as it is. */
VQ_API vq_status vq_conversation_turn(vq_conversation *v, const char *user_text,
                                      const struct vq_gen_params *p, struct vq_gen_result *r);
/* Forgets every message but the system prompt and empties the context's cache. */
VQ_API void vq_conversation_reset(vq_conversation *v);
/* Messages so far (the system prompt first when given, then user / assistant turns); message i
 * is borrowed, valid until the next turn, reset or free; NULL for i out of range. */
VQ_API size_t vq_conversation_n_messages(const vq_conversation *v);
VQ_API const struct vq_chat_message *vq_conversation_message(const vq_conversation *v, size_t i);
/* Tokens in the context's cache (vq_ctx_n_past of its context). */
VQ_API int64_t vq_conversation_n_past(const vq_conversation *v);
/* The context the conversation runs on. */
VQ_API vq_ctx *vq_conversation_ctx(const vq_conversation *v);

/* ---- evaluation: perplexity ----
 *
 * The perplexity protocol of llama.cpp's perplexity tool (docs/EVALUATION.md "Protocol"), in one
 * implementation: `veloxquant perplexity` and the Python package's Model.perplexity both call
 * vq_perplexity (`sweep` and the CLI's --save-logits / --kl-base runs the same code with their
 * logits files added). The token stream is cut into non-overlapping chunks of ctx tokens (a
 * trailing partial chunk is dropped); every chunk starts from an empty KV cache, its first token
 * replaced by BOS where the model's tokenizer adds one (bos below); the chunk is evaluated in
 * forward passes of n_batch tokens whose keys and values go through the compressed cache
 * (attention always reads the cache), and positions ctx/2 .. ctx-2 are scored against the next
 * token: nll = logsumexp(row) - row[next], in double. ppl = exp(mean nll) over every scored
 * position of every chunk. For a fixed model, tokens, thread count and KV config the result is
 * the same in every run, bit for bit. */

/* vq_ppl_params.bos: the model's BOS id when vq_tokenize's add_special prepends one (its
 * tokenizer's add_bos_token; also what llama.cpp does), else no replacement. */
#define VQ_PPL_BOS_AUTO (-2)

struct vq_ppl_params {
    int ctx;             /* tokens per chunk (>= 4, even); default 512 */
    int n_chunks;        /* chunks to score; 0 (default) = every whole chunk of the tokens */
    int n_batch;         /* tokens per forward pass; 0 (default) or more than ctx: ctx */
    int n_threads;       /* OpenMP threads; 0 (default) = the OpenMP default */
    int32_t bos;         /* >= 0: each chunk's first token is replaced by this id; -1: never;
                          * VQ_PPL_BOS_AUTO (default): as the model's tokenizer adds BOS */
    int f32_activations; /* vq_ctx_params.f32_activations (default 0: int8, as llama.cpp) */
    /* K/V methods when vq_perplexity is given no config name (geometry, max_tokens and threads
     * are filled by the engine); default vq_cache_params_default(): fp16 */
    struct vq_cache_params cache;
};

/* Defaults listed above. Thread-safe. */
VQ_API struct vq_ppl_params vq_ppl_params_default(void);

struct vq_ppl_result {
    int n_chunks;      /* chunks scored */
    int64_t n_scored;  /* positions scored: n_chunks * (ctx - 1 - ctx/2) */
    double nll_mean;   /* mean negative log-likelihood (nats) */
    double ppl;        /* exp(nll_mean) */
    double ppl_stderr; /* standard error of ppl (delta method over the scored nll) */
    /* KL(base || this run) mean / median / p99 and top-1 agreement against a saved base run;
     * NaN from vq_perplexity (the tools' --kl-base runs fill them) */
    double kld_mean, kld_median, kld_p99, top1;
    double seconds;             /* wall time of the forward passes */
    double prefill_tok_s;       /* chunk tokens / forward-pass seconds */
    struct vq_cache_memory mem; /* the cache's bytes after the first chunk */
};

/* Called on the calling thread after each chunk with the running perplexity (may be NULL). */
typedef void (*vq_ppl_progress_fn)(void *user, int chunk, int n_chunks, double ppl_so_far);

/* Runs the protocol above on n_tokens token ids (tokenize the text with vq_tokenize, add_special
 * = 1, parse_special = 0, as the CLI does) on a context created here for it (n_ctx = ctx,
 * n_batch, n_threads, all logits) and freed before returning. kv names the KV config ("kv4",
 * "fp16", "turboquant_mse-3", any name vq_kv_spec_parse takes, resolved for the model exactly
 * as vq_ctx_create_kv resolves it, calibration from the artifact cache included); NULL uses
 * p->cache as given. p NULL: the defaults. progress (may be NULL) gets user back after every
 * chunk. *out is overwritten (zeroed first). err (errlen bytes, may be NULL) gets a one-line
 * reason on failure. Returns OK; INVALID_ARG (NULL m / tokens / out, ctx odd or < 4, negative
 * n_chunks or n_batch, fewer tokens than one chunk, an unknown or unfitting config name);
 * NOT_FOUND (calibration missing); vq_ctx_create's and vq_ctx_eval's statuses (e.g. a token id
 * out of the vocabulary); NON_FINITE (non-finite logits); NO_MEMORY. Borrows m, tokens and p
 * for the call; allocates the context, one (n_batch, n_vocab) logits buffer and one chunk of
 * ids, and frees them. Thread-safe for distinct outputs: the model may be shared (it is
 * immutable), every call has its own context; it uses n_threads OpenMP threads itself and
 * never prints. */
VQ_API vq_status vq_perplexity(const vq_model *m, const int32_t *tokens, int64_t n_tokens,
                               const struct vq_ppl_params *p, const char *kv,
                               vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out,
                               char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* VQ_ENGINE_H */
