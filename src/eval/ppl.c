/*
 * ppl.c — chunked perplexity with KL against a base run, and greedy probe generation
 * (see ppl.h).
 */
#include "eval/ppl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
    p.bos = -1;
    p.top_k = 32;
    p.cache = vq_cache_params_default();
    return p;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

vq_status vq_ppl_run(const vq_model *model, const int32_t *tokens, int64_t n_tokens,
                     const struct vq_ppl_params *p, vq_logits_file *save, vq_logits_file *base,
                     vq_ppl_progress_fn progress, void *user, struct vq_ppl_result *out, char *err,
                     size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!model || !tokens || !p || !out || p->ctx < 4 || p->ctx % 2 || p->n_chunks < 0 ||
        p->n_batch < 0) {
        seterr(err, errlen, "invalid parameters");
        return VQ_STATUS_INVALID_ARG;
    }
    memset(out, 0, sizeof *out);
    out->kld_mean = out->kld_median = out->kld_p99 = out->top1 = NAN;
    const int ctx = p->ctx;
    const int64_t avail = n_tokens / ctx;
    if (avail < 1) {
        seterr(err, errlen, "text has %lld tokens, fewer than one chunk of %d", (long long)n_tokens,
               ctx);
        return VQ_STATUS_INVALID_ARG;
    }
    const int n_chunks = (int)(p->n_chunks && p->n_chunks < avail ? p->n_chunks : avail);
    const int n_batch = p->n_batch ? (p->n_batch < ctx ? p->n_batch : ctx) : ctx;
    const int n_vocab = vq_model_info_get(model)->n_vocab;
    const int first = ctx / 2;
    const int64_t per_chunk = ctx - 1 - first;
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

    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = ctx;
    cp.n_batch = n_batch;
    cp.n_threads = p->n_threads;
    cp.logits_all = 1;
    cp.f32_activations = p->f32_activations;
    cp.cache = p->cache;
    vq_status st;
    vq_ctx *c = vq_ctx_create(model, &cp, &st);
    if (!c) {
        seterr(err, errlen, "context: %s (%s)", vq_status_str(st), vq_engine_last_error());
        return st;
    }
    float *logits = malloc((size_t)n_batch * (size_t)n_vocab * sizeof *logits);
    int32_t *chunk = malloc((size_t)ctx * sizeof *chunk);
    double *kls = base ? malloc((size_t)(per_chunk * n_chunks) * sizeof *kls) : NULL;
    struct vq_logit_rec *rec = malloc(sizeof *rec);
    if (!logits || !chunk || (base && !kls) || !rec) {
        st = VQ_STATUS_NO_MEMORY;
        seterr(err, errlen, "out of memory");
        goto done;
    }
    double nll_sum = 0, nll_sq = 0, eval_s = 0;
    int64_t n_scored = 0, n_top1 = 0;
    for (int ch = 0; ch < n_chunks; ch++) {
        memcpy(chunk, tokens + (int64_t)ch * ctx, (size_t)ctx * sizeof *chunk);
        if (p->bos >= 0) chunk[0] = p->bos;
        vq_ctx_reset(c);
        for (int off = 0; off < ctx; off += n_batch) {
            const int nb = ctx - off < n_batch ? ctx - off : n_batch;
            const double t0 = now_s();
            st = vq_ctx_eval(c, chunk + off, nb, logits);
            eval_s += now_s() - t0;
            if (st != VQ_STATUS_OK) {
                seterr(err, errlen, "eval of chunk %d at %d: %s", ch, off, vq_status_str(st));
                goto done;
            }
            const int i0 = off > first ? off : first, i1 = off + nb < ctx - 1 ? off + nb : ctx - 1;
            for (int i = i0; i < i1; i++) {
                const float *row = logits + (size_t)(i - off) * (size_t)n_vocab;
                const uint32_t target = (uint32_t)chunk[i + 1];
                double nll;
                if (save) {
                    const double lse = vq_logit_summarize(row, n_vocab, vq_logits_top_k(save),
                                                          target, rec);
                    nll = lse - (double)row[target];
                    if ((st = vq_logits_write(save, rec)) != VQ_STATUS_OK) {
                        seterr(err, errlen, "writing logits: %s", vq_status_str(st));
                        goto done;
                    }
                } else {
                    float mx = row[0];
                    for (int v = 1; v < n_vocab; v++) mx = row[v] > mx ? row[v] : mx;
                    double s = 0;
                    for (int v = 0; v < n_vocab; v++) s += exp((double)row[v] - (double)mx);
                    nll = (double)mx + log(s) - (double)row[target];
                }
                if (!isfinite(nll)) {
                    st = VQ_STATUS_NON_FINITE;
                    seterr(err, errlen, "non-finite logits in chunk %d at position %d", ch, i);
                    goto done;
                }
                if (base) {
                    if ((st = vq_logits_read(base, rec)) != VQ_STATUS_OK) {
                        seterr(err, errlen, "reading base logits: %s", vq_status_str(st));
                        if (st == VQ_STATUS_NOT_FOUND) st = VQ_STATUS_BAD_FORMAT;
                        goto done;
                    }
                    if (rec->target != target) {
                        st = VQ_STATUS_BAD_FORMAT;
                        seterr(err, errlen,
                               "base logits were computed on another text (token %lld)",
                               (long long)n_scored);
                        goto done;
                    }
                    int t1 = 0;
                    kls[n_scored] = vq_logit_kl(rec, row, n_vocab, &t1);
                    n_top1 += t1;
                }
                nll_sum += nll;
                nll_sq += nll * nll;
                n_scored++;
            }
        }
        if (ch == 0) vq_cache_memory(vq_ctx_cache(c), &out->mem);
        if (progress) progress(user, ch + 1, n_chunks, exp(nll_sum / (double)n_scored));
    }
    out->n_chunks = n_chunks;
    out->n_scored = n_scored;
    out->nll_mean = nll_sum / (double)n_scored;
    out->ppl = exp(out->nll_mean);
    const double var = n_scored > 1 ? (nll_sq / n_scored - out->nll_mean * out->nll_mean) : 0;
    out->ppl_stderr = out->ppl *
                      sqrt((var > 0 ? var : 0) / (double)(n_scored > 1 ? n_scored - 1 : 1));
    out->seconds = eval_s;
    out->prefill_tok_s = eval_s > 0 ? (double)n_chunks * ctx / eval_s : 0;
    if (base) {
        double s = 0;
        for (int64_t i = 0; i < n_scored; i++) s += kls[i];
        out->kld_mean = s / (double)n_scored;
        qsort(kls, (size_t)n_scored, sizeof *kls, cmp_double);
        out->kld_median = n_scored % 2 ? kls[n_scored / 2]
                                       : 0.5 * (kls[n_scored / 2 - 1] + kls[n_scored / 2]);
        int64_t k99 = (int64_t)ceil(0.99 * (double)n_scored) - 1;
        out->kld_p99 = kls[k99 < 0 ? 0 : k99];
        out->top1 = (double)n_top1 / (double)n_scored;
    }
    st = VQ_STATUS_OK;
done:
    free(rec);
    free(kls);
    free(chunk);
    free(logits);
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
    double t0 = now_s();
    vq_status st = vq_ctx_eval(ctx, prompt, n_prompt, logits);
    *prefill_s = now_s() - t0;
    t0 = now_s();
    while (st == VQ_STATUS_OK && *n_out < max_new) {
        int32_t best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        if (is_eog && is_eog(user, best)) break;
        out[(*n_out)++] = best;
        if (*n_out == max_new) break;
        st = vq_ctx_eval(ctx, &best, 1, logits);
    }
    *decode_s = now_s() - t0;
    free(logits);
    return st;
}

int vq_common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}
