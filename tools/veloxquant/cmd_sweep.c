/* cmd_sweep.c — `veloxquant sweep`: models x KV configs, each (model, config) measured in a
 * fresh child process (fork + exec of this executable's hidden `sweep-run` command), results
 * written atomically to results.json after every config (docs/EVALUATION.md "sweep").
 *
 * Per model the sweep first makes sure the fp16 reference exists (its saved top-k logits and
 * its greedy probe outputs, in the output folder as fp16.logits / fp16.probe.json), running
 * the fp16 config if needed; every other config is then compared against it (KL, top-1,
 * identical greedy prefix). A config that crashes, is killed (out of memory) or exits with an
 * error is recorded as an `error` entry and the sweep goes on. Finished entries are kept and
 * skipped on the next run (resume); entries with an error are retried; --force reruns all.
 * Output: DIR/results.json for one model; DIR/<model>/results.json for several (<model>: the
 * file name without .gguf, -2, -3, ... appended to a repeated name), which `report DIR` reads.
 * Exit status: 0 when every config succeeded, 1 when some failed (results still written),
 * 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "vq_tools.h"
#include "evalcommon.h"
#include "kvconfig.h"
#include "opts.h"

static const char *CMD = "sweep";
#define MAX_MODELS 16
#define MAX_CONFIGS 64

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant sweep [-m MODEL ...] [--configs LIST] -o DIR [options]\n\n"
        "Measures every (model, KV config) in a fresh child process: perplexity and KL vs the\n"
        "fp16-KV run on TEXT, greedy probe (tokens generated, identical prefix vs fp16), prefill\n"
        "and decode tok/s, exact KV bytes, compression, peak RSS; writes results.json "
        "(resumable).\n\n"
        "  -m, --model FILE      GGUF model (repeatable; default: the default model)\n"
        "  --configs LIST        comma-separated configs (default: all presets). A config is a\n"
        "                        preset (listed below), METHOD-B, METHOD-kBvB,\n"
        "                        KMETHOD-B:VMETHOD-B or ratequant-B; suffixes +rqB (RateQuant\n"
        "                        keys), +fp16fNlM (fp16 first N / last M layers), +gG +resR\n"
        "                        +sinkN +jlM +seedS (codec options), +otK +ocN (outliers),\n"
        "                        +ks +ksk (key scales), +kbDIGITS +vbDIGITS (per-layer\n"
        "                        key / value bits, one digit per entry, spread over the\n"
        "                        model's layers); or a --kv preset (kv8 ... kv2)\n"
        "  KV options            (below) spell one more config, as `perplexity` takes them, named\n"
        "                        by its label; with KV options and no --configs, only that one\n"
        "  -o, --out DIR         output folder (DIR/results.json; DIR/<model>/ for\n"
        "                        several models; `veloxquant report DIR -o FIGDIR` draws them)\n"
        "  --force               rerun configs that already have results\n"
        "  -f, --file TEXT       perplexity text (default data/corpus_en.txt)\n"
        "  -c, --ctx CTX         perplexity chunk tokens (default 512)\n"
        "  --chunks N            chunks scored (default 4; 0 = all)\n"
        "  --max-tokens T        greedy tokens per probe prompt (default 200)\n"
        "  --prompts N           probe prompts (default 8, at most %d)\n"
        "  -t, --threads N       threads per child (default: OpenMP default)\n"
        "  --repeats N           measure prefill and decode speed N times per config (default\n"
        "                        1): runs 2..N repeat the greedy probe and one perplexity\n"
        "                        chunk; results.json records each run and their median\n"
        "  --timeout S           kill a config after S seconds (default 0 = none)\n"
        "  -h, --help            this help\n",
        vq_probe_n_prompts);
    fputs("\nKV options:\n" VQ_KV_HELP, f);
    fprintf(f, "\nnamed configs (the default --configs all):");
    struct vq_kv_preset_info pi;
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++)
        fprintf(f, "%s%s", i % 6 ? " " : "\n  ", pi.name);
    fprintf(f, "\n");
}

/* ---- child: sweep-run ---------------------------------------------------------------------- */

static int write_probe(const char *path, int n_prompts, int max_tokens, const int32_t *ids,
                       const int *lens) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "outputs");
    cJSON_AddNumberToObject(o, "max_tokens", max_tokens);
    for (int p = 0; p < n_prompts; p++) {
        cJSON *a = cJSON_CreateArray();
        for (int i = 0; i < lens[p]; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[(size_t)p * max_tokens + i]));
        cJSON_AddItemToArray(arr, a);
    }
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!t) return 0;
    vq_status st = vq_write_file_atomic(path, t, strlen(t));
    free(t);
    return st == VQ_STATUS_OK;
}

/* Reads a probe reference; returns 0 on any mismatch/format problem. */
static int read_probe(const char *path, int n_prompts, int max_tokens, int32_t *ids, int *lens) {
    char *buf = NULL; /* regular files only, opened without blocking, at most 4 MiB */
    size_t n = 0;
    if (vq_file_read_all(path, (uint64_t)1 << 22, "probe reference", &buf, &n) != VQ_STATUS_OK)
        return 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    int ok = 0;
    const cJSON *mt = cJSON_GetObjectItem(o, "max_tokens"),
                *arr = cJSON_GetObjectItem(o, "outputs");
    if (cJSON_IsNumber(mt) && mt->valueint == max_tokens && cJSON_IsArray(arr) &&
        cJSON_GetArraySize(arr) >= n_prompts) {
        ok = 1;
        for (int p = 0; p < n_prompts && ok; p++) {
            const cJSON *a = cJSON_GetArrayItem(arr, p), *it;
            lens[p] = 0;
            if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > max_tokens) {
                ok = 0;
                break;
            }
            cJSON_ArrayForEach(it, a) {
                if (!cJSON_IsNumber(it)) {
                    ok = 0;
                    break;
                }
                ids[(size_t)p * max_tokens + lens[p]++] = (int32_t)it->valueint;
            }
        }
    }
    cJSON_Delete(o);
    return ok;
}

static void detok_preview(const struct vq_eval_model *em, const int32_t *ids, int n, char **out) {
    char small[2048], *buf = small;
    int64_t len = vq_tok_detokenize(em->tok, ids, n, buf, sizeof small - 1, true, false);
    if (len < 0) { /* longer text (long pieces): detokenize in full, then cut */
        buf = malloc((size_t)-len + 1);
        len = buf ? vq_tok_detokenize(em->tok, ids, n, buf, (size_t)-len, true, false) : 0;
        if (!buf || len < 0) len = 0;
    }
    if (len > 300) { /* do not cut a UTF-8 character */
        len = 300;
        while (len > 0 && ((unsigned char)buf[len] & 0xC0) == 0x80) len--;
    }
    if (buf) buf[len] = 0;
    vq_str_set(out, buf ? buf : "");
    if (buf != small) free(buf);
}

