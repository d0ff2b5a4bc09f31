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
#include "vq_tools.h"
#include "evalcommon.h"
#include "kvconfig.h"
#include "opts.h"

static const char *CMD = "estimate-memory";

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant estimate-memory (-m MODEL | --layers N --kv-heads H --head-dim D)\n"
        "                                  -c CTX [method options] [--json]\n\n"
        "Exact KV-cache bytes (codes + side data + fp16 windows) a cache of the model's geometry\n"
        "holds after a prefill of CTX tokens, for one configuration or, without method options\n"
        "(or with --all), for every named config (fp16, the kv presets, the sweep configs) and\n"
        "every other built method. No cache is allocated. A model's sliding-window layers\n"
        "(gemma3, Mistral-style llama) keep only\n"
        "their window's pages, as in a run; bits/elem and fullKV_x compare with an fp16 cache\n"
        "of the same windows.\n\n"
        "  -m, --model FILE      GGUF model: geometry from its metadata, windows from the model\n"
        "  --layers N, --kv-heads H, --head-dim D\n"
        "                        geometry given directly (instead of -m)\n"
        "  -c, --ctx CTX         context length in tokens (required)\n");
    fputs(VQ_KV_HELP, f);
    fputs(
        "  --page-tokens P       cache page size, for the allocated-bytes column (default 256)\n"
        "                        (--ratequant with -m: the allocation from the model's layer\n"
        "                        sensitivities, calibrated on demand; the preset listing and\n"
        "                        runs without -m use equal sensitivities, same total bits)\n"
        "  --outlier-fraction F  configs with outlier tokens (+ot): which tokens are outliers\n"
        "                        depends on the data, so the estimate assumes round(F * CTX)\n"
        "                        per layer (default 0.04: the 4-12 per 200 prefill tokens of\n"
        "                        docs/ALGORITHMS.md section 7.6; decode steps add none).\n"
        "                        Outlier channels (+oc) are data-independent and exact\n"
        "  --all                 every named config (fp16, kv8..kv2, the sweep configs) and\n"
        "                        every other built method, whatever method options say\n"
        "  --json                one JSON object on stdout\n"
        "  -h, --help            this help\n",
        f);
}

struct row {
    char name[256];
    struct vq_codec_params k, v;
    struct vq_cache_memory m;
    vq_status st;
    const char *why; /* why the config does not resolve (points to err), or NULL */
    char err[256];
    int printed;  /* the failure was already reported (per-layer options) */
    int64_t n_ot; /* outlier tokens assumed per layer (configs with +ot) */
};

static double mb(size_t b) { return (double)b / (1024.0 * 1024.0); }

struct em_opts {
    const char *model;
    long ctx;
    int layers, kv, hd, page, json, all;
    double ot_frac;
    struct vq_kv_opts ko;
};

