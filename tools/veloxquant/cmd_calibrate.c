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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "evalcommon.h"
#include "opts.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "core/sha256.h"

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
            "usage: veloxquant calibrate -m MODEL [options]\n\n"
            "Runs calibration text through the model with an fp32 KV cache, records the post-RoPE\n"
            "keys and values of every layer (heads pooled) and writes calibration artifacts.\n\n"
            "  -m, --model PATH        GGUF model (required)\n"
            "  --method M              vecinfer | spectral | ratequant | all (default all)\n"
            "  --text FILE             calibration text (default: built-in English prose)\n"
            "  --n_tokens N            tokens of text to use (default 512)\n"
            "  --key-pq C,V            vecinfer key codebook: C bits per codeword, V-dim\n"
            "                          sub-vectors (default 8,4 = `--bits 2` preset)\n"
            "  --value-pq C,V          vecinfer value codebook (default 8,4)\n"
            "  --ratequant-bits B      also print the RateQuant key bits per layer for mean B\n"
            "  --out PATH              write to PATH instead of the cache (one --method only)\n"
            "  --seed S                k-means seed (default 42)\n"
            "  --threads N             threads (default: OpenMP default)\n");
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

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= ((size_t)1 << 28)) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    *len = n;
    return buf;
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
        const char *why = st == VQ_STATUS_IO && errno ? strerror(errno) : vq_status_str(st);
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

