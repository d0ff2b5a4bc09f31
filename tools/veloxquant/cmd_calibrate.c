/* cmd_calibrate.c — `veloxquant calibrate`: records post-RoPE keys/values of a GGUF model on
 * calibration text (an fp32 KV cache, read back with vq_cache_read) and writes calibration
 * artifacts (vecinfer codebooks + smoothing factors, spectral PCA bases, RateQuant layer
 * sensitivities) under the artifact cache (docs/FORMAT.md, src/artifact/artifact.c):
 *   <root>/vecinfer/<model sha256>/k<c>x<v>_v<c>x<v>.vqcal
 *   <root>/spectral/<model sha256>/pca.vqcal
 *   <root>/ratequant/<model sha256>/sens.vqcal
 * root = $VQ_CACHE_DIR or ~/.cache/veloxquant. Heads of a layer are pooled. With
 * --ratequant-bits B it also prints the RateQuant per-layer key bit allocation for mean B.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "evalcommon.h"
#include "opts.h"
#include "vq_tools.h"

/* Default calibration text: varied English prose (no data files needed). */
static const char *default_text_ =
    "The history of science is a story of patient measurement. Astronomers recorded the "
    "positions of planets for centuries before anyone could explain why they moved as they did. "
    "When Kepler finally fitted ellipses to those tables, the numbers had been waiting for him.\n"
    "To bake bread, mix flour, water, salt and yeast, knead the dough until it is smooth, and "
    "let it rise in a warm place for about an hour. Shape the loaf, let it rise again, and bake "
    "it in a hot oven until the crust is brown and the bottom sounds hollow when tapped.\n"
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    "
    "return a\n\nprint([fibonacci(i) for i in range(10)])\n"
    "Dear Maria, thank you for your letter. The weather here has been cold but bright, and the "
    "children spend every afternoon in the park. We hope to visit you in the spring, when the "
    "trains are less crowded and the days are longer.\n"
    "Question: A train travels 120 kilometres in two hours. What is its average speed? Answer: "
    "The average speed is distance divided by time, so 120 km / 2 h = 60 km/h.\n"
    "In economics, inflation measures how quickly the general level of prices rises. Central "
    "banks raise interest rates to slow borrowing and spending when inflation is too high, and "
    "lower them to encourage investment when the economy is weak.\n"
    "The small village sat at the edge of a dark forest. Every night the old miller lit a lamp "
    "in his window, and every morning the lamp was out, although nobody had touched it. One "
    "winter a curious girl decided to stay awake and watch.\n";

static void usage(FILE *f) {
    fprintf(f,
            "usage: veloxquant calibrate [-m MODEL] [options]\n\n"
            "Runs calibration text through the model with an fp32 KV cache, records the post-RoPE\n"
            "keys and values of every layer (heads pooled) and writes calibration artifacts.\n\n"
            "  -m, --model PATH        GGUF model (default: the default model, as every command)\n"
            "  --method M              vecinfer | spectral | ratequant | all (default all)\n"
            "  -f, --text FILE         calibration text (default: built-in English prose)\n"
            "  --n-tokens N            tokens of text to use (default 512)\n"
            "  --key-pq C,V            vecinfer key codebook: C bits per codeword, V-dim\n"
            "                          sub-vectors (default 8,4 = `--bits 2` preset)\n"
            "  --value-pq C,V          vecinfer value codebook (default 8,4)\n"
            "  --ratequant-bits B      also print the RateQuant key bits per layer for mean B\n"
            "  -o, --out PATH          write to PATH instead of the cache (one --method only)\n"
            "  --seed S                k-means seed (default 42)\n"
            "  -t, --threads N         threads (default: OpenMP default)\n"
            "  -h, --help              this help\n");
}

static int parse_pq(const char *val, int *c, int *v) {
    char *end = NULL;
    long a = strtol(val, &end, 10);
    if (!end || *end != ',') return 0;
    long b = strtol(end + 1, &end, 10);
    if (!end || *end || a < 1 || a > 12 || b < 1 || b > 16) return 0;
    *c = (int)a;
    *v = (int)b;
    return 1;
}

/* Writes one artifact; 0 on success. When it cannot be written: 1 after an error, or, with
 * optional (an on-demand build whose sets are used from memory), 0 after a warning. */
