/* cmd_report.c — `veloxquant report`: PNG figures (PLplot, cairo driver) and a Markdown table
 * from one or more results.json files (docs/EVALUATION.md "Files"); a folder argument stands
 * for the results.json files a sweep wrote there (DIR/results.json, DIR/<model>/results.json).
 *
 * Per model (results are grouped by model sha256, else file name; several files of one model
 * are merged, a later entry replacing an earlier one of the same config name) it writes
 *   FIGDIR/<model>-throughput.png   prefill and decode tok/s per config (bars)
 *   FIGDIR/<model>-quality.png      cosine_k and kld_mean vs bits/elem (scatter)
 *   FIGDIR/<model>-memory.png       KV MB vs context 256..32768 per config (analytic)
 *   FIGDIR/<model>-distortion.png   kld_mean and cosine_k per config (bars)
 *   FIGDIR/<model>-output.png       tokens generated and fp16 prefix match per config (bars)
 *   FIGDIR/<model>-report.png       one sheet with all the panels
 * and FIGDIR/table.md with every result field of every model. Failed configs (an `error`
 * entry) appear in the table with their error and are left out of the figures.
 *
 * Without PLplot (configured with -DVQ_PLPLOT=OFF, or AUTO when it was not found) the command
 * reads, checks and merges the files as usual and writes table.md, then says in one line how
 * to get the figures and exits with status 3 (VQ_REPORT_NO_FIGURES).
 *
 * Memory at scale is computed with the same analytic model as estimate-memory
 * (src/eval/kvmem.h) from the config and the model geometry; when a config cannot be rebuilt
 * in this library (a method not built, unknown options) it falls back to kv_bytes scaled
 * linearly from the protocol ctx.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if VQ_HAVE_PLPLOT
#include <plplot.h>
#endif

#include "veloxquant.h"
#include "cli.h"
#include "vq_tools.h"
#include "kvconfig.h"
#include "opts.h"

#ifndef VQ_HAVE_PLPLOT
#define VQ_HAVE_PLPLOT 0
#endif

static const char *CMD = "report";
/* Exit status when table.md was written but no figures: built without PLplot. */
#define VQ_REPORT_NO_FIGURES 3
#define MAX_MODELS 16
#define N_COLORS 14

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant report RESULTS [MORE ...] -o FIGDIR\n\n"
        "Draws six PNG figures per model (throughput, quality vs compression, memory at scale,\n"
        "attention distortion, output comparison, full report sheet) and FIGDIR/table.md from\n"
        "results.json files written by `veloxquant sweep`. RESULTS is a results.json or a\n"
        "sweep's output folder (its results.json and those of its per-model subfolders).\n\n"
        "  -o, --out FIGDIR      output folder (created if missing)\n"
        "  -h, --help            this help\n\n"
        "Exit status: 0 figures and table written, 1 error, 2 usage, %d table.md written\n"
        "but no figures (built without PLplot).\n"
        "figures: %s\n",
        VQ_REPORT_NO_FIGURES,
        VQ_HAVE_PLPLOT ? "PLplot (pngcairo)"
                       : "not built (install libplplot-dev plplot-driver-cairo, reconfigure)");
}

/* ---- data -------------------------------------------------------------------------------- */

struct model_set {
    char stem[96];
    struct vq_results r; /* header of the first file; merged results */
    int n_ok;            /* results without error */
    int *ok;             /* indices of results without error */
};

static int same_model(const struct vq_results *a, const struct vq_results *b) {
    if (a->model.sha256[0] && b->model.sha256[0]) return !strcmp(a->model.sha256, b->model.sha256);
    return !strcmp(a->model.file ? a->model.file : "", b->model.file ? b->model.file : "");
}

/* Moves the results of src into dst (same model); src is cleared. */
static int merge_into(struct vq_results *dst, struct vq_results *src) {
    for (int i = 0; i < src->n_results; i++) {
        struct vq_result *e = &src->results[i];
        int j = vq_results_find(dst, e->config.name);
        if (j >= 0) {
            vq_result_clear(&dst->results[j]);
            dst->results[j] = *e;
            e->output_preview = e->error = NULL;
        } else if (vq_results_add(dst, e) != VQ_STATUS_OK) {
            return 0;
        }
    }
    vq_results_clear(src);
    return 1;
}

#if VQ_HAVE_PLPLOT
/* ---- plotting helpers -------------------------------------------------------------------- */

/* Every figure is one PLplot page; panels are placed by hand in normalized page coordinates
 * (struct rect), leaving a band at the top for the page title. */
struct rect {
    double x0, x1, y0, y1;
};

