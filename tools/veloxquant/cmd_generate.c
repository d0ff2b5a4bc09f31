/* cmd_generate.c — `veloxquant generate`: run a prompt through a GGUF model with a chosen KV
 * method, stream the generated text, then report prefill/decode speed, tokens generated, KV
 * bytes, compression ratios (key_x, fullKV_x) and peak RSS (DESIGN.md §2.2, §5). */
#include <errno.h>
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
#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "eval/observer.h"
#include "eval/results.h"

#define DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
#define MAX_PROMPT_BYTES (64u << 20)

struct gen_opts {
    const char *model, *prompt, *file, *system;
    bool chat, json, quiet, f32_act;
    long n_predict, n_ctx;
    int threads, batch;
    uint64_t seed;
    double temp, top_p;
    int top_k;
    enum vq_method k_method, v_method;
    int k_bits, v_bits;
    bool k_bits_set, v_bits_set;
    enum vq_isa isa;
    const char *observe;      /* --observe FILE: per-layer KV quality JSON */
    int observe_queries;
    struct vq_kv_opts kv;   /* per-layer options only (kvconfig.h) */
};

static void usage(FILE *f) {
    fprintf(f,
        "usage: veloxquant generate [-m MODEL] (-p PROMPT | -f FILE) [options]\n\n"
        "Runs a prompt through a GGUF model whose KV cache is stored with a veloxquant method,\n"
        "streams the generated text to stdout, then prints prefill and decode tok/s, tokens\n"
        "generated, KV bytes, key_x / fullKV_x (fp16 bytes / stored bytes) and peak RSS to stderr.\n\n"
        "  -m, --model PATH      GGUF file (default $VQ_MODELS/" DEFAULT_MODEL_FILE ",\n"
        "                        else ~/.cache/veloxquant/models/" DEFAULT_MODEL_FILE ")\n"
        "  -p, --prompt TEXT     prompt text\n"
        "  -f, --file PATH       read the prompt from a file\n"
        "      --chat            wrap the prompt as a user turn in the model's chat template\n"
        "      --system TEXT     system message for --chat (default: the template's own)\n"
        "  -n, --n-predict N     max new tokens (default 128; stops early at end-of-generation)\n"
        "  -c, --ctx N           context size in tokens, prompt + generated (default 2048)\n"
        "  -t, --threads N       threads (default: all cores)\n"
        "  -b, --batch N         prefill tokens per forward pass (default 512)\n"
        "      --f32-activations exact fp32 matmul inputs instead of llama.cpp's int8 ones\n"
        "                        (prefill ~1.3x, decode ~6x slower; no int8 rounding noise)\n"
        "      --seed S          sampling seed (default 42)\n"
        "      --temp T          temperature; 0 = greedy (default 0)\n"
        "      --top-k K         top-k for temperature sampling (default 40; 0 = off)\n"
        "      --top-p P         nucleus mass in (0, 1] (default 0.95)\n"
        "      --method M        KV method for keys and values (default fp16; see `veloxquant methods`)\n"
        "      --bits B          bits for keys and values (default: the method's default)\n"
        "      --k-method M, --v-method M, --k-bits B, --v-bits B\n"
        "                        set keys and values separately (override --method/--bits)\n"
        "      --k-bits-per-layer L, --v-bits-per-layer L, --fp16-layers first,last,\n"
        "      --keep-fp16-first N, --keep-fp16-last N, --ratequant B, --ratequant-values V,\n"
        "      --calib-tokens N  mixed precision across layers (as for `perplexity`)\n"
        "      --outlier-tokens K, --outlier-channels N, --n-calib-tokens T\n"
        "                        outlier modifiers (as for `perplexity`)\n"
        "      --isa ISA         auto|scalar|avx2|avx512 weight and codec kernels (default auto)\n"
        "      --json            print one JSON object (text and statistics) instead of streaming\n"
        "      --observe FILE    also keep an exact fp32 shadow of K/V and write per-layer KV quality\n"
        "                        (cosine, q.k error, attention KL, key norms) as JSON to FILE;\n"
        "                        extra memory 8*head_dim bytes per token, layer and kv head, and\n"
        "                        slower decoding (see docs/EVALUATION.md)\n"
        "      --observe-queries N  query positions sampled per forward pass and layer (default 8)\n"
        "  -q, --quiet           do not stream the text (statistics only)\n\n"
        "Threads are OpenMP threads that spin between matrix products; on cores shared with other\n"
        "busy processes, OMP_WAIT_POLICY=passive avoids stalls at every synchronisation.\n");
}

