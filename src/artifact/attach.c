/*
 * attach.c — finds calibration artifacts in the artifact cache for a KV configuration
 * (vq_calib_attach, contract in veloxquant.h): scans the .vqcal files of <root>/<method>/<sha> in
 * name order and keeps the first artifact that can serve the codec on every layer.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"
#include "codecs/codec_impl.h"
#include "core/fileio.h"
#include "core/sha256.h"

static int cmp_str_(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if a codec with params p (role fixed) can be created on every layer from cd. */
static int serves_(const vq_calib_data *cd, const struct vq_codec_params *p,
                   const int *bits_per_layer, int n_layers, int head_dim) {
    if (vq_calib_data_n_layers(cd) < n_layers || vq_calib_data_head_dim(cd) != head_dim) return 0;
    for (int l = 0; l < n_layers; l++) {
        struct vq_codec_params q = *p;
        q.head_dim = head_dim;
        q.calib = cd;
        q.calib_layer = l;
        if (bits_per_layer) q.bits = bits_per_layer[l];
        vq_codec *c = vq_codec_create(&q, NULL);
        if (!c) return 0;
        vq_codec_free(c);
    }
    return 1;
}

/* Appends a formatted reason to why (cap bytes; may be NULL). */
static void why_add_(char *why, size_t cap, const char *a, const char *b, const char *c) {
    if (!why || !cap) return;
    const size_t n = strlen(why);
    if (n + 1 >= cap) return;
    snprintf(why + n, cap - n, "%s%s%s%s", n ? "; " : "", a, b, c);
}

static const char *load_reason_(vq_status st) {
    switch (st) {
    case VQ_STATUS_BAD_FORMAT: return "corrupt or truncated (bad header, records or checksum)";
    case VQ_STATUS_UNSUPPORTED: return "written by a newer format version";
    case VQ_STATUS_NOT_FOUND: return "made for another model or method";
    case VQ_STATUS_IO: return vq_file_error()[0] ? vq_file_error() : "cannot be read";
    default: return vq_status_str(st);
    }
}

/* Loads the first artifact of folder dir that serves p; NULL if none (reasons in why). */
static vq_calib_data *find_(const char *dir, const char *method, const uint8_t sha[32],
                            const struct vq_codec_params *p, const int *bpl, int n_layers,
                            int head_dim, char *why, size_t why_cap) {
    DIR *dh = opendir(dir);
    if (!dh) {
        why_add_(why, why_cap, "no artifact folder ", dir, "");
        return NULL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (len < 7 || e->d_name[0] == '.' || strcmp(e->d_name + len - 6, ".vqcal") != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) break;
            names = nn;
        }
        names[n] = malloc(len + 1);
        if (!names[n]) break;
        memcpy(names[n], e->d_name, len + 1);
        n++;
    }
    closedir(dh);
    if (n) qsort(names, n, sizeof *names, cmp_str_);
    vq_calib_data *found = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!found) {
            const size_t len = strlen(dir) + strlen(names[i]) + 2;
            char *path = malloc(len);
            if (path) {
                snprintf(path, len, "%s/%s", dir, names[i]);
                vq_status lst = VQ_STATUS_OK;
                vq_calib_data *cd = vq_calib_data_load(path, method, sha, &lst);
                if (cd && serves_(cd, p, bpl, n_layers, head_dim)) found = cd;
                else {
                    why_add_(why, why_cap, path, ": ",
                             cd ? "does not fit this KV config (layers, "
                                  "head_dim, codebook shape or bits)"
                                : load_reason_(lst));
                    vq_calib_data_free(cd);
                }
                free(path);
            }
        }
        free(names[i]);
    }
    if (n == 0) why_add_(why, why_cap, "no artifact in ", dir, "");
    free(names);
    return found;
}

vq_status vq_calib_attach(struct vq_cache_params *cp, int n_layers, int head_dim,
                          const char *model_sha256_hex, vq_calib_data *owned[2]) {
    return vq_calib_attach_diag(cp, n_layers, head_dim, model_sha256_hex, owned, NULL, 0);
}

