/* cmd_bench.c — `veloxquant bench`: model-free microbenchmark of encode and attend latency
 * over synthetic keys, with an fp16 cache timed at the same seq_len in the same run, and the
 * vector/attention quality of the method (docs/BENCHMARK.md).
 *
 * Synthetic data (the library's vq_synth_*, veloxquant.h): keys and values are i.i.d. N(0,1) per
 * coordinate plus a fixed offset of +4 on four channels of the keys (real keys have
 * channel-aligned outliers); queries are N(0,1).
 * One layer, --kv_heads kv heads (default 1) with one query head each, one query per attend
 * call (a decode step).
 *
 * Calibrated methods (vecinfer, spectral) get a synthetic calibration: keys and values are
 * fitted on their own draw of synthetic data (same generator, separate samples; no model) of
 * CAL_TOKENS tokens (more for big vecinfer codebooks), and the output says so. Their numbers
 * are therefore those of a calibration matched to the synthetic data, not of a real model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "veloxquant.h"
#include "cli.h"
#include "kvconfig.h"
#include "opts.h"

#define MAX_SEQ_LENS 32
#define CAL_TOKENS 1024

struct bench_opts {
    int head_dim;
    uint64_t seed; /* synthetic data seed */
    int64_t seq_lens[MAX_SEQ_LENS];
    int n_seq;
    int compare, repeats, threads, json;
    int kv_heads;
    enum vq_isa isa;
    struct vq_kv_opts kv;       /* the KV options (kvconfig.h), as every command */
    struct vq_cache_params cfg; /* resolved: key / value codecs and the modifiers */
    char name[96];              /* its config label */
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant bench --method M [options]\n\n"
        "Times encode (append) and fused attend of a KV method on synthetic keys, next to an fp16\n"
        "cache at the same seq_len in the same run, and reports the method's quality.\n\n"
        "  --method M, --bits B and every KV option below (required: a method)\n"
        "  --head-dim D          head dimension (default 128)\n"
        "  --seq-len T           cached tokens (default 1000)\n"
        "  --seq-lens T1 T2 ...  several seq_lens (overrides --seq-len)\n"
        "  --seed S              synthetic data seed (default 42; codec seeds: --kv-seed)\n"
        "  --compare-optimized   also time the decode-then-dot reference attend and print\n"
        "                        seq_len | baseline_attend_ms | optimized_attend_ms | speedup\n"
        "  --repeats N           timed repeats; medians are reported (default 7)\n"
        "  -t, --threads N       attention threads (default 1)\n"
        "  --kv-heads H          KV heads in the cache, one query head each (default 1: one\n"
        "                        head's codes stay in the CPU caches; 32 or more at long\n"
        "                        seq_len make every attend stream the cache from DRAM, as a\n"
        "                        decode step over a real model's layers does)\n"
        "  --isa ISA             auto|scalar|avx2|avx512 kernels (default auto)\n"
        "  Every option may also be spelled with '_' for '-' (--seq_lens, --compare_optimized,\n"
        "  --group_size, ...: the reference tool's spelling); --n-outlier-channels is\n"
        "  --outlier-channels. With a modifier, the method's cache (timing, bytes) uses it and\n"
        "                        cos_k / ip_slope / softmax_kl are measured on the keys as that\n"
        "                        cache stores them (vq_cache_read, centering off) instead of\n"
        "                        on the bare key codec\n"
        "  --json                one JSON object per run on stdout instead of tables\n");
    fputs(
        "\nKV options (the same table and defaults as generate / perplexity / sweep):\n" VQ_KV_HELP,
        f);
}

/* ---- synthetic data ---------------------------------------------------------------------- */

/* The library's generator (vq_synth_*, veloxquant.h): one stream for the whole run, so that
 * bindings reproduce the data from the documented call sequence. */
static vq_synth synth;
static void fill_keys(float *k, int64_t n, int d) { vq_synth_keys(&synth, k, n, d); }
static void fill_normal(float *x, int64_t n) { vq_synth_normal(&synth, x, n); }

/* ---- quality ------------------------------------------------------------------------------ */

struct quality {
    double cos_k, cos_v, slope, ip_err_sd, kl;
};

static double dotd(const float *a, const float *b, int d) {
    double s = 0;
    for (int j = 0; j < d; j++) s += (double)a[j] * b[j];
    return s;
}

/* Mean cosine between rows a[t] and b[t] (t < n, d floats each); 0 for a zero row. */
static double rows_cos(const float *a, const float *b, int64_t n, int d) {
    double s = 0;
    for (int64_t t = 0; t < n; t++) {
        const float *x = a + t * d, *y = b + t * d;
        double nx = sqrt(dotd(x, x, d)), ny = sqrt(dotd(y, y, d));
        s += (nx > 0 && ny > 0) ? dotd(x, y, d) / (nx * ny) : 0.0;
    }
    return s / (double)n;
}

