/* cmd_serve.c — `veloxquant serve`: an OpenAI-compatible HTTP server on the library's API
 * (libmicrohttpd, one thread per connection; cJSON). Endpoints: POST /v1/chat/completions
 * (the model's chat template; stream: server-sent events ending in `data: [DONE]`), POST
 * /v1/completions, GET /v1/models, GET /health, GET /metrics (Prometheus text). Requests run on
 * --parallel slots with continuous batching and admission by KV bytes (serve_sched.c). Bad
 * requests get a 4xx with an OpenAI error object; SIGTERM / SIGINT drain what runs and exit 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "kvconfig.h"
#include "opts.h"
#include "serve.h"
#include "veloxquant.h"
#include "vq_engine.h"

#ifndef VQ_HAVE_MHD
int vq_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr,
            "serve: this build has no HTTP library (install libmicrohttpd-dev and "
            "configure again)\n");
    return 1;
}
#else
#include <microhttpd.h>

#define DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

struct serve_opts {
    const char *model, *host, *api_key;
    int port, parallel, threads, batch, queue_max;
    long n_ctx;
    double kv_budget; /* bytes; 0 = every slot full */
    double timeout_s, idle_s;
    long max_body;
    struct vq_kv_opts kv;
    struct vq_cache_params cache;
    char kv_name[256];
};

/* The server's state for the HTTP callbacks. */
struct server {
    const struct serve_opts *o;
    vq_model *m;
    char model_id[128];
    int64_t n_ctx;
    struct srv *sched;
    uint64_t next_id;
    pthread_mutex_t mu;
    uint64_t http_4xx, http_5xx;
    time_t created;
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: veloxquant serve [-m MODEL] [--kv PRESET | KV options] [--parallel N]\n"
            "                        [-c CTX] [--kv-budget BYTES] [--host H] [--port P] [-t N]\n"
            "                        [--api-key KEY]\n\n"
            "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions\n"
            "(stream: true gives server-sent events), GET /v1/models, /health, /metrics.\n"
            "Each of --parallel slots owns a context of CTX tokens with the KV cache --kv names;\n"
            "a request is charged the exact compressed KV bytes of prompt + max_tokens against\n"
            "--kv-budget and waits in a bounded queue until they fit (503 when the queue is\n"
            "full). Running sequences decode together (one batched step, the weights read once).\n"
            "SIGTERM or SIGINT: stop accepting, finish what runs, exit 0.\n\n"
            "  -m, --model PATH      GGUF file (default $VQ_MODELS/" DEFAULT_MODEL_FILE
            ")\n"
            "      --parallel N      slots: sequences that run at once (default 4)\n"
            "  -c, --ctx N           tokens per slot (prompt + completion; default 2048)\n"
            "      --kv-budget B     KV bytes for all sequences together (suffix k, M, G;\n"
            "                        default: every slot full)\n"
            "      --host H          address to bind (default 127.0.0.1)\n"
            "      --port P          port (default 8080; 0 = any free port, printed)\n"
            "  -t, --threads N       threads (default: all cores)\n"
            "  -b, --batch N         prefill tokens per step (default 128)\n"
            "      --api-key KEY     require Authorization: Bearer KEY on /v1/*\n"
            "      --queue N         requests waiting at most (default 64)\n"
            "      --timeout S       seconds a request may take in all (default 600)\n"
            "      --idle-timeout S  seconds a connection may stay silent (default 30)\n"
            "      --max-body B      largest request body in bytes (default 1048576)\n");
    fputs("\nKV cache (the same options as `generate`; default fp16):\n" VQ_KV_HELP, f);
}

enum {
    SV_PARALLEL = VQ_KVOPT_LAST + 1,
    SV_BUDGET,
    SV_HOST,
    SV_PORT,
    SV_API_KEY,
    SV_QUEUE,
    SV_TIMEOUT,
    SV_IDLE,
    SV_MAX_BODY
};

/* Bytes with an optional k / M / G (powers of 1024) suffix. */
static int parse_bytes(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || !isfinite(v)) return 0;
    if (*end == 'k' || *end == 'K') v *= 1024.0, end++;
    else if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024.0 * 1024.0, end++;
    if (*end) return 0;
    *out = v;
    return 1;
}

