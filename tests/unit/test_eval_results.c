/* test_eval_results.c — results.json: round trip, strict reader errors, atomic write (a failed
 * write leaves the old file intact), and validation of produced files and the checked-in
 * fixture against docs/results.schema.json with a small validator for the subset of JSON
 * Schema the schema uses (type, const, enum, required, properties, additionalProperties,
 * items, minimum, exclusiveMinimum, maximum, minLength); the reader's numeric ranges are the
 * schema's. */
#include "test.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* Included for the write hook (results_write_fn); the library copy is then not linked in. */
#include "eval/results.c"
#include "results_json.h"

#define SCHEMA VQ_SOURCE_DIR "/docs/results.schema.json"
#define FIXTURE VQ_SOURCE_DIR "/tests/golden/results_fixture.json"

/* ---- mini JSON Schema validator ---------------------------------------------------------- */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return b;
}

static int type_ok(const cJSON *v, const char *t) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    fprintf(stderr, "validator: unknown type %s\n", t);
    return 0;
}

static const char *KNOWN[] = {"$schema",
                              "$id",
                              "title",
                              "description",
                              "type",
                              "const",
                              "enum",
                              "required",
                              "properties",
                              "additionalProperties",
                              "items",
                              "minimum",
                              "exclusiveMinimum",
                              "maximum",
                              "minLength"};

/* Returns the number of violations of instance v against schema s (path for messages). */
static int validate(const cJSON *s, const cJSON *v, const char *path) {
    int bad = 0;
    const cJSON *kw;
    cJSON_ArrayForEach(kw, s) {
        int known = 0;
        for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
            known |= !strcmp(kw->string, KNOWN[i]);
        if (!known) {
            fprintf(stderr, "validator: unsupported keyword %s\n", kw->string);
            bad++;
        }
    }
    const cJSON *t = cJSON_GetObjectItem(s, "type");
    if (t && !type_ok(v, t->valuestring)) {
        fprintf(stderr, "%s: not of type %s\n", path, t->valuestring);
        return bad + 1;
    }
    const cJSON *c = cJSON_GetObjectItem(s, "const");
    if (c && !cJSON_Compare(c, v, 1)) {
        fprintf(stderr, "%s: const mismatch\n", path);
        bad++;
    }
    const cJSON *en = cJSON_GetObjectItem(s, "enum");
    if (en) {
        int hit = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) hit |= cJSON_Compare(e, v, 1);
        if (!hit) {
            fprintf(stderr, "%s: not in enum\n", path);
            bad++;
        }
    }
    if (cJSON_IsNumber(v)) {
        const cJSON *mn = cJSON_GetObjectItem(s, "minimum"),
                    *mx = cJSON_GetObjectItem(s, "maximum");
        if (mn && v->valuedouble < mn->valuedouble) {
            fprintf(stderr, "%s: below minimum\n", path);
            bad++;
        }
        if (mx && v->valuedouble > mx->valuedouble) {
            fprintf(stderr, "%s: above maximum\n", path);
            bad++;
        }
        const cJSON *xm = cJSON_GetObjectItem(s, "exclusiveMinimum");
        if (xm && v->valuedouble <= xm->valuedouble) {
            fprintf(stderr, "%s: not above exclusiveMinimum\n", path);
            bad++;
        }
    }
    const cJSON *ml = cJSON_GetObjectItem(s, "minLength");
    if (ml && cJSON_IsString(v) && (double)strlen(v->valuestring) < ml->valuedouble) {
        fprintf(stderr, "%s: too short\n", path);
        bad++;
    }
    char sub[512];
    if (cJSON_IsObject(v)) {
        const cJSON *req = cJSON_GetObjectItem(s, "required"), *r;
        cJSON_ArrayForEach(r, req) if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) {
            fprintf(stderr, "%s: missing required %s\n", path, r->valuestring);
            bad++;
        }
        const cJSON *props = cJSON_GetObjectItem(s, "properties");
        const cJSON *addl = cJSON_GetObjectItem(s, "additionalProperties");
        const cJSON *m;
        cJSON_ArrayForEach(m, v) {
            snprintf(sub, sizeof sub, "%s.%s", path, m->string);
            const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
            if (ps) bad += validate(ps, m, sub);
            else if (addl && cJSON_IsFalse(addl)) {
                fprintf(stderr, "%s: not allowed\n", sub);
                bad++;
            } else if (addl && cJSON_IsObject(addl)) bad += validate(addl, m, sub);
        }
    }
    if (cJSON_IsArray(v)) {
        const cJSON *items = cJSON_GetObjectItem(s, "items"), *m;
        int i = 0;
        if (items) cJSON_ArrayForEach(m, v) {
                snprintf(sub, sizeof sub, "%s[%d]", path, i++);
                bad += validate(items, m, sub);
            }
    }
    return bad;
}

