/* status.c — status strings, version, and the always-on assertion hook. */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"

const char *vq_version(void) {
#define VQ_STR2_(x) #x
#define VQ_STR_(x) VQ_STR2_(x)
    return VQ_STR_(VQ_VERSION_MAJOR) "." VQ_STR_(VQ_VERSION_MINOR) "." VQ_STR_(VQ_VERSION_PATCH);
}

const char *vq_status_str(vq_status st) {
    switch (st) {
#define VQ_STATUS_CASE_(name, val, str) \
    case VQ_STATUS_##name: return str;
        VQ_STATUS_LIST(VQ_STATUS_CASE_)
#undef VQ_STATUS_CASE_
    default: return "unknown status";
    }
}

void vq_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "veloxquant: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
