/* rht.c — randomized Hadamard rotation (docs/ALGORITHMS.md §1): power-of-two FWHT, Kronecker
 * H_K (x) H_P for d = K*2^n with K in {12, 20, 28} (Paley I for 12/20, Paley II for 28), and a
 * block-diagonal fallback (random permutation, then independent power-of-two blocks) for any
 * other d. Every variant is orthogonal: the forward map is (1/sqrt) H D (with the
 * permutation for block-diagonal) and the inverse is its transpose. */
#include <math.h>
#include <string.h>

#include "core/core.h"

#define VQ_RHT_MAX_D 4096

/* In-place unnormalized FWHT of n = 2^k floats (natural/Sylvester order). n <= 1 is a no-op. */
void vq_fwht(float *v, int n) {
    if (n >= 2) {
        /* h = 1 and h = 2 fused: radix-4 butterflies. */
        int h = 1;
        if (n >= 4) {
            for (int i = 0; i < n; i += 4) {
                float a = v[i], b = v[i + 1], c = v[i + 2], e = v[i + 3];
                float s0 = a + b, d0 = a - b, s1 = c + e, d1 = c - e;
                v[i] = s0 + s1;
                v[i + 1] = d0 + d1;
                v[i + 2] = s0 - s1;
                v[i + 3] = d0 - d1;
            }
            h = 4;
        }
        for (; h < n; h *= 2) {
            for (int i = 0; i < n; i += 2 * h) {
                float *p = v + i, *q = v + i + h;
                for (int j = 0; j < h; j++) {
                    float a = p[j], b = q[j];
                    p[j] = a + b;
                    q[j] = a - b;
                }
            }
        }
    }
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static int legendre(int a, int q) {
    a %= q;
    if (a < 0) a += q;
    if (a == 0) return 0;
    long r = 1, base = a;
    for (int e = (q - 1) / 2; e > 0; e >>= 1) {
        if (e & 1) r = r * base % q;
        base = base * base % q;
    }
    return r == 1 ? 1 : -1;
}

/* Paley I (q prime, q = 3 mod 4): order q+1, first row all +1, row i+1 = [-1, Q[i] + I[i]]. */
static void paley1(int q, float *h) {
    int n = q + 1;
    for (int j = 0; j < n; j++) h[j] = 1.0f;
    for (int i = 0; i < q; i++) {
        h[(i + 1) * n] = -1.0f;
        for (int j = 0; j < q; j++) h[(i + 1) * n + j + 1] = (float)(legendre(j - i, q) + (i == j));
    }
}

/* Paley II (q prime, q = 1 mod 4): order 2(q+1) from the symmetric conference matrix C;
 * 0 -> [[1,1],[1,-1]], +-1 -> +-[[1,-1],[-1,-1]]. */
static void paley2(int q, float *h) {
    int m = q + 1, n = 2 * m;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            int c;
            if (i == 0 && j == 0) c = 0;
            else if (i == 0 || j == 0) c = 1;
            else c = legendre((j - 1) - (i - 1), q);
            static const float A[2][2] = {{1, 1}, {1, -1}}, B[2][2] = {{1, -1}, {-1, -1}};
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    h[(2 * i + a) * n + 2 * j + b] = c == 0 ? A[a][b] : (float)c * B[a][b];
        }
    }
}

/* Initializes r for dimension d (1..4096) with signs (and permutation) drawn from `seed`.
 * Returns INVALID_ARG for d out of range, NO_MEMORY on allocation failure (r is then left
 * freeable). r is owned by the caller (vq_rht_free); immutable afterwards, so it may be used
 * from many threads. */
vq_status vq_rht_init(vq_rht *r, int d, uint64_t seed) {
    memset(r, 0, sizeof(*r));
    if (d < 1 || d > VQ_RHT_MAX_D) return VQ_STATUS_INVALID_ARG;
    r->d = d;
    r->signs = (float *)vq_alloc(sizeof(float) * (size_t)d);
    if (!r->signs) return VQ_STATUS_NO_MEMORY;
    vq_rng g;
    vq_rng_seed(&g, seed ^ 0x5248542d5349474eull); /* "RHT-SIGN" */
    for (int i = 0; i < d; i++) r->signs[i] = (vq_rng_u64(&g) >> 63) ? -1.0f : 1.0f;
    if (is_pow2(d)) {
        r->kind = 0;
        r->K = 1;
        r->P = d;
        return VQ_STATUS_OK;
    }
    static const int Ks[3] = {12, 20, 28};
    for (int k = 0; k < 3; k++) {
        int K = Ks[k];
        if (d % K == 0 && is_pow2(d / K)) {
            r->kind = 1;
            r->K = K;
            r->P = d / K;
            r->hk = (float *)vq_alloc(sizeof(float) * (size_t)(K * K));
            if (!r->hk) return VQ_STATUS_NO_MEMORY;
            if (K == 12) paley1(11, r->hk);
            else if (K == 20) paley1(19, r->hk);
            else paley2(13, r->hk);
            return VQ_STATUS_OK;
        }
    }
    r->kind = 2;
    r->perm = (int *)vq_alloc(sizeof(int) * (size_t)d);
    if (!r->perm) return VQ_STATUS_NO_MEMORY;
    for (int i = 0; i < d; i++) r->perm[i] = i;
    for (int i = d - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(vq_rng_u64(&g) % (uint64_t)(i + 1));
        int t = r->perm[i];
        r->perm[i] = r->perm[j];
        r->perm[j] = t;
    }
    int off = 0, rem = d;
    while (rem > 0) {
        int len = 1;
        while (len * 2 <= rem) len *= 2;
        VQ_ASSERT(r->n_blocks < 16);
        r->blk_off[r->n_blocks] = off;
        r->blk_len[r->n_blocks] = len;
        r->n_blocks++;
        off += len;
        rem -= len;
    }
    return VQ_STATUS_OK;
}

