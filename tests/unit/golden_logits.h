/*
 * golden_logits.h — reader of the reference log-prob files (magic VQGLOGIT, format in
 * tests/golden/README.md) and the per-position comparison the logits tests share: top-1
 * agreement, KL(reference || engine) over the stored top-k ids plus one bucket for the rest of
 * the mass (a coarse-graining, which can only lower the KL), largest |difference| of the stored
 * log-probs, and the text's perplexity. Header-only, for tests.
 */
#ifndef VQ_TEST_GOLDEN_LOGITS_H
#define VQ_TEST_GOLDEN_LOGITS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct golden {
    uint8_t *buf; /* the whole file (owned) */
    size_t size;
    uint32_t n_vocab, n_text, n_eval, k, n_ctx, flags;
    uint32_t reserved; /* synthetic models: the last positions evaluated one at a time */
    size_t rec, rec0;  /* bytes per record, offset of record 0 */
};

static uint32_t golden_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static float golden_rdf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Reads and checks a reference file. Returns 0 with a message on stderr if it is missing,
 * has the wrong magic or version, or its size does not match its header. */
static int golden_open(struct golden *g, const char *path) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 0;
    }
    long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (sz > 40 && fseek(f, 0, SEEK_SET) == 0 && (g->buf = malloc((size_t)sz)) != NULL &&
        fread(g->buf, 1, (size_t)sz, f) == (size_t)sz)
        g->size = (size_t)sz;
    fclose(f);
    if (!g->size || memcmp(g->buf, "VQGLOGIT", 8) || golden_rd32(g->buf + 8) != 1) {
        fprintf(stderr, "%s: not a version-1 VQGLOGIT file\n", path);
        free(g->buf);
        g->buf = NULL;
        return 0;
    }
    const uint8_t *h = g->buf;
    g->n_vocab = golden_rd32(h + 12);
    g->n_text = golden_rd32(h + 16);
    g->n_eval = golden_rd32(h + 20);
    g->k = golden_rd32(h + 24);
    g->n_ctx = golden_rd32(h + 28);
    g->flags = golden_rd32(h + 32);
    g->reserved = golden_rd32(h + 36);
    g->rec = 4 + 8 * (size_t)g->k + 4;
    g->rec0 = 40 + 4 * (size_t)g->n_text;
    int ok = g->k >= 2 && g->n_eval <= g->n_text && g->size == g->rec0 + g->rec * g->n_eval;
    for (uint32_t i = 0; ok && i < g->n_eval; i++) /* record i holds text token i */
        ok = golden_rd32(g->buf + g->rec0 + g->rec * i) == golden_rd32(g->buf + 40 + 4 * (size_t)i);
    if (!ok) {
        fprintf(stderr, "%s: size %zu or token ids do not match its header\n", path, g->size);
        free(g->buf);
        g->buf = NULL;
    }
    return ok;
}

static void golden_close(struct golden *g) {
    free(g->buf);
    g->buf = NULL;
}

/* Token id i of the text (i < n_text). */
static int32_t golden_id(const struct golden *g, uint32_t i) {
    return (int32_t)golden_rd32(g->buf + 40 + 4 * i);
}

/* Accumulated comparison over positions. */
struct golden_acc {
    int n, agree;             /* positions scored, top-1 equal */
    int n_clear, agree_clear; /* positions whose reference top-1 leads by >= 0.2 nats */
    double kl_sum, kl_max;    /* KL(reference || engine), top-k + rest */
    double dlp_max;           /* largest |reference - engine| over the stored top-k log-probs */
    double nll;               /* engine NLL of the next text token, positions < n_eval - 1 */
    int n_nll;
};

/* Scores the engine's logits (n_vocab floats) for position i against the reference record. */
static void golden_score(const struct golden *g, uint32_t i, const float *l, struct golden_acc *a) {
    const uint8_t *r = g->buf + g->rec0 + g->rec * i;
    const uint32_t k = g->k, nv = g->n_vocab;
    double mx = l[0];
    uint32_t best = 0;
    for (uint32_t j = 1; j < nv; j++)
        if (l[j] > mx) {
            mx = l[j];
            best = j;
        }
    double se = 0;
    for (uint32_t j = 0; j < nv; j++) se += exp(l[j] - mx);
    const double lse = mx + log(se);
    double kl = 0, mass = 0;
    for (uint32_t j = 0; j < k; j++) {
        const double lpg = golden_rdf(r + 4 + 4 * k + 4 * j),
                     lpo = l[golden_rd32(r + 4 + 4 * j)] - lse;
        kl += exp(lpg) * (lpg - lpo);
        mass += exp(lpo);
        if (fabs(lpg - lpo) > a->dlp_max) a->dlp_max = fabs(lpg - lpo);
    }
    const double lrg = golden_rdf(r + 4 + 8 * k), lro = log(fmax(1.0 - mass, 1e-30));
    kl += exp(lrg) * (lrg - lro);
    a->kl_sum += kl;
    if (kl > a->kl_max) a->kl_max = kl;
    a->n++;
    a->agree += best == golden_rd32(r + 4);
    if (golden_rdf(r + 4 + 4 * k) - golden_rdf(r + 8 + 4 * k) >= 0.2f) {
        a->n_clear++;
        a->agree_clear += best == golden_rd32(r + 4);
    }
    if (i + 1 < g->n_eval) {
        a->nll -= l[golden_id(g, i + 1)] - lse;
        a->n_nll++;
    }
}

#endif