static double mean_cos(const vq_codec *c, const float *x, int64_t n, int d, float *tmp,
                       void *codes) {
    int bt = vq_codec_block_tokens(c);
    n = n / bt * bt;
    if (n == 0) return NAN;
    if (vq_codec_encode(c, x, n, codes) != VQ_STATUS_OK) return NAN;
    vq_codec_decode(c, codes, n, tmp);
    return rows_cos(x, tmp, n, d);
}

/* Score statistics over random queries: slope of estimate on truth, sd of the error relative
 * to |q||k|, and softmax KL(p_true || p_est) averaged over the queries. */
struct ip_acc {
    double sxy, sxx, se, se2, kl;
    long ne;
    int nq;
};

/* Adds one query qv: est[t] estimates qv . k[t] for t < n; tru, p, ph are n-double scratch. */
static void ip_acc_query(struct ip_acc *a, const float *qv, const float *k, const double *est,
                         int64_t n, int d, double *tru, double *p, double *ph) {
    const double scale = 1.0 / sqrt((double)d), nq2 = sqrt(dotd(qv, qv, d));
    double m1 = -1e300, m2 = -1e300;
    for (int64_t t = 0; t < n; t++) {
        const float *kt = k + t * d;
        tru[t] = dotd(qv, kt, d);
        double nk = sqrt(dotd(kt, kt, d));
        a->sxy += est[t] * tru[t];
        a->sxx += tru[t] * tru[t];
        double e = (est[t] - tru[t]) / (nq2 * nk + 1e-30);
        a->se += e;
        a->se2 += e * e;
        a->ne++;
        if (tru[t] * scale > m1) m1 = tru[t] * scale;
        if (est[t] * scale > m2) m2 = est[t] * scale;
    }
    double z1 = 0, z2 = 0, k1 = 0;
    for (int64_t t = 0; t < n; t++) {
        p[t] = exp(tru[t] * scale - m1);
        z1 += p[t];
        ph[t] = exp(est[t] * scale - m2);
        z2 += ph[t];
    }
    for (int64_t t = 0; t < n; t++) {
        double x = p[t] / z1, y = ph[t] / z2;
        if (x > 0) k1 += x * log(x / (y > 1e-300 ? y : 1e-300));
    }
    a->kl += k1;
    a->nq++;
}

static void ip_acc_finish(const struct ip_acc *a, struct quality *q) {
    q->slope = a->sxy / a->sxx;
    const double mean = a->se / (double)a->ne;
    q->ip_err_sd = sqrt(a->se2 / (double)a->ne - mean * mean);
    q->kl = a->kl / a->nq;
}

enum { IP_QUERIES = 32 };

/* Inner-product slope/error through the fused score path and softmax KL(p_fp32 || p_method). */
static void ip_quality(const vq_codec *c, const float *k, int64_t n, int d, struct quality *q) {
    int bt = vq_codec_block_tokens(c);
    n = n / bt * bt;
    q->slope = q->ip_err_sd = q->kl = NAN;
    if (n == 0) return;
    void *codes = malloc(vq_codec_block_bytes(c) * (size_t)(n / bt));
    void *qs = aligned_alloc(64, (vq_codec_query_bytes(c) + 63) / 64 * 64);
    float *est = malloc(sizeof(float) * (size_t)n);
    double *estd = malloc(sizeof(double) * (size_t)n), *tru = malloc(sizeof(double) * (size_t)n);
    double *p = malloc(sizeof(double) * (size_t)n), *ph = malloc(sizeof(double) * (size_t)n);
    float qv[1024];
    if (!codes || !qs || !est || !estd || !tru || !p || !ph ||
        vq_codec_encode(c, k, n, codes) != VQ_STATUS_OK)
        goto done;
    struct ip_acc acc = {0};
    for (int iq = 0; iq < IP_QUERIES; iq++) {
        fill_normal(qv, d);
        vq_codec_prepare_query(c, qv, qs);
        vq_codec_score(c, qs, codes, n, est);
        for (int64_t t = 0; t < n; t++) estd[t] = est[t];
        ip_acc_query(&acc, qv, k, estd, n, d, tru, p, ph);
    }
    ip_acc_finish(&acc, q);
done:
    free(codes);
    free(qs);
    free(est);
    free(estd);
    free(tru);
    free(p);
    free(ph);
}

/* 1 if a cache modifier is on. */
static int has_modifier(const struct bench_opts *o) {
    return o->cfg.n_outlier_channels > 0 || o->cfg.outlier_token_k > 0.0f;
}

/* Cache parameters of a bench run: one layer, kv_heads streams; the resolved KV config (codecs
 * and outlier modifiers) when method, else a plain fp16 cache (the baseline); centering is left
 * to the caller. */
