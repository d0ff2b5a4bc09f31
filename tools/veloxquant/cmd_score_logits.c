/* cmd_score_logits.c — `veloxquant score-logits`: scores next-token logits computed by another
 * engine (scripts/llamacpp_ppl.py streams llama.cpp's) with exactly the per-position code of
 * `perplexity` (src/eval/ppl.h vq_ppl_scorer: nll, --save-logits summaries, KL and top-1
 * against --kl-base), so both engines' figures come from one estimator.
 *
 * Input (little-endian; a file or stdin): a 32-byte header
 *   0  char[8] magic "VQRAWLG1"
 *   8  u32     version (1)
 *   12 u32     n_vocab
 *   16 u32     ctx (tokens per chunk; even, >= 4)
 *   20 u32     n_chunks
 *   24 u64     reserved (0)
 * then n_chunks * (ctx/2 - 1) records, one per scored position in `perplexity`'s order
 * (positions ctx/2 .. ctx-2 of each chunk): u32 target id, then n_vocab f32 logits. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "vq_tools.h"
#include "opts.h"

static const char *CMD = "score-logits";

static void usage(FILE *f) {
    fprintf(f,
            "usage: veloxquant score-logits [-i FILE] [--save-logits FILE] [--kl-base FILE]\n\n"
            "Perplexity, KL and top-1 of logits computed elsewhere (a VQRAWLG1 stream: format in\n"
            "tools/veloxquant/cmd_score_logits.c; written by scripts/llamacpp_ppl.py), with the\n"
            "per-position code of `perplexity`.\n\n"
            "  -i, --input FILE      the stream (default: stdin)\n"
            "  --save-logits FILE    store top-k log-probs + remainder mass of every position\n"
            "  --top-k K             entries per token in --save-logits (default 32, max 256)\n"
            "  --kl-base FILE        KL(base || these logits) mean/median/p99 and top-1\n"
            "                        agreement against a --save-logits file (same positions)\n"
            "  --json                one JSON object on stdout\n"
            "  -h, --help            this help\n");
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vq_cmd_score_logits(int argc, char **argv) {
    static const struct option lo[] = {
        {"input", required_argument, 0, 'i'},
        {"save-logits", required_argument, 0, 'S'},
        {"kl-base", required_argument, 0, 'K'},
        {"top-k", required_argument, 0, 'k'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *in_path = NULL, *save_path = NULL, *base_path = NULL;
    int top_k = 32, json = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":i:h", lo, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'i': in_path = optarg; break;
        case 'S': save_path = optarg; break;
        case 'K': base_path = optarg; break;
        case 'k': ok = vq_opt_int(CMD, "--top-k", optarg, 1, VQ_LOGITS_MAX_TOPK, &top_k); break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        case ':':
        default: vq_cli_bad_option(CMD, c, argc, argv, lo); return 2;
        }
        if (ok != 1) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", CMD, argv[optind]);
        return 2;
    }
    /* outputs and inputs before reading the stream: --save-logits never replaces a device,
     * FIFO or folder; a named input is a regular file (a stream comes on stdin, "-") */
    if (save_path && !vq_opt_output(CMD, "--save-logits", save_path)) return 1;
    int kfd;
    if (base_path && vq_file_open_input(base_path, UINT64_MAX, "logits file", &kfd, NULL) != 0) {
        fprintf(stderr, "%s: --kl-base: %s\n", CMD, vq_file_error());
        return 1;
    }
    if (base_path) close(kfd);
    FILE *in = stdin;
    if (in_path && strcmp(in_path, "-")) {
        int ifd;
        if (vq_file_open_input(in_path, UINT64_MAX, "logits stream", &ifd, NULL) != 0) {
            fprintf(stderr, "%s: -i: %s (a stream goes on stdin: -i -)\n", CMD, vq_file_error());
            return 1;
        }
        if (!(in = fdopen(ifd, "rb"))) {
            close(ifd);
            fprintf(stderr, "%s: %s: %s\n", CMD, in_path, strerror(errno));
            return 1;
        }
    }
    const char *in_name = in_path ? in_path : "stdin";
    int rc = 1;
    vq_logits_file *save = NULL, *base = NULL;
    float *row = NULL;
    struct vq_ppl_scorer sc;
    memset(&sc, 0, sizeof sc);
    unsigned char h[32];
    if (fread(h, 1, sizeof h, in) != sizeof h || memcmp(h, "VQRAWLG1", 8) || rd32(h + 8) != 1) {
        fprintf(stderr, "%s: %s: not a VQRAWLG1 version 1 stream\n", CMD, in_name);
        goto out;
    }
    const uint32_t n_vocab = rd32(h + 12), ctx = rd32(h + 16), n_chunks = rd32(h + 20);
    if (n_vocab < 1 || n_vocab > (1u << 24) || ctx < 4 || ctx % 2 || ctx > (1u << 24) ||
        n_chunks < 1 || n_chunks > (1u << 24)) {
        fprintf(stderr, "%s: %s: bad header (n_vocab %u, ctx %u, n_chunks %u)\n", CMD, in_name,
                n_vocab, ctx, n_chunks);
        goto out;
    }
    const int64_t per_chunk = (int64_t)ctx / 2 - 1, n_pos = per_chunk * n_chunks;
    vq_status st;
    if (base_path) {
        if (!(base = vq_logits_open(base_path, &st))) {
            vq_cli_file_fail(CMD, "--kl-base", base_path, st);
            goto out;
        }
        if (vq_logits_n_vocab(base) != (int)n_vocab || vq_logits_ctx(base) != (int)ctx ||
            vq_logits_n_records(base) != (uint64_t)n_pos) {
            fprintf(stderr,
                    "%s: --kl-base %s (n_vocab %d, ctx %d, %llu positions) does not match the "
                    "stream (n_vocab %u, ctx %u, %lld positions)\n",
                    CMD, base_path, vq_logits_n_vocab(base), vq_logits_ctx(base),
                    (unsigned long long)vq_logits_n_records(base), n_vocab, ctx, (long long)n_pos);
            goto out;
        }
    }
    if (save_path && (uint32_t)top_k > n_vocab) {
        fprintf(stderr, "%s: --top-k %d is larger than the stream's vocabulary (n_vocab %u)\n", CMD,
                top_k, n_vocab);
        goto out;
    }
    if (save_path && !(save = vq_logits_create(save_path, top_k, (int)n_vocab, (int)ctx, &st))) {
        vq_cli_file_fail(CMD, "--save-logits", save_path, st);
        goto out;
    }
    row = malloc((size_t)n_vocab * sizeof *row);
    if (!row || vq_ppl_scorer_init(&sc, save, base, n_pos) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto out;
    }
    for (int64_t i = 0; i < n_pos; i++) {
        unsigned char t[4];
        if (fread(t, 1, 4, in) != 4 || fread(row, sizeof *row, n_vocab, in) != n_vocab) {
            fprintf(stderr, "%s: %s: stream ends at position %lld of %lld\n", CMD, in_name,
                    (long long)i, (long long)n_pos);
            goto out;
        }
        char why[200];
        st = vq_ppl_scorer_add(&sc, row, (int)n_vocab, rd32(t), why, sizeof why);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "%s: %s: chunk %lld, position %lld: %s\n", CMD, in_name,
                    (long long)(i / per_chunk), (long long)(ctx / 2 + i % per_chunk), why);
            goto out;
        }
    }
    if (fgetc(in) != EOF) {
        fprintf(stderr, "%s: %s: data after the last position\n", CMD, in_name);
        goto out;
    }
    if (save) {
        st = vq_logits_close(save);
        save = NULL;
        if (st != VQ_STATUS_OK) {
            vq_cli_file_fail(CMD, "--save-logits", save_path, st);
            goto out;
        }
    }
    struct vq_ppl_result res;
    memset(&res, 0, sizeof res);
    vq_ppl_scorer_finish(&sc, &res);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "input", in_name);
        cJSON_AddNumberToObject(o, "ctx", ctx);
        cJSON_AddNumberToObject(o, "chunks", n_chunks);
        cJSON_AddNumberToObject(o, "tokens_scored", (double)res.n_scored);
        cJSON_AddNumberToObject(o, "ppl", res.ppl);
        cJSON_AddNumberToObject(o, "ppl_stderr", res.ppl_stderr);
        cJSON_AddNumberToObject(o, "nll_mean", res.nll_mean);
        if (base) {
            cJSON_AddNumberToObject(o, "kld_mean", res.kld_mean);
            cJSON_AddNumberToObject(o, "kld_median", res.kld_median);
            cJSON_AddNumberToObject(o, "kld_p99", res.kld_p99);
            cJSON_AddNumberToObject(o, "top1", res.top1);
            cJSON_AddNumberToObject(o, "kl_top_k", vq_logits_top_k(base));
        }
        char *txt = cJSON_Print(o);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(o);
    } else {
        printf("%s: ctx %u, %u chunks, %lld tokens scored\n", in_name, ctx, n_chunks,
               (long long)res.n_scored);
        printf("perplexity: %.4f +/- %.4f\n", res.ppl, res.ppl_stderr);
        if (base)
            printf("KL(base || this): mean %.6f, median %.6f, p99 %.6f; top-1 agreement %.2f%%\n",
                   res.kld_mean, res.kld_median, res.kld_p99, 100.0 * res.top1);
    }
    rc = 0;
out:
    vq_ppl_scorer_free(&sc);
    free(row);
    vq_logits_discard(save);
    vq_logits_close(base);
    if (in != stdin) fclose(in);
    return rc;
}
