/* cmd_info.c — `veloxquant info MODEL`: GGUF metadata, tensor types and the KV-cache geometry
 * (bytes per token for fp16 and for a chosen method). Opening is fully validated, so a truncated
 * or corrupt file gives an error and exit status 1. A valid GGUF file the engine cannot run
 * (unsupported architecture, missing keys or tensors, tensor types without kernels) is listed
 * all the same, with every reason (vq_model_check), and exits 0. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "kvconfig.h"
#include "opts.h"
#include "vq_tools.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant info [options] [-m] [MODEL]\n\n"
        "Prints a GGUF file's metadata, its tensor types and the KV-cache geometry of the "
        "model.\n\n"
        "  -m, --model PATH   the GGUF file (or the last argument; default: the default model)\n"
        "      --tensors      list every tensor (name, type, shape, bytes)\n"
        "  -c, --ctx N        context length used for the KV byte figures (default 4096)\n"
        "      --method M     also show the KV bytes with method M for keys and values\n"
        "      --bits B       bits for --method (default: the method's default)\n"
        "      --json         one JSON object instead of text\n"
        "  -h, --help         this help\n\n"
        "Exit status: 0 when the file is readable GGUF, also when the engine cannot run it (the\n"
        "output then ends with every reason: 'engine: cannot run this model', JSON\n"
        "engine_problems); 1 when it is not readable GGUF; 2 for bad options.\n");
}

/* The reasons the engine cannot run a file (vq_model_check), collected for printing. */
struct problems {
    char **msg;
    int n, cap;
};

static void add_problem(void *user, const char *problem) {
    struct problems *p = user;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        char **m = realloc(p->msg, sizeof *m * (size_t)cap);
        if (!m) return;
        p->msg = m;
        p->cap = cap;
    }
    const char *s = strncmp(problem, "model: ", 7) ? problem : problem + 7;
    if ((p->msg[p->n] = malloc(strlen(s) + 1)) != NULL) strcpy(p->msg[p->n++], s);
}

static void free_problems(struct problems *p) {
    for (int i = 0; i < p->n; i++) free(p->msg[i]);
    free(p->msg);
}

static const char *gguf_type_name(enum vq_gguf_type t) {
    static const char *const n[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}

/* Prints up to max bytes of s with control characters escaped. */
static void print_escaped(FILE *f, const char *s, uint64_t len, uint64_t max) {
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c < 32 || c == 127) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    if (len > max) fprintf(f, "... (%llu bytes)", (unsigned long long)len);
}

static void scalar_text(const struct vq_gguf_kv *kv, char *buf, size_t cap) {
    const uint8_t *p = kv->data;
    switch (kv->type) {
    case VQ_GGUF_U8: snprintf(buf, cap, "%u", p[0]); break;
    case VQ_GGUF_I8: snprintf(buf, cap, "%d", (int8_t)p[0]); break;
    case VQ_GGUF_BOOL: snprintf(buf, cap, "%s", p[0] ? "true" : "false"); break;
    case VQ_GGUF_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        snprintf(buf, cap, "%u", v);
        break;
    }
    case VQ_GGUF_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        snprintf(buf, cap, "%d", v);
        break;
    }
    case VQ_GGUF_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        snprintf(buf, cap, "%u", v);
        break;
    }
    case VQ_GGUF_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        snprintf(buf, cap, "%d", v);
        break;
    }
    case VQ_GGUF_F32: {
        float v;
        memcpy(&v, p, 4);
        snprintf(buf, cap, "%g", v);
        break;
    }
    case VQ_GGUF_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        snprintf(buf, cap, "%llu", (unsigned long long)v);
        break;
    }
    case VQ_GGUF_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        snprintf(buf, cap, "%lld", (long long)v);
        break;
    }
    case VQ_GGUF_F64: {
        double v;
        memcpy(&v, p, 8);
        snprintf(buf, cap, "%g", v);
        break;
    }
    default: snprintf(buf, cap, "?"); break;
    }
}

struct info_opts {
    const char *path;
    bool tensors, json, method_set;
    long n_ctx;
    struct vq_kv_opts ko;           /* --method / --bits, resolved as in every KV command */
    struct vq_codec_params cp, vcp; /* the resolved key / value codecs */
};