static int validate_text(const char *text) {
    char *st = slurp(SCHEMA, NULL);
    if (!st) {
        fprintf(stderr, "cannot read %s\n", SCHEMA);
        return 1;
    }
    cJSON *s = cJSON_Parse(st), *v = cJSON_Parse(text);
    free(st);
    int bad = (!s || !v) ? 1 : validate(s, v, "$");
    cJSON_Delete(s);
    cJSON_Delete(v);
    return bad;
}

/* ---- sample data ------------------------------------------------------------------------- */

static void sample(struct vq_results *r) {
    vq_results_init(r);
    vq_results_stamp_time(r);
    strcpy(r->git_commit, "0123abcd");
    vq_results_fill_hardware(r, 2);
    ASSERT(vq_str_set(&r->model.file, "models/x.gguf") == VQ_STATUS_OK);
    strcpy(r->model.sha256, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    strcpy(r->model.arch, "llama");
    r->model.n_layers = 30;
    r->model.n_kv_heads = 3;
    r->model.head_dim = 64;
    r->protocol.prompts = calloc(2, sizeof(char *));
    vq_str_set(&r->protocol.prompts[0], "Hello \"world\"\n\xc3\xa9");
    vq_str_set(&r->protocol.prompts[1], "Second");
    r->protocol.n_prompts = 2;
    vq_str_set(&r->protocol.corpus, "data/corpus_en.txt");
    r->protocol.ctx = 512;
    r->protocol.chunks = 4;
    r->protocol.max_tokens = 200;
    r->protocol.seed = 42;
    struct vq_result e;
    vq_result_init(&e);
    strcpy(e.config.name, "turboquant_mse-3");
    strcpy(e.config.k_method, "turboquant_mse");
    strcpy(e.config.v_method, "turboquant_mse");
    e.config.k_bits = e.config.v_bits = 3;
    e.ppl = 12.345678901234567;
    e.kld_mean = 0.0123;
    e.kld_median = 0.004;
    e.kld_p99 = 0.2;
    e.top1 = 0.93;
    e.kv_bytes = 1234567;
    e.key_x = 4.92;
    e.fullKV_x = 4.92;
    e.bits_per_elem = 3.25;
    e.prefill_tok_s = 812.5;
    e.decode_tok_s = 95.25;
    e.tokens_generated = 150.5;
    e.fp16_prefix_match = 37.25;
    e.cosine_k = 0.98;
    e.cosine_v = 0.97;
    e.peak_rss_mb = 210;
    vq_str_set(&e.output_preview, "The answer is 42.");
    ASSERT(vq_results_add(r, &e) == VQ_STATUS_OK);
    vq_result_init(&e);
    strcpy(e.config.name, "kivi-2");
    strcpy(e.config.k_method, "kivi");
    strcpy(e.config.v_method, "kivi");
    e.config.k_bits = e.config.v_bits = 2;
    e.config.n_opts = 2;
    strcpy(e.config.opts[0].key, "group_size");
    e.config.opts[0].value = 32;
    strcpy(e.config.opts[1].key, "residual_length");
    e.config.opts[1].value = 128;
    vq_str_set(&e.error, "child killed by signal 9 (out of memory?)");
    ASSERT(vq_results_add(r, &e) == VQ_STATUS_OK);
}

/* ---- tests ------------------------------------------------------------------------------- */

TEST(round_trip) {
    struct vq_results r, q;
    sample(&r);
    char *txt = vq_results_to_json(&r);
    ASSERT(txt != NULL);
    if (!txt) return;
    char err[256];
    ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
    ASSERT(!strcmp(q.created_utc, r.created_utc));
    ASSERT(!strcmp(q.hardware.cpu, r.hardware.cpu));
    ASSERT_EQ_INT(q.hardware.cores, 2);
    ASSERT(!strcmp(q.model.file, "models/x.gguf"));
    ASSERT_EQ_INT(q.model.head_dim, 64);
    ASSERT_EQ_INT(q.protocol.n_prompts, 2);
    if (q.protocol.n_prompts == 2) ASSERT(!strcmp(q.protocol.prompts[0], r.protocol.prompts[0]));
    ASSERT_EQ_INT(q.protocol.ctx, 512);
    ASSERT_EQ_INT(q.n_results, 2);
    if (q.n_results == 2) {
        const struct vq_result *a = &q.results[0], *b = &q.results[1];
        ASSERT(a->ppl == r.results[0].ppl); /* doubles survive exactly */
        ASSERT(a->kld_mean == 0.0123 && a->kv_bytes == 1234567 && a->top1 == 0.93);
        ASSERT(!strcmp(a->output_preview, "The answer is 42."));
        ASSERT(a->error == NULL);
        ASSERT(isnan(b->ppl) && isnan(b->decode_tok_s));
        ASSERT(b->error && !strcmp(b->error, r.results[1].error));
        ASSERT_EQ_INT(b->config.n_opts, 2);
        ASSERT_EQ_INT(b->config.opts[1].value, 128);
        ASSERT(!strcmp(b->config.opts[0].key, "group_size"));
    }
    ASSERT_EQ_INT(vq_results_find(&q, "kivi-2"), 1);
    ASSERT_EQ_INT(vq_results_find(&q, "nope"), -1);
    /* the serialised text validates against the schema */
    ASSERT_EQ_INT(validate_text(txt), 0);
    /* serialising again gives the same bytes (stable order) */
    char *txt2 = vq_results_to_json(&q);
    ASSERT(txt2 && !strcmp(txt, txt2));
    free(txt2);
    free(txt);
    vq_results_clear(&q);
    vq_results_clear(&r);
}

/* Fractional widths (vecinfer 1.5) are recorded exactly, read back exactly and pass the
 * schema; whole widths, as every file written before them holds, still read. */
TEST(fractional_bits) {
    struct vq_results r, q;
    sample(&r);
    struct vq_result_config *cf = &r.results[0].config;
    strcpy(cf->name, "vecinfer-1.5");
    strcpy(cf->k_method, "vecinfer");
    strcpy(cf->v_method, "vecinfer");
    cf->k_bits = cf->v_bits = 1.5;
    char *txt = vq_results_to_json(&r);
    ASSERT(txt && strstr(txt, "\"k_bits\":\t1.5") && strstr(txt, "\"v_bits\":\t1.5"));
    ASSERT_EQ_INT(validate_text(txt), 0);
    char err[256];
    ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
    if (q.n_results == 2) {
        ASSERT(q.results[0].config.k_bits == 1.5 && q.results[0].config.v_bits == 1.5);
        ASSERT(q.results[1].config.k_bits == 2 && q.results[1].config.v_bits == 2);
    }
    free(txt);
    vq_results_clear(&q);
    vq_results_clear(&r);
}

/* Strings are written as valid UTF-8: model output can hold byte-fallback tokens or a cut
 * character; each byte that does not start a well-formed sequence becomes U+FFFD, valid text
 * (2-, 3- and 4-byte characters) is kept byte for byte. */
TEST(strings_written_as_utf8) {
    struct vq_results r, q;
    sample(&r);
    const char *in[] = {
        "ok \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",     /* é € 😀: kept */
        "a\x86\x62",                                   /* stray continuation byte, "b" */
        "\xe2\x82",                                    /* cut 3-byte sequence */
        "\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xff", /* overlong, surrogate, > U+10FFFF, 0xFF */
    };
    const char *want[] = {
        "ok \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
        "a\xef\xbf\xbd\x62",
        "\xef\xbf\xbd\xef\xbf\xbd",
        ("\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd"
         "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd"),
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        ASSERT(vq_str_set(&r.results[0].output_preview, in[i]) == VQ_STATUS_OK);
        ASSERT(vq_str_set(&r.results[1].error, in[i]) == VQ_STATUS_OK);
        char *txt = vq_results_to_json(&r), err[256];
        ASSERT(txt != NULL);
        if (!txt) continue;
        ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
        if (q.n_results == 2) {
            ASSERT(!strcmp(q.results[0].output_preview, want[i]));
            ASSERT(!strcmp(q.results[1].error, want[i]));
        }
        vq_results_clear(&q);
        free(txt);
    }
    vq_results_clear(&r);
}

/* model.layer_window (sliding windows per layer) round-trips, validates against the schema,
 * is absent when NULL, and a wrong length or value is refused. */
TEST(layer_window) {
    struct vq_results r, q;
    sample(&r);
    char *txt = vq_results_to_json(&r), err[256];
    ASSERT(txt && !strstr(txt, "layer_window"));
    free(txt);
    r.model.n_layers = 6;
    r.model.layer_window = malloc(6 * sizeof(int));
    ASSERT(r.model.layer_window != NULL);
    if (!r.model.layer_window) return;
    for (int l = 0; l < 6; l++) r.model.layer_window[l] = l == 5 ? 0 : 512;
    txt = vq_results_to_json(&r);
    ASSERT(txt != NULL);
    if (!txt) return;
    ASSERT_EQ_INT(validate_text(txt), 0);
    ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
    ASSERT(q.model.layer_window != NULL);
    for (int l = 0; q.model.layer_window && l < 6; l++)
        ASSERT_EQ_INT(q.model.layer_window[l], l == 5 ? 0 : 512);
    vq_results_clear(&q);
    static const char *const bad[] = {"[512, 0]", "[512, 512, 512, 512, 512, -1]",
                                      "[512, 512, 512, 512, 512, 0.5]", "512"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *doc = cJSON_Parse(txt);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(doc, "model"), "layer_window",
                                  cJSON_Parse(bad[i]));
        char *t2 = cJSON_Print(doc);
        ASSERT_STATUS(vq_results_from_json(t2, strlen(t2), &q, err, sizeof err),
                      VQ_STATUS_BAD_FORMAT);
        ASSERT(strstr(err, "layer_window") != NULL);
        if (i > 0) ASSERT(validate_text(t2) > 0); /* the length is not in the schema */
        free(t2);
        cJSON_Delete(doc);
    }
    free(txt);
    vq_results_clear(&r);
}

