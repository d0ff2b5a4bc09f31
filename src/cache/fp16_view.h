/*
 * fp16_view.h — read-only access to K/V streams stored as plain fp16 rows, for the engine's
 * llama.cpp-identical attention (src/engine/context.c). Internal to the library.
 */
#ifndef VQ_CACHE_FP16_VIEW_H
#define VQ_CACHE_FP16_VIEW_H

#include <stdint.h>

#include "veloxquant.h"

/* Rows of one (layer, side, kv head) stream: token t's head_dim fp16 values start at
 * pages[t / page_tokens] + (t % page_tokens) * head_dim. */
struct vq_fp16_view {
    const uint16_t *const *pages;
    int64_t page_tokens;
    int64_t n_tokens;
};

/* Fills *v for the key (value = 0) or value (value = 1) stream of (layer, kv_head) and returns
 * 1 when that stream holds every token as a plain fp16 row: the fp16 codec with no window,
 * sinks, outlier copies, outlier channels or centering. Returns 0 (and leaves *v alone)
 * otherwise or for bad arguments. The pointers stay valid until the next append, truncate,
 * reset or free of the cache. Thread-safe against other readers. */
int vq_cache_fp16_view(const vq_cache *c, int layer, int value, int kv_head, struct vq_fp16_view *v);

#endif
