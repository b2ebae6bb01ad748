/* plot_svg.c — the eval chart: SQNR (dB) per tensor, one line per column (scheme and
 * calibration), written by hand as a self-contained SVG (no dependency, viewable in any
 * browser). */
#include "cli.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) QTK_FORMAT_ATTR(2, 3);
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 4096) + (size_t)n + 1;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
}

/* Text content with XML's special characters escaped. */
static void put_text(sbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': put(b, "&amp;"); break;
        case '<': put(b, "&lt;"); break;
        case '>': put(b, "&gt;"); break;
        case '"': put(b, "&quot;"); break;
        default: put(b, "%c", (unsigned char)*s < 0x20 ? '?' : *s); break; /* XML 1.0 has no control characters */
        }
    }
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_COLORS (sizeof palette / sizeof palette[0])

qtk_status cli_eval_svg(const qtk_eval_report *r, const char *path, int force) {
    size_t n_rows = qtk_eval_rows(r), n_cols = qtk_eval_columns(r);
    const double top = 48, plot_h = 320, legend_w = 330;
    double step = n_rows > 1 ? (n_rows > 40 ? 14.0 : 28.0) : 28.0;
    /* room for the tensor names, written at -60 degrees below the axis (~5.6 px a character
     * at 10 px): they reach down by sin 60 and left by cos 60 of their length */
    size_t longest = 0;
    for (size_t i = 0; i < n_rows; i++)
        if (strlen(qtk_eval_row_at(r, i)->name) > longest) longest = strlen(qtk_eval_row_at(r, i)->name);
    double label = 5.6 * (double)(longest < 80 ? longest : 80);
    double bottom = 0.87 * label + 30, left = 0.5 * label - step + 12;
    if (left < 64) left = 64;
    double plot_w = step * (double)(n_rows > 1 ? n_rows - 1 : 1) + 2 * step;
    if (plot_w < 360) plot_w = 360;
    double width = left + plot_w + legend_w, height = top + plot_h + bottom;

    /* the y range: 0 dB to the largest finite SQNR, rounded up to 10 dB */
    double ymax = 10.0;
    for (size_t k = 0; k < n_rows * n_cols; k++) {
        qtk_eval_metrics m;
        const qtk_eval_cell *c = qtk_eval_cell_at(r, k / n_cols, k % n_cols);
        qtk_eval_metrics_of(c, &m);
        if (c->ok && isfinite(m.sqnr_db) && m.sqnr_db > ymax) ymax = m.sqnr_db;
    }
    ymax = ceil(ymax / 10.0) * 10.0;
    double ymin = 0.0;
    for (size_t k = 0; k < n_rows * n_cols; k++) {
        qtk_eval_metrics m;
        const qtk_eval_cell *c = qtk_eval_cell_at(r, k / n_cols, k % n_cols);
        qtk_eval_metrics_of(c, &m);
        if (c->ok && m.sqnr_db < ymin) ymin = floor(m.sqnr_db / 10.0) * 10.0;
    }
#define XPOS(i) (left + step + (double)(i) * step)
#define YPOS(v) (top + plot_h - ((isfinite(v) ? (v) : ymax) - ymin) / (ymax - ymin) * plot_h)

    sbuf b = {0};
    put(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    put(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n", width, height, width, height);
    put(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    put(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"15\" font-weight=\"bold\">SQNR per tensor (dB, higher is better)</text>\n", left);
    for (double v = ymin; v <= ymax + 1e-9; v += 10.0) {
        put(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, YPOS(v), left + plot_w, YPOS(v));
        put(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", left - 6, YPOS(v) + 4, v);
    }
    put(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", left, top, plot_w, plot_h);
    put(&b, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">SQNR (dB)</text>\n", top + plot_h / 2);
    /* tensor names under the axis; every k-th when there are many */
    size_t every = n_rows > 120 ? (n_rows + 59) / 60 : 1;
    for (size_t i = 0; i < n_rows; i += every) {
        put(&b, "<text transform=\"translate(%.1f %.1f) rotate(-60)\" text-anchor=\"end\" font-size=\"10\">", XPOS(i) + 3,
            top + plot_h + 8);
        put_text(&b, qtk_eval_row_at(r, i)->name);
        put(&b, "</text>\n");
    }
    for (size_t j = 0; j < n_cols; j++) {
        const char *col = palette[j % N_COLORS];
        char name[300];
        cli_column_label(qtk_eval_column_at(r, j), name, sizeof name);
        /* a line through consecutive tensors the scheme fits, a dot with a tooltip on each */
        bool open = false;
        for (size_t i = 0; i < n_rows; i++) {
            qtk_eval_metrics m;
            const qtk_eval_cell *c = qtk_eval_cell_at(r, i, j);
            qtk_eval_metrics_of(c, &m);
            if (!c->ok) {
                if (open) put(&b, "\"/>\n");
                open = false;
                continue;
            }
            if (!open) put(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
            open = true;
            put(&b, "%.1f,%.1f ", XPOS(i), YPOS(m.sqnr_db));
        }
        if (open) put(&b, "\"/>\n");
        for (size_t i = 0; i < n_rows; i++) {
            qtk_eval_metrics m;
            const qtk_eval_cell *c = qtk_eval_cell_at(r, i, j);
            if (!c->ok) continue;
            qtk_eval_metrics_of(c, &m);
            put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", XPOS(i), YPOS(m.sqnr_db), col);
            put_text(&b, qtk_eval_row_at(r, i)->name);
            put(&b, " — ");
            put_text(&b, name);
            put(&b, ": %.2f dB, %.3f bits/element</title></circle>\n", m.sqnr_db, m.bits_per_el);
        }
        /* legend: the scheme and its totals */
        qtk_eval_cell tot;
        qtk_eval_metrics tm;
        qtk_eval_total(r, j, &tot, NULL);
        qtk_eval_metrics_of(&tot, &tm);
        double ly = top + 10 + 20.0 * (double)j, lx = left + plot_w + 16;
        put(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", lx, ly - 4, col);
        put(&b, "<text x=\"%.1f\" y=\"%.1f\">", lx + 20, ly);
        put_text(&b, name);
        if (tot.ok) put(&b, " (%.2f dB, %.2f b/el)</text>\n", tm.sqnr_db, tm.bits_per_el);
        else put(&b, " (no tensor)</text>\n");
    }
    put(&b, "</svg>\n");
#undef XPOS
#undef YPOS
    qtk_status st = b.oom ? qtk_set_error(QTK_E_NOMEM, "out of memory building the chart")
                          : qtk_file_write_atomic(path, b.p, b.len, force);
    free(b.p);
    return st;
}
