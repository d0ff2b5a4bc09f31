/*
 * artifact.c — calibration artifact files: serialize / parse (untrusted input), atomic save,
 * load, default paths. Layout (all integers little-endian, floats IEEE binary32/64 LE):
 *
 *   offset  size  field
 *   0       8     magic "VQCALIB\0"
 *   8       4     u32 format version (1)
 *   12      16    method tag, NUL-padded ASCII [a-z0-9_], 1..15 chars
 *   28      32    model sha256 (raw bytes)
 *   60      4     u32 n_layers (1..4096)
 *   64      4     u32 head_dim (8..1024, multiple of 8)
 *   68      24    u32 params[6] (method parameters, informational)
 *   92      4     u32 n_records
 *   96      8     u64 payload_len (bytes of the records)
 *   104     ...   records, each: u32 kind, u32 layer, u32 role, u32 n0, u32 n1, data
 *                   kind 1 SMOOTH   (layer, key):   n0 = head_dim, n1 = 1; f32[d], each > 0
 *                   kind 2 CODEBOOK (layer, role):  n0 = 2^c (2..4096), n1 = v (1..16, divides
 *                                                   head_dim); f32[n0 * n1]
 *                   kind 3 PCA      (layer, role):  n0 = head_dim, n1 = d_s (1..d);
 *                                                   f32[d * d] (U row-major) then f32[d]
 *                                                   (eigenvalues, >= 0)
 *                   kind 4 SENS     (layer 0, role 0): n0 = n_layers, n1 = 1; f64[n_layers],
 *                                                   each finite > 0 or NaN (= not fitted)
 *   104+P   8     u64 FNV-1a 64 of bytes [0, 104 + P)
 *
 * Every float must be finite (except the NaN marker of SENS); a (kind, layer, role) appears
 * at most once; a key codebook comes with its smoothing factors and only keys have them.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "core/fileio.h"

#define REC_HEAD 20u

/* ---- little-endian helpers ------------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}
static float rdf(const uint8_t *p) {
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double rdd(const uint8_t *p) {
    uint64_t u = rd64(p);
    double f;
    memcpy(&f, &u, 8);
    return f;
}
static void wrf(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    wr32(p, u);
}
static void wrd(uint8_t *p, double f) {
    uint64_t u;
    memcpy(&u, &f, 8);
    wr64(p, u);
}

uint64_t vq_fnv1a64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int valid_tag_(const char *m) {
    if (!m) return 0;
    size_t n = strlen(m);
    if (n < 1 || n > 15) return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = m[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* ---- serialize ------------------------------------------------------------------------------- */

static size_t rec_bytes_(int kind, uint32_t n0, uint32_t n1, int d) {
    switch (kind) {
    case VQ_CALIB_KIND_SMOOTH: return REC_HEAD + 4u * n0;
    case VQ_CALIB_KIND_CODEBOOK: return REC_HEAD + 4u * (size_t)n0 * n1;
    case VQ_CALIB_KIND_PCA: return REC_HEAD + 4u * ((size_t)d * d + (size_t)d);
    case VQ_CALIB_KIND_SENS: return REC_HEAD + 8u * n0;
    default: return 0;
    }
}

static uint8_t *put_rec_(uint8_t *p, int kind, int layer, int role, uint32_t n0, uint32_t n1) {
    wr32(p, (uint32_t)kind);
    wr32(p + 4, (uint32_t)layer);
    wr32(p + 8, (uint32_t)role);
    wr32(p + 12, n0);
    wr32(p + 16, n1);
    return p + REC_HEAD;
}

