/* cmd_estimate_memory.c — `veloxquant estimate-memory`: analytic KV-cache bytes per method for
 * a model's KV geometry and a context length (src/eval/kvmem.h: exactly what a vq_cache
 * filled by one prefill of CTX tokens reports). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "eval/kvmem.h"
#include "kvconfig.h"
#include "opts.h"

static const char *CMD = "estimate-memory";

static void usage(FILE *f) {
    fprintf(f,
        "usage: veloxquant estimate-memory (-m MODEL | --layers N --kv-heads H --head-dim D)\n"
        "                                  -c CTX [method options] [--json]\n\n"
        "Exact KV-cache bytes (codes + side data + fp16 windows) a cache of the model's geometry\n"
        "holds after a prefill of CTX tokens, for one configuration or, without method options,\n"
        "for every sweep preset and every other built method at its default bits. Nothing is\n"
        "allocated; no model weights are read.\n\n"
        "  -m, --model FILE      GGUF model: geometry from its metadata\n"
        "  --layers N, --kv-heads H, --head-dim D\n"
        "                        geometry given directly (instead of -m)\n"
        "  -c, --ctx CTX         context length in tokens (required)\n"
        VQ_KV_HELP
        "  --page-tokens P       cache page size, for the allocated-bytes column (default 256)\n"
        "                        (--ratequant with -m: the allocation from the model's layer\n"
        "                        sensitivities, calibrated on demand; the preset listing and\n"
        "                        runs without -m use equal sensitivities, same total bits)\n"
        "  --outlier-fraction F  configs with outlier tokens (+ot): which tokens are outliers\n"
        "                        depends on the data, so the estimate assumes round(F * CTX)\n"
        "                        per layer (default 0.04: the 4-12 per 200 prefill tokens of\n"
        "                        docs/ALGORITHMS.md section 7.6; decode steps add none).\n"
        "                        Outlier channels (+oc) are data-independent and exact\n"
        "  --json                one JSON object on stdout\n"
        "  -h, --help            this help\n");
}

struct row {
    char name[96];
    struct vq_codec_params k, v;
    struct vq_cache_memory m;
    vq_status st;
    const char *why;        /* modifier combination refused, or NULL */
    int64_t n_ot;           /* outlier tokens assumed per layer (configs with +ot) */
};

static double mb(size_t b) { return (double)b / (1024.0 * 1024.0); }