static int save(const char *cmd, FILE *rep, const vq_calib_data *cd, const char *out,
                const char *method, const uint8_t sha[32], const char *name,
                const uint32_t params[6], int optional) {
    char path[4096];
    vq_status st = VQ_STATUS_OK;
    if (out) snprintf(path, sizeof path, "%s", out);
    else st = vq_calib_artifact_path(method, sha, name, path, sizeof path);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s artifact path: %s (set VQ_CACHE_DIR or HOME)\n", cmd, method,
                vq_status_str(st));
        return optional ? 0 : 1;
    }
    errno = 0;
    st = vq_calib_data_save(cd, path, method, sha, params);
    if (st != VQ_STATUS_OK) {
        const char *why = vq_file_error()[0]          ? vq_file_error()
                        : st == VQ_STATUS_IO && errno ? strerror(errno)
                                                      : vq_status_str(st);
        if (optional) {
            fprintf(stderr,
                    "%s: warning: the %s calibration could not be cached at %s: %s; "
                    "using it for this run only\n",
                    cmd, method, path, why);
            return 0;
        }
        fprintf(stderr, "%s: cannot write the %s artifact %s: %s\n", cmd, method, path, why);
        return 1;
    }
    fprintf(rep, "%s%s%s: wrote %s\n", rep == stderr ? cmd : "", rep == stderr ? ": " : "", method,
            path);
    return 0;
}

void vq_calib_build_init(struct vq_calib_build *b) {
    memset(b, 0, sizeof *b);
    b->n_tokens = 512;
    b->kc = b->vc = 8;
    b->kv = b->vv = 4;
    b->seed = 42;
}

/* What one calibration build holds between its steps. */
struct calib_run {
    vq_model *m; /* b->model or loaded here */
    uint8_t sha[32];
    int d, L, H;                    /* head_dim, layers, kv heads */
    int64_t n;                      /* tokens run */
    vq_ctx *ctx;                    /* fp32-cache context after the run */
    float *K, *V;                   /* (H, n, d) keys / values of one layer */
    vq_calib_data *cvi, *csp, *crq; /* the sets fitted (NULL when not asked) */
};

static void calib_run_free(const struct vq_calib_build *b, struct calib_run *r) {
    vq_calib_data_free(r->cvi);
    vq_calib_data_free(r->csp);
    vq_calib_data_free(r->crq);
    free(r->K);
    free(r->V);
    vq_ctx_free(r->ctx);
    if (!b->model) vq_model_free(r->m);
}

/* The model (its loader says precisely what is wrong with the file), its sha256 and geometry.
 * Returns 0 ok, else the exit code (printed). */
static int calib_open(const char *cmd, const struct vq_calib_build *b, struct calib_run *r) {
    vq_status st = VQ_STATUS_OK;
    char sha_hex[65];
    r->m = b->model ? b->model : vq_model_load(b->model_path, &st);
    if (!r->m) {
        fprintf(stderr, "%s: %s: %s\n", cmd, b->model_path, vq_engine_last_error());
        return 1;
    }
    st = vq_sha256_file(b->model_path, sha_hex);
    if (st != VQ_STATUS_OK || !vq_sha256_from_hex(sha_hex, r->sha)) {
        fprintf(stderr, "%s: %s: %s\n", cmd, b->model_path,
                vq_status_str(st != VQ_STATUS_OK ? st : VQ_STATUS_IO));
        return 1;
    }
    const struct vq_model_info *mi = vq_model_info_get(r->m);
    r->d = mi->head_dim;
    r->L = mi->n_layers;
    r->H = mi->n_kv_heads;
    if (b->do_vi && (r->d % b->kv != 0 || r->d % b->vv != 0)) {
        fprintf(stderr, "%s: sub-vector length must divide head_dim %d\n", cmd, r->d);
        return 2;
    }
    return 0;
}

/* The first n_tokens ids of the text (b->text_path, else the built-in text) in *ids
 * (malloc'd), their count in r->n. Returns 0 ok, else the exit code (printed). */
