/*
 * ppl.c — chunked perplexity (vq_engine.h "evaluation"; the public entry vq_perplexity, which
 * resolves a KV config name, is in src/kvspec/perplexity.c) with saved logits and KL against a
 * base run, and greedy probe generation (see ppl.h).
 */
#include "eval/ppl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

const char *const vq_probe_prompts[] = {
    "What is the capital of France? Answer in one sentence.",
    "Explain why the sky is blue in two or three sentences.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "List five fruits that are rich in vitamin C.",
    "Translate into French: \"The weather is nice today and I want to go for a walk.\"",
    "Write a short story about a robot who learns to paint.",
    "Give me three tips for sleeping better.",
    "What is a prime number? Give two examples.",
    "A train travels 60 km in 45 minutes. What is its average speed in km/h? Show your steps.",
    "Summarize the plot of Romeo and Juliet in three sentences.",
};
const int vq_probe_n_prompts = (int)(sizeof vq_probe_prompts / sizeof vq_probe_prompts[0]);

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

struct vq_ppl_params vq_ppl_params_default(void) {
    struct vq_ppl_params p;
    memset(&p, 0, sizeof p);
    p.ctx = 512;
    p.bos = VQ_PPL_BOS_AUTO;
    p.cache = vq_cache_params_default();
    return p;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

vq_status vq_ppl_scorer_init(struct vq_ppl_scorer *s, vq_logits_file *save, vq_logits_file *base,
                             int64_t capacity) {
    memset(s, 0, sizeof *s);
    if (capacity < 0) return VQ_STATUS_INVALID_ARG;
    s->save = save;
    s->base = base;
    s->cap = capacity;
    s->rec = malloc(sizeof *s->rec);
    s->kls = base ? malloc((size_t)(capacity ? capacity : 1) * sizeof *s->kls) : NULL;
    if (!s->rec || (base && !s->kls)) {
        vq_ppl_scorer_free(s);
        return VQ_STATUS_NO_MEMORY;
    }
    return VQ_STATUS_OK;
}

vq_status vq_ppl_scorer_add(struct vq_ppl_scorer *s, const float *row, int n_vocab, uint32_t target,
                            char *err, size_t errlen) {
    if (s->n_scored >= s->cap || target >= (uint32_t)n_vocab) {
        seterr(err, errlen,
               s->n_scored >= s->cap ? "more positions than expected (%lld)"
                                     : "target id %lld out of the vocabulary",
               s->n_scored >= s->cap ? (long long)s->cap : (long long)target);
        return VQ_STATUS_INVALID_ARG;
    }
    struct vq_logit_rec *rec = s->rec;
    vq_status st;
    double nll;
    if (s->save) {
        const double lse = vq_logit_summarize(row, n_vocab, vq_logits_top_k(s->save), target, rec);
        nll = lse - (double)row[target];
        if ((st = vq_logits_write(s->save, rec)) != VQ_STATUS_OK) {
            seterr(err, errlen, "writing logits: %s", vq_status_str(st));
            return st;
        }
    } else {
        float mx = row[0];
        for (int v = 1; v < n_vocab; v++) mx = row[v] > mx ? row[v] : mx;
        double sum = 0;
        for (int v = 0; v < n_vocab; v++) sum += exp((double)row[v] - (double)mx);
        nll = (double)mx + log(sum) - (double)row[target];
    }
    if (!isfinite(nll)) {
        seterr(err, errlen, "non-finite logits");
        return VQ_STATUS_NON_FINITE;
    }
    if (s->base) {
        if ((st = vq_logits_read(s->base, rec)) != VQ_STATUS_OK) {
            seterr(err, errlen, "reading base logits: %s", vq_status_str(st));
            return st == VQ_STATUS_NOT_FOUND ? VQ_STATUS_BAD_FORMAT : st;
        }
        if (rec->target != target) {
            seterr(err, errlen, "base logits were computed on another text (token %lld)",
                   (long long)s->n_scored);
            return VQ_STATUS_BAD_FORMAT;
        }
        int t1 = 0;
        s->kls[s->n_scored] = vq_logit_kl(rec, row, n_vocab, &t1);
        s->n_top1 += t1;
    }
    s->nll_sum += nll;
    s->nll_sq += nll * nll;
    s->n_scored++;
    return VQ_STATUS_OK;
}

void vq_ppl_scorer_finish(struct vq_ppl_scorer *s, struct vq_ppl_result *out) {
    const int64_t n = s->n_scored;
    out->n_scored = n;
    out->kld_mean = out->kld_median = out->kld_p99 = out->top1 = NAN;
    if (n == 0) {
        out->nll_mean = out->ppl = out->ppl_stderr = NAN;
        return;
    }
    out->nll_mean = s->nll_sum / (double)n;
    out->ppl = exp(out->nll_mean);
    const double var = n > 1 ? (s->nll_sq / (double)n - out->nll_mean * out->nll_mean) : 0;
    out->ppl_stderr = out->ppl * sqrt((var > 0 ? var : 0) / (double)(n > 1 ? n - 1 : 1));
    if (s->base) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += s->kls[i];
        out->kld_mean = sum / (double)n;
        qsort(s->kls, (size_t)n, sizeof *s->kls, cmp_double);
        out->kld_median = n % 2 ? s->kls[n / 2] : 0.5 * (s->kls[n / 2 - 1] + s->kls[n / 2]);
        int64_t k99 = (int64_t)ceil(0.99 * (double)n) - 1;
        out->kld_p99 = s->kls[k99 < 0 ? 0 : k99];
        out->top1 = (double)s->n_top1 / (double)n;
    }
}