static struct vq_cache_params bench_cache_params(const struct bench_opts *o, int method,
                                                 int kv_heads, int threads, int64_t max_tokens,
                                                 const vq_calib_data *cd) {
    struct vq_cache_params cp = method ? o->cfg : vq_cache_params_default();
    cp.n_layers = 1;
    cp.n_kv_heads = kv_heads;
    cp.head_dim = o->head_dim;
    cp.max_tokens = max_tokens;
    cp.n_threads = threads;
    cp.key.role = VQ_ROLE_KEY;
    cp.value.role = VQ_ROLE_VALUE;
    cp.key.isa = cp.value.isa = o->isa;
    cp.key.calib = cp.value.calib = method ? cd : NULL;
    return cp;
}

/* Key quality with the modifiers: the first n key rows through a one-head cache with the
 * modifiers (one append, centering off), decoded with vq_cache_read; cos_k and the score
 * statistics of ip_quality computed from the decoded keys (fused attend equals that
 * decode-then-dot reference, tests/unit/test_cache_outlier.c). */
static vq_status cache_key_quality(const struct bench_opts *o, const float *k, int64_t n, int d,
                                   const vq_calib_data *cd, struct quality *q) {
    struct vq_cache_params cp = bench_cache_params(o, 1, 1, 1, n, cd);
    cp.center_keys = cp.center_values = 0;
    vq_status st;
    vq_cache *c = vq_cache_create(&cp, &st);
    if (!c) return st;
    float *kh = malloc(sizeof(float) * (size_t)(n * d));
    double *tru = malloc(sizeof(double) * (size_t)n), *est = malloc(sizeof(double) * (size_t)n);
    double *p = malloc(sizeof(double) * (size_t)n), *ph = malloc(sizeof(double) * (size_t)n);
    st = VQ_STATUS_NO_MEMORY;
    if (!kh || !tru || !est || !p || !ph) goto done;
    if ((st = vq_cache_append(c, 0, k, k, VQ_DTYPE_F32, n)) != VQ_STATUS_OK) goto done;
    vq_cache_read(c, 0, 0, kh, NULL);
    q->cos_k = rows_cos(k, kh, n, d);
    struct ip_acc acc = {0};
    float qv[1024];
    for (int iq = 0; iq < IP_QUERIES; iq++) {
        fill_normal(qv, d);
        for (int64_t t = 0; t < n; t++) est[t] = dotd(qv, kh + t * d, d);
        ip_acc_query(&acc, qv, k, est, n, d, tru, p, ph);
    }
    ip_acc_finish(&acc, q);
done:
    free(kh);
    free(tru);
    free(est);
    free(p);
    free(ph);
    vq_cache_free(c);
    return st;
}

/* ---- timing ------------------------------------------------------------------------------- */

struct timing {
    double encode_ms, attend_ms, ref_attend_ms;
    size_t bytes, key_bytes, fp16_bytes, fp16_key_bytes;
};

/* Times the method's cache (method = 1; with its modifiers) or the fp16 baseline (0). */
static vq_status time_cache(const struct bench_opts *o, int method, const float *k, const float *v,
                            const float *qv, int64_t T, int with_ref, const vq_calib_data *cd,
                            struct timing *out) {
    struct vq_cache_params cp = bench_cache_params(o, method, o->kv_heads, o->threads, T, cd);
    vq_status st;
    vq_cache *c = vq_cache_create(&cp, &st);
    if (!c) return st;
    double enc[64], att[64], ref[64];
    int R = o->repeats;
    const int H = o->kv_heads;
    float *out_v = malloc(sizeof(float) * (size_t)o->head_dim * (size_t)H);
    for (int r = 0; r < R; r++) {
        vq_cache_reset(c);
        double t0 = vq_now_s();
        st = vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, T);
        enc[r] = (vq_now_s() - t0) * 1e3;
        if (st != VQ_STATUS_OK) goto fail;
    }
    const float scale = 1.0f / sqrtf((float)o->head_dim);
    /* Each timed sample is several attend calls so that short contexts are measurable. */
    const int64_t work = T * H;
    int inner = work >= 65536 ? 1 : work >= 8192 ? 4 : work >= 1024 ? 16 : 64;
    st = vq_cache_attend(c, 0, qv, H, 1, NULL, scale, out_v); /* warm-up */
    if (st != VQ_STATUS_OK) goto fail;
    for (int r = 0; r < R; r++) {
        double t0 = vq_now_s();
        for (int i = 0; i < inner; i++) vq_cache_attend(c, 0, qv, H, 1, NULL, scale, out_v);
        att[r] = (vq_now_s() - t0) * 1e3 / inner;
    }
    out->ref_attend_ms = NAN;
    if (with_ref) {
        int rin = inner / 4 > 0 ? inner / 4 : 1;
        for (int r = 0; r < R; r++) {
            double t0 = vq_now_s();
            for (int i = 0; i < rin; i++) vq_cache_attend_ref(c, 0, qv, H, 1, NULL, scale, out_v);
            ref[r] = (vq_now_s() - t0) * 1e3 / rin;
        }
        out->ref_attend_ms = vq_median(ref, R);
    }
    out->encode_ms = vq_median(enc, R);
    out->attend_ms = vq_median(att, R);
    struct vq_cache_memory m;
    vq_cache_memory(c, &m);
    out->bytes = m.total_bytes;
    out->key_bytes = m.key_total_bytes;
    out->fp16_bytes = m.fp16_bytes;
    out->fp16_key_bytes = m.fp16_key_bytes;
