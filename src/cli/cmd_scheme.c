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
    "            (qtk's extension: u8 u5 u4 u3 u2 q6f q5f q3f)\n"
    "  OPTION := block=DIMS:DTYPE    one scale per block; DIMS = D(xD)*, 1 to 5 dims,\n"
    "                                D in 1..65535 or * (the whole dimension)\n"
    "          | tensor=DTYPE        per-tensor scale; with block=: the two-level global\n"
    "          | store=native | store=packed[:D] | store=u32[:D]   (default u32:0)\n"
    "          | table=NAME          lookup mode (built in: nf4, iq4nl)\n"
    "  qtk's extension (docs/affine.md), for the unsigned values:\n"
    "          | offset=DTYPE        x = s q + o per scale group (ggml Q4_1, Q5_1)\n"
    "          | min=DTYPE           x = s q - m (ggml's K-quants)\n"
    "          | zero=DTYPE          x = s (q - z), DTYPE may also be u8 (GPTQ, AWQ)\n"
    "          | super=256:f16 ... store=ggml   ggml's block structs, only as the presets\n"
    "          | lattice=NAME        a vector codebook (docs/lattice.md): the presets iq2_xxs ...\n"
    "  DTYPE  := f32 f16 bf16 ue8m0 ue4m3\n"
    "  PRESET := nvfp4 mxfp4 mxfp8 nf4, and ggml's types q8_0 q4_0 iq4_nl (qtk layouts)\n"
    "            q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k (store=ggml: ggml's bytes)\n"
    "            iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m (store=ggml, lattice codebooks)\n"
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
    case QTK_VALUE_U8: return "8-bit unsigned integer, range [0, 255]";
    case QTK_VALUE_U5: return "5-bit unsigned integer, range [0, 31]";
    case QTK_VALUE_U4: return "4-bit unsigned integer, range [0, 15]";
    case QTK_VALUE_U3: return "3-bit unsigned integer, range [0, 7]";
    case QTK_VALUE_U2: return "2-bit unsigned integer, range [0, 3]";
    case QTK_VALUE_Q6F: return "6-bit integer, range [-32, 31]";
    case QTK_VALUE_Q5F: return "5-bit integer, range [-16, 15]";
    case QTK_VALUE_Q3F: return "3-bit integer, range [-4, 3]";
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
    } else if (s.mode == QTK_MODE_AFFINE) {
        static const char *const how[] = {"value = field x scale + offset", "value = field x scale - min",
                                          "value = (field - zero point) x scale"};
        printf("mode      affine: %s, one %s %s per scale group\n", how[s.offset], qtk_dtype_name(s.offset_dtype),
               s.offset == QTK_OFFSET_ADD ? "offset" : s.offset == QTK_OFFSET_MIN ? "min" : "zero point");
    } else if (s.mode == QTK_MODE_LATTICE) {
        printf("mode      lattice: each code selects a point of codebook '%s' (4 or 8 integer coordinates with\n"
               "          their signs); value = coordinate x (d x the sub-scale's multiplier) (docs/lattice.md)\n",
               s.table);
    } else {
        printf("mode      symmetric: value = field x scale\n");
    }
    if (s.store == QTK_STORE_GGML)
        printf("store     ggml: ggml's %s blocks of %u elements, byte for byte as in a GGUF file\n",
               preset ? preset : "?", s.super_block ? s.super_block : 32u);
    else if (s.store == QTK_STORE_NATIVE) printf("store     native: one field per byte\n");
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
    if (s.super_block)
        printf("super     one %s per %u elements multiplies the integer scales%s\n", qtk_dtype_name(s.super_dtype),
               s.super_block, s.mode == QTK_MODE_AFFINE ? ", a second one the integer mins" : "");
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
    if (s.store == QTK_STORE_GGML)
        printf("  scales  %zu groups (grid %s), their scales%s inside the blocks\n", L.n_scales,
               qtk_shape_format(L.grid, rank, ss, sizeof ss), L.offset_dtype ? " and offsets" : "");
    else
        printf("  scales  %zu x %s = %zu bytes (block grid %s)\n", L.n_scales, qtk_dtype_name(L.scale_dtype),
               L.scale_bytes, qtk_shape_format(L.grid, rank, ss, sizeof ss));
    if (L.offset_bytes)
        printf("  offsets %zu x %s = %zu bytes\n", L.n_scales, qtk_dtype_name(L.offset_dtype), L.offset_bytes);
    if (L.global_bytes) printf("  global  4 bytes (f32)\n");
    if (L.table_bytes) printf("  table   %zu bytes (%zu f32 entries)\n", L.table_bytes, L.table_entries);
    printf("  total   %zu bytes = %.4f bits per element\n", L.total_bytes, qtk_layout_bits_per_element(&L));
    return CLI_OK;
}