/* Options of the hidden child command. */
struct srun_opts {
    const char *model, *name, *text, *outp, *save, *base;
    const char *save_probe, *probe_ref;
    int ctx, chunks, max_tokens, n_prompts, threads, repeats;
    struct vq_kv_opts ko;
    struct vq_ppl_params pp; /* perplexity parameters, the KV config resolved from ko */
};

/* Parse step (options, then the KV config resolved into o->pp.cache): 1 ok, 0 usage error
 * (printed). */
static int srun_parse(int argc, char **argv, struct srun_opts *o) {
    static const char *C = "sweep-run";
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"config", required_argument, 0, 'n'},
        {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'C'},
        {"max-tokens", required_argument, 0, 'T'},
        {"prompts", required_argument, 0, 'P'},
        {"threads", required_argument, 0, 't'},
        {"out", required_argument, 0, 'o'},
        {"save-logits", required_argument, 0, 'S'},
        {"kl-base", required_argument, 0, 'K'},
        {"save-probe", required_argument, 0, 'p'},
        {"probe-ref", required_argument, 0, 'r'},
        {"repeats", required_argument, 0, 'R'},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->chunks = 4;
    o->max_tokens = 200;
    o->n_prompts = 8;
    o->repeats = 1;
    vq_kv_opts_init(&o->ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:c:t:o:", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'n': o->name = optarg; break;
        case 'f': o->text = optarg; break;
        case 'c': ok = vq_opt_int(C, "--ctx", optarg, 4, 1 << 20, &o->ctx); break;
        case 'C': ok = vq_opt_int(C, "--chunks", optarg, 0, 1 << 30, &o->chunks); break;
        case 'T': ok = vq_opt_int(C, "--max-tokens", optarg, 1, 1 << 16, &o->max_tokens); break;
        case 'P':
            ok = vq_opt_int(C, "--prompts", optarg, 1, vq_probe_n_prompts, &o->n_prompts);
            break;
        case 't': ok = vq_opt_int(C, "--threads", optarg, 0, 1024, &o->threads); break;
        case 'o': o->outp = optarg; break;
        case 'S': o->save = optarg; break;
        case 'K': o->base = optarg; break;
        case 'p': o->save_probe = optarg; break;
        case 'r': o->probe_ref = optarg; break;
        case 'R':
            ok = vq_opt_int(C, "--repeats", optarg, 1, VQ_RESULT_MAX_RUNS, &o->repeats);
            break;
        case ':':
        case '?': vq_cli_bad_option(C, c, argc, argv, lo); return 0;
        default: ok = vq_kv_opts_handle(&o->ko, C, c, optarg); break;
        }
        if (ok != 1) return 0;
    }
    if (!o->model || !o->name || !o->text || !o->outp || o->ctx % 2) {
        fprintf(stderr, "%s: needs -m, --config, -f, --out and an even --ctx\n", C);
        return 0;
    }
    o->pp = vq_ppl_params_default();
    o->pp.ctx = o->ctx;
    o->pp.n_chunks = o->chunks;
    o->pp.n_threads = o->threads;
    char label[256];
    return vq_kv_opts_prepare(C, &o->ko, &o->pp.cache, label, sizeof label);
}

/* Everything a sweep-run holds; srun_free releases it once srun_build_model succeeded. */
struct srun_state {
    struct vq_ppl_params pp; /* o->pp, with per-layer bits and calibration attached */
    struct vq_eval_model em;
    vq_calib_data *calib_owned[2]; /* vecinfer / spectral artifacts */
    struct vq_kv_layers kl;        /* per-layer bits (RateQuant), fp16 edge layers */
    struct vq_codec_params kp, vp; /* the key / value codecs at the model's head_dim */
    struct vq_result e;
    int64_t n_tok;
    int32_t *tokens, *ids, *ref; /* corpus; probe outputs; probe reference (--probe-ref) */
    int lens[64], ref_lens[64];
    vq_logits_file *sf, *bf; /* --save-logits, --kl-base */
    vq_ctx *gctx;            /* the greedy probe's context */
    struct vq_ppl_result pr;
    double dec_tok_s, tg, pm; /* probe decode rate, tokens generated, prefix matched */
};

static void srun_free(struct srun_state *s) {
    vq_logits_discard(s->sf);
    vq_logits_close(s->bf);
    vq_ctx_free(s->gctx);
    vq_result_clear(&s->e);
    free(s->ref);
    free(s->ids);
    free(s->tokens);
    vq_eval_model_close(&s->em);
    vq_calib_data_free(s->calib_owned[0]);
    vq_calib_data_free(s->calib_owned[1]);
    vq_kv_layers_free(&s->kl);
}

/* Build step 1: model, per-layer bits, calibration, and a check that both codecs accept the
 * config. Returns 0 (everything held) or an exit code (everything released). */
static int srun_build_model(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    s->pp = o->pp;
    if (!vq_eval_model_open(C, o->model, &s->em)) return 1;
    const struct vq_model_info *I = s->em.info;
    const int la = vq_kv_opts_build(C, &o->ko, o->model, s->em.m, I->n_layers, I->n_kv_heads,
                                    I->head_dim, &s->pp.cache, &s->kl, s->calib_owned, 0);
    if (la != 1) {
        vq_eval_model_close(&s->em);
        return la == 0 ? 2 : 1;
    }
    const int d = s->em.info->head_dim;
    s->kp = s->pp.cache.key;
    s->vp = s->pp.cache.value;
    s->kp.head_dim = s->vp.head_dim = d;
    vq_status st;
    vq_codec *kc = vq_codec_create(&s->kp, &st), *vc = kc ? vq_codec_create(&s->vp, &st) : NULL;
    vq_codec_free(kc);
    vq_codec_free(vc);
    if (!vc) {
        fprintf(stderr, "%s: config %s: %s (bits/options not accepted by the method)\n", C, o->name,
                vq_status_str(st));
        vq_eval_model_close(&s->em);
        vq_calib_data_free(s->calib_owned[0]);
        vq_calib_data_free(s->calib_owned[1]);
        vq_kv_layers_free(&s->kl);
        return 2;
    }
    vq_result_init(&s->e);
    return 0;
}

/* Build step 2: the result's config, the corpus tokens, probe buffers, the logits files and
 * the probe reference. Returns 0 or exit code 1 (printed). */
