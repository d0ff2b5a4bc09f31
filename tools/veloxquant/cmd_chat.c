/* cmd_chat.c — `veloxquant chat`: a multi-turn conversation with a GGUF model whose KV cache is
 * stored with a veloxquant method, on the library's vq_conversation (each turn evaluates only
 * the tokens the cache lacks). Interactive on a terminal ("> " prompt, streamed answers,
 * /reset, /stats, Ctrl-C stops an answer, a second Ctrl-C at the prompt or Ctrl-D quits);
 * otherwise every line of standard input is one user turn, answers go to stdout and a stats
 * line per turn to stderr, or one JSON object per turn to stdout with --json. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "kvconfig.h"
#include "opts.h"
#include "sampling.h"
#include "vq_tools.h"

struct chat_opts {
    const char *model, *system;
    bool json;
    long n_predict, n_ctx;
    int threads, batch;
    struct vq_sampling_opts smp; /* the sampling options (sampling.h), as in generate */
    enum vq_isa isa;
    struct vq_kv_opts kv;         /* every KV option (kvconfig.h), as in generate */
    struct vq_cache_params cache; /* the KV config resolved from kv */
    char kv_name[256];
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant chat [-m MODEL] [--kv PRESET | KV options] [-c CTX] [-t N]\n"
        "                       [--system TEXT] [sampling options]\n\n"
        "Talks with an instruct model through its chat template; the KV cache is stored with a\n"
        "veloxquant method, and each turn evaluates only its new tokens (the cache keeps the\n"
        "conversation).\n\n"
        "On a terminal: type a message after \"> \"; the answer streams as it is generated.\n"
        "  /reset   forget the conversation (the system prompt stays)\n"
        "  /stats   KV bytes used and their fp16 equivalent, compression ratio, tokens in the\n"
        "           cache, prefill and decode tok/s of the last turn\n"
        "  Ctrl-C   stops the answer being generated; at the prompt, twice in a row, quits\n"
        "  Ctrl-D   quits (so do /quit and /exit)\n"
        "Not on a terminal (a pipe or a file): every line of standard input is one user turn\n"
        "(empty lines are skipped; /reset and /stats work there too). Each answer goes to stdout\n"
        "followed by a newline, and a line of statistics per turn to stderr:\n"
        "  turn N: prompt_tokens P evaluated E cached C generated G finish F kv_bytes B "
        "n_past T ...\n"
        "With --json, one JSON object per turn goes to stdout instead (text, prompt_tokens,\n"
        "prompt_tokens_evaluated, cached_tokens, tokens_generated, finish_reason, kv_bytes,\n"
        "kv_fp16_bytes, n_past, prefill_tok_s, decode_tok_s). A turn that does not fit the\n"
        "context is reported (\"context full: N tokens needed, M free\") and skipped; the exit\n"
        "status is then 1.\n\n"
        "  -m, --model PATH      GGUF file (default $VQ_MODELS/" VQ_DEFAULT_MODEL_FILE
        ",\n"
        "                        else ~/.cache/veloxquant/models/" VQ_DEFAULT_MODEL_FILE
        ")\n"
        "      --system TEXT     system prompt (default: the template's own, if any)\n"
        "  -n, --n-predict N     max tokens per answer (default 512)\n"
        "  -c, --ctx N           context size in tokens for the whole conversation (default\n"
        "                        4096); also --ctx-size\n"
        "  -t, --threads N       threads (default: all cores)\n"
        "  -b, --batch N         prefill tokens per forward pass (default 512)\n" VQ_SAMPLING_HELP
        "      --isa ISA         auto|scalar|avx2|avx512 activation, attention and KV codec\n"
        "                        kernels (default auto); the weight kernels follow $VQ_ISA,\n"
        "                        chosen when the model loads\n"
        "      --json            one JSON object per turn on stdout (no streaming)\n");
    fputs("\nKV cache (the same options and defaults as `generate`):\n" VQ_KV_HELP, f);
}