static int calib_tokens(const char *cmd, const struct vq_calib_build *b, struct calib_run *r,
                        int32_t **ids) {
    size_t tlen = 0;
    char *text = NULL;
    if (b->text_path) {
        /* regular files only (a FIFO, a folder or /dev/zero is refused), VQ_FILE_MAX_TEXT */
        if (vq_file_read_all(b->text_path, VQ_FILE_MAX_TEXT, "text", &text, &tlen) != 0) {
            fprintf(stderr, "%s: --text: %s\n", cmd, vq_file_error());
            return 1;
        }
    } else {
        tlen = strlen(default_text_);
        text = malloc(tlen);
        if (text) memcpy(text, default_text_, tlen);
    }
    vq_status st;
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(r->m), &st);
    if (!tok) {
        fprintf(stderr, "%s: %s: model has no usable %s\n", cmd, b->model_path,
                vq_engine_last_error());
        free(text);
        return 1;
    }
    if (!vq_cli_vocab_check(cmd, b->model_path, tok, vq_model_info_get(r->m)->n_vocab)) {
        vq_tok_free(tok);
        free(text);
        return 1;
    }
    *ids = malloc(sizeof(int32_t) * (size_t)b->n_tokens);
    int64_t n = (tok && text && *ids)
                  ? vq_tok_encode(tok, text, tlen, true, false, *ids, b->n_tokens)
                  : 0;
    if (n < 0) n = b->n_tokens; /* more text than needed: the first n_tokens ids were written */
    vq_tok_free(tok);
    free(text);
    if (n < 16) {
        fprintf(stderr, "%s: need at least 16 tokens of text (got %lld from %s)\n", cmd,
                (long long)n, b->text_path ? b->text_path : "the built-in text");
        return 1;
    }
    r->n = n;
    return 0;
}

/* Runs the tokens with an fp32 cache (K/V are read back from it) and allocates the buffers
 * and the sets to fit. Returns 0 ok, else the exit code (printed). */
static int calib_eval(const char *cmd, const struct vq_calib_build *b, struct calib_run *r,
                      const int32_t *ids) {
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = r->n;
    cp.n_threads = b->threads;
    cp.cache.key.method = cp.cache.value.method = VQ_METHOD_FP32;
    vq_status st;
    r->ctx = vq_ctx_create(r->m, &cp, &st);
    if (!r->ctx) {
        fprintf(stderr, "%s: context: %s\n", cmd, vq_status_str(st));
        return 1;
    }
    st = vq_ctx_eval(r->ctx, ids, r->n, NULL);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: eval: %s\n", cmd, vq_status_str(st));
        return 1;
    }
    fprintf(stderr, "%s: %lld tokens through %d layers (%d kv heads, head_dim %d)\n", cmd,
            (long long)r->n, r->L, r->H, r->d);
    const size_t nf = (size_t)(r->n * r->H * r->d);
    r->K = malloc(sizeof(float) * nf);
    r->V = malloc(sizeof(float) * nf);
    r->cvi = b->do_vi ? vq_calib_data_create(r->L, r->d, &st) : NULL;
    r->csp = b->do_sp ? vq_calib_data_create(r->L, r->d, &st) : NULL;
    r->crq = b->do_rq ? vq_calib_data_create(r->L, r->d, &st) : NULL;
    if (!r->K || !r->V || (b->do_vi && !r->cvi) || (b->do_sp && !r->csp) || (b->do_rq && !r->crq)) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        return 1;
    }
    return 0;
}

/* Fits every asked set layer by layer from the cache's keys and values. 0 ok, 1 printed. */
static int calib_fit(const char *cmd, const struct vq_calib_build *b, struct calib_run *r) {
    const vq_cache *cache = vq_ctx_cache(r->ctx);
    const int64_t n = r->n, d = r->d, nn = n * r->H;
    vq_status st = VQ_STATUS_OK;
    int rc = 0;
    for (int l = 0; l < r->L && rc == 0; l++) {
        const uint64_t seed = b->seed + (uint64_t)l;
        for (int h = 0; h < r->H && st == VQ_STATUS_OK; h++)
            st = vq_cache_read(cache, l, h, r->K + (size_t)(h * n * d), r->V + (size_t)(h * n * d));
        if (st == VQ_STATUS_OK && b->do_vi) {
            st = vq_calib_fit_vecinfer(r->cvi, l, VQ_ROLE_KEY, r->K, nn, b->kc, b->kv, seed);
            if (st == VQ_STATUS_OK)
                st = vq_calib_fit_vecinfer(r->cvi, l, VQ_ROLE_VALUE, r->V, nn, b->vc, b->vv, seed);
        }
        if (st == VQ_STATUS_OK && b->do_sp) {
            st = vq_calib_fit_spectral(r->csp, l, VQ_ROLE_KEY, r->K, nn);
            if (st == VQ_STATUS_OK) st = vq_calib_fit_spectral(r->csp, l, VQ_ROLE_VALUE, r->V, nn);
        }
        if (st == VQ_STATUS_OK && b->do_rq) st = vq_calib_fit_sensitivity(r->crq, l, r->K, nn);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: layer %d: %s\n", cmd, l, vq_status_str(st));
            rc = 1;
        }
        if (isatty(2)) fprintf(stderr, "\r%s: calibration layer %d/%d", cmd, l + 1, r->L);
    }
    if (isatty(2)) fprintf(stderr, "\n");
    return rc;
}