/* Parse step: 1 ok, 0 usage error (printed), -1 --help printed. */
static int em_parse(int argc, char **argv, struct em_opts *o) {
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"layers", required_argument, 0, 'L'},
        {"kv-heads", required_argument, 0, 'H'},
        {"head-dim", required_argument, 0, 'D'},
        {"page-tokens", required_argument, 0, 'P'},
        {"json", no_argument, 0, 'j'},
        {"all", no_argument, 0, 'A'},
        {"outlier-fraction", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->ctx = -1;
    o->page = 256;
    o->ot_frac = 0.04;
    vq_kv_opts_init(&o->ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:c:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': o->model = optarg; break;
        /* at least one token: at 0 there is nothing to estimate (the ratios would be 0/0) */
        case 'c': ok = vq_opt_long(CMD, "--ctx", optarg, 1, 1L << 31, &o->ctx); break;
        case 'L': ok = vq_opt_int(CMD, "--layers", optarg, 1, 4096, &o->layers); break;
        case 'H': ok = vq_opt_int(CMD, "--kv-heads", optarg, 1, 4096, &o->kv); break;
        case 'D': ok = vq_opt_int(CMD, "--head-dim", optarg, 1, 4096, &o->hd); break;
        case 'P': ok = vq_opt_int(CMD, "--page-tokens", optarg, 1, 1 << 20, &o->page); break;
        case 'j': o->json = 1; break;
        case 'A': o->all = 1; break;
        case 'F': {
            char *end;
            o->ot_frac = strtod(optarg, &end);
            if (end == optarg || *end || !(o->ot_frac >= 0.0 && o->ot_frac <= 1.0)) {
                fprintf(stderr, "%s: --outlier-fraction: '%s' is not a number in 0..1\n", CMD,
                        optarg);
                return 0;
            }
            break;
        }
        case 'h': usage(stdout); return -1;
        case ':':
        case '?': vq_cli_bad_option(CMD, c, argc, argv, lo); return 0;
        default: ok = vq_kv_opts_handle(&o->ko, CMD, c, optarg); break;
        }
        if (ok != 1) return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", CMD, argv[optind]);
        return 0;
    }
    if (o->ko.print_config) return 1; /* the config alone: no geometry or ctx needed */
    if (o->ctx < 0) {
        fprintf(stderr, "%s: -c/--ctx is required\n", CMD);
        return 0;
    }
    if (o->hd && (o->hd % 8 || o->hd > 1024)) { /* the cache's limits, named with the option */
        fprintf(stderr,
                "%s: --head-dim: %d is not a multiple of 8 in 8..1024 (the head sizes the KV "
                "cache takes)\n",
                CMD, o->hd);
        return 0;
    }
    const int manual = o->layers || o->kv || o->hd;
    if (o->model && manual) {
        fprintf(stderr, "%s: give either -m or --layers/--kv-heads/--head-dim\n", CMD);
        return 0;
    }
    if (!o->model && !(o->layers && o->kv && o->hd)) {
        fprintf(stderr, "%s: need -m MODEL or all of --layers, --kv-heads, --head-dim\n", CMD);
        return 0;
    }
    return 1;
}

/* Everything an estimate holds; rows is freed by the caller. */
struct em_state {
    struct vq_kv_geometry g;
    int *layer_window;     /* (g.n_layers) the model's sliding windows, or NULL: none */
    int swa_window, n_swa; /* W and how many layers have it (text and JSON output) */
    int all;               /* no method options: every preset, then every other built method */
    enum vq_method extra[VQ_METHOD_COUNT];
    int n_extra, n_rows, n_bad, n_named;
    struct row *rows; /* (n_rows) */
};

/* Build step: the geometry (from the model or the options) and the rows to estimate.
 * Returns 0 or an exit code (1). */
static int em_build(const struct em_opts *o, struct em_state *s) {
    memset(s, 0, sizeof *s);
    if (o->model) {
        char err[512];
        vq_status st = vq_kv_geometry_from_gguf(o->model, &s->g, err, sizeof err);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: %s\n", CMD, err);
            return 1;
        }
        /* the model's sliding windows (gemma3: 5 of every 6 layers; Mistral-style llama: all) */
        s->layer_window = vq_cli_model_windows(CMD, o->model, s->g.n_layers, &s->swa_window,
                                               &s->n_swa, 0);
    } else {
        s->g.n_layers = o->layers;
        s->g.n_kv_heads = o->kv;
        s->g.head_dim = o->hd;
    }

    /* without method options (or with --all): every named config of the library, then every
     * built method none of them uses */
    const struct vq_kv_spec *ks = &o->ko.s;
    s->all = o->all || (!vq_kv_opts_any_method(&o->ko) && !(ks->ratequant > 0) && !ks->n_k_bpl &&
                        !ks->n_v_bpl);
    s->n_named = vq_kv_preset_count();
    for (int m = 0; s->all && m < VQ_METHOD_COUNT; m++) {
        struct vq_method_info mi;
        if (vq_method_info_get((enum vq_method)m, &mi) != VQ_STATUS_OK || !mi.implemented) continue;
        int used = 0;
        struct vq_kv_preset_info pi;
        for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++) {
            struct vq_kv_spec ps;
            struct vq_codec_params kp, vp;
            if (vq_kv_spec_parse(pi.name, &ps, NULL, 0) == VQ_STATUS_OK &&
                vq_kv_spec_codecs(&ps, &kp, &vp, NULL, 0) == VQ_STATUS_OK)
                used |= kp.method == (enum vq_method)m || vp.method == (enum vq_method)m;
        }
        if (!used) s->extra[s->n_extra++] = (enum vq_method)m;
    }
    s->n_rows = s->all ? s->n_named + s->n_extra : 1;
    s->rows = calloc((size_t)s->n_rows, sizeof *s->rows);
    if (!s->rows) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        return 1;
    }
    return 0;
}

