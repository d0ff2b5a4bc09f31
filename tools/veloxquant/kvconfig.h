/* kvconfig.h — the one KV-option table and resolver of the CLI (tools/ only), shared by
 * generate, perplexity, sweep (and its sweep-run children), estimate-memory and bench: the
 * --method, --bits, --k-method, --v-method, --k-bits, --v-bits option family, codec options
 * (--group-size, --residual-length, --n-sink-tokens, --jl-dim, --kv-seed), mixed precision
 * across layers (--k-bits-per-layer, --v-bits-per-layer, fp16 first/last layers,
 * --ratequant B), the outlier modifiers, the named sweep presets and config names
 * ("turboquant_mse-3", "asym-k4v2", "turboquant_mse-4:kivi-2", "ratequant-2.5", "vecinfer-1.5").
 * Defaults (bits per method, which options a method reads) come from the codec traits
 * (vq_method_info_get), never from a per-method switch here.
 *
 * Adding a KV option (it then works in every command above):
 *   1. a VQ_KVOPT_* code below and its line in VQ_KV_LONG_OPTIONS and VQ_KV_HELP;
 *   2. a field in struct vq_kv_opts ("not given" value set in vq_kv_opts_init);
 *   3. its case in vq_kv_opts_handle (kvconfig.c: value parsing and range);
 *   4. its effect in vq_kv_opts_resolve (codec params) or vq_kv_opts_apply_cache (cache params);
 *   5. its flag in vq_kv_opts_to_argv (sweep passes configs to its children as options) and,
 *      if it changes results, in the config label (vq_kv_config_name_opts) / result options. */
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
    "  --kv NAME             a quality-per-bit preset: kv8, kv5, kv4, kv3, kv2 (the lowest KL\n" \
    "                        measured at <= 8.5, 5.5, 4.5, 3.5, 2.5 bits/elem; `veloxquant\n" \
    "                        methods`); replaces the options below, so give it alone\n" \
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

#define VQ_KV_MAX_LAYERS 512
enum { VQ_RQ_VALUES_KEYS = 0, VQ_RQ_VALUES_EVEN = 1, VQ_RQ_VALUES_OFF = 2 };

struct vq_kv_opts {
    int has_method, has_k_method, has_v_method;
    enum vq_method method, k_method, v_method;
    double bits, k_bits, v_bits; /* 0 = not given; whole or half (vecinfer 1.5) */
    int group_size, residual_length, n_sink_tokens, jl_dim; /* -1 = not given */
    int has_seed;
    uint64_t seed;
    /* mixed precision across layers */
    int n_k_bpl, n_v_bpl; /* 0 = not given */
    int k_bpl[VQ_KV_MAX_LAYERS], v_bpl[VQ_KV_MAX_LAYERS];
    /* 1 = the list came from a config name's "+kb<digits>" / "+vb<digits>" suffix: a pattern
     * over the model's depth (layer i of n takes entry floor(i * len / n)), not one entry per
     * layer */
    int k_bpl_pattern, v_bpl_pattern;
    int fp16_first, fp16_last; /* 0 = none */
    double ratequant;          /* mean key bits; 0 = off */
    int rq_values;             /* VQ_RQ_VALUES_* */
    int calib_tokens;          /* 0 = default (512) */
    /* outlier modifiers (cache-level) */
    float outlier_token_k;                  /* < 0 = not given */
    int n_outlier_channels, n_calib_tokens; /* -1 = not given */
    int print_config;                       /* --print-kv-config */
    int stream_window, stream_sinks;        /* StreamingLLM window / sinks; -1 = not given */
    int key_scales;                         /* vq_cache_params.key_scales; -1 = not given */
    int key_channel_bits;                   /* vq_cache_params.key_channel_bits; -1 = not given */
    int kv_tier;                            /* --kv: 1 + index in vq_kv_tiers; 0 = not given */
};

/* Empty option set (nothing given). */
void vq_kv_opts_init(struct vq_kv_opts *o);
/* Handles one getopt_long code of the family; returns 1 on success, 0 on a bad value (message
 * printed as "<cmd>: --opt: reason"), -1 if the code is not one of the family. */
int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg);
/* 1 if any option of the family that changes the config was given (not --print-kv-config). */
int vq_kv_opts_given(const struct vq_kv_opts *o);
/* Prints the resolved config cp (key / value codec params, cache modifiers) under label name
 * as one JSON object on stdout (--print-kv-config); every command prints the same fields for
 * the same options. Returns 0 (the exit code), 1 if out of memory. */