fail:
    free(out_v);
    vq_cache_free(c);
    return st;
}

/* ---- synthetic calibration ------------------------------------------------------------- */

/* Fits one role of a calibrated codec p on n fresh synthetic samples; *n_used = n (0 if the
 * method needs no calibration). Returns 0 after printing an error. */
static int fit_role(const struct bench_opts *o, vq_calib_data *cd, const struct vq_codec_params *p,
                    enum vq_role role, int64_t *n_used) {
    const int d = o->head_dim;
    const unsigned fl = vq_method_flags(p->method);
    int c = 0, v = 0;
    int64_t n = CAL_TOKENS;
    *n_used = 0;
    if (fl & VQ_METHOD_F_CALIB_CODEBOOK) {
        if (vq_vecinfer_shape(p, &c, &v) != VQ_STATUS_OK || v < 1 || d % v)
            return 1;                                         /* the codec reports it */
        const int64_t need = 4 * ((int64_t)1 << c) / (d / v); /* 4 sub-vectors per codeword */
        if (need > n) n = need;
    } else if (!(fl & VQ_METHOD_F_CALIB_PCA)) {
        return 1;
    }
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)d);
    if (!x) {
        fprintf(stderr, "bench: out of memory\n");
        return 0;
    }
    if (role == VQ_ROLE_KEY) fill_keys(x, n, d);
    else fill_normal(x, n * d);
    vq_status st = fl & VQ_METHOD_F_CALIB_CODEBOOK
                     ? vq_calib_fit_vecinfer(cd, 0, role, x, n, c, v, o->seed)
                     : vq_calib_fit_spectral(cd, 0, role, x, n);
    free(x);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "bench: synthetic calibration of %s failed: %s\n",
                vq_method_name(p->method), vq_status_str(st));
        return 0;
    }
    *n_used = n;
    return 1;
}

static int fit_synthetic_calib(const struct bench_opts *o, vq_calib_data **cd, int64_t *nk,
                               int64_t *nv) {
    struct vq_method_info ki, vi;
    *cd = NULL;
    *nk = *nv = 0;
    if (vq_method_info_get(o->cfg.key.method, &ki) != VQ_STATUS_OK ||
        vq_method_info_get(o->cfg.value.method, &vi) != VQ_STATUS_OK)
        return 1;
    if (!ki.needs_calibration && !vi.needs_calibration) return 1;
    vq_status st;
    *cd = vq_calib_data_create(1, o->head_dim, &st);
    if (!*cd) {
        fprintf(stderr, "bench: %s\n", vq_status_str(st));
        return 0;
    }
    vq_synth_seed(&synth, o->seed ^ 0x63616c6962ull); /* the "calib" draw */
    if ((ki.needs_calibration && !fit_role(o, *cd, &o->cfg.key, VQ_ROLE_KEY, nk)) ||
        (vi.needs_calibration && !fit_role(o, *cd, &o->cfg.value, VQ_ROLE_VALUE, nv))) {
        vq_calib_data_free(*cd);
        *cd = NULL;
        return 0;
    }
    return 1;
}

/* ---- main --------------------------------------------------------------------------------- */

/* bench's own getopt codes (above the KV family's). */
enum {
    B_HEAD_DIM = VQ_KVOPT_LAST + 1,
    B_SEQ_LEN,
    B_SEQ_LENS,
    B_SEED,
    B_COMPARE,
    B_REPEATS,
    B_KV_HEADS,
    B_THREADS,
    B_ISA,
    B_JSON,
    B_N_OUTLIER_CHANNELS
};

/* Parse step: bench's own options and the KV table, then the KV config resolved into
 * o->cfg. 1 ok, 0 usage error printed, -1 help printed. The original benchmark's underscore
 * spellings (--seq_lens, --compare_optimized, --head_dim, --kv_heads, --group_size, ...) reach
 * here as dashes (main.c's shared grammar). */
