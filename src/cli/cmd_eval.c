/* cmd_eval.c — qtk eval: what each scheme costs and loses on a checkpoint, nothing written
 * but the optional chart. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk eval FILE --scheme SPEC [--scheme SPEC]... [--calibration C]... [--only REGEX] [--skip REGEX]\n"
    "                [--min-elements N] [--layout L] [--json] [--summary] [--plot CHART.svg] [--force]\n"
    "                [--imatrix FILE] [--threads N]\n"
    "\n"
    "Quantizes every selected tensor of FILE under each scheme (and each calibration asked for),\n"
    "dequantizes it, and reports per\n"
    "tensor and in total: bits per element (scales, global and table included), RMSE, max\n"
    "|error| and SQNR in dB (10 log10 of signal power over error power). Nothing is written.\n"
    "The reference is the tensor as stored (a quantized tensor: its dequantized values).\n"
    "Tensors are selected as 'qtk convert --scheme' selects them: float or quantized, rank >= 2,\n"
    "at least --min-elements elements (default 1024), filtered by --only/--skip (POSIX extended\n"
    "regular expressions, matched anywhere in the name). A scheme that does not fit a tensor's\n"
    "shape is reported for that tensor and left out of its totals.\n"
    "\n"
    "  --scheme SPEC     a spec string or preset (repeatable)\n"
    "  --calibration C   how scales are chosen: minmax (default), absmean or mse (per group,\n"
    "                    the stored scale of least squared error); repeatable, each scheme\n"
    "                    is then measured under each\n"
    "  --imatrix FILE    llama.cpp importance matrix (GGUF or legacy .dat): mse columns weigh\n"
    "                    each column's error by it, as convert does, and every tensor it has an\n"
    "                    entry for also gets the weighted SQNR (wSQNR dB); the others are named\n"
    "                    on stderr (docs/imatrix.md)\n"
    "  --layout L        read FILE in layout L instead of detecting it (see qtk inspect)\n"
    "  --json            print one JSON object instead of tables\n"
    "  --summary         print only the totals table\n"
    "  --plot FILE.svg   also write a chart of SQNR per tensor and scheme (SVG)\n"
    "  --force           replace the chart if it exists\n"
    "  --threads N       worker threads (default: all cores)\n";

static void metrics_row(FILE *f, const char *label, const qtk_eval_cell *c, bool wcol) {
    qtk_eval_metrics m;
    qtk_eval_metrics_of(c, &m);
    if (!c->ok) {
        fprintf(f, "  %-36s  n/a: %s\n", label, c->err[0] ? c->err : "no tensor");
        return;
    }
    fprintf(f, "  %-36s %8.3f %12.4e %12.4e %9.2f", label, m.bits_per_el, m.rmse, m.max_abs, m.sqnr_db);
    if (wcol && c->weighted) fprintf(f, " %10.2f", m.wsqnr_db);
    else if (wcol) fprintf(f, " %10s", "-");
    fputc('\n', f);
}

static void print_header(FILE *f, const char *first, bool wcol) {
    fprintf(f, "  %-36s %8s %12s %12s %9s", first, "bits/el", "RMSE", "max|err|", "SQNR dB");
    if (wcol) fprintf(f, " %10s", "wSQNR dB");
    fputc('\n', f);
}

/* true if any tensor was weighted by an importance matrix: the wSQNR column is shown */
static bool any_weighted(const qtk_eval_report *r) {
    for (size_t i = 0; i < qtk_eval_rows(r); i++)
        if (qtk_eval_row_at(r, i)->weighted) return true;
    return false;
}

static void print_totals(FILE *f, const qtk_eval_report *r) {
    bool wcol = any_weighted(r);
    print_header(f, "total, per scheme", wcol);
    for (size_t j = 0; j < qtk_eval_columns(r); j++) {
        qtk_eval_cell tot;
        size_t failed;
        char label[300];
        qtk_eval_total(r, j, &tot, &failed);
        metrics_row(f, cli_column_label(qtk_eval_column_at(r, j), label, sizeof label), &tot, wcol);
        if (failed) fprintf(f, "  %-36s (%zu tensor%s left out: the scheme does not fit them)\n", "", failed, failed > 1 ? "s" : "");
    }
}