/* Parse step: 1 ok, 0 usage error (printed), -1 --help printed. */
static int info_parse(int argc, char **argv, struct info_opts *o) {
    const char *cmd = "info";
    memset(o, 0, sizeof *o);
    o->n_ctx = 4096;
    vq_kv_opts_init(&o->ko);
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},
        {"tensors", no_argument, 0, 'T'},
        {"json", no_argument, 0, 'j'},
        {"ctx", required_argument, 0, 'c'},
        {"ctx-size", required_argument, 0, 'c'},
        {"method", required_argument, 0, VQ_KVOPT_METHOD},
        {"bits", required_argument, 0, VQ_KVOPT_BITS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:c:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'm':
            if (o->path) {
                fprintf(stderr, "%s: one model at a time ('%s' and '%s')\n", cmd, o->path, optarg);
                return 0;
            }
            o->path = optarg;
            break;
        case 'T': o->tensors = true; break;
        case 'j': o->json = true; break;
        case 'c': ok = vq_opt_long(cmd, "--ctx", optarg, 1, 1L << 30, &o->n_ctx); break;
        case VQ_KVOPT_METHOD:
            ok = vq_kv_opts_handle(&o->ko, cmd, c, optarg) == 1;
            o->method_set = true;
            break;
        case VQ_KVOPT_BITS: ok = vq_kv_opts_handle(&o->ko, cmd, c, optarg) == 1; break;
        case 'h': usage(stdout); return -1;
        case ':':
        case '?': vq_cli_bad_option(cmd, c, argc, argv, lo); return 0;
        }
        if (!ok) return 0;
    }
    for (; optind < argc; optind++) { /* the model may also be the last argument */
        if (o->path) {
            fprintf(stderr, "%s: one model at a time ('%s' and '%s')\n", cmd, o->path,
                    argv[optind]);
            return 0;
        }
        o->path = argv[optind];
    }
    static char model_buf[4096];
    o->path = vq_cli_model(o->path, model_buf, sizeof model_buf); /* default: the default model */
    char err[256];
    if (vq_kv_spec_codecs(&o->ko.s, &o->cp, &o->vcp, err, sizeof err) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 0;
    }
    if (o->ko.s.bits && !o->method_set) {
        fprintf(stderr, "%s: --bits needs --method\n", cmd);
        return 0;
    }
    return 1;
}

/* Everything an info run holds and computes; info_free releases it (any field may be NULL). */
struct info_state {
    vq_gguf *g;
    vq_model *m;
    const struct vq_model_info *I; /* NULL when the engine cannot run the file */
    char model_err[320];
    struct problems pr;
    int64_t type_count[64], type_bytes[64], total; /* tensor type histogram */
    size_t fp16_per_tok, m_bytes_tok;              /* KV geometry */
    double mbits;
    vq_status mst;
};

static void info_free(struct info_state *s) {
    free_problems(&s->pr);
    vq_model_free(s->m);
    vq_gguf_close(s->g);
}

/* Build step: opens the GGUF file (exit code 1 when unreadable, else 0), loads the engine view
 * or collects why it cannot, and computes the tensor histogram and KV geometry. */
static int info_build(const struct info_opts *o, struct info_state *s) {
    vq_status st;
    s->g = vq_gguf_open(o->path, &st);
    if (!s->g) {
        fprintf(stderr, "%s: %s (%s)\n", "info", vq_gguf_last_error(), vq_status_str(st));
        return 1;
    }
    /* the engine view (architecture, geometry) may fail for files that are valid GGUF */
    s->m = vq_model_load(o->path, &st);
    s->I = s->m ? vq_model_info_get(s->m) : NULL;
    if (!s->m) {
        snprintf(s->model_err, sizeof s->model_err, "%s", vq_engine_last_error());
        if (vq_model_check(o->path, add_problem, &s->pr) < 0 || s->pr.n == 0)
            add_problem(&s->pr, s->model_err); /* e.g. out of memory: the load's own message */
    } else if (vq_model_check(o->path, add_problem, &s->pr) > 0) {
        /* loads, but the run would be refused (the tokenizer): the same checks as generate */
        snprintf(s->model_err, sizeof s->model_err, "%s", s->pr.msg[0]);
    }

    /* tensor type histogram */
    for (int64_t i = 0; i < vq_gguf_n_tensors(s->g); i++) {
        const struct vq_gguf_tensor *t = vq_gguf_tensor_at(s->g, i);
        if (t->type < 64) {
            s->type_count[t->type]++;
            s->type_bytes[t->type] += (int64_t)t->nbytes;
        }
        s->total += (int64_t)t->nbytes;
    }
    /* KV geometry */
    const struct vq_model_info *I = s->I;
    struct vq_codec_params cp = o->cp;
    s->mbits = vq_codec_params_bits(&cp);
    s->mst = VQ_STATUS_OK;
    if (I) {
        s->fp16_per_tok = (size_t)2 * (size_t)I->n_layers * (size_t)I->n_kv_heads *
                          (size_t)I->head_dim * 2;
        if (o->method_set) {
            cp.head_dim = I->head_dim;
            size_t per_tok[2] = {0, 0};
            for (int r = 0; r < 2 && s->mst == VQ_STATUS_OK; r++) {
                cp.role = r ? VQ_ROLE_VALUE : VQ_ROLE_KEY;
                vq_codec *c = vq_codec_create(&cp, &s->mst);
                if (c) {
                    per_tok[r] = vq_codec_block_bytes(c) / (size_t)vq_codec_block_tokens(c);
                    vq_codec_free(c);
                }
            }
            s->m_bytes_tok = (per_tok[0] + per_tok[1]) * (size_t)I->n_layers *
                             (size_t)I->n_kv_heads;
        }
    }
    return 0;
}

