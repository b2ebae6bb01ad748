/* simd_body.h — the vector kernels, written once against the vocabulary of
 * simd_avx2.h / simd_avx512.h and compiled at each width by avx2.c and avx512.c.
 *
 * Every function computes exactly what ref.c computes (tests hold them to the same bits):
 *   - integer fields: trunc, then +-1 when the dropped fraction is >= 0.5 (round half away
 *     from zero, like roundf), clamp;
 *   - minifloat fields: round to nearest even by integer arithmetic on the f32 bits (a
 *     vector twin of qtk__mf_round, with a per-lane shift for subnormal targets);
 *   - lookup fields: the count of midpoint thresholds below the quotient, each threshold
 *     the f32 that decides "nearest, lowest index on a tie" exactly;
 *   - stored scales: the smallest code not below the raw scale ("ceil on the grid");
 *   - decoding: a 16-entry table lookup for 2/4-bit fields, exact conversions for 8-bit.
 * A kernel returns false for layouts it does not handle; the caller then runs ref.c. */

#include "kernels.h"

#include <math.h>
#include <stdint.h>

#define QTK_ALWAYS_INLINE __attribute__((always_inline)) inline

/* ---- lane helpers ---- */

static inline vm vi_ge_u24(vi a, vi b) { return vm_not(vi_gt(b, a)); } /* values < 2^31 */

/* ---- how a row's fields sit in memory ---- */

typedef enum {
    FIELDS_BYTE,    /* one field per byte, consecutive (native, packed 1/byte, u32 of 8-bit) */
    FIELDS_NIBBLE,  /* two 4-bit fields per byte, consecutive, first low */
    FIELDS_CRUMB,   /* four 2-bit fields per byte, consecutive */
    FIELDS_STRIDED, /* one field per storage unit (packed along another axis), at a fixed slot */
} field_mode;

static bool field_mode_of(const qtk__plan *p, field_mode *m) {
    /* the extension's values (unsigned, 3-, 5- and 6-bit) and the affine mode: the reference */
    if (p->unsig || p->affine || (p->bits != 2 && p->bits != 4 && p->bits != 8)) return false;
    if (p->fpu == 1) {
        *m = FIELDS_BYTE;
        return true;
    }
    if (!p->pack_last) {
        *m = FIELDS_STRIDED;
        return true;
    }
    /* packed along the last axis: bytes of the row hold consecutive fields */
    switch (p->bits) {
    case 8: *m = FIELDS_BYTE; break;
    case 4: *m = FIELDS_NIBBLE; break;
    default: *m = FIELDS_CRUMB; break;
    }
    /* block segments must start on a byte */
    size_t per_byte = 8 / p->bits;
    return p->blk_last >= p->inner || p->blk_last % per_byte == 0;
}

/* ---- vector element codecs ---- */

/* round half away from zero: add the largest float below 1/2 with q's sign, truncate. The
 * sum rounds up to the next integer exactly when q's fraction is >= 1/2 (for |q| >= 2^23
 * it leaves q unchanged), so this is roundf for every f32. */
static inline vi enc_int(vf q, vf lo, vf hi) {
    vf h = vi_bits(vi_or(vi_and(vf_bits(q), vi_set1((int)0x80000000u)), vi_set1(0x3effffff)));
    vf r = vf_min(vf_max(vf_trunc(vf_add(q, h)), lo), hi);
    return vi_from_f(r);
}

/* Round |y| (finite, within range) to a minifloat with M mantissa bits and exponent bias
 * `bias`, ties to even, by the FPU itself: adding C = 2^(max(e, emin) + 23 - M) leaves
 * exactly the bits the format keeps (the quantum of that binade, or of the subnormals),
 * rounded to nearest even; subtracting C gives |y| on the format's grid, exactly. The code
 * is then read off the result's bits. The sign goes to bit sbit (-0 included). */
static inline vi enc_mf(vf y, int M, int bias, int sbit) {
    vi b = vf_bits(y);
    vi sign = vi_sll(vi_srl(b, 31), sbit);
    vf a = vi_bits(vi_and(b, vi_set1(0x7fffffff)));
    const int emin = 1 - bias, nmin = (emin + 127) << 23;
    vi e = vi_max(vi_and(b, vi_set1(0x7f800000)), vi_set1(nmin));
    vf c = vi_bits(vi_add(e, vi_set1((23 - M) << 23)));
    vf yr = vf_sub(vf_add(a, c), c);
    vi rb = vf_bits(yr);
    vi normal = vi_sub(vi_srl(rb, 23 - M), vi_set1((127 - bias) << M));
    vi subn = vi_from_f(vf_mul(yr, vf_set1(ldexpf(1.0f, M - emin))));
    vi code = vi_blend(vi_gt(rb, vi_set1(nmin - 1)), subn, normal);
    return vi_or(code, sign);
}

