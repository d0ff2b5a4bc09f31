/*
 * bench_batch.c — the batched decode step of `veloxquant serve`: vq_ctx_eval_batch over n rows
 * (n contexts, one token each, each at the same depth on its own cache) against one-row
 * decoding (vq_ctx_eval of one token on one context), on the default model.
 *
 * Every context is prefilled with `depth` tokens; a sample runs `steps` decode steps of the
 * configuration, then cuts every context back to `depth` (vq_ctx_truncate), so each sample
 * sees the same cache lengths. The configurations are interleaved within each repeat (1 row,
 * then 2, 4, ... rows, then n separate evals), so that a shared machine's load falls on all of
 * them alike; reported: the median over repeats of the milliseconds per step and the tokens per
 * second (rows / step time), and each batch's ratio against the 1-row vq_ctx_eval median of
 * the same run (the acceptance figure of docs/SERVE.md: 16 rows >= 3x one row's tok/s).
 * --cpu-time times the process's CPU time (CLOCK_PROCESS_CPUTIME_ID) instead of the wall
 * clock: on a shared, oversubscribed machine the time the process waits descheduled then does
 * not count (the cycles a busy sibling hyperthread takes still do); with one thread it is the
 * step's own compute time.
 *
 * Usage: bench_batch [-m MODEL] [--kv KV] [-t THREADS] [-d DEPTH] [-r REPEATS] [-s STEPS]
 *                    [--rows 1,2,4,8,16] [--separate] [--cpu-time]
 *   MODEL   default: the default model (vq_model_default_path: SmolLM2-135M-Instruct Q4_1)
 *   KV      any KV config vq_ctx_create_kv takes (fp16, kv4, kv3, ...); default fp16
 *   THREADS the contexts' threads (default 1)
 *   DEPTH   tokens in each cache before the measured steps (default 8)
 *   REPEATS samples per configuration (default 9); STEPS decode steps per sample (default 4)
 *   --separate also times n separate one-token vq_ctx_eval calls per step (the unbatched
 *   server), n from --rows
 * Output (CSV): mode,rows,kv,threads,depth,ms_per_step,ms_min,tok_s,vs_1row
 * mode = eval (one vq_ctx_eval, rows 1), batch (vq_ctx_eval_batch; rows 1 is vq_ctx_eval
 * inside), separate. The ISA is $VQ_ISA's (or the best available), printed on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "veloxquant.h"
#include "vq_engine.h"

#define MAX_ROWS 64

static int g_cpu_time; /* --cpu-time */

/* Seconds on the clock the run measures: wall (monotonic) or the process's CPU time. */
static double clock_s(void) {
    if (!g_cpu_time) return bench_now_s();
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_batch: %s: %s\n", what, vq_engine_last_error());
    exit(1);
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_batch [-m MODEL] [--kv KV] [-t THREADS] [-d DEPTH] "
            "[-r REPEATS] [-s STEPS] [--rows 1,2,4,8,16] [--separate] [--cpu-time]\n");
    exit(2);
}

enum mode { M_EVAL, M_BATCH, M_SEPARATE };
static const char *const MODE_NAME[] = {"eval", "batch", "separate"};

struct cfg {
    enum mode mode;
    int rows;
    double *t; /* ms per step, one per repeat */
};

/* One sample of a configuration: `steps` decode steps, then every context used back to
 * depth. Returns milliseconds per step. */
static double sample(const struct cfg *c, vq_ctx **ctx, int64_t depth, int steps, float **lg,
                     int32_t *tok) {
    const double t0 = clock_s();
    for (int s = 0; s < steps; s++) {
        vq_status st = VQ_STATUS_OK;
        if (c->mode == M_EVAL) st = vq_ctx_eval(ctx[0], &tok[0], 1, lg[0]);
        else if (c->mode == M_BATCH) st = vq_ctx_eval_batch(ctx, tok, c->rows, lg);
        else
            for (int i = 0; i < c->rows && st == VQ_STATUS_OK; i++)
                st = vq_ctx_eval(ctx[i], &tok[i], 1, lg[i]);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "bench_batch: step: %s\n", vq_status_str(st));
            exit(1);
        }
    }
    const double ms = (clock_s() - t0) * 1e3 / steps;
    for (int i = 0; i < c->rows; i++)
        if (vq_ctx_truncate(ctx[i], depth) != VQ_STATUS_OK) die("truncate");
    return ms;
}