static const unsigned char PALETTE[N_COLORS][3] = {
    {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
    {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
    {57, 59, 121},  {99, 121, 57},   {140, 109, 49},  {132, 60, 57},
};
static int color_of(int i) { return 2 + i % N_COLORS; }

static double g_chr = 1.0; /* character scale of the current figure */

/* Starts a PNG page of w x h pixels; chr scales all text. */
static void fig_begin(const char *path, int w, int h, double chr) {
    plsdev("pngcairo");
    plsfnam(path);
    plspage(0, 0, w, h, 0, 0);
    plscmap0n(16);
    plscol0(0, 255, 255, 255);
    plscol0(1, 0, 0, 0);
    for (int i = 0; i < N_COLORS; i++) plscol0(2 + i, PALETTE[i][0], PALETTE[i][1], PALETTE[i][2]);
    plinit();
    pladv(0);
    g_chr = chr;
}

static void fig_end(void) { plend(); }

/* Panel k of an nx x ny grid below a title band of height top (page fraction). */
static struct rect grid_cell(int k, int nx, int ny, double top) {
    struct rect r;
    const int cx = k % nx, cy = k / nx;
    r.x0 = 0.05 + 0.94 * (double)cx / nx; /* a page margin for the first column's labels */
    r.x1 = 0.05 + 0.94 * (double)(cx + 1) / nx;
    r.y1 = (1.0 - top) * (1.0 - (double)cy / ny);
    r.y0 = (1.0 - top) * (1.0 - (double)(cy + 1) / ny);
    return r;
}

/* Sets the viewport to the fractions (l, r, b, t) of rect q. */
static void vport(struct rect q, double l, double r, double b, double t) {
    plvpor(q.x0 + l * (q.x1 - q.x0), q.x0 + r * (q.x1 - q.x0), q.y0 + b * (q.y1 - q.y0),
           q.y0 + t * (q.y1 - q.y0));
}

static void chr(double s) { plschr(0, s * g_chr); }

static void page_title(const char *title, double top) {
    plvpor(0.0, 1.0, 1.0 - top, 1.0);
    plwind(0, 1, 0, 1);
    plcol0(1);
    chr(1.1);
    plptex(0.5, 0.45, 1, 0, 0.5, title);
}

static void no_data(struct rect q, const char *title) {
    vport(q, 0.1, 0.9, 0.15, 0.85);
    plwind(0, 1, 0, 1);
    plcol0(1);
    chr(1.0);
    plbox("bc", 0, 0, "bc", 0, 0);
    plmtex("t", 1.5, 0.5, 0.5, title);
    plptex(0.5, 0.5, 1, 0, 0.5, "no data");
}

static void fmt_val(char *buf, size_t cap, double v) {
    if (v != 0 && (fabs(v) >= 1e5 || fabs(v) < 1e-3)) snprintf(buf, cap, "%.2e", v);
    else if (fabs(v) >= 100) snprintf(buf, cap, "%.0f", v);
    else if (fabs(v) >= 1) snprintf(buf, cap, "%.2f", v);
    else snprintf(buf, cap, "%.4f", v);
}

/* A tick step of 1, 2 or 5 times a power of ten giving about `want` ticks over span. */
static double nice_tick(double span, int want) {
    if (!(span > 0)) return 1;
    const double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* Horizontal bars: one row per config (first config on top), n_series bars per row. */
static void hbars(struct rect q, const char *title, const char *xlabel, int n,
                  const char *const *labels, const int *cfg_color, int n_series,
                  const double *const *vals, const int *series_color,
                  const char *const *series_names) {
    double xmax = 0, xmin = 0;
    int any = 0;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < n; i++)
            if (isfinite(vals[s][i])) {
                any = 1;
                if (vals[s][i] > xmax) xmax = vals[s][i];
                if (vals[s][i] < xmin) xmin = vals[s][i];
            }
    if (!any || n == 0) {
        no_data(q, title);
        return;
    }
    if (xmax <= xmin) xmax = xmin + 1;
    const double span = xmax - xmin;
    const double x0 = xmin < 0 ? xmin - 0.05 * span : 0;
    const double x1 = xmax + (n_series > 1 ? 1.8 : 0.38) * span;
    /* label column sized to the longest config name (0.34 of the panel fits 17 characters) */
    size_t maxlen = 17;
    for (int i = 0; i < n; i++)
        if (strlen(labels[i]) > maxlen) maxlen = strlen(labels[i]);
    const double lfrac = 0.02 * (double)maxlen > 0.5 ? 0.5 : 0.02 * (double)maxlen;
    chr(0.85);
    vport(q, lfrac, 0.96, 0.14, 0.88);
    plwind(x0, x1, 0, n);
    plcol0(1);
    plbox("bcnstf", nice_tick(x1 - x0, 3), 0, "bc", 0, 0);
    plmtex("t", 1.2, 0.5, 0.5, title);
    plmtex("b", 3.0, 0.5, 0.5, xlabel);
    const double h = 0.8 / n_series;
    char buf[32];
    for (int i = 0; i < n; i++) {
        const double yb = (double)(n - 1 - i) + 0.1;
        plcol0(1);
        chr(0.85);
        plmtex("lv", 0.6, ((double)(n - 1 - i) + 0.5) / n, 1.0, labels[i]);
        for (int s = 0; s < n_series; s++) {
            const double v = vals[s][i];
            const double y0 = yb + (n_series - 1 - s) * h, y1 = y0 + h * 0.92;
            chr(0.65);
            plcol0(1);
            if (!isfinite(v)) {
                plptex(x0 + 0.01 * (x1 - x0), (y0 + y1) / 2, 1, 0, 0, "n/a");
                continue;
            }
            PLFLT bx[4] = {0, v, v, 0}, by[4] = {y0, y0, y1, y1};
            plcol0(series_color ? series_color[s] : cfg_color[i]);
            plfill(4, bx, by);
            plcol0(1);
            fmt_val(buf, sizeof buf, v);
            plptex(v + 0.01 * (x1 - x0), (y0 + y1) / 2, 1, 0, 0, buf);
        }
    }
    if (n_series > 1 && series_names) {
        PLINT opt[4], tcol[4], bcol[4], bpat[4];
        PLFLT bscale[4], bw[4];
        for (int s = 0; s < n_series && s < 4; s++) {
            opt[s] = PL_LEGEND_COLOR_BOX;
            tcol[s] = 1;
            bcol[s] = series_color[s];
            bpat[s] = 0;
            bscale[s] = 0.8;
            bw[s] = 1;
        }
        PLFLT lw, lh;
        chr(0.8);
        pllegend(&lw, &lh, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
                 PL_POSITION_RIGHT | PL_POSITION_TOP | PL_POSITION_INSIDE, 0.01, 0.01, 0.05, 0, 1,
                 1, 0, 0, n_series, opt, 0.8, 0.7 * g_chr, 1.5, 0, tcol, series_names, bcol, bpat,
                 bscale, bw, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    }
}

/* Scatter of y vs x with each point labelled by its config; labels are placed greedily so
 * that they do not overlap each other. logy: y on a log10 axis (points with y <= 0 left out);
 * sym (NULL = all 17, a filled circle): PLplot symbol per point. Leaves the world window set
 * (in log10 y when logy) and returns 1 when something was drawn. */
static int scatter(struct rect q, const char *title, const char *xlabel, const char *ylabel, int n,
                   const char *const *labels, const int *cfg_color, const double *x,
                   const double *y_in, int logy, const int *sym) {
    double *ylog = logy ? malloc((size_t)(n ? n : 1) * sizeof *ylog) : NULL;
    if (logy && !ylog) return 0;
    for (int i = 0; logy && i < n; i++) ylog[i] = y_in[i] > 0 ? log10(y_in[i]) : NAN;
    const double *y = logy ? ylog : y_in;
    double xmin = HUGE_VAL, xmax = -HUGE_VAL, ymin = HUGE_VAL, ymax = -HUGE_VAL;
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        any = 1;
        xmin = fmin(xmin, x[i]);
        xmax = fmax(xmax, x[i]);
        ymin = fmin(ymin, y[i]);
        ymax = fmax(ymax, y[i]);
    }
    if (!any) {
        no_data(q, title);
        free(ylog);
        return 0;
    }
    double dx = xmax - xmin, dy = ymax - ymin;
    if (dx <= 0) dx = fabs(xmax) > 0 ? fabs(xmax) * 0.2 : 1;
    if (dy <= 0) dy = fabs(ymax) > 0 ? fabs(ymax) * 0.2 : 1;
    const double wx0 = xmin - 0.10 * dx, wx1 = xmax + 0.30 * dx;
    const double wy0 = ymin - 0.12 * dy, wy1 = ymax + 0.12 * dy;
    chr(0.85);
    vport(q, 0.16, 0.96, 0.14, 0.88);
    plwind(wx0, wx1, wy0, wy1);
    plcol0(1);
    if (logy) plbox("bcnstgf", nice_tick(wx1 - wx0, 5), 0, "bcnstvgl", 1, 0);
    else plbox("bcnstgf", nice_tick(wx1 - wx0, 5), 0, "bcnstvgf", nice_tick(wy1 - wy0, 5), 0);
    plmtex("t", 1.2, 0.5, 0.5, title);
    plmtex("b", 3.0, 0.5, 0.5, xlabel);
    plmtex("l", 5.0, 0.5, 0.5, ylabel);
    /* world units per mm, for label boxes */
    PLFLT vx0, vx1, vy0, vy1, sx0, sx1, sy0, sy1, cdef, cht;
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    plgspa(&sx0, &sx1, &sy0, &sy1);
    chr(0.62);
    plgchr(&cdef, &cht);
    const double wpm_x = (wx1 - wx0) / ((vx1 - vx0) * (sx1 - sx0));
    const double wpm_y = (wy1 - wy0) / ((vy1 - vy0) * (sy1 - sy0));
    const double lh = 1.5 * cht * wpm_y, gap = 1.2 * cht * wpm_x;
    double *bx0 = calloc((size_t)(n ? n : 1) * 4, sizeof *bx0);
    int nb = 0;
    plssym(0, 1.5 * g_chr);
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        PLFLT px = x[i], py = y[i];
        plcol0(cfg_color[i]);
        plssym(0, (sym && sym[i] != 17 ? 0.75 : 1.5) * g_chr); /* Hershey squares draw large */
        plpoin(1, &px, &py, sym ? sym[i] : 17);
        if (!bx0) continue;
        const double lw = (double)strlen(labels[i]) * 0.62 * cht * wpm_x;
        static const double CAND[][2] = {{1, 0}, {1, 1},  {1, -1}, {-1, 0},  {-1, 1}, {-1, -1},
                                         {1, 2}, {1, -2}, {-1, 2}, {-1, -2}, {1, 3},  {1, -3}};
        double best_x = px + gap, best_y = py;
        for (size_t c = 0; c < sizeof CAND / sizeof CAND[0]; c++) {
            const double lx = CAND[c][0] > 0 ? px + gap : px - gap - lw;
            const double ly = py + CAND[c][1] * lh;
            int clash = lx < wx0 || lx + lw > wx1 || ly - lh / 2 < wy0 || ly + lh / 2 > wy1;
            for (int b = 0; b < nb && !clash; b++)
                clash = lx < bx0[4 * b + 1] && lx + lw > bx0[4 * b] &&
                        ly - lh / 2 < bx0[4 * b + 3] && ly + lh / 2 > bx0[4 * b + 2];
            if (!clash) {
                best_x = lx;
                best_y = ly;
                break;
            }
        }
        bx0[4 * nb] = best_x;
        bx0[4 * nb + 1] = best_x + lw;
        bx0[4 * nb + 2] = best_y - lh / 2;
        bx0[4 * nb + 3] = best_y + lh / 2;
        nb++;
        plptex(best_x, best_y - 0.3 * cht * wpm_y, 1, 0, 0, labels[i]);
    }
    free(bx0);
    free(ylog);
    return 1;
}

/* Draws the lower-left frontier of the points i with sel[i] == want (x ascending; a point is on
 * it when its y is below every point with x <= its own) as a line in colour col and style sty,
 * in the current world window (y already in the window's units, e.g. log10). */
static void frontier(int n, const double *x, const double *y, const int *sel, int want, int col,
                     int sty) {
    int *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    PLFLT *fx = malloc((size_t)(n ? n : 1) * sizeof *fx),
          *fy = malloc((size_t)(n ? n : 1) * sizeof *fy);
    if (!idx || !fx || !fy) goto out;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (sel[i] == want && isfinite(x[i]) && isfinite(y[i])) idx[m++] = i;
    for (int a = 1; a < m; a++) /* insertion sort by x, then y */
        for (int b = a; b > 0; b--) {
            const int u = idx[b - 1], v = idx[b];
            if (x[u] < x[v] || (x[u] == x[v] && y[u] <= y[v])) break;
            idx[b - 1] = v;
            idx[b] = u;
        }
    int k = 0;
    double best = HUGE_VAL;
    for (int a = 0; a < m; a++)
        if (y[idx[a]] < best) {
            best = y[idx[a]];
            fx[k] = x[idx[a]];
            fy[k++] = best;
        }
    if (k > 1) {
        plcol0(col);
        pllsty(sty);
        plwidth(2.0);
        plline(k, fx, fy);
        plwidth(1.0);
        pllsty(1);
    }
out:
    free(idx);
    free(fx);
    free(fy);
}

/* KV MB at context lengths 256..32768 per config (log-log lines). */
#define N_CTX 8
static const int CTXS[N_CTX] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768};