int vq_kv_print_config(const char *name, const struct vq_cache_params *cp);
/* 1 if any method option (--method, --k-method, --v-method) was given. */
int vq_kv_opts_any_method(const struct vq_kv_opts *o);
/* Default bits of a method when --bits is not given: the codec's trait
 * (vq_method_default_bits: fp16 16, fp32 32, turboquant_mse 4, turboquant_prod 3, qjl 1,
 * polar 4, turboquant_rvq 2, kivi 2, kivi_sink 2, vecinfer 2, spectral 3). */
int vq_kv_default_bits(enum vq_method m);
/* The codec of --ratequant without --method and of the "ratequant-B" presets. */
#define VQ_KV_RQ_METHOD VQ_METHOD_TURBOQUANT_MSE
/* Resolves the options into key / value codec params (head_dim left at its default; the
 * caller sets it). Keys and values default to fp16 when no method is given; widths not given
 * are the method's default (vq_kv_default_bits). Returns 1, or 0 after printing
 * "<cmd>: reason" for a fractional width the method does not accept (an integer width outside
 * the method's range is kept and refused by vq_codec_create with the method's parameters). */
int vq_kv_opts_resolve(const char *cmd, const struct vq_kv_opts *o, struct vq_codec_params *k,
                       struct vq_codec_params *v);

/* Label for a resolved config: "fp16", "turboquant_mse-3", "turboquant_mse-k4v2" (same method,
 * different bits), "qjl-1:kivi-2" (different methods). Methods without a bits choice (fp16,
 * fp32) have no "-B". */
void vq_kv_config_name(const struct vq_codec_params *k, const struct vq_codec_params *v, char *out,
                       size_t cap);
/* Sets the cache-level modifiers given (outlier_token_k, n_outlier_channels, n_calib_tokens)
 * in cp; leaves the other fields alone. */
void vq_kv_opts_apply_cache(const struct vq_kv_opts *o, struct vq_cache_params *cp);
/* NULL if cp's outlier modifiers suit its key/value methods, else a static reason (the
 * combinations vq_cache_create refuses with VQ_STATUS_UNSUPPORTED). */
const char *vq_kv_modifier_error(const struct vq_cache_params *cp);
/* Appends the modifier suffix of cp to a config label: "+otK" ("+ot" for K = 2.5), then
 * "+ocN" ("+ocNtT" when n_calib_tokens != 200); nothing when both are off. */
void vq_kv_config_name_mod(const struct vq_cache_params *cp, char *out, size_t cap);

/* Label including the per-layer options of o: "ratequant-2.5" (turboquant_mse keys with
 * --ratequant, values following), else the base label with suffixes "+rq2.5",
 * "+kbpl" / "+vbpl" (explicit lists), "+fp16f1l1" (fp16 edge layers), then the codec options given
 * "+gG" (--group-size), "+resR" (--residual-length), "+sinkN" (--n-sink-tokens), "+jlM"
 * (--jl-dim), "+seedS" (--kv-seed), then the outlier modifiers "+ot[K]", "+ocN[tT]"
 * (vq_kv_config_name_mod). */
void vq_kv_config_name_opts(const struct vq_kv_opts *o, const struct vq_codec_params *k,
                            const struct vq_codec_params *v, char *out, size_t cap);

/* Per-layer settings resolved for one model (vq_kv_layers_apply): arrays owned here, pointed
 * to by the cache params; keep alive until every cache made from them is freed. */
struct vq_kv_layers {
    int n_layers;
    int *k_bits, *v_bits; /* NULL when not per-layer */
    double rq_mean;       /* RateQuant mean key bits (0 = off) */
};

/* Applies the per-layer options of o to cp for a model of n_layers layers and head_dim:
 * validates --k/v-bits-per-layer (length n_layers, every entry accepted by the codec),
 * the fp16 first/last counts, and for --ratequant B loads the model's RateQuant
 * sensitivities (built on demand with `calib_tokens` tokens; model_path / model may be
 * needed, model may be NULL) and allocates the key bits with vq_ratequant_allocate over the
 * bit-widths the key codec accepts (prints the allocation to stderr unless VQ_KV_QUIET). Values
 * follow o->rq_values. Returns 1 on success, 0 after printing "<cmd>: reason" (usage-type
 * problems), -1 on runtime failures (calibration could not be built). */
int vq_kv_layers_apply(const char *cmd, const struct vq_kv_opts *o, const char *model_path,
                       struct vq_model *model, int n_layers, int head_dim,
                       struct vq_cache_params *cp, struct vq_kv_layers *out, int flags);
/* flags of vq_kv_layers_apply: no allocation printout; RateQuant with equal sensitivities
 * instead of the model's (no artifact read or built; estimate-memory listings: the bytes
 * depend only on the sum of the bits for codecs whose block bytes are linear in bits, e.g.
 * turboquant_mse with head_dim % 8 == 0, so the estimate stays exact there). */
