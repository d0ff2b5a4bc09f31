/* perplexity.c — vq_perplexity (vq_engine.h "evaluation"): the public entry of the perplexity
 * protocol. It lives with the named-config entry points (vq_ctx_create_kv and friends) because
 * it resolves a KV config name; the protocol itself is src/eval/ppl.c (vq_ppl_run_ctx), which the
 * tools' runs with logits files call too. */
#include <stdio.h>

#include "eval/ppl.h"
#include "veloxquant.h"
#include "vq_engine.h"

vq_status vq_perplexity(const vq_model *m, const int32_t *tokens, int64_t n_tokens,
                        const struct vq_ppl_params *p, const char *kv, vq_ppl_progress_fn progress,
                        void *user, struct vq_ppl_result *out, char *err, size_t errlen) {
    const struct vq_ppl_params def = vq_ppl_params_default();
    if (!p) p = &def;
    vq_status st = vq_ppl_check(m, tokens, n_tokens, p, out, err, errlen);
    if (st != VQ_STATUS_OK) return st;
    const struct vq_ctx_params cp = vq_ppl_ctx_params(p);
    vq_ctx *c = vq_ctx_create_kv(m, &cp, kv, &st);
    if (!c) {
        if (err && errlen) snprintf(err, errlen, "%s", vq_engine_last_error());
        if (err && errlen && !err[0]) snprintf(err, errlen, "context: %s", vq_status_str(st));
        return st;
    }
    st = vq_ppl_run_ctx(c, tokens, n_tokens, p, NULL, NULL, progress, user, out, err, errlen);
    vq_ctx_free(c);
    return st;
}
