/* cmd_generate.c — `veloxquant generate`: run a prompt through a GGUF model with a chosen KV
 * method, stream the generated text, then report prefill/decode speed, tokens generated, KV
 * bytes, compression ratios (key_x, fullKV_x) and peak RSS (README.md "Command line",
 * docs/EVALUATION.md). The generation itself is the library's vq_generate_tokens (sampling, stop
 * strings, streaming through its piece callback); this file parses options, builds the prompt
 * and the context, and reports. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "evalcommon.h"
#include "kvconfig.h"
#include "opts.h"
#include "sampling.h"
#include "vq_tools.h"

#define MAX_PROMPT_BYTES (64u << 20)

struct gen_opts {
    const char *model, *prompt, *file, *system;
    bool chat, json, quiet, f32_act, timings;
    long n_predict, n_ctx;
    long prompt_tokens; /* --prompt-tokens: keep the first N prompt tokens (0: all) */
    long depth;         /* --depth: prompt tokens evaluated untimed before the timed prefill */
    int threads, batch;
    struct vq_sampling_opts smp; /* sampling seed, temperature, ..., stop strings (sampling.h;
                                  * the codecs' seed is --kv-seed) */
    enum vq_isa isa;
    const char *observe; /* --observe FILE: per-layer KV quality JSON */
    int observe_queries;
    struct vq_kv_opts kv;         /* every KV option (kvconfig.h), as in perplexity and sweep */
    struct vq_cache_params cache; /* the KV config resolved from kv (codecs, modifiers) */
    char kv_name[256];            /* its canonical name (vq_kv_spec_name) */
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant generate [-m MODEL] (-p PROMPT | -f FILE) [options]\n\n"
        "Runs a prompt through a GGUF model whose KV cache is stored with a veloxquant method,\n"
        "streams the generated text to stdout, then prints prefill and decode tok/s, tokens\n"
        "generated, KV bytes, key_x / fullKV_x (fp16 bytes / stored bytes) and peak RSS to "
        "stderr.\n\n"
        "  -m, --model PATH      GGUF file (default $VQ_MODELS/" VQ_DEFAULT_MODEL_FILE
        ",\n"
        "                        else ~/.cache/veloxquant/models/" VQ_DEFAULT_MODEL_FILE
        ")\n"
        "  -p, --prompt TEXT     prompt text\n"
        "  -f, --file PATH       read the prompt from a file ('-': standard input; at most 64 "
        "MiB)\n"
        "      --chat            wrap the prompt as a user turn in the model's chat template\n"
        "      --system TEXT     system message for --chat (default: the template's own)\n"
        "  -n, --n-predict N     max new tokens (default 128; stops early at end-of-generation)\n"
        "  -c, --ctx N           context size in tokens, prompt + generated (default 2048);\n"
        "                        also --ctx-size (llama.cpp's spelling)\n"
        "  -t, --threads N       threads (default: all cores)\n"
        "  -b, --batch N         prefill tokens per forward pass (default 512)\n"
        "      --prompt-tokens N keep only the first N tokens of the tokenized prompt (error if\n"
        "                        it has fewer)\n"
        "      --depth D         evaluate the first D prompt tokens untimed, then time the\n"
        "                        prefill of the remaining ones at that depth (llama-bench's -d);\n"
        "                        prefill tok/s counts those; needs a prompt of more than D tokens\n"
        "      --timings         also print where the time of a prefill and of a decode token\n"
        "                        goes: attention with the KV cache (append + attend), q/k/v,\n"
        "                        attention output and FFN matmuls, output head, the rest\n"
        "      --f32-activations exact fp32 matmul inputs instead of llama.cpp's int8 ones\n"
        "                        (prefill ~1.3x, decode ~6x slower; no int8 rounding noise)\n"
        /* -s, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --stop */
        VQ_SAMPLING_HELP
        "      --isa ISA         auto|scalar|avx2|avx512 activation, attention and KV codec\n"
        "                        kernels (default auto); the weight kernels follow $VQ_ISA,\n"
        "                        chosen when the model loads\n"
        "      --json            print one JSON object (text and statistics) instead of streaming\n"
        "      --observe FILE    also keep an exact fp32 shadow of K/V and write per-layer "
        "KV quality\n"
        "                        (cosine, q.k error, attention KL, key norms) as JSON to FILE;\n"
        "                        extra memory 8*head_dim bytes per token, layer and kv head, and\n"
        "                        slower decoding (see docs/EVALUATION.md)\n"
        "      --observe-queries N  query positions sampled per forward pass and layer "
        "(default 8)\n"
        "  -q, --quiet           do not stream the text (statistics only)\n\n"
        "Threads are OpenMP threads: they spin briefly between matrix products, then sleep\n"
        "(OpenMP's default). OMP_WAIT_POLICY=passive makes them sleep at once, which makes\n"
        "decode on several threads several times slower (a warning says so).\n");
    fputs("\nKV cache (the same options and defaults as `perplexity` and `sweep`):\n" VQ_KV_HELP,
          f);
}