static void memory_panel(struct rect q, const struct model_set *ms, const char *const *labels,
                         const int *cfg_color, int legend_inside) {
    const struct vq_results *r = &ms->r;
    const int n = ms->n_ok, m = n ? n : 1;
    double *mbv = calloc((size_t)m * N_CTX, sizeof *mbv);
    PLINT *opt = calloc((size_t)m, sizeof *opt), *lcol = calloc((size_t)m, sizeof *lcol);
    PLINT *lsty = calloc((size_t)m, sizeof *lsty), *tcol = calloc((size_t)m, sizeof *tcol);
    PLFLT *lw = calloc((size_t)m, sizeof *lw);
    if (!mbv || !opt || !lcol || !lsty || !tcol || !lw) goto out;
    double ymin = HUGE_VAL, ymax = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        const struct vq_result *e = &r->results[ms->ok[i]];
        struct vq_cache_params p = vq_cache_params_default();
        p.n_layers = r->model.n_layers;
        p.n_kv_heads = r->model.n_kv_heads;
        p.head_dim = r->model.head_dim;
        p.layer_window = r->model.layer_window; /* sliding windows: bounded layers */
        int ok = p.n_layers > 0 && p.n_kv_heads > 0 && p.head_dim > 0 &&
                 vq_method_from_name(e->config.k_method, &p.key.method) == VQ_STATUS_OK &&
                 vq_method_from_name(e->config.v_method, &p.value.method) == VQ_STATUS_OK;
        ok = ok && vq_codec_params_set_bits(&p.key, e->config.k_bits) == VQ_STATUS_OK &&
             vq_codec_params_set_bits(&p.value, e->config.v_bits) == VQ_STATUS_OK;
        for (int o = 0; o < e->config.n_opts; o++) {
            const struct vq_result_opt *op = &e->config.opts[o];
            const int v = (int)op->value;
            if (!strcmp(op->key, "group_size")) p.key.group_size = p.value.group_size = v;
            else if (!strcmp(op->key, "residual_length"))
                p.key.residual_length = p.value.residual_length = v;
            else if (!strcmp(op->key, "n_sink_tokens"))
                p.key.n_sink_tokens = p.value.n_sink_tokens = v;
            else if (!strcmp(op->key, "jl_dim")) p.key.jl_dim = p.value.jl_dim = v;
            else if (!strcmp(op->key, "seed")) p.key.seed = p.value.seed = (uint64_t)op->value;
        }
        for (int c = 0; c < N_CTX; c++) {
            struct vq_cache_memory mm;
            double v = NAN;
            if (ok && vq_kv_estimate(&p, CTXS[c], &mm) == VQ_STATUS_OK) v = (double)mm.total_bytes;
            else if (isfinite(e->kv_bytes) && r->protocol.ctx > 0)
                v = e->kv_bytes / r->protocol.ctx * CTXS[c];
            v /= 1024.0 * 1024.0;
            mbv[i * N_CTX + c] = v > 0 ? v : NAN;
            if (v > 0) {
                any = 1;
                ymax = fmax(ymax, v);
                ymin = fmin(ymin, v);
            }
        }
    }
    if (!any) {
        no_data(q, "KV memory at scale");
        goto out;
    }
    const double ly0 = floor(log10(ymin)), ly1 = ceil(log10(ymax) + 0.05);
    chr(0.85);
    vport(q, 0.16, legend_inside ? 0.96 : 0.70, 0.14, 0.86);
    plwind(log10(CTXS[0]) - 0.05, log10(CTXS[N_CTX - 1]) + 0.05, ly0, ly1);
    plcol0(1);
    plbox("bcnstlg", 0, 0, "bcnstvlg", 0, 0);
    plmtex("t", 1.2, 0.5, 0.5,
           legend_inside ? "KV memory at scale (analytic; colors as in the bars)"
                         : "KV cache memory at scale (analytic)");
    plmtex("b", 3.0, 0.5, 0.5, "context tokens");
    plmtex("l", 4.0, 0.5, 0.5, "KV cache MB");
    for (int i = 0; i < n; i++) {
        PLFLT xs[N_CTX], ys[N_CTX];
        int k = 0;
        for (int c = 0; c < N_CTX; c++)
            if (isfinite(mbv[i * N_CTX + c])) {
                xs[k] = log10(CTXS[c]);
                ys[k] = log10(mbv[i * N_CTX + c]);
                k++;
            }
        plcol0(cfg_color[i]);
        pllsty(1 + (i / N_COLORS) % 8);
        plwidth(2.0);
        if (k > 1) plline(k, xs, ys);
        plssym(0, 1.0 * g_chr);
        plpoin(k, xs, ys, 17);
        plwidth(1.0);
        opt[i] = PL_LEGEND_LINE;
        lcol[i] = cfg_color[i];
        lsty[i] = 1 + (i / N_COLORS) % 8;
        tcol[i] = 1;
        lw[i] = 2.0;
    }
    pllsty(1);
    if (!legend_inside && n > 0) { /* the sheet has no room: its colors match the bar panels */
        PLFLT lwid, lht;
        chr(0.8);
        pllegend(&lwid, &lht, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
                 legend_inside ? PL_POSITION_RIGHT | PL_POSITION_INSIDE | PL_POSITION_BOTTOM
                               : PL_POSITION_RIGHT | PL_POSITION_OUTSIDE,
                 0.02, 0.02, 0.08, 0, 1, 1, 0, 0, n, opt, 0.6, 0.8 * g_chr, 1.6, 0, tcol, labels,
                 NULL, NULL, NULL, NULL, lcol, lsty, lw, NULL, NULL, NULL, NULL);
    }
