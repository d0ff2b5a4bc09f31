/*
 * observer.h — per-layer KV quality observed during a real run (docs/EVALUATION.md,
 * "generate --observe"): reconstruction cosine of keys and values, inner-product error of q·k
 * for the run's own queries, attention KL(exact ‖ compressed) and key-norm statistics.
 * Library-internal (used by `veloxquant generate --observe` and the tests); not part of the public
 * API. The JSON export (vq_observer_to_json) is in the tools' library
 * (tools/common/observer_json.h): the library itself does not depend on a JSON package.
 *
 * How it works
 *   vq_observer_create attaches a layer hook (vq_ctx_set_layer_hook) to an empty context and
 *   keeps a *shadow* cache with the fp32 method holding the exact post-RoPE keys and values the
 *   context appended. The engine itself never keeps such a copy; the observer is an opt-in
 *   diagnostic and its memory is extra (vq_observer_bytes):
 *     shadow  8 * head_dim bytes per (token, layer, kv-head) (fp32 K + V), paged like the cache
 *             (SmolLM2-135M: 46 KiB per token, 11.5 MiB per 256 tokens);
 *     buffers 4 * head_dim floats + 2 doubles per stored token (one layer-head read at a time),
 *             grown to the longest layer seen; accumulators ~ n_layers * n_kv_heads * head_dim
 *             doubles.
 *   Per forward pass and layer (the hook), for every kv-head: the new exact K/V rows go to the
 *   shadow, key norms and per-channel |k| are accumulated, then the exact keys (shadow) and the
 *   reconstructed keys (the context's cache decoded by vq_cache_read, i.e. the codecs'
 *   reference decoders, fp16 windows and centering included) of tokens 0..pos are compared
 *   for a sample of the batch's queries:
 *     sampling: m = min(n_tokens, max_queries) query positions per forward pass and layer,
 *     batch indices floor((j+1) * n / m) - 1 for j = 0..m-1 (evenly spaced, always the last
 *     token; a decode step is its single token), with every query head of each position.
 *   For each sampled (query, head) with keys t = 0..pos:
 *     s_t = q·k_t, ŝ_t = q·k̂_t (no scale);
 *     inner-product stats over all (ŝ, s) pairs: relative error sqrt(Σ(ŝ-s)² / Σs²), least-
 *     squares slope and bias of ŝ on s, sd of ŝ - s;
 *     KL(softmax(scale·s) ‖ softmax(scale·ŝ)) in nats (mean and max);
 *     cosine between the exact attention output Σ softmax(scale·s)_t v_t (exact values) and the
 *     context's attention output for that query/head (the fused path on the codes).
 *   Reconstruction cosine and relative MSE of K and V need the final stored form of every token
 *   (some codecs keep recent tokens in fp16 windows and quantize them later), so they are
 *   measured by vq_observer_snapshot over the tokens the cache holds when it is called (call
 *   it at the end of a run, or before each vq_ctx_reset); snapshots accumulate.
 *   Key-norm statistics cover every key row appended while the observer was attached
 *   (including rows appended again after a truncate).
 *
 * Ownership and threading
 *   Caller-owned (vq_observer_free, which detaches the hook). The context must outlive the
 *   observer: free the observer first. The hook runs on the thread that calls vq_ctx_eval; an
 *   observer belongs to one context and must not be read (stats, snapshot, JSON) while that
 *   context evaluates. All results are deterministic for a given run (serial double sums).
 */
#ifndef VQ_EVAL_OBSERVER_H
#define VQ_EVAL_OBSERVER_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"
#include "vq_engine.h"

#define VQ_OBSERVE_SCHEMA "veloxquant.observe.v1"

typedef struct vq_observer vq_observer;

struct vq_observer_params {
    int max_queries; /* query positions sampled per (forward pass, layer); 1..4096, default 8 */
    int n_outlier_channels; /* largest channels listed per layer in the JSON; 0..64, default 4 */
};

