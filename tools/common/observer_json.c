/*
 * observer_json.c — the observation JSON of `generate --observe` (observer_json.h), built from
 * the observer's accessors (src/eval/observer.h).
 */
#include "observer_json.h"

#include <math.h>
#include <stdlib.h>

static void add_num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* clang-format off */
#define OBS_FIELDS(X) \
    X(cos_k) X(cos_v) X(cos_k_min) X(cos_v_min) X(rel_mse_k) X(rel_mse_v) X(ip_rel_err) \
    X(ip_slope) X(ip_bias) X(ip_err_sd) X(attn_kl_mean) X(attn_kl_max) X(attn_out_cos) \
    X(knorm_mean) X(knorm_std) X(knorm_max) X(knorm_max_over_mean) X(chan_max_over_median)
/* clang-format on */

#define OBS_COUNT_(name) +1
enum { OBS_NF = 0 OBS_FIELDS(OBS_COUNT_) };
#undef OBS_COUNT_
/* positions of some fields in OBS_FIELDS (worst_layers) */
enum { OBS_F_COS_K = 0, OBS_F_COS_V = 1, OBS_F_IP_REL = 6, OBS_F_KL = 10 };

/* Indices of the (up to) k layers with the largest (dir > 0) or smallest value. */
static cJSON *worst(const double *v, int n, int k, int dir) {
    cJSON *a = cJSON_CreateArray();
    if (!a) return NULL;
    char *used = calloc((size_t)n, 1);
    if (!used) {
        cJSON_Delete(a);
        return NULL;
    }
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (used[i] || !isfinite(v[i])) continue;
            if (best < 0 || (dir > 0 ? v[i] > v[best] : v[i] < v[best])) best = i;
        }
        if (best < 0) break;
        used[best] = 1;
        cJSON_AddItemToArray(a, cJSON_CreateNumber(best));
    }
    free(used);
    return a;
}

cJSON *vq_observer_to_json(const vq_observer *o) {
    cJSON *js = cJSON_CreateObject();
    if (!js) return NULL;
    const int L = vq_observer_n_layers(o), n_kv = vq_observer_n_kv_heads(o);
    const struct vq_observer_params p = vq_observer_get_params(o);
    cJSON_AddStringToObject(js, "schema", VQ_OBSERVE_SCHEMA);
    cJSON *smp = cJSON_AddObjectToObject(js, "sampling");
    if (smp) {
        cJSON_AddNumberToObject(smp, "max_queries_per_pass", p.max_queries);
        cJSON_AddStringToObject(smp, "positions",
                                "evenly spaced in each forward pass, last token included");
        cJSON_AddStringToObject(smp, "query_heads", "all");
        cJSON_AddStringToObject(smp, "keys", "all positions <= the query's");
    }
    cJSON_AddNumberToObject(js, "n_passes", (double)vq_observer_n_passes(o));
    cJSON_AddNumberToObject(js, "n_tokens", (double)vq_observer_n_tokens(o));
    cJSON_AddNumberToObject(js, "observer_bytes", (double)vq_observer_bytes(o));
    cJSON *layers = cJSON_AddArrayToObject(js, "layers");
    double *vals = calloc((size_t)L * OBS_NF, sizeof *vals);
    struct vq_observer_channel *top = malloc(sizeof *top * (size_t)(p.n_outlier_channels + 1));
    if (!layers || !vals || !top) {
        free(vals);
        free(top);
        cJSON_Delete(js);
        return NULL;
    }
    for (int l = 0; l < L; l++) {
        struct vq_observer_stats s;
        vq_observer_stats_get(o, l, -1, &s);
        cJSON *e = cJSON_CreateObject();
        if (!e) continue;
        cJSON_AddItemToArray(layers, e);
        cJSON_AddNumberToObject(e, "layer", l);
        int f = 0;
#define X(name) \
    add_num(e, #name, s.name); \
    vals[(size_t)f++ * (size_t)L + (size_t)l] = s.name;
        OBS_FIELDS(X)
#undef X
        cJSON_AddNumberToObject(e, "n_vectors", (double)s.n_vectors);
        cJSON_AddNumberToObject(e, "n_ip", (double)s.n_ip);
        cJSON_AddNumberToObject(e, "n_attn", (double)s.n_attn);
        cJSON_AddNumberToObject(e, "n_keys", (double)s.n_keys);
        cJSON *ck = cJSON_AddArrayToObject(e, "cos_k_heads"),
              *cv = cJSON_AddArrayToObject(e, "cos_v_heads"),
              *kl = cJSON_AddArrayToObject(e, "attn_kl_heads"),
              *kn = cJSON_AddArrayToObject(e, "knorm_mean_heads");
        for (int g = 0; g < n_kv; g++) {
            struct vq_observer_stats h;
            vq_observer_stats_get(o, l, g, &h);
            const double hv[4] = {h.cos_k, h.cos_v, h.attn_kl_mean, h.knorm_mean};
            cJSON *arrs[4] = {ck, cv, kl, kn};
            for (int i = 0; i < 4; i++)
                if (arrs[i])
                    cJSON_AddItemToArray(
                        arrs[i], isfinite(hv[i]) ? cJSON_CreateNumber(hv[i]) : cJSON_CreateNull());
        }
        const int nt = vq_observer_top_channels(o, l, top, p.n_outlier_channels);
        cJSON *tc = cJSON_AddArrayToObject(e, "top_channels");
        for (int i = 0; tc && i < nt; i++) {
            cJSON *c = cJSON_CreateObject();
            if (!c) break;
            cJSON_AddNumberToObject(c, "kv_head", top[i].kv_head);
            cJSON_AddNumberToObject(c, "channel", top[i].channel);
            cJSON_AddNumberToObject(c, "mean_abs", top[i].mean_abs);
            cJSON_AddNumberToObject(c, "max_abs", top[i].max_abs);
            cJSON_AddItemToArray(tc, c);
        }
    }
    cJSON *mean = cJSON_AddObjectToObject(js, "mean");
    int f = 0;
    if (mean) {
#define X(name) \
    { \
        double sum = 0; \
        int c = 0; \
        for (int l = 0; l < L; l++) { \
            double v = vals[(size_t)f * (size_t)L + (size_t)l]; \
            if (isfinite(v)) { \
                sum += v; \
                c++; \
            } \
        } \
        add_num(mean, #name, c ? sum / c : NAN); \
        f++; \
    }
        OBS_FIELDS(X)
#undef X
    }
    cJSON *w = cJSON_AddObjectToObject(js, "worst_layers");
    if (w) {
        cJSON_AddItemToObject(w, "attn_kl_mean",
                              worst(vals + (size_t)OBS_F_KL * (size_t)L, L, 5, +1));
        cJSON_AddItemToObject(w, "cos_k", worst(vals + (size_t)OBS_F_COS_K * (size_t)L, L, 5, -1));
        cJSON_AddItemToObject(w, "cos_v", worst(vals + (size_t)OBS_F_COS_V * (size_t)L, L, 5, -1));
        cJSON_AddItemToObject(w, "ip_rel_err",
                              worst(vals + (size_t)OBS_F_IP_REL * (size_t)L, L, 5, +1));
    }
    free(vals);
    free(top);
    return js;
}
