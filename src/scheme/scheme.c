/* scheme.c — the scheme model: value facts, validation, and the derived layout. */
#include "scheme_internal.h"

#include "../numfmt/scalar.h"

#include <stdio.h>

static const qtk__value_info values[QTK_VALUE_COUNT_] = {
    [QTK_VALUE_Q8F] = {"q8f", 8, QTK__KIND_INT, false, -128, 127, 127.0f, 127.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q8S] = {"q8s", 8, QTK__KIND_INT, false, -127, 127, 127.0f, 127.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q4F] = {"q4f", 4, QTK__KIND_INT, false, -8, 7, 7.0f, 7.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q4S] = {"q4s", 4, QTK__KIND_INT, false, -7, 7, 7.0f, 7.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q2F] = {"q2f", 2, QTK__KIND_INT, false, -2, 1, 1.0f, 1.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q2S] = {"q2s", 2, QTK__KIND_INT, false, -1, 1, 1.0f, 1.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_E4M3] = {"e4m3", 8, QTK__KIND_FLOAT, false, 0, 0, 448.0f, 448.0f, QTK_DTYPE_E4M3},
    [QTK_VALUE_E5M2] = {"e5m2", 8, QTK__KIND_FLOAT, false, 0, 0, 57344.0f, 57344.0f, QTK_DTYPE_E5M2},
    [QTK_VALUE_E2M1] = {"e2m1", 4, QTK__KIND_FLOAT, false, 0, 0, 6.0f, 6.0f, QTK_DTYPE_E2M1},
    /* qtk's extension (docs/affine.md): half_range of an unsigned value is its full range,
     * the divisor of the affine raw scale (hi - lo) / Q */
    [QTK_VALUE_U8] = {"u8", 8, QTK__KIND_INT, true, 0, 255, 255.0f, 255.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_U5] = {"u5", 5, QTK__KIND_INT, true, 0, 31, 31.0f, 31.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_U4] = {"u4", 4, QTK__KIND_INT, true, 0, 15, 15.0f, 15.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_U3] = {"u3", 3, QTK__KIND_INT, true, 0, 7, 7.0f, 7.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_U2] = {"u2", 2, QTK__KIND_INT, true, 0, 3, 3.0f, 3.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q6F] = {"q6f", 6, QTK__KIND_INT, false, -32, 31, 31.0f, 31.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q5F] = {"q5f", 5, QTK__KIND_INT, false, -16, 15, 15.0f, 15.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q3F] = {"q3f", 3, QTK__KIND_INT, false, -4, 3, 3.0f, 3.5f, QTK_DTYPE_NONE},
};

const qtk__value_info *qtk__value(qtk_value v) { return &values[v]; }

unsigned qtk_value_bits(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].bits : 0; }
const char *qtk_value_name(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].name : "?"; }
float qtk_value_max(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].max : 0.0f; }

/* ---- ggml's block structs (docs/affine.md §3; GGUF.md §2.6-2.7, §2.15) ---- */

#define GF_SCHEME(v, off, odt, blk, bdt, sup)                                                                          \
    {.value = (v), .mode = (odt) != QTK_DTYPE_NONE ? QTK_MODE_AFFINE : QTK_MODE_SYMMETRIC, .store = QTK_STORE_GGML,    \
     .block_rank = 1, .block = {(blk)}, .block_dtype = (bdt), .offset = (off), .offset_dtype = (odt),                   \
     .super_block = (sup), .super_dtype = (sup) ? QTK_DTYPE_F16 : QTK_DTYPE_NONE}

#define GF_LATTICE(name, blk)                                                                                          \
    {.value = QTK_VALUE_Q8F, .mode = QTK_MODE_LATTICE, .store = QTK_STORE_GGML, .block_rank = 1, .block = {(blk)},      \
     .block_dtype = QTK_DTYPE_U4, .table = name, .super_block = 256, .super_dtype = QTK_DTYPE_F16}

