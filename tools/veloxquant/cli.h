/* cli.h — the veloxquant command-line tool: one function per command (tools/ only). */
#ifndef VQ_CLI_H
#define VQ_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "veloxquant.h"

/* Each command parses its own argv (argv[0] is the command name), prints to stdout/stderr and
 * returns the process exit code: 0 success, 1 runtime error, 2 usage error. */
typedef int (*vq_cli_fn)(int argc, char **argv);

struct vq_cli_cmd {
    const char *name;
    vq_cli_fn fn;
    const char *summary;
};

int vq_cmd_methods(int argc, char **argv);
int vq_cmd_bench(int argc, char **argv);
int vq_cmd_generate(int argc, char **argv);
int vq_cmd_chat(int argc, char **argv);
int vq_cmd_serve(int argc, char **argv);
int vq_cmd_info(int argc, char **argv);

int vq_cmd_estimate_memory(int argc, char **argv);
int vq_cmd_report(int argc, char **argv);
int vq_cmd_perplexity(int argc, char **argv);
int vq_cmd_score_logits(int argc, char **argv);
int vq_cmd_sweep(int argc, char **argv);
int vq_cmd_sweep_run(int argc, char **argv);
int vq_cmd_calibrate(int argc, char **argv);
int vq_cmd_precompute(int argc, char **argv);

/* Calibrated methods (vecinfer, spectral): loads matching artifacts from the artifact cache
 * into cp (calibuse.c). When none is usable (missing, corrupt, truncated, another model,
 * wrong codebook shape) it prints why, builds the artifact (vq_cli_calib_build, progress on
 * stderr), says so and loads it; a rejected file is never used. Call after the per-layer
 * bits are set (vq_kv_layers_apply). Returns 1 on success (also when nothing needs
 * calibration), 0 after printing why not. owned[0..1]: sets to vq_calib_data_free after the
 * context is freed. */
int vq_cli_attach_calib(const char *cmd, const char *model_path, struct vq_cache_params *cp,
                        int n_layers, int head_dim, vq_calib_data *owned[2]);

/* Recording + fitting of calibration artifacts (cmd_calibrate.c), shared by `calibrate` and
 * the on-demand builds: runs text through the model with an fp32 KV cache and writes the
 * selected artifacts (vecinfer k<kc>x<kv>_v<vc>x<vv>, spectral pca, ratequant sens) under
 * the artifact root (or to out). model: an already loaded model to reuse, or NULL to load
 * model_path. "wrote" lines go to report (stdout or stderr). Returns 0, 1 (runtime error)
 * or 2 (bad parameters), after printing "<cmd>: reason"; an artifact that cannot be written
 * is an error (1) unless cache_optional. */
struct vq_model;
struct vq_calib_build {
    const char *model_path;
    struct vq_model *model;
    const char *text_path; /* NULL: built-in English prose */
    int n_tokens, threads; /* defaults 512, 0 */
    int do_vi, do_sp, do_rq;
    int kc, kv, vc, vv; /* vecinfer codebooks (default 8,4 / 8,4) */
    uint64_t seed;      /* default 42 */
    const char *out;    /* NULL: artifact cache */
    double rq_bits;     /* > 0: also print the RateQuant allocation for this mean */
    FILE *report;       /* NULL = stdout */
    /* On-demand builds: when set, a failure to write an artifact to the cache is a warning
     * (path and cause, "used for this run only"), not an error. */
    int cache_optional;
    /* When non-NULL, the fitted sets (vecinfer, spectral, ratequant) are handed over here on
     * success instead of being freed (caller frees with vq_calib_data_free). */
    vq_calib_data **keep_vi, **keep_sp, **keep_rq;
};
void vq_calib_build_init(struct vq_calib_build *b);
int vq_cli_calib_build(const char *cmd, const struct vq_calib_build *b);

/* Tokens of built-in text used by on-demand calibration builds (0 = default 512). */
void vq_cli_calib_set_tokens(int n_tokens);
/* RateQuant layer sensitivities of a model into w (n_layers): loads the `ratequant`
 * artifact, or (missing / corrupt / another geometry) says why and, if may_build, builds it
 * and loads it. Returns 1 on success, 0 after printing why not. */
int vq_cli_ratequant_sens(const char *cmd, const char *model_path, struct vq_model *model,
                          int n_layers, int head_dim, int calib_tokens, int may_build, double *w);

#endif