/* Checks before the run that FILE can be written (vq_opt_output): its folder exists and is
 * writable (the file is written atomically through a temp file there), and FILE is missing or
 * a regular file, never a folder, device, FIFO or socket (which the rename would replace). */
static int observe_path_ok(const char *path) {
    return vq_opt_output("generate", "--observe", path);
}

/* Option codes of generate's own long options (above the KV family's codes). */
enum {
    GEN_SYSTEM = VQ_KVOPT_LAST + 1,
    GEN_CHAT,
    GEN_JSON,
    GEN_F32,
    GEN_ISA,
    GEN_OBSERVE,
    GEN_OBSERVE_Q,
    GEN_PROMPT_TOKENS,
    GEN_DEPTH,
    GEN_TIMINGS,
};

static void gen_opts_init(struct gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_ctx = 2048;
    o->batch = 512;
    vq_sampling_opts_init(&o->smp);
    o->isa = VQ_ISA_AUTO;
    vq_kv_opts_init(&o->kv);
}

/* Parse step (options, then the KV config resolved into o->cache): 1 ok, 0 usage error
 * (printed), -1 --help printed, 2 --print-kv-config given (nothing else checked). */
static int parse(int argc, char **argv, struct gen_opts *o) {
    static const char *cmd = "generate";
    static const struct option lo[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'},
        {"system", required_argument, 0, GEN_SYSTEM},
        {"chat", no_argument, 0, GEN_CHAT},
        {"json", no_argument, 0, GEN_JSON},
        {"f32-activations", no_argument, 0, GEN_F32},
        {"quiet", no_argument, 0, 'q'},
        {"n-predict", required_argument, 0, 'n'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'b'},
        VQ_SAMPLING_LONG_OPTIONS,
        {"isa", required_argument, 0, GEN_ISA},
        {"observe", required_argument, 0, GEN_OBSERVE},
        {"observe-queries", required_argument, 0, GEN_OBSERVE_Q},
        {"prompt-tokens", required_argument, 0, GEN_PROMPT_TOKENS},
        {"depth", required_argument, 0, GEN_DEPTH},
        {"timings", no_argument, 0, GEN_TIMINGS},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:p:f:qn:c:t:b:s:", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'f': o->file = optarg; break;
        case 'q': o->quiet = true; break;
        case 'n': ok = vq_opt_long(cmd, "--n-predict", optarg, 0, 1L << 24, &o->n_predict); break;
        case 'c': ok = vq_opt_long(cmd, "--ctx", optarg, 1, 1L << 24, &o->n_ctx); break;
        case 't': ok = vq_opt_int(cmd, "--threads", optarg, 1, 1024, &o->threads); break;
        case 'b': ok = vq_opt_int(cmd, "--batch", optarg, 1, 65536, &o->batch); break;
        case GEN_SYSTEM: o->system = optarg; break;
        case GEN_CHAT: o->chat = true; break;
        case GEN_JSON: o->json = true; break;
        case GEN_F32: o->f32_act = true; break;
        case GEN_ISA: ok = vq_opt_isa(cmd, "--isa", optarg, &o->isa); break;
        case GEN_OBSERVE: o->observe = optarg; break;
        case GEN_PROMPT_TOKENS:
            ok = vq_opt_long(cmd, "--prompt-tokens", optarg, 1, 1L << 24, &o->prompt_tokens);
            break;
        case GEN_DEPTH: ok = vq_opt_long(cmd, "--depth", optarg, 0, 1L << 24, &o->depth); break;
        case GEN_TIMINGS: o->timings = true; break;
        case GEN_OBSERVE_Q:
            ok = vq_opt_int(cmd, "--observe-queries", optarg, 1, 4096, &o->observe_queries);
            break;
        case ':':
        case '?': vq_cli_bad_option(cmd, c, argc, argv, lo); return 0;
        default:
            ok = vq_sampling_opts_handle(&o->smp, cmd, c, optarg);
            if (ok < 0) ok = vq_kv_opts_handle(&o->kv, cmd, c, optarg);
            break;
        }
        if (ok != 1) return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", cmd, argv[optind]);
        return 0;
    }
    /* the KV config, resolved as every KV command does (kvconfig.h) */
    if (!vq_kv_opts_prepare(cmd, &o->kv, &o->cache, o->kv_name, sizeof o->kv_name)) return 0;
    if (o->kv.print_config) return 2;
    if (!o->prompt && !o->file) {
        fprintf(stderr, "%s: give a prompt with -p TEXT or -f FILE\n", cmd);
        return 0;
    }
    if (o->prompt && o->file) {
        fprintf(stderr, "%s: -p and -f are exclusive\n", cmd);
        return 0;
    }
    if (o->system && !o->chat) {
        fprintf(stderr, "%s: --system needs --chat\n", cmd);
        return 0;
    }
    if (o->json && o->quiet) {
        fprintf(stderr, "%s: --json and --quiet are exclusive\n", cmd);
        return 0;
    }
    if (o->observe && !observe_path_ok(o->observe)) return 0;
    return 1;
}