void cli_eval_print(FILE *f, const char *path, const qtk_eval_report *r, bool summary) {
    size_t el = 0, rows = qtk_eval_rows(r), cols = qtk_eval_columns(r);
    for (size_t i = 0; i < rows; i++) el += qtk_eval_row_at(r, i)->numel;
    fprintf(f, "qtk eval: %s: %zu tensors, %zu elements, %zu scheme%s\n\n", path, rows, el, cols, cols > 1 ? "s" : "");
    bool wcol = any_weighted(r);
    if (wcol) fprintf(f, "wSQNR: the error weighted by the importance matrix (its tensors only)\n\n");
    if (!summary) {
        char sb[128], label[300];
        for (size_t i = 0; i < rows; i++) {
            const qtk_eval_row *w = qtk_eval_row_at(r, i);
            fprintf(f, "%s [%s] %s\n", w->name, qtk_shape_format(w->shape, w->rank, sb, sizeof sb), w->stored);
            for (size_t j = 0; j < cols; j++)
                metrics_row(f, cli_column_label(qtk_eval_column_at(r, j), label, sizeof label), qtk_eval_cell_at(r, i, j),
                            wcol);
        }
        fputc('\n', f);
    }
    print_totals(f, r);
}

static void json_cell(FILE *f, const qtk_eval_column *col, const qtk_eval_cell *c, size_t failed, bool total) {
    qtk_eval_metrics m;
    qtk_eval_metrics_of(c, &m);
    fputs("{\"scheme\": ", f);
    cli_json_str(f, col->spec);
    fprintf(f, ", \"calibration\": \"%s\", \"ok\": %s", qtk_calibration_name(col->calibration), c->ok ? "true" : "false");
    if (total) fprintf(f, ", \"failed_tensors\": %zu, \"numel\": %zu", failed, c->numel);
    if (c->ok) {
        fprintf(f, ", \"bytes\": %zu, \"bits_per_element\": ", c->bytes);
        cli_json_num(f, m.bits_per_el);
        fputs(", \"rmse\": ", f);
        cli_json_num(f, m.rmse);
        fputs(", \"max_abs_error\": ", f);
        cli_json_num(f, m.max_abs);
        fputs(", \"sqnr_db\": ", f);
        cli_json_num(f, m.sqnr_db);
        if (c->weighted) {
            fputs(", \"weighted_sqnr_db\": ", f);
            cli_json_num(f, m.wsqnr_db);
        }
    } else if (!total) {
        fputs(", \"error\": ", f);
        cli_json_str(f, c->err);
    }
    fputc('}', f);
}

static void print_json(FILE *f, const char *path, const qtk_eval_report *r) {
    size_t rows = qtk_eval_rows(r), cols = qtk_eval_columns(r);
    fputs("{\"file\": ", f);
    cli_json_str(f, path);
    fputs(", \"schemes\": [", f);
    for (size_t j = 0; j < cols; j++) {
        if (j) fputs(", ", f);
        cli_json_str(f, qtk_eval_column_at(r, j)->spec);
    }
    fputs("],\n \"tensors\": [", f);
    for (size_t i = 0; i < rows; i++) {
        const qtk_eval_row *w = qtk_eval_row_at(r, i);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        cli_json_str(f, w->name);
        fputs(", \"stored\": ", f);
        cli_json_str(f, w->stored);
        fputs(", \"shape\": [", f);
        for (int k = 0; k < w->rank; k++) fprintf(f, k ? ", %zu" : "%zu", w->shape[k]);
        fprintf(f, "], \"numel\": %zu, \"weighted\": %s, \"results\": [", w->numel, w->weighted ? "true" : "false");
        for (size_t j = 0; j < cols; j++) {
            if (j) fputs(", ", f);
            json_cell(f, qtk_eval_column_at(r, j), qtk_eval_cell_at(r, i, j), 0, false);
        }
        fputs("]}", f);
    }
    fputs("],\n \"totals\": [", f);
    for (size_t j = 0; j < cols; j++) {
        qtk_eval_cell tot;
        size_t failed;
        qtk_eval_total(r, j, &tot, &failed);
        fputs(j ? ",\n  " : "\n  ", f);
        json_cell(f, qtk_eval_column_at(r, j), &tot, failed, true);
    }
    fputs("]}\n", f);
}