TEST(validator_catches_errors) {
    /* the validator itself must reject bad documents, or the test above proves nothing */
    struct vq_results r;
    sample(&r);
    char *txt = vq_results_to_json(&r);
    cJSON *doc = cJSON_Parse(txt);
    cJSON *res0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "results"), 0);
    cJSON_ReplaceItemInObject(res0, "top1", cJSON_CreateNumber(1.5));
    cJSON_AddStringToObject(res0, "bogus", "x");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(doc, "model"), "arch");
    char *bad = cJSON_Print(doc);
    ASSERT_EQ_INT(validate_text(bad), 3);
    free(bad);
    cJSON_Delete(doc);
    free(txt);
    vq_results_clear(&r);
}

/* Sets doc member `key` of obj to x and returns 1 if the reader accepts the document, and
 * in *schema_ok whether the schema does. */
static int accepts(cJSON *root, cJSON *obj, const char *key, double x, int *schema_ok) {
    cJSON_ReplaceItemInObject(obj, key, cJSON_CreateNumber(x));
    char *txt = cJSON_Print(root);
    struct vq_results q;
    char err[256];
    const int ok = vq_results_from_json(txt, strlen(txt), &q, err, sizeof err) == VQ_STATUS_OK;
    vq_results_clear(&q);
    *schema_ok = validate_text(txt) == 0;
    free(txt);
    return ok;
}

