/* cmd_quantize.c — qtk quantize: an f32 .npy array to the bytes of SPEC §5. */
#include "cli.h"

#include "npy.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk quantize --scheme SPEC [--calibration minmax|absmean|mse]\n"
    "                    [--weights W.npy | --imatrix FILE [--name TENSOR]]\n"
    "                    [--scales S.npy [--global G]] [--threads N] [--force] IN.npy OUT.bin\n"
    "\n"
    "Quantizes the array in IN.npy (float32, float16 or float64, C order) under SPEC and writes\n"
    "the quantized tensor's bytes to OUT.bin in Burn's layout:\n"
    "  [packed values][scales][f32 global, two-level only][f32 table, lookup only]\n"
    "\n"
    "  --scheme SPEC          a spec string or preset (see 'qtk scheme --help'); table=fit fits\n"
    "                         the lookup table to this tensor (it is stored in OUT.bin)\n"
    "  --calibration C        minmax: max |x| per group (the default); absmean: mean |x|\n"
    "                         (BitNet b1.58; not for two-level schemes); mse: per group the\n"
    "                         stored scale (and for two-level schemes the global) with the\n"
    "                         least squared error, same layout (docs/quantizers.md)\n"
    "  --weights W.npy        importance weights of the squared error (with --calibration mse\n"
    "                         or table=fit): one per element (shaped as IN, or flat) or one\n"
    "                         per column of the last dimension; finite, >= 0\n"
    "  --imatrix FILE         the weights from a llama.cpp importance matrix (GGUF or legacy\n"
    "                         .dat): the entry for --name TENSOR (a llama.cpp or Hugging Face\n"
    "                         name, docs/imatrix.md), or the file's only entry\n"
    "  --name TENSOR          which tensor of --imatrix IN.npy is\n"
    "  --scales S.npy         use these scales instead of calibrating: one f32 per scale group,\n"
    "                         row-major over the block grid (shaped as the grid, or flat)\n"
    "  --global G             the two-level global scale that goes with --scales\n"
    "  --threads N            worker threads (default: all cores)\n"
    "  --force                replace OUT.bin if it exists\n"
    "\n"
    "The shape of the tensor is the array's shape; dequantize needs it again (--shape).\n"
    "On any error nothing is written and the exit status is non-zero.\n";

