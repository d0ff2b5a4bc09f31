/* cmd_info.c — `veloxquant info MODEL`: GGUF metadata, tensor types and the KV-cache geometry
 * (bytes per token for fp16 and for a chosen method). Opening is fully validated, so a truncated
 * or corrupt file gives an error and exit status 1. A valid GGUF file the engine cannot run
 * (unsupported architecture, missing keys or tensors, tensor types without kernels) is listed
 * all the same, with every reason (vq_model_check), and exits 0. */
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
#include "engine/ggml.h"
#include "engine/gguf.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: veloxquant info [options] MODEL\n\n"
        "Prints a GGUF file's metadata, its tensor types and the KV-cache geometry of the model.\n\n"
        "  -m, --model PATH   the GGUF file (or give it as the last argument)\n"
        "      --tensors      list every tensor (name, type, shape, bytes)\n"
        "      --ctx N        context length used for the KV byte figures (default 4096)\n"
        "      --method M     also show the KV bytes with method M for keys and values\n"
        "      --bits B       bits for --method (default: the method's default)\n"
        "      --json         one JSON object instead of text\n\n"
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
    static const char *const n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
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
    case VQ_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); snprintf(buf, cap, "%u", v); break; }
    case VQ_GGUF_I16: { int16_t v; memcpy(&v, p, 2); snprintf(buf, cap, "%d", v); break; }
    case VQ_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); snprintf(buf, cap, "%u", v); break; }
    case VQ_GGUF_I32: { int32_t v; memcpy(&v, p, 4); snprintf(buf, cap, "%d", v); break; }
    case VQ_GGUF_F32: { float v; memcpy(&v, p, 4); snprintf(buf, cap, "%g", v); break; }
    case VQ_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); snprintf(buf, cap, "%llu", (unsigned long long)v); break; }
    case VQ_GGUF_I64: { int64_t v; memcpy(&v, p, 8); snprintf(buf, cap, "%lld", (long long)v); break; }
    case VQ_GGUF_F64: { double v; memcpy(&v, p, 8); snprintf(buf, cap, "%g", v); break; }
    default: snprintf(buf, cap, "?"); break;
    }
}

