/*
 * logits.c — top-k next-token summaries, KL divergence against them, and their file format
 * (see logits.h).
 */
#include "eval/logits.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"

static const char MAGIC[8] = {'V', 'Q', 'L', 'O', 'G', 'I', 'T', '1'};
#define HDR_BYTES 64

uint64_t vq_logits_hash_u32(uint64_t h, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    return h;
}

static double row_lse(const float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - (double)mx);
    return (double)mx + log(s);
}

/* 1 - sum exp(logp[i]), clamped to [0, 1]. */
static float rest_mass(const float *logp, int k) {
    double s = 0;
    for (int i = 0; i < k; i++) s += exp((double)logp[i]);
    double r = 1.0 - s;
    return (float)(r < 0 ? 0 : r > 1 ? 1 : r);
}

double vq_logit_summarize(const float *logits, int n_vocab, int top_k, uint32_t target,
                          struct vq_logit_rec *rec) {
    if (top_k > n_vocab) top_k = n_vocab;
    if (top_k > VQ_LOGITS_MAX_TOPK) top_k = VQ_LOGITS_MAX_TOPK;
    const double lse = row_lse(logits, n_vocab);
    /* top-k by insertion into a descending list (ties: the lower id stays first) */
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float v = logits[i];
        if (n == top_k && !(v > logits[rec->ids[n - 1]])) continue;
        int at = n < top_k ? n : top_k - 1;
        while (at > 0 && v > logits[rec->ids[at - 1]]) {
            rec->ids[at] = rec->ids[at - 1];
            at--;
        }
        rec->ids[at] = (uint32_t)i;
        if (n < top_k) n++;
    }
    rec->top_k = n;
    for (int i = 0; i < n; i++) rec->logp[i] = (float)((double)logits[rec->ids[i]] - lse);
    rec->rest = rest_mass(rec->logp, n);
    rec->target = target;
    rec->target_logp = (float)((double)logits[target] - lse);
    return lse;
}

double vq_logit_kl(const struct vq_logit_rec *base, const float *logits, int n_vocab, int *top1) {
    const double lse = row_lse(logits, n_vocab);
    float lq[VQ_LOGITS_MAX_TOPK];
    for (int i = 0; i < base->top_k; i++) lq[i] = (float)((double)logits[base->ids[i]] - lse);
    const float q_rest = rest_mass(lq, base->top_k);
    double kl = 0;
    for (int i = 0; i < base->top_k; i++) {
        const double lp = base->logp[i];
        kl += exp(lp) * (lp - (double)lq[i]);
    }
    if (base->rest > 0) {
        const double pr = base->rest, qr = q_rest > 1e-30f ? q_rest : 1e-30;
        kl += pr * (log(pr) - log(qr));
    }
    if (top1) {
        int am = 0;
        for (int i = 1; i < n_vocab; i++)
            if (logits[i] > logits[am]) am = i;
        *top1 = base->top_k > 0 && (uint32_t)am == base->ids[0];
    }
    return kl > 0 ? kl : 0;
}

/* ---- files ------------------------------------------------------------------------------- */