out:
    free(opt);
    free(lcol);
    free(lsty);
    free(tcol);
    free(lw);
    free(mbv);
}

/* ---- figures ----------------------------------------------------------------------------- */

struct cols {
    int n;
    const char **labels;
    int *color;
    int *llama; /* 1: a llama.cpp row (config.engine), 0: veloxquant */
    int *sym;   /* PLplot symbol: 17 (filled circle) veloxquant, 16 (filled square) llama.cpp */
    double *prefill, *decode, *bpe, *cosk, *kld, *tokgen, *prefix;
};

static int cols_build(const struct model_set *ms, struct cols *c) {
    const int n = ms->n_ok, m = n ? n : 1;
    c->n = n;
    c->labels = calloc((size_t)m, sizeof *c->labels);
    c->color = calloc((size_t)m, sizeof *c->color);
    c->llama = calloc((size_t)m * 2, sizeof *c->llama);
    double *all = calloc((size_t)m * 7, sizeof *all);
    if (!c->labels || !c->color || !c->llama || !all) {
        free(c->labels);
        free(c->color);
        free(c->llama);
        free(all);
        return 0;
    }
    c->sym = c->llama + m;
    c->prefill = all;
    c->decode = all + m;
    c->bpe = all + 2 * m;
    c->cosk = all + 3 * m;
    c->kld = all + 4 * m;
    c->tokgen = all + 5 * m;
    c->prefix = all + 6 * m;
    for (int i = 0; i < n; i++) {
        const struct vq_result *e = &ms->r.results[ms->ok[i]];
        c->labels[i] = e->config.name;
        c->color[i] = color_of(i);
        c->llama[i] = !strcmp(e->config.engine, "llama.cpp");
        c->sym[i] = c->llama[i] ? 16 : 17;
        c->prefill[i] = e->prefill_tok_s;
        c->decode[i] = e->decode_tok_s;
        c->bpe[i] = e->bits_per_elem;
        c->cosk[i] = e->cosine_k;
        c->kld[i] = e->kld_mean;
        c->tokgen[i] = e->tokens_generated;
        c->prefix[i] = e->fp16_prefix_match;
    }
    return 1;
}

