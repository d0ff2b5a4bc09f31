/*
 * vecq.h — vector quality of a codec on synthetic keys (docs/EVALUATION.md, "Protocol"): mean
 * cosine between vectors and their decoded codes. Not part of the public API.
 */
#ifndef VQ_EVAL_VECQ_H
#define VQ_EVAL_VECQ_H

#include <stdint.h>
#include "veloxquant.h"

/* Encodes and decodes n_tokens synthetic vectors (rounded up to the codec's block tokens)
 * drawn i.i.d. N(0, 1) per coordinate, plus an offset of +4 on every 16th channel when
 * outliers is set (channel-aligned outliers, as real keys have), and returns the mean cosine
 * of reconstruction in *cosine. Deterministic for seed. Returns the codec's status on bad
 * params, NO_MEMORY. Thread-safe. */
vq_status vq_eval_codec_cosine(const struct vq_codec_params *p, int64_t n_tokens, int outliers,
                               uint64_t seed, double *cosine);

#endif