/* Walks the schema's properties alongside the document; for every numeric bound of a field
 * the document holds, a value past the bound must be refused and the bound itself (just
 * inside an exclusive one) accepted, by the reader and the schema alike. */
static void check_ranges(cJSON *root, const cJSON *props, cJSON *obj, int *n) {
    const cJSON *ps;
    cJSON_ArrayForEach(ps, props) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, ps->string);
        if (!v) continue;
        const cJSON *sub = cJSON_GetObjectItem(ps, "properties");
        const cJSON *items = cJSON_GetObjectItem(ps, "items");
        if (sub && cJSON_IsObject(v)) {
            check_ranges(root, sub, v, n);
            continue;
        }
        if (items && cJSON_GetObjectItem(items, "properties") && cJSON_IsArray(v)) {
            check_ranges(root, cJSON_GetObjectItem(items, "properties"), cJSON_GetArrayItem(v, 0),
                         n);
            continue;
        }
        if (!cJSON_IsNumber(v)) continue;
        const double orig = v->valuedouble;
        const cJSON *t = cJSON_GetObjectItem(ps, "type");
        const double step = t && !strcmp(t->valuestring, "integer") ? 1 : 0.5;
        const cJSON *mn = cJSON_GetObjectItem(ps, "minimum"),
                    *mx = cJSON_GetObjectItem(ps, "maximum");
        const cJSON *xm = cJSON_GetObjectItem(ps, "exclusiveMinimum");
        struct {
            const cJSON *b;
            double in, out;
        } cases[3] = {
            {mn, mn ? mn->valuedouble : 0, mn ? mn->valuedouble - step : 0},
            {xm, xm ? xm->valuedouble + step : 0, xm ? xm->valuedouble : 0},
            {mx, mx ? mx->valuedouble : 0, mx ? mx->valuedouble + step : 0},
        };
        for (int c = 0; c < 3; c++) {
            if (!cases[c].b) continue;
            int sch;
            const int in = accepts(root, obj, ps->string, cases[c].in, &sch);
            if (!in || !sch)
                fprintf(stderr, "%s = %g: reader %d schema %d\n", ps->string, cases[c].in, in, sch);
            ASSERT(in && sch);
            const int out = accepts(root, obj, ps->string, cases[c].out, &sch);
            if (out || sch)
                fprintf(stderr, "%s = %g: reader %d schema %d\n", ps->string, cases[c].out, out,
                        sch);
            ASSERT(!out && !sch);
            (*n)++;
        }
        cJSON_ReplaceItemInObject(obj, ps->string, cJSON_CreateNumber(orig));
    }
}

