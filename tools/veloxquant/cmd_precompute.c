/* cmd_precompute.c — `veloxquant precompute`: writes the data-independent tables (Lloyd-Max
 * codebooks of the Gauss law and of the rotated-coordinate law at each head_dim, RHT sign
 * vectors for a seed) as artifacts (src/artifact/precomp.c, docs/FORMAT.md) under
 * <root>/precompute/<64 zeros>/d<D>_s<SEED>_b<BITS>.vqcal, root = $VQ_CACHE_DIR or
 * ~/.cache/veloxquant; with --check it instead verifies that stored tables are bit-identical
 * to the ones this build computes at start-up (a portability / regression check of the
 * numerics across compilers, ISAs and versions; exit 1 on any difference, missing or corrupt
 * file). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "veloxquant.h"
#include "cli.h"
#include "opts.h"
#include "vq_tools.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant precompute --head-dim D[,D..] --bits B[,B..] [--seed S] [--check]\n\n"
        "Writes the data-independent tables for each head_dim: Lloyd-Max codebooks (centroids and\n"
        "boundaries) of the Gauss law for every B and of the rotated-coordinate law (sqrt(d) x a\n"
        "coordinate of a random unit vector) for every B <= 4, and the randomized Hadamard sign\n"
        "vector of (D, seed), to <root>/precompute/<64 zeros>/d<D>_s<S>_b<B..>.vqcal\n"
        "(root = $VQ_CACHE_DIR or ~/.cache/veloxquant; format in docs/FORMAT.md).\n\n"
        "  --head-dim LIST   head dims (multiples of 8, 8..1024)\n"
        "  --bits LIST       bit-widths 1..6 (distinct)\n"
        "  --seed S          RHT seed (default 42, the codecs' default)\n"
        "  --check           verify stored tables equal the ones computed now (bit for bit);\n"
        "                    exit 1 on a difference, a missing or a corrupt file\n"
        "  -o, --out DIR     folder instead of the artifact cache\n"
        "  -h, --help        this help\n");
}

static int parse_ints(const char *opt, const char *arg, int lo, int hi, int *out, int max, int *n) {
    *n = 0;
    const char *p = arg;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < lo || v > hi || *n == max) {
            fprintf(stderr,
                    "precompute: %s: '%s' is not a list of integers in [%d, %d] (at most %d)\n",
                    opt, arg, lo, hi, max);
            return 0;
        }
        out[(*n)++] = (int)v;
        if (!*end) return 1;
        p = end + 1;
    }
}

int vq_cmd_precompute(int argc, char **argv) {
    static const char *C = "precompute";
    static const struct option lo[] = {
        {"head-dim", required_argument, 0, 'd'},
        {"bits", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},
        {"check", no_argument, 0, 'k'},
        {"out", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int dims[32], bits[6], n_dims = 0, n_bits = 0, check = 0;
    uint64_t seed = 42;
    const char *out_dir = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'd': ok = parse_ints("--head-dim", optarg, 8, 1024, dims, 32, &n_dims); break;
        case 'b': ok = parse_ints("--bits", optarg, 1, 6, bits, 6, &n_bits); break;
        case 's': ok = vq_opt_u64(C, "--seed", optarg, &seed); break;
        case 'k': check = 1; break;
        case 'o': out_dir = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
        case '?': vq_cli_bad_option(C, c, argc, argv, lo); return 2;
        }
        if (!ok) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", C, argv[optind]);
        return 2;
    }
    if (!n_dims || !n_bits) {
        fprintf(stderr, "precompute: --head-dim and --bits are required\n");
        return 2;
    }
    for (int i = 0; i < n_dims; i++)
        if (dims[i] % 8) {
            fprintf(stderr, "precompute: --head-dim: %d is not a multiple of 8\n", dims[i]);
            return 2;
        }
    char bname[8] = {0};
    for (int i = 0; i < n_bits; i++) {
        for (int j = 0; j < i; j++)
            if (bits[j] == bits[i]) {
                fprintf(stderr, "precompute: --bits: %d given twice\n", bits[i]);
                return 2;
            }
        bname[i] = (char)('0' + bits[i]);
    }
    struct stat sb; /* --out is a folder (created when missing), never a file */
    if (out_dir && stat(out_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "precompute: --out %s: exists and is not a folder\n", out_dir);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n_dims; i++) {
        struct vq_precomp want, have;
        vq_status st = vq_precomp_compute(dims[i], seed, bits, n_bits, &want);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "precompute: head_dim %d: %s\n", dims[i], vq_status_str(st));
            return 1;
        }
        char name[96], path[4096];
        snprintf(name, sizeof name, "d%d_s%llu_b%s", dims[i], (unsigned long long)seed, bname);
        const uint8_t zero[32] = {0};
        if (out_dir) snprintf(path, sizeof path, "%s/%s.vqcal", out_dir, name);
        else if ((st = vq_calib_artifact_path("precompute", zero, name, path, sizeof path)) !=
                 VQ_STATUS_OK) {
            fprintf(stderr, "precompute: artifact path: %s\n", vq_status_str(st));
            vq_precomp_free(&want);
            return 1;
        }
        if (check) {
            st = vq_precomp_load(path, &have);
            char why[256];
            if (st != VQ_STATUS_OK) {
                fprintf(stderr, "precompute: %s: %s\n", path,
                        st == VQ_STATUS_IO
                            ? "missing or unreadable (run precompute without --check)"
                        : st == VQ_STATUS_BAD_FORMAT ? "corrupt or truncated"
                                                     : vq_status_str(st));
                rc = 1;
            } else if (!vq_precomp_matches(&have, &want, why, sizeof why)) {
                fprintf(stderr, "precompute: %s: MISMATCH: %s\n", path, why);
                rc = 1;
            } else {
                printf("%s: %d tables identical to this build's\n", path, want.n_tables);
            }
            vq_precomp_free(&have);
        } else {
            errno = 0;
            st = vq_precomp_save(&want, path);
            if (st != VQ_STATUS_OK) {
                vq_cli_file_fail("precompute", "writing", path, st);
                rc = 1;
            } else {
                printf("wrote %s (%d tables)\n", path, want.n_tables);
            }
        }
        vq_precomp_free(&want);
    }
    return rc;
}
