/* cmd_demo.c — qtk demo: the main job on a built-in default. Quantizes a synthetic
 * weight matrix under every preset and a representative set of schemes and prints what
 * each costs (bits per element) and loses (RMSE, max error, SQNR). */
#include "cli.h"

#include "io/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk demo [--rows N] [--cols N] [--seed S]\n"
    "\n"
    "Generates a deterministic synthetic weight matrix (default 512x4096: N(0, 0.02) with\n"
    "outlier input channels, like a trained transformer layer), quantizes it under every\n"
    "preset and a representative set of schemes, dequantizes it, and prints a table of\n"
    "bits per element (scales included), RMSE, max |error| and SQNR in dB.\n";

static const char *const demo_schemes[] = {
    "nvfp4",
    "mxfp4",
    "mxfp8",
    "nf4",
    "q8f",
    "q8s,block=32:f16",
    "q8s,block=*:f32",
    "q4f,block=32:f16",
    "q4s,block=32:bf16",
    "q4f,block=*:f32",
    "q4f,block=16x16:f16",
    "q4f,table=iq4nl,block=32:f16",
    "q4s,block=32:ue4m3,tensor=f32",
    "q2f,block=32:f16",
    "q2s,block=64:f16",
    "e4m3",
    "e4m3,block=32:f16",
    "e5m2,block=32:ue8m0",
    "e2m1,block=32:f16",
};

int cmd_demo(int argc, char **argv) {
    const char *cmd = "demo";
    const char *rows_s = NULL, *cols_s = NULL, *seed_s = NULL;
    const cli_opt opts[] = {
        {"rows", true, &rows_s, NULL, NULL, NULL},
        {"cols", true, &cols_s, NULL, NULL, NULL},
        {"seed", true, &seed_s, NULL, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, 3, pos, 0, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    long rows = 512, cols = 4096, seed = 42;
    if (rows_s && !cli_parse_int(rows_s, 1, 1L << 20, &rows)) return cli_usage_error(cmd, "--rows '%s' is not 1..2^20", rows_s);
    if (cols_s && !cli_parse_int(cols_s, 1, 1L << 20, &cols)) return cli_usage_error(cmd, "--cols '%s' is not 1..2^20", cols_s);
    if (seed_s && !cli_parse_int(seed_s, 0, 0x7fffffffL, &seed)) return cli_usage_error(cmd, "--seed '%s' is not a number", seed_s);
    size_t n = (size_t)rows * (size_t)cols;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    if (!x || !y) {
        free(x);
        free(y);
        return cli_fail(cmd, QTK_OK, "out of memory");
    }
    qtk_synth_weights(x, (size_t)rows, (size_t)cols, 0.02f, 97, (uint64_t)seed);
    size_t shape[2] = {(size_t)rows, (size_t)cols};
    double sig = 0.0;
    for (size_t i = 0; i < n; i++) sig += (double)x[i] * x[i];

    printf("qtk demo: synthetic weights %ldx%ld, N(0, 0.02^2) with outlier channels, seed %ld\n\n", rows, cols, seed);
    printf("%-34s %9s %12s %12s %9s\n", "scheme", "bits/el", "RMSE", "max|err|", "SQNR dB");
    printf("%-34s %9s %12s %12s %9s\n", "----------------------------------", "---------", "------------",
           "------------", "---------");
    for (size_t k = 0; k < sizeof demo_schemes / sizeof demo_schemes[0]; k++) {
        qtk_scheme s;
        qtk_tensor *t = NULL;
        qtk_status st = qtk_scheme_parse(demo_schemes[k], &s);
        if (!st) st = qtk_quantize(x, shape, 2, &s, NULL, &t);
        if (!st) st = qtk_dequantize(t, QTK_DTYPE_F32, y, n);
        if (st) {
            rc = cli_fail(cmd, st, "scheme '%s'", demo_schemes[k]);
            qtk_tensor_free(t);
            break;
        }
        double err = 0.0, mx = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)x[i] - (double)y[i];
            err += d * d;
            if (fabs(d) > mx) mx = fabs(d);
        }
        double sqnr = err > 0 ? 10.0 * log10(sig / err) : INFINITY;
        printf("%-34s %9.3f %12.4e %12.4e %9.2f\n", demo_schemes[k], qtk_layout_bits_per_element(qtk_tensor_layout(t)),
               sqrt(err / (double)n), mx, sqnr);
        qtk_tensor_free(t);
    }
    free(x);
    free(y);
    return rc;
}