static void cols_free(struct cols *c) {
    free(c->labels);
    free(c->color);
    free(c->llama);
    free(c->prefill);
}

enum { P_PREFILL, P_DECODE, P_COS_BITS, P_KLD_BITS, P_MEMORY, P_KLD_BARS, P_COS_BARS, P_OUTPUT };

static void panel(int which, struct rect q, const struct model_set *ms, const struct cols *c,
                  int sheet) {
    const int two[2] = {2, 5};
    const char *out_names[2] = {"tokens generated", "fp16 prefix match"};
    switch (which) {
    case P_PREFILL: {
        const double *v[1] = {c->prefill};
        hbars(q, "Prefill throughput", "tokens / s", c->n, c->labels, c->color, 1, v, NULL, NULL);
        break;
    }
    case P_DECODE: {
        const double *v[1] = {c->decode};
        hbars(q, "Decode throughput", "tokens / s", c->n, c->labels, c->color, 1, v, NULL, NULL);
        break;
    }
    case P_COS_BITS:
        scatter(q, "Key reconstruction vs compression", "bits / element (K+V)", "cosine (keys)",
                c->n, c->labels, c->color, c->bpe, c->cosk, 0, NULL);
        break;
    case P_KLD_BITS: {
        /* log KL; each engine's frontier (lowest KL at <= bits) as a line: veloxquant solid,
         * llama.cpp dashed (its rows: squares) */
        if (!scatter(q, "Next-token KL divergence vs compression", "bits / element (K+V)",
                     "KL(fp16 || method), mean", c->n, c->labels, c->color, c->bpe, c->kld, 1,
                     c->sym))
            break;
        double *lk = malloc((size_t)(c->n ? c->n : 1) * sizeof *lk);
        if (!lk) break;
        int any_llama = 0;
        for (int i = 0; i < c->n; i++) {
            lk[i] = c->kld[i] > 0 ? log10(c->kld[i]) : NAN;
            any_llama |= c->llama[i];
        }
        frontier(c->n, c->bpe, lk, c->llama, 0, 1, 1);
        frontier(c->n, c->bpe, lk, c->llama, 1, 1, 2);
        free(lk);
        if (any_llama) {
            plcol0(1);
            chr(0.62);
            plmtex("t", -1.3, 0.98, 1.0, "circles, solid: veloxquant");
            plmtex("t", -2.8, 0.98, 1.0, "squares, dashed: llama.cpp");
        }
        break;
    }
    case P_MEMORY: memory_panel(q, ms, c->labels, c->color, sheet); break;
    case P_KLD_BARS: {
        const double *v[1] = {c->kld};
        hbars(q, "Distortion: next-token KL (mean)", "KL divergence vs fp16 KV", c->n, c->labels,
              c->color, 1, v, NULL, NULL);
        break;
    }
    case P_COS_BARS: {
        const double *v[1] = {c->cosk};
        hbars(q, "Distortion: key cosine", "cosine similarity of keys", c->n, c->labels, c->color,
              1, v, NULL, NULL);
        break;
    }
    case P_OUTPUT: {
        const double *v[2] = {c->tokgen, c->prefix};
        hbars(q, "Greedy output vs fp16 (mean per prompt)", "tokens", c->n, c->labels, c->color, 2,
              v, two, out_names);
        break;
    }
    }
}