int cmd_quantize(int argc, char **argv) {
    const char *cmd = "quantize";
    const char *spec = NULL, *calib = NULL, *scales_path = NULL, *global_s = NULL, *threads_s = NULL,
               *weights_path = NULL, *imatrix_path = NULL, *name = NULL;
    bool force = false;
    const cli_opt opts[] = {
        {"scheme", true, &spec, NULL, NULL, NULL},       {"calibration", true, &calib, NULL, NULL, NULL},
        {"scales", true, &scales_path, NULL, NULL, NULL}, {"global", true, &global_s, NULL, NULL, NULL},
        {"threads", true, &threads_s, NULL, NULL, NULL},  {"weights", true, &weights_path, NULL, NULL, NULL},
        {"force", false, NULL, &force, NULL, NULL},      {"imatrix", true, &imatrix_path, NULL, NULL, NULL},
        {"name", true, &name, NULL, NULL, NULL},
    };
    const char *pos[2];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (!spec) return cli_usage_error(cmd, "--scheme is required");
    if (npos != 2) return cli_usage_error(cmd, "expected IN.npy and OUT.bin");
    if (global_s && !scales_path) return cli_usage_error(cmd, "--global goes with --scales");
    if (imatrix_path && weights_path) return cli_usage_error(cmd, "--imatrix and --weights exclude each other");
    if (name && !imatrix_path) return cli_usage_error(cmd, "--name goes with --imatrix");

    qtk_quantize_options o = {0};
    if (calib) {
        if (qtk_calibration_parse(calib, &o.calibration))
            return cli_usage_error(cmd, "--calibration '%s' is not minmax, absmean or mse", calib);
        if (scales_path) return cli_usage_error(cmd, "--calibration and --scales exclude each other");
    }
    if (threads_s) {
        long t;
        if (!cli_parse_int(threads_s, 1, 4096, &t)) return cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
        o.threads = (int)t;
    }
    float global = 0.0f;
    if (global_s) {
        if (!cli_parse_float(global_s, &global)) return cli_usage_error(cmd, "--global '%s' is not a finite number", global_s);
        o.global = &global;
    }
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    if (st) return cli_fail(cmd, st, "--scheme");
    if ((st = cli_check_target(pos[1], force))) return cli_fail(cmd, st, "cannot write the output");

    cli_npy in = {0}, sc = {0}, wt = {0};
    qtk_imatrix *im = NULL;
    uint8_t *out = NULL;
    st = cli_npy_read(pos[0], &in);
    if (st) {
        rc = cli_fail(cmd, st, "cannot read the input");
        goto done;
    }
    if (scales_path) {
        st = cli_npy_read(scales_path, &sc);
        if (st) {
            rc = cli_fail(cmd, st, "cannot read --scales");
            goto done;
        }
        o.scales = sc.data;
        o.n_scales = sc.numel;
    }
    if (weights_path) {
        st = cli_npy_read(weights_path, &wt);
        if (st) {
            rc = cli_fail(cmd, st, "cannot read --weights");
            goto done;
        }
        /* shaped as the input, flat, or one per column */
        bool same = wt.rank == in.rank;
        for (int i = 0; same && i < wt.rank; i++) same = wt.shape[i] == in.shape[i];
        if (!same && wt.rank > 1) {
            char a[128], b[128];
            rc = cli_fail(cmd, QTK_OK, "--weights has shape %s but the input is %s (give one weight per element, shaped as "
                                       "the input or flat, or one per column)",
                          qtk_shape_format(wt.shape, wt.rank, a, sizeof a), qtk_shape_format(in.shape, in.rank, b, sizeof b));
            goto done;
        }
        o.weights = wt.data;
        o.n_weights = wt.numel;
    }
    if (imatrix_path) {
        st = qtk_imatrix_open(imatrix_path, &im);
        qtk_imatrix_entry e = {0};
        if (!st && name) st = qtk_imatrix_lookup(im, name, &e);
        else if (!st && qtk_imatrix_count(im) == 1) e = *qtk_imatrix_entry_at(im, 0);
        else if (!st) {
            rc = cli_fail(cmd, QTK_OK, "--imatrix '%s' has %zu entries: say which with --name TENSOR", imatrix_path,
                          qtk_imatrix_count(im));
            goto done;
        }
        if (st) {
            rc = cli_fail(cmd, st, "--imatrix");
            goto done;
        }
        /* one weight per column, or per expert and column (the library checks the count) */
        if (in.rank == 0 || e.columns != in.shape[in.rank - 1]) {
            rc = cli_fail(cmd, QTK_OK, "--imatrix entry '%s' has %zu columns; the input's last extent is %zu", e.name,
                          e.columns, in.rank ? in.shape[in.rank - 1] : (size_t)1);
            goto done;
        }
        o.weights = e.weights;
        o.n_weights = e.columns * e.experts;
    }
    qtk_layout L;
    st = qtk_layout_compute(&s, in.shape, in.rank, &L);
    if (st) {
        rc = cli_fail(cmd, st, "scheme '%s' does not fit the input", spec);
        goto done;
    }
    if (scales_path && sc.rank > 1) {
        /* a grid-shaped scales array must match the block grid */
        bool same = sc.rank == L.rank;
        for (int i = 0; same && i < sc.rank; i++) same = sc.shape[i] == L.grid[i];
        if (!same) {
            char a[128], b[128];
            rc = cli_fail(cmd, QTK_OK, "--scales has shape %s but the block grid is %s (give it shaped as the grid, or flat)",
                          qtk_shape_format(sc.shape, sc.rank, a, sizeof a), qtk_shape_format(L.grid, L.rank, b, sizeof b));
            goto done;
        }
    }
    out = malloc(L.total_bytes ? L.total_bytes : 1);
    if (!out) {
        rc = cli_fail(cmd, QTK_OK, "out of memory for %zu bytes", L.total_bytes);
        goto done;
    }
    st = qtk_quantize_into(in.data, in.shape, in.rank, &s, &o, out, L.total_bytes);
    if (st) {
        rc = cli_fail(cmd, st, "cannot quantize '%s'", pos[0]);
        goto done;
    }
    st = qtk_file_write_atomic(pos[1], out, L.total_bytes, force);
    if (st) rc = cli_fail(cmd, st, "cannot write the output");
done:
    free(out);
    cli_npy_free(&in);
    cli_npy_free(&sc);
    cli_npy_free(&wt);
    qtk_imatrix_close(im);
    return rc;
}
