/*
 * logits.h — compact next-token distributions of a perplexity run (`perplexity --save-logits`)
 * and KL divergence against them (`--kl-base`). Not part of the public API.
 *
 * A scored position is summarised by its top-k log-probabilities plus the probability mass
 * of every other token (the remainder). KL(p_base || q) is then computed over the k + 1
 * events {top-k ids of the base, everything else}; by the data-processing inequality this is
 * a lower bound of the full-vocabulary KL that is tight when the remainder is small (k = 32:
 * the remainder of SmolLM2 on English prose is typically < 5% of the mass).
 *
 * File format (little-endian, version 1):
 *   offset size  field
 *   0      8     magic "VQLOGIT1"
 *   8      4     u32 version (1)
 *   12     4     u32 top_k (1..256)
 *   16     4     u32 n_vocab
 *   20     4     u32 ctx (tokens per chunk of the run)
 *   24     8     u64 n_records (scored positions)
 *   32     8     u64 token_hash: FNV-1a 64 over the u32 target ids of all records in order
 *                (written at close; a reader checks it against the run that uses the file)
 *   40     24    reserved, zero
 *   64     ...   n_records records of 12 + 8*top_k bytes:
 *                u32 target id, f32 log p(target), f32 remainder mass (1 - sum of the top-k
 *                probabilities, clamped to [0, 1]), then top_k x (u32 id), then top_k x (f32
 *                log-prob), ids in descending probability (ties: lower id first).
 * A writer writes to PATH.tmp and renames it to PATH in vq_logits_close, so an interrupted run
 * never leaves a partial file under PATH.
 * Log-probabilities are computed in double from the fp32 logits and rounded to fp32, so a
 * run reproducing the same logits reproduces the same summaries bit for bit (KL exactly 0).
 */
#ifndef VQ_EVAL_LOGITS_H
#define VQ_EVAL_LOGITS_H

#include <stdint.h>
#include <stdio.h>
#include "veloxquant.h"

#define VQ_LOGITS_MAX_TOPK 256

/* The summary of one scored position. */
struct vq_logit_rec {
    uint32_t target;
    float target_logp;
    float rest; /* remainder mass */
    int top_k;
    uint32_t ids[VQ_LOGITS_MAX_TOPK];
    float logp[VQ_LOGITS_MAX_TOPK];
};

/* Summarises logits (n_vocab floats) for a position whose next token is target: top-k
 * log-softmax values and the remainder. Returns the row's log-sum-exp (double). Thread-safe. */
double vq_logit_summarize(const float *logits, int n_vocab, int top_k, uint32_t target,
                          struct vq_logit_rec *rec);

/* Compares a method's logits at a position against the base summary: returns KL(p_base ||
 * q_method) over {base top-k, rest} (>= 0) and sets *top1 to 1 when the method's argmax
 * equals the base's most likely id. Thread-safe. */
double vq_logit_kl(const struct vq_logit_rec *base, const float *logits, int n_vocab, int *top1);

typedef struct vq_logits_file vq_logits_file;

/* Creates a file for writing (header written now into path + ".tmp", renamed over path by
 * vq_logits_close). NULL with *st = IO / INVALID_ARG; IO too when path exists and is not a
 * regular file after following symlinks, or its folder is missing or not writable
 * (vq_file_check_output: the reason in vq_file_error()). */
vq_logits_file *vq_logits_create(const char *path, int top_k, int n_vocab, int ctx, vq_status *st);
/* Opens a file for reading and validates the header and the size. NULL with *st = IO /
 * BAD_FORMAT. Only regular files, opened without blocking (vq_file_open_input: a FIFO, folder
 * or device is IO with the reason in vq_file_error()). */
vq_logits_file *vq_logits_open(const char *path, vq_status *st);
/* Header fields. */
int vq_logits_top_k(const vq_logits_file *f);
int vq_logits_n_vocab(const vq_logits_file *f);
int vq_logits_ctx(const vq_logits_file *f);
uint64_t vq_logits_n_records(const vq_logits_file *f);
uint64_t vq_logits_token_hash(const vq_logits_file *f);
/* Appends (writer) / reads the next (reader) record. IO on a write error; NOT_FOUND at the end
 * of a reader; BAD_FORMAT for a record that fails validation (ids out of range, non-finite). */
vq_status vq_logits_write(vq_logits_file *f, const struct vq_logit_rec *r);
vq_status vq_logits_read(vq_logits_file *f, struct vq_logit_rec *r);
/* Finishes a writer (record count and hash, fsync) and closes; closes a reader. Returns IO if
 * finishing failed or path became something other than a regular file meanwhile (nothing is
 * replaced then). NULL is a no-op. */
vq_status vq_logits_close(vq_logits_file *f);
/* Abandons a writer: closes it and removes its temporary file (the path is never created or
 * replaced). For a reader, same as vq_logits_close. NULL is a no-op. */
void vq_logits_discard(vq_logits_file *f);

/* FNV-1a 64 step over one u32 (little-endian bytes). */
uint64_t vq_logits_hash_u32(uint64_t h, uint32_t v);
#define VQ_LOGITS_HASH_INIT 0xcbf29ce484222325ull

#endif
