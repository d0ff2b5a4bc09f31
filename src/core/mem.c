/* mem.c — 64-byte aligned, zero-initialised allocation; lazily committed mappings. */
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define VQ_HAVE_MMAP 1
#endif

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

void *vq_map(size_t bytes) {
    if (bytes == 0) return NULL;
#ifdef VQ_HAVE_MMAP
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return vq_alloc(bytes);
#endif
}

void vq_unmap(void *p, size_t bytes) {
    if (!p) return;
#ifdef VQ_HAVE_MMAP
    munmap(p, bytes);
#else
    (void)bytes;
    vq_free(p);
#endif
}
