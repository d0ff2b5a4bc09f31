/* cpu.c — CPU feature detection (cpuid + xgetbv), the process-wide ISA choice, and the
 * monotonic clock. The only mutable global state of the library: the detected features and the
 * default variant, computed once under pthread_once. */
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

#if defined(VQ_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define VQ_CPU_X86 1
#endif

static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;
static int g_avail[VQ_ISA_COUNT];
static int g_vbmi; /* AVX512_VBMI on top of VQ_ISA_AVX512 */
static int g_vnni; /* AVX512_VNNI on top of VQ_ISA_AVX512 */
static enum vq_isa g_default = VQ_ISA_SCALAR;
static size_t g_stream_pf = 2048; /* vq_cpu_stream_prefetch */

#ifdef VQ_CPU_X86
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect_x86(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    int popcnt = (c >> 23) & 1;
    if (!osxsave || !avx) return;
    uint64_t xcr0 = xgetbv0();
    int os_avx = (xcr0 & 0x6) == 0x6;
    int os_avx512 = (xcr0 & 0xE6) == 0xE6;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    int avx2 = (b >> 5) & 1, bmi2 = (b >> 8) & 1;
    int f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (os_avx && avx2 && fma && f16c && bmi2 && popcnt) {
        g_avail[VQ_ISA_AVX2] = 1;
        if (os_avx512 && f512 && dq && bw && vl) {
            g_avail[VQ_ISA_AVX512] = 1;
            g_vbmi = (c >> 1) & 1;  /* CPUID.(7,0).ECX[1] */
            g_vnni = (c >> 11) & 1; /* CPUID.(7,0).ECX[11] */
        }
    }
}
#endif

#ifdef VQ_CPU_X86
/* The display family of CPUID leaf 1's EAX (the extended field folded in as Intel and AMD
 * document it). */
static unsigned x86_family(unsigned eax) {
    const unsigned base = (eax >> 8) & 0xf;
    return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
}
#endif

/* The weight kernels' prefetch distance (vq_cpu_stream_prefetch): 6144 bytes on AMD family
 * 26 and later (Zen 5), 2048 elsewhere; $VQ_PF_BYTES (64 .. 65536, rounded down to a whole
 * line) overrides. Measured on Qwen2.5 1.5B decode steps (docs/ALGORITHMS.md §9.19): on the Intel
 * Xeon VM 2048 streams at 97 % of a plain read and 4096 at 65 %; on the Zen 5 VM 2048 gave 33.5
 * ms a step on one thread, 6144 30.3 and 8192 30.0 (two threads 25.7 / 24.2 / 25.4). */
static void stream_pf_init(void) {
#ifdef VQ_CPU_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u &&
        c == 0x444d4163u && __get_cpuid(1, &a, &b, &c, &d) && x86_family(a) >= 26)
        g_stream_pf = 6144; /* "AuthenticAMD", Zen 5 or later */
#endif
    const char *env = getenv("VQ_PF_BYTES");
    if (env && *env) {
        char *end;
        const long v = strtol(env, &end, 10);
        if (!*end && v >= 64 && v <= 65536) g_stream_pf = (size_t)v / 64 * 64;
    }
}

static void isa_init(void) {
    g_avail[VQ_ISA_SCALAR] = 1;
#ifdef VQ_CPU_X86
    detect_x86();
#endif
    stream_pf_init();
    enum vq_isa best = VQ_ISA_SCALAR;
    if (g_avail[VQ_ISA_AVX2]) best = VQ_ISA_AVX2;
    if (g_avail[VQ_ISA_AVX512]) best = VQ_ISA_AVX512;
    const char *env = getenv("VQ_ISA");
    if (env && *env) {
        enum vq_isa want = best;
        if (!strcmp(env, "scalar") || !strcmp(env, "generic")) want = VQ_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) want = VQ_ISA_AVX2;
        else if (!strcmp(env, "avx512")) want = VQ_ISA_AVX512;
        /* An unavailable request falls back to the best available variant below it. */
        while (want > VQ_ISA_SCALAR && !g_avail[want]) want = (enum vq_isa)(want - 1);
        best = want;
    }
    g_default = best;
}

