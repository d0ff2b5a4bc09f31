/* test_artifact_precomp.c — precomputed data-independent tables (src/artifact/precomp.c): the
 * computed tables equal the codecs' start-up tables (vq_lloyd_max, vq_rht_init), a saved
 * file loads back bit-identical and matches, every single-byte corruption and every
 * truncation is rejected, a changed value is reported as a mismatch, bad arguments fail. */
#include "test.h"
#include "veloxquant.h"
#include "artifact/artifact.h"

#include <unistd.h>

static char dir_[256];

TEST(compute_equals_startup_tables) {
    const int bits[4] = {1, 2, 3, 5};
    struct vq_precomp p;
    ASSERT_STATUS(vq_precomp_compute(96, 7, bits, 4, &p), VQ_STATUS_OK);
    /* 4 gauss + 3 sphere (bits <= 4) + signs */
    ASSERT_EQ_INT(p.n_tables, 8);
    int seen_signs = 0;
    for (int i = 0; i < p.n_tables; i++) {
        const struct vq_precomp_table *t = &p.t[i];
        if (t->kind == VQ_PRECOMP_KIND_RHT_SIGNS) {
            vq_rht r;
            ASSERT_STATUS(vq_rht_init(&r, 96, 7), VQ_STATUS_OK);
            ASSERT_EQ_INT(t->n, 96);
            ASSERT(memcmp(t->data, r.signs, 96 * sizeof(float)) == 0);
            vq_rht_free(&r);
            seen_signs++;
            continue;
        }
        const float *c, *b;
        ASSERT_STATUS(vq_lloyd_max((enum vq_law)t->law, t->bits, 96, &c, &b), VQ_STATUS_OK);
        ASSERT_EQ_INT(t->n, 1 << t->bits);
        ASSERT(memcmp(t->data, c, sizeof(float) * (size_t)t->n) == 0);
        ASSERT(memcmp(t->data + t->n, b, sizeof(float) * (size_t)(t->n - 1)) == 0);
        ASSERT(t->law == VQ_LAW_GAUSS || (t->law == VQ_LAW_SPHERE && t->bits <= 4));
    }
    ASSERT_EQ_INT(seen_signs, 1);
    vq_precomp_free(&p);
}

TEST(save_load_match_and_corruption) {
    const int bits[3] = {2, 3, 4};
    struct vq_precomp p, q;
    ASSERT_STATUS(vq_precomp_compute(64, 42, bits, 3, &p), VQ_STATUS_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/sub/t.vqcal", dir_);
    ASSERT_STATUS(vq_precomp_save(&p, path), VQ_STATUS_OK);
    ASSERT_STATUS(vq_precomp_load(path, &q), VQ_STATUS_OK);
    ASSERT_EQ_INT(q.head_dim, 64);
    ASSERT(q.seed == 42);
    ASSERT_EQ_INT(q.n_tables, p.n_tables);
    char why[256];
    ASSERT(vq_precomp_matches(&q, &p, why, sizeof why));
    /* a stored set with more widths still serves a request for fewer */
    const int two[1] = {3};
    struct vq_precomp r;
    ASSERT_STATUS(vq_precomp_compute(64, 42, two, 1, &r), VQ_STATUS_OK);
    ASSERT(vq_precomp_matches(&q, &r, NULL, 0));
    ASSERT(!vq_precomp_matches(&r, &q, why, sizeof why)); /* and not the other way round */
    ASSERT(strstr(why, "not stored") != NULL);
    vq_precomp_free(&r);
    /* another seed or head_dim does not match */
    ASSERT_STATUS(vq_precomp_compute(64, 43, bits, 3, &r), VQ_STATUS_OK);
    ASSERT(!vq_precomp_matches(&q, &r, why, sizeof why));
    vq_precomp_free(&r);
    /* a changed value is a mismatch naming the table */
    q.t[1].data[2] = nextafterf(q.t[1].data[2], 10.0f);
    ASSERT(!vq_precomp_matches(&q, &p, why, sizeof why));
    ASSERT(strstr(why, "lloyd gauss 3-bit: value 2") != NULL);
    vq_precomp_free(&q);

    /* every single-byte flip and every truncation of the file is rejected */
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_STATUS(vq_calib_read_file(path, &buf, &len), VQ_STATUS_OK);
    ASSERT_STATUS(vq_precomp_parse(buf, len, &q), VQ_STATUS_OK);
    vq_precomp_free(&q);
    int rejected = 0;
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x10;
        rejected += vq_precomp_parse(buf, len, &q) != VQ_STATUS_OK;
        vq_precomp_free(&q);
        buf[i] ^= 0x10;
    }
    ASSERT_EQ_INT(rejected, len);
    rejected = 0;
    for (size_t n = 0; n < len; n += 7) rejected += vq_precomp_parse(buf, n, &q) != VQ_STATUS_OK;
    ASSERT_EQ_INT(rejected, (len + 6) / 7);
    /* a calibration artifact (another tag) is not a precompute file */
    vq_status st;
    vq_calib_data *cd = vq_calib_data_create(2, 64, &st);
    float x[64 * 4];
    for (int i = 0; i < 64 * 4; i++) x[i] = (float)(i % 7) - 3.0f;
    ASSERT_STATUS(vq_calib_fit_sensitivity(cd, 0, x, 4), VQ_STATUS_OK);
    ASSERT_STATUS(vq_calib_fit_sensitivity(cd, 1, x, 4), VQ_STATUS_OK);
    const uint8_t sha[32] = {1};
    char p2[512];
    snprintf(p2, sizeof p2, "%s/other.vqcal", dir_);
    ASSERT_STATUS(vq_calib_data_save(cd, p2, "ratequant", sha, NULL), VQ_STATUS_OK);
    ASSERT_STATUS(vq_precomp_load(p2, &q), VQ_STATUS_NOT_FOUND);
    vq_calib_data_free(cd);
    snprintf(p2, sizeof p2, "%s/missing.vqcal", dir_);
    ASSERT_STATUS(vq_precomp_load(p2, &q), VQ_STATUS_IO);
    vq_free(buf);
    vq_precomp_free(&p);
}

TEST(bad_arguments) {
    struct vq_precomp p;
    const int ok[1] = {2}, bad7[1] = {7}, dup[2] = {2, 2};
    ASSERT_STATUS(vq_precomp_compute(60, 1, ok, 1, &p), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_precomp_compute(2048, 1, ok, 1, &p), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_precomp_compute(64, 1, bad7, 1, &p), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_precomp_compute(64, 1, dup, 2, &p), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_precomp_compute(64, 1, ok, 0, &p), VQ_STATUS_INVALID_ARG);
    ASSERT_EQ_INT(p.n_tables, 0);
}

int main(void) {
    snprintf(dir_, sizeof dir_, "/tmp/vq_precomp_test_%ld", (long)getpid());
    RUN(compute_equals_startup_tables);
    RUN(save_load_match_and_corruption);
    RUN(bad_arguments);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir_);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir_);
    return TEST_REPORT();
}
