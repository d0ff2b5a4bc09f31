/*
 * ppl.h — perplexity, KL divergence against a saved base run, and the greedy reliability
 * probe, over the engine (include/vq_engine.h). Not part of the public API.
 *
 * Perplexity protocol (docs/EVALUATION.md "Protocol", as llama.cpp's perplexity tool): the
 * token stream is cut into non-overlapping chunks of ctx tokens (a trailing partial chunk is
 * dropped); every chunk starts from an empty KV cache (when the tokenizer adds BOS, the chunk's
 * first token is replaced by BOS); the chunk is evaluated in forward passes of n_batch tokens whose
 * keys and values go through the compressed cache (attention always reads the cache), and the
 * positions ctx/2 .. ctx-2 are scored against the next token: nll = logsumexp(row) - row[next].
 * ppl = exp(mean nll) over every scored position of every chunk.
 *
 * Determinism: for a fixed model, text, thread count and KV config the result is the same
 * in every run (the engine and codecs are deterministic for a seed).
 */
#ifndef VQ_EVAL_PPL_H
#define VQ_EVAL_PPL_H

#include <stdint.h>
#include "veloxquant.h"
#include "vq_engine.h"
#include "eval/logits.h"

struct vq_ppl_params {
    int ctx;             /* tokens per chunk (>= 4, even) */
    int n_chunks;        /* chunks to score; 0 = every whole chunk of the text */
    int n_batch;         /* tokens per forward pass; 0 = ctx */
    int n_threads;       /* 0 = OpenMP default */
    int32_t bos;         /* >= 0: replace each chunk's first token by this id */
    int top_k;           /* summaries written to save (default 32) */
    int f32_activations; /* vq_ctx_params.f32_activations (default 0: int8, as llama.cpp) */
    struct vq_cache_params cache; /* K/V methods (geometry filled by the engine) */
};

/* ctx 512, all chunks, n_batch = ctx, threads 0, no BOS, top_k 32, fp16 cache. */
struct vq_ppl_params vq_ppl_params_default(void);

struct vq_ppl_result {
    int n_chunks;     /* chunks scored */
    int64_t n_scored; /* positions scored */
    double nll_mean, ppl;
    double ppl_stderr; /* standard error of ppl (delta method over the scored nll) */
    double kld_mean, kld_median, kld_p99, top1; /* NaN without a base */
    double seconds;                             /* wall time of the forward passes */
    double prefill_tok_s;                       /* chunk tokens / forward-pass seconds */
    struct vq_cache_memory mem;                 /* cache bytes after the first full chunk */
};

/* Called after each chunk with the running perplexity (may be NULL). */
typedef void (*vq_ppl_progress_fn)(void *user, int chunk, int n_chunks, double ppl_so_far);

/* Runs the protocol on tokens (n_tokens ids) with a context created here from model, p->ctx,
 * n_batch, n_threads and p->cache. When save != NULL, every scored position's summary (top_k
 * = vq_logits_top_k(save)) is appended to it. When base != NULL, KL(base || this run) and
 * top-1 agreement are computed per position; the base must hold exactly the positions this
 * run scores (same n_vocab, ctx, count and target ids: otherwise BAD_FORMAT with a reason in
 * err). Returns INVALID_ARG (text shorter than one chunk, bad params), the engine's status,
 * or IO/NO_MEMORY. err (errlen bytes, may be NULL) gets a reason on failure. */
vq_status vq_ppl_run(const vq_model *model, const int32_t *tokens, int64_t n_tokens,
                     const struct vq_ppl_params *p, vq_logits_file *save, vq_logits_file *base,
                     vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out, char *err,
                     size_t errlen);

/* Per-position scoring, shared by vq_ppl_run and `veloxquant score-logits` (logits computed
 * elsewhere, e.g. by llama.cpp): nll = logsumexp(row) - row[target], the summary appended to
 * save (top_k = vq_logits_top_k(save)) when save != NULL, KL(base || row) and top-1 agreement
 * against the next record of base when base != NULL (vq_logit_kl). Not thread-safe per
 * scorer; save and base stay owned by the caller. */
struct vq_ppl_scorer {
    vq_logits_file *save, *base;
    struct vq_logit_rec *rec; /* scratch record */
    double *kls;              /* (cap) per-position KL, base only */
    int64_t cap, n_scored, n_top1;
    double nll_sum, nll_sq;
};

/* Prepares s for up to capacity positions. NO_MEMORY (s then needs no free), INVALID_ARG for
 * a negative capacity. */
vq_status vq_ppl_scorer_init(struct vq_ppl_scorer *s, vq_logits_file *save, vq_logits_file *base,
                             int64_t capacity);
/* Scores one position: row holds n_vocab logits, target the next token. INVALID_ARG (more
 * than capacity positions, target out of range), NON_FINITE (nll not finite), IO (save),
 * BAD_FORMAT (base exhausted, corrupt, or another target id), with a reason in err. */
vq_status vq_ppl_scorer_add(struct vq_ppl_scorer *s, const float *row, int n_vocab, uint32_t target,
                            char *err, size_t errlen);
/* Fills out's n_scored, nll_mean, ppl, ppl_stderr and, with a base, kld_mean / median / p99
 * and top1 (NaN without a base; every figure NaN when nothing was scored). Sorts s's KLs. */
void vq_ppl_scorer_finish(struct vq_ppl_scorer *s, struct vq_ppl_result *out);
/* Releases s's buffers (not save / base). */
void vq_ppl_scorer_free(struct vq_ppl_scorer *s);

/* Greedy generation for the reliability probe: resets ctx, evaluates prompt (n_prompt ids) in
 * one prefill, then picks argmax tokens (lowest id on ties) until an end-of-generation token
 * (is_eog(user, id) true; the EOG token is not stored) or max_new tokens. Writes the ids to
 * out (max_new entries), their count to *n_out, and the prefill / decode wall times. The
 * context needs n_ctx >= n_prompt + max_new. */
vq_status vq_probe_generate(vq_ctx *ctx, int n_vocab, const int32_t *prompt, int64_t n_prompt,
                            int max_new, int (*is_eog)(void *user, int32_t id), void *user,
                            int32_t *out, int *n_out, double *prefill_s, double *decode_s);

/* The fixed probe prompts (user turns; >= 8, diverse: facts, reasoning, code, lists,
 * translation, story, advice, definition). Static strings. */
extern const char *const vq_probe_prompts[];
extern const int vq_probe_n_prompts;

/* Length of the common prefix of two id sequences. */
int vq_common_prefix(const int32_t *a, int na, const int32_t *b, int nb);

#endif
