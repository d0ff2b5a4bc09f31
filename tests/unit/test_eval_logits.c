/* test_eval_logits.c — top-k summaries and KL (no model): top-k order and remainder, KL of a
 * row against its own summary is exactly 0, KL with k = n_vocab equals the exact KL computed
 * in double, top-k KL never exceeds the exact KL, top-1 agreement; the file format: round
 * trip, token hash, truncated / corrupted files rejected, discarded writers leave nothing. */
#include "test.h"

#include <unistd.h>

#include "eval/logits.h"

static uint64_t rs = 99;
static double urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

static void rand_logits(float *x, int n, double scale) {
    for (int i = 0; i < n; i++) x[i] = (float)((urand() * 2 - 1) * scale);
}

static double exact_kl(const float *p, const float *q, int n) {
    double mp = -1e30, mq = -1e30, sp = 0, sq = 0, kl = 0;
    for (int i = 0; i < n; i++) {
        mp = p[i] > mp ? p[i] : mp;
        mq = q[i] > mq ? q[i] : mq;
    }
    for (int i = 0; i < n; i++) {
        sp += exp(p[i] - mp);
        sq += exp(q[i] - mq);
    }
    const double lp = mp + log(sp), lq = mq + log(sq);
    for (int i = 0; i < n; i++) kl += exp(p[i] - lp) * ((p[i] - lp) - (q[i] - lq));
    return kl;
}

TEST(summary_and_kl) {
    enum { V = 500 };
    float a[V], b[V];
    struct vq_logit_rec r;
    for (int trial = 0; trial < 20; trial++) {
        rand_logits(a, V, 6);
        for (int i = 0; i < V; i++) b[i] = a[i] + (float)((urand() - 0.5) * 0.8);
        double lse = vq_logit_summarize(a, V, 16, 7, &r);
        ASSERT_EQ_INT(r.top_k, 16);
        for (int i = 1; i < 16; i++) ASSERT(r.logp[i] <= r.logp[i - 1]);
        /* the top-16 are really the 16 largest */
        int above = 0;
        for (int i = 0; i < V; i++) above += a[i] > a[r.ids[15]];
        ASSERT(above <= 15);
        double s = 0;
        for (int i = 0; i < 16; i++) s += exp(r.logp[i]);
        ASSERT_NEAR(s + r.rest, 1.0, 1e-5);
        ASSERT_NEAR(r.target_logp, a[7] - lse, 1e-5);
        /* against itself: exactly 0 and top-1 agreement */
        int t1 = 0;
        ASSERT(vq_logit_kl(&r, a, V, &t1) == 0.0);
        ASSERT_EQ_INT(t1, 1);
        /* top-k KL is a lower bound of the exact KL; with k = V it is the exact KL */
        const double ex = exact_kl(a, b, V);
        ASSERT(vq_logit_kl(&r, b, V, NULL) <= ex + 1e-6);
        struct vq_logit_rec full;
        vq_logit_summarize(a, V, 256, 0, &full);
        float a2[256], b2[256];
        memcpy(a2, a, sizeof a2);
        memcpy(b2, b, sizeof b2);
        vq_logit_summarize(a2, 256, 256, 0, &full);
        ASSERT_NEAR(vq_logit_kl(&full, b2, 256, NULL), exact_kl(a2, b2, 256), 2e-5);
    }
    /* top-1 disagreement */
    float c[4] = {0, 5, 1, 2}, d[4] = {0, 1, 6, 2};
    vq_logit_summarize(c, 4, 2, 1, &r);
    int t1 = 1;
    ASSERT(vq_logit_kl(&r, d, 4, &t1) > 1.0);
    ASSERT_EQ_INT(t1, 0);
    /* ties keep the lower id first */
    float e[5] = {1, 3, 3, 0, 3};
    vq_logit_summarize(e, 5, 3, 0, &r);
    ASSERT(r.ids[0] == 1 && r.ids[1] == 2 && r.ids[2] == 4);
}