/* Reads the prompt file ("-": standard input), at most MAX_PROMPT_BYTES. */
static char *read_file(const char *path, size_t *len) {
    if (strcmp(path, "-") != 0) { /* a file: the tools' one input gate (regular files only) */
        char *b = NULL;
        if (vq_file_read_all(path, MAX_PROMPT_BYTES, "prompt file", &b, len) != VQ_STATUS_OK)
            fprintf(stderr, "generate: -f: %s\n", vq_file_error());
        return b;
    }
    /* standard input: read up to the same cap */
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        n += fread(b + n, 1, cap - n, stdin);
        if (n < cap) break;
        if (cap >= MAX_PROMPT_BYTES) {
            fprintf(stderr, "generate: standard input is larger than %u bytes\n", MAX_PROMPT_BYTES);
            free(b);
            return NULL;
        }
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) free(b);
        b = nb;
    }
    if (b && ferror(stdin)) {
        fprintf(stderr, "generate: read error on standard input\n");
        free(b);
        b = NULL;
    }
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static void add_codec_json(cJSON *cfg, const char *pfx, const struct vq_codec_params *c) {
    char k[32];
    snprintf(k, sizeof k, "%s_method", pfx);
    cJSON_AddStringToObject(cfg, k, vq_method_name(c->method) ? vq_method_name(c->method) : "?");
    snprintf(k, sizeof k, "%s_bits", pfx);
    cJSON_AddNumberToObject(cfg, k, vq_codec_params_bits(c));
}

