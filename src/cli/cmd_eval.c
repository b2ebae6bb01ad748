/* cmd_eval.c — qtk eval: what each scheme costs and loses on a checkpoint, nothing written
 * but the optional chart. */
#include "cli.h"

#include "ops/eval.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk eval FILE --scheme SPEC [--scheme SPEC]... [--only REGEX] [--skip REGEX]\n"
    "                [--min-elements N] [--json] [--summary] [--plot CHART.svg] [--force] [--threads N]\n"
    "\n"
    "Quantizes every selected tensor of FILE under each scheme, dequantizes it, and reports per\n"
    "tensor and in total: bits per element (scales, global and table included), RMSE, max\n"
    "|error| and SQNR in dB (10 log10 of signal power over error power). Nothing is written.\n"
    "The reference is the tensor as stored (a quantized tensor: its dequantized values).\n"
    "Tensors are selected as 'qtk convert --scheme' selects them: float or quantized, rank >= 2,\n"
    "at least --min-elements elements (default 1024), filtered by --only/--skip (POSIX extended\n"
    "regular expressions, matched anywhere in the name). A scheme that does not fit a tensor's\n"
    "shape is reported for that tensor and left out of its totals.\n"
    "\n"
    "  --scheme SPEC     a spec string or preset (repeatable)\n"
    "  --json            print one JSON object instead of tables\n"
    "  --summary         print only the totals table\n"
    "  --plot FILE.svg   also write a chart of SQNR per tensor and scheme (SVG)\n"
    "  --force           replace the chart if it exists\n"
    "  --threads N       worker threads (default: all cores)\n";

static void metrics_row(FILE *f, const char *label, const qtk_eval_cell *c) {
    qtk_eval_metrics m;
    qtk_eval_cell_metrics(c, &m);
    if (!c->ok) {
        fprintf(f, "  %-36s  n/a: %s\n", label, c->err[0] ? c->err : "no tensor");
        return;
    }
    fprintf(f, "  %-36s %8.3f %12.4e %12.4e %9.2f\n", label, m.bits_per_el, m.rmse, m.max_abs, m.sqnr_db);
}

static void print_header(FILE *f, const char *first) {
    fprintf(f, "  %-36s %8s %12s %12s %9s\n", first, "bits/el", "RMSE", "max|err|", "SQNR dB");
}

static void print_totals(FILE *f, const qtk__eval_result *r) {
    print_header(f, "total, per scheme");
    for (size_t j = 0; j < r->n_schemes; j++) {
        qtk_eval_cell tot;
        size_t failed;
        qtk_eval_total(r, j, &tot, &failed);
        metrics_row(f, r->specs[j], &tot);
        if (failed) fprintf(f, "  %-36s (%zu tensor%s left out: the scheme does not fit them)\n", "", failed, failed > 1 ? "s" : "");
    }
}

void cli_eval_print(FILE *f, const char *path, const qtk__eval_result *r, bool summary) {
    size_t el = 0;
    for (size_t i = 0; i < r->n_rows; i++) el += r->rows[i].numel;
    fprintf(f, "qtk eval: %s: %zu tensors, %zu elements, %zu scheme%s\n\n", path, r->n_rows, el, r->n_schemes,
            r->n_schemes > 1 ? "s" : "");
    if (!summary) {
        char sb[128];
        for (size_t i = 0; i < r->n_rows; i++) {
            fprintf(f, "%s [%s] %s\n", r->rows[i].name, qtk_shape_format(r->rows[i].shape, r->rows[i].rank, sb, sizeof sb),
                    r->rows[i].stored);
            for (size_t j = 0; j < r->n_schemes; j++) metrics_row(f, r->specs[j], &r->cells[i * r->n_schemes + j]);
        }
        fputc('\n', f);
    }
    print_totals(f, r);
}

static void json_cell(FILE *f, const char *spec, const qtk_eval_cell *c, size_t failed, bool total) {
    qtk_eval_metrics m;
    qtk_eval_cell_metrics(c, &m);
    fputs("{\"scheme\": ", f);
    cli_json_str(f, spec);
    fprintf(f, ", \"ok\": %s", c->ok ? "true" : "false");
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
    } else if (!total) {
        fputs(", \"error\": ", f);
        cli_json_str(f, c->err);
    }
    fputc('}', f);
}

