/*
 * results_json.c — results.json text: the writer, the strict reader (the schema's ranges) and
 * the file read / atomic write (results_json.h).
 */
#include "results_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>


/* Metric fields of struct vq_result, in the order they are written, with the range the reader
 * accepts: [lo, hi], or (lo, hi] when lo_open (the ranges of docs/results.schema.json:
 * minimum / exclusiveMinimum / maximum; test_eval_results checks that the two agree). */
static const struct {
    const char *name;
    size_t off;
    int integer;
    double lo, hi;
    int lo_open;
} METRICS[] = {
#define M(f, i, lo, hi, open) \
    { #f, offsetof(struct vq_result, f), i, lo, hi, open }
    M(prefill_tok_s, 0, 0, HUGE_VAL, 0),
    M(decode_tok_s, 0, 0, HUGE_VAL, 0),
    M(peak_rss_mb, 0, 0, HUGE_VAL, 1),
    M(kv_bytes, 1, 0, HUGE_VAL, 1),
    M(key_x, 0, 0, HUGE_VAL, 1),
    M(fullKV_x, 0, 0, HUGE_VAL, 1),
    M(bits_per_elem, 0, 0, 64, 1),
    M(tokens_generated, 0, 0, HUGE_VAL, 0),
    M(fp16_prefix_match, 0, 0, HUGE_VAL, 0),
    M(ppl, 0, 1, HUGE_VAL, 0),
    M(kld_mean, 0, 0, HUGE_VAL, 0),
    M(kld_median, 0, 0, HUGE_VAL, 0),
    M(kld_p99, 0, 0, HUGE_VAL, 0),
    M(top1, 0, 0, 1, 0),
    M(kld_full_mean, 0, 0, HUGE_VAL, 0),
    M(cosine_k, 0, -1, 1, 0),
    M(cosine_v, 0, -1, 1, 0),
#undef M
};
#define N_METRICS (sizeof METRICS / sizeof METRICS[0])

static double *metric(struct vq_result *e, size_t i) {
    return (double *)((char *)e + METRICS[i].off);
}
static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static double metric_c(const struct vq_result *e, size_t i) {
    return *(const double *)((const char *)e + METRICS[i].off);
}

/* ---- writer ------------------------------------------------------------------------------ */

static int add_num(cJSON *o, const char *k, double v) {
    return cJSON_AddNumberToObject(o, k, v) != NULL;
}
/* A malloc'd copy of s that is valid UTF-8 (JSON text must be): every byte that does not start
 * a well-formed sequence (RFC 3629: no overlong forms, surrogates or code points above
 * U+10FFFF) becomes U+FFFD. Model output can hold such bytes: byte-fallback tokens, or text
 * cut inside a character. NULL when out of memory. */
static char *utf8_valid_dup(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    const size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *w = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        const unsigned b = u[i];
        size_t len = b < 0x80               ? 1
                   : b >= 0xC2 && b <= 0xDF ? 2
                   : b >= 0xE0 && b <= 0xEF ? 3
                   : b >= 0xF0 && b <= 0xF4 ? 4
                                            : 0;
        uint32_t cp = len == 1 ? b : len ? b & (0x7F >> len) : 0;
        for (size_t j = 1; j < len; j++) {
            if (i + j >= n || (u[i + j] & 0xC0) != 0x80) {
                len = 0;
                break;
            }
            cp = cp << 6 | (u[i + j] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            len = 0;
        if (len) {
            memcpy(w, u + i, len);
            w += len;
            i += len;
        } else {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
        }
    }
    *w = 0;
    return out;
}

static cJSON *json_str(const char *v) {
    char *t = utf8_valid_dup(v ? v : "");
    cJSON *s = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return s;
}
static int add_str(cJSON *o, const char *k, const char *v) {
    cJSON *s = json_str(v);
    if (s && cJSON_AddItemToObject(o, k, s)) return 1;
    cJSON_Delete(s);
    return 0;
}

/* k: [v[0], ..., v[n-1]] (speed repeats). */
static int add_runs(cJSON *o, const char *k, const double *v, int n) {
    cJSON *a = cJSON_CreateDoubleArray(v, n);
    if (a && cJSON_AddItemToObject(o, k, a)) return 1;
    cJSON_Delete(a);
    return 0;
}

static cJSON *result_to_json(const struct vq_result *e) {
    cJSON *o = cJSON_CreateObject(), *c = cJSON_CreateObject(), *opts = cJSON_CreateObject();
    int ok = o && c && opts;
    if (ok) {
        const struct vq_result_config *cf = &e->config;
        ok = add_str(c, "name", cf->name) && (!cf->engine[0] || add_str(c, "engine", cf->engine)) &&
             add_str(c, "k_method", cf->k_method) && add_str(c, "v_method", cf->v_method) &&
             add_num(c, "k_bits", cf->k_bits) && add_num(c, "v_bits", cf->v_bits);
        for (int i = 0; ok && i < cf->n_opts; i++)
            ok = add_num(opts, cf->opts[i].key, (double)cf->opts[i].value);
        if (ok) {
            cJSON_AddItemToObject(c, "options", opts);
            opts = NULL;
        }
        if (ok) {
            cJSON_AddItemToObject(o, "config", c);
            c = NULL;
        }
    }
    for (size_t i = 0; ok && i < N_METRICS; i++) {
        double v = metric_c(e, i);
        if (isfinite(v)) ok = add_num(o, METRICS[i].name, v);
    }
    if (ok && e->n_prefill_runs > 0)
        ok = add_runs(o, "prefill_tok_s_runs", e->prefill_runs, e->n_prefill_runs);
    if (ok && e->n_decode_runs > 0)
        ok = add_runs(o, "decode_tok_s_runs", e->decode_runs, e->n_decode_runs);
    if (ok && e->output_preview) ok = add_str(o, "output_preview", e->output_preview);
    if (ok && e->error) ok = add_str(o, "error", e->error);
    cJSON_Delete(c);
    cJSON_Delete(opts);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *vq_results_to_json(const struct vq_results *r) {
    cJSON *root = cJSON_CreateObject();
    cJSON *hw = cJSON_CreateObject(), *md = cJSON_CreateObject(), *pr = cJSON_CreateObject();
    cJSON *prompts = cJSON_CreateArray(), *res = cJSON_CreateArray();
    int ok = root && hw && md && pr && prompts && res;
    if (ok)
        ok = add_str(root, "schema", VQ_RESULTS_SCHEMA) &&
             add_str(root, "created_utc", r->created_utc) &&
             add_str(root, "git_commit", r->git_commit);
    if (ok)
        ok = add_str(hw, "cpu", r->hardware.cpu) && add_num(hw, "cores", r->hardware.cores) &&
             add_str(hw, "isa", r->hardware.isa) && add_num(hw, "ram_mb", r->hardware.ram_mb);
    if (ok)
        ok = add_str(md, "file", r->model.file) && add_str(md, "sha256", r->model.sha256) &&
             add_str(md, "arch", r->model.arch) && add_num(md, "n_layers", r->model.n_layers) &&
             add_num(md, "n_kv_heads", r->model.n_kv_heads) &&
             add_num(md, "head_dim", r->model.head_dim);
    if (ok && r->model.layer_window) {
        cJSON *lw = cJSON_CreateIntArray(r->model.layer_window, r->model.n_layers);
        ok = lw && cJSON_AddItemToObject(md, "layer_window", lw);
        if (!ok) cJSON_Delete(lw);
    }
    for (int i = 0; ok && i < r->protocol.n_prompts; i++) {
        cJSON *s = json_str(r->protocol.prompts[i]);
        ok = s != NULL;
        if (ok) cJSON_AddItemToArray(prompts, s);
    }
    if (ok) {
        cJSON_AddItemToObject(pr, "prompts", prompts);
        prompts = NULL;
        ok = add_str(pr, "corpus", r->protocol.corpus) && add_num(pr, "ctx", r->protocol.ctx) &&
             add_num(pr, "chunks", r->protocol.chunks) &&
             add_num(pr, "max_tokens", r->protocol.max_tokens) &&
             add_num(pr, "seed", (double)r->protocol.seed);
    }
    for (int i = 0; ok && i < r->n_results; i++) {
        cJSON *e = result_to_json(&r->results[i]);
        ok = e != NULL;
        if (ok) cJSON_AddItemToArray(res, e);
    }
    if (ok) {
        cJSON_AddItemToObject(root, "hardware", hw);
        hw = NULL;
        cJSON_AddItemToObject(root, "model", md);
        md = NULL;
        cJSON_AddItemToObject(root, "protocol", pr);
        pr = NULL;
        cJSON_AddItemToObject(root, "results", res);
        res = NULL;
    }
    char *txt = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(hw);
    cJSON_Delete(md);
    cJSON_Delete(pr);
    cJSON_Delete(prompts);
    cJSON_Delete(res);
    return txt;
}

/* ---- reader ------------------------------------------------------------------------------ */

struct rd {
    char *err;
    size_t errlen;
    int bad;
};

static void fail(struct rd *d, const char *fmt, ...) {
    if (d->bad++) return; /* keep the first reason */
    if (!d->err || !d->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, d->errlen, fmt, ap);
    va_end(ap);
}

static const cJSON *get(struct rd *d, const cJSON *o, const char *where, const char *k,
                        int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v && required) fail(d, "%s: missing \"%s\"", where, k);
    return v;
}

static void rd_str(struct rd *d, const cJSON *o, const char *where, const char *k, char *dst,
                   size_t cap, int required) {
    const cJSON *v = get(d, o, where, k, required);
    if (!v) return;
    if (!cJSON_IsString(v)) {
        fail(d, "%s.%s: expected a string", where, k);
        return;
    }
    if (strlen(v->valuestring) >= cap) {
        fail(d, "%s.%s: string too long", where, k);
        return;
    }
    copy_str(dst, cap, v->valuestring);
}

/* rd_str for the schema's strings with minLength 1: an empty string is refused by name. */
static void rd_str1(struct rd *d, const cJSON *o, const char *where, const char *k, char *dst,
                    size_t cap, int required) {
    rd_str(d, o, where, k, dst, cap, required);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!d->bad && v && cJSON_IsString(v) && !v->valuestring[0])
        fail(d, "%s.%s: empty string (the schema asks for at least 1 character)", where, k);
}

static void rd_dstr(struct rd *d, const cJSON *o, const char *where, const char *k, char **dst,
                    int required) {
    const cJSON *v = get(d, o, where, k, required);
    if (!v) return;
    if (!cJSON_IsString(v)) {
        fail(d, "%s.%s: expected a string", where, k);
        return;
    }
    if (vq_str_set(dst, v->valuestring) != VQ_STATUS_OK) fail(d, "out of memory");
}

/* A number in [lo, hi] ((lo, hi] when lo_open); NAN (and a failure) otherwise. */
static double rd_num_range(struct rd *d, const cJSON *o, const char *where, const char *k,
                           int required, double lo, double hi, int lo_open, int integer) {
    const cJSON *v = get(d, o, where, k, required);
    if (!v) return NAN;
    if (!cJSON_IsNumber(v)) {
        fail(d, "%s.%s: expected a number", where, k);
        return NAN;
    }
    if (!isfinite(v->valuedouble)) { /* 1e999 parses as an infinity */
        fail(d, "%s.%s: %s is not a finite number", where, k,
             isnan(v->valuedouble) ? "NaN" : "a value beyond the double range");
        return NAN;
    }
    double x = v->valuedouble;
    if (x < lo || (lo_open && x == lo) || x > hi) {
        fail(d, "%s.%s: %.15g out of range %c%.15g, %.15g]", where, k, x, lo_open ? '(' : '[', lo,
             hi);
        return NAN;
    }
    if (integer && x != floor(x)) {
        fail(d, "%s.%s: expected an integer", where, k);
        return NAN;
    }
    return x;
}

static double rd_num(struct rd *d, const cJSON *o, const char *where, const char *k, int required,
                     double lo, double hi, int integer) {
    return rd_num_range(d, o, where, k, required, lo, hi, 0, integer);
}

static const cJSON *rd_obj(struct rd *d, const cJSON *o, const char *where, const char *k) {
    const cJSON *v = get(d, o, where, k, 1);
    if (v && !cJSON_IsObject(v)) {
        fail(d, "%s.%s: expected an object", where, k);
        return NULL;
    }
    return v;
}

/* model.layer_window: optional; n_layers integers in [0, 2^24] when present. */
static void rd_layer_window(struct rd *d, const cJSON *md, struct vq_results_model *m) {
    const cJSON *lw = get(d, md, "model", "layer_window", 0);
    if (!lw || d->bad) return;
    if (!cJSON_IsArray(lw) || cJSON_GetArraySize(lw) != m->n_layers) {
        fail(d, "model.layer_window: expected an array of n_layers (%d) integers", m->n_layers);
        return;
    }
    if (!(m->layer_window = malloc(sizeof *m->layer_window * (size_t)m->n_layers))) {
        fail(d, "out of memory");
        return;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, lw) {
        const double w = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(w >= 0 && w <= (1 << 24) && w == floor(w))) {
            fail(d, "model.layer_window[%d]: expected an integer in [0, %d]", i, 1 << 24);
            return;
        }
        m->layer_window[i++] = (int)w;
    }
}