int vq_cmd_estimate_memory(int argc, char **argv) {
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"ctx", required_argument, 0, 'c'},
        {"layers", required_argument, 0, 'L'},
        {"kv-heads", required_argument, 0, 'H'},
        {"head-dim", required_argument, 0, 'D'},
        {"page-tokens", required_argument, 0, 'P'},
        {"json", no_argument, 0, 'j'},
        {"outlier-fraction", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    const char *model = NULL;
    long ctx = -1;
    int layers = 0, kv = 0, hd = 0, page = 256, json = 0;
    double ot_frac = 0.04;
    struct vq_kv_opts ko;
    vq_kv_opts_init(&ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:c:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': model = optarg; break;
        case 'c': ok = vq_opt_long(CMD, "--ctx", optarg, 0, 1L << 31, &ctx); break;
        case 'L': ok = vq_opt_int(CMD, "--layers", optarg, 1, 4096, &layers); break;
        case 'H': ok = vq_opt_int(CMD, "--kv-heads", optarg, 1, 4096, &kv); break;
        case 'D': ok = vq_opt_int(CMD, "--head-dim", optarg, 1, 4096, &hd); break;
        case 'P': ok = vq_opt_int(CMD, "--page-tokens", optarg, 1, 1 << 20, &page); break;
        case 'j': json = 1; break;
        case 'F': {
            char *end;
            ot_frac = strtod(optarg, &end);
            if (end == optarg || *end || !(ot_frac >= 0.0 && ot_frac <= 1.0)) {
                fprintf(stderr, "%s: --outlier-fraction: '%s' is not a number in 0..1\n", CMD, optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        case ':': fprintf(stderr, "%s: %s needs a value\n", CMD, argv[optind - 1]); return 2;
        case '?': fprintf(stderr, "%s: unknown option '%s'\n", CMD, argv[optind - 1]); return 2;
        default: ok = vq_kv_opts_handle(&ko, CMD, c, optarg); break;
        }
        if (ok != 1) return 2;
    }
    if (optind < argc) { fprintf(stderr, "%s: unexpected argument '%s'\n", CMD, argv[optind]); return 2; }
    if (ctx < 0) { fprintf(stderr, "%s: -c/--ctx is required\n", CMD); return 2; }
    const int manual = layers || kv || hd;
    if (model && manual) { fprintf(stderr, "%s: give either -m or --layers/--kv-heads/--head-dim\n", CMD); return 2; }
    if (!model && !(layers && kv && hd)) {
        fprintf(stderr, "%s: need -m MODEL or all of --layers, --kv-heads, --head-dim\n", CMD);
        return 2;
    }
    struct vq_kv_geometry g;
    memset(&g, 0, sizeof g);
    if (model) {
        char err[512];
        vq_status st = vq_kv_geometry_from_gguf(model, &g, err, sizeof err);
        if (st != VQ_STATUS_OK) { fprintf(stderr, "%s: %s\n", CMD, err); return 1; }
    } else {
        g.n_layers = layers; g.n_kv_heads = kv; g.head_dim = hd;
    }

    /* without method options: every preset, then every built method no preset uses */
    enum vq_method extra[VQ_METHOD_COUNT];
    int n_extra = 0;
    const int all = !vq_kv_opts_any_method(&ko) && !(ko.ratequant > 0) && !ko.n_k_bpl && !ko.n_v_bpl;
    for (int m = 0; all && m < VQ_METHOD_COUNT; m++) {
        struct vq_method_info mi;
        if (vq_method_info_get((enum vq_method)m, &mi) != VQ_STATUS_OK || !mi.implemented) continue;
        int used = 0;
        for (int i = 0; i < vq_kv_n_presets; i++)
            used |= !strcmp(vq_kv_presets[i].km, mi.name) || !strcmp(vq_kv_presets[i].vm, mi.name);
        if (!used) extra[n_extra++] = (enum vq_method)m;
    }
    int n_rows = all ? vq_kv_n_presets + n_extra : 1;
    struct row *rows = calloc((size_t)n_rows, sizeof *rows);
    if (!rows) { fprintf(stderr, "%s: out of memory\n", CMD); return 1; }
    int n_bad = 0;
    for (int i = 0; i < n_rows; i++) {
        struct row *r = &rows[i];
        struct vq_kv_opts o = ko;
        if (all) {
            if (i < vq_kv_n_presets) {
                vq_kv_opts_from_name(vq_kv_presets[i].name, &o);
            } else {
                vq_kv_opts_init(&o);
                o.has_method = 1;
                o.method = extra[i - vq_kv_n_presets];
            }
            /* keep the user's method options (group size, window, ...) */
            o.group_size = ko.group_size; o.residual_length = ko.residual_length;
            o.n_sink_tokens = ko.n_sink_tokens; o.jl_dim = ko.jl_dim;
            o.has_seed = ko.has_seed; o.seed = ko.seed;
            o.fp16_first = ko.fp16_first; o.fp16_last = ko.fp16_last;
            o.calib_tokens = ko.calib_tokens;
        }
        if (!vq_kv_opts_resolve(CMD, &o, &r->k, &r->v)) { free(rows); return 2; }
        vq_kv_config_name_opts(&o, &r->k, &r->v, r->name, sizeof r->name);
        struct vq_cache_params p = vq_cache_params_default();
        p.n_layers = g.n_layers; p.n_kv_heads = g.n_kv_heads; p.head_dim = g.head_dim;
        p.page_tokens = page;
        p.key = r->k;
        p.value = r->v;
        vq_kv_opts_apply_cache(&o, &p); /* outlier modifiers (in the name already) */
        r->n_ot = p.outlier_token_k > 0.0f ? (int64_t)llround(ot_frac * (double)ctx) : 0;
        r->why = vq_kv_modifier_error(&p);
        /* per-layer bits / fp16 edge layers; RateQuant reads (single config: builds) the
         * model's sensitivities, so that the estimate uses the allocation a run would use */
        struct vq_kv_layers kl;
        if (!all && !model && o.ratequant > 0)
            fprintf(stderr, "%s: --ratequant without -m: equal layer sensitivities (exact bytes when "
                    "they are linear in bits, e.g. turboquant_mse)\n", CMD);
        const int la = vq_kv_layers_apply(CMD, &o, model, NULL, g.n_layers, g.head_dim, &p, &kl,
                                          all ? VQ_KV_QUIET | VQ_KV_EQUAL_WEIGHTS
                                              : model ? 0 : VQ_KV_EQUAL_WEIGHTS);
        if (la == 1) {
            r->st = r->why ? VQ_STATUS_UNSUPPORTED : vq_kv_estimate_outliers(&p, ctx, r->n_ot, &r->m);
            vq_kv_layers_free(&kl);
        } else {
            r->st = la == 0 ? VQ_STATUS_INVALID_ARG : VQ_STATUS_NOT_FOUND;
        }
        if (r->st != VQ_STATUS_OK) n_bad++;
    }
    if (n_rows == 1 && rows[0].st != VQ_STATUS_OK) {
        if (rows[0].why) fprintf(stderr, "%s: %s: %s\n", CMD, rows[0].name, rows[0].why);
        else fprintf(stderr, "%s: %s: %s (check bits range and options against `veloxquant methods`)\n",
                     CMD, rows[0].name, vq_status_str(rows[0].st));
        free(rows);
        return 2;
    }
    const double elems = 2.0 * (double)ctx * g.n_layers * g.n_kv_heads * g.head_dim;
    if (json) {
        cJSON *root = cJSON_CreateObject(), *geo = cJSON_AddObjectToObject(root, "geometry");
        if (model) cJSON_AddStringToObject(root, "model", model);
        if (g.arch[0]) cJSON_AddStringToObject(geo, "arch", g.arch);
        cJSON_AddNumberToObject(geo, "n_layers", g.n_layers);
        cJSON_AddNumberToObject(geo, "n_kv_heads", g.n_kv_heads);
        cJSON_AddNumberToObject(geo, "head_dim", g.head_dim);
        cJSON_AddNumberToObject(root, "ctx", (double)ctx);
        cJSON *arr = cJSON_AddArrayToObject(root, "configs");
        for (int i = 0; i < n_rows; i++) {
            const struct row *r = &rows[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", r->name);
            cJSON_AddStringToObject(o, "k_method", vq_method_name(r->k.method));
            cJSON_AddStringToObject(o, "v_method", vq_method_name(r->v.method));
            cJSON_AddNumberToObject(o, "k_bits", vq_codec_params_bits(&r->k));
            cJSON_AddNumberToObject(o, "v_bits", vq_codec_params_bits(&r->v));
            if (r->st != VQ_STATUS_OK) {
                cJSON_AddStringToObject(o, "error", r->why ? r->why : vq_status_str(r->st));
            } else {
                const struct vq_cache_memory *m = &r->m;
                cJSON_AddNumberToObject(o, "key_bytes", (double)m->key_bytes);
                cJSON_AddNumberToObject(o, "value_bytes", (double)m->value_bytes);
                cJSON_AddNumberToObject(o, "window_bytes", (double)m->window_bytes);
                cJSON_AddNumberToObject(o, "outlier_bytes", (double)m->outlier_bytes);
                if (r->n_ot) cJSON_AddNumberToObject(o, "outlier_tokens_assumed", (double)r->n_ot);
                cJSON_AddNumberToObject(o, "total_bytes", (double)m->total_bytes);
                cJSON_AddNumberToObject(o, "fp16_bytes", (double)m->fp16_bytes);
                cJSON_AddNumberToObject(o, "allocated_bytes", (double)m->allocated_bytes);
                if (m->total_bytes) {
                    cJSON_AddNumberToObject(o, "key_x", (double)m->fp16_key_bytes / (double)m->key_total_bytes);
                    cJSON_AddNumberToObject(o, "fullKV_x", (double)m->fp16_bytes / (double)m->total_bytes);
                    cJSON_AddNumberToObject(o, "bits_per_elem", 8.0 * (double)m->total_bytes / elems);
                }
            }
            cJSON_AddItemToArray(arr, o);
        }
        char *txt = cJSON_Print(root);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(root);
    } else {
        printf("geometry: %s%s%d layers x %d kv heads x head_dim %d; ctx %ld tokens\n",
               g.arch[0] ? g.arch : "", g.arch[0] ? ", " : "", g.n_layers, g.n_kv_heads,
               g.head_dim, ctx);
        printf("%-22s %6s %6s %12s %12s %12s %12s %10s %7s %8s %9s\n", "config", "k_bits", "v_bits",
               "key_bytes", "value_bytes", "window_bytes", "total_bytes", "total_MB", "key_x",
               "fullKV_x", "bits/elem");
        for (int i = 0; i < n_rows; i++) {
            const struct row *r = &rows[i];
            if (r->st != VQ_STATUS_OK) {
                printf("%-22s %6g %6g  (%s)\n", r->name, vq_codec_params_bits(&r->k),
                       vq_codec_params_bits(&r->v),
                       r->why ? r->why
                       : r->st == VQ_STATUS_UNSUPPORTED ? "method not built in this library"
                       : r->st == VQ_STATUS_NOT_FOUND ? "needs calibration: see the message above"
                       : vq_status_str(r->st));
                continue;
            }
            const struct vq_cache_memory *m = &r->m;
            const int any = m->total_bytes > 0;
            printf("%-22s %6g %6g %12zu %12zu %12zu %12zu %10.3f %7.3f %8.3f %9.4f\n", r->name,
                   vq_codec_params_bits(&r->k), vq_codec_params_bits(&r->v), m->key_bytes, m->value_bytes, m->window_bytes,
                   m->total_bytes, mb(m->total_bytes),
                   any ? (double)m->fp16_key_bytes / (double)m->key_total_bytes : 0.0,
                   any ? (double)m->fp16_bytes / (double)m->total_bytes : 0.0,
                   any ? 8.0 * (double)m->total_bytes / elems : 0.0);
        }
        for (int i = 0; i < n_rows; i++)
            if (rows[i].n_ot && rows[i].st == VQ_STATUS_OK) {
                printf("(+ot rows assume %lld outlier tokens per layer = %.3g * ctx, --outlier-fraction;\n"
                       " their fp16 K/V rows and the outlier-channel records are in total_bytes)\n",
                       (long long)rows[i].n_ot, ot_frac);
                break;
            }
    }
    free(rows);
    return n_bad == n_rows ? 1 : 0;
}