static int srun_build_inputs(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    const size_t n_ids = (size_t)o->n_prompts * (size_t)o->max_tokens;
    vq_kv_fill_result_config(o->name, &s->kp, &s->vp, &s->e.config);
    vq_kv_result_config_layers(&s->pp.cache, &s->kl, &s->e.config);
    s->tokens = vq_eval_tokenize_file(C, &s->em, o->text, &s->n_tok);
    s->ids = malloc(n_ids * sizeof *s->ids);
    s->ref = o->probe_ref ? malloc(n_ids * sizeof *s->ref) : NULL;
    vq_status st;
    if (!s->tokens || !s->ids || (o->probe_ref && !s->ref)) return 1;
    if (o->base && !(s->bf = vq_logits_open(o->base, &st))) {
        vq_cli_file_fail(C, "--kl-base", o->base, st);
        return 1;
    }
    if (o->save && !(s->sf = vq_logits_create(o->save, VQ_PPL_TOP_K_DEFAULT, s->em.info->n_vocab,
                                              o->ctx, &st))) {
        vq_cli_file_fail(C, "--save-logits", o->save, st);
        return 1;
    }
    if (o->probe_ref &&
        !read_probe(o->probe_ref, o->n_prompts, o->max_tokens, s->ref, s->ref_lens)) {
        fprintf(stderr, "%s: %s: not a probe reference for %d prompts x %d tokens\n", C,
                o->probe_ref, o->n_prompts, o->max_tokens);
        return 1;
    }
    return 0;
}

/* Run step 1: perplexity (+ KL against --kl-base, logits saved with --save-logits) into the
 * result. Returns 0 or exit code 1 (printed). */
static int srun_ppl(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    struct vq_progress prog;
    char label[96], err[512];
    snprintf(label, sizeof label, "  %s ppl", o->name);
    vq_progress_init(&prog, label);
    const struct vq_ppl_result *pr = &s->pr;
    vq_status st = vq_ppl_run(s->em.m, s->tokens, s->n_tok, &s->pp, s->sf, s->bf, vq_progress_ppl,
                              &prog, &s->pr, err, sizeof err);
    vq_progress_done(&prog);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: perplexity: %s\n", C, err);
        return 1;
    }
    if (s->sf) {
        st = vq_logits_close(s->sf);
        s->sf = NULL;
        if (st != VQ_STATUS_OK) {
            vq_cli_file_fail(C, "--save-logits", o->save, st);
            return 1;
        }
    }
    struct vq_result *e = &s->e;
    const struct vq_cache_memory *mem = &pr->mem;
    e->ppl = pr->ppl;
    e->prefill_tok_s = pr->prefill_tok_s;
    e->kv_bytes = (double)mem->total_bytes;
    e->key_x = mem->key_total_bytes ? (double)mem->fp16_key_bytes / (double)mem->key_total_bytes
                                    : NAN;
    e->fullKV_x = mem->total_bytes ? (double)mem->fp16_bytes / (double)mem->total_bytes : NAN;
    e->bits_per_elem = mem->fp16_bytes ? 16.0 * (double)mem->total_bytes / (double)mem->fp16_bytes
                                       : NAN;
    if (s->bf) {
        e->kld_mean = pr->kld_mean;
        e->kld_median = pr->kld_median;
        e->kld_p99 = pr->kld_p99;
        e->top1 = pr->top1;
    } else if (o->save) { /* the reference run itself */
        e->kld_mean = e->kld_median = e->kld_p99 = 0;
        e->top1 = 1;
    }
    return 0;
}

/* Run step 2: vector quality on synthetic keys / values, then the greedy probe (compared with
 * --probe-ref, saved with --save-probe) into the result. Returns 0 or exit code 1 (printed). */
static int srun_probe(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    const int n_prompts = o->n_prompts, max_tokens = o->max_tokens;
    struct vq_result *e = &s->e;
    /* 2. vector quality on synthetic keys (outlier channels) and values */
    double cs;
    if (vq_eval_codec_cosine(&s->kp, 512, 1, 42, &cs) == VQ_STATUS_OK) e->cosine_k = cs;
    if (vq_eval_codec_cosine(&s->vp, 512, 0, 43, &cs) == VQ_STATUS_OK) e->cosine_v = cs;
    /* 3. greedy probe */
    vq_status st;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 1024 + max_tokens;
    cp.n_threads = o->threads;
    cp.cache = s->pp.cache;
    s->gctx = vq_ctx_create(s->em.m, &cp, &st);
    if (!s->gctx) {
        fprintf(stderr, "%s: probe context: %s\n", C, vq_status_str(st));
        return 1;
    }
    struct vq_progress prog;
    char label[96];
    snprintf(label, sizeof label, "  %s probe", o->name);
    vq_progress_init(&prog, label);
    st = vq_eval_probe(&s->em, s->gctx, n_prompts, max_tokens, s->ids, s->lens, &s->dec_tok_s,
                       &prog);
    vq_progress_done(&prog);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: probe: %s\n", C, vq_status_str(st));
        return 1;
    }
    for (int p = 0; p < n_prompts; p++) {
        s->tg += s->lens[p];
        if (s->ref)
            s->pm += vq_common_prefix(s->ids + (size_t)p * max_tokens, s->lens[p],
                                      s->ref + (size_t)p * max_tokens, s->ref_lens[p]);
    }
    e->tokens_generated = s->tg / n_prompts;
    if (s->ref) e->fp16_prefix_match = s->pm / n_prompts;
    else if (o->save_probe) e->fp16_prefix_match = e->tokens_generated; /* the reference itself */
    e->decode_tok_s = s->dec_tok_s > 0 ? s->dec_tok_s : NAN;
    detok_preview(&s->em, s->ids, s->lens[0], &e->output_preview);
    if (o->save_probe && !write_probe(o->save_probe, n_prompts, max_tokens, s->ids, s->lens)) {
        fprintf(stderr, "%s: cannot write %s%s%s\n", C, o->save_probe,
                vq_file_error()[0] ? ": " : "", vq_file_error());
        return 1;
    }
    e->peak_rss_mb = vq_peak_rss_mb();
    return 0;
}

/* Run step 3 (--repeats N > 1): the speed measured N - 1 more times, each run a perplexity
 * chunk without logits (prefill tok/s) and the greedy probe again (decode tok/s); the result
 * records every run (the first: the measurements above) and their medians. Returns 0 or exit
 * code 1 (printed). */
