/* cmd_perplexity.c — `veloxquant perplexity`: chunked perplexity over a text file with the KV
 * cache compressed as it fills (vq_perplexity, vq_engine.h; src/eval/ppl.h with logits files),
 * optional saved top-k logits and KL divergence
 * / top-1 agreement against a saved base run (src/eval/logits.h for the file format). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "vq_tools.h"
#include "evalcommon.h"
#include "kvconfig.h"
#include "opts.h"

static const char *CMD = "perplexity";

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant perplexity [-m MODEL] [-f TEXT] [-c CTX] [options]\n\n"
        "Perplexity over TEXT in non-overlapping chunks of CTX tokens, scoring the second half of\n"
        "each chunk, with the KV cache compressed as it fills (attention reads the codes).\n\n"
        "  -m, --model FILE      GGUF model (default: the default model, as every command)\n"
        "  -f, --file TEXT       text file (default data/corpus_en.txt: make bench-data)\n"
        "  -c, --ctx CTX         tokens per chunk (default 512; even, >= 4)\n"
        "  --chunks N            score only the first N chunks (default: all)\n"
        "  -b, --batch N         tokens per forward pass (default: CTX)\n"
        "  -t, --threads N       threads (default: OpenMP default)\n"
        "  --f32-activations     exact fp32 matmul inputs instead of llama.cpp's int8 ones\n"
        "                        (prefill ~1.3x, decode ~6x slower; no int8 rounding noise)\n"
        "%s"
        "  --save-logits FILE    store top-k log-probs + remainder mass of every scored token\n"
        "                        (binary, format in src/eval/logits.h)\n"
        "  --top-k K             entries per token in --save-logits (default 32, max 256)\n"
        "  --kl-base FILE        KL(base || this run) mean/median/p99 and top-1 agreement\n"
        "                        against a file written by --save-logits (same text, ctx, chunks)\n"
        "  --json                one JSON object on stdout\n"
        "  -h, --help            this help\n",
        VQ_KV_HELP);
}

/* Options of one run. */
struct ppl_opts {
    const char *model, *text, *save_path, *base_path;
    int ctx, chunks, batch, threads, top_k, json, f32act;
    struct vq_kv_opts ko;
};