/* decode an 8-bit minifloat code (in lanes) exactly */
static inline vf dec_e4m3(vi c) {
    vi mag = vi_and(c, vi_set1(0x7f));
    vi sign = vi_sll(vi_and(c, vi_set1(0x80)), 24);
    vi e = vi_srl(mag, 3), m = vi_and(mag, vi_set1(7));
    vf normal = vi_bits(vi_or(vi_sll(vi_add(e, vi_set1(120)), 23), vi_sll(m, 20)));
    vf sub = vf_mul(vf_from_i(m), vf_set1(0x1p-9f));
    vf v = vf_blend(vi_eq(e, vi_zero()), normal, sub);
    v = vf_blend(vi_eq(mag, vi_set1(0x7f)), v, vi_bits(vi_set1(0x7fc00000)));
    return vi_bits(vi_or(vf_bits(v), sign));
}

static inline vf dec_e5m2(vi c) {
    vi mag = vi_and(c, vi_set1(0x7f));
    vi sign = vi_sll(vi_and(c, vi_set1(0x80)), 24);
    vi e = vi_srl(mag, 2), m = vi_and(mag, vi_set1(3));
    vf normal = vi_bits(vi_or(vi_sll(vi_add(e, vi_set1(112)), 23), vi_sll(m, 21)));
    vf sub = vf_mul(vf_from_i(m), vf_set1(0x1p-16f));
    vf v = vf_blend(vi_eq(e, vi_zero()), normal, sub);
    vi special = vi_or(vi_set1(0x7f800000), vi_blend(vi_gt(mag, vi_set1(0x7c)), vi_zero(), vi_set1(0x400000)));
    v = vf_blend(vi_gt(mag, vi_set1(0x7b)), v, vi_bits(special));
    return vi_bits(vi_or(vf_bits(v), sign));
}

/* ---- lookup encoding by thresholds ---- */

typedef struct {
    int n;             /* thresholds */
    float t[255];      /* q > t[k] counts one step past sorted entry k */
    float perm[256];   /* sorted position -> table index (as floats) */
    lut16 lut;         /* perm for tables of <= 16 entries */
    lut16 tl;          /* the thresholds, padded with +inf to 16 */
} lookup_enc;

/* Sorts the table; returns false if it has equal entries (the reference then decides ties). */
static bool lookup_enc_init(const qtk__plan *p, lookup_enc *le) {
    size_t n = p->table_n;
    if (n > 16) return false;
    int idx[16];
    for (size_t i = 0; i < n; i++) idx[i] = (int)i;
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && p->table[idx[k - 1]] > p->table[idx[k]]; k--) {
            int tmp = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = tmp;
        }
    float permf[16] = {0};
    for (size_t i = 0; i < n; i++) permf[i] = (float)idx[i];
    for (size_t k = 0; k + 1 < n; k++) {
        float a = p->table[idx[k]], b = p->table[idx[k + 1]];
        if (!(a < b)) return false;
        /* t[k]: the largest f32 that stays with a (below the exact midpoint, or on it when a
         * has the lower table index), found from a float near it with the reference's test */
        bool up_on_tie = idx[k + 1] < idx[k];
        float m = (float)(((double)a + (double)b) / 2);
        if (m < a) m = a;
        if (m > b) m = b;
#define QTK__GOES_UP(q) (qtk__mid_side((q), a, b) > 0 || (qtk__mid_side((q), a, b) == 0 && up_on_tie))
        while (m > a && QTK__GOES_UP(m)) m = nextafterf(m, -INFINITY);
        while (m < b && !QTK__GOES_UP(nextafterf(m, INFINITY))) m = nextafterf(m, INFINITY);
#undef QTK__GOES_UP
        le->t[k] = m;
    }
    le->n = (int)n - 1;
    memcpy(le->perm, permf, sizeof permf);
    le->lut = lut16_load(le->perm);
    float tp[16];
    for (int k = 0; k < 16; k++) tp[k] = k < le->n ? le->t[k] : INFINITY;
    le->tl = lut16_load(tp);
    return true;
}

/* count of thresholds below q, by a 4-step binary search (thresholds padded with +inf) */
static inline vi enc_lookup(const lookup_enc *le, vf q) {
    vi c = vi_zero();
    for (int step = 8; step >= 1; step >>= 1) {
        vf t = vf_lut16(le->tl, vi_add(c, vi_set1(step - 1)));
        vm m = vf_gt(q, t);
        c = vi_blend(m, c, vi_add(c, vi_set1(step)));
    }
    return vi_from_f(vf_lut16(le->lut, c));
}

/* ---- per-call encoder state ---- */

typedef struct {
    const qtk__plan *p;
    field_mode mode;
    vf lo, hi, fmax, nfmax;
    lookup_enc le;
    vi mask, bytemask;
} encoder;

static bool encoder_init(const qtk__plan *p, encoder *e) {
    memset(e, 0, sizeof *e);
    e->p = p;
    if (!field_mode_of(p, &e->mode)) return false;
    e->lo = vf_set1(p->lo);
    e->hi = vf_set1(p->hi);
    e->fmax = vf_set1(p->fmax);
    e->nfmax = vf_set1(-p->fmax);
    e->mask = vi_set1((int)p->mask);
    /* one field per byte: native integers keep their sign extension, other sub-byte fields
     * (packed stores of 4/2-bit values) only their bits */
    e->bytemask = p->native_int || p->bits == 8 ? vi_set1(-1) : e->mask;
    if (p->lookup && !lookup_enc_init(p, &e->le)) return false;
    return true;
}

