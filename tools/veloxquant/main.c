/* main.c — veloxquant command dispatcher. */
#include <stdio.h>
#include <string.h>

#include "veloxquant.h"
#include "cli.h"

static int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("veloxquant %s\n", vq_version());
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
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "veloxquant: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