static const qtk__gfmt_info gfmts[QTK__GF_COUNT] = {
    [QTK__GF_Q4_1] = {"q4_1", "Q4_1", 3, 32, 20, 32,
                      GF_SCHEME(QTK_VALUE_U4, QTK_OFFSET_ADD, QTK_DTYPE_F16, 32, QTK_DTYPE_F16, 0)},
    [QTK__GF_Q5_0] = {"q5_0", "Q5_0", 6, 32, 22, 32,
                      GF_SCHEME(QTK_VALUE_Q5F, QTK_OFFSET_ADD, QTK_DTYPE_NONE, 32, QTK_DTYPE_F16, 0)},
    [QTK__GF_Q5_1] = {"q5_1", "Q5_1", 7, 32, 24, 32,
                      GF_SCHEME(QTK_VALUE_U5, QTK_OFFSET_ADD, QTK_DTYPE_F16, 32, QTK_DTYPE_F16, 0)},
    [QTK__GF_Q2_K] = {"q2_k", "Q2_K", 10, 256, 84, 16,
                      GF_SCHEME(QTK_VALUE_U2, QTK_OFFSET_MIN, QTK_DTYPE_U4, 16, QTK_DTYPE_U4, 256)},
    [QTK__GF_Q3_K] = {"q3_k", "Q3_K", 11, 256, 110, 16,
                      GF_SCHEME(QTK_VALUE_Q3F, QTK_OFFSET_ADD, QTK_DTYPE_NONE, 16, QTK_DTYPE_I6, 256)},
    [QTK__GF_Q4_K] = {"q4_k", "Q4_K", 12, 256, 144, 32,
                      GF_SCHEME(QTK_VALUE_U4, QTK_OFFSET_MIN, QTK_DTYPE_U6, 32, QTK_DTYPE_U6, 256)},
    [QTK__GF_Q5_K] = {"q5_k", "Q5_K", 13, 256, 176, 32,
                      GF_SCHEME(QTK_VALUE_U5, QTK_OFFSET_MIN, QTK_DTYPE_U6, 32, QTK_DTYPE_U6, 256)},
    [QTK__GF_Q6_K] = {"q6_k", "Q6_K", 14, 256, 210, 16,
                      GF_SCHEME(QTK_VALUE_Q6F, QTK_OFFSET_ADD, QTK_DTYPE_NONE, 16, QTK_DTYPE_I8, 256)},
    /* docs/lattice.md: q8f values (the codebook's integer coordinates) under sub-scales of at
     * most 4 bits, whose multiplier the codebook fixes, and one f16 per 256 */
    [QTK__GF_IQ2_XXS] = {"iq2_xxs", "IQ2_XXS", 16, 256, 66, 32, GF_LATTICE("iq2xxs", 32)},
    [QTK__GF_IQ2_XS] = {"iq2_xs", "IQ2_XS", 17, 256, 74, 16, GF_LATTICE("iq2xs", 16)},
    [QTK__GF_IQ2_S] = {"iq2_s", "IQ2_S", 22, 256, 82, 16, GF_LATTICE("iq2s", 16)},
    [QTK__GF_IQ3_XXS] = {"iq3_xxs", "IQ3_XXS", 18, 256, 98, 32, GF_LATTICE("iq3xxs", 32)},
    [QTK__GF_IQ3_S] = {"iq3_s", "IQ3_S", 21, 256, 110, 32, GF_LATTICE("iq3s", 32)},
    [QTK__GF_IQ1_S] = {"iq1_s", "IQ1_S", 19, 256, 50, 32, GF_LATTICE("iq1s", 32)},
    [QTK__GF_IQ1_M] = {"iq1_m", "IQ1_M", 29, 256, 56, 16, GF_LATTICE("iq1m", 16)},
};

const qtk__gfmt_info *qtk__gfmt_info_of(qtk__gfmt f) { return &gfmts[f]; }

/* Field by field (the schemes are canonical: one block dim, nothing else set). */
static bool same_gfmt(const qtk_scheme *a, const qtk_scheme *b) {
    return a->value == b->value && a->mode == b->mode && a->store == b->store && a->pack_dim == 0 &&
           a->block_rank == 1 && a->block[0] == b->block[0] && a->block_dtype == b->block_dtype &&
           a->tensor_dtype == QTK_DTYPE_NONE && strncmp(a->table, b->table, QTK_TABLE_NAME_MAX) == 0 &&
           (a->mode != QTK_MODE_AFFINE || a->offset == b->offset) && a->offset_dtype == b->offset_dtype &&
           a->super_block == b->super_block && a->super_dtype == b->super_dtype;
}