/* 1 ok, 0 usage error (printed), -1 --help, 2 --print-kv-config. */
static int parse(int argc, char **argv, struct serve_opts *o) {
    static const char *cmd = "serve";
    static const struct option lo[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'b'},
        {"parallel", required_argument, 0, SV_PARALLEL},
        {"kv-budget", required_argument, 0, SV_BUDGET},
        {"host", required_argument, 0, SV_HOST},
        {"port", required_argument, 0, SV_PORT},
        {"api-key", required_argument, 0, SV_API_KEY},
        {"queue", required_argument, 0, SV_QUEUE},
        {"timeout", required_argument, 0, SV_TIMEOUT},
        {"idle-timeout", required_argument, 0, SV_IDLE},
        {"max-body", required_argument, 0, SV_MAX_BODY},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:c:t:b:", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'm': o->model = optarg; break;
        case 'c': ok = vq_opt_long(cmd, "--ctx", optarg, 16, 1L << 20, &o->n_ctx); break;
        case 't': ok = vq_opt_int(cmd, "--threads", optarg, 1, 1024, &o->threads); break;
        case 'b': ok = vq_opt_int(cmd, "--batch", optarg, 1, 65536, &o->batch); break;
        case SV_PARALLEL: ok = vq_opt_int(cmd, "--parallel", optarg, 1, 256, &o->parallel); break;
        case SV_BUDGET:
            ok = parse_bytes(optarg, &o->kv_budget);
            if (!ok) fprintf(stderr, "%s: --kv-budget: '%s' is not a size in bytes\n", cmd, optarg);
            break;
        case SV_HOST: o->host = optarg; break;
        case SV_PORT: ok = vq_opt_int(cmd, "--port", optarg, 0, 65535, &o->port); break;
        case SV_API_KEY: o->api_key = optarg; break;
        case SV_QUEUE: ok = vq_opt_int(cmd, "--queue", optarg, 1, 1 << 16, &o->queue_max); break;
        case SV_TIMEOUT:
            ok = vq_opt_double(cmd, "--timeout", optarg, 0.1, 1e6, &o->timeout_s);
            break;
        case SV_IDLE: ok = vq_opt_double(cmd, "--idle-timeout", optarg, 1, 1e6, &o->idle_s); break;
        case SV_MAX_BODY:
            ok = vq_opt_long(cmd, "--max-body", optarg, 1024, 1L << 30, &o->max_body);
            break;
        case ':': fprintf(stderr, "%s: %s needs a value\n", cmd, argv[optind - 1]); return 0;
        case '?':
            fprintf(stderr, "%s: unknown option '%s' (see veloxquant serve --help)\n", cmd,
                    argv[optind - 1]);
            return 0;
        default: ok = vq_kv_opts_handle(&o->kv, cmd, c, optarg); break;
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

/* ---- responses ------------------------------------------------------------------------ */

/* Queues a response with body (copied) and content type; counts 4xx / 5xx. */
static enum MHD_Result send_body(struct server *sv, struct MHD_Connection *con, unsigned code,
                                 const char *ctype, const char *body, const char *retry_after) {
    struct MHD_Response *rsp = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                               MHD_RESPMEM_MUST_COPY);
    if (!rsp) return MHD_NO;
    MHD_add_response_header(rsp, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(rsp, "Retry-After", retry_after);
    if (code == 401) MHD_add_response_header(rsp, "WWW-Authenticate", "Bearer");
    const enum MHD_Result ret = MHD_queue_response(con, code, rsp);
    MHD_destroy_response(rsp);
    pthread_mutex_lock(&sv->mu);
    if (code >= 400 && code < 500) sv->http_4xx++;
    else if (code >= 500) sv->http_5xx++;
    pthread_mutex_unlock(&sv->mu);
    return ret;
}

static enum MHD_Result send_json(struct server *sv, struct MHD_Connection *con, unsigned code,
                                 cJSON *js) {
    char *txt = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    if (!txt) return MHD_NO;
    const enum MHD_Result r = send_body(sv, con, code, "application/json", txt, NULL);
    free(txt);
    return r;
}

static cJSON *error_object(const char *msg, const char *type, const char *param, const char *code) {
    cJSON *js = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(js, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return js;
}

/* An OpenAI-style error: {"error": {"message", "type", "param", "code"}}. */
static enum MHD_Result send_error(struct server *sv, struct MHD_Connection *con, unsigned code,
                                  const char *param, const char *ecode, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static enum MHD_Result send_error(struct server *sv, struct MHD_Connection *con, unsigned code,
                                  const char *param, const char *ecode, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type = code == 401 ? "authentication_error"
                     : code == 404 ? "not_found_error"
                     : code == 503 ? "server_overloaded"
                     : code >= 500 ? "server_error"
                                   : "invalid_request_error";
    cJSON *js = error_object(msg, type, param, ecode);
    char *txt = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    if (!txt) return MHD_NO;
    const enum MHD_Result r = send_body(sv, con, code, "application/json", txt,
                                        code == 503 ? "1" : NULL);
    free(txt);
    return r;
}

/* ---- request parsing ------------------------------------------------------------------- */

/* 1 when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        else return 0;
        if (i + (size_t)len > n) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + (size_t)k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + (size_t)k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

/* What a parse error says: HTTP code, param, message. */
struct perr {
    unsigned code;
    const char *param, *ecode;
    char msg[256];
};

static int fail(struct perr *e, unsigned code, const char *param, const char *ecode,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(struct perr *e, unsigned code, const char *param, const char *ecode,
                const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    e->param = param;
    e->ecode = ecode;
    return 0;
}

/* A string field that must be valid UTF-8 without NUL bytes. */
static int text_ok(const cJSON *j) {
    return cJSON_IsString(j) && j->valuestring &&
           utf8_valid((const unsigned char *)j->valuestring, strlen(j->valuestring));
}

/* An optional number field in [lo, hi] (integer when want_int). 1 ok (absent: *out kept). */
static int num_field(const cJSON *body, const char *name, double lo, double hi, int want_int,
                     double *out, struct perr *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(body, name);
    if (!j || cJSON_IsNull(j)) return 1;
    if (!cJSON_IsNumber(j))
        return fail(e, 400, name, "invalid_type", "'%s' must be a number", name);
    const double v = j->valuedouble;
    if (!isfinite(v) || (want_int && v != floor(v)))
        return fail(e, 400, name, "invalid_value", "'%s' must be an integer", name);
    if (v < lo || v > hi)
        return fail(e, 400, name, "invalid_value", "'%s' must be in [%g, %g], got %g", name, lo, hi,
                    v);
    *out = v;
    return 1;
}

/* The chat messages' content: a string or a list of {"type": "text", "text": ...} parts,
 * joined into *out (malloc). */
static int content_text(const cJSON *c, char **out, struct perr *e) {
    if (text_ok(c)) {
        *out = strdup(c->valuestring);
        return *out != NULL || fail(e, 500, NULL, NULL, "out of memory");
    }
    if (!cJSON_IsArray(c))
        return fail(e, 400, "messages", "invalid_type",
                    "message content must be a string or a list of text parts");
    size_t len = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") ||
            !text_ok(tx))
            return fail(e, 400, "messages", "invalid_value",
                        "content parts must be {\"type\": \"text\", \"text\": string}");
        len += strlen(tx->valuestring);
    }
    char *b = malloc(len + 1);
    if (!b) return fail(e, 500, NULL, NULL, "out of memory");
    b[0] = 0;
    cJSON_ArrayForEach(p, c) strcat(b, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    *out = b;
    return 1;
}

/* Tokens of text into r->ids (add_special, parse_special as given). 1 ok. */
static int tokenize_into(struct server *sv, struct srv_req *r, const char *text, int parse_special,
                         struct perr *e) {
    const size_t len = strlen(text);
    int64_t n = vq_tokenize(sv->m, text, len, 1, parse_special, NULL, 0);
    if (n == VQ_TEXT_ERROR)
        return fail(e, 500, NULL, NULL, "tokenizer: %s", vq_engine_last_error());
    if (n < 0) n = -n;
    if (n == 0) return fail(e, 400, "prompt", "invalid_value", "the prompt is empty");
    if (n >= sv->n_ctx)
        return fail(e, 400, "messages", "context_length_exceeded",
                    "the prompt has %lld tokens; this server's context is %lld tokens",
                    (long long)n, (long long)sv->n_ctx);
    r->ids = malloc(sizeof *r->ids * (size_t)n);
    if (!r->ids) return fail(e, 500, NULL, NULL, "out of memory");
    if (vq_tokenize(sv->m, text, len, 1, parse_special, r->ids, n) != n)
        return fail(e, 500, NULL, NULL, "tokenizer: %s", vq_engine_last_error());
    r->n_ids = n;
    return 1;
}

/* Parsed request options besides the prompt. */
struct req_opts {
    bool chat, stream, include_usage;
};

/* Validates a completion request body into r (prompt tokens, params, charge). 1 ok. */
static int parse_request(struct server *sv, const char *body, size_t len, bool chat,
                         struct srv_req *r, struct req_opts *ro, struct perr *e) {
    if (len == 0) return fail(e, 400, NULL, "invalid_json", "the request body is empty");
    if (!utf8_valid((const unsigned char *)body, len))
        return fail(e, 400, NULL, "invalid_encoding", "the request body is not valid UTF-8");
    const char *end = NULL;
    cJSON *js = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!js) return fail(e, 400, NULL, "invalid_json", "the request body is not valid JSON");
    while (end && end < body + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
        end++;
    int ok = 1;
    char *prompt = NULL;
    struct vq_chat_message *msgs = NULL;
    char **contents = NULL;
    size_t n_msgs = 0;
    if (end != body + len) ok = fail(e, 400, NULL, "invalid_json", "text after the JSON value");
    else if (!cJSON_IsObject(js))
        ok = fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
    const cJSON *model = ok ? cJSON_GetObjectItemCaseSensitive(js, "model") : NULL;
    if (ok && model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model))
            ok = fail(e, 400, "model", "invalid_type", "'model' must be a string");
        else if (strcmp(model->valuestring, sv->model_id))
            ok = fail(e, 404, "model", "model_not_found", "the model '%.100s' does not exist",
                      model->valuestring);
    }
    /* scalar options */
    double max_tokens = -1, temp = 1.0, top_p = 1.0, top_k = 0, seed = -1, nn = 1;
    ok = ok && num_field(js, "max_tokens", -1e18, 1e18, 1, &max_tokens, e);
    if (ok && chat && cJSON_GetObjectItemCaseSensitive(js, "max_completion_tokens"))
        ok = num_field(js, "max_completion_tokens", -1e18, 1e18, 1, &max_tokens, e);
    const cJSON *mt = ok ? cJSON_GetObjectItemCaseSensitive(js, "max_tokens") : NULL;
    if (ok && mt && !cJSON_IsNull(mt) && max_tokens < 1)
        ok = fail(e, 400, "max_tokens", "invalid_value", "'max_tokens' must be at least 1");
    ok = ok && num_field(js, "temperature", 0, 2, 0, &temp, e);
    ok = ok && num_field(js, "top_p", 0, 1, 0, &top_p, e);
    if (ok && top_p <= 0) ok = fail(e, 400, "top_p", "invalid_value", "'top_p' must be > 0");
    ok = ok && num_field(js, "top_k", 0, 1 << 24, 1, &top_k, e);
    ok = ok && num_field(js, "seed", -9.2e18, 1.8e19, 1, &seed, e);
    ok = ok && num_field(js, "n", 1, 1, 1, &nn, e);
    const cJSON *st = ok ? cJSON_GetObjectItemCaseSensitive(js, "stream") : NULL;
    if (ok && st && !cJSON_IsNull(st) && !cJSON_IsBool(st))
        ok = fail(e, 400, "stream", "invalid_type", "'stream' must be a boolean");
    ro->chat = chat;
    ro->stream = ok && cJSON_IsTrue(st);
    const cJSON *so = ok ? cJSON_GetObjectItemCaseSensitive(js, "stream_options") : NULL;
    if (ok && so && !cJSON_IsNull(so)) {
        const cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu)))
            ok = fail(e, 400, "stream_options", "invalid_type",
                      "'stream_options' must be an object with a boolean include_usage");
        else ro->include_usage = cJSON_IsTrue(iu);
    }
    /* stop: a string or a list of up to 4 strings */
    const cJSON *stop = ok ? cJSON_GetObjectItemCaseSensitive(js, "stop") : NULL;
    int n_stop = 0;
    if (ok && stop && !cJSON_IsNull(stop)) {
        if (text_ok(stop)) {
            r->stops[n_stop++] = strdup(stop->valuestring);
        } else if (cJSON_IsArray(stop) && cJSON_GetArraySize(stop) <= SRV_MAX_STOPS) {
            const cJSON *s1;
            cJSON_ArrayForEach(s1, stop) {
                if (!text_ok(s1)) {
                    ok = fail(e, 400, "stop", "invalid_type", "'stop' entries must be strings");
                    break;
                }
                r->stops[n_stop++] = strdup(s1->valuestring);
            }
        } else
            ok = fail(e, 400, "stop", "invalid_type",
                      "'stop' must be a string or a list of at most %d strings", SRV_MAX_STOPS);
        for (int i = 0; ok && i < n_stop; i++)
            if (!r->stops[i]) ok = fail(e, 500, NULL, NULL, "out of memory");
    }
    /* the prompt */
    if (ok && chat) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(js, "messages");
        if (!ms)
            ok = fail(e, 400, "messages", "missing_required_parameter", "'messages' is required");
        else if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) < 1)
            ok = fail(e, 400, "messages", "invalid_type", "'messages' must be a non-empty list");
        else {
            n_msgs = (size_t)cJSON_GetArraySize(ms);
            msgs = calloc(n_msgs, sizeof *msgs);
            contents = calloc(n_msgs, sizeof *contents);
            if (!msgs || !contents) ok = fail(e, 500, NULL, NULL, "out of memory");
            size_t i = 0;
            const cJSON *mj;
            cJSON_ArrayForEach(mj, ms) {
                if (!ok) break;
                const cJSON *role = cJSON_GetObjectItemCaseSensitive(mj, "role");
                const cJSON *ct = cJSON_GetObjectItemCaseSensitive(mj, "content");
                if (!cJSON_IsObject(mj))
                    ok = fail(e, 400, "messages", "invalid_type", "messages must be objects");
                else if (!cJSON_IsString(role))
                    ok = fail(e, 400, "messages", "invalid_type",
                              "message %zu: 'role' must be a string", i);
                else if (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                         strcmp(role->valuestring, "assistant") &&
                         strcmp(role->valuestring, "developer"))
                    ok = fail(e, 400, "messages", "invalid_value",
                              "message %zu: unknown role '%.40s'", i, role->valuestring);
                else if (!ct)
                    ok = fail(e, 400, "messages", "missing_required_parameter",
                              "message %zu: 'content' is required", i);
                else if (content_text(ct, &contents[i], e)) {
                    msgs[i].role = strcmp(role->valuestring, "developer") ? role->valuestring
                                                                          : "system";
                    msgs[i].content = contents[i];
                } else ok = 0;
                i++;
            }
        }
        if (ok) {
            const int64_t need = vq_model_chat_apply(sv->m, msgs, n_msgs, 1, NULL, 0);
            if (need == VQ_TEXT_ERROR || need >= 0)
                ok = fail(e, 500, NULL, NULL, "chat template: %s", vq_engine_last_error());
            else if (!(prompt = malloc((size_t)(-need))))
                ok = fail(e, 500, NULL, NULL, "out of memory");
            else if (vq_model_chat_apply(sv->m, msgs, n_msgs, 1, prompt, (size_t)(-need)) < 0)
                ok = fail(e, 500, NULL, NULL, "chat template: %s", vq_engine_last_error());
        }
        ok = ok && tokenize_into(sv, r, prompt, 1, e);
    } else if (ok) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(js, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
        if (!p) ok = fail(e, 400, "prompt", "missing_required_parameter", "'prompt' is required");
        else if (!cJSON_IsString(p))
            ok = fail(e, 400, "prompt", "invalid_type", "'prompt' must be a string");
        else if (!text_ok(p))
            ok = fail(e, 400, "prompt", "invalid_encoding", "'prompt' is not valid UTF-8");
        else if (!p->valuestring[0])
            ok = fail(e, 400, "prompt", "invalid_value", "'prompt' is empty");
        else ok = tokenize_into(sv, r, p->valuestring, 0, e);
    }
    if (ok) {
        const int64_t room = sv->n_ctx - r->n_ids;
        if (max_tokens < 0)
            max_tokens = (double)(room < (chat ? 256 : 16) ? room : (chat ? 256 : 16));
        if ((double)r->n_ids + max_tokens > (double)sv->n_ctx)
            ok = fail(e, 400, "max_tokens", "context_length_exceeded",
                      "prompt (%lld tokens) + max_tokens (%.0f) exceed the context (%lld tokens)",
                      (long long)r->n_ids, max_tokens, (long long)sv->n_ctx);
    }
    if (ok) {
        r->gp.max_tokens = (int64_t)max_tokens;
        r->gp.sampling.temperature = (float)temp;
        r->gp.sampling.top_p = (float)top_p;
        r->gp.sampling.top_k = (int)top_k;
        r->gp.sampling.seed = seed >= 0 ? (uint64_t)seed
                                        : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)r;
        r->gp.stop = (const char *const *)r->stops;
        r->gp.n_stop = n_stop;
        r->charge = srv_kv_bytes(sv->sched, r->n_ids + r->gp.max_tokens);
    }
    for (size_t i = 0; contents && i < n_msgs; i++) free(contents[i]);
    free(contents);
    free(msgs);
    free(prompt);
    cJSON_Delete(js);
    return ok;
}

