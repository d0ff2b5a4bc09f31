/* cli.h — the veloxquant command-line tool: one function per command (tools/ only). */
#ifndef VQ_CLI_H
#define VQ_CLI_H

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

#endif
