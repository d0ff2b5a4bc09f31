/* calibuse.c — CLI glue for runs that need calibration (vecinfer, spectral codecs; RateQuant
 * per-layer bits): finds the artifacts in the artifact cache, and when none is usable says
 * why (missing, corrupt / truncated, another model, wrong shape), builds it on demand with
 * the recording + fitting code of `veloxquant calibrate` (vq_cli_calib_build), says so and
 * uses the fresh artifact. A rejected artifact is never used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "veloxquant.h"
#include "vq_engine.h"
#include "cli.h"
#include "vq_tools.h"

static int calib_tokens_ = 0;

void vq_cli_calib_set_tokens(int n_tokens) { calib_tokens_ = n_tokens > 0 ? n_tokens : 0; }

/* vecinfer preset codebook shape (c, v) of a side (the codec's own rule; (8, 4) when invalid,
 * which the codec then rejects with its own error). */
static void vi_shape(const struct vq_codec_params *p, int *c, int *v) {
    if (vq_vecinfer_shape(p, c, v) != VQ_STATUS_OK) {
        *c = 8;
        *v = 4;
    }
}

/* Builds the artifacts the calibrated sides of cp need (cached when the cache can be
 * written); the fitted sets go to built[0] (vecinfer) and built[1] (spectral). 1 on success. */
static int build_for(const char *cmd, const char *model_path, const struct vq_cache_params *cp,
                     vq_calib_data *built[2]) {
    struct vq_calib_build b;
    vq_calib_build_init(&b);
    b.model_path = model_path;
    if (calib_tokens_) b.n_tokens = calib_tokens_;
    b.report = stderr;
    b.cache_optional = 1;
    b.keep_vi = &built[0];
    b.keep_sp = &built[1];
    const unsigned kf = cp->key.calib ? 0u : vq_method_flags(cp->key.method);
    const unsigned vf = cp->value.calib ? 0u : vq_method_flags(cp->value.method);
    const int kvi = (kf & VQ_METHOD_F_CALIB_CODEBOOK) != 0,
              vvi = (vf & VQ_METHOD_F_CALIB_CODEBOOK) != 0;
    b.do_vi = kvi || vvi;
    b.do_sp = ((kf | vf) & VQ_METHOD_F_CALIB_PCA) != 0;
    if (kvi) vi_shape(&cp->key, &b.kc, &b.kv);
    if (vvi) vi_shape(&cp->value, &b.vc, &b.vv);
    if (kvi && !vvi) {
        b.vc = b.kc;
        b.vv = b.kv;
    }
    if (vvi && !kvi) {
        b.kc = b.vc;
        b.kv = b.vv;
    }
    fprintf(stderr, "%s: building calibration (%s%s%s) from %d tokens of built-in text ...\n", cmd,
            b.do_vi ? "vecinfer" : "", b.do_vi && b.do_sp ? ", " : "", b.do_sp ? "spectral" : "",
            b.n_tokens);
    const int rc = vq_cli_calib_build(cmd, &b);
    if (rc != 0) fprintf(stderr, "%s: building calibration failed\n", cmd);
    return rc == 0;
}

int vq_cli_attach_calib(const char *cmd, const char *model_path, struct vq_cache_params *cp,
                        int n_layers, int head_dim, vq_calib_data *owned[2]) {
    owned[0] = owned[1] = NULL;
    struct vq_method_info ki, vi;
    const int need = (vq_method_info_get(cp->key.method, &ki) == VQ_STATUS_OK &&
                      ki.needs_calibration && !cp->key.calib) ||
                     (vq_method_info_get(cp->value.method, &vi) == VQ_STATUS_OK &&
                      vi.needs_calibration && !cp->value.calib);
    if (!need) return 1;
    char hex[65];
    vq_status st = vq_sha256_file(model_path, hex);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s: %s\n", cmd, model_path, vq_status_str(st));
        return 0;
    }
    char why[2048];
    st = vq_calib_attach_diag(cp, n_layers, head_dim, hex, owned, why, sizeof why);
    if (st == VQ_STATUS_OK) return 1;
    if (st == VQ_STATUS_NOT_FOUND) {
        fprintf(stderr, "%s: no usable calibration for %s/%s: %s\n", cmd,
                vq_method_name(cp->key.method), vq_method_name(cp->value.method),
                why[0] ? why : "none found");
        vq_calib_data *built[2] = {NULL, NULL};
        if (!build_for(cmd, model_path, cp, built)) return 0;
        /* used from memory: the cache may not have been writable */
        st = vq_calib_attach_sets(cp, n_layers, head_dim, built, 2, owned, why, sizeof why);
        vq_calib_data_free(built[0]); /* the sets not used */
        vq_calib_data_free(built[1]);
        if (st == VQ_STATUS_OK) {
            fprintf(stderr, "%s: built calibration and using it\n", cmd);
            return 1;
        }
        fprintf(stderr, "%s: the calibration just built does not serve this KV config: %s\n", cmd,
                why[0] ? why : vq_status_str(st));
        return 0;
    }
    fprintf(stderr, "%s: loading calibration: %s\n", cmd, vq_status_str(st));
    return 0;
}