/* Defaults listed above. Thread-safe. */
struct vq_observer_params vq_observer_params_default(void);

/* Creates an observer for ctx and attaches it as the context's layer hook (replacing any
 * other). ctx must hold no tokens yet (vq_ctx_n_past == 0). p may be NULL (defaults).
 * Returns NULL with *st = INVALID_ARG (NULL ctx, tokens already evaluated, bad params) or
 * NO_MEMORY. */
vq_observer *vq_observer_create(vq_ctx *ctx, const struct vq_observer_params *p, vq_status *st);

/* Detaches the hook from the context and frees the observer (NULL: no-op). */
void vq_observer_free(vq_observer *o);

/* Adds the reconstruction statistics (cosine, relative MSE of K and V) of every token the
 * context's cache holds now, per (layer, kv-head), to the observer's sums. Returns
 * NO_MEMORY, or INTERNAL if the shadow and the cache disagree on a layer's length. */
vq_status vq_observer_snapshot(vq_observer *o);

/* Statistics of one layer; a field is NaN when nothing fed it (e.g. no snapshot yet). */
struct vq_observer_stats {
    int64_t n_vectors;   /* (token, kv-head) vectors in the reconstruction stats */
    double cos_k, cos_v; /* mean reconstruction cosine */
    double cos_k_min, cos_v_min;
    double rel_mse_k, rel_mse_v;      /* Σ|x̂-x|² / Σ|x|² */
    int64_t n_ip;                     /* (query, head, key) pairs in the inner-product stats */
    double ip_rel_err;                /* sqrt(Σ(ŝ-s)² / Σs²) */
    double ip_slope, ip_bias;         /* least squares ŝ ≈ slope·s + bias */
    double ip_err_sd;                 /* sd of ŝ - s */
    int64_t n_attn;                   /* sampled (query, head) attention rows */
    double attn_kl_mean, attn_kl_max; /* KL(exact ‖ compressed) of softmax rows, nats */
    double attn_out_cos;              /* mean cosine of the cache's attention output vs exact */
    int64_t n_keys;                   /* key rows (token, kv-head) in the norm stats */
    double knorm_mean, knorm_std, knorm_max, knorm_max_over_mean; /* of |k| (L2) */
    double chan_max_over_median; /* largest per-(head, channel) mean |k_c| / median of them */
};

/* Fills *s for layer (0..n_layers-1) aggregated over kv-heads (kv_head = -1) or for one
 * kv-head (the inner-product and attention stats of a kv-head cover the query heads that use
 * it). Returns INVALID_ARG for a bad layer/head. */
vq_status vq_observer_stats_get(const vq_observer *o, int layer, int kv_head,
                                struct vq_observer_stats *s);

/* One key channel of a layer and its mean |k_c| over the observed keys. */
struct vq_observer_channel {
    int kv_head, channel;
    double mean_abs, max_abs;
};
/* Writes the n (<= cap) channels of layer with the largest mean |k_c|, largest first (ties:
 * lower head, then lower channel). Returns n, or -1 for a bad layer. */
int vq_observer_top_channels(const vq_observer *o, int layer, struct vq_observer_channel *out,
                             int cap);

/* Layers of the context; forward passes (layer-0 hook calls) observed. */
int vq_observer_n_layers(const vq_observer *o);
int64_t vq_observer_n_passes(const vq_observer *o);
/* KV heads per layer (vq_observer_stats_get's kv_head range is 0..n-1). */
int vq_observer_n_kv_heads(const vq_observer *o);
/* The parameters the observer was created with (defaults filled in). */
struct vq_observer_params vq_observer_get_params(const vq_observer *o);
/* Tokens the context's cache holds now in layer 0. */
int64_t vq_observer_n_tokens(const vq_observer *o);
/* Extra bytes the observer holds now (shadow pages allocated + buffers + accumulators). */
size_t vq_observer_bytes(const vq_observer *o);

#endif
