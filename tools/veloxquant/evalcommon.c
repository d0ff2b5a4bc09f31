/* evalcommon.c — see evalcommon.h. */
#include "evalcommon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vq_tools.h"

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int vq_eval_model_open(const char *cmd, const char *path, struct vq_eval_model *em) {
    memset(em, 0, sizeof *em);
    vq_status st;
    em->m = vq_model_load(path, &st);
    if (!em->m) {
        fprintf(stderr, "%s: %s: %s (%s)\n", cmd, path, vq_status_str(st), vq_engine_last_error());
        return 0;
    }
    em->info = vq_model_info_get(em->m);
    em->tok = vq_tok_create(vq_model_gguf(em->m), &st);
    if (!em->tok) {
        fprintf(stderr, "%s: %s: model has no usable %s\n", cmd, path, vq_engine_last_error());
        vq_model_free(em->m);
        em->m = NULL;
        return 0;
    }
    if (!vq_cli_vocab_check(cmd, path, em->tok, em->info->n_vocab)) {
        vq_eval_model_close(em);
        return 0;
    }
    (void)vq_chat_from_gguf(vq_model_gguf(em->m), &em->chat); /* NOT_FOUND: ChatML */
    return 1;
}

int vq_cli_vocab_check(const char *cmd, const char *path, const vq_tokenizer *tok, int n_vocab) {
    if (vq_tok_n_vocab(tok) == n_vocab) return 1;
    fprintf(stderr,
            "%s: %s: the tokenizer has %d tokens but the model's vocabulary (token "
            "embedding / output layer) has %d; the file is inconsistent\n",
            cmd, path, vq_tok_n_vocab(tok), n_vocab);
    return 0;
}

void vq_eval_model_close(struct vq_eval_model *em) {
    vq_tok_free(em->tok);
    vq_model_free(em->m);
    memset(em, 0, sizeof *em);
}

int32_t *vq_eval_tokenize_file(const char *cmd, const struct vq_eval_model *em, const char *path,
                               int64_t *n) {
    /* regular files only (a FIFO or /dev/zero would block or never end), VQ_FILE_MAX_TEXT */
    char *buf = NULL;
    size_t len = 0;
    if (vq_file_read_all(path, VQ_FILE_MAX_TEXT, "text", &buf, &len) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", cmd, vq_file_error());
        return NULL;
    }
    int64_t need = vq_tok_encode(em->tok, buf, len, true, false, NULL, 0);
    if (need == VQ_TOK_ERR_NO_MEMORY) {
        free(buf);
        fprintf(stderr, "%s: out of memory\n", cmd);
        return NULL;
    }
    if (need < 0) need = -need;
    int32_t *ids = malloc((size_t)(need ? need : 1) * sizeof *ids);
    int64_t got = ids ? vq_tok_encode(em->tok, buf, len, true, false, ids, need)
                      : VQ_TOK_ERR_NO_MEMORY;
    free(buf);
    if (got < 0) {
        free(ids);
        fprintf(stderr, "%s: %s: tokenization failed\n", cmd, path);
        return NULL;
    }
    *n = got;
    return ids;
}

void vq_progress_init(struct vq_progress *p, const char *label) {
    p->label = label;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = mono_s();
}

static void bar(struct vq_progress *p, int i, int n, const char *tail) {
    const int w = 30, fill = n > 0 ? (int)((long)w * i / n) : w;
    char b[64];
    for (int k = 0; k < w; k++) b[k] = k < fill ? '#' : '.';
    b[w] = 0;
    fprintf(stderr, "\r%s [%s] %d/%d %s  %.0fs ", p->label, b, i, n, tail, mono_s() - p->t0);
    fflush(stderr);
}

void vq_progress_ppl(void *user, int i, int n, double ppl) {
    struct vq_progress *p = user;
    char tail[64];
    snprintf(tail, sizeof tail, "ppl %.4f", ppl);
    if (p->tty) bar(p, i, n, tail);
    else fprintf(stderr, "%s: chunk %d/%d %s\n", p->label, i, n, tail);
}

void vq_progress_step(struct vq_progress *p, int i, int n, const char *what) {
    if (p->tty) bar(p, i, n, what);
    else fprintf(stderr, "%s: %d/%d %s\n", p->label, i, n, what);
}

void vq_progress_done(struct vq_progress *p) {
    if (p->tty) fputc('\n', stderr);
}

struct eog_ctx {
    const vq_tokenizer *tok;
};
static int is_eog(void *user, int32_t id) {
    return vq_tok_is_eog(((struct eog_ctx *)user)->tok, id);
}

vq_status vq_eval_probe(const struct vq_eval_model *em, vq_ctx *ctx, int n_prompts, int max_tokens,
                        int32_t *out, int *lens, double *decode_tok_s, struct vq_progress *prog) {
    char text[4096];
    int32_t ids[1024];
    struct eog_ctx ec = {em->tok};
    double dec_s = 0;
    int64_t dec_n = 0;
    for (int p = 0; p < n_prompts; p++) {
        struct vq_chat_msg msg = {"user", vq_probe_prompts[p % vq_probe_n_prompts]};
        int64_t tl = vq_chat_apply(&em->chat, &msg, 1, true, text, sizeof text);
        if (tl < 0) return VQ_STATUS_INTERNAL;
        int64_t n = vq_tok_encode(em->tok, text, (size_t)tl, true, true, ids, 1024);
        if (n <= 0) return VQ_STATUS_INTERNAL;
        double ps, ds;
        vq_status st = vq_probe_generate(ctx, em->info->n_vocab, ids, n, max_tokens, is_eog, &ec,
                                         out + (size_t)p * (size_t)max_tokens, &lens[p], &ps, &ds);
        if (st != VQ_STATUS_OK) return st;
        /* decode steps = generated tokens - 1 (the first comes from the prefill logits) */
        if (lens[p] > 1) {
            dec_s += ds;
            dec_n += lens[p] - 1;
        }
        if (prog) vq_progress_step(prog, p + 1, n_prompts, "probe prompts");
    }
    *decode_tok_s = dec_s > 0 ? (double)dec_n / dec_s : 0;
    return VQ_STATUS_OK;
}

double vq_peak_rss_mb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

int *vq_cli_model_windows(const char *cmd, const char *path, int n_layers, int *swa_window,
                          int *n_swa, int quiet) {
    *swa_window = *n_swa = 0;
    vq_status st;
    vq_model *m = vq_model_load(path, &st);
    if (!m) {
        if (!quiet)
            fprintf(stderr, "%s: %s: %s; going on without the model's sliding windows, if any\n",
                    cmd, path, vq_engine_last_error());
        return NULL;
    }
    const struct vq_model_info *mi = vq_model_info_get(m);
    int *w = NULL;
    if (mi->n_swa_layers > 0 && mi->n_layers == n_layers &&
        (w = malloc(sizeof *w * (size_t)n_layers))) {
        for (int l = 0; l < n_layers; l++) w[l] = vq_model_layer_window(m, l);
        *swa_window = mi->swa_window;
        *n_swa = mi->n_swa_layers;
    }
    vq_model_free(m);
    return w;
}
