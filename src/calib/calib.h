/*
 * calib.h — calibration numerics and the internal layout of vq_calib_data.
 *
 * Pieces: k-means (Lloyd), symmetric eigendecomposition by cyclic Jacobi rotations and PCA,
 * VecInfer smoothing factors, the deterministic orthonormal block Walsh-Hadamard transform
 * shared by calibration and the vecinfer codec, RateQuant allocation (public, veloxquant.h),
 * and the artifact container (serialize / parse, FNV-1a 64 checksum).
 * Everything here is deterministic for a seed; nothing prints. Not part of the public API.
 */
#ifndef VQ_CALIB_H
#define VQ_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* ---- k-means ------------------------------------------------------------------------------ */

/* Lloyd k-means of n points x (n, dim) into k centroids (k, dim), written to centroids.
 * Init: k-means++ D^2 sampling from a seeded RNG (see kmeans.c for why not plain random). Each
 * iteration assigns every point to its nearest centroid (squared L2, lowest index on ties),
 * then recomputes centroids as means in double precision; a cluster left empty is reseeded
 * with the point currently farthest from its centroid (ties: lowest index), each point used
 * at most once per iteration. Stops after iters iterations or when no assignment changes.
 * assign (n, may be NULL) receives the final assignment. Requires n >= k >= 1, dim >= 1.
 * Returns INVALID_ARG, NON_FINITE (NaN/Inf in x) or NO_MEMORY. The assignment step runs on
 * OpenMP threads (results do not depend on the thread count). */
vq_status vq_kmeans(const float *x, int64_t n, int dim, int k, int iters, uint64_t seed,
                    float *centroids, int32_t *assign);

/* Index of the nearest of k centroids (k, dim) to p, given precomputed squared norms cn (k):
 * argmin_i cn[i] - 2 <p, c_i> (lowest index on ties). Thread-safe. */
int vq_nearest_centroid(const float *p, const float *centroids, const float *cn, int k, int dim);

/* ---- eigendecomposition / PCA -------------------------------------------------------------- */

/* Eigendecomposition of the symmetric matrix a (n, n; row-major, overwritten) by cyclic Jacobi
 * rotations (until the off-diagonal norm is below 1e-15 of the total norm, at most 100 sweeps).
 * Writes eigenvalues (n, descending) and eigenvectors as the columns of evecs (n, n row-major:
 * evecs[i*n + j] = component i of eigenvector j), each of unit length with its largest-|.|
 * component positive (deterministic signs). Returns INVALID_ARG or NO_MEMORY. */
vq_status vq_sym_eig(double *a, int n, double *evals, double *evecs);

/* Participation ratio (sum l)^2 / sum l^2 of n non-negative eigenvalues (0 if all zero). */
double vq_participation_ratio(const double *evals, int n);

/* ---- VecInfer pieces ----------------------------------------------------------------------- */

/* lambda_c = max(sqrt(max_t |x[t, c]|), 1e-4) for the n samples x (n, d). */
void vq_smooth_factors(const float *x, int64_t n, int d, float *lambda);

/* Orthonormal, deterministic Walsh-Hadamard transform of v (d floats, in place): d is split
 * greedily into power-of-two blocks (80 = 64 + 16, 96 = 64 + 32), each block gets the
 * Sylvester FWHT scaled by 1/sqrt(block). No random signs. Symmetric and self-inverse. */
void vq_wht_blocks(float *v, int d);

/* ---- calibration data ---------------------------------------------------------------------- */

enum vq_calib_kind {
    VQ_CALIB_KIND_SMOOTH = 1,    /* vecinfer smoothing factors: n0 = d, n1 = 1 */
    VQ_CALIB_KIND_CODEBOOK = 2,  /* vecinfer codebook: n0 = 2^c entries, n1 = v */
    VQ_CALIB_KIND_PCA = 3,       /* spectral: n0 = d, n1 = d_s; data U (d*d) then lambda (d) */
    VQ_CALIB_KIND_SENS = 4,      /* RateQuant sensitivities: n0 = n_layers, n1 = 1 */
};

/* Per (layer, role) entries; NULL pointers mean "not fitted". */
struct vq_calib_lr {
    float *smooth;       /* (d) vecinfer key smoothing factors, > 0 */
    float *codebook;     /* (cb_k, cb_v) vecinfer centroids */
    int cb_k, cb_v;
    float *pca_u;        /* (d, d) row-major, column j = eigenvector j (descending) */
    float *pca_lambda;   /* (d) eigenvalues, descending, >= 0 */
    int pca_ds;          /* signal dims 1..d */
};

struct vq_calib_data {
    int n_layers;
    int head_dim;
    struct vq_calib_lr *lr;  /* (n_layers, 2): index layer * 2 + role */
    double *sens;            /* (n_layers) sensitivities, NaN where not fitted */
};

/* Entry of (layer, role) or NULL when out of range / cd NULL. */
const struct vq_calib_lr *vq_calib_get(const vq_calib_data *cd, int layer, enum vq_role role);

/* ---- artifact container -------------------------------------------------------------------- */

#define VQ_CALIB_MAGIC "VQCALIB\0"
#define VQ_CALIB_FORMAT_VERSION 1u
#define VQ_CALIB_HEADER_BYTES 104u   /* fixed header before the payload */
#define VQ_CALIB_TRAILER_BYTES 8u    /* FNV-1a 64 checksum */
#define VQ_CALIB_MAX_LAYERS 4096
#define VQ_CALIB_MAX_FILE (1ull << 31)