/* Snapshot of the final cache, then the observation JSON (atomic write). 1 on success. */
static int write_observation(vq_observer *obs, const char *path, const char *model,
                             const struct vq_model_info *I, const struct vq_cache_params *cpp,
                             const struct gen_opts *o, int64_t n_prompt, long n_gen) {
    vq_status st = vq_observer_snapshot(obs);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "generate: --observe: %s\n", vq_status_str(st));
        return 0;
    }
    cJSON *js = vq_observer_to_json(obs);
    if (!js) {
        fprintf(stderr, "generate: --observe: out of memory\n");
        return 0;
    }
    cJSON *mo = cJSON_CreateObject(), *cfg = cJSON_CreateObject();
    if (mo) {
        cJSON_AddStringToObject(mo, "file", model);
        cJSON_AddStringToObject(mo, "arch", I->arch);
        cJSON_AddStringToObject(mo, "name", I->name);
        cJSON_AddNumberToObject(mo, "n_layers", I->n_layers);
        cJSON_AddNumberToObject(mo, "n_heads", I->n_heads);
        cJSON_AddNumberToObject(mo, "n_kv_heads", I->n_kv_heads);
        cJSON_AddNumberToObject(mo, "head_dim", I->head_dim);
        cJSON_AddItemToObject(js, "model", mo);
    }
    if (cfg) {
        add_codec_json(cfg, "k", &cpp->key);
        add_codec_json(cfg, "v", &cpp->value);
        cJSON_AddNumberToObject(cfg, "center_keys", cpp->center_keys);
        cJSON_AddNumberToObject(cfg, "center_values", cpp->center_values);
        cJSON_AddNumberToObject(cfg, "n_ctx", (double)o->n_ctx);
        cJSON_AddNumberToObject(cfg, "seed", (double)o->smp.sp.seed);
        cJSON_AddNumberToObject(cfg, "temp", o->smp.sp.temperature);
        cJSON_AddBoolToObject(cfg, "chat", o->chat);
        cJSON_AddItemToObject(js, "config", cfg);
    }
    cJSON_AddNumberToObject(js, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(js, "tokens_generated", (double)n_gen);
    char *txt = cJSON_Print(js);
    cJSON_Delete(js);
    if (!txt) {
        fprintf(stderr, "generate: --observe: out of memory\n");
        return 0;
    }
    st = vq_write_file_atomic(path, txt, strlen(txt));
    free(txt);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "generate: --observe: cannot write '%s': %s\n", path, vq_status_str(st));
        return 0;
    }
    return 1;
}

/* Everything a generate run holds; gen_free releases it (any field may be NULL). */
struct gen_state {
    vq_model *m;
    const struct vq_model_info *I;
    vq_ctx *ctx;
    vq_calib_data *calib_owned[2];
    struct vq_kv_layers layers;
    vq_observer *obs;
    char *file_text, *chat_buf;
    int32_t *ids; /* (n_prompt) prompt token ids */
    int64_t n_prompt;
};

static void gen_free(struct gen_state *g) {
    free(g->ids);
    free(g->chat_buf);
    free(g->file_text);
    vq_observer_free(g->obs); /* before its context */
    vq_ctx_free(g->ctx);
    vq_calib_data_free(g->calib_owned[0]);
    vq_calib_data_free(g->calib_owned[1]);
    vq_kv_layers_free(&g->layers);
    vq_model_free(g->m);
}

/* Build step 1: the prompt text (file or -p, wrapped in the chat template with --chat) and its
 * token ids. Returns 0 or an exit code. */
