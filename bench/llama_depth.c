/* llama_depth.c — llama.cpp's prefill and decode at a depth whose cache is restored from a
 * state instead of evaluated, for depths where evaluating it takes hours (docs/BENCHMARK.md,
 * "Depths beyond an evaluated fill").
 *
 * llama-bench fills the depth of a cell by evaluating that many tokens once, saves the
 * sequence's state and restores it before every later repetition (its "depth run (cached)"):
 * its timed prefill and decode run on a restored cache. This program times the same two tests
 * the same way (llama-bench's context and model parameters, its thread pool with poll 50,
 * random token ids, a restore before each repetition) and differs only in how the saved state
 * is made: SEED tokens (default 512) are evaluated and their cells (K / V rows of the chosen
 * cache type, one per token and layer) are repeated up to DEPTH cells at positions
 * 0 .. DEPTH-1. The work of a prefill or decode step over n cached cells does not depend on
 * the cells' values, so the timings are what llama-bench would report after its own fill, at
 * SEED tokens of evaluation instead of DEPTH (bench/llama_bench.sh checks the two against each
 * other at a depth both can reach).
 *
 * Output: llama-bench's JSON fields the scripts read (n_prompt, n_gen, n_depth, n_threads,
 * samples_ns, build_commit, build_number), one object per test, on stdout.
 *
 * Built by bench/llama_bench.sh against the llama.cpp it builds for llama-bench (llama.h and
 * the static libraries of that tree); not part of the project's own build. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ggml-cpu.h> /* llama.cpp's, -I of its tree (bench/llama_bench.sh) */
#include <llama.h>

extern const char *LLAMA_COMMIT; /* common/build-info.cpp of the same tree */
extern int LLAMA_BUILD_NUMBER;

#define SEQ_MAGIC 0xaf143cd8u /* llama_context's io_magic, the first field of a seq state */

static void die(const char *msg) {
    fprintf(stderr, "llama_depth: %s\n", msg);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long arg_long(const char *s, long lo, const char *name) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo) {
        fprintf(stderr, "llama_depth: %s: '%s' is not an integer >= %ld\n", name, s, lo);
        exit(2);
    }
    return v;
}

static enum ggml_type arg_type(const char *s) {
    static const struct {
        const char *name;
        enum ggml_type type;
    } types[] = {{"f16", GGML_TYPE_F16},      {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0},
                 {"q4_1", GGML_TYPE_Q4_1},    {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
                 {"iq4_nl", GGML_TYPE_IQ4_NL}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, types[i].name)) return types[i].type;
    fprintf(stderr, "llama_depth: unknown cache type '%s'\n", s);
    exit(2);
}

/* A byte reader and writer over a state buffer; reading past the end is fatal. */
typedef struct {
    const uint8_t *p, *end;
} reader;
typedef struct {
    uint8_t *p, *end;
} writer;

static void rd(reader *r, void *dst, size_t n) {
    if ((size_t)(r->end - r->p) < n) die("the saved state is shorter than its fields say");
    memcpy(dst, r->p, n);
    r->p += n;
}
static void wr(writer *w, const void *src, size_t n) {
    if ((size_t)(w->end - w->p) < n) die("internal: the tiled state outgrew its buffer");
    memcpy(w->p, src, n);
    w->p += n;
}
/* n bytes of `src` (one run of `rows` rows) repeated to `want` rows */
static void wr_tiled(writer *w, const uint8_t *src, size_t row, uint32_t rows, uint32_t want) {
    for (uint32_t done = 0; done < want;) {
        uint32_t k = want - done < rows ? want - done : rows;
        wr(w, src, (size_t)k * row);
        done += k;
    }
}

/* The seq state of `seed` cells (llama_state_seq_get_data, one stream, one sequence, no cell
 * extension: the layout of llama_kv_cache::state_write) rewritten as `depth` cells at
 * positions 0 .. depth-1 whose rows repeat the seed's. Returns a malloc'd buffer. */
