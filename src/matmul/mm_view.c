/* mm_view.c — how the matmul kernels see a weight tensor: its scale geometry, whether a
 * tensor row is one run of fields (the stream view) and how a field becomes a value, and
 * whether the values are integers (the integer view). */
#include "mm.h"

#include <math.h>

/* Value of every 4-bit (or 2-bit, repeated) code, from the reference codec. */
static void fill_table(qtk__mmw *w, const qtk__plan *p) {
    unsigned n = p->bits >= 4 ? 16u : 1u << p->bits;
    for (unsigned i = 0; i < 16; i++) w->table[i] = qtk__decode_elem(p, i % n);
}

/* The integer view: value(code) = ival[code] * 2^-ishift with ival in [-128, 127], for the
 * smallest such shift (0..7); false when the values are not all of that form. */
static bool integer_view(qtk__mmw *w, const qtk__plan *p) {
    if (!p->lookup && p->kind == QTK__KIND_INT) {
        if (w->kind != QTK__MMK_I8)
            for (unsigned i = 0; i < 16; i++) w->ival[i] = (int8_t)w->table[i];
        w->ishift = 0;
        return true;
    }
    if (w->kind != QTK__MMK_T8 && w->kind != QTK__MMK_T4 && w->kind != QTK__MMK_T2) return false;
    for (int e = 0; e <= 7; e++) {
        bool ok = true;
        for (unsigned i = 0; i < 16 && ok; i++) {
            float v = ldexpf(w->table[i], e);
            ok = v == truncf(v) && v >= -128.0f && v <= 127.0f;
        }
        if (ok) {
            for (unsigned i = 0; i < 16; i++) w->ival[i] = (int8_t)ldexpf(w->table[i], e);
            w->ishift = e;
            return true;
        }
    }
    return false;
}

void qtk__mmw_init(qtk__mmw *w, const qtk__plan *p, const uint8_t *bytes) {
    memset(w, 0, sizeof *w);
    w->p = p;
    w->vals = bytes;
    w->sb = bytes + p->L.scales_offset;
    w->sdt = p->L.scale_dtype;
    w->ssz = qtk__scale_size(w->sdt);
    w->two_level = p->two_level;
    w->global = p->L.global_bytes ? qtk__bits_f32(qtk__ld32(bytes + p->L.global_offset)) : 1.0f;
    w->R = p->L.shape[0];
    w->C = p->L.shape[1];
    /* block extents of an empty dimension are 0: keep divisions defined */
    w->br = p->L.block[0] ? p->L.block[0] : 1;
    w->bc = p->L.block[1] ? p->L.block[1] : 1;
    w->gc = p->L.grid[1];

    /* stream view: one field per unit, or fields packed along the last axis (the affine mode:
     * none, the generic path decodes it with its offsets) */
    w->kind = QTK__MMK_NONE;
    if (p->affine && p->offk == QTK_OFFSET_ZERO && p->L.offset_dtype == QTK_DTYPE_U8 && p->unsig &&
        (p->bits == 4 || p->bits == 2) && p->fpu > 1 && p->L.pack_axis == 1 && !p->two_level) {
        /* zero points (GPTQ, AWQ): the codes as unsigned integers for the integer path, which
         * subtracts z x Σq; value = s (q - z) */
        w->per = 8u / p->bits;
        w->row_bytes = p->L.storage_shape[1] * p->unit_bytes;
        w->kind = p->bits == 4 ? QTK__MMK_T4 : QTK__MMK_T2;
        for (unsigned i = 0; i < 16; i++) {
            w->table[i] = (float)(i % (1u << p->bits));
            w->ival[i] = (int8_t)(i % (1u << p->bits));
        }
        w->pad = 0; /* code 0 meets x = 0 */
        w->int_ok = true;
        w->ishift = 0;
        w->zb = bytes + p->L.offsets_offset;
        for (size_t g = 0; g < p->L.n_scales; g++) w->zmax = w->zb[g] > w->zmax ? w->zb[g] : w->zmax;
        return;
    }
    if (p->affine || !(p->fpu == 1 || p->L.pack_axis == 1)) return;
    unsigned cw = p->fpu == 1 ? 8u : p->bits;
    w->per = 8u / cw;
    w->row_bytes = p->L.storage_shape[1] * p->unit_bytes;
    if (cw == 8) {
        if (!p->lookup && p->kind == QTK__KIND_INT) w->kind = QTK__MMK_I8;
        else if (p->lookup && p->bits == 8) w->kind = QTK__MMK_NONE; /* a 256-entry table */
        else if (!p->lookup && p->fmt == QTK_DTYPE_E4M3) w->kind = QTK__MMK_E4M3;
        else if (!p->lookup && p->fmt == QTK_DTYPE_E5M2) w->kind = QTK__MMK_E5M2;
        else w->kind = QTK__MMK_T8; /* native e2m1, native 4- or 2-bit lookup */
    } else {
        w->kind = cw == 4 ? QTK__MMK_T4 : QTK__MMK_T2;
    }
    if (w->kind == QTK__MMK_NONE) return;
    if (w->kind == QTK__MMK_T8 || w->kind == QTK__MMK_T4 || w->kind == QTK__MMK_T2) {
        fill_table(w, p);
        /* The fields past a row's end (the padding of its last byte, and of the kernels'
         * last step) meet x = 0; their code must give a finite w' (0 x inf would be NaN):
         * the code of least |value| (the value a table's code 0 has may overflow under the
         * row's scale when the row's own codes do not). */
        unsigned z = 0, n = w->kind == QTK__MMK_T2 ? 4u : 16u;
        for (unsigned i = 1; i < n; i++)
            if (fabsf(w->table[i]) < fabsf(w->table[z])) z = i;
        w->pad = (uint8_t)(w->kind == QTK__MMK_T4 ? z * 0x11u : w->kind == QTK__MMK_T2 ? z * 0x55u : z);
    }
    w->int_ok = integer_view(w, p);
}

void qtk__mmw_init_gb(qtk__mmw *w, const qtk__gb_fmt *F, const uint8_t *bytes, size_t R, size_t C) {
    memset(w, 0, sizeof *w);
    w->gb = F;
    w->vals = bytes;
    w->R = R, w->C = C;
    w->br = 1, w->bc = F->sub, w->gc = C / F->sub;
    w->kind = QTK__MMK_NONE;
    w->row_bytes = C / F->qk * F->bytes;
    w->global = 1.0f;
}

bool qtk__mm_permute_steps(const float *x, size_t k, const uint16_t *perm, size_t sf, float *dst, size_t kp) {
    /* the exact kernels' shortcut multiplies x by integers up to 2^31: it needs |x| < 2^90 */
    bool ok = true;
    for (size_t i = 0; i < k; i++) ok = ok && fabsf(x[i]) < 0x1p90f;
    if (!sf) {
        memcpy(dst, x, k * sizeof(float));
        for (size_t i = k; i < kp; i++) dst[i] = 0.0f;
        return ok;
    }
    for (size_t c = 0; c < kp; c += sf)
        for (size_t j = 0; j < sf; j++) {
            size_t e = c + perm[j];
            dst[c + j] = e < k ? x[e] : 0.0f;
        }
    return ok;
}