static int gen_build_prompt(const struct gen_opts *o, struct gen_state *g) {
    size_t plen = 0;
    const char *ptext = o->prompt;
    if (o->file) {
        g->file_text = read_file(o->file, &plen);
        if (!g->file_text) return 1;
        ptext = g->file_text;
    } else {
        plen = strlen(ptext);
    }
    if (o->chat) {
        struct vq_chat_template tmpl;
        if (vq_chat_from_gguf(vq_model_gguf(g->m), &tmpl) != VQ_STATUS_OK)
            fprintf(stderr, "generate: no known chat template in the model; using ChatML\n");
        struct vq_chat_message msgs[2];
        size_t nm = 0;
        if (o->system) {
            msgs[nm].role = "system";
            msgs[nm].content = o->system;
            nm++;
        }
        msgs[nm].role = "user";
        msgs[nm].content = ptext; /* NUL-terminated in both cases */
        nm++;
        int64_t need = vq_model_chat_apply(g->m, msgs, nm, 1, NULL, 0);
        if (need == VQ_TEXT_ERROR) {
            fprintf(stderr, "generate: %s\n", vq_engine_last_error());
            return 1;
        }
        size_t cap = (size_t)(need < 0 ? -need : need + 1);
        g->chat_buf = malloc(cap);
        if (!g->chat_buf) {
            fprintf(stderr, "generate: out of memory\n");
            return 1;
        }
        int64_t w = vq_model_chat_apply(g->m, msgs, nm, 1, g->chat_buf, cap);
        if (w < 0) {
            fprintf(stderr, "generate: chat template failed\n");
            return 1;
        }
        ptext = g->chat_buf;
        plen = (size_t)w;
    }
    int64_t n = vq_tokenize(g->m, ptext, plen, 1, o->chat, NULL, 0);
    if (n == VQ_TEXT_ERROR) {
        fprintf(stderr, "generate: %s\n", vq_engine_last_error());
        return 1;
    }
    if (n < 0) n = -n;
    if (n == 0) {
        fprintf(stderr, "generate: the prompt is empty after tokenization\n");
        return 1;
    }
    const int64_t n_all = n;
    if (o->prompt_tokens) {
        if (n < o->prompt_tokens) {
            fprintf(stderr,
                    "generate: the prompt has %lld tokens, fewer than --prompt-tokens %ld\n",
                    (long long)n, o->prompt_tokens);
            return 2;
        }
        n = o->prompt_tokens;
    }
    if (o->depth >= n) {
        fprintf(stderr,
                "generate: --depth %ld leaves no prompt token to time (the prompt has %lld "
                "tokens)\n",
                o->depth, (long long)n);
        return 2;
    }
    if (n >= o->n_ctx) {
        fprintf(stderr,
                "generate: the prompt has %lld tokens; --ctx %ld leaves no room to generate\n",
                (long long)n, o->n_ctx);
        return 2;
    }
    g->ids = malloc(sizeof(int32_t) * (size_t)(n_all + 1));
    if (!g->ids || vq_tokenize(g->m, ptext, plen, 1, o->chat, g->ids, n_all) != n_all) {
        fprintf(stderr, "generate: tokenization failed\n");
        return 1;
    }
    g->n_prompt = n;
    return 0;
}

/* Build step 2: context parameters from the options (KV config through the shared resolver,
 * per-layer bits, outlier modifiers, calibration), the context and observer. Returns 0 or an
 * exit code. */
static int gen_build_ctx(const struct gen_opts *o, struct gen_state *g) {
    const struct vq_model_info *I = g->I;
    vq_status st;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->threads;
    vq_cli_warn_wait_policy("generate", o->threads);
    cp.n_batch = o->batch;
    cp.f32_activations = o->f32_act;
    cp.timings = o->timings;
    cp.isa = o->isa;
    const int la = vq_kv_opts_build("generate", &o->kv, o->model, g->m, I->n_layers, I->n_kv_heads,
                                    I->head_dim, &cp.cache, &g->layers, g->calib_owned, 0);
    if (la != 1) return la == 0 ? 2 : 1;
    cp.cache.key.isa = o->isa;
    cp.cache.value.isa = o->isa;
    g->ctx = vq_ctx_create(g->m, &cp, &st);
    if (!g->ctx) {
        fprintf(stderr, "generate: %s\n", vq_engine_last_error());
        vq_opt_codec_error("generate", "KV cache", cp.cache.key.method, cp.cache.key.bits,
                           I->head_dim, st);
        return st == VQ_STATUS_NO_MEMORY ? 1 : 2;
    }
    if (o->observe) {
        struct vq_observer_params op = vq_observer_params_default();
        if (o->observe_queries) op.max_queries = o->observe_queries;
        g->obs = vq_observer_create(g->ctx, &op, &st);
        if (!g->obs) {
            fprintf(stderr, "generate: --observe: %s\n", vq_status_str(st));
            return 1;
        }
    }
    return 0;
}

