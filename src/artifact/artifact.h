/*
 * artifact.h — calibration artifact files and data-independent precomputed tables: the
 * container (serialize / parse, FNV-1a 64 checksum; layout in docs/FORMAT.md), atomic file
 * I/O, and the lookup that attaches an artifact to a cache configuration. This folder sits
 * above src/calib, src/codecs and src/cache (lookup creates codecs to test that an artifact
 * serves a configuration). Not part of the public API.
 */
#ifndef VQ_ARTIFACT_H
#define VQ_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"

/* ---- artifact container -------------------------------------------------------------------- */

#define VQ_CALIB_MAGIC "VQCALIB\0"
#define VQ_CALIB_FORMAT_VERSION 1u
#define VQ_CALIB_HEADER_BYTES 104u /* fixed header before the payload */
#define VQ_CALIB_TRAILER_BYTES 8u  /* FNV-1a 64 checksum */
#define VQ_CALIB_MAX_FILE (1ull << 31)

/* FNV-1a 64-bit hash of n bytes, continuing from h (start with VQ_FNV64_INIT). */
#define VQ_FNV64_INIT 0xcbf29ce484222325ull
uint64_t vq_fnv1a64(uint64_t h, const void *data, size_t n);

/* Serializes cd into a newly allocated buffer (*out, *out_len; free with vq_free). */
vq_status vq_calib_serialize(const vq_calib_data *cd, const char *method,
                             const uint8_t model_sha256[32], const uint32_t params[6],
                             uint8_t **out, size_t *out_len);
/* Parses and validates an artifact held in memory (untrusted). Same statuses and checks as
 * vq_calib_data_load. params_out (6, may be NULL) receives the header parameters. */
vq_calib_data *vq_calib_parse(const uint8_t *buf, size_t len, const char *method,
                              const uint8_t model_sha256[32], uint32_t *params_out, vq_status *st);

/* ---- artifact lookup ------------------------------------------------------------------------ */

/* vq_calib_attach (veloxquant.h) that also explains a NOT_FOUND: why (why_cap bytes, may be
 * NULL) receives "; "-separated reasons per artifact file rejected (unreadable, corrupt or
 * truncated, another model, does not fit the config) or that none exists. A rejected file
 * is never used. */
vq_status vq_calib_attach_diag(struct vq_cache_params *cp, int n_layers, int head_dim,
                               const char *model_sha256_hex, vq_calib_data *owned[2], char *why,
                               size_t why_cap);

/* Like vq_calib_attach_diag, but picks from sets in memory (a calibration just built, e.g.
 * one that could not be written to the artifact cache) instead of the cache: for each side
 * of cp whose method needs calibration and whose calib is NULL, the first of sets[0..n_sets)
 * (NULL entries skipped) that serves it on every layer. The sets used move to owned[0..1]
 * (their entries in sets become NULL; the caller frees the rest and, after every
 * cache/codec made from cp, the owned ones). Returns OK, INVALID_ARG, or NOT_FOUND (a
 * reason in why; cp, sets and owned unchanged then). */
vq_status vq_calib_attach_sets(struct vq_cache_params *cp, int n_layers, int head_dim,
                               vq_calib_data **sets, int n_sets, vq_calib_data *owned[2], char *why,
                               size_t why_cap);

/* ---- files -------------------------------------------------------------------------------- */
/* The file and precompute functions below keep no global state (the temp-file name of
 * vq_calib_write_atomic carries the pid and an atomic counter): thread-safe for distinct
 * arguments. */

/* Writes len bytes atomically to path (temp file in the same folder, fsync, rename; missing
 * folders created). Returns OK, INVALID_ARG, IO or NO_MEMORY; on IO, errno holds the cause
 * (of the mkdir, open, write, fsync, close or rename that failed). A path that exists and is
 * not a regular file after following symlinks (device, FIFO, socket, folder) is never replaced:
 * IO, checked before the write and again before the rename (vq_file_check_output; the reason
 * in vq_file_error()). */
vq_status vq_calib_write_atomic(const char *path, const uint8_t *buf, size_t len);
/* Reads a whole regular file (at most VQ_CALIB_MAX_FILE bytes; opened without blocking, so a
 * FIFO or device is IO at once) into *out (vq_alloc'd, caller
 * frees with vq_free) and its length. Returns OK, INVALID_ARG, IO, BAD_FORMAT (too large) or
 * NO_MEMORY. */
vq_status vq_calib_read_file(const char *path, uint8_t **out, size_t *out_len);

/* ---- precomputed data-independent tables (precomp.c, docs/FORMAT.md) ---------------------- */

/* One head_dim's tables: Lloyd-Max codebooks (centroids + boundaries) of the Gauss law and of
 * the rotated-coordinate (SPHERE) law at d, and the RHT sign vector of (d, seed). */
#define VQ_PRECOMP_MAX_TABLES 16
enum { VQ_PRECOMP_KIND_LLOYD = 16, VQ_PRECOMP_KIND_RHT_SIGNS = 17 };
struct vq_precomp_table {
    int kind;      /* VQ_PRECOMP_KIND_* */
    int law, bits; /* LLOYD: enum vq_law (GAUSS or SPHERE), bits */
    int n;         /* LLOYD: 2^bits centroids (then n - 1 boundaries); RHT: d signs */
    float *data;   /* LLOYD: n + n - 1 floats; RHT: n floats (+-1) */
};
struct vq_precomp {
    int head_dim;
    uint64_t seed;
    int n_tables;
    struct vq_precomp_table t[VQ_PRECOMP_MAX_TABLES];
};
/* Computes the tables for head_dim d (8..1024, multiple of 8), seed and the bit-widths bits
 * (n_bits 1..6 entries, each 1..6): a GAUSS codebook per width, a SPHERE codebook per width
 * <= 4, and the RHT signs (vq_rht_init(d, seed)), exactly as the codecs compute them at
 * start-up. *out is zeroed first; free with vq_precomp_free. */
vq_status vq_precomp_compute(int d, uint64_t seed, const int *bits, int n_bits,
                             struct vq_precomp *out);
void vq_precomp_free(struct vq_precomp *p);
/* Serializes into the artifact container (tag "precompute", zero model hash) and writes it
 * atomically to path. */
vq_status vq_precomp_save(const struct vq_precomp *p, const char *path);
/* Parses an untrusted buffer / loads a file: BAD_FORMAT (magic, checksum, truncation, bad
 * records, non-finite values), UNSUPPORTED (newer version), NOT_FOUND (another tag), IO.
 * *out is zeroed first; on OK the caller owns it (vq_precomp_free), on error nothing is
 * left allocated in it. */
vq_status vq_precomp_parse(const uint8_t *buf, size_t len, struct vq_precomp *out);
vq_status vq_precomp_load(const char *path, struct vq_precomp *out);
/* Compares a stored set with a computed one table by table, bit for bit (have and want must
 * not be NULL). Returns 1 when
 * every table of want is in have with identical values (have may hold more); else 0 and a
 * description of the first difference in why (may be NULL). */
int vq_precomp_matches(const struct vq_precomp *have, const struct vq_precomp *want, char *why,
                       size_t why_cap);

#endif
