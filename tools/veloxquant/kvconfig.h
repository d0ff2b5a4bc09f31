/* kvconfig.h — the one KV-option table of the CLI (tools/ only), shared by generate, chat,
 * perplexity, sweep (and its sweep-run children), estimate-memory and bench: the
 * --method, --bits, --k-method, --v-method, --k-bits, --v-bits option family, codec options
 * (--group-size, --residual-length, --n-sink-tokens, --jl-dim, --kv-seed), mixed precision
 * across layers (--k-bits-per-layer, --v-bits-per-layer, fp16 first/last layers,
 * --ratequant B), the outlier modifiers and --kv NAME. What a name means (presets, the config
 * grammar, canonical names) and how a config becomes cache params is the library's
 * (veloxquant.h "KV specs"); this file maps options onto a struct vq_kv_spec and runs the
 * library's resolution with the CLI's messages, calibration builds and results fields.
 *
 * Adding a KV option (it then works in every command above):
 *   1. a VQ_KVOPT_* code below and its line in VQ_KV_LONG_OPTIONS and VQ_KV_HELP;
 *   2. a field in struct vq_kv_spec (veloxquant.h; "not given" value set in vq_kv_spec_init);
 *   3. its case in vq_kv_opts_handle (kvconfig.c: value parsing and range);
 *   4. its effect in vq_kv_spec_codecs / vq_kv_spec_apply_modifiers, its name suffix in
 *      vq_kv_spec_name and parse_suffixes (src/kvspec/kvspec.c);
 *   5. its flag in vq_kv_opts_to_argv and, if it changes results, in the result options. */
#ifndef VQ_KVCONFIG_H
#define VQ_KVCONFIG_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"
#include "vq_tools.h"

struct vq_model;

/* getopt_long codes of the option family (above any short option). */
enum {
    VQ_KVOPT_METHOD = 1000,
    VQ_KVOPT_BITS,
    VQ_KVOPT_K_METHOD,
    VQ_KVOPT_V_METHOD,
    VQ_KVOPT_K_BITS,
    VQ_KVOPT_V_BITS,
    VQ_KVOPT_GROUP,
    VQ_KVOPT_RESID,
    VQ_KVOPT_SINKS,
    VQ_KVOPT_JL,
    VQ_KVOPT_KV_SEED,
    VQ_KVOPT_K_BPL,
    VQ_KVOPT_V_BPL,
    VQ_KVOPT_FP16_LAYERS,
    VQ_KVOPT_FP16_FIRST,
    VQ_KVOPT_FP16_LAST,
    VQ_KVOPT_RATEQUANT,
    VQ_KVOPT_RQ_VALUES,
    VQ_KVOPT_CALIB_TOKENS,
    VQ_KVOPT_OUTLIER_TOKENS,
    VQ_KVOPT_OUTLIER_CHANNELS,
    VQ_KVOPT_N_CALIB,
    VQ_KVOPT_PRINT_CONFIG,
    VQ_KVOPT_WINDOW,
    VQ_KVOPT_STREAM_SINKS,
    VQ_KVOPT_KEY_SCALES,
    VQ_KVOPT_KV,
    VQ_KVOPT_KEY_CHANNEL_BITS,
    /* new options: add the code here, just above VQ_KVOPT_LAST */
    VQ_KVOPT_LAST
};

#define VQ_KV_LONG_OPTIONS \
    {"method", required_argument, 0, VQ_KVOPT_METHOD}, \
        {"bits", required_argument, 0, VQ_KVOPT_BITS}, \
        {"k-method", required_argument, 0, VQ_KVOPT_K_METHOD}, \
        {"v-method", required_argument, 0, VQ_KVOPT_V_METHOD}, \
        {"k-bits", required_argument, 0, VQ_KVOPT_K_BITS}, \
        {"v-bits", required_argument, 0, VQ_KVOPT_V_BITS}, \
        {"group-size", required_argument, 0, VQ_KVOPT_GROUP}, \
        {"residual-length", required_argument, 0, VQ_KVOPT_RESID}, \
        {"n-sink-tokens", required_argument, 0, VQ_KVOPT_SINKS}, \
        {"jl-dim", required_argument, 0, VQ_KVOPT_JL}, \
        {"kv-seed", required_argument, 0, VQ_KVOPT_KV_SEED}, \
        {"k-bits-per-layer", required_argument, 0, VQ_KVOPT_K_BPL}, \
        {"v-bits-per-layer", required_argument, 0, VQ_KVOPT_V_BPL}, \
        {"fp16-layers", required_argument, 0, VQ_KVOPT_FP16_LAYERS}, \
        {"keep-fp16-first", required_argument, 0, VQ_KVOPT_FP16_FIRST}, \
        {"keep-fp16-last", required_argument, 0, VQ_KVOPT_FP16_LAST}, \
        {"ratequant", required_argument, 0, VQ_KVOPT_RATEQUANT}, \
        {"ratequant-values", required_argument, 0, VQ_KVOPT_RQ_VALUES}, \
        {"calib-tokens", required_argument, 0, VQ_KVOPT_CALIB_TOKENS}, \
        {"outlier-tokens", required_argument, 0, VQ_KVOPT_OUTLIER_TOKENS}, \
        {"outlier-channels", required_argument, 0, VQ_KVOPT_OUTLIER_CHANNELS}, \
        {"n-calib-tokens", required_argument, 0, VQ_KVOPT_N_CALIB}, \
        {"print-kv-config", no_argument, 0, VQ_KVOPT_PRINT_CONFIG}, \
        {"window", required_argument, 0, VQ_KVOPT_WINDOW}, \
        {"sinks", required_argument, 0, VQ_KVOPT_STREAM_SINKS}, \
        {"key-scales", required_argument, 0, VQ_KVOPT_KEY_SCALES}, \
        {"kv", required_argument, 0, VQ_KVOPT_KV}, { \
        "key-channel-bits", required_argument, 0, VQ_KVOPT_KEY_CHANNEL_BITS \
    }