/* Stores n (<= VW) codes for elements starting at element j of a row. Integer codes may
 * arrive as full int32 values: only the field's low bits are kept (bytes keep the low 8,
 * which is also the sign-extended form native stores want). */
static QTK_ALWAYS_INLINE void store_codes(const encoder *e, uint8_t *row, const qtk__row *ri, size_t j, vi codes,
                                          size_t n) {
    const qtk__plan *p = e->p;
    uint8_t tmp[4 * VW];
    switch (e->mode) {
    case FIELDS_BYTE:
        codes = vi_and(codes, e->bytemask);
        if (n == VW) vi_store_u8(row + j, codes);
        else {
            vi_store_u8(tmp, codes);
            memcpy(row + j, tmp, n);
        }
        break;
    case FIELDS_NIBBLE:
        codes = vi_and(codes, e->mask);
        if (n == VW) vi_store_codes4(row + j / 2, codes);
        else {
            vi_store_codes4(tmp, vi_blend(vm_first(n), vi_zero(), codes));
            memcpy(row + j / 2, tmp, (n + 1) / 2);
        }
        break;
    case FIELDS_CRUMB:
        codes = vi_and(codes, e->mask);
        if (n == VW) vi_store_codes2(row + j / 4, codes);
        else {
            vi_store_codes2(tmp, vi_blend(vm_first(n), vi_zero(), codes));
            memcpy(row + j / 4, tmp, (n + 3) / 4);
        }
        break;
    case FIELDS_STRIDED: {
        /* one unit per element: OR the field in at the row's slot */
        vi sh = vi_sllv(vi_and(codes, e->mask), vi_set1((int)(ri->slot * p->bits)));
        uint8_t *u = row + j * p->unit_bytes;
        if (p->unit_bytes == 4) {
            if (n == VW) vi_store_u32(u, vi_or(vi_load_u32(u), sh));
            else {
                memcpy(tmp, u, n * 4);
                vi_store_u32(tmp, vi_or(vi_load_u32(tmp), sh));
                memcpy(u, tmp, n * 4);
            }
        } else {
            memset(tmp, 0, VW);
            memcpy(tmp, u, n);
            vi_store_u8(tmp, vi_or(vi_load_u8(tmp), sh));
            memcpy(u, tmp, n);
        }
        break;
    }
    }
}

/* ---- kernels ---- */

/* max |x| per group: an integer max of the magnitudes' bits (for non-negative floats the
 * orders agree), which also lets inf and NaN (the largest patterns) through to be seen */
static bool simd_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t gbase, size_t r0, size_t r1) {
    const vi absm = vi_set1(0x7fffffff);
    const size_t inner = p->inner, blk = p->blk_last;
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + (r - r0) * inner;
        bool bad = false;
        float *gp = &st->amax[ri.scale_base - gbase];
        for (size_t j0 = 0; j0 < inner; j0 += blk, gp++) {
            size_t j1 = j0 + blk < inner ? j0 + blk : inner;
            vi acc = vi_zero();
            size_t j = j0;
            for (; j + VW <= j1; j += VW) acc = vi_max(acc, vi_and(vf_bits(vf_loadu(xr + j)), absm));
            if (j < j1) acc = vi_max(acc, vi_and(vf_bits(vf_load_n(xr + j, j1 - j)), absm));
            int m = vi_hmax(acc);
            if (m >= 0x7f800000) {
                bad = true;
                break;
            }
            float mf = qtk__bits_f32((uint32_t)m);
            if (mf > *gp) *gp = mf;
        }
        /* a non-finite input: the reference finds its index and the finite maxima */
        if (bad) qtk__kernels_ref.amax_rows(p, xr, st, gbase, r, r + 1);
    }
    return true;
}

