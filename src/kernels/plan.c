/* plan.c — derives a kernel plan from a scheme and a shape. */
#include "plan.h"

#include <stddef.h>

qtk_status qtk__plan_init(qtk__plan *p, const qtk_scheme *s, const size_t *shape, int rank, const float *table) {
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    return qtk__plan_from_layout(p, s, &L, table);
}

qtk_status qtk__plan_from_layout(qtk__plan *p, const qtk_scheme *s, const qtk_layout *L, const float *table) {
    qtk_status st;
    const size_t *shape = L->shape;
    int rank = L->rank;
    /* everything but the lookup table (1 KiB, filled below when used) */
    memset(p, 0, offsetof(qtk__plan, table));
    p->L = *L;
    p->s = *s;
    qtk__scheme_canonical_block(&p->s);
    p->vi = qtk__value(s->value);
    p->erank = rank > 0 ? rank : 1;
    for (int i = 0; i < p->erank; i++) p->eshape[i] = rank > 0 ? shape[i] : 1;
    if (rank == 0) p->L.block[0] = 1;
    p->inner = p->eshape[p->erank - 1];
    p->rows = p->inner ? p->L.numel / p->inner : 0;
    size_t g = 1, u = 1;
    for (int i = p->erank - 1; i >= 0; i--) {
        p->gstride[i] = g;
        p->sstride[i] = u;
        g *= rank > 0 ? p->L.grid[i] : 1;
        u *= p->L.storage_shape[i];
    }
    p->blk_last = p->L.block[p->erank - 1];
    p->fpu = p->L.fields_per_unit;
    p->unit_bytes = p->L.unit_bytes;
    p->bits = p->L.bits;
    p->mask = (1u << p->bits) - 1u;
    p->pack_last = p->fpu > 1 && p->L.pack_axis == p->erank - 1;
    p->lookup = s->mode == QTK_MODE_LOOKUP;
    p->kind = p->vi->kind;
    /* SPEC §4: native and packed stores (other than e2m1's two per byte) hold one field per
     * byte, integer fields sign-extended to int8 */
    p->native_int = s->store != QTK_STORE_U32 && p->fpu == 1 && p->kind == QTK__KIND_INT && !p->lookup;
    p->unsig = p->vi->unsig;
    p->affine = s->mode == QTK_MODE_AFFINE;
    p->offk = s->offset;
    p->odt = p->affine ? s->offset_dtype : QTK_DTYPE_NONE;
    p->lo = (float)p->vi->lo;
    p->hi = (float)p->vi->hi;
    p->fmax = p->vi->max;
    p->fmt = p->vi->fmt;
    p->two_level = qtk_scheme_is_two_level(s);
    if (p->lookup) {
        size_t n = 0;
        float seed[256];
        if (table) {
            n = p->L.table_entries;
            memcpy(seed, table, n * sizeof(float));
        } else if (qtk__table_is_fit(s->table)) {
            n = p->L.table_entries;
            qtk__table_fit_seed(seed, n);
            p->fit = true;
        } else {
            st = qtk__table_find(s->table, seed, &n);
            if (st) return st;
        }
        p->table_n = n;
        qtk__plan_set_table(p, seed);
    } else {
        p->div = p->vi->half_range; /* exact: alpha / div == 2 alpha / (b - a) */
    }
    p->dmax = p->two_level ? qtk_fmt_max(s->block_dtype) : 1.0f;
    return QTK_OK;
}

void qtk__plan_set_table(qtk__plan *p, const float *table) {
    size_t n = p->table_n;
    memcpy(p->table, table, n * sizeof(float));
    p->tmin = p->tmax = p->table[0];
    for (size_t i = 1; i < n; i++) {
        if (p->table[i] < p->tmin) p->tmin = p->table[i];
        if (p->table[i] > p->tmax) p->tmax = p->table[i];
    }
    /* larger tables: the distinct entries ascending, each with its lowest index (an
     * insertion sort of at most 256; entries are finite, checked where tables come from) */
    p->n_sorted = 0;
    if (n > 16) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            float v = p->table[i];
            size_t k = m;
            while (k > 0 && p->sorted[k - 1] > v) k--;
            if (k > 0 && p->sorted[k - 1] == v) continue; /* held by a lower index already */
            memmove(p->sorted + k + 1, p->sorted + k, (m - k) * sizeof(float));
            memmove(p->sorted_idx + k + 1, p->sorted_idx + k, (m - k) * sizeof(uint8_t));
            p->sorted[k] = v;
            p->sorted_idx[k] = (uint8_t)i;
            m++;
        }
        p->n_sorted = (uint16_t)m;
    }
    p->zero_code = qtk__lookup_nearest(p, 0.0f);
    float a = fabsf(p->tmin), b = fabsf(p->tmax);
    p->div = a > b ? a : b;
}
