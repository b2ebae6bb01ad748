/* cmd_scheme.c — qtk scheme: what a spec string means, and what it costs on a shape. */
#include "cli.h"

#include <string.h>

static const char usage[] =
    "usage: qtk scheme SPEC [--shape D0xD1x...]\n"
    "\n"
    "Prints the canonical form of SPEC, what each part means, and the exact byte layout and\n"
    "bits per element (scales included) on a shape (default 4096x4096).\n"
    "\n"
    "SPEC grammar (case-insensitive):\n"
    "  SPEC   := PRESET | VALUE (\",\" OPTION)*\n"
    "  VALUE  := q8f q8s q4f q4s q2f q2s e4m3 e5m2 e2m1\n"
    "  OPTION := block=DIMS:DTYPE    one scale per block; DIMS = D(xD)*, 1 to 5 dims,\n"
    "                                D in 1..65535 or * (the whole dimension)\n"
    "          | tensor=DTYPE        per-tensor scale; with block=: the two-level global\n"
    "          | store=native | store=packed[:D] | store=u32[:D]   (default u32:0)\n"
    "          | table=NAME          lookup mode (built in: nf4, iq4nl)\n"
    "  DTYPE  := f32 f16 bf16 ue8m0 ue4m3\n"
    "  PRESET := nvfp4 mxfp4 mxfp8 nf4\n"
    "Block dims align with the tensor's trailing dims (block=32 on [64,128] is 1x32);\n"
    "block=*:f32 is one scale per row; no level at all means one f32 scale for the tensor.\n";

static const char *value_desc(qtk_value v) {
    switch (v) {
    case QTK_VALUE_Q8F: return "8-bit integer, range [-128, 127]";
    case QTK_VALUE_Q8S: return "8-bit integer, symmetric range [-127, 127]";
    case QTK_VALUE_Q4F: return "4-bit integer, range [-8, 7]";
    case QTK_VALUE_Q4S: return "4-bit integer, symmetric range [-7, 7]";
    case QTK_VALUE_Q2F: return "2-bit integer, range [-2, 1]";
    case QTK_VALUE_Q2S: return "2-bit integer, ternary {-1, 0, 1}";
    case QTK_VALUE_E4M3: return "FP8 E4M3FN, max 448";
    case QTK_VALUE_E5M2: return "FP8 E5M2, max 57344";
    case QTK_VALUE_E2M1: return "FP4 E2M1, values 0 0.5 1 1.5 2 3 4 6";
    default: return "?";
    }
}

int cmd_scheme(int argc, char **argv) {
    const char *cmd = "scheme";
    const char *shape_s = NULL;
    const cli_opt opts[] = {{"shape", true, &shape_s, NULL, NULL, NULL}};
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, 1, pos, 1, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (npos != 1) return cli_usage_error(cmd, "expected one SPEC");
    size_t shape[QTK_MAX_RANK] = {4096, 4096};
    int rank = 2;
    if (shape_s && !cli_parse_shape(shape_s, shape, &rank))
        return cli_usage_error(cmd, "--shape '%s' is not D0xD1x... or 'scalar'", shape_s);
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(pos[0], &s);
    if (st) return cli_fail(cmd, st, "cannot parse the scheme");
    char canon[256];
    qtk_scheme_format(&s, canon, sizeof canon, NULL);
    const char *preset = qtk_scheme_preset_name(&s);
    printf("scheme    %s%s%s%s\n", canon, preset ? "  (preset " : "", preset ? preset : "", preset ? ")" : "");
    printf("value     %s: %s\n", qtk_value_name(s.value), value_desc(s.value));
    if (s.mode == QTK_MODE_LOOKUP) {
        float tab[256];
        size_t n = 0;
        qtk_table_get(s.table, tab, 256, &n);
        printf("mode      lookup: each %u-bit field indexes table '%s' (%zu f32 entries)\n", qtk_value_bits(s.value),
               s.table, n);
    } else {
        printf("mode      symmetric: value = field x scale\n");
    }
    if (s.store == QTK_STORE_NATIVE) printf("store     native: one field per byte\n");
    else if (s.store == QTK_STORE_PACKED)
        printf("store     packed along dim %u from the innermost: %s\n", s.pack_dim,
               s.value == QTK_VALUE_E2M1 ? "two fields per byte, first in the low nibble" : "one field per byte");
    else
        printf("store     u32 along dim %u from the innermost: %u fields per little-endian word, first in the low bits\n",
               s.pack_dim, 32 / qtk_value_bits(s.value));
    if (s.block_rank) {
        printf("block     ");
        for (unsigned i = 0; i < s.block_rank; i++) {
            if (i) printf("x");
            if (s.block[i] == QTK_BLOCK_WHOLE) printf("*");
            else printf("%u", (unsigned)s.block[i]);
        }
        printf(" elements per scale, scales in %s\n", qtk_dtype_name(s.block_dtype));
    }
    if (qtk_scheme_is_two_level(&s))
        printf("tensor    two-level: one f32 global multiplies every block scale\n");
    else if (!s.block_rank)
        printf("tensor    one %s scale for the whole tensor\n",
               qtk_dtype_name(s.tensor_dtype ? s.tensor_dtype : QTK_DTYPE_F32));
    else if (s.tensor_dtype)
        printf("tensor    %s\n", qtk_dtype_name(s.tensor_dtype));

    qtk_layout L;
    char sb[160], ss[160];
    st = qtk_layout_compute(&s, shape, rank, &L);
    if (st) return cli_fail(cmd, st, "on shape %s", qtk_shape_format(shape, rank, sb, sizeof sb));
    printf("\non shape %s%s (%zu elements):\n", qtk_shape_format(shape, rank, sb, sizeof sb),
           shape_s ? "" : " (the default; --shape sets it)", L.numel);
    printf("  values  %zu bytes, storage shape %s of %u-byte units\n", L.value_bytes,
           qtk_shape_format(L.storage_shape, rank > 0 ? rank : 1, ss, sizeof ss), L.unit_bytes);
    printf("  scales  %zu x %s = %zu bytes (block grid %s)\n", L.n_scales, qtk_dtype_name(L.scale_dtype), L.scale_bytes,
           qtk_shape_format(L.grid, rank, ss, sizeof ss));
    if (L.global_bytes) printf("  global  4 bytes (f32)\n");
    if (L.table_bytes) printf("  table   %zu bytes (%zu f32 entries)\n", L.table_bytes, L.table_entries);
    printf("  total   %zu bytes = %.4f bits per element\n", L.total_bytes, qtk_layout_bits_per_element(&L));
    return CLI_OK;
}
