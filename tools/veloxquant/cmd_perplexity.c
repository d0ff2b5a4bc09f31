/* cmd_perplexity.c — `veloxquant perplexity`: chunked perplexity over a text file with the KV
 * cache compressed as it fills (src/eval/ppl.h), optional saved top-k logits and KL divergence
 * / top-1 agreement against a saved base run (src/eval/logits.h for the file format). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "eval/logits.h"
#include "eval/ppl.h"
#include "evalcommon.h"
#include "kvconfig.h"
#include "opts.h"

static const char *CMD = "perplexity";

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant perplexity -m MODEL -f TEXT [-c CTX] [options]\n\n"
        "Perplexity over TEXT in non-overlapping chunks of CTX tokens, scoring the second half of\n"
        "each chunk, with the KV cache compressed as it fills (attention reads the codes).\n\n"
        "  -m, --model FILE      GGUF model (required)\n"
        "  -f, --file TEXT       text file (required), e.g. data/corpus_en.txt (make bench-data)\n"
        "  -c, --ctx CTX         tokens per chunk (default 512; even, >= 4)\n"
        "  --chunks N            score only the first N chunks (default: all)\n"
        "  -b, --batch N         tokens per forward pass (default: CTX)\n"
        "  -t, --threads N       threads (default: OpenMP default)\n"
        "  --f32-activations     exact fp32 matmul inputs instead of llama.cpp's int8 ones\n"
        "                        (prefill ~1.3x, decode ~6x slower; no int8 rounding noise)\n" VQ_KV_HELP
        "  --save-logits FILE    store top-k log-probs + remainder mass of every scored token\n"
        "                        (binary, format in src/eval/logits.h)\n"
        "  --top-k K             entries per token in --save-logits (default 32, max 256)\n"
        "  --kl-base FILE        KL(base || this run) mean/median/p99 and top-1 agreement\n"
        "                        against a file written by --save-logits (same text, ctx, chunks)\n"
        "  --json                one JSON object on stdout\n"
        "  -h, --help            this help\n");
}

int vq_cmd_perplexity(int argc, char **argv) {
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'},
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
    const char *model = NULL, *text = NULL, *save_path = NULL, *base_path = NULL;
    int ctx = 512, chunks = 0, batch = 0, threads = 0, top_k = 32, json = 0, f32act = 0;
    struct vq_kv_opts ko;
    vq_kv_opts_init(&ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:c:b:t:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': model = optarg; break;
        case 'f': text = optarg; break;
        case 'c': ok = vq_opt_int(CMD, "--ctx", optarg, 4, 1 << 20, &ctx); break;
        case 'C': ok = vq_opt_int(CMD, "--chunks", optarg, 1, 1 << 30, &chunks); break;
        case 'b': ok = vq_opt_int(CMD, "--batch", optarg, 1, 1 << 20, &batch); break;
        case 't': ok = vq_opt_int(CMD, "--threads", optarg, 1, 1024, &threads); break;
        case 'S': save_path = optarg; break;
        case 'K': base_path = optarg; break;
        case 'k': ok = vq_opt_int(CMD, "--top-k", optarg, 1, VQ_LOGITS_MAX_TOPK, &top_k); break;
        case 'j': json = 1; break;
        case 'A': f32act = 1; break;
        case 'h': usage(stdout); return 0;
        case ':': fprintf(stderr, "%s: %s needs a value\n", CMD, argv[optind - 1]); return 2;
        case '?': fprintf(stderr, "%s: unknown option '%s'\n", CMD, argv[optind - 1]); return 2;
        default: ok = vq_kv_opts_handle(&ko, CMD, c, optarg); break;
        }
        if (ok != 1) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", CMD, argv[optind]);
        return 2;
    }
    if ((!model || !text) && !ko.print_config) {
        fprintf(stderr, "%s: -m MODEL and -f TEXT are required\n", CMD);
        return 2;
    }
    if (ctx % 2) {
        fprintf(stderr, "%s: --ctx must be even\n", CMD);
        return 2;
    }

    struct vq_ppl_params pp = vq_ppl_params_default();
    pp.ctx = ctx;
    pp.n_chunks = chunks;
    pp.n_batch = batch;
    pp.n_threads = threads;
    pp.top_k = top_k;
    pp.f32_activations = f32act;
    if (!vq_kv_opts_resolve(CMD, &ko, &pp.cache.key, &pp.cache.value)) return 2;
    vq_kv_opts_apply_cache(&ko, &pp.cache); /* outlier modifiers */
    char name[96];
    vq_kv_config_name_opts(&ko, &pp.cache.key, &pp.cache.value, name, sizeof name);
    if (ko.print_config) return vq_kv_print_config(name, &pp.cache);

    struct vq_eval_model em;
    if (!vq_eval_model_open(CMD, model, &em)) return 1;
    vq_calib_data *calib_owned[2] = {NULL, NULL}; /* vecinfer / spectral artifacts */
    struct vq_kv_layers kl; /* per-layer bits (lists, RateQuant), fp16 edge layers */
    const int la = vq_kv_layers_apply(CMD, &ko, model, em.m, em.info->n_layers, em.info->head_dim,
                                      &pp.cache, &kl, 0);
    if (la != 1) {
        vq_eval_model_close(&em);
        return la == 0 ? 2 : 1;
    }
    if (!vq_cli_attach_calib(CMD, model, &pp.cache, em.info->n_layers, em.info->head_dim,
                             calib_owned)) {
        vq_eval_model_close(&em);
        vq_kv_layers_free(&kl);
        return 1;
    }
    /* validate the KV config against the model's head_dim before reading the text */
    {
        struct vq_codec_params k = pp.cache.key, v = pp.cache.value;
        k.head_dim = v.head_dim = em.info->head_dim;
        vq_status st;
        vq_codec *kc = vq_codec_create(&k, &st);
        vq_codec *vc = kc ? vq_codec_create(&v, &st) : NULL;
        vq_codec_free(kc);
        vq_codec_free(vc);
        struct vq_cache_params mc = pp.cache;
        mc.head_dim = em.info->head_dim;
        const char *why = vq_kv_modifier_error(&mc);
        if (!vc || why) {
            if (why) fprintf(stderr, "%s: KV config %s: %s\n", CMD, name, why);
            else
                fprintf(
                    stderr,
                    "%s: KV config %s: %s (check bits and options against `veloxquant methods`)\n",
                    CMD, name, vq_status_str(st));
            vq_eval_model_close(&em);
            vq_calib_data_free(calib_owned[0]);
            vq_calib_data_free(calib_owned[1]);
            vq_kv_layers_free(&kl);
            return 2;
        }
    }
    int rc = 1;
    int64_t n_tok = 0;
    int32_t *tokens = vq_eval_tokenize_file(CMD, &em, text, &n_tok);
    vq_logits_file *save = NULL, *base = NULL;
    if (!tokens) goto out;
    pp.bos = vq_eval_chunk_bos(&em);
    vq_status st;
    if (base_path && !(base = vq_logits_open(base_path, &st))) {
        fprintf(stderr, "%s: --kl-base %s: %s\n", CMD, base_path, vq_status_str(st));
        goto out;
    }
    if (save_path && !(save = vq_logits_create(save_path, top_k, em.info->n_vocab, ctx, &st))) {
        fprintf(stderr, "%s: --save-logits %s: %s\n", CMD, save_path, vq_status_str(st));
        goto out;
    }
    struct vq_progress prog;
    vq_progress_init(&prog, CMD);
    struct vq_ppl_result res;
    char err[512];
    st = vq_ppl_run(em.m, tokens, n_tok, &pp, save, base, vq_progress_ppl, &prog, &res, err,
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
    const struct vq_cache_memory *m = &res.mem;
    const double key_x = m->key_total_bytes ? (double)m->fp16_key_bytes / (double)m->key_total_bytes
                                            : 0;
    const double full_x = m->total_bytes ? (double)m->fp16_bytes / (double)m->total_bytes : 0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddStringToObject(o, "config", name);
        cJSON_AddStringToObject(o, "k_method", vq_method_name(pp.cache.key.method));
        cJSON_AddStringToObject(o, "v_method", vq_method_name(pp.cache.value.method));
        cJSON_AddNumberToObject(o, "k_bits", vq_codec_params_bits(&pp.cache.key));
        cJSON_AddNumberToObject(o, "v_bits", vq_codec_params_bits(&pp.cache.value));
        if (kl.k_bits || kl.v_bits || pp.cache.fp16_first_layers || pp.cache.fp16_last_layers) {
            /* per layer: the bits each layer stores (16 on fp16 edge layers) */
            cJSON *kb = cJSON_AddArrayToObject(o, "k_bits_per_layer"),
                  *vb = cJSON_AddArrayToObject(o, "v_bits_per_layer");
            for (int l = 0; l < em.info->n_layers; l++) {
                const int edge = l < pp.cache.fp16_first_layers ||
                                 l >= em.info->n_layers - pp.cache.fp16_last_layers;
                cJSON_AddItemToArray(kb, cJSON_CreateNumber(edge        ? 16
                                                            : kl.k_bits ? kl.k_bits[l]
                                                                        : pp.cache.key.bits));
                cJSON_AddItemToArray(vb, cJSON_CreateNumber(edge        ? 16
                                                            : kl.v_bits ? kl.v_bits[l]
                                                                        : pp.cache.value.bits));
            }
        }
        if (kl.rq_mean > 0) cJSON_AddNumberToObject(o, "ratequant", kl.rq_mean);
        cJSON_AddNumberToObject(o, "ctx", ctx);
        cJSON_AddStringToObject(o, "activations", f32act ? "f32" : "int8");
        cJSON_AddNumberToObject(o, "chunks", res.n_chunks);
        cJSON_AddNumberToObject(o, "tokens_scored", (double)res.n_scored);
        cJSON_AddNumberToObject(o, "ppl", res.ppl);
        cJSON_AddNumberToObject(o, "ppl_stderr", res.ppl_stderr);
        cJSON_AddNumberToObject(o, "nll_mean", res.nll_mean);
        if (base) {
            cJSON_AddNumberToObject(o, "kld_mean", res.kld_mean);
            cJSON_AddNumberToObject(o, "kld_median", res.kld_median);
            cJSON_AddNumberToObject(o, "kld_p99", res.kld_p99);
            cJSON_AddNumberToObject(o, "top1", res.top1);
        }
        cJSON_AddNumberToObject(o, "kv_bytes", (double)m->total_bytes);
        cJSON_AddNumberToObject(o, "key_x", key_x);
        cJSON_AddNumberToObject(o, "fullKV_x", full_x);
        cJSON_AddNumberToObject(o, "prefill_tok_s", res.prefill_tok_s);
        cJSON_AddNumberToObject(o, "seconds", res.seconds);
        char *t = cJSON_Print(o);
        if (t) printf("%s\n", t);
        free(t);
        cJSON_Delete(o);
    } else {
        printf("model %s (%s), text %s: %lld tokens\n", model, em.info->arch, text,
               (long long)n_tok);
        printf("KV %s: ctx %d, %d chunks, %lld tokens scored\n", name, ctx, res.n_chunks,
               (long long)res.n_scored);
        printf("perplexity: %.4f +/- %.4f\n", res.ppl, res.ppl_stderr);
        if (base)
            printf("KL(base || this): mean %.6f, median %.6f, p99 %.6f; top-1 agreement %.2f%%\n",
                   res.kld_mean, res.kld_median, res.kld_p99, 100.0 * res.top1);
        printf("KV cache after one chunk: %.3f MB (fp16 %.3f MB), key_x %.2f, fullKV_x %.2f\n",
               (double)m->total_bytes / 1048576.0, (double)m->fp16_bytes / 1048576.0, key_x,
               full_x);
        printf("forward passes: %.2f s, %.1f tok/s\n", res.seconds, res.prefill_tok_s);
    }
    rc = 0;
out:
    vq_logits_discard(save);
    vq_logits_close(base);
    free(tokens);
    vq_eval_model_close(&em);
    vq_calib_data_free(calib_owned[0]);
    vq_calib_data_free(calib_owned[1]);
    vq_kv_layers_free(&kl);
    return rc;
}