/* the smallest code of the scale dtype not below s (s >= 0, finite) */
static inline vi ceil_code(qtk_dtype d, vf s) {
    vi a = vf_bits(s);
    vi zero = vi_zero(), one = vi_set1(1);
    switch (d) {
    case QTK_DTYPE_BF16: {
        vi c = vi_srl(a, 16);
        c = vi_count(c, vi_ne(vi_and(a, vi_set1(0xffff)), zero));
        return vi_minu(c, vi_set1(0x7f7f));
    }
    case QTK_DTYPE_UE8M0: {
        vi ef = vi_srl(a, 23);
        vi c = vi_count(ef, vi_ne(vi_and(a, vi_set1(0x7fffff)), zero));
        c = vi_blend(vi_eq(ef, zero), c, vi_blend(vi_gt(a, vi_set1(0x00400000)), zero, one));
        return vi_minu(c, vi_set1(254));
    }
    default: { /* f16, ue4m3 */
        int M = d == QTK_DTYPE_F16 ? 10 : 3, bias = d == QTK_DTYPE_F16 ? 15 : 7;
        int maxc = d == QTK_DTYPE_F16 ? 0x7bff : 0x7e;
        vi ef = vi_srl(a, 23), exp = vi_sub(ef, vi_set1(127));
        vi mant = vi_or(vi_and(a, vi_set1(0x7fffff)), vi_set1(0x800000));
        int emin = 1 - bias;
        vi shift = vi_min(vi_add(vi_set1(23 - M), vi_max(vi_sub(vi_set1(emin), exp), zero)), vi_set1(31));
        vi r = vi_srlv(mant, shift);
        vi rem = vi_and(mant, vi_sub(vi_sllv(one, shift), one));
        r = vi_count(r, vi_ne(rem, zero));
        vm normal = vi_gt(exp, vi_set1(emin - 1));
        vi c = vi_blend(normal, r, vi_sub(vi_add(vi_sll(vi_add(exp, vi_set1(bias)), M), r), vi_set1(1 << M)));
        /* f32 zero -> 0; f32 subnormals (below every subnormal of these) -> the smallest */
        c = vi_blend(vi_eq(ef, zero), c, vi_blend(vi_eq(a, zero), one, zero));
        return vi_minu(c, vi_set1(maxc));
    }
    }
}

static inline vf decode_scale(qtk_dtype d, vi c) {
    switch (d) {
    case QTK_DTYPE_F16: return vf_from_f16_codes(c);
    case QTK_DTYPE_BF16: return vi_bits(vi_sll(c, 16));
    case QTK_DTYPE_UE8M0: return vi_bits(vi_blend(vi_eq(c, vi_zero()), vi_sll(c, 23), vi_set1(0x00400000)));
    default: return dec_e4m3(c); /* ue4m3: sign bit clear */
    }
}

static bool simd_finish_scales(const qtk__plan *p, const float *alpha, size_t n, float g, uint8_t *codes, float *eff) {
    qtk_dtype d = p->L.scale_dtype;
    unsigned sz = qtk__scale_size(d);
    vf div = vf_set1(p->div), vg = vf_set1(g);
    for (size_t i = 0; i < n; i += VW) {
        size_t k = n - i < VW ? n - i : VW;
        vf s = vf_div(k == VW ? vf_loadu(alpha + i) : vf_load_n(alpha + i, k), div);
        if (p->two_level) s = vf_div(s, vg);
        vi c;
        vf stored;
        if (d == QTK_DTYPE_F32) {
            c = vf_bits(s);
            stored = s;
        } else {
            c = ceil_code(d, s);
            stored = decode_scale(d, c);
        }
        vf e = p->two_level ? vf_mul(vg, stored) : stored;
        uint8_t tmp[4 * VW];
        uint8_t *dst = k == VW ? codes + i * sz : tmp;
        if (sz == 1) vi_store_u8(dst, c);
        else if (sz == 2) vi_store_u16(dst, c);
        else vi_store_u32(dst, c);
        if (k < VW) memcpy(codes + i * sz, tmp, k * sz);
        if (k == VW) vf_storeu(eff + i, e);
        else vf_store_n(eff + i, e, k);
    }
    return true;
}

/* value kinds the loops are specialised for */
enum { K_INT, K_E4M3, K_E5M2, K_E2M1, K_LOOKUP, K_I8, K_GATHER, K_LUT };

static QTK_ALWAYS_INLINE vi encode_kind(const encoder *e, vf x, vf s, int kind) {
    vf q = vf_div(x, s);
    switch (kind) {
    case K_INT: return enc_int(q, e->lo, e->hi); /* the store keeps the field's low bits */
    case K_LOOKUP: return enc_lookup(&e->le, q);
    case K_E4M3: return enc_mf(vf_min(vf_max(q, e->nfmax), e->fmax), 3, 7, 7);
    case K_E5M2: return enc_mf(vf_min(vf_max(q, e->nfmax), e->fmax), 2, 15, 7);
    default: return enc_mf(vf_min(vf_max(q, e->nfmax), e->fmax), 1, 1, 3);
    }
}

static QTK_ALWAYS_INLINE void encode_loop(const encoder *e, const float *x, const float *eff, size_t gbase,
                                          uint8_t *vals, size_t r0, size_t r1, field_mode mode, int kind) {
    const qtk__plan *p = e->p;
    const size_t inner = p->inner, blk = p->blk_last;
    const vi zc = vi_set1((int)p->zero_code);
    const size_t pf = p->prefetch;
    encoder le = *e;
    le.mode = mode;
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + (r - r0) * inner;
        uint8_t *row = vals + ri.unit_base * p->unit_bytes;
        const float *sp = eff + (ri.scale_base - gbase);
        for (size_t j0 = 0; j0 < inner; j0 += blk, sp++) {
            size_t j1 = j0 + blk < inner ? j0 + blk : inner;
            float s = *sp;
            vf vs = vf_set1(s);
            size_t j = j0;
            if (s == 0.0f) {
                for (; j < j1; j += VW) store_codes(&le, row, &ri, j, zc, j1 - j < VW ? j1 - j : VW);
                continue;
            }
            for (; j + VW <= j1; j += VW) {
                if (pf) simd_prefetch(xr + j + pf);
                store_codes(&le, row, &ri, j, encode_kind(&le, vf_loadu(xr + j), vs, kind), VW);
            }
            if (j < j1)
                store_codes(&le, row, &ri, j, encode_kind(&le, vf_load_n(xr + j, j1 - j), vs, kind), j1 - j);
        }
    }
}

