/*
 * noamx.c — LD_PRELOAD shim for the golden generators: refuses ggml's request for the AMX tile
 * state (arch_prctl ARCH_REQ_XCOMP_PERM), so that a llama.cpp built with -march=native on a
 * CPU that reports AMX (Intel Xeon 4th gen+) runs its AVX-512 / AVX2 kernels instead of the
 * AMX ones. Two reasons: on the project's VM the AMX instructions trap (SIGILL in
 * tinygemm_kernel_amx on the first matmul), and the AVX-512 kernels are the arithmetic the
 * golden files were made with (an AMD EPYC without AMX; with this shim the Intel machine
 * regenerates smollm2_logits.bin, tokenizer_ids.json and greedy.json byte for byte). Every
 * other syscall() is forwarded unchanged. Not part of the library.
 *
 *   gcc -shared -fPIC -O2 scripts/golden/noamx.c -o /tmp/noamx.so -ldl
 *   LD_PRELOAD=/tmp/noamx.so python3 scripts/golden/gen_golden.py --name gemma3
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

#define ARCH_REQ_XCOMP_PERM 0x1023

long syscall(long n, ...) {
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_arch_prctl && a[0] == ARCH_REQ_XCOMP_PERM) {
        errno = EPERM;
        return -1;
    }
    static long (*real)(long, ...);
    if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
