/* opts.h — small helpers for strict command-line value parsing (tools/ only). Each helper
 * prints "<cmd>: <option>: <reason>" to stderr and returns 0 on a bad value, 1 on success. */
#ifndef VQ_OPTS_H
#define VQ_OPTS_H
#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

int vq_opt_long(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);
int vq_opt_int(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out);
int vq_opt_u64(const char *cmd, const char *opt, const char *val, uint64_t *out);
int vq_opt_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                  double *out);
/* Parses a method name; on failure lists the valid names. */
int vq_opt_method(const char *cmd, const char *opt, const char *val, enum vq_method *out);
/* Parses scalar|avx2|avx512|auto and checks the CPU supports it. */
int vq_opt_isa(const char *cmd, const char *opt, const char *val, enum vq_isa *out);
/* Prints "<cmd>: <what> <method> bits=B head_dim=D: <status> (<method> accepts: <params>)". */
void vq_opt_codec_error(const char *cmd, const char *what, enum vq_method m, int bits, int head_dim,
                        vq_status st);
/* Warns on stderr ("<cmd>: note: ...") when the engine will run on more than one thread
 * (threads > 1, or 0 = every online core and there are several) and the environment makes
 * OpenMP threads sleep at once between parallel regions (OMP_WAIT_POLICY=passive, any case, or
 * GOMP_SPINCOUNT=0): a decode step has hundreds of regions and each wake-up costs tens of
 * microseconds on a VM (SmolLM2, 2 threads: 4.8x slower decode at depth 0). Returns 1 if it
 * warned, else 0. */
int vq_cli_warn_wait_policy(const char *cmd, int threads);
/* The message of a getopt_long failure ('?' unknown option, ':' missing value) in command
 * cmd with long options lo: names the offending option as the user wrote it (a short option
 * by its letter, a long one by its element) and, for an unknown long option, the nearest
 * one ("unknown option '--temprature': did you mean --temp?"). Call right after
 * getopt_long returned c (it reads optind and optopt). Prints to stderr. */
struct option;
void vq_cli_bad_option(const char *cmd, int c, int argc, char **argv, const struct option *lo);
/* The model a command runs on: given (-m / --model) when not NULL, else the default model's
 * path (vq_model_default_path) written into buf (cap bytes). Every command that takes a model
 * takes -m the same way and defaults to the same file. */
const char *vq_cli_model(const char *given, char *buf, size_t cap);
/* The default perplexity text (data/corpus_en.txt, made by `make bench-data`), found wherever
 * the command runs from: data/corpus_en.txt of the working directory when it is there (the
 * repository root; a relative path is what results.json records), else $VQ_DATA/corpus_en.txt
 * when VQ_DATA is set, else next to the executable's tree (<exe>/../data/ in a build folder of
 * the repository, <exe>/../share/veloxquant/ once installed), else data/corpus_en.txt. Writes
 * the path into buf (cap bytes) and returns buf. */
const char *vq_cli_default_corpus(char *buf, size_t cap);
/* 1 if path may be written as an output file: its folder exists and is writable, and path is
 * absent or (after following symlinks) a regular file, never a device, FIFO, socket or folder
 * (vq_file_check_output). Otherwise prints "<cmd>: <opt>: <reason naming the path>" and returns
 * 0. Commands call it on every output option before they start work. */
int vq_opt_output(const char *cmd, const char *opt, const char *path);
/* Prints why a file operation on path (given with option opt) failed with st: "<cmd>: <opt>:
 * <reason>" where the file gate recorded a reason naming the path (vq_file_error()), else
 * "<cmd>: <opt> <path>: <status text>" (with strerror(errno) for IO). */
void vq_cli_file_fail(const char *cmd, const char *opt, const char *path, vq_status st);
/* Monotonic clock in seconds. */
double vq_now_s(void);
/* Median of n doubles (sorts a copy of at most 256 values). */
double vq_median(const double *v, int n);
/* The name a model file goes by in output files and folders (sweep's per-model folders,
 * report's figures): its file name without folder and ".gguf", characters other than
 * [A-Za-z0-9._-] replaced by '_', "model" when empty. Writes at most cap bytes (cap >= 6)
 * including the terminating NUL into out; a leading '.' becomes '_'. Pure; thread-safe. */
void vq_cli_model_stem(const char *file, char *out, size_t cap);
#endif
