/* plan.h — everything a kernel needs to know about one (scheme, shape) pair, and the
 * element-level reference codecs that define qtk's bits.
 *
 * A tensor is walked as `rows` rows of `inner` elements (the last dimension). For a row,
 * qtk__plan_row gives the index of its first scale group, the storage unit of its first
 * field and, when fields are packed along another axis, the slot the row occupies in
 * each unit. Along the row: scale = scale_base + j / blk_last; when packed along the last
 * axis, unit = unit_base + j / fpu and slot = j % fpu, otherwise unit = unit_base + j. */
#ifndef QTK_PLAN_H
#define QTK_PLAN_H

#include "../numfmt/scalar.h"
#include "../scheme/scheme_internal.h"

#include <math.h>

typedef struct qtk__plan {
    qtk_scheme s; /* canonical block dims */
    qtk_layout L;
    const qtk__value_info *vi;
    int erank;                    /* max(rank, 1) */
    size_t eshape[QTK_MAX_RANK];  /* shape, [1] for rank 0 */
    size_t inner, rows;           /* row length and row count (rows = 0 when numel = 0) */
    size_t gstride[QTK_MAX_RANK]; /* row-major strides of the block grid */
    size_t sstride[QTK_MAX_RANK]; /* row-major strides of the storage shape (units) */
    size_t blk_last;              /* block extent along the last axis */
    bool pack_last;               /* fields packed along the last axis (fpu > 1) */
    unsigned fpu, unit_bytes, bits;
    uint32_t mask;                /* (1 << bits) - 1 */
    bool native_int;              /* integer fields one per byte (native, packed): sign-extended
                                   * (unsigned values: zero-extended, the code itself) */
    bool unsig;                   /* unsigned integer value (the affine mode's fields) */
    bool affine;                  /* an offset per scale group (docs/affine.md) */
    qtk_offset offk;              /* how it enters the value */
    qtk_dtype odt;                /* its dtype */
    bool lookup;
    qtk__value_kind kind;         /* kind of the value (lookup fields are indices whatever it is) */
    float lo, hi;                 /* integer range as floats */
    float fmax;                   /* minifloat largest finite value */
    qtk_dtype fmt;                /* minifloat format */
    bool two_level;
    float div;                    /* raw scale = alpha / div: (hi - lo) / 2, or max |table| */
    size_t prefetch;              /* encode: prefetch input this many elements ahead (0: none) */
    float dmax;                   /* two-level: largest value of the block scale dtype */
    /* lookup */
    bool fit;                     /* table=fit: the entries are fitted to the tensor quantized */
    size_t table_n;
    float tmin, tmax;
    uint32_t zero_code;           /* field for an element whose effective scale is 0 */
    float table[256];             /* lookup entries (last: only table_n are initialised) */
    /* tables of more than 16 entries: the distinct entries ascending, each with the lowest
     * table index holding it (the nearest entry is then found by bisection) */
    uint16_t n_sorted;
    uint8_t sorted_idx[256];
    float sorted[256];
} qtk__plan;

typedef struct qtk__row {
    size_t scale_base, unit_base;
    unsigned slot;
} qtk__row;

/* Builds the plan. table: the lookup table to use (table_n = 2^bits entries), or NULL to
 * take the scheme's named table from the registry. */
QTK_INTERNAL qtk_status qtk__plan_init(qtk__plan *p, const qtk_scheme *s, const size_t *shape, int rank,
                                       const float *table);
/* The same from a layout already computed for s. For table=fit without a table, the plan
 * holds the fit's seed (fit = true) until qtk__plan_set_table gives it the fitted entries. */
QTK_INTERNAL qtk_status qtk__plan_from_layout(qtk__plan *p, const qtk_scheme *s, const qtk_layout *L,
                                              const float *table);
/* Replaces a lookup plan's table (table_n entries) and what derives from it. */
QTK_INTERNAL void qtk__plan_set_table(qtk__plan *p, const float *table);

static inline void qtk__plan_row(const qtk__plan *p, size_t r, qtk__row *ri) {
    size_t sb = 0, ub = 0, rem = r;
    unsigned slot = 0;
    for (int i = p->erank - 2; i >= 0; i--) {
        size_t n = p->eshape[i], c = rem % n;
        rem /= n;
        sb += (c / p->L.block[i]) * p->gstride[i];
        if (i == p->L.pack_axis) {
            ub += (c / p->fpu) * p->sstride[i];
            slot = (unsigned)(c % p->fpu);
        } else {
            ub += c * p->sstride[i];
        }
    }
    ri->scale_base = sb;
    ri->unit_base = ub;
    ri->slot = slot;
}

/* ---- element codecs (the reference) ---- */

/* Where q lies against the midpoint of the f32 values a < b, exactly: -1 below (nearer a),
 * 0 on it, 1 above (nearer b). 2q is exact in double; a + b is s + e exactly (TwoSum), and a
 * double q2 != s is on the same side of s + e as of s, since |e| is at most half the spacing
 * of doubles at s. (Distances |q - a| in double are not exact: 0.5 + 2^-143 rounds to 0.5.) */
static inline int qtk__mid_side(float q, float a, float b) {
    double x = a, y = b, s = x + y, yy = s - x, e = (x - (s - yy)) + (y - yy), q2 = 2.0 * (double)q;
    if (q2 != s) return q2 < s ? -1 : 1;
    return e > 0 ? -1 : e < 0 ? 1 : 0;
}