int cmd_eval(int argc, char **argv) {
    const char *cmd = "eval";
    const char *only = NULL, *skip = NULL, *min_s = NULL, *threads_s = NULL, *plot = NULL, *layout_s = NULL,
               *imatrix_s = NULL;
    const char **specs = NULL, **cals = NULL;
    int n_specs = 0, n_cals = 0;
    bool json = false, summary = false, force = false;
    const cli_opt opts[] = {
        {"scheme", true, NULL, NULL, &specs, &n_specs}, {"only", true, &only, NULL, NULL, NULL},
        {"skip", true, &skip, NULL, NULL, NULL},        {"min-elements", true, &min_s, NULL, NULL, NULL},
        {"json", false, NULL, &json, NULL, NULL},       {"summary", false, NULL, &summary, NULL, NULL},
        {"plot", true, &plot, NULL, NULL, NULL},        {"force", false, NULL, &force, NULL, NULL},
        {"threads", true, &threads_s, NULL, NULL, NULL}, {"calibration", true, NULL, NULL, &cals, &n_cals},
        {"layout", true, &layout_s, NULL, NULL, NULL},  {"imatrix", true, &imatrix_s, NULL, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &npos, &help);
    if (rc || help) {
        free(specs);
        free(cals);
        if (help) fputs(usage, stdout);
        return rc;
    }
    qtk_calibration *cal = calloc(n_cals ? (size_t)n_cals : 1, sizeof *cal);
    long threads = 0, min_el = QTK_MIN_ELEMENTS_DEFAULT;
    qtk_eval_options o = {.schemes = specs, .n_schemes = (size_t)n_specs, .calibrations = cal,
                          .n_calibrations = (size_t)n_cals, .only = only, .skip = skip};
    if (!cal) rc = cli_fail(cmd, QTK_E_NOMEM, "out of memory");
    else if (npos != 1) rc = cli_usage_error(cmd, "expected one FILE");
    else if (n_specs == 0) rc = cli_usage_error(cmd, "give at least one --scheme");
    else if (threads_s && !cli_parse_int(threads_s, 1, 4096, &threads))
        rc = cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
    else if (min_s && !cli_parse_int(min_s, 0, 0x7fffffffL, &min_el))
        rc = cli_usage_error(cmd, "--min-elements '%s' is not a count", min_s);
    for (int j = 0; !rc && j < n_specs; j++) {
        qtk_scheme s;
        if (qtk_scheme_parse(specs[j], &s)) rc = cli_usage_error(cmd, "--scheme: %s", qtk_last_error());
    }
    for (int j = 0; !rc && j < n_cals; j++)
        if (qtk_calibration_parse(cals[j], &cal[j])) rc = cli_usage_error(cmd, "--calibration: %s", qtk_last_error());
    if (!rc && layout_s && cli_parse_layout(cmd, layout_s, true, &o.input_layout)) rc = CLI_USAGE;
    /* the selection's regexes, as convert checks them */
    qtk_convert_options check = {.only = only, .skip = skip};
    if (!rc && qtk_convert_check(&check)) rc = cli_usage_error(cmd, "%s", qtk_last_error());
    if (!rc && plot && cli_check_target(plot, force)) rc = cli_fail(cmd, QTK_E_IO, "cannot write the chart");
    if (rc) {
        free(cal);
        free(cals);
        free(specs);
        return rc;
    }
    qtk_imatrix *im = NULL;
    if (imatrix_s) {
        qtk_status ist = qtk_imatrix_open(imatrix_s, &im);
        if (ist) {
            free(cal);
            free(cals);
            free(specs);
            return cli_fail(cmd, ist, "--imatrix");
        }
        o.imatrix = im;
    }
    o.min_elements = min_el ? (size_t)min_el : 1; /* 0 on the command line: every size */
    o.threads = (int)threads;
    if (threads) qtk_set_threads((int)threads);
    cli_progress bar;
    cli_progress_init(&bar, "eval");
    o.progress = cli_progress_update;
    o.ctx = &bar;
    o.cancel = cli_cancel_flag();
    qtk_eval_report *r = NULL;
    qtk_status st = qtk_ckpt_eval(pos[0], &o, &r);
    cli_progress_end(&bar);
    if (st) {
        rc = cli_fail(cmd, st, "'%s'", pos[0]);
    } else {
        if (im) { /* the tensors the importance matrix did not cover */
            size_t n = 0, rows = qtk_eval_rows(r);
            for (size_t i = 0; i < rows; i++) n += !qtk_eval_row_at(r, i)->weighted;
            for (size_t i = 0, shown = 0; i < rows && shown < 8; i++)
                if (!qtk_eval_row_at(r, i)->weighted)
                    fprintf(stderr, "qtk eval: warning: '%s': no importance-matrix entry (unweighted)\n", qtk_eval_row_at(r, i)->name), shown++;
            if (n > 8) fprintf(stderr, "qtk eval: warning: ... and %zu more tensors without an entry\n", n - 8);
        }
        if (json) print_json(stdout, pos[0], r);
        else cli_eval_print(stdout, pos[0], r, summary);
        if (plot) {
            st = cli_eval_svg(r, plot, force);
            if (st) rc = cli_fail(cmd, st, "cannot write the chart");
            else if (!json) printf("\nchart: %s\n", plot);
        }
        qtk_eval_report_free(r);
    }
    qtk_imatrix_close(im);
    free(cal);
    free(cals);
    free(specs);
    return rc;
}