vq_status vq_calib_serialize(const vq_calib_data *cd, const char *method,
                             const uint8_t model_sha256[32], const uint32_t params[6],
                             uint8_t **out, size_t *out_len) {
    if (!cd || !model_sha256 || !out || !out_len || !valid_tag_(method))
        return VQ_STATUS_INVALID_ARG;
    const int d = cd->head_dim;
    size_t payload = 0;
    uint32_t n_rec = 0;
    int has_sens = 0;
    for (int l = 0; l < cd->n_layers; l++) {
        for (int r = 0; r < 2; r++) {
            const struct vq_calib_lr *e = &cd->lr[l * 2 + r];
            if (e->smooth) {
                payload += rec_bytes_(VQ_CALIB_KIND_SMOOTH, (uint32_t)d, 1, d);
                n_rec++;
            }
            if (e->codebook) {
                payload += rec_bytes_(VQ_CALIB_KIND_CODEBOOK, (uint32_t)e->cb_k, (uint32_t)e->cb_v,
                                      d);
                n_rec++;
            }
            if (e->pca_u) {
                payload += rec_bytes_(VQ_CALIB_KIND_PCA, (uint32_t)d, (uint32_t)e->pca_ds, d);
                n_rec++;
            }
        }
        if (!isnan(cd->sens[l])) has_sens = 1;
    }
    if (has_sens) {
        payload += rec_bytes_(VQ_CALIB_KIND_SENS, (uint32_t)cd->n_layers, 1, d);
        n_rec++;
    }
    const size_t total = VQ_CALIB_HEADER_BYTES + payload + VQ_CALIB_TRAILER_BYTES;
    if (total > VQ_CALIB_MAX_FILE) return VQ_STATUS_RANGE;
    uint8_t *buf = vq_alloc(total);
    if (!buf) return VQ_STATUS_NO_MEMORY;
    memcpy(buf, VQ_CALIB_MAGIC, 8);
    wr32(buf + 8, VQ_CALIB_FORMAT_VERSION);
    memcpy(buf + 12, method, strlen(method)); /* rest already zero */
    memcpy(buf + 28, model_sha256, 32);
    wr32(buf + 60, (uint32_t)cd->n_layers);
    wr32(buf + 64, (uint32_t)d);
    for (int i = 0; i < 6; i++) wr32(buf + 68 + 4 * i, params ? params[i] : 0u);
    wr32(buf + 92, n_rec);
    wr64(buf + 96, (uint64_t)payload);
    uint8_t *p = buf + VQ_CALIB_HEADER_BYTES;
    for (int l = 0; l < cd->n_layers; l++) {
        for (int r = 0; r < 2; r++) {
            const struct vq_calib_lr *e = &cd->lr[l * 2 + r];
            if (e->smooth) {
                p = put_rec_(p, VQ_CALIB_KIND_SMOOTH, l, r, (uint32_t)d, 1);
                for (int i = 0; i < d; i++, p += 4) wrf(p, e->smooth[i]);
            }
            if (e->codebook) {
                p = put_rec_(p, VQ_CALIB_KIND_CODEBOOK, l, r, (uint32_t)e->cb_k, (uint32_t)e->cb_v);
                for (int i = 0; i < e->cb_k * e->cb_v; i++, p += 4) wrf(p, e->codebook[i]);
            }
            if (e->pca_u) {
                p = put_rec_(p, VQ_CALIB_KIND_PCA, l, r, (uint32_t)d, (uint32_t)e->pca_ds);
                for (int i = 0; i < d * d; i++, p += 4) wrf(p, e->pca_u[i]);
                for (int i = 0; i < d; i++, p += 4) wrf(p, e->pca_lambda[i]);
            }
        }
    }
    if (has_sens) {
        p = put_rec_(p, VQ_CALIB_KIND_SENS, 0, 0, (uint32_t)cd->n_layers, 1);
        for (int l = 0; l < cd->n_layers; l++, p += 8) wrd(p, cd->sens[l]);
    }
    VQ_ASSERT((size_t)(p - buf) == VQ_CALIB_HEADER_BYTES + payload);
    wr64(p, vq_fnv1a64(VQ_FNV64_INIT, buf, VQ_CALIB_HEADER_BYTES + payload));
    *out = buf;
    *out_len = total;
    return VQ_STATUS_OK;
}

/* ---- parse (untrusted) ----------------------------------------------------------------------- */

static vq_calib_data *parse_fail_(vq_calib_data *cd, vq_status *st, vq_status code) {
    vq_calib_data_free(cd);
    if (st) *st = code;
    return NULL;
}

static float *read_floats_(const uint8_t *p, size_t n, int positive, int nonneg) {
    float *f = vq_alloc(n * sizeof(float));
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) {
        f[i] = rdf(p + 4 * i);
        if (!isfinite(f[i]) || (positive && !(f[i] > 0.0f)) || (nonneg && f[i] < 0.0f)) {
            vq_free(f);
            return (float *)(uintptr_t)1; /* invalid marker, never dereferenced */
        }
    }
    return f;
}
#define BAD_FLOATS ((float *)(uintptr_t)1)