/* A speed-repeats array (optional): 1 .. VQ_RESULT_MAX_RUNS finite numbers >= 0 into v, their
 * count into *n (0 when absent). */
static void rd_runs(struct rd *d, const cJSON *o, const char *where, const char *k, double *v,
                    int *n) {
    const cJSON *a = get(d, o, where, k, 0), *it;
    *n = 0;
    if (!a || d->bad) return;
    const int len = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (len < 1 || len > VQ_RESULT_MAX_RUNS) {
        fail(d, "%s.%s: expected an array of 1 to %d numbers", where, k, VQ_RESULT_MAX_RUNS);
        return;
    }
    cJSON_ArrayForEach(it, a) {
        const double x = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(x >= 0 && isfinite(x))) {
            fail(d, "%s.%s[%d]: expected a finite number >= 0", where, k, *n);
            *n = 0;
            return;
        }
        v[(*n)++] = x;
    }
}

static void rd_result(struct rd *d, const cJSON *o, int idx, struct vq_result *e) {
    char where[48];
    snprintf(where, sizeof where, "results[%d]", idx);
    if (!cJSON_IsObject(o)) {
        fail(d, "%s: expected an object", where);
        return;
    }
    const cJSON *c = rd_obj(d, o, where, "config");
    if (c) {
        char w2[64];
        snprintf(w2, sizeof w2, "%s.config", where);
        struct vq_result_config *cf = &e->config;
        rd_str1(d, c, w2, "name", cf->name, sizeof cf->name, 1);
        rd_str(d, c, w2, "engine", cf->engine, sizeof cf->engine, 0);
        if (cf->engine[0] && strcmp(cf->engine, "veloxquant") && strcmp(cf->engine, "llama.cpp"))
            fail(d, "%s.engine: expected \"veloxquant\" or \"llama.cpp\"", w2);
        rd_str1(d, c, w2, "k_method", cf->k_method, sizeof cf->k_method, 1);
        rd_str1(d, c, w2, "v_method", cf->v_method, sizeof cf->v_method, 1);
        cf->k_bits = rd_num(d, c, w2, "k_bits", 1, 0, 64, 0);
        cf->v_bits = rd_num(d, c, w2, "v_bits", 1, 0, 64, 0);
        const cJSON *opts = get(d, c, w2, "options", 0);
        if (opts && !cJSON_IsObject(opts)) fail(d, "%s.options: expected an object", w2);
        const cJSON *it;
        if (opts && cJSON_IsObject(opts)) cJSON_ArrayForEach(it, opts) {
                if (cf->n_opts == VQ_RESULT_MAX_OPTS) {
                    fail(d, "%s.options: too many", w2);
                    break;
                }
                if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
                    fabs(it->valuedouble) > 9007199254740992.0 || strlen(it->string) >= 32) {
                    fail(d, "%s.options.%s: expected an integer", w2, it->string);
                    break;
                }
                copy_str(cf->opts[cf->n_opts].key, 32, it->string);
                cf->opts[cf->n_opts++].value = (long long)it->valuedouble;
            }
    }
    for (size_t i = 0; i < N_METRICS; i++)
        *metric(e, i) = rd_num_range(d, o, where, METRICS[i].name, 0, METRICS[i].lo, METRICS[i].hi,
                                     METRICS[i].lo_open, METRICS[i].integer);
    rd_runs(d, o, where, "prefill_tok_s_runs", e->prefill_runs, &e->n_prefill_runs);
    rd_runs(d, o, where, "decode_tok_s_runs", e->decode_runs, &e->n_decode_runs);
    rd_dstr(d, o, where, "output_preview", &e->output_preview, 0);
    rd_dstr(d, o, where, "error", &e->error, 0);
    if (!d->bad && e->error && !e->error[0])
        fail(d, "%s.error: empty string (the schema asks for at least 1 character)", where);
}