/* Returns the variant VQ_ISA_AUTO resolves to: $VQ_ISA (scalar|generic|avx2|avx512, clamped
 * to what the CPU supports) or the best available. Thread-safe (computed once). */
enum vq_isa vq_isa_default(void) {
    pthread_once(&g_isa_once, isa_init);
    return g_default;
}

/* 1 if this CPU and build can run `isa` (VQ_ISA_AUTO always counts as available). */
int vq_isa_available(enum vq_isa isa) {
    pthread_once(&g_isa_once, isa_init);
    if (isa == VQ_ISA_AUTO) return 1;
    if ((int)isa < 0 || isa >= VQ_ISA_COUNT) return 0;
    return g_avail[isa];
}

int vq_cpu_avx512vbmi(void) {
    pthread_once(&g_isa_once, isa_init);
    return g_vbmi;
}

int vq_cpu_avx512vnni(void) {
    pthread_once(&g_isa_once, isa_init);
    return g_vnni;
}

size_t vq_cpu_stream_prefetch(void) {
    pthread_once(&g_isa_once, isa_init);
    return g_stream_pf;
}

#ifdef VQ_CPU_X86
/* The brand string (CPUID 0x80000002..4, blanks trimmed) into name[49], and the display family
 * and model (the extended fields folded in as Intel and AMD document them). 0 if the CPU has
 * no brand string. */
static int x86_identity(char name[49], unsigned *family, unsigned *model) {
    unsigned a, b, c, d, r[12];
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned base = (a >> 8) & 0xf;
    *family = x86_family(a);
    *model = (a >> 4) & 0xf;
    if (base == 0x6 || base == 0xf) *model |= ((a >> 16) & 0xf) << 4;
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) return 0;
    for (unsigned i = 0; i < 3; i++)
        __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(name, r, 48);
    name[48] = 0;
    char *s = name;
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ') n--;
    memmove(name, s, n);
    name[n] = 0;
    return n > 0;
}
#endif

int vq_cpu_describe(char *buf, size_t cap) {
    pthread_once(&g_isa_once, isa_init);
    char cpu[96] = "unknown CPU";
#ifdef VQ_CPU_X86
    char name[49];
    unsigned family = 0, model = 0;
    if (x86_identity(name, &family, &model))
        snprintf(cpu, sizeof cpu, "%s (family %u model %u)", name, family, model);
#endif
    const char *extra = "";
    if (g_default == VQ_ISA_AVX512)
        extra = g_vnni && g_vbmi ? " (vnni, vbmi)" : g_vnni ? " (vnni)" : g_vbmi ? " (vbmi)" : "";
    const char *env = getenv("VQ_ISA");
    char forced[48] = "";
    if (env && *env) snprintf(forced, sizeof forced, " (VQ_ISA=%.32s)", env);
    return snprintf(buf, cap, "%s; kernels: %s%s%s", cpu, vq_isa_name(g_default), extra, forced);
}

/* Static name of a variant ("auto", "scalar", "avx2", "avx512"; "unknown" out of range). */
const char *vq_isa_name(enum vq_isa isa) {
    switch (isa) {
    case VQ_ISA_AUTO: return "auto";
    case VQ_ISA_SCALAR: return "scalar";
    case VQ_ISA_AVX2: return "avx2";
    case VQ_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

/* Resolves AUTO to vq_isa_default(); an explicit variant is returned if available, else
 * VQ_ISA_SCALAR. Thread-safe. */
enum vq_isa vq_isa_resolve(enum vq_isa want) {
    if (want == VQ_ISA_AUTO) return vq_isa_default();
    return vq_isa_available(want) ? want : VQ_ISA_SCALAR;
}

int vq_threads_resolve(int n_threads) {
    if (n_threads > 0) return n_threads;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

double vq_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