enum { CHAT_SYSTEM = VQ_KVOPT_LAST + 1, CHAT_JSON, CHAT_ISA };

static void chat_opts_init(struct chat_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 512;
    o->n_ctx = 4096;
    o->batch = 512;
    vq_sampling_opts_init(&o->smp);
    o->isa = VQ_ISA_AUTO;
    vq_kv_opts_init(&o->kv);
}

/* 1 ok, 0 usage error (printed), -1 --help printed, 2 --print-kv-config given. */
static int parse(int argc, char **argv, struct chat_opts *o) {
    static const char *cmd = "chat";
    static const struct option lo[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"system", required_argument, 0, CHAT_SYSTEM},
        {"json", no_argument, 0, CHAT_JSON},
        {"n-predict", required_argument, 0, 'n'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'b'},
        VQ_SAMPLING_LONG_OPTIONS,
        {"isa", required_argument, 0, CHAT_ISA},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:n:c:t:b:s:", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'm': o->model = optarg; break;
        case 'n': ok = vq_opt_long(cmd, "--n-predict", optarg, 0, 1L << 24, &o->n_predict); break;
        case 'c': ok = vq_opt_long(cmd, "--ctx", optarg, 1, 1L << 24, &o->n_ctx); break;
        case 't': ok = vq_opt_int(cmd, "--threads", optarg, 1, 1024, &o->threads); break;
        case 'b': ok = vq_opt_int(cmd, "--batch", optarg, 1, 65536, &o->batch); break;
        case CHAT_SYSTEM: o->system = optarg; break;
        case CHAT_JSON: o->json = true; break;
        case CHAT_ISA: ok = vq_opt_isa(cmd, "--isa", optarg, &o->isa); break;
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
    if (!vq_kv_opts_prepare(cmd, &o->kv, &o->cache, o->kv_name, sizeof o->kv_name)) return 0;
    if (o->kv.print_config) return 2;
    return 1;
}

/* Everything a chat holds; chat_free releases it. */
struct chat_state {
    vq_model *m;
    const struct vq_model_info *I;
    vq_ctx *ctx;
    vq_calib_data *calib_owned[2];
    struct vq_kv_layers layers;
    vq_conversation *conv;
    char *line;
    size_t line_cap;
};

static void chat_free(struct chat_state *s) {
    free(s->line);
    vq_conversation_free(s->conv);
    vq_ctx_free(s->ctx);
    vq_calib_data_free(s->calib_owned[0]);
    vq_calib_data_free(s->calib_owned[1]);
    vq_kv_layers_free(&s->layers);
    vq_model_free(s->m);
}

/* Model, context (KV config as generate builds it) and conversation. 0 or an exit code. */
static int chat_build(const struct chat_opts *o, struct chat_state *s) {
    vq_status st;
    s->m = vq_model_load(o->model, &st);
    if (!s->m) {
        fprintf(stderr, "chat: cannot load model '%s': %s (%s)\n", o->model, vq_engine_last_error(),
                vq_status_str(st));
        return 1;
    }
    s->I = vq_model_info_get(s->m);
    const struct vq_model_info *I = s->I;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->threads;
    vq_cli_warn_wait_policy("chat", o->threads);
    cp.n_batch = o->batch;
    cp.isa = o->isa;
    const int la = vq_kv_opts_build("chat", &o->kv, o->model, s->m, I->n_layers, I->n_kv_heads,
                                    I->head_dim, &cp.cache, &s->layers, s->calib_owned, 0);
    if (la != 1) return la == 0 ? 2 : 1;
    cp.cache.key.isa = o->isa;
    cp.cache.value.isa = o->isa;
    s->ctx = vq_ctx_create(s->m, &cp, &st);
    if (!s->ctx) {
        fprintf(stderr, "chat: %s\n", vq_engine_last_error());
        vq_opt_codec_error("chat", "KV cache", cp.cache.key.method, cp.cache.key.bits, I->head_dim,
                           st);
        return st == VQ_STATUS_NO_MEMORY ? 1 : 2;
    }
    s->conv = vq_conversation_create(s->ctx, o->system, &st);
    if (!s->conv) {
        fprintf(stderr, "chat: %s: %s\n", o->model, vq_engine_last_error());
        return 1;
    }
    return 0;
}

