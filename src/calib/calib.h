/*
 * calib.h — calibration numerics and the internal layout of vq_calib_data.
 *
 * Pieces: k-means (Lloyd), symmetric eigendecomposition by cyclic Jacobi rotations and PCA,
 * VecInfer smoothing factors, the deterministic orthonormal block Walsh-Hadamard transform
 * shared by calibration and the vecinfer codec, RateQuant allocation (public, veloxquant.h).
 * This folder sits below the codecs (which read fitted data through vq_calib_get) and includes
 * only src/core; artifact files and their lookup live above the codecs in src/artifact.
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
/* The same index from the transposed centroids ct (dim, k): identical result (dot products
 * summed over j in the same order, same tie rule), in blocks the compiler vectorises. Used by
 * vq_kmeans. Thread-safe. */
int vq_nearest_centroid_t(const float *p, const float *ct, const float *cn, int k, int dim);

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
    VQ_CALIB_KIND_SMOOTH = 1,   /* vecinfer smoothing factors: n0 = d, n1 = 1 */
    VQ_CALIB_KIND_CODEBOOK = 2, /* vecinfer codebook: n0 = 2^c entries, n1 = v */
    VQ_CALIB_KIND_PCA = 3,      /* spectral: n0 = d, n1 = d_s; data U (d*d) then lambda (d) */
    VQ_CALIB_KIND_SENS = 4,     /* RateQuant sensitivities: n0 = n_layers, n1 = 1 */
};

/* Per (layer, role) entries; NULL pointers mean "not fitted". */
struct vq_calib_lr {
    float *smooth;   /* (d) vecinfer key smoothing factors, > 0 */
    float *codebook; /* (cb_k, cb_v) vecinfer centroids */
    int cb_k, cb_v;
    float *pca_u;      /* (d, d) row-major, column j = eigenvector j (descending) */
    float *pca_lambda; /* (d) eigenvalues, descending, >= 0 */
    int pca_ds;        /* signal dims 1..d */
};

struct vq_calib_data {
    int n_layers;
    int head_dim;
    struct vq_calib_lr *lr; /* (n_layers, 2): index layer * 2 + role */
    double *sens;           /* (n_layers) sensitivities, NaN where not fitted */
};

#define VQ_CALIB_MAX_LAYERS 4096 /* most layers a vq_calib_data (and an artifact) holds */

/* Entry of (layer, role) or NULL when out of range / cd NULL. */
const struct vq_calib_lr *vq_calib_get(const vq_calib_data *cd, int layer, enum vq_role role);

#endif