vq_calib_data *vq_calib_parse(const uint8_t *buf, size_t len, const char *method,
                              const uint8_t model_sha256[32], uint32_t *params_out, vq_status *st) {
    if (!buf) return parse_fail_(NULL, st, VQ_STATUS_INVALID_ARG);
    if (len < VQ_CALIB_HEADER_BYTES + VQ_CALIB_TRAILER_BYTES || len > VQ_CALIB_MAX_FILE)
        return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    if (memcmp(buf, VQ_CALIB_MAGIC, 8) != 0) return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    const uint32_t version = rd32(buf + 8);
    if (version == 0) return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    if (version > VQ_CALIB_FORMAT_VERSION) return parse_fail_(NULL, st, VQ_STATUS_UNSUPPORTED);
    const uint64_t payload = rd64(buf + 96);
    if (payload != (uint64_t)(len - VQ_CALIB_HEADER_BYTES - VQ_CALIB_TRAILER_BYTES))
        return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    const size_t body = VQ_CALIB_HEADER_BYTES + (size_t)payload;
    if (rd64(buf + body) != vq_fnv1a64(VQ_FNV64_INIT, buf, body))
        return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    /* header tag: NUL-padded, valid characters */
    char tag[17];
    memcpy(tag, buf + 12, 16);
    tag[16] = '\0';
    for (size_t i = strlen(tag); i < 16; i++)
        if (tag[i] != '\0') return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    if (!valid_tag_(tag)) return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    if (method && strcmp(method, tag) != 0) return parse_fail_(NULL, st, VQ_STATUS_NOT_FOUND);
    if (model_sha256 && memcmp(model_sha256, buf + 28, 32) != 0)
        return parse_fail_(NULL, st, VQ_STATUS_NOT_FOUND);
    const uint32_t n_layers = rd32(buf + 60), d = rd32(buf + 64), n_rec = rd32(buf + 92);
    if (n_layers < 1 || n_layers > VQ_CALIB_MAX_LAYERS || d < 8 || d > 1024 || d % 8 != 0)
        return parse_fail_(NULL, st, VQ_STATUS_BAD_FORMAT);
    vq_status s;
    vq_calib_data *cd = vq_calib_data_create((int)n_layers, (int)d, &s);
    if (!cd) return parse_fail_(NULL, st, s);
    if (params_out)
        for (int i = 0; i < 6; i++) params_out[i] = rd32(buf + 68 + 4 * i);

    const uint8_t *p = buf + VQ_CALIB_HEADER_BYTES, *end = buf + body;
    int have_sens = 0;
    for (uint32_t r = 0; r < n_rec; r++) {
        if ((size_t)(end - p) < REC_HEAD) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
        const uint32_t kind = rd32(p), layer = rd32(p + 4), role = rd32(p + 8);
        const uint32_t n0 = rd32(p + 12), n1 = rd32(p + 16);
        if (layer >= n_layers || role > 1) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
        struct vq_calib_lr *e = &cd->lr[layer * 2 + role];
        size_t need;
        switch (kind) {
        case VQ_CALIB_KIND_SMOOTH:
            if (n0 != d || n1 != 1 || role != VQ_ROLE_KEY || e->smooth)
                return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            break;
        case VQ_CALIB_KIND_CODEBOOK:
            if (n0 < 2 || n0 > 4096 || (n0 & (n0 - 1)) != 0 || n1 < 1 || n1 > 16 || d % n1 != 0 ||
                e->codebook)
                return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            break;
        case VQ_CALIB_KIND_PCA:
            if (n0 != d || n1 < 1 || n1 > d || e->pca_u)
                return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            break;
        case VQ_CALIB_KIND_SENS:
            if (layer != 0 || role != 0 || n0 != n_layers || n1 != 1 || have_sens)
                return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            break;
        default: return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
        }
        need = rec_bytes_((int)kind, n0, n1, (int)d);
        if ((size_t)(end - p) < need) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
        const uint8_t *data = p + REC_HEAD;
        float *f;
        switch (kind) {
        case VQ_CALIB_KIND_SMOOTH:
            f = read_floats_(data, d, 1, 0);
            if (!f) return parse_fail_(cd, st, VQ_STATUS_NO_MEMORY);
            if (f == BAD_FLOATS) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            e->smooth = f;
            break;
        case VQ_CALIB_KIND_CODEBOOK:
            f = read_floats_(data, (size_t)n0 * n1, 0, 0);
            if (!f) return parse_fail_(cd, st, VQ_STATUS_NO_MEMORY);
            if (f == BAD_FLOATS) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            e->codebook = f;
            e->cb_k = (int)n0;
            e->cb_v = (int)n1;
            break;
        case VQ_CALIB_KIND_PCA:
            f = read_floats_(data, (size_t)d * d, 0, 0);
            if (!f) return parse_fail_(cd, st, VQ_STATUS_NO_MEMORY);
            if (f == BAD_FLOATS) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            e->pca_u = f;
            e->pca_ds = (int)n1;
            f = read_floats_(data + 4 * (size_t)d * d, d, 0, 1);
            if (!f) return parse_fail_(cd, st, VQ_STATUS_NO_MEMORY);
            if (f == BAD_FLOATS) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
            e->pca_lambda = f;
            break;
        default: /* SENS */
            for (uint32_t l = 0; l < n_layers; l++) {
                const double v = rdd(data + 8 * (size_t)l);
                if (!isnan(v) && !(isfinite(v) && v > 0.0))
                    return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
                cd->sens[l] = v;
            }
            have_sens = 1;
            break;
        }
        p += need;
    }
    if (p != end) return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
    /* cross-record consistency: key codebooks come with smoothing factors */
    for (uint32_t l = 0; l < n_layers; l++) {
        const struct vq_calib_lr *k = &cd->lr[l * 2 + VQ_ROLE_KEY];
        if ((k->smooth != NULL) != (k->codebook != NULL))
            return parse_fail_(cd, st, VQ_STATUS_BAD_FORMAT);
    }
    if (st) *st = VQ_STATUS_OK;
    return cd;
}