/* Ctrl-C: set by the handler, read by the piece callback and the prompt loop. */
static volatile sig_atomic_t g_sigint;

static void on_sigint(int sig) {
    (void)sig;
    g_sigint = 1;
}

/* Streams a piece to stdout; stops the answer after a Ctrl-C. */
static int stream_piece(void *user, const char *piece, size_t len) {
    (void)user;
    if (g_sigint) return 1;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* The last turn's figures, for /stats. */
struct turn_stats {
    bool any;
    double prefill_tps, decode_tps;
};

static void print_stats(const struct chat_state *s, const struct turn_stats *ts, FILE *f) {
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(s->ctx), &mem);
    const double x = mem.total_bytes ? (double)mem.fp16_bytes / (double)mem.total_bytes : 0;
    fprintf(f, "KV: %zu bytes (fp16 would be %zu), %.2fx; %lld of %lld tokens in the cache",
            mem.total_bytes, mem.fp16_bytes, x, (long long)vq_ctx_n_past(s->ctx),
            (long long)vq_ctx_n_ctx(s->ctx));
    if (ts->any)
        fprintf(f, "; last turn: prefill %.1f tok/s, decode %.1f tok/s", ts->prefill_tps,
                ts->decode_tps);
    fputc('\n', f);
}

/* Reports a finished turn: the stats line (stderr) or the JSON object (stdout). */
static void report_turn(const struct chat_opts *o, const struct chat_state *s, int turn,
                        const struct vq_gen_result *r, const struct turn_stats *ts) {
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(s->ctx), &mem);
    if (!o->json) {
        fprintf(stderr,
                "turn %d: prompt_tokens %lld evaluated %lld cached %lld generated %lld finish %s "
                "kv_bytes %zu kv_fp16_bytes %zu n_past %lld prefill_tok_s %.1f decode_tok_s "
                "%.1f\n",
                turn, (long long)r->n_prompt, (long long)r->n_evaluated, (long long)r->n_cached,
                (long long)r->n_generated, vq_finish_reason_name(r->finish), mem.total_bytes,
                mem.fp16_bytes, (long long)vq_ctx_n_past(s->ctx), ts->prefill_tps, ts->decode_tps);
        return;
    }
    cJSON *js = cJSON_CreateObject();
    cJSON_AddNumberToObject(js, "turn", turn);
    cJSON_AddStringToObject(js, "text", r->text ? r->text : "");
    cJSON_AddNumberToObject(js, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(js, "prompt_tokens_evaluated", (double)r->n_evaluated);
    cJSON_AddNumberToObject(js, "cached_tokens", (double)r->n_cached);
    cJSON_AddNumberToObject(js, "tokens_generated", (double)r->n_generated);
    cJSON_AddStringToObject(js, "finish_reason", vq_finish_reason_name(r->finish));
    cJSON_AddNumberToObject(js, "kv_bytes", (double)mem.total_bytes);
    cJSON_AddNumberToObject(js, "kv_fp16_bytes", (double)mem.fp16_bytes);
    cJSON_AddNumberToObject(js, "n_past", (double)vq_ctx_n_past(s->ctx));
    cJSON_AddNumberToObject(js, "prefill_tok_s", ts->prefill_tps);
    cJSON_AddNumberToObject(js, "decode_tok_s", ts->decode_tps);
    char *txt = cJSON_PrintUnformatted(js);
    if (txt) {
        puts(txt);
        fflush(stdout);
        free(txt);
    }
    cJSON_Delete(js);
}