static void print_json(FILE *f, const char *path, const qtk__eval_result *r) {
    fputs("{\"file\": ", f);
    cli_json_str(f, path);
    fputs(", \"schemes\": [", f);
    for (size_t j = 0; j < r->n_schemes; j++) {
        if (j) fputs(", ", f);
        cli_json_str(f, r->specs[j]);
    }
    fputs("],\n \"tensors\": [", f);
    for (size_t i = 0; i < r->n_rows; i++) {
        const qtk_eval_row *w = &r->rows[i];
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        cli_json_str(f, w->name);
        fputs(", \"stored\": ", f);
        cli_json_str(f, w->stored);
        fputs(", \"shape\": [", f);
        for (int k = 0; k < w->rank; k++) fprintf(f, k ? ", %zu" : "%zu", w->shape[k]);
        fprintf(f, "], \"numel\": %zu, \"results\": [", w->numel);
        for (size_t j = 0; j < r->n_schemes; j++) {
            if (j) fputs(", ", f);
            json_cell(f, r->specs[j], &r->cells[i * r->n_schemes + j], 0, false);
        }
        fputs("]}", f);
    }
    fputs("],\n \"totals\": [", f);
    for (size_t j = 0; j < r->n_schemes; j++) {
        qtk_eval_cell tot;
        size_t failed;
        qtk_eval_total(r, j, &tot, &failed);
        fputs(j ? ",\n  " : "\n  ", f);
        json_cell(f, r->specs[j], &tot, failed, true);
    }
    fputs("]}\n", f);
}

int cmd_eval(int argc, char **argv) {
    const char *cmd = "eval";
    const char *only = NULL, *skip = NULL, *min_s = NULL, *threads_s = NULL, *plot = NULL;
    const char **specs = NULL;
    int n_specs = 0;
    bool json = false, summary = false, force = false;
    const cli_opt opts[] = {
        {"scheme", true, NULL, NULL, &specs, &n_specs}, {"only", true, &only, NULL, NULL, NULL},
        {"skip", true, &skip, NULL, NULL, NULL},        {"min-elements", true, &min_s, NULL, NULL, NULL},
        {"json", false, NULL, &json, NULL, NULL},       {"summary", false, NULL, &summary, NULL, NULL},
        {"plot", true, &plot, NULL, NULL, NULL},        {"force", false, NULL, &force, NULL, NULL},
        {"threads", true, &threads_s, NULL, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &npos, &help);
    if (rc || help) {
        free(specs);
        if (help) fputs(usage, stdout);
        return rc;
    }
    qtk__select sel;
    qtk__select_init(&sel);
    qtk_scheme *schemes = calloc(n_specs ? (size_t)n_specs : 1, sizeof *schemes);
    long threads = 0, min_el = QTK__SELECT_MIN_NUMEL;
    if (!schemes) rc = cli_fail(cmd, QTK_OK, "out of memory");
    else if (npos != 1) rc = cli_usage_error(cmd, "expected one FILE");
    else if (n_specs == 0) rc = cli_usage_error(cmd, "give at least one --scheme");
    else if (threads_s && !cli_parse_int(threads_s, 1, 4096, &threads))
        rc = cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
    else if (min_s && !cli_parse_int(min_s, 0, 0x7fffffffL, &min_el))
        rc = cli_usage_error(cmd, "--min-elements '%s' is not a count", min_s);
    for (int j = 0; !rc && j < n_specs; j++)
        if (qtk_scheme_parse(specs[j], &schemes[j])) rc = cli_usage_error(cmd, "--scheme: %s", qtk_last_error());
    if (!rc && only && qtk__select_only(&sel, only)) rc = cli_usage_error(cmd, "%s", qtk_last_error());
    if (!rc && skip && qtk__select_skip(&sel, skip)) rc = cli_usage_error(cmd, "%s", qtk_last_error());
    if (!rc && plot && !force) {
        FILE *exists = fopen(plot, "rb");
        if (exists) {
            fclose(exists);
            rc = cli_fail(cmd, QTK_OK, "'%s' exists; not overwriting it (use --force)", plot);
        }
    }
    if (rc) {
        qtk__select_free(&sel);
        free(schemes);
        free(specs);
        return rc;
    }
    sel.min_numel = (size_t)min_el;
    if (threads) qtk_set_threads((int)threads);
    cli_progress bar;
    cli_progress_init(&bar, "eval");
    qtk__eval_result r;
    qtk_status st = qtk__eval_file(pos[0], &sel, schemes, specs, (size_t)n_specs, (int)threads, cli_progress_update, &bar, &r);
    cli_progress_end(&bar);
    if (st) {
        rc = cli_fail(cmd, st, "'%s'", pos[0]);
    } else {
        if (json) print_json(stdout, pos[0], &r);
        else cli_eval_print(stdout, pos[0], &r, summary);
        if (plot) {
            st = cli_eval_svg(&r, plot, force);
            if (st) rc = cli_fail(cmd, st, "cannot write the chart");
            else if (!json) printf("\nchart: %s\n", plot);
        }
        qtk__eval_result_free(&r);
    }
    qtk__select_free(&sel);
    free(schemes);
    free(specs);
    return rc;
}