vq_status vq_calib_attach_diag(struct vq_cache_params *cp, int n_layers, int head_dim,
                               const char *model_sha256_hex, vq_calib_data *owned[2], char *why,
                               size_t why_cap) {
    if (why && why_cap) why[0] = 0;
    if (!cp || !owned || n_layers < 1 || head_dim < 8) return VQ_STATUS_INVALID_ARG;
    owned[0] = owned[1] = NULL;
    uint8_t sha[32];
    if (!vq_sha256_from_hex(model_sha256_hex, sha)) return VQ_STATUS_INVALID_ARG;
    struct vq_codec_params *sides[2] = {&cp->key, &cp->value};
    const int *bpl[2] = {cp->key_bits_per_layer, cp->value_bits_per_layer};
    for (int s = 0; s < 2; s++) {
        struct vq_codec_params *p = sides[s];
        const struct vq_codec_i *it = vq_codec_iface(p->method);
        if (!it || !(it->flags & VQ_METHOD_F_CALIBRATION) || p->calib) continue;
        p->role = s == 0 ? VQ_ROLE_KEY : VQ_ROLE_VALUE;
        /* the other side may already use a set loaded here (same method, both roles inside) */
        if (s == 1 && owned[0] && serves_(owned[0], p, bpl[1], n_layers, head_dim)) {
            p->calib = owned[0];
            continue;
        }
        const char *method = vq_method_name(p->method);
        char dir[4096];
        vq_status st = vq_calib_artifact_path(method, sha, "x", dir, sizeof dir);
        if (st != VQ_STATUS_OK) goto fail_st;
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        owned[s] = find_(dir, method, sha, p, bpl[s], n_layers, head_dim, why, why_cap);
        if (!owned[s]) {
            st = VQ_STATUS_NOT_FOUND;
            goto fail_st;
        }
        p->calib = owned[s];
        continue;
    fail_st:
        for (int k = 0; k < 2; k++) {
            if (sides[k]->calib == owned[0] || sides[k]->calib == owned[1]) sides[k]->calib = NULL;
        }
        vq_calib_data_free(owned[0]);
        vq_calib_data_free(owned[1]);
        owned[0] = owned[1] = NULL;
        return st;
    }
    return VQ_STATUS_OK;
}

vq_status vq_calib_attach_sets(struct vq_cache_params *cp, int n_layers, int head_dim,
                               vq_calib_data **sets, int n_sets, vq_calib_data *owned[2], char *why,
                               size_t why_cap) {
    if (why && why_cap) why[0] = 0;
    if (!cp || !owned || (!sets && n_sets) || n_sets < 0 || n_layers < 1 || head_dim < 8)
        return VQ_STATUS_INVALID_ARG;
    struct vq_codec_params *sides[2] = {&cp->key, &cp->value};
    const int *bpl[2] = {cp->key_bits_per_layer, cp->value_bits_per_layer};
    int pick[2] = {-1, -1};
    for (int s = 0; s < 2; s++) {
        struct vq_codec_params p = *sides[s];
        const struct vq_codec_i *it = vq_codec_iface(p.method);
        if (!it || !it->needs_calibration || p.calib) continue;
        p.role = s == 0 ? VQ_ROLE_KEY : VQ_ROLE_VALUE;
        for (int i = 0; i < n_sets && pick[s] < 0; i++)
            if (sets[i] && serves_(sets[i], &p, bpl[s], n_layers, head_dim)) pick[s] = i;
        if (pick[s] < 0) {
            why_add_(why, why_cap, "the calibration built does not fit the ",
                     s == 0 ? "keys" : "values", " of this KV config");
            return VQ_STATUS_NOT_FOUND;
        }
    }
    owned[0] = owned[1] = NULL;
    for (int s = 0; s < 2; s++) {
        if (pick[s] < 0) continue;
        sides[s]->role = s == 0 ? VQ_ROLE_KEY : VQ_ROLE_VALUE;
        sides[s]->calib = sets[pick[s]];
        if (s == 1 && pick[1] == pick[0]) continue; /* one set serves both sides */
        owned[s] = sets[pick[s]];
    }
    for (int s = 0; s < 2; s++)
        if (pick[s] >= 0) sets[pick[s]] = NULL;
    return VQ_STATUS_OK;
}
