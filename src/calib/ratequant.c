/*
 * ratequant.c — RateQuant per-layer bit allocation (docs/ALGORITHMS.md §8.3) and the fit of
 * the distortion-per-bit ratio beta on Gaussian Lloyd-Max quantizers. Contracts in
 * veloxquant.h.
 */
#include <math.h>

#include "calib/calib.h"

/* MSE of the unit-variance Gaussian Lloyd-Max quantizer: D = 1 - sum c_i^2 P_i. */
static vq_status gauss_lm_mse_(int bits, double *d) {
    const float *c, *t;
    VQ_RETURN_IF_ERR(vq_lloyd_max(VQ_LAW_GAUSS, bits, 0, &c, &t));
    const int L = 1 << bits;
    double s = 0.0, lo = 0.0;
    for (int i = 0; i < L; i++) {
        const double hi = i + 1 < L ? 0.5 * erfc(-(double)t[i] / sqrt(2.0)) : 1.0;
        s += (double)c[i] * (double)c[i] * (hi - lo);
        lo = hi;
    }
    *d = 1.0 - s;
    return VQ_STATUS_OK;
}

vq_status vq_ratequant_fit_beta(const int *bits, int n_bits, double *beta) {
    if (!bits || !beta || n_bits < 2 || n_bits > 6) return VQ_STATUS_INVALID_ARG;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n_bits; i++) {
        if (bits[i] < 1 || bits[i] > 6) return VQ_STATUS_INVALID_ARG;
        for (int j = 0; j < i; j++)
            if (bits[j] == bits[i]) return VQ_STATUS_INVALID_ARG;
        double d;
        VQ_RETURN_IF_ERR(gauss_lm_mse_(bits[i], &d));
        const double x = bits[i], y = log(d);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    const double slope = (n_bits * sxy - sx * sy) / (n_bits * sxx - sx * sx);
    *beta = exp(-slope);
    return VQ_STATUS_OK;
}

vq_status vq_ratequant_allocate(const double *w, int n, double b_avg, const int *allowed,
                                int n_allowed, double beta, int *bits_out) {
    if (!w || !allowed || !bits_out || n < 1 || n_allowed < 1 || n > (1 << 20) || n_allowed > 64)
        return VQ_STATUS_INVALID_ARG;
    for (int j = 1; j < n_allowed; j++)
        if (allowed[j] <= allowed[j - 1]) return VQ_STATUS_INVALID_ARG;
    if (!isfinite(b_avg) || !isfinite(beta)) return VQ_STATUS_INVALID_ARG;
    if (b_avg < allowed[0] || b_avg > allowed[n_allowed - 1]) return VQ_STATUS_RANGE;
    if (beta <= 0.0) {
        const int fb[3] = {1, 2, 3};
        VQ_RETURN_IF_ERR(vq_ratequant_fit_beta(fb, 3, &beta));
    }
    if (beta <= 1.0) return VQ_STATUS_INVALID_ARG;
    double mean_lw = 0.0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0.0) || !isfinite(w[i])) return VQ_STATUS_INVALID_ARG;
        mean_lw += log(w[i]);
    }
    mean_lw /= n;
    const double lb = log(beta);
    const double lo = allowed[0], hi = allowed[n_allowed - 1];
    int *idx = vq_alloc((size_t)n * sizeof(int));
    double *real = vq_alloc((size_t)n * sizeof(double));
    if (!idx || !real) {
        vq_free(idx);
        vq_free(real);
        return VQ_STATUS_NO_MEMORY;
    }
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        double r = b_avg + (log(w[i]) - mean_lw) / lb;
        r = r < lo ? lo : (r > hi ? hi : r);
        real[i] = r;
        int best = 0;
        for (int j = 1; j < n_allowed; j++) /* nearest allowed value, ties to the lower */
            if (fabs(allowed[j] - r) < fabs(allowed[best] - r)) best = j;
        idx[i] = best;
        sum += allowed[best];
    }
    const long long target = llround((double)n * b_avg);
    /* too many bits: step down where the rounding went up the most */
    while (sum > target) {
        int pick = -1;
        double pg = 0.0;
        for (int i = 0; i < n; i++) {
            if (idx[i] == 0) continue;
            const double g = allowed[idx[i]] - real[i];
            if (pick < 0 || g > pg || (g == pg && w[i] < w[pick])) {
                pick = i;
                pg = g;
            }
        }
        VQ_ASSERT(pick >= 0); /* b_avg >= allowed[0] keeps the minimum reachable */
        sum -= allowed[idx[pick]] - allowed[idx[pick] - 1];
        idx[pick]--;
    }
    /* too few: step up where the rounding went down the most, never overshooting */
    while (sum < target) {
        int pick = -1;
        double pg = 0.0;
        for (int i = 0; i < n; i++) {
            if (idx[i] + 1 >= n_allowed) continue;
            if (sum + (allowed[idx[i] + 1] - allowed[idx[i]]) > target) continue;
            const double g = real[i] - allowed[idx[i]];
            if (pick < 0 || g > pg || (g == pg && w[i] > w[pick])) {
                pick = i;
                pg = g;
            }
        }
        if (pick < 0) break;
        sum += allowed[idx[pick] + 1] - allowed[idx[pick]];
        idx[pick]++;
    }
    for (int i = 0; i < n; i++) bits_out[i] = allowed[idx[i]];
    vq_free(idx);
    vq_free(real);
    return VQ_STATUS_OK;
}