enum { VQ_KV_QUIET = 1, VQ_KV_EQUAL_WEIGHTS = 2 };
void vq_kv_layers_free(struct vq_kv_layers *l);
/* 1 if any per-layer option (lists, fp16 layers, ratequant) was given. */
int vq_kv_opts_any_layers(const struct vq_kv_opts *o);

/* Named sweep presets, in sweep order. Entries named "ratequant-B" are RateQuant configs
 * (turboquant_mse keys and values, --ratequant B); their bits fields give the lowest width
 * used and are not matched by vq_kv_config_name. */
struct vq_kv_preset {
    const char *name;
    const char *km;
    double kb; /* key method name and width */
    const char *vm;
    double vb; /* value method name and width */
};
extern const struct vq_kv_preset vq_kv_presets[];
extern const int vq_kv_n_presets;

/* The --kv presets ("kv8" ... "kv2"): each the config (a name vq_kv_opts_from_name parses)
 * with the lowest mean KL measured on the default model at <= max_bits bits/elem, K and V
 * together, side data and windows included (README "Presets": command, commit, table). */
struct vq_kv_tier {
    const char *name;
    double max_bits;
    const char *config;
};
extern const struct vq_kv_tier vq_kv_tiers[];
extern const int vq_kv_n_tiers;
/* Exact bits/elem (K and V together: codes, side data, windows, centering and scale vectors;
 * vq_kv_estimate) of tier t on the default model's geometry (SmolLM2-135M: 30 layers x 3 kv
 * heads x head_dim 64) after a prefill of ctx tokens (*bits) and averaged over the
 * VQ_KV_TIER_CYCLE contexts ctx - 255 .. ctx (*mean_bits: KIVI keys wait in fp16 until a group
 * of G tokens is full, so their bytes depend on ctx mod G; G <= 256). Returns 1, or 0 if the
 * config does not resolve or ctx < VQ_KV_TIER_CYCLE. Thread-safe. */
#define VQ_KV_TIER_CYCLE 256
int vq_kv_tier_bits(const struct vq_kv_tier *t, int64_t ctx, double *bits, double *mean_bits);

/* Parses a config name into options: a --kv preset name (its config), a preset name,
 * "METHOD", "METHOD-B", "METHOD-kBvB'", or "KMETHOD-B:VMETHOD-B", with optional "+..."
 * suffixes of vq_kv_config_name_opts ("+rqB", "+fp16fAlB", codec options "+gG", "+resR",
 * "+sinkN", "+jlM", "+seedS", outlier modifiers "+ot", "+ot<K>", "+oc<N>", "+oc<N>t<T>", key
 * scales "+ks", "+ksk"). The "+kbpl" /
 * "+vbpl" suffixes of explicit per-layer lists are display-only (a name cannot carry the list)
 * and are refused here. Only the syntax and method names are checked (bits ranges are
 * checked when codecs are created). Returns 1 on success, 0 on a bad name. */
int vq_kv_opts_from_name(const char *name, struct vq_kv_opts *o);
/* Appends the options as command-line arguments (--k-method M --k-bits B ...) to argv at
 * *argc (at most max entries; strings live in buf, nbuf slots of 32 bytes). */
void vq_kv_opts_to_argv(const struct vq_kv_opts *o, char **argv, int *argc, int max,
                        char (*buf)[32], int nbuf);
/* Fills a results.json config from resolved params and a label. Outlier-modifier suffixes
 * of the label become options outlier_token_k_x100 (K * 100, rounded), n_outlier_channels and
 * n_calib_tokens. */
void vq_kv_fill_result_config(const char *name, const struct vq_codec_params *k,
                              const struct vq_codec_params *v, struct vq_result_config *rc);
/* Files written before fractional widths were recorded hold the codec's integer bits field in
 * config.k_bits / v_bits (2 for vecinfer-1.5, as vecinfer stores 1.5 as bits 2 with codebook
 * shape (12, 8)). For every row whose name parses (vq_kv_opts_from_name) to a fractional width
 * w of a method that accepts it, a recorded value equal to that integer field becomes w. Rows
 * written now carry w already and are left as they are. */
void vq_kv_results_upgrade(struct vq_results *r);
/* Adds the per-layer settings to a results.json config's integer options: ratequant_mbits
 * (mean key bits x 1000), fp16_first / fp16_last, and the per-layer bits as decimal digit
 * groups k_bits_l<first> / v_bits_l<first> (15 layers per option, one digit per layer, layer
 * <first> leftmost), as far as the option slots allow (else per-width layer counts). */
void vq_kv_result_config_layers(const struct vq_cache_params *cp, const struct vq_kv_layers *l,
                                struct vq_result_config *rc);

#endif
