/* cli.h — shared pieces of the qtk command-line tool. Each command lives in its own file
 * and calls only the public library API (qtk.h, qtk_matmul.h, qtk_ckpt.h) and these. */
#ifndef QTK_CLI_H
#define QTK_CLI_H

#include "qtk.h"
#include "qtk_ckpt.h"

#include "files.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 failure while working, 2 bad usage. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

typedef struct cli_opt {
    const char *name;  /* long name without dashes, e.g. "scheme" */
    bool has_value;
    const char **value; /* where a value goes (has_value) */
    bool *flag;         /* where a flag goes (!has_value) */
    const char ***multi; /* repeatable: array of values (optional, with n_multi) */
    int *n_multi;
} cli_opt;

/* Parses argv[1..] (argv[0] is the command name). Positional arguments go to pos (at most
 * max_pos). Returns CLI_OK, or CLI_USAGE after printing the problem; sets *help when
 * --help or -h is present. */
int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int n_opts, const char **pos,
              int max_pos, int *n_pos, bool *help);

/* Prints "qtk CMD: message" and the library's last error when st != QTK_OK. */
int cli_fail(const char *cmd, qtk_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* "D0xD1x..." or "scalar" */
bool cli_parse_shape(const char *s, size_t *shape, int *rank);
bool cli_parse_int(const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *s, float *out);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct cli_progress {
    bool on, drawn;
    const char *what;
    double t0, last;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *what);
int cli_progress_update(void *ctx, const qtk_progress *pi); /* a qtk_progress_fn: draws, never cancels */
void cli_progress_end(cli_progress *p);
double cli_now(void);
/* "1.5 MiB" */
const char *cli_bytes(double b, char *buf, size_t cap);
/* JSON output: a quoted, escaped string; a number (null when not finite). */
void cli_json_str(FILE *f, const char *s);
void cli_json_num(FILE *f, double v);

/* Prints a checkpoint's listing (qtk inspect), as text or JSON. */
int cli_inspect_print(FILE *f, const char *path, bool json);
/* The same, read in a layout (NULL: detect; see qtk_hub_layout_parse). */
int cli_inspect_print_as(FILE *f, const char *path, bool json, const char *layout);

/* Prints notices (tensor may be NULL) grouped by text: one line per distinct remark, naming
 * the tensors it applies to (the first few, then a count). Each line starts with prefix. */
void cli_notices_print(FILE *f, const char *prefix, const char *const *tensor, const char *const *text, size_t n);

/* Prints eval results as tables (qtk eval); summary: the totals only. */
void cli_eval_print(FILE *f, const char *path, const qtk_eval_report *r, bool summary);
/* A chart of SQNR per tensor and column, as a self-contained SVG file (plot_svg.c). */
qtk_status cli_eval_svg(const qtk_eval_report *r, const char *path, int force);
/* An eval column's name: its spec, with the calibration when it is not minmax. Returns buf. */
const char *cli_column_label(const qtk_eval_column *c, char *buf, size_t cap);

/* --layout L: a readable layout (for_reading) or a writable one; prints the usage error. */
int cli_parse_layout(const char *cmd, const char *s, bool for_reading, qtk_hub_layout *out);

/* Signals. SIGINT, SIGTERM and SIGHUP remove every temporary output at once; a command that
 * called cli_cancel_flag then stops at the next tensor (the flag goes to the library's
 * options), others die at once. cli_signals_finish re-raises a caught signal after the
 * command returned, so the exit status tells it. */
void cli_signals_install(void);
const volatile sig_atomic_t *cli_cancel_flag(void);
void cli_signals_finish(void);

/* Commands */
int cmd_quantize(int argc, char **argv);
int cmd_dequantize(int argc, char **argv);
int cmd_scheme(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_matmul(int argc, char **argv);
/* The matmul benchmark (bench_matmul.c), to be run as 'qtk bench --matmul'. */
int cli_bench_matmul(int argc, char **argv);

#endif