/* ---- completions ----------------------------------------------------------------------- */

static const char *finish_name(enum vq_finish_reason f) {
    return f == VQ_FINISH_LENGTH || f == VQ_FINISH_CONTEXT ? "length" : "stop";
}

static void add_usage(cJSON *js, const struct srv_req *r) {
    cJSON *u = cJSON_AddObjectToObject(js, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_prompt + r->n_generated));
}

/* The common head of a response or chunk object. */
static cJSON *head(struct server *sv, const char *id, const char *object) {
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "id", id);
    cJSON_AddStringToObject(js, "object", object);
    cJSON_AddNumberToObject(js, "created", (double)time(NULL));
    cJSON_AddStringToObject(js, "model", sv->model_id);
    return js;
}

/* Streaming state of one response (server-sent events). */
struct stream {
    struct server *sv;
    struct srv_req *r;
    struct req_opts ro;
    char id[64];
    char *out; /* bytes ready to send */
    size_t out_len, out_off, out_cap;
    int started, ended;
};

static int out_add(struct stream *st, const char *s, size_t n) {
    if (st->out_len + n > st->out_cap) {
        size_t nc = st->out_cap ? st->out_cap : 1024;
        while (nc < st->out_len + n) nc *= 2;
        char *nb = realloc(st->out, nc);
        if (!nb) return 0;
        st->out = nb;
        st->out_cap = nc;
    }
    memcpy(st->out + st->out_len, s, n);
    st->out_len += n;
    return 1;
}

