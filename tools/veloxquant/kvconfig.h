/* kvconfig.h — KV-method options shared by estimate-memory, perplexity and sweep (tools/ only):
 * the --method, --bits, --k-method, --v-method, --k-bits, --v-bits option family, method default bits, the named sweep presets
 * and config names ("turboquant_mse-3", "asym-k4v2", "turboquant_mse-4:kivi-2"). */
#ifndef VQ_KVCONFIG_H
#define VQ_KVCONFIG_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"
#include "eval/results.h"

/* getopt_long codes of the option family (above any short option). */
enum {
    VQ_KVOPT_METHOD = 1000, VQ_KVOPT_BITS, VQ_KVOPT_K_METHOD, VQ_KVOPT_V_METHOD, VQ_KVOPT_K_BITS,
    VQ_KVOPT_V_BITS, VQ_KVOPT_GROUP, VQ_KVOPT_RESID, VQ_KVOPT_SINKS, VQ_KVOPT_JL, VQ_KVOPT_KV_SEED,
    VQ_KVOPT_LAST
};

#define VQ_KV_LONG_OPTIONS                                                                  \
    {"method", required_argument, 0, VQ_KVOPT_METHOD},                                      \
    {"bits", required_argument, 0, VQ_KVOPT_BITS},                                          \
    {"k-method", required_argument, 0, VQ_KVOPT_K_METHOD},                                  \
    {"v-method", required_argument, 0, VQ_KVOPT_V_METHOD},                                  \
    {"k-bits", required_argument, 0, VQ_KVOPT_K_BITS},                                      \
    {"v-bits", required_argument, 0, VQ_KVOPT_V_BITS},                                      \
    {"group-size", required_argument, 0, VQ_KVOPT_GROUP},                                   \
    {"residual-length", required_argument, 0, VQ_KVOPT_RESID},                              \
    {"n-sink-tokens", required_argument, 0, VQ_KVOPT_SINKS},                                \
    {"jl-dim", required_argument, 0, VQ_KVOPT_JL},                                          \
    {"kv-seed", required_argument, 0, VQ_KVOPT_KV_SEED}

#define VQ_KV_HELP                                                                          \
    "  --method M            KV method for keys and values (see `veloxquant methods`)\n"  \
    "  --bits B              bits per coordinate for keys and values (default: per method)\n" \
    "  --k-method M, --v-method M, --k-bits B, --v-bits B\n"                               \
    "                        independent key / value settings (override the above)\n"      \
    "  --group-size G        kivi group size (default 32)\n"                               \
    "  --residual-length R   kivi fp16 recent window (default 128; 0 = none)\n"            \
    "  --n-sink-tokens N     kivi_sink fp16 sink tokens (default 5)\n"                     \
    "  --jl-dim M            qjl / turboquant_prod sketch size (default head_dim)\n"       \
    "  --kv-seed S           rotation / sketch seed of the codecs (default 42)\n"

struct vq_kv_opts {
    int has_method, has_k_method, has_v_method;
    enum vq_method method, k_method, v_method;
    int bits, k_bits, v_bits;                 /* 0 = not given */
    int group_size, residual_length, n_sink_tokens, jl_dim;   /* -1 = not given */
    int has_seed;
    uint64_t seed;
};

/* Empty option set (nothing given). */
void vq_kv_opts_init(struct vq_kv_opts *o);
/* Handles one getopt_long code of the family; returns 1 on success, 0 on a bad value (message
 * printed as "<cmd>: --opt: reason"), -1 if the code is not one of the family. */
int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg);
/* 1 if any method option (--method, --k-method, --v-method) was given. */
int vq_kv_opts_any_method(const struct vq_kv_opts *o);
/* Default bits of a method when --bits is not given (fp16 16, fp32 32, turboquant_mse 4,
 * turboquant_prod 3, qjl 1, polar 4, turboquant_rvq 2, kivi 2, kivi_sink 2, vecinfer 2,
 * spectral 3, others 4). */
int vq_kv_default_bits(enum vq_method m);
/* Resolves the options into key / value codec params (head_dim left at its default; the
 * caller sets it). Keys and values default to fp16 when no method is given. The name is a
 * config label (see vq_kv_config_name). */
void vq_kv_opts_resolve(const struct vq_kv_opts *o, struct vq_codec_params *k,
                        struct vq_codec_params *v);

/* Label for a resolved config: "fp16", "turboquant_mse-3", "turboquant_mse-k4v2" (same method,
 * different bits), "qjl-1:kivi-2" (different methods). Methods without a bits choice (fp16,
 * fp32) have no "-B". */
void vq_kv_config_name(const struct vq_codec_params *k, const struct vq_codec_params *v,
                       char *out, size_t cap);

/* Named sweep presets, in sweep order. */
struct vq_kv_preset {
    const char *name;
    enum vq_method km; int kb;
    enum vq_method vm; int vb;
};
extern const struct vq_kv_preset vq_kv_presets[];
extern const int vq_kv_n_presets;

/* Parses a config name into options: a preset name, "METHOD", "METHOD-B", "METHOD-kBvB'",
 * or "KMETHOD-B:VMETHOD-B". Only the syntax and method names are checked here (bits ranges
 * are checked when codecs are created). Returns 1 on success, 0 on a bad name. */
int vq_kv_opts_from_name(const char *name, struct vq_kv_opts *o);
/* Appends the options as command-line arguments (--k-method M --k-bits B ...) to argv at
 * *argc (at most max entries; strings live in buf, nbuf slots of 32 bytes). */
void vq_kv_opts_to_argv(const struct vq_kv_opts *o, char **argv, int *argc, int max,
                        char (*buf)[32], int nbuf);
/* Fills a results.json config from resolved params and a label. */
void vq_kv_fill_result_config(const char *name, const struct vq_codec_params *k,
                              const struct vq_codec_params *v, struct vq_result_config *rc);

#endif
