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
 * and FIGDIR/table.md with every result field of every model (4 significant digits, counts as
 * integers, each named config's definition listed under it). Failed configs (an
 * `error` entry) appear in the table with their error and are left out of the figures.
 *
 * Figures: config i is drawn in colour i % 10 (Tableau 10) with marker shape i % 7, the same
 * in every panel (bars carry the marker beside their label), so that up to 70 configs differ;
 * llama.cpp rows are hollow. A panel without data (no cosine in a llama.cpp comparison, no
 * timings) is left out and the figure uses the panels that have some; a figure with none is
 * not written. The two scatter panels share one bits/elem axis (log2). On the KL panel (log
 * axis) fp16's KL of 0 is a labelled vertical reference line. Value labels have 3 significant
 * digits, token counts none. The caption gives CPU, threads and runs per config; where a
 * results file records speed repeats (sweep --repeats: prefill_tok_s_runs, decode_tok_s_runs)
 * the throughput bars are the medians with min .. max error bars. Everything is placed in page
 * pixels by this file: a label layout pass puts each scatter label at the first free spot among
 * candidate offsets around its point (then further out with a leader line), avoiding the
 * boxes already placed, markers, data lines and the frame; titles and captions shrink to fit.
 * --layout-json FILE writes every text box, marker and error bar of every figure, so that
 * tests/cli/report.sh checks that no label overlaps another, a marker or an error bar.
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

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: veloxquant report RESULTS [MORE ...] -o FIGDIR\n\n"
        "Draws six PNG figures per model (throughput, quality vs compression, memory at scale,\n"
        "attention distortion, output comparison, full report sheet; panels without data are\n"
        "left out, and a figure with none is not written) and FIGDIR/table.md from\n"
        "results.json files written by `veloxquant sweep`. RESULTS is a results.json or a\n"
        "sweep's output folder (its results.json and those of its per-model subfolders).\n\n"
        "  -o, --out FIGDIR      output folder (created if missing)\n"
        "      --layout-json F   also write every text box and marker of every figure, in\n"
        "                        pixels, to F (the tests check that no two labels overlap)\n"
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

/* Formats v with `digits` significant digits in plain notation (3: "203", "73.9", "0.0303"),
 * values of 10^digits and above as integers and tiny ones (below 10^-digits) in exponent form,
 * so that one figure or table column never mixes precisions. */
static void fmt_sig(char *buf, size_t cap, double v, int digits) {
    if (v == 0) {
        snprintf(buf, cap, "0");
        return;
    }
    const double a = fabs(v);
    if (a >= pow(10, digits)) snprintf(buf, cap, "%.0f", v);
    else if (a < pow(10, -digits)) snprintf(buf, cap, "%.*e", digits - 1, v);
    else {
        int dec = digits - 1 - (int)floor(log10(a));
        /* rounding may carry to the next power of ten (99.96 -> 100.0) */
        if (a * pow(10, dec) >= pow(10, digits) - 0.5) dec--;
        snprintf(buf, cap, "%.*f", dec < 0 ? 0 : dec, v);
    }
}

#if VQ_HAVE_PLPLOT
/* ---- page, text boxes and the layout record ---------------------------------------------- */

/* Everything is placed in page pixels (x right, y down from the top left corner), converted to
 * PLplot's normalized coordinates when drawn. Every piece of text and every marker this file
 * draws goes through txt() / mark(), which record its box; with --layout-json the boxes of each
 * figure are written out so that a test can check that no two overlap. Text extents are
 * estimated from the advance widths of DejaVu Sans (the cairo driver's default face), a few
 * percent wider than the ink. PLplot keeps one global stream, so the page state is a file
 * static too (one figure at a time). */
struct box {
    double x0, y0, x1, y1;
};

/* K_LINE: a stretch of a data line, for the label layout; K_ERR: an error bar (min .. max of a
 * config's repeats) */
enum { K_TEXT, K_MARK, K_LINE, K_ERR };

struct lbox {
    struct box b;
    int panel; /* index into g.panels, -1 = the page (title, caption) */
    int kind;  /* K_TEXT, K_MARK or K_LINE */
    char text[160];
};

#define MAX_PANELS 8
static struct {
    int w, h;   /* page pixels */
    double ppm; /* pixels per mm (PLplot sizes text in mm) */
    struct lbox *boxes;
    int nb, cap; /* recorded boxes of the current figure */
    struct box panels[MAX_PANELS];
    double xr[MAX_PANELS][2]; /* each panel's x window (world units), for the layout record */
    int np, cur;              /* panels of the figure; the panel being drawn (-1: page) */
    const char *path;
    FILE *layout; /* --layout-json, NULL when not asked for */
    int n_figs;
    int oom;
} g;

/* Colour map 0: 0 background, 1 text and frames, 2..11 the config palette (Tableau 10), 12 grid
 * grey, 13 leader-line grey. */