#define VQ_KV_HELP \
    "  --kv NAME             a KV config by name: a quality-per-bit preset kv8, kv5, kv4, kv3,\n" \
    "                        kv2 (the lowest KL measured at <= 8.5, 5.5, 4.5, 3.5, 2.5\n" \
    "                        bits/elem), fp16 (the baseline), a named config or the config\n" \
    "                        grammar (`veloxquant methods`); replaces the options below\n" \
    "  --method M            KV method for keys and values (see `veloxquant methods`)\n" \
    "  --bits B              bits per coordinate for keys and values (default: per method)\n" \
    "  --k-method M, --v-method M, --k-bits B, --v-bits B\n" \
    "                        independent key / value settings (override the above)\n" \
    "  --group-size G        kivi group size (default 32)\n" \
    "  --residual-length R   kivi fp16 recent window (default 128; 0 = none)\n" \
    "  --n-sink-tokens N     kivi_sink fp16 sink tokens (default 5)\n" \
    "  --jl-dim M            qjl / turboquant_prod sketch size (default head_dim)\n" \
    "  --kv-seed S           rotation / sketch seed of the codecs (default 42)\n" \
    "  --k-bits-per-layer L, --v-bits-per-layer L\n" \
    "                        comma list of bits, one per layer (mixed precision)\n" \
    "  --fp16-layers first,last | --keep-fp16-first N | --keep-fp16-last N\n" \
    "                        keep the first / last layer(s) in fp16 (K and V)\n" \
    "  --ratequant B         RateQuant: per-layer key bits with mean B (e.g. 1.5, 2.5) from\n" \
    "                        the model's layer sensitivities (calibrated on demand); scalar\n" \
    "                        codec (default turboquant_mse)\n" \
    "  --ratequant-values V  keys (values use the key allocation; default), even (values\n" \
    "                        spread evenly to the same mean), off (values keep --v-bits)\n" \
    "  --calib-tokens N      tokens of built-in text when calibration must be built (512)\n" \
    "  --outlier-tokens K    keep tokens with key norm > mean + K*std of a prefill in fp16\n" \
    "                        (K and V; 0 = off; config suffix +otK, +ot = 2.5)\n" \
    "  --outlier-channels N  int8 two-stream keys for the N largest channels (0 = off;\n" \
    "                        turboquant_*, qjl, polar keys; config suffix +ocN)\n" \
    "  --n-calib-tokens T    tokens that pick the outlier channels (default 200; +ocNtT)\n" \
    "  --window W            StreamingLLM eviction on every layer without a window of its own:\n" \
    "                        attend to the newest W tokens (+ the sinks), older pages are\n" \
    "                        recycled so KV memory stays bounded (0 = off; suffix +wW)\n" \
    "  --sinks S             with --window: keep the first S tokens forever (suffix +wWsS);\n" \
    "                        alone: full attention, the first S tokens' K/V attended from\n" \
    "                        fp16 rows instead of codes (attention sinks; suffix +sS)\n" \
    "  --key-scales M       per-channel key scales folded into the query (q.k unchanged):\n" \
    "                        off, keys (from the keys of the first append; suffix +ksk), qk\n" \
    "                        (keys and queries of the first batch; suffix +ks)\n" \
    "  --key-channel-bits M  on: a KIVI width per key channel (mean = the layer's width) from\n" \
    "                        the first batch's query energy x key range (suffix +kc); zero:\n" \
    "                        the same with 0-bit channels (group mean only; suffix +kcz); off\n" \
    "  --print-kv-config     print the resolved KV config (JSON) and exit without running\n"

/* The CLI's KV options: the library spec they fill, and what only the CLI needs. */
struct vq_kv_opts {
    struct vq_kv_spec s; /* every option of the family lands here (veloxquant.h) */
    int print_config;    /* --print-kv-config */
    int kv_given;        /* --kv NAME was given (then no other option of the family) */
    char kv_name[128];   /* its argument */
};
/* Per-layer settings resolved for one model: the library's arrays (vq_kv_layer_bits_free). */
#define vq_kv_layers vq_kv_layer_bits
#define vq_kv_layers_free vq_kv_layer_bits_free

