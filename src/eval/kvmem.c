/*
 * kvmem.c — analytic KV-cache bytes and GGUF KV geometry (see kvmem.h).
 */
#include "eval/kvmem.h"

#include <stdio.h>
#include <string.h>

#include "cache/center.h"
#include "engine/gguf.h"

/* Trait tests of a method (VQ_METHOD_F_*), as the cache reads them. */
static int windowed(enum vq_method m) { return (vq_method_flags(m) & VQ_METHOD_F_WINDOWED) != 0; }
static int sinks(enum vq_method m) { return (vq_method_flags(m) & VQ_METHOD_F_SINKS) != 0; }

/* Bytes of one side (K or V) of one kv-head stream holding ctx tokens; live: coded tokens
 * still held (windowed layers free pages), ev: freed coded tokens (a multiple of the page). */
struct side_bytes {
    size_t coded, window, alloc;
    int64_t live;
};

/* Coded tokens of a stream after t tokens (the cache's window modes; see kvmem.h). */
static int64_t coded_at(const struct vq_codec_params *cp, int64_t bt, int64_t t) {
    if (windowed(cp->method) && cp->residual_length > 0) {
        const int64_t r = cp->residual_length;
        if (cp->role == VQ_ROLE_KEY) return t > 0 ? (t - 1) / r * r : 0;
        return t > r ? t - r : 0;
    }
    return bt > 1 ? t / bt * bt : t;
}

/* A windowed stream (window W) after a first append of min(ctx, W) tokens and single-token
 * appends up to ctx: *pg0 = pages freed, *pages = page slots allocated (live + recycled), as the
 * cache's layer_evict / stream_encode leave them. */
static void window_pages(const struct vq_codec_params *cp, int64_t bt, int64_t ctx, int64_t w,
                         int64_t pt, int64_t *pg0, int64_t *pages) {
    int64_t keep = 0, n0 = 0, n1 = ctx < w ? ctx : w;
    *pg0 = *pages = 0;
    while (n1 > n0) {
        const int64_t nc = coded_at(cp, bt, n1);
        const int64_t need = (nc + pt - 1) / pt - *pg0;
        if (need > *pages) *pages = need;
        const int64_t kf = n0 - w + 1;
        if (kf > keep) {
            keep = kf;
            const int64_t up = (keep < nc ? keep : nc) / pt;
            if (up > *pg0) *pg0 = up;
        }
        n0 = n1;
        n1 = n1 < ctx ? n1 + 1 : n1;
    }
}

static struct side_bytes side_estimate(const vq_codec *cd, int64_t ctx, int d, int page_tokens,
                                       int n_sinks, int sink_cap, size_t page_extra, int win,
                                       int n_ss) {
    const struct vq_codec_params *cp = vq_codec_params_get(cd);
    const int64_t bt = vq_codec_block_tokens(cd);
    const size_t bb = vq_codec_block_bytes(cd), row16 = (size_t)d * 2;
    int64_t win_cap;
    if (windowed(cp->method) && cp->residual_length > 0) win_cap = cp->residual_length;
    else win_cap = bt > 1 ? bt : 0;
    const int64_t n_coded = coded_at(cp, bt, ctx);
    int64_t pg0 = 0, pages = (n_coded + page_tokens - 1) / page_tokens;
    if (win > 0) window_pages(cp, bt, ctx, win, page_tokens, &pg0, &pages);
    const int use_sinks = sinks(cp->method) && cp->n_sink_tokens > 0;
    struct side_bytes s;
    s.live = n_coded - pg0 * page_tokens;
    s.coded = (size_t)(s.live / bt) * bb;
    s.window = (size_t)(ctx - n_coded) * row16 + (use_sinks ? (size_t)n_sinks * row16 : 0) +
               (size_t)(n_ss < ctx ? n_ss : ctx) * row16;
    /* a sliding (KIVI value) window keeps a 2R-row buffer so that it can shift rarely */
    const int64_t buf_rows = windowed(cp->method) && cp->residual_length > 0 &&
                                     cp->role == VQ_ROLE_VALUE
                               ? 2 * win_cap
                               : win_cap;
    s.alloc = (size_t)pages * ((size_t)(page_tokens / bt) * bb + page_extra) +
              (size_t)buf_rows * row16 + (use_sinks ? (size_t)sink_cap * row16 : 0) +
              (size_t)n_ss * row16;
    return s;
}

vq_status vq_kv_estimate(const struct vq_cache_params *p, int64_t ctx, struct vq_cache_memory *m) {
    return vq_kv_estimate_outliers(p, ctx, 0, m);
}

