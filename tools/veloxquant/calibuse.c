/* calibuse.c — CLI glue for calibrated KV methods: attaches calibration artifacts from the
 * artifact cache (vq_calib_attach) to cache params before a context is created. */
#include <stdio.h>

#include "veloxquant.h"
#include "cli.h"
#include "eval/sha256.h"

int vq_cli_attach_calib(const char *cmd, const char *model_path, struct vq_cache_params *cp,
                        int n_layers, int head_dim, vq_calib_data *owned[2]) {
    owned[0] = owned[1] = NULL;
    struct vq_method_info ki, vi;
    const int need = (vq_method_info_get(cp->key.method, &ki) == VQ_STATUS_OK && ki.needs_calibration &&
                      !cp->key.calib) ||
                     (vq_method_info_get(cp->value.method, &vi) == VQ_STATUS_OK && vi.needs_calibration &&
                      !cp->value.calib);
    if (!need) return 1;
    char hex[65];
    vq_status st = vq_sha256_file(model_path, hex);
    if (st == VQ_STATUS_OK) st = vq_calib_attach(cp, n_layers, head_dim, hex, owned);
    if (st == VQ_STATUS_OK) return 1;
    if (st == VQ_STATUS_NOT_FOUND)
        fprintf(stderr, "%s: no calibration for this model and KV config (methods %s/%s); run "
                "`veloxquant calibrate -m %s` first (vecinfer codebooks must match the bits: "
                "--key-pq/--value-pq)\n", cmd, vq_method_name(cp->key.method),
                vq_method_name(cp->value.method), model_path);
    else
        fprintf(stderr, "%s: loading calibration: %s\n", cmd, vq_status_str(st));
    return 0;
}
