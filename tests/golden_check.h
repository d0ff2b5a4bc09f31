/*
 * golden_check.h — readers and comparisons for the llama.cpp golden files of tests/golden/
 * (formats in tests/golden/README.md), shared by the model tests of every golden-tested model:
 *   golden_read_file       a whole file into memory
 *   golden_logits_compare  fp16-KV engine log-probs vs a <name>_logits.bin (top-1, KL, ppl)
 *   golden_greedy_load     the prompts and llama.cpp continuations of a greedy .json
 *   golden_greedy_run      the engine's greedy continuation of a prompt
 *   golden_tokenizer_check ids, pieces and detokenized text vs a tokenizer_ids .json
 * Test-only (static inline functions; include after test.h).
 */
#ifndef VQ_GOLDEN_CHECK_H
#define VQ_GOLDEN_CHECK_H

#include <stdint.h>
#include <cjson/cJSON.h>

#include "test.h"
#include "vq_engine.h"
#include "engine/tokenizer.h"
#include "unit/golden_logits.h"

/* The bytes of path (NUL-terminated, caller frees) and their count, or NULL. */
static inline char *golden_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = (size_t)n;
    }
    return b;
}


struct golden_cmp {
    double top1, top1_clear, kl_mean, kl_max, ppl;
    uint32_t n_eval;
    int ok;
};

/* Runs model m with an fp16 KV cache (f32act: exact activations) over the positions of a
 * golden logits file in batches of chunk tokens and compares its log-probs with the stored
 * ones: top-1 agreement (overall and where llama.cpp's best token leads by >= 0.2 nats), KL
 * (golden || engine) on the golden top-k ids plus one bucket for the remaining mass (a
 * coarse-graining, which can only lower the KL), and the perplexity of the text over the
 * n_eval - 1 predictions. The file's flags must equal want_flags. */
static inline struct golden_cmp golden_logits_compare(const vq_model *m, const char *path,
                                                      int f32act, uint32_t want_flags, int chunk) {
    struct golden_cmp R;
    memset(&R, 0, sizeof R);
    struct golden gd;
    ASSERT(golden_open(&gd, path));
    if (!gd.buf) return R;
    const uint32_t n_vocab = gd.n_vocab, n_eval = gd.n_eval;
    ASSERT(n_eval >= 2);
    ASSERT_EQ_INT(gd.flags, want_flags);
    ASSERT_EQ_INT(vq_model_info_get(m)->n_vocab, n_vocab);
    if (n_eval < 2 || (uint32_t)vq_model_info_get(m)->n_vocab != n_vocab) {
        golden_close(&gd);
        return R;
    }

    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n_eval;
    cp.n_batch = chunk;
    cp.logits_all = 1;
    cp.f32_activations = f32act;
    cp.cache.key.method = VQ_METHOD_FP16;
    cp.cache.value.method = VQ_METHOD_FP16;
    vq_status st;
    vq_ctx *c = vq_ctx_create(m, &cp, &st);
    ASSERT(c != NULL);
    if (!c) {
        fprintf(stderr, "%s\n", vq_engine_last_error());
        golden_close(&gd);
        return R;
    }

    int32_t *ids = malloc(sizeof(int32_t) * n_eval);
    for (uint32_t i = 0; i < n_eval; i++) ids[i] = golden_id(&gd, i);
    float *lg = malloc(sizeof(float) * (size_t)n_vocab * (size_t)chunk);
    struct golden_acc a;
    memset(&a, 0, sizeof a);
    for (uint32_t c0 = 0; c0 < n_eval; c0 += (uint32_t)chunk) {
        uint32_t nc = n_eval - c0 < (uint32_t)chunk ? n_eval - c0 : (uint32_t)chunk;
        ASSERT_STATUS(vq_ctx_eval(c, ids + c0, nc, lg), VQ_STATUS_OK);
        for (uint32_t t = 0; t < nc; t++) golden_score(&gd, c0 + t, lg + (size_t)t * n_vocab, &a);
    }
    R.top1 = (double)a.agree / n_eval;
    R.top1_clear = a.n_clear ? (double)a.agree_clear / a.n_clear : 1.0;
    R.kl_mean = a.kl_sum / n_eval;
    R.kl_max = a.kl_max;
    R.ppl = exp(a.nll / a.n_nll);
    R.n_eval = n_eval;
    R.ok = 1;
    const char *base = strrchr(path, '/');
    printf(
        "%s%s: %u positions, top-1 agreement %.4f (%.4f on %d positions with margin >= 0.2), "
        "mean KL %.3g, max KL %.3g, ppl %.4f\n",
        base ? base + 1 : path, f32act ? " (f32 activations)" : "", n_eval, R.top1, R.top1_clear,
        a.n_clear, R.kl_mean, R.kl_max, R.ppl);
    free(ids);
    free(lg);
    vq_ctx_free(c);
    golden_close(&gd);
    return R;
}

#define GOLDEN_MAXP 256
#define GOLDEN_NGEN 64

/* One prompt of a greedy .json: prompt ids, llama.cpp's continuation and its top-2 margins. */
struct golden_prompt {
    char name[32];
    int32_t ids[GOLDEN_MAXP];
    int n;
    int32_t gold[GOLDEN_NGEN];
    double margin[GOLDEN_NGEN];
    int n_gold;
};