static int parse(int argc, char **argv, struct bench_opts *o) {
    const char *cmd = "bench";
    static const struct option lo[] = {
        {"help", no_argument, 0, 'h'},
        {"head-dim", required_argument, 0, B_HEAD_DIM},
        {"seq-len", required_argument, 0, B_SEQ_LEN},
        {"seq-lens", required_argument, 0, B_SEQ_LENS},
        {"seed", required_argument, 0, B_SEED},
        {"compare-optimized", no_argument, 0, B_COMPARE},
        {"repeats", required_argument, 0, B_REPEATS},
        {"kv-heads", required_argument, 0, B_KV_HEADS},
        {"threads", required_argument, 0, B_THREADS},
        {"isa", required_argument, 0, B_ISA},
        {"json", no_argument, 0, B_JSON},
        {"n-outlier-channels", required_argument, 0, B_N_OUTLIER_CHANNELS},
        VQ_KV_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":ht:", lo, NULL)) != -1) {
        int ok = 1;
        long v;
        switch (c) {
        case 'h': usage(stdout); return -1;
        case B_HEAD_DIM: ok = vq_opt_int(cmd, "--head-dim", optarg, 8, 1024, &o->head_dim); break;
        case B_SEQ_LEN:
            ok = vq_opt_long(cmd, "--seq-len", optarg, 1, 1L << 20, &v);
            o->seq_lens[0] = v;
            o->n_seq = 1;
            break;
        case B_SEQ_LENS: /* T1 T2 ...: the value and the words after it up to an option */
            o->n_seq = 0;
            for (const char *t = optarg; ok && t;
                 t = optind < argc && argv[optind][0] != '-' ? argv[optind++] : NULL) {
                if (o->n_seq == MAX_SEQ_LENS) {
                    fprintf(stderr, "bench: at most %d seq_lens\n", MAX_SEQ_LENS);
                    return 0;
                }
                ok = vq_opt_long(cmd, "--seq-lens", t, 1, 1L << 20, &v);
                o->seq_lens[o->n_seq++] = v;
            }
            break;
        case B_SEED: ok = vq_opt_u64(cmd, "--seed", optarg, &o->seed); break;
        case B_COMPARE: o->compare = 1; break;
        case B_REPEATS: ok = vq_opt_int(cmd, "--repeats", optarg, 1, 64, &o->repeats); break;
        case B_KV_HEADS: ok = vq_opt_int(cmd, "--kv-heads", optarg, 1, 256, &o->kv_heads); break;
        case 't':
        case B_THREADS: ok = vq_opt_int(cmd, "--threads", optarg, 1, 256, &o->threads); break;
        case B_ISA: ok = vq_opt_isa(cmd, "--isa", optarg, &o->isa); break;
        case B_JSON: o->json = 1; break;
        case B_N_OUTLIER_CHANNELS: /* the reference tool's name of --outlier-channels */
            ok = vq_kv_opts_handle(&o->kv, cmd, VQ_KVOPT_OUTLIER_CHANNELS, optarg);
            break;
        case ':':
        case '?': vq_cli_bad_option(cmd, c, argc, argv, lo); return 0;
        default: ok = vq_kv_opts_handle(&o->kv, cmd, c, optarg); break;
        }
        if (ok != 1) return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "bench: unexpected argument '%s'\n", argv[optind]);
        return 0;
    }
    if (!vq_kv_opts_prepare(cmd, &o->kv, &o->cfg, o->name, sizeof o->name)) return 0;
    if (o->kv.print_config) return 1;
    if (o->kv.s.k_bpl_pattern || o->kv.s.v_bpl_pattern) {
        /* per-layer width patterns: one synthetic layer at the config's uniform widths */
        fprintf(stderr, "bench: %s varies its widths per layer; timing one layer at its base\n",
                o->name);
        o->kv.s.n_k_bpl = o->kv.s.k_bpl_pattern ? 0 : o->kv.s.n_k_bpl;
        o->kv.s.n_v_bpl = o->kv.s.v_bpl_pattern ? 0 : o->kv.s.n_v_bpl;
        o->kv.s.k_bpl_pattern = o->kv.s.v_bpl_pattern = 0;
    }
    if (o->cfg.key_channel_bits > 0)
        /* the widths are learned from the queries an engine shows the cache; bench has none */
        fprintf(stderr,
                "bench: %s learns per-channel key widths from a model's queries; bench has no "
                "queries, so its keys keep one width (bench_kivi_classes times width classes)\n",
                o->name);
    if (vq_kv_opts_any_layers(&o->kv)) {
        fprintf(stderr,
                "bench: per-layer options (bits lists, fp16 layers, --ratequant) need a model; "
                "bench times one synthetic layer\n");
        return 0;
    }
    if (!vq_kv_opts_any_method(&o->kv)) {
        fprintf(stderr, "bench: --method is required\n");
        usage(stderr);
        return 0;
    }
    return 1;
}

static void bench_opts_init(struct bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->head_dim = 128;
    o->seed = 42;
    o->seq_lens[0] = 1000;
    o->n_seq = 1;
    o->repeats = 7;
    o->threads = 1;
    o->isa = VQ_ISA_AUTO;
    o->kv_heads = 1;
    vq_kv_opts_init(&o->kv);
}