/* JSON print step, part 1: the metadata object, tensor types and (--tensors) tensor list. */
static void info_json_file(const struct info_opts *o, const struct info_state *s, cJSON *js) {
    vq_gguf *g = s->g;
    cJSON *meta = cJSON_AddObjectToObject(js, "metadata");
    cJSON_AddStringToObject(js, "file", o->path);
    cJSON_AddNumberToObject(js, "gguf_version", vq_gguf_version(g));
    for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) {
        const struct vq_gguf_kv *kv = vq_gguf_kv_at(g, i);
        char key[256], val[128];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255),
                 kv->key.ptr);
        if (kv->type == VQ_GGUF_STRING) {
            struct vq_gguf_str str;
            vq_gguf_get_str(g, key, &str);
            size_t n = str.len < 4096 ? (size_t)str.len : 4096;
            char *z = malloc(n + 1);
            if (z) {
                memcpy(z, str.ptr, n);
                z[n] = 0;
                cJSON_AddStringToObject(meta, key, z);
                free(z);
            }
        } else if (kv->type == VQ_GGUF_ARRAY) {
            snprintf(val, sizeof val, "array<%s>[%llu]", gguf_type_name(kv->arr_type),
                     (unsigned long long)kv->arr_count);
            cJSON_AddStringToObject(meta, key, val);
        } else {
            scalar_text(kv, val, sizeof val);
            if (kv->type == VQ_GGUF_BOOL) cJSON_AddBoolToObject(meta, key, kv->data[0] != 0);
            else cJSON_AddNumberToObject(meta, key, atof(val));
        }
    }
    cJSON *types = cJSON_AddObjectToObject(js, "tensor_types");
    for (int t = 0; t < 64; t++)
        if (s->type_count[t])
            cJSON_AddNumberToObject(types, vq_ggml_type_name((uint32_t)t),
                                    (double)s->type_count[t]);
    cJSON_AddNumberToObject(js, "n_tensors", (double)vq_gguf_n_tensors(g));
    cJSON_AddNumberToObject(js, "tensor_bytes", (double)s->total);
    if (o->tensors) {
        cJSON *arr = cJSON_AddArrayToObject(js, "tensors");
        for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
            const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
            cJSON *to = cJSON_CreateObject();
            char nm[80];
            snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.ptr);
            cJSON_AddStringToObject(to, "name", nm);
            cJSON_AddStringToObject(to, "type", vq_ggml_type_name(t->type));
            cJSON *sh = cJSON_AddArrayToObject(to, "ne");
            for (uint32_t d = 0; d < t->n_dims; d++)
                cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
            cJSON_AddNumberToObject(to, "bytes", (double)t->nbytes);
            cJSON_AddItemToArray(arr, to);
        }
    }
}

