/* methods.c — method descriptions for `veloxquant methods`, read from the codec registry. */
#include "codecs/codec_impl.h"

vq_status vq_method_info_get(enum vq_method m, struct vq_method_info *out) {
    if (!out || (int)m < 0 || m >= VQ_METHOD_COUNT) return VQ_STATUS_INVALID_ARG;
    const struct vq_codec_i *ci = vq_codec_iface(m);
    out->name = vq_method_name(m);
    out->params = ci ? ci->params_doc : "";
    out->bits_formula = ci ? ci->bits_formula : "";
    out->needs_calibration = ci ? ci->needs_calibration : 0;
    out->implemented = ci != NULL;
    return VQ_STATUS_OK;
}