/* 1 if the figure path can be written (a folder or an unwritable file in its place would make
 * PLplot abort), else 0 after printing why. */
static int figure_path_ok(const char *path) {
    /* never a device, FIFO (the open below would block) or folder in its place */
    if (vq_file_check_output(path) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", CMD, vq_file_error());
        return 0;
    }
    const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, path, strerror(errno));
        return 0;
    }
    close(fd);
    return 1;
}

/* Draws the figures of one model: 1 ok, 0 out of memory, -1 a figure path cannot be written
 * (printed). */
static int draw_model(const struct model_set *ms, const char *dir) {
    struct cols c;
    if (!cols_build(ms, &c)) return 0;
    char path[4096], title[512];
    const struct vq_results *r = &ms->r;
    snprintf(title, sizeof title, "%s  (%s, %d layers, %d kv heads, head_dim %d; ctx %d)", ms->stem,
             r->model.arch, r->model.n_layers, r->model.n_kv_heads, r->model.head_dim,
             r->protocol.ctx);
    const int h_bars = 200 + 46 * (c.n > 4 ? c.n : 4);
    static const struct {
        const char *name;
        int panels[2];
        int np;
        int w, h;
    } FIGS[] = {
        {"throughput", {P_PREFILL, P_DECODE}, 2, 1600, 0},
        {"quality", {P_COS_BITS, P_KLD_BITS}, 2, 1600, 800},
        {"memory", {P_MEMORY, 0}, 1, 1200, 800},
        {"distortion", {P_KLD_BARS, P_COS_BARS}, 2, 1600, 0},
        {"output", {P_OUTPUT, 0}, 1, 1000, 0},
    };
    for (size_t f = 0; f < sizeof FIGS / sizeof FIGS[0]; f++) {
        snprintf(path, sizeof path, "%s/%s-%s.png", dir, ms->stem, FIGS[f].name);
        if (!figure_path_ok(path)) {
            cols_free(&c);
            return -1;
        }
        const int h = FIGS[f].h ? FIGS[f].h : h_bars;
        const double top = 40.0 / h;
        fig_begin(path, FIGS[f].w, h, 0.7);
        page_title(title, top);
        for (int p = 0; p < FIGS[f].np; p++)
            panel(FIGS[f].panels[p], grid_cell(p, FIGS[f].np, 1, top), ms, &c, 0);
        fig_end();
    }
    snprintf(path, sizeof path, "%s/%s-report.png", dir, ms->stem);
    if (!figure_path_ok(path)) {
        cols_free(&c);
        return -1;
    }
    const int sh = 2 * (h_bars > 700 ? h_bars : 700);
    fig_begin(path, 2800, sh, 0.6);
    page_title(title, 50.0 / sh);
    static const int SHEET[8] = {P_PREFILL,  P_DECODE,   P_COS_BITS, P_KLD_BITS,
                                 P_KLD_BARS, P_COS_BARS, P_OUTPUT,   P_MEMORY};
    for (int p = 0; p < 8; p++) panel(SHEET[p], grid_cell(p, 4, 2, 50.0 / sh), ms, &c, 1);
    fig_end();
    cols_free(&c);
    return 1;
}

#endif /* VQ_HAVE_PLPLOT */

/* ---- table.md ---------------------------------------------------------------------------- */

static void md_num(FILE *f, double v) {
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e15) fprintf(f, " %.0f |", v);
    else if (isfinite(v)) fprintf(f, " %.6g |", v);
    else fprintf(f, " — |");
}

static void md_text(FILE *f, const char *s, size_t max) {
    /* one table cell: pipes escaped, newlines as spaces, long text cut */
    size_t n = 0;
    for (const char *p = s; *p && n < max; p++, n++) {
        if (*p == '|') fputs("\\|", f);
        else if (*p == '\n' || *p == '\r' || *p == '\t') fputc(' ', f);
        else fputc(*p, f);
    }
    if (s[n]) fputs("…", f);
}