/* Run step for row i: its KV options, cache parameters and estimate (failures kept in the
 * row). Returns 1, or 0 when the options do not resolve (printed; exit code 2). */
static int em_run_row(const struct em_opts *o, struct em_state *s, int i) {
    struct row *r = &s->rows[i];
    const struct vq_kv_opts *uo = &o->ko; /* the user's options */
    struct vq_kv_opts ko = *uo;
    if (s->all) {
        vq_kv_opts_init(&ko);
        struct vq_kv_preset_info pi;
        if (i < s->n_named) {
            vq_kv_preset_get(i, &pi);
            vq_kv_spec_parse(pi.name, &ko.s, NULL, 0);
        } else {
            ko.s.has_method = 1;
            ko.s.method = s->extra[i - s->n_named];
        }
        /* keep the user's codec options (group size, window, ...) */
        const struct vq_kv_spec *us = &uo->s;
        if (us->group_size >= 0) ko.s.group_size = us->group_size;
        if (us->residual_length >= 0) ko.s.residual_length = us->residual_length;
        if (us->n_sink_tokens >= 0) ko.s.n_sink_tokens = us->n_sink_tokens;
        if (us->jl_dim >= 0) ko.s.jl_dim = us->jl_dim;
        if (us->has_seed) ko.s.has_seed = 1, ko.s.seed = us->seed;
        if (us->fp16_first || us->fp16_last)
            ko.s.fp16_first = us->fp16_first, ko.s.fp16_last = us->fp16_last;
        ko.s.calib_tokens = us->calib_tokens;
    }
    struct vq_cache_params p;
    if (!s->all && !vq_kv_opts_prepare(CMD, &ko, &p, r->name, sizeof r->name)) return 0;
    if (s->all && vq_kv_spec_name(&ko.s, r->name, sizeof r->name) < 0) r->name[0] = 0;
    const struct vq_kv_geometry *g = &s->g;
    /* the whole config for the geometry; RateQuant reads (single config: builds) the model's
     * sensitivities, so that the estimate uses the allocation a run would use */
    struct vq_kv_layers kl;
    if (!s->all && !o->model && ko.s.ratequant > 0)
        fprintf(stderr,
                "%s: --ratequant without -m: equal layer sensitivities (exact bytes when "
                "they are linear in bits, e.g. turboquant_mse)\n",
                CMD);
    int la;
    if (s->all) { /* listing: failures go into the row, equal RateQuant weights */
        double w[VQ_KV_MAX_LAYERS];
        for (int l = 0; l < VQ_KV_MAX_LAYERS; l++) w[l] = 1.0;
        const vq_status cs = vq_kv_spec_cache_params(&ko.s, g->n_layers, g->n_kv_heads, g->head_dim,
                                                     w, &p, &kl, r->err, sizeof r->err);
        la = cs == VQ_STATUS_OK ? 1 : cs == VQ_STATUS_NO_MEMORY ? -1 : 2;
        if (la != 1) vq_kv_layers_free(&kl);
        if (la == 2) r->why = r->err;
        if (la != 1) /* the codecs as far as they resolve, for the row's columns */
            vq_kv_spec_codecs(&ko.s, &p.key, &p.value, NULL, 0);
    } else {
        la = vq_kv_opts_build(CMD, &ko, o->model, NULL, g->n_layers, g->n_kv_heads, g->head_dim, &p,
                              &kl, NULL, o->model ? 0 : VQ_KV_EQUAL_WEIGHTS);
    }
    r->k = p.key;
    r->v = p.value;
    p.page_tokens = o->page;
    p.layer_window = s->layer_window;
    r->n_ot = p.outlier_token_k > 0.0f ? (int64_t)llround(o->ot_frac * (double)o->ctx) : 0;
    if (la == 1) {
        r->st = vq_kv_estimate_outliers(&p, o->ctx, r->n_ot, &r->m);
        vq_kv_layers_free(&kl);
    } else {
        r->st = la == 2 ? VQ_STATUS_UNSUPPORTED
              : la == 0 ? VQ_STATUS_INVALID_ARG
                        : VQ_STATUS_NOT_FOUND;
        r->printed = la == 0; /* vq_kv_opts_build said why */
    }
    if (r->st != VQ_STATUS_OK) s->n_bad++;
    return 1;
}