TEST(file_round_trip) {
    char path[64], tmp[80];
    snprintf(path, sizeof path, "/tmp/vq_test_logits_%ld.bin", (long)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    enum { V = 300, K = 8, N = 25 };
    vq_status st;
    vq_logits_file *w = vq_logits_create(path, K, V, 64, &st);
    ASSERT(w != NULL);
    if (!w) return;
    struct vq_logit_rec recs[N], r;
    float x[V];
    uint64_t h = VQ_LOGITS_HASH_INIT;
    for (int i = 0; i < N; i++) {
        rand_logits(x, V, 4);
        vq_logit_summarize(x, V, K, (uint32_t)(i * 11 % V), &recs[i]);
        ASSERT_STATUS(vq_logits_write(w, &recs[i]), VQ_STATUS_OK);
        h = vq_logits_hash_u32(h, (uint32_t)(i * 11 % V));
    }
    ASSERT(access(path, F_OK) != 0); /* not visible before close */
    ASSERT_STATUS(vq_logits_close(w), VQ_STATUS_OK);
    vq_logits_file *f = vq_logits_open(path, &st);
    ASSERT(f != NULL);
    if (!f) return;
    ASSERT_EQ_INT(vq_logits_top_k(f), K);
    ASSERT_EQ_INT(vq_logits_n_vocab(f), V);
    ASSERT_EQ_INT(vq_logits_ctx(f), 64);
    ASSERT_EQ_INT(vq_logits_n_records(f), N);
    ASSERT(vq_logits_token_hash(f) == h);
    for (int i = 0; i < N; i++) {
        ASSERT_STATUS(vq_logits_read(f, &r), VQ_STATUS_OK);
        ASSERT(r.target == recs[i].target && r.rest == recs[i].rest &&
               r.target_logp == recs[i].target_logp);
        ASSERT(!memcmp(r.ids, recs[i].ids, K * 4) && !memcmp(r.logp, recs[i].logp, K * 4));
    }
    ASSERT_STATUS(vq_logits_read(f, &r), VQ_STATUS_NOT_FOUND);
    vq_logits_close(f);

    /* truncated: size no longer matches the record count */
    FILE *fp = fopen(path, "r+b");
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fclose(fp);
    ASSERT(truncate(path, sz - 3) == 0);
    ASSERT(vq_logits_open(path, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
    ASSERT(truncate(path, sz) == 0);
    /* a corrupted id (byte 64 + 12: first id of record 0) is rejected when read */
    fp = fopen(path, "r+b");
    fseek(fp, 64 + 12, SEEK_SET);
    const uint8_t big[4] = {0xff, 0xff, 0xff, 0x7f};
    fwrite(big, 1, 4, fp);
    fclose(fp);
    f = vq_logits_open(path, &st);
    ASSERT(f != NULL);
    if (f) {
        ASSERT_STATUS(vq_logits_read(f, &r), VQ_STATUS_BAD_FORMAT);
        vq_logits_close(f);
    }
    /* bad magic */
    fp = fopen(path, "r+b");
    fwrite("XX", 1, 2, fp);
    fclose(fp);
    ASSERT(vq_logits_open(path, &st) == NULL);
    unlink(path);
    ASSERT(vq_logits_open("/nonexistent/l.bin", &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_IO);
    /* a discarded writer leaves neither the file nor its temporary */
    w = vq_logits_create(path, K, V, 64, &st);
    ASSERT_STATUS(vq_logits_write(w, &recs[0]), VQ_STATUS_OK);
    vq_logits_discard(w);
    ASSERT(access(path, F_OK) != 0);
    ASSERT(access(tmp, F_OK) != 0);
    ASSERT(vq_logits_create(path, 0, V, 64, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

int main(void) {
    RUN(summary_and_kl);
    RUN(file_round_trip);
    return TEST_REPORT();
}
