/* cmd_matmul.c — qtk matmul: y = x · Wᵀ (+ bias) with W quantized under a scheme. */
#include "cli.h"

#include "npy.h"
#include "qtk_matmul.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk matmul --scheme SPEC [--layout nk|kn] [--precision exact|fast] [--bias B.npy]\n"
    "                  [--calibration minmax|absmean|mse] [--threads N] [--force] W.npy X.npy Y.npy\n"
    "       qtk matmul --scheme SPEC --weights-bin W.bin --shape D0xD1 [--layout nk|kn] [...] X.npy Y.npy\n"
    "\n"
    "Multiplies activations by a quantized weight matrix: Y = X · Wᵀ + B.\n"
    "\n"
    "  W.npy               f32 weights, quantized under SPEC before the product:\n"
    "                      [N, K] with --layout nk (the default), [K, N] with --layout kn\n"
    "  --weights-bin W.bin instead of W.npy: weights already quantized under SPEC, in the bytes\n"
    "                      of SPEC §5 ('qtk quantize' writes them); --shape is the stored tensor's\n"
    "                      shape (NxK for nk, KxN for kn)\n"
    "  X.npy               f32 (or f16, f64) activations [M, K], or [K] for one row\n"
    "  Y.npy               written as f32 [M, N] (M = 1 when X is [K])\n"
    "  --scheme SPEC       a spec string or preset (see 'qtk scheme --help')\n"
    "  --layout L          nk: W is [N, K] (y[n] = Σ_k W[n][k] x[k]); kn: W is [K, N] (Burn's Linear)\n"
    "  --precision P       exact (default): f32 activations times exactly the dequantized weights,\n"
    "                      f32 sums; fast: for integer-valued schemes in layout nk, activations\n"
    "                      quantized to int8 per block of 32 and integer dot products (other\n"
    "                      schemes run exact; the error bounds are in the README)\n"
    "  --bias B.npy        N f32 values added to every row of Y\n"
    "  --calibration C     how W.npy is quantized: minmax (default), absmean (BitNet b1.58) or mse\n"
    "  --threads N         worker threads (default: all cores)\n"
    "  --force             replace Y.npy if it exists\n"
    "\n"
    "On any error nothing is written and the exit status is non-zero.\n";