vq_status vq_results_from_json(const char *text, size_t len, struct vq_results *r, char *err,
                               size_t errlen) {
    struct rd d = {err, errlen, 0};
    if (err && errlen) err[0] = 0;
    vq_results_init(r);
    const char *end = NULL;
    cJSON *root = text ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        if (text && at && at >= text && at <= text + len) {
            size_t line = 1;
            for (const char *p = text; p < at; p++) line += *p == '\n';
            fail(&d, "not valid JSON (at byte %zu, line %zu)", (size_t)(at - text), line);
        } else fail(&d, "not valid JSON");
        return VQ_STATUS_BAD_FORMAT;
    }
    /* the object must be all of the text: anything but white space after it is refused */
    for (const char *p = end; p && p < text + len; p++)
        if (!(*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) {
            fail(&d, "data after the JSON object (at byte %zu)", (size_t)(p - text));
            cJSON_Delete(root);
            return VQ_STATUS_BAD_FORMAT;
        }
    if (!cJSON_IsObject(root)) {
        fail(&d, "top level: expected an object");
        cJSON_Delete(root);
        return VQ_STATUS_BAD_FORMAT;
    }
    char schema[64] = "";
    rd_str(&d, root, "top", "schema", schema, sizeof schema, 1);
    if (!d.bad && strcmp(schema, VQ_RESULTS_SCHEMA) != 0)
        fail(&d, "schema \"%s\" is not \"%s\"", schema, VQ_RESULTS_SCHEMA);
    rd_str1(&d, root, "top", "created_utc", r->created_utc, sizeof r->created_utc, 1);
    rd_str(&d, root, "top", "git_commit", r->git_commit, sizeof r->git_commit, 1);
    const cJSON *hw = rd_obj(&d, root, "top", "hardware");
    if (hw) {
        rd_str(&d, hw, "hardware", "cpu", r->hardware.cpu, sizeof r->hardware.cpu, 1);
        r->hardware.cores = (int)rd_num(&d, hw, "hardware", "cores", 1, 0, 1 << 20, 1);
        rd_str(&d, hw, "hardware", "isa", r->hardware.isa, sizeof r->hardware.isa, 1);
        static const char *const isas[] = {"scalar", "avx2", "avx512", "auto"};
        int known = 0;
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
            known |= !strcmp(r->hardware.isa, isas[i]);
        if (!d.bad && !known)
            fail(&d, "hardware.isa: \"%s\" is not one of scalar, avx2, avx512, auto",
                 r->hardware.isa);
        r->hardware.ram_mb = rd_num(&d, hw, "hardware", "ram_mb", 1, 0, HUGE_VAL, 0);
    }
    const cJSON *md = rd_obj(&d, root, "top", "model");
    if (md) {
        rd_dstr(&d, md, "model", "file", &r->model.file, 1);
        rd_str(&d, md, "model", "sha256", r->model.sha256, sizeof r->model.sha256, 1);
        rd_str(&d, md, "model", "arch", r->model.arch, sizeof r->model.arch, 1);
        r->model.n_layers = (int)rd_num(&d, md, "model", "n_layers", 1, 1, 1 << 20, 1);
        r->model.n_kv_heads = (int)rd_num(&d, md, "model", "n_kv_heads", 1, 1, 1 << 20, 1);
        r->model.head_dim = (int)rd_num(&d, md, "model", "head_dim", 1, 1, 1 << 20, 1);
        rd_layer_window(&d, md, &r->model);
    }
    const cJSON *pr = rd_obj(&d, root, "top", "protocol");
    if (pr) {
        const cJSON *ps = get(&d, pr, "protocol", "prompts", 1);
        if (ps && !cJSON_IsArray(ps)) fail(&d, "protocol.prompts: expected an array");
        if (ps && cJSON_IsArray(ps) && !d.bad) {
            int n = cJSON_GetArraySize(ps);
            r->protocol.prompts = calloc((size_t)(n ? n : 1), sizeof(char *));
            if (!r->protocol.prompts) fail(&d, "out of memory");
            const cJSON *it;
            cJSON_ArrayForEach(it, ps) {
                if (d.bad) break;
                if (!cJSON_IsString(it)) {
                    fail(&d, "protocol.prompts[%d]: expected a string", r->protocol.n_prompts);
                    break;
                }
                if (vq_str_set(&r->protocol.prompts[r->protocol.n_prompts], it->valuestring)) {
                    fail(&d, "out of memory");
                    break;
                }
                r->protocol.n_prompts++;
            }
        }
        rd_dstr(&d, pr, "protocol", "corpus", &r->protocol.corpus, 1);
        r->protocol.ctx = (int)rd_num(&d, pr, "protocol", "ctx", 1, 1, 1 << 30, 1);
        double ch = rd_num(&d, pr, "protocol", "chunks", 0, 0, 1 << 30, 1);
        r->protocol.chunks = isfinite(ch) ? (int)ch : 0;
        r->protocol.max_tokens = (int)rd_num(&d, pr, "protocol", "max_tokens", 1, 0, 1 << 30, 1);
        r->protocol.seed = (uint64_t)rd_num(&d, pr, "protocol", "seed", 1, 0, 9007199254740992.0,
                                            1);
    }
    const cJSON *res = get(&d, root, "top", "results", 1);
    if (res && !cJSON_IsArray(res)) fail(&d, "results: expected an array");
    if (res && cJSON_IsArray(res) && !d.bad) {
        const cJSON *it;
        int idx = 0;
        cJSON_ArrayForEach(it, res) {
            struct vq_result e;
            vq_result_init(&e);
            rd_result(&d, it, idx++, &e);
            /* names are unique within a file (report keys its rows by them) */
            for (int k = 0; !d.bad && k < r->n_results; k++)
                if (!strcmp(r->results[k].config.name, e.config.name))
                    fail(&d, "results[%d].config.name: \"%s\" is also the name of results[%d]",
                         idx - 1, e.config.name, k);
            if (d.bad || vq_results_add(r, &e) != VQ_STATUS_OK) {
                if (!d.bad) fail(&d, "out of memory");
                vq_result_clear(&e);
                break;
            }
        }
    }
    cJSON_Delete(root);
    if (d.bad) {
        vq_results_clear(r);
        return VQ_STATUS_BAD_FORMAT;
    }
    return VQ_STATUS_OK;
}

