/* main.c — veloxquant command dispatcher, and the grammar every command shares: long options
 * take dashes, and the underscore spellings of the original benchmark CLI (--seq_lens,
 * --compare_optimized, --head_dim, ...) are rewritten to them before any command parses;
 * llama.cpp options veloxquant does not take are recognised and explained in one line instead
 * of failing as bundles of short options. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "veloxquant.h"
#include "cli.h"
#include "opts.h"

static int cmd_version(int argc, char **argv) {
    static const struct option lo[] = {
        {"help", no_argument, 0, 'h'}, {"verbose", no_argument, 0, 'v'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c, verbose = 0;
    while ((c = getopt_long(argc, argv, ":hv", lo, NULL)) != -1) {
        if (c == 'h') {
            printf(
                "usage: veloxquant version [-v|--verbose]\n\n"
                "Prints the library version; --verbose adds the CPU as the library sees it\n"
                "(brand, family, model), the kernel variant it runs (VQ_ISA=scalar|avx2|\n"
                "avx512 forces one) and the default thread count (OMP_NUM_THREADS or the\n"
                "cores), the line the benchmark scripts record.\n");
            return 0;
        }
        if (c == 'v') {
            verbose = 1;
            continue;
        }
        vq_cli_bad_option("version", c, argc, argv, lo);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "version: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    printf("veloxquant %s\n", vq_version());
    if (verbose) {
        char cpu[256];
        vq_cpu_describe(cpu, sizeof cpu);
        printf("cpu: %s\nthreads: %d by default\n", cpu, vq_threads_resolve(0));
    }
    return 0;
}

static const struct vq_cli_cmd cmds[] = {
    {"generate", vq_cmd_generate, "run a prompt through a GGUF model with a compressed KV cache"},
    {"chat", vq_cmd_chat, "multi-turn chat with a GGUF model; the compressed cache keeps the talk"},
    {"serve", vq_cmd_serve, "OpenAI-compatible HTTP server; batched decode, KV-memory admission"},
    {"info", vq_cmd_info, "GGUF metadata, tensor types and KV geometry of a model"},
    {"methods", vq_cmd_methods, "list KV methods, parameters and bits/elem formulas"},
    {"bench", vq_cmd_bench, "model-free encode/attend microbenchmark on synthetic keys"},
    {"perplexity", vq_cmd_perplexity,
     "chunked perplexity with a compressed KV cache; KL vs saved logits"},
    {"score-logits", vq_cmd_score_logits,
     "perplexity / KL of another engine's logits (a stream) with perplexity's estimator"},
    {"sweep", vq_cmd_sweep, "models x KV configs, each in a child process, into results.json"},
    {"sweep-run", vq_cmd_sweep_run, "(internal) one sweep config; run by `sweep` in a child"},
    {"report", vq_cmd_report, "PNG figures and a Markdown table from results.json files"},
    {"estimate-memory", vq_cmd_estimate_memory,
     "analytic KV-cache bytes per method for a model and context"},
    {"calibrate", vq_cmd_calibrate, "record a model's keys/values and write calibration artifacts"},
    {"precompute", vq_cmd_precompute,
     "write / --check data-independent tables (Lloyd-Max codebooks, RHT signs)"},
    {"version", cmd_version, "print the library version"},
};

/* llama.cpp options (short and long spellings) and what to use here instead. */
static const struct {
    const char *opts[4];
    const char *why;
} llama_opts[] = {
    {{"-ctk", "-ctv", "--cache-type-k", "--cache-type-v"},
     "KV cache types are --kv NAME (kv8 ~ q8_0, kv5, kv4, kv3, kv2; `veloxquant methods "
     "--configs`) or --k-method / --v-method"},
    {{"-ngl", "--n-gpu-layers", "--gpu-layers", NULL}, "veloxquant runs on the CPU only"},
    {{"-fa", "--flash-attn", NULL, NULL},
     "attention always runs on the cache's codes (fp16 layers in llama.cpp's non-flash "
     "arithmetic); there is no flash-attention switch"},
    {{"-cnv", "--conversation", "--interactive", NULL},
     "`veloxquant chat` is the conversation mode (one turn per line when not on a terminal)"},
    {{"--mlock", "--no-mmap", "--mmap", NULL},
     "weights are read into huge pages when Linux gives them, else mapped (VQ_WEIGHTS=mmap)"},
    {{"-ub", "--ubatch-size", NULL, NULL}, "use -b / --batch (tokens per forward pass)"},
    {{"-tb", "--threads-batch", NULL, NULL}, "use -t / --threads (prefill and decode alike)"},
    {{"-sm", "--split-mode", "-mg", "--main-gpu"}, "veloxquant runs on the CPU only"},
};

/* 1 (after printing the explanation) when arg is a llama.cpp option we do not take. */
static int llama_option(const char *cmd, const char *arg) {
    char name[64];
    snprintf(name, sizeof name, "%s", arg);
    name[strcspn(name, "=")] = 0;
    for (size_t i = 0; i < sizeof llama_opts / sizeof llama_opts[0]; i++)
        for (int j = 0; j < 4 && llama_opts[i].opts[j]; j++)
            if (!strcmp(name, llama_opts[i].opts[j])) {
                fprintf(stderr, "%s: '%s' is a llama.cpp option: %s\n", cmd, name,
                        llama_opts[i].why);
                return 1;
            }
    return 0;
}

/* The shared grammar over a command's arguments (argv[1..]): llama.cpp options are explained
 * (returns 0), "--name_with_underscores[=v]" becomes "--name-with-underscores[=v]" (copies
 * in storage the caller frees). Stops at "--" and skips option values that follow a
 * separate word only as far as it can tell: a value never starts with "--". 1 ok. */
static int shared_grammar(const char *cmd, int argc, char **argv, char **storage) {
    *storage = NULL;
    size_t need = 0;
    for (int i = 1; i < argc; i++) need += strlen(argv[i]) + 1;
    char *buf = malloc(need + 1), *p = buf;
    if (!buf) return 1; /* out of memory: parse the arguments as they are */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) break;
        if (a[0] == '-' && a[1] != '-' && a[1] && a[2] && llama_option(cmd, a)) {
            free(buf);
            return 0;
        }
        if (a[0] != '-' || a[1] != '-') continue;
        if (llama_option(cmd, a)) {
            free(buf);
            return 0;
        }
        const size_t eq = strcspn(a, "=");
        if (!memchr(a, '_', eq)) continue;
        memcpy(p, a, strlen(a) + 1);
        for (size_t k = 2; k < eq; k++)
            if (p[k] == '_') p[k] = '-';
        argv[i] = p;
        p += strlen(a) + 1;
    }
    *storage = buf;
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "veloxquant %s — KV-cache compression with attention on codes\n\n", vq_version());
    fprintf(f,
            "usage: veloxquant COMMAND [options]   (veloxquant COMMAND --help for details)\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-16s %s\n", cmds[i].name, cmds[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("veloxquant %s\n", vq_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            char *storage;
            if (!shared_grammar(cmds[i].name, argc - 1, argv + 1, &storage)) return 2;
            const int rc = cmds[i].fn(argc - 1, argv + 1);
            free(storage);
            return rc;
        }
    const char *names[sizeof cmds / sizeof cmds[0]];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) names[i] = cmds[i].name;
    const int near = vq_nearest_name(argv[1], names, (int)(sizeof cmds / sizeof cmds[0]));
    if (near >= 0) {
        fprintf(stderr, "veloxquant: unknown command '%s': did you mean %s?\n", argv[1],
                names[near]);
        return 2;
    }
    fprintf(stderr, "veloxquant: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