/* Prints the RateQuant key-bit allocation of mean rq_bits over widths 1..4. 0 ok, 1 printed. */
static int calib_print_rq(const char *cmd, FILE *rep, const vq_calib_data *crq, int L,
                          double rq_bits) {
    const int allowed[4] = {1, 2, 3, 4};
    int *bits = malloc(sizeof(int) * (size_t)L);
    const vq_status st = bits ? vq_ratequant_allocate(vq_calib_sensitivities(crq), L, rq_bits,
                                                      allowed, 4, 0.0, bits)
                              : VQ_STATUS_NO_MEMORY;
    if (st == VQ_STATUS_OK) {
        fprintf(rep, "ratequant: key bits per layer (mean %.2f):", rq_bits);
        for (int l = 0; l < L; l++) fprintf(rep, " %d", bits[l]);
        fprintf(rep, "\n");
    } else {
        fprintf(stderr, "%s: ratequant allocation: %s\n", cmd, vq_status_str(st));
    }
    free(bits);
    return st == VQ_STATUS_OK ? 0 : 1;
}

/* Writes the fitted sets as artifacts (or says why they could not be cached) and hands them
 * over where b asks. Returns 0 ok, 1 printed. */
static int calib_save_all(const char *cmd, const struct vq_calib_build *b, struct calib_run *r) {
    FILE *rep = b->report ? b->report : stdout;
    const uint32_t n = (uint32_t)r->n;
    int rc = 0;
    if (b->do_vi) {
        char name[64];
        snprintf(name, sizeof name, "k%dx%d_v%dx%d", b->kc, b->kv, b->vc, b->vv);
        const uint32_t params[6] = {
            (uint32_t)b->kc,  (uint32_t)b->kv, (uint32_t)b->vc, (uint32_t)b->vv, n,
            (uint32_t)b->seed};
        rc |= save(cmd, rep, r->cvi, b->out, "vecinfer", r->sha, name, params, b->cache_optional);
    }
    const uint32_t params_n[6] = {n, 0, 0, 0, 0, 0};
    if (rc == 0 && b->do_sp) {
        rc |= save(cmd, rep, r->csp, b->out, "spectral", r->sha, "pca", params_n,
                   b->cache_optional);
        fprintf(rep, "spectral: signal dims per layer (keys):");
        for (int l = 0; l < r->L; l++)
            fprintf(rep, " %d", vq_calib_signal_dims(r->csp, l, VQ_ROLE_KEY));
        fprintf(rep, "\n");
    }
    if (rc == 0 && b->do_rq) {
        rc |= save(cmd, rep, r->crq, b->out, "ratequant", r->sha, "sens", params_n,
                   b->cache_optional);
        if (rc == 0 && b->rq_bits > 0) rc = calib_print_rq(cmd, rep, r->crq, r->L, b->rq_bits);
    }
    if (rc) return rc;
    vq_calib_data **keep[3] = {b->keep_vi, b->keep_sp, b->keep_rq};
    vq_calib_data **have[3] = {&r->cvi, &r->csp, &r->crq};
    for (int i = 0; i < 3; i++)
        if (keep[i]) { /* hand the fitted set over */
            *keep[i] = *have[i];
            *have[i] = NULL;
        }
    return 0;
}

int vq_cli_calib_build(const char *cmd, const struct vq_calib_build *b) {
    struct calib_run r;
    memset(&r, 0, sizeof r);
    int32_t *ids = NULL;
    int rc = calib_open(cmd, b, &r);
    if (!rc) rc = calib_tokens(cmd, b, &r, &ids);
    if (!rc) rc = calib_eval(cmd, b, &r, ids);
    free(ids);
    if (!rc) rc = calib_fit(cmd, b, &r);
    if (!rc) rc = calib_save_all(cmd, b, &r);
    calib_run_free(b, &r);
    return rc;
}