/* FNV-1a 64-bit hash of n bytes, continuing from h (start with VQ_FNV64_INIT). */
#define VQ_FNV64_INIT 0xcbf29ce484222325ull
uint64_t vq_fnv1a64(uint64_t h, const void *data, size_t n);

/* Serializes cd into a newly allocated buffer (*out, *out_len; free with vq_free). */
vq_status vq_calib_serialize(const vq_calib_data *cd, const char *method,
                             const uint8_t model_sha256[32], const uint32_t params[6],
                             uint8_t **out, size_t *out_len);
/* Parses and validates an artifact held in memory (untrusted). Same statuses and checks as
 * vq_calib_data_load. params_out (6, may be NULL) receives the header parameters. */
vq_calib_data *vq_calib_parse(const uint8_t *buf, size_t len, const char *method,
                              const uint8_t model_sha256[32], uint32_t *params_out,
                              vq_status *st);

/* ---- artifact lookup ------------------------------------------------------------------------ */

/* vq_calib_attach (veloxquant.h) that also explains a NOT_FOUND: why (why_cap bytes, may be
 * NULL) receives "; "-separated reasons per artifact file rejected (unreadable, corrupt or
 * truncated, another model, does not fit the config) or that none exists. A rejected file
 * is never used. */
vq_status vq_calib_attach_diag(struct vq_cache_params *cp, int n_layers, int head_dim,
                               const char *model_sha256_hex, vq_calib_data *owned[2], char *why,
                               size_t why_cap);

/* ---- files -------------------------------------------------------------------------------- */
/* The file and precompute functions below keep no global state (the temp-file name of
 * vq_calib_write_atomic carries the pid and an atomic counter): thread-safe for distinct
 * arguments. */

/* Writes len bytes atomically to path (temp file in the same folder, fsync, rename; missing
 * folders created). Returns OK, INVALID_ARG, IO or NO_MEMORY. */
vq_status vq_calib_write_atomic(const char *path, const uint8_t *buf, size_t len);
/* Reads a whole regular file (at most VQ_CALIB_MAX_FILE bytes) into *out (vq_alloc'd, caller
 * frees with vq_free) and its length. Returns OK, INVALID_ARG, IO, BAD_FORMAT (too large) or
 * NO_MEMORY. */
vq_status vq_calib_read_file(const char *path, uint8_t **out, size_t *out_len);

/* ---- precomputed data-independent tables (precomp.c, docs/FORMAT.md) ---------------------- */

/* One head_dim's tables: Lloyd-Max codebooks (centroids + boundaries) of the Gauss law and of
 * the rotated-coordinate (SPHERE) law at d, and the RHT sign vector of (d, seed). */
#define VQ_PRECOMP_MAX_TABLES 16
enum { VQ_PRECOMP_KIND_LLOYD = 16, VQ_PRECOMP_KIND_RHT_SIGNS = 17 };
struct vq_precomp_table {
    int kind;          /* VQ_PRECOMP_KIND_* */
    int law, bits;     /* LLOYD: enum vq_law (GAUSS or SPHERE), bits */
    int n;             /* LLOYD: 2^bits centroids (then n - 1 boundaries); RHT: d signs */
    float *data;       /* LLOYD: n + n - 1 floats; RHT: n floats (+-1) */
};
struct vq_precomp {
    int head_dim;
    uint64_t seed;
    int n_tables;
    struct vq_precomp_table t[VQ_PRECOMP_MAX_TABLES];
};
/* Computes the tables for head_dim d (8..1024, multiple of 8), seed and the bit-widths bits
 * (n_bits 1..6 entries, each 1..6): a GAUSS codebook per width, a SPHERE codebook per width
 * <= 4, and the RHT signs (vq_rht_init(d, seed)), exactly as the codecs compute them at
 * start-up. *out is zeroed first; free with vq_precomp_free. */
vq_status vq_precomp_compute(int d, uint64_t seed, const int *bits, int n_bits, struct vq_precomp *out);
void vq_precomp_free(struct vq_precomp *p);
/* Serializes into the artifact container (tag "precompute", zero model hash) and writes it
 * atomically to path. */
vq_status vq_precomp_save(const struct vq_precomp *p, const char *path);
/* Parses an untrusted buffer / loads a file: BAD_FORMAT (magic, checksum, truncation, bad
 * records, non-finite values), UNSUPPORTED (newer version), NOT_FOUND (another tag), IO.
 * *out is zeroed first; on OK the caller owns it (vq_precomp_free), on error nothing is
 * left allocated in it. */
vq_status vq_precomp_parse(const uint8_t *buf, size_t len, struct vq_precomp *out);
vq_status vq_precomp_load(const char *path, struct vq_precomp *out);
/* Compares a stored set with a computed one table by table, bit for bit (have and want must
 * not be NULL). Returns 1 when
 * every table of want is in have with identical values (have may hold more); else 0 and a
 * description of the first difference in why (may be NULL). */
int vq_precomp_matches(const struct vq_precomp *have, const struct vq_precomp *want, char *why,
                       size_t why_cap);

#endif
