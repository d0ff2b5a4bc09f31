/* opts.c — strict option value parsing shared by the CLI commands. */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "vq_engine.h"
#include "vq_tools.h"

int vq_opt_long(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    if (!val) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end) {
        fprintf(stderr, "%s: %s: '%s' is not an integer\n", cmd, opt, val);
        return 0;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "%s: %s: %ld is out of range [%ld, %ld]\n", cmd, opt, v, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

int vq_opt_int(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out) {
    long v;
    if (!vq_opt_long(cmd, opt, val, lo, hi, &v)) return 0;
    *out = (int)v;
    return 1;
}

int vq_opt_u64(const char *cmd, const char *opt, const char *val, uint64_t *out) {
    if (!val) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end || val[0] == '-') {
        fprintf(stderr, "%s: %s: '%s' is not a non-negative integer\n", cmd, opt, val);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

int vq_opt_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                  double *out) {
    if (!val) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || v != v) {
        fprintf(stderr, "%s: %s: '%s' is not a number\n", cmd, opt, val);
        return 0;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "%s: %s: %g is out of range [%g, %g]\n", cmd, opt, v, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

int vq_opt_method(const char *cmd, const char *opt, const char *val, enum vq_method *out) {
    if (!val) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return 0;
    }
    if (vq_method_from_name(val, out) == VQ_STATUS_OK) {
        struct vq_method_info mi;
        if (vq_method_info_get(*out, &mi) == VQ_STATUS_OK && mi.implemented) return 1;
    }
    const char *near = vq_kv_nearest_name(val, 1);
    if (near) {
        fprintf(stderr, "%s: %s: unknown method '%s': did you mean %s?\n", cmd, opt, val, near);
        return 0;
    }
    fprintf(stderr, "%s: %s: unknown method '%s'; available:", cmd, opt, val);
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        struct vq_method_info mi;
        if (vq_method_info_get((enum vq_method)m, &mi) == VQ_STATUS_OK && mi.implemented)
            fprintf(stderr, " %s", mi.name);
    }
    fprintf(stderr, "\n");
    return 0;
}

int vq_opt_isa(const char *cmd, const char *opt, const char *val, enum vq_isa *out) {
    if (!val) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return 0;
    }
    for (int i = 0; i < VQ_ISA_COUNT; i++) {
        if (!strcmp(val, vq_isa_name((enum vq_isa)i))) {
            if (i != VQ_ISA_AUTO && !vq_isa_available((enum vq_isa)i)) {
                fprintf(stderr, "%s: %s: this CPU cannot run '%s'\n", cmd, opt, val);
                return 0;
            }
            *out = (enum vq_isa)i;
            return 1;
        }
    }
    fprintf(stderr, "%s: %s: '%s' is not one of auto, scalar, avx2, avx512\n", cmd, opt, val);
    return 0;
}

int vq_cli_warn_wait_policy(const char *cmd, int threads) {
    const long n = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    const int passive = wp && !strcasecmp(wp, "passive"), nospin = sc && !strcmp(sc, "0");
    if (n <= 1 || !(passive || nospin)) return 0;
    fprintf(stderr,
            "%s: note: %s makes the %ld threads sleep between the hundreds of parallel regions "
            "of each step (decode several times slower on 2 threads); unset it: OpenMP's default "
            "already sleeps after a short spin\n",
            cmd, passive ? "OMP_WAIT_POLICY=passive" : "GOMP_SPINCOUNT=0", n);
    return 1;
}