#define N_COLORS 10
#define C_GRID 12
#define C_LEADER 13
static const unsigned char PALETTE[N_COLORS][3] = {
    {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
    {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
};
/* Marker shapes, crossed with the palette: config i gets colour i % 10 and shape i % 7, so the
 * first 70 configs all differ and neighbours differ in both. */
enum { S_CIRCLE, S_SQUARE, S_TRIUP, S_DIAMOND, S_TRIDOWN, S_STAR, S_PLUS, N_SHAPES };

struct style {
    int color, shape, hollow; /* hollow: a llama.cpp row */
};

static struct style style_of(int i, int hollow) {
    struct style s = {2 + i % N_COLORS, i % N_SHAPES, hollow};
    return s;
}

/* Advance width of one character in units of 1/2048 em (DejaVu Sans), 1 em for anything that is
 * not ASCII (counted once per UTF-8 sequence). */
static int char_adv(unsigned char c) {
    static const short LOWER[26] = {1255, 1300, 1126, 1300, 1260, 721,  1300, 1298, 569,
                                    569,  1186, 569,  1995, 1298, 1253, 1300, 1300, 842,
                                    1067, 803,  1298, 1212, 1675, 1212, 1212, 1075};
    if (c >= 'a' && c <= 'z') return LOWER[c - 'a'];
    if (c >= '0' && c <= '9') return 1303;
    if (c == 'W') return 2025;
    if (c == 'M' || c == 'm') return 1767;
    if (c == 'I' || c == 'J') return 700;
    if (c >= 'A' && c <= 'Z') return 1500;
    switch (c) {
    case ' ':
    case '.':
    case ',':
    case ':':
    case ';':
    case '|':
    case '!':
    case '\'': return 700;
    case '-':
    case '(':
    case ')':
    case '[':
    case ']':
    case '/': return 800;
    case '_': return 1024;
    case '+':
    case '=':
    case '<':
    case '>':
    case '~': return 1716;
    case '%':
    case '@': return 1950;
    default: return c >= 0x80 ? 2048 : 1300;
    }
}

/* Width in pixels of str at size s (cap height in pixels, as txt() takes it). */
static double text_w(const char *str, double s) {
    double u = 0;
    for (const unsigned char *p = (const unsigned char *)str; *p; p++)
        if ((*p & 0xC0) != 0x80) u += char_adv(*p);
    return u / 2048.0 * s / 0.729; /* DejaVu Sans: cap height 0.729 em */
}

/* The box of text at reference point (x, y) (its vertical middle), justified by just (0 left,
 * 0.5 centre, 1 right): cap height s, with room for descenders below. */
static struct box text_box(double x, double y, double just, double s, const char *str) {
    const double w = text_w(str, s);
    struct box b = {x - just * w, y - 0.62 * s, x - just * w + w, y + 0.82 * s};
    return b;
}

static int overlap(struct box a, struct box b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

static int inside(struct box a, struct box o) {
    return a.x0 >= o.x0 && a.x1 <= o.x1 && a.y0 >= o.y0 && a.y1 <= o.y1;
}

static void record(struct box b, int kind, const char *text) {
    if (g.nb == g.cap) {
        const int nc = g.cap ? 2 * g.cap : 256;
        struct lbox *l = realloc(g.boxes, (size_t)nc * sizeof *l);
        if (!l) {
            g.oom = 1;
            return;
        }
        g.boxes = l;
        g.cap = nc;
    }
    struct lbox *e = &g.boxes[g.nb++];
    e->b = b;
    e->panel = g.cur;
    e->kind = kind;
    snprintf(e->text, sizeof e->text, "%s", text);
}

/* 1 if b overlaps no recorded text box (markers too when marks). */
static int box_free(struct box b, int marks) {
    for (int i = 0; i < g.nb; i++)
        if ((g.boxes[i].kind == K_TEXT || marks) && overlap(b, g.boxes[i].b)) return 0;
    return 1;
}

/* Saves PLplot's viewport and window and sets both to the whole page in pixels (y up). */
struct vpsave {
    PLFLT v[4], w[4];
};
static struct vpsave page_coords(void) {
    struct vpsave s;
    plgvpd(&s.v[0], &s.v[1], &s.v[2], &s.v[3]);
    plgvpw(&s.w[0], &s.w[1], &s.w[2], &s.w[3]);
    plvpor(0, 1, 0, 1);
    plwind(0, g.w, 0, g.h);
    return s;
}
static void restore(struct vpsave s) {
    plvpor(s.v[0], s.v[1], s.v[2], s.v[3]);
    plwind(s.w[0], s.w[1], s.w[2], s.w[3]);
}

/* Draws str with its reference point at page pixel (x, y), cap height s pixels, colour col;
 * rot: 0 horizontal, 1 reading upwards (y-axis labels; the box is then turned too). Records and
 * returns its box. */
static struct box txt_rot(double x, double y, double just, double s, int col, int rot,
                          const char *str) {
    struct vpsave sv = page_coords();
    plschr(s / g.ppm, 1.0);
    plcol0(col);
    if (rot) plptex(x, g.h - y, 0, 1, just, str);
    else plptex(x, g.h - y, 1, 0, just, str);
    restore(sv);
    struct box b = text_box(x, y, just, s, str);
    if (rot) { /* turned a quarter anticlockwise about (x, y) */
        const struct box r = {x - (y - b.y0), y - (b.x1 - x), x + (b.y1 - y), y + (x - b.x0)};
        b = r;
    }
    record(b, K_TEXT, str);
    return b;
}
static struct box txt(double x, double y, double just, double s, const char *str) {
    return txt_rot(x, y, just, s, 1, 0, str);
}

/* The largest size <= s at which str fits in width w (not below 0.55 s). */
static double fit_size(const char *str, double s, double w) {
    const double tw = text_w(str, s);
    if (tw <= w) return s;
    const double f = w / tw;
    return s * (f < 0.55 ? 0.55 : f);
}

/* A marker of style st, radius r pixels, centred at page pixel (x, y); recorded. */
static void mark(double x, double y, double r, struct style st) {
    PLFLT px[24], py[24];
    int n = 0;
    const double PI = 3.14159265358979;
    switch (st.shape) {
    case S_CIRCLE:
        for (n = 0; n < 20; n++) {
            px[n] = x + r * cos(2 * PI * n / 20);
            py[n] = y + r * sin(2 * PI * n / 20);
        }
        break;
    case S_SQUARE: {
        const double a = 0.86 * r;
        const double sx[4] = {-a, a, a, -a}, sy[4] = {-a, -a, a, a};
        for (n = 0; n < 4; n++) px[n] = x + sx[n], py[n] = y + sy[n];
        break;
    }
    case S_TRIUP:
    case S_TRIDOWN: {
        const double d = st.shape == S_TRIUP ? -1 : 1; /* y grows downwards */
        for (n = 0; n < 3; n++) {
            const double t = 2 * PI * n / 3;
            px[n] = x + 1.15 * r * sin(t);
            py[n] = y + d * 1.15 * r * cos(t) - d * 0.15 * r;
        }
        break;
    }
    case S_DIAMOND: {
        const double sx[4] = {0, 1.15 * r, 0, -1.15 * r}, sy[4] = {-1.2 * r, 0, 1.2 * r, 0};
        for (n = 0; n < 4; n++) px[n] = x + sx[n], py[n] = y + sy[n];
        break;
    }
    case S_STAR:
        for (n = 0; n < 10; n++) {
            const double t = 2 * PI * n / 10, rr = (n % 2 ? 0.5 : 1.25) * r;
            px[n] = x + rr * sin(t);
            py[n] = y - rr * cos(t);
        }
        break;
    default: { /* S_PLUS */
        const double a = 1.1 * r, b = 0.38 * r;
        const double sx[12] = {-b, b, b, a, a, b, b, -b, -b, -a, -a, -b};
        const double sy[12] = {-a, -a, -b, -b, b, b, a, a, b, b, -b, -b};
        for (n = 0; n < 12; n++) px[n] = x + sx[n], py[n] = y + sy[n];
        break;
    }
    }
    for (int i = 0; i < n; i++) py[i] = g.h - py[i];
    struct vpsave sv = page_coords();
    plcol0(st.hollow ? 0 : st.color);
    plfill(n, px, py);
    px[n] = px[0];
    py[n] = py[0];
    plcol0(st.hollow ? st.color : 1);
    plwidth(st.hollow ? 2.0 : 0.6);
    plline(n + 1, px, py);
    plwidth(1.0);
    restore(sv);
    const struct box b = {x - 1.25 * r, y - 1.25 * r, x + 1.25 * r, y + 1.25 * r};
    record(b, K_MARK, "");
}

/* A line between two page pixels in colour col, width wd, style sty (1 solid, 2 dashed). */
static void seg(double x0, double y0, double x1, double y1, int col, double wd, int sty) {
    struct vpsave sv = page_coords();
    PLFLT xs[2] = {x0, x1}, ys[2] = {g.h - y0, g.h - y1};
    plcol0(col);
    plwidth(wd);
    pllsty(sty);
    plline(2, xs, ys);
    pllsty(1);
    plwidth(1.0);
    restore(sv);
}

/* Starts a PNG page of w x h pixels with n panels (their cells are set by the caller). */
static void fig_begin(const char *path, int w, int h) {
    plsdev("pngcairo");
    plsfnam(path);
    plspage(0, 0, w, h, 0, 0);
    plscmap0n(16);
    plscol0(0, 255, 255, 255);
    plscol0(1, 0, 0, 0);
    for (int i = 0; i < N_COLORS; i++) plscol0(2 + i, PALETTE[i][0], PALETTE[i][1], PALETTE[i][2]);
    plscol0(C_GRID, 225, 225, 225);
    plscol0(C_LEADER, 120, 120, 120);
    plinit();
    pladv(0);
    PLFLT sx0, sx1, sy0, sy1;
    plgspa(&sx0, &sx1, &sy0, &sy1);
    g.w = w;
    g.h = h;
    g.ppm = w / (sx1 - sx0);
    g.nb = 0;
    g.np = 0;
    g.cur = -1;
    g.path = path;
    plvpor(0, 1, 0, 1);
    plwind(0, w, 0, h);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* Ends the page and appends its boxes to the layout record. */
static void fig_end(void) {
    plend();
    FILE *f = g.layout;
    if (!f) return;
    fprintf(f, "%s\n  {\"file\": ", g.n_figs++ ? "," : "");
    json_str(f, g.path);
    fprintf(f, ", \"width\": %d, \"height\": %d,\n   \"panels\": [", g.w, g.h);
    for (int p = 0; p < g.np; p++)
        fprintf(f, "%s[%.1f, %.1f, %.1f, %.1f]", p ? ", " : "", g.panels[p].x0, g.panels[p].y0,
                g.panels[p].x1, g.panels[p].y1);
    fprintf(f, "],\n   \"x_ranges\": [");
    for (int p = 0; p < g.np; p++)
        fprintf(f, "%s[%.6g, %.6g]", p ? ", " : "", g.xr[p][0], g.xr[p][1]);
    fprintf(f, "],\n   \"boxes\": [");
    for (int i = 0; i < g.nb; i++) {
        const struct lbox *e = &g.boxes[i];
        fprintf(f,
                "%s\n    {\"kind\": \"%s\", \"panel\": %d, \"box\": [%.1f, %.1f, %.1f, %.1f], "
                "\"text\": ",
                i ? "," : "",
                e->kind == K_TEXT   ? "text"
                : e->kind == K_MARK ? "mark"
                : e->kind == K_ERR  ? "errbar"
                                    : "line",
                e->panel, e->b.x0, e->b.y0, e->b.x1, e->b.y1);
        json_str(f, e->text);
        fputc('}', f);
    }
    fprintf(f, "]}");
}

/* ---- axes -------------------------------------------------------------------------------- */

/* A plot frame in page pixels and the world window drawn in it. Axis kinds: linear, log10
 * (window in log10 units, labelled 0.01, 0.1, 1, ...), bits (window in log2 units, labelled
 * 1, 2, 3, 4, 6, 8, 16). */
enum { AX_LIN, AX_LOG10, AX_BITS };
struct axes {
    struct box f;
    double wx0, wx1, wy0, wy1;
};

static double px_x(const struct axes *a, double wx) {
    return a->f.x0 + (wx - a->wx0) / (a->wx1 - a->wx0) * (a->f.x1 - a->f.x0);
}
static double px_y(const struct axes *a, double wy) {
    return a->f.y1 - (wy - a->wy0) / (a->wy1 - a->wy0) * (a->f.y1 - a->f.y0);
}

/* Records the line from (x0, y0) to (x1, y1) (page pixels) as small K_LINE boxes. */
static void line_boxes(double x0, double y0, double x1, double y1) {
    const int n = 1 + (int)(hypot(x1 - x0, y1 - y0) / 4);
    for (int i = 0; i <= n; i++) {
        const double x = x0 + (x1 - x0) * i / n, y = y0 + (y1 - y0) * i / n;
        const struct box b = {x - 2, y - 2, x + 2, y + 2};
        record(b, K_LINE, "");
    }
}

/* Makes a's frame the PLplot viewport and its window the world window (for plline). */
static void axes_set(const struct axes *a) {
    plvpor(a->f.x0 / g.w, a->f.x1 / g.w, 1 - a->f.y1 / g.h, 1 - a->f.y0 / g.h);
    plwind(a->wx0, a->wx1, a->wy0, a->wy1);
}

/* A tick step of 1, 2 or 5 times a power of ten giving about `want` ticks over span. */
static double nice_tick(double span, int want) {
    if (!(span > 0)) return 1;
    const double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* The tick values of one axis (world units) and their labels; returns the count. */
static int ticks(int kind, double w0, double w1, int want, double *t, char (*lab)[24], int cap) {
    int n = 0;
    if (kind == AX_LIN) {
        const double st = nice_tick(w1 - w0, want);
        const int dec = st >= 1 ? 0 : (int)ceil(-log10(st) - 1e-9);
        for (double v = ceil(w0 / st - 1e-9) * st; v <= w1 + 1e-9 * st && n < cap; v += st) {
            t[n] = fabs(v) < 1e-9 * st ? 0 : v;
            snprintf(lab[n], 24, "%.*f", dec, t[n]);
            n++;
        }
    } else if (kind == AX_LOG10) { /* decades; 2 and 5 between them over less than 2.5 */
        static const int M[3] = {1, 2, 5};
        const int nm = w1 - w0 < 2.5 && want > 3 ? 3 : 1;
        for (int k = (int)floor(w0); k <= (int)ceil(w1) && n < cap; k++)
            for (int j = 0; j < nm && n < cap; j++) {
                const double v = k + log10(M[j]);
                if (v < w0 - 1e-9 || v > w1 + 1e-9) continue;
                t[n] = v;
                if (k >= 0) snprintf(lab[n], 24, "%.0f", M[j] * pow(10, k));
                else snprintf(lab[n], 24, "%.*f", -k, M[j] * pow(10, k));
                n++;
            }
    } else {
        static const double B[] = {0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32};
        for (size_t i = 0; i < sizeof B / sizeof B[0] && n < cap; i++)
            if (log2(B[i]) >= w0 && log2(B[i]) <= w1) {
                t[n] = log2(B[i]);
                snprintf(lab[n], 24, "%g", B[i]);
                n++;
            }
    }
    return n;
}

/* Draws frame, grid, ticks and tick labels (size s) of a; gx/gy: grid lines. Returns the width
 * of the widest y tick label (for placing the y axis title). */
static double axes_draw(const struct axes *a, int xk, int yk, double s, int gx, int gy, int xlabels,
                        int ylabels) {
    if (g.cur >= 0) {
        g.xr[g.cur][0] = a->wx0;
        g.xr[g.cur][1] = a->wx1;
    }
    double t[64];
    char lab[64][24];
    axes_set(a);
    const double tl = 0.35 * s; /* tick length, pixels */
    /* fewer ticks when the labels of 6 would touch */
    int n = ticks(xk, a->wx0, a->wx1, 6, t, lab, 64);
    for (int i = 1; i < n; i++) {
        const struct box p = text_box(px_x(a, t[i - 1]), 0, 0.5, s, lab[i - 1]);
        const struct box q = text_box(px_x(a, t[i]), 0, 0.5, s, lab[i]);
        if (q.x0 < p.x1 + 0.5 * s) {
            n = ticks(xk, a->wx0, a->wx1, 3, t, lab, 64);
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        const double x = px_x(a, t[i]);
        if (gx) seg(x, a->f.y0, x, a->f.y1, C_GRID, 1.0, 1);
        seg(x, a->f.y1, x, a->f.y1 - tl, 1, 1.0, 1);
        seg(x, a->f.y0, x, a->f.y0 + tl, 1, 1.0, 1);
        if (xlabels) txt(x, a->f.y1 + 0.45 * s + 0.62 * s, 0.5, s, lab[i]);
    }
    double wmax = 0;
    int m = ylabels ? ticks(yk, a->wy0, a->wy1, 6, t, lab, 64) : 0;
    for (int i = 1; i < m; i++)
        if (fabs(px_y(a, t[i]) - px_y(a, t[i - 1])) < 1.6 * s) {
            m = ticks(yk, a->wy0, a->wy1, 3, t, lab, 64);
            break;
        }
    for (int i = 0; i < m; i++) {
        const double y = px_y(a, t[i]);
        if (gy) seg(a->f.x0, y, a->f.x1, y, C_GRID, 1.0, 1);
        seg(a->f.x0, y, a->f.x0 + tl, y, 1, 1.0, 1);
        seg(a->f.x1, y, a->f.x1 - tl, y, 1, 1.0, 1);
        const struct box b = txt(a->f.x0 - 0.4 * s, y + 0.1 * s, 1.0, s, lab[i]);
        wmax = fmax(wmax, b.x1 - b.x0);
    }
    if (yk == AX_LOG10) /* minor ticks at 2..9 of each decade */
        for (int k = (int)floor(a->wy0); k <= (int)ceil(a->wy1); k++)
            for (int j = 2; j < 10; j++) {
                const double v = k + log10(j);
                if (v <= a->wy0 || v >= a->wy1) continue;
                const double y = px_y(a, v);
                seg(a->f.x0, y, a->f.x0 + 0.6 * tl, y, 1, 1.0, 1);
                seg(a->f.x1, y, a->f.x1 - 0.6 * tl, y, 1, 1.0, 1);
            }
    if (xk == AX_LOG10)
        for (int k = (int)floor(a->wx0); k <= (int)ceil(a->wx1); k++)
            for (int j = 2; j < 10; j++) {
                const double v = k + log10(j);
                if (v <= a->wx0 || v >= a->wx1) continue;
                const double x = px_x(a, v);
                seg(x, a->f.y1, x, a->f.y1 - 0.6 * tl, 1, 1.0, 1);
            }
    struct vpsave sv = page_coords();
    PLFLT fx[5] = {a->f.x0, a->f.x1, a->f.x1, a->f.x0, a->f.x0};
    PLFLT fy[5] = {g.h - a->f.y0, g.h - a->f.y0, g.h - a->f.y1, g.h - a->f.y1, g.h - a->f.y0};
    plcol0(1);
    plline(5, fx, fy);
    restore(sv);
    axes_set(a);
    return wmax;
}

/* ---- panels ------------------------------------------------------------------------------ */

/* The common sizes of a figure: text cap heights in pixels. */
struct sizes {
    double title, label, tick, small;
};

/* The y below the title of a panel (shrunk to fit the cell's width). */
static double panel_top(struct box cell, const char *title, double s) {
    const double fs = fit_size(title, s, cell.x1 - cell.x0 - 8);
    return cell.y0 + 2.2 * fs + 6;
}

/* Draws the title of a panel centred over its frame [fx0, fx1], moved sideways as far as it
 * must to stay inside the cell. */
static void panel_title_at(struct box cell, const char *title, double s, double fx0, double fx1) {
    const double fs = fit_size(title, s, cell.x1 - cell.x0 - 8), w = text_w(title, fs);
    double cx = (fx0 + fx1) / 2;
    if (cx + w / 2 > cell.x1 - 4) cx = cell.x1 - 4 - w / 2;
    if (cx - w / 2 < cell.x0 + 4) cx = cell.x0 + 4 + w / 2;
    txt(cx, cell.y0 + 0.8 * fs + 4, 0.5, fs, title);
}

/* Horizontal bars, one row per config (first on top), n_series bars per row. ints: values
 * are counts (printed as integers); series_col: colour per series (else the configs'). Each
 * row label carries the config's marker, as in the scatter and memory panels. */
static void hbars(struct box cell, const struct sizes *z, const char *title, const char *xlabel,
                  int n, const char *const *labels, const struct style *st, int n_series,
                  const double *const *vals, const int *series_col, const char *const *series_names,
                  int ints, const double *also, const double *lo, const double *hi) {
    /* also (NULL = none): the values of the other panel of the figure in the same unit, so
     * that both get one x range (prefill and decode throughput); lo / hi (NULL = none, one
     * series only): each config's smallest and largest repeat, drawn as an error bar where
     * they differ (a config measured once has lo = hi = its value) */
    const double *xv[4] = {vals[0], n_series > 1 ? vals[1] : also, also, hi};
    int nv = n_series + (also != NULL);
    if (hi && n_series == 1) xv[nv++] = hi;
    double xmax = 0, xmin = 0;
    for (int s = 0; s < nv; s++)
        for (int i = 0; i < n; i++)
            if (isfinite(xv[s][i])) {
                xmax = fmax(xmax, xv[s][i]);
                xmin = fmin(xmin, xv[s][i]);
            }
    double top = panel_top(cell, title, z->title);
    if (n_series > 1 && series_names) { /* the series key, one row under the title */
        double w = 0;
        for (int s = 0; s < n_series; s++) w += 1.6 * z->small + text_w(series_names[s], z->small);
        double x = (cell.x0 + cell.x1) / 2 - w / 2 - 0.5 * z->small * (n_series - 1);
        const double y = top + 0.6 * z->small;
        for (int s = 0; s < n_series; s++) {
            struct vpsave sv = page_coords();
            PLFLT bx[4] = {x, x + z->small, x + z->small, x};
            PLFLT by[4] = {g.h - y + 0.5 * z->small, g.h - y + 0.5 * z->small,
                           g.h - y - 0.5 * z->small, g.h - y - 0.5 * z->small};
            plcol0(series_col[s]);
            plfill(4, bx, by);
            restore(sv);
            const struct box b = txt(x + 1.4 * z->small, y + 0.1 * z->small, 0, z->small,
                                     series_names[s]);
            x = b.x1 + 1.0 * z->small;
        }
        top = y + 1.6 * z->small;
    }
    /* rows: the label size follows the row height; the label column the longest label */
    const double bottom = cell.y1 - (0.45 + 1.45 + 0.8 + 1.45) * z->label - 4;
    const double row_h = (bottom - top) / (n > 0 ? n : 1);
    double ls = fmin(z->label, 0.62 * row_h);
    double lw = 0;
    for (int i = 0; i < n; i++) lw = fmax(lw, text_w(labels[i], ls));
    const double cw = cell.x1 - cell.x0, mr = 0.45 * ls; /* marker radius */
    if (lw > 0.42 * cw) {
        ls *= 0.42 * cw / lw;
        lw = 0.42 * cw;
    }
    struct axes a;
    a.f.x0 = cell.x0 + 6 + lw + 0.5 * ls + 2.6 * mr + 0.4 * ls;
    a.f.x1 = cell.x1 - 0.3 * z->tick - 0.5 * text_w("0000", z->tick);
    a.f.y0 = top;
    a.f.y1 = bottom;
    /* value labels sit right of their bar and must stay inside the frame: widen the window so
     * that the longest fits after the longest bar */
    /* value labels: one line each, clear of the next row's (two series: the second beside the
     * first when they would touch) */
    const double vs = fmin(z->small, (n_series > 1 ? 0.6 : 0.9) * row_h / 1.45);
    char buf[40];
    double vlw = text_w("n/a", vs);
    for (int s = 0; s < nv; s++)
        for (int i = 0; i < n; i++)
            if (isfinite(xv[s][i])) {
                if (ints) snprintf(buf, sizeof buf, "%.0f", xv[s][i]);
                else fmt_sig(buf, sizeof buf, xv[s][i], 3);
                vlw = fmax(vlw, text_w(buf, vs));
            }
    if (xmax <= xmin) xmax = xmin + 1;
    const double fw = a.f.x1 - a.f.x0, frac = (n_series * (vlw + 0.6 * vs) + 4) / fw;
    a.wx0 = xmin < 0 ? xmin - 0.05 * (xmax - xmin) : 0;
    a.wx1 = frac < 0.6 ? (xmax - a.wx0 * frac) / (1 - frac) : xmax * 2.5;
    a.wy0 = 0;
    a.wy1 = n > 0 ? n : 1;
    axes_draw(&a, AX_LIN, AX_LIN, z->tick, 1, 0, 1, 0); /* rows are labelled below */
    panel_title_at(cell, title, z->title, a.f.x0, a.f.x1);
    txt((a.f.x0 + a.f.x1) / 2, a.f.y1 + (0.45 + 1.45 + 0.8) * z->label + 0.2 * z->label, 0.5,
        z->label, xlabel);
    const double bh = fmin(row_h * 0.8 / n_series, 1.6 * z->label); /* one config: not a slab */
    for (int i = 0; i < n; i++) {
        const double yc = a.f.y0 + (i + 0.5) * row_h;
        txt(a.f.x0 - 0.4 * ls - 2.6 * mr, yc + 0.1 * ls, 1.0, ls, labels[i]);
        mark(a.f.x0 - 0.3 * ls - 1.3 * mr, yc, mr, st[i]);
        struct box prev = {0, 0, 0, 0};
        for (int s = 0; s < n_series; s++) {
            const double v = vals[s][i];
            const double y0 = yc - 0.5 * n_series * bh + s * bh, y1 = y0 + 0.92 * bh;
            const double ym = (y0 + y1) / 2;
            double lx = px_x(&a, isfinite(v) ? fmax(v, 0) : 0) + 0.3 * vs;
            if (s > 0 && overlap(text_box(lx, ym + 0.1 * vs, 0, vs, "n/a"), prev))
                lx = fmax(lx, prev.x1 + 0.5 * vs);
            if (hi && n_series == 1 && isfinite(v) && isfinite(hi[i]))
                lx = fmax(lx, px_x(&a, fmax(hi[i], 0)) + 0.3 * vs);
            if (!isfinite(v)) {
                prev = txt(lx, ym + 0.1 * vs, 0, vs, "n/a");
                continue;
            }
            const double xa = px_x(&a, 0), xb = px_x(&a, v);
            struct vpsave sv = page_coords();
            PLFLT bx[4] = {xa, xb, xb, xa}, by[4] = {g.h - y0, g.h - y0, g.h - y1, g.h - y1};
            plcol0(series_col ? series_col[s] : st[i].color);
            plfill(4, bx, by);
            restore(sv);
            if (lo && hi && n_series == 1 && isfinite(lo[i]) && isfinite(hi[i]) && hi[i] > lo[i]) {
                /* the error bar: min .. max of the repeats, capped, over the bar's middle */
                const double e0 = px_x(&a, lo[i]), e1 = px_x(&a, hi[i]), cap = 0.3 * (y1 - y0);
                seg(e0, ym, e1, ym, 1, 1.5, 1);
                seg(e0, ym - cap, e0, ym + cap, 1, 1.5, 1);
                seg(e1, ym - cap, e1, ym + cap, 1, 1.5, 1);
                const struct box eb = {e0, ym - cap, e1, ym + cap};
                char what[72];
                snprintf(what, sizeof what, "%.40s: %.4g .. %.4g", labels[i], lo[i], hi[i]);
                record(eb, K_ERR, what);
                lx = fmax(lx, e1 + 0.3 * vs);
            }
            if (ints) snprintf(buf, sizeof buf, "%.0f", v);
            else fmt_sig(buf, sizeof buf, v, 3);
            prev = txt(lx, ym + 0.1 * vs, 0, vs, buf);
        }
    }
}

/* Places a label of width w and height h for a point at page pixel (px, py) (marker radius r)
 * inside frame f: at the first free spot among candidate offsets around the point (right,
 * left, above, below, diagonals), then at growing distances in 16 directions with a leader
 * line, then anywhere in the frame nearest the point. Free: no recorded text or marker box
 * under it. Returns the box's reference point (left edge, vertical middle) in *lx, *ly and 1
 * when a leader line is needed. */
static int place_label(double px, double py, double r, double w, double s, struct box f, double *lx,
                       double *ly) {
    const double g0 = r + 0.35 * s;
    const double near[8][2] = {{g0, 0},
                               {-g0 - w, 0},
                               {-w / 2, -g0 - 0.9 * s},
                               {-w / 2, g0 + 0.9 * s},
                               {g0, -g0 - 0.5 * s},
                               {g0, g0 + 0.5 * s},
                               {-g0 - w, -g0 - 0.5 * s},
                               {-g0 - w, g0 + 0.5 * s}};
    struct box in = {f.x0 + 2, f.y0 + 2, f.x1 - 2, f.y1 - 2};
    for (int c = 0; c < 8; c++) {
        const struct box b = text_box(px + near[c][0], py + near[c][1], 0, s, "");
        const struct box bb = {b.x0, b.y0, b.x0 + w, b.y1};
        if (inside(bb, in) && box_free(bb, 1)) {
            *lx = px + near[c][0];
            *ly = py + near[c][1];
            return 0;
        }
    }
    const double PI = 3.14159265358979;
    for (int k = 1; k <= 14; k++) {
        const double d = g0 + k * 1.1 * s;
        for (int a = 0; a < 16; a++) {
            const double t = 2 * PI * a / 16, dx = cos(t), dy = sin(t);
            /* the box corner or edge facing the point at distance d */
            const double cx = px + dx * d + dx * w / 2, cy = py + dy * d + dy * 0.72 * s;
            const struct box bb = {cx - w / 2, cy - 0.72 * s, cx + w / 2, cy + 0.72 * s};
            if (inside(bb, in) && box_free(bb, 1)) {
                *lx = bb.x0;
                *ly = cy - 0.1 * s;
                return 1;
            }
        }
    }
    double best = HUGE_VAL;
    int found = 0;
    for (double y = in.y0 + 0.62 * s; y + 0.82 * s <= in.y1; y += 0.5 * s)
        for (double x = in.x0; x + w <= in.x1; x += 0.5 * s) {
            const struct box bb = {x, y - 0.62 * s, x + w, y + 0.82 * s};
            const double d = hypot(x + w / 2 - px, y - py);
            if (d < best && box_free(bb, 1)) {
                best = d;
                *lx = x;
                *ly = y;
                found = 1;
            }
        }
    if (!found) {
        *lx = px + g0;
        *ly = py;
    }
    return found;
}

/* Draws the lower-left frontier of the points i with sel[i] == want (x ascending; a point is on
 * it when its y is below every point with x <= its own) as a line in colour col and style sty,
 * in the current world window (x and y in the window's units, e.g. log2 and log10). */
static void frontier(const struct axes *ax, int n, const double *x, const double *y, const int *sel,
                     int want, int col, int sty) {
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
    for (int j = 1; j < k; j++) /* labels keep off the line: a small box every 4 pixels */
        line_boxes(px_x(ax, fx[j - 1]), px_y(ax, fy[j - 1]), px_x(ax, fx[j]), px_y(ax, fy[j]));
out:
    free(idx);
    free(fx);
    free(fy);
}

/* ---- data columns ------------------------------------------------------------------------ */

/* KV MB at context lengths 256..32768 per config (the memory panel). */
#define N_CTX 8
static const int CTXS[N_CTX] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768};

struct cols {
    int n;
    const char **labels;
    struct style *st;
    int *llama; /* 1: a llama.cpp row (config.engine), 0: veloxquant */
    double *prefill, *decode, *bpe, *lbits, *cosk, *kld, *lkld, *tokgen, *prefix;
    /* each config's smallest / largest repeat (the value itself when measured once) */
    double *prefill_lo, *prefill_hi, *decode_lo, *decode_hi;
    double *mb;      /* (n, N_CTX) KV MB, NaN where unknown */
    double bx0, bx1; /* shared bits axis of the scatter panels, log2 units */
    int any_llama;
};

/* KV MB of config e at each of CTXS, from the analytic model (or kv_bytes scaled). */
static void memory_of(const struct vq_results *r, const struct vq_result *e, double *out) {
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
        else if (!strcmp(op->key, "n_sink_tokens")) p.key.n_sink_tokens = p.value.n_sink_tokens = v;
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
        out[c] = v > 0 ? v : NAN;
    }
}

/* The smallest and largest of n repeats (v itself when there are none). */
static void runs_range(double v, const double *runs, int n, double *lo, double *hi) {
    *lo = *hi = v;
    for (int i = 0; i < n; i++) {
        *lo = i ? fmin(*lo, runs[i]) : runs[i];
        *hi = i ? fmax(*hi, runs[i]) : runs[i];
    }
}

static void cols_free(struct cols *c) {
    free(c->labels);
    free(c->st);
    free(c->llama);
    free(c->prefill);
}

static int cols_build(const struct model_set *ms, struct cols *c) {
    const int n = ms->n_ok, m = n ? n : 1;
    memset(c, 0, sizeof *c);
    c->n = n;
    c->labels = calloc((size_t)m, sizeof *c->labels);
    c->st = calloc((size_t)m, sizeof *c->st);
    c->llama = calloc((size_t)m, sizeof *c->llama);
    c->prefill = calloc((size_t)m * (13 + N_CTX), sizeof *c->prefill);
    if (!c->labels || !c->st || !c->llama || !c->prefill) {
        cols_free(c);
        return 0;
    }
    double *all = c->prefill;
    c->decode = all + m;
    c->bpe = all + 2 * m;
    c->lbits = all + 3 * m;
    c->cosk = all + 4 * m;
    c->kld = all + 5 * m;
    c->lkld = all + 6 * m;
    c->tokgen = all + 7 * m;
    c->prefix = all + 8 * m;
    c->prefill_lo = all + 9 * m;
    c->prefill_hi = all + 10 * m;
    c->decode_lo = all + 11 * m;
    c->decode_hi = all + 12 * m;
    c->mb = all + 13 * m;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (int i = 0; i < n; i++) {
        const struct vq_result *e = &ms->r.results[ms->ok[i]];
        c->labels[i] = e->config.name;
        c->llama[i] = !strcmp(e->config.engine, "llama.cpp");
        c->any_llama |= c->llama[i];
        c->st[i] = style_of(i, c->llama[i]);
        c->prefill[i] = e->prefill_tok_s;
        c->decode[i] = e->decode_tok_s;
        runs_range(e->prefill_tok_s, e->prefill_runs, e->n_prefill_runs, &c->prefill_lo[i],
                   &c->prefill_hi[i]);
        runs_range(e->decode_tok_s, e->decode_runs, e->n_decode_runs, &c->decode_lo[i],
                   &c->decode_hi[i]);
        c->bpe[i] = e->bits_per_elem;
        c->lbits[i] = e->bits_per_elem > 0 ? log2(e->bits_per_elem) : NAN;
        c->cosk[i] = e->cosine_k;
        c->kld[i] = e->kld_mean;
        c->lkld[i] = e->kld_mean > 0 ? log10(e->kld_mean) : NAN;
        c->tokgen[i] = e->tokens_generated;
        c->prefix[i] = e->fp16_prefix_match;
        memory_of(&ms->r, e, c->mb + (size_t)i * N_CTX);
        /* both scatter panels share the bits axis: every config with either metric */
        if (isfinite(c->lbits[i]) && (isfinite(c->cosk[i]) || isfinite(c->kld[i]))) {
            lo = fmin(lo, c->lbits[i]);
            hi = fmax(hi, c->lbits[i]);
        }
    }
    if (lo > hi) lo = 0, hi = 4;
    if (hi - lo < 1) lo -= 0.5, hi += 0.5;
    c->bx0 = lo - 0.08 * (hi - lo);
    c->bx1 = hi + 0.08 * (hi - lo);
    return 1;
}

enum { P_PREFILL, P_DECODE, P_COS_BITS, P_KLD_BITS, P_MEMORY, P_KLD_BARS, P_COS_BARS, P_OUTPUT };

static int any_finite(int n, const double *v) {
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) return 1;
    return 0;
}

/* 1 if panel `which` has something to show (an empty panel is left out of its figure). */
static int has_data(int which, const struct cols *c) {
    int any = 0;
    switch (which) {
    case P_PREFILL: return any_finite(c->n, c->prefill);
    case P_DECODE: return any_finite(c->n, c->decode);
    case P_COS_BITS:
        for (int i = 0; i < c->n; i++) any |= isfinite(c->lbits[i]) && isfinite(c->cosk[i]);
        return any;
    case P_KLD_BITS:
        for (int i = 0; i < c->n; i++) any |= isfinite(c->lbits[i]) && isfinite(c->lkld[i]);
        return any;
    case P_MEMORY: return any_finite(c->n * N_CTX, c->mb);
    case P_KLD_BARS: return any_finite(c->n, c->kld);
    case P_COS_BARS: return any_finite(c->n, c->cosk);
    default: return any_finite(c->n, c->tokgen) || any_finite(c->n, c->prefix);
    }
}

/* Scatter of y against bits/elem (log2 axis shared by the panels of a figure), each point
 * labelled with its config by the layout pass (place_label). logy: y in log10 units (points
 * without a finite y are left out). On the KL panel the configs with KL exactly 0 (fp16) are
 * drawn as a labelled vertical reference line at their bits, since a log axis cannot show 0,
 * and each engine's frontier as a line. */
static void scatter(struct box cell, const struct sizes *z, const char *title, const char *ylabel,
                    const struct cols *c, const double *y, int logy, int kl) {
    double ymin = HUGE_VAL, ymax = -HUGE_VAL;
    for (int i = 0; i < c->n; i++)
        if (isfinite(c->lbits[i]) && isfinite(y[i])) {
            ymin = fmin(ymin, y[i]);
            ymax = fmax(ymax, y[i]);
        }
    double dy = ymax - ymin;
    if (!(dy > 0)) dy = logy ? 1 : fabs(ymax) > 0 ? fabs(ymax) * 0.2 : 1;
    struct axes a;
    const double top = panel_top(cell, title, z->title);
    a.wx0 = c->bx0;
    a.wx1 = c->bx1;
    a.wy0 = ymin - 0.1 * dy;
    a.wy1 = ymax + 0.1 * dy;
    if (logy) { /* at least a decade, so that a few ticks are labelled */
        const double pad = fmax(0.1 * (ymax - ymin), 0.12);
        a.wy0 = ymin - pad;
        a.wy1 = ymax + pad;
        if (a.wy1 - a.wy0 < 1) {
            const double mid = (a.wy0 + a.wy1) / 2;
            a.wy0 = mid - 0.5;
            a.wy1 = mid + 0.5;
        }
    }
    /* the llama.cpp key goes in a corner of the frame with no point under it; when every
     * corner has one, the window grows upwards to make room at the top left */
    const char *k1 = "filled, solid line: veloxquant (frontier)";
    const char *k2 = "hollow, dashed line: llama.cpp";
    const int key = kl && c->any_llama;
    const double kw = fmax(text_w(k1, z->small), text_w(k2, z->small)) + z->small;
    const double kh = 3.4 * z->small + 6;
    /* y tick labels: the widest of them sets the left margin */
    double t[64], yw = 0;
    char lab[64][24];
    const int nt = ticks(logy ? AX_LOG10 : AX_LIN, a.wy0, a.wy1, 6, t, lab, 64);
    for (int i = 0; i < nt; i++) yw = fmax(yw, text_w(lab[i], z->tick));
    a.f.x0 = cell.x0 + 6 + 1.6 * z->label + yw + 0.4 * z->tick + 6;
    a.f.x1 = cell.x1 - 0.6 * text_w("16", z->tick) - 4;
    a.f.y0 = top;
    a.f.y1 = cell.y1 - (0.45 + 1.45 + 0.8 + 1.45) * z->label - 4;
    double kx = a.f.x0 + 0.5 * z->small, ky = a.f.y0;
    for (int tries = 0; key && tries < 8; tries++) {
        const double cx[4] = {a.f.x0 + 0.5 * z->small, a.f.x1 - kw, a.f.x0 + 0.5 * z->small,
                              a.f.x1 - kw};
        const double cy[4] = {a.f.y0, a.f.y0, a.f.y1 - kh, a.f.y1 - kh};
        const double pr = 0.42 * z->small + 6;
        int corner = -1;
        for (int k = 0; k < 4 && corner < 0; k++) {
            const struct box kb = {cx[k], cy[k], cx[k] + kw, cy[k] + kh};
            int hit = 0;
            for (int i = 0; i < c->n && !hit; i++) {
                if (!isfinite(c->lbits[i])) continue;
                const double px = px_x(&a, c->lbits[i]);
                if (c->kld[i] == 0) { /* the fp16 reference label, either side of its line */
                    const double fw = text_w("fp16: KL = 0", z->small) + 0.5 * z->small;
                    const struct box fb = {px - fw, a.f.y0, px + fw, a.f.y0 + 2.4 * z->small};
                    hit = overlap(kb, fb);
                } else if (isfinite(y[i])) {
                    const double py = px_y(&a, y[i]);
                    const struct box pb = {px - pr, py - pr, px + pr, py + pr};
                    hit = overlap(kb, pb);
                }
            }
            if (!hit) corner = k;
        }
        if (corner >= 0) {
            kx = cx[corner];
            ky = cy[corner];
            break;
        }
        a.wy1 += (a.wy1 - a.wy0) * kh / (a.f.y1 - a.f.y0); /* one key height more on top */
    }
    axes_draw(&a, AX_BITS, logy ? AX_LOG10 : AX_LIN, z->tick, 1, 1, 1, 1);
    panel_title_at(cell, title, z->title, a.f.x0, a.f.x1);
    txt((a.f.x0 + a.f.x1) / 2, a.f.y1 + (0.45 + 1.45 + 0.8) * z->label + 0.2 * z->label, 0.5,
        z->label, "bits / element (K+V, log scale)");
    txt_rot(cell.x0 + 6 + 0.8 * z->label, (a.f.y0 + a.f.y1) / 2, 0.5, z->label, 1, 1, ylabel);
    const double r = 0.42 * z->small + 1;
    /* reference lines first (fp16: KL 0), then the frontiers, the markers, the labels */
    if (kl) {
        double done[8];
        int nd = 0;
        for (int i = 0; i < c->n; i++) {
            if (!(c->kld[i] == 0) || !isfinite(c->lbits[i])) continue;
            int seen = 0;
            for (int k = 0; k < nd; k++) seen |= done[k] == c->lbits[i];
            if (seen || nd == 8) continue;
            done[nd++] = c->lbits[i];
            const double x = px_x(&a, c->lbits[i]);
            seg(x, a.f.y0 + 1, x, a.f.y1 - 1, C_LEADER, 1.5, 3);
            line_boxes(x, a.f.y0 + 1, x, a.f.y1 - 1);
            const char *ref = "fp16: KL = 0";
            const double w = text_w(ref, z->small);
            /* beside the line, at the top, on the side with room */
            const double lx = x + w + 0.4 * z->small < a.f.x1 - 2 ? x + 0.4 * z->small
                                                                  : x - 0.4 * z->small - w;
            txt(lx, a.f.y0 + 1.0 * z->small + 3, 0, z->small, ref);
        }
        axes_set(&a);
        frontier(&a, c->n, c->lbits, y, c->llama, 0, 1, 1);
        frontier(&a, c->n, c->lbits, y, c->llama, 1, 1, 2);
        if (key) {
            txt(kx, ky + 1.0 * z->small + 3, 0, z->small, k1);
            txt(kx, ky + 2.6 * z->small + 3, 0, z->small, k2);
        }
    }
    for (int i = 0; i < c->n; i++)
        if (isfinite(c->lbits[i]) && isfinite(y[i]))
            mark(px_x(&a, c->lbits[i]), px_y(&a, y[i]), r, c->st[i]);
    /* labels: the most crowded points first, so that they get the near spots */
    int *ord = malloc((size_t)(c->n ? c->n : 1) * sizeof *ord);
    double *crowd = malloc((size_t)(c->n ? c->n : 1) * sizeof *crowd);
    if (!ord || !crowd) {
        g.oom = 1;
        free(ord);
        free(crowd);
        return;
    }
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (!isfinite(c->lbits[i]) || !isfinite(y[i])) continue;
        crowd[i] = 0;
        for (int j = 0; j < c->n; j++)
            if (j != i && isfinite(c->lbits[j]) && isfinite(y[j]))
                crowd[i] += hypot(px_x(&a, c->lbits[i]) - px_x(&a, c->lbits[j]),
                                  px_y(&a, y[i]) - px_y(&a, y[j])) < 6 * z->small;
        ord[m++] = i;
    }
    for (int p = 1; p < m; p++)
        for (int q = p; q > 0 && crowd[ord[q]] > crowd[ord[q - 1]]; q--) {
            const int t2 = ord[q];
            ord[q] = ord[q - 1];
            ord[q - 1] = t2;
        }
    for (int p = 0; p < m; p++) {
        const int i = ord[p];
        const double px = px_x(&a, c->lbits[i]), py = px_y(&a, y[i]);
        const double w = text_w(c->labels[i], z->small);
        double lx, ly;
        if (place_label(px, py, r, w, z->small, a.f, &lx, &ly)) {
            /* leader from the marker's edge to the nearest point of the label box */
            const double bx = fmin(fmax(px, lx), lx + w);
            const double by = fmin(fmax(py, ly - 0.62 * z->small), ly + 0.82 * z->small);
            const double d = hypot(bx - px, by - py);
            if (d > r + 2)
                seg(px + (bx - px) * (r + 1) / d, py + (by - py) * (r + 1) / d, bx, by, C_LEADER,
                    0.8, 1);
        }
        txt_rot(lx, ly, 0, z->small, c->st[i].color == 2 + 8 ? 1 : c->st[i].color, 0, c->labels[i]);
    }
    free(ord);
    free(crowd);
}

/* A key of configs (line sample, marker, name) in the box k, one column, rows as tall as fit,
 * in the order ord (the configs' order when NULL). */
static void legend(struct box k, const struct sizes *z, const struct cols *c, const int *ord) {
    const double rh = fmin(1.9 * z->small, (k.y1 - k.y0) / (c->n > 0 ? c->n : 1));
    const double s = fmin(z->small, rh / 1.55);
    double tw = 0;
    for (int i = 0; i < c->n; i++) tw = fmax(tw, text_w(c->labels[i], s));
    const double ls = fmin(3.0 * s, k.x1 - k.x0 - tw - 1.2 * s);
    for (int r = 0; r < c->n; r++) {
        const int i = ord ? ord[r] : r;
        const double y = k.y0 + (r + 0.5) * rh;
        seg(k.x0, y, k.x0 + ls, y, c->st[i].color, 2.0, 1);
        mark(k.x0 + ls / 2, y, 0.42 * s + 1, c->st[i]);
        txt(k.x0 + ls + 0.5 * s, y + 0.1 * s, 0, s, c->labels[i]);
    }
}

/* KV MB against context 256..32768 per config (log-log lines), with a key to the right. */
static void memory_panel(struct box cell, const struct sizes *z, const struct cols *c) {
    double ymin = HUGE_VAL, ymax = -HUGE_VAL;
    for (int i = 0; i < c->n * N_CTX; i++)
        if (isfinite(c->mb[i])) {
            ymin = fmin(ymin, log10(c->mb[i]));
            ymax = fmax(ymax, log10(c->mb[i]));
        }
    const char *title = "KV cache memory at scale (analytic)";
    const double top = panel_top(cell, title, z->title);
    double tw = 0;
    for (int i = 0; i < c->n; i++) tw = fmax(tw, text_w(c->labels[i], z->small));
    const double kw = fmin(tw + 4.5 * z->small, 0.45 * (cell.x1 - cell.x0));
    struct axes a;
    a.wx0 = log10(CTXS[0]) - 0.08;
    a.wx1 = log10(CTXS[N_CTX - 1]) + 0.08;
    a.wy0 = floor(ymin - 0.05);
    a.wy1 = ceil(ymax + 0.05);
    double t[64], yw = 0;
    char lab[64][24];
    const int nt = ticks(AX_LOG10, a.wy0, a.wy1, 6, t, lab, 64);
    for (int i = 0; i < nt; i++) yw = fmax(yw, text_w(lab[i], z->tick));
    a.f.x0 = cell.x0 + 6 + 1.6 * z->label + yw + 0.4 * z->tick + 6;
    a.f.x1 = cell.x1 - kw - 1.2 * z->small;
    a.f.y0 = top;
    a.f.y1 = cell.y1 - (0.45 + 1.45 + 0.8 + 1.45) * z->label - 4;
    axes_draw(&a, AX_LOG10, AX_LOG10, z->tick, 1, 1, 1, 1);
    panel_title_at(cell, title, z->title, a.f.x0, a.f.x1);
    txt((a.f.x0 + a.f.x1) / 2, a.f.y1 + (0.45 + 1.45 + 0.8) * z->label + 0.2 * z->label, 0.5,
        z->label, "context tokens (log scale)");
    txt_rot(cell.x0 + 6 + 0.8 * z->label, (a.f.y0 + a.f.y1) / 2, 0.5, z->label, 1, 1,
            "KV cache MB (log scale)");
    axes_set(&a);
    for (int i = 0; i < c->n; i++) {
        PLFLT xs[N_CTX], ys[N_CTX];
        int k = 0;
        for (int j = 0; j < N_CTX; j++)
            if (isfinite(c->mb[i * N_CTX + j])) {
                xs[k] = log10(CTXS[j]);
                ys[k] = log10(c->mb[i * N_CTX + j]);
                k++;
            }
        axes_set(&a);
        plcol0(c->st[i].color);
        plwidth(1.8);
        if (k > 1) plline(k, xs, ys);
        plwidth(1.0);
        for (int j = 0; j < k; j++) /* every other context, alternating between configs */
            if ((j + i) % 2 == 1)
                mark(px_x(&a, xs[j]), px_y(&a, ys[j]), 0.32 * z->small + 1, c->st[i]);
    }
    /* the key lists the configs top to bottom as their lines end at the longest context */
    int *ord = malloc((size_t)(c->n ? c->n : 1) * sizeof *ord);
    if (ord) {
        const double *last = c->mb + N_CTX - 1;
        for (int i = 0; i < c->n; i++) ord[i] = i;
        for (int p = 1; p < c->n; p++)
            for (int q = p; q > 0; q--) {
                const double u = last[(size_t)ord[q - 1] * N_CTX], v = last[(size_t)ord[q] * N_CTX];
                if (!(v > u || (isfinite(v) && !isfinite(u)))) break;
                const int t2 = ord[q];
                ord[q] = ord[q - 1];
                ord[q - 1] = t2;
            }
    }
    const struct box kb = {a.f.x1 + 1.2 * z->small, a.f.y0, cell.x1 - 4, a.f.y1};
    legend(kb, z, c, ord);
    free(ord);
}

static void panel(int which, struct box cell, const struct sizes *z, const struct cols *c) {
    static const int two[2] = {2, 5};
    static const char *const out_names[2] = {"tokens generated", "fp16 prefix match (tokens)"};
    switch (which) {
    case P_PREFILL: {
        const double *v[1] = {c->prefill};
        hbars(cell, z, "Prefill throughput", "tokens / s", c->n, c->labels, c->st, 1, v, NULL, NULL,
              0, c->decode_hi, c->prefill_lo, c->prefill_hi);
        break;
    }
    case P_DECODE: {
        const double *v[1] = {c->decode};
        hbars(cell, z, "Decode throughput", "tokens / s", c->n, c->labels, c->st, 1, v, NULL, NULL,
              0, c->prefill_hi, c->decode_lo, c->decode_hi);
        break;
    }
    case P_COS_BITS:
        scatter(cell, z, "Key cosine vs bits/element", "cosine (keys)", c, c->cosk, 0, 0);
        break;
    case P_KLD_BITS:
        scatter(cell, z, "Next-token KL vs bits/element", "KL(fp16 || config), mean (log scale)", c,
                c->lkld, 1, 1);
        break;
    case P_MEMORY: memory_panel(cell, z, c); break;
    case P_KLD_BARS: {
        const double *v[1] = {c->kld};
        hbars(cell, z, "Next-token KL divergence (mean)", "KL(fp16 || config)", c->n, c->labels,
              c->st, 1, v, NULL, NULL, 0, NULL, NULL, NULL);
        break;
    }
    case P_COS_BARS: {
        const double *v[1] = {c->cosk};
        hbars(cell, z, "Key cosine", "cosine similarity of keys", c->n, c->labels, c->st, 1, v,
              NULL, NULL, 0, NULL, NULL, NULL);
        break;
    }
    case P_OUTPUT: {
        const double *v[2] = {c->tokgen, c->prefix};
        hbars(cell, z, "Greedy output vs fp16 (mean per prompt)", "tokens", c->n, c->labels, c->st,
              2, v, two, out_names, 1, NULL, NULL, NULL);
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

/* The caption under every figure, in two parts (one line when they fit, else two): how the
 * numbers were measured (CPU, threads, runs) and on what (corpus, ctx, when, which commit). */
static void caption(const struct vq_results *r, char *c1, char *c2, size_t cap) {
    const int t = r->hardware.cores;
    int lo = 0, hi = 0; /* fewest and most speed runs of a config that has a speed */
    for (int i = 0; i < r->n_results; i++) {
        const struct vq_result *e = &r->results[i];
        if (e->error || (!isfinite(e->prefill_tok_s) && !isfinite(e->decode_tok_s))) continue;
        const int n = e->n_prefill_runs > e->n_decode_runs ? e->n_prefill_runs : e->n_decode_runs;
        const int k = n > 1 ? n : 1;
        lo = lo ? (k < lo ? k : lo) : k;
        hi = k > hi ? k : hi;
    }
    char runs[160];
    if (hi <= 1)
        snprintf(runs, sizeof runs,
                 "one run per config (the results file records no repeats, so no error bars)");
    else if (lo == hi)
        snprintf(runs, sizeof runs, "%d runs per config: bars the median, whiskers min .. max", hi);
    else
        snprintf(runs, sizeof runs,
                 "%d to %d runs per config: bars the median, whiskers min .. max", lo, hi);
    snprintf(c1, cap, "%s, %s, %d thread%s; %s", r->hardware.cpu[0] ? r->hardware.cpu : "CPU ?",
             r->hardware.isa, t, t == 1 ? "" : "s", runs);
    snprintf(c2, cap, "corpus %s, ctx %d, %d chunks; created %s, git %s",
             r->protocol.corpus ? r->protocol.corpus : "none", r->protocol.ctx, r->protocol.chunks,
             r->created_utc[0] ? r->created_utc : "?", r->git_commit[0] ? r->git_commit : "?");
}

/* Draws one figure: the panels of list that have data on an nx-column grid, page title and
 * caption. Returns 1 drawn, 0 nothing to draw (no file written), -1 the path cannot be
 * written (printed). */
static int figure(const char *path, const char *title, const char *c1, const char *c2,
                  const int *list, int np, int max_cols, int cell_w, int cell_h,
                  const struct sizes *z, const struct cols *c) {
    int use[MAX_PANELS], n = 0;
    for (int p = 0; p < np; p++)
        if (has_data(list[p], c)) use[n++] = list[p];
    if (n == 0) return 0;
    if (!figure_path_ok(path)) return -1;
    const int nx = n < max_cols ? n : max_cols, ny = (n + nx - 1) / nx;
    const int w = nx * cell_w + 20;
    char one[1100];
    snprintf(one, sizeof one, "%s; %s", c1, c2);
    const int lines = text_w(one, z->small) <= w - 20 ? 1 : 2;
    const double band_t = 2.4 * z->title + 8, band_b = (0.8 + 1.6 * lines) * z->small + 8;
    const int h = (int)(ny * cell_h + band_t + band_b);
    fig_begin(path, w, h);
    const double ts = fit_size(title, 1.25 * z->title, w - 20);
    txt(w / 2.0, 1.0 * ts + 8, 0.5, ts, title);
    for (int l = 0; l < lines; l++) {
        const char *s = lines == 1 ? one : l ? c2 : c1;
        const double cs = fit_size(s, z->small, w - 20);
        txt(w / 2.0, h - (0.9 + 1.6 * (lines - 1 - l)) * z->small - 6, 0.5, cs, s);
    }
    for (int p = 0; p < n; p++) {
        const int cx = p % nx, cy = p / nx;
        const struct box cell = {10 + cx * cell_w + 6, band_t + cy * cell_h,
                                 10 + (cx + 1) * cell_w - 6, band_t + (cy + 1) * cell_h - 6};
        g.panels[g.np] = cell;
        g.cur = g.np++;
        panel(use[p], cell, z, c);
        g.cur = -1;
    }
    fig_end();
    return 1;
}

/* Draws the figures of one model: 1 ok, 0 out of memory, -1 a figure path cannot be written
 * (printed). The names of the figures written are appended to names. */
static int draw_model(const struct model_set *ms, const char *dir, char *names, size_t ncap) {
    struct cols c;
    if (!cols_build(ms, &c)) return 0;
    char path[4096], title[512], c1[512], c2[512];
    const struct vq_results *r = &ms->r;
    snprintf(title, sizeof title, "%s  (%s, %d layers, %d kv heads, head_dim %d; ctx %d)", ms->stem,
             r->model.arch, r->model.n_layers, r->model.n_kv_heads, r->model.head_dim,
             r->protocol.ctx);
    caption(r, c1, c2, sizeof c1);
    /* bar panels grow with the configs: a row of 30 pixels each */
    const int nn = c.n > 4 ? c.n : 4;
    const int h_bars = 180 + 30 * nn;
    const struct sizes z = {17, 15, 14, 13};
    static const struct {
        const char *name;
        int panels[2];
        int np;
        int w, h; /* a cell; h 0: as tall as the bars need */
    } FIGS[] = {
        {"throughput", {P_PREFILL, P_DECODE}, 2, 780, 0},
        {"quality", {P_COS_BITS, P_KLD_BITS}, 2, 780, 640},
        {"memory", {P_MEMORY, 0}, 1, 1100, 680},
        {"distortion", {P_KLD_BARS, P_COS_BARS}, 2, 780, 0},
        {"output", {P_OUTPUT, 0}, 1, 900, 0},
    };
    int rc = 1;
    names[0] = 0;
    for (size_t f = 0; f < sizeof FIGS / sizeof FIGS[0] && rc == 1; f++) {
        snprintf(path, sizeof path, "%s/%s-%s.png", dir, ms->stem, FIGS[f].name);
        const int d = figure(path, title, c1, c2, FIGS[f].panels, FIGS[f].np, 2, FIGS[f].w,
                             FIGS[f].h ? FIGS[f].h : h_bars, &z, &c);
        if (d < 0) rc = -1;
        if (d > 0) {
            const size_t l = strlen(names);
            snprintf(names + l, ncap - l, "%s%s", l ? "," : "", FIGS[f].name);
        }
    }
    static const int SHEET[8] = {P_PREFILL,  P_DECODE,   P_COS_BITS, P_KLD_BITS,
                                 P_KLD_BARS, P_COS_BARS, P_OUTPUT,   P_MEMORY};
    snprintf(path, sizeof path, "%s/%s-report.png", dir, ms->stem);
    if (rc == 1) {
        const int d = figure(path, title, c1, c2, SHEET, 8, 4, 760, h_bars > 660 ? h_bars : 660, &z,
                             &c);
        if (d < 0) rc = -1;
        if (d > 0) {
            const size_t l = strlen(names);
            snprintf(names + l, ncap - l, "%sreport", l ? "," : "");
        }
    }
    cols_free(&c);
    if (rc == 1 && g.oom) rc = 0;
    return rc;
}

#endif /* VQ_HAVE_PLPLOT */

/* ---- table.md ---------------------------------------------------------------------------- */

/* One number cell: counts (bytes, tokens, MB) as integers, everything else with 4 significant
 * digits (fmt_sig), "—" when not measured. */
static void md_num(FILE *f, double v, int count) {
    char buf[48];
    if (!isfinite(v)) fprintf(f, " — |");
    else if (count) fprintf(f, " %.0f |", v);
    else {
        fmt_sig(buf, sizeof buf, v, 4);
        fprintf(f, " %s |", buf);
    }
}

/* What config c stands for in the config grammar, modifiers included: a named configuration's
 * definition as the library's preset table gives it (vq_kv_preset_get: "kv4" -> its KIVI keys,
 * rotated values and modifiers), else its name (written in the grammar already, or a llama.cpp
 * row). */
static const char *md_definition(const struct vq_result_config *c) {
    if (c->engine[0] && strcmp(c->engine, "veloxquant")) return c->name;
    const int n = vq_kv_preset_count();
    for (int i = 0; i < n; i++) {
        struct vq_kv_preset_info pi;
        if (vq_kv_preset_get(i, &pi) == VQ_STATUS_OK && !strcmp(pi.name, c->name)) return pi.config;
    }
    return c->name;
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
        fprintf(f, "- created %s, git %s\n", r->created_utc, r->git_commit);
        fprintf(f,
                "- numbers: 4 significant digits; KV bytes, tokens and MB as integers; one run "
                "per config (no repeats recorded)\n\n");
        fprintf(f,
                "| config | K | V | bits/elem | KV bytes | key_x | fullKV_x | ppl | "
                "kld_mean | kld_median | kld_p99 | top1 | cosine_k | cosine_v | prefill tok/s | "
                "decode tok/s | "
                "tokens generated | fp16 prefix match | peak RSS MB | error |\n");
        fprintf(f,
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
                "---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int i = 0; i < r->n_results; i++) {
            const struct vq_result *e = &r->results[i];
            fputs("| ", f);
            md_text(f, e->config.name, 200);
            fputs(" | ", f);
            /* llama.cpp rows: its cache type names (q8_0), which carry their width */
            const int ll = !strcmp(e->config.engine, "llama.cpp");
            md_text(f, e->config.k_method, 200);
            if (!ll) fprintf(f, "-%g", e->config.k_bits);
            fputs(" | ", f);
            md_text(f, e->config.v_method, 200);
            if (!ll) fprintf(f, "-%g", e->config.v_bits);
            fputs(" |", f);
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
            /* counts: KV bytes, tokens generated, fp16 prefix match, peak RSS MB */
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) md_num(f, v[k], k == 1 || k >= 13);
            fputc(' ', f);
            if (e->error) md_text(f, e->error, 200);
            fputs(" |\n", f);
        }
        int any_opts = 0, any_prev = 0, any_def = 0;
        for (int i = 0; i < r->n_results; i++) {
            any_opts |= r->results[i].config.n_opts > 0;
            any_prev |= r->results[i].output_preview != NULL;
            any_def |= strcmp(md_definition(&r->results[i].config), r->results[i].config.name);
        }
        if (any_def) { /* the K and V columns leave out the modifiers: the named configs here */
            fprintf(f, "\nDefinitions (config grammar, modifiers included):\n\n");
            for (int i = 0; i < r->n_results; i++) {
                const struct vq_result_config *cf = &r->results[i].config;
                const char *d = md_definition(cf);
                if (!strcmp(d, cf->name)) continue;
                fputs("- ", f);
                md_text(f, cf->name, 200);
                fputs(": `", f);
                md_text(f, d, 200);
                fputs("`\n", f);
            }
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
        {"layout-json", required_argument, 0, 'L'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *dir = NULL, *layout = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 'L': layout = optarg; break;
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
    if (layout && vq_file_check_output(layout) != VQ_STATUS_OK) { /* refused before drawing */
        fprintf(stderr, "%s: --layout-json: %s\n", CMD, vq_file_error());
        return 1;
    }
#if VQ_HAVE_PLPLOT
    char *lay_buf = NULL;
    size_t lay_len = 0;
    if (layout && !(g.layout = open_memstream(&lay_buf, &lay_len))) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        return 1;
    }
    if (g.layout) fprintf(g.layout, "{\"schema\": \"veloxquant.report-layout.v1\", \"figures\": [");
#endif
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
        char names[128];
        const int dr = draw_model(s, dir, names, sizeof names);
        if (dr <= 0) {
            if (dr == 0) fprintf(stderr, "%s: out of memory\n", CMD);
            rc = 1;
            break;
        }
        printf("%s: %s/%s-{%s}.png (%d configs, %d failed)\n", CMD, dir, s->stem, names, s->n_ok,
               s->r.n_results - s->n_ok);
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
#if VQ_HAVE_PLPLOT
    if (g.layout) {
        fprintf(g.layout, "\n]}\n");
        int ok = fclose(g.layout) == 0;
        g.layout = NULL;
        if (rc == 0 && ok && vq_write_file_atomic(layout, lay_buf, lay_len) != VQ_STATUS_OK) ok = 0;
        if (rc == 0 && !ok) {
            fprintf(stderr, "%s: cannot write %s%s%s\n", CMD, layout,
                    vq_file_error()[0] ? ": " : "", vq_file_error());
            rc = 1;
        }
        free(lay_buf);
    }
    free(g.boxes);
    g.boxes = NULL;
    g.nb = g.cap = 0;
#endif
    for (int m = 0; m < n_models; m++) {
        vq_results_clear(&ms[m].r);
        free(ms[m].ok);
    }
    free(ms);
    for (int a = 0; a < n_in; a++) free(in[a]);
    free(in);
    return rc;
}