TEST(reader_ranges_are_the_schema) {
    struct vq_results r;
    sample(&r);
    char *txt = vq_results_to_json(&r);
    char *st = slurp(SCHEMA, NULL);
    cJSON *doc = cJSON_Parse(txt), *schema = st ? cJSON_Parse(st) : NULL;
    ASSERT(doc && schema);
    int n = 0;
    if (doc && schema) check_ranges(doc, cJSON_GetObjectItem(schema, "properties"), doc, &n);
    ASSERT_GE(n, 25); /* every metric bound, the geometry, the protocol */
    /* the values a report must never draw: ppl < 1, key_x 0, head_dim 0 */
    struct vq_results q;
    char err[256];
    static const char *const bad[][3] = {
        {"results", "ppl", "-3"}, {"results", "key_x", "0"}, {"model", "head_dim", "0"}};
    for (size_t i = 0; doc && i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *d2 = cJSON_Duplicate(doc, 1);
        cJSON *o = cJSON_GetObjectItem(d2, bad[i][0]);
        if (cJSON_IsArray(o)) o = cJSON_GetArrayItem(o, 0);
        cJSON_ReplaceItemInObject(o, bad[i][1], cJSON_CreateNumber(atof(bad[i][2])));
        char *t2 = cJSON_Print(d2);
        ASSERT_STATUS(vq_results_from_json(t2, strlen(t2), &q, err, sizeof err),
                      VQ_STATUS_BAD_FORMAT);
        ASSERT(strstr(err, bad[i][1]) && strstr(err, "out of range"));
        free(t2);
        cJSON_Delete(d2);
    }
    cJSON_Delete(doc);
    cJSON_Delete(schema);
    free(st);
    free(txt);
    vq_results_clear(&r);
}

/* config.engine: absent for veloxquant rows, "llama.cpp" for rows measured on llama.cpp's
 * cache types; the value survives a round trip, validates against the schema, and anything
 * else is refused; kld_full_mean round-trips like the other metrics. */
