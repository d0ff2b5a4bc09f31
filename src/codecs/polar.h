/*
 * polar.h — internal helpers of the PolarQuant codec (polar.c), exposed for tests.
 * Not part of the public API.
 */
#ifndef VQ_CODECS_POLAR_H
#define VQ_CODECS_POLAR_H

#include "codecs/codec_impl.h"

#define VQ_POLAR_LEVELS 4          /* L: blocks of 2^L = 16 coordinates */
#define VQ_POLAR_BLOCK 16
#define VQ_POLAR_MAX_BITS1 6       /* level-1 (uniform angle) bits 1..6 */
#define VQ_POLAR_MAX_BITSL 4       /* level >= 2 (Lloyd-Max angle) bits 1..4 */

/* Angle codebook of level `level` (1..4) with `bits` bits, in radians.
 * Level 1: uniform on [0, 2pi): centroids (i + 1/2) 2pi / 2^bits, boundaries i 2pi / 2^bits
 * (i = 1..2^bits-1). Level l >= 2: Lloyd-Max for the density proportional to
 * sin(2 psi)^(2^(l-1) - 1) on [0, pi/2], computed by grid integration (20001 points,
 * cumulative trapezoid, linear interpolation; iterated to 1e-13). centroids gets 2^bits
 * values (ascending), boundaries 2^bits - 1. Returns INVALID_ARG for out-of-range level/bits,
 * NO_MEMORY if the grid cannot be allocated. Thread-safe (no shared state). */
vq_status vq_polar_codebook(int level, int bits, float *centroids, float *boundaries);

#endif