struct vq_logits_file {
    FILE *f;
    int writing;
    char *path, *tmp; /* writer: final and temporary paths */
    int top_k, n_vocab, ctx;
    uint64_t n_records, token_hash, pos;
    uint64_t hash_run; /* reader: hash of the records read so far */
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static size_t rec_bytes(int k) { return 12 + 8 * (size_t)k; }

static void make_header(const vq_logits_file *lf, uint8_t *h) {
    memset(h, 0, HDR_BYTES);
    memcpy(h, MAGIC, 8);
    put32(h + 8, 1);
    put32(h + 12, (uint32_t)lf->top_k);
    put32(h + 16, (uint32_t)lf->n_vocab);
    put32(h + 20, (uint32_t)lf->ctx);
    put64(h + 24, lf->n_records);
    put64(h + 32, lf->token_hash);
}

static void lf_free(vq_logits_file *lf) {
    if (!lf) return;
    if (lf->f) fclose(lf->f);
    free(lf->path);
    free(lf->tmp);
    free(lf);
}

vq_logits_file *vq_logits_create(const char *path, int top_k, int n_vocab, int ctx, vq_status *st) {
    if (!path || top_k < 1 || top_k > VQ_LOGITS_MAX_TOPK || n_vocab < 1 || ctx < 1) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_logits_file *lf = calloc(1, sizeof *lf);
    size_t n = strlen(path);
    if (lf) {
        lf->path = malloc(n + 1);
        lf->tmp = malloc(n + 5);
    }
    if (!lf || !lf->path || !lf->tmp) {
        lf_free(lf);
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    memcpy(lf->path, path, n + 1);
    memcpy(lf->tmp, path, n);
    memcpy(lf->tmp + n, ".tmp", 5);
    lf->writing = 1;
    lf->top_k = top_k;
    lf->n_vocab = n_vocab;
    lf->ctx = ctx;
    lf->token_hash = VQ_LOGITS_HASH_INIT;
    /* never replace a device node, FIFO, socket or folder (checked again before the rename) */
    const vq_status cs = vq_file_check_output(path);
    if (cs != VQ_STATUS_OK) {
        lf_free(lf);
        if (st) *st = cs;
        return NULL;
    }
    /* the temp file is made afresh: a device node, FIFO or symlink left at its name is removed
     * (never written through), a folder there makes the create fail */
    (void)unlink(lf->tmp); /* fails for a folder, which O_EXCL then refuses */
    const int tfd = open(lf->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    lf->f = tfd >= 0 ? fdopen(tfd, "wb") : NULL;
    if (tfd >= 0 && !lf->f) close(tfd);
    uint8_t h[HDR_BYTES];
    make_header(lf, h);
    if (!lf->f || fwrite(h, 1, HDR_BYTES, lf->f) != HDR_BYTES) {
        if (lf->f) {
            fclose(lf->f);
            lf->f = NULL;
            unlink(lf->tmp);
        }
        lf_free(lf);
        if (st) *st = VQ_STATUS_IO;
        return NULL;
    }
    if (st) *st = VQ_STATUS_OK;
    return lf;
}

vq_logits_file *vq_logits_open(const char *path, vq_status *st) {
    vq_logits_file *lf = calloc(1, sizeof *lf);
    if (!lf) {
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    /* regular files only, opened without blocking (a FIFO would wait for a writer); records
     * are streamed, so there is no size cap */
    int fd;
    const vq_status os = vq_file_open_input(path, UINT64_MAX, "logits file", &fd, NULL);
    if (os != VQ_STATUS_OK || !(lf->f = fdopen(fd, "rb"))) {
        if (os == VQ_STATUS_OK) close(fd);
        lf_free(lf);
        if (st) *st = os != VQ_STATUS_OK ? os : VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    uint8_t h[HDR_BYTES];
    vq_status s = VQ_STATUS_BAD_FORMAT;
    if (fread(h, 1, HDR_BYTES, lf->f) == HDR_BYTES && !memcmp(h, MAGIC, 8) && rd32(h + 8) == 1) {
        lf->top_k = (int)rd32(h + 12);
        lf->n_vocab = (int)rd32(h + 16);
        lf->ctx = (int)rd32(h + 20);
        lf->n_records = rd64(h + 24);
        lf->token_hash = rd64(h + 32);
        int ok = lf->top_k >= 1 && lf->top_k <= VQ_LOGITS_MAX_TOPK && rd32(h + 12) <= (1u << 30) &&
                 lf->n_vocab >= lf->top_k && rd32(h + 16) <= (1u << 30) && lf->ctx >= 1 &&
                 rd32(h + 20) <= (1u << 30);
        if (ok && fseek(lf->f, 0, SEEK_END) == 0) {
            long sz = ftell(lf->f);
            ok = sz >= HDR_BYTES &&
                 lf->n_records <= (uint64_t)(sz - HDR_BYTES) / rec_bytes(lf->top_k) &&
                 (uint64_t)sz == HDR_BYTES + lf->n_records * rec_bytes(lf->top_k) &&
                 fseek(lf->f, HDR_BYTES, SEEK_SET) == 0;
            if (ok) s = VQ_STATUS_OK;
        }
    }
    if (s != VQ_STATUS_OK) {
        lf_free(lf);
        if (st) *st = s;
        return NULL;
    }
    lf->hash_run = VQ_LOGITS_HASH_INIT;
    if (st) *st = VQ_STATUS_OK;
    return lf;
}

int vq_logits_top_k(const vq_logits_file *f) { return f->top_k; }
int vq_logits_n_vocab(const vq_logits_file *f) { return f->n_vocab; }
int vq_logits_ctx(const vq_logits_file *f) { return f->ctx; }
uint64_t vq_logits_n_records(const vq_logits_file *f) { return f->n_records; }
uint64_t vq_logits_token_hash(const vq_logits_file *f) { return f->token_hash; }

vq_status vq_logits_write(vq_logits_file *f, const struct vq_logit_rec *r) {
    if (!f || !f->writing || r->top_k != f->top_k) return VQ_STATUS_INVALID_ARG;
    uint8_t buf[12 + 8 * VQ_LOGITS_MAX_TOPK];
    put32(buf, r->target);
    put32(buf + 4, f2u(r->target_logp));
    put32(buf + 8, f2u(r->rest));
    for (int i = 0; i < r->top_k; i++) {
        put32(buf + 12 + 4 * i, r->ids[i]);
        put32(buf + 12 + 4 * (size_t)r->top_k + 4 * i, f2u(r->logp[i]));
    }
    const size_t n = rec_bytes(r->top_k);
    if (fwrite(buf, 1, n, f->f) != n) return VQ_STATUS_IO;
    f->n_records++;
    f->token_hash = vq_logits_hash_u32(f->token_hash, r->target);
    return VQ_STATUS_OK;
}

vq_status vq_logits_read(vq_logits_file *f, struct vq_logit_rec *r) {
    if (!f || f->writing) return VQ_STATUS_INVALID_ARG;
    if (f->pos == f->n_records) return VQ_STATUS_NOT_FOUND;
    uint8_t buf[12 + 8 * VQ_LOGITS_MAX_TOPK];
    const size_t n = rec_bytes(f->top_k);
    if (fread(buf, 1, n, f->f) != n) return VQ_STATUS_IO;
    f->pos++;
    r->top_k = f->top_k;
    r->target = rd32(buf);
    r->target_logp = u2f(rd32(buf + 4));
    r->rest = u2f(rd32(buf + 8));
    if (r->target >= (uint32_t)f->n_vocab || !isfinite(r->target_logp) ||
        !(r->rest >= 0 && r->rest <= 1))
        return VQ_STATUS_BAD_FORMAT;
    for (int i = 0; i < f->top_k; i++) {
        r->ids[i] = rd32(buf + 12 + 4 * i);
        r->logp[i] = u2f(rd32(buf + 12 + 4 * (size_t)f->top_k + 4 * i));
        if (r->ids[i] >= (uint32_t)f->n_vocab || !isfinite(r->logp[i]) || r->logp[i] > 0)
            return VQ_STATUS_BAD_FORMAT;
    }
    f->hash_run = vq_logits_hash_u32(f->hash_run, r->target);
    return VQ_STATUS_OK;
}

vq_status vq_logits_close(vq_logits_file *f) {
    if (!f) return VQ_STATUS_OK;
    vq_status st = VQ_STATUS_OK;
    if (f->writing) {
        uint8_t h[HDR_BYTES];
        make_header(f, h);
        int ok = fseek(f->f, 0, SEEK_SET) == 0 && fwrite(h, 1, HDR_BYTES, f->f) == HDR_BYTES &&
                 fflush(f->f) == 0 && fsync(fileno(f->f)) == 0;
        ok = (fclose(f->f) == 0) && ok;
        f->f = NULL;
        if (ok && vq_file_check_output(f->path) == VQ_STATUS_OK && rename(f->tmp, f->path) == 0)
            st = VQ_STATUS_OK;
        else {
            unlink(f->tmp);
            st = VQ_STATUS_IO;
        }
    }
    lf_free(f);
    return st;
}

void vq_logits_discard(vq_logits_file *f) {
    if (!f) return;
    if (f->writing) {
        fclose(f->f);
        f->f = NULL;
        unlink(f->tmp);
    }
    lf_free(f);
}
