/*
 * center.h — centering policy shared by the cache and the analytic memory estimate.
 */
#ifndef VQ_CACHE_CENTER_H
#define VQ_CACHE_CENTER_H

#include "veloxquant.h"

/* Whether a stream whose codec method is m is centered for the request want (-1 auto, 0 off,
 * 1 on; see vq_cache_params.center_keys). auto = on for turboquant_mse/prod/rvq and qjl.
 * Pure, thread-safe. */
int vq_cache_center_on(int want, enum vq_method m);

#endif
