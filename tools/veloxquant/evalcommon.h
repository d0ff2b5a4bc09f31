/* evalcommon.h — shared pieces of the model-evaluation commands (perplexity, sweep; tools/ only):
 * opening a model with its tokenizer and chat template, tokenizing a text file, a progress
 * display (a bar on a terminal, plain lines otherwise), the greedy probe over the fixed
 * prompts, and peak RSS. */
#ifndef VQ_EVALCOMMON_H
#define VQ_EVALCOMMON_H

#include <stdint.h>
#include <stdio.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "vq_tools.h"

struct vq_eval_model {
    vq_model *m;
    vq_tokenizer *tok;
    struct vq_chat_template chat;
    const struct vq_model_info *info;
};

/* Loads the model, its tokenizer and chat template; prints "<cmd>: ..." and returns 0 on
 * failure (nothing to free), 1 on success. */
int vq_eval_model_open(const char *cmd, const char *path, struct vq_eval_model *em);
void vq_eval_model_close(struct vq_eval_model *em);

/* 1 if the tokenizer has exactly the model's n_vocab tokens; otherwise prints "<cmd>: path:
 * ..." and returns 0. A smaller tokenizer would let the model emit ids that print nothing, a
 * larger one feed ids the model has no embedding for. Used by every command that tokenizes. */
int vq_cli_vocab_check(const char *cmd, const char *path, const vq_tokenizer *tok, int n_vocab);

/* Reads a text file and tokenizes it (add_special as the model asks, no special-token
 * parsing). Returns a malloc'd array and its length in *n, or NULL after printing an error. */
int32_t *vq_eval_tokenize_file(const char *cmd, const struct vq_eval_model *em, const char *path,
                               int64_t *n);

/* Progress display for vq_ppl_run; label is printed before the numbers. */
struct vq_progress {
    const char *label;
    int tty;
    double t0;
};
void vq_progress_init(struct vq_progress *p, const char *label);
void vq_progress_ppl(void *user, int i, int n, double ppl);
/* Plain step message ("label: i/n what"); a bar on a terminal. */
void vq_progress_step(struct vq_progress *p, int i, int n, const char *what);
void vq_progress_done(struct vq_progress *p);

/* Greedy probe over vq_probe_prompts (first n_prompts, chat template, generation prompt):
 * out[p] receives up to max_tokens ids (caller-allocated n_prompts x max_tokens), lens[p]
 * their count. Also returns the mean decode tok/s over every prompt in *decode_tok_s.
 * The context needs n_ctx >= longest prompt + max_tokens. Returns a status; prints nothing. */
vq_status vq_eval_probe(const struct vq_eval_model *em, vq_ctx *ctx, int n_prompts, int max_tokens,
                        int32_t *out, int *lens, double *decode_tok_s, struct vq_progress *prog);

/* The sliding windows of the model at path, as a context of it passes them to its cache:
 * loads the model (mmap), returns a malloc'd array of its n_layers windows (vq_model_layer_window;
 * caller frees) with the window and the count of windowed layers in *swa_window / *n_swa, or
 * NULL when no layer is windowed, n_layers differs, or the engine cannot load the model (then
 * prints "<cmd>: path: reason; ... without ... windows" on stderr unless quiet). */
int *vq_cli_model_windows(const char *cmd, const char *path, int n_layers, int *swa_window,
                          int *n_swa, int quiet);

/* Peak resident set size of this process in MB (getrusage). */
double vq_peak_rss_mb(void);

#endif