/* one out-of-line instance per (layout, kind), as for decoding */
#define ENC_FN(M, K)                                                                                                   \
    static __attribute__((noinline)) void enc_##M##_##K(const encoder *e, const float *x, const float *eff,            \
                                                         size_t gbase, uint8_t *vals, size_t r0, size_t r1) {          \
        encode_loop(e, x, eff, gbase, vals, r0, r1, M, K);                                                             \
    }
#define ENC_FN_KINDS(M) ENC_FN(M, K_INT) ENC_FN(M, K_LOOKUP) ENC_FN(M, K_E4M3) ENC_FN(M, K_E5M2) ENC_FN(M, K_E2M1)
ENC_FN_KINDS(FIELDS_BYTE)
ENC_FN_KINDS(FIELDS_NIBBLE)
ENC_FN_KINDS(FIELDS_CRUMB)
ENC_FN_KINDS(FIELDS_STRIDED)

#define ENCODE_KINDS(M)                                                                                                \
    switch (kind) {                                                                                                    \
    case K_INT: enc_##M##_K_INT(&e, x, eff, gbase, vals, r0, r1); break;                                               \
    case K_LOOKUP: enc_##M##_K_LOOKUP(&e, x, eff, gbase, vals, r0, r1); break;                                         \
    case K_E4M3: enc_##M##_K_E4M3(&e, x, eff, gbase, vals, r0, r1); break;                                             \
    case K_E5M2: enc_##M##_K_E5M2(&e, x, eff, gbase, vals, r0, r1); break;                                             \
    default: enc_##M##_K_E2M1(&e, x, eff, gbase, vals, r0, r1); break;                                                 \
    }

static bool simd_encode_rows(const qtk__plan *p, const float *x, const float *eff, size_t gbase, uint8_t *vals,
                             size_t r0, size_t r1) {
    encoder e;
    if (!encoder_init(p, &e)) return false;
    int kind = p->lookup                  ? K_LOOKUP
               : p->kind == QTK__KIND_INT ? K_INT
               : p->fmt == QTK_DTYPE_E4M3 ? K_E4M3
               : p->fmt == QTK_DTYPE_E5M2 ? K_E5M2
                                          : K_E2M1;
    switch (e.mode) {
    case FIELDS_BYTE: ENCODE_KINDS(FIELDS_BYTE); break;
    case FIELDS_NIBBLE: ENCODE_KINDS(FIELDS_NIBBLE); break;
    case FIELDS_CRUMB: ENCODE_KINDS(FIELDS_CRUMB); break;
    default: ENCODE_KINDS(FIELDS_STRIDED); break;
    }
    return true;
}

/* ---- decoding ---- */

static bool simd_load_scales(const qtk__plan *p, const uint8_t *codes, size_t n, float g, float *eff) {
    qtk_dtype d = p->L.scale_dtype;
    unsigned sz = qtk__scale_size(d);
    const vi expmask = vi_set1(0x7f800000);
    vm bad = vi_gt(vi_zero(), vi_zero());
    vf vg = vf_set1(g);
    for (size_t i = 0; i < n; i += VW) {
        size_t k = n - i < VW ? n - i : VW;
        uint8_t tmp[4 * VW];
        const uint8_t *src = codes + i * sz;
        if (k < VW) {
            memset(tmp, 0, sizeof tmp);
            memcpy(tmp, src, k * sz);
            src = tmp;
        }
        vi c = sz == 1 ? vi_load_u8(src) : sz == 2 ? vi_load_u16(src) : vi_load_u32(src);
        vf v = d == QTK_DTYPE_F32 ? vi_bits(c) : decode_scale(d, c);
        if (d == QTK_DTYPE_UE4M3) bad = vm_or(bad, vi_gt(c, vi_set1(0x7e))); /* sign bit or NaN code */
        vf e = p->two_level ? vf_mul(vg, v) : v;
        bad = vm_or(bad, vi_eq(vi_and(vf_bits(v), expmask), expmask));
        bad = vm_or(bad, vi_eq(vi_and(vf_bits(e), expmask), expmask));
        if (k == VW) vf_storeu(eff + i, e);
        else vf_store_n(eff + i, e, k);
    }
    return !vm_any(bad);
}

/* Non-temporal f32 writes to an output of any alignment: vectors arrive in order, and
 * each store goes out as a full aligned line built from the previous vector's tail and
 * this one's head. */
typedef struct {
    float *p;     /* next aligned position (after the head) */
    float *out;
    vf prev;
    vi idx;
    size_t head, pending;
    bool started;
} nt_writer;

