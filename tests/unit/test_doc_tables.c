/* test_doc_tables.c — the codebook tables printed in docs/ALGORITHMS.md are the library's:
 * §2.2 (N(0,1): centroids, boundaries, MSE, cos), §2.3 (Laplace: centroids, boundaries, MSE),
 * §2.4 (rotated coordinate: centroids and d*MSE per d) and §5.2 (PolarQuant angle codebooks)
 * are parsed from the document and compared with vq_lloyd_max / vq_polar_codebook to the
 * printed precision. Every table must have all its rows, so an edited or dropped table fails
 * as well as a changed codebook. */
#include "test.h"
#include "core/core.h"
#include "codecs/polar.h"

static char *g_doc;

static char *load_doc(void) {
    FILE *f = fopen(VQ_SOURCE_DIR "/docs/ALGORITHMS.md", "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Table rows ("| <digit>...") of the section whose heading starts with `head` (e.g.
 * "### 2.2 "), up to the next heading. Writes up to max row pointers; returns the count. */
static int table_rows(const char *head, const char **rows, int max) {
    const char *p = strstr(g_doc, head);
    int n = 0;
    if (!p) return 0;
    p = strchr(p, '\n');
    while (p && p[1] && p[1] != '#') {
        p++;
        if (p[0] == '|' && p[1] == ' ' && p[2] >= '0' && p[2] <= '9' && n < max) rows[n++] = p;
        p = strchr(p, '\n');
    }
    return n;
}

/* Copies column k (1 = the first, between '|') of a table row into out; 0 if there is none. */
static int cell(const char *row, int k, char *out, size_t cap) {
    const char *p = row;
    for (int i = 0; i < k; i++) {
        p = strchr(p, '|');
        if (!p) return 0;
        p++;
    }
    const char *e = strchr(p, '|');
    if (!e || (size_t)(e - p) >= cap) return 0;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = 0;
    return 1;
}

/* Numbers of a cell in order ("π/4" counts as pi/4); *paren (may be NULL) receives the index
 * of the first number inside parentheses, or -1. Returns the count. */
static int numbers(const char *s, double *v, int max, int *paren) {
    int n = 0;
    if (paren) *paren = -1;
    while (*s && n < max) {
        if (*s == '(' && paren && *paren < 0) *paren = n;
        if (!strncmp(s, "π/4", strlen("π/4"))) {
            v[n++] = M_PI / 4;
            s += strlen("π/4");
            continue;
        }
        if ((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')) {
            char *e;
            v[n++] = strtod(s, &e);
            s = e;
            continue;
        }
        s++;
    }
    return n;
}

static double gauss_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double laplace_cdf(double x) { return x < 0 ? 0.5 * exp(x) : 1.0 - 0.5 * exp(-x); }

/* sum_i c_i^2 P_i of a codebook (L centroids, L - 1 boundaries) under a CDF. */
static double second_moment(const float *c, const float *t, int L, double (*cdf)(double)) {
    double s = 0.0, lo = 0.0;
    for (int i = 0; i < L; i++) {
        const double hi = i + 1 < L ? cdf(t[i]) : 1.0;
        s += (double)c[i] * c[i] * (hi - lo);
        lo = hi;
    }
    return s;
}

/* §2.2 and §2.3: | b | centroids (positive half) | boundaries (positive half) | MSE | [cos] | */
static void check_closed_form(const char *head, enum vq_law law, double var) {
    const char *rows[8];
    const int nr = table_rows(head, rows, 8);
    ASSERT_EQ_INT(nr, 4);
    for (int r = 0; r < nr; r++) {
        char buf[512];
        double v[16];
        ASSERT(cell(rows[r], 1, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 1);
        const int b = (int)v[0], L = 1 << b, h = L / 2;
        const float *c, *t;
        const vq_status st = b >= 1 && b <= 4 ? vq_lloyd_max(law, b, 0, &c, &t)
                                              : VQ_STATUS_INVALID_ARG;
        ASSERT_STATUS(st, VQ_STATUS_OK);
        if (st != VQ_STATUS_OK) continue;
        ASSERT(cell(rows[r], 2, buf, sizeof buf));
        ASSERT_EQ_INT(numbers(buf, v, 16, NULL), h);
        for (int i = 0; i < h; i++) ASSERT_NEAR(v[i], c[h + i], 1.5e-6);
        ASSERT(cell(rows[r], 3, buf, sizeof buf));
        ASSERT_EQ_INT(numbers(buf, v, 16, NULL), h);
        for (int i = 0; i < h; i++) ASSERT_NEAR(v[i], t[h - 1 + i], 1.5e-6);
        const double D = var -
                         second_moment(c, t, L, law == VQ_LAW_GAUSS ? gauss_cdf : laplace_cdf);
        ASSERT(cell(rows[r], 4, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 1);
        ASSERT_NEAR(v[0], D, 2e-6);
        if (law == VQ_LAW_GAUSS) {
            ASSERT(cell(rows[r], 5, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 1);
            ASSERT_NEAR(v[0], sqrt(1.0 - D), 6e-5);
        }
    }
}

TEST(gauss_table) { check_closed_form("### 2.2 ", VQ_LAW_GAUSS, 1.0); }
TEST(laplace_table) { check_closed_form("### 2.3 ", VQ_LAW_LAPLACE, 2.0); }

/* CDF of one coordinate of a uniform unit vector in R^d at y (cumulative trapezoid on a grid,
 * linear in between), for the d·MSE column of §2.4. */
#define SPH_GRID 200001
static double *g_sph_F;
static int g_sph_d;
static double sphere_cdf(double y) {
    if (y <= -1.0) return 0.0;
    if (y >= 1.0) return 1.0;
    const double h = 2.0 / (SPH_GRID - 1), pos = (y + 1.0) / h;
    const int k = (int)pos < SPH_GRID - 1 ? (int)pos : SPH_GRID - 2;
    return g_sph_F[k] + (pos - k) * (g_sph_F[k + 1] - g_sph_F[k]);
}
static void sphere_grid(int d) {
    const double h = 2.0 / (SPH_GRID - 1), a = 0.5 * (d - 3);
    double prev = 0.0;
    g_sph_F[0] = 0.0;
    for (int i = 0; i < SPH_GRID; i++) {
        const double y = -1.0 + i * h, u = 1.0 - y * y, f = u > 0 ? exp(a * log(u)) : 0.0;
        if (i) g_sph_F[i] = g_sph_F[i - 1] + 0.5 * h * (prev + f);
        prev = f;
    }
    for (int i = 0; i < SPH_GRID; i++) g_sph_F[i] /= g_sph_F[SPH_GRID - 1];
    g_sph_d = d;
}
static double sphere_cdf_scaled(double z) { return sphere_cdf(z / sqrt((double)g_sph_d)); }

/* §2.4: | d | b = 1 | b = 2 | b = 3 | b = 4 |, cells "c, c, ... (d·MSE)" */
TEST(sphere_table) {
    const char *rows[8];
    const int nr = table_rows("### 2.4 ", rows, 8);
    ASSERT_EQ_INT(nr, 5);
    g_sph_F = malloc(sizeof(double) * SPH_GRID);
    for (int r = 0; r < nr; r++) {
        char buf[512];
        double v[16];
        int paren;
        ASSERT(cell(rows[r], 1, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 1);
        const int d = (int)v[0];
        ASSERT(d >= 3 && d <= 1024);
        if (d < 3 || d > 1024) continue;
        sphere_grid(d);
        for (int b = 1; b <= 4; b++) {
            const int L = 1 << b, h = L / 2;
            const float *c, *t;
            const vq_status st = vq_lloyd_max(VQ_LAW_SPHERE, b, d, &c, &t);
            ASSERT_STATUS(st, VQ_STATUS_OK);
            if (st != VQ_STATUS_OK) continue;
            ASSERT(cell(rows[r], 1 + b, buf, sizeof buf));
            ASSERT_EQ_INT(numbers(buf, v, 16, &paren), h + 1);
            ASSERT_EQ_INT(paren, h);
            for (int i = 0; i < h; i++) ASSERT_NEAR(v[i], c[h + i], 1.2e-5);
            /* d·MSE = d E[Y^2] - sum (sqrt(d) c_i)^2 P_i = 1 - sum C_i^2 P_i (centroid codebook) */
            ASSERT_NEAR(v[h], 1.0 - second_moment(c, t, L, sphere_cdf_scaled), 2e-5);
        }
    }
    free(g_sph_F);
}

/* §5.2: | level (exponent) | bits | centroids | boundaries ("midpoints" = not listed) | */
TEST(polar_table) {
    const char *rows[8];
    const int nr = table_rows("### 5.2 ", rows, 8);
    ASSERT_EQ_INT(nr, 5);
    for (int r = 0; r < nr; r++) {
        char buf[512];
        double v[16];
        float c[16], t[16];
        ASSERT(cell(rows[r], 1, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 2);
        const int level = (int)v[0];
        ASSERT_EQ_INT((int)v[1], (1 << (level - 1)) - 1);
        ASSERT(cell(rows[r], 2, buf, sizeof buf) && numbers(buf, v, 16, NULL) == 1);
        const int bits = (int)v[0], L = bits >= 1 && bits <= 4 ? 1 << bits : 0;
        const vq_status st = L ? vq_polar_codebook(level, bits, c, t) : VQ_STATUS_INVALID_ARG;
        ASSERT_STATUS(st, VQ_STATUS_OK);
        if (st != VQ_STATUS_OK) continue;
        ASSERT(cell(rows[r], 3, buf, sizeof buf));
        ASSERT_EQ_INT(numbers(buf, v, 16, NULL), L);
        for (int i = 0; i < L; i++) ASSERT_NEAR(v[i], c[i], 1.2e-5);
        ASSERT(cell(rows[r], 4, buf, sizeof buf));
        const int nb = numbers(buf, v, 16, NULL);
        ASSERT(nb == 0 || nb == L - 1);
        for (int i = 0; i < nb; i++) ASSERT_NEAR(v[i], t[i], 1.2e-5);
    }
}

int main(void) {
    g_doc = load_doc();
    ASSERT(g_doc != NULL);
    if (!g_doc) return TEST_REPORT();
    RUN(gauss_table);
    RUN(laplace_table);
    RUN(sphere_table);
    RUN(polar_table);
    free(g_doc);
    return TEST_REPORT();
}