/* Releases the tables of r (r itself is caller storage); safe on a zeroed or failed r. */
void vq_rht_free(vq_rht *r) {
    if (!r) return;
    vq_free(r->signs);
    vq_free(r->hk);
    vq_free(r->perm);
    memset(r, 0, sizeof(*r));
}

/* out = (H_K or H_K^T) (x) I_P applied to v (K blocks of P), scaled by s. out != v. */
static void kron_mix(const vq_rht *r, const float *v, float *out, int transpose, float s) {
    int K = r->K, P = r->P;
    for (int i = 0; i < K; i++) {
        float *o = out + (size_t)i * P;
        for (int p = 0; p < P; p++) o[p] = 0.0f;
        for (int k = 0; k < K; k++) {
            float h = (transpose ? r->hk[k * K + i] : r->hk[i * K + k]) * s;
            const float *vk = v + (size_t)k * P;
            for (int p = 0; p < P; p++) o[p] += h * vk[p];
        }
    }
}

/* y = R x (orthogonal). x may equal y. Thread-safe for a shared r. */
void vq_rht_forward(const vq_rht *r, const float *x, float *y) {
    int d = r->d;
    float tmp[VQ_RHT_MAX_D];
    switch (r->kind) {
    case 0: {
        float s = 1.0f / sqrtf((float)d);
        for (int i = 0; i < d; i++) y[i] = x[i] * r->signs[i];
        vq_fwht(y, d);
        for (int i = 0; i < d; i++) y[i] *= s;
        break;
    }
    case 1: {
        for (int i = 0; i < d; i++) tmp[i] = x[i] * r->signs[i];
        for (int k = 0; k < r->K; k++) vq_fwht(tmp + (size_t)k * r->P, r->P);
        kron_mix(r, tmp, y, 0, 1.0f / sqrtf((float)d));
        break;
    }
    default: {
        for (int i = 0; i < d; i++) tmp[i] = x[i] * r->signs[i];
        for (int i = 0; i < d; i++) y[i] = tmp[r->perm[i]];
        for (int b = 0; b < r->n_blocks; b++) {
            float *blk = y + r->blk_off[b];
            int len = r->blk_len[b];
            float s = 1.0f / sqrtf((float)len);
            vq_fwht(blk, len);
            for (int i = 0; i < len; i++) blk[i] *= s;
        }
        break;
    }
    }
}

/* x = R^T y (inverse of vq_rht_forward). x may equal y. Thread-safe for a shared r. */
void vq_rht_inverse(const vq_rht *r, const float *y, float *x) {
    int d = r->d;
    float tmp[VQ_RHT_MAX_D];
    switch (r->kind) {
    case 0: {
        float s = 1.0f / sqrtf((float)d);
        if (x != y) memcpy(x, y, sizeof(float) * (size_t)d);
        vq_fwht(x, d);
        for (int i = 0; i < d; i++) x[i] *= s * r->signs[i];
        break;
    }
    case 1: {
        memcpy(tmp, y, sizeof(float) * (size_t)d);
        for (int k = 0; k < r->K; k++) vq_fwht(tmp + (size_t)k * r->P, r->P);
        kron_mix(r, tmp, x, 1, 1.0f / sqrtf((float)d));
        for (int i = 0; i < d; i++) x[i] *= r->signs[i];
        break;
    }
    default: {
        memcpy(tmp, y, sizeof(float) * (size_t)d);
        for (int b = 0; b < r->n_blocks; b++) {
            float *blk = tmp + r->blk_off[b];
            int len = r->blk_len[b];
            float s = 1.0f / sqrtf((float)len);
            vq_fwht(blk, len);
            for (int i = 0; i < len; i++) blk[i] *= s;
        }
        for (int i = 0; i < d; i++) x[r->perm[i]] = tmp[i] * r->signs[r->perm[i]];
        break;
    }
    }
}