static void nt_init(nt_writer *w, float *out) {
    memset(w, 0, sizeof *w);
    w->out = out;
    size_t mis = ((uintptr_t)out % VALIGN) / 4;
    w->head = mis ? VW - mis : 0;
    w->pending = VW - w->head;
    /* lane i: i < pending ? prev[VW - pending + i] : v[i - pending] */
    int32_t ix[VW];
    for (int i = 0; i < VW; i++) ix[i] = (size_t)i < w->pending ? (int32_t)(VW - w->pending) + i : VW + i - (int32_t)w->pending;
    w->idx = vi_load_u32((const uint8_t *)ix);
}

static QTK_ALWAYS_INLINE void nt_push(nt_writer *w, vf v) {
    if (!w->started) {
        if (w->head) vf_store_n(w->out, v, w->head);
        w->p = w->out + w->head;
        w->started = true;
    } else {
        vf_stream(w->p, vf_perm2(w->prev, w->idx, v));
        w->p += VW;
    }
    w->prev = v;
}

static void nt_flush(nt_writer *w) {
    if (w->started) vf_store_n(w->p, vf_perm2(w->prev, w->idx, vf_zero()), w->pending);
}

typedef struct {
    const qtk__plan *p;
    field_mode mode;
    lut16 lut;      /* values of 2/4-bit fields */
    vi mask;
    bool stream;
#ifdef QTK_SIMD_HAS_E4M3X2
    e4m3_table e4m3;
#endif
} decoder;

static bool decoder_init(const qtk__plan *p, qtk_dtype dtype, decoder *d) {
    memset(d, 0, sizeof *d);
    d->p = p;
    if (!field_mode_of(p, &d->mode)) return false;
    if (p->lookup && p->bits == 8 && p->table_n != 256) return false;
    float lut[16] = {0};
    if (p->bits <= 4)
        for (uint32_t c = 0; c <= p->mask; c++) lut[c] = qtk__decode_elem(p, c);
    d->lut = lut16_load(lut);
    d->mask = vi_set1((int)p->mask);
#ifdef QTK_SIMD_HAS_E4M3X2
    if (!p->lookup && p->fmt == QTK_DTYPE_E4M3) {
        uint16_t hi[128];
        for (uint32_t c = 0; c < 128; c++) hi[c] = (uint16_t)(qtk__f32_bits(qtk__e4m3_to_f32((uint8_t)c)) >> 16);
        d->e4m3 = e4m3_table_load(hi);
    }
#endif
    size_t esz = dtype == QTK_DTYPE_F32 ? 4 : 2;
    d->stream = p->L.numel * esz >= ((size_t)16 << 20); /* outputs beyond the caches */
    return true;
}

/* codes of n (<= VW) fields from element j of a row (n < VW: read through a copy) */
static QTK_ALWAYS_INLINE vi load_codes(const decoder *d, const uint8_t *row, const qtk__row *ri, size_t j, size_t n,
                                       bool sign_extend) {
    const qtk__plan *p = d->p;
    uint8_t tmp[4 * VW + 8];
    switch (d->mode) {
    case FIELDS_BYTE: {
        const uint8_t *src = row + j;
        if (n < VW) { /* a row's last n fields: read only those (and no pointer before tmp) */
            memset(tmp, 0, VW);
            memcpy(tmp, src, n);
            src = tmp;
        }
        return sign_extend ? vi_load_i8(src) : vi_load_u8(src);
    }
    case FIELDS_NIBBLE:
        if (n < VW) {
            memset(tmp, 0, VW);
            memcpy(tmp, row + j / 2, (n + 1) / 2);
            return vi_load_codes4(tmp);
        }
        return vi_load_codes4(row + j / 2);
    case FIELDS_CRUMB:
        if (n < VW) {
            memset(tmp, 0, VW);
            memcpy(tmp, row + j / 4, (n + 3) / 4);
            return vi_load_codes2(tmp);
        }
        return vi_load_codes2(row + j / 4);
    case FIELDS_STRIDED: {
        const uint8_t *u = row + j * p->unit_bytes;
        if (n < VW) {
            memset(tmp, 0, sizeof tmp);
            memcpy(tmp, u, n * p->unit_bytes);
            u = tmp;
        }
        vi w = p->unit_bytes == 4 ? vi_load_u32(u) : vi_load_u8(u);
        return vi_and(vi_srlv(w, vi_set1((int)(ri->slot * p->bits))), d->mask);
    }
    }
    return vi_zero();
}