/* Parse step. Returns 1 ok, 0 usage error printed, -1 help printed. */
static int ppl_parse(int argc, char **argv, struct ppl_opts *o) {
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'C'},
        {"batch", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'},
        {"save-logits", required_argument, 0, 'S'},
        {"kl-base", required_argument, 0, 'K'},
        {"top-k", required_argument, 0, 'k'},
        {"json", no_argument, 0, 'j'},
        {"f32-activations", no_argument, 0, 'A'},
        {"help", no_argument, 0, 'h'},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->top_k = VQ_PPL_TOP_K_DEFAULT;
    vq_kv_opts_init(&o->ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:c:b:t:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'f': o->text = optarg; break;
        case 'c': ok = vq_opt_int(CMD, "--ctx", optarg, 4, 1 << 20, &o->ctx); break;
        case 'C': ok = vq_opt_int(CMD, "--chunks", optarg, 1, 1 << 30, &o->chunks); break;
        case 'b': ok = vq_opt_int(CMD, "--batch", optarg, 1, 1 << 20, &o->batch); break;
        case 't': ok = vq_opt_int(CMD, "--threads", optarg, 1, 1024, &o->threads); break;
        case 'S': o->save_path = optarg; break;
        case 'K': o->base_path = optarg; break;
        case 'k': ok = vq_opt_int(CMD, "--top-k", optarg, 1, VQ_LOGITS_MAX_TOPK, &o->top_k); break;
        case 'j': o->json = 1; break;
        case 'A': o->f32act = 1; break;
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
    static char model_buf[4096], text_buf[4096];
    o->model = vq_cli_model(o->model, model_buf, sizeof model_buf);
    if (!o->text) o->text = vq_cli_default_corpus(text_buf, sizeof text_buf);
    if (o->ctx % 2) {
        fprintf(stderr, "%s: --ctx must be even\n", CMD);
        return 0;
    }
    return 1;
}

/* What a run holds: the model, the resolved parameters and what they own. */
struct ppl_state {
    struct vq_eval_model em;
    int have_model;
    struct vq_ppl_params pp;
    char name[256];                /* config label (vq_kv_spec_name) */
    vq_calib_data *calib_owned[2]; /* vecinfer / spectral artifacts */
    struct vq_kv_layers kl;        /* per-layer bits (lists, RateQuant), fp16 edge layers */
};

static void ppl_free(struct ppl_state *s) {
    if (s->have_model) vq_eval_model_close(&s->em);
    vq_calib_data_free(s->calib_owned[0]);
    vq_calib_data_free(s->calib_owned[1]);
    vq_kv_layers_free(&s->kl);
}

/* The KV config against the model's head_dim, before the text is read: 1 ok, 0 printed. */
static int ppl_check_config(const struct ppl_state *s) {
    const int d = s->em.info->head_dim;
    struct vq_codec_params k = s->pp.cache.key, v = s->pp.cache.value;
    k.head_dim = v.head_dim = d;
    vq_status st;
    vq_codec *kc = vq_codec_create(&k, &st);
    vq_codec *vc = kc ? vq_codec_create(&v, &st) : NULL;
    vq_codec_free(kc);
    vq_codec_free(vc);
    struct vq_cache_params mc = s->pp.cache;
    mc.head_dim = d;
    const char *why = vq_kv_modifier_error(&mc);
    if (vc && !why) return 1;
    if (why) fprintf(stderr, "%s: KV config %s: %s\n", CMD, s->name, why);
    else
        fprintf(stderr,
                "%s: KV config %s: %s (check bits and options against `veloxquant methods`)\n", CMD,
                s->name, vq_status_str(st));
    return 0;
}

/* Build step: parameters, the model, per-layer settings and calibration artifacts. Returns 0
 * ok, else the exit code (2 usage, 1 runtime; printed). */
static int ppl_build(const struct ppl_opts *o, struct ppl_state *s) {
    struct vq_ppl_params *pp = &s->pp;
    *pp = vq_ppl_params_default();
    pp->ctx = o->ctx;
    pp->n_chunks = o->chunks;
    pp->n_batch = o->batch;
    pp->n_threads = o->threads;
    vq_cli_warn_wait_policy(CMD, o->threads);
    pp->f32_activations = o->f32act;
    if (!vq_kv_opts_prepare(CMD, &o->ko, &pp->cache, s->name, sizeof s->name)) return 2;
    if (o->ko.print_config) return 0;
    if (!vq_eval_model_open(CMD, o->model, &s->em)) return 1;
    s->have_model = 1;
    const struct vq_model_info *I = s->em.info;
    const int la = vq_kv_opts_build(CMD, &o->ko, o->model, s->em.m, I->n_layers, I->n_kv_heads,
                                    I->head_dim, &pp->cache, &s->kl, s->calib_owned, 0);
    if (la != 1) return la == 0 ? 2 : 1;
    return ppl_check_config(s) ? 0 : 2;
}

/* Run step: tokenizes the text and scores it (saving / comparing logits as asked). Returns 0
 * ok (*res, *n_tok filled), else the exit code (printed). */
static int ppl_run(const struct ppl_opts *o, struct ppl_state *s, struct vq_ppl_result *res,
                   int64_t *n_tok) {
    int rc = 1;
    int32_t *tokens = vq_eval_tokenize_file(CMD, &s->em, o->text, n_tok);
    vq_logits_file *save = NULL, *base = NULL;
    vq_status st;
    if (!tokens) goto out;
    if (o->base_path && !(base = vq_logits_open(o->base_path, &st))) {
        vq_cli_file_fail(CMD, "--kl-base", o->base_path, st);
        goto out;
    }
    if (o->save_path &&
        !(save = vq_logits_create(o->save_path, o->top_k, s->em.info->n_vocab, o->ctx, &st))) {
        vq_cli_file_fail(CMD, "--save-logits", o->save_path, st);
        goto out;
    }
    struct vq_progress prog;
    vq_progress_init(&prog, CMD);
    char err[512];
    /* the library's perplexity (vq_perplexity, as Python's Model.perplexity); with logits files
     * the same protocol with the files added (vq_ppl_run) */
    if (save || base)
        st = vq_ppl_run(s->em.m, tokens, *n_tok, &s->pp, save, base, vq_progress_ppl, &prog, res,
                        err, sizeof err);
    else
        st = vq_perplexity(s->em.m, tokens, *n_tok, &s->pp, NULL, vq_progress_ppl, &prog, res, err,
                           sizeof err);
    vq_progress_done(&prog);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", CMD, err[0] ? err : vq_status_str(st));
        rc = st == VQ_STATUS_INVALID_ARG ? 2 : 1;
        goto out;
    }
    if (save) {
        st = vq_logits_close(save);
        save = NULL;
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: --save-logits: %s\n", CMD, vq_status_str(st));
            goto out;
        }
    }
    rc = 0;
