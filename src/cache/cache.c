/*
 * cache.c — the paged KV cache (vq_cache_*) and the fused attention driver.
 *
 * Storage model
 *   Per (layer, kv-head) there are two streams, K and V. A stream holds its tokens in order:
 *   tokens [0, n_coded) live in codec blocks inside pages of page_tokens tokens (allocated on
 *   demand, page bytes = page_tokens / block_tokens * block_bytes), tokens [n_coded, n_tokens)
 *   live in an fp16 window, always contiguous: rows [win_start, win_start + win_n) of a buffer
 *   of buf_rows rows (R for FLUSH; 2R for SLIDE, where the live rows are moved to the front
 *   once per R tokens, so sliding costs O(1) amortized). K and V of one layer may have
 *   different n_coded (KIVI keys flush in chunks of R, values slide).
 *
 * Window modes (decided from the stream's codec)
 *   NONE  — no window: tokens are encoded as they arrive (per-token codecs other than KIVI).
 *   FLUSH — KIVI keys (and any codec with block_tokens > 1): tokens collect in fp16 in a
 *           window of up to R = residual_length tokens. A full window is encoded (R/G blocks)
 *           and emptied only when the next append arrives, before that append's own tokens
 *           are stored: after t tokens, floor((t - 1) / R) * R are coded and 1..R stay fp16
 *           (the attention of the append that fills the window still reads it in fp16, so a
 *           window as long as the context is exactly an fp16 cache). Block codecs without a
 *           residual window (R = 0, block_tokens B > 1) encode each block as soon as it is
 *           whole: floor(t / B) * B coded, 0..B-1 fp16.
 *   SLIDE — KIVI values: a sliding window of the newest R tokens in fp16; the oldest token is
 *           encoded when the window would exceed R.
 *   Tokens of windowed streams are rounded to fp16 before they are encoded, so the stored
 *   state does not depend on how a sequence is split into appends.
 *
 * Sinks (kivi_sink)
 *   In a layer's first append, the n_sink_tokens tokens with the largest key norm (mean of the
 *   per-head L2 norms over kv-heads) are chosen; their K and V rows are kept in fp16 in a
 *   per-stream side store. Before a KIVI key block is encoded, its sink rows are replaced by
 *   the nearest non-sink row of the block (earlier row first on ties), so a huge sink does not
 *   inflate the group's min/max. Attention scores a sink token from its fp16 key and takes its
 *   value from the fp16 copy (its value codes get weight 0).
 *
 * Append is two-phase: phase A validates everything (arguments, NaN/Inf, fp16 range of
 * windowed streams, capacity), allocates missing pages and encodes into the space behind each
 * stream's end (invisible until committed) — the encode itself is the trial for codec RANGE
 * errors; phase B (which cannot fail) updates windows, sinks and counters. Any failure in
 * phase A frees the pages it allocated, so the cache is exactly as before.
 *
 * Centering (center_keys / center_values)
 *   A centered side has one vector mu per kv-head, stored in fp16: the mean of the tokens of
 *   the layer's first append (accumulated in double, clamped to +-65504, rounded to fp16;
 *   frozen afterwards; cleared when the layer becomes empty). Any fixed mu keeps attention
 *   exact, so the rounding costs nothing but a little centering. Every row of that
 *   side — codec blocks, fp16 window and sink copies — stores x - mu. Keys: q.mu is the same
 *   for every token of a query, so softmax ignores it and scores use the centered rows as is.
 *   Values: the softmax weights sum to 1, so attention adds mu to the weighted sum. Decoding
 *   (vq_cache_read, attend_ref) adds mu back.
 *
 * Threads: vq_cache_attend cuts the (query, query head) pairs of each kv head into batches of
 * up to n_slots (8; fewer when max_tokens > 32K, keeping score rows near 1 MiB per thread)
 * and runs the batches in an OpenMP loop; a batch visits every page once, scoring and
 * accumulating it for all its pairs while it is in cache. One query (decode) with fewer
 * batches than two per thread: each batch's tokens are split into block-aligned chunks
 * attended separately with the whole batch and merged with their softmax max/sum (split
 * decode, attend_split). Several queries: batches shrink when there are fewer of them than
 * threads; when even single pairs are fewer than threads, each pair's tokens are split into
 * chunks the same way. Every thread uses its own scratch slab
 * (allocated at create), so attend never allocates.
 *
 * Decode-once attention (batched queries)
 *   With VQ_DENSE_MIN_PAIRS or more (query, query head) pairs per kv head (prefill, scoring),
 *   the fused kernels would score every page once per pair; instead each page of every kv
 *   head is decoded once to fp32 (stream_decode_range: vq_cache_read's rows), its keys
 *   transposed, and blocks of up to VQ_DENSE_PAIRS pairs score it and accumulate its values
 *   with dense fp32 kernels (cache/dense.h) and an online softmax (running max and sum per
 *   pair, kept across pages). Pages are visited in order inside one OpenMP region: the
 *   threads split the page's decode tasks, then its blocks. The page buffers, the pairs'
 *   state (VQ_DENSE_STATE pairs; larger batches go in super-blocks) and the per-thread block
 *   scratch are allocated at create. docs/ALGORITHMS.md §9.5.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cache/center.h"
#include "cache/dense.h"
#include "cache/ggml_attn.h"
#include "cache/softmax.h"
#include "codecs/codec_impl.h"
#include "codecs/kivi.h"

#define VQ_MAX_SINKS VQ_KIVI_MAX_SINKS
#define VQ_MAX_STREAM_SINKS 1024

/* (query, query head) pairs handled together against one kv head: each page of codes is
 * scored (and its values accumulated) for all of them while it is in cache, so GQA heads and
 * prefill queries share one pass over the cache. */
#define VQ_SLOT_BATCH 8

/* Decode-once attention (batched queries): pairs per block, and the fewest (query, query head)
 * pairs per kv head that take it instead of the fused per-pair kernels. */
#define VQ_DENSE_PAIRS 64
#define VQ_DENSE_MIN_PAIRS 16
/* Rows (all streams of a layer together) from which an append encodes on n_threads threads;
 * below it (decode: one row per stream) one thread encodes, as a parallel region costs more. */
#define VQ_ENCODE_MT_ROWS 64
/* decode-once attention: (query, query head) pairs whose running max / sum it holds at once */
#define VQ_DENSE_STATE 8192

enum { WIN_NONE = 0, WIN_FLUSH = 1, WIN_SLIDE = 2 };

/* Pages of a stream are carved one after another from extents (vq_map: memory taken as it is
 * written): the first spans the stream's capacity (max_tokens), later ones (after a failed
 * first mapping) VQ_EXT_MIN .. VQ_EXT_MAX pages, each as large as the pages the stream holds:
 * a stream's pages lie in one address range, read as one sequence by attention (one codec call
 * per run of adjacent pages; the prefetchers follow it across pages; separate allocations of a
 * few KB interleave the streams of all layers and heads). Under AddressSanitizer each page is
 * its own vq_alloc so that an overrun of a page stays visible. docs/ALGORITHMS.md §9.12. */
#define VQ_EXT_MIN 4
#define VQ_EXT_MAX 256
#if defined(__SANITIZE_ADDRESS__)
#define VQ_EXT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VQ_EXT_ASAN 1
#endif
#endif

struct vq_extent {
    uint8_t *base;
    size_t bytes;
};

struct vq_stream {
    uint8_t **pages; /* (pages_cap) page pointers; [0, n_pages) allocated; pages[i] holds
                             * coded tokens [(pg0 + i) * page_tokens, ...); the ones past the
                             * coded end are spare (recycled) pages */
    int64_t pages_cap;
    int64_t n_pages;
    struct vq_extent *ext; /* (ext_cap) the memory pages are carved from, oldest first */
    int n_ext, ext_cap;
    size_t ext_used; /* bytes carved from the last extent */
    int64_t pg0;     /* pages freed below the window (windowed layers; else 0) */
    uint16_t *ss;    /* (layer ss_cap, head_dim) fp16 rows of positions 0.. (stream sinks) */
    int64_t n_coded; /* tokens stored in codec blocks (multiple of block_tokens) */
    uint16_t *win;   /* (buf_rows, head_dim) fp16 rows, NULL when the mode is NONE */
    int win_start;   /* buffer row of the oldest window token */
    int win_n;       /* tokens in the window */
    uint16_t *sink;  /* (sink_cap, head_dim) fp16 rows of the layer's sinks, or NULL */
    uint16_t *ot;    /* (layer ot_cap, head_dim) fp16 rows of the layer's outlier tokens
                             * (row i = token ot_pos[i]), NULL while none / side not bypassing */
    /* outlier channels (keys, n_oc > 0): running sums of |x_c| over positions
     * [0, min(n_tokens, n_calib)) and the fixed channels once ready; the *_new copies are the
     * pending state of an append in progress (phase A), swapped in by the commit */
    double *oc_sum, *oc_sum_new; /* (head_dim) */
    uint16_t *oc_ch, *oc_ch_new; /* (n_oc) ascending channel indices */
    int oc_ready, oc_ready_new;
    int oc_ready_prev; /* oc_ready before the last committed append (undo) */
};

struct vq_side {           /* K or V configuration of one layer */
    const vq_codec *codec; /* shared, owned by the cache's codec list */
    int mode;              /* WIN_* */
    int win_cap;           /* R: most tokens the window holds after an append */
    int lazy;              /* FLUSH: a full window waits for the next append (KIVI R > 0) */
    int buf_rows;          /* rows allocated for the window buffer (R or 2R) */
    int bt;                /* codec block tokens */
    size_t page_bytes;     /* page_tokens / bt * block_bytes */
    int use_sinks;         /* 1 if this side keeps fp16 sink copies */
    struct vq_stream *s;   /* (n_kv_heads) */
    uint16_t *mu;          /* (n_kv_heads, head_dim) fp16 centering vectors, NULL = not centered */
    int mu_set;            /* 1 once mu holds the mean of the layer's first append */
    uint16_t *ks;          /* keys: (n_kv_heads, head_dim) fp16 channel scales, NULL = off */
    float *ks_f;           /* (n_kv_heads, head_dim) ks in fp32 (queries are multiplied by it) */
    float *ks_inv;         /* (n_kv_heads, head_dim) 1 / ks_f (stored rows are multiplied by it) */
    int ks_set;            /* 1 once ks was learned from the layer's first append */
    int use_ot;            /* 1 if this side keeps fp16 copies of outlier tokens */
    int n_oc;              /* outlier channels of this (key) side, 0 = off */
    size_t oc_off;         /* byte offset of the outlier-channel records inside a page */
    /* keys with key_channel_bits: (n_kv_heads) codecs with the per-channel widths learned from
     * the layer's first append, owned by the side; a NULL entry (or hc NULL) = `codec` */
    vq_codec **hc;
    int cw_set; /* 1 once hc was learned (the append that completed the first G tokens) */
};

struct vq_layer {
    struct vq_side k, v;
    int f16_exact;     /* 1: K and V are plain fp16 rows, attended by attend_f16 */
    int f16_window;    /* 1: K and V are fp16 windows of a codec; while nothing is coded yet
                        * (KIVI with R >= tokens) attend_f16 reads the windows */
    int win;           /* sliding window W (0 = full attention) */
    int ss_cap;        /* stream sinks S: positions 0..S-1 kept as fp16 rows (0 = none) */
    int64_t keep_from; /* windowed: lowest position a query may still see (0 before any
                             * eviction); pages wholly below it are freed */
    int64_t n_tokens;
    int sink_cap; /* sinks chosen in the first append (0 = no sinks) */
    int n_sinks;
    int64_t sink_pos[VQ_MAX_SINKS]; /* ascending positions of the sinks */
    int64_t *ot_pos;                /* (ot_cap) ascending positions of the outlier tokens */
    int64_t n_ot, ot_cap;
    /* One-step undo of the outlier-channel sums: after a committed append the *_new buffers of
     * the key streams hold the state before it, valid while oc_undo_n (the token count before
     * that append) is > 0; a truncate back to exactly oc_undo_n swaps them back (how an
     * engine drops a failed batch). <= 0 = no undo (an append started since, or a reset). */
    int64_t oc_undo_n;
    /* key_scales 2 / key_channel_bits: (n_kv_heads, head_dim) mean q^2 of the observed
     * queries (qsum: their sums of q^2 over the query heads, in observation order) */
    float *qm;
    double *qsum;
    int64_t qm_n; /* queries behind qm (0 = none observed since the layer was emptied) */
};

/* Most (query, head) rows of one attend_f16 item of batched queries (vq_cache.gg_tile). */
#define VQ_F16_TILE_MAX 24

/* Per-stream plan of one append (phase A computes it, phase B commits it). */
struct plan {
    int64_t n_enc;     /* virtual rows [0, n_enc) of (window ++ new) get encoded */
    int64_t n_seg;     /* units of encoding work (stream_plan) */
    int64_t old_pages; /* pages before this append (rollback point) */
};