/* Run step: estimates every row. Returns 0, or exit code 2 when the options do not resolve or
 * the single configuration asked for fails (printed). */
static int em_run(const struct em_opts *o, struct em_state *s) {
    for (int i = 0; i < s->n_rows; i++)
        if (!em_run_row(o, s, i)) return 2;
    const struct row *rows = s->rows;
    if (s->n_rows == 1 && rows[0].st != VQ_STATUS_OK) {
        if (rows[0].printed) return 2;
        if (rows[0].why) fprintf(stderr, "%s: %s: %s\n", CMD, rows[0].name, rows[0].why);
        else
            fprintf(stderr,
                    "%s: %s: %s (check bits range and options against"
                    " `veloxquant methods`)\n",
                    CMD, rows[0].name, vq_status_str(rows[0].st));
        return 2;
    }
    return 0;
}

/* JSON print step for one row: a new object for the configs array. */
static cJSON *em_json_row(const struct row *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "k_method", vq_method_name(r->k.method));
    cJSON_AddStringToObject(o, "v_method", vq_method_name(r->v.method));
    cJSON_AddNumberToObject(o, "k_bits", vq_codec_params_bits(&r->k));
    cJSON_AddNumberToObject(o, "v_bits", vq_codec_params_bits(&r->v));
    if (r->st != VQ_STATUS_OK) {
        cJSON_AddStringToObject(o, "error", r->why ? r->why : vq_status_str(r->st));
        return o;
    }
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
        cJSON_AddNumberToObject(o, "bits_per_elem",
                                16.0 * (double)m->total_bytes / (double)m->fp16_bytes);
    }
    return o;
}

/* JSON print step: one JSON object on stdout. */
static void em_print_json(const struct em_opts *o, const struct em_state *s) {
    const struct vq_kv_geometry *g = &s->g;
    cJSON *root = cJSON_CreateObject(), *geo = cJSON_AddObjectToObject(root, "geometry");
    if (o->model) cJSON_AddStringToObject(root, "model", o->model);
    if (g->arch[0]) cJSON_AddStringToObject(geo, "arch", g->arch);
    cJSON_AddNumberToObject(geo, "n_layers", g->n_layers);
    cJSON_AddNumberToObject(geo, "n_kv_heads", g->n_kv_heads);
    cJSON_AddNumberToObject(geo, "head_dim", g->head_dim);
    if (s->n_swa) {
        cJSON_AddNumberToObject(geo, "swa_window", s->swa_window);
        cJSON_AddNumberToObject(geo, "n_swa_layers", s->n_swa);
    }
    cJSON_AddNumberToObject(root, "ctx", (double)o->ctx);
    cJSON *arr = cJSON_AddArrayToObject(root, "configs");
    for (int i = 0; i < s->n_rows; i++) cJSON_AddItemToArray(arr, em_json_row(&s->rows[i]));
    char *txt = cJSON_Print(root);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(root);
}