/* Index of the table entry nearest q (lowest index on a tie), distances compared exactly.
 * Up to 16 entries: a scan. Larger tables: bisection over the distinct entries ascending;
 * the nearest is one of the two around q, and on a tie (q on their exact midpoint) the
 * lower table index, which is what the scan gives (tests/test_simd.c compares the two). */
static inline uint32_t qtk__lookup_scan(const qtk__plan *p, float qc) {
    uint32_t best = 0;
    for (size_t i = 1; i < p->table_n; i++) {
        float t = p->table[i], b = p->table[best];
        if (t == b) continue; /* a tie: the lower index stays */
        int side = t < b ? qtk__mid_side(qc, t, b) : qtk__mid_side(qc, b, t);
        if (t < b ? side < 0 : side > 0) best = (uint32_t)i;
    }
    return best;
}

static inline uint32_t qtk__lookup_nearest(const qtk__plan *p, float q) {
    float qc = q < p->tmin ? p->tmin : q > p->tmax ? p->tmax : q;
    if (!p->n_sorted) return qtk__lookup_scan(p, qc);
    /* the first sorted entry >= qc (qc is within [tmin, tmax]: one exists) */
    size_t lo = 0, hi = p->n_sorted - 1u;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->sorted[mid] < qc) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || p->sorted[lo] == qc) return p->sorted_idx[lo];
    uint32_t a = p->sorted_idx[lo - 1], b = p->sorted_idx[lo];
    int side = qtk__mid_side(qc, p->sorted[lo - 1], p->sorted[lo]);
    return side < 0 ? a : side > 0 ? b : (a < b ? a : b);
}

/* The field (bits wide, unsigned code) for input x under effective scale e. */
static inline uint32_t qtk__encode_elem(const qtk__plan *p, float x, float e) {
    if (e == 0.0f) return p->zero_code;
    float q = x / e;
    if (p->lookup) return qtk__lookup_nearest(p, q);
    if (p->kind == QTK__KIND_INT) {
        float r = roundf(q);
        r = r < p->lo ? p->lo : r > p->hi ? p->hi : r;
        return (uint32_t)(int32_t)r & p->mask;
    }
    float y = q < -p->fmax ? -p->fmax : q > p->fmax ? p->fmax : q;
    switch (p->fmt) {
    case QTK_DTYPE_E4M3: return qtk__f32_to_e4m3_sat(y);
    case QTK_DTYPE_E5M2: return qtk__f32_to_e5m2_sat(y);
    default: return qtk__f32_to_e2m1_sat(y);
    }
}

/* The value of a field (before scaling). */
static inline float qtk__decode_elem(const qtk__plan *p, uint32_t code) {
    if (p->lookup) return p->table[code];
    if (p->kind == QTK__KIND_INT) {
        if (p->unsig) return (float)code;
        int32_t v = (int32_t)(code << (32 - p->bits)) >> (32 - p->bits);
        return (float)v;
    }
    switch (p->fmt) {
    case QTK_DTYPE_E4M3: return qtk__e4m3_to_f32((uint8_t)code);
    case QTK_DTYPE_E5M2: return qtk__e5m2_to_f32((uint8_t)code);
    default: return qtk__e2m1_to_f32((uint8_t)code);
    }
}

/* ---- the affine mode (docs/affine.md §2) ---- */

/* The field for x under stored scale s and stored offset o (o, m or z as the scheme stores
 * it). Each operation is its own statement: no compiler contracts them. */
static inline uint32_t qtk__encode_affine(const qtk__plan *p, float x, float s, float o) {
    if (s == 0.0f) return 0;
    float t;
    if (p->offk == QTK_OFFSET_ADD) {
        t = x - o;
        t = t / s;
    } else if (p->offk == QTK_OFFSET_MIN) {
        t = x + o;
        t = t / s;
    } else {
        t = x / s;
        t = t + o;
    }
    float r = roundf(t);
    r = r < 0.0f ? 0.0f : r > p->hi ? p->hi : r;
    return (uint32_t)r;
}

/* The value of field `code` under stored scale s and stored offset o. */
static inline float qtk__decode_affine(const qtk__plan *p, uint32_t code, float s, float o) {
    float q = (float)code, t;
    if (p->offk == QTK_OFFSET_ZERO) {
        t = q - o;
        return s * t;
    }
    t = s * q;
    return p->offk == QTK_OFFSET_ADD ? t + o : t - o;
}

/* ---- fields in storage (the pack room's primitives) ---- */

/* OR a field into zero-initialised storage. */
static inline void qtk__field_put(const qtk__plan *p, uint8_t *vals, size_t unit, unsigned slot, uint32_t code) {
    if (p->native_int) {
        /* sign-extend the bits-wide field to a byte (unsigned fields: the code) */
        vals[unit] = p->unsig ? (uint8_t)code : (uint8_t)((int32_t)(code << (32 - p->bits)) >> (32 - p->bits));
        return;
    }
    unsigned bit = slot * p->bits;
    vals[unit * p->unit_bytes + bit / 8] |= (uint8_t)(code << (bit % 8));
}

static inline uint32_t qtk__field_get(const qtk__plan *p, const uint8_t *vals, size_t unit, unsigned slot) {
    if (p->native_int) return vals[unit] & p->mask;
    unsigned bit = slot * p->bits;
    return (uint32_t)(vals[unit * p->unit_bytes + bit / 8] >> (bit % 8)) & p->mask;
}

#endif
