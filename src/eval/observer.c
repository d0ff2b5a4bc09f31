/*
 * observer.c — shadow fp32 K/V and per-layer quality statistics of a real run (observer.h).
 */
#include "eval/observer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Sums of one (layer, kv-head). */
struct obs_acc {
    /* reconstruction (snapshots) */
    int64_t n_vec;
    double cos_k, cos_v, min_cos_k, min_cos_v, err_k, ref_k, err_v, ref_v;
    /* inner products: s exact, sh reconstructed, e = sh - s */
    int64_t n_ip;
    double s, sh, ss, ssh, e, ee;
    /* attention rows */
    int64_t n_attn;
    double kl, kl_max, ocos;
    /* key norms */
    int64_t n_keys;
    double kn, kn2, kn_max;
};

struct vq_observer {
    vq_ctx *ctx;
    struct vq_observer_params p;
    int n_layers, n_kv, d;
    vq_cache *shadow;    /* fp32 keys and values: the exact rows appended */
    struct obs_acc *acc; /* (n_layers, n_kv) */
    double *chan_sum;    /* (n_layers, n_kv, d) sum of |k_c| */
    float *chan_max;     /* (n_layers, n_kv, d) max of |k_c| */
    int64_t n_passes;
    /* buffers for one (layer, kv-head) read, cap tokens */
    int64_t cap;
    float *kx, *vx, *kh, *vh;
    double *sx, *sr, *ox; /* scores (cap), exact output (d) */
};

struct vq_observer_params vq_observer_params_default(void) {
    struct vq_observer_params p;
    p.max_queries = 8;
    p.n_outlier_channels = 4;
    return p;
}

static vq_status hook(void *user, const struct vq_layer_event *ev);