/* Everything a bench run holds; bench_free releases it. */
struct bench_state {
    vq_calib_data *cd; /* synthetic calibration (calibrated methods), or NULL */
    int64_t n_cal_k, n_cal_v;
    struct vq_codec_params kp, vp; /* the key / value codecs at head_dim, isa and calib */
    vq_codec *kc, *vc;
    float *k, *v, *tmp, *qv; /* synthetic keys, values, scratch, queries */
    void *codes;
    cJSON *jroot, *jrows; /* --json */
};

static void bench_free(struct bench_state *s) {
    free(s->k);
    free(s->v);
    free(s->tmp);
    free(s->codes);
    free(s->qv);
    vq_codec_free(s->kc);
    vq_codec_free(s->vc);
    vq_calib_data_free(s->cd);
}

/* Build step 1: the synthetic calibration, both codecs (validated once, with the codec's own
 * message) and the modifier check. Returns 0 or exit code 2 (printed). */
static int bench_build_codecs(const struct bench_opts *o, struct bench_state *s) {
    /* Calibrated methods: fit on a separate synthetic draw (rng state then reset below). */
    if (!fit_synthetic_calib(o, &s->cd, &s->n_cal_k, &s->n_cal_v)) return 2;

    /* Validate the method configuration once, with the codec's own message. */
    struct vq_codec_params *kp = &s->kp, *vp = &s->vp;
    *kp = o->cfg.key;
    *vp = o->cfg.value;
    kp->head_dim = vp->head_dim = o->head_dim;
    kp->isa = vp->isa = o->isa;
    kp->calib = vp->calib = s->cd;
    vq_status st;
    s->kc = vq_codec_create(kp, &st);
    if (!s->kc) {
        vq_opt_codec_error("bench", "keys", kp->method, kp->bits, o->head_dim, st);
        vq_calib_data_free(s->cd);
        return 2;
    }
    s->vc = vq_codec_create(vp, &st);
    if (!s->vc) {
        vq_opt_codec_error("bench", "values", vp->method, vp->bits, o->head_dim, st);
        vq_codec_free(s->kc);
        vq_calib_data_free(s->cd);
        return 2;
    }
    struct vq_cache_params mp = vq_cache_params_default();
    mp.head_dim = o->head_dim;
    mp.key = *kp;
    mp.value = *vp;
    mp.n_outlier_channels = o->cfg.n_outlier_channels;
    mp.n_calib_tokens = o->cfg.n_calib_tokens;
    mp.outlier_token_k = o->cfg.outlier_token_k;
    const char *why = vq_kv_modifier_error(&mp);
    if (why) {
        fprintf(stderr, "bench: %s\n", why);
        vq_codec_free(s->kc);
        vq_codec_free(s->vc);
        return 2;
    }
    return 0;
}

/* Build step 2: the synthetic keys, values and queries for the longest seq_len, and scratch.
 * Returns 0 or exit code 1 (printed). */
static int bench_build_data(const struct bench_opts *o, struct bench_state *s) {
    int64_t tmax = 0;
    for (int i = 0; i < o->n_seq; i++)
        if (o->seq_lens[i] > tmax) tmax = o->seq_lens[i];
    const int d = o->head_dim;
    const int64_t rows = tmax * o->kv_heads; /* (tmax, kv_heads, d) for the caches */
    s->k = malloc(sizeof(float) * (size_t)(rows * d));
    s->v = malloc(sizeof(float) * (size_t)(rows * d));
    s->tmp = malloc(sizeof(float) * (size_t)(tmax * d));
    size_t bb = vq_codec_block_bytes(s->kc) > vq_codec_block_bytes(s->vc)
                  ? vq_codec_block_bytes(s->kc)
                  : vq_codec_block_bytes(s->vc);
    s->codes = malloc(bb * (size_t)tmax + 64);
    s->qv = malloc(sizeof(float) * (size_t)d * (size_t)o->kv_heads);
    if (!s->k || !s->v || !s->tmp || !s->codes || !s->qv) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    vq_synth_seed(&synth, o->seed);
    fill_keys(s->k, rows, d);
    fill_normal(s->v, rows * d);
    fill_normal(s->qv, (int64_t)d * o->kv_heads);
    return 0;
}

/* Report step, header: the JSON root with the configuration (--json), else the text header
 * lines and the table's column names. */
