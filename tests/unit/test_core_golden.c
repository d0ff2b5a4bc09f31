/* test_core_golden.c — core numerics against golden files generated from the reference
 * simulations (scripts/golden/gen_core_golden.py -> tests/golden/core/): Lloyd-Max centroids
 * (Gaussian, Laplace, sphere law for d = 64..256) to 1e-6, and the Kronecker Hadamard
 * transform (H_K (x) H_P)/sqrt(d) for d = 24..224, K in {12, 20, 28} to 1e-5 relative. */
#include <stdio.h>

#include "test.h"
#include "core/core.h"

static FILE *open_golden(const char *name) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/golden/core/%s", VQ_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "cannot open %s\n", path);
    return f;
}

TEST(lloyd_max_golden) {
    FILE *f = open_golden("lloyd_max.txt");
    ASSERT(f != NULL);
    if (!f) return;
    char kind[16];
    int n_lines = 0, bad = 0;
    while (fscanf(f, "%15s", kind) == 1) {
        int d = 0, b = 0;
        enum vq_law law;
        if (!strcmp(kind, "gauss")) law = VQ_LAW_GAUSS;
        else if (!strcmp(kind, "laplace")) law = VQ_LAW_LAPLACE;
        else if (!strcmp(kind, "sphere")) {
            law = VQ_LAW_SPHERE;
            if (fscanf(f, "%d", &d) != 1) break;
        } else break;
        if (fscanf(f, "%d", &b) != 1) break;
        const float *c, *t;
        ASSERT_STATUS(vq_lloyd_max(law, b, d, &c, &t), VQ_STATUS_OK);
        for (int i = 0; i < (1 << b); i++) {
            double v;
            if (fscanf(f, "%lf", &v) != 1) {
                bad++;
                break;
            }
            if (fabs(c[i] - v) > 1e-6) {
                fprintf(stderr, "  %s d=%d b=%d c[%d] = %.8f, golden %.8f\n", kind, d, b, i, c[i],
                        v);
                bad++;
            }
        }
        n_lines++;
    }
    fclose(f);
    ASSERT_EQ_INT(n_lines, 8 + 4 + 20);
    ASSERT_EQ_INT(bad, 0);
}

TEST(kron_rht_golden) {
    FILE *f = open_golden("kron_rht.txt");
    ASSERT(f != NULL);
    if (!f) return;
    char tag[4];
    int cases = 0;
    float x[256], y[256], out[256];
    while (fscanf(f, "%3s", tag) == 1) {
        int d, K;
        if (strcmp(tag, "x") || fscanf(f, "%d %d", &d, &K) != 2 || d > 256) break;
        for (int i = 0; i < d; i++)
            if (fscanf(f, "%f", &x[i]) != 1) return;
        if (fscanf(f, "%3s %d %d", tag, &d, &K) != 3) break;
        for (int i = 0; i < d; i++)
            if (fscanf(f, "%f", &y[i]) != 1) return;
        vq_rht r;
        ASSERT_STATUS(vq_rht_init(&r, d, 1), VQ_STATUS_OK);
        ASSERT_EQ_INT(r.kind, 1);
        ASSERT_EQ_INT(r.K, K);
        for (int i = 0; i < d; i++) r.signs[i] = 1.0f; /* the reference has no random signs */
        vq_rht_forward(&r, x, out);
        double e = 0, n = 0;
        for (int i = 0; i < d; i++) {
            e += (out[i] - y[i]) * (double)(out[i] - y[i]);
            n += (double)y[i] * y[i];
        }
        ASSERT_LE(sqrt(e / n), 1e-5);
        vq_rht_inverse(&r, y, out);
        e = 0;
        n = 0;
        for (int i = 0; i < d; i++) {
            e += (out[i] - x[i]) * (double)(out[i] - x[i]);
            n += (double)x[i] * x[i];
        }
        ASSERT_LE(sqrt(e / n), 1e-5);
        vq_rht_free(&r);
        cases++;
    }
    fclose(f);
    ASSERT_EQ_INT(cases, 7);
}

int main(void) {
    RUN(lloyd_max_golden);
    RUN(kron_rht_golden);
    return TEST_REPORT();
}