/* The calibration sets --method names; all = every one. */
static const char *const CALIB_METHODS[4] = {"vecinfer", "spectral", "ratequant", "all"};

/* Parse step: 1 ok, 0 usage error (printed), -1 --help printed. */
static int calib_parse(int argc, char **argv, struct vq_calib_build *b, const char **method) {
    static const char *C = "calibrate";
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"method", required_argument, 0, 'M'},
        {"text", required_argument, 0, 'f'},
        {"file", required_argument, 0, 'f'},
        {"n-tokens", required_argument, 0, 'n'},
        {"key-pq", required_argument, 0, 'K'},
        {"value-pq", required_argument, 0, 'V'},
        {"ratequant-bits", required_argument, 0, 'R'},
        {"out", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 's'},
        {"threads", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:o:t:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm': b->model_path = optarg; break;
        case 'M': *method = optarg; break;
        case 'f': b->text_path = optarg; break;
        case 'o': b->out = optarg; break;
        case 'n': ok = vq_opt_int(C, "--n-tokens", optarg, 16, 1 << 20, &b->n_tokens); break;
        case 't': ok = vq_opt_int(C, "--threads", optarg, 0, 1024, &b->threads); break;
        case 's': ok = vq_opt_u64(C, "--seed", optarg, &b->seed); break;
        case 'R': ok = vq_opt_double(C, "--ratequant-bits", optarg, 1, 4, &b->rq_bits); break;
        case 'K':
        case 'V':
            if (!parse_pq(optarg, c == 'K' ? &b->kc : &b->vc, c == 'K' ? &b->kv : &b->vv)) {
                fprintf(stderr, "%s: %s: '%s': want C,V with C 1..12, V 1..16\n", C,
                        c == 'K' ? "--key-pq" : "--value-pq", optarg);
                ok = 0;
            }
            break;
        case 'h': usage(stdout); return -1;
        case ':':
        case '?': vq_cli_bad_option(C, c, argc, argv, lo); return 0;
        }
        if (!ok) return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (the model is -m MODEL)\n", C, argv[optind]);
        return 0;
    }
    int known = 0;
    for (int i = 0; i < 4; i++) known |= !strcmp(*method, CALIB_METHODS[i]);
    if (!known) {
        const int near = vq_nearest_name(*method, CALIB_METHODS, 4);
        if (near >= 0)
            fprintf(stderr, "%s: --method: unknown calibration '%s': did you mean %s?\n", C,
                    *method, CALIB_METHODS[near]);
        else
            fprintf(stderr,
                    "%s: --method: unknown calibration '%s' (vecinfer, spectral, ratequant, "
                    "all)\n",
                    C, *method);
        return 0;
    }
    return 1;
}

int vq_cmd_calibrate(int argc, char **argv) {
    struct vq_calib_build b;
    vq_calib_build_init(&b);
    const char *method = "all";
    const int pr = calib_parse(argc, argv, &b, &method);
    if (pr < 0) return 0;
    if (!pr) return 2;
    b.do_vi = !strcmp(method, "vecinfer") || !strcmp(method, "all");
    b.do_sp = !strcmp(method, "spectral") || !strcmp(method, "all");
    b.do_rq = !strcmp(method, "ratequant") || !strcmp(method, "all");
    static char model_buf[4096];
    b.model_path = vq_cli_model(b.model_path, model_buf, sizeof model_buf);
    if (b.out && !strcmp(method, "all")) {
        fprintf(stderr, "calibrate: --out needs one --method\n");
        return 2;
    }
    /* the files before the model is loaded: --out never replaces a device, FIFO, socket or
     * folder (a missing folder is created when the artifact is written); --text is a
     * regular file */
    if (b.out && vq_file_check_output(b.out) != VQ_STATUS_OK && errno != ENOENT) {
        fprintf(stderr, "calibrate: --out: %s\n", vq_file_error());
        return 1;
    }
    int tfd;
    if (b.text_path &&
        vq_file_open_input(b.text_path, VQ_FILE_MAX_TEXT, "text", &tfd, NULL) != VQ_STATUS_OK) {
        fprintf(stderr, "calibrate: --text: %s\n", vq_file_error());
        return 1;
    }
    if (b.text_path) close(tfd);
    b.report = stdout;
    return vq_cli_calib_build("calibrate", &b);
}
