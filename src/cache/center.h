/*
 * center.h — centering, outlier-modifier and window policy shared by the cache, the analytic
 * memory estimate and the CLI.
 */
#ifndef VQ_CACHE_CENTER_H
#define VQ_CACHE_CENTER_H

#include "veloxquant.h"

/* Whether a stream whose codec method is m is centered for the request want (-1 auto, 0 off,
 * 1 on; see vq_cache_params.center_keys). auto = the method's VQ_METHOD_F_CENTERED trait
 * (turboquant_mse/prod/rvq and qjl). Pure, thread-safe. */
int vq_cache_center_on(int want, enum vq_method m);

/* Whether a side stored with method m can keep outlier-token copies (vq_cache_params.
 * outlier_token_k): trait VQ_METHOD_F_OUTLIER_TOKENS (not fp16/fp32, which have nothing to
 * bypass, nor kivi_sink, which keeps its high-norm tokens already). Pure. */
static inline int vq_cache_ot_method(enum vq_method m) {
    return (vq_method_flags(m) & VQ_METHOD_F_OUTLIER_TOKENS) != 0;
}

/* Whether keys stored with method m support the outlier-channel split (n_outlier_channels):
 * trait VQ_METHOD_F_OUTLIER_CHANNELS (the per-token codecs of whole keys). Pure. */
static inline int vq_cache_oc_method(enum vq_method m) {
    return (vq_method_flags(m) & VQ_METHOD_F_OUTLIER_CHANNELS) != 0;
}

/* Whether outlier tokens (k > 0) combine with key method km and value method vm: neither keeps
 * sink tokens and at least one side can bypass. Pure. */
static inline int vq_cache_ot_supported(enum vq_method km, enum vq_method vm) {
    return !((vq_method_flags(km) | vq_method_flags(vm)) & VQ_METHOD_F_SINKS) &&
           (vq_cache_ot_method(km) || vq_cache_ot_method(vm));
}

/* The sliding window W (0 = full attention) and stream-sink count S of a layer under params p
 * (layer_window, else stream_window / stream_sinks on full-attention layers; see
 * vq_cache_params). Pure; p must have passed vq_cache_create's checks. */
void vq_cache_layer_window(const struct vq_cache_params *p, int layer, int *w, int *s);

/* Per-channel KIVI key widths (vq_cache_params.key_channel_bits, docs/ALGORITHMS.md §8.8):
 * out[c] in 2..8 (zero: 0 or 2..8) for the d (multiple of 8, <= 1024) channels of weights w
 * (>= 0; w_c = a_c R_c^2), summing to d * bits (bits 2..8), every width used by a multiple of
 * 8 channels (the table vq_codec_params.channel_bits accepts). Rule in cache.c. Pure,
 * thread-safe. */
void vq_cache_channel_widths(const double *w, int d, int bits, int zero, uint8_t *out);

#endif
