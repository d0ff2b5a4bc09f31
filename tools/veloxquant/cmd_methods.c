/* cmd_methods.c — `veloxquant methods [--json]`: every method, its parameters, its bits/elem
 * formula, whether it needs calibration and whether this build implements it. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "kvconfig.h"
#include "opts.h"

/* ctx of the bits/elem listed for the --kv presets (the acceptance protocol's) */
#define VQ_TIER_CTX 2048
/* KIVI keys wait in fp16 until a group of G tokens is full, so their bytes depend on ctx mod G
 * (G <= 256): the mean is taken over the contexts ctx - 255 .. ctx */
#define VQ_TIER_CYCLE 256

/* Exact bits/elem of the preset named name on the default model's geometry (SmolLM2-135M: 30
 * layers x 3 kv heads x head_dim 64) at ctx (*bits) and averaged over VQ_TIER_CYCLE contexts
 * ending at ctx (*mean_bits), through the library's vq_kv_spec_bits_per_elem. 1 ok. */
static int tier_bits(const char *name, int64_t ctx, double *bits, double *mean_bits) {
    struct vq_kv_spec s;
    if (vq_kv_spec_parse(name, &s, NULL, 0) != VQ_STATUS_OK ||
        vq_kv_spec_bits_per_elem(&s, 30, 3, 64, ctx, bits) != VQ_STATUS_OK)
        return 0;
    double sum = 0, b;
    for (int64_t c = ctx - VQ_TIER_CYCLE + 1; c <= ctx; c++) {
        if (vq_kv_spec_bits_per_elem(&s, 30, 3, 64, c, &b) != VQ_STATUS_OK) return 0;
        sum += b;
    }
    *mean_bits = sum / VQ_TIER_CYCLE;
    return 1;
}

/* Methods of the design that have no codec in this build yet, and the cache-level modifiers
 * (docs/METHODS.md). */
static const struct vq_method_info planned[] = {
    {.name = "vecinfer",
     .params = "bits=1,1.5,2 (product VQ, trained codebooks)",
     .bits_formula = "c/v",
     .needs_calibration = 1},
    {.name = "spectral",
     .params = "bits (PCA rotation, signal/noise split)",
     .bits_formula = "b + 32/d",
     .needs_calibration = 1},
    {.name = "ratequant",
     .params = "modifier: --ratequant B (target mean bits; per-layer allocation from calibrated "
               "key norms, docs/ALGORITHMS.md section 8.3) on any codec with a bits range; values "
               "follow the key allocation (--ratequant-values even|off)",
     .bits_formula = "avg b",
     .needs_calibration = 1,
     .implemented = 1},
    /* cache-level modifiers (built; listed here because they are not codecs) */
    {.name = "outlier_channels",
     .params = "modifier: --outlier-channels N (1..64, <= d/2), --n-calib-tokens T (default 200); "
               "keys of turboquant_mse/prod/rvq, qjl, polar",
     .bits_formula = "+ (8*n_out + 16)/d on keys",
     .implemented = 1},
    {.name = "key_scales",
     .params = "modifier: --key-scales keys|qk (per-channel key scales from the first append, "
               "folded into the query; docs/ALGORITHMS.md section 8.6); any quantized key codec",
     .bits_formula = "+ 16/T on keys (T tokens; one fp16 vector per layer and kv-head)",
     .implemented = 1},
    {.name = "key_channel_bits",
     .params = "modifier: --key-channel-bits on (a KIVI width per key channel, water-filled on "
               "query energy x squared range at the first append, mean = the layer's width; "
               "docs/ALGORITHMS.md section 8.8); --key-channel-bits zero: the same with 0-bit "
               "channels allowed (the group mean alone); kivi / kivi_sink keys",
     .bits_formula = "+ 8/T on keys (T tokens; one width byte per channel, layer and kv-head)",
     .implemented = 1},
    {.name = "outlier_tokens",
     .params = "modifier: --outlier-tokens K (prefill key norm > mean + K*std kept fp16 K and V); "
               "any codec but kivi_sink",
     .bits_formula = "+ 16 per kept token and side",
     .implemented = 1},
};