/* Build: model, prompt, context. Returns 0 or an exit code. */
static int gen_build(const struct gen_opts *o, struct gen_state *g) {
    vq_status st;
    g->m = vq_model_load(o->model, &st);
    if (!g->m) {
        fprintf(stderr, "generate: cannot load model '%s': %s (%s)\n", o->model,
                vq_engine_last_error(), vq_status_str(st));
        if (st == VQ_STATUS_IO && !o->model[0])
            fprintf(stderr, "generate: run scripts/fetch_models.sh\n");
        return 1;
    }
    g->I = vq_model_info_get(g->m);
    if (vq_tokenize(g->m, "", 0, 0, 0, NULL, 0) == VQ_TEXT_ERROR) { /* no usable tokenizer */
        fprintf(stderr, "generate: %s\n", vq_engine_last_error());
        return 1;
    }
    const int rc = gen_build_prompt(o, g);
    return rc ? rc : gen_build_ctx(o, g);
}

/* Streams a piece of generated text to stdout (vq_piece_fn). */
static int stream_piece(void *user, const char *piece, size_t len) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Run step: the --depth tokens untimed, then vq_generate_tokens on the whole prompt (the
 * context reuses those tokens and evaluates the rest) until n_predict tokens, end-of-generation,
 * a stop string or a full context. Returns 0 or an exit code. */
static int gen_run(const struct gen_opts *o, struct gen_state *g, struct vq_gen_result *r) {
    memset(r, 0, sizeof *r);
    const bool stream = !o->json && !o->quiet;
    vq_status st = VQ_STATUS_OK;
    if (o->depth > 0) st = vq_ctx_eval(g->ctx, g->ids, o->depth, NULL); /* untimed context */
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "generate: prefill of the --depth tokens failed: %s\n", vq_status_str(st));
        return 1;
    }
    struct vq_gen_params gp = vq_gen_params_default();
    vq_sampling_opts_apply(&o->smp, &gp);
    gp.max_tokens = o->n_predict;
    gp.on_piece = stream ? stream_piece : NULL;
    st = vq_generate_tokens(g->ctx, g->ids, g->n_prompt, &gp, r);
    if (st != VQ_STATUS_OK) {
        if (stream) fputc('\n', stdout);
        fprintf(stderr, "generate: %s (%s)\n", vq_engine_last_error(), vq_status_str(st));
        return 1;
    }
    if (stream) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    return 0;
}

/* Milliseconds per token of phase ph in t (VQ_PHASE_COUNT: all phases), passes of one token
 * and of more together; 0 when t counted no token. */
static double phase_ms(const struct vq_ctx_timings *t, int ph) {
    const int64_t n = t->tokens[0] + t->tokens[1];
    double s = 0;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < VQ_PHASE_COUNT; p++)
            if (p == ph || ph == VQ_PHASE_COUNT) s += t->seconds[k][p];
    return n > 0 ? 1e3 * s / (double)n : 0;
}