/* ---- files ----------------------------------------------------------------------------------- */

/* mkdir -p of the folder part of path (everything before the last '/'). */
static vq_status mkdirs_(const char *path) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 1);
    if (!tmp) return VQ_STATUS_NO_MEMORY;
    memcpy(tmp, path, n + 1);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) {
        free(tmp);
        return VQ_STATUS_OK;
    }
    *slash = '\0';
    for (char *q = tmp + 1;; q++) {
        const int last = *q == '\0';
        if (*q == '/' || last) {
            const char saved = *q;
            *q = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                const int err = errno;
                free(tmp);
                errno = err;
                return VQ_STATUS_IO;
            }
            *q = saved;
        }
        if (last) break;
    }
    free(tmp);
    return VQ_STATUS_OK;
}

vq_status vq_calib_data_save(const vq_calib_data *cd, const char *path, const char *method,
                             const uint8_t model_sha256[32], const uint32_t params[6]) {
    if (!cd || !path || !*path) return VQ_STATUS_INVALID_ARG;
    uint8_t *buf = NULL;
    size_t len = 0;
    VQ_RETURN_IF_ERR(vq_calib_serialize(cd, method, model_sha256, params, &buf, &len));
    vq_status s = vq_calib_write_atomic(path, buf, len);
    const int err = errno;
    vq_free(buf);
    errno = err; /* IO: the cause, for the caller's message */
    return s;
}