/* Resolves the default model path into buf. */
static const char *default_model(char *buf, size_t cap) {
    const char *dir = getenv("VQ_MODELS");
    if (dir && *dir) snprintf(buf, cap, "%s/%s", dir, DEFAULT_MODEL_FILE);
    else {
        const char *home = getenv("HOME");
        snprintf(buf, cap, "%s/.cache/veloxquant/models/%s", home ? home : ".", DEFAULT_MODEL_FILE);
    }
    return buf;
}

/* Checks before the run that FILE can be written: not a folder, and its folder exists and is
 * writable (the file itself is written atomically through a temp file there). */
static int observe_path_ok(const char *path) {
    struct stat sb;
    if (!*path) { fprintf(stderr, "generate: --observe: empty path\n"); return 0; }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "generate: --observe: '%s' is a folder\n", path);
        return 0;
    }
    char dir[4096];
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(dir, sizeof dir, ".");
    else if (sl == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "generate: --observe: cannot write '%s': folder '%s': %s\n", path, dir, strerror(errno));
        return 0;
    }
    return 1;
}

static int parse(int argc, char **argv, struct gen_opts *o) {
    const char *cmd = "generate";
    enum vq_method method = VQ_METHOD_FP16;
    int bits = 0;
    bool method_set = false, bits_set = false, km = false, vm = false;
    int kr;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEXT() (i++, val)
#define NEED() do { if (!val) { fprintf(stderr, "%s: %s needs a value\n", cmd, a); return 0; } } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return -1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEED(); o->model = NEXT(); }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEED(); o->prompt = NEXT(); }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEED(); o->file = NEXT(); }
        else if (!strcmp(a, "--system")) { NEED(); o->system = NEXT(); }
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--f32-activations")) o->f32_act = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o->quiet = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (!vq_opt_long(cmd, a, NEXT(), 0, 1L << 24, &o->n_predict)) return 0; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (!vq_opt_long(cmd, a, NEXT(), 1, 1L << 24, &o->n_ctx)) return 0; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 1024, &o->threads)) return 0; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 65536, &o->batch)) return 0; }
        else if (!strcmp(a, "--seed")) { if (!vq_opt_u64(cmd, a, NEXT(), &o->seed)) return 0; }
        else if (!strcmp(a, "--temp")) { if (!vq_opt_double(cmd, a, NEXT(), 0.0, 100.0, &o->temp)) return 0; }
        else if (!strcmp(a, "--top-k")) { if (!vq_opt_int(cmd, a, NEXT(), 0, 1 << 24, &o->top_k)) return 0; }
        else if (!strcmp(a, "--top-p")) {
            if (!vq_opt_double(cmd, a, NEXT(), 0.0, 1.0, &o->top_p)) return 0;
            if (o->top_p <= 0.0) { fprintf(stderr, "%s: --top-p: must be in (0, 1]\n", cmd); return 0; }
        }
        else if (!strcmp(a, "--method")) { if (!vq_opt_method(cmd, a, NEXT(), &method)) return 0; method_set = true; }
        else if (!strcmp(a, "--bits")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 32, &bits)) return 0; bits_set = true; }
        else if (!strcmp(a, "--k-method")) { if (!vq_opt_method(cmd, a, NEXT(), &o->k_method)) return 0; km = true; }
        else if (!strcmp(a, "--v-method")) { if (!vq_opt_method(cmd, a, NEXT(), &o->v_method)) return 0; vm = true; }
        else if (!strcmp(a, "--k-bits")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 32, &o->k_bits)) return 0; o->k_bits_set = true; }
        else if (!strcmp(a, "--v-bits")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 32, &o->v_bits)) return 0; o->v_bits_set = true; }
        else if (!strcmp(a, "--isa")) { if (!vq_opt_isa(cmd, a, NEXT(), &o->isa)) return 0; }
        else if (!strcmp(a, "--observe")) { NEED(); o->observe = NEXT(); }
        else if (!strcmp(a, "--observe-queries")) { if (!vq_opt_int(cmd, a, NEXT(), 1, 4096, &o->observe_queries)) return 0; }
        else if ((kr = vq_kv_opts_handle_name(&o->kv, cmd, a, val)) >= 0) { if (!kr) return 0; i++; }
        else { fprintf(stderr, "%s: unknown option '%s' (see veloxquant generate --help)\n", cmd, a); return 0; }