/* Appends "data: <json>\n\n" (js is freed). */
static int out_event(struct stream *st, cJSON *js) {
    char *txt = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    if (!txt) return 0;
    const int ok = out_add(st, "data: ", 6) && out_add(st, txt, strlen(txt)) &&
                   out_add(st, "\n\n", 2);
    free(txt);
    return ok;
}

/* One chunk: delta text (may be NULL), finish reason (may be NULL). */
static cJSON *chunk(struct stream *st, const char *text, size_t len, const char *finish,
                    bool role) {
    cJSON *js = head(st->sv, st->id, st->ro.chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(js, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c0);
    cJSON_AddNumberToObject(c0, "index", 0);
    char *t = NULL;
    if (text) {
        t = malloc(len + 1);
        if (t) {
            memcpy(t, text, len);
            t[len] = 0;
        }
    }
    if (st->ro.chat) {
        cJSON *d = cJSON_AddObjectToObject(c0, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (t) cJSON_AddStringToObject(d, "content", t);
    } else cJSON_AddStringToObject(c0, "text", t ? t : "");
    free(t);
    if (finish) cJSON_AddStringToObject(c0, "finish_reason", finish);
    else cJSON_AddNullToObject(c0, "finish_reason");
    return js;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream *st = cls;
    struct srv_req *r = st->r;
    while (st->out_off == st->out_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out_off = st->out_len = 0;
        if (!st->started) {
            st->started = 1;
            if (st->ro.chat && !out_event(st, chunk(st, NULL, 0, NULL, true)))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        pthread_mutex_lock(&r->mu);
        while (!r->pend_len && !r->done && !r->cancelled) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            if (srv_now() > r->deadline) r->cancelled = 1;
        }
        char *text = NULL;
        size_t len = r->pend_len;
        if (len) {
            text = r->pend;
            r->pend = NULL;
            r->pend_len = r->pend_cap = 0;
        }
        const int done = r->done, cancelled = r->cancelled;
        pthread_mutex_unlock(&r->mu);
        if (text) {
            const int ok = out_event(st, chunk(st, text, len, NULL, false));
            free(text);
            if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (done) {
            if (r->status != VQ_STATUS_OK) {
                out_event(st, error_object(r->err, "server_error", NULL, NULL));
            } else {
                cJSON *js = chunk(st, NULL, 0, finish_name(r->finish), false);
                add_usage(js, r);
                out_event(st, js);
            }
            out_add(st, "data: [DONE]\n\n", 14);
            st->ended = 1;
            continue;
        }
        if (cancelled) return MHD_CONTENT_READER_END_WITH_ERROR; /* timeout */
    }
    size_t n = st->out_len - st->out_off;
    if (n > max) n = max;
    memcpy(buf, st->out + st->out_off, n);
    st->out_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or the client left): a running request is cancelled. */
static void stream_free(void *cls) {
    struct stream *st = cls;
    pthread_mutex_lock(&st->r->mu);
    st->r->cancelled = 1;
    pthread_mutex_unlock(&st->r->mu);
    srv_req_unref(st->r);
    free(st->out);
    free(st);
}

static enum MHD_Result completion(struct server *sv, struct MHD_Connection *con, const char *body,
                                  size_t len, bool chat) {
    struct srv_req *r = srv_req_new();
    if (!r) return send_error(sv, con, 500, NULL, NULL, "out of memory");
    struct perr e = {0, NULL, NULL, ""};
    struct req_opts ro = {chat, false, false};
    if (!parse_request(sv, body, len, chat, r, &ro, &e)) {
        srv_req_unref(r);
        return send_error(sv, con, e.code, e.param, e.ecode, "%s", e.msg);
    }
    r->deadline = srv_now() + sv->o->timeout_s;
    char id[64];
    pthread_mutex_lock(&sv->mu);
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)++sv->next_id);
    pthread_mutex_unlock(&sv->mu);
    const int sub = srv_submit(sv->sched, r);
    if (sub != 0) {
        srv_req_unref(r);
        if (sub == -2)
            return send_error(sv, con, 400, "max_tokens", "kv_budget_exceeded",
                              "prompt + max_tokens need more KV memory than --kv-budget allows");
        return send_error(
            sv, con, 503, NULL, sub == -3 ? "shutting_down" : "queue_full",
            sub == -3 ? "the server is shutting down" : "the server is busy; retry later");
    }
    if (ro.stream) {
        struct stream *st = calloc(1, sizeof *st);
        if (!st) {
            pthread_mutex_lock(&r->mu);
            r->cancelled = 1;
            pthread_mutex_unlock(&r->mu);
            srv_req_unref(r);
            return send_error(sv, con, 500, NULL, NULL, "out of memory");
        }
        st->sv = sv;
        st->r = r;
        st->ro = ro;
        snprintf(st->id, sizeof st->id, "%s", id);
        struct MHD_Response *rsp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
                                                                     stream_read, st, stream_free);
        if (!rsp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(rsp, "Content-Type", "text/event-stream");
        MHD_add_response_header(rsp, "Cache-Control", "no-cache");
        const enum MHD_Result ret = MHD_queue_response(con, 200, rsp);
        MHD_destroy_response(rsp);
        return ret;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (!r->cancelled && srv_now() > r->deadline) r->cancelled = 1; /* the scheduler ends it */
    }
    pthread_mutex_unlock(&r->mu);
    enum MHD_Result ret;
    if (r->status != VQ_STATUS_OK)
        ret = send_error(sv, con, 500, NULL, NULL, "generation failed: %s", r->err);
    else if (!r->text)
        ret = send_error(sv, con, 504, NULL, "timeout", "the request took longer than %g s",
                         sv->o->timeout_s);
    else {
        cJSON *js = head(sv, id, chat ? "chat.completion" : "text_completion");
        cJSON *ch = cJSON_AddArrayToObject(js, "choices"), *c0 = cJSON_CreateObject();
        cJSON_AddItemToArray(ch, c0);
        cJSON_AddNumberToObject(c0, "index", 0);
        if (chat) {
            cJSON *msg = cJSON_AddObjectToObject(c0, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            cJSON_AddStringToObject(msg, "content", r->text);
        } else {
            cJSON_AddStringToObject(c0, "text", r->text);
            cJSON_AddNullToObject(c0, "logprobs");
        }
        cJSON_AddStringToObject(c0, "finish_reason", finish_name(r->finish));
        add_usage(js, r);
        ret = send_json(sv, con, 200, js);
    }
    srv_req_unref(r);
    return ret;
}

/* ---- other endpoints ------------------------------------------------------------------- */

static enum MHD_Result models(struct server *sv, struct MHD_Connection *con) {
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(js, "data"), *m = cJSON_CreateObject();
    cJSON_AddItemToArray(d, m);
    cJSON_AddStringToObject(m, "id", sv->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)sv->created);
    cJSON_AddStringToObject(m, "owned_by", "veloxquant");
    return send_json(sv, con, 200, js);
}

static enum MHD_Result metrics(struct server *sv, struct MHD_Connection *con) {
    struct srv_metrics mt;
    srv_metrics(sv->sched, &mt);
    pthread_mutex_lock(&sv->mu);
    const uint64_t e4 = sv->http_4xx, e5 = sv->http_5xx;
    pthread_mutex_unlock(&sv->mu);
    char b[4096];
    snprintf(b, sizeof b,
             "# HELP vq_requests_total Completion requests accepted into the queue.\n"
             "# TYPE vq_requests_total counter\nvq_requests_total %llu\n"
             "# HELP vq_http_errors_total Error responses by class.\n"
             "# TYPE vq_http_errors_total counter\n"
             "vq_http_errors_total{class=\"4xx\"} %llu\nvq_http_errors_total{class=\"5xx\"} %llu\n"
             "# HELP vq_prompt_tokens_total Prompt tokens of finished requests.\n"
             "# TYPE vq_prompt_tokens_total counter\nvq_prompt_tokens_total %llu\n"
             "# HELP vq_completion_tokens_total Tokens generated.\n"
             "# TYPE vq_completion_tokens_total counter\nvq_completion_tokens_total %llu\n"
             "# HELP vq_prefill_tokens_per_second Prompt tokens evaluated per second of prefill.\n"
             "# TYPE vq_prefill_tokens_per_second gauge\nvq_prefill_tokens_per_second %.2f\n"
             "# HELP vq_decode_tokens_per_second Tokens decoded per second of batched decode "
             "steps (all sequences together).\n"
             "# TYPE vq_decode_tokens_per_second gauge\nvq_decode_tokens_per_second %.2f\n"
             "# HELP vq_decode_steps_total Batched decode steps and the rows they carried.\n"
             "# TYPE vq_decode_steps_total counter\nvq_decode_steps_total %llu\n"
             "vq_decode_rows_total %llu\n"
             "# HELP vq_sequences_active Sequences running now.\n"
             "# TYPE vq_sequences_active gauge\nvq_sequences_active %d\n"
             "# HELP vq_sequences_active_max The most sequences that ran at once.\n"
             "# TYPE vq_sequences_active_max gauge\nvq_sequences_active_max %d\n"
             "# HELP vq_sequences_queued Requests waiting for a slot or KV memory.\n"
             "# TYPE vq_sequences_queued gauge\nvq_sequences_queued %d\n"
             "# HELP vq_kv_bytes_in_use KV bytes charged now (running + cached in idle slots).\n"
             "# TYPE vq_kv_bytes_in_use gauge\nvq_kv_bytes_in_use %zu\n"
             "# HELP vq_kv_bytes_budget KV bytes allowed (--kv-budget).\n"
             "# TYPE vq_kv_bytes_budget gauge\nvq_kv_bytes_budget %zu\n",
             (unsigned long long)mt.requests, (unsigned long long)e4, (unsigned long long)e5,
             (unsigned long long)mt.prompt_tokens, (unsigned long long)mt.completion_tokens,
             mt.prefill_s > 0 ? (double)mt.prefill_tokens / mt.prefill_s : 0.0,
             mt.decode_s > 0 ? (double)mt.decode_tokens / mt.decode_s : 0.0,
             (unsigned long long)mt.decode_steps, (unsigned long long)mt.decode_rows, mt.active,
             mt.max_active, mt.queued, mt.kv_in_use, mt.kv_budget);
    return send_body(sv, con, 200, "text/plain; version=0.0.4", b, NULL);
}

/* ---- the connection handler ---------------------------------------------------------- */

/* A request body as it arrives. */
struct upload {
    char *b;
    size_t len, cap;
    int too_big;
};

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_size, void **con_cls) {
    (void)version;
    struct server *sv = cls;
    struct upload *up = *con_cls;
    if (!up) {
        up = calloc(1, sizeof *up);
        if (!up) return MHD_NO;
        *con_cls = up;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!up->too_big && up->len + *upload_size > (size_t)sv->o->max_body) up->too_big = 1;
        if (!up->too_big) {
            if (up->len + *upload_size + 1 > up->cap) {
                size_t nc = up->cap ? up->cap : 4096;
                while (nc < up->len + *upload_size + 1) nc *= 2;
                char *nb = realloc(up->b, nc);
                if (!nb) return MHD_NO;
                up->b = nb;
                up->cap = nc;
            }
            memcpy(up->b + up->len, upload_data, *upload_size);
            up->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    const bool is_chat = !strcmp(url, "/v1/chat/completions"),
               is_cmpl = !strcmp(url, "/v1/completions");
    const bool is_models = !strcmp(url, "/v1/models");
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(sv, con, 405, NULL, "method_not_allowed", "use GET");
        return send_body(sv, con, 200, "application/json", "{\"status\":\"ok\"}", NULL);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return send_error(sv, con, 405, NULL, "method_not_allowed", "use GET");
        return metrics(sv, con);
    }
    if (!is_chat && !is_cmpl && !is_models)
        return send_error(sv, con, 404, NULL, "unknown_url", "unknown URL %.100s", url);
    if (sv->o->api_key) {
        const char *auth = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
        const size_t kl = strlen(sv->o->api_key);
        if (!auth || strncmp(auth, "Bearer ", 7) || strlen(auth + 7) != kl ||
            memcmp(auth + 7, sv->o->api_key, kl))
            return send_error(sv, con, 401, NULL, "invalid_api_key",
                              "missing or wrong API key (Authorization: Bearer KEY)");
    }
    if (is_models) {
        if (!get) return send_error(sv, con, 405, NULL, "method_not_allowed", "use GET");
        return models(sv, con);
    }
    if (!post) return send_error(sv, con, 405, NULL, "method_not_allowed", "use POST");
    if (up->too_big)
        return send_error(sv, con, 413, NULL, "request_too_large",
                          "the request body is larger than %ld bytes", sv->o->max_body);
    return completion(sv, con, up->b ? up->b : "", up->len, is_chat);
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)con;
    (void)toe;
    struct upload *up = *con_cls;
    if (up) {
        free(up->b);
        free(up);
    }
    *con_cls = NULL;
}