vq_status vq_kv_estimate_outliers(const struct vq_cache_params *p, int64_t ctx, int64_t n_ot,
                                  struct vq_cache_memory *m) {
    if (!p || !m || ctx < 0 || n_ot < 0 || p->n_layers < 1 || p->n_kv_heads < 1 ||
        p->page_tokens < 1 || p->fp16_first_layers < 0 || p->fp16_first_layers > p->n_layers ||
        p->fp16_last_layers < 0 || p->fp16_last_layers > p->n_layers || p->stream_window < 0 ||
        p->stream_sinks < 0 || p->key_channel_bits < 0 || p->key_channel_bits > 2)
        return VQ_STATUS_INVALID_ARG;
    if (p->key_channel_bits && !(vq_method_flags(p->key.method) & VQ_METHOD_F_PER_CHANNEL_KEYS))
        return VQ_STATUS_UNSUPPORTED;
    if (p->layer_window)
        for (int l = 0; l < p->n_layers; l++)
            if (p->layer_window[l] < 0) return VQ_STATUS_INVALID_ARG;
    if (n_ot > ctx) n_ot = ctx;
    if (!(p->outlier_token_k > 0.0f)) n_ot = 0;
    /* the cache's outlier-token store grows from 16 rows by doubling (one append) */
    int64_t ot_cap = 0;
    if (n_ot > 0)
        for (ot_cap = 16; ot_cap < n_ot; ot_cap *= 2) {
        }
    memset(m, 0, sizeof *m);
    const int d = p->head_dim;
    const size_t row16 = (size_t)d * 2;
    for (int l = 0; l < p->n_layers; l++) {
        struct vq_codec_params kp = p->key, vp = p->value;
        kp.role = VQ_ROLE_KEY;
        vp.role = VQ_ROLE_VALUE;
        kp.head_dim = vp.head_dim = d;
        if (p->key_bits_per_layer) kp.bits = p->key_bits_per_layer[l];
        if (p->value_bits_per_layer) vp.bits = p->value_bits_per_layer[l];
        const int fp16_edge = l < p->fp16_first_layers || l >= p->n_layers - p->fp16_last_layers;
        if (fp16_edge) {
            /* full-precision edge layer (as vq_cache_create): fp16 codec for K and V */
            kp = vp = vq_codec_params_default();
            kp.head_dim = vp.head_dim = d;
            kp.isa = vp.isa = p->key.isa;
            kp.role = VQ_ROLE_KEY;
            vp.role = VQ_ROLE_VALUE;
        }
        vq_status st;
        vq_codec *kc = vq_codec_create(&kp, &st);
        if (!kc) return st;
        vq_codec *vc = vq_codec_create(&vp, &st);
        if (!vc) {
            vq_codec_free(kc);
            return st;
        }
        if (p->page_tokens % vq_codec_block_tokens(kc) ||
            p->page_tokens % vq_codec_block_tokens(vc)) {
            vq_codec_free(kc);
            vq_codec_free(vc);
            return VQ_STATUS_INVALID_ARG;
        }
        const int k_sink = sinks(kp.method) && kp.n_sink_tokens > 0;
        const int v_sink = sinks(vp.method) && vp.n_sink_tokens > 0;
        const int sink_cap = k_sink ? kp.n_sink_tokens : v_sink ? vp.n_sink_tokens : 0;
        int win, n_ss;
        vq_cache_layer_window(p, l, &win, &n_ss);
        const int64_t first = win > 0 && win < ctx ? win : ctx; /* the first append */
        const int n_sinks = (int)(sink_cap < first ? sink_cap : first);
        const int n_oc = p->n_outlier_channels > 0 && vq_cache_oc_method(kp.method)
                           ? p->n_outlier_channels
                           : 0;
        const size_t oc_page = (size_t)p->page_tokens * (size_t)(n_oc ? 2 + n_oc : 0);
        struct side_bytes ks = side_estimate(kc, ctx, d, p->page_tokens, n_sinks, sink_cap, oc_page,
                                             win, n_ss);
        struct side_bytes vs = side_estimate(vc, ctx, d, p->page_tokens, n_sinks, sink_cap, 0, win,
                                             n_ss);
        const size_t h = (size_t)p->n_kv_heads;
        /* outlier tokens (fp16 K and V rows per kv-head of bypassing sides), outlier-channel
         * records (every key token; channel list once ctx >= n_calib_tokens) */
        size_t k_out = 0, v_out = 0;
        if (p->outlier_token_k > 0.0f) {
            const int k_ot = vq_cache_ot_method(kp.method), v_ot = vq_cache_ot_method(vp.method);
            k_out += k_ot ? (size_t)n_ot * row16 : 0;
            v_out += v_ot ? (size_t)n_ot * row16 : 0;
            m->allocated_bytes += h * (size_t)(k_ot + v_ot) * (size_t)ot_cap * row16;
        }
        if (n_oc > 0) {
            k_out += (size_t)ks.live * (size_t)(2 + n_oc) +
                     (ctx >= p->n_calib_tokens ? (size_t)n_oc * 2 : 0);
            m->allocated_bytes += h * (size_t)n_oc * 2;
        }
        m->outlier_bytes += h * (k_out + v_out);
        m->key_bytes += h * ks.coded;
        m->key_total_bytes += h * (ks.coded + ks.window + k_out);
        m->value_bytes += h * vs.coded;
        m->window_bytes += h * (ks.window + vs.window);
        m->allocated_bytes += h * (ks.alloc + vs.alloc);
        /* an fp16 cache with the same window: pages below keep_from = ctx - W freed */
        const int64_t ev = win > 0 && ctx > win ? (ctx - win) / p->page_tokens * p->page_tokens : 0;
        m->fp16_key_bytes += (size_t)(ctx - ev + (n_ss < ev ? n_ss : ev)) * h * row16;
        /* centering vectors: allocated at create, counted as stored once the layer has tokens */
        const size_t mu = h * row16; /* fp16 mu per kv-head */
        const int kc_on = vq_cache_center_on(p->center_keys, kp.method);
        const int vc_on = vq_cache_center_on(p->center_values, vp.method);
        /* key scales (key_scales): one fp16 vector per kv-head, like mu */
        /* per-channel key widths (key_channel_bits): head_dim bytes per kv-head, allocated at
         * create, stored once the layer holds a whole key group (when they are learned) */
        const size_t kcw = p->key_channel_bits && !fp16_edge ? h * (size_t)d : 0;
        const size_t kmu = (kc_on ? mu : 0) + (p->key_scales > 0 && !fp16_edge ? mu : 0);
        const size_t vmu = vc_on ? mu : 0;
        m->allocated_bytes += kmu + kcw + vmu;
        if (ctx > 0) {
            const size_t kw = ctx >= vq_codec_block_tokens(kc) ? kcw : 0;
            m->center_bytes += kmu + kw + vmu;
            m->key_total_bytes += kmu + kw;
        }
        vq_codec_free(kc);
        vq_codec_free(vc);
    }
    m->fp16_bytes = 2 * m->fp16_key_bytes;
    m->total_bytes = m->key_bytes + m->value_bytes + m->window_bytes + m->center_bytes +
                     m->outlier_bytes;
    return VQ_STATUS_OK;
}

