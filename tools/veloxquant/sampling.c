/* sampling.c — the sampling option family (see sampling.h). */
#include "sampling.h"

#include <stdio.h>
#include <string.h>

#include "opts.h"

void vq_sampling_opts_init(struct vq_sampling_opts *o) {
    memset(o, 0, sizeof *o);
    o->sp = vq_sampler_params_default();
}

int vq_sampling_opts_handle(struct vq_sampling_opts *o, const char *cmd, int code,
                            const char *arg) {
    double v;
    int ok = 1;
    switch (code) {
    case 's': return vq_opt_u64(cmd, "--seed", arg, &o->sp.seed);
    case VQ_SAMPOPT_TEMP:
        ok = vq_opt_double(cmd, "--temp", arg, 0.0, 100.0, &v);
        o->sp.temperature = (float)v;
        return ok;
    case VQ_SAMPOPT_TOP_K: return vq_opt_int(cmd, "--top-k", arg, 0, 1 << 24, &o->sp.top_k);
    case VQ_SAMPOPT_TOP_P:
        ok = vq_opt_double(cmd, "--top-p", arg, 0.0, 1.0, &v);
        if (ok && v <= 0.0) {
            fprintf(stderr, "%s: --top-p: must be in (0, 1]\n", cmd);
            return 0;
        }
        o->sp.top_p = (float)v;
        return ok;
    case VQ_SAMPOPT_MIN_P:
        ok = vq_opt_double(cmd, "--min-p", arg, 0.0, 1.0, &v);
        o->sp.min_p = (float)v;
        return ok;
    case VQ_SAMPOPT_REPEAT_PENALTY:
        ok = vq_opt_double(cmd, "--repeat-penalty", arg, 0.0, 100.0, &v);
        if (ok && v <= 0.0) {
            fprintf(stderr, "%s: --repeat-penalty: must be > 0\n", cmd);
            return 0;
        }
        o->sp.repeat_penalty = (float)v;
        return ok;
    case VQ_SAMPOPT_REPEAT_LAST_N:
        return vq_opt_int(cmd, "--repeat-last-n", arg, 0, 1 << 24, &o->sp.repeat_last_n);
    case VQ_SAMPOPT_STOP:
        if (o->n_stops == VQ_SAMPLING_MAX_STOPS) {
            fprintf(stderr, "%s: --stop: at most %d stop strings\n", cmd, VQ_SAMPLING_MAX_STOPS);
            return 0;
        }
        if (!*arg) {
            fprintf(stderr, "%s: --stop: empty string\n", cmd);
            return 0;
        }
        o->stops[o->n_stops++] = arg;
        return 1;
    default: return -1;
    }
}

void vq_sampling_opts_apply(const struct vq_sampling_opts *o, struct vq_gen_params *gp) {
    gp->sampling = o->sp;
    gp->stop = o->n_stops ? o->stops : NULL;
    gp->n_stop = o->n_stops;
}