/* Text print step: the geometry line, one table row per configuration, the +ot note. */
static void em_print_text(const struct em_opts *o, const struct em_state *s) {
    const struct vq_kv_geometry *g = &s->g;
    const struct row *rows = s->rows;
    printf("geometry: %s%s%d layers x %d kv heads x head_dim %d; ctx %ld tokens",
           g->arch[0] ? g->arch : "", g->arch[0] ? ", " : "", g->n_layers, g->n_kv_heads,
           g->head_dim, o->ctx);
    if (s->n_swa)
        printf("; sliding window %d on %d of %d layers (the model's)", s->swa_window, s->n_swa,
               g->n_layers);
    printf("\n");
    printf("%-22s %6s %6s %12s %12s %12s %12s %10s %7s %8s %9s\n", "config", "k_bits", "v_bits",
           "key_bytes", "value_bytes", "window_bytes", "total_bytes", "total_MB", "key_x",
           "fullKV_x", "bits/elem");
    for (int i = 0; i < s->n_rows; i++) {
        const struct row *r = &rows[i];
        if (r->st != VQ_STATUS_OK) {
            printf("%-22s %6g %6g  (%s)\n", r->name, vq_codec_params_bits(&r->k),
                   vq_codec_params_bits(&r->v),
                   r->why                           ? r->why
                   : r->st == VQ_STATUS_UNSUPPORTED ? "method not built in this library"
                   : r->st == VQ_STATUS_NOT_FOUND   ? "needs calibration: see the message above"
                                                    : vq_status_str(r->st));
            continue;
        }
        const struct vq_cache_memory *m = &r->m;
        const int any = m->total_bytes > 0;
        printf("%-22s %6g %6g %12zu %12zu %12zu %12zu %10.3f %7.3f %8.3f %9.4f\n", r->name,
               vq_codec_params_bits(&r->k), vq_codec_params_bits(&r->v), m->key_bytes,
               m->value_bytes, m->window_bytes, m->total_bytes, mb(m->total_bytes),
               any ? (double)m->fp16_key_bytes / (double)m->key_total_bytes : 0.0,
               any ? (double)m->fp16_bytes / (double)m->total_bytes : 0.0,
               any ? 16.0 * (double)m->total_bytes / (double)m->fp16_bytes : 0.0);
    }
    for (int i = 0; i < s->n_rows; i++)
        if (rows[i].n_ot && rows[i].st == VQ_STATUS_OK) {
            printf(
                "(+ot rows assume %lld outlier tokens per layer = %.3g * ctx,"
                " --outlier-fraction;\n"
                " their fp16 K/V rows and the outlier-channel records are in total_bytes)\n",
                (long long)rows[i].n_ot, o->ot_frac);
            break;
        }
}

int vq_cmd_estimate_memory(int argc, char **argv) {
    struct em_opts o;
    const int pr = em_parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    if (o.ko.print_config) {
        struct vq_cache_params cp;
        char name[256];
        if (!vq_kv_opts_prepare(CMD, &o.ko, &cp, name, sizeof name)) return 2;
        return vq_kv_print_config(name, &cp);
    }
    struct em_state s;
    int rc = em_build(&o, &s);
    if (!rc) rc = em_run(&o, &s);
    if (!rc) {
        if (o.json) em_print_json(&o, &s);
        else em_print_text(&o, &s);
        rc = s.n_bad == s.n_rows ? 1 : 0;
    }
    free(s.layer_window);
    free(s.rows);
    return rc;
}
