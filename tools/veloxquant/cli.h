/* cli.h — the veloxquant command-line tool: one function per command (tools/ only). */
#ifndef VQ_CLI_H
#define VQ_CLI_H

#include "veloxquant.h"

/* Each command parses its own argv (argv[0] is the command name), prints to stdout/stderr and
 * returns the process exit code: 0 success, 1 runtime error, 2 usage error. */
typedef int (*vq_cli_fn)(int argc, char **argv);

struct vq_cli_cmd {
    const char *name;
    vq_cli_fn fn;
    const char *summary;
};

int vq_cmd_methods(int argc, char **argv);
int vq_cmd_bench(int argc, char **argv);
int vq_cmd_generate(int argc, char **argv);
int vq_cmd_info(int argc, char **argv);

int vq_cmd_estimate_memory(int argc, char **argv);
int vq_cmd_report(int argc, char **argv);
int vq_cmd_perplexity(int argc, char **argv);
int vq_cmd_sweep(int argc, char **argv);
int vq_cmd_sweep_run(int argc, char **argv);
int vq_cmd_calibrate(int argc, char **argv);

/* Calibrated methods (vecinfer, spectral): loads matching artifacts from the artifact cache
 * into cp (calibrate.c / calibuse.c). Returns 1 on success (also when nothing needs
 * calibration), 0 after printing why not. owned[0..1]: sets to vq_calib_data_free after the
 * context is freed. */
int vq_cli_attach_calib(const char *cmd, const char *model_path, struct vq_cache_params *cp,
                        int n_layers, int head_dim, vq_calib_data *owned[2]);

#endif
