/*
 * precomp.c — precomputed data-independent tables (`veloxquant precompute`): Lloyd-Max
 * codebooks and RHT sign vectors in the calibration artifact container (artifact.c; layout
 * in docs/FORMAT.md "Precomputed tables"):
 *
 *   header  as a calibration artifact: magic "VQCALIB\0", u32 version 1, tag "precompute",
 *           model sha256 = 32 zero bytes (data-independent), u32 n_layers = 1, u32 head_dim,
 *           u32 params[6] = {seed low 32, seed high 32, n_tables, 0, 0, 0}, u32 n_records,
 *           u64 payload_len
 *   record  u32 kind, u32 a, u32 b, u32 n0, u32 n1, data
 *             kind 16 LLOYD:     a = law (0 GAUSS, 2 SPHERE), b = bits (1..6; SPHERE 1..4),
 *                                n0 = 2^bits, n1 = head_dim for SPHERE else 0;
 *                                f32[n0] centroids (ascending) then f32[n0 - 1] boundaries
 *             kind 17 RHT_SIGNS: a = b = 0, n0 = head_dim, n1 = 0; f32[n0], each +1 or -1
 *   trailer u64 FNV-1a 64 of everything before it
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"

#define TAG_ "precompute"
#define REC_HEAD_ 20u

static uint32_t rd32_(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64_(const uint8_t *p) {
    return (uint64_t)rd32_(p) | (uint64_t)rd32_(p + 4) << 32;
}
static void wr32_(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static void wr64_(uint8_t *p, uint64_t v) {
    wr32_(p, (uint32_t)v);
    wr32_(p + 4, (uint32_t)(v >> 32));
}

static size_t floats_of_(const struct vq_precomp_table *t) {
    return t->kind == VQ_PRECOMP_KIND_LLOYD ? (size_t)(2 * t->n - 1) : (size_t)t->n;
}

void vq_precomp_free(struct vq_precomp *p) {
    if (!p) return;
    for (int i = 0; i < p->n_tables; i++) free(p->t[i].data);
    memset(p, 0, sizeof *p);
}

static vq_status add_lloyd_(struct vq_precomp *p, enum vq_law law, int bits, int d) {
    const float *c, *b;
    VQ_RETURN_IF_ERR(vq_lloyd_max(law, bits, d, &c, &b));
    if (p->n_tables == VQ_PRECOMP_MAX_TABLES) return VQ_STATUS_RANGE;
    struct vq_precomp_table *t = &p->t[p->n_tables];
    t->kind = VQ_PRECOMP_KIND_LLOYD;
    t->law = (int)law;
    t->bits = bits;
    t->n = 1 << bits;
    t->data = malloc(sizeof(float) * (size_t)(2 * t->n - 1));
    if (!t->data) return VQ_STATUS_NO_MEMORY;
    memcpy(t->data, c, sizeof(float) * (size_t)t->n);
    memcpy(t->data + t->n, b, sizeof(float) * (size_t)(t->n - 1));
    p->n_tables++;
    return VQ_STATUS_OK;
}

vq_status vq_precomp_compute(int d, uint64_t seed, const int *bits, int n_bits,
                             struct vq_precomp *out) {
    if (!out) return VQ_STATUS_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (d < 8 || d > 1024 || d % 8 != 0 || !bits || n_bits < 1 || n_bits > 6)
        return VQ_STATUS_INVALID_ARG;
    for (int i = 0; i < n_bits; i++) {
        if (bits[i] < 1 || bits[i] > 6) return VQ_STATUS_INVALID_ARG;
        for (int j = 0; j < i; j++)
            if (bits[j] == bits[i]) return VQ_STATUS_INVALID_ARG;
    }
    out->head_dim = d;
    out->seed = seed;
    vq_status s = VQ_STATUS_OK;
    for (int i = 0; i < n_bits && s == VQ_STATUS_OK; i++)
        s = add_lloyd_(out, VQ_LAW_GAUSS, bits[i], 0);
    for (int i = 0; i < n_bits && s == VQ_STATUS_OK; i++)
        if (bits[i] <= 4) s = add_lloyd_(out, VQ_LAW_SPHERE, bits[i], d);
    if (s == VQ_STATUS_OK) {
        vq_rht r;
        s = vq_rht_init(&r, d, seed);
        if (s == VQ_STATUS_OK) {
            struct vq_precomp_table *t = &out->t[out->n_tables];
            t->kind = VQ_PRECOMP_KIND_RHT_SIGNS;
            t->n = d;
            t->data = malloc(sizeof(float) * (size_t)d);
            if (t->data) {
                memcpy(t->data, r.signs, sizeof(float) * (size_t)d);
                out->n_tables++;
            } else {
                s = VQ_STATUS_NO_MEMORY;
            }
            vq_rht_free(&r);
        }
    }
    if (s != VQ_STATUS_OK) vq_precomp_free(out);
    return s;
}

vq_status vq_precomp_save(const struct vq_precomp *p, const char *path) {
    if (!p || !path || p->n_tables < 1) return VQ_STATUS_INVALID_ARG;
    size_t payload = 0;
    for (int i = 0; i < p->n_tables; i++) payload += REC_HEAD_ + 4u * floats_of_(&p->t[i]);
    const size_t total = VQ_CALIB_HEADER_BYTES + payload + VQ_CALIB_TRAILER_BYTES;
    uint8_t *buf = calloc(1, total);
    if (!buf) return VQ_STATUS_NO_MEMORY;
    memcpy(buf, VQ_CALIB_MAGIC, 8);
    wr32_(buf + 8, VQ_CALIB_FORMAT_VERSION);
    memcpy(buf + 12, TAG_, strlen(TAG_));
    /* 28..59: model sha256, all zero */
    wr32_(buf + 60, 1);
    wr32_(buf + 64, (uint32_t)p->head_dim);
    wr32_(buf + 68, (uint32_t)p->seed);
    wr32_(buf + 72, (uint32_t)(p->seed >> 32));
    wr32_(buf + 76, (uint32_t)p->n_tables);
    wr32_(buf + 92, (uint32_t)p->n_tables);
    wr64_(buf + 96, (uint64_t)payload);
    uint8_t *q = buf + VQ_CALIB_HEADER_BYTES;
    for (int i = 0; i < p->n_tables; i++) {
        const struct vq_precomp_table *t = &p->t[i];
        const int lloyd = t->kind == VQ_PRECOMP_KIND_LLOYD;
        wr32_(q, (uint32_t)t->kind);
        wr32_(q + 4, lloyd ? (uint32_t)t->law : 0u);
        wr32_(q + 8, lloyd ? (uint32_t)t->bits : 0u);
        wr32_(q + 12, (uint32_t)t->n);
        wr32_(q + 16, lloyd && t->law == VQ_LAW_SPHERE ? (uint32_t)p->head_dim : 0u);
        q += REC_HEAD_;
        const size_t nf = floats_of_(t);
        for (size_t k = 0; k < nf; k++, q += 4) {
            uint32_t u;
            memcpy(&u, &t->data[k], 4);
            wr32_(q, u);
        }
    }
    wr64_(q, vq_fnv1a64(VQ_FNV64_INIT, buf, VQ_CALIB_HEADER_BYTES + payload));
    vq_status s = vq_calib_write_atomic(path, buf, total);
    free(buf);
    return s;
}