/* Empty option set (nothing given). */
void vq_kv_opts_init(struct vq_kv_opts *o);
/* Handles one getopt_long code of the family; returns 1 on success, 0 on a bad value (message
 * printed as "<cmd>: --opt: reason"), -1 if the code is not one of the family. --kv takes any
 * config name the library parses (vq_kv_spec_parse: kv8..kv2, fp16, named configs, grammar). */
int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg);
/* 1 if any option of the family that changes the config was given (not --print-kv-config). */
int vq_kv_opts_given(const struct vq_kv_opts *o);
/* 1 if any method option (--method, --k-method, --v-method) was given. */
int vq_kv_opts_any_method(const struct vq_kv_opts *o);
/* 1 if any per-layer option (lists, fp16 layers, ratequant) was given. */
int vq_kv_opts_any_layers(const struct vq_kv_opts *o);
/* Prints the resolved config cp (key / value codec params, cache modifiers) under label name
 * as one JSON object on stdout (--print-kv-config); every command prints the same fields for
 * the same options. Returns 0 (the exit code), 1 if out of memory. */
int vq_kv_print_config(const char *name, const struct vq_cache_params *cp);

/* Step 1, at parse time (no model yet): *cp = defaults with the spec's codecs and modifiers
 * (vq_kv_spec_codecs, vq_kv_spec_apply_modifiers), and the spec's canonical name in name
 * (vq_kv_spec_name) — the label every command prints and records. Returns 1, or 0 after
 * printing "<cmd>: reason" (a width the method does not accept). */
int vq_kv_opts_prepare(const char *cmd, const struct vq_kv_opts *o, struct vq_cache_params *cp,
                       char *name, size_t cap);
/* Step 2, with the model's geometry: the whole cache config through the library
 * (vq_kv_spec_cache_params: codecs, modifiers, per-layer widths), RateQuant's layer
 * sensitivities loaded or built on demand (calib_tokens tokens; model_path / model as
 * vq_cli_ratequant_sens takes them) and printed with the allocation unless VQ_KV_QUIET, and,
 * when owned is not NULL, the calibration artifacts of vecinfer / spectral attached
 * (vq_cli_attach_calib; the caller frees owned[0..1]). lb receives the per-layer arrays cp
 * points to (vq_kv_layers_free). Returns 1, 0 after printing a usage problem, -1 after printing
 * a runtime failure. */
int vq_kv_opts_build(const char *cmd, const struct vq_kv_opts *o, const char *model_path,
                     struct vq_model *model, int n_layers, int n_kv_heads, int head_dim,
                     struct vq_cache_params *cp, struct vq_kv_layers *lb, vq_calib_data *owned[2],
                     int flags);
/* flags of vq_kv_opts_build: no allocation printout; RateQuant with equal sensitivities
 * instead of the model's (no artifact read or built; estimate-memory listings: the bytes
 * depend only on the sum of the bits for codecs whose block bytes are linear in bits). */
enum { VQ_KV_QUIET = 1, VQ_KV_EQUAL_WEIGHTS = 2 };

/* Appends the options as command-line arguments (--k-method M --k-bits B ...) to argv at
 * *argc (at most max entries; strings live in buf, nbuf slots of 32 bytes): for configs a
 * name cannot carry (explicit per-layer lists). */
void vq_kv_opts_to_argv(const struct vq_kv_opts *o, char **argv, int *argc, int max,
                        char (*buf)[32], int nbuf);
/* Fills a results.json config from resolved params and the config's name. The name's
 * modifiers (vq_kv_spec_parse) become options outlier_token_k_x100 (K * 100, rounded),
 * n_outlier_channels, n_calib_tokens, stream_window / stream_sinks, key_scales,
 * key_channel_bits. */
void vq_kv_fill_result_config(const char *name, const struct vq_codec_params *k,
                              const struct vq_codec_params *v, struct vq_result_config *rc);
/* Files written before fractional widths were recorded hold the codec's integer bits field in
 * config.k_bits / v_bits (2 for vecinfer-1.5, as vecinfer stores 1.5 as bits 2 with codebook
 * shape (12, 8)). For every row whose name parses to a fractional width w of a method that
 * accepts it, a recorded value equal to that integer field becomes w. */
void vq_kv_results_upgrade(struct vq_results *r);
/* Adds the per-layer settings to a results.json config's integer options: ratequant_mbits
 * (mean key bits x 1000), fp16_first / fp16_last, and the per-layer bits as decimal digit
 * groups k_bits_l<first> / v_bits_l<first> (15 layers per option, one digit per layer, layer
 * <first> leftmost), as far as the option slots allow (else per-width layer counts). */
void vq_kv_result_config_layers(const struct vq_cache_params *cp, const struct vq_kv_layers *l,
                                struct vq_result_config *rc);

#endif