double vq_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double vq_median(const double *v, int n) {
    double tmp[256];
    if (n <= 0) return 0.0;
    if (n > 256) n = 256;
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

void vq_opt_codec_error(const char *cmd, const char *what, enum vq_method m, int bits, int head_dim,
                        vq_status st) {
    struct vq_method_info mi;
    const char *params = vq_method_info_get(m, &mi) == VQ_STATUS_OK ? mi.params : "";
    fprintf(stderr, "%s: %s %s bits=%d head_dim=%d: %s (%s accepts: %s)\n", cmd, what,
            vq_method_name(m), bits, head_dim, vq_status_str(st), vq_method_name(m), params);
}

void vq_cli_model_stem(const char *file, char *out, size_t cap) {
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    if (n == 0) {
        b = "model";
        n = 5;
    }
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap; i++) {
        char c = b[i];
        out[j++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                           c == '.' || c == '-' || c == '_'
                     ? c
                     : '_';
    }
    out[j] = 0;
    if (out[0] == '.') out[0] = '_'; /* no hidden, "." or ".." folder */
}

/* The long option of lo nearest to name (without its dashes), or NULL: a likely typo. */
static const char *nearest_option(const char *name, const struct option *lo) {
    const char *names[256];
    int n = 0;
    for (; lo && lo->name && n < 256; lo++) names[n++] = lo->name;
    const int i = vq_nearest_name(name, names, n);
    return i >= 0 ? names[i] : NULL;
}

void vq_cli_bad_option(const char *cmd, int c, int argc, char **argv, const struct option *lo) {
    /* getopt_long leaves optind past the element it read; a short option inside a bundle
     * (-xyz) is reported by its letter, a long one by its element */
    const char *elem = optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "?";
    char shown[80];
    if (optopt && !(elem[0] == '-' && elem[1] == '-')) snprintf(shown, sizeof shown, "-%c", optopt);
    else snprintf(shown, sizeof shown, "%.70s", elem);
    if (c == ':') {
        fprintf(stderr, "%s: %s needs a value\n", cmd, shown);
        return;
    }
    const char *near = NULL;
    if (shown[0] == '-' && shown[1] == '-') {
        char name[80];
        snprintf(name, sizeof name, "%s", shown + 2);
        name[strcspn(name, "=")] = 0;
        near = nearest_option(name, lo);
    }
    if (near)
        fprintf(stderr, "%s: unknown option '%s': did you mean --%s? (veloxquant %s --help)\n", cmd,
                shown, near, cmd);
    else fprintf(stderr, "%s: unknown option '%s' (veloxquant %s --help)\n", cmd, shown, cmd);
}

const char *vq_cli_model(const char *given, char *buf, size_t cap) {
    if (given) return given;
    if (vq_model_default_path(buf, cap) < 0 && cap) buf[0] = 0;
    return buf;
}

const char *vq_cli_default_corpus(char *buf, size_t cap) {
    snprintf(buf, cap, "data/corpus_en.txt"); /* from the repository root: recorded as is */
    if (access(buf, R_OK) == 0) return buf;
    const char *d = getenv("VQ_DATA");
    if (d && *d) {
        snprintf(buf, cap, "%s/corpus_en.txt", d);
        return buf;
    }
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *sl = strrchr(exe, '/');
        if (sl) *sl = 0;
        static const char *const rel[2] = {"../data/corpus_en.txt",
                                           "../share/veloxquant/corpus_en.txt"};
        for (int i = 0; i < 2; i++) {
            snprintf(buf, cap, "%s/%s", exe, rel[i]);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    snprintf(buf, cap, "data/corpus_en.txt");
    return buf;
}

int vq_opt_output(const char *cmd, const char *opt, const char *path) {
    if (vq_file_check_output(path) == VQ_STATUS_OK) return 1;
    fprintf(stderr, "%s: %s: %s\n", cmd, opt, vq_file_error());
    return 0;
}

void vq_cli_file_fail(const char *cmd, const char *opt, const char *path, vq_status st) {
    const int e = errno;
    const char *why = vq_file_error();
    if (why[0]) fprintf(stderr, "%s: %s: %s\n", cmd, opt, why);
    else if (st == VQ_STATUS_IO && e)
        fprintf(stderr, "%s: %s %s: %s (%s)\n", cmd, opt, path, vq_status_str(st), strerror(e));
    else fprintf(stderr, "%s: %s %s: %s\n", cmd, opt, path, vq_status_str(st));
}
