/* eval.h — what each scheme would cost and lose on a checkpoint's tensors, without writing
 * anything: every selected tensor (qtk__select_eligible) is quantized under each scheme and
 * dequantized, against its values as stored (a quantized tensor: its dequantized values). */
#ifndef QTK_TOOLS_EVAL_H
#define QTK_TOOLS_EVAL_H

#include "ops/convert.h"

typedef struct qtk_eval_cell {
    bool ok;            /* false: the scheme does not fit this tensor (err says why) */
    size_t bytes;       /* the quantized tensor's bytes, scales included */
    size_t numel;
    double sum_sq_err;  /* sum of (x - x')^2 */
    double sum_sq_sig;  /* sum of x^2 */
    double max_abs;     /* max |x - x'| */
    char err[160];
} qtk_eval_cell;

typedef struct qtk_eval_row {
    const char *name;
    const char *stored;  /* "BF16", or the stored scheme's spec */
    int rank;
    const size_t *shape;
    size_t numel;
} qtk_eval_row;

typedef struct qtk__eval_result {
    size_t n_rows, n_schemes;
    qtk_eval_row *rows;
    qtk_eval_cell *cells;  /* n_rows x n_schemes, row-major */
    const char **specs;    /* canonical spec per scheme (preset names kept as given) */
    qtk__arena arena;
} qtk__eval_result;

typedef struct qtk_eval_metrics {
    double bits_per_el, rmse, max_abs, sqnr_db; /* sqnr: +inf when exact */
} qtk_eval_metrics;

/* schemes[i] with names[i] as the user wrote them (for display). */
qtk_status qtk__eval_file(const char *path, const qtk__select *sel, const qtk_scheme *schemes, const char *const *names,
                         size_t n_schemes, int threads, qtk_progress_fn progress, void *ctx, qtk__eval_result *out);
void qtk__eval_result_free(qtk__eval_result *r);

void qtk_eval_cell_metrics(const qtk_eval_cell *c, qtk_eval_metrics *m);
/* Scheme j over every row where it fits (cell.ok), as one cell. *n_failed gets the rest. */
void qtk_eval_total(const qtk__eval_result *r, size_t j, qtk_eval_cell *total, size_t *n_failed);

/* A chart of SQNR per tensor and scheme, as a self-contained SVG file. */
qtk_status cli_eval_svg(const qtk__eval_result *r, const char *path, int force);

#endif