TEST(engine_field) {
    struct vq_results r, q;
    sample(&r);
    struct vq_result e;
    vq_result_init(&e);
    strcpy(e.config.name, "llama.cpp q4_0");
    strcpy(e.config.engine, "llama.cpp");
    strcpy(e.config.k_method, "q4_0");
    strcpy(e.config.v_method, "q4_0");
    e.config.k_bits = e.config.v_bits = 4;
    e.bits_per_elem = 4.5;
    e.kld_mean = 0.0751;
    e.kld_full_mean = 0.0793;
    ASSERT(vq_results_add(&r, &e) == VQ_STATUS_OK);
    char *txt = vq_results_to_json(&r);
    ASSERT(txt != NULL);
    if (!txt) return;
    ASSERT_EQ_INT(validate_text(txt), 0);
    char err[256];
    ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(q.n_results, 3);
    if (q.n_results == 3) {
        ASSERT(!strcmp(q.results[2].config.engine, "llama.cpp"));
        ASSERT(q.results[0].config.engine[0] == 0);
        ASSERT(q.results[2].kld_full_mean == 0.0793);
        ASSERT(isnan(q.results[0].kld_full_mean));
    }
    vq_results_clear(&q);
    /* only the schema's engines */
    cJSON *doc = cJSON_Parse(txt);
    cJSON *cfg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "results"), 2),
                                     "config");
    cJSON_ReplaceItemInObject(cfg, "engine", cJSON_CreateString("vllm"));
    char *bad = cJSON_Print(doc);
    ASSERT_STATUS(vq_results_from_json(bad, strlen(bad), &q, err, sizeof err),
                  VQ_STATUS_BAD_FORMAT);
    ASSERT(strstr(err, "results[2].config.engine") != NULL);
    ASSERT(validate_text(bad) > 0);
    free(bad);
    cJSON_Delete(doc);
    free(txt);
    vq_results_clear(&r);
}

/* Speed repeats (sweep --repeats): each run round-trips in order, validates against the schema,
 * and a file without them reads as 0 runs; the reader refuses an empty array, a negative or
 * non-numeric run and more than VQ_RESULT_MAX_RUNS runs, naming the field. */
TEST(speed_runs) {
    struct vq_results r, q;
    sample(&r);
    struct vq_result *e = &r.results[0];
    const double pre[3] = {800.5, 812.5, 830.25}, dec[3] = {96.5, 95.25, 90.0};
    e->n_prefill_runs = e->n_decode_runs = 3;
    memcpy(e->prefill_runs, pre, sizeof pre);
    memcpy(e->decode_runs, dec, sizeof dec);
    char *txt = vq_results_to_json(&r);
    char err[256];
    ASSERT(txt && strstr(txt, "\"decode_tok_s_runs\"") && strstr(txt, "\"prefill_tok_s_runs\""));
    ASSERT_EQ_INT(validate_text(txt), 0);
    ASSERT_STATUS(vq_results_from_json(txt, strlen(txt), &q, err, sizeof err), VQ_STATUS_OK);
    if (q.n_results == 2) {
        ASSERT_EQ_INT(q.results[0].n_prefill_runs, 3);
        ASSERT_EQ_INT(q.results[0].n_decode_runs, 3);
        ASSERT(!memcmp(q.results[0].prefill_runs, pre, sizeof pre));
        ASSERT(!memcmp(q.results[0].decode_runs, dec, sizeof dec));
        ASSERT_EQ_INT(q.results[1].n_decode_runs, 0); /* none recorded: none read */
    }
    vq_results_clear(&q);
    cJSON *doc = cJSON_Parse(txt);
    cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "results"), 0);
    const char *bad_runs[] = {"[]", "[1, -2]", "[1, \"2\"]", "3", NULL};
    char many[1024] = "[1";
    for (int i = 1; i <= VQ_RESULT_MAX_RUNS; i++) strcat(many, ", 1");
    strcat(many, "]");
    bad_runs[4] = many;
    for (size_t i = 0; i < sizeof bad_runs / sizeof bad_runs[0]; i++) {
        cJSON_ReplaceItemInObject(row, "decode_tok_s_runs", cJSON_Parse(bad_runs[i]));
        char *bad = cJSON_Print(doc);
        ASSERT_STATUS(vq_results_from_json(bad, strlen(bad), &q, err, sizeof err),
                      VQ_STATUS_BAD_FORMAT);
        ASSERT(strstr(err, "results[0].decode_tok_s_runs") != NULL);
        free(bad);
    }
    cJSON_Delete(doc);
    free(txt);
    vq_results_clear(&r);
}