out:
    vq_logits_discard(save);
    vq_logits_close(base);
    free(tokens);
    return rc;
}

/* fp16 key bytes / stored key bytes, and the same for keys + values (0 when empty). */
static double key_x(const struct vq_cache_memory *m) {
    return m->key_total_bytes ? (double)m->fp16_key_bytes / (double)m->key_total_bytes : 0;
}
static double full_x(const struct vq_cache_memory *m) {
    return m->total_bytes ? (double)m->fp16_bytes / (double)m->total_bytes : 0;
}

/* The widths each layer stores (16 on fp16 edge layers) as two arrays of o. */
static void ppl_json_layers(cJSON *o, const struct ppl_state *s) {
    const struct vq_cache_params *cp = &s->pp.cache;
    const int n = s->em.info->n_layers;
    cJSON *kb = cJSON_AddArrayToObject(o, "k_bits_per_layer"),
          *vb = cJSON_AddArrayToObject(o, "v_bits_per_layer");
    for (int l = 0; l < n; l++) {
        const int edge = l < cp->fp16_first_layers || l >= n - cp->fp16_last_layers;
        cJSON_AddItemToArray(kb,
                             cJSON_CreateNumber(edge             ? 16
                                                : s->kl.key_bits ? s->kl.key_bits[l]
                                                                 : vq_codec_params_bits(&cp->key)));
        cJSON_AddItemToArray(
            vb, cJSON_CreateNumber(edge               ? 16
                                   : s->kl.value_bits ? s->kl.value_bits[l]
                                                      : vq_codec_params_bits(&cp->value)));
    }
}

static void ppl_report_json(const struct ppl_opts *o, const struct ppl_state *s,
                            const struct vq_ppl_result *res) {
    const struct vq_cache_params *cp = &s->pp.cache;
    const struct vq_cache_memory *m = &res->mem;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "text", o->text);
    cJSON_AddStringToObject(j, "config", s->name);
    cJSON_AddStringToObject(j, "k_method", vq_method_name(cp->key.method));
    cJSON_AddStringToObject(j, "v_method", vq_method_name(cp->value.method));
    cJSON_AddNumberToObject(j, "k_bits", vq_codec_params_bits(&cp->key));
    cJSON_AddNumberToObject(j, "v_bits", vq_codec_params_bits(&cp->value));
    if (s->kl.key_bits || s->kl.value_bits || cp->fp16_first_layers || cp->fp16_last_layers)
        ppl_json_layers(j, s);
    if (s->kl.ratequant_mean > 0) cJSON_AddNumberToObject(j, "ratequant", s->kl.ratequant_mean);
    cJSON_AddNumberToObject(j, "ctx", o->ctx);
    cJSON_AddStringToObject(j, "activations", o->f32act ? "f32" : "int8");
    cJSON_AddNumberToObject(j, "chunks", res->n_chunks);
    cJSON_AddNumberToObject(j, "tokens_scored", (double)res->n_scored);
    cJSON_AddNumberToObject(j, "ppl", res->ppl);
    cJSON_AddNumberToObject(j, "ppl_stderr", res->ppl_stderr);
    cJSON_AddNumberToObject(j, "nll_mean", res->nll_mean);
    if (o->base_path) {
        cJSON_AddNumberToObject(j, "kld_mean", res->kld_mean);
        cJSON_AddNumberToObject(j, "kld_median", res->kld_median);
        cJSON_AddNumberToObject(j, "kld_p99", res->kld_p99);
        cJSON_AddNumberToObject(j, "top1", res->top1);
    }
    cJSON_AddNumberToObject(j, "kv_bytes", (double)m->total_bytes);
    cJSON_AddNumberToObject(j, "key_x", key_x(m));
    cJSON_AddNumberToObject(j, "fullKV_x", full_x(m));
    cJSON_AddNumberToObject(j, "prefill_tok_s", res->prefill_tok_s);
    cJSON_AddNumberToObject(j, "seconds", res->seconds);
    char *t = cJSON_Print(j);
    if (t) printf("%s\n", t);
    free(t);
    cJSON_Delete(j);
}