int qtk__scheme_gfmt(const qtk_scheme *s0) {
    if (!s0 || s0->store != QTK_STORE_GGML) return -1;
    qtk_scheme s = *s0;
    qtk__scheme_canonical_block(&s);
    for (int f = 0; f < QTK__GF_COUNT; f++)
        if (same_gfmt(&s, &gfmts[f].scheme)) return f;
    return -1;
}

int qtk_scheme_is_two_level(const qtk_scheme *s) {
    return s && s->block_rank > 0 && s->tensor_dtype != QTK_DTYPE_NONE;
}

void qtk__scheme_canonical_block(qtk_scheme *s) {
    unsigned br = s->block_rank < QTK_MAX_BLOCK_DIMS ? s->block_rank : QTK_MAX_BLOCK_DIMS;
    unsigned lead = 0;
    while (lead + 1 < br && s->block[lead] == 1) lead++;
    for (unsigned i = lead; i < br; i++) s->block[i - lead] = s->block[i];
    br -= lead;
    for (unsigned i = br; i < QTK_MAX_BLOCK_DIMS; i++) s->block[i] = 0;
    s->block_rank = (uint8_t)br;
}

static void block_str(const qtk_scheme *s, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < s->block_rank && used < cap; i++) {
        int n = s->block[i] == QTK_BLOCK_WHOLE ? snprintf(buf + used, cap - used, "%s*", i ? "x" : "")
                                               : snprintf(buf + used, cap - used, "%s%u", i ? "x" : "",
                                                          (unsigned)s->block[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

static const char *const GGML_FORMATS =
    "q4_1 = u4,block=32:f16,offset=f16; q5_0 = q5f,block=32:f16; q5_1 = u5,block=32:f16,offset=f16; "
    "q2_k = u2,block=16:u4,min=u4,super=256:f16; q3_k = q3f,block=16:i6,super=256:f16; "
    "q4_k = u4,block=32:u6,min=u6,super=256:f16; q5_k = u5,block=32:u6,min=u6,super=256:f16; "
    "q6_k = q6f,block=16:i8,super=256:f16; the lattice types iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m = "
    "q8f,lattice=NAME,block=32 or 16:u4,super=256:f16 (each with store=ggml; docs/lattice.md)";

/* The extension's rules (docs/affine.md) for a scheme not in ggml's store. */
static qtk_status validate_extension(const qtk_scheme *s) {
    const qtk__value_info *vi = &values[s->value];
    if (s->super_block != 0 || s->super_dtype != QTK_DTYPE_NONE)
        return qtk__err(QTK_E_SCHEME, "super= exists only in ggml's packings (store=ggml: %s)", GGML_FORMATS);
    if (vi->unsig && s->mode != QTK_MODE_AFFINE)
        return qtk__err(QTK_E_SCHEME,
                        "%s is an unsigned value: it needs an offset (min=, offset= or zero=, docs/affine.md)", vi->name);
    if (s->mode == QTK_MODE_AFFINE) {
        if (!vi->unsig)
            return qtk__err(QTK_E_SCHEME, "the affine mode (min=, offset=, zero=) takes unsigned values (u8 u5 u4 u3 u2), not %s",
                            vi->name);
        if (s->offset != QTK_OFFSET_ADD && s->offset != QTK_OFFSET_MIN && s->offset != QTK_OFFSET_ZERO)
            return qtk__err(QTK_E_SCHEME, "scheme offset %d is not a qtk_offset", (int)s->offset);
        qtk_dtype od = s->offset_dtype;
        bool ok = od == QTK_DTYPE_F32 || od == QTK_DTYPE_F16 || od == QTK_DTYPE_BF16 ||
                  (od == QTK_DTYPE_U8 && s->offset == QTK_OFFSET_ZERO);
        if (!ok)
            return qtk__err(QTK_E_SCHEME, "offset dtype '%s' is not one of f32, f16, bf16%s", qtk_dtype_name(od),
                            s->offset == QTK_OFFSET_ZERO ? ", u8" : " (u8 is for zero= points)");
        if (qtk_scheme_is_two_level(s))
            return qtk__err(QTK_E_SCHEME, "the affine mode takes one scale level (block= or tensor=), not two-level scales");
    } else if (s->offset_dtype != QTK_DTYPE_NONE) {
        return qtk__err(QTK_E_SCHEME, "an offset dtype (%s) is given but the mode is not affine",
                        qtk_dtype_name(s->offset_dtype));
    }
    if ((vi->bits == 3 || vi->bits == 5 || vi->bits == 6) && s->store == QTK_STORE_U32)
        return qtk__err(QTK_E_SCHEME,
                        "%u-bit fields (%s) have no u32 packing: store them native or packed (one per byte)", vi->bits,
                        vi->name);
    if (s->mode == QTK_MODE_LOOKUP && vi->bits != 2 && vi->bits != 4 && vi->bits != 8)
        return qtk__err(QTK_E_SCHEME, "lookup tables have 4, 16 or 256 entries: %s fields cannot index one", vi->name);
    return QTK_OK;
}

qtk_status qtk_scheme_validate(const qtk_scheme *s) {
    if (!s) return qtk__err(QTK_E_ARG, "scheme is NULL");
    if ((unsigned)s->value >= QTK_VALUE_COUNT_)
        return qtk__err(QTK_E_SCHEME, "scheme value %d is not a qtk_value", (int)s->value);
    if (s->mode != QTK_MODE_SYMMETRIC && s->mode != QTK_MODE_LOOKUP && s->mode != QTK_MODE_AFFINE &&
        s->mode != QTK_MODE_LATTICE)
        return qtk__err(QTK_E_SCHEME, "scheme mode %d is not a qtk_mode", (int)s->mode);
    if (s->store != QTK_STORE_U32 && s->store != QTK_STORE_NATIVE && s->store != QTK_STORE_PACKED &&
        s->store != QTK_STORE_GGML)
        return qtk__err(QTK_E_SCHEME, "scheme store %d is not a qtk_store", (int)s->store);
    if (s->pack_dim >= QTK_MAX_RANK)
        return qtk__err(QTK_E_SCHEME, "pack dimension %u is beyond the largest rank %d", s->pack_dim,
                        QTK_MAX_RANK);
    if ((s->store == QTK_STORE_NATIVE || s->store == QTK_STORE_GGML) && s->pack_dim != 0)
        return qtk__err(QTK_E_SCHEME, "store=%s has no pack dimension (got %u)",
                        s->store == QTK_STORE_NATIVE ? "native" : "ggml", s->pack_dim);
    if (s->block_rank > QTK_MAX_BLOCK_DIMS)
        return qtk__err(QTK_E_SCHEME, "block has %u dims; at most %d are allowed", s->block_rank,
                        QTK_MAX_BLOCK_DIMS);
    for (unsigned i = 0; i < s->block_rank; i++) {
        if (s->block[i] > QTK_BLOCK_MAX_EXTENT)
            return qtk__err(QTK_E_SCHEME, "block dim %u is %u; block dims are 1..%u or * (whole)", i,
                            (unsigned)s->block[i], QTK_BLOCK_MAX_EXTENT);
    }
    size_t tlen = strnlen(s->table, QTK_TABLE_NAME_MAX);
    if (tlen == QTK_TABLE_NAME_MAX) return qtk__err(QTK_E_SCHEME, "table name is not terminated");
    if (s->mode == QTK_MODE_LATTICE && s->store != QTK_STORE_GGML)
        return qtk__err(QTK_E_SCHEME,
                        "lattice codebooks (lattice=%s) exist only in ggml's block structs: store=ggml, as iq2_xxs iq2_xs "
                        "iq2_s iq3_xxs iq3_s iq1_s iq1_m (docs/lattice.md)",
                        s->table);
    if (s->store == QTK_STORE_GGML) {
        if (qtk__scheme_gfmt(s) < 0)
            return qtk__err(QTK_E_SCHEME, "store=ggml holds ggml's block structs, which are exactly: %s", GGML_FORMATS);
        return QTK_OK;
    }
    if (s->block_rank > 0 && !qtk__is_scale_dtype(s->block_dtype))
        return qtk__err(QTK_E_SCHEME, "block scale dtype '%s' is not a scale dtype (f32, f16, bf16, ue8m0, ue4m3)%s",
                        qtk_dtype_name(s->block_dtype),
                        qtk__dtype_is_int(s->block_dtype) ? "; integer block scales exist only under super= in "
                                                            "ggml's packings (store=ggml)"
                                                          : "");
    if (s->tensor_dtype != QTK_DTYPE_NONE && !qtk__is_scale_dtype(s->tensor_dtype))
        return qtk__err(QTK_E_SCHEME, "tensor scale dtype '%s' is not a scale dtype (f32, f16, bf16, ue8m0, ue4m3)",
                        qtk_dtype_name(s->tensor_dtype));
    if (qtk_scheme_is_two_level(s)) {
        if (s->block_dtype != QTK_DTYPE_F16 && s->block_dtype != QTK_DTYPE_UE4M3)
            return qtk__err(QTK_E_SCHEME,
                            "two-level scales need block dtype f16 or ue4m3 (got %s): with block= and "
                            "tensor= both given, the block scales are relative to an f32 global",
                            qtk_dtype_name(s->block_dtype));
        if (s->tensor_dtype != QTK_DTYPE_F32)
            return qtk__err(QTK_E_SCHEME, "two-level scales need tensor=f32 for the global scale (got tensor=%s)",
                            qtk_dtype_name(s->tensor_dtype));
    }
    qtk_status st = validate_extension(s);
    if (st) return st;
    if (s->mode == QTK_MODE_LOOKUP) {
        if (tlen == 0) return qtk__err(QTK_E_SCHEME, "lookup mode needs a table (table=NAME)");
        if (qtk__table_is_fit(s->table)) return QTK_OK; /* 2^bits entries fitted per tensor */
        float tab[256];
        size_t n = 0;
        st = qtk__table_find(s->table, tab, &n);
        if (st) return st;
        size_t want = (size_t)1 << values[s->value].bits;
        if (n != want)
            return qtk__err(QTK_E_SCHEME, "table '%s' has %zu entries but %s fields index %zu", s->table, n,
                            values[s->value].name, want);
    } else if (tlen != 0) {
        return qtk__err(QTK_E_SCHEME, "table '%s' given but the mode is %s", s->table,
                        s->mode == QTK_MODE_AFFINE ? "affine" : "symmetric");
    }
    return QTK_OK;
}

int qtk_scheme_equal(const qtk_scheme *a, const qtk_scheme *b) {
    if (!a || !b) return 0;
    qtk_scheme x = *a, y = *b;
    qtk__scheme_canonical_block(&x);
    qtk__scheme_canonical_block(&y);
    if (x.block_rank == 0 && x.tensor_dtype == QTK_DTYPE_NONE) x.tensor_dtype = QTK_DTYPE_F32;
    if (y.block_rank == 0 && y.tensor_dtype == QTK_DTYPE_NONE) y.tensor_dtype = QTK_DTYPE_F32;
    if (x.value != y.value || x.mode != y.mode || x.store != y.store) return 0;
    if (x.store != QTK_STORE_NATIVE && x.store != QTK_STORE_GGML && x.pack_dim != y.pack_dim) return 0;
    if (x.block_rank != y.block_rank || x.tensor_dtype != y.tensor_dtype) return 0;
    if (x.block_rank && x.block_dtype != y.block_dtype) return 0;
    for (unsigned i = 0; i < x.block_rank; i++)
        if (x.block[i] != y.block[i]) return 0;
    if ((x.mode == QTK_MODE_LOOKUP || x.mode == QTK_MODE_LATTICE) && strncmp(x.table, y.table, QTK_TABLE_NAME_MAX) != 0)
        return 0;
    if (x.mode == QTK_MODE_AFFINE && (x.offset != y.offset || x.offset_dtype != y.offset_dtype)) return 0;
    if (x.super_block != y.super_block || (x.super_block && x.super_dtype != y.super_dtype)) return 0;
    return 1;
}

/* store=ggml: the tensor is its rows of blocks along the last dimension (docs/affine.md §3). */
static qtk_status layout_ggml(const qtk_scheme *s, const size_t *shape, int rank, qtk_layout *L) {
    const qtk__gfmt_info *f = &gfmts[qtk__scheme_gfmt(s)];
    char sb[256];
    if (rank < 1)
        return qtk__err(QTK_E_SHAPE, "%s (ggml %s) needs a tensor of rank 1 or more, with the blocks along its last dimension",
                        f->preset, f->ggml);
    size_t last = shape[rank - 1];
    if (last % f->qk)
        return qtk__err(QTK_E_SHAPE,
                        "%s (ggml %s) packs %u elements a block along the last dimension, as ggml does; the tensor %s "
                        "has %zu there, not a multiple of %u",
                        f->preset, f->ggml, f->qk, qtk_shape_format(shape, rank, sb, sizeof sb), last, f->qk);
    L->fields_per_unit = f->qk;
    L->unit_bytes = f->bytes;
    L->pack_axis = rank - 1;
    size_t units = 1, n = 1;
    for (int i = 0; i < rank; i++) {
        L->storage_shape[i] = i == rank - 1 ? last / f->qk : shape[i];
        units *= L->storage_shape[i];
        L->block[i] = i == rank - 1 ? f->sub : 1;
        L->grid[i] = i == rank - 1 ? last / f->sub : shape[i];
        n *= L->grid[i];
    }
    if (!qtk__mul_ok(units, f->bytes, &L->value_bytes)) return qtk__err(QTK_E_SHAPE, "value bytes overflow size_t");
    L->n_scales = n;
    L->scale_dtype = s->block_dtype;
    L->offset_dtype = s->offset_dtype;
    L->scales_offset = L->offsets_offset = L->global_offset = L->table_offset = L->total_bytes = L->value_bytes;
    return QTK_OK;
}

qtk_status qtk_layout_compute(const qtk_scheme *s0, const size_t *shape, int rank, qtk_layout *L) {
    if (!L) return qtk__err(QTK_E_ARG, "qtk_layout_compute: the output layout is NULL");
    if (!s0) return qtk__err(QTK_E_ARG, "scheme is NULL");
    if (rank < 0 || rank > QTK_MAX_RANK)
        return qtk__err(QTK_E_SHAPE, "rank %d is outside 0..%d", rank, QTK_MAX_RANK);
    if (rank > 0 && !shape) return qtk__err(QTK_E_ARG, "shape is NULL for rank %d", rank);
    qtk_status st = qtk_scheme_validate(s0);
    if (st) return st;
    qtk_scheme s = *s0;
    qtk__scheme_canonical_block(&s);
    const qtk__value_info *vi = &values[s.value];

    memset(L, 0, sizeof *L);
    L->rank = rank;
    L->offset_dtype = QTK_DTYPE_NONE;
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        L->shape[i] = shape[i];
        if (!qtk__mul_ok(numel, shape[i], &numel)) {
            char sb[256];
            return qtk__err(QTK_E_SHAPE, "shape %s has more elements than fit in size_t",
                            qtk_shape_format(shape, rank, sb, sizeof sb));
        }
    }
    L->numel = numel;
    L->bits = vi->bits;
    if (s.store == QTK_STORE_GGML) return layout_ggml(&s, shape, rank, L);

    /* Storage: rank 0 is treated as [1]. */
    int erank = rank > 0 ? rank : 1;
    size_t eshape[QTK_MAX_RANK];
    for (int i = 0; i < erank; i++) eshape[i] = rank > 0 ? shape[i] : 1;
    switch (s.store) {
    case QTK_STORE_U32: L->fields_per_unit = 32 / vi->bits; L->unit_bytes = 4; break;
    case QTK_STORE_PACKED: L->fields_per_unit = s.value == QTK_VALUE_E2M1 ? 2 : 1; L->unit_bytes = 1; break;
    case QTK_STORE_NATIVE:
    default: L->fields_per_unit = 1; L->unit_bytes = 1; break;
    }
    if (s.store != QTK_STORE_NATIVE && s.pack_dim >= erank) {
        char sb[256];
        return qtk__err(QTK_E_SHAPE, "pack dimension %u does not exist in a rank-%d tensor %s (dims 0..%d, counted from the innermost)",
                        s.pack_dim, rank, qtk_shape_format(shape, rank, sb, sizeof sb), erank - 1);
    }
    L->pack_axis = L->fields_per_unit > 1 ? erank - 1 - s.pack_dim : -1;
    size_t units = 1;
    for (int i = 0; i < erank; i++) {
        size_t e = eshape[i];
        if (i == L->pack_axis) e = qtk__ceil_div(e, L->fields_per_unit);
        L->storage_shape[i] = e;
        units *= e; /* <= numel: cannot overflow */
    }
    if (!qtk__mul_ok(units, L->unit_bytes, &L->value_bytes))
        return qtk__err(QTK_E_SHAPE, "value bytes overflow size_t");

    /* Scales */
    if (s.block_rank > 0) {
        if ((int)s.block_rank > rank) {
            char bb[96], sb[256];
            block_str(&s, bb, sizeof bb);
            return qtk__err(QTK_E_SHAPE, "block %s has %u dims but the tensor %s has rank %d", bb,
                            s.block_rank, qtk_shape_format(shape, rank, sb, sizeof sb), rank);
        }
        size_t n = 1;
        for (int i = 0; i < rank; i++) {
            int bi = i - (rank - (int)s.block_rank);
            size_t b = bi < 0 ? 1 : s.block[bi];
            if (b == QTK_BLOCK_WHOLE) b = shape[i] > 0 ? shape[i] : 1;
            L->block[i] = b;
            L->grid[i] = qtk__ceil_div(shape[i], b);
            n *= L->grid[i];
        }
        L->n_scales = n;
        L->scale_dtype = s.block_dtype;
    } else {
        for (int i = 0; i < rank; i++) {
            L->block[i] = shape[i] > 0 ? shape[i] : 1;
            L->grid[i] = 1;
        }
        L->n_scales = 1;
        L->scale_dtype = s.tensor_dtype != QTK_DTYPE_NONE ? s.tensor_dtype : QTK_DTYPE_F32;
    }
    if (!qtk__mul_ok(L->n_scales, qtk__scale_size(L->scale_dtype), &L->scale_bytes))
        return qtk__err(QTK_E_SHAPE, "scale bytes overflow size_t");
    L->global_bytes = qtk_scheme_is_two_level(&s) ? 4 : 0;
    if (s.mode == QTK_MODE_LOOKUP) {
        L->table_entries = (size_t)1 << vi->bits;
        L->table_bytes = 4 * L->table_entries;
    }
    if (s.mode == QTK_MODE_AFFINE) {
        L->offset_dtype = s.offset_dtype;
        if (!qtk__mul_ok(L->n_scales, qtk__scale_size(L->offset_dtype), &L->offset_bytes))
            return qtk__err(QTK_E_SHAPE, "offset bytes overflow size_t");
    }
    L->scales_offset = L->value_bytes;
    if (!qtk__add_ok(L->value_bytes, L->scale_bytes, &L->offsets_offset) ||
        !qtk__add_ok(L->offsets_offset, L->offset_bytes, &L->global_offset))
        return qtk__err(QTK_E_SHAPE, "tensor bytes overflow size_t");
    L->table_offset = L->global_offset + L->global_bytes;
    if (!qtk__add_ok(L->table_offset, L->table_bytes, &L->total_bytes))
        return qtk__err(QTK_E_SHAPE, "tensor bytes overflow size_t");
    return QTK_OK;
}

double qtk_layout_bits_per_element(const qtk_layout *l) {
    if (!l || l->numel == 0) return 0.0;
    return (double)l->total_bytes * 8.0 / (double)l->numel;
}
