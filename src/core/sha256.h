/*
 * sha256.h — SHA-256 (FIPS 180-4) of memory and files, for results.json model identity.
 * Not part of the public API. Thread-safe (no shared state).
 */
#ifndef VQ_CORE_SHA256_H
#define VQ_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

struct vq_sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t buf[64];
    size_t n; /* bytes in buf */
};

void vq_sha256_init(struct vq_sha256 *s);
void vq_sha256_update(struct vq_sha256 *s, const void *data, size_t len);
void vq_sha256_final(struct vq_sha256 *s, uint8_t out[32]);
/* Hashes a whole regular file into 64 lowercase hex digits + NUL; IO if it cannot be read or
 * is not a regular file (a FIFO, a directory, a device: refused without blocking). */
vq_status vq_sha256_file(const char *path, char hex[65]);
/* Parses exactly 64 hex digits (either case) into 32 bytes; returns 1, or 0 (out undefined)
 * for NULL, another length or a non-hex character. Pure, thread-safe. */
int vq_sha256_from_hex(const char *hex, uint8_t out[32]);

#endif