/* JSON print step, part 2: the model object (geometry, KV bytes) or the engine's problems. */
static void info_json_model(const struct info_opts *o, const struct info_state *s, cJSON *js) {
    const struct vq_model_info *I = s->I;
    if (!I || s->pr.n) {
        cJSON_AddStringToObject(js, "engine_error", s->model_err);
        cJSON *arr = cJSON_AddArrayToObject(js, "engine_problems");
        for (int i = 0; i < s->pr.n; i++)
            cJSON_AddItemToArray(arr, cJSON_CreateString(s->pr.msg[i]));
    }
    if (!I) return;
    const long n_ctx = o->n_ctx;
    cJSON *kvg = cJSON_AddObjectToObject(js, "model");
    cJSON_AddStringToObject(kvg, "arch", I->arch);
    cJSON_AddNumberToObject(kvg, "n_layers", I->n_layers);
    cJSON_AddNumberToObject(kvg, "n_heads", I->n_heads);
    cJSON_AddNumberToObject(kvg, "n_kv_heads", I->n_kv_heads);
    cJSON_AddNumberToObject(kvg, "head_dim", I->head_dim);
    cJSON_AddNumberToObject(kvg, "n_embd", I->n_embd);
    cJSON_AddNumberToObject(kvg, "n_ff", I->n_ff);
    cJSON_AddNumberToObject(kvg, "n_vocab", I->n_vocab);
    cJSON_AddNumberToObject(kvg, "n_ctx_train", (double)I->n_ctx_train);
    cJSON_AddNumberToObject(kvg, "rope_theta", I->rope_theta);
    cJSON_AddStringToObject(kvg, "rope_type", I->rope_type == VQ_ROPE_NEOX ? "neox" : "norm");
    cJSON_AddBoolToObject(kvg, "tied_embeddings", I->tied_embeddings);
    cJSON_AddBoolToObject(kvg, "qk_norm", I->has_qk_norm);
    cJSON_AddBoolToObject(kvg, "fused_qkv", I->fused_qkv);
    cJSON_AddBoolToObject(kvg, "fused_gate_up", I->fused_gate_up);
    cJSON_AddNumberToObject(kvg, "swa_window", I->swa_window);
    cJSON_AddNumberToObject(kvg, "n_swa_layers", I->n_swa_layers);
    cJSON_AddNumberToObject(kvg, "kv_fp16_bytes_per_token", (double)s->fp16_per_tok);
    cJSON_AddNumberToObject(kvg, "kv_fp16_bytes_at_ctx", (double)s->fp16_per_tok * (double)n_ctx);
    cJSON_AddNumberToObject(kvg, "ctx", (double)n_ctx);
    if (o->method_set && s->mst == VQ_STATUS_OK) {
        cJSON_AddStringToObject(kvg, "method", vq_method_name(o->cp.method));
        cJSON_AddNumberToObject(kvg, "bits", s->mbits);
        cJSON_AddNumberToObject(kvg, "kv_method_bytes_per_token", (double)s->m_bytes_tok);
        cJSON_AddNumberToObject(kvg, "kv_method_bytes_at_ctx",
                                (double)s->m_bytes_tok * (double)n_ctx);
    }
}

/* JSON print step: one JSON object on stdout. */
static void info_print_json(const struct info_opts *o, const struct info_state *s) {
    cJSON *js = cJSON_CreateObject();
    info_json_file(o, s, js);
    info_json_model(o, s, js);
    cJSON_AddBoolToObject(js, "engine_supported", s->I != NULL);
    char *str = cJSON_Print(js);
    if (str) {
        puts(str);
        free(str);
    }
    cJSON_Delete(js);
}

/* Text print step, part 1: one metadata key and its value (strings escaped and cut short). */
static void info_text_kv(vq_gguf *g, const struct vq_gguf_kv *kv) {
    printf("  %-40.*s ", (int)kv->key.len, kv->key.ptr);
    if (kv->type == VQ_GGUF_STRING) {
        uint64_t len;
        memcpy(&len, kv->data, 8);
        putchar('"');
        print_escaped(stdout, (const char *)kv->data + 8, len, 120);
        putchar('"');
    } else if (kv->type == VQ_GGUF_ARRAY) {
        printf("array<%s>[%llu]", gguf_type_name(kv->arr_type), (unsigned long long)kv->arr_count);
        if (kv->arr_type == VQ_GGUF_STRING && kv->arr_count) {
            struct vq_gguf_str s;
            printf(" [");
            for (uint64_t j = 0; j < kv->arr_count && j < 4; j++) {
                vq_gguf_arr_str(g, kv, j, &s);
                printf("%s\"", j ? ", " : "");
                print_escaped(stdout, s.ptr, s.len, 24);
                putchar('"');
            }
            printf("%s]", kv->arr_count > 4 ? ", ..." : "");
        }
    } else {
        char val[128];
        scalar_text(kv, val, sizeof val);
        printf("%s", val);
    }
    putchar('\n');
}