/* Reads up to max prompts of a greedy .json into P; returns how many. */
static inline int golden_greedy_load(const char *path, struct golden_prompt *P, int max) {
    size_t len;
    char *buf = golden_read_file(path, &len);
    if (!buf) return 0;
    cJSON *js = cJSON_Parse(buf);
    free(buf);
    if (!js) return 0;
    int nP = 0;
    cJSON *arr = cJSON_GetObjectItem(js, "prompts"), *p;
    cJSON_ArrayForEach(p, arr) {
        if (nP == max) break;
        struct golden_prompt *q = &P[nP];
        memset(q, 0, sizeof *q);
        cJSON *nm = cJSON_GetObjectItem(p, "name"), *ids = cJSON_GetObjectItem(p, "prompt_ids"),
              *gen = cJSON_GetObjectItem(p, "generated_ids"),
              *mg = cJSON_GetObjectItem(p, "top2_logit_margin"), *x;
        if (!cJSON_IsString(nm) || !cJSON_IsArray(ids) || !cJSON_IsArray(gen)) continue;
        snprintf(q->name, sizeof q->name, "%s", nm->valuestring);
        cJSON_ArrayForEach(x, ids) if (q->n < GOLDEN_MAXP) q->ids[q->n++] = (int32_t)x->valuedouble;
        cJSON_ArrayForEach(x, gen) if (q->n_gold < GOLDEN_NGEN)
            q->gold[q->n_gold++] = (int32_t)x->valuedouble;
        int i = 0;
        if (cJSON_IsArray(mg))
            cJSON_ArrayForEach(x, mg) if (i < GOLDEN_NGEN) q->margin[i++] = x->valuedouble;
        nP++;
    }
    cJSON_Delete(js);
    return nP;
}

/* Greedy continuation of ids (n) for n_gen tokens with the given cache configuration: the
 * prompt in batches of batch tokens, then one token per eval (as llama.cpp's generation). */
static inline int golden_greedy_run(const vq_model *m, const int32_t *ids, int n, int n_gen,
                                    enum vq_method km, int kb, enum vq_method vm, int vb,
                                    int threads, int batch, int32_t *out) {
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n + n_gen;
    cp.n_threads = threads;
    cp.n_batch = batch;
    cp.cache.key.method = km;
    cp.cache.key.bits = kb;
    cp.cache.value.method = vm;
    cp.cache.value.bits = vb;
    vq_status st;
    vq_ctx *c = vq_ctx_create(m, &cp, &st);
    if (!c) {
        fprintf(stderr, "ctx: %s\n", vq_engine_last_error());
        return 0;
    }
    const int nv = vq_model_info_get(m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv);
    struct vq_sampler_params sp = vq_sampler_params_default();
    vq_sampler *s = vq_sampler_create(&sp, nv, &st);
    int ok = vq_ctx_eval(c, ids, n, lg) == VQ_STATUS_OK;
    for (int i = 0; ok && i < n_gen; i++) {
        out[i] = vq_sampler_sample(s, lg);
        if (i + 1 < n_gen) ok = vq_ctx_eval(c, &out[i], 1, lg) == VQ_STATUS_OK;
    }
    vq_sampler_free(s);
    free(lg);
    vq_ctx_free(c);
    return ok;
}

static inline int golden_hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* Every prompt of a tokenizer_ids .json (n_want of them): ids of vq_tok_encode(add_special,
 * parse_special), pieces (token_to_piece special = true) and detokenized text
 * (remove_special = false, unparse_special = true) equal llama.cpp's. */
static inline void golden_tokenizer_check(const vq_tokenizer *T, const char *path, int n_want) {
    size_t len;
    char *js = golden_read_file(path, &len);
    ASSERT(js != NULL);
    if (!js) return;
    cJSON *root = cJSON_Parse(js);
    ASSERT(root != NULL);
    cJSON *prompts = cJSON_GetObjectItem(root, "prompts");
    ASSERT(cJSON_GetArraySize(prompts) == n_want);
    cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        const char *name = cJSON_GetObjectItem(p, "name")->valuestring;
        const char *text = cJSON_GetObjectItem(p, "text")->valuestring;
        cJSON *want = cJSON_GetObjectItem(p, "ids");
        int nw = cJSON_GetArraySize(want);
        int32_t ids[512];
        int64_t n = vq_tok_encode(T, text, strlen(text), true, true, ids, 512);
        int same = n == nw;
        for (int i = 0; same && i < nw; i++) same = ids[i] == cJSON_GetArrayItem(want, i)->valueint;
        if (!same) fprintf(stderr, "  ids differ from llama.cpp for \"%s\"\n", name);
        ASSERT(same);
        cJSON *hx = cJSON_GetObjectItem(p, "pieces_hex");
        for (int i = 0; i < nw && i < n; i++) {
            const char *h = cJSON_GetArrayItem(hx, i)->valuestring;
            size_t hl = strlen(h) / 2;
            char piece[256], wantb[256];
            for (size_t k = 0; k < hl && k < sizeof wantb; k++)
                wantb[k] = (char)(golden_hexval(h[2 * k]) * 16 + golden_hexval(h[2 * k + 1]));
            int64_t pl = vq_tok_token_to_piece(T, ids[i], piece, sizeof piece, true);
            ASSERT(pl == (int64_t)hl && memcmp(piece, wantb, hl) == 0);
        }
        const char *det = cJSON_GetObjectItem(p, "detokenized")->valuestring;
        char buf[2048];
        int64_t dl = vq_tok_detokenize(T, ids, n, buf, sizeof buf, false, true);
        ASSERT(dl == (int64_t)strlen(det) && memcmp(buf, det, strlen(det)) == 0);
    }
    cJSON_Delete(root);
    free(js);
}

#endif