static uint8_t *tile_state(const uint8_t *src, size_t n, uint32_t depth, size_t *out_n) {
    reader r = {src, src + n};
    uint32_t magic, n_stream, cells, v_trans, n_layer;
    int32_t seq;
    rd(&r, &magic, 4);
    rd(&r, &seq, 4);
    rd(&r, &n_stream, 4);
    rd(&r, &cells, 4);
    if (magic != SEQ_MAGIC || n_stream != 1 || cells == 0)
        die("unexpected seq state (magic, streams or an empty cache)");
    for (uint32_t i = 0; i < cells; i++) { /* pos, n_seq_id, seq ids */
        int32_t pos, id;
        uint32_t nid;
        rd(&r, &pos, 4);
        rd(&r, &nid, 4);
        if ((uint32_t)pos != i || nid != 1) die("seed cells are not positions 0.. of one sequence");
        rd(&r, &id, 4);
    }
    rd(&r, &v_trans, 4);
    rd(&r, &n_layer, 4);
    /* the output is at most depth / cells + 1 times the input, plus the cell table */
    size_t cap = (n + 64) * ((size_t)depth / cells + 2) + (size_t)depth * 12;
    uint8_t *out = malloc(cap);
    if (!out) die("out of memory for the tiled state");
    writer w = {out, out + cap};
    uint32_t one = 1;
    wr(&w, &magic, 4);
    wr(&w, &seq, 4);
    wr(&w, &n_stream, 4);
    wr(&w, &depth, 4);
    for (uint32_t i = 0; i < depth; i++) {
        int32_t pos = (int32_t)i, id = 0;
        wr(&w, &pos, 4);
        wr(&w, &one, 4);
        wr(&w, &id, 4);
    }
    wr(&w, &v_trans, 4);
    wr(&w, &n_layer, 4);
    for (int kv = 0; kv < 2; kv++) { /* K rows, then V: rows (v_trans 0) or columns */
        for (uint32_t l = 0; l < n_layer; l++) {
            int32_t type;
            rd(&r, &type, 4);
            wr(&w, &type, 4);
            if (kv == 0 || !v_trans) {
                uint64_t row;
                rd(&r, &row, 8);
                wr(&w, &row, 8);
                if ((size_t)(r.end - r.p) / cells < row) die("seed state truncated");
                wr_tiled(&w, r.p, row, cells, depth);
                r.p += row * cells;
            } else { /* transposed V: per channel, one element per cell */
                uint32_t el, n_embd;
                rd(&r, &el, 4);
                rd(&r, &n_embd, 4);
                wr(&w, &el, 4);
                wr(&w, &n_embd, 4);
                for (uint32_t j = 0; j < n_embd; j++) {
                    if ((size_t)(r.end - r.p) / cells < el) die("seed state truncated");
                    wr_tiled(&w, r.p, el, cells, depth);
                    r.p += (size_t)el * cells;
                }
            }
        }
    }
    if (r.p != r.end) die("the seed state has fields this program does not know");
    *out_n = (size_t)(w.p - out);
    return out;
}

static void eval_random(struct llama_context *ctx, int n) {
    const struct llama_vocab *vocab = llama_model_get_vocab(llama_get_model(ctx));
    int n_vocab = llama_vocab_n_tokens(vocab);
    llama_token *tok = malloc(sizeof *tok * (size_t)n);
    if (!tok) die("out of memory");
    for (int i = 0; i < n; i++) tok[i] = rand() % n_vocab;
    if (llama_vocab_get_add_bos(vocab)) tok[0] = llama_vocab_bos(vocab); /* as llama-bench */
    for (int done = 0; done < n;) { /* batches of n_batch, as llama-bench's test_prompt */
        int k = n - done < (int)llama_n_batch(ctx) ? n - done : (int)llama_n_batch(ctx);
        if (llama_decode(ctx, llama_batch_get_one(tok + done, k)) != 0) die("llama_decode failed");
        done += k;
    }
    llama_synchronize(ctx);
    free(tok);
}

