/*
 * center.h — centering, outlier-modifier and window policy shared by the cache, the analytic
 * memory estimate and the CLI.
 */
#ifndef VQ_CACHE_CENTER_H
#define VQ_CACHE_CENTER_H

#include "veloxquant.h"

/* Whether a stream whose codec method is m is centered for the request want (-1 auto, 0 off,
 * 1 on; see vq_cache_params.center_keys). auto = on for turboquant_mse/prod/rvq and qjl.
 * Pure, thread-safe. */
int vq_cache_center_on(int want, enum vq_method m);

/* Whether a side stored with method m can keep outlier-token copies (vq_cache_params.
 * outlier_token_k): any method but fp16/fp32, which have nothing to bypass. Pure. */
static inline int vq_cache_ot_method(enum vq_method m) { return m != VQ_METHOD_FP16 && m != VQ_METHOD_FP32; }

/* Whether keys stored with method m support the outlier-channel split (n_outlier_channels):
 * the per-token codecs of whole keys. Pure. */
static inline int vq_cache_oc_method(enum vq_method m) {
    return m == VQ_METHOD_TURBOQUANT_MSE || m == VQ_METHOD_TURBOQUANT_PROD ||
           m == VQ_METHOD_TURBOQUANT_RVQ || m == VQ_METHOD_QJL || m == VQ_METHOD_POLAR;
}

/* The sliding window W (0 = full attention) and stream-sink count S of a layer under params p
 * (layer_window, else stream_window / stream_sinks on full-attention layers; see
 * vq_cache_params). Pure; p must have passed vq_cache_create's checks. */
void vq_cache_layer_window(const struct vq_cache_params *p, int layer, int *w, int *s);

#endif