/* --timings as text: each phase's ms per token and share, the prefill and the decode. */
static void print_timings(const struct vq_gen_result *r) {
    const struct vq_ctx_timings *ts[2] = {&r->prefill_timings, &r->decode_timings};
    fprintf(stderr, "timings: ms per token (share)    prefill          decode\n");
    for (int p = 0; p <= VQ_PHASE_COUNT; p++) {
        fprintf(stderr, "  %-28s", p < VQ_PHASE_COUNT ? vq_phase_name((enum vq_phase)p) : "total");
        for (int i = 0; i < 2; i++) {
            const double tot = phase_ms(ts[i], VQ_PHASE_COUNT), v = phase_ms(ts[i], p);
            fprintf(stderr, "  %8.3f (%5.1f%%)", v, tot > 0 ? 100 * v / tot : 0);
        }
        fputc('\n', stderr);
    }
}

/* --timings as JSON: {"tokens": n, "ms_per_token": {phase: ms, ..., "total": ms}}. */
static cJSON *timings_json(const struct vq_ctx_timings *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", (double)(t->tokens[0] + t->tokens[1]));
    cJSON *ms = cJSON_AddObjectToObject(o, "ms_per_token");
    for (int p = 0; p < VQ_PHASE_COUNT; p++)
        cJSON_AddNumberToObject(ms, vq_phase_name((enum vq_phase)p), phase_ms(t, p));
    cJSON_AddNumberToObject(ms, "total", phase_ms(t, VQ_PHASE_COUNT));
    return o;
}