static void ppl_report_text(const struct ppl_opts *o, const struct ppl_state *s,
                            const struct vq_ppl_result *res, int64_t n_tok) {
    const struct vq_cache_memory *m = &res->mem;
    printf("model %s (%s), text %s: %lld tokens\n", o->model, s->em.info->arch, o->text,
           (long long)n_tok);
    printf("KV %s: ctx %d, %d chunks, %lld tokens scored\n", s->name, o->ctx, res->n_chunks,
           (long long)res->n_scored);
    printf("perplexity: %.4f +/- %.4f\n", res->ppl, res->ppl_stderr);
    if (o->base_path)
        printf("KL(base || this): mean %.6f, median %.6f, p99 %.6f; top-1 agreement %.2f%%\n",
               res->kld_mean, res->kld_median, res->kld_p99, 100.0 * res->top1);
    printf("KV cache after one chunk: %.3f MB (fp16 %.3f MB), key_x %.2f, fullKV_x %.2f\n",
           (double)m->total_bytes / 1048576.0, (double)m->fp16_bytes / 1048576.0, key_x(m),
           full_x(m));
    printf("forward passes: %.2f s, %.1f tok/s\n", res->seconds, res->prefill_tok_s);
}

/* The files of a run, before the model is loaded: the text and --kl-base must be readable
 * regular files (the text under VQ_FILE_MAX_TEXT), --save-logits writable and not a device,
 * FIFO or folder. 1 ok, 0 printed. */
static int ppl_check_files(const struct ppl_opts *o) {
    int fd;
    if (o->text && vq_file_open_input(o->text, VQ_FILE_MAX_TEXT, "text", &fd, NULL) != 0) {
        fprintf(stderr, "%s: -f: %s\n", CMD, vq_file_error());
        return 0;
    }
    if (o->text) close(fd);
    if (o->base_path &&
        vq_file_open_input(o->base_path, UINT64_MAX, "logits file", &fd, NULL) != 0) {
        fprintf(stderr, "%s: --kl-base: %s\n", CMD, vq_file_error());
        return 0;
    }
    if (o->base_path) close(fd);
    return !o->save_path || vq_opt_output(CMD, "--save-logits", o->save_path);
}

int vq_cmd_perplexity(int argc, char **argv) {
    struct ppl_opts o;
    const int pr = ppl_parse(argc, argv, &o);
    if (pr <= 0) return pr < 0 ? 0 : 2;
    if (!o.ko.print_config && !ppl_check_files(&o)) return 1;
    struct ppl_state s;
    memset(&s, 0, sizeof s);
    int rc = ppl_build(&o, &s);
    if (!rc && o.ko.print_config) {
        rc = vq_kv_print_config(s.name, &s.pp.cache);
    } else if (!rc) {
        struct vq_ppl_result res;
        int64_t n_tok = 0;
        rc = ppl_run(&o, &s, &res, &n_tok);
        if (!rc && o.json) ppl_report_json(&o, &s, &res);
        else if (!rc) ppl_report_text(&o, &s, &res, n_tok);
    }
    ppl_free(&s);
    return rc;
}