static void bench_header(const struct bench_opts *o, struct bench_state *s) {
    const char *isa = vq_isa_name(o->isa == VQ_ISA_AUTO ? vq_isa_default() : o->isa);
    const struct vq_codec_params *kp = &s->kp, *vp = &s->vp;
    if (o->json) {
        cJSON *jroot = s->jroot = cJSON_CreateObject();
        cJSON_AddStringToObject(jroot, "config", o->name);
        cJSON_AddStringToObject(jroot, "method", vq_method_name(kp->method));
        cJSON_AddStringToObject(jroot, "v_method", vq_method_name(vp->method));
        cJSON_AddNumberToObject(jroot, "bits", vq_codec_params_bits(kp));
        cJSON_AddNumberToObject(jroot, "v_bits", vq_codec_params_bits(vp));
        cJSON_AddNumberToObject(jroot, "kv_seed", (double)kp->seed);
        cJSON_AddNumberToObject(jroot, "head_dim", o->head_dim);
        cJSON_AddNumberToObject(jroot, "seed", (double)o->seed);
        cJSON_AddStringToObject(jroot, "isa", isa);
        cJSON_AddNumberToObject(jroot, "threads", o->threads);
        cJSON_AddNumberToObject(jroot, "kv_heads", o->kv_heads);
        cJSON_AddNumberToObject(jroot, "repeats", o->repeats);
        cJSON_AddNumberToObject(jroot, "key_bits_per_elem", vq_codec_bits_per_elem(s->kc));
        cJSON_AddNumberToObject(jroot, "value_bits_per_elem", vq_codec_bits_per_elem(s->vc));
        cJSON_AddNumberToObject(jroot, "synthetic_calib_keys", (double)s->n_cal_k);
        cJSON_AddNumberToObject(jroot, "synthetic_calib_values", (double)s->n_cal_v);
        cJSON_AddNumberToObject(jroot, "n_outlier_channels", o->cfg.n_outlier_channels);
        cJSON_AddNumberToObject(jroot, "n_calib_tokens", o->cfg.n_calib_tokens);
        cJSON_AddNumberToObject(jroot, "outlier_tokens", o->cfg.outlier_token_k);
        s->jrows = cJSON_AddArrayToObject(jroot, "rows");
        return;
    }
    printf(
        "bench: %s: keys %s bits=%g (%.4f bits/elem), values %s bits=%g (%.4f bits/elem), "
        "head_dim=%d, kv_heads=%d, isa=%s, threads=%d, median of %d\n",
        o->name, vq_method_name(kp->method), vq_codec_params_bits(kp),
        vq_codec_bits_per_elem(s->kc), vq_method_name(vp->method), vq_codec_params_bits(vp),
        vq_codec_bits_per_elem(s->vc), o->head_dim, o->kv_heads, isa, o->threads, o->repeats);
    if (s->n_cal_k)
        printf(
            "bench: keys (%s) use a synthetic calibration fitted on %lld separately drawn "
            "synthetic keys (no model)\n",
            vq_method_name(kp->method), (long long)s->n_cal_k);
    if (s->n_cal_v)
        printf(
            "bench: values (%s) use a synthetic calibration fitted on %lld separately drawn "
            "synthetic values (no model)\n",
            vq_method_name(vp->method), (long long)s->n_cal_v);
    if (has_modifier(o))
        printf(
            "modifiers: outlier channels %d (n_calib_tokens %d), outlier tokens k = %g "
            "(0 = off); B/token and key_x include them\n",
            o->cfg.n_outlier_channels, o->cfg.n_calib_tokens, (double)o->cfg.outlier_token_k);
    if (o->compare)
        printf("%8s | %18s | %19s | %7s | %14s | %10s\n", "seq_len", "baseline_attend_ms",
               "optimized_attend_ms", "speedup", "fp16_attend_ms", "vs_fp16");
    else
        printf("%8s | %14s | %9s | %7s | %9s | %9s | %6s | %8s | %6s | %6s | %9s | %9s\n",
               "seq_len", "fp16_attend_ms", "attend_ms", "vs_fp16", "encode_ms", "B/token", "key_x",
               "fullKV_x", "cos_k", "cos_v", "ip_slope", "softmax_kl");
}

/* Report step, one seq_len T: a JSON row (--json) or a table line, plus the quality line after
 * the last --compare_optimized row. */