/* Report step: statistics as JSON on stdout (--json) or as text on stderr. */
static void gen_report(const struct gen_opts *o, const struct gen_state *g,
                       const struct vq_gen_result *r) {
    const struct vq_model_info *I = g->I;
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(g->ctx), &mem);
    double key_x = mem.key_total_bytes ? (double)mem.fp16_key_bytes / (double)mem.key_total_bytes
                                       : 0;
    double full_x = mem.total_bytes ? (double)mem.fp16_bytes / (double)mem.total_bytes : 0;
    const int64_t n_timed = r->n_evaluated; /* prompt tokens in the timed prefill */
    const bool stopped_eog = r->finish == VQ_FINISH_STOP && r->stop_index < 0;
    double pre_tps = r->prefill_s > 0 ? (double)n_timed / r->prefill_s : 0;
    double dec_tps = r->decode_s > 0 && r->n_decoded > 0 ? (double)r->n_decoded / r->decode_s : 0;
    const struct vq_cache_params *cpp = vq_ctx_cache_params(g->ctx);
    const int threads = vq_ctx_n_threads(g->ctx); /* what ran */
    if (!o->json) {
        char kl[64], vl[64];
        vq_codec_params_label(&cpp->key, kl, sizeof kl);
        vq_codec_params_label(&cpp->value, vl, sizeof vl);
        fprintf(stderr, "\n--- %s | %s: K %s | V %s | ctx %ld | threads %d | %s\n", I->arch,
                o->kv_name, kl, vl, o->n_ctx, threads, vq_isa_name(vq_ctx_isa(g->ctx)));
        if (o->depth)
            fprintf(stderr, "prefill: %lld tokens after a depth of %ld untimed ones, %.1f tok/s\n",
                    (long long)n_timed, o->depth, pre_tps);
        else fprintf(stderr, "prefill: %lld tokens, %.1f tok/s\n", (long long)g->n_prompt, pre_tps);
        fprintf(stderr, "decode:  %lld tokens generated%s, %.1f tok/s\n", (long long)r->n_generated,
                stopped_eog                      ? " (stopped at end-of-generation)"
                : r->finish == VQ_FINISH_STOP    ? " (stopped at a stop string)"
                : r->finish == VQ_FINISH_CONTEXT ? " (context full)"
                                                 : "",
                dec_tps);
        fprintf(stderr,
                "KV:      %zu bytes (keys %zu, fp16 would be %zu) key_x %.2f fullKV_x %.2f\n",
                mem.total_bytes, mem.key_total_bytes, mem.fp16_bytes, key_x, full_x);
        fprintf(stderr, "peak RSS: %.1f MB\n", peak_rss_mb());
        if (o->timings) print_timings(r);
        return;
    }
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "model", o->model);
    cJSON_AddStringToObject(js, "arch", I->arch);
    add_codec_json(js, "k", &cpp->key);
    add_codec_json(js, "v", &cpp->value);
    cJSON_AddNumberToObject(js, "n_ctx", (double)o->n_ctx);
    cJSON_AddNumberToObject(js, "threads", threads);
    cJSON_AddStringToObject(js, "isa", vq_isa_name(vq_ctx_isa(g->ctx)));
    cJSON_AddStringToObject(js, "activations", o->f32_act ? "f32" : "int8");
    cJSON_AddNumberToObject(js, "seed", (double)o->smp.sp.seed);
    cJSON_AddNumberToObject(js, "kv_seed", (double)cpp->key.seed);
    cJSON_AddNumberToObject(js, "prompt_tokens", (double)g->n_prompt);
    cJSON_AddNumberToObject(js, "depth", (double)o->depth);
    cJSON_AddNumberToObject(js, "prefill_tokens", (double)n_timed);
    cJSON_AddNumberToObject(js, "decode_tokens", (double)r->n_decoded);
    cJSON_AddNumberToObject(js, "tokens_generated", (double)r->n_generated);
    cJSON_AddBoolToObject(js, "stopped_at_eog", stopped_eog);
    cJSON_AddStringToObject(js, "finish_reason", vq_finish_reason_name(r->finish));
    cJSON_AddNumberToObject(js, "prefill_tok_s", pre_tps);
    cJSON_AddNumberToObject(js, "decode_tok_s", dec_tps);
    cJSON_AddNumberToObject(js, "weight_bytes", (double)I->weight_bytes);
    cJSON_AddNumberToObject(js, "step_weight_bytes", (double)I->step_weight_bytes);
    cJSON_AddNumberToObject(js, "kv_bytes", (double)mem.total_bytes);
    cJSON_AddNumberToObject(js, "kv_key_bytes", (double)mem.key_total_bytes);
    cJSON_AddNumberToObject(js, "kv_fp16_bytes", (double)mem.fp16_bytes);
    cJSON_AddNumberToObject(js, "key_x", key_x);
    cJSON_AddNumberToObject(js, "fullKV_x", full_x);
    cJSON_AddNumberToObject(js, "peak_rss_mb", peak_rss_mb());
    if (o->timings) {
        cJSON *tj = cJSON_AddObjectToObject(js, "timings");
        cJSON_AddItemToObject(tj, "prefill", timings_json(&r->prefill_timings));
        cJSON_AddItemToObject(tj, "decode", timings_json(&r->decode_timings));
    }
    cJSON_AddStringToObject(js, "text", r->text ? r->text : "");
    char *s = cJSON_PrintUnformatted(js);
    if (s) {
        puts(s);
        free(s);
    }
    cJSON_Delete(js);
}

int vq_cmd_generate(int argc, char **argv) {
    struct gen_opts o;
    gen_opts_init(&o);
    int pr = parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    if (pr == 2) return vq_kv_print_config(o.kv_name, &o.cache);
    char mbuf[4096];
    o.model = vq_cli_model(o.model, mbuf, sizeof mbuf);
    struct gen_state g;
    memset(&g, 0, sizeof g);
    struct vq_gen_result r;
    memset(&r, 0, sizeof r);
    int rc = gen_build(&o, &g);
    if (!rc) rc = gen_run(&o, &g, &r);
    if (!rc) {
        gen_report(&o, &g, &r);
        if (g.obs && !write_observation(g.obs, o.observe, o.model, g.I, vq_ctx_cache_params(g.ctx),
                                        &o, g.n_prompt, (long)r.n_generated))
            rc = 1;
    }
    vq_gen_result_free(&r);
    gen_free(&g);
    return rc;
}