struct vq_cache {
    int n_layers, n_kv, d;
    int64_t max_tokens;
    int page_tokens;
    int n_threads;                     /* scratch slabs = threads used by attend */
    vq_codec **codecs;                 /* (n_codecs) unique codecs */
    struct vq_codec_params *codec_req; /* (n_codecs) the params each was requested with */
    int n_codecs;
    vq_codec *f16;           /* fp16 codec (same head_dim and ISA) for windows and sinks */
    struct vq_layer *layers; /* (n_layers) */
    size_t qs_bytes, acc_floats;
    int max_bt;
    vq_softmax_fn softmax;                 /* picked from the key codec ISA */
    const struct vq_ggml_attn_kernels *gk; /* fp16 layers' llama.cpp-identical kernels */
    size_t gg_ws; /* fp16 layers: score row stride in floats (max_tokens rounded to 16) */
    int gg_heads; /* fp16 layers: query heads per work item (fit in one slab) */
    int gg_tile;  /* fp16 layers, batched queries: (query, head) rows per item (attend_f16) */
    /* per-thread attend scratch: one slab each, slab_bytes apart */
    uint8_t *slabs;
    size_t slab_bytes; /* n_slots slots of slot_bytes */
    int n_slots;       /* batch size: VQ_SLOT_BATCH, fewer for long max_tokens */
    size_t slot_bytes;
    size_t off_scores, off_qs, off_qs16, off_acc, off_acc16;
    float *stage;                   /* (n_threads, page_tokens, head_dim): append's staged rows */
    size_t stage_floats;            /* one thread's stage */
    struct plan *kplan, *vplan;     /* (n_kv_heads) per-append plans */
    float *split;                   /* (2 * n_threads, head_dim + 2) split-decode partial results */
    float ot_k;                     /* outlier-token threshold k (0 = off) */
    int ks_mode, ks_pairs, ks_rope; /* key_scales, key_scale_pairs, key_scale_rope_dim */
    int kc_mode;                    /* key_channel_bits */
    int f16_mt;                     /* attend_f16_mt for one query ($VQ_F16_DECODE_HEADS unset) */
    size_t off_qk;                  /* slot scratch: the query times the key scales */
    int n_calib;                    /* outlier-channel calibration tokens */
    /* decode-once attention: kernels, per-thread scratch (dslab_floats apart; NULL when every
     * layer is plain fp16 or $VQ_PREFILL_ATTEND=fused), the shared page buffers and state */
    const struct vq_dense_kernels *dk;
    float *dslabs;
    size_t dslab_floats;
    float *dshared;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t dtype_size(enum vq_dtype t) { return t == VQ_DTYPE_F32 ? 4 : 2; }

/* Converts n elements of src (dtype t) to fp32. */
static void to_f32(const void *src, enum vq_dtype t, float *dst, int64_t n) {
    if (t == VQ_DTYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == VQ_DTYPE_F16) vq_fp16_to_fp32_row(src, dst, n);
    else vq_bf16_to_fp32_row(src, dst, n);
}

static int same_params(const struct vq_codec_params *a, const struct vq_codec_params *b) {
    return a->method == b->method && a->role == b->role && a->head_dim == b->head_dim &&
           a->bits == b->bits && a->seed == b->seed && a->unbiased_scale == b->unbiased_scale &&
           a->jl_dim == b->jl_dim && a->group_size == b->group_size &&
           a->residual_length == b->residual_length && a->n_sink_tokens == b->n_sink_tokens &&
           memcmp(a->polar_bits, b->polar_bits, sizeof a->polar_bits) == 0 && a->isa == b->isa &&
           a->calib == b->calib && a->calib_layer == b->calib_layer &&
           a->pq_codeword_bits == b->pq_codeword_bits && a->pq_subvec_dim == b->pq_subvec_dim &&
           a->spectral_waterfill == b->spectral_waterfill &&
           (a->channel_bits == b->channel_bits ||
            (a->channel_bits && b->channel_bits &&
             memcmp(a->channel_bits, b->channel_bits, (size_t)a->head_dim) == 0));
}

/* The page that holds coded token t of stream s (t >= pg0 * page_tokens, t < n_coded). */
static inline uint8_t *page_at(const struct vq_cache *c, const struct vq_stream *s, int64_t t) {
    return s->pages[t / c->page_tokens - s->pg0];
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Asks for the first bytes of the page that holds coded token t of stream s (codec blocks of
 * bb bytes, bt tokens) into the caches: the codec kernels prefetch ahead only inside the rows
 * one call is given (a page), and pages are separate allocations, so each page would start on
 * demand misses. One block and at least 2 KB, at most the page. Results unchanged. */
static void pf_page(const struct vq_cache *c, const struct vq_stream *s, int64_t t, size_t bb,
                    int64_t bt) {
    const uint8_t *pg = page_at(c, s, t);
    const size_t pb = (size_t)(c->page_tokens / bt) * bb;
    size_t n = bb > 2048 ? bb : 2048;
    if (n > pb) n = pb;
    for (size_t o = 0; o < n; o += 64) vq_prefetch(pg + o);
}

/* The end of the run of pages from p0 (a page start) below pmax that lie one after another in
 * memory (carved in order from one extent), as a token position: one codec call covers the
 * run. Pages with outlier-channel records after their blocks are runs of one page. */
static int64_t run_end(const struct vq_cache *c, const struct vq_side *sd,
                       const struct vq_stream *s, int64_t p0, int64_t pmax) {
    const int64_t PT = c->page_tokens;
    int64_t p1 = p0 + PT;
    if (sd->n_oc > 0) return p1;
    for (const uint8_t *pg = page_at(c, s, p0); p1 < pmax; p1 += PT) {
        const uint8_t *nx = page_at(c, s, p1);
        if (nx != pg + sd->page_bytes) break;
        pg = nx;
    }
    return p1;
}

/* The codec of stream (side, head): its learned per-channel-width codec, else the side's. */
static inline const vq_codec *side_codec(const struct vq_side *sd, int h) {
    return sd->hc && sd->hc[h] ? sd->hc[h] : sd->codec;
}

void vq_cache_layer_window(const struct vq_cache_params *p, int layer, int *w, int *s) {
    *w = p->layer_window ? p->layer_window[layer] : 0;
    *s = 0;
    if (*w == 0 && (p->stream_window > 0 || p->stream_sinks > 0)) { /* sinks alone: W = 0 */
        *w = p->stream_window;
        *s = p->stream_sinks;
    }
}

int vq_cache_center_on(int want, enum vq_method m) {
    if (want >= 0) return want;
    return (vq_method_flags(m) & VQ_METHOD_F_CENTERED) != 0;
}

/* Converts new token t of head h (dtype dt) to fp32 and subtracts the side's mu if set. */
static void load_row(const struct vq_cache *c, const struct vq_side *sd, const void *src,
                     enum vq_dtype dt, int h, int64_t t, float *dst) {
    const int d = c->d;
    const uint8_t *p = (const uint8_t *)src + (size_t)((t * c->n_kv + h) * d) * dtype_size(dt);
    to_f32(p, dt, dst, d);
    if (sd->mu) {
        float mu[1024];
        vq_fp16_to_fp32_row(sd->mu + (size_t)h * (size_t)d, mu, d);
        for (int i = 0; i < d; i++) dst[i] -= mu[i];
    }
    if (sd->ks) {
        const float *inv = sd->ks_inv + (size_t)h * (size_t)d;
        for (int i = 0; i < d; i++) dst[i] *= inv[i];
    }
}

/* ---- softmax (scalar reference) ------------------------------------------------------- */

void vq_softmax_ref(float *x, int64_t n, float scale, float m_floor, float *m_out, float *s_out) {
    float m = m_floor;
    for (int64_t t = 0; t < n; t++) {
        x[t] *= scale;
        if (x[t] > m) m = x[t];
    }
    double sum = 0;
    for (int64_t t = 0; t < n; t++) {
        x[t] = expf(x[t] - m);
        sum += x[t];
    }
    if (m_out) *m_out = m;
    if (s_out) *s_out = (float)sum;
}

/* ---- create / free -------------------------------------------------------------------------- */

struct vq_cache_params vq_cache_params_default(void) {
    struct vq_cache_params p;
    memset(&p, 0, sizeof p);
    p.n_layers = 1;
    p.n_kv_heads = 1;
    p.head_dim = 128;
    p.max_tokens = 4096;
    p.page_tokens = 256;
    p.key = vq_codec_params_default();
    p.key.role = VQ_ROLE_KEY;
    p.value = vq_codec_params_default();
    p.value.role = VQ_ROLE_VALUE;
    p.key_bits_per_layer = NULL;
    p.value_bits_per_layer = NULL;
    p.n_threads = 0;
    p.center_keys = -1;
    p.center_values = -1;
    p.outlier_token_k = 0.0f;
    p.n_outlier_channels = 0;
    p.n_calib_tokens = 200;
    return p;
}

/* Returns the codec for params q, creating it or reusing one created from identical params
 * (compared as requested, before the codec resolved defaults such as jl_dim). */
static vq_codec *get_codec(struct vq_cache *c, const struct vq_codec_params *q, vq_status *st) {
    for (int i = 0; i < c->n_codecs; i++)
        if (same_params(&c->codec_req[i], q)) return c->codecs[i];
    vq_codec *cd = vq_codec_create(q, st);
    if (!cd) return NULL;
    c->codec_req[c->n_codecs] = *q;
    c->codecs[c->n_codecs++] = cd;
    return cd;
}


/* 1 if every token of the side is a plain fp16 row at pages[t / page_tokens] + (t % page_tokens)
 * * head_dim: the fp16 codec with no window, sinks, outlier copies / channels or centering. */
static int plain_f16(const struct vq_side *sd) {
    return (vq_method_flags(sd->codec->p.method) & VQ_METHOD_F_FP16_ROWS) && sd->mode == WIN_NONE &&
           !sd->use_sinks && !sd->use_ot && sd->n_oc == 0 && !sd->mu && !sd->ks && sd->bt == 1;
}

/* Sets the nd key scales of a side to 1. */
static void ks_unit(struct vq_side *sd, size_t nd) {
    for (size_t i = 0; i < nd; i++) {
        sd->ks[i] = 0x3C00u; /* fp16 1.0 */
        sd->ks_f[i] = sd->ks_inv[i] = 1.0f;
    }
}

/* 1 if a side's fp16 window rows are the whole stream until its first encode: a window with
 * no sink, outlier or centering side data. */
static int window_f16(const struct vq_side *sd) {
    return sd->mode != WIN_NONE && sd->win_cap > 0 && !sd->use_sinks && !sd->use_ot &&
           sd->n_oc == 0 && !sd->mu;
}

/* Fills one side (K or V) of a layer; allocates the per-head stream array and windows.
 * n_oc: outlier channels of a key side (0 = off); use_ot: keep outlier-token copies. */
static vq_status side_init(struct vq_cache *c, struct vq_side *sd, const vq_codec *cd, int n_oc,
                           int use_ot) {
    const struct vq_codec_params *cp = vq_codec_params_get(cd);
    sd->codec = cd;
    sd->bt = vq_codec_block_tokens(cd);
    if (c->page_tokens % sd->bt != 0) return VQ_STATUS_INVALID_ARG;
    sd->page_bytes = (size_t)(c->page_tokens / sd->bt) * vq_codec_block_bytes(cd);
    /* outlier-channel records follow the codec blocks of a page: page_tokens sf16 scales,
     * then page_tokens x n_oc int8 codes */
    sd->n_oc = n_oc;
    sd->oc_off = sd->page_bytes;
    if (n_oc > 0) sd->page_bytes += (size_t)c->page_tokens * (size_t)(2 + n_oc);
    sd->use_ot = use_ot;
    if ((vq_method_flags(cp->method) & VQ_METHOD_F_WINDOWED) && cp->residual_length > 0) {
        sd->mode = cp->role == VQ_ROLE_KEY ? WIN_FLUSH : WIN_SLIDE;
        sd->win_cap = cp->residual_length;
        sd->lazy = sd->mode == WIN_FLUSH;
    } else if (sd->bt > 1) {
        sd->mode = WIN_FLUSH;
        sd->win_cap = sd->bt;
    } else {
        sd->mode = WIN_NONE;
        sd->win_cap = 0;
    }
    if (sd->mode == WIN_FLUSH && sd->win_cap % sd->bt != 0) return VQ_STATUS_INVALID_ARG;
    sd->buf_rows = sd->mode == WIN_SLIDE ? 2 * sd->win_cap : sd->win_cap;
    sd->use_sinks = (vq_method_flags(cp->method) & VQ_METHOD_F_SINKS) && cp->n_sink_tokens > 0;
    sd->s = calloc((size_t)c->n_kv, sizeof *sd->s);
    if (!sd->s) return VQ_STATUS_NO_MEMORY;
    for (int h = 0; h < c->n_kv; h++) {
        struct vq_stream *s = &sd->s[h];
        if (sd->win_cap > 0) {
            s->win = vq_alloc((size_t)sd->buf_rows * (size_t)c->d * 2);
            if (!s->win) return VQ_STATUS_NO_MEMORY;
        }
        if (n_oc > 0) {
            s->oc_sum = calloc((size_t)c->d, sizeof(double));
            s->oc_sum_new = calloc((size_t)c->d, sizeof(double));
            s->oc_ch = calloc((size_t)n_oc, sizeof(uint16_t));
            s->oc_ch_new = calloc((size_t)n_oc, sizeof(uint16_t));
            if (!s->oc_sum || !s->oc_sum_new || !s->oc_ch || !s->oc_ch_new)
                return VQ_STATUS_NO_MEMORY;
        }
    }
    return VQ_STATUS_OK;
}

static void extent_release(struct vq_extent *e) {
#ifdef VQ_EXT_ASAN
    vq_free(e->base);
#else
    vq_unmap(e->base, e->bytes);
#endif
}

/* A zeroed page for stream s of side sd, carved after the stream's last page; NULL when out
 * of memory. */
static uint8_t *page_new(const struct vq_cache *c, const struct vq_side *sd, struct vq_stream *s) {
    const size_t pb = sd->page_bytes; /* no gap: an extent is one array of blocks */
    if (s->n_ext == 0 || s->ext_used + pb > s->ext[s->n_ext - 1].bytes) {
        if (s->n_ext == s->ext_cap) {
            const int cap = s->ext_cap ? 2 * s->ext_cap : 4;
            struct vq_extent *ne = realloc(s->ext, (size_t)cap * sizeof *ne);
            if (!ne) return NULL;
            s->ext = ne;
            s->ext_cap = cap;
        }
#ifdef VQ_EXT_ASAN
        const size_t bytes = pb;
        uint8_t *base = vq_alloc(bytes);
#else
        /* the first extent spans the stream's capacity (address space only until written),
         * so that a stream is one run of pages; if that mapping fails, and after it, extents
         * grow with the stream */
        uint8_t *base = NULL;
        size_t bytes = 0;
        const int64_t cap_pages = (c->max_tokens + c->page_tokens - 1) / c->page_tokens + 1;
        if (s->n_ext == 0 && cap_pages > VQ_EXT_MIN) {
            bytes = (size_t)cap_pages * pb;
            base = vq_map_sparse(bytes);
        }
        if (!base) {
            int64_t np = s->n_pages < VQ_EXT_MIN ? VQ_EXT_MIN : s->n_pages;
            if (np > VQ_EXT_MAX) np = VQ_EXT_MAX;
            bytes = (size_t)np * pb;
            base = vq_map(bytes);
        }
#endif
        if (!base) return NULL;
        s->ext[s->n_ext++] = (struct vq_extent){base, bytes};
        s->ext_used = 0;
    }
    uint8_t *pg = s->ext[s->n_ext - 1].base + s->ext_used;
    s->ext_used += pb;
    memset(pg, 0, pb); /* a page given back by a rollback may be carved again */
    return pg;
}

/* Gives back pg, the page page_new returned last for s (a rollback); an extent left empty is
 * released. */
static void page_drop(const struct vq_side *sd, struct vq_stream *s, const uint8_t *pg) {
    const size_t pb = sd->page_bytes;
    VQ_ASSERT(s->n_ext > 0 && s->ext_used >= pb &&
              s->ext[s->n_ext - 1].base + s->ext_used - pb == pg);
    s->ext_used -= pb;
    if (s->ext_used == 0) {
        extent_release(&s->ext[--s->n_ext]);
        s->ext_used = s->n_ext > 0 ? s->ext[s->n_ext - 1].bytes : 0; /* earlier ones are full */
    }
}

static void side_free(struct vq_side *sd, int n_kv) {
    if (!sd->s) return;
    for (int h = 0; h < n_kv; h++) {
        struct vq_stream *s = &sd->s[h];
        for (int i = 0; i < s->n_ext; i++) extent_release(&s->ext[i]);
        free(s->ext);
        free(s->pages);
        vq_free(s->win);
        vq_free(s->sink);
        vq_free(s->ss);
        free(s->ot);
        free(s->oc_sum);
        free(s->oc_sum_new);
        free(s->oc_ch);
        free(s->oc_ch_new);
    }
    free(sd->s);
    sd->s = NULL;
    if (sd->hc)
        for (int h = 0; h < n_kv; h++) vq_codec_free(sd->hc[h]);
    free(sd->hc);
    sd->hc = NULL;
    free(sd->mu);
    sd->mu = NULL;
    free(sd->ks);
    sd->ks = NULL;
    free(sd->ks_f);
    free(sd->ks_inv);
    sd->ks_f = sd->ks_inv = NULL;
}

void vq_cache_free(vq_cache *c) {
    if (!c) return;
    if (c->layers) {
        for (int l = 0; l < c->n_layers; l++) {
            side_free(&c->layers[l].k, c->n_kv);
            side_free(&c->layers[l].v, c->n_kv);
            free(c->layers[l].ot_pos);
            free(c->layers[l].qm);
            free(c->layers[l].qsum);
        }
        free(c->layers);
    }
    if (c->codecs)
        for (int i = 0; i < c->n_codecs; i++) vq_codec_free(c->codecs[i]);
    free(c->codecs);
    free(c->codec_req);
    vq_codec_free(c->f16);
    vq_free(c->slabs);
    vq_free(c->stage);
    vq_free(c->split);
    vq_free(c->dslabs);
    vq_free(c->dshared);
    free(c->kplan);
    free(c->vplan);
    free(c);
}

static vq_cache *create_fail(vq_cache *c, vq_status *st, vq_status code) {
    vq_cache_free(c);
    if (st) *st = code;
    return NULL;
}

vq_cache *vq_cache_create(const struct vq_cache_params *p, vq_status *st) {
    if (!p || p->n_layers < 1 || p->n_kv_heads < 1 || p->max_tokens < 1 ||
        p->max_tokens > ((int64_t)1 << 31) || p->page_tokens < 1 || p->page_tokens > (1 << 20) ||
        p->n_threads < 0 || p->n_layers > (1 << 16) || p->n_kv_heads > (1 << 12) ||
        p->center_keys < -1 || p->center_keys > 1 || p->center_values < -1 ||
        p->center_values > 1 || !(p->outlier_token_k >= 0.0f) || !isfinite(p->outlier_token_k) ||
        p->n_outlier_channels < 0 || p->n_outlier_channels > 64 ||
        p->n_outlier_channels > p->head_dim / 2 ||
        (p->n_outlier_channels > 0 && p->n_calib_tokens < 1) || p->fp16_first_layers < 0 ||
        p->fp16_first_layers > p->n_layers || p->fp16_last_layers < 0 ||
        p->fp16_last_layers > p->n_layers || p->stream_window < 0 || p->stream_sinks < 0 ||
        p->stream_sinks > VQ_MAX_STREAM_SINKS || p->key_scales < 0 || p->key_scales > 2 ||
        p->key_scale_pairs < 0 || p->key_scale_pairs > 2 || p->key_scale_rope_dim < 0 ||
        p->key_scale_rope_dim % 2 != 0 || p->key_scale_rope_dim > p->head_dim ||
        p->key_channel_bits < 0 || p->key_channel_bits > 2)
        return create_fail(NULL, st, VQ_STATUS_INVALID_ARG);
    if (p->layer_window)
        for (int l = 0; l < p->n_layers; l++)
            if (p->layer_window[l] < 0) return create_fail(NULL, st, VQ_STATUS_INVALID_ARG);
    /* modifier / method combinations (see veloxquant.h) */
    if (p->outlier_token_k > 0.0f && !vq_cache_ot_supported(p->key.method, p->value.method))
        return create_fail(NULL, st, VQ_STATUS_UNSUPPORTED);
    if (p->n_outlier_channels > 0 && !vq_cache_oc_method(p->key.method))
        return create_fail(NULL, st, VQ_STATUS_UNSUPPORTED);
    if (p->key_channel_bits && !(vq_method_flags(p->key.method) & VQ_METHOD_F_PER_CHANNEL_KEYS))
        return create_fail(NULL, st, VQ_STATUS_UNSUPPORTED);
    struct vq_cache *c = calloc(1, sizeof *c);
    if (!c) return create_fail(NULL, st, VQ_STATUS_NO_MEMORY);
    c->n_layers = p->n_layers;
    c->n_kv = p->n_kv_heads;
    c->d = p->head_dim;
    c->max_tokens = p->max_tokens;
    c->page_tokens = p->page_tokens;
    c->ot_k = p->outlier_token_k;
    c->n_calib = p->n_calib_tokens;
    c->ks_mode = p->key_scales;
    c->kc_mode = p->key_channel_bits;
    c->f16_mt = getenv("VQ_F16_DECODE_HEADS") == NULL;
    c->ks_pairs = p->key_scale_pairs;
    c->ks_rope = p->key_scale_rope_dim > 0 ? p->key_scale_rope_dim : p->head_dim;
    c->codecs = calloc((size_t)p->n_layers * 2, sizeof *c->codecs);
    c->codec_req = calloc((size_t)p->n_layers * 2, sizeof *c->codec_req);
    c->layers = calloc((size_t)p->n_layers, sizeof *c->layers);
    if (!c->codecs || !c->codec_req || !c->layers) return create_fail(c, st, VQ_STATUS_NO_MEMORY);

    vq_status s = VQ_STATUS_OK;
    struct vq_codec_params f16p = vq_codec_params_default();
    f16p.head_dim = p->head_dim;
    f16p.isa = p->key.isa;
    c->f16 = vq_codec_create(&f16p, &s);
    if (!c->f16) return create_fail(c, st, s);

    c->softmax = vq_softmax_ref;
#ifdef VQ_HAVE_X86
    const enum vq_isa sisa = vq_isa_resolve(p->key.isa);
    if (sisa == VQ_ISA_AVX512) c->softmax = vq_softmax_avx512;
    else if (sisa == VQ_ISA_AVX2) c->softmax = vq_softmax_avx2;
#endif
    c->qs_bytes = 0;
    c->acc_floats = 0;
    c->max_bt = 1;
    for (int l = 0; l < c->n_layers; l++) {
        struct vq_layer *L = &c->layers[l];
        struct vq_codec_params kp = p->key, vp = p->value;
        kp.role = VQ_ROLE_KEY;
        vp.role = VQ_ROLE_VALUE;
        kp.head_dim = vp.head_dim = p->head_dim;
        if (p->key_bits_per_layer) kp.bits = p->key_bits_per_layer[l];
        if (p->value_bits_per_layer) vp.bits = p->value_bits_per_layer[l];
        /* calibrated codecs (vecinfer, spectral) read the entries of their own layer */
        if (kp.calib) kp.calib_layer = l;
        if (vp.calib) vp.calib_layer = l;
        /* full-precision edge layers: plain fp16 codec for K and V */
        if (l < p->fp16_first_layers || l >= p->n_layers - p->fp16_last_layers) {
            kp = vp = f16p;
            kp.role = VQ_ROLE_KEY;
            vp.role = VQ_ROLE_VALUE;
        }
        vq_codec *kc = get_codec(c, &kp, &s);
        if (!kc) return create_fail(c, st, s);
        vq_codec *vc = get_codec(c, &vp, &s);
        if (!vc) return create_fail(c, st, s);
        const int k_oc = vq_cache_oc_method(kc->p.method) ? p->n_outlier_channels : 0;
        const int ot_on = p->outlier_token_k > 0.0f;
        if ((s = side_init(c, &L->k, kc, k_oc, ot_on && vq_cache_ot_method(kc->p.method))) !=
            VQ_STATUS_OK)
            return create_fail(c, st, s);
        if ((s = side_init(c, &L->v, vc, 0, ot_on && vq_cache_ot_method(vc->p.method))) !=
            VQ_STATUS_OK)
            return create_fail(c, st, s);
        const struct vq_codec_params *kcp = vq_codec_params_get(kc), *vcp = vq_codec_params_get(vc);
        L->sink_cap = L->k.use_sinks ? kcp->n_sink_tokens : L->v.use_sinks ? vcp->n_sink_tokens : 0;
        if (L->sink_cap > VQ_MAX_SINKS) return create_fail(c, st, VQ_STATUS_INVALID_ARG);
        struct vq_side *sides[2] = {&L->k, &L->v};
        for (int j = 0; j < 2; j++) {
            if (!sides[j]->use_sinks) continue;
            for (int h = 0; h < c->n_kv; h++) {
                sides[j]->s[h].sink = vq_alloc((size_t)L->sink_cap * (size_t)c->d * 2);
                if (!sides[j]->s[h].sink) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
            }
        }
        const int want_c[2] = {p->center_keys, p->center_values};
        for (int j = 0; j < 2; j++) {
            if (!vq_cache_center_on(want_c[j], vq_codec_params_get(sides[j]->codec)->method))
                continue;
            sides[j]->mu = calloc((size_t)c->n_kv * (size_t)c->d, sizeof(uint16_t));
            if (!sides[j]->mu) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
        }
        const int fp16_edge = l < p->fp16_first_layers || l >= p->n_layers - p->fp16_last_layers;
        if (p->key_scales > 0 && !fp16_edge) {
            const size_t nd = (size_t)c->n_kv * (size_t)c->d;
            L->k.ks = malloc(nd * sizeof(uint16_t));
            L->k.ks_f = malloc(nd * sizeof(float));
            L->k.ks_inv = malloc(nd * sizeof(float));
            if (!L->k.ks || !L->k.ks_f || !L->k.ks_inv)
                return create_fail(c, st, VQ_STATUS_NO_MEMORY);
            ks_unit(&L->k, nd);
        }
        if (p->key_channel_bits && !fp16_edge) {
            L->k.hc = calloc((size_t)c->n_kv, sizeof *L->k.hc);
            if (!L->k.hc) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
        }
        if ((p->key_scales == 2 || L->k.hc) && !fp16_edge) {
            L->qm = calloc((size_t)c->n_kv * (size_t)c->d, sizeof(float));
            L->qsum = calloc((size_t)c->n_kv * (size_t)c->d, sizeof(double));
            if (!L->qm || !L->qsum) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
        }
        L->f16_exact = plain_f16(&L->k) && plain_f16(&L->v) && c->d % 16 == 0;
        L->f16_window = window_f16(&L->k) && window_f16(&L->v) && c->d % 16 == 0;
        vq_cache_layer_window(p, l, &L->win, &L->ss_cap);
        for (int j = 0; j < 2 && L->ss_cap > 0; j++)
            for (int h = 0; h < c->n_kv; h++) {
                sides[j]->s[h].ss = vq_alloc((size_t)L->ss_cap * (size_t)c->d * 2);
                if (!sides[j]->s[h].ss) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
            }
        if (vq_codec_query_bytes(kc) > c->qs_bytes) c->qs_bytes = vq_codec_query_bytes(kc);
        if (vq_codec_acc_floats(vc) > c->acc_floats) c->acc_floats = vq_codec_acc_floats(vc);
        if (L->k.bt > c->max_bt) c->max_bt = L->k.bt;
        if (L->v.bt > c->max_bt) c->max_bt = L->v.bt;
    }

    int nt = p->n_threads;
#ifdef _OPENMP
    if (nt == 0) nt = omp_get_max_threads();
#else
    nt = 1;
#endif
    if (nt < 1) nt = 1;
    c->n_threads = nt;
    size_t off = 0;
    c->off_scores = off;
    off += align64((size_t)(c->max_tokens + c->max_bt) * sizeof(float));
    c->off_qs = off;
    off += align64(c->qs_bytes > 0 ? c->qs_bytes : 1);
    c->off_qs16 = off;
    off += align64(vq_codec_query_bytes(c->f16));
    c->off_acc = off;
    off += align64(c->acc_floats * sizeof(float));
    c->off_acc16 = off;
    off += align64((size_t)c->d * sizeof(float));
    c->off_qk = off;
    off += align64((size_t)c->d * sizeof(float));
    c->slot_bytes = off;
    /* at most ~1 MiB of score rows per thread: 8 slots up to 32K tokens, fewer beyond */
    c->n_slots = (int)((1 << 20) / ((c->max_tokens + c->max_bt) * (int64_t)sizeof(float)));
    if (c->n_slots > VQ_SLOT_BATCH) c->n_slots = VQ_SLOT_BATCH;
    if (c->n_slots < 1) c->n_slots = 1;
    c->slab_bytes = off * (size_t)c->n_slots;
    /* fp16 layers: gg_heads heads per item, each a score row, an fp16-rounded query and 64
     * lane accumulators of head_dim (attend_f16) */
    c->gk = vq_ggml_attn_kernels(p->key.isa);
    c->gg_ws = (size_t)round_up(c->max_tokens, 16);
    c->gg_heads = c->n_slots;
    int any_f16 = 0;
    for (int l = 0; l < c->n_layers; l++)
        any_f16 |= c->layers[l].f16_exact || c->layers[l].f16_window;
    /* batched queries (16 lanes): rows of a score row, a query and 16 lane blocks, as many as
     * fit about 2 MiB (at most 24) */
    const size_t row16 = (c->gg_ws + (size_t)c->d * 17) * sizeof(float);
    c->gg_tile = (int)((2u << 20) / row16);
    if (c->gg_tile > VQ_F16_TILE_MAX) c->gg_tile = VQ_F16_TILE_MAX;
    if (c->gg_tile < c->gg_heads) c->gg_tile = c->gg_heads;
    size_t gg_bytes = (size_t)c->gg_heads * (c->gg_ws + (size_t)c->d * 65) * sizeof(float);
    if ((size_t)c->gg_tile * row16 > gg_bytes) gg_bytes = (size_t)c->gg_tile * row16;
    if (any_f16 && gg_bytes > c->slab_bytes) c->slab_bytes = align64(gg_bytes);
    c->slabs = vq_alloc(c->slab_bytes * (size_t)nt);
    c->stage_floats = (size_t)c->page_tokens * (size_t)c->d;
    c->stage = vq_alloc(c->stage_floats * sizeof(float) * (size_t)c->n_threads);
    c->kplan = calloc((size_t)c->n_kv, sizeof *c->kplan);
    c->vplan = calloc((size_t)c->n_kv, sizeof *c->vplan);
    /* split decode: n_pairs < nt pairs x ceil(nt / n_pairs) chunks < 2 nt items of one pair;
     * one query: n_kv * nb < 2 nt batches x ceil(2 nt / (n_kv * nb)) chunks < 4 nt items of up
     * to n_slots pairs (attend_split) */
    c->split = vq_alloc((size_t)(4 * nt) * (size_t)c->n_slots * (size_t)(c->d + 2) * sizeof(float));
    if (!c->slabs || !c->stage || !c->kplan || !c->vplan || !c->split)
        return create_fail(c, st, VQ_STATUS_NO_MEMORY);
    /* decode-once attention of batched queries on coded layers: per thread a block's queries,
     * outputs and score rows and one page of decoded keys; shared: each kv head's transposed
     * key page and value page, the pairs' running max and sum */
    int any_coded = 0;
    for (int l = 0; l < c->n_layers; l++) any_coded |= !c->layers[l].f16_exact;
    const char *pa = getenv("VQ_PREFILL_ATTEND");
    c->dk = vq_dense_kernels(p->key.isa);
    if (any_coded && !(pa && strcmp(pa, "fused") == 0)) {
        const size_t P = VQ_DENSE_PAIRS, D = (size_t)c->d, PT = (size_t)c->page_tokens;
        c->dslab_floats = align64((2 * P * D + P * (size_t)round_up(c->page_tokens, 16) + PT * D) *
                                  sizeof(float)) /
                          sizeof(float);
        c->dslabs = vq_alloc(c->dslab_floats * sizeof(float) * (size_t)nt);
        c->dshared = vq_alloc((2 * (size_t)c->n_kv * PT * D + 2 * VQ_DENSE_STATE) * sizeof(float));
        if (!c->dslabs || !c->dshared) return create_fail(c, st, VQ_STATUS_NO_MEMORY);
    }
    if (st) *st = VQ_STATUS_OK;
    return c;
}

/* ---- append ------------------------------------------------------------------------------- */


/* Row i of the virtual sequence (window rows, then the new tokens) of stream (side, head) as
 * fp32 into dst. Windowed streams round new tokens through fp16. */
static void virt_row(const struct vq_cache *c, const struct vq_side *sd, int h, const void *src,
                     enum vq_dtype dt, int64_t i, float *dst) {
    const struct vq_stream *s = &sd->s[h];
    const int d = c->d;
    if (i < s->win_n) {
        const int r = s->win_start + (int)i;
        vq_fp16_to_fp32_row(s->win + (size_t)r * (size_t)d, dst, d);
        return;
    }
    const int64_t t = i - s->win_n;
    const uint8_t *p = (const uint8_t *)src + (size_t)((t * c->n_kv + h) * d) * dtype_size(dt);
    if (sd->mode != WIN_NONE && dt == VQ_DTYPE_F16 && !sd->mu && !sd->ks) {
        vq_fp16_to_fp32_row((const uint16_t *)(const void *)p, dst, d);
        return;
    }
    load_row(c, sd, src, dt, h, t, dst);
    if (sd->mode != WIN_NONE) {
        uint16_t tmp[1024];
        vq_fp32_to_fp16_row(dst, tmp, d);
        vq_fp16_to_fp32_row(tmp, dst, d);
    }
}

/* Writes new token t of head h (centered if the side is) as an fp16 row into dst. */
static void new_row_f16(const struct vq_cache *c, const struct vq_side *sd, const void *src,
                        enum vq_dtype dt, int h, int64_t t, uint16_t *dst) {
    const int d = c->d;
    const uint8_t *p = (const uint8_t *)src + (size_t)((t * c->n_kv + h) * d) * dtype_size(dt);
    if (dt == VQ_DTYPE_F16 && !sd->mu && !sd->ks) {
        memcpy(dst, p, (size_t)d * 2);
        return;
    }
    float tmp[1024];
    load_row(c, sd, src, dt, h, t, tmp);
    vq_fp32_to_fp16_row(tmp, dst, d);
}

/* Sets the side's mu to the per-head mean of the n tokens of src (accumulated in double,
 * clamped to the fp16 range, rounded to fp16). */
static void compute_mu(const struct vq_cache *c, struct vq_side *sd, const void *src,
                       enum vq_dtype dt, int64_t n) {
    const int d = c->d;
    double acc[1024];
    float row[1024];
    for (int h = 0; h < c->n_kv; h++) {
        for (int i = 0; i < d; i++) acc[i] = 0;
        for (int64_t t = 0; t < n; t++) {
            const uint8_t *p = (const uint8_t *)src +
                               (size_t)((t * c->n_kv + h) * d) * dtype_size(dt);
            to_f32(p, dt, row, d);
            for (int i = 0; i < d; i++) acc[i] += row[i];
        }
        for (int i = 0; i < d; i++) {
            double m = acc[i] / (double)n;
            row[i] = (float)(m > 65504.0 ? 65504.0 : m < -65504.0 ? -65504.0 : m);
        }
        vq_fp32_to_fp16_row(row, sd->mu + (size_t)h * (size_t)d, d);
    }
}

/* Averages the pairs of x (n entries) that one RoPE rotation mixes (pairing mode `pairs` over
 * the first r entries; see vq_cache_params.key_scale_pairs), then floors every entry at 1e-3
 * of the mean (and at 1e-30). */
static void ks_pool(double *x, int n, int pairs, int r) {
    if (pairs == 1)
        for (int i = 0; i + 1 < r; i += 2) x[i] = x[i + 1] = 0.5 * (x[i] + x[i + 1]);
    else if (pairs == 2)
        for (int i = 0; i < r / 2; i++) x[i] = x[i + r / 2] = 0.5 * (x[i] + x[i + r / 2]);
    double mean = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    const double fl = 1e-3 * mean / n > 1e-30 ? 1e-3 * mean / n : 1e-30;
    for (int i = 0; i < n; i++)
        if (!(x[i] >= fl)) x[i] = fl;
}

/* Learns the key side's channel scales (vq_cache_params.key_scales) from the n tokens of the
 * layer's first append (after mu was set): b_i = mean (k_i - mu_i)^2, a_i = the observed query
 * moments (L->qm) or 1, s_i = (b_i / a_i)^(1/4) over the geometric mean, clamped to [1/16, 16],
 * rounded to fp16 (ks_inv = 1 / that). Fewer than 8 tokens: s = 1. */
static void compute_ks(const struct vq_cache *c, struct vq_layer *L, const void *src,
                       enum vq_dtype dt, int64_t n) {
    struct vq_side *sd = &L->k;
    const int d = c->d;
    ks_unit(sd, (size_t)c->n_kv * (size_t)d);
    if (n < 8) return;
    double b[1024], a[1024];
    float row[1024];
    for (int h = 0; h < c->n_kv; h++) {
        for (int i = 0; i < d; i++) b[i] = 0;
        for (int64_t t = 0; t < n; t++) {
            load_row(c, sd, src, dt, h, t, row); /* centered, divided by the unit scales */
            for (int i = 0; i < d; i++) b[i] += (double)row[i] * row[i];
        }
        const int use_q = c->ks_mode == 2 && L->qm_n > 0;
        for (int i = 0; i < d; i++) {
            b[i] /= (double)n;
            a[i] = use_q ? L->qm[(size_t)h * (size_t)d + (size_t)i] : 1.0;
        }
        ks_pool(b, d, c->ks_pairs, c->ks_rope);
        ks_pool(a, d, c->ks_pairs, c->ks_rope);
        double lg = 0, ls[1024];
        for (int i = 0; i < d; i++) {
            ls[i] = 0.25 * (log(b[i]) - log(a[i]));
            lg += ls[i];
        }
        lg /= d;
        for (int i = 0; i < d; i++) {
            double e = ls[i] - lg;
            e = e > log(16.0) ? log(16.0) : e < -log(16.0) ? -log(16.0) : e;
            row[i] = (float)exp(e);
        }
        const size_t o = (size_t)h * (size_t)d;
        vq_fp32_to_fp16_row(row, sd->ks + o, d);
        vq_fp16_to_fp32_row(sd->ks + o, sd->ks_f + o, d);
        for (int i = 0; i < d; i++) sd->ks_inv[o + (size_t)i] = 1.0f / sd->ks_f[o + (size_t)i];
    }
}

/* Per-channel KIVI key widths (vq_cache_params.key_channel_bits, docs/ALGORITHMS.md §8.8)
 * of channels with weights w (d entries) at mean width `bits`: channels ranked by w
 * (descending, ties: lower channel) form units of 8. Without `zero` every unit starts at 2 bits
 * and the next bit goes to the unit of largest W_u (f(b_u) - f(b_u + 1)), f(b) = (2^b - 1)^-2
 * (a KIVI channel's error at b bits over its range squared), W_u = sum of w over the unit
 * (ties: lower unit), until the widths sum to d * bits; no unit above 8. With `zero` every unit
 * starts at 0 bits (the group mean alone, f(0) = VQ_KC_F0 = 1/2: a channel's variance over its
 * range squared, as a fraction of the uniform quantizer's 1/12 scale) and the step 0 -> 2 costs
 * two bits: each step goes to the largest gain per bit that fits in what is left. Pure,
 * thread-safe. */
#define VQ_KC_F0 1.5
static double kc_f(int b) {
    if (b == 0) return VQ_KC_F0;
    const double e = (double)((1 << b) - 1);
    return 1.0 / (e * e);
}

void vq_cache_channel_widths(const double *w, int d, int bits, int zero, uint8_t *out) {
    int order[1024], ub[128];
    double wu[128];
    for (int i = 0; i < d; i++) order[i] = i;
    for (int i = 1; i < d; i++) { /* insertion sort: stable, descending w */
        const int x = order[i];
        int j = i;
        while (j > 0 && w[order[j - 1]] < w[x]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    const int nu = d / 8, b0 = zero ? 0 : 2;
    for (int u = 0; u < nu; u++) {
        wu[u] = 0;
        for (int i = 0; i < 8; i++) wu[u] += w[order[8 * u + i]];
        ub[u] = b0;
    }
    for (int left = nu * (bits - b0); left > 0;) {
        int best = -1, bcost = 0;
        double gbest = -1;
        for (int u = 0; u < nu; u++) {
            if (ub[u] >= 8) continue;
            const int step = ub[u] == 0 ? 2 : 1;
            if (step > left) continue;
            const double gain = wu[u] * (kc_f(ub[u]) - kc_f(ub[u] + step)) / step;
            if (gain > gbest) best = u, gbest = gain, bcost = step;
        }
        if (best < 0) break; /* cannot happen for bits in 2..8 */
        ub[best] += bcost;
        left -= bcost;
    }
    for (int u = 0; u < nu; u++)
        for (int i = 0; i < 8; i++) out[order[8 * u + i]] = (uint8_t)ub[u];
}

/* Learns the key side's per-head codecs (vq_cache_params.key_channel_bits) at the append of
 * n tokens that brings the layer to G tokens or more (none is coded before it: KIVI keys wait
 * for a whole group): w_c = a_c R_c^2 with R_c^2 the mean over the whole groups of G among
 * the layer's tokens so far (the held rows, then the append's; rows as stored: centered,
 * scaled, the held ones as their fp16 window rows) of (max - min)^2 of channel c and a_c the
 * observed query moment (1 when none was observed); widths by vq_cache_channel_widths at the
 * side codec's width. Widths all equal, or a stream whose rows are not all in its window: the
 * side's codec. */
static vq_status compute_cw(const struct vq_cache *c, struct vq_layer *L, const void *src,
                            enum vq_dtype dt, int64_t n) {
    struct vq_side *sd = &L->k;
    const int d = c->d, g = sd->bt;
    const int64_t n0 = L->n_tokens;
    const struct vq_codec_params *cp = vq_codec_params_get(sd->codec);
    for (int h = 0; h < c->n_kv; h++) {
        vq_codec_free(sd->hc[h]);
        sd->hc[h] = NULL;
    }
    const int zero = c->kc_mode == 2;
    if (n0 + n < g || d % 8 != 0 || (cp->bits == 2 && !zero) || cp->bits == 8) return VQ_STATUS_OK;
    double r2[1024];
    float row[1024], lo[1024], hi[1024];
    uint8_t wb[1024];
    for (int h = 0; h < c->n_kv; h++) {
        const struct vq_stream *s = &sd->s[h];
        if (n0 > 0 && (s->n_coded != 0 || s->win_n != n0 || !s->win)) continue;
        for (int i = 0; i < d; i++) r2[i] = 0;
        for (int64_t t0 = 0; t0 + g <= n0 + n; t0 += g)
            for (int64_t t = t0; t < t0 + g; t++) {
                if (t < n0)
                    vq_fp16_to_fp32_row(s->win + (size_t)(s->win_start + t) * (size_t)d, row, d);
                else load_row(c, sd, src, dt, h, t - n0, row);
                for (int i = 0; i < d; i++) {
                    lo[i] = t == t0 || row[i] < lo[i] ? row[i] : lo[i];
                    hi[i] = t == t0 || row[i] > hi[i] ? row[i] : hi[i];
                    if (t == t0 + g - 1) r2[i] += (double)(hi[i] - lo[i]) * (hi[i] - lo[i]);
                }
            }
        for (int i = 0; i < d; i++)
            if (L->qm_n > 0) r2[i] *= L->qm[(size_t)h * (size_t)d + (size_t)i];
        vq_cache_channel_widths(r2, d, cp->bits, zero, wb);
        int uniform = 1;
        for (int i = 0; i < d; i++) uniform &= wb[i] == cp->bits;
        if (uniform) continue;
        struct vq_codec_params hp = *cp;
        hp.channel_bits = wb;
        vq_status st;
        sd->hc[h] = vq_codec_create(&hp, &st);
        if (!sd->hc[h]) return st;
    }
    return VQ_STATUS_OK;
}

vq_status vq_cache_observe_queries(vq_cache *c, int layer, const float *q, int n_q_heads,
                                   int64_t n_q) {
    if (!c || layer < 0 || layer >= c->n_layers || n_q < 0 || n_q_heads < 1 ||
        n_q_heads % c->n_kv != 0 || (n_q > 0 && !q))
        return VQ_STATUS_INVALID_ARG;
    struct vq_layer *L = &c->layers[layer];
    /* an empty layer starts over; one with tokens adds while its key widths wait for G */
    const int pending = L->k.hc && !L->k.cw_set;
    if (n_q == 0 || !L->qm || (L->n_tokens > 0 && !pending)) return VQ_STATUS_OK;
    const int d = c->d, grp = n_q_heads / c->n_kv;
    const int64_t total = n_q * n_q_heads * d;
    for (int64_t i = 0; i < total; i++)
        if (!isfinite(q[i])) return VQ_STATUS_NON_FINITE;
    if (L->n_tokens == 0) {
        memset(L->qsum, 0, (size_t)c->n_kv * (size_t)d * sizeof(double));
        L->qm_n = 0;
    }
    L->qm_n += n_q;
    for (int g = 0; g < c->n_kv; g++) {
        double *acc = L->qsum + (size_t)g * (size_t)d;
        for (int64_t t = 0; t < n_q; t++)
            for (int h = g * grp; h < (g + 1) * grp; h++) {
                const float *x = q + ((size_t)t * (size_t)n_q_heads + (size_t)h) * (size_t)d;
                for (int i = 0; i < d; i++) acc[i] += (double)x[i] * x[i];
            }
        for (int i = 0; i < d; i++)
            L->qm[(size_t)g * (size_t)d + (size_t)i] = (float)(acc[i] / (double)(L->qm_n * grp));
    }
    return VQ_STATUS_OK;
}

/* Index of the first outlier token at a position >= pos (n_ot if none). */
static int64_t ot_lower(const struct vq_layer *L, int64_t pos) {
    int64_t a = 0, b = L->n_ot;
    while (a < b) {
        const int64_t m = a + (b - a) / 2;
        if (L->ot_pos[m] < pos) a = m + 1;
        else b = m;
    }
    return a;
}

/* 1 if the token at pos is a sink or an outlier token (kept fp16; excluded from key groups). */
static int is_sink_pos(const struct vq_layer *L, int64_t pos) {
    for (int i = 0; i < L->n_sinks; i++)
        if (L->sink_pos[i] == pos) return 1;
    const int64_t i = ot_lower(L, pos);
    return i < L->n_ot && L->ot_pos[i] == pos;
}

/* Replaces sink / outlier-token rows of each block of `rows` staged rows (absolute positions
 * pos0..) by the nearest other row of the same block (earlier first). Blocks that are all
 * sinks stay. */
static void replace_sinks(const struct vq_layer *L, int bt, int d, int64_t pos0, int64_t rows,
                          float *stage) {
    if ((L->n_sinks == 0 && L->n_ot == 0) || bt <= 1) return;
    for (int64_t b0 = 0; b0 < rows; b0 += bt) {
        for (int i = 0; i < bt; i++) {
            if (!is_sink_pos(L, pos0 + b0 + i)) continue;
            for (int k = 1; k < bt; k++) {
                int j = -1;
                if (i - k >= 0 && !is_sink_pos(L, pos0 + b0 + i - k)) j = i - k;
                else if (i + k < bt && !is_sink_pos(L, pos0 + b0 + i + k)) j = i + k;
                if (j >= 0) {
                    memcpy(stage + (b0 + i) * d, stage + (b0 + j) * d, (size_t)d * sizeof(float));
                    break;
                }
            }
        }
    }
}

/* Scans k and v: NaN/Inf anywhere gives NON_FINITE; a magnitude above 65504 in a stream that
 * keeps fp16 rows gives RANGE. */
static vq_status scan_input(const struct vq_cache *c, const struct vq_layer *L, const void *src,
                            enum vq_dtype dt, int64_t n, int windowed_or_sink) {
    const int64_t total = n * c->n_kv * c->d;
    int range = 0;
    if (dt == VQ_DTYPE_F32) {
        const float *x = src;
        for (int64_t i = 0; i < total; i++) {
            if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
            range |= fabsf(x[i]) > 65504.0f;
        }
    } else if (dt == VQ_DTYPE_F16) {
        const uint16_t *x = src;
        for (int64_t i = 0; i < total; i++)
            if ((x[i] & 0x7C00u) == 0x7C00u) return VQ_STATUS_NON_FINITE;
    } else {
        const uint16_t *x = src;
        for (int64_t i = 0; i < total; i++) {
            if ((x[i] & 0x7F80u) == 0x7F80u) return VQ_STATUS_NON_FINITE;
            range |= fabsf(vq_bf16_to_fp32(x[i])) > 65504.0f;
        }
    }
    (void)L;
    return range && windowed_or_sink ? VQ_STATUS_RANGE : VQ_STATUS_OK;
}

/* Centered side that keeps fp16 rows: RANGE if some x - mu exceeds the fp16 range. */
static vq_status scan_centered(const struct vq_cache *c, const struct vq_side *sd, const void *src,
                               enum vq_dtype dt, int64_t n) {
    if ((!sd->mu && !sd->ks) || (sd->mode == WIN_NONE && !sd->use_sinks && !sd->use_ot))
        return VQ_STATUS_OK;
    float row[1024];
    for (int64_t t = 0; t < n; t++)
        for (int h = 0; h < c->n_kv; h++) {
            load_row(c, sd, src, dt, h, t, row);
            for (int i = 0; i < c->d; i++)
                if (!(fabsf(row[i]) <= 65504.0f)) return VQ_STATUS_RANGE;
        }
    return VQ_STATUS_OK;
}

/* ---- outlier channels ---------------------------------------------------------------------- */

/* Little-endian 16-bit load/store (records need not be 2-byte aligned). */
static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static void st16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Fixes the n_oc channels of largest sum (ties: lower channel) into ch, ascending. */
static void oc_pick(const double *sum, int d, int n_oc, uint16_t *ch) {
    for (int k = 0; k < n_oc; k++) {
        int best = -1;
        for (int i = 0; i < d; i++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= ch[j] == i;
            if (!taken && (best < 0 || sum[i] > sum[best])) best = i;
        }
        ch[k] = (uint16_t)best;
    }
    for (int i = 1; i < n_oc; i++)
        for (int j = i; j > 0 && ch[j - 1] > ch[j]; j--) {
            uint16_t t = ch[j];
            ch[j] = ch[j - 1];
            ch[j - 1] = t;
        }
}

/* Phase A of the outlier-channel split of `rows` staged rows (absolute positions pos0..) of
 * key stream s, whose records go to page slots in_page.. of page pg: calibration rows add
 * |x| to the pending sums (the channels are fixed at position n_calib - 1) and get a zero
 * record; later rows move their outlier channels into the record and are zeroed there.
 * RANGE if a scale does not fit vq_sf16. */
static vq_status oc_split(const struct vq_cache *c, const struct vq_side *sd, struct vq_stream *s,
                          int64_t pos0, int64_t rows, float *stage, uint8_t *pg, int64_t in_page) {
    const int d = c->d, n = sd->n_oc;
    uint8_t *scales = pg + sd->oc_off;
    int8_t *codes = (int8_t *)(void *)(pg + sd->oc_off + 2 * (size_t)c->page_tokens);
    for (int64_t r = 0; r < rows; r++) {
        float *x = stage + r * d;
        const int64_t pos = pos0 + r, slot = in_page + r;
        int8_t *q = codes + slot * n;
        if (!s->oc_ready_new) {
            VQ_ASSERT(pos < c->n_calib);
            st16(scales + 2 * slot, 0);
            memset(q, 0, (size_t)n);
            for (int i = 0; i < d; i++) s->oc_sum_new[i] += fabs((double)x[i]);
            if (pos == c->n_calib - 1) {
                oc_pick(s->oc_sum_new, d, n, s->oc_ch_new);
                s->oc_ready_new = 1;
            }
            continue;
        }
        float amax = 0.0f;
        for (int k = 0; k < n; k++) {
            const float a = fabsf(x[s->oc_ch_new[k]]);
            if (a > amax) amax = a;
        }
        const float scale = amax / 127.0f;
        if (!vq_sf16_fits(scale)) return VQ_STATUS_RANGE;
        const uint16_t h = vq_fp32_to_sf16(scale);
        const float sc = vq_sf16_to_fp32(h);
        st16(scales + 2 * slot, h);
        for (int k = 0; k < n; k++) {
            float v = sc > 0.0f ? roundf(x[s->oc_ch_new[k]] / sc) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[k] = (int8_t)v;
            x[s->oc_ch_new[k]] = 0.0f;
        }
    }
    return VQ_STATUS_OK;
}

/* Adds the outlier-channel part of tokens [p0, p0 + n) (one page, p0 % page_tokens == 0 not
 * required) of key stream s to scores: sc[t] += scale_t * sum_k q[ch_k] * code_t,k. */
static void oc_score(const struct vq_cache *c, const struct vq_side *sd, const struct vq_stream *s,
                     const float *q, int64_t p0, int64_t n, float *sc) {
    const int no = sd->n_oc;
    const int64_t PT = c->page_tokens;
    const uint8_t *pg = page_at(c, s, p0);
    const uint8_t *scales = pg + sd->oc_off;
    const int8_t *codes = (const int8_t *)(const void *)(pg + sd->oc_off + 2 * (size_t)PT);
    float qo[64];
    for (int k = 0; k < no; k++) qo[k] = q[s->oc_ch[k]];
    const int64_t s0 = p0 % PT;
    for (int64_t t = 0; t < n; t++) {
        const float scale = vq_sf16_to_fp32(ld16(scales + 2 * (s0 + t)));
        if (scale == 0.0f) continue;
        const int8_t *cd = codes + (s0 + t) * no;
        float acc = 0.0f;
        for (int k = 0; k < no; k++) acc += qo[k] * (float)cd[k];
        sc[t] += scale * acc;
    }
}

/* Adds the decoded outlier-channel part of tokens [p0, p0 + n) of key stream s to the rows x. */
static void oc_decode(const struct vq_cache *c, const struct vq_side *sd, const struct vq_stream *s,
                      int64_t p0, int64_t n, float *x) {
    const int no = sd->n_oc, d = c->d;
    const int64_t PT = c->page_tokens;
    const uint8_t *pg = page_at(c, s, p0);
    const uint8_t *scales = pg + sd->oc_off;
    const int8_t *codes = (const int8_t *)(const void *)(pg + sd->oc_off + 2 * (size_t)PT);
    const int64_t s0 = p0 % PT;
    for (int64_t t = 0; t < n; t++) {
        const float scale = vq_sf16_to_fp32(ld16(scales + 2 * (s0 + t)));
        const int8_t *cd = codes + (s0 + t) * no;
        for (int k = 0; k < no; k++) x[t * d + s->oc_ch[k]] += scale * (float)cd[k];
    }
}

/* Empties the outlier-channel statistics of a key side (calibration starts again). */
static void oc_reset(struct vq_side *sd, int n_kv, int d) {
    if (sd->n_oc == 0) return;
    for (int h = 0; h < n_kv; h++) {
        memset(sd->s[h].oc_sum, 0, (size_t)d * sizeof(double));
        sd->s[h].oc_ready = 0;
    }
}

/* Phase A, first half, for one stream: plan (pl->n_enc rows to encode, pl->n_seg units of
 * work: the page segments of those rows, or one unit for a key side with outlier channels,
 * whose statistics follow the rows in order) and allocate the pages. */
static vq_status stream_plan(struct vq_cache *c, struct vq_side *sd, int h, int64_t n,
                             struct plan *pl) {
    struct vq_stream *s = &sd->s[h];
    const int64_t total = s->win_n + n, PT = c->page_tokens;
    int64_t n_enc;
    if (sd->mode == WIN_NONE) n_enc = n;
    else if (sd->mode == WIN_FLUSH)
        n_enc = (sd->lazy ? (total > 0 ? total - 1 : 0) : total) / sd->win_cap * sd->win_cap;
    else n_enc = total > sd->win_cap ? total - sd->win_cap : 0;
    pl->n_enc = n_enc;
    pl->n_seg = 0;
    if (n_enc == 0) return VQ_STATUS_OK;
    const int64_t first = PT - s->n_coded % PT; /* rows of the first segment (if n_enc allows) */
    pl->n_seg = sd->n_oc > 0 || n_enc <= first ? 1 : 1 + (n_enc - first + PT - 1) / PT;
    const int64_t end = s->n_coded + n_enc;
    const int64_t need = (end + PT - 1) / PT - s->pg0;
    if (need > s->pages_cap) {
        int64_t cap = s->pages_cap ? s->pages_cap : 4;
        while (cap < need) cap *= 2;
        uint8_t **np = realloc(s->pages, (size_t)cap * sizeof *np);
        if (!np) return VQ_STATUS_NO_MEMORY;
        s->pages = np;
        s->pages_cap = cap;
    }
    while (s->n_pages < need) {
        uint8_t *pg = page_new(c, sd, s);
        if (!pg) return VQ_STATUS_NO_MEMORY;
        s->pages[s->n_pages++] = pg;
    }
    return VQ_STATUS_OK;
}

/* Phase A, second half: encodes unit `seg` of the stream's plan (stream_plan) behind the
 * coded end, staging rows in stage (page_tokens rows). Units of different streams, and the
 * page segments of one stream, touch disjoint bytes and may run on different threads. */
static vq_status stream_encode(const struct vq_cache *c, const struct vq_layer *L,
                               struct vq_side *sd, int h, const void *src, enum vq_dtype dt,
                               const struct plan *pl, int64_t seg, float *stage) {
    struct vq_stream *s = &sd->s[h];
    const int64_t PT = c->page_tokens, first = PT - s->n_coded % PT;
    int64_t i = 0, i1 = pl->n_enc;
    if (pl->n_seg > 1) { /* one page segment */
        i = seg == 0 ? 0 : first + (seg - 1) * PT;
        i1 = seg == 0 ? first : i + PT;
        if (i1 > pl->n_enc) i1 = pl->n_enc;
    }
    const int d = c->d;
    const size_t bb = vq_codec_block_bytes(sd->codec);
    while (i < i1) {
        const int64_t pos = s->n_coded + i;
        const int64_t in_page = pos % PT;
        int64_t rows = PT - in_page;
        if (rows > i1 - i) rows = i1 - i;
        for (int64_t r = 0; r < rows; r++) virt_row(c, sd, h, src, dt, i + r, stage + r * d);
        if ((sd->use_sinks || sd->use_ot) && sd->codec->p.role == VQ_ROLE_KEY)
            replace_sinks(L, sd->bt, d, pos, rows, stage);
        if (sd->n_oc > 0)
            VQ_RETURN_IF_ERR(oc_split(c, sd, s, pos, rows, stage, page_at(c, s, pos), in_page));
        uint8_t *dst = page_at(c, s, pos) + (size_t)(in_page / sd->bt) * bb;
        VQ_RETURN_IF_ERR(vq_codec_encode(side_codec(sd, h), stage, rows, dst));
        i += rows;
    }
    return VQ_STATUS_OK;
}

/* The plan of stream j of a layer's append: keys of kv head j / 2 for even j, values for odd. */
static const struct plan *plan_of(const struct vq_cache *c, int j) {
    return j % 2 ? &c->vplan[j / 2] : &c->kplan[j / 2];
}

/* Phase A's encoding of every stream of layer L (plans made): the units of all streams,
 * spread over the threads when there are enough rows to pay for a parallel region. Returns
 * the first failing unit's status (in unit order), VQ_STATUS_OK if none failed. */
static vq_status layer_encode(struct vq_cache *c, struct vq_layer *L, const void *k, const void *v,
                              enum vq_dtype dt) {
    const int ns = 2 * c->n_kv;
    int64_t units = 0, rows = 0;
    for (int j = 0; j < ns; j++) {
        const struct plan *pl = plan_of(c, j);
        units += pl->n_seg;
        rows += pl->n_enc;
    }
    if (units == 0) return VQ_STATUS_OK;
    const int nt = c->n_threads > 1 && units > 1 && rows >= VQ_ENCODE_MT_ROWS ? c->n_threads : 1;
    vq_status st = VQ_STATUS_OK;
    int64_t bad = INT64_MAX; /* the first failing unit */
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
#endif
    for (int64_t u = 0; u < units; u++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        int j = 0;
        int64_t seg = u;
        for (; seg >= plan_of(c, j)->n_seg; j++) seg -= plan_of(c, j)->n_seg;
        const vq_status r = stream_encode(c, L, j % 2 ? &L->v : &L->k, j / 2, j % 2 ? v : k, dt,
                                          plan_of(c, j), seg,
                                          c->stage + (size_t)tid * c->stage_floats);
        vq_first_error(u, r, &bad, &st);
    }
    return st;
}

static void stream_rollback(struct vq_side *sd, int h, const struct plan *pl) {
    struct vq_stream *s = &sd->s[h];
    while (s->n_pages > pl->old_pages) {
        s->n_pages--;
        page_drop(sd, s, s->pages[s->n_pages]);
        s->pages[s->n_pages] = NULL;
    }
}

/* Phase B for one stream: window update and counters (cannot fail). */
static void stream_commit(struct vq_cache *c, struct vq_side *sd, int h, const void *src,
                          enum vq_dtype dt, int64_t n, const struct plan *pl) {
    struct vq_stream *s = &sd->s[h];
    const int d = c->d;
    s->n_coded += pl->n_enc;
    if (sd->mode == WIN_NONE) return;
    int64_t first_new; /* first new token that goes into the window */
    if (sd->mode == WIN_FLUSH) {
        if (pl->n_enc == 0) {
            first_new = 0;
        } else {
            first_new = pl->n_enc - s->win_n;
            s->win_n = 0;
            s->win_start = 0;
        }
    } else {
        int64_t drop = pl->n_enc < s->win_n ? pl->n_enc : s->win_n;
        s->win_start += (int)drop;
        s->win_n -= (int)drop;
        first_new = pl->n_enc - drop;
        if (s->win_start + s->win_n + (n - first_new) > sd->buf_rows) {
            memmove(s->win, s->win + (size_t)s->win_start * (size_t)d,
                    (size_t)s->win_n * (size_t)d * 2);
            s->win_start = 0;
        }
    }
    for (int64_t t = first_new; t < n; t++) {
        const int r = s->win_start + s->win_n;
        new_row_f16(c, sd, src, dt, h, t, s->win + (size_t)r * (size_t)d);
        s->win_n++;
    }
    VQ_ASSERT(s->win_n <= sd->win_cap && s->win_start + s->win_n <= sd->buf_rows);
}

/* Chooses the layer's sinks among the n new tokens (first append): the L->sink_cap tokens of
 * largest mean key norm, kept in ascending position order. Ties keep the earlier token. */
static int choose_sinks(const struct vq_cache *c, const struct vq_layer *L, const void *k,
                        enum vq_dtype dt, int64_t n, int64_t *pos) {
    const int want = (int)(L->sink_cap < n ? L->sink_cap : n);
    float best[VQ_MAX_SINKS];
    int nb = 0;
    float row[1024];
    for (int64_t t = 0; t < n; t++) {
        double norm = 0;
        for (int h = 0; h < c->n_kv; h++) {
            const uint8_t *p = (const uint8_t *)k +
                               (size_t)((t * c->n_kv + h) * c->d) * dtype_size(dt);
            to_f32(p, dt, row, c->d);
            double ss = 0;
            for (int i = 0; i < c->d; i++) ss += (double)row[i] * row[i];
            norm += sqrt(ss);
        }
        const float v = (float)(norm / c->n_kv);
        /* insertion into the descending list best[0..nb) */
        int at = nb;
        while (at > 0 && best[at - 1] < v) at--;
        if (at >= want) continue;
        int last = nb < want ? nb : want - 1;
        for (int j = last; j > at; j--) {
            best[j] = best[j - 1];
            pos[j] = pos[j - 1];
        }
        best[at] = v;
        pos[at] = t;
        if (nb < want) nb++;
    }
    /* ascending positions */
    for (int i = 1; i < nb; i++)
        for (int j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
            int64_t tp = pos[j];
            pos[j] = pos[j - 1];
            pos[j - 1] = tp;
        }
    return nb;
}

/* Mean over kv-heads of the L2 norms of the raw key rows of new token t. */
static double token_key_norm(const struct vq_cache *c, const void *k, enum vq_dtype dt, int64_t t) {
    float row[1024];
    double norm = 0;
    for (int h = 0; h < c->n_kv; h++) {
        const uint8_t *p = (const uint8_t *)k + (size_t)((t * c->n_kv + h) * c->d) * dtype_size(dt);
        to_f32(p, dt, row, c->d);
        double ss = 0;
        for (int i = 0; i < c->d; i++) ss += (double)row[i] * row[i];
        norm += sqrt(ss);
    }
    return norm / c->n_kv;
}

/* Outlier-token detection for an append of n >= 2 tokens: appends the positions (L->n_tokens
 * + t) of tokens whose key norm exceeds mean + k * std of the batch to L->ot_pos (growing it
 * and the fp16 row stores of the bypassing sides; rows are written by the commit) and sets
 * L->n_ot; the caller restores n_ot on failure. NO_MEMORY leaves n_ot as it was. */
static vq_status detect_outliers(struct vq_cache *c, struct vq_layer *L, const void *k,
                                 enum vq_dtype dt, int64_t n) {
    double *nr = malloc((size_t)n * sizeof *nr);
    if (!nr) return VQ_STATUS_NO_MEMORY;
    double mean = 0, var = 0;
    for (int64_t t = 0; t < n; t++) {
        nr[t] = token_key_norm(c, k, dt, t);
        mean += nr[t];
    }
    mean /= (double)n;
    for (int64_t t = 0; t < n; t++) var += (nr[t] - mean) * (nr[t] - mean);
    const double thr = mean + (double)c->ot_k * sqrt(var / (double)n);
    int64_t cnt = 0;
    for (int64_t t = 0; t < n; t++) cnt += nr[t] > thr;
    if (cnt == 0) {
        free(nr);
        return VQ_STATUS_OK;
    }
    const int64_t need = L->n_ot + cnt;
    if (need > L->ot_cap) {
        int64_t cap = L->ot_cap ? L->ot_cap : 16;
        while (cap < need) cap *= 2;
        int64_t *np = realloc(L->ot_pos, (size_t)cap * sizeof *np);
        if (!np) {
            free(nr);
            return VQ_STATUS_NO_MEMORY;
        }
        L->ot_pos = np;
        struct vq_side *sides[2] = {&L->k, &L->v};
        for (int j = 0; j < 2; j++) {
            if (!sides[j]->use_ot) continue;
            for (int h = 0; h < c->n_kv; h++) {
                uint16_t *nw = realloc(sides[j]->s[h].ot, (size_t)cap * (size_t)c->d * 2);
                if (!nw) {
                    free(nr);
                    return VQ_STATUS_NO_MEMORY;
                }
                sides[j]->s[h].ot = nw;
            }
        }
        L->ot_cap = cap;
    }
    for (int64_t t = 0; t < n; t++)
        if (nr[t] > thr) L->ot_pos[L->n_ot++] = L->n_tokens + t;
    free(nr);
    return VQ_STATUS_OK;
}

/* Moves the oldest page of s to the spare end of its page list while it lies wholly below
 * `upto` (coded tokens only). */
static void stream_evict(const struct vq_cache *c, struct vq_stream *s, int64_t upto) {
    while ((s->pg0 + 1) * c->page_tokens <= upto) {
        uint8_t *pg = s->pages[0];
        memmove(s->pages, s->pages + 1, (size_t)(s->n_pages - 1) * sizeof *s->pages);
        s->pages[s->n_pages - 1] = pg;
        s->pg0++;
    }
}

/* Windowed layer after an append (cannot fail): raises keep_from to kf (the lowest position
 * the queries of that append can see), frees the pages wholly below it and drops the outlier
 * tokens below it. */
static void layer_evict(struct vq_cache *c, struct vq_layer *L, int64_t kf) {
    if (kf <= L->keep_from) return;
    L->keep_from = kf;
    for (int h = 0; h < c->n_kv; h++) {
        struct vq_stream *sk = &L->k.s[h], *sv = &L->v.s[h];
        stream_evict(c, sk, kf < sk->n_coded ? kf : sk->n_coded);
        stream_evict(c, sv, kf < sv->n_coded ? kf : sv->n_coded);
    }
    const int64_t drop = ot_lower(L, kf);
    if (drop == 0) return;
    const size_t row = (size_t)c->d;
    memmove(L->ot_pos, L->ot_pos + drop, (size_t)(L->n_ot - drop) * sizeof *L->ot_pos);
    struct vq_side *sides[2] = {&L->k, &L->v};
    for (int j = 0; j < 2; j++)
        for (int h = 0; h < c->n_kv && sides[j]->use_ot; h++)
            memmove(sides[j]->s[h].ot, sides[j]->s[h].ot + (size_t)drop * row,
                    (size_t)(L->n_ot - drop) * row * 2);
    L->n_ot -= drop;
}

vq_status vq_cache_append(vq_cache *c, int layer, const void *k, const void *v, enum vq_dtype dtype,
                          int64_t n_tokens) {
    if (!c || layer < 0 || layer >= c->n_layers || n_tokens < 0) return VQ_STATUS_INVALID_ARG;
    if (dtype != VQ_DTYPE_F32 && dtype != VQ_DTYPE_F16 && dtype != VQ_DTYPE_BF16)
        return VQ_STATUS_INVALID_ARG;
    if (n_tokens == 0) return VQ_STATUS_OK;
    if (!k || !v) return VQ_STATUS_INVALID_ARG;
    struct vq_layer *L = &c->layers[layer];
    if (n_tokens > c->max_tokens - L->n_tokens) return VQ_STATUS_CAPACITY;
    const int first = L->n_tokens == 0 && L->sink_cap > 0;
    vq_status st = scan_input(c, L, k, dtype, n_tokens,
                              L->k.mode != WIN_NONE || L->k.use_sinks || L->k.use_ot);
    if (st == VQ_STATUS_OK)
        st = scan_input(c, L, v, dtype, n_tokens,
                        L->v.mode != WIN_NONE || L->v.use_sinks || L->v.use_ot);
    if (st != VQ_STATUS_OK) return st;
    /* Centering vectors come from the layer's first append; kept only if the append succeeds.
     * Centered rows are checked against the fp16 range instead of the raw ones. */
    const int set_k = L->k.mu && !L->k.mu_set, set_v = L->v.mu && !L->v.mu_set;
    if (set_k) compute_mu(c, &L->k, k, dtype, n_tokens);
    if (set_v) compute_mu(c, &L->v, v, dtype, n_tokens);
    const int set_ks = L->k.ks && !L->k.ks_set;
    if (set_ks) compute_ks(c, L, k, dtype, n_tokens);
    const int set_cw = L->k.hc && !L->k.cw_set && L->n_tokens + n_tokens >= L->k.bt;
    if (set_cw) VQ_RETURN_IF_ERR(compute_cw(c, L, k, dtype, n_tokens));
    st = scan_centered(c, &L->k, k, dtype, n_tokens);
    if (st == VQ_STATUS_OK) st = scan_centered(c, &L->v, v, dtype, n_tokens);
    if (st != VQ_STATUS_OK) return st;

    /* Sinks are chosen before encoding (key blocks need them); committed only on success. */
    const int old_n_sinks = L->n_sinks;
    int64_t old_pos[VQ_MAX_SINKS];
    memcpy(old_pos, L->sink_pos, sizeof old_pos);
    if (first) L->n_sinks = choose_sinks(c, L, k, dtype, n_tokens, L->sink_pos);
    /* Outlier tokens likewise (key blocks of KIVI exclude them); rows written by the commit. */
    const int64_t old_n_ot = L->n_ot;
    if (n_tokens >= 2 && (L->k.use_ot || L->v.use_ot)) {
        st = detect_outliers(c, L, k, dtype, n_tokens);
        if (st != VQ_STATUS_OK) {
            L->n_sinks = old_n_sinks;
            memcpy(L->sink_pos, old_pos, sizeof old_pos);
            return st;
        }
    }

    struct plan *kpl = c->kplan, *vpl = c->vplan;
    for (int h = 0; h < c->n_kv; h++) {
        kpl[h].n_enc = vpl[h].n_enc = 0;
        kpl[h].old_pages = L->k.s[h].n_pages;
        vpl[h].old_pages = L->v.s[h].n_pages;
        if (L->k.n_oc > 0) { /* pending outlier-channel state starts from the committed one */
            struct vq_stream *s = &L->k.s[h];
            L->oc_undo_n = -1; /* the undo copy is overwritten below */
            memcpy(s->oc_sum_new, s->oc_sum, (size_t)c->d * sizeof(double));
            memcpy(s->oc_ch_new, s->oc_ch, (size_t)L->k.n_oc * sizeof(uint16_t));
            s->oc_ready_new = s->oc_ready;
        }
    }
    for (int h = 0; h < c->n_kv && st == VQ_STATUS_OK; h++) {
        st = stream_plan(c, &L->k, h, n_tokens, &kpl[h]);
        if (st == VQ_STATUS_OK) st = stream_plan(c, &L->v, h, n_tokens, &vpl[h]);
    }
    if (st == VQ_STATUS_OK) st = layer_encode(c, L, k, v, dtype);
    if (st != VQ_STATUS_OK) {
        for (int h = 0; h < c->n_kv; h++) {
            stream_rollback(&L->k, h, &kpl[h]);
            stream_rollback(&L->v, h, &vpl[h]);
        }
        L->n_sinks = old_n_sinks;
        memcpy(L->sink_pos, old_pos, sizeof old_pos);
        L->n_ot = old_n_ot;
        return st;
    }
    if (set_k) L->k.mu_set = 1;
    if (set_v) L->v.mu_set = 1;
    if (set_ks) L->k.ks_set = 1;
    if (set_cw) L->k.cw_set = 1;
    /* phase B */
    if (first) {
        for (int h = 0; h < c->n_kv; h++)
            for (int i = 0; i < L->n_sinks; i++) {
                if (L->k.use_sinks)
                    new_row_f16(c, &L->k, k, dtype, h, L->sink_pos[i],
                                L->k.s[h].sink + (size_t)i * (size_t)c->d);
                if (L->v.use_sinks)
                    new_row_f16(c, &L->v, v, dtype, h, L->sink_pos[i],
                                L->v.s[h].sink + (size_t)i * (size_t)c->d);
            }
    }
    for (int64_t i = old_n_ot; i < L->n_ot; i++) {
        const int64_t t = L->ot_pos[i] - L->n_tokens;
        for (int h = 0; h < c->n_kv; h++) {
            if (L->k.use_ot)
                new_row_f16(c, &L->k, k, dtype, h, t, L->k.s[h].ot + (size_t)i * (size_t)c->d);
            if (L->v.use_ot)
                new_row_f16(c, &L->v, v, dtype, h, t, L->v.s[h].ot + (size_t)i * (size_t)c->d);
        }
    }
    if (L->k.n_oc > 0)
        for (int h = 0; h < c->n_kv; h++) {
            struct vq_stream *s = &L->k.s[h];
            double *ts = s->oc_sum;
            s->oc_sum = s->oc_sum_new;
            s->oc_sum_new = ts;
            uint16_t *tc = s->oc_ch;
            s->oc_ch = s->oc_ch_new;
            s->oc_ch_new = tc;
            s->oc_ready_prev = s->oc_ready;
            s->oc_ready = s->oc_ready_new;
            L->oc_undo_n = L->n_tokens;
        }
    for (int h = 0; h < c->n_kv; h++) {
        stream_commit(c, &L->k, h, k, dtype, n_tokens, &kpl[h]);
        stream_commit(c, &L->v, h, v, dtype, n_tokens, &vpl[h]);
    }
    /* stream sinks: fp16 rows of the positions < S that this append brings */
    for (int64_t t = L->n_tokens; t < L->ss_cap && t < L->n_tokens + n_tokens; t++)
        for (int h = 0; h < c->n_kv; h++) {
            uint16_t *kr = L->k.s[h].ss + (size_t)t * (size_t)c->d;
            uint16_t *vr = L->v.s[h].ss + (size_t)t * (size_t)c->d;
            new_row_f16(c, &L->k, k, dtype, h, t - L->n_tokens, kr);
            new_row_f16(c, &L->v, v, dtype, h, t - L->n_tokens, vr);
        }
    const int64_t n0 = L->n_tokens;
    L->n_tokens += n_tokens;
    if (L->win > 0) layer_evict(c, L, n0 - L->win + 1);
    return VQ_STATUS_OK;
}

int64_t vq_cache_n_tokens(const vq_cache *c, int layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return 0;
    return c->layers[layer].n_tokens;
}

int64_t vq_cache_n_stored(const vq_cache *c, int layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return 0;
    const struct vq_layer *L = &c->layers[layer];
    int64_t best = 0;
    const struct vq_stream *ss[2] = {&L->k.s[0], &L->v.s[0]};
    for (int j = 0; j < 2; j++) {
        const int64_t ev = ss[j]->pg0 * c->page_tokens; /* freed: [S, ev) */
        const int64_t held = L->n_tokens - ev + (L->ss_cap < ev ? L->ss_cap : ev);
        if (held > best) best = held;
    }
    return best;
}

/* ---- attention -------------------------------------------------------------------------- */

/* Positions a query at position p sees on layer L: [0, *sh) from the stream-sink rows and
 * [*lo, p + 1) from the streams (*lo >= *sh; no window: *sh = *lo = 0). */
static void visible(const struct vq_layer *L, int64_t p, int64_t *sh, int64_t *lo) {
    const int64_t ws = L->win > 0 && p - L->win + 1 > 0 ? p - L->win + 1 : 0;
    const int64_t s = L->ss_cap < p + 1 ? L->ss_cap : p + 1;
    *sh = s;
    *lo = ws > s ? ws : s;
}

/* Validates attend arguments: query positions inside the layer and, on windowed layers, not
 * reaching below keep_from (freed tokens). */
static vq_status attend_check(const vq_cache *c, int layer, const float *q, int n_q_heads,
                              int64_t n_q, const int64_t *q_pos, float scale, const float *out) {
    if (!c || layer < 0 || layer >= c->n_layers || n_q < 0 || n_q_heads < 1 ||
        n_q_heads % c->n_kv != 0 || !isfinite(scale))
        return VQ_STATUS_INVALID_ARG;
    if (n_q == 0) return VQ_STATUS_OK;
    if (!q || !out) return VQ_STATUS_INVALID_ARG;
    const struct vq_layer *L = &c->layers[layer];
    const int64_t nt = L->n_tokens;
    if (!q_pos && n_q > nt) return VQ_STATUS_INVALID_ARG;
    for (int64_t i = 0; i < n_q; i++) {
        const int64_t p = q_pos ? q_pos[i] : nt - n_q + i;
        if (p < 0 || p >= nt) return VQ_STATUS_INVALID_ARG;
        if (L->win > 0 && L->keep_from > 0 && p - L->win + 1 < L->keep_from)
            return VQ_STATUS_INVALID_ARG;
    }
    return VQ_STATUS_OK;
}

static int64_t query_pos(const vq_cache *c, int layer, int64_t n_q, const int64_t *q_pos,
                         int64_t i) {
    return q_pos ? q_pos[i] : c->layers[layer].n_tokens - n_q + i;
}

/* Scores fp16 window rows [r0, r0 + n) of stream s into sc. */
static void window_score(const vq_cache *c, const struct vq_stream *s, const void *qs16, int64_t r0,
                         int64_t n, float *sc) {
    vq_codec_score(c->f16, qs16, s->win + (size_t)(s->win_start + r0) * (size_t)c->d, n, sc);
}

/* Accumulates fp16 window rows [r0, r0 + n) of stream s with weights w into acc. */
static void window_acc(const vq_cache *c, const struct vq_stream *s, int64_t r0, int64_t n,
                       const float *w, float *acc) {
    vq_codec_accumulate(c->f16, s->win + (size_t)(s->win_start + r0) * (size_t)c->d, n, w, acc);
}

/* One slot of a batch: a (query, query head) pair whose head maps to the batch's kv head,
 * restricted to the stream-sink rows [0, sh) and the tokens [lo, hi) (sh <= lo <= hi <=
 * position + 1; sh > 0 or lo < hi). */
struct attend_slot {
    const float *q; /* (head_dim) query */
    float *out;     /* (head_dim) output: softmax over the slot's tokens applied to V */
    int64_t sh, lo, hi;
    float *stats; /* if not NULL: receives {max scaled score, sum of exp} */
};

/* In-place scaled softmax over sc[0, sh) and sc[lo, hi) together (each part with c->softmax,
 * then both weighted by their share of the total); *m / *s: max scaled score and sum of exp. */
static void softmax_ranges(const vq_cache *c, float *sc, int64_t sh, int64_t lo, int64_t hi,
                           float scale, float *m, float *s) {
    if (sh == 0) {
        c->softmax(sc + lo, hi - lo, scale, -INFINITY, m, s);
        return;
    }
    /* the stream sinks first; the range then takes the larger max, and the sinks' few
     * weights are brought to it */
    float m1, s1, m2 = -INFINITY, s2 = 0.0f;
    c->softmax(sc, sh, scale, -INFINITY, &m1, &s1);
    if (hi > lo) c->softmax(sc + lo, hi - lo, scale, m1, &m2, &s2);
    const float mx = m1 > m2 ? m1 : m2;
    if (mx > m1) {
        const float f1 = expf(m1 - mx);
        for (int64_t t = 0; t < sh; t++) sc[t] *= f1;
        s1 *= f1;
    }
    *m = mx;
    *s = s1 + s2;
}

/* Attention of ns (<= c->n_slots) slots that share kv head g:
 * out = softmax(scale * K q) V over each slot's tokens. Pages are visited once for the whole
 * batch, each scored / accumulated for every slot that sees part of it; a slot's range starts
 * at the block holding lo (scores and weights before lo are ignored / zeroed). */
static void attend_batch(const vq_cache *c, const struct vq_layer *L, int g, int ns,
                         const struct attend_slot *sl, float scale, uint8_t *slab) {
    const int d = c->d;
    const int64_t PT = c->page_tokens;
    float *sc[VQ_SLOT_BATCH], *acc[VQ_SLOT_BATCH], *acc16[VQ_SLOT_BATCH];
    void *qs[VQ_SLOT_BATCH], *qs16[VQ_SLOT_BATCH];
    const float *kq[VQ_SLOT_BATCH]; /* the query the keys are scored with */
    int64_t kb[VQ_SLOT_BATCH], kend[VQ_SLOT_BATCH], vb[VQ_SLOT_BATCH], vend[VQ_SLOT_BATCH];
    float inv[VQ_SLOT_BATCH]; /* 1 / the softmax sum of each slot */
    for (int j = 0; j < ns; j++) {
        uint8_t *hs = slab + (size_t)j * c->slot_bytes;
        sc[j] = (float *)(void *)(hs + c->off_scores);
        qs[j] = hs + c->off_qs;
        qs16[j] = hs + c->off_qs16;
        acc[j] = (float *)(void *)(hs + c->off_acc);
        acc16[j] = (float *)(void *)(hs + c->off_acc16);
    }

    /* keys: codec pages, sinks, window */
    const struct vq_side *ks = &L->k;
    const struct vq_stream *kst = &ks->s[g];
    const vq_codec *kcd = side_codec(ks, g);
    const size_t kbb = vq_codec_block_bytes(kcd);
    int64_t kmin = INT64_MAX, kmax = 0;
    for (int j = 0; j < ns; j++) {
        const int64_t vis = kst->n_coded < sl[j].hi ? kst->n_coded : sl[j].hi;
        kb[j] = sl[j].lo / ks->bt * ks->bt;
        kend[j] = vis > sl[j].lo ? round_up(vis, ks->bt) : kb[j]; /* extra scores ignored */
        if (kend[j] > kmax) kmax = kend[j];
        if (kend[j] > kb[j] && kb[j] < kmin) kmin = kb[j];
        kq[j] = sl[j].q;
        if (ks->ks) { /* key scales: the query times s scores the stored k / s */
            float *qk = (float *)(void *)(slab + (size_t)j * c->slot_bytes + c->off_qk);
            const float *sf = ks->ks_f + (size_t)g * (size_t)d;
            for (int i = 0; i < d; i++) qk[i] = sl[j].q[i] * sf[i];
            kq[j] = qk;
        }
        vq_codec_prepare_query(c->f16, kq[j], qs16[j]);
        if (kend[j] > kb[j]) vq_codec_prepare_query(kcd, kq[j], qs[j]);
    }
    { /* the first value page, read after all the keys */
        const struct vq_stream *v0 = &L->v.s[g];
        if (sl[0].lo < v0->n_coded)
            pf_page(c, v0, sl[0].lo, vq_codec_block_bytes(L->v.codec), L->v.bt);
    }
    for (int64_t p0 = kmin / PT * PT, p1; p0 < kmax; p0 = p1) {
        p1 = run_end(c, ks, kst, p0, kmax);
        if (p1 < kmax) pf_page(c, kst, p1, kbb, ks->bt);
        for (int j = 0; j < ns;) {
            const int64_t a = p0 > kb[j] ? p0 : kb[j], b = p1 < kend[j] ? p1 : kend[j];
            if (a >= b) {
                j++;
                continue;
            }
            /* slots j .. j + m - 1 with the same range here (GQA heads of one query) are scored
             * in one pass where the codec can (vq_codec_score_multi: the same bits) */
            int m = 1;
            const void *qm[VQ_SLOT_BATCH] = {qs[j]};
            float *sm[VQ_SLOT_BATCH] = {sc[j] + a};
            while (j + m < ns && (p0 > kb[j + m] ? p0 : kb[j + m]) == a &&
                   (p1 < kend[j + m] ? p1 : kend[j + m]) == b) {
                qm[m] = qs[j + m];
                sm[m] = sc[j + m] + a;
                m++;
            }
            const uint8_t *codes = page_at(c, kst, p0) + (size_t)((a - p0) / ks->bt) * kbb;
            vq_codec_score_multi(kcd, qm, m, codes, b - a, sm);
            if (ks->n_oc > 0)
                for (int i = 0; i < m; i++) oc_score(c, ks, kst, kq[j + i], a, b - a, sm[i]);
            j += m;
        }
    }
    for (int j = 0; j < ns; j++) {
        const int64_t lo = sl[j].lo, hi = sl[j].hi;
        if (ks->use_sinks)
            for (int i = 0; i < L->n_sinks; i++) {
                const int64_t sp = L->sink_pos[i];
                if (sp >= lo && sp < hi && sp < kst->n_coded)
                    vq_codec_score(c->f16, qs16[j], kst->sink + (size_t)i * (size_t)d, 1,
                                   sc[j] + sp);
            }
        if (ks->use_ot) { /* outlier tokens: fp16 key instead of the codec score */
            const int64_t e = hi < kst->n_coded ? hi : kst->n_coded;
            for (int64_t i = ot_lower(L, lo); i < L->n_ot && L->ot_pos[i] < e; i++)
                vq_codec_score(c->f16, qs16[j], kst->ot + (size_t)i * (size_t)d, 1,
                               sc[j] + L->ot_pos[i]);
        }
        const int64_t w0 = lo > kst->n_coded ? lo : kst->n_coded;
        if (hi > w0) window_score(c, kst, qs16[j], w0 - kst->n_coded, hi - w0, sc[j] + w0);
        if (sl[j].sh > 0) /* stream sinks */
            vq_codec_score(c->f16, qs16[j], kst->ss, sl[j].sh, sc[j]);
        /* softmax with max subtraction; the weights stay unnormalized, the output is scaled by
         * 1 / sum at the end */
        float m, sum;
        softmax_ranges(c, sc[j], sl[j].sh, lo, hi, scale, &m, &sum);
        inv[j] = 1.0f / sum;
        if (sl[j].stats) {
            sl[j].stats[0] = m;
            sl[j].stats[1] = sum;
        }
    }

    /* values: stream sinks, codec pages (+ sinks from fp16), window */
    const struct vq_side *vs = &L->v;
    const struct vq_stream *vst = &vs->s[g];
    const size_t vbb = vq_codec_block_bytes(vs->codec);
    int64_t vmin = INT64_MAX, vmax = 0;
    for (int j = 0; j < ns; j++) {
        const int64_t lo = sl[j].lo, hi = sl[j].hi;
        const int64_t vis = vst->n_coded < hi ? vst->n_coded : hi;
        vb[j] = lo / vs->bt * vs->bt;
        vend[j] = vis > lo ? round_up(vis, vs->bt) : vb[j];
        if (vend[j] > vmax) vmax = vend[j];
        if (vend[j] > vb[j] && vb[j] < vmin) vmin = vb[j];
        memset(acc16[j], 0, (size_t)d * sizeof(float));
        if (sl[j].sh > 0) vq_codec_accumulate(c->f16, vst->ss, sl[j].sh, sc[j], acc16[j]);
        if (vend[j] == vb[j]) continue;
        for (int64_t t = vb[j]; t < lo; t++) sc[j][t] = 0.0f; /* after the sink rows used them */
        for (int64_t t = hi; t < vend[j]; t++) sc[j][t] = 0.0f;
        if (vs->use_sinks)
            for (int i = 0; i < L->n_sinks; i++) {
                const int64_t sp = L->sink_pos[i];
                if (sp < lo || sp >= vis) continue;
                vq_codec_accumulate(c->f16, vst->sink + (size_t)i * (size_t)d, 1, sc[j] + sp,
                                    acc16[j]);
                sc[j][sp] = 0.0f;
            }
        if (vs->use_ot) /* outlier tokens: fp16 value, codec weight 0 */
            for (int64_t i = ot_lower(L, lo); i < L->n_ot && L->ot_pos[i] < vis; i++) {
                const int64_t sp = L->ot_pos[i];
                vq_codec_accumulate(c->f16, vst->ot + (size_t)i * (size_t)d, 1, sc[j] + sp,
                                    acc16[j]);
                sc[j][sp] = 0.0f;
            }
        memset(acc[j], 0, vq_codec_acc_floats(vs->codec) * sizeof(float));
    }
    for (int64_t p0 = vmin / PT * PT, p1; p0 < vmax; p0 = p1) {
        p1 = run_end(c, vs, vst, p0, vmax);
        if (p1 < vmax) pf_page(c, vst, p1, vbb, vs->bt);
        for (int j = 0; j < ns;) {
            const int64_t a = p0 > vb[j] ? p0 : vb[j], b = p1 < vend[j] ? p1 : vend[j];
            if (a >= b) {
                j++;
                continue;
            }
            int m = 1; /* slots with the same range here: one pass (same bits) */
            const float *wm[VQ_SLOT_BATCH] = {sc[j] + a};
            float *am[VQ_SLOT_BATCH] = {acc[j]};
            while (j + m < ns && (p0 > vb[j + m] ? p0 : vb[j + m]) == a &&
                   (p1 < vend[j + m] ? p1 : vend[j + m]) == b) {
                wm[m] = sc[j + m] + a;
                am[m] = acc[j + m];
                m++;
            }
            const uint8_t *codes = page_at(c, vst, p0) + (size_t)((a - p0) / vs->bt) * vbb;
            vq_codec_accumulate_multi(vs->codec, codes, b - a, wm, m, am);
            j += m;
        }
    }
    for (int j = 0; j < ns; j++) {
        const int64_t lo = sl[j].lo, hi = sl[j].hi;
        float *o = sl[j].out;
        if (vend[j] > vb[j]) vq_codec_finish(vs->codec, acc[j], o);
        else memset(o, 0, (size_t)d * sizeof(float));
        const int64_t w0 = lo > vst->n_coded ? lo : vst->n_coded;
        if (hi > w0) window_acc(c, vst, w0 - vst->n_coded, hi - w0, sc[j] + w0, acc16[j]);
        if (vs->mu) { /* centered values: the weights of a slot sum to 1 (split chunks too) */
            float mu[1024];
            vq_fp16_to_fp32_row(vs->mu + (size_t)g * (size_t)d, mu, d);
            for (int i = 0; i < d; i++) o[i] = (o[i] + acc16[j][i]) * inv[j] + mu[i];
        } else {
            for (int i = 0; i < d; i++) o[i] = (o[i] + acc16[j][i]) * inv[j];
        }
    }
}

/* ---- fp16 layers: llama.cpp's arithmetic ---------------------------------------------- */

/* fp16 rows of stream s from position t0 on, and in *cnt how many of them (up to nv - t0) are
 * contiguous: the window buffer when nothing is coded (f16_window layers), else a page. */
static const uint16_t *f16_rows(const vq_cache *c, const struct vq_stream *s, int64_t t0,
                                int64_t nv, int64_t *cnt) {
    if (s->n_coded == 0 && s->win) {
        *cnt = nv - t0;
        return s->win + (size_t)(s->win_start + t0) * (size_t)c->d;
    }
    const int64_t PT = c->page_tokens;
    *cnt = nv - t0 < PT - t0 % PT ? nv - t0 : PT - t0 % PT;
    return (const uint16_t *)(const void *)page_at(c, s, t0) + (t0 % PT) * c->d;
}

/* 1 if every row of layer L is in the fp16 windows (f16_window and nothing coded yet). */
static int layer_all_window(const vq_cache *c, const struct vq_layer *L) {
    if (!L->f16_window) return 0;
    for (int h = 0; h < c->n_kv; h++)
        if (L->k.s[h].n_coded || L->v.s[h].n_coded) return 0;
    return 1;
}

/* attend_f16's run of tile queries j .. end - 1 that go in one scores / V^T P call for the
 * page [t0, t1): when query j sees the whole page, the next ones that see it too at the same
 * score-row offset join, as long as their rows are contiguous (rows: a tile item holds all
 * heads of its group), so that each key and value is converted once for all of them; every
 * score and lane chain is the same arithmetic. Returns end (> j). */
static int page_run(int j, int nb, int rows, int64_t t0, int64_t t1, const int64_t *lo,
                    const int64_t *nv, const int64_t *a_end, const int64_t *b0) {
    int e = j + 1;
    if (rows && lo[j] <= t0 && nv[j] >= t1)
        while (e < nb && lo[e] <= t0 && nv[e] >= t1 && a_end[e] - b0[e] == a_end[j] - b0[j]) e++;
    return e;
}

/* Attention of n_q queries on a layer whose K and V are plain fp16 rows (L->f16_exact, or
 * f16_window with every row still in the windows), in
 * llama.cpp's operation order (non-flash CPU path, ggml_attn.h): q rounded to fp16; scores by
 * ggml's F16 product, times scale; softmax with ggml_v_expf and a double sum over 16-wide
 * chunks counted from position 0, times (float)(1 / sum); probabilities rounded to fp16;
 * V^T P with lane t mod S for token t. b1 (n_q == 1) selects the single-query vec_dot_f16
 * order, else the tinyBLAS order of the batched kernels. Work items are (tile of up to
 * gg_tile / chunk consecutive queries (1 in decode), kv head, chunk of up to gg_heads query
 * heads), each with its own thread's slab; a tile reads every K / V page once for all its
 * queries.
 * Windows: the score row holds only the 16-chunks that contain visible positions (stream
 * sinks [0, sh) as segment A = chunks [0, a_end), the window [lo, p] as segment B = chunks
 * [b0, np)), masked positions inside them are -inf. Chunks left out are all -inf in a full
 * buffer: exp gives 0 and their chunk sums add exactly 0.0 to the double sum, and masked
 * tokens add fma(v, 0, acc) = acc to V^T P, so the result equals the full masked buffer's,
 * i.e. llama.cpp with a position-ordered KV buffer (swa_full = true). */
static void attend_f16(const vq_cache *c, int layer, const float *q, int n_q_heads, int64_t n_q,
                       const int64_t *q_pos, float scale, float *out) {
    const struct vq_layer *L = &c->layers[layer];
    const struct vq_ggml_attn_kernels *gk = c->gk;
    const int d = c->d, nkv = c->n_kv, grp = n_q_heads / nkv, b1 = n_q == 1;
    int gh = grp < c->gg_heads ? grp : c->gg_heads;
    /* Few queries (decode): smaller head chunks until every thread has about two items, or
     * the threads would wait on one another (3 kv heads on 2 threads: 2 + 1 items). Each head's
     * arithmetic is the same whatever its chunk. */
    while (gh > 1 && n_q * nkv * ((grp + gh - 1) / gh) < 2 * (int64_t)c->n_threads) gh--;
    const int n_ch = (grp + gh - 1) / gh;
    /* Batched queries: qb consecutive queries per item, so that each K / V page is read from
     * memory once for all of them (its rows then come from the core's caches) instead of once
     * per query; every score, softmax and lane chain is the same arithmetic on the same values
     * whatever the tile, so the bits do not change. */
    int qb = b1 ? 1 : c->gg_tile / gh;
    if (qb < 1) qb = 1;
    while (qb > 1 && (n_q + qb - 1) / qb * nkv * n_ch < 2 * (int64_t)c->n_threads) qb--;
    const int64_t nqb = (n_q + qb - 1) / qb, items = nqb * nkv * n_ch;
    const size_t ws = c->gg_ws, S = b1 ? 64 : 16;
    const int nt = items < c->n_threads ? (int)items : c->n_threads;
    (void)nt;
    /* Causal rows: a later tile sees more positions, so the items go out one by one, the
     * latest (largest) tiles first; every item has its own slab and output rows, so the
     * order does not change the bits. */
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
    for (int64_t ir = 0; ir < items; ir++) {
        const int64_t it = items - 1 - ir;
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *w = (float *)(void *)(c->slabs + (size_t)tid * c->slab_bytes);
        const int64_t i0 = it / (nkv * n_ch) * qb;
        const int nb = n_q - i0 < qb ? (int)(n_q - i0) : qb;
        const int g = (int)(it / n_ch % nkv), h0 = g * grp + (int)(it % n_ch) * gh;
        const int ng = g * grp + grp - h0 < gh ? g * grp + grp - h0 : gh;
        const struct vq_stream *K = &L->k.s[g], *V = &L->v.s[g];
        /* query j of the tile: score rows w + j gh ws, query rows q16 + j gh d, lane blocks
         * acc + j gh S d; the row index of position t: t in segment A (t < a_end), else
         * a_end + t - b0 (stream sinks [0, sh) as segment A, the window [lo, pos] as B) */
        float *q16 = w + (size_t)qb * (size_t)gh * ws;
        float *acc = q16 + (size_t)qb * (size_t)gh * (size_t)d;
        int64_t nv[VQ_F16_TILE_MAX], sh[VQ_F16_TILE_MAX], lo[VQ_F16_TILE_MAX];
        int64_t a_end[VQ_F16_TILE_MAX], b0[VQ_F16_TILE_MAX];
        int64_t tmin = INT64_MAX, tmax = 0;
        for (int j = 0; j < nb; j++) {
            const int64_t pos = query_pos(c, layer, n_q, q_pos, i0 + j);
            nv[j] = pos + 1;
            visible(L, pos, &sh[j], &lo[j]);
            a_end[j] = round_up(sh[j], 16), b0[j] = lo[j] / 16 * 16;
            if (a_end[j] > b0[j]) a_end[j] = b0[j] = 0; /* the segments touch: one row from 0 */
            if (lo[j] < tmin) tmin = lo[j];
            if (nv[j] > tmax) tmax = nv[j];
            float *qj = q16 + (size_t)j * (size_t)gh * (size_t)d;
            memcpy(qj, q + (size_t)((i0 + j) * n_q_heads + h0) * (size_t)d,
                   sizeof(float) * (size_t)ng * (size_t)d);
            gk->scale_round_f16(qj, (int64_t)ng * d, 1.0f);
            if (sh[j] > 0)
                gk->scores_f16(qj, ng, K->ss, sh[j], d, b1, scale, w + (size_t)j * gh * ws, ws);
        }
        for (int64_t t0 = tmin; t0 < tmax;) { /* each page once for the whole tile */
            int64_t cnt;
            const uint16_t *kp = f16_rows(c, K, t0, tmax, &cnt);
            for (int j = 0, je; j < nb; j = je) {
                const int64_t ta = t0 > lo[j] ? t0 : lo[j];
                const int64_t tb = t0 + cnt < nv[j] ? t0 + cnt : nv[j];
                je = page_run(j, nb, ng == gh, t0, t0 + cnt, lo, nv, a_end, b0);
                if (ta < tb)
                    gk->scores_f16(q16 + (size_t)j * (size_t)gh * (size_t)d, ng * (je - j),
                                   kp + (ta - t0) * d, tb - ta, d, b1, scale,
                                   w + (size_t)j * gh * ws + (a_end[j] + ta - b0[j]), ws);
            }
            t0 += cnt;
        }
        for (int j = 0; j < nb; j++) {
            const int64_t np = round_up(nv[j], 16), len = a_end[j] + np - b0[j];
            const int64_t ilo = a_end[j] + lo[j] - b0[j], inv_ = a_end[j] + nv[j] - b0[j];
            for (int h = 0; h < ng; h++) {
                float *wh = w + (size_t)(j * gh + h) * ws, mx = -INFINITY;
                if (sh[j] > 0) mx = c->dk->max(wh, sh[j]); /* the max is exact in any order */
                if (inv_ > ilo) {
                    const float m2 = c->dk->max(wh + ilo, inv_ - ilo);
                    mx = m2 > mx ? m2 : mx;
                }
                for (int64_t t = sh[j]; t < ilo; t++) wh[t] = -INFINITY;
                for (int64_t t = inv_; t < len; t++) wh[t] = -INFINITY;
                const float inv = (float)(1.0 / gk->softmax_exp(wh, len, mx));
                gk->scale_round_f16(wh, inv_, inv);
            }
            float *aj = acc + (size_t)j * (size_t)gh * S * (size_t)d;
            memset(aj, 0, sizeof(float) * (size_t)ng * S * (size_t)d);
            if (sh[j] > 0)
                gk->pv_f16(aj, ng, V->ss, w + (size_t)j * gh * ws, ws, 0, sh[j], d, b1, 0, (int)S);
        }
        for (int64_t t0 = tmin; t0 < tmax;) {
            int64_t cnt;
            const uint16_t *vp = f16_rows(c, V, t0, tmax, &cnt);
            for (int j = 0, je; j < nb; j = je) {
                const int64_t ta = t0 > lo[j] ? t0 : lo[j];
                const int64_t tb = t0 + cnt < nv[j] ? t0 + cnt : nv[j];
                je = page_run(j, nb, ng == gh, t0, t0 + cnt, lo, nv, a_end, b0);
                if (ta < tb)
                    gk->pv_f16(acc + (size_t)j * (size_t)gh * S * (size_t)d, ng * (je - j),
                               vp + (ta - t0) * d,
                               w + (size_t)j * gh * ws + (a_end[j] + ta - b0[j]), ws, ta, tb - ta,
                               d, b1, 0, (int)S);
            }
            t0 += cnt;
        }
        for (int j = 0; j < nb; j++)
            for (int h = 0; h < ng; h++)
                vq_ggml_pv_finish(acc + (size_t)(j * gh + h) * S * (size_t)d, d, b1,
                                  out + (size_t)((i0 + j) * n_q_heads + h0 + h) * (size_t)d);
    }
}

/* Most query-head floats (n_q_heads * head_dim) the threads of attend_f16_mt round on their
 * stacks. */
#define VQ_F16_MT_QMAX 8192

/* attend_f16_mt's storage of query head h (kv head g = h / grp, gps groups per slab): its
 * score row (ws floats) and its 64 lane blocks (64 * d floats); a group's heads are
 * consecutive rows, so head g * grp's pointers serve the whole group. */
static float *mt_slab_row(const vq_cache *c, int h, int grp, int gps, int *r) {
    const int g = h / grp;
    *r = (g % gps) * grp + h % grp;
    return (float *)(void *)(c->slabs + (size_t)(g / gps) * c->slab_bytes);
}
static float *mt_scores(const vq_cache *c, int h, int grp, int gps) {
    int r;
    float *sl = mt_slab_row(c, h, grp, gps, &r);
    return sl + (size_t)r * c->gg_ws;
}
static float *mt_lanes(const vq_cache *c, int h, int grp, int gps) {
    int r;
    float *sl = mt_slab_row(c, h, grp, gps, &r);
    return sl + (size_t)c->gg_heads * (c->gg_ws + (size_t)c->d) + (size_t)r * 64 * (size_t)c->d;
}

/* Thread tid's share [u0, u1) of n units split evenly over T threads. */
static void mt_share(int64_t n, int tid, int T, int64_t *u0, int64_t *u1) {
    *u0 = n * tid / T;
    *u1 = n * (tid + 1) / T;
}

/* The run of units from u (u < u1) that lie in one kv head of per units each: kv head *g,
 * units [*lo, *hi) counted within it. The next run starts at u + *hi - *lo. */
static void mt_run(int64_t u, int64_t u1, int64_t per, int *g, int64_t *lo, int64_t *hi) {
    *g = (int)(u / per);
    *lo = u - *g * per;
    *hi = (u1 < (*g + 1) * per ? u1 : (*g + 1) * per) - *g * per;
}

/* The thread of attend_f16_mt whose share of the n_kv * 64 (kv head, lane slot) units holds
 * query head h's middle slot: a kv head that lies on one thread has all its heads there. */
static int mt_head_owner(int h, int grp, int nkv, int T) {
    const int64_t u = (int64_t)(h / grp) * 64 + (64 * (int64_t)(h % grp) + 32) / grp;
    int t = 0;
    while (t + 1 < T && (int64_t)nkv * 64 * (t + 1) / T <= u) t++;
    return t;
}

/* attend_f16 for one query (decode) on a layer without windows or stream sinks, by all
 * n_threads threads together, in phases with a barrier after each: (A) the kv heads' positions,
 * in 64-position blocks (kv head major), are split evenly over the threads, and each thread
 * scores its blocks for the kv head's query heads; (B) the softmax of each query head, by the
 * thread that owns the head (below); (C) the (kv head, lane slot) pairs, kv head major, are
 * split evenly, and each thread accumulates V^T P into its slots (each slot a separate chain,
 * pv_f16); (D) the owner of each query head reduces its lanes. With 3 kv heads on 2 threads,
 * thread 0 holds kv head 0 and half of kv head 1, so only kv head 1's scores and lanes pass
 * between the cores' caches; a head's owner is the thread of its middle slot in (C), so a kv
 * head on one thread has its softmax and reduction there too. Each step is attend_f16's
 * arithmetic on the same values, so the result is the same bits; the work is split evenly
 * whatever the number of heads (attend_f16 splits whole heads: 3 kv heads on 2 threads leave
 * one waiting). Kv head g's grp score rows and lane blocks live in slab g / gps at rows
 * (g % gps) * grp (gps = gg_heads / grp, the caller checks n_kv <= n_threads * gps). */
static void attend_f16_mt(const vq_cache *c, int layer, const float *q, int n_q_heads,
                          const int64_t *q_pos, float scale, float *out) {
    const struct vq_layer *L = &c->layers[layer];
    const struct vq_ggml_attn_kernels *gk = c->gk;
    const int d = c->d, nkv = c->n_kv, grp = n_q_heads / nkv, gps = c->gg_heads / grp;
    const size_t ws = c->gg_ws, S = 64;
    const int64_t pos = query_pos(c, layer, 1, q_pos, 0), nv = pos + 1, np = round_up(nv, 16);
    const int64_t nblk = (nv + 63) / 64; /* 64-position blocks per kv head */
#ifdef _OPENMP
#pragma omp parallel num_threads(c->n_threads)
#endif
    {
        int tid = 0, T = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        float q16[VQ_F16_MT_QMAX];
        memcpy(q16, q, sizeof(float) * (size_t)n_q_heads * (size_t)d);
        gk->scale_round_f16(q16, (int64_t)n_q_heads * d, 1.0f);
        /* (A) scores of this thread's (kv head, block) units */
        int64_t u0, u1;
        mt_share((int64_t)nkv * nblk, tid, T, &u0, &u1);
        for (int64_t u = u0, b0, b1; u < u1; u += b1 - b0) {
            int g;
            mt_run(u, u1, nblk, &g, &b0, &b1);
            const int64_t a1 = b1 * 64 < nv ? b1 * 64 : nv;
            float *w = mt_scores(c, g * grp, grp, gps);
            for (int64_t t0 = b0 * 64; t0 < a1;) {
                int64_t cnt;
                const uint16_t *kp = f16_rows(c, &L->k.s[g], t0, a1, &cnt);
                gk->scores_f16(q16 + (size_t)g * (size_t)grp * (size_t)d, grp, kp, cnt, d, 1, scale,
                               w + t0, ws);
                t0 += cnt;
            }
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* (B) softmax of the heads this thread owns */
        for (int h = 0; h < n_q_heads; h++) {
            if (mt_head_owner(h, grp, nkv, T) != tid) continue;
            float *wh = mt_scores(c, h, grp, gps);
            const float mx = c->dk->max(wh, nv); /* exact in any order */
            for (int64_t t = nv; t < np; t++) wh[t] = -INFINITY;
            const float inv = (float)(1.0 / gk->softmax_exp(wh, np, mx));
            gk->scale_round_f16(wh, nv, inv);
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* (C) V^T P into this thread's (kv head, slot) units, lanes cleared first */
        mt_share((int64_t)nkv * (int64_t)S, tid, T, &u0, &u1);
        for (int64_t u = u0, r0, r1; u < u1; u += r1 - r0) {
            int g;
            mt_run(u, u1, (int64_t)S, &g, &r0, &r1);
            const int s0 = (int)r0, s1 = (int)r1;
            float *w = mt_scores(c, g * grp, grp, gps), *acc = mt_lanes(c, g * grp, grp, gps);
            for (int h = 0; h < grp; h++)
                memset(acc + ((size_t)h * S + (size_t)s0) * (size_t)d, 0,
                       sizeof(float) * (size_t)(s1 - s0) * (size_t)d);
            for (int64_t t0 = 0; t0 < nv;) {
                int64_t cnt;
                const uint16_t *vp = f16_rows(c, &L->v.s[g], t0, nv, &cnt);
                gk->pv_f16(acc, grp, vp, w + t0, ws, t0, cnt, d, 1, s0, s1);
                t0 += cnt;
            }
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* (D) the lane reduction of the heads this thread owns */
        for (int h = 0; h < n_q_heads; h++)
            if (mt_head_owner(h, grp, nkv, T) == tid)
                vq_ggml_pv_finish(mt_lanes(c, h, grp, gps), d, 1, out + (size_t)h * (size_t)d);
    }
}

/* Decodes positions [a, t1) of stream (side, head) into rows 0 .. t1 - a of x, fp32: coded
 * tokens with sink / outlier tokens from their fp16 copies, fp16 window rows, the stream-sink
 * rows for positions < S, key scales applied and centering undone; rows of freed positions are
 * zero. a is a multiple of the side's block tokens, a < t1 <= min(p + page_tokens, n_tokens)
 * for the page p that holds a; x has room for the rows up to the page's end (the codec decodes
 * whole blocks). */
static void stream_decode_range(const vq_cache *c, const struct vq_layer *L,
                                const struct vq_side *sd, int h, int64_t a, int64_t t1, float *x) {
    const struct vq_stream *s = &sd->s[h];
    const int d = c->d;
    const int64_t PT = c->page_tokens, p = a / PT * PT, ev = s->pg0 * PT;
    const int64_t nt = s->n_coded + s->win_n, ns = L->ss_cap < nt ? L->ss_cap : nt;
    const int64_t ce = t1 < s->n_coded ? t1 : s->n_coded; /* coded rows end at ce */
    if (a >= ev && a < ce) {
        const vq_codec *cd = side_codec(sd, h);
        int64_t e = round_up(ce, sd->bt);
        if (e > p + PT) e = p + PT;
        vq_codec_decode(
            cd, page_at(c, s, a) + (size_t)((a - p) / sd->bt) * vq_codec_block_bytes(cd), e - a, x);
        if (sd->n_oc > 0) oc_decode(c, sd, s, a, e - a, x);
        if (sd->use_ot)
            for (int64_t i = ot_lower(L, a); i < L->n_ot && L->ot_pos[i] < ce; i++)
                vq_fp16_to_fp32_row(s->ot + (size_t)i * (size_t)d, x + (L->ot_pos[i] - a) * d, d);
        if (sd->use_sinks)
            for (int i = 0; i < L->n_sinks; i++)
                if (L->sink_pos[i] >= a && L->sink_pos[i] < ce)
                    vq_fp16_to_fp32_row(s->sink + (size_t)i * (size_t)d,
                                        x + (L->sink_pos[i] - a) * d, d);
    }
    const int64_t fe = t1 < ev ? t1 : ev; /* freed rows: [max(a, ns), min(t1, ev)) */
    if (fe > (a > ns ? a : ns)) {
        const int64_t f0 = a > ns ? a : ns;
        memset(x + (f0 - a) * d, 0, (size_t)((fe - f0) * d) * sizeof(float));
    }
    for (int64_t t = a > s->n_coded ? a : s->n_coded; t < t1; t++)
        vq_fp16_to_fp32_row(s->win + (size_t)(s->win_start + t - s->n_coded) * (size_t)d,
                            x + (t - a) * d, d);
    if (a < ns)
        vq_fp16_to_fp32_row(s->ss + (size_t)a * (size_t)d, x, ((t1 < ns ? t1 : ns) - a) * d);
    if (!sd->ks && !sd->mu) return;
    float mu[1024];
    if (sd->mu) vq_fp16_to_fp32_row(sd->mu + (size_t)h * (size_t)d, mu, d);
    const float *sf = sd->ks ? sd->ks_f + (size_t)h * (size_t)d : NULL;
    for (int64_t t = a; t < t1; t++) {
        if (t >= ns && t < ev) continue; /* freed */
        float *r = x + (t - a) * d;
        if (sf)
            for (int i = 0; i < d; i++) r[i] *= sf[i];
        if (sd->mu)
            for (int i = 0; i < d; i++) r[i] += mu[i];
    }
}

/* Decodes stream (side, head) into x (n_tokens, head_dim) fp32, page by page as
 * stream_decode_range. */
static void stream_decode(const vq_cache *c, const struct vq_layer *L, const struct vq_side *sd,
                          int h, float *x) {
    const struct vq_stream *s = &sd->s[h];
    const int64_t PT = c->page_tokens, nt = s->n_coded + s->win_n;
    for (int64_t p = 0; p < nt; p += PT)
        stream_decode_range(c, L, sd, h, p, p + PT < nt ? p + PT : nt, x + p * c->d);
}

/* ---- decode-once attention (batched queries) ------------------------------------------- */

/* Slots sl[0, ns) for pairs k0 .. k0 + ns - 1 of kv head g, pairs ordered query-major
 * (pair k = query k / grp, query head g * grp + k % grp). */
static void fill_slots(const vq_cache *c, int layer, int g, int64_t k0, int ns, const float *q,
                       int n_q_heads, int64_t n_q, const int64_t *q_pos, float *out,
                       struct attend_slot *sl) {
    const struct vq_layer *L = &c->layers[layer];
    const int grp = n_q_heads / c->n_kv;
    for (int j = 0; j < ns; j++) {
        const int64_t k = k0 + j, i = k / grp;
        const int h = g * grp + (int)(k % grp);
        const size_t off = ((size_t)i * (size_t)n_q_heads + (size_t)h) * (size_t)c->d;
        sl[j].q = q + off;
        sl[j].out = out + off;
        sl[j].hi = query_pos(c, layer, n_q, q_pos, i) + 1;
        visible(L, sl[j].hi - 1, &sl[j].sh, &sl[j].lo);
        sl[j].stats = NULL;
    }
}

/* Visible-token hull of one page [p, p + page_tokens) for slots with stream sinks [0, shmax)
 * and tokens [lomin, himax): [*ta, *tb), empty when *ta >= *tb. */
static void page_hull(int64_t p, int64_t PT, int64_t shmax, int64_t lomin, int64_t himax,
                      int64_t *ta, int64_t *tb) {
    *ta = INT64_MAX;
    *tb = p;
    if (p < shmax) {
        *ta = p;
        *tb = shmax < p + PT ? shmax : p + PT;
    }
    if (lomin < p + PT && himax > p) {
        const int64_t a = lomin > p ? lomin : p;
        if (a < *ta) *ta = a;
        *tb = himax < p + PT ? himax : p + PT;
    }
}

/* One block of np (<= VQ_DENSE_PAIRS) slots of kv head g against one decoded page: kt holds
 * the keys of tokens [ta, tb) transposed (row stride page_tokens), v the values of tokens
 * [ta, ...) as rows. The block's scores are masked to each slot's visible tokens [0, sh) and
 * [lo, hi) (sh <= lo <= hi) and folded into its running max m[j], sum l[j] and unnormalized
 * output (online softmax; exp by ggml_v_expf, which gives 0 for the masked -inf). The outputs
 * are gathered from and scattered back to the slots' out rows. ws: the thread's scratch. */
static void dense_block(const vq_cache *c, int np, const struct attend_slot *sl, float scale,
                        const float *kt, const float *v, int64_t ta, int64_t tb, float *m, float *l,
                        float *ws) {
    const int d = c->d;
    const size_t lds = (size_t)round_up(c->page_tokens, 16), P = VQ_DENSE_PAIRS, D = (size_t)d;
    float *Q = ws, *A = Q + P * D, *S = A + P * D;
    int64_t sa = INT64_MAX, sb = 0; /* the block's own hull inside [ta, tb) */
    for (int j = 0; j < np; j++) {
        int64_t a, b;
        page_hull(ta / c->page_tokens * c->page_tokens, c->page_tokens, sl[j].sh,
                  sl[j].hi > sl[j].lo ? sl[j].lo : INT64_MAX, sl[j].hi, &a, &b);
        if (a < ta) a = ta;
        if (b > tb) b = tb;
        if (a >= b) continue;
        if (a < sa) sa = a;
        if (b > sb) sb = b;
    }
    if (sa >= sb) return;
    const int64_t n = sb - sa, n16 = round_up(n, 16);
    for (int j = 0; j < np; j++) memcpy(Q + (size_t)j * D, sl[j].q, D * sizeof(float));
    c->dk->scores(Q, np, d, kt + (sa - ta), (size_t)c->page_tokens, n, scale, S, lds);
    for (int j = 0; j < np; j++) {
        float *sj = S + (size_t)j * lds, *aj = A + (size_t)j * D;
        memcpy(aj, sl[j].out, D * sizeof(float));
        const int64_t m0 = sl[j].sh > sa ? sl[j].sh : sa, m1 = sl[j].lo < sb ? sl[j].lo : sb;
        for (int64_t t = m0; t < m1; t++) sj[t - sa] = -INFINITY;
        for (int64_t t = sl[j].hi > sa ? sl[j].hi : sa; t < sb; t++) sj[t - sa] = -INFINITY;
        for (int64_t t = n; t < n16; t++) sj[t] = -INFINITY;
        const float mx = c->dk->max(sj, n);
        if (mx == -INFINITY) { /* sees nothing here */
            memset(sj, 0, (size_t)n * sizeof(float));
            continue;
        }
        const float mn = m[j] > mx ? m[j] : mx;
        const double sum = c->gk->softmax_exp(sj, n16, mn);
        if (m[j] != -INFINITY && m[j] != mn) {
            const float al = vq_ggml_expf_ref(m[j] - mn);
            for (int i = 0; i < d; i++) aj[i] *= al;
            l[j] *= al;
        }
        l[j] += (float)sum;
        m[j] = mn;
    }
    c->dk->pv(A, np, d, S, lds, v + (sa - ta) * d, n);
    for (int j = 0; j < np; j++) memcpy(sl[j].out, A + (size_t)j * D, D * sizeof(float));
}

/* The smallest multiple of m that both sides' block tokens of layer L divide: chunk
 * boundaries at its multiples never cut a codec block (decode-once page chunks: m = 1; split
 * decode: m = 16). */
static int64_t block_lcm(const struct vq_layer *L, int64_t m) {
    int64_t al = m;
    while (al % L->k.bt || al % L->v.bt) al += m;
    return al;
}

/* Decode-once attention of n_q queries (batched: prefill, scoring). Pages are visited in
 * order; the visible part of each page of every kv head is decoded once (stream_decode_range:
 * exactly what vq_cache_read returns; keys transposed) into the shared page buffers, then
 * every block of up to VQ_DENSE_PAIRS (query, head) pairs that sees part of it scores it and
 * accumulates its values (dense_block), with the pairs' running max / sum kept across pages;
 * out = acc / sum. Queries are taken in super-blocks of at most VQ_DENSE_STATE pairs (the
 * state's size). One OpenMP region; the threads split the decode tasks (kv head, K or V, chunk
 * of the page) and then the blocks of each page. Equals vq_cache_attend_ref up to float
 * rounding. */
static void attend_dense_all(vq_cache *c, int layer, const float *q, int n_q_heads, int64_t n_q,
                             const int64_t *q_pos, float scale, float *out) {
    const struct vq_layer *L = &c->layers[layer];
    const int d = c->d, nkv = c->n_kv, grp = n_q_heads / nkv;
    const int64_t PT = c->page_tokens;
    const size_t D = (size_t)d, pg = (size_t)PT * D;
    float *KT = c->dshared, *VB = KT + (size_t)nkv * pg, *M = VB + (size_t)nkv * pg;
    float *Ls = M + VQ_DENSE_STATE;
    const int64_t qsb = VQ_DENSE_STATE / n_q_heads;
    /* Each page's decode is cut into nsplit chunks (whole blocks of both sides) when the kv
     * heads' 2 * nkv tasks are too few to keep the threads busy (Gemma 3: one kv head). */
    const int64_t al = block_lcm(L, 1); /* both divide page_tokens, so al does */
    int nsplit = 1;
    while (c->n_threads > 1 && 2 * nkv * nsplit < 4 * c->n_threads && PT / al >= 2 * nsplit)
        nsplit *= 2;
    for (int64_t i0 = 0; i0 < n_q; i0 += qsb) {
        const int64_t nq = n_q - i0 < qsb ? n_q - i0 : qsb, per_g = nq * grp;
        int64_t bs = per_g < VQ_DENSE_PAIRS ? per_g : VQ_DENSE_PAIRS;
        while (bs > 4 && nkv * ((per_g + bs - 1) / bs) < 2 * (int64_t)c->n_threads)
            bs = (bs + 1) / 2;
        const int64_t nb = (per_g + bs - 1) / bs, n_items = nkv * nb;
        int64_t shmax = 0, lomin = INT64_MAX, himax = 0;
        for (int64_t i = i0; i < i0 + nq; i++) {
            int64_t sh, lo;
            const int64_t pos = query_pos(c, layer, n_q, q_pos, i);
            visible(L, pos, &sh, &lo);
            if (sh > shmax) shmax = sh;
            if (lo <= pos && lo < lomin) lomin = lo;
            if (pos + 1 > himax) himax = pos + 1;
        }
        for (int64_t k = 0; k < nkv * per_g; k++) {
            M[k] = -INFINITY;
            Ls[k] = 0.0f;
        }
        memset(out + (size_t)(i0 * n_q_heads) * D, 0, (size_t)(nq * n_q_heads) * D * sizeof(float));
#ifdef _OPENMP
#pragma omp parallel num_threads(c->n_threads)
#endif
        {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            float *ws = c->dslabs + (size_t)tid * c->dslab_floats;
            for (int64_t p = 0; p < himax; p += PT) {
                int64_t ta, tb;
                page_hull(p, PT, shmax, lomin, himax, &ta, &tb);
                if (ta >= tb) continue;
                /* rows [pa, tb) are decoded (whole blocks from the one that holds ta), in
                 * chunks of cs */
                const int64_t pa = p + (ta - p) / al * al;
                const int64_t cs = round_up((tb - pa + nsplit - 1) / nsplit, al);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
                for (int task = 0; task < 2 * nkv * nsplit; task++) {
                    /* the keys' tasks (decode + transpose, the longer ones) first */
                    const int is_v = task >= nkv * nsplit, r = task % (nkv * nsplit);
                    const int g = r / nsplit;
                    const int64_t a = pa + (r % nsplit) * cs;
                    if (a >= tb) continue;
                    const int64_t b = a + cs < tb ? a + cs : tb;
                    if (is_v) {
                        stream_decode_range(c, L, &L->v, g, a, b,
                                            VB + (size_t)g * pg + (size_t)(a - p) * D);
                        continue;
                    }
                    float *X = ws + c->dslab_floats - pg; /* the slab's last page of rows */
                    stream_decode_range(c, L, &L->k, g, a, b, X);
                    float *kt = KT + (size_t)g * pg;
                    for (int64_t t0 = a > ta ? a : ta; t0 < b; t0 += 16) { /* 16-token tiles */
                        const int64_t t1 = t0 + 16 < b ? t0 + 16 : b;
                        for (int i = 0; i < d; i++)
                            for (int64_t t = t0; t < t1; t++)
                                kt[(size_t)i * (size_t)PT + (size_t)(t - ta)] = X[(t - a) * d + i];
                    }
                }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
                for (int64_t it = 0; it < n_items; it++) {
                    struct attend_slot sl[VQ_DENSE_PAIRS];
                    const int g = (int)(it / nb);
                    const int64_t k0 = (it % nb) * bs;
                    const int ns = (int)(per_g - k0 < bs ? per_g - k0 : bs);
                    fill_slots(c, layer, g, i0 * grp + k0, ns, q, n_q_heads, n_q, q_pos, out, sl);
                    const size_t st = (size_t)(g * per_g + k0);
                    dense_block(c, ns, sl, scale, KT + (size_t)g * pg,
                                VB + (size_t)g * pg + (size_t)(ta - p) * D, ta, tb, M + st, Ls + st,
                                ws);
                }
            }
        }
        for (int64_t i = i0; i < i0 + nq; i++)
            for (int g = 0; g < nkv; g++)
                for (int h = 0; h < grp; h++) {
                    const size_t st = (size_t)(g * per_g + (i - i0) * grp + h);
                    float *o = out + ((size_t)i * (size_t)n_q_heads + (size_t)(g * grp + h)) * D;
                    const float inv = 1.0f / Ls[st];
                    for (int e = 0; e < d; e++) o[e] *= inv;
                }
    }
}

/* Chunk k (of cpp) of the visible tokens [lo, nv) of a split decode: [*clo, *chi), near-equal
 * parts cut at multiples of al, so that the threads get the same work whatever the number of
 * pages (whole pages gave 2 + 1 of 3 pages to two threads, as with Gemma 3's 512-token sliding
 * window). The caller clips the chunk to [lo, nv). */
static void split_chunk(int64_t lo, int64_t nv, int cpp, int k, int64_t al, int64_t *clo,
                        int64_t *chi) {
    const int64_t a0 = lo / al * al, per = round_up((nv - a0 + cpp - 1) / cpp, al);
    *clo = a0 + k * per;
    *chi = *clo + per;
}

/* Merges the cpp chunk results of one (query, head) pair, chunk k at p0 + k step floats as
 * {max scaled score m_k, sum of exp s_k, normalized output (d)}: out = sum_k w_k o_k / sum_k w_k
 * with w_k = s_k exp(m_k - M) in double; empty chunks (s_k = 0) are skipped. */
static void merge_chunks(const float *p0, size_t step, int64_t cpp, int d, float *out) {
    float M = -INFINITY;
    for (int64_t k = 0; k < cpp; k++) {
        const float *pk = p0 + (size_t)k * step;
        if (pk[1] > 0.0f && pk[0] > M) M = pk[0];
    }
    double wsum = 0, o[1024] = {0};
    for (int64_t k = 0; k < cpp; k++) {
        const float *pk = p0 + (size_t)k * step;
        if (!(pk[1] > 0.0f)) continue;
        const double w = (double)pk[1] * exp((double)pk[0] - M);
        wsum += w;
        for (int i = 0; i < d; i++) o[i] += w * pk[2 + i];
    }
    for (int i = 0; i < d; i++) out[i] = (float)(o[i] / wsum);
}

/* One query (decode) on several threads when the kv heads' batches are fewer than two per
 * thread: each batch of bs query heads (nb batches per kv head) is cut into cpp block-aligned
 * chunks of its visible tokens, every (kv head, batch, chunk) an item attended with the whole
 * batch (the codecs' multi-query kernels unpack each code once for all of its heads), and the
 * chunks of a head merged by their softmax max / sum: weight s_k exp(m_k - M) on each chunk's
 * normalized output. Splitting heads instead would unpack a kv head's codes once per group of
 * heads (3 heads on 2 threads: batches of 2 + 1). */
static void attend_split(vq_cache *c, int layer, const float *q, int n_q_heads,
                         const int64_t *q_pos, float scale, float *out, int bs, int nb, int cpp) {
    const struct vq_layer *L = &c->layers[layer];
    const int d = c->d, grp = n_q_heads / c->n_kv;
    const int64_t n_items = (int64_t)c->n_kv * nb * cpp;
    const size_t part = (size_t)(d + 2);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(c->n_threads)
#endif
    for (int64_t it = 0; it < n_items; it++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        const int k = (int)(it % cpp), b = (int)(it / cpp % nb), g = (int)(it / cpp / nb);
        const int ns = grp - b * bs < bs ? grp - b * bs : bs;
        struct attend_slot sl[VQ_SLOT_BATCH];
        fill_slots(c, layer, g, (int64_t)b * bs, ns, q, n_q_heads, 1, q_pos, out, sl);
        const int64_t lo = sl[0].lo, nv = sl[0].hi, sh = sl[0].sh;
        int64_t clo, chi;
        split_chunk(lo, nv, cpp, k, block_lcm(L, 16), &clo, &chi);
        float *parts = c->split + (size_t)it * (size_t)bs * part;
        for (int j = 0; j < ns; j++) {
            sl[j].out = parts + (size_t)j * part + 2;
            sl[j].stats = parts + (size_t)j * part;
            sl[j].sh = k == 0 ? sh : 0;
            sl[j].lo = clo > lo ? clo : lo;
            sl[j].hi = chi < nv ? chi : nv;
            if (sl[j].hi < sl[j].lo) sl[j].hi = sl[j].lo;
        }
        if (sl[0].lo >= sl[0].hi && sl[0].sh == 0) { /* empty chunk */
            for (int j = 0; j < ns; j++) sl[j].stats[1] = 0.0f;
            continue;
        }
        attend_batch(c, L, g, ns, sl, scale, c->slabs + (size_t)tid * c->slab_bytes);
    }
    for (int h = 0; h < n_q_heads; h++) {
        const int g = h / grp, b = h % grp / bs, j = h % grp % bs;
        const float *p0 = c->split +
                          ((size_t)((int64_t)g * nb + b) * (size_t)cpp * (size_t)bs + (size_t)j) *
                              part;
        /* chunk k + 1 of the same head is bs parts further */
        merge_chunks(p0, (size_t)bs * part, cpp, d, out + (size_t)h * (size_t)d);
    }
}

vq_status vq_cache_attend(vq_cache *c, int layer, const float *q, int n_q_heads, int64_t n_q,
                          const int64_t *q_pos, float scale, float *out) {
    VQ_RETURN_IF_ERR(attend_check(c, layer, q, n_q_heads, n_q, q_pos, scale, out));
    if (n_q == 0) return VQ_STATUS_OK;
    const struct vq_layer *L = &c->layers[layer];
    if (L->f16_exact || layer_all_window(c, L)) {
        const int grp = n_q_heads / c->n_kv, gps = c->gg_heads / grp;
        if (n_q == 1 && c->n_threads > 1 && L->win == 0 && L->ss_cap == 0 && gps > 0 &&
            c->n_kv <= c->n_threads * gps && (int64_t)n_q_heads * c->d <= VQ_F16_MT_QMAX &&
            c->f16_mt)
            attend_f16_mt(c, layer, q, n_q_heads, q_pos, scale, out);
        else attend_f16(c, layer, q, n_q_heads, n_q, q_pos, scale, out);
        return VQ_STATUS_OK;
    }
    const int grp = n_q_heads / c->n_kv;
    if (c->dslabs && n_q * grp >= VQ_DENSE_MIN_PAIRS && n_q_heads <= VQ_DENSE_STATE) {
        attend_dense_all(c, layer, q, n_q_heads, n_q, q_pos, scale, out);
        return VQ_STATUS_OK;
    }
    if (n_q == 1 && c->n_threads > 1) {
        const int bs = grp < c->n_slots ? grp : c->n_slots, nb = (grp + bs - 1) / bs;
        if (c->n_kv * nb < 2 * c->n_threads) {
            attend_split(c, layer, q, n_q_heads, q_pos, scale, out, bs, nb,
                         (2 * c->n_threads + c->n_kv * nb - 1) / (c->n_kv * nb));
            return VQ_STATUS_OK;
        }
    }
    const int d = c->d;
    /* The (query, head) pairs of one kv head, ordered query-major, are cut into batches of up
     * to n_slots; batches shrink until every thread has about two of them. */
    const int64_t per_g = n_q * grp;
    int64_t bs = per_g < c->n_slots ? per_g : c->n_slots;
    while (bs > 1 && c->n_kv * ((per_g + bs - 1) / bs) < 2 * (int64_t)c->n_threads) bs--;
    const int64_t nb = (per_g + bs - 1) / bs;
    const int64_t n_pairs = n_q * n_q_heads;
    /* Still fewer pairs than threads (decode with few heads): split each pair's window tokens
     * into block-aligned chunks run as separate items (the first also takes the stream sinks),
     * merged afterwards by their softmax stats. */
    const int64_t cpp = (bs == 1 && n_pairs < c->n_threads) ? (c->n_threads + n_pairs - 1) / n_pairs
                                                            : 1;
    const int64_t n_items = cpp > 1 ? n_pairs * cpp : c->n_kv * nb;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(c->n_threads) if (n_items > 1)
#endif
    for (int64_t it = 0; it < n_items; it++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        uint8_t *slab = c->slabs + (size_t)tid * c->slab_bytes;
        struct attend_slot sl[VQ_SLOT_BATCH];
        if (cpp > 1) {
            const int64_t pi = it / cpp, k = it % cpp, i = pi / n_q_heads;
            const int h = (int)(pi % n_q_heads);
            const int64_t pos = query_pos(c, layer, n_q, q_pos, i), nv = pos + 1;
            int64_t sh, lo;
            visible(L, pos, &sh, &lo);
            int64_t clo, chi;
            split_chunk(lo, nv, cpp, k, block_lcm(L, 16), &clo, &chi);
            float *part = c->split + (size_t)it * (size_t)(d + 2);
            sl[0].q = q + (size_t)pi * (size_t)d;
            sl[0].out = part + 2;
            sl[0].sh = k == 0 ? sh : 0;
            sl[0].lo = clo > lo ? clo : lo;
            sl[0].hi = chi < nv ? chi : nv;
            if (sl[0].hi < sl[0].lo) sl[0].hi = sl[0].lo;
            sl[0].stats = part;
            if (sl[0].lo >= sl[0].hi && sl[0].sh == 0) {
                part[1] = 0.0f; /* empty chunk */
                continue;
            }
            attend_batch(c, L, h / grp, 1, sl, scale, slab);
            continue;
        }
        const int g = (int)(it / nb);
        const int64_t k0 = (it % nb) * bs;
        const int ns = (int)(per_g - k0 < bs ? per_g - k0 : bs);
        fill_slots(c, layer, g, k0, ns, q, n_q_heads, n_q, q_pos, out, sl);
        attend_batch(c, L, g, ns, sl, scale, slab);
    }
    if (cpp > 1) {
        for (int64_t pi = 0; pi < n_pairs; pi++) /* pair pi's chunks are consecutive parts */
            merge_chunks(c->split + (size_t)(pi * cpp) * (size_t)(d + 2), (size_t)(d + 2), cpp, d,
                         out + (size_t)pi * (size_t)d);
    }
    return VQ_STATUS_OK;
}

vq_status vq_cache_read(const vq_cache *c, int layer, int kv_head, float *k, float *v) {
    if (!c || layer < 0 || layer >= c->n_layers || kv_head < 0 || kv_head >= c->n_kv)
        return VQ_STATUS_INVALID_ARG;
    const struct vq_layer *L = &c->layers[layer];
    if (k) stream_decode(c, L, &L->k, kv_head, k);
    if (v) stream_decode(c, L, &L->v, kv_head, v);
    return VQ_STATUS_OK;
}

vq_status vq_cache_key_scales(const vq_cache *c, int layer, int kv_head, float *s) {
    if (!c || !s || layer < 0 || layer >= c->n_layers || kv_head < 0 || kv_head >= c->n_kv)
        return VQ_STATUS_INVALID_ARG;
    const struct vq_side *sd = &c->layers[layer].k;
    for (int i = 0; i < c->d; i++)
        s[i] = sd->ks && sd->ks_set ? sd->ks_f[(size_t)kv_head * (size_t)c->d + (size_t)i] : 1.0f;
    return VQ_STATUS_OK;
}

vq_status vq_cache_key_channel_bits(const vq_cache *c, int layer, int kv_head, uint8_t *bits) {
    if (!c || !bits || layer < 0 || layer >= c->n_layers || kv_head < 0 || kv_head >= c->n_kv)
        return VQ_STATUS_INVALID_ARG;
    const struct vq_side *sd = &c->layers[layer].k;
    const uint8_t *w = sd->hc && sd->cw_set && sd->hc[kv_head]
                         ? vq_codec_params_get(sd->hc[kv_head])->channel_bits
                         : NULL;
    for (int i = 0; i < c->d; i++) bits[i] = w ? w[i] : 0;
    return VQ_STATUS_OK;
}

vq_status vq_cache_attend_ref(vq_cache *c, int layer, const float *q, int n_q_heads, int64_t n_q,
                              const int64_t *q_pos, float scale, float *out) {
    VQ_RETURN_IF_ERR(attend_check(c, layer, q, n_q_heads, n_q, q_pos, scale, out));
    if (n_q == 0) return VQ_STATUS_OK;
    const struct vq_layer *L = &c->layers[layer];
    const int64_t nt = L->n_tokens;
    const int d = c->d, grp = n_q_heads / c->n_kv;
    float *K = malloc((size_t)(nt * d) * sizeof(float));
    float *V = malloc((size_t)(nt * d) * sizeof(float));
    double *p = malloc((size_t)nt * sizeof(double));
    double *o = malloc((size_t)d * sizeof(double));
    if (!K || !V || !p || !o) {
        free(K);
        free(V);
        free(p);
        free(o);
        return VQ_STATUS_NO_MEMORY;
    }
    for (int g = 0; g < c->n_kv; g++) {
        stream_decode(c, L, &L->k, g, K);
        stream_decode(c, L, &L->v, g, V);
        for (int64_t i = 0; i < n_q; i++) {
            const int64_t pos = query_pos(c, layer, n_q, q_pos, i), nv = pos + 1;
            int64_t sh, lo;
            visible(L, pos, &sh, &lo);
            for (int h = g * grp; h < (g + 1) * grp; h++) {
                const float *qq = q + (size_t)((i * n_q_heads + h) * d);
                double m = -INFINITY, sum = 0;
                for (int64_t t = 0; t < nv; t++) {
                    if (t >= sh && t < lo) continue; /* masked (window) */
                    double s = 0;
                    for (int j = 0; j < d; j++) s += (double)qq[j] * K[t * d + j];
                    p[t] = s * scale;
                    if (p[t] > m) m = p[t];
                }
                for (int j = 0; j < d; j++) o[j] = 0;
                for (int64_t t = 0; t < nv; t++) {
                    if (t >= sh && t < lo) continue;
                    p[t] = exp(p[t] - m);
                    sum += p[t];
                    for (int j = 0; j < d; j++) o[j] += p[t] * V[t * d + j];
                }
                float *oo = out + (size_t)((i * n_q_heads + h) * d);
                for (int j = 0; j < d; j++) oo[j] = (float)(o[j] / sum);
            }
        }
    }
    free(K);
    free(V);
    free(p);
    free(o);
    return VQ_STATUS_OK;
}

/* ---- memory, truncate, reset ---------------------------------------------------------- */

void vq_cache_memory(const vq_cache *c, struct vq_cache_memory *m) {
    if (!m) return;
    memset(m, 0, sizeof *m);
    if (!c) return;
    const size_t row16 = (size_t)c->d * 2;
    for (int l = 0; l < c->n_layers; l++) {
        const struct vq_layer *L = &c->layers[l];
        const struct vq_side *sides[2] = {&L->k, &L->v};
        for (int j = 0; j < 2; j++) {
            const struct vq_side *sd = sides[j];
            const size_t bb = vq_codec_block_bytes(sd->codec);
            for (int h = 0; h < c->n_kv; h++) {
                const struct vq_stream *s = &sd->s[h];
                const int64_t live = s->n_coded - s->pg0 * c->page_tokens; /* coded, held */
                const size_t coded = (size_t)(live / sd->bt) * bb;
                size_t win = (size_t)s->win_n * row16;
                if (sd->use_sinks) win += (size_t)L->n_sinks * row16;
                win += (size_t)(L->ss_cap < L->n_tokens ? L->ss_cap : L->n_tokens) * row16;
                const size_t mu = (sd->mu_set ? row16 : 0) + (sd->ks_set ? row16 : 0) +
                                  (sd->hc && sd->cw_set ? (size_t)c->d : 0);
                size_t ob = sd->use_ot ? (size_t)L->n_ot * row16 : 0;
                if (sd->n_oc > 0)
                    ob += (size_t)live * (size_t)(2 + sd->n_oc) +
                          (s->oc_ready ? (size_t)sd->n_oc * 2 : 0);
                if (j == 0) {
                    m->key_bytes += coded;
                    m->key_total_bytes += coded + win + mu + ob;
                } else {
                    m->value_bytes += coded;
                }
                m->center_bytes += mu;
                m->window_bytes += win;
                m->outlier_bytes += ob;
                m->allocated_bytes += (size_t)s->n_pages * sd->page_bytes +
                                      (size_t)sd->buf_rows * row16 +
                                      (sd->use_sinks ? (size_t)L->sink_cap * row16 : 0) +
                                      (sd->mu ? row16 : 0) + (sd->ks ? row16 : 0) +
                                      (sd->hc ? (size_t)c->d : 0) +
                                      (sd->use_ot ? (size_t)L->ot_cap * row16 : 0) +
                                      (size_t)sd->n_oc * 2 + (size_t)L->ss_cap * row16;
            }
        }
        /* an fp16 cache with the same windows: whole pages below keep_from freed, sinks kept */
        const int64_t ev = L->win > 0 ? L->keep_from / c->page_tokens * c->page_tokens : 0;
        const int64_t held = L->n_tokens - ev + (L->ss_cap < ev ? L->ss_cap : ev);
        m->fp16_key_bytes += (size_t)held * (size_t)c->n_kv * row16;
    }
    m->fp16_bytes = 2 * m->fp16_key_bytes;
    m->total_bytes = m->key_bytes + m->value_bytes + m->window_bytes + m->center_bytes +
                     m->outlier_bytes;
}

/* Checks whether stream s can be cut to n tokens (see stream_truncate). */
static int stream_can_cut(const struct vq_side *sd, const struct vq_stream *s, int64_t n) {
    return n >= s->n_coded || n % sd->bt == 0;
}

/* Keeps the first n tokens of a stream: window rows beyond n are dropped; a cut inside the
 * coded part drops whole blocks (the caller checked block alignment) and empties the window. */
static void stream_truncate(struct vq_side *sd, struct vq_stream *s, int64_t n) {
    if (n >= s->n_coded) {
        const int64_t keep = n - s->n_coded;
        if (keep < s->win_n) s->win_n = (int)keep;
    } else {
        s->n_coded = n;
        s->win_n = 0;
        s->win_start = 0;
    }
    (void)sd;
}

/* Positions whose |k_c| the outlier-channel sums of layer L cover. */
static int64_t oc_calibrated(const vq_cache *c, const struct vq_layer *L) {
    return L->n_tokens < c->n_calib ? L->n_tokens : c->n_calib;
}

vq_status vq_cache_truncate(vq_cache *c, int64_t n_tokens) {
    if (!c || n_tokens < 0) return VQ_STATUS_INVALID_ARG;
    int64_t maxn = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (c->layers[l].n_tokens > maxn) maxn = c->layers[l].n_tokens;
    if (n_tokens > maxn) return VQ_STATUS_INVALID_ARG;
    for (int l = 0; l < c->n_layers; l++) {
        const struct vq_layer *L = &c->layers[l];
        if (L->n_tokens <= n_tokens) continue;
        /* windowed: a query at position n_tokens must still see its whole window */
        if (L->win > 0 && n_tokens > 0 && n_tokens - L->win + 1 < L->keep_from)
            return VQ_STATUS_UNSUPPORTED;
        for (int h = 0; h < c->n_kv; h++)
            if (!stream_can_cut(&L->k, &L->k.s[h], n_tokens) ||
                !stream_can_cut(&L->v, &L->v.s[h], n_tokens))
                return VQ_STATUS_UNSUPPORTED;
        /* outlier-channel sums cover positions [0, min(n_tokens, n_calib)): no exact undo,
         * except back to the count before the last append (oc_undo_n) */
        if (L->k.n_oc > 0 && n_tokens > 0 && n_tokens < oc_calibrated(c, L) &&
            n_tokens != L->oc_undo_n)
            return VQ_STATUS_UNSUPPORTED;
    }
    for (int l = 0; l < c->n_layers; l++) {
        struct vq_layer *L = &c->layers[l];
        if (L->n_tokens <= n_tokens) continue;
        if (L->k.n_oc > 0 && n_tokens > 0 && n_tokens < oc_calibrated(c, L)) { /* == oc_undo_n */
            for (int h = 0; h < c->n_kv; h++) {
                struct vq_stream *s = &L->k.s[h];
                double *ts = s->oc_sum;
                s->oc_sum = s->oc_sum_new;
                s->oc_sum_new = ts;
                uint16_t *tc = s->oc_ch;
                s->oc_ch = s->oc_ch_new;
                s->oc_ch_new = tc;
                s->oc_ready = s->oc_ready_prev;
            }
            L->oc_undo_n = -1;
        }
        for (int h = 0; h < c->n_kv; h++) {
            stream_truncate(&L->k, &L->k.s[h], n_tokens);
            stream_truncate(&L->v, &L->v.s[h], n_tokens);
        }
        /* Sinks beyond the cut go away; their side-store rows are compacted in order. */
        int w = 0;
        for (int i = 0; i < L->n_sinks; i++) {
            if (L->sink_pos[i] >= n_tokens) continue;
            if (w != i) {
                L->sink_pos[w] = L->sink_pos[i];
                struct vq_side *sides[2] = {&L->k, &L->v};
                for (int j = 0; j < 2; j++)
                    if (sides[j]->use_sinks)
                        for (int h = 0; h < c->n_kv; h++)
                            memcpy(sides[j]->s[h].sink + (size_t)w * (size_t)c->d,
                                   sides[j]->s[h].sink + (size_t)i * (size_t)c->d,
                                   (size_t)c->d * 2);
            }
            w++;
        }
        L->n_sinks = w;
        L->n_ot = ot_lower(L, n_tokens); /* outlier tokens beyond the cut go away */
        L->n_tokens = n_tokens;
        if (n_tokens == 0) {
            L->k.mu_set = L->v.mu_set = 0; /* an emptied layer re-learns mu and the scales */
            L->k.ks_set = L->k.cw_set = 0;
            L->qm_n = 0;
            oc_reset(&L->k, c->n_kv, c->d);
            L->oc_undo_n = -1;
            L->keep_from = 0;
            for (int h = 0; h < c->n_kv; h++) L->k.s[h].pg0 = L->v.s[h].pg0 = 0; /* pages reused */
        }
    }
    return VQ_STATUS_OK;
}

void vq_cache_reset(vq_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->n_layers; l++) {
        struct vq_layer *L = &c->layers[l];
        struct vq_side *sides[2] = {&L->k, &L->v};
        for (int j = 0; j < 2; j++)
            for (int h = 0; h < c->n_kv; h++) {
                struct vq_stream *s = &sides[j]->s[h];
                s->n_coded = 0;
                s->win_n = 0;
                s->win_start = 0;
                s->pg0 = 0; /* every allocated page is reused from position 0 */
            }
        L->n_tokens = 0;
        L->keep_from = 0;
        L->n_sinks = 0;
        L->n_ot = 0;
        L->k.mu_set = L->v.mu_set = 0;
        L->k.ks_set = L->k.cw_set = 0;
        L->qm_n = 0;
        oc_reset(&L->k, c->n_kv, c->d);
        L->oc_undo_n = -1;
    }
}