/* Copies the sensitivities of cd (from src, for messages) into w; 1 ok, else 0 with the
 * reason in why. */
static int sens_from(const vq_calib_data *cd, const char *src, int n_layers, int head_dim,
                     double *w, char *why, size_t cap) {
    const double *s = vq_calib_sensitivities(cd);
    int ok = s && vq_calib_data_n_layers(cd) == n_layers && vq_calib_data_head_dim(cd) == head_dim;
    for (int l = 0; ok && l < n_layers; l++) ok = s[l] > 0;
    if (ok) memcpy(w, s, sizeof(double) * (size_t)n_layers);
    else
        snprintf(why, cap,
                 "%s: geometry or sensitivities do not match the model (%d layers, head_dim %d)",
                 src, n_layers, head_dim);
    return ok;
}

/* Loads sens.vqcal into w; 1 ok, else 0 with the reason in why. */
static int load_sens(const char *path, const uint8_t sha[32], int n_layers, int head_dim, double *w,
                     char *why, size_t cap) {
    if (access(path, F_OK) != 0) {
        snprintf(why, cap, "no artifact at %s", path);
        return 0;
    }
    vq_status st;
    vq_calib_data *cd = vq_calib_data_load(path, "ratequant", sha, &st);
    if (!cd) {
        snprintf(why, cap, "%s: %s", path,
                 st == VQ_STATUS_BAD_FORMAT
                     ? "corrupt or truncated (bad header, records or checksum)"
                 : st == VQ_STATUS_NOT_FOUND   ? "made for another model"
                 : st == VQ_STATUS_UNSUPPORTED ? "newer format version"
                                               : vq_status_str(st));
        return 0;
    }
    const int ok = sens_from(cd, path, n_layers, head_dim, w, why, cap);
    vq_calib_data_free(cd);
    return ok;
}

int vq_cli_ratequant_sens(const char *cmd, const char *model_path, struct vq_model *model,
                          int n_layers, int head_dim, int calib_tokens, int may_build, double *w) {
    char hex[65], path[4096], why[4200];
    uint8_t sha[32];
    vq_status st = model_path ? vq_sha256_file(model_path, hex) : VQ_STATUS_INVALID_ARG;
    if (st != VQ_STATUS_OK || !vq_sha256_from_hex(hex, sha)) {
        fprintf(stderr, "%s: --ratequant needs the model file: %s\n", cmd, vq_status_str(st));
        return 0;
    }
    st = vq_calib_artifact_path("ratequant", sha, "sens", path, sizeof path);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: artifact path: %s (set VQ_CACHE_DIR or HOME)\n", cmd,
                vq_status_str(st));
        return 0;
    }
    if (load_sens(path, sha, n_layers, head_dim, w, why, sizeof why)) return 1;
    fprintf(stderr, "%s: no usable RateQuant sensitivities: %s\n", cmd, why);
    if (!may_build) {
        fprintf(stderr,
                "%s: run `veloxquant calibrate -m %s --method ratequant` (or any run with "
                "--ratequant builds it)\n",
                cmd, model_path);
        return 0;
    }
    struct vq_calib_build b;
    vq_calib_build_init(&b);
    b.model_path = model_path;
    b.model = model;
    b.do_rq = 1;
    b.n_tokens = calib_tokens > 0 ? calib_tokens : calib_tokens_ > 0 ? calib_tokens_ : 512;
    b.report = stderr;
    b.cache_optional = 1;
    vq_calib_data *built = NULL;
    b.keep_rq = &built;
    fprintf(stderr, "%s: building calibration (ratequant) from %d tokens of built-in text ...\n",
            cmd, b.n_tokens);
    if (vq_cli_calib_build(cmd, &b) != 0) {
        fprintf(stderr, "%s: building calibration failed\n", cmd);
        return 0;
    }
    /* used from memory: the cache may not have been writable */
    if (!built) snprintf(why, sizeof why, "no sensitivities");
    const int ok = built && sens_from(built, "the calibration just built", n_layers, head_dim, w,
                                      why, sizeof why);
    vq_calib_data_free(built);
    if (!ok) {
        fprintf(stderr, "%s: the calibration just built is not usable: %s\n", cmd, why);
        return 0;
    }
    fprintf(stderr, "%s: built calibration and using it\n", cmd);
    return 1;
}