static int srun_repeats(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    struct vq_result *e = &s->e;
    const int n = o->repeats;
    if (n <= 1) return 0;
    e->prefill_runs[0] = s->pr.prefill_tok_s;
    e->decode_runs[0] = s->dec_tok_s;
    struct vq_ppl_params pp1 = s->pp;
    pp1.n_chunks = 1;
    int lens[64];
    for (int r = 1; r < n; r++) {
        struct vq_progress prog;
        char label[96], err[512];
        snprintf(label, sizeof label, "  %s speed run %d/%d", o->name, r + 1, n);
        vq_progress_init(&prog, label);
        struct vq_ppl_result res;
        vq_status st = vq_ppl_run(s->em.m, s->tokens, s->n_tok, &pp1, NULL, NULL, vq_progress_ppl,
                                  &prog, &res, err, sizeof err);
        if (st != VQ_STATUS_OK) {
            vq_progress_done(&prog);
            fprintf(stderr, "%s: speed run %d: perplexity: %s\n", C, r + 1, err);
            return 1;
        }
        double dec = 0;
        st = vq_eval_probe(&s->em, s->gctx, o->n_prompts, o->max_tokens, s->ids, lens, &dec, &prog);
        vq_progress_done(&prog);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: speed run %d: probe: %s\n", C, r + 1, vq_status_str(st));
            return 1;
        }
        e->prefill_runs[r] = res.prefill_tok_s;
        e->decode_runs[r] = dec;
    }
    e->n_prefill_runs = e->n_decode_runs = n;
    e->prefill_tok_s = vq_median(e->prefill_runs, n);
    const double d = vq_median(e->decode_runs, n);
    e->decode_tok_s = d > 0 ? d : NAN;
    return 0;
}

/* Report step: the one-result file (--out), then the summary line on stdout. Returns 0 or exit
 * code 1 (printed). */
static int srun_report(const struct srun_opts *o, struct srun_state *s) {
    static const char *C = "sweep-run";
    const struct vq_eval_model *em = &s->em;
    const struct vq_ppl_result *pr = &s->pr;
    const int n_prompts = o->n_prompts;
    struct vq_results r;
    vq_results_init(&r);
    vq_results_stamp_time(&r);
    vq_results_fill_hardware(&r, vq_threads_resolve(o->threads));
    snprintf(r.git_commit, sizeof r.git_commit, "unknown");
    vq_str_set(&r.model.file, o->model);
    snprintf(r.model.arch, sizeof r.model.arch, "%s", em->info->arch);
    r.model.n_layers = em->info->n_layers;
    r.model.n_kv_heads = em->info->n_kv_heads;
    r.model.head_dim = em->info->head_dim;
    vq_str_set(&r.protocol.corpus, o->text);
    r.protocol.ctx = o->ctx;
    r.protocol.chunks = o->chunks;
    r.protocol.max_tokens = o->max_tokens;
    r.protocol.seed = s->kp.seed;
    if (vq_results_add(&r, &s->e) != VQ_STATUS_OK ||
        vq_results_write(&r, o->outp) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: cannot write %s%s%s\n", C, o->outp, vq_file_error()[0] ? ": " : "",
                vq_file_error());
        vq_results_clear(&r);
        return 1;
    }
    vq_results_clear(&r);
    printf(
        "%s: ppl %.4f kld %.5f top1 %.3f tokens %.1f prefix %.1f prefill %.1f tok/s decode %.1f"
        " tok/s KV %.0f bytes (x%.2f) rss %.0f MB\n",
        o->name, pr->ppl, s->bf ? pr->kld_mean : 0.0, s->bf ? pr->top1 : 1.0, s->tg / n_prompts,
        s->ref ? s->pm / n_prompts : s->tg / n_prompts, s->e.prefill_tok_s,
        isfinite(s->e.decode_tok_s) ? s->e.decode_tok_s : 0.0, (double)pr->mem.total_bytes,
        pr->mem.total_bytes ? (double)pr->mem.fp16_bytes / (double)pr->mem.total_bytes : 0.0,
        vq_peak_rss_mb());
    return 0;
}

/* The hidden child command: one (model, config); writes a one-result results.json to --out.
 * Exit 0 ok, 1 runtime error, 2 usage (bad config). */
int vq_cmd_sweep_run(int argc, char **argv) {
    struct srun_opts o;
    if (!srun_parse(argc, argv, &o)) return 2;
    struct srun_state s;
    memset(&s, 0, sizeof s);
    int rc = srun_build_model(&o, &s);
    if (rc) return rc;
    rc = srun_build_inputs(&o, &s);
    if (!rc) rc = srun_ppl(&o, &s);
    if (!rc) rc = srun_probe(&o, &s);
    if (!rc) rc = srun_repeats(&o, &s);
    if (!rc) rc = srun_report(&o, &s);
    srun_free(&s);
    return rc;
}

/* ---- parent -------------------------------------------------------------------------------- */

struct sweep_opts {
    const char *models[MAX_MODELS];
    int n_models;
    char *configs[MAX_CONFIGS];
    int n_configs;
    const char *dir, *text;
    int force, ctx, chunks, max_tokens, prompts, threads, timeout, repeats;
    char *list;                   /* owns the --configs tokens */
    char corpus_buf[4096];        /* the default corpus's path (vq_cli_default_corpus) */
    char model_buf[4096];         /* the default model's path when no -m is given */
    char canon[MAX_CONFIGS][256]; /* canonical names of the --configs (vq_kv_spec_name) */
    char extra[256];              /* the config spelled with KV options (--method ...), if any */
    int print_config;             /* --print-kv-config */
};

static int mkdir_p(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return 0;
        *p = '/';
    }
    return mkdir(tmp, 0777) == 0 || errno == EEXIST;
}

static void self_exe(char *buf, size_t cap, const char *argv0) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n > 0) buf[n] = 0;
    else snprintf(buf, cap, "%s", argv0);
}

static void git_commit(const char *exe, char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    char dir[4096], cmd[4300];
    snprintf(dir, sizeof dir, "%s", exe);
    char *s = strrchr(dir, '/');
    if (!s) return;
    *s = 0;
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short=12 HEAD 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[40];
    if (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0]) snprintf(out, cap, "%s", line);
    }
    pclose(p);
}

/* Last non-empty line of a log file into out. */
static void last_line(const char *path, char *out, size_t cap) {
    out[0] = 0;
    int fd; /* a regular file only, opened without blocking (no cap: read line by line) */
    if (vq_file_open_input(path, UINT64_MAX, "log", &fd, NULL) != VQ_STATUS_OK) return;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        /* progress bars use \r: keep the text after the last one */
        char *cr = strrchr(line, '\r');
        const char *t = cr ? cr + 1 : line;
        if (t[0]) snprintf(out, cap, "%s", t);
    }
    fclose(f);
}

