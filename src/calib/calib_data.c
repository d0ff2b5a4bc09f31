/*
 * calib_data.c — the vq_calib_data container and the fitting entry points (public contracts
 * in veloxquant.h, layout in calib.h).
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"

/* ---- create / free / access ----------------------------------------------------------------- */

vq_calib_data *vq_calib_data_create(int n_layers, int head_dim, vq_status *st) {
    if (n_layers < 1 || n_layers > VQ_CALIB_MAX_LAYERS || head_dim < 8 || head_dim > 1024 ||
        head_dim % 8 != 0) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_calib_data *cd = vq_alloc(sizeof *cd);
    if (cd) {
        cd->n_layers = n_layers;
        cd->head_dim = head_dim;
        cd->lr = vq_alloc((size_t)n_layers * 2 * sizeof *cd->lr);
        cd->sens = vq_alloc((size_t)n_layers * sizeof(double));
    }
    if (!cd || !cd->lr || !cd->sens) {
        vq_calib_data_free(cd);
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    for (int i = 0; i < n_layers; i++) cd->sens[i] = NAN;
    if (st) *st = VQ_STATUS_OK;
    return cd;
}

static void lr_clear_vecinfer_(struct vq_calib_lr *e) {
    vq_free(e->smooth);
    vq_free(e->codebook);
    e->smooth = NULL;
    e->codebook = NULL;
    e->cb_k = e->cb_v = 0;
}

static void lr_clear_pca_(struct vq_calib_lr *e) {
    vq_free(e->pca_u);
    vq_free(e->pca_lambda);
    e->pca_u = NULL;
    e->pca_lambda = NULL;
    e->pca_ds = 0;
}

void vq_calib_data_free(vq_calib_data *cd) {
    if (!cd) return;
    if (cd->lr)
        for (int i = 0; i < cd->n_layers * 2; i++) {
            lr_clear_vecinfer_(&cd->lr[i]);
            lr_clear_pca_(&cd->lr[i]);
        }
    vq_free(cd->lr);
    vq_free(cd->sens);
    vq_free(cd);
}

int vq_calib_data_n_layers(const vq_calib_data *cd) { return cd ? cd->n_layers : 0; }

int vq_calib_data_head_dim(const vq_calib_data *cd) { return cd ? cd->head_dim : 0; }

const struct vq_calib_lr *vq_calib_get(const vq_calib_data *cd, int layer, enum vq_role role) {
    if (!cd || layer < 0 || layer >= cd->n_layers || (role != VQ_ROLE_KEY && role != VQ_ROLE_VALUE))
        return NULL;
    return &cd->lr[layer * 2 + (int)role];
}

int vq_calib_signal_dims(const vq_calib_data *cd, int layer, enum vq_role role) {
    const struct vq_calib_lr *e = vq_calib_get(cd, layer, role);
    return e && e->pca_u ? e->pca_ds : 0;
}

const double *vq_calib_sensitivities(const vq_calib_data *cd) {
    if (!cd) return NULL;
    for (int i = 0; i < cd->n_layers; i++)
        if (!(cd->sens[i] > 0.0)) return NULL;
    return cd->sens;
}

/* ---- fitting -------------------------------------------------------------------------------- */

static vq_status check_samples_(const vq_calib_data *cd, int layer, enum vq_role role,
                                const float *x, int64_t n, int64_t min_n) {
    if (!cd || !x || layer < 0 || layer >= cd->n_layers || n < min_n || n > ((int64_t)1 << 32))
        return VQ_STATUS_INVALID_ARG;
    if (role != VQ_ROLE_KEY && role != VQ_ROLE_VALUE) return VQ_STATUS_INVALID_ARG;
    for (int64_t i = 0; i < n * cd->head_dim; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    return VQ_STATUS_OK;
}

vq_status vq_calib_fit_vecinfer(vq_calib_data *cd, int layer, enum vq_role role, const float *x,
                                int64_t n, int codeword_bits, int subvec_dim, uint64_t seed) {
    VQ_RETURN_IF_ERR(check_samples_(cd, layer, role, x, n, 1));
    const int d = cd->head_dim;
    if (codeword_bits < 1 || codeword_bits > 12 || subvec_dim < 1 || subvec_dim > 16 ||
        d % subvec_dim != 0)
        return VQ_STATUS_INVALID_ARG;
    const int k = 1 << codeword_bits;
    const int64_t n_sub = n * (d / subvec_dim);
    if (n_sub < k) return VQ_STATUS_INVALID_ARG;
    float *lambda = NULL;
    float *cb = vq_alloc((size_t)k * (size_t)subvec_dim * sizeof(float));
    float *tx = vq_alloc((size_t)n * (size_t)d * sizeof(float));
    if (role == VQ_ROLE_KEY) lambda = vq_alloc((size_t)d * sizeof(float));
    if (!cb || !tx || (role == VQ_ROLE_KEY && !lambda)) {
        vq_free(cb);
        vq_free(tx);
        vq_free(lambda);
        return VQ_STATUS_NO_MEMORY;
    }
    memcpy(tx, x, (size_t)n * (size_t)d * sizeof(float));
    if (lambda) {
        vq_smooth_factors(x, n, d, lambda);
        for (int64_t t = 0; t < n; t++) {
            float *r = tx + t * d;
            for (int c = 0; c < d; c++) r[c] /= lambda[c];
            vq_wht_blocks(r, d);
        }
    }
    vq_status s = vq_kmeans(tx, n_sub, subvec_dim, k, 30, seed, cb, NULL);
    vq_free(tx);
    if (s != VQ_STATUS_OK) {
        vq_free(cb);
        vq_free(lambda);
        return s;
    }
    struct vq_calib_lr *e = &cd->lr[layer * 2 + (int)role];
    lr_clear_vecinfer_(e);
    e->smooth = lambda;
    e->codebook = cb;
    e->cb_k = k;
    e->cb_v = subvec_dim;
    return VQ_STATUS_OK;
}

vq_status vq_calib_fit_spectral(vq_calib_data *cd, int layer, enum vq_role role, const float *x,
                                int64_t n) {
    VQ_RETURN_IF_ERR(check_samples_(cd, layer, role, x, n, 2));
    const int d = cd->head_dim;
    const size_t dd = (size_t)d * (size_t)d;
    double *cov = vq_alloc(dd * sizeof(double));
    double *ev = vq_alloc((size_t)d * sizeof(double));
    double *U = vq_alloc(dd * sizeof(double));
    float *u = vq_alloc(dd * sizeof(float));
    float *lam = vq_alloc((size_t)d * sizeof(float));
    vq_status s = VQ_STATUS_NO_MEMORY;
    if (!cov || !ev || !U || !u || !lam) goto done;
    for (int64_t t = 0; t < n; t++) {
        const float *r = x + t * d;
        for (int i = 0; i < d; i++) {
            const double ri = r[i];
            double *row = cov + (size_t)i * d;
            for (int j = i; j < d; j++) row[j] += ri * (double)r[j];
        }
    }
    for (int i = 0; i < d; i++)
        for (int j = i; j < d; j++) {
            cov[(size_t)i * d + j] /= (double)n;
            cov[(size_t)j * d + i] = cov[(size_t)i * d + j];
        }
    s = vq_sym_eig(cov, d, ev, U);
    if (s != VQ_STATUS_OK) goto done;
    for (size_t i = 0; i < dd; i++) u[i] = (float)U[i];
    for (int i = 0; i < d; i++) lam[i] = ev[i] > 0 ? (float)ev[i] : 0.0f;
    double pr = vq_participation_ratio(ev, d);
    int ds = (int)ceil(pr - 1e-9);
    ds = ds < 1 ? 1 : (ds > d ? d : ds);
    struct vq_calib_lr *e = &cd->lr[layer * 2 + (int)role];
    lr_clear_pca_(e);
    e->pca_u = u;
    e->pca_lambda = lam;
    e->pca_ds = ds;
    u = NULL;
    lam = NULL;
done:
    vq_free(cov);
    vq_free(ev);
    vq_free(U);
    vq_free(u);
    vq_free(lam);
    return s;
}

vq_status vq_calib_fit_sensitivity(vq_calib_data *cd, int layer, const float *x, int64_t n) {
    VQ_RETURN_IF_ERR(check_samples_(cd, layer, VQ_ROLE_KEY, x, n, 1));
    const int d = cd->head_dim;
    double s = 0.0;
    for (int64_t t = 0; t < n; t++) {
        double r = 0.0;
        for (int c = 0; c < d; c++) r += (double)x[t * d + c] * x[t * d + c];
        s += r;
    }
    s /= (double)n;
    if (!(s > 0.0) || !isfinite(s)) return VQ_STATUS_RANGE;
    cd->sens[layer] = s;
    return VQ_STATUS_OK;
}