static vq_status parse_fail_(struct vq_precomp *p, vq_status s) {
    vq_precomp_free(p);
    return s;
}

vq_status vq_precomp_parse(const uint8_t *buf, size_t len, struct vq_precomp *out) {
    if (!buf || !out) return VQ_STATUS_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (len < VQ_CALIB_HEADER_BYTES + VQ_CALIB_TRAILER_BYTES || memcmp(buf, VQ_CALIB_MAGIC, 8) != 0)
        return VQ_STATUS_BAD_FORMAT;
    const uint32_t version = rd32_(buf + 8);
    if (version == 0) return VQ_STATUS_BAD_FORMAT;
    if (version > VQ_CALIB_FORMAT_VERSION) return VQ_STATUS_UNSUPPORTED;
    const uint64_t payload = rd64_(buf + 96);
    if (payload != (uint64_t)(len - VQ_CALIB_HEADER_BYTES - VQ_CALIB_TRAILER_BYTES))
        return VQ_STATUS_BAD_FORMAT;
    const size_t body = VQ_CALIB_HEADER_BYTES + (size_t)payload;
    if (rd64_(buf + body) != vq_fnv1a64(VQ_FNV64_INIT, buf, body)) return VQ_STATUS_BAD_FORMAT;
    char tag[17];
    memcpy(tag, buf + 12, 16);
    tag[16] = 0;
    if (strcmp(tag, TAG_) != 0) return VQ_STATUS_NOT_FOUND;
    for (int i = 28; i < 60; i++)
        if (buf[i]) return VQ_STATUS_BAD_FORMAT;
    const uint32_t d = rd32_(buf + 64), n_rec = rd32_(buf + 92);
    if (rd32_(buf + 60) != 1 || d < 8 || d > 1024 || d % 8 || n_rec < 1 ||
        n_rec > VQ_PRECOMP_MAX_TABLES || rd32_(buf + 76) != n_rec)
        return VQ_STATUS_BAD_FORMAT;
    out->head_dim = (int)d;
    out->seed = (uint64_t)rd32_(buf + 68) | (uint64_t)rd32_(buf + 72) << 32;
    const uint8_t *q = buf + VQ_CALIB_HEADER_BYTES, *end = buf + body;
    int have_signs = 0;
    for (uint32_t r = 0; r < n_rec; r++) {
        if ((size_t)(end - q) < REC_HEAD_) return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
        const uint32_t kind = rd32_(q), a = rd32_(q + 4), b = rd32_(q + 8), n0 = rd32_(q + 12),
                       n1 = rd32_(q + 16);
        struct vq_precomp_table *t = &out->t[out->n_tables];
        if (kind == VQ_PRECOMP_KIND_LLOYD) {
            const int sphere = a == (uint32_t)VQ_LAW_SPHERE;
            if ((a != (uint32_t)VQ_LAW_GAUSS && !sphere) || b < 1 || b > (sphere ? 4u : 6u) ||
                n0 != (1u << b) || n1 != (sphere ? d : 0u))
                return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
            for (int i = 0; i < out->n_tables; i++)
                if (out->t[i].kind == VQ_PRECOMP_KIND_LLOYD && out->t[i].law == (int)a &&
                    out->t[i].bits == (int)b)
                    return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
            t->law = (int)a;
            t->bits = (int)b;
        } else if (kind == VQ_PRECOMP_KIND_RHT_SIGNS) {
            if (a || b || n0 != d || n1 || have_signs)
                return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
            have_signs = 1;
        } else {
            return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
        }
        t->kind = (int)kind;
        t->n = (int)n0;
        const size_t nf = floats_of_(t);
        q += REC_HEAD_;
        if ((size_t)(end - q) < 4 * nf) return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
        t->data = malloc(sizeof(float) * nf);
        if (!t->data) return parse_fail_(out, VQ_STATUS_NO_MEMORY);
        out->n_tables++;
        for (size_t k = 0; k < nf; k++, q += 4) {
            const uint32_t u = rd32_(q);
            memcpy(&t->data[k], &u, 4);
            if (!isfinite(t->data[k])) return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
            if (kind == VQ_PRECOMP_KIND_RHT_SIGNS && t->data[k] != 1.0f && t->data[k] != -1.0f)
                return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
        }
        if (kind == VQ_PRECOMP_KIND_LLOYD) { /* ascending centroids and boundaries */
            for (int k = 1; k < t->n; k++)
                if (!(t->data[k] > t->data[k - 1])) return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
            for (int k = 1; k < t->n - 1; k++)
                if (!(t->data[t->n + k] > t->data[t->n + k - 1]))
                    return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
        }
    }
    if (q != end) return parse_fail_(out, VQ_STATUS_BAD_FORMAT);
    return VQ_STATUS_OK;
}