/* Runs one child; returns NULL on success or a malloc'd error description. */
static char *run_child(const char *exe, char **args, const char *log, int timeout) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return strdup("fork failed");
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(exe, args);
        _exit(127);
    }
    int status = 0;
    const time_t t0 = time(NULL);
    for (;;) {
        pid_t w = waitpid(pid, &status, timeout > 0 ? WNOHANG : 0);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return strdup("waitpid failed");
        if (timeout > 0 && time(NULL) - t0 > timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            char *m = malloc(96);
            if (m) snprintf(m, 96, "timed out after %d s (killed)", timeout);
            return m;
        }
        if (timeout > 0) usleep(100000);
    }
    char buf[700], tail[512];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return NULL;
    last_line(log, tail, sizeof tail);
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        snprintf(buf, sizeof buf, "child killed by signal %d (%s)%s%s", sig, strsignal(sig),
                 sig == SIGKILL ? " — out of memory?" : "", tail[0] ? "; last output: " : "");
        strncat(buf, tail, sizeof buf - strlen(buf) - 1);
    } else {
        snprintf(buf, sizeof buf, "child exited with status %d%s", WEXITSTATUS(status),
                 tail[0] ? ": " : "");
        strncat(buf, tail, sizeof buf - strlen(buf) - 1);
    }
    return strdup(buf);
}

/* Builds the child's argv for one config. */
struct child_args {
    char *argv[64];
    int argc;
    char nums[8][32];
    char kvbuf[16][32];
    char kvname[256];
};

/* 1 if the canonical name of ko names exactly its spec (the child then gets --kv NAME). */
static int name_carries(const struct vq_kv_opts *ko, char *name, size_t cap) {
    struct vq_kv_spec back, s = ko->s;
    if (vq_kv_spec_name(&s, name, cap) < 0 ||
        vq_kv_spec_parse(name, &back, NULL, 0) != VQ_STATUS_OK)
        return 0;
    back.preset = s.preset = 0;
    return !memcmp(&back, &s, sizeof s);
}

static void child_args(struct child_args *a, const char *exe, const struct sweep_opts *o,
                       const char *model, const char *name, const struct vq_kv_opts *ko,
                       const char *out, const char *ref_logits, const char *ref_probe, int is_ref) {
    a->argc = 0;
#define A(s) (a->argv[a->argc++] = (char *)(s))
    A(exe);
    A("sweep-run");
    A("-m");
    A(model);
    A("--config");
    A(name);
    A("-f");
    A(o->text);
    snprintf(a->nums[0], 32, "%d", o->ctx);
    A("-c");
    A(a->nums[0]);
    snprintf(a->nums[1], 32, "%d", o->chunks);
    A("--chunks");
    A(a->nums[1]);
    snprintf(a->nums[2], 32, "%d", o->max_tokens);
    A("--max-tokens");
    A(a->nums[2]);
    snprintf(a->nums[3], 32, "%d", o->prompts);
    A("--prompts");
    A(a->nums[3]);
    snprintf(a->nums[4], 32, "%d", o->threads);
    A("-t");
    A(a->nums[4]);
    if (o->repeats > 1) {
        snprintf(a->nums[5], 32, "%d", o->repeats);
        A("--repeats");
        A(a->nums[5]);
    }
    A("--out");
    A(out);
    if (is_ref) {
        A("--save-logits");
        A(ref_logits);
        A("--save-probe");
        A(ref_probe);
    } else {
        A("--kl-base");
        A(ref_logits);
        A("--probe-ref");
        A(ref_probe);
    }
#undef A
    if (name_carries(ko, a->kvname, sizeof a->kvname)) { /* the library's name for the config */
        a->argv[a->argc++] = (char *)"--kv";
        a->argv[a->argc++] = a->kvname;
    } else { /* a config no name carries (explicit per-layer lists, --calib-tokens) */
        vq_kv_opts_to_argv(ko, a->argv, &a->argc, 62, a->kvbuf, 16);
    }
    a->argv[a->argc] = NULL;
}

static int protocol_matches(const struct vq_results *r, const struct sweep_opts *o) {
    return r->protocol.ctx == o->ctx && r->protocol.chunks == o->chunks &&
           r->protocol.max_tokens == o->max_tokens && r->protocol.n_prompts == o->prompts &&
           r->protocol.corpus && !strcmp(r->protocol.corpus, o->text);
}

/* The files of one model's output folder. */
struct sweep_paths {
    char results[4096], logdir[4096], ref_logits[4096], ref_probe[4096], tmpres[4096];
};

static void sweep_paths_init(const char *dir, struct sweep_paths *p) {
    snprintf(p->results, sizeof p->results, "%.3800s/results.json", dir);
    snprintf(p->logdir, sizeof p->logdir, "%.3800s/logs", dir);
    snprintf(p->ref_logits, sizeof p->ref_logits, "%.3800s/fp16.logits", dir);
    snprintf(p->ref_probe, sizeof p->ref_probe, "%.3800s/fp16.probe.json", dir);
    snprintf(p->tmpres, sizeof p->tmpres, "%.3800s/.child_result.json", dir);
}

/* Fills the header of *r (time, commit, hardware, model identity and geometry, protocol);
 * refreshed on every run. */
static void sweep_header(const struct sweep_opts *o, const char *exe, const char *model,
                         const struct vq_kv_geometry *geo, const char *sha, struct vq_results *r) {
    vq_results_stamp_time(r);
    git_commit(exe, r->git_commit, sizeof r->git_commit);
    vq_results_fill_hardware(r, vq_threads_resolve(o->threads)); /* what the children run */
    vq_str_set(&r->model.file, model);
    memcpy(r->model.sha256, sha, sizeof r->model.sha256);
    snprintf(r->model.arch, sizeof r->model.arch, "%s", geo->arch);
    r->model.n_layers = geo->n_layers;
    r->model.n_kv_heads = geo->n_kv_heads;
    r->model.head_dim = geo->head_dim;
    int swa_w, n_swa; /* the model's sliding windows, as a run's context uses them */
    free(r->model.layer_window);
    r->model.layer_window = vq_cli_model_windows(CMD, model, geo->n_layers, &swa_w, &n_swa, 1);
    for (int i = 0; i < r->protocol.n_prompts; i++) free(r->protocol.prompts[i]);
    free(r->protocol.prompts);
    r->protocol.prompts = calloc((size_t)o->prompts, sizeof(char *));
    r->protocol.n_prompts = 0;
    for (int i = 0; r->protocol.prompts && i < o->prompts; i++)
        if (vq_str_set(&r->protocol.prompts[i], vq_probe_prompts[i]) == VQ_STATUS_OK)
            r->protocol.n_prompts++;
    vq_str_set(&r->protocol.corpus, o->text);
    r->protocol.ctx = o->ctx;
    r->protocol.chunks = o->chunks;
    r->protocol.max_tokens = o->max_tokens;
    r->protocol.seed = 42;
}

