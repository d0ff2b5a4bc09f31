/* test_artifact.c — calibration artifact files: bit-exact round trip (memory and file,
 * atomic save into $VQ_CACHE_DIR folders created on demand), every flipped byte and every
 * truncation detected, wrong model hash / method tag -> NOT_FOUND, newer version ->
 * UNSUPPORTED, re-checksummed semantic corruptions -> BAD_FORMAT, default path rules. */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "veloxquant.h"
#include "artifact/artifact.h"

static vq_calib_data *make_calib(void) {
    enum { D = 16, N = 300 };
    static float x[N * D];
    vq_rng r;
    vq_rng_seed(&r, 11);
    for (int i = 0; i < N * D; i++) x[i] = (float)vq_rng_normal(&r) * (1.0f + (i % D == 1) * 4.0f);
    vq_calib_data *cd = vq_calib_data_create(3, D, NULL);
    if (!cd) return NULL;
    int ok = vq_calib_fit_vecinfer(cd, 0, VQ_ROLE_KEY, x, N, 4, 4, 1) == VQ_STATUS_OK &&
             vq_calib_fit_vecinfer(cd, 2, VQ_ROLE_VALUE, x, N, 3, 8, 1) == VQ_STATUS_OK &&
             vq_calib_fit_spectral(cd, 1, VQ_ROLE_KEY, x, N) == VQ_STATUS_OK &&
             vq_calib_fit_spectral(cd, 1, VQ_ROLE_VALUE, x + D, N - 1) == VQ_STATUS_OK &&
             vq_calib_fit_sensitivity(cd, 1, x, 50) == VQ_STATUS_OK;
    if (!ok) {
        vq_calib_data_free(cd);
        return NULL;
    }
    return cd;
}