vq_observer *vq_observer_create(vq_ctx *ctx, const struct vq_observer_params *p, vq_status *st) {
    struct vq_observer_params dp = vq_observer_params_default();
    if (!p) p = &dp;
    vq_status s = VQ_STATUS_INVALID_ARG;
    if (!ctx || vq_ctx_n_past(ctx) != 0 || p->max_queries < 1 || p->max_queries > 4096 ||
        p->n_outlier_channels < 0 || p->n_outlier_channels > 64) {
        if (st) *st = s;
        return NULL;
    }
    const struct vq_cache_params *cp = vq_ctx_cache_params(ctx);
    vq_observer *o = calloc(1, sizeof *o);
    if (!o) {
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    o->p = *p;
    o->n_layers = cp->n_layers;
    o->n_kv = cp->n_kv_heads;
    o->d = cp->head_dim;
    struct vq_cache_params sp = vq_cache_params_default();
    sp.n_layers = cp->n_layers;
    sp.n_kv_heads = cp->n_kv_heads;
    sp.head_dim = cp->head_dim;
    sp.max_tokens = cp->max_tokens;
    sp.key.method = VQ_METHOD_FP32;
    sp.value.method = VQ_METHOD_FP32;
    sp.center_keys = 0;
    sp.center_values = 0;
    sp.n_threads = 1;
    o->shadow = vq_cache_create(&sp, &s);
    const size_t nlh = (size_t)o->n_layers * (size_t)o->n_kv;
    o->acc = calloc(nlh, sizeof *o->acc);
    o->chan_sum = calloc(nlh * (size_t)o->d, sizeof *o->chan_sum);
    o->chan_max = calloc(nlh * (size_t)o->d, sizeof *o->chan_max);
    o->ox = malloc((size_t)o->d * sizeof *o->ox);
    if (!o->shadow || !o->acc || !o->chan_sum || !o->chan_max || !o->ox) {
        if (o->shadow) s = VQ_STATUS_NO_MEMORY;
        vq_observer_free(o);
        if (st) *st = s;
        return NULL;
    }
    for (size_t i = 0; i < nlh; i++) o->acc[i].min_cos_k = o->acc[i].min_cos_v = 1.0;
    o->ctx = ctx; /* set only once the hook is ours: free() detaches only its own hook */
    vq_ctx_set_layer_hook(ctx, hook, o);
    if (st) *st = VQ_STATUS_OK;
    return o;
}

void vq_observer_free(vq_observer *o) {
    if (!o) return;
    if (o->ctx && vq_ctx_layer_hook_user(o->ctx) == o) vq_ctx_set_layer_hook(o->ctx, NULL, NULL);
    vq_cache_free(o->shadow);
    free(o->acc);
    free(o->chan_sum);
    free(o->chan_max);
    free(o->kx);
    free(o->vx);
    free(o->kh);
    free(o->vh);
    free(o->sx);
    free(o->sr);
    free(o->ox);
    free(o);
}

int vq_observer_n_layers(const vq_observer *o) { return o->n_layers; }
int64_t vq_observer_n_passes(const vq_observer *o) { return o->n_passes; }
int vq_observer_n_kv_heads(const vq_observer *o) { return o->n_kv; }
struct vq_observer_params vq_observer_get_params(const vq_observer *o) {
    return o->p;
}
int64_t vq_observer_n_tokens(const vq_observer *o) {
    return vq_cache_n_tokens(vq_ctx_cache(o->ctx), 0);
}

size_t vq_observer_bytes(const vq_observer *o) {
    struct vq_cache_memory m;
    vq_cache_memory(o->shadow, &m);
    const size_t nlh = (size_t)o->n_layers * (size_t)o->n_kv;
    return m.allocated_bytes + (size_t)o->cap * (size_t)o->d * 4 * sizeof(float) +
           (size_t)o->cap * 2 * sizeof(double) + (size_t)o->d * sizeof(double) +
           nlh * (sizeof(struct obs_acc) + (size_t)o->d * (sizeof(double) + sizeof(float))) +
           sizeof *o;
}

/* Grows the read buffers to n tokens (geometric). */
static vq_status reserve(vq_observer *o, int64_t n) {
    if (n <= o->cap) return VQ_STATUS_OK;
    int64_t cap = o->cap ? o->cap : 64;
    while (cap < n) cap *= 2;
    const size_t fl = (size_t)cap * (size_t)o->d;
    float *b[4];
    double *s[2];
    for (int i = 0; i < 4; i++) b[i] = malloc(fl * sizeof(float));
    for (int i = 0; i < 2; i++) s[i] = malloc((size_t)cap * sizeof(double));
    if (!b[0] || !b[1] || !b[2] || !b[3] || !s[0] || !s[1]) {
        for (int i = 0; i < 4; i++) free(b[i]);
        for (int i = 0; i < 2; i++) free(s[i]);
        return VQ_STATUS_NO_MEMORY;
    }
    free(o->kx);
    free(o->vx);
    free(o->kh);
    free(o->vh);
    free(o->sx);
    free(o->sr);
    o->kx = b[0];
    o->vx = b[1];
    o->kh = b[2];
    o->vh = b[3];
    o->sx = s[0];
    o->sr = s[1];
    o->cap = cap;
    return VQ_STATUS_OK;
}

static double cosine(const float *a, const float *b, int d, double *err, double *ref) {
    double ab = 0, aa = 0, bb = 0, ee = 0;
    for (int j = 0; j < d; j++) {
        const double x = a[j], y = b[j];
        ab += x * y;
        aa += x * x;
        bb += y * y;
        ee += (y - x) * (y - x);
    }
    if (err) *err += ee;
    if (ref) *ref += aa;
    if (aa > 0 && bb > 0) return ab / sqrt(aa * bb);
    return aa == bb ? 1.0 : 0.0;
}

static vq_status hook(void *user, const struct vq_layer_event *ev) {
    vq_observer *o = user;
    const int l = ev->layer, d = o->d, nkv = o->n_kv;
    if (l < 0 || l >= o->n_layers || ev->n_kv_heads != nkv || ev->head_dim != d ||
        ev->n_tokens < 1 || ev->n_heads < nkv || ev->n_heads % nkv != 0)
        return VQ_STATUS_INTERNAL;
    /* keep the shadow in step with the context after a failed eval, a truncate or a reset */
    int64_t have = vq_cache_n_tokens(o->shadow, l);
    if (have > ev->pos0) {
        VQ_RETURN_IF_ERR(vq_cache_truncate(o->shadow, ev->pos0));
        have = vq_cache_n_tokens(o->shadow, l);
    }
    const int64_t n = ev->n_tokens, nt = ev->pos0 + n;
    if (have != ev->pos0 || vq_cache_n_tokens(ev->cache, l) != nt) return VQ_STATUS_INTERNAL;
    VQ_RETURN_IF_ERR(reserve(o, nt));
    VQ_RETURN_IF_ERR(vq_cache_append(o->shadow, l, ev->k, ev->v, VQ_DTYPE_F32, n));
    if (l == 0) o->n_passes++;

    /* key norms and per-channel magnitudes of the new rows */
    for (int64_t t = 0; t < n; t++)
        for (int g = 0; g < nkv; g++) {
            const float *k = ev->k + (size_t)((t * nkv + g) * d);
            struct obs_acc *A = &o->acc[l * nkv + g];
            double *cs = o->chan_sum + (size_t)(l * nkv + g) * (size_t)d;
            float *cm = o->chan_max + (size_t)(l * nkv + g) * (size_t)d;
            double ss = 0;
            for (int j = 0; j < d; j++) {
                const float a = fabsf(k[j]);
                ss += (double)k[j] * k[j];
                cs[j] += a;
                if (a > cm[j]) cm[j] = a;
            }
            const double nr = sqrt(ss);
            A->n_keys++;
            A->kn += nr;
            A->kn2 += ss;
            if (nr > A->kn_max) A->kn_max = nr;
        }

    /* sampled queries against exact and reconstructed keys */
    const int nh = ev->n_heads, grp = nh / nkv;
    const int64_t m = n < o->p.max_queries ? n : o->p.max_queries;
    const double scale = ev->scale;
    for (int g = 0; g < nkv; g++) {
        VQ_RETURN_IF_ERR(vq_cache_read(o->shadow, l, g, o->kx, o->vx));
        VQ_RETURN_IF_ERR(vq_cache_read(ev->cache, l, g, o->kh, NULL));
        struct obs_acc *A = &o->acc[l * nkv + g];
        for (int64_t j = 0; j < m; j++) {
            const int64_t i = (j + 1) * n / m - 1; /* batch index; j = m-1 gives n-1 */
            const int64_t np = ev->pos0 + i + 1;   /* keys 0 .. pos */
            for (int h = g * grp; h < (g + 1) * grp; h++) {
                const float *q = ev->q + (size_t)((i * nh + h) * d);
                double mx = -INFINITY, mr = -INFINITY;
                for (int64_t t = 0; t < np; t++) {
                    const float *kx = o->kx + (size_t)(t * d), *kh = o->kh + (size_t)(t * d);
                    double a = 0, b = 0;
                    for (int c = 0; c < d; c++) {
                        a += (double)q[c] * kx[c];
                        b += (double)q[c] * kh[c];
                    }
                    const double e = b - a;
                    A->s += a;
                    A->sh += b;
                    A->ss += a * a;
                    A->ssh += a * b;
                    A->e += e;
                    A->ee += e * e;
                    o->sx[t] = a * scale;
                    o->sr[t] = b * scale;
                    if (o->sx[t] > mx) mx = o->sx[t];
                    if (o->sr[t] > mr) mr = o->sr[t];
                }
                A->n_ip += np;
                /* KL(p ‖ p̂) = Σ p (x - r) - lse(x) + lse(r) */
                double zx = 0, zr = 0;
                for (int64_t t = 0; t < np; t++) {
                    zx += exp(o->sx[t] - mx);
                    zr += exp(o->sr[t] - mr);
                }
                const double lx = mx + log(zx), lr = mr + log(zr);
                double kl = 0;
                for (int c = 0; c < d; c++) o->ox[c] = 0;
                for (int64_t t = 0; t < np; t++) {
                    const double p = exp(o->sx[t] - lx);
                    kl += p * (o->sx[t] - o->sr[t]);
                    const float *vx = o->vx + (size_t)(t * d);
                    for (int c = 0; c < d; c++) o->ox[c] += p * vx[c];
                }
                kl += lr - lx;
                if (kl < 0) kl = 0; /* rounding below zero */
                A->kl += kl;
                if (kl > A->kl_max) A->kl_max = kl;
                const float *out = ev->attn_out + (size_t)((i * nh + h) * d);
                double ab = 0, aa = 0, bb = 0;
                for (int c = 0; c < d; c++) {
                    ab += o->ox[c] * out[c];
                    aa += o->ox[c] * o->ox[c];
                    bb += (double)out[c] * out[c];
                }
                A->ocos += aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
                A->n_attn++;
            }
        }
    }
    return VQ_STATUS_OK;
}

vq_status vq_observer_snapshot(vq_observer *o) {
    const vq_cache *c = vq_ctx_cache(o->ctx);
    const int d = o->d;
    for (int l = 0; l < o->n_layers; l++) {
        const int64_t n = vq_cache_n_tokens(c, l);
        if (n == 0) continue;
        if (vq_cache_n_tokens(o->shadow, l) != n) return VQ_STATUS_INTERNAL;
        VQ_RETURN_IF_ERR(reserve(o, n));
        for (int g = 0; g < o->n_kv; g++) {
            VQ_RETURN_IF_ERR(vq_cache_read(o->shadow, l, g, o->kx, o->vx));
            VQ_RETURN_IF_ERR(vq_cache_read(c, l, g, o->kh, o->vh));
            struct obs_acc *A = &o->acc[l * o->n_kv + g];
            for (int64_t t = 0; t < n; t++) {
                const size_t off = (size_t)(t * d);
                const double ck = cosine(o->kx + off, o->kh + off, d, &A->err_k, &A->ref_k);
                const double cv = cosine(o->vx + off, o->vh + off, d, &A->err_v, &A->ref_v);
                A->cos_k += ck;
                A->cos_v += cv;
                if (ck < A->min_cos_k) A->min_cos_k = ck;
                if (cv < A->min_cos_v) A->min_cos_v = cv;
            }
            A->n_vec += n;
        }
    }
    return VQ_STATUS_OK;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of the per-channel mean |k_c| over heads g0..g1-1 of layer l (NaN without keys). */
static double chan_ratio(const vq_observer *o, int l, int g0, int g1) {
    const int d = o->d;
    const int64_t cnt = o->acc[l * o->n_kv + g0].n_keys;
    if (cnt == 0) return NAN;
    const int n = (g1 - g0) * d;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) return NAN;
    double mx = 0;
    for (int g = g0; g < g1; g++)
        for (int j = 0; j < d; j++) {
            const double x = o->chan_sum[(size_t)(l * o->n_kv + g) * (size_t)d + (size_t)j] /
                             (double)o->acc[l * o->n_kv + g].n_keys;
            v[(g - g0) * d + j] = x;
            if (x > mx) mx = x;
        }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return med > 0 ? mx / med : NAN;
}

vq_status vq_observer_stats_get(const vq_observer *o, int layer, int kv_head,
                                struct vq_observer_stats *s) {
    if (!o || !s || layer < 0 || layer >= o->n_layers || kv_head < -1 || kv_head >= o->n_kv)
        return VQ_STATUS_INVALID_ARG;
    const int g0 = kv_head < 0 ? 0 : kv_head, g1 = kv_head < 0 ? o->n_kv : kv_head + 1;
    struct obs_acc T;
    memset(&T, 0, sizeof T);
    T.min_cos_k = T.min_cos_v = 1.0;
    for (int g = g0; g < g1; g++) {
        const struct obs_acc *A = &o->acc[layer * o->n_kv + g];
        T.n_vec += A->n_vec;
        T.cos_k += A->cos_k;
        T.cos_v += A->cos_v;
        T.err_k += A->err_k;
        T.ref_k += A->ref_k;
        T.err_v += A->err_v;
        T.ref_v += A->ref_v;
        if (A->min_cos_k < T.min_cos_k) T.min_cos_k = A->min_cos_k;
        if (A->min_cos_v < T.min_cos_v) T.min_cos_v = A->min_cos_v;
        T.n_ip += A->n_ip;
        T.s += A->s;
        T.sh += A->sh;
        T.ss += A->ss;
        T.ssh += A->ssh;
        T.e += A->e;
        T.ee += A->ee;
        T.n_attn += A->n_attn;
        T.kl += A->kl;
        T.ocos += A->ocos;
        if (A->kl_max > T.kl_max) T.kl_max = A->kl_max;
        T.n_keys += A->n_keys;
        T.kn += A->kn;
        T.kn2 += A->kn2;
        if (A->kn_max > T.kn_max) T.kn_max = A->kn_max;
    }
    memset(s, 0, sizeof *s);
    s->n_vectors = T.n_vec;
    if (T.n_vec) {
        const double nv = (double)T.n_vec;
        s->cos_k = T.cos_k / nv;
        s->cos_v = T.cos_v / nv;
        s->cos_k_min = T.min_cos_k;
        s->cos_v_min = T.min_cos_v;
        s->rel_mse_k = T.ref_k > 0 ? T.err_k / T.ref_k : 0;
        s->rel_mse_v = T.ref_v > 0 ? T.err_v / T.ref_v : 0;
    } else {
        s->cos_k = s->cos_v = s->cos_k_min = s->cos_v_min = s->rel_mse_k = s->rel_mse_v = NAN;
    }
    s->n_ip = T.n_ip;
    if (T.n_ip) {
        const double n = (double)T.n_ip;
        const double den = n * T.ss - T.s * T.s;
        s->ip_rel_err = T.ss > 0 ? sqrt(T.ee / T.ss) : 0;
        s->ip_slope = den > 0 ? (n * T.ssh - T.s * T.sh) / den : NAN;
        s->ip_bias = den > 0 ? (T.sh - s->ip_slope * T.s) / n : NAN;
        const double me = T.e / n, var = T.ee / n - me * me;
        s->ip_err_sd = sqrt(var > 0 ? var : 0);
    } else {
        s->ip_rel_err = s->ip_slope = s->ip_bias = s->ip_err_sd = NAN;
    }
    s->n_attn = T.n_attn;
    if (T.n_attn) {
        s->attn_kl_mean = T.kl / (double)T.n_attn;
        s->attn_kl_max = T.kl_max;
        s->attn_out_cos = T.ocos / (double)T.n_attn;
    } else {
        s->attn_kl_mean = s->attn_kl_max = s->attn_out_cos = NAN;
    }
    s->n_keys = T.n_keys;
    if (T.n_keys) {
        const double n = (double)T.n_keys, mean = T.kn / n, var = T.kn2 / n - mean * mean;
        s->knorm_mean = mean;
        s->knorm_std = sqrt(var > 0 ? var : 0);
        s->knorm_max = T.kn_max;
        s->knorm_max_over_mean = mean > 0 ? T.kn_max / mean : NAN;
        s->chan_max_over_median = chan_ratio(o, layer, g0, g1);
    } else {
        s->knorm_mean = s->knorm_std = s->knorm_max = s->knorm_max_over_mean = NAN;
        s->chan_max_over_median = NAN;
    }
    return VQ_STATUS_OK;
}

int vq_observer_top_channels(const vq_observer *o, int layer, struct vq_observer_channel *out,
                             int cap) {
    if (!o || layer < 0 || layer >= o->n_layers || cap < 0 || (cap && !out)) return -1;
    const int d = o->d, tot = o->n_kv * d;
    int n = 0;
    for (int i = 0; i < tot; i++) {
        const int g = i / d, c = i % d;
        const int64_t cnt = o->acc[layer * o->n_kv + g].n_keys;
        if (!cnt) continue;
        const size_t at = (size_t)(layer * o->n_kv + g) * (size_t)d + (size_t)c;
        struct vq_observer_channel ch = {g, c, o->chan_sum[at] / (double)cnt, o->chan_max[at]};
        /* insertion into the sorted top list (strictly larger moves up: ties keep order) */
        int pos = n;
        while (pos > 0 && ch.mean_abs > out[pos - 1].mean_abs) pos--;
        if (pos >= cap) continue;
        const int last = n < cap ? n : cap - 1;
        for (int k = last; k > pos; k--) out[k] = out[k - 1];
        out[pos] = ch;
        if (n < cap) n++;
    }
    return n;
}