static const char *default_model(char *buf, size_t cap) {
    const char *dir = getenv("VQ_MODELS");
    if (dir && *dir) snprintf(buf, cap, "%s/%s", dir, DEFAULT_MODEL_FILE);
    else {
        const char *home = getenv("HOME");
        snprintf(buf, cap, "%s/.cache/veloxquant/models/%s", home ? home : ".", DEFAULT_MODEL_FILE);
    }
    return buf;
}

int vq_cmd_serve(int argc, char **argv) {
    struct serve_opts o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.port = 8080;
    o.parallel = 4;
    o.n_ctx = 2048;
    o.batch = 128;
    o.queue_max = 64;
    o.timeout_s = 600;
    o.idle_s = 30;
    o.max_body = 1L << 20;
    vq_kv_opts_init(&o.kv);
    const int pr = parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    if (pr == 2) return vq_kv_print_config(o.kv_name, &o.cache);
    char mbuf[4096];
    if (!o.model) o.model = default_model(mbuf, sizeof mbuf);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o.port);
    if (inet_pton(AF_INET, o.host, &addr.sin_addr) != 1) {
        fprintf(stderr, "serve: --host: '%s' is not an IPv4 address\n", o.host);
        return 2;
    }
    /* SIGTERM / SIGINT are taken by sigwait below: blocked in every thread */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct server sv;
    memset(&sv, 0, sizeof sv);
    sv.o = &o;
    sv.n_ctx = o.n_ctx;
    sv.created = time(NULL);
    pthread_mutex_init(&sv.mu, NULL);
    vq_cli_model_stem(o.model, sv.model_id, sizeof sv.model_id);
    int rc = 1;
    vq_ctx **slots = calloc((size_t)o.parallel, sizeof *slots);
    struct MHD_Daemon *d = NULL;
    vq_status st;
    sv.m = vq_model_load(o.model, &st);
    if (!sv.m) {
        fprintf(stderr, "serve: cannot load model '%s': %s (%s)\n", o.model, vq_engine_last_error(),
                vq_status_str(st));
        goto done;
    }
    if (vq_tokenize(sv.m, "a", 1, 0, 0, NULL, 0) == VQ_TEXT_ERROR) {
        fprintf(stderr, "serve: %s: %s\n", o.model, vq_engine_last_error());
        goto done;
    }
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    cp.n_batch = o.batch;
    vq_cli_warn_wait_policy("serve", o.threads);
    for (int i = 0; i < o.parallel; i++) {
        slots[i] = vq_ctx_create_kv(sv.m, &cp, o.kv_name, &st);
        if (!slots[i]) {
            fprintf(stderr, "serve: KV config '%s': %s (%s)\n", o.kv_name, vq_engine_last_error(),
                    vq_status_str(st));
            rc = st == VQ_STATUS_INVALID_ARG ? 2 : 1;
            goto done;
        }
        /* one scheduler thread evaluates the slots one pass at a time: one set of activation
         * buffers (-b rows) for all of them */
        if (i > 0 && vq_ctx_share_scratch(slots[i], slots[0]) != VQ_STATUS_OK) {
            fprintf(stderr, "serve: %s\n", vq_engine_last_error());
            goto done;
        }
    }
    struct srv_config sc = {sv.m, slots, o.parallel, 0, o.queue_max, 0};
    sc.prefill_chunk = o.batch < o.n_ctx ? o.batch : (int)o.n_ctx; /* the context's n_batch */
    struct vq_cache_memory full;
    if (vq_kv_estimate(vq_ctx_cache_params(slots[0]), o.n_ctx, &full) != VQ_STATUS_OK) {
        fprintf(stderr, "serve: cannot estimate the KV bytes of '%s'\n", o.kv_name);
        goto done;
    }
    sc.budget = o.kv_budget > 0 ? (size_t)o.kv_budget : full.total_bytes * (size_t)o.parallel;
    sv.sched = srv_create(&sc);
    if (!sv.sched) {
        fprintf(stderr, "serve: out of memory\n");
        goto done;
    }
    d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, handler, &sv, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)o.idle_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o.queue_max + o.parallel + 16),
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "serve: cannot listen on %s:%d: %s\n", o.host, o.port, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr,
            "serve: model %s, KV %s, %d slots x %ld tokens, KV budget %zu bytes (a full slot: "
            "%zu)\nserve: listening on http://%s:%u\n",
            sv.model_id, o.kv_name, o.parallel, o.n_ctx, sc.budget, full.total_bytes, o.host,
            di ? (unsigned)di->port : (unsigned)o.port);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "serve: %s: finishing %d request(s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            srv_drain(sv.sched));
    const double until = srv_now() + o.timeout_s;
    while (srv_busy(sv.sched) > 0 && srv_now() < until) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* let the connections send what they hold */
    for (int i = 0; i < 40; i++) {
        const union MHD_DaemonInfo *ci = MHD_get_daemon_info(d,
                                                             MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!ci || ci->num_connections == 0) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    rc = 0;
done:
    if (d) MHD_stop_daemon(d);
    srv_free(sv.sched);
    for (int i = 0; slots && i < o.parallel; i++) vq_ctx_free(slots[i]);
    free(slots);
    vq_model_free(sv.m);
    pthread_mutex_destroy(&sv.mu);
    if (rc == 0) fprintf(stderr, "serve: stopped\n");
    return rc;
}
#endif
