/* cmd_dequantize.c — qtk dequantize: the bytes of SPEC §5 back to a .npy array. */
#include "cli.h"

#include "npy.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk dequantize --scheme SPEC --shape D0xD1x... [--dtype f32|f16|bf16] [--threads N]\n"
    "                      [--force] IN.bin OUT.npy\n"
    "\n"
    "Reads a quantized tensor's bytes (Burn's layout, as 'qtk quantize' writes them), checks\n"
    "that their length is exactly what SPEC and the shape imply, and writes the dequantized\n"
    "values to OUT.npy.\n"
    "\n"
    "  --scheme SPEC    the scheme the bytes were written with\n"
    "  --shape SHAPE    the tensor's shape, e.g. 64x128; 'scalar' for a rank-0 tensor\n"
    "  --dtype D        f32 (default), f16, or bf16 (written as '<u2' bit patterns)\n"
    "  --threads N      worker threads (default: all cores)\n"
    "  --force          replace OUT.npy if it exists\n";

int cmd_dequantize(int argc, char **argv) {
    const char *cmd = "dequantize";
    const char *spec = NULL, *shape_s = NULL, *dtype_s = NULL, *threads_s = NULL;
    bool force = false;
    const cli_opt opts[] = {
        {"force", false, NULL, &force, NULL, NULL},
        {"scheme", true, &spec, NULL, NULL, NULL},
        {"shape", true, &shape_s, NULL, NULL, NULL},
        {"dtype", true, &dtype_s, NULL, NULL, NULL},
        {"threads", true, &threads_s, NULL, NULL, NULL},
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
    if (!shape_s) return cli_usage_error(cmd, "--shape is required");
    if (npos != 2) return cli_usage_error(cmd, "expected IN.bin and OUT.npy");
    size_t shape[QTK_MAX_RANK];
    int rank;
    if (!cli_parse_shape(shape_s, shape, &rank))
        return cli_usage_error(cmd, "--shape '%s' is not D0xD1x... (at most %d dims) or 'scalar'", shape_s, QTK_MAX_RANK);
    qtk_dtype dt = QTK_DTYPE_F32;
    if (dtype_s) {
        if (strcmp(dtype_s, "f32") == 0) dt = QTK_DTYPE_F32;
        else if (strcmp(dtype_s, "f16") == 0) dt = QTK_DTYPE_F16;
        else if (strcmp(dtype_s, "bf16") == 0) dt = QTK_DTYPE_BF16;
        else return cli_usage_error(cmd, "--dtype '%s' is not f32, f16 or bf16", dtype_s);
    }
    if (threads_s) {
        long t;
        if (!cli_parse_int(threads_s, 1, 4096, &t)) return cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
        qtk_set_threads((int)t);
    }
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    if (st) return cli_fail(cmd, st, "--scheme");
    qtk_layout L;
    st = qtk_layout_compute(&s, shape, rank, &L);
    if (st) return cli_fail(cmd, st, "scheme '%s' does not fit shape %s", spec, shape_s);
    if ((st = cli_check_target(pos[1], force))) return cli_fail(cmd, st, "cannot write the output");

    uint8_t *in = NULL;
    size_t len = 0;
    void *out = NULL;
    st = cli_read_file(pos[0], &in, &len);
    if (st) {
        rc = cli_fail(cmd, st, "cannot read the input");
        goto done;
    }
    out = malloc(L.numel ? L.numel * (dt == QTK_DTYPE_F32 ? 4 : 2) : 1);
    if (!out) {
        rc = cli_fail(cmd, QTK_OK, "out of memory");
        goto done;
    }
    st = qtk_dequantize_bytes(in, len, shape, rank, &s, dt, out, L.numel);
    if (st) {
        rc = cli_fail(cmd, st, "cannot dequantize '%s'", pos[0]);
        goto done;
    }
    st = cli_npy_write(pos[1], out, dt, shape, rank, force);
    if (st) rc = cli_fail(cmd, st, "cannot write the output");
done:
    free(in);
    free(out);
    return rc;
}
