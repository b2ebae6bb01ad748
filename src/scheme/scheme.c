/* scheme.c — the scheme model: value facts, validation, and the derived layout. */
#include "scheme_internal.h"

#include "../numfmt/scalar.h"

#include <stdio.h>

static const qtk__value_info values[QTK_VALUE_COUNT_] = {
    [QTK_VALUE_Q8F] = {"q8f", 8, QTK__KIND_INT, -128, 127, 127.0f, 127.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q8S] = {"q8s", 8, QTK__KIND_INT, -127, 127, 127.0f, 127.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q4F] = {"q4f", 4, QTK__KIND_INT, -8, 7, 7.0f, 7.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q4S] = {"q4s", 4, QTK__KIND_INT, -7, 7, 7.0f, 7.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q2F] = {"q2f", 2, QTK__KIND_INT, -2, 1, 1.0f, 1.5f, QTK_DTYPE_NONE},
    [QTK_VALUE_Q2S] = {"q2s", 2, QTK__KIND_INT, -1, 1, 1.0f, 1.0f, QTK_DTYPE_NONE},
    [QTK_VALUE_E4M3] = {"e4m3", 8, QTK__KIND_FLOAT, 0, 0, 448.0f, 448.0f, QTK_DTYPE_E4M3},
    [QTK_VALUE_E5M2] = {"e5m2", 8, QTK__KIND_FLOAT, 0, 0, 57344.0f, 57344.0f, QTK_DTYPE_E5M2},
    [QTK_VALUE_E2M1] = {"e2m1", 4, QTK__KIND_FLOAT, 0, 0, 6.0f, 6.0f, QTK_DTYPE_E2M1},
};

const qtk__value_info *qtk__value(qtk_value v) { return &values[v]; }

unsigned qtk_value_bits(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].bits : 0; }
const char *qtk_value_name(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].name : "?"; }
float qtk_value_max(qtk_value v) { return (unsigned)v < QTK_VALUE_COUNT_ ? values[v].max : 0.0f; }

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

qtk_status qtk_scheme_validate(const qtk_scheme *s) {
    if (!s) return qtk__err(QTK_E_ARG, "scheme is NULL");
    if ((unsigned)s->value >= QTK_VALUE_COUNT_)
        return qtk__err(QTK_E_SCHEME, "scheme value %d is not a qtk_value", (int)s->value);
    if (s->mode != QTK_MODE_SYMMETRIC && s->mode != QTK_MODE_LOOKUP)
        return qtk__err(QTK_E_SCHEME, "scheme mode %d is not a qtk_mode", (int)s->mode);
    if (s->store != QTK_STORE_U32 && s->store != QTK_STORE_NATIVE && s->store != QTK_STORE_PACKED)
        return qtk__err(QTK_E_SCHEME, "scheme store %d is not a qtk_store", (int)s->store);
    if (s->pack_dim >= QTK_MAX_RANK)
        return qtk__err(QTK_E_SCHEME, "pack dimension %u is beyond the largest rank %d", s->pack_dim,
                        QTK_MAX_RANK);
    if (s->store == QTK_STORE_NATIVE && s->pack_dim != 0)
        return qtk__err(QTK_E_SCHEME, "store=native has no pack dimension (got %u)", s->pack_dim);
    if (s->block_rank > QTK_MAX_BLOCK_DIMS)
        return qtk__err(QTK_E_SCHEME, "block has %u dims; at most %d are allowed", s->block_rank,
                        QTK_MAX_BLOCK_DIMS);
    for (unsigned i = 0; i < s->block_rank; i++) {
        if (s->block[i] > QTK_BLOCK_MAX_EXTENT)
            return qtk__err(QTK_E_SCHEME, "block dim %u is %u; block dims are 1..%u or * (whole)", i,
                            (unsigned)s->block[i], QTK_BLOCK_MAX_EXTENT);
    }
    if (s->block_rank > 0 && !qtk__is_scale_dtype(s->block_dtype))
        return qtk__err(QTK_E_SCHEME, "block scale dtype '%s' is not a scale dtype (f32, f16, bf16, ue8m0, ue4m3)",
                        qtk_dtype_name(s->block_dtype));
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
    size_t tlen = strnlen(s->table, QTK_TABLE_NAME_MAX);
    if (tlen == QTK_TABLE_NAME_MAX) return qtk__err(QTK_E_SCHEME, "table name is not terminated");
    if (s->mode == QTK_MODE_LOOKUP) {
        if (tlen == 0) return qtk__err(QTK_E_SCHEME, "lookup mode needs a table (table=NAME)");
        if (qtk__table_is_fit(s->table)) return QTK_OK; /* 2^bits entries fitted per tensor */
        float tab[256];
        size_t n = 0;
        qtk_status st = qtk__table_find(s->table, tab, &n);
        if (st) return st;
        size_t want = (size_t)1 << values[s->value].bits;
        if (n != want)
            return qtk__err(QTK_E_SCHEME, "table '%s' has %zu entries but %s fields index %zu", s->table, n,
                            values[s->value].name, want);
    } else if (tlen != 0) {
        return qtk__err(QTK_E_SCHEME, "table '%s' given but the mode is symmetric", s->table);
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
    if (x.store != QTK_STORE_NATIVE && x.pack_dim != y.pack_dim) return 0;
    if (x.block_rank != y.block_rank || x.tensor_dtype != y.tensor_dtype) return 0;
    if (x.block_rank && x.block_dtype != y.block_dtype) return 0;
    for (unsigned i = 0; i < x.block_rank; i++)
        if (x.block[i] != y.block[i]) return 0;
    if (x.mode == QTK_MODE_LOOKUP && strncmp(x.table, y.table, QTK_TABLE_NAME_MAX) != 0) return 0;
    return 1;
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

    /* Storage: rank 0 is treated as [1]. */
    int erank = rank > 0 ? rank : 1;
    size_t eshape[QTK_MAX_RANK];
    for (int i = 0; i < erank; i++) eshape[i] = rank > 0 ? shape[i] : 1;
    switch (s.store) {
    case QTK_STORE_U32: L->fields_per_unit = 32 / vi->bits; L->unit_bytes = 4; break;
    case QTK_STORE_PACKED: L->fields_per_unit = s.value == QTK_VALUE_E2M1 ? 2 : 1; L->unit_bytes = 1; break;
    case QTK_STORE_NATIVE: L->fields_per_unit = 1; L->unit_bytes = 1; break;
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
    L->scales_offset = L->value_bytes;
    if (!qtk__add_ok(L->value_bytes, L->scale_bytes, &L->global_offset))
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