static const uint8_t sha_a[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static void refresh_checksum(uint8_t *b, size_t len) {
    const size_t body = len - 8;
    uint64_t h = vq_fnv1a64(VQ_FNV64_INIT, b, body);
    for (int i = 0; i < 8; i++) b[body + i] = (uint8_t)(h >> (8 * i));
}

static int same_calib(const vq_calib_data *a, const vq_calib_data *b) {
    if (a->n_layers != b->n_layers || a->head_dim != b->head_dim) return 0;
    const int d = a->head_dim;
    for (int i = 0; i < a->n_layers * 2; i++) {
        const struct vq_calib_lr *x = &a->lr[i], *y = &b->lr[i];
        if ((x->smooth == NULL) != (y->smooth == NULL) ||
            (x->codebook == NULL) != (y->codebook == NULL) ||
            (x->pca_u == NULL) != (y->pca_u == NULL))
            return 0;
        if (x->smooth && memcmp(x->smooth, y->smooth, (size_t)d * 4)) return 0;
        if (x->codebook && (x->cb_k != y->cb_k || x->cb_v != y->cb_v ||
                            memcmp(x->codebook, y->codebook, (size_t)x->cb_k * x->cb_v * 4)))
            return 0;
        if (x->pca_u && (x->pca_ds != y->pca_ds || memcmp(x->pca_u, y->pca_u, (size_t)d * d * 4) ||
                         memcmp(x->pca_lambda, y->pca_lambda, (size_t)d * 4)))
            return 0;
    }
    for (int l = 0; l < a->n_layers; l++)
        if (!(a->sens[l] == b->sens[l] || (isnan(a->sens[l]) && isnan(b->sens[l])))) return 0;
    return 1;
}

TEST(round_trip_memory_and_corruption) {
    vq_calib_data *cd = make_calib();
    ASSERT(cd != NULL);
    if (!cd) return;
    const uint32_t params[6] = {4, 4, 300, 1, 0, 7};
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_STATUS(vq_calib_serialize(cd, "mixed", sha_a, params, &buf, &len), VQ_STATUS_OK);
    uint32_t pout[6];
    vq_status st;
    vq_calib_data *back = vq_calib_parse(buf, len, "mixed", sha_a, pout, &st);
    ASSERT_STATUS(st, VQ_STATUS_OK);
    ASSERT(back && same_calib(cd, back));
    ASSERT(memcmp(pout, params, sizeof params) == 0);
    /* deterministic bytes: serialize the parsed copy again */
    uint8_t *buf2 = NULL;
    size_t len2 = 0;
    if (back) {
        ASSERT_STATUS(vq_calib_serialize(back, "mixed", sha_a, params, &buf2, &len2), VQ_STATUS_OK);
        ASSERT(len2 == len && memcmp(buf, buf2, len) == 0);
    }
    vq_free(buf2);
    vq_calib_data_free(back);
    /* no check of tag/model when NULL */
    back = vq_calib_parse(buf, len, NULL, NULL, NULL, &st);
    ASSERT_STATUS(st, VQ_STATUS_OK);
    vq_calib_data_free(back);

    /* every single flipped bit pattern (one byte at a time) is detected */
    int undetected = 0;
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5A;
        vq_calib_data *c = vq_calib_parse(buf, len, "mixed", sha_a, NULL, &st);
        if (c || st == VQ_STATUS_OK) undetected++;
        vq_calib_data_free(c);
        buf[i] ^= 0x5A;
    }
    ASSERT_EQ_INT(undetected, 0);
    /* every truncation is detected */
    int trunc_ok = 0;
    for (size_t n = 0; n < len; n++) {
        vq_calib_data *c = vq_calib_parse(buf, n, "mixed", sha_a, NULL, &st);
        trunc_ok += c == NULL && st == VQ_STATUS_BAD_FORMAT;
        vq_calib_data_free(c);
    }
    ASSERT_EQ_INT(trunc_ok, (long long)len);
    /* wrong model hash / tag: stale artifact */
    uint8_t sha_b[32];
    memcpy(sha_b, sha_a, 32);
    sha_b[31] ^= 1;
    ASSERT(vq_calib_parse(buf, len, "mixed", sha_b, NULL, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_NOT_FOUND);
    ASSERT(vq_calib_parse(buf, len, "vecinfer", sha_a, NULL, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_NOT_FOUND);
    /* newer format version, checksum refreshed */
    uint8_t *mod = malloc(len);
    memcpy(mod, buf, len);
    mod[8] = 2;
    refresh_checksum(mod, len);
    ASSERT(vq_calib_parse(mod, len, NULL, NULL, NULL, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    /* semantic corruptions with a valid checksum */
    const size_t rec0 = VQ_CALIB_HEADER_BYTES; /* first record: layer 0 key SMOOTH */
    struct {
        size_t off;
        uint8_t val;
    } cases[] = {
        {rec0 + 0, 9},         /* unknown kind */
        {rec0 + 4, 3},         /* layer out of range */
        {rec0 + 8, 1},         /* smoothing on the value role */
        {rec0 + 12, 15},       /* wrong length */
        {rec0 + 20 + 3, 0xFF}, /* first smoothing factor NaN */
        {rec0 + 20 + 3, 0x80}, /* first smoothing factor negative */
        {60, 0},               /* n_layers 0 */
        {64, 12},              /* head_dim not a multiple of 8 */
        {92, 0},               /* n_records 0 but payload present */
        {12, 'A'},             /* tag with an invalid character */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        memcpy(mod, buf, len);
        mod[cases[k].off] = cases[k].val;
        refresh_checksum(mod, len);
        vq_calib_data *c = vq_calib_parse(mod, len, NULL, NULL, NULL, &st);
        if (c || st != VQ_STATUS_BAD_FORMAT) fprintf(stderr, "  case %zu: status %d\n", k, st);
        ASSERT(c == NULL);
        ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
        vq_calib_data_free(c);
    }
    free(mod);
    vq_free(buf);
    /* bad tags on write */
    ASSERT_STATUS(vq_calib_serialize(cd, "Bad", sha_a, NULL, &buf, &len), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_calib_serialize(cd, "waytoolongmethodname", sha_a, NULL, &buf, &len),
                  VQ_STATUS_INVALID_ARG);
    vq_calib_data_free(cd);
}

TEST(files_and_paths) {
    char dir[] = "/tmp/vq_calib_test_XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    setenv("VQ_CACHE_DIR", dir, 1);
    char path[512];
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, "c8v4", path, sizeof path),
                  VQ_STATUS_OK);
    char want[512];
    snprintf(want, sizeof want,
             "%s/vecinfer/0102030405060708090a0b0c0d0e0f10"
             "1112131415161718191a1b1c1d1e1f20/c8v4.vqcal",
             dir);
    ASSERT(strcmp(path, want) == 0);
    char small[16];
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, "c8v4", small, sizeof small),
                  VQ_STATUS_RANGE);
    ASSERT_STATUS(vq_calib_artifact_path("../x", sha_a, "c8v4", path, sizeof path),
                  VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, ".hidden", path, sizeof path),
                  VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, "c8v4", path, sizeof path),
                  VQ_STATUS_OK);

    vq_calib_data *cd = make_calib();
    ASSERT(cd != NULL);
    if (!cd) return;
    vq_status st;
    ASSERT(vq_calib_data_load(path, "vecinfer", sha_a, &st) == NULL); /* not there yet */
    ASSERT_STATUS(st, VQ_STATUS_IO);
    ASSERT_STATUS(vq_calib_data_save(cd, path, "vecinfer", sha_a, NULL), VQ_STATUS_OK);
    vq_calib_data *back = vq_calib_data_load(path, "vecinfer", sha_a, &st);
    ASSERT_STATUS(st, VQ_STATUS_OK);
    ASSERT(back && same_calib(cd, back));
    vq_calib_data_free(back);
    /* overwrite atomically; no temp files left behind */
    ASSERT_STATUS(vq_calib_data_save(cd, path, "vecinfer", sha_a, NULL), VQ_STATUS_OK);
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "test $(ls -A "
             "'%s/vecinfer/0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20'"
             " | wc -l) -eq 1",
             dir);
    ASSERT_EQ_INT(system(cmd), 0);
    /* corrupt the file on disk: one byte in the middle */
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    if (f) {
        fseek(f, 200, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, 200, SEEK_SET);
        fputc(ch ^ 1, f);
        fclose(f);
    }
    ASSERT(vq_calib_data_load(path, "vecinfer", sha_a, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
    /* truncate on disk */
    ASSERT_STATUS(vq_calib_data_save(cd, path, "vecinfer", sha_a, NULL), VQ_STATUS_OK);
    ASSERT_EQ_INT(truncate(path, 150), 0);
    ASSERT(vq_calib_data_load(path, "vecinfer", sha_a, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
    ASSERT(vq_calib_data_load(dir, NULL, NULL, &st) == NULL); /* a folder */
    ASSERT_STATUS(st, VQ_STATUS_IO);
    /* HOME fallback */
    unsetenv("VQ_CACHE_DIR");
    setenv("HOME", "/home/someone", 1);
    ASSERT_STATUS(vq_calib_artifact_path("spectral", sha_a, "pca", path, sizeof path),
                  VQ_STATUS_OK);
    ASSERT(strncmp(path, "/home/someone/.cache/veloxquant/spectral/0102", 45) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ASSERT_EQ_INT(system(cmd), 0);
    vq_calib_data_free(cd);
}

TEST(attach_from_cache) {
    enum { D = 16, N = 300, L = 2 };
    static float x[N * D];
    vq_rng r;
    vq_rng_seed(&r, 21);
    for (int i = 0; i < N * D; i++) x[i] = (float)vq_rng_normal(&r);
    char dir[] = "/tmp/vq_attach_XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    setenv("VQ_CACHE_DIR", dir, 1);
    const char *hexsha = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
    /* "a_wrong": keys (4,4) only; "b_right": keys (3,4) and values (3,8) on both layers */
    vq_calib_data *wrong = vq_calib_data_create(L, D, NULL),
                  *right = vq_calib_data_create(L, D, NULL);
    for (int l = 0; l < L; l++) {
        ASSERT_STATUS(vq_calib_fit_vecinfer(wrong, l, VQ_ROLE_KEY, x, N, 4, 4, 1), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(right, l, VQ_ROLE_KEY, x, N, 3, 4, 1), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(right, l, VQ_ROLE_VALUE, x, N, 3, 8, 1), VQ_STATUS_OK);
    }
    char path[512];
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, "a_wrong", path, sizeof path),
                  VQ_STATUS_OK);
    ASSERT_STATUS(vq_calib_data_save(wrong, path, "vecinfer", sha_a, NULL), VQ_STATUS_OK);
    ASSERT_STATUS(vq_calib_artifact_path("vecinfer", sha_a, "b_right", path, sizeof path),
                  VQ_STATUS_OK);
    ASSERT_STATUS(vq_calib_data_save(right, path, "vecinfer", sha_a, NULL), VQ_STATUS_OK);

    struct vq_cache_params cp = vq_cache_params_default();
    cp.key.method = cp.value.method = VQ_METHOD_VECINFER;
    cp.key.pq_codeword_bits = 3;
    cp.key.pq_subvec_dim = 4;
    cp.value.pq_codeword_bits = 3;
    cp.value.pq_subvec_dim = 8;
    vq_calib_data *owned[2] = {NULL, NULL};
    ASSERT_STATUS(vq_calib_attach(&cp, L, D, hexsha, owned), VQ_STATUS_OK);
    ASSERT(owned[0] != NULL && owned[1] == NULL); /* one set serves both sides */
    ASSERT(cp.key.calib == owned[0] && cp.value.calib == owned[0]);
    if (owned[0]) ASSERT(same_calib(owned[0], right));
    /* the attached params make a working cache */
    cp.n_layers = L;
    cp.head_dim = D;
    cp.max_tokens = 64;
    cp.page_tokens = 16;
    vq_cache *c = vq_cache_create(&cp, NULL);
    ASSERT(c != NULL);
    if (c) ASSERT_STATUS(vq_cache_append(c, 1, x, x + D, VQ_DTYPE_F32, 5), VQ_STATUS_OK);
    vq_cache_free(c);
    vq_calib_data_free(owned[0]);
    /* nothing usable: keys (5,4) -> NOT_FOUND, params unchanged, nothing owned */
    cp = vq_cache_params_default();
    cp.key.method = VQ_METHOD_VECINFER;
    cp.key.pq_codeword_bits = 5;
    cp.key.pq_subvec_dim = 4;
    ASSERT_STATUS(vq_calib_attach(&cp, L, D, hexsha, owned), VQ_STATUS_NOT_FOUND);
    ASSERT(cp.key.calib == NULL && owned[0] == NULL && owned[1] == NULL);
    /* more layers than the artifacts have -> NOT_FOUND; spectral has no folder -> NOT_FOUND */
    cp.key.pq_codeword_bits = 3;
    ASSERT_STATUS(vq_calib_attach(&cp, L + 1, D, hexsha, owned), VQ_STATUS_NOT_FOUND);
    cp.key.method = VQ_METHOD_SPECTRAL;
    ASSERT_STATUS(vq_calib_attach(&cp, L, D, hexsha, owned), VQ_STATUS_NOT_FOUND);
    /* methods without calibration: untouched, OK */
    cp = vq_cache_params_default();
    ASSERT_STATUS(vq_calib_attach(&cp, L, D, hexsha, owned), VQ_STATUS_OK);
    ASSERT(owned[0] == NULL && owned[1] == NULL && cp.key.calib == NULL);
    ASSERT_STATUS(vq_calib_attach(&cp, L, D, "xyz", owned), VQ_STATUS_INVALID_ARG);
    vq_calib_data_free(wrong);
    vq_calib_data_free(right);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ASSERT_EQ_INT(system(cmd), 0);
    unsetenv("VQ_CACHE_DIR");
}

int main(void) {
    RUN(attach_from_cache);
    RUN(round_trip_memory_and_corruption);
    RUN(files_and_paths);
    return TEST_REPORT();
}