#undef NEXT
#undef NEED
    }
    if (o->kv.ratequant > 0 && !method_set) method = VQ_METHOD_TURBOQUANT_MSE;
    if (!km) o->k_method = method;
    if (!vm) o->v_method = method;
    if (!o->k_bits_set && bits_set) { o->k_bits = bits; o->k_bits_set = true; }
    if (!o->v_bits_set && bits_set) { o->v_bits = bits; o->v_bits_set = true; }
    (void)method_set;
    if (!o->prompt && !o->file) { fprintf(stderr, "%s: give a prompt with -p TEXT or -f FILE\n", cmd); return 0; }
    if (o->prompt && o->file) { fprintf(stderr, "%s: -p and -f are exclusive\n", cmd); return 0; }
    if (o->system && !o->chat) { fprintf(stderr, "%s: --system needs --chat\n", cmd); return 0; }
    if (o->json && o->quiet) { fprintf(stderr, "%s: --json and --quiet are exclusive\n", cmd); return 0; }
    if (o->observe && !observe_path_ok(o->observe)) return 0;
    return 1;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "generate: cannot open '%s': %s\n", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= MAX_PROMPT_BYTES) { fprintf(stderr, "generate: '%s' is larger than %u bytes\n", path, MAX_PROMPT_BYTES); free(b); b = NULL; break; }
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) free(b);
        b = nb;
    }
    if (b && ferror(f)) { fprintf(stderr, "generate: read error on '%s'\n", path); free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = n; }
    return b;
}

/* "turboquant_mse/4"; bits only for methods that take them. */
static const char *method_label(enum vq_method m, int bits, char *buf, size_t cap) {
    const char *n = vq_method_name(m);
    if (m == VQ_METHOD_TURBOQUANT_MSE || m == VQ_METHOD_TURBOQUANT_PROD || m == VQ_METHOD_TURBOQUANT_RVQ ||
        m == VQ_METHOD_KIVI || m == VQ_METHOD_KIVI_SINK)
        snprintf(buf, cap, "%s/%d-bit", n ? n : "?", bits);
    else
        snprintf(buf, cap, "%s", n ? n : "?");
    return buf;
}

/* Pushes token t through the UTF-8 stream into *buf, growing the buffer (*cap bytes) when a
 * piece does not fit (a vocabulary may hold pieces of any length). Returns the bytes
 * written, or -1 when out of memory. */
static int64_t push_piece(const vq_tokenizer *tok, struct vq_tok_stream *ts, int32_t t, char **buf,
                          size_t *cap) {
    for (;;) {
        const int64_t w = vq_tok_stream_push(tok, ts, t, false, *buf, *cap);
        if (w >= 0) return w;
        char *nb = realloc(*buf, (size_t)-w);
        if (!nb) return -1;
        *buf = nb;
        *cap = (size_t)-w;
    }
}

static double peak_rss_mb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss / 1024.0;   /* Linux: KiB */
}

static void fill_codec(struct vq_codec_params *cp, enum vq_method m, int bits, bool bits_set) {
    cp->method = m;
    if (bits_set) cp->bits = bits;
    else if (m == VQ_METHOD_TURBOQUANT_RVQ) cp->bits = 1;
    else if (m == VQ_METHOD_QJL) cp->bits = 1;
}

