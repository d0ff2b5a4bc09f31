/*
 * kvmem.h — analytic KV-cache memory: the exact byte counts a vq_cache reports
 * (vq_cache_memory) after a context of ctx tokens, computed from each codec's block size
 * (vq_codec_block_bytes / vq_codec_block_tokens) and the cache's fp16 window rules, without
 * allocating a cache. Also reads the KV geometry of a GGUF model. Not part of the public API.
 *
 * Window rules mirrored from the cache (src/cache/cache.c):
 *   - per-token codecs (block_tokens 1, not KIVI): every token is encoded;
 *   - KIVI keys with residual_length R > 0: tokens are encoded in whole R-chunks, and a full
 *     window waits for the next append: floor((ctx - 1) / R) * R are coded, the newest
 *     1..R stay fp16 (all of them when ctx <= R); KIVI values with R > 0: the newest
 *     min(ctx, R) tokens stay fp16, the rest are encoded;
 *   - any other codec with block_tokens B > 1 (or KIVI with R = 0): whole B-blocks are
 *     encoded, ctx mod B tokens stay fp16;
 *   - kivi_sink: each side that is kivi_sink also keeps min(n_sink_tokens, ctx) fp16 rows per
 *     kv-head (the sink count of a layer comes from the key codec if it is kivi_sink, else
 *     from the value codec). This assumes the context was appended in one call (a prefill);
 *     sinks are chosen in the first append only.
 *   - outlier tokens / outlier channels: see vq_kv_estimate_outliers.
 *   - windowed layers (layer_window, stream_window): the state after a first append of
 *     min(ctx, W) tokens and then one token per append (prefill of the window, then decode):
 *     the coded pages wholly below ctx - W are freed, the page slots allocated are the most
 *     ever live at once (freed pages are recycled), stream sinks keep min(S, ctx) fp16 rows per
 *     stream (S allocated), kivi_sink's sinks come from that first append; fp16_key_bytes is
 *     what an fp16 cache with the same windows holds. A prefill chunk of n tokens holds up to
 *     n - 1 more positions until the next append.
 *   allocated_bytes also mirrors the cache's buffers: whole pages of page_tokens tokens for
 *   coded tokens, R rows per KIVI key window (B rows for block codecs), 2R rows per KIVI
 *   value window, n_sink_tokens rows per kivi_sink side.
 */
#ifndef VQ_EVAL_KVMEM_H
#define VQ_EVAL_KVMEM_H

#include <stdint.h>
#include "veloxquant.h"

struct vq_kv_geometry {
    int n_layers;
    int n_kv_heads;
    int head_dim;
    int n_heads;   /* query heads (0 if unknown) */
    char arch[32]; /* general.architecture, or "" */
};

/* Computes *m as vq_cache_memory would report it for a cache created from p (geometry,
 * key/value codec params, per-layer bits, page_tokens) holding ctx tokens in every layer.
 * Creates the codecs it needs (freed before returning). Returns the codec-creation status
 * on invalid parameters (INVALID_ARG, UNSUPPORTED, ...), INVALID_ARG for ctx < 0.
 * Thread-safe. */
vq_status vq_kv_estimate(const struct vq_cache_params *p, int64_t ctx, struct vq_cache_memory *m);
/* Same, with n_ot outlier tokens per layer (clamped to ctx; ignored unless
 * p->outlier_token_k > 0). Which tokens are outliers depends on the data, so the caller
 * supplies the count: the result is exact for a cache whose layers each hold n_ot outlier
 * tokens detected in a single append (the fp16 row store grows from 16 rows by doubling).
 * vq_kv_estimate is this with n_ot = 0. Outlier channels need no input: every key token
 * carries 2 + n_outlier_channels bytes, plus 2 * n_outlier_channels bytes of channel list
 * per (layer, kv-head) once ctx >= n_calib_tokens. */
vq_status vq_kv_estimate_outliers(const struct vq_cache_params *p, int64_t ctx, int64_t n_ot,
                                  struct vq_cache_memory *m);

/* Reads n_layers, n_kv_heads, head_dim, n_heads and the architecture from a GGUF file's
 * metadata ({arch}.block_count, {arch}.attention.head_count[_kv], {arch}.attention.key_length
 * or embedding_length / head_count). Returns IO / BAD_FORMAT / NOT_FOUND (missing keys) with
 * a reason in err (errlen bytes, may be NULL). */
vq_status vq_kv_geometry_from_gguf(const char *path, struct vq_kv_geometry *g, char *err,
                                   size_t errlen);

#endif