/* Load step: the model's geometry and sha256, and the results already in the folder (kept
 * when measured on the same model file with the same protocol, else refused unless --force,
 * which starts over). 1 ok (*r filled, header refreshed), 0 printed. */
static int sweep_load(const struct sweep_opts *o, const char *exe, const char *model,
                      const struct sweep_paths *p, struct vq_results *r) {
    if (!mkdir_p(p->logdir)) {
        fprintf(stderr, "%s: cannot create %s: %s\n", CMD, p->logdir, strerror(errno));
        return 0;
    }
    struct vq_kv_geometry geo;
    char err[512], sha[65];
    if (vq_kv_geometry_from_gguf(model, &geo, err, sizeof err) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 0;
    }
    if (vq_sha256_file(model, sha) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s: cannot read\n", CMD, model);
        return 0;
    }
    /* the files it replaces must be regular files (or missing), never a device or FIFO */
    const char *outs[] = {p->results, p->ref_logits, p->ref_probe, p->tmpres};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (vq_file_check_output(outs[i]) != VQ_STATUS_OK) {
            fprintf(stderr, "%s: %s\n", CMD, vq_file_error());
            return 0;
        }
    vq_status st = vq_results_read(p->results, r, err, sizeof err);
    const char *why = NULL;
    if (st == VQ_STATUS_OK) vq_kv_results_upgrade(r);
    if (st == VQ_STATUS_OK && !o->force && r->model.sha256[0] && strcmp(r->model.sha256, sha))
        why = "was measured on another model file (sha256 differs); use --force or another -o";
    else if (st == VQ_STATUS_OK && !o->force && !protocol_matches(r, o))
        why =
            "was measured with another protocol (text/ctx/chunks/prompts/max-tokens); use "
            "--force or another -o";
    if (why) {
        fprintf(stderr, "%s: %s %s\n", CMD, p->results, why);
        vq_results_clear(r);
        return 0;
    }
    if (st == VQ_STATUS_BAD_FORMAT && !o->force) {
        fprintf(stderr, "%s: %s: %s (use --force to start over)\n", CMD, p->results, err);
        return 0;
    }
    if (st != VQ_STATUS_OK || o->force) {
        vq_results_clear(r);
        vq_results_init(r);
        if (o->force) {
            unlink(p->ref_logits);
            unlink(p->ref_probe);
        }
    }
    sweep_header(o, exe, model, &geo, sha, r);
    return 1;
}

/* Build step: the run order. The fp16 reference runs first when its files are missing (or
 * fp16 is not measured yet); *need_ref says so. Returns the number of entries in order. */
static int sweep_order(const struct sweep_opts *o, const struct sweep_paths *p,
                       const struct vq_results *r, char **order, int *need_ref) {
    int n = 0;
    const int have_ref = access(p->ref_logits, R_OK) == 0 && access(p->ref_probe, R_OK) == 0;
    const int fp16_i = vq_results_find(r, "fp16");
    *need_ref = !have_ref || fp16_i < 0 || r->results[fp16_i].error;
    if (*need_ref) order[n++] = "fp16";
    for (int i = 0; i < o->n_configs; i++)
        if (!(*need_ref && !strcmp(o->configs[i], "fp16"))) order[n++] = o->configs[i];
    return n;
}

/* A row for config name that was not measured: its resolved config and the error text. */
static void sweep_error_row(const char *name, const char *why, struct vq_result *e) {
    struct vq_kv_spec ks;
    struct vq_codec_params kp, vp;
    vq_kv_spec_parse(name, &ks, NULL, 0);
    vq_kv_spec_codecs(&ks, &kp, &vp, NULL, 0);
    vq_kv_fill_result_config(name, &kp, &vp, &e->config);
    vq_str_set(&e->error, why);
}

/* Puts row e of config name (ownership moves) in place of the row of that name, or appends
 * it. Returns NO_MEMORY when appending fails (e freed). */
static vq_status sweep_store(struct vq_results *r, const char *name, struct vq_result *e) {
    const int k = vq_results_find(r, name);
    if (k >= 0) {
        vq_result_clear(&r->results[k]);
        r->results[k] = *e;
        return VQ_STATUS_OK;
    }
    const vq_status st = vq_results_add(r, e);
    if (st != VQ_STATUS_OK) vq_result_clear(e);
    return st;
}

/* Run step of one config: measures it in a sweep-run child and fills *e (initialised here)
 * with the child's row, or with an error row. Returns 1 when measured, 0 when it failed. */
static int sweep_run_config(const struct sweep_opts *o, const char *exe, const char *model,
                            const struct sweep_paths *p, const char *name, int is_ref,
                            const char *progress, struct vq_result *e) {
    char log[4200], err[512];
    struct vq_kv_opts ko;
    vq_kv_opts_init(&ko);
    vq_kv_spec_parse(name, &ko.s, NULL, 0);
    snprintf(log, sizeof log, "%s/%s.log", p->logdir, name);
    struct child_args ca;
    child_args(&ca, exe, o, model, name, &ko, p->tmpres, p->ref_logits, p->ref_probe, is_ref);
    printf("%s: %s: %s ... %s\n", CMD, model, name, progress);
    fflush(stdout);
    unlink(p->tmpres);
    /* the log is truncated in place: never a device or FIFO (which would block the child) */
    char *cerr = vq_file_check_output(log) != VQ_STATUS_OK
                   ? strdup(vq_file_error())
                   : run_child(exe, ca.argv, log, o->timeout);
    vq_result_init(e);
    if (!cerr) {
        struct vq_results one;
        if (vq_results_read(p->tmpres, &one, err, sizeof err) == VQ_STATUS_OK &&
            one.n_results == 1) {
            *e = one.results[0];
            one.results[0].output_preview = one.results[0].error = NULL;
        } else {
            cerr = strdup("child reported success but wrote no readable result");
        }
        vq_results_clear(&one);
    }
    if (!cerr) {
        printf("%s: %s: %s done (ppl %.4f)\n", CMD, model, name, e->ppl);
        return 1;
    }
    sweep_error_row(name, cerr, e);
    printf("%s: %s: %s FAILED: %s (log: %s)\n", CMD, model, name, cerr, log);
    free(cerr);
    return 0;
}

/* Measures the configs of o on one model into dir/results.json, written after every config
 * (a killed sweep keeps what it finished; rows already measured are kept and skipped).
 * *n_failed counts the configs that failed. Returns 1, or 0 when the folder or the file
 * cannot be used (printed). */