static void add_codec_json(cJSON *cfg, const char *pfx, const struct vq_codec_params *c) {
    char k[32];
    snprintf(k, sizeof k, "%s_method", pfx);
    cJSON_AddStringToObject(cfg, k, vq_method_name(c->method) ? vq_method_name(c->method) : "?");
    snprintf(k, sizeof k, "%s_bits", pfx);
    cJSON_AddNumberToObject(cfg, k, c->bits);
}

/* Snapshot of the final cache, then the observation JSON (atomic write). 1 on success. */
static int write_observation(vq_observer *obs, const char *path, const char *model,
                             const struct vq_model_info *I, const struct vq_cache_params *cpp,
                             const struct gen_opts *o, int64_t n_prompt, long n_gen) {
    vq_status st = vq_observer_snapshot(obs);
    if (st != VQ_STATUS_OK) { fprintf(stderr, "generate: --observe: %s\n", vq_status_str(st)); return 0; }
    cJSON *js = vq_observer_to_json(obs);
    if (!js) { fprintf(stderr, "generate: --observe: out of memory\n"); return 0; }
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
        cJSON_AddNumberToObject(cfg, "seed", (double)o->seed);
        cJSON_AddNumberToObject(cfg, "temp", o->temp);
        cJSON_AddBoolToObject(cfg, "chat", o->chat);
        cJSON_AddItemToObject(js, "config", cfg);
    }
    cJSON_AddNumberToObject(js, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(js, "tokens_generated", (double)n_gen);
    char *txt = cJSON_Print(js);
    cJSON_Delete(js);
    if (!txt) { fprintf(stderr, "generate: --observe: out of memory\n"); return 0; }
    st = vq_write_file_atomic(path, txt, strlen(txt));
    free(txt);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "generate: --observe: cannot write '%s': %s\n", path, vq_status_str(st));
        return 0;
    }
    return 1;
}