vq_status vq_results_read(const char *path, struct vq_results *r, char *err, size_t errlen) {
    vq_results_init(r);
    if (err && errlen) err[0] = 0;
    /* regular files only, opened without blocking, at most VQ_FILE_MAX_RESULTS bytes */
    char *buf = NULL;
    size_t n = 0;
    const vq_status fs = vq_file_read_all(path, VQ_FILE_MAX_RESULTS, "results file", &buf, &n);
    if (fs != VQ_STATUS_OK) {
        const int e = errno;
        if (err && errlen) snprintf(err, errlen, "%s", vq_file_error());
        errno = e;
        return fs;
    }
    vq_status st = vq_results_from_json(buf, n, r, err, errlen);
    free(buf);
    if (st != VQ_STATUS_OK && err && errlen && !err[0])
        snprintf(err, errlen, "%s", vq_status_str(st));
    return st;
}

vq_status vq_results_write(const struct vq_results *r, const char *path) {
    char *txt = vq_results_to_json(r);
    if (!txt) return VQ_STATUS_NO_MEMORY;
    size_t n = strlen(txt);
    char *out = realloc(txt, n + 2); /* end the file with a newline */
    if (!out) {
        free(txt);
        return VQ_STATUS_NO_MEMORY;
    }
    out[n] = '\n';
    out[n + 1] = 0;
    vq_status st = vq_write_file_atomic(path, out, n + 1);
    free(out);
    return st;
}