void vq_ppl_scorer_free(struct vq_ppl_scorer *s) {
    if (!s) return;
    free(s->rec);
    free(s->kls);
    s->rec = NULL;
    s->kls = NULL;
}

struct vq_ctx_params vq_ppl_ctx_params(const struct vq_ppl_params *p) {
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = p->ctx;
    cp.n_batch = p->n_batch > 0 && p->n_batch < p->ctx ? p->n_batch : p->ctx;
    cp.n_threads = p->n_threads;
    cp.logits_all = 1;
    cp.f32_activations = p->f32_activations;
    cp.cache = p->cache;
    return cp;
}

vq_status vq_ppl_check(const vq_model *m, const int32_t *tokens, int64_t n_tokens,
                       const struct vq_ppl_params *p, const struct vq_ppl_result *out, char *err,
                       size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!m || !tokens || !p || !out) {
        seterr(err, errlen, "NULL model, tokens, params or result");
        return VQ_STATUS_INVALID_ARG;
    }
    if (p->ctx < 4 || p->ctx % 2 || p->n_chunks < 0 || p->n_batch < 0) {
        seterr(err, errlen, "ctx %d (even, >= 4), n_chunks %d, n_batch %d (>= 0)", p->ctx,
               p->n_chunks, p->n_batch);
        return VQ_STATUS_INVALID_ARG;
    }
    if (n_tokens < p->ctx) {
        seterr(err, errlen, "text has %lld tokens, fewer than one chunk of %d",
               (long long)(n_tokens > 0 ? n_tokens : 0), p->ctx);
        return VQ_STATUS_INVALID_ARG;
    }
    return VQ_STATUS_OK;
}

/* The id that replaces each chunk's first token, or -1. */
static int32_t chunk_bos(const vq_model *m, int32_t bos) {
    if (bos != VQ_PPL_BOS_AUTO) return bos >= 0 ? bos : -1;
    return vq_token_add_bos(m) ? vq_token_bos(m) : -1;
}