int vq_cmd_generate(int argc, char **argv) {
    struct gen_opts o;
    memset(&o, 0, sizeof o);
    o.n_predict = 128;
    o.n_ctx = 2048;
    o.batch = 512;
    o.seed = 42;
    o.top_k = 40;
    o.top_p = 0.95;
    o.isa = VQ_ISA_AUTO;
    vq_kv_opts_init(&o.kv);
    int pr = parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    char mbuf[4096];
    if (!o.model) o.model = default_model(mbuf, sizeof mbuf);

    /* prompt text */
    char *file_text = NULL;
    size_t plen = 0;
    const char *ptext = o.prompt;
    if (o.file) {
        file_text = read_file(o.file, &plen);
        if (!file_text) return 1;
        ptext = file_text;
    } else {
        plen = strlen(ptext);
    }

    int rc = 1;
    vq_status st;
    vq_model *m = NULL;
    vq_tokenizer *tok = NULL;
    vq_ctx *ctx = NULL;
    vq_calib_data *calib_owned[2] = {NULL, NULL};
    struct vq_kv_layers layers;
    memset(&layers, 0, sizeof layers);
    vq_sampler *smp = NULL;
    vq_observer *obs = NULL;
    char *chat_buf = NULL, *out_text = NULL, *piece = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    size_t out_len = 0, out_cap = 0;
    cJSON *js = NULL;

    m = vq_model_load(o.model, &st);
    if (!m) {
        fprintf(stderr, "generate: cannot load model '%s': %s (%s)\n", o.model, vq_engine_last_error(), vq_status_str(st));
        if (st == VQ_STATUS_IO && !o.model[0]) fprintf(stderr, "generate: run scripts/fetch_models.sh\n");
        goto done;
    }
    const struct vq_model_info *I = vq_model_info_get(m);
    tok = vq_tok_create(vq_model_gguf(m), &st);
    if (!tok) { fprintf(stderr, "generate: model has no usable tokenizer: %s\n", vq_status_str(st)); goto done; }
    if (!vq_cli_vocab_check("generate", o.model, tok, I->n_vocab)) goto done;

    if (o.chat) {
        struct vq_chat_template tmpl;
        if (vq_chat_from_gguf(vq_model_gguf(m), &tmpl) != VQ_STATUS_OK)
            fprintf(stderr, "generate: no known chat template in the model; using ChatML\n");
        struct vq_chat_msg msgs[2];
        size_t nm = 0;
        if (o.system) { msgs[nm].role = "system"; msgs[nm].content = o.system; nm++; }
        msgs[nm].role = "user";
        msgs[nm].content = ptext;   /* NUL-terminated in both cases */
        nm++;
        int64_t need = vq_chat_apply(&tmpl, msgs, nm, true, NULL, 0);
        size_t cap = (size_t)(need < 0 ? -need : need + 1);
        chat_buf = malloc(cap);
        if (!chat_buf) { fprintf(stderr, "generate: out of memory\n"); goto done; }
        int64_t w = vq_chat_apply(&tmpl, msgs, nm, true, chat_buf, cap);
        if (w < 0) { fprintf(stderr, "generate: chat template failed\n"); goto done; }
        ptext = chat_buf;
        plen = (size_t)w;
    }
    int64_t n_prompt = vq_tok_encode(tok, ptext, plen, true, o.chat, NULL, 0);
    if (n_prompt == VQ_TOK_ERR_NO_MEMORY) { fprintf(stderr, "generate: out of memory while tokenizing\n"); goto done; }
    if (n_prompt < 0) n_prompt = -n_prompt;
    if (n_prompt == 0) { fprintf(stderr, "generate: the prompt is empty after tokenization\n"); goto done; }
    if (n_prompt >= o.n_ctx) {
        fprintf(stderr, "generate: the prompt has %lld tokens; --ctx %ld leaves no room to generate\n",
                (long long)n_prompt, o.n_ctx);
        rc = 2;
        goto done;
    }
    ids = malloc(sizeof(int32_t) * (size_t)(n_prompt + 1));
    if (!ids || vq_tok_encode(tok, ptext, plen, true, o.chat, ids, n_prompt) != n_prompt) {
        fprintf(stderr, "generate: tokenization failed\n");
        goto done;
    }

    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    cp.n_batch = o.batch;
    cp.f32_activations = o.f32_act;
    cp.isa = o.isa;
    cp.cache.key.isa = o.isa;
    cp.cache.value.isa = o.isa;
    cp.cache.key.seed = o.seed;
    cp.cache.value.seed = o.seed + 1;
    fill_codec(&cp.cache.key, o.k_method, o.k_bits, o.k_bits_set);
    fill_codec(&cp.cache.value, o.v_method, o.v_bits, o.v_bits_set);
    const int la = vq_kv_layers_apply("generate", &o.kv, o.model, m, I->n_layers, I->head_dim, &cp.cache, &layers, 0);
    if (la != 1) {
        rc = la == 0 ? 2 : 1;
        goto done;
    }
    vq_kv_opts_apply_cache(&o.kv, &cp.cache); /* outlier modifiers */
    {
        struct vq_cache_params mc = cp.cache;
        mc.head_dim = I->head_dim;
        const char *why = vq_kv_modifier_error(&mc);
        if (why) {
            fprintf(stderr, "generate: %s\n", why);
            rc = 2;
            goto done;
        }
    }
    if (!vq_cli_attach_calib("generate", o.model, &cp.cache, I->n_layers, I->head_dim, calib_owned)) {
        rc = 1;
        goto done;
    }
    ctx = vq_ctx_create(m, &cp, &st);
    if (!ctx) {
        fprintf(stderr, "generate: %s\n", vq_engine_last_error());
        vq_opt_codec_error("generate", "KV cache", o.k_method, cp.cache.key.bits, I->head_dim, st);
        rc = (st == VQ_STATUS_NO_MEMORY) ? 1 : 2;
        goto done;
    }
    if (o.observe) {
        struct vq_observer_params op = vq_observer_params_default();
        if (o.observe_queries) op.max_queries = o.observe_queries;
        obs = vq_observer_create(ctx, &op, &st);
        if (!obs) { fprintf(stderr, "generate: --observe: %s\n", vq_status_str(st)); goto done; }
    }
    struct vq_sampler_params sp = vq_sampler_params_default();
    sp.temperature = (float)o.temp;
    sp.top_k = o.top_k;
    sp.top_p = (float)o.top_p;
    sp.seed = o.seed;
    smp = vq_sampler_create(&sp, I->n_vocab, &st);
    logits = malloc(sizeof(float) * (size_t)I->n_vocab);
    if (!smp || !logits) { fprintf(stderr, "generate: sampler: %s\n", vq_status_str(st)); goto done; }

    bool stream = !o.json && !o.quiet;
    double t0 = vq_now_s();
    st = vq_ctx_eval(ctx, ids, n_prompt, logits);
    double t_prefill = vq_now_s() - t0;
    if (st != VQ_STATUS_OK) { fprintf(stderr, "generate: prefill failed: %s\n", vq_status_str(st)); goto done; }

    struct vq_tok_stream ts;
    vq_tok_stream_init(&ts);
    size_t piece_cap = 512;
    piece = malloc(piece_cap);
    if (!piece) { fprintf(stderr, "generate: out of memory\n"); goto done; }
    long n_gen = 0;
    bool stopped_eog = false, hit_ctx = false;
    double t1 = vq_now_s();
    for (; n_gen < o.n_predict; ) {
        int32_t t = vq_sampler_sample(smp, logits);
        if (vq_tok_is_eog(tok, t)) { stopped_eog = true; break; }
        n_gen++;
        int64_t w = push_piece(tok, &ts, t, &piece, &piece_cap);
        if (w < 0) { fprintf(stderr, "generate: out of memory\n"); goto done; }
        if (w > 0) {
            if (stream) { fwrite(piece, 1, (size_t)w, stdout); fflush(stdout); }
            if (out_len + (size_t)w + 1 > out_cap) {
                size_t nc = (out_cap ? out_cap * 2 : 4096) + (size_t)w;
                char *nb = realloc(out_text, nc);
                if (!nb) { fprintf(stderr, "generate: out of memory\n"); goto done; }
                out_text = nb;
                out_cap = nc;
            }
            memcpy(out_text + out_len, piece, (size_t)w);
            out_len += (size_t)w;
        }
        if (n_gen == o.n_predict) break;
        if (vq_ctx_n_past(ctx) >= o.n_ctx) { hit_ctx = true; break; }
        st = vq_ctx_eval(ctx, &t, 1, logits);
        if (st != VQ_STATUS_OK) { fprintf(stderr, "\ngenerate: decode failed: %s\n", vq_status_str(st)); goto done; }
    }
    double t_decode = vq_now_s() - t1;
    int64_t w = vq_tok_stream_flush(&ts, piece, piece_cap);   /* <= 4 bytes */
    if (w > 0) {
        if (stream) fwrite(piece, 1, (size_t)w, stdout);
        if (out_len + (size_t)w + 1 > out_cap) {
            char *nb = realloc(out_text, out_len + (size_t)w + 1);
            if (!nb) goto done;
            out_text = nb;
        }
        memcpy(out_text + out_len, piece, (size_t)w);
        out_len += (size_t)w;
    }
    if (stream) { fputc('\n', stdout); fflush(stdout); }

    /* decode rate: tokens evaluated in the loop (the last sampled token is not evaluated) */
    long n_dec_evals = n_gen > 0 ? n_gen - (n_gen == o.n_predict || hit_ctx ? 1 : 0) : 0;
    if (stopped_eog) n_dec_evals = n_gen;
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(ctx), &mem);
    double key_x = mem.key_total_bytes ? (double)mem.fp16_key_bytes / (double)mem.key_total_bytes : 0;
    double full_x = mem.total_bytes ? (double)mem.fp16_bytes / (double)mem.total_bytes : 0;
    double pre_tps = t_prefill > 0 ? (double)n_prompt / t_prefill : 0;
    double dec_tps = t_decode > 0 && n_dec_evals > 0 ? (double)n_dec_evals / t_decode : 0;
    const struct vq_cache_params *cpp = vq_ctx_cache_params(ctx);
    int threads = o.threads;
    if (!threads) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (o.json) {
        js = cJSON_CreateObject();
        cJSON_AddStringToObject(js, "model", o.model);
        cJSON_AddStringToObject(js, "arch", I->arch);
        cJSON_AddStringToObject(js, "k_method", vq_method_name(cpp->key.method));
        cJSON_AddNumberToObject(js, "k_bits", cpp->key.bits);
        cJSON_AddStringToObject(js, "v_method", vq_method_name(cpp->value.method));
        cJSON_AddNumberToObject(js, "v_bits", cpp->value.bits);
        cJSON_AddNumberToObject(js, "n_ctx", (double)o.n_ctx);
        cJSON_AddNumberToObject(js, "threads", threads);
        cJSON_AddStringToObject(js, "activations", o.f32_act ? "f32" : "int8");
        cJSON_AddNumberToObject(js, "seed", (double)o.seed);
        cJSON_AddNumberToObject(js, "prompt_tokens", (double)n_prompt);
        cJSON_AddNumberToObject(js, "tokens_generated", (double)n_gen);
        cJSON_AddBoolToObject(js, "stopped_at_eog", stopped_eog);
        cJSON_AddNumberToObject(js, "prefill_tok_s", pre_tps);
        cJSON_AddNumberToObject(js, "decode_tok_s", dec_tps);
        cJSON_AddNumberToObject(js, "kv_bytes", (double)mem.total_bytes);
        cJSON_AddNumberToObject(js, "kv_key_bytes", (double)mem.key_total_bytes);
        cJSON_AddNumberToObject(js, "kv_fp16_bytes", (double)mem.fp16_bytes);
        cJSON_AddNumberToObject(js, "key_x", key_x);
        cJSON_AddNumberToObject(js, "fullKV_x", full_x);
        cJSON_AddNumberToObject(js, "peak_rss_mb", peak_rss_mb());
        char *txt = malloc(out_len + 1);
        if (txt) {
            if (out_len) memcpy(txt, out_text, out_len);
            txt[out_len] = 0;
            cJSON_AddStringToObject(js, "text", txt);
            free(txt);
        }
        char *s = cJSON_PrintUnformatted(js);
        if (s) { puts(s); free(s); }
    } else {
        char kl[64], vl[64];
        fprintf(stderr, "\n--- %s | K %s | V %s | ctx %ld | threads %d\n", I->arch,
                method_label(cpp->key.method, cpp->key.bits, kl, sizeof kl),
                method_label(cpp->value.method, cpp->value.bits, vl, sizeof vl), o.n_ctx, threads);
        fprintf(stderr, "prefill: %lld tokens, %.1f tok/s\n", (long long)n_prompt, pre_tps);
        fprintf(stderr, "decode:  %ld tokens generated%s, %.1f tok/s\n", n_gen,
                stopped_eog ? " (stopped at end-of-generation)" : hit_ctx ? " (context full)" : "", dec_tps);
        fprintf(stderr, "KV:      %zu bytes (keys %zu, fp16 would be %zu) key_x %.2f fullKV_x %.2f\n",
                mem.total_bytes, mem.key_total_bytes, mem.fp16_bytes, key_x, full_x);
        fprintf(stderr, "peak RSS: %.1f MB\n", peak_rss_mb());
    }
    if (obs && !write_observation(obs, o.observe, o.model, I, cpp, &o, n_prompt, n_gen)) goto done;
    rc = 0;
done:
    cJSON_Delete(js);
    free(out_text);
    free(piece);
    free(logits);
    free(ids);
    free(chat_buf);
    free(file_text);
    vq_sampler_free(smp);
    vq_observer_free(obs);   /* before its context */
    vq_ctx_free(ctx);
    vq_calib_data_free(calib_owned[0]);
    vq_calib_data_free(calib_owned[1]);
    vq_kv_layers_free(&layers);
    vq_tok_free(tok);
    vq_model_free(m);
    return rc;
}