int vq_cli_calib_build(const char *cmd, const struct vq_calib_build *b) {
    const char *model = b->model_path, *text_path = b->text_path, *out = b->out;
    const int n_tokens = b->n_tokens, threads = b->threads;
    const int do_vi = b->do_vi, do_sp = b->do_sp, do_rq = b->do_rq;
    const int kc = b->kc, kv = b->kv, vc = b->vc, vv = b->vv;
    const double rq_bits = b->rq_bits;
    const uint64_t seed = b->seed;
    FILE *rep = b->report ? b->report : stdout;
    uint8_t sha[32];
    char sha_hex[65];
    vq_status st = VQ_STATUS_OK;
    /* the model first: its loader says precisely what is wrong with the file */
    vq_model *m = b->model ? b->model : vq_model_load(model, &st);
    if (!m) {
        fprintf(stderr, "%s: %s: %s\n", cmd, model, vq_engine_last_error());
        return 1;
    }
#define FREE_MODEL() \
    do { \
        if (!b->model) vq_model_free(m); \
    } while (0)
    st = vq_sha256_file(model, sha_hex);
    if (st != VQ_STATUS_OK || !vq_sha256_from_hex(sha_hex, sha)) {
        fprintf(stderr, "%s: %s: %s\n", cmd, model,
                vq_status_str(st != VQ_STATUS_OK ? st : VQ_STATUS_IO));
        FREE_MODEL();
        return 1;
    }
    const struct vq_model_info *mi = vq_model_info_get(m);
    const int d = mi->head_dim, L = mi->n_layers, H = mi->n_kv_heads;
    if (do_vi && (d % kv != 0 || d % vv != 0)) {
        fprintf(stderr, "%s: sub-vector length must divide head_dim %d\n", cmd, d);
        FREE_MODEL();
        return 2;
    }
    /* text -> tokens */
    size_t tlen = 0;
    char *text = NULL;
    if (text_path) {
        text = read_file(text_path, &tlen);
        if (!text) {
            fprintf(stderr, "%s: cannot read %s\n", cmd, text_path);
            FREE_MODEL();
            return 1;
        }
    } else {
        tlen = strlen(default_text_);
        text = malloc(tlen);
        if (text) memcpy(text, default_text_, tlen);
    }
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(m), &st);
    if (tok && !vq_cli_vocab_check(cmd, model, tok, mi->n_vocab)) {
        vq_tok_free(tok);
        free(text);
        FREE_MODEL();
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_tokens);
    int64_t n = (tok && text && ids) ? vq_tok_encode(tok, text, tlen, true, false, ids, n_tokens)
                                     : 0;
    if (n < 0) n = n_tokens; /* more text than needed: the first n_tokens ids were written */
    vq_tok_free(tok);
    free(text);
    if (n < 16) {
        fprintf(stderr, "%s: need at least 16 tokens of text (got %lld)\n", cmd, (long long)n);
        free(ids);
        FREE_MODEL();
        return 1;
    }
    /* run with an fp32 cache, then read back K/V */
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n;
    cp.n_threads = threads;
    cp.cache.key.method = cp.cache.value.method = VQ_METHOD_FP32;
    vq_ctx *ctx = vq_ctx_create(m, &cp, &st);
    if (!ctx) {
        fprintf(stderr, "%s: context: %s\n", cmd, vq_status_str(st));
        free(ids);
        FREE_MODEL();
        return 1;
    }
    st = vq_ctx_eval(ctx, ids, n, NULL);
    free(ids);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: eval: %s\n", cmd, vq_status_str(st));
        vq_ctx_free(ctx);
        FREE_MODEL();
        return 1;
    }
    fprintf(stderr, "%s: %lld tokens through %d layers (%d kv heads, head_dim %d)\n", cmd,
            (long long)n, L, H, d);
    const vq_cache *cache = vq_ctx_cache(ctx);
    float *K = malloc(sizeof(float) * (size_t)(n * H * d)),
          *V = malloc(sizeof(float) * (size_t)(n * H * d));
    vq_calib_data *cvi = do_vi ? vq_calib_data_create(L, d, &st) : NULL;
    vq_calib_data *csp = do_sp ? vq_calib_data_create(L, d, &st) : NULL;
    vq_calib_data *crq = do_rq ? vq_calib_data_create(L, d, &st) : NULL;
    int rc = 0;
    if (!K || !V || (do_vi && !cvi) || (do_sp && !csp) || (do_rq && !crq)) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = 1;
    }
    for (int l = 0; l < L && rc == 0; l++) {
        for (int h = 0; h < H && st == VQ_STATUS_OK; h++)
            st = vq_cache_read(cache, l, h, K + (size_t)h * n * d, V + (size_t)h * n * d);
        const int64_t nn = n * H;
        if (st == VQ_STATUS_OK && do_vi) {
            st = vq_calib_fit_vecinfer(cvi, l, VQ_ROLE_KEY, K, nn, kc, kv, seed + (uint64_t)l);
            if (st == VQ_STATUS_OK)
                st = vq_calib_fit_vecinfer(cvi, l, VQ_ROLE_VALUE, V, nn, vc, vv,
                                           seed + (uint64_t)l);
        }
        if (st == VQ_STATUS_OK && do_sp) {
            st = vq_calib_fit_spectral(csp, l, VQ_ROLE_KEY, K, nn);
            if (st == VQ_STATUS_OK) st = vq_calib_fit_spectral(csp, l, VQ_ROLE_VALUE, V, nn);
        }
        if (st == VQ_STATUS_OK && do_rq) st = vq_calib_fit_sensitivity(crq, l, K, nn);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: layer %d: %s\n", cmd, l, vq_status_str(st));
            rc = 1;
        }
        if (isatty(2)) fprintf(stderr, "\r%s: calibration layer %d/%d", cmd, l + 1, L);
    }
    if (isatty(2)) fprintf(stderr, "\n");
    if (rc == 0 && do_vi) {
        char name[64];
        snprintf(name, sizeof name, "k%dx%d_v%dx%d", kc, kv, vc, vv);
        const uint32_t params[6] = {(uint32_t)kc, (uint32_t)kv, (uint32_t)vc,
                                    (uint32_t)vv, (uint32_t)n,  (uint32_t)seed};
        rc |= save(cmd, rep, cvi, out, "vecinfer", sha, name, params, b->cache_optional);
    }
    if (rc == 0 && do_sp) {
        const uint32_t params[6] = {(uint32_t)n, 0, 0, 0, 0, 0};
        rc |= save(cmd, rep, csp, out, "spectral", sha, "pca", params, b->cache_optional);
        fprintf(rep, "spectral: signal dims per layer (keys):");
        for (int l = 0; l < L; l++) fprintf(rep, " %d", vq_calib_signal_dims(csp, l, VQ_ROLE_KEY));
        fprintf(rep, "\n");
    }
    if (rc == 0 && do_rq) {
        const uint32_t params[6] = {(uint32_t)n, 0, 0, 0, 0, 0};
        rc |= save(cmd, rep, crq, out, "ratequant", sha, "sens", params, b->cache_optional);
        if (rq_bits > 0) {
            const int allowed[4] = {1, 2, 3, 4};
            int *bits = malloc(sizeof(int) * (size_t)L);
            st = bits ? vq_ratequant_allocate(vq_calib_sensitivities(crq), L, rq_bits, allowed, 4,
                                              0.0, bits)
                      : VQ_STATUS_NO_MEMORY;
            if (st == VQ_STATUS_OK) {
                fprintf(rep, "ratequant: key bits per layer (mean %.2f):", rq_bits);
                for (int l = 0; l < L; l++) fprintf(rep, " %d", bits[l]);
                fprintf(rep, "\n");
            } else {
                fprintf(stderr, "%s: ratequant allocation: %s\n", cmd, vq_status_str(st));
                rc = 1;
            }
            free(bits);
        }
    }
    if (rc == 0) { /* hand the fitted sets over where asked */
        if (b->keep_vi) {
            *b->keep_vi = cvi;
            cvi = NULL;
        }
        if (b->keep_sp) {
            *b->keep_sp = csp;
            csp = NULL;
        }
        if (b->keep_rq) {
            *b->keep_rq = crq;
            crq = NULL;
        }
    }
    vq_calib_data_free(cvi);
    vq_calib_data_free(csp);
    vq_calib_data_free(crq);
    free(K);
    free(V);
    vq_ctx_free(ctx);
    FREE_MODEL();
    return rc;