static int sweep_model(const struct sweep_opts *o, const char *exe, const char *model,
                       const char *dir, int *n_failed) {
    struct sweep_paths p;
    sweep_paths_init(dir, &p);
    struct vq_results r;
    if (!sweep_load(o, exe, model, &p, &r)) return 0;
    char *order[MAX_CONFIGS + 1];
    int need_ref;
    const int n_order = sweep_order(o, &p, &r, order, &need_ref);
    const double t0 = vq_now_s();
    int n_run = 0; /* configs measured so far (cached ones take no time) */
    for (int i = 0; i < n_order; i++) {
        const char *name = order[i];
        const int is_ref = !strcmp(name, "fp16") && need_ref;
        const int j = vq_results_find(&r, name);
        if (j >= 0 && !r.results[j].error && !is_ref) {
            printf("%s: %s: %s cached [%d/%d]\n", CMD, model, name, i + 1, n_order);
            continue;
        }
        /* i/N, time so far, and the time left at the mean of the configs measured so far */
        char progress[96];
        const double el = vq_now_s() - t0;
        if (n_run > 0)
            snprintf(progress, sizeof progress, "[%d/%d, %.0f s elapsed, ETA %.0f s]", i + 1,
                     n_order, el, el / n_run * (n_order - i));
        else snprintf(progress, sizeof progress, "[%d/%d]", i + 1, n_order);
        fflush(stdout);
        struct vq_result e;
        const int ok = sweep_run_config(o, exe, model, &p, name, is_ref, progress, &e);
        n_run++;
        *n_failed += !ok;
        if (sweep_store(&r, name, &e) != VQ_STATUS_OK) {
            fprintf(stderr, "%s: out of memory\n", CMD);
            vq_results_clear(&r);
            return 0;
        }
        if (vq_results_write(&r, p.results) != VQ_STATUS_OK) {
            fprintf(stderr, "%s: cannot write %s (the previous file is intact)%s%s\n", CMD,
                    p.results, vq_file_error()[0] ? ": " : "", vq_file_error());
            vq_results_clear(&r);
            return 0;
        }
        if (is_ref && !ok) {
            fprintf(stderr, "%s: %s: the fp16 reference failed; skipping the other configs\n", CMD,
                    model);
            for (int q = i + 1; q < n_order; q++) {
                struct vq_result f;
                vq_result_init(&f);
                sweep_error_row(order[q], "not run: the fp16 reference failed", &f);
                sweep_store(&r, order[q], &f);
                (*n_failed)++;
            }
            vq_results_write(&r, p.results);
            break;
        }
    }
    unlink(p.tmpres);
    printf("%s: %s\n", CMD, p.results);
    vq_results_clear(&r);
    return 1;
}

/* The output folder of model m: DIR itself for one model, else DIR/<stem>, where a stem that
 * an earlier model already has gets the suffix -<m+1> (as `report` names their figures). */
static void model_dir(const struct sweep_opts *o, int m, char *dir, size_t cap) {
    if (o->n_models == 1) {
        snprintf(dir, cap, "%s", o->dir);
        return;
    }
    char stem[256], other[256];
    vq_cli_model_stem(o->models[m], stem, sizeof stem);
    int clash = 0;
    for (int k = 0; k < m; k++) {
        vq_cli_model_stem(o->models[k], other, sizeof other);
        clash |= !strcmp(stem, other);
    }
    if (clash) snprintf(dir, cap, "%.3000s/%.200s-%d", o->dir, stem, m + 1);
    else snprintf(dir, cap, "%.3000s/%.200s", o->dir, stem);
}

/* The config spelled with KV options (the table of kvconfig.h, as perplexity takes them) as
 * one more config of the sweep: its name is its label, which must parse back to the same
 * options (results are keyed by it). 1 ok, 0 printed. */
static int sweep_extra_config(const struct vq_kv_opts *ko, struct sweep_opts *o) {
    struct vq_cache_params cp;
    if (!vq_kv_opts_prepare(CMD, ko, &cp, o->extra, sizeof o->extra)) return 0;
    struct vq_kv_spec back;
    if (vq_kv_spec_parse(o->extra, &back, NULL, 0) != VQ_STATUS_OK) {
        fprintf(stderr,
                "%s: the KV options give config '%s', which a config name cannot carry "
                "(explicit per-layer lists); use `perplexity` for it\n",
                CMD, o->extra);
        return 0;
    }
    o->configs[o->n_configs++] = o->extra;
    return 1;
}

/* Parse step: options, then the config list (--configs names, plus the config of any KV
 * options; all presets when neither is given). 1 ok, 0 usage error printed, -1 help. */
