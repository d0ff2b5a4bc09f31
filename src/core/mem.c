/* mem.c — 64-byte aligned, zero-initialised allocation; lazily committed mappings; mappings
 * advised for transparent huge pages. */
#include <stdint.h>
#include <stdio.h>
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

void *vq_map_sparse(size_t bytes) {
    void *p = vq_map(bytes);
#if defined(VQ_HAVE_MMAP) && defined(MADV_NOHUGEPAGE)
    if (p) (void)madvise(p, bytes, MADV_NOHUGEPAGE); /* advice only: no error to report */
#endif
    return p;
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

int vq_huge_pages(void) {
#if defined(VQ_HAVE_MMAP) && defined(MADV_HUGEPAGE)
    /* "always [madvise] never": the bracketed word is the mode */
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char buf[128] = {0};
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") != NULL || strstr(buf, "[madvise]") != NULL;
#else
    return 0;
#endif
}

void *vq_map_huge(size_t bytes) {
#if defined(VQ_HAVE_MMAP) && defined(MADV_HUGEPAGE)
    const size_t H = (size_t)2 << 20;
    if (bytes == 0 || bytes > SIZE_MAX - H) return NULL;
    const size_t len = (bytes + 4095) & ~(size_t)4095;
    uint8_t *raw = mmap(NULL, len + H, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    /* keep [a, a + len) with a on a 2 MiB boundary; give back the head and the tail */
    uint8_t *a = (uint8_t *)(((uintptr_t)raw + H - 1) & ~(uintptr_t)(H - 1));
    if (a > raw) munmap(raw, (size_t)(a - raw));
    const size_t tail = (size_t)(raw + len + H - (a + len));
    if (tail) munmap(a + len, tail);
    if (madvise(a, len, MADV_HUGEPAGE) != 0) {
        munmap(a, len);
        return NULL;
    }
    return a;
#else
    (void)bytes;
    return NULL;
#endif
}