static void seterr(char *err, size_t errlen, const char *path, const char *what) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, what);
}

vq_status vq_kv_geometry_from_gguf(const char *path, struct vq_kv_geometry *g, char *err,
                                   size_t errlen) {
    memset(g, 0, sizeof *g);
    vq_status st;
    vq_gguf *f = vq_gguf_open(path, &st);
    if (!f) {
        seterr(err, errlen, path, vq_gguf_last_error());
        return st;
    }
    struct vq_gguf_str a;
    char key[96];
    uint32_t n_layers = 0, n_heads = 0, n_kv = 0, key_len = 0, n_embd = 0;
    st = vq_gguf_get_str(f, "general.architecture", &a);
    if (st != VQ_STATUS_OK || a.len == 0 || a.len >= sizeof g->arch) {
        seterr(err, errlen, path, "no general.architecture");
        vq_gguf_close(f);
        return st != VQ_STATUS_OK ? st : VQ_STATUS_BAD_FORMAT;
    }
    memcpy(g->arch, a.ptr, a.len);
    g->arch[a.len] = 0;
#define GET(suffix, var, required) \
    do { \
        snprintf(key, sizeof key, "%s." suffix, g->arch); \
        vq_status s_ = vq_gguf_get_u32(f, key, &var); \
        if (s_ != VQ_STATUS_OK && (required || s_ != VQ_STATUS_NOT_FOUND)) { \
            char m_[160]; \
            snprintf(m_, sizeof m_, "metadata %s: %s", key, vq_status_str(s_)); \
            seterr(err, errlen, path, m_); \
            vq_gguf_close(f); \
            return s_; \
        } \
    } while (0)
    GET("block_count", n_layers, 1);
    GET("attention.head_count", n_heads, 1);
    GET("attention.head_count_kv", n_kv, 0);
    GET("attention.key_length", key_len, 0);
    GET("embedding_length", n_embd, 0);
#undef GET
    vq_gguf_close(f);
    if (n_kv == 0) n_kv = n_heads;
    if (key_len == 0 && n_heads > 0) key_len = n_embd / n_heads;
    if (n_layers == 0 || n_heads == 0 || n_kv == 0 || key_len == 0 || n_layers > 4096 ||
        n_kv > 4096 || key_len > 4096) {
        seterr(err, errlen, path, "implausible KV geometry in metadata");
        return VQ_STATUS_BAD_FORMAT;
    }
    g->n_layers = (int)n_layers;
    g->n_heads = (int)n_heads;
    g->n_kv_heads = (int)n_kv;
    g->head_dim = (int)key_len;
    return VQ_STATUS_OK;
}
