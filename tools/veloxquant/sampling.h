/* sampling.h — the sampling option family of the CLI, shared by generate and chat (and any
 * command that generates text): -s/--seed, --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --repeat-last-n, --stop. Defaults are the library's
 * (vq_sampler_params_default: greedy); the values land in a struct vq_sampler_params. */
#ifndef VQ_SAMPLING_H
#define VQ_SAMPLING_H

#include <getopt.h>

#include "vq_engine.h"

/* getopt_long codes of the family (above the KV family's and below the commands' own). */
enum {
    VQ_SAMPOPT_TEMP = 1500,
    VQ_SAMPOPT_TOP_K,
    VQ_SAMPOPT_TOP_P,
    VQ_SAMPOPT_MIN_P,
    VQ_SAMPOPT_REPEAT_PENALTY,
    VQ_SAMPOPT_REPEAT_LAST_N,
    VQ_SAMPOPT_STOP,
    VQ_SAMPOPT_LAST
};

/* The long options (-s is the short form of --seed: put "s:" in the short-option string). */
#define VQ_SAMPLING_LONG_OPTIONS \
    {"seed", required_argument, 0, 's'}, {"temp", required_argument, 0, VQ_SAMPOPT_TEMP}, \
        {"top-k", required_argument, 0, VQ_SAMPOPT_TOP_K}, \
        {"top-p", required_argument, 0, VQ_SAMPOPT_TOP_P}, \
        {"min-p", required_argument, 0, VQ_SAMPOPT_MIN_P}, \
        {"repeat-penalty", required_argument, 0, VQ_SAMPOPT_REPEAT_PENALTY}, \
        {"repeat-last-n", required_argument, 0, VQ_SAMPOPT_REPEAT_LAST_N}, { \
        "stop", required_argument, 0, VQ_SAMPOPT_STOP \
    }

#define VQ_SAMPLING_HELP \
    "  -s, --seed S          sampling seed (default 42)\n" \
    "      --temp T          temperature; 0 = greedy (default 0)\n" \
    "      --top-k K         top-k for temperature sampling (default 40; 0 = off)\n" \
    "      --top-p P         nucleus mass in (0, 1] (default 0.95)\n" \
    "      --min-p P         drop tokens below P x the top token's probability (default 0)\n" \
    "      --repeat-penalty R  divide the logits of recent tokens by R (default 1 = off)\n" \
    "      --repeat-last-n N tokens the penalty looks back on (default 64; 0 = off)\n" \
    "      --stop S          stop when the text contains S (repeatable; S is not printed)\n"

#define VQ_SAMPLING_MAX_STOPS 32

struct vq_sampling_opts {
    struct vq_sampler_params sp;              /* vq_sampler_params_default, then the options */
    const char *stops[VQ_SAMPLING_MAX_STOPS]; /* --stop, in order (borrowed from argv) */
    int n_stops;
};

/* The library's defaults, no stop string. */
void vq_sampling_opts_init(struct vq_sampling_opts *o);
/* Handles one getopt_long code of the family: 1 ok, 0 bad value (printed as "<cmd>: --opt:
 * reason"), -1 not one of the family. */
int vq_sampling_opts_handle(struct vq_sampling_opts *o, const char *cmd, int code, const char *arg);
/* Sets the sampling parameters and stop strings of gp (gp keeps pointers into o). */
void vq_sampling_opts_apply(const struct vq_sampling_opts *o, struct vq_gen_params *gp);

#endif