static QTK_ALWAYS_INLINE vf decode_kind(const decoder *d, const uint8_t *row, const qtk__row *ri, size_t j, size_t n,
                                        int kind) {
    const qtk__plan *p = d->p;
    switch (kind) {
    case K_LUT: {
        vi c = load_codes(d, row, ri, j, n, false);
        /* nibble/crumb loads give clean codes; bytes (native sign extension) need the mask */
        if (d->mode == FIELDS_BYTE) c = vi_and(c, d->mask);
        return vf_lut16(d->lut, c);
    }
    case K_GATHER: return vf_gather(p->table, load_codes(d, row, ri, j, n, false));
    case K_I8: {
        vi c = load_codes(d, row, ri, j, n, true);
        if (d->mode == FIELDS_STRIDED) c = vi_sub(vi_and(vi_add(c, vi_set1(128)), vi_set1(255)), vi_set1(128));
        return vf_from_i(c);
    }
    case K_E4M3: return dec_e4m3(load_codes(d, row, ri, j, n, false));
    default: return dec_e5m2(load_codes(d, row, ri, j, n, false));
    }
}

static inline vi to_bf16(vf v) {
    vi b = vf_bits(v);
    vi a = vi_and(b, vi_set1(0x7fffffff));
    vi r = vi_srl(vi_add(vi_add(b, vi_set1(0x7fff)), vi_and(vi_srl(b, 16), vi_set1(1))), 16);
    vi nan = vi_or(vi_srl(b, 16), vi_set1(0x40));
    return vi_and(vi_blend(vi_gt(a, vi_set1(0x7f800000)), r, nan), vi_set1(0xffff));
}

/* where decoded values go: streamed f32 (through the aligning writer), f32, f16, bf16 */
enum { SINK_NT, SINK_F32, SINK_F16, SINK_BF16 };

static QTK_ALWAYS_INLINE void store_sink(int sink, nt_writer *w, void *out, size_t at, vf v, size_t n) {
    switch (sink) {
    case SINK_NT: nt_push(w, v); break; /* full vectors only */
    case SINK_F32:
        if (n < VW) vf_store_n((float *)out + at, v, n);
        else vf_storeu((float *)out + at, v);
        break;
    case SINK_F16:
        if (n < VW) vf_store_f16_n((uint16_t *)out + at, v, n);
        else vf_store_f16((uint16_t *)out + at, v);
        break;
    default:
        if (n < VW) vi_store_u16_n((uint16_t *)out + at, to_bf16(v), n);
        else vi_store_u16_full((uint16_t *)out + at, to_bf16(v));
        break;
    }
}

/* Rows [r0, r1): block by block, vector by vector. mode, kind and sink are constants in
 * every instance, so each instance is a straight loop. */
static QTK_ALWAYS_INLINE void decode_loop(const decoder *d0, const uint8_t *vals, const float *eff, size_t gbase,
                                          void *out, size_t r0, size_t r1, field_mode mode, int kind, int sink) {
    const qtk__plan *p = d0->p;
    decoder d = *d0;
    d.mode = mode;
    const size_t inner = p->inner, blk = p->blk_last;
    nt_writer w;
    if (sink == SINK_NT) nt_init(&w, out);
    if (mode == FIELDS_NIBBLE && inner % VW == 0 && (blk % VW == 0 || blk >= inner)) {
        /* the hot case (4-bit fields, blocks of whole vectors): 2 x VW values from VW bytes,
         * the block's scale folded into the value table (lut[c] * s is the same product) */
        for (size_t r = r0; r < r1; r++) {
            qtk__row ri;
            qtk__plan_row(p, r, &ri);
            const uint8_t *row = vals + ri.unit_base * p->unit_bytes;
            size_t base = (r - r0) * inner;
            const float *sp = eff + (ri.scale_base - gbase);
            for (size_t j0 = 0; j0 < inner; j0 += blk, sp++) {
                size_t j1 = j0 + blk < inner ? j0 + blk : inner;
                lut16 sl = lut16_scale(d.lut, vf_set1(*sp));
                size_t j = j0;
                for (; j + 2 * VW <= j1; j += 2 * VW) {
                    vi c0, c1;
                    vi_load_codes4x2_lut(row + j / 2, &c0, &c1);
                    store_sink(sink, &w, out, base + j, vf_lut16(sl, c0), VW);
                    store_sink(sink, &w, out, base + j + VW, vf_lut16(sl, c1), VW);
                }
                if (j < j1) store_sink(sink, &w, out, base + j, vf_lut16(sl, vi_load_codes4(row + j / 2)), VW);
            }
        }
    } else {
        for (size_t r = r0; r < r1; r++) {
            qtk__row ri;
            qtk__plan_row(p, r, &ri);
            const uint8_t *row = vals + ri.unit_base * p->unit_bytes;
            size_t base = (r - r0) * inner;
            const float *sp = eff + (ri.scale_base - gbase);
            for (size_t j0 = 0; j0 < inner; j0 += blk, sp++) {
                size_t j1 = j0 + blk < inner ? j0 + blk : inner;
                vf s = vf_set1(*sp);
                size_t j = j0;
#ifdef QTK_SIMD_HAS_E4M3X2
                if (mode == FIELDS_BYTE && kind == K_E4M3) {
                    for (; j + 2 * VW <= j1; j += 2 * VW) {
                        vf v0, v1;
                        vf_from_e4m3_bytes_x2(&d.e4m3, row + j, &v0, &v1);
                        store_sink(sink, &w, out, base + j, vf_mul(v0, s), VW);
                        store_sink(sink, &w, out, base + j + VW, vf_mul(v1, s), VW);
                    }
                }
#endif
                if (mode == FIELDS_BYTE && kind == K_E5M2) {
                    for (; j + VW <= j1; j += VW) store_sink(sink, &w, out, base + j, vf_mul(vf_from_e5m2_bytes(row + j), s), VW);
                }
                for (; j + VW <= j1; j += VW)
                    store_sink(sink, &w, out, base + j, vf_mul(decode_kind(&d, row, &ri, j, VW, kind), s), VW);
                if (j < j1)
                    store_sink(sink, &w, out, base + j, vf_mul(decode_kind(&d, row, &ri, j, j1 - j, kind), s), j1 - j);
            }
        }
    }
    if (sink == SINK_NT) nt_flush(&w);
}

