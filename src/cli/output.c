/* output.c — what several commands print: a progress bar, JSON strings, byte counts. */
#include "cli.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cli_now(void) { return now_s(); }

void cli_progress_init(cli_progress *p, const char *what) {
    p->on = isatty(STDERR_FILENO) == 1;
    p->what = what;
    p->t0 = now_s();
    p->last = 0.0;
    p->drawn = false;
}

const char *cli_bytes(double b, char *buf, size_t cap) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) b /= 1024.0, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return buf;
}

int cli_progress_update(void *ctx, const qtk_progress *pi) {
    cli_progress *p = ctx;
    if (!p || !p->on) return 0;
    double t = now_s();
    if (pi->done < pi->total && t - p->last < 0.1) return 0; /* at most ten redraws a second */
    p->last = t;
    double el = t - p->t0, frac = pi->bytes_total ? (double)pi->bytes_done / (double)pi->bytes_total
                                                  : (pi->total ? (double)pi->done / (double)pi->total : 1.0);
    double rate = el > 0 ? (double)pi->bytes_done / el : 0.0;
    double eta = frac > 0 && frac < 1 ? el * (1.0 - frac) / frac : 0.0;
    char bar[31], a[32], b[32], r[32];
    int fill = (int)(frac * 30.0 + 0.5);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r%s [%s] %zu/%zu tensors  %s/%s  %s/s  ETA %d:%02d\033[K", p->what, bar, pi->done, pi->total,
            cli_bytes((double)pi->bytes_done, a, sizeof a), cli_bytes((double)pi->bytes_total, b, sizeof b),
            cli_bytes(rate, r, sizeof r), (int)(eta / 60), (int)fmod(eta, 60.0));
    p->drawn = true;
    return 0;
}

const char *cli_column_label(const qtk_eval_column *c, char *buf, size_t cap) {
    if (c->calibration == QTK_CALIB_MINMAX) snprintf(buf, cap, "%s", c->spec);
    else snprintf(buf, cap, "%s [%s]", c->spec, qtk_calibration_name(c->calibration));
    return buf;
}

void cli_progress_end(cli_progress *p) {
    if (p->on && p->drawn) fputs("\r\033[K", stderr);
    p->drawn = false;
}

void cli_notices_print(FILE *f, const char *prefix, const char *const *tensor, const char *const *text, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(text[j], text[i]) == 0;
        if (seen) continue;
        size_t count = 0, shown = 0;
        for (size_t j = i; j < n; j++) count += strcmp(text[j], text[i]) == 0;
        fputs(prefix, f);
        for (size_t j = i; j < n && shown < 3; j++)
            if (strcmp(text[j], text[i]) == 0 && tensor[j]) fprintf(f, "%s'%s'", shown++ ? ", " : "", tensor[j]);
        if (count > shown && shown) fprintf(f, " and %zu more tensor%s", count - shown, count - shown == 1 ? "" : "s");
        fprintf(f, "%s%s\n", shown ? ": " : "", text[i]);
    }
}

void cli_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void cli_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.10g", v);
    else fputs("null", f); /* JSON has no infinity: an exact result (SQNR +inf) is null */
}
