/* methods.c — method traits (default bits, accepted widths, capability flags, display label),
 * read from the codec registry: `veloxquant methods`, the cache and the CLI ask here instead of
 * comparing method ids. */
#include <math.h>
#include <stdio.h>

#include "codecs/codec_impl.h"

vq_status vq_method_info_get(enum vq_method m, struct vq_method_info *out) {
    if (!out || (int)m < 0 || m >= VQ_METHOD_COUNT) return VQ_STATUS_INVALID_ARG;
    const struct vq_codec_i *ci = vq_codec_iface(m);
    out->name = vq_method_name(m);
    out->params = ci ? ci->params_doc : "";
    out->bits_formula = ci ? ci->bits_formula : "";
    out->needs_calibration = ci ? ci->needs_calibration : 0;
    out->implemented = ci != NULL;
    out->default_bits = ci ? ci->default_bits : 0;
    out->min_bits = ci ? ci->min_bits : 0;
    out->max_bits = ci ? ci->max_bits : 0;
    out->frac_bits = ci ? ci->frac_bits : 0.0;
    out->flags = ci ? ci->flags : 0u;
    return VQ_STATUS_OK;
}

unsigned vq_method_flags(enum vq_method m) {
    const struct vq_codec_i *ci = vq_codec_iface(m);
    return ci ? ci->flags : 0u;
}

int vq_method_default_bits(enum vq_method m) {
    const struct vq_codec_i *ci = vq_codec_iface(m);
    return ci ? ci->default_bits : 0;
}

vq_status vq_codec_params_set_method(struct vq_codec_params *p, enum vq_method m) {
    if (!p || (int)m < 0 || m >= VQ_METHOD_COUNT) return VQ_STATUS_INVALID_ARG;
    const struct vq_codec_i *ci = vq_codec_iface(m);
    if (!ci) return VQ_STATUS_UNSUPPORTED;
    p->method = m;
    return vq_codec_params_set_bits(p, ci->default_bits);
}

vq_status vq_codec_params_set_bits(struct vq_codec_params *p, double bits) {
    const struct vq_codec_i *ci = p ? vq_codec_iface(p->method) : NULL;
    if (!ci) return VQ_STATUS_INVALID_ARG;
    const int whole = bits == floor(bits);
    if (!(whole ? bits >= ci->min_bits && bits <= ci->max_bits
                : ci->frac_bits > 0 && bits == ci->frac_bits))
        return VQ_STATUS_RANGE;
    if (ci->set_bits) ci->set_bits(p, bits);
    else p->bits = (int)bits;
    return VQ_STATUS_OK;
}

double vq_codec_params_bits(const struct vq_codec_params *p) {
    const struct vq_codec_i *ci = p ? vq_codec_iface(p->method) : NULL;
    if (!ci) return p ? p->bits : 0.0;
    return ci->bits_of ? ci->bits_of(p) : (double)p->bits;
}

int vq_codec_params_label(const struct vq_codec_params *p, char *out, size_t cap) {
    const char *n = p ? vq_method_name(p->method) : NULL;
    const struct vq_codec_i *ci = p ? vq_codec_iface(p->method) : NULL;
    if (!n) n = "?";
    if (ci && (ci->min_bits < ci->max_bits || ci->frac_bits > 0))
        return snprintf(out, cap, "%s/%g-bit", n, vq_codec_params_bits(p));
    return snprintf(out, cap, "%s", n);
}