static int write_table(struct model_set *ms, int n_models, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/table.md", dir);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return 0;
    fprintf(f, "# veloxquant results\n");
    for (int m = 0; m < n_models; m++) {
        const struct vq_results *r = &ms[m].r;
        fprintf(f, "\n## %s\n\n", ms[m].stem);
        fprintf(f, "- model: `%s` (%s, %d layers, %d kv heads, head_dim %d), sha256 `%s`\n",
                r->model.file ? r->model.file : "", r->model.arch, r->model.n_layers,
                r->model.n_kv_heads, r->model.head_dim, r->model.sha256[0] ? r->model.sha256 : "—");
        int n_swa = 0, w = 0;
        for (int l = 0; r->model.layer_window && l < r->model.n_layers; l++)
            if (r->model.layer_window[l] > 0) n_swa++, w = r->model.layer_window[l];
        if (n_swa)
            fprintf(f,
                    "- sliding window %d on %d of %d layers (memory figure: windowed layers keep"
                    " only their window)\n",
                    w, n_swa, r->model.n_layers);
        fprintf(
            f, "- protocol: corpus `%s`, ctx %d, chunks %d, max_tokens %d, seed %llu, %d prompts\n",
            r->protocol.corpus ? r->protocol.corpus : "", r->protocol.ctx, r->protocol.chunks,
            r->protocol.max_tokens, (unsigned long long)r->protocol.seed, r->protocol.n_prompts);
        fprintf(f, "- hardware: %s, %d threads, ISA %s, %.0f MB RAM\n", r->hardware.cpu,
                r->hardware.cores, r->hardware.isa, r->hardware.ram_mb);
        fprintf(f, "- created %s, git %s\n\n", r->created_utc, r->git_commit);
        fprintf(
            f,
            "| config | K | V | bits/elem | KV bytes | key_x | fullKV_x | ppl | kld_mean | "
            "kld_median | kld_p99 | top1 | cosine_k | cosine_v | prefill tok/s | decode tok/s | "
            "tokens generated | fp16 prefix match | peak RSS MB | error |\n");
        fprintf(f,
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
                "---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int i = 0; i < r->n_results; i++) {
            const struct vq_result *e = &r->results[i];
            fputs("| ", f);
            md_text(f, e->config.name, 200);
            fputs(" | ", f);
            md_text(f, e->config.k_method, 200);
            fprintf(f, "-%g | ", e->config.k_bits);
            md_text(f, e->config.v_method, 200);
            fprintf(f, "-%g |", e->config.v_bits);
            const double v[] = {e->bits_per_elem,
                                e->kv_bytes,
                                e->key_x,
                                e->fullKV_x,
                                e->ppl,
                                e->kld_mean,
                                e->kld_median,
                                e->kld_p99,
                                e->top1,
                                e->cosine_k,
                                e->cosine_v,
                                e->prefill_tok_s,
                                e->decode_tok_s,
                                e->tokens_generated,
                                e->fp16_prefix_match,
                                e->peak_rss_mb};
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) md_num(f, v[k]);
            fputc(' ', f);
            if (e->error) md_text(f, e->error, 200);
            fputs(" |\n", f);
        }
        int any_opts = 0, any_prev = 0;
        for (int i = 0; i < r->n_results; i++) {
            any_opts |= r->results[i].config.n_opts > 0;
            any_prev |= r->results[i].output_preview != NULL;
        }
        if (any_opts) {
            fprintf(f, "\nOptions:\n\n");
            for (int i = 0; i < r->n_results; i++) {
                const struct vq_result_config *cf = &r->results[i].config;
                if (!cf->n_opts) continue;
                fputs("- ", f);
                md_text(f, cf->name, 200);
                fputc(':', f);
                for (int o = 0; o < cf->n_opts; o++)
                    fprintf(f, " %s=%lld", cf->opts[o].key, cf->opts[o].value);
                fputc('\n', f);
            }
        }
        if (any_prev) {
            fprintf(f,
                    "\nOutput previews (first probe prompt):\n\n| config | output |\n|---|---|\n");
            for (int i = 0; i < r->n_results; i++) {
                const struct vq_result *e = &r->results[i];
                if (!e->output_preview) continue;
                fputs("| ", f);
                md_text(f, e->config.name, 200);
                fputs(" | ", f);
                md_text(f, e->output_preview, 300);
                fputs(" |\n", f);
            }
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        return 0;
    }
    vq_status st = vq_write_file_atomic(path, buf, len);
    free(buf);
    return st == VQ_STATUS_OK;
}

/* ---- command ----------------------------------------------------------------------------- */

static int is_subdir(const struct dirent *d) {
    return d->d_name[0] != '.' && (d->d_type == DT_DIR || d->d_type == DT_UNKNOWN);
}

/* Appends a malloc'd copy of path to the list (*list, *n, capacity *cap). 1 ok, 0 no memory. */
static int path_push(char ***list, int *n, int *cap, const char *path) {
    if (*n == *cap) {
        const int nc = *cap ? 2 * *cap : 16;
        char **l = realloc(*list, (size_t)nc * sizeof *l);
        if (!l) return 0;
        *list = l;
        *cap = nc;
    }
    if (!((*list)[*n] = strdup(path))) return 0;
    ++*n;
    return 1;
}

/* The results files an argument names: a file as given; a folder (a sweep's -o DIR) gives
 * DIR/results.json (one model) and DIR/<sub>/results.json (several models) in name order.
 * Appends them to the list; 1 ok, 0 after printing why (no results.json in a folder). */
static int collect_inputs(const char *arg, char ***list, int *n, int *cap) {
    struct stat sb;
    if (stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)) return path_push(list, n, cap, arg);
    const int n0 = *n;
    char path[4400];
    snprintf(path, sizeof path, "%s/results.json", arg);
    if (access(path, F_OK) == 0 && !path_push(list, n, cap, path)) return 0;
    struct dirent **ents = NULL;
    const int ne = scandir(arg, &ents, is_subdir, alphasort);
    int ok = 1;
    for (int i = 0; i < ne; i++) {
        snprintf(path, sizeof path, "%s/%s/results.json", arg, ents[i]->d_name);
        if (ok && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) ok = path_push(list, n, cap, path);
        free(ents[i]);
    }
    free(ents);
    if (!ok) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        return 0;
    }
    if (*n == n0) {
        fprintf(stderr, "%s: %s: no results.json in this folder or its subfolders\n", CMD, arg);
        return 0;
    }
    return 1;
}