static int sweep_parse(int argc, char **argv, struct sweep_opts *o) {
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"configs", required_argument, 0, 'L'},
        {"out", required_argument, 0, 'o'},
        {"force", no_argument, 0, 'F'},
        {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'C'},
        {"max-tokens", required_argument, 0, 'T'},
        {"prompts", required_argument, 0, 'P'},
        {"threads", required_argument, 0, 't'},
        {"timeout", required_argument, 0, 'W'},
        {"repeats", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->text = vq_cli_default_corpus(o->corpus_buf, sizeof o->corpus_buf);
    o->ctx = 512;
    o->chunks = 4;
    o->max_tokens = 200;
    o->prompts = 8;
    o->repeats = 1;
    const char *configs = NULL;
    struct vq_kv_opts ko;
    vq_kv_opts_init(&ko);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:o:f:c:t:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm':
            if (o->n_models == MAX_MODELS) {
                fprintf(stderr, "%s: at most %d models\n", CMD, MAX_MODELS);
                return 0;
            }
            for (int i = 0; i < o->n_models; i++)
                if (!strcmp(o->models[i], optarg)) {
                    fprintf(stderr, "%s: -m %s given twice\n", CMD, optarg);
                    return 0;
                }
            o->models[o->n_models++] = optarg;
            break;
        case 'L': configs = optarg; break;
        case 'o': o->dir = optarg; break;
        case 'F': o->force = 1; break;
        case 'f': o->text = optarg; break;
        case 'c': ok = vq_opt_int(CMD, "--ctx", optarg, 4, 1 << 20, &o->ctx); break;
        case 'C': ok = vq_opt_int(CMD, "--chunks", optarg, 0, 1 << 30, &o->chunks); break;
        case 'T': ok = vq_opt_int(CMD, "--max-tokens", optarg, 1, 1 << 16, &o->max_tokens); break;
        case 'P':
            ok = vq_opt_int(CMD, "--prompts", optarg, 1, vq_probe_n_prompts, &o->prompts);
            break;
        case 't': ok = vq_opt_int(CMD, "--threads", optarg, 0, 1024, &o->threads); break;
        case 'W': ok = vq_opt_int(CMD, "--timeout", optarg, 0, 1 << 30, &o->timeout); break;
        case 'R':
            ok = vq_opt_int(CMD, "--repeats", optarg, 1, VQ_RESULT_MAX_RUNS, &o->repeats);
            break;
        case 'h': usage(stdout); return -1;
        case ':':
        case '?': vq_cli_bad_option(CMD, c, argc, argv, lo); return 0;
        default: ok = vq_kv_opts_handle(&ko, CMD, c, optarg); break;
        }
        if (ok != 1) return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", CMD, argv[optind]);
        return 0;
    }
    o->print_config = ko.print_config;
    if (!configs && !vq_kv_opts_given(&ko)) configs = "all";
    if (configs && !strcmp(configs, "all")) { /* every named config of the library */
        struct vq_kv_preset_info pi;
        for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK && i < MAX_CONFIGS - 1; i++)
            o->configs[o->n_configs++] = (char *)pi.name;
    } else if (configs) {
        if (!(o->list = strdup(configs))) {
            fprintf(stderr, "%s: out of memory\n", CMD);
            return 0;
        }
        for (char *tok = strtok(o->list, ","); tok; tok = strtok(NULL, ",")) {
            struct vq_kv_spec ks;
            struct vq_codec_params kp, vp;
            char err[256];
            if (vq_kv_spec_parse(tok, &ks, err, sizeof err) != VQ_STATUS_OK ||
                vq_kv_spec_codecs(&ks, &kp, &vp, err, sizeof err) != VQ_STATUS_OK) {
                fprintf(stderr, "%s: --configs: %s\n", CMD, err);
                return 0;
            }
            /* results are keyed by the canonical name ("kivi-4:...+kc" is kv4) */
            char *canon = o->canon[o->n_configs];
            if (vq_kv_spec_name(&ks, canon, sizeof o->canon[0]) >= 0 && !strstr(canon, "bpl"))
                tok = canon;
            int dup = 0;
            for (int i = 0; i < o->n_configs; i++) dup |= !strcmp(o->configs[i], tok);
            if (dup) continue;
            if (o->n_configs == MAX_CONFIGS - 1) {
                fprintf(stderr, "%s: at most %d configs\n", CMD, MAX_CONFIGS - 1);
                return 0;
            }
            o->configs[o->n_configs++] = tok;
        }
    }
    if (vq_kv_opts_given(&ko) && !sweep_extra_config(&ko, o)) return 0;
    if (!o->n_configs) {
        fprintf(stderr, "%s: --configs is empty\n", CMD);
        return 0;
    }
    if (o->print_config) return 1;
    if (!o->n_models) /* the default model, as every command takes it */
        o->models[o->n_models++] = vq_cli_model(NULL, o->model_buf, sizeof o->model_buf);
    if (!o->dir) {
        fprintf(stderr, "%s: -o DIR is required\n", CMD);
        return 0;
    }
    if (o->ctx % 2) {
        fprintf(stderr, "%s: --ctx must be even\n", CMD);
        return 0;
    }
    /* a regular file under the text cap: a FIFO or /dev/zero would stall or never end */
    int tfd;
    if (vq_file_open_input(o->text, VQ_FILE_MAX_TEXT, "text", &tfd, NULL) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: -f: %s%s\n", CMD, vq_file_error(),
                strstr(o->text, "corpus_en.txt") ? " (run `make bench-data`)" : "");
        return 0;
    }
    close(tfd);
    return 1;
}

/* Takes the lock of output folder dir: an exclusive flock on dir/.sweep.lock, which holds the
 * pid of its holder, kept until the process exits (O_CLOEXEC: the children do not inherit it).
 * Two sweeps into one folder would otherwise race on results.json and the fp16 reference.
 * Returns the lock's descriptor, or -1 after printing why (held: by which pid). */
static int sweep_lock(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/.sweep.lock", dir);
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: cannot use the lock file %s: %s\n", CMD, path,
                fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char who[32] = {0};
        const ssize_t n = pread(fd, who, sizeof who - 1, 0);
        if (n > 0) who[n] = 0;
        who[strcspn(who, "\r\n")] = 0;
        if (e == EWOULDBLOCK)
            fprintf(stderr,
                    "%s: output folder %s is in use by another sweep (pid %s, lock %s); wait for "
                    "it to finish or use another -o\n",
                    CMD, dir, who[0] ? who : "unknown", path);
        else fprintf(stderr, "%s: cannot lock %s: %s\n", CMD, path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[32];
    const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        /* the lock holds without the pid; only the message of a second sweep loses it */
    }
    return fd;
}

/* --print-kv-config: every config as its children would resolve it, one JSON line each. */
static int sweep_print_configs(const struct sweep_opts *o) {
    for (int i = 0; i < o->n_configs; i++) {
        struct vq_kv_opts ko;
        struct vq_cache_params cp;
        char name[256];
        vq_kv_opts_init(&ko);
        if (vq_kv_spec_parse(o->configs[i], &ko.s, NULL, 0) != VQ_STATUS_OK ||
            !vq_kv_opts_prepare(CMD, &ko, &cp, name, sizeof name))
            return 2;
        if (vq_kv_print_config(name, &cp)) return 1;
    }
    return 0;
}

int vq_cmd_sweep(int argc, char **argv) {
    struct sweep_opts o;
    const int pr = sweep_parse(argc, argv, &o);
    if (pr <= 0) {
        free(o.list);
        return pr < 0 ? 0 : 2;
    }
    if (o.print_config) {
        const int prc = sweep_print_configs(&o);
        free(o.list);
        return prc;
    }
    char exe[4096];
    self_exe(exe, sizeof exe, argv[0]);
    if (!mkdir_p(o.dir)) {
        fprintf(stderr, "%s: cannot create %s: %s\n", CMD, o.dir, strerror(errno));
        free(o.list);
        return 1;
    }
    const int lock_fd = sweep_lock(o.dir);
    if (lock_fd < 0) {
        free(o.list);
        return 1;
    }
    int n_failed = 0, rc = 0;
    for (int m = 0; m < o.n_models; m++) {
        char dir[4096];
        model_dir(&o, m, dir, sizeof dir);
        if (!sweep_model(&o, exe, o.models[m], dir, &n_failed)) rc = 1;
    }
    free(o.list);
    close(lock_fd); /* releases the lock (the pid stays: a stale pid is never believed alone) */
    if (n_failed) {
        fprintf(stderr, "%s: %d config(s) failed (recorded as error entries)\n", CMD, n_failed);
        rc = 1;
    }
    printf("%s: figures and tables: veloxquant report %s -o FIGDIR\n", CMD, o.dir);
    return rc;
}