vq_status vq_ppl_run_ctx(vq_ctx *c, const int32_t *tokens, int64_t n_tokens,
                         const struct vq_ppl_params *p, vq_logits_file *save, vq_logits_file *base,
                         vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out,
                         char *err, size_t errlen) {
    const vq_model *model = vq_ctx_model(c);
    vq_status st = vq_ppl_check(model, tokens, n_tokens, p, out, err, errlen);
    if (st != VQ_STATUS_OK) return st;
    memset(out, 0, sizeof *out);
    out->kld_mean = out->kld_median = out->kld_p99 = out->top1 = NAN;
    const int ctx = p->ctx;
    const int64_t avail = n_tokens / ctx;
    const int n_chunks = (int)(p->n_chunks && p->n_chunks < avail ? p->n_chunks : avail);
    const int n_batch = vq_ppl_ctx_params(p).n_batch;
    const int n_vocab = vq_model_info_get(model)->n_vocab;
    const int first = ctx / 2;
    const int64_t per_chunk = ctx - 1 - first;
    const int32_t bos = chunk_bos(model, p->bos);
    if (vq_ctx_n_ctx(c) < ctx) {
        seterr(err, errlen, "context of %lld tokens for chunks of %d", (long long)vq_ctx_n_ctx(c),
               ctx);
        return VQ_STATUS_INVALID_ARG;
    }
    if (base && (vq_logits_n_vocab(base) != n_vocab || vq_logits_ctx(base) != ctx ||
                 vq_logits_n_records(base) != (uint64_t)(per_chunk * n_chunks))) {
        seterr(err, errlen,
               "base logits (n_vocab %d, ctx %d, %llu positions) do not match this run "
               "(n_vocab %d, ctx %d, %lld positions)",
               vq_logits_n_vocab(base), vq_logits_ctx(base),
               (unsigned long long)vq_logits_n_records(base), n_vocab, ctx,
               (long long)(per_chunk * n_chunks));
        return VQ_STATUS_BAD_FORMAT;
    }
    if (save && (vq_logits_n_vocab(save) != n_vocab || vq_logits_ctx(save) != ctx)) {
        seterr(err, errlen, "save file created for another n_vocab/ctx");
        return VQ_STATUS_INVALID_ARG;
    }

    struct vq_ppl_scorer sc;
    float *logits = malloc((size_t)n_batch * (size_t)n_vocab * sizeof *logits);
    int32_t *chunk = malloc((size_t)ctx * sizeof *chunk);
    st = vq_ppl_scorer_init(&sc, save, base, per_chunk * n_chunks);
    if (!logits || !chunk || st != VQ_STATUS_OK) {
        st = VQ_STATUS_NO_MEMORY;
        seterr(err, errlen, "out of memory");
        goto done;
    }
    double eval_s = 0;
    for (int ch = 0; ch < n_chunks; ch++) {
        memcpy(chunk, tokens + (int64_t)ch * ctx, (size_t)ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        vq_ctx_reset(c);
        for (int off = 0; off < ctx; off += n_batch) {
            const int nb = ctx - off < n_batch ? ctx - off : n_batch;
            const double t0 = vq_clock_s();
            st = vq_ctx_eval(c, chunk + off, nb, logits);
            eval_s += vq_clock_s() - t0;
            if (st != VQ_STATUS_OK) {
                seterr(err, errlen, "eval of chunk %d at %d: %s", ch, off, vq_status_str(st));
                goto done;
            }
            const int i0 = off > first ? off : first, i1 = off + nb < ctx - 1 ? off + nb : ctx - 1;
            for (int i = i0; i < i1; i++) {
                const float *row = logits + (size_t)(i - off) * (size_t)n_vocab;
                char why[160];
                st = vq_ppl_scorer_add(&sc, row, n_vocab, (uint32_t)chunk[i + 1], why, sizeof why);
                if (st != VQ_STATUS_OK) {
                    seterr(err, errlen, "chunk %d, position %d: %s", ch, i, why);
                    goto done;
                }
            }
        }
        if (ch == 0) vq_cache_memory(vq_ctx_cache(c), &out->mem);
        if (progress) progress(user, ch + 1, n_chunks, exp(sc.nll_sum / (double)sc.n_scored));
    }
    out->n_chunks = n_chunks;
    vq_ppl_scorer_finish(&sc, out);
    out->seconds = eval_s;
    out->prefill_tok_s = eval_s > 0 ? (double)n_chunks * ctx / eval_s : 0;
    st = VQ_STATUS_OK;
done:
    vq_ppl_scorer_free(&sc);
    free(chunk);
    free(logits);
    return st;
}

vq_status vq_ppl_run(const vq_model *model, const int32_t *tokens, int64_t n_tokens,
                     const struct vq_ppl_params *p, vq_logits_file *save, vq_logits_file *base,
                     vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out, char *err,
                     size_t errlen) {
    vq_status st = vq_ppl_check(model, tokens, n_tokens, p, out, err, errlen);
    if (st != VQ_STATUS_OK) return st;
    const struct vq_ctx_params cp = vq_ppl_ctx_params(p);
    vq_ctx *c = vq_ctx_create(model, &cp, &st);
    if (!c) {
        seterr(err, errlen, "context: %s (%s)", vq_status_str(st), vq_engine_last_error());
        return st;
    }
    st = vq_ppl_run_ctx(c, tokens, n_tokens, p, save, base, progress, user, out, err, errlen);
    vq_ctx_free(c);
    return st;
}

vq_status vq_probe_generate(vq_ctx *ctx, int n_vocab, const int32_t *prompt, int64_t n_prompt,
                            int max_new, int (*is_eog)(void *user, int32_t id), void *user,
                            int32_t *out, int *n_out, double *prefill_s, double *decode_s) {
    *n_out = 0;
    *prefill_s = *decode_s = 0;
    if (n_prompt < 1 || max_new < 0) return VQ_STATUS_INVALID_ARG;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) return VQ_STATUS_NO_MEMORY;
    vq_ctx_reset(ctx);
    double t0 = vq_clock_s();
    vq_status st = vq_ctx_eval(ctx, prompt, n_prompt, logits);
    *prefill_s = vq_clock_s() - t0;
    t0 = vq_clock_s();
    while (st == VQ_STATUS_OK && *n_out < max_new) {
        int32_t best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        if (is_eog && is_eog(user, best)) break;
        out[(*n_out)++] = best;
        if (*n_out == max_new) break;
        st = vq_ctx_eval(ctx, &best, 1, logits);
    }
    *decode_s = vq_clock_s() - t0;
    free(logits);
    return st;
}

int vq_common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}