static void gen_random(struct llama_context *ctx, int n) {
    const struct llama_vocab *vocab = llama_model_get_vocab(llama_get_model(ctx));
    int n_vocab = llama_vocab_n_tokens(vocab);
    llama_token tok = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : rand() % n_vocab;
    for (int i = 0; i < n; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) die("llama_decode failed");
        llama_synchronize(ctx);
        tok = rand() % n_vocab;
    }
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void usage(FILE *f) {
    fputs(
        "usage: llama_depth -m MODEL -d DEPTH [-p PREFILL] [-n GEN] [-t THREADS]\n"
        "                   [-ctk TYPE] [-ctv TYPE] [-fa on|off] [-r REPS] [-s SEED]\n"
        "llama.cpp's prefill of PREFILL tokens [512] and GEN decode steps [128] after DEPTH\n"
        "cached tokens, REPS times [3], the depth restored from a state built by repeating\n"
        "SEED evaluated tokens [512]; TYPE f16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl [f16];\n"
        "-p 0 or -n 0 skips that test. JSON on stdout (llama-bench's fields).\n",
        f);
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    long depth = -1, prefill = 512, gen = 128, threads = 2, reps = 3, seed = 512;
    enum ggml_type tk = GGML_TYPE_F16, tv = GGML_TYPE_F16;
    int fa = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "llama_depth: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "-d")) depth = arg_long(v, 1, "-d");
        else if (!strcmp(a, "-p")) prefill = arg_long(v, 0, "-p");
        else if (!strcmp(a, "-n")) gen = arg_long(v, 0, "-n");
        else if (!strcmp(a, "-t")) threads = arg_long(v, 1, "-t");
        else if (!strcmp(a, "-r")) reps = arg_long(v, 1, "-r");
        else if (!strcmp(a, "-s")) seed = arg_long(v, 1, "-s");
        else if (!strcmp(a, "-ctk")) tk = arg_type(v);
        else if (!strcmp(a, "-ctv")) tv = arg_type(v);
        else if (!strcmp(a, "-fa")) {
            if (strcmp(v, "on") && strcmp(v, "off")) die("-fa takes on or off");
            fa = !strcmp(v, "on");
        } else {
            fprintf(stderr, "llama_depth: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path || depth < 1) {
        usage(stderr);
        return 2;
    }
    if (seed > depth) seed = depth;
    if (depth > INT32_MAX / 2) die("-d is too large");

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(model_path,
                                                           llama_model_default_params());
    if (!model) die("cannot load the model");

    /* the two tests, as llama-bench runs them: one context each, n_ctx = prefill + gen + depth */
    long tests[2][2] = {{prefill, 0}, {0, gen}};
    uint8_t *state = NULL;
    size_t state_n = 0;
    int printed = 0;
    printf("[\n");
    for (int t = 0; t < 2; t++) {
        long np = tests[t][0], ng = tests[t][1];
        if (np == 0 && ng == 0) continue;
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t)(np + ng + depth);
        cp.n_batch = 2048;
        cp.n_ubatch = 512;
        cp.type_k = tk;
        cp.type_v = tv;
        cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.swa_full = false;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) die("cannot create the context (cache type or size)");
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default((int)threads);
        tpp.poll = 50;
        struct ggml_threadpool *pool = ggml_threadpool_new(&tpp);
        if (!pool) die("cannot create the thread pool");
        llama_attach_threadpool(ctx, pool, NULL);
        llama_set_n_threads(ctx, (int)threads, (int)threads);
        llama_memory_t mem = llama_get_memory(ctx);

        /* warm-up as llama-bench: the prompt test's prompt or one decode step, empty cache */
        llama_memory_clear(mem, false);
        if (np > 0) eval_random(ctx, (int)np);
        else gen_random(ctx, 1);

        if (!state) { /* evaluate the seed, save it, repeat its cells up to the depth */
            llama_memory_clear(mem, false);
            eval_random(ctx, (int)seed);
            size_t n = llama_state_seq_get_size(ctx, 0);
            uint8_t *buf = malloc(n);
            if (!buf || llama_state_seq_get_data(ctx, buf, n, 0) != n)
                die("cannot save the seed's state");
            state = tile_state(buf, n, (uint32_t)depth, &state_n);
            free(buf);
        }
        if (printed) printf(",\n");
        printf(
            "  {\"n_prompt\": %ld, \"n_gen\": %ld, \"n_depth\": %ld, \"n_threads\": %ld, "
            "\"type_k\": \"%s\", \"type_v\": \"%s\", \"flash_attn\": %s, \"depth_seed\": %ld,"
            " \"build_commit\": \"%s\", \"build_number\": %d, \"samples_ns\": [",
            np, ng, depth, threads, ggml_type_name(tk), ggml_type_name(tv), fa ? "true" : "false",
            seed, LLAMA_COMMIT, LLAMA_BUILD_NUMBER);
        for (long r = 0; r < reps; r++) {
            llama_memory_clear(mem, false);
            if (llama_state_seq_set_data(ctx, state, state_n, 0) != state_n)
                die("llama.cpp refused the tiled state");
            if (llama_memory_seq_pos_max(mem, 0) != depth - 1) die("restored depth differs");
            uint64_t t0 = now_ns();
            if (np > 0) eval_random(ctx, (int)np);
            if (ng > 0) gen_random(ctx, (int)ng);
            printf("%s%llu", r ? ", " : "", (unsigned long long)(now_ns() - t0));
            fflush(stdout);
        }
        printf("]}");
        printed++;
        llama_free(ctx);
        ggml_threadpool_free(pool);
    }
    printf("\n]\n");
    free(state);
    llama_model_free(model);
    llama_backend_free();
    return printed ? 0 : 2;
}