#undef FREE_MODEL
}

int vq_cmd_calibrate(int argc, char **argv) {
    struct vq_calib_build b;
    vq_calib_build_init(&b);
    const char *method = "all";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
#define NEED() \
    do { \
        if (!val) { \
            fprintf(stderr, "calibrate: %s needs a value\n", a); \
            return 2; \
        } \
        i++; \
    } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED();
            b.model_path = val;
        } else if (!strcmp(a, "--method")) {
            NEED();
            method = val;
        } else if (!strcmp(a, "--text")) {
            NEED();
            b.text_path = val;
        } else if (!strcmp(a, "--out")) {
            NEED();
            b.out = val;
        } else if (!strcmp(a, "--n_tokens") || !strcmp(a, "--n-tokens")) {
            NEED();
            if (!vq_opt_int("calibrate", a, val, 16, 1 << 20, &b.n_tokens)) return 2;
        } else if (!strcmp(a, "--threads")) {
            NEED();
            if (!vq_opt_int("calibrate", a, val, 0, 1024, &b.threads)) return 2;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            if (!vq_opt_u64("calibrate", a, val, &b.seed)) return 2;
        } else if (!strcmp(a, "--ratequant-bits")) {
            NEED();
            if (!vq_opt_double("calibrate", a, val, 1, 4, &b.rq_bits)) return 2;
        } else if (!strcmp(a, "--key-pq")) {
            NEED();
            if (!parse_pq(val, &b.kc, &b.kv)) {
                fprintf(stderr, "calibrate: --key-pq: want C,V with C 1..12, V 1..16\n");
                return 2;
            }
        } else if (!strcmp(a, "--value-pq")) {
            NEED();
            if (!parse_pq(val, &b.vc, &b.vv)) {
                fprintf(stderr, "calibrate: --value-pq: want C,V with C 1..12, V 1..16\n");
                return 2;
            }
        } else {
            fprintf(stderr, "calibrate: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef NEED
    }
    b.do_vi = !strcmp(method, "vecinfer") || !strcmp(method, "all");
    b.do_sp = !strcmp(method, "spectral") || !strcmp(method, "all");
    b.do_rq = !strcmp(method, "ratequant") || !strcmp(method, "all");
    if (!b.do_vi && !b.do_sp && !b.do_rq) {
        fprintf(stderr, "calibrate: --method: unknown '%s' (vecinfer, spectral, ratequant, all)\n",
                method);
        return 2;
    }
    if (!b.model_path) {
        fprintf(stderr, "calibrate: -m MODEL is required\n");
        usage(stderr);
        return 2;
    }
    if (b.out && !strcmp(method, "all")) {
        fprintf(stderr, "calibrate: --out needs one --method\n");
        return 2;
    }
    b.report = stdout;
    return vq_cli_calib_build("calibrate", &b);
}