/* The conversation loop. Returns the exit code (1 when a turn failed). */
static int chat_loop(const struct chat_opts *o, struct chat_state *s) {
    const bool tty = isatty(STDIN_FILENO) == 1;
    const bool stream = !o->json;
    struct vq_gen_params gp = vq_gen_params_default();
    vq_sampling_opts_apply(&o->smp, &gp);
    gp.max_tokens = o->n_predict;
    gp.on_piece = stream ? stream_piece : NULL;
    if (tty) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0; /* no SA_RESTART: a Ctrl-C at the prompt ends the read */
        sigaction(SIGINT, &sa, NULL);
        fprintf(stderr,
                "chat: %s, KV %s, context %ld tokens. /reset, /stats; Ctrl-C stops an answer, "
                "Ctrl-D quits.\n",
                s->I->name[0] ? s->I->name : s->I->arch, o->kv_name, o->n_ctx);
    }
    struct turn_stats ts = {false, 0, 0};
    int rc = 0, turn = 0;
    bool quit_armed = false;
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        /* after the quit hint a Ctrl-C quits even if it came before this read began (it
         * then interrupts no read: the flag says it happened) */
        if (quit_armed && g_sigint) break;
        if (!quit_armed) g_sigint = 0;
        errno = 0;
        ssize_t n = getline(&s->line, &s->line_cap, stdin);
        if (n < 0) {
            if (tty && g_sigint && errno == EINTR) {
                clearerr(stdin);
                if (quit_armed) break;
                quit_armed = true;
                g_sigint = 0; /* the next Ctrl-C, from here on, is the second */
                fputs("\n(Ctrl-C again or Ctrl-D to quit)\n", stderr);
                continue;
            }
            if (tty) fputc('\n', stdout);
            break; /* end of input */
        }
        quit_armed = false;
        while (n > 0 && (s->line[n - 1] == '\n' || s->line[n - 1] == '\r')) s->line[--n] = 0;
        if (n == 0) continue;
        if (!strcmp(s->line, "/quit") || !strcmp(s->line, "/exit")) break;
        if (!strcmp(s->line, "/reset")) {
            vq_conversation_reset(s->conv);
            fputs("(conversation reset)\n", tty ? stdout : stderr);
            continue;
        }
        if (!strcmp(s->line, "/stats")) {
            print_stats(s, &ts, tty ? stdout : stderr);
            continue;
        }
        turn++;
        struct vq_gen_result r;
        vq_status st = vq_conversation_turn(s->conv, s->line, &gp, &r);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "chat: turn %d: %s (%s)%s\n", turn, vq_engine_last_error(),
                    vq_status_str(st), st == VQ_STATUS_CAPACITY ? "; /reset starts over" : "");
            rc = 1;
            continue;
        }
        ts.any = true;
        ts.prefill_tps = r.prefill_s > 0 ? (double)r.n_evaluated / r.prefill_s : 0;
        ts.decode_tps = r.decode_s > 0 && r.n_decoded > 0 ? (double)r.n_decoded / r.decode_s : 0;
        if (stream) {
            if (r.finish == VQ_FINISH_CALLBACK) fputs(" [stopped]", stdout);
            else if (r.finish == VQ_FINISH_CONTEXT) fputs(" [context full]", stdout);
            fputc('\n', stdout);
            fflush(stdout);
        }
        if (!tty || o->json) report_turn(o, s, turn, &r, &ts);
        vq_gen_result_free(&r);
    }
    if (tty) signal(SIGINT, SIG_DFL);
    return rc;
}

int vq_cmd_chat(int argc, char **argv) {
    struct chat_opts o;
    chat_opts_init(&o);
    int pr = parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    if (pr == 2) return vq_kv_print_config(o.kv_name, &o.cache);
    char mbuf[4096];
    o.model = vq_cli_model(o.model, mbuf, sizeof mbuf);
    struct chat_state s;
    memset(&s, 0, sizeof s);
    int rc = chat_build(&o, &s);
    if (!rc) rc = chat_loop(&o, &s);
    chat_free(&s);
    return rc;
}