/* one out-of-line instance per (layout, kind, sink): small functions allocate registers
 * far better than one function holding every variant */
#define DEC_FN(M, K, S)                                                                                                \
    static __attribute__((noinline)) void dec_##M##_##K##_##S(const decoder *d, const uint8_t *vals, const float *eff, \
                                                              size_t gbase, void *out, size_t r0, size_t r1) {         \
        decode_loop(d, vals, eff, gbase, out, r0, r1, M, K, S);                                                        \
    }
#define DEC_FN_SINKS(M, K) DEC_FN(M, K, SINK_NT) DEC_FN(M, K, SINK_F32) DEC_FN(M, K, SINK_F16) DEC_FN(M, K, SINK_BF16)
#define DEC_FN_KINDS(M)                                                                                                \
    DEC_FN_SINKS(M, K_LUT) DEC_FN_SINKS(M, K_GATHER) DEC_FN_SINKS(M, K_I8) DEC_FN_SINKS(M, K_E4M3)                      \
    DEC_FN_SINKS(M, K_E5M2)
DEC_FN_KINDS(FIELDS_BYTE)
DEC_FN_KINDS(FIELDS_STRIDED)
DEC_FN_SINKS(FIELDS_NIBBLE, K_LUT)
DEC_FN_SINKS(FIELDS_CRUMB, K_LUT)

#define DEC_CALL_SINK(M, K)                                                                                            \
    switch (sink) {                                                                                                    \
    case SINK_NT: dec_##M##_##K##_SINK_NT(&d, vals, eff, gbase, out, r0, r1); break;                                   \
    case SINK_F32: dec_##M##_##K##_SINK_F32(&d, vals, eff, gbase, out, r0, r1); break;                                 \
    case SINK_F16: dec_##M##_##K##_SINK_F16(&d, vals, eff, gbase, out, r0, r1); break;                                 \
    default: dec_##M##_##K##_SINK_BF16(&d, vals, eff, gbase, out, r0, r1); break;                                      \
    }
#define DEC_CALL_KIND(M)                                                                                               \
    switch (kind) {                                                                                                    \
    case K_LUT: DEC_CALL_SINK(M, K_LUT); break;                                                                        \
    case K_GATHER: DEC_CALL_SINK(M, K_GATHER); break;                                                                  \
    case K_I8: DEC_CALL_SINK(M, K_I8); break;                                                                          \
    case K_E4M3: DEC_CALL_SINK(M, K_E4M3); break;                                                                      \
    default: DEC_CALL_SINK(M, K_E5M2); break;                                                                          \
    }

static bool simd_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, size_t gbase, qtk_dtype dtype,
                             void *out, size_t r0, size_t r1) {
    decoder d;
    if (!decoder_init(p, dtype, &d)) return false;
    int kind = p->bits <= 4                ? K_LUT
               : p->lookup                 ? K_GATHER
               : p->kind == QTK__KIND_INT  ? K_I8
               : p->fmt == QTK_DTYPE_E4M3  ? K_E4M3
                                           : K_E5M2;
    bool full = p->inner % VW == 0 && (p->blk_last % VW == 0 || p->blk_last >= p->inner);
    int sink = dtype == QTK_DTYPE_F16 ? SINK_F16 : dtype == QTK_DTYPE_BF16 ? SINK_BF16 : d.stream && full ? SINK_NT : SINK_F32;
    switch (d.mode) {
    case FIELDS_BYTE: DEC_CALL_KIND(FIELDS_BYTE); break;
    case FIELDS_NIBBLE: DEC_CALL_SINK(FIELDS_NIBBLE, K_LUT); break;
    case FIELDS_CRUMB: DEC_CALL_SINK(FIELDS_CRUMB, K_LUT); break;
    default: DEC_CALL_KIND(FIELDS_STRIDED); break;
    }
    if (sink == SINK_NT) simd_fence();
    return true;
}

#include "simd_mse.h"

const qtk__kernels SIMD_TABLE = {
    .name = SIMD_NAME,
    .amax_rows = simd_amax_rows,
    .finish_scales = simd_finish_scales,
    .load_scales = simd_load_scales,
    .encode_rows = simd_encode_rows,
    .decode_rows = simd_decode_rows,
    .mse_groups = simd_mse_groups,
};
