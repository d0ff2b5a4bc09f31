/* test_core_isa.c — ISA detection and the $VQ_ISA override (each case in a forked child so
 * the once-only initialisation starts fresh), the weight kernels' prefetch distance and
 * $VQ_PF_BYTES, names, resolve rules, aligned zeroed allocation,
 * huge-page mappings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "core/core.h"

/* Runs vq_isa_default() in a child with VQ_ISA=env; returns the ISA (or -1 on failure). */
static int child_default(const char *env) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (env) setenv("VQ_ISA", env, 1);
        else unsetenv("VQ_ISA");
        unsigned char v = (unsigned char)vq_isa_default();
        ssize_t w = write(fds[1], &v, 1);
        _exit(w == 1 ? 0 : 1);
    }
    close(fds[1]);
    unsigned char v = 255;
    ssize_t rd = read(fds[0], &v, 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return rd == 1 ? v : -1;
}

/* Runs vq_cpu_stream_prefetch() in a child with VQ_PF_BYTES=env; returns it (0 on failure). */
static size_t child_pf(const char *env) {
    int fds[2];
    if (pipe(fds) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (env) setenv("VQ_PF_BYTES", env, 1);
        else unsetenv("VQ_PF_BYTES");
        size_t v = vq_cpu_stream_prefetch();
        ssize_t w = write(fds[1], &v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(fds[1]);
    size_t v = 0;
    ssize_t rd = read(fds[0], &v, sizeof v);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return rd == (ssize_t)sizeof v ? v : 0;
}

static int best_avail(void) {
    return vq_isa_available(VQ_ISA_AVX512) ? VQ_ISA_AVX512
         : vq_isa_available(VQ_ISA_AVX2)   ? VQ_ISA_AVX2
                                           : VQ_ISA_SCALAR;
}

static int r_none, r_scalar, r_generic, r_avx2, r_avx512, r_bogus;

TEST(env_override) {
    int best = best_avail();
    ASSERT_EQ_INT(r_none, best);
    ASSERT_EQ_INT(r_scalar, VQ_ISA_SCALAR);
    ASSERT_EQ_INT(r_generic, VQ_ISA_SCALAR);
    ASSERT_EQ_INT(r_avx2, vq_isa_available(VQ_ISA_AVX2) ? VQ_ISA_AVX2 : VQ_ISA_SCALAR);
    ASSERT_EQ_INT(r_avx512, best);
    ASSERT_EQ_INT(r_bogus, best);
}

/* the CPU's choice (2048, or 6144 on AMD Zen 5 and later), a whole line, $VQ_PF_BYTES in
 * 64 .. 65536 rounded down to one, anything else ignored */
static const char *const pf_env[8] = {NULL, "4096", "100", "65536", "63", "70000", "8k", ""};
static size_t pf_got[8];

TEST(stream_prefetch) {
    const size_t def = pf_got[0];
    ASSERT(def == 2048 || def == 6144);
    ASSERT(pf_got[1] == 4096);
    ASSERT(pf_got[2] == 64);
    ASSERT(pf_got[3] == 65536);
    for (int i = 4; i < 8; i++) ASSERT(pf_got[i] == def);
}

TEST(names_and_resolve) {
    ASSERT(strcmp(vq_isa_name(VQ_ISA_SCALAR), "scalar") == 0);
    ASSERT(strcmp(vq_isa_name(VQ_ISA_AVX2), "avx2") == 0);
    ASSERT(strcmp(vq_isa_name(VQ_ISA_AVX512), "avx512") == 0);
    ASSERT(strcmp(vq_isa_name(VQ_ISA_AUTO), "auto") == 0);
    ASSERT(vq_isa_available(VQ_ISA_SCALAR));
    ASSERT(!vq_isa_available(VQ_ISA_COUNT));
    ASSERT(vq_isa_available(vq_isa_default()));
    ASSERT_EQ_INT(vq_isa_resolve(VQ_ISA_AUTO), vq_isa_default());
    ASSERT_EQ_INT(vq_isa_resolve(VQ_ISA_SCALAR), VQ_ISA_SCALAR);
    for (int i = VQ_ISA_SCALAR; i < VQ_ISA_COUNT; i++)
        ASSERT_EQ_INT(vq_isa_resolve((enum vq_isa)i),
                      vq_isa_available((enum vq_isa)i) ? i : VQ_ISA_SCALAR);
    /* AVX-512 implies AVX2 in our feature sets */
    if (vq_isa_available(VQ_ISA_AVX512)) ASSERT(vq_isa_available(VQ_ISA_AVX2));
    fprintf(stderr, "isa: default %s, avx2 %d, avx512 %d\n", vq_isa_name(vq_isa_default()),
            vq_isa_available(VQ_ISA_AVX2), vq_isa_available(VQ_ISA_AVX512));
}

TEST(alloc) {
    for (size_t n = 0; n < 5000; n = n * 3 + 1) {
        unsigned char *p = (unsigned char *)vq_alloc(n);
        ASSERT(p != NULL);
        ASSERT_EQ_INT((uintptr_t)p % 64, 0);
        int nz = 0;
        for (size_t i = 0; i < n; i++) nz += p[i] != 0;
        ASSERT_EQ_INT(nz, 0);
        vq_free(p);
    }
    vq_free(NULL);
    ASSERT(vq_alloc(SIZE_MAX - 10) == NULL);
}

/* vq_map_huge: 2 MiB aligned, zeroed, writable over every byte asked for (odd sizes), NULL
 * for 0 and for sizes that cannot be mapped; where the OS gives huge pages (vq_huge_pages) a
 * mapping must come back. The huge pages themselves are the OS's to give (not asserted). */
TEST(map_huge) {
    const size_t sizes[] = {1, 4095, 4097, (size_t)2 << 20, ((size_t)5 << 20) + 123};
    int mapped = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        unsigned char *p = (unsigned char *)vq_map_huge(n);
        if (!p) continue;
        mapped++;
        ASSERT_EQ_INT((uintptr_t)p % ((uintptr_t)2 << 20), 0);
        int nz = 0;
        for (size_t i = 0; i < n; i += 997) nz += p[i] != 0;
        nz += p[n - 1] != 0;
        ASSERT_EQ_INT(nz, 0);
        memset(p, 0xA5, n);
        ASSERT(p[0] == 0xA5 && p[n - 1] == 0xA5);
        vq_unmap(p, n);
    }
    if (vq_huge_pages()) ASSERT_EQ_INT(mapped, (int)(sizeof sizes / sizeof sizes[0]));
    ASSERT(vq_map_huge(0) == NULL);
    ASSERT(vq_map_huge(SIZE_MAX - 10) == NULL);
    fprintf(stderr, "map_huge: huge pages %s, %d of 5 mapped\n", vq_huge_pages() ? "on" : "off",
            mapped);
}

TEST(describe) {
    char line[256], small[8];
    const int n = vq_cpu_describe(line, sizeof line);
    ASSERT(n > 0 && (size_t)n == strlen(line));
    ASSERT(strstr(line, "; kernels: ") != NULL);
    ASSERT(strstr(line, vq_isa_name(vq_isa_default())) != NULL);
    /* truncated, NUL-terminated, the full length returned */
    memset(small, 'x', sizeof small);
    ASSERT(vq_cpu_describe(small, sizeof small) == n);
    ASSERT(small[7] == 0 && strlen(small) == 7 && !strncmp(small, line, 7));
    ASSERT(vq_cpu_describe(NULL, 0) == n);
}

int main(void) {
    /* Children first: the parent must not have initialised the dispatch yet. */
    r_none = child_default(NULL);
    r_scalar = child_default("scalar");
    r_generic = child_default("generic");
    r_avx2 = child_default("avx2");
    r_avx512 = child_default("avx512");
    r_bogus = child_default("sse9");
    for (int i = 0; i < 8; i++) pf_got[i] = child_pf(pf_env[i]);
    unsetenv("VQ_ISA");
    RUN(env_override);
    RUN(stream_prefetch);
    RUN(names_and_resolve);
    RUN(alloc);
    RUN(map_huge);
    RUN(describe);
    return TEST_REPORT();
}