TEST(reader_is_strict) {
    struct vq_results q;
    char err[256];
    const char *cases[] = {
        "",
        "[]",
        "{\"schema\": \"veloxquant.results.v0\"}",
        "{\"schema\": \"veloxquant.results.v1\"}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_STATUS(vq_results_from_json(cases[i], strlen(cases[i]), &q, err, sizeof err),
                      VQ_STATUS_BAD_FORMAT);
        ASSERT(err[0] != 0);
        ASSERT_EQ_INT(q.n_results, 0);
    }
    /* a wrong type deep inside: results[1].config.k_bits as a string */
    struct vq_results r;
    sample(&r);
    char *txt = vq_results_to_json(&r);
    cJSON *doc = cJSON_Parse(txt);
    cJSON *cfg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "results"), 1),
                                     "config");
    cJSON_ReplaceItemInObject(cfg, "k_bits", cJSON_CreateString("2"));
    char *bad = cJSON_Print(doc);
    ASSERT_STATUS(vq_results_from_json(bad, strlen(bad), &q, err, sizeof err),
                  VQ_STATUS_BAD_FORMAT);
    ASSERT(strstr(err, "results[1].config.k_bits") != NULL);
    free(bad);
    cJSON_ReplaceItemInObject(cfg, "k_bits", cJSON_CreateNumber(NAN)); /* printed as null */
    bad = cJSON_Print(doc);
    ASSERT_STATUS(vq_results_from_json(bad, strlen(bad), &q, err, sizeof err),
                  VQ_STATUS_BAD_FORMAT);
    ASSERT(strstr(err, "results[1].config.k_bits") != NULL);
    free(bad);
    cJSON_Delete(doc);
    free(txt);
    vq_results_clear(&r);
    ASSERT_STATUS(vq_results_read("/nonexistent/results.json", &q, err, sizeof err), VQ_STATUS_IO);
}

static ssize_t write_enospc(int fd, const void *p, size_t n) {
    /* writes half of the first chunk, then fails like a full disk */
    static int calls = 0;
    if (calls++ == 0) return write(fd, p, n / 2);
    errno = ENOSPC;
    return -1;
}

TEST(atomic_write) {
    char dir[] = "/tmp/vq_test_results_XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/results.json", dir);
    struct vq_results r, q;
    sample(&r);
    ASSERT_STATUS(vq_results_write(&r, path), VQ_STATUS_OK);
    size_t len0 = 0;
    char *before = slurp(path, &len0);
    ASSERT(before && before[len0 - 1] == '\n');
    ASSERT_EQ_INT(validate_text(before), 0);
    char err[256];
    ASSERT_STATUS(vq_results_read(path, &q, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(q.n_results, 2);
    vq_results_clear(&q);

    /* a write that fails midway leaves the old file intact and no temp file behind */
    r.results[0].ppl = 99.0;
    results_write_fn = write_enospc;
    ASSERT_STATUS(vq_results_write(&r, path), VQ_STATUS_IO);
    results_write_fn = write;
    size_t len1 = 0;
    char *after = slurp(path, &len1);
    ASSERT(after && len1 == len0 && !memcmp(before, after, len0));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    ASSERT_EQ_INT(system(cmd), 0);
    /* a directory that does not exist: IO, nothing created */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/results.json", dir);
    ASSERT_STATUS(vq_results_write(&r, bad), VQ_STATUS_IO);
    /* a successful rewrite replaces the content */
    ASSERT_STATUS(vq_results_write(&r, path), VQ_STATUS_OK);
    ASSERT_STATUS(vq_results_read(path, &q, err, sizeof err), VQ_STATUS_OK);
    ASSERT(q.n_results == 2 && q.results[0].ppl == 99.0);
    vq_results_clear(&q);
    free(before);
    free(after);
    unlink(path);
    rmdir(dir);
    vq_results_clear(&r);
}

TEST(fixture_valid) {
    size_t n;
    char *txt = slurp(FIXTURE, &n);
    ASSERT(txt != NULL);
    if (!txt) return;
    ASSERT_EQ_INT(validate_text(txt), 0);
    struct vq_results q;
    char err[256];
    ASSERT_STATUS(vq_results_from_json(txt, n, &q, err, sizeof err), VQ_STATUS_OK);
    if (err[0]) fprintf(stderr, "%s\n", err);
    ASSERT(q.n_results >= 6);
    vq_results_clear(&q);
    free(txt);
}

int main(void) {
    RUN(round_trip);
    RUN(fractional_bits);
    RUN(strings_written_as_utf8);
    RUN(layer_window);
    RUN(validator_catches_errors);
    RUN(reader_is_strict);
    RUN(speed_runs);
    RUN(engine_field);
    RUN(reader_ranges_are_the_schema);
    RUN(atomic_write);
    RUN(fixture_valid);
    return TEST_REPORT();
}