int cmd_matmul(int argc, char **argv) {
    const char *cmd = "matmul";
    const char *spec = NULL, *layout_s = NULL, *prec_s = NULL, *bias_path = NULL, *calib = NULL, *threads_s = NULL,
               *wbin = NULL, *shape_s = NULL;
    bool force = false;
    const cli_opt opts[] = {
        {"force", false, NULL, &force, NULL, NULL},
        {"scheme", true, &spec, NULL, NULL, NULL},          {"layout", true, &layout_s, NULL, NULL, NULL},
        {"precision", true, &prec_s, NULL, NULL, NULL},     {"bias", true, &bias_path, NULL, NULL, NULL},
        {"calibration", true, &calib, NULL, NULL, NULL},    {"threads", true, &threads_s, NULL, NULL, NULL},
        {"weights-bin", true, &wbin, NULL, NULL, NULL},     {"shape", true, &shape_s, NULL, NULL, NULL},
    };
    const char *pos[3];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 3, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (!spec) return cli_usage_error(cmd, "--scheme is required");
    if (wbin && !shape_s) return cli_usage_error(cmd, "--weights-bin needs --shape (the stored tensor's shape)");
    if (shape_s && !wbin) return cli_usage_error(cmd, "--shape goes with --weights-bin");
    if (wbin && calib) return cli_usage_error(cmd, "--calibration applies to W.npy, not to --weights-bin");
    if (wbin ? npos != 2 : npos != 3)
        return cli_usage_error(cmd, wbin ? "expected X.npy and Y.npy (the weights come from --weights-bin)"
                                         : "expected W.npy, X.npy and Y.npy");
    qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_EXACT, 0};
    if (layout_s) {
        if (strcmp(layout_s, "nk") == 0) o.layout = QTK_MM_NK;
        else if (strcmp(layout_s, "kn") == 0) o.layout = QTK_MM_KN;
        else return cli_usage_error(cmd, "--layout '%s' is not nk or kn", layout_s);
    }
    if (prec_s) {
        if (strcmp(prec_s, "exact") == 0) o.precision = QTK_PRECISION_EXACT;
        else if (strcmp(prec_s, "fast") == 0) o.precision = QTK_PRECISION_FAST;
        else return cli_usage_error(cmd, "--precision '%s' is not exact or fast", prec_s);
    }
    qtk_quantize_options qo = {0};
    if (calib) {
        if (qtk_calibration_parse(calib, &qo.calibration))
            return cli_usage_error(cmd, "--calibration '%s' is not minmax, absmean or mse", calib);
    }
    if (threads_s) {
        long t;
        if (!cli_parse_int(threads_s, 1, 4096, &t)) return cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
        o.threads = (int)t;
        qo.threads = (int)t;
    }
    size_t wshape[QTK_MAX_RANK];
    int wrank = 0;
    if (shape_s && !cli_parse_shape(shape_s, wshape, &wrank))
        return cli_usage_error(cmd, "--shape '%s' is not D0xD1", shape_s);
    if (shape_s && wrank != 2)
        return cli_usage_error(cmd, "--shape '%s' has %d dims; W is a matrix (%s)", shape_s, wrank,
                               o.layout == QTK_MM_NK ? "NxK" : "KxN");
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    if (st) return cli_fail(cmd, st, "--scheme");

    const char *xpath = pos[wbin ? 0 : 1], *ypath = pos[wbin ? 1 : 2];
    if (cli_check_target(ypath, force)) return cli_fail(cmd, QTK_E_IO, "cannot write the output");
    cli_npy wn = {0}, xn = {0}, bn = {0};
    uint8_t *wb = NULL;
    float *y = NULL;
    qtk_tensor *t = NULL;
    if (wbin) {
        size_t len = 0;
        st = cli_read_file(wbin, &wb, &len);
        if (st) {
            rc = cli_fail(cmd, st, "cannot read --weights-bin");
            goto done;
        }
        st = qtk_tensor_from_bytes(wb, len, wshape, 2, &s, &t);
        if (st) {
            rc = cli_fail(cmd, st, "'%s' is not a tensor of scheme '%s' and shape %s", wbin, spec, shape_s);
            goto done;
        }
    } else {
        st = cli_npy_read(pos[0], &wn);
        if (st) {
            rc = cli_fail(cmd, st, "cannot read the weights");
            goto done;
        }
        if (wn.rank != 2) {
            char b[128];
            rc = cli_fail(cmd, QTK_OK, "W.npy has shape %s; W is a matrix (%s)", qtk_shape_format(wn.shape, wn.rank, b, sizeof b),
                          o.layout == QTK_MM_NK ? "[N, K]" : "[K, N]");
            goto done;
        }
        st = qtk_quantize(wn.data, wn.shape, 2, &s, &qo, &t);
        if (st) {
            rc = cli_fail(cmd, st, "cannot quantize '%s' under '%s'", pos[0], spec);
            goto done;
        }
    }
    const qtk_layout *L = qtk_tensor_layout(t);
    size_t N = o.layout == QTK_MM_NK ? L->shape[0] : L->shape[1], K = o.layout == QTK_MM_NK ? L->shape[1] : L->shape[0];
    st = cli_npy_read(xpath, &xn);
    if (st) {
        rc = cli_fail(cmd, st, "cannot read the activations");
        goto done;
    }
    if (xn.rank != 1 && xn.rank != 2) {
        char b[128];
        rc = cli_fail(cmd, QTK_OK, "X.npy has shape %s; X must be [M, K] or [K]", qtk_shape_format(xn.shape, xn.rank, b, sizeof b));
        goto done;
    }
    size_t M = xn.rank == 2 ? xn.shape[0] : 1, XK = xn.shape[xn.rank - 1];
    if (XK != K) {
        char b[128];
        rc = cli_fail(cmd, QTK_OK, "X.npy has K = %zu (shape %s) but W has K = %zu (shape %s, layout %s)", XK,
                      qtk_shape_format(xn.shape, xn.rank, b, sizeof b), K,
                      qtk_shape_format(L->shape, 2, (char[128]){0}, 128), o.layout == QTK_MM_NK ? "nk" : "kn");
        goto done;
    }
    if (bias_path) {
        st = cli_npy_read(bias_path, &bn);
        if (st) {
            rc = cli_fail(cmd, st, "cannot read --bias");
            goto done;
        }
        if (bn.numel != N || bn.rank < 1 || bn.shape[bn.rank - 1] != N || bn.rank > 2) {
            char b[128];
            rc = cli_fail(cmd, QTK_OK, "--bias has shape %s; it must hold N = %zu values ([N])",
                          qtk_shape_format(bn.shape, bn.rank, b, sizeof b), N);
            goto done;
        }
    }
    y = malloc(M * N * sizeof(float) + 1);
    if (!y) {
        rc = cli_fail(cmd, QTK_OK, "out of memory for Y [%zu, %zu]", M, N);
        goto done;
    }
    st = qtk_matmul(t, xn.data, QTK_DTYPE_F32, M, K, bias_path ? bn.data : NULL, y, N, &o);
    if (st) {
        rc = cli_fail(cmd, st, "matmul failed");
        goto done;
    }
    size_t yshape[2] = {M, N};
    /* the contract: Y is [M, N], M = 1 for a one-row X given as [K] */
    st = cli_npy_write(ypath, y, QTK_DTYPE_F32, yshape, 2, force);
    if (st) rc = cli_fail(cmd, st, "cannot write the output");
done:
    qtk_tensor_free(t);
    free(wb);
    free(y);
    cli_npy_free(&wn);
    cli_npy_free(&xn);
    cli_npy_free(&bn);
    return rc;
}