vq_status vq_calib_write_atomic(const char *path, const uint8_t *buf, size_t len) {
    vq_file_error_clear(); /* a failed mkdir below leaves no older reason in place */
    if (!path || !*path || (!buf && len)) return VQ_STATUS_INVALID_ARG;
    vq_status s = mkdirs_(path);
    if (s != VQ_STATUS_OK) return s;
    /* never rename over a device node, FIFO, socket or folder (nor a symlink to one) */
    VQ_RETURN_IF_ERR(vq_file_check_output(path));
    const size_t pl = strlen(path);
    char *tmp = malloc(pl + 40);
    if (!tmp) return VQ_STATUS_NO_MEMORY;
    static unsigned counter_ = 0; /* uniqueness within a process; races only weaken it */
    snprintf(tmp, pl + 40, "%s.tmp.%ld.%u", path, (long)getpid(),
             __atomic_fetch_add(&counter_, 1u, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        const int e = errno;
        free(tmp);
        errno = e;
        return VQ_STATUS_IO;
    }
    size_t off = 0;
    int err = 0; /* errno of the first failure */
    s = VQ_STATUS_OK;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s = VQ_STATUS_IO;
            err = w < 0 ? errno : ENOSPC;
            break;
        }
        off += (size_t)w;
    }
    if (s == VQ_STATUS_OK && fsync(fd) != 0) {
        s = VQ_STATUS_IO;
        err = errno;
    }
    if (close(fd) != 0 && s == VQ_STATUS_OK) {
        s = VQ_STATUS_IO;
        err = errno;
    }
    if (s == VQ_STATUS_OK && vq_file_check_output(path) != VQ_STATUS_OK) {
        s = VQ_STATUS_IO;
        err = errno;
    }
    if (s == VQ_STATUS_OK && rename(tmp, path) != 0) {
        s = VQ_STATUS_IO;
        err = errno;
    }
    if (s != VQ_STATUS_OK) unlink(tmp);
    if (s == VQ_STATUS_OK) { /* make the rename durable: fsync the folder (best effort) */
        char *dir = malloc(pl + 2);
        if (dir) {
            memcpy(dir, path, pl + 1);
            char *sl = strrchr(dir, '/');
            if (sl == dir) sl[1] = '\0';
            else if (sl) *sl = '\0';
            else {
                dir[0] = '.';
                dir[1] = '\0';
            }
            int dfd = open(dir, O_RDONLY);
            if (dfd >= 0) {
                (void)fsync(dfd);
                close(dfd);
            }
            free(dir);
        }
    }
    free(tmp);
    if (s == VQ_STATUS_IO) errno = err;
    return s;
}

vq_status vq_calib_read_file(const char *path, uint8_t **out, size_t *out_len) {
    if (!path || !out || !out_len) return VQ_STATUS_INVALID_ARG;
    *out = NULL;
    *out_len = 0;
    /* regular files only, opened without blocking: a FIFO in the artifact cache would
     * otherwise stall every run that looks the artifact up */
    int fd;
    uint64_t size;
    const vq_status os = vq_file_open_input(path, VQ_CALIB_MAX_FILE, "artifact", &fd, &size);
    if (os != VQ_STATUS_OK) return os == VQ_STATUS_RANGE ? VQ_STATUS_BAD_FORMAT : os;
    const size_t len = (size_t)size;
    uint8_t *buf = vq_alloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return VQ_STATUS_NO_MEMORY;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t r = read(fd, buf + off, len - off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            close(fd);
            vq_free(buf);
            return VQ_STATUS_IO;
        }
        if (r == 0) break;
        off += (size_t)r;
    }
    close(fd);
    *out = buf;
    *out_len = off; /* a file that shrank while reading is the truncated file it is */
    return VQ_STATUS_OK;
}

vq_calib_data *vq_calib_data_load(const char *path, const char *method,
                                  const uint8_t model_sha256[32], vq_status *st) {
    if (!path) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    vq_status rs = vq_calib_read_file(path, &buf, &len);
    if (rs != VQ_STATUS_OK) {
        if (st) *st = rs;
        return NULL;
    }
    /* a file that shrank while reading is parsed as the truncated file it is */
    vq_calib_data *cd = vq_calib_parse(buf, len, method, model_sha256, NULL, st);
    vq_free(buf);
    return cd;
}

static int valid_name_(const char *m) {
    if (!m) return 0;
    const size_t n = strlen(m);
    if (n < 1 || n > 63 || m[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = m[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

vq_status vq_calib_artifact_path(const char *method, const uint8_t model_sha256[32],
                                 const char *name, char *buf, size_t cap) {
    if (!valid_name_(method) || !valid_name_(name) || !model_sha256 || !buf)
        return VQ_STATUS_INVALID_ARG;
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", model_sha256[i]);
    const char *root = getenv("VQ_CACHE_DIR");
    int n;
    if (root && *root) {
        n = snprintf(buf, cap, "%s/%s/%s/%s.vqcal", root, method, hex, name);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) return VQ_STATUS_NOT_FOUND;
        n = snprintf(buf, cap, "%s/.cache/veloxquant/%s/%s/%s.vqcal", home, method, hex, name);
    }
    if (n < 0 || (size_t)n >= cap) return VQ_STATUS_RANGE;
    return VQ_STATUS_OK;
}