/* Text print step, part 2: header, metadata, tensor types and (--tensors) tensor list. */
static void info_text_file(const struct info_opts *o, const struct info_state *s) {
    vq_gguf *g = s->g;
    printf(
        "file: %s\nGGUF version %u, %lld metadata keys, %lld tensors,"
        " %.1f MB of tensor data\n\n",
        o->path, vq_gguf_version(g), (long long)vq_gguf_n_kv(g), (long long)vq_gguf_n_tensors(g),
        (double)s->total / 1e6);
    printf("metadata:\n");
    for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) info_text_kv(g, vq_gguf_kv_at(g, i));
    printf("\ntensor types:\n");
    for (int t = 0; t < 64; t++)
        if (s->type_count[t])
            printf("  %-6s %5lld tensors %10.1f MB\n", vq_ggml_type_name((uint32_t)t),
                   (long long)s->type_count[t], (double)s->type_bytes[t] / 1e6);
    if (o->tensors) {
        printf("\ntensors:\n");
        for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
            const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
            printf("  %-32.*s %-6s [", (int)t->name.len, t->name.ptr, vq_ggml_type_name(t->type));
            for (uint32_t d = 0; d < t->n_dims; d++)
                printf("%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
            printf("] %llu bytes\n", (unsigned long long)t->nbytes);
        }
    }
}

/* "engine: cannot run this model" and every reason, when there is one. */
static void print_problems(const struct problems *pr) {
    if (!pr->n) return;
    printf("\nengine: cannot run this model (%d problem%s):\n", pr->n, pr->n == 1 ? "" : "s");
    for (int i = 0; i < pr->n && i < 24; i++) printf("  - %s\n", pr->msg[i]);
    if (pr->n > 24) printf("  ... and %d more\n", pr->n - 24);
}

/* Text print step, part 3: the model geometry and KV bytes, and why the engine cannot run it
 * (a file may load and still be refused for its tokenizer: then both). */
static void info_text_model(const struct info_opts *o, const struct info_state *s) {
    const struct vq_model_info *I = s->I;
    if (!I) {
        print_problems(&s->pr);
        return;
    }
    const long n_ctx = o->n_ctx;
    const size_t fp16_per_tok = s->fp16_per_tok, m_bytes_tok = s->m_bytes_tok;
    printf(
        "\nmodel: %s%s%s, %d layers, %d heads, %d kv heads, head_dim %d, n_embd %d, n_ff %d,"
        " vocab %d,\n"
        "       n_ctx_train %lld, rope %s theta %g (%d dims), rms eps %g, %s output head%s\n",
        I->arch, I->name[0] ? " " : "", I->name, I->n_layers, I->n_heads, I->n_kv_heads,
        I->head_dim, I->n_embd, I->n_ff, I->n_vocab, (long long)I->n_ctx_train,
        I->rope_type == VQ_ROPE_NEOX ? "neox" : "norm", I->rope_theta, I->rope_dim, I->rms_eps,
        I->tied_embeddings ? "tied" : "separate", I->has_qkv_bias ? ", q/k/v biases" : "");
    if (I->has_qk_norm || I->fused_qkv || I->fused_gate_up)
        printf("       %s%s%s\n", I->has_qk_norm ? "per-head q/k RMSNorm " : "",
               I->fused_qkv ? "fused attn_qkv " : "", I->fused_gate_up ? "fused ffn gate+up" : "");
    if (I->n_swa_layers)
        printf("       sliding window of %d tokens on %d of %d layers\n", I->swa_window,
               I->n_swa_layers, I->n_layers);
    printf("KV geometry: %d layers x %d kv heads x head_dim %d (GQA %d:1)\n", I->n_layers,
           I->n_kv_heads, I->head_dim, I->n_heads / I->n_kv_heads);
    printf("  fp16 K+V: %zu bytes/token, %.2f MB at ctx %ld\n", fp16_per_tok,
           (double)fp16_per_tok * (double)n_ctx / 1e6, n_ctx);
    if (o->method_set) {
        if (s->mst == VQ_STATUS_OK)
            printf("  %s %g-bit K+V: %zu bytes/token, %.2f MB at ctx %ld (%.2fx smaller)\n",
                   vq_method_name(o->cp.method), s->mbits, m_bytes_tok,
                   (double)m_bytes_tok * (double)n_ctx / 1e6, n_ctx,
                   m_bytes_tok ? (double)fp16_per_tok / (double)m_bytes_tok : 0.0);
        else vq_opt_codec_error("info", "KV", o->cp.method, o->cp.bits, I->head_dim, s->mst);
    }
    print_problems(&s->pr);
}

int vq_cmd_info(int argc, char **argv) {
    struct info_opts o;
    const int pr = info_parse(argc, argv, &o);
    if (pr < 0) return 0;
    if (!pr) return 2;
    struct info_state s;
    memset(&s, 0, sizeof s);
    if (info_build(&o, &s)) return 1;
    if (o.json) info_print_json(&o, &s);
    else {
        info_text_file(&o, &s);
        info_text_model(&o, &s);
    }
    const int rc = o.method_set && s.mst != VQ_STATUS_OK ? 2 : 0;
    info_free(&s);
    return rc;
}