/* Names of the capability flags, in bit order (veloxquant.h VQ_METHOD_F_*). */
static const char *const flag_names[] = {
    "quantized",        "fp16_rows", "calibration",    "centered",
    "windowed",         "sinks",     "outlier_tokens", "outlier_channels",
    "per_channel_keys", "sketch",    "calib_codebook", "calib_pca",
};

/* "1..4", "1..4,1.5", "16" or "-" (modifiers) into buf. */
static const char *widths(const struct vq_method_info *mi, char *buf, size_t cap) {
    if (!mi->default_bits) snprintf(buf, cap, "-");
    else if (mi->min_bits == mi->max_bits) snprintf(buf, cap, "%d", mi->min_bits);
    else snprintf(buf, cap, "%d..%d", mi->min_bits, mi->max_bits);
    if (mi->frac_bits > 0) {
        const size_t n = strlen(buf);
        snprintf(buf + n, cap - n, ",%g", mi->frac_bits);
    }
    return buf;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: veloxquant methods [--json | --configs] [NAME]\n\n"
            "Lists every KV-cache method with its parameters, the exact bits per element of its\n"
            "stored codes (d = head_dim), whether it needs calibration, and whether this build\n"
            "implements it, then the kv presets. --configs lists every named config the\n"
            "library knows (`--kv NAME`, `sweep --configs`): name, what it stands for, and a\n"
            "line on what it is for. NAME (a method or a named config) lists that one only.\n\n"
            "  --json      one JSON array instead of text\n"
            "  --configs   the named configs (presets and sweep configs)\n"
            "  -h, --help  this help\n");
}

/* 1 when name is a method (built or listed as planned) or a named config. */
static int known_name(const char *name) {
    enum vq_method m;
    if (vq_method_from_name(name, &m) == VQ_STATUS_OK) return 1;
    for (size_t i = 0; i < sizeof planned / sizeof planned[0]; i++)
        if (!strcmp(planned[i].name, name)) return 1;
    struct vq_kv_preset_info pi;
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++)
        if (!strcmp(pi.name, name)) return 1;
    return 0;
}

/* 1 when the row called name is listed (no NAME given, or NAME is it). */
static int listed(const char *only, const char *name) { return !only || !strcmp(only, name); }