static void bench_row(const struct bench_opts *o, struct bench_state *s, int si, int64_t T,
                      const struct timing *tm, const struct timing *tf, const struct quality *q) {
    double bpt = (double)tm->bytes / (double)T / (double)o->kv_heads;
    double key_x = (double)tm->fp16_key_bytes / (double)tm->key_bytes;
    double full_x = (double)tm->fp16_bytes / (double)tm->bytes;
    if (o->json) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "seq_len", (double)T);
        cJSON_AddNumberToObject(r, "fp16_attend_ms", tf->attend_ms);
        cJSON_AddNumberToObject(r, "attend_ms", tm->attend_ms);
        cJSON_AddNumberToObject(r, "speed_vs_fp16", tf->attend_ms / tm->attend_ms);
        if (o->compare) {
            cJSON_AddNumberToObject(r, "baseline_attend_ms", tm->ref_attend_ms);
            cJSON_AddNumberToObject(r, "speedup", tm->ref_attend_ms / tm->attend_ms);
        }
        cJSON_AddNumberToObject(r, "encode_ms", tm->encode_ms);
        cJSON_AddNumberToObject(r, "fp16_encode_ms", tf->encode_ms);
        cJSON_AddNumberToObject(r, "bytes", (double)tm->bytes);
        cJSON_AddNumberToObject(r, "bytes_per_token", bpt);
        cJSON_AddNumberToObject(r, "key_x", key_x);
        cJSON_AddNumberToObject(r, "fullKV_x", full_x);
        cJSON_AddNumberToObject(r, "cosine_k", q->cos_k);
        cJSON_AddNumberToObject(r, "cosine_v", q->cos_v);
        cJSON_AddNumberToObject(r, "ip_slope", q->slope);
        cJSON_AddNumberToObject(r, "ip_err_sd", q->ip_err_sd);
        cJSON_AddNumberToObject(r, "softmax_kl", q->kl);
        cJSON_AddItemToArray(s->jrows, r);
    } else if (o->compare) {
        printf("%8lld | %18.4f | %19.4f | %6.2fx | %14.4f | %9.2fx\n", (long long)T,
               tm->ref_attend_ms, tm->attend_ms, tm->ref_attend_ms / tm->attend_ms, tf->attend_ms,
               tf->attend_ms / tm->attend_ms);
    } else {
        printf(
            "%8lld | %14.4f | %9.4f | %6.2fx | %9.3f | %9.2f | %6.2f | %8.2f | %6.4f | %6.4f"
            " | %9.4f | %9.5f\n",
            (long long)T, tf->attend_ms, tm->attend_ms, tf->attend_ms / tm->attend_ms,
            tm->encode_ms, bpt, key_x, full_x, q->cos_k, q->cos_v, q->slope, q->kl);
    }
    if (!o->json && o->compare && si == o->n_seq - 1)
        printf(
            "quality: cos_k %.4f cos_v %.4f ip_slope %.4f ip_err_sd %.5f softmax_kl %.5f "
            "bytes/token %.2f key_x %.2f fullKV_x %.2f\n",
            q->cos_k, q->cos_v, q->slope, q->ip_err_sd, q->kl, bpt, key_x, full_x);
}

/* Run step, one seq_len: the method's and the fp16 cache's timings, the quality, then its
 * report row. Returns 0 or exit code 1 (printed). */
static int bench_run_seq(const struct bench_opts *o, struct bench_state *s, int si) {
    const int d = o->head_dim;
    int64_t T = o->seq_lens[si];
    struct timing tm = {0}, tf = {0};
    vq_status st = time_cache(o, 1, s->k, s->v, s->qv, T, o->compare, s->cd, &tm);
    if (st == VQ_STATUS_OK) st = time_cache(o, 0, s->k, s->v, s->qv, T, 0, NULL, &tf);
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "bench: seq_len %lld: %s\n", (long long)T, vq_status_str(st));
        return 1;
    }
    int64_t nq = T < 2048 ? T : 2048;
    struct quality q;
    q.cos_k = mean_cos(s->kc, s->k, nq, d, s->tmp, s->codes);
    q.cos_v = mean_cos(s->vc, s->v, nq, d, s->tmp, s->codes);
    ip_quality(s->kc, s->k, nq, d, &q);
    if (has_modifier(o) && (st = cache_key_quality(o, s->k, nq, d, s->cd, &q)) != VQ_STATUS_OK) {
        fprintf(stderr, "bench: seq_len %lld: %s\n", (long long)T, vq_status_str(st));
        return 1;
    }
    bench_row(o, s, si, T, &tm, &tf, &q);
    return 0;
}

int vq_cmd_bench(int argc, char **argv) {
    struct bench_opts o;
    bench_opts_init(&o);
    const int pr = parse(argc, argv, &o);
    if (pr <= 0) return pr < 0 ? 0 : 2;
    if (o.kv.print_config) return vq_kv_print_config(o.name, &o.cfg);
    struct bench_state s;
    memset(&s, 0, sizeof s);
    int rc = bench_build_codecs(&o, &s);
    if (rc) return rc;
    rc = bench_build_data(&o, &s);
    if (rc) return rc;
    bench_header(&o, &s);
    for (int si = 0; si < o.n_seq; si++)
        if ((rc = bench_run_seq(&o, &s, si)) != 0) break;
    if (!o.json && !rc)
        printf("vs_fp16 > 1 means the method's fused attend is faster than the fp16 cache.\n");
    if (o.json) {
        char *js = cJSON_Print(s.jroot);
        printf("%s\n", js);
        cJSON_free(js);
        cJSON_Delete(s.jroot);
    }
    bench_free(&s);
    return rc;
}