vq_status vq_precomp_load(const char *path, struct vq_precomp *out) {
    if (!out) return VQ_STATUS_INVALID_ARG;
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    VQ_RETURN_IF_ERR(vq_calib_read_file(path, &buf, &len));
    vq_status s = vq_precomp_parse(buf, len, out);
    vq_free(buf);
    return s;
}

int vq_precomp_matches(const struct vq_precomp *have, const struct vq_precomp *want, char *why,
                       size_t why_cap) {
    char dummy[8];
    if (!why || !why_cap) {
        why = dummy;
        why_cap = sizeof dummy;
    }
    why[0] = 0;
    if (have->head_dim != want->head_dim || have->seed != want->seed) {
        snprintf(why, why_cap, "stored head_dim %d seed %llu, wanted %d seed %llu", have->head_dim,
                 (unsigned long long)have->seed, want->head_dim, (unsigned long long)want->seed);
        return 0;
    }
    for (int i = 0; i < want->n_tables; i++) {
        const struct vq_precomp_table *w = &want->t[i], *h = NULL;
        for (int j = 0; j < have->n_tables && !h; j++) {
            const struct vq_precomp_table *c = &have->t[j];
            if (c->kind == w->kind &&
                (w->kind != VQ_PRECOMP_KIND_LLOYD || (c->law == w->law && c->bits == w->bits)))
                h = c;
        }
        const char *law = w->kind == VQ_PRECOMP_KIND_RHT_SIGNS ? "rht signs"
                        : w->law == VQ_LAW_SPHERE              ? "lloyd sphere"
                                                               : "lloyd gauss";
        if (!h || h->n != w->n) {
            snprintf(why, why_cap, "%s %d-bit: %s", law, w->bits,
                     h ? "size differs" : "not stored");
            return 0;
        }
        const size_t nf = floats_of_(w);
        for (size_t k = 0; k < nf; k++)
            if (memcmp(&h->data[k], &w->data[k], sizeof(float)) != 0) {
                snprintf(why, why_cap, "%s %d-bit: value %zu stored %.9g, computed %.9g", law,
                         w->bits, k, (double)h->data[k], (double)w->data[k]);
                return 0;
            }
    }
    return 1;
}