#if VQ_HAVE_PLPLOT
/* 1 if PLplot has the pngcairo device (otherwise plinit would prompt for a device on stdin). */
static int have_pngcairo(void) {
    const char *menu[256], *names[256];
    const char **pm = menu, **pn = names;
    int n = 256;
    plgDevs(&pm, &pn, &n);
    for (int i = 0; i < n && i < 256; i++)
        if (names[i] && !strcmp(names[i], "pngcairo")) return 1;
    return 0;
}
#endif

/* Creates dir if missing and checks that it is a folder this process can create files in,
 * before anything is drawn (PLplot aborts with "Too many tries" on an unwritable path). 1 if
 * so, else 0 after printing why. */
static int out_dir_ok(const char *dir) {
    struct stat sb;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create the output folder %s: %s\n", CMD, dir, strerror(errno));
        return 0;
    }
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "%s: cannot use the output folder %s: %s\n", CMD, dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: -o %s: exists and is not a folder\n", CMD, dir);
        return 0;
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.vq_report_probe.XXXXXX", dir);
    const int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write in the output folder %s: %s\n", CMD, dir,
                strerror(errno));
        return 0;
    }
    close(fd);
    unlink(probe);
    return 1;
}

int vq_cmd_report(int argc, char **argv) {
    static const struct option lo[] = {
        {"out", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *dir = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
        default: vq_cli_bad_option(CMD, c, argc, argv, lo); return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "%s: -o FIGDIR is required\n", CMD);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no results.json given\n", CMD);
        return 2;
    }
#if VQ_HAVE_PLPLOT
    if (!have_pngcairo()) {
        fprintf(stderr, "%s: PLplot has no pngcairo device (install plplot-driver-cairo)\n", CMD);
        return 1;
    }
#endif
    if (!out_dir_ok(dir)) return 1;
    char **in = NULL;
    int n_in = 0, cap_in = 0, rc = 0;
    for (int a = optind; a < argc && rc == 0; a++)
        if (!collect_inputs(argv[a], &in, &n_in, &cap_in)) rc = 1;
    struct model_set *ms = rc ? NULL : calloc(MAX_MODELS, sizeof *ms);
    if (!ms) rc = 1;
    int n_models = 0;
    for (int a = 0; a < n_in && rc == 0; a++) {
        struct vq_results r;
        char err[512];
        vq_status st = vq_results_read(in[a], &r, err, sizeof err);
        if (st != VQ_STATUS_OK) {
            if (st == VQ_STATUS_IO || st == VQ_STATUS_RANGE || st == VQ_STATUS_NO_MEMORY)
                fprintf(stderr, "%s: %s\n", CMD, err); /* the file gate's message names it */
            else fprintf(stderr, "%s: %s: %s\n", CMD, in[a], err[0] ? err : vq_status_str(st));
            rc = 1;
            break;
        }
        vq_kv_results_upgrade(&r);
        int m = 0;
        while (m < n_models && !same_model(&ms[m].r, &r)) m++;
        if (m == n_models) {
            if (n_models == MAX_MODELS) {
                fprintf(stderr, "%s: more than %d models\n", CMD, MAX_MODELS);
                vq_results_clear(&r);
                rc = 1;
                break;
            }
            ms[m].r = r;
            vq_cli_model_stem(r.model.file ? r.model.file : "model", ms[m].stem, sizeof ms[m].stem);
            for (int k = 0; k < m; k++) /* two models with one file name: keep stems distinct */
                if (!strcmp(ms[k].stem, ms[m].stem)) {
                    size_t l = strlen(ms[m].stem);
                    if (l > 80) l = 80;
                    snprintf(ms[m].stem + l, sizeof ms[m].stem - l, "-%d", m + 1);
                }
            n_models++;
        } else if (!merge_into(&ms[m].r, &r)) {
            fprintf(stderr, "%s: out of memory\n", CMD);
            vq_results_clear(&r);
            rc = 1;
        }
    }
    for (int m = 0; m < n_models && rc == 0; m++) {
        struct model_set *s = &ms[m];
        s->ok = calloc((size_t)(s->r.n_results ? s->r.n_results : 1), sizeof *s->ok);
        if (!s->ok) {
            rc = 1;
            break;
        }
        for (int i = 0; i < s->r.n_results; i++)
            if (!s->r.results[i].error) s->ok[s->n_ok++] = i;
#if VQ_HAVE_PLPLOT
        const int dr = draw_model(s, dir);
        if (dr <= 0) {
            if (dr == 0) fprintf(stderr, "%s: out of memory\n", CMD);
            rc = 1;
            break;
        }
        printf(
            "%s: %s/%s-{throughput,quality,memory,distortion,output,report}.png (%d configs, "
            "%d failed)\n",
            CMD, dir, s->stem, s->n_ok, s->r.n_results - s->n_ok);
#endif
    }
    if (rc == 0) {
        if (!write_table(ms, n_models, dir)) {
            fprintf(stderr, "%s: cannot write %s/table.md%s%s\n", CMD, dir,
                    vq_file_error()[0] ? ": " : "", vq_file_error());
            rc = 1;
        } else {
            printf("%s: %s/table.md\n", CMD, dir);
        }
    }
    if (rc == 0 && !VQ_HAVE_PLPLOT) {
        fprintf(stderr,
                "%s: no figures: this veloxquant was built without PLplot; install libplplot-dev "
                "plplot-driver-cairo and reconfigure (cmake -DVQ_PLPLOT=ON) to draw them\n",
                CMD);
        rc = VQ_REPORT_NO_FIGURES;
    }
    for (int m = 0; m < n_models; m++) {
        vq_results_clear(&ms[m].r);
        free(ms[m].ok);
    }
    free(ms);
    for (int a = 0; a < n_in; a++) free(in[a]);
    free(in);
    return rc;
}