int vq_cmd_info(int argc, char **argv) {
    const char *cmd = "info", *path = NULL;
    bool tensors = false, json = false, method_set = false;
    long n_ctx = 4096;
    struct vq_kv_opts ko;   /* --method / --bits, resolved as in every KV command */
    vq_kv_opts_init(&ko);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!val) { fprintf(stderr, "%s: %s needs a value\n", cmd, a); return 2; }
            path = argv[++i];
        }
        else if (!strcmp(a, "--tensors")) tensors = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--ctx")) { i++; if (!vq_opt_long(cmd, a, val, 1, 1L << 30, &n_ctx)) return 2; }
        else if (!strcmp(a, "--method")) { i++; if (vq_kv_opts_handle(&ko, cmd, VQ_KVOPT_METHOD, val) != 1) return 2; method_set = true; }
        else if (!strcmp(a, "--bits")) { i++; if (vq_kv_opts_handle(&ko, cmd, VQ_KVOPT_BITS, val) != 1) return 2; }
        else if (a[0] == '-' && a[1]) { fprintf(stderr, "%s: unknown option '%s' (see veloxquant info --help)\n", cmd, a); return 2; }
        else if (path) { fprintf(stderr, "%s: one model at a time ('%s' and '%s')\n", cmd, path, a); return 2; }
        else path = a;
    }
    if (!path) { fprintf(stderr, "%s: give a GGUF file (veloxquant info MODEL)\n", cmd); return 2; }
    struct vq_codec_params cp, vcp;
    if (!vq_kv_opts_resolve(cmd, &ko, &cp, &vcp)) return 2;
    const enum vq_method method = cp.method;
    if (ko.bits && !method_set) { fprintf(stderr, "%s: --bits needs --method\n", cmd); return 2; }

    vq_status st;
    vq_gguf *g = vq_gguf_open(path, &st);
    if (!g) {
        fprintf(stderr, "%s: %s (%s)\n", cmd, vq_gguf_last_error(), vq_status_str(st));
        return 1;
    }
    /* the engine view (architecture, geometry) may fail for files that are valid GGUF */
    vq_model *m = vq_model_load(path, &st);
    const struct vq_model_info *I = m ? vq_model_info_get(m) : NULL;
    char model_err[320] = "";
    struct problems pr = {NULL, 0, 0};
    if (!m) {
        snprintf(model_err, sizeof model_err, "%s", vq_engine_last_error());
        if (vq_model_check(path, add_problem, &pr) < 0 || pr.n == 0)
            add_problem(&pr, model_err);   /* e.g. out of memory: the load's own message */
    }

    /* tensor type histogram */
    int64_t type_count[64] = {0}, type_bytes[64] = {0};
    int64_t total = 0;
    for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
        const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
        if (t->type < 64) { type_count[t->type]++; type_bytes[t->type] += (int64_t)t->nbytes; }
        total += (int64_t)t->nbytes;
    }
    /* KV geometry */
    size_t fp16_per_tok = 0, m_bytes_tok = 0;
    const double mbits = vq_codec_params_bits(&cp);
    vq_status mst = VQ_STATUS_OK;
    if (I) {
        fp16_per_tok = (size_t)2 * (size_t)I->n_layers * (size_t)I->n_kv_heads * (size_t)I->head_dim * 2;
        if (method_set) {
            cp.head_dim = I->head_dim;
            size_t per_tok[2] = {0, 0};
            for (int r = 0; r < 2 && mst == VQ_STATUS_OK; r++) {
                cp.role = r ? VQ_ROLE_VALUE : VQ_ROLE_KEY;
                vq_codec *c = vq_codec_create(&cp, &mst);
                if (c) {
                    per_tok[r] = vq_codec_block_bytes(c) / (size_t)vq_codec_block_tokens(c);
                    vq_codec_free(c);
                }
            }
            m_bytes_tok = (per_tok[0] + per_tok[1]) * (size_t)I->n_layers * (size_t)I->n_kv_heads;
        }
    }

    if (json) {
        cJSON *js = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(js, "metadata");
        cJSON_AddStringToObject(js, "file", path);
        cJSON_AddNumberToObject(js, "gguf_version", vq_gguf_version(g));
        for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) {
            const struct vq_gguf_kv *kv = vq_gguf_kv_at(g, i);
            char key[256], val[128];
            snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255), kv->key.ptr);
            if (kv->type == VQ_GGUF_STRING) {
                struct vq_gguf_str s;
                vq_gguf_get_str(g, key, &s);
                size_t n = s.len < 4096 ? (size_t)s.len : 4096;
                char *z = malloc(n + 1);
                if (z) { memcpy(z, s.ptr, n); z[n] = 0; cJSON_AddStringToObject(meta, key, z); free(z); }
            } else if (kv->type == VQ_GGUF_ARRAY) {
                snprintf(val, sizeof val, "array<%s>[%llu]", gguf_type_name(kv->arr_type), (unsigned long long)kv->arr_count);
                cJSON_AddStringToObject(meta, key, val);
            } else {
                scalar_text(kv, val, sizeof val);
                if (kv->type == VQ_GGUF_BOOL) cJSON_AddBoolToObject(meta, key, kv->data[0] != 0);
                else cJSON_AddNumberToObject(meta, key, atof(val));
            }
        }
        cJSON *types = cJSON_AddObjectToObject(js, "tensor_types");
        for (int t = 0; t < 64; t++)
            if (type_count[t]) cJSON_AddNumberToObject(types, vq_ggml_type_name((uint32_t)t), (double)type_count[t]);
        cJSON_AddNumberToObject(js, "n_tensors", (double)vq_gguf_n_tensors(g));
        cJSON_AddNumberToObject(js, "tensor_bytes", (double)total);
        if (tensors) {
            cJSON *arr = cJSON_AddArrayToObject(js, "tensors");
            for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
                const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
                cJSON *o = cJSON_CreateObject();
                char nm[80];
                snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.ptr);
                cJSON_AddStringToObject(o, "name", nm);
                cJSON_AddStringToObject(o, "type", vq_ggml_type_name(t->type));
                cJSON *sh = cJSON_AddArrayToObject(o, "ne");
                for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
                cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
                cJSON_AddItemToArray(arr, o);
            }
        }
        if (I) {
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
            cJSON_AddNumberToObject(kvg, "kv_fp16_bytes_per_token", (double)fp16_per_tok);
            cJSON_AddNumberToObject(kvg, "kv_fp16_bytes_at_ctx", (double)fp16_per_tok * (double)n_ctx);
            cJSON_AddNumberToObject(kvg, "ctx", (double)n_ctx);
            if (method_set && mst == VQ_STATUS_OK) {
                cJSON_AddStringToObject(kvg, "method", vq_method_name(method));
                cJSON_AddNumberToObject(kvg, "bits", mbits);
                cJSON_AddNumberToObject(kvg, "kv_method_bytes_per_token", (double)m_bytes_tok);
                cJSON_AddNumberToObject(kvg, "kv_method_bytes_at_ctx", (double)m_bytes_tok * (double)n_ctx);
            }
        } else {
            cJSON_AddStringToObject(js, "engine_error", model_err);
            cJSON *arr = cJSON_AddArrayToObject(js, "engine_problems");
            for (int i = 0; i < pr.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(pr.msg[i]));
        }
        cJSON_AddBoolToObject(js, "engine_supported", I != NULL);
        char *s = cJSON_Print(js);
        if (s) { puts(s); free(s); }
        cJSON_Delete(js);
    } else {
        printf("file: %s\nGGUF version %u, %lld metadata keys, %lld tensors, %.1f MB of tensor data\n\n", path,
               vq_gguf_version(g), (long long)vq_gguf_n_kv(g), (long long)vq_gguf_n_tensors(g), (double)total / 1e6);
        printf("metadata:\n");
        for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) {
            const struct vq_gguf_kv *kv = vq_gguf_kv_at(g, i);
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
        printf("\ntensor types:\n");
        for (int t = 0; t < 64; t++)
            if (type_count[t])
                printf("  %-6s %5lld tensors %10.1f MB\n", vq_ggml_type_name((uint32_t)t), (long long)type_count[t],
                       (double)type_bytes[t] / 1e6);
        if (tensors) {
            printf("\ntensors:\n");
            for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
                const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
                printf("  %-32.*s %-6s [", (int)t->name.len, t->name.ptr, vq_ggml_type_name(t->type));
                for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
                printf("] %llu bytes\n", (unsigned long long)t->nbytes);
            }
        }
        if (I) {
            printf("\nmodel: %s%s%s, %d layers, %d heads, %d kv heads, head_dim %d, n_embd %d, n_ff %d, vocab %d,\n"
                   "       n_ctx_train %lld, rope %s theta %g (%d dims), rms eps %g, %s output head%s\n",
                   I->arch, I->name[0] ? " " : "", I->name, I->n_layers, I->n_heads, I->n_kv_heads, I->head_dim,
                   I->n_embd, I->n_ff, I->n_vocab, (long long)I->n_ctx_train,
                   I->rope_type == VQ_ROPE_NEOX ? "neox" : "norm", I->rope_theta, I->rope_dim, I->rms_eps,
                   I->tied_embeddings ? "tied" : "separate", I->has_qkv_bias ? ", q/k/v biases" : "");
            if (I->has_qk_norm || I->fused_qkv || I->fused_gate_up)
                printf("       %s%s%s\n", I->has_qk_norm ? "per-head q/k RMSNorm " : "",
                       I->fused_qkv ? "fused attn_qkv " : "", I->fused_gate_up ? "fused ffn gate+up" : "");
            if (I->n_swa_layers)
                printf("       sliding window of %d tokens on %d of %d layers\n", I->swa_window,
                       I->n_swa_layers, I->n_layers);
            printf("KV geometry: %d layers x %d kv heads x head_dim %d (GQA %d:1)\n", I->n_layers, I->n_kv_heads,
                   I->head_dim, I->n_heads / I->n_kv_heads);
            printf("  fp16 K+V: %zu bytes/token, %.2f MB at ctx %ld\n", fp16_per_tok,
                   (double)fp16_per_tok * (double)n_ctx / 1e6, n_ctx);
            if (method_set) {
                if (mst == VQ_STATUS_OK)
                    printf("  %s %g-bit K+V: %zu bytes/token, %.2f MB at ctx %ld (%.2fx smaller)\n",
                           vq_method_name(method), mbits, m_bytes_tok, (double)m_bytes_tok * (double)n_ctx / 1e6,
                           n_ctx, m_bytes_tok ? (double)fp16_per_tok / (double)m_bytes_tok : 0.0);
                else
                    vq_opt_codec_error(cmd, "KV", method, cp.bits, I->head_dim, mst);
            }
        } else {
            printf("\nengine: cannot run this model (%d problem%s):\n", pr.n, pr.n == 1 ? "" : "s");
            for (int i = 0; i < pr.n && i < 24; i++) printf("  - %s\n", pr.msg[i]);
            if (pr.n > 24) printf("  ... and %d more\n", pr.n - 24);
        }
    }
    free_problems(&pr);
    vq_model_free(m);
    vq_gguf_close(g);
    return method_set && mst != VQ_STATUS_OK ? 2 : 0;
}