int main(int argc, char **argv) {
    char model[4096] = "";
    const char *kv = "fp16";
    int threads = 1, reps = 9, steps = 4, separate = 0;
    int64_t depth = 8;
    int rows[16] = {1, 2, 4, 8, 16}, n_rows = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int more = i + 1 < argc;
        if (!strcmp(a, "-m") && more) snprintf(model, sizeof model, "%s", argv[++i]);
        else if (!strcmp(a, "--kv") && more) kv = argv[++i];
        else if (!strcmp(a, "-t") && more) threads = atoi(argv[++i]);
        else if (!strcmp(a, "-d") && more) depth = atoll(argv[++i]);
        else if (!strcmp(a, "-r") && more) reps = atoi(argv[++i]);
        else if (!strcmp(a, "-s") && more) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--separate")) separate = 1;
        else if (!strcmp(a, "--cpu-time")) g_cpu_time = 1;
        else if (!strcmp(a, "--rows") && more) {
            n_rows = 0;
            for (char *p = argv[++i]; *p && n_rows < 16;) {
                char *e;
                const long v = strtol(p, &e, 10);
                if (e == p || v < 1 || v > MAX_ROWS) usage();
                rows[n_rows++] = (int)v;
                p = *e == ',' ? e + 1 : e;
            }
        } else usage();
    }
    if (threads < 1 || reps < 1 || steps < 1 || depth < 1 || depth > 1 << 20 || n_rows < 1) usage();
    if (!model[0] && vq_model_default_path(model, sizeof model) < 0) die("default model path");
    int max_rows = 1;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;

    vq_status st;
    vq_model *m = vq_model_load(model, &st);
    if (!m) die(model);
    const int V = vq_model_info_get(m)->n_vocab;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_threads = threads;
    /* the batch runs in ctx[0]'s buffers, n_batch rows at a time, and n_batch is capped at
     * n_ctx: room for every row in one pass */
    cp.n_batch = max_rows > 16 ? max_rows : 16;
    cp.n_ctx = depth + steps + 1 > cp.n_batch ? depth + steps + 1 : cp.n_batch;
    vq_ctx *ctx[MAX_ROWS];
    float *lg[MAX_ROWS];
    int32_t tok[MAX_ROWS];
    /* logits rows in one array (as the server gives them): the output matrix runs in groups */
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)max_rows);
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)depth);
    if (!logits || !prompt) die("out of memory");
    for (int i = 0; i < max_rows; i++) {
        ctx[i] = vq_ctx_create_kv(m, &cp, kv, &st);
        if (!ctx[i]) die(kv);
        /* distinct prompts: token ids spread over the vocabulary */
        for (int64_t j = 0; j < depth; j++)
            prompt[j] = (int32_t)((1000 + 7919 * (i * depth + j)) % (V - 1000) + 500);
        lg[i] = logits + (size_t)i * V;
        if (vq_ctx_eval(ctx[i], prompt, depth, lg[i]) != VQ_STATUS_OK) die("prefill");
        tok[i] = (int32_t)(100 + 37 * i);
    }
    fprintf(stderr,
            "bench_batch: %s, kv %s, %d thread(s), isa %s, depth %lld, %d x %d steps, %s time\n",
            model, kv, threads, vq_isa_name(vq_ctx_isa(ctx[0])), (long long)depth, reps, steps,
            g_cpu_time ? "cpu" : "wall");

    struct cfg cf[40];
    int n_cf = 0;
    cf[n_cf++] = (struct cfg){M_EVAL, 1, NULL};
    for (int i = 0; i < n_rows; i++) cf[n_cf++] = (struct cfg){M_BATCH, rows[i], NULL};
    if (separate)
        for (int i = 0; i < n_rows; i++)
            if (rows[i] > 1) cf[n_cf++] = (struct cfg){M_SEPARATE, rows[i], NULL};
    for (int c = 0; c < n_cf; c++)
        if (!(cf[c].t = malloc(sizeof(double) * (size_t)reps))) die("out of memory");
    for (int c = 0; c < n_cf; c++) sample(&cf[c], ctx, depth, steps, lg, tok); /* warm-up */
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < n_cf; c++) cf[c].t[r] = sample(&cf[c], ctx, depth, steps, lg, tok);

    printf("mode,rows,kv,threads,depth,ms_per_step,ms_min,tok_s,vs_1row\n");
    double base = 0;
    for (int c = 0; c < n_cf; c++) {
        bench_sort(cf[c].t, (size_t)reps);
        const double med = cf[c].t[reps / 2], tps = cf[c].rows * 1e3 / med;
        if (c == 0) base = tps;
        printf("%s,%d,%s,%d,%lld,%.3f,%.3f,%.1f,%.2f\n", MODE_NAME[cf[c].mode], cf[c].rows, kv,
               threads, (long long)depth, med, cf[c].t[0], tps, tps / base);
        free(cf[c].t);
    }
    for (int i = 0; i < max_rows; i++) vq_ctx_free(ctx[i]);
    vq_model_free(m);
    free(logits);
    free(prompt);
    return 0;
}