int vq_cmd_methods(int argc, char **argv) {
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'},
        {"configs", no_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int json = 0, configs = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'c': configs = 1; break;
        case 'h': usage(stdout); return 0;
        default: vq_cli_bad_option("methods", c, argc, argv, lo); return 2;
        }
    }
    const char *only = optind < argc ? argv[optind] : NULL; /* one method or named config */
    if (optind + 1 < argc) {
        fprintf(stderr, "methods: one name at a time ('%s' and '%s')\n", argv[optind],
                argv[optind + 1]);
        return 2;
    }
    if (only && !known_name(only)) {
        const char *near = vq_kv_nearest_name(only, 0);
        if (near)
            fprintf(stderr, "methods: unknown method or config '%s': did you mean %s?\n", only,
                    near);
        else
            fprintf(stderr,
                    "methods: unknown method or config '%s' (veloxquant methods lists them)\n",
                    only);
        return 2;
    }
    if (configs) { /* the library's named configs, one per line */
        struct vq_kv_preset_info pi;
        for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++)
            if (listed(only, pi.name))
                printf("%-22s %-42s %s\n", pi.name, pi.config, pi.description);
        return 0;
    }
    struct vq_method_info all[VQ_METHOD_COUNT + sizeof planned / sizeof planned[0]];
    int n = 0;
    for (int m = 0; m < VQ_METHOD_COUNT; m++)
        if (vq_method_info_get((enum vq_method)m, &all[n]) == VQ_STATUS_OK) n++;
    for (size_t i = 0; i < sizeof planned / sizeof planned[0]; i++) {
        enum vq_method m;
        if (vq_method_from_name(planned[i].name, &m) != VQ_STATUS_OK) all[n++] = planned[i];
    }

    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < n; i++) {
            if (!listed(only, all[i].name)) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", all[i].name);
            cJSON_AddStringToObject(o, "params", all[i].params);
            cJSON_AddStringToObject(o, "bits_per_elem", all[i].bits_formula);
            cJSON_AddBoolToObject(o, "needs_calibration", all[i].needs_calibration);
            cJSON_AddBoolToObject(o, "implemented", all[i].implemented);
            if (all[i].default_bits) {
                cJSON_AddNumberToObject(o, "default_bits", all[i].default_bits);
                cJSON_AddNumberToObject(o, "min_bits", all[i].min_bits);
                cJSON_AddNumberToObject(o, "max_bits", all[i].max_bits);
                if (all[i].frac_bits > 0) cJSON_AddNumberToObject(o, "frac_bits", all[i].frac_bits);
                cJSON *fl = cJSON_AddArrayToObject(o, "flags");
                for (size_t b = 0; b < sizeof flag_names / sizeof flag_names[0]; b++)
                    if (all[i].flags & (1u << b))
                        cJSON_AddItemToArray(fl, cJSON_CreateString(flag_names[b]));
            }
            cJSON_AddItemToArray(arr, o);
        }
        struct vq_kv_preset_info pi;
        for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++) {
            if (!pi.tier || !listed(only, pi.name)) continue;
            double b = 0, mb = 0;
            if (!tier_bits(pi.name, VQ_TIER_CTX, &b, &mb)) return 1;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", pi.name);
            cJSON_AddStringToObject(o, "params", "preset: --kv NAME");
            char bs[32];
            snprintf(bs, sizeof bs, "%.4f", b);
            cJSON_AddStringToObject(o, "bits_per_elem", bs);
            cJSON_AddBoolToObject(o, "needs_calibration", 0);
            cJSON_AddStringToObject(o, "config", pi.config);
            cJSON_AddStringToObject(o, "description", pi.description);
            cJSON_AddNumberToObject(o, "bits_per_elem_value", b);
            cJSON_AddNumberToObject(o, "bits_per_elem_mean", mb);
            cJSON_AddNumberToObject(o, "bits_ctx", VQ_TIER_CTX);
            cJSON_AddNumberToObject(o, "max_bits", pi.max_bits);
            cJSON_AddBoolToObject(o, "implemented", 1);
            cJSON_AddItemToArray(arr, o);
        }
        char *s = cJSON_Print(arr);
        printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(arr);
        return 0;
    }
    int n_listed = 0;
    for (int i = 0; i < n; i++) n_listed += listed(only, all[i].name);
    if (n_listed)
        printf("%-16s %-13s %-5s %-7s %-9s %s\n", "method", "status", "calib", "default", "bits",
               "bits/elem  |  parameters");
    for (int i = 0; i < n; i++) {
        if (!listed(only, all[i].name)) continue;
        char def[16], wb[32];
        if (all[i].default_bits) snprintf(def, sizeof def, "%d", all[i].default_bits);
        else snprintf(def, sizeof def, "-");
        printf("%-16s %-13s %-5s %-7s %-9s %s  |  %s\n", all[i].name,
               all[i].implemented ? "ready" : "not yet built",
               all[i].needs_calibration ? "yes" : "no", def, widths(&all[i], wb, sizeof wb),
               all[i].bits_formula[0] ? all[i].bits_formula : "-",
               all[i].params[0] ? all[i].params : "-");
    }
    struct vq_kv_preset_info pi;
    int n_tiers = 0;
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++) {
        if (listed(only, pi.name) && !pi.tier && only && !n_listed) /* a named sweep config */
            printf("%-22s %-42s %s\n", pi.name, pi.config, pi.description);
        n_tiers += pi.tier && listed(only, pi.name);
    }
    if (!n_tiers) return 0;
    printf(
        "%s--kv presets: the lowest KL measured on the default model within the budget; "
        "bits/elem of K\nand V together incl. side data and windows (SmolLM2-135M "
        "geometry) at ctx %d and averaged\nover ctx %d..%d (KIVI keys wait in fp16 until "
        "a group is full):\n",
        n_listed ? "\n" : "", VQ_TIER_CTX, VQ_TIER_CTX - VQ_TIER_CYCLE + 1, VQ_TIER_CTX);
    printf("  %-4s %-6s %9s %9s  %s\n", "name", "budget", "at ctx", "mean", "config");
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++) {
        if (!pi.tier || !listed(only, pi.name)) continue;
        double b = 0, mb = 0;
        if (!tier_bits(pi.name, VQ_TIER_CTX, &b, &mb)) return 1;
        printf("  %-4s <= %-3g %9.4f %9.4f  %s\n", pi.name, pi.max_bits, b, mb, pi.config);
    }
    return 0;
}
