/* mem.c — 64-byte aligned, zero-initialised allocation. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Returns a zeroed block of at least `bytes` bytes aligned to 64 bytes, or NULL when out of
 * memory. bytes == 0 allocates a minimal block (never NULL on success). Caller-owned; release
 * with vq_free. Thread-safe. */
void *vq_alloc(size_t bytes) {
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) return NULL; /* overflow */
    if (n == 0) n = 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, n) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

/* Releases a block from vq_alloc; NULL is a no-op. Thread-safe. */
void vq_free(void *p) { free(p); }
