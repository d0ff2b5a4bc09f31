/*
 * results.h — results.json (schema "veloxquant.results.v1", docs/EVALUATION.md "Files"):
 * the in-memory form and an atomic file write. Not part of the public API; used by the CLI
 * (sweep, report) and the tests. The JSON text itself (strict reader, writer) is in the tools'
 * library, tools/common/results_json.h, so that the library needs no JSON package. The JSON
 * schema is checked in as docs/results.schema.json.
 *
 * Missing numbers: every metric field of struct vq_result is a double that is NaN when it was
 * not measured; NaN fields are left out of the JSON (the schema makes them optional) and read
 * back as NaN. Integer-valued metrics (kv_bytes, tokens_generated, ...) are stored as doubles
 * too, written without a fraction.
 *
 * Ownership: a struct vq_results owns every string and array it points to; fill it with the
 * helpers below (vq_results_init, vq_results_add, vq_str_set) and release it with
 * vq_results_clear. No function here keeps global state; distinct objects may be used from
 * distinct threads.
 */
#ifndef VQ_EVAL_RESULTS_H
#define VQ_EVAL_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

#define VQ_RESULTS_SCHEMA "veloxquant.results.v1"
#define VQ_RESULT_MAX_OPTS 8
/* Most speed repeats one row records (sweep --repeats). */
#define VQ_RESULT_MAX_RUNS 64

/* One named integer option of a config (group_size, residual_length, n_sink_tokens, jl_dim). */
struct vq_result_opt {
    char key[32];
    long long value;
};

/* The KV configuration a result was measured with. */
struct vq_result_config {
    char name[64];     /* preset or label, e.g. "turboquant_mse-3", "asym-k4v2" */
    char engine[16];   /* "" = veloxquant; "llama.cpp" for rows measured on llama.cpp's cache
                        * types (scripts/llamacpp_ppl.py: k_method / v_method are its type names) */
    char k_method[32]; /* method name as on the command line (vq_method_name) */
    char v_method[32];
    /* nominal widths (vq_codec_params_bits): 1.5 for vecinfer 1.5. Files written before
     * fractional widths were recorded hold the codec's integer bits field there (2 for
     * vecinfer 1.5); readers that know the config name can correct it. */
    double k_bits, v_bits;
    int n_opts;
    struct vq_result_opt opts[VQ_RESULT_MAX_OPTS];
};

/* One row of results[]. Metrics are NaN when not measured (see the file comment). */
struct vq_result {
    struct vq_result_config config;
    double prefill_tok_s, decode_tok_s, peak_rss_mb;
    double kv_bytes;          /* exact cache bytes (codes + side data + windows) at ctx */
    double key_x, fullKV_x;   /* fp16 key bytes / stored key bytes; same for keys + values */
    double bits_per_elem;     /* 8 * kv_bytes / (elements of K and V) */
    double tokens_generated;  /* mean over the probe prompts of tokens before EOS */
    double fp16_prefix_match; /* mean identical-prefix length vs the fp16-KV greedy output */
    double ppl, kld_mean, kld_median, kld_p99, top1;
    double kld_full_mean; /* KL over the full vocabulary (kld_* use the base's top-k + rest) */
    double cosine_k, cosine_v;
    /* Speed repeats (sweep --repeats N): each run's tok/s, in run order; prefill_tok_s and
     * decode_tok_s are then their medians. 0 runs (files written without repeats, or N = 1):
     * one measurement, the metric alone. JSON: prefill_tok_s_runs / decode_tok_s_runs. */
    int n_prefill_runs, n_decode_runs;
    double prefill_runs[VQ_RESULT_MAX_RUNS], decode_runs[VQ_RESULT_MAX_RUNS];
    char *output_preview; /* owned, may be NULL */
    char *error;          /* owned; non-NULL when the config failed */
};

struct vq_results_hardware {
    char cpu[128];
    int cores;    /* threads used */
    char isa[16]; /* vq_isa_name(vq_isa_default()) */
    double ram_mb;
};

struct vq_results_model {
    char *file;      /* owned */
    char sha256[65]; /* lowercase hex, or "" */
    char arch[32];
    int n_layers, n_kv_heads, head_dim;
    int *layer_window; /* (n_layers) the model's attention window per layer (0: full), as
                        * vq_model_layer_window gives it; NULL when no layer is windowed.
                        * Owned (malloc). */
};

struct vq_results_protocol {
    char **prompts; /* owned, n_prompts strings */
    int n_prompts;
    char *corpus;   /* owned: text file used for perplexity, or NULL */
    int ctx;        /* perplexity chunk tokens */
    int chunks;     /* chunks scored (0 = all) */
    int max_tokens; /* greedy tokens per probe prompt */
    uint64_t seed;
};

struct vq_results {
    char created_utc[32]; /* "2026-11-30T08:00:00Z" */
    char git_commit[48];
    struct vq_results_hardware hardware;
    struct vq_results_model model;
    struct vq_results_protocol protocol;
    struct vq_result *results; /* owned, n_results entries */
    int n_results, cap_results;
};

/* Zeroes *r (empty strings, no results). */
void vq_results_init(struct vq_results *r);
/* Frees every owned string/array and re-initialises *r. NULL is a no-op. */
void vq_results_clear(struct vq_results *r);
/* Sets every metric of *e to NaN and the strings to NULL/"" (an empty, unmeasured row). */
void vq_result_init(struct vq_result *e);
/* Frees the owned strings of one row. */
void vq_result_clear(struct vq_result *e);
/* Appends a row, taking ownership of its strings (e's pointers move into r; *e is reset).
 * Returns NO_MEMORY on allocation failure (e unchanged). */
vq_status vq_results_add(struct vq_results *r, struct vq_result *e);
/* Finds the row whose config.name equals name; returns its index or -1. */
int vq_results_find(const struct vq_results *r, const char *name);
/* Replaces *dst by a malloc'd copy of src (NULL allowed); returns NO_MEMORY on failure. */
vq_status vq_str_set(char **dst, const char *src);

/* Fills created_utc with the current UTC time. */
void vq_results_stamp_time(struct vq_results *r);
/* Fills hardware from /proc/cpuinfo, sysconf and the ISA choice; cores = n_threads. */
void vq_results_fill_hardware(struct vq_results *r, int n_threads);

/* Writes len bytes to path atomically: a temp file in the same directory, full write, fsync,
 * rename over path, fsync of the directory. The file gets mode 0666 & ~umask (the umask is
 * read by setting and restoring it: do not call this while another thread changes it). On any
 * failure the temp file is removed, an existing file at path is left intact, and IO (or
 * NO_MEMORY) is returned. */
vq_status vq_write_file_atomic(const char *path, const void *data, size_t len);

#endif
