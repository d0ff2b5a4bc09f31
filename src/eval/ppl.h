/*
 * ppl.h — perplexity with saved logits and KL divergence against a saved base run, and the
 * greedy reliability probe, over the engine (include/vq_engine.h). Not part of the public API:
 * the protocol itself, its parameters and its result are public (vq_perplexity, struct
 * vq_ppl_params / vq_ppl_result in vq_engine.h); this header adds the tools' logits files.
 */
#ifndef VQ_EVAL_PPL_H
#define VQ_EVAL_PPL_H

#include <stdint.h>
#include "veloxquant.h"
#include "vq_engine.h"
#include "eval/logits.h"

/* Top-k summaries per scored position that the tools write with --save-logits by default. */
#define VQ_PPL_TOP_K_DEFAULT 32

/* The context parameters the protocol runs on for p: n_ctx = p->ctx, n_batch = p->n_batch (0:
 * ctx; clamped to ctx), n_threads, logits_all = 1, f32_activations and p->cache. Pure. */
struct vq_ctx_params vq_ppl_ctx_params(const struct vq_ppl_params *p);

/* Checks p and the token count before a context is made: INVALID_ARG with a reason in err for
 * NULL m / tokens / p / out, ctx odd or < 4, negative n_chunks / n_batch, or fewer than ctx
 * tokens; else OK. */
vq_status vq_ppl_check(const vq_model *m, const int32_t *tokens, int64_t n_tokens,
                       const struct vq_ppl_params *p, const struct vq_ppl_result *out, char *err,
                       size_t errlen);

/* The protocol (vq_engine.h "evaluation") on context c, which the caller created from
 * vq_ppl_ctx_params(p) (possibly through vq_ctx_create_kv) and still owns: c is reset before
 * every chunk. When save != NULL, every scored position's summary (top_k =
 * vq_logits_top_k(save)) is appended to it. When base != NULL, KL(base || this run) and top-1
 * agreement are computed per position; the base must hold exactly the positions this run scores
 * (same n_vocab, ctx, count and target ids: otherwise BAD_FORMAT with a reason in err). Statuses
 * of vq_perplexity, plus BAD_FORMAT / IO for the logits files. */
vq_status vq_ppl_run_ctx(vq_ctx *c, const int32_t *tokens, int64_t n_tokens,
                         const struct vq_ppl_params *p, vq_logits_file *save, vq_logits_file *base,
                         vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out,
                         char *err, size_t errlen);

/* vq_ppl_run_ctx on a context created here from p->cache (vq_ctx_create) and freed before
 * returning: vq_perplexity with no config name, plus the logits files. */
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
