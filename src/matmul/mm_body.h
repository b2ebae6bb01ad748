/* mm_body.h — the matmul kernels, written once against the vocabulary of mmv_portable.h /
 * mmv_avx2.h / mmv_avx512.h and compiled at each width by mm_portable.c, mm_avx2.c and
 * mm_avx512.c (the integer kernels, mm_body_int.h, once more per dot-product flavour).
 *
 * Steps. Every kernel walks a weight row a step at a time: MV_B bytes of its packed fields
 * (MV_B = 4 lanes x 4 bytes: 16, 32 or 64), that is SF = per x MV_B fields (per = 8 / field
 * width: 1, 2 or 4; dense f32 rows: 4 vectors of floats). The exact path turns a step into
 * 4 x per vectors of values:
 *   - integer values (int8, and 4/2/1-per-byte codes whose table holds integers times a
 *     power of two: q4/q2, e2m1, iq4nl, ...): each plane of codes (low nibbles, high
 *     nibbles, ...) becomes int8 values with one pshufb on the 16-entry table; a second
 *     pshufb places byte 4q + i of every 16-byte lane in the top byte of 32-bit lane i
 *     ("placement q"), and one int-to-float conversion gives value x 2^24 exactly;
 *   - other tables (nf4): the codes placed in the low byte index a 16-entry f32 table;
 *   - fp8 and dense f32: natural order, L consecutive fields per vector.
 * So vector v = q * per + p of a step, lane l = 4h + i, holds field per (16h + 4q + i) + p
 * (natural kinds: field vL + l). The activations are laid out in that order once per call
 * (qtk__mm_permute_steps with the order mm_order gives), so no weight is ever moved back.
 *
 * Weights. Each weight is w' = value x effective scale rounded once, what qtk_dequantize
 * gives: the products below compute exactly that value before multiplying by x:
 *   MD_MUL   w' = (value x 2^24) x (s x 2^-24)      the scale times a power of two is exact
 *                                                   (checked for the whole row: rs_flags)
 *   MD_SAFE  w' = ((value x 2^24) x 2^-24) x s      for rows where it is not (tiny scales)
 *   MD_BSUM  (one row of x) t = Σ (value x 2^24) x, y += t x (s x 2^-24) once per block and
 *            step: when value x s is exact in f32 (scales of at most 16 significant bits,
 *            below 2^120) the real product is the same, and each term goes through at most
 *            K + 1 roundings (see qtk_matmul.h): the bound holds unchanged.
 *
 * Scales. The prologue of every row (row_scales, shared by all kernels) converts the row's
 * stored scales (f16, bf16, ue8m0, ue4m3, f32; times the two-level global) to f32 once, and
 * tells whether the row qualifies for MD_MUL / MD_BSUM. A step then takes one scale
 * (blocks of at least a step: CHUNK) or the 2-16 block scales of its lanes with one permute
 * (SPLIT: blocks of 4 x per fields or more dividing the step).
 *
 * Kernels: nk_fused (M <= 8: one weight row at a time, read once from memory, against up to
 * 4 rows of x per pass), kn_fused (W [K, N]: groups of 4 weight rows added into columns in
 * step order), decode (tiles of w' for the drivers of mm_gemm.c, step order) and the f32
 * microkernel; the integer path is in mm_body_int.h. */
#include "mm.h"

#include "../kernels/cpu.h"

#include <math.h>

/* Full unrolling of the small constant loops over planes, placements and rows, so that their
 * arrays of registers stay registers (GCC's own limit leaves big bodies rolled, and spills). */
#ifndef MV_UNROLL
#  if defined(__clang__)
#    define MV_UNROLL _Pragma("clang loop unroll(full)")
#  else
#    define MV_UNROLL _Pragma("GCC unroll 16")
#  endif
#endif

/* ---- decode kinds ---- */

enum {
    DK_F32,  /* dense f32 (qtk_matmul_f32) */
    DK_E4M3, /* natural order, fp8 */
    DK_E5M2,
    DK_I8,   /* int8 bytes */
    DK_T8I,  /* one code per byte (low 4 bits), integer table */
    DK_T4I,  /* two codes per byte, integer table */
    DK_T2I,  /* four codes per byte, integer table */
    DK_T8L,  /* the same three with an f32 table */
    DK_T4L,
    DK_T2L
};

MV_AI unsigned dk_per(const int dk) { return dk == DK_T4I || dk == DK_T4L ? 2u : dk == DK_T2I || dk == DK_T2L ? 4u : 1u; }
MV_AI bool dk_natural(const int dk) { return dk <= DK_E5M2; }
MV_AI bool dk_int(const int dk) { return dk >= DK_I8 && dk <= DK_T2I; }
MV_AI bool dk_lut(const int dk) { return dk >= DK_T8L; }
MV_AI unsigned dk_cw(const int dk) { return dk_per(dk) == 4 ? 2u : 4u; } /* code width of the planes */

/* The decode kind of a stream view. */
static int dk_of(const qtk__mmw *w) {
    switch (w->kind) {
    case QTK__MMK_F32: return DK_F32;
    case QTK__MMK_E4M3: return DK_E4M3;
    case QTK__MMK_E5M2: return DK_E5M2;
    case QTK__MMK_I8: return DK_I8;
    case QTK__MMK_T8: return w->int_ok ? DK_T8I : DK_T8L;
    case QTK__MMK_T4: return w->int_ok ? DK_T4I : DK_T4L;
    default: return w->int_ok ? DK_T2I : DK_T2L;
    }
}

/* Field (relative to the step) in lane l of vector v. */
static size_t field_of(int dk, unsigned v, unsigned l) {
    const unsigned per = dk_per(dk);
    if (dk_natural(dk)) return (size_t)v * MV_L + l;
    unsigned q = v / per, p = v % per;
    return (size_t)per * (16u * (l / 4) + 4u * q + (l % 4)) + p;
}

static size_t mm_step(const qtk__mmw *w) { return (size_t)dk_per(dk_of(w)) * MV_B; }

static void mm_order(const qtk__mmw *w, uint16_t *perm) {
    const int dk = dk_of(w);
    const unsigned nv = 4 * dk_per(dk);
    for (unsigned v = 0; v < nv; v++)
        for (unsigned l = 0; l < MV_L; l++) perm[v * MV_L + l] = (uint16_t)field_of(dk, v, l);
}

/* CHUNK: one scale per step (blocks of whole steps, or one block for the whole row);
 * SPLIT: the step's blocks are 4 x per fields or more and divide it (the lanes of each
 * placement group, and each 32-bit lane of the integer path, stay in one block). */
static int mm_stream_mode(const qtk__mmw *w, size_t len) {
    if (w->kind == QTK__MMK_NONE) return QTK__SM_NONE;
    if (w->kind == QTK__MMK_F32) return QTK__SM_CHUNK;
    const int dk = dk_of(w);
    const size_t sf = (size_t)dk_per(dk) * MV_B, bc = w->bc;
    if (bc >= len || bc % sf == 0) return QTK__SM_CHUNK;
    const size_t group = dk_natural(dk) ? 4 : 4 * (size_t)dk_per(dk);
    if (sf % bc == 0 && bc % group == 0) return QTK__SM_SPLIT;
    return QTK__SM_NONE;
}

/* ---- what every row of a call shares ---- */

typedef struct {
    int dk;
    bool split;
    mvi itab;          /* integer view: value of each code, as bytes */
    mvi cmask;         /* 0x0f or 0x03 in every byte */
    mv_lut16 lut;      /* f32 value of each code */
    mvi spat[4];       /* SPLIT: block of each lane of the vectors of placement q (natural: vector q) */
    float finv;        /* 2^-(24 + ishift) for the integer view, 1 otherwise */
    bool zp;           /* zero points (w.zb): each step's codes minus its block's z */
} mv_consts;

static void consts_init(const qtk__mm *c, mv_consts *k) {
    const qtk__mmw *w = &c->w;
    memset(k, 0, sizeof *k);
    const int dk = dk_of(w);
    const unsigned per = dk_per(dk);
    const size_t bc = w->bc;
    k->dk = dk;
    k->split = c->smode == QTK__SM_SPLIT;
    int8_t t8[16];
    for (unsigned i = 0; i < 16; i++) t8[i] = w->ival[i];
    k->itab = mvi_table16(t8);
    k->cmask = mvi_set1_8(dk_cw(dk) == 4 ? 0x0f : 0x03);
    for (unsigned q = 0; q < 4; q++) {
        int32_t sp[MV_L];
        for (unsigned l = 0; l < MV_L; l++) {
            size_t f = dk_natural(dk) ? (size_t)q * MV_L + l : (size_t)per * (16u * (l / 4) + 4u * q);
            sp[l] = k->split ? (int32_t)(f / bc) : 0;
        }
        k->spat[q] = mvi_loadu(sp);
    }
    k->lut = mv_lut16_load(w->table);
    k->finv = dk_int(dk) ? ldexpf(1.0f, -24 - w->ishift) : 1.0f;
    k->zp = w->zb != NULL;
}

/* ---- the prologue: a row's scales ---- */

enum { RS_FEXACT = 1u, RS_PROD = 2u };

/* MV_L stored scales of dtype d at p -> f32 */
MV_AI mvf scale_vec(qtk_dtype d, const uint8_t *p) {
    switch (d) {
    case QTK_DTYPE_F16: return mvf_from_f16x(p);
    case QTK_DTYPE_BF16: return mvf_bits(mvi_slli(mvi_load_u16x(p), 16));
    case QTK_DTYPE_UE8M0: { /* 2^(e-127); e = 0 is 2^-127, an f32 subnormal (e = 255, NaN, is refused on load) */
        mvi e = mvi_load_u8x(p);
        mvi zero = mvi_srai(mvi_sub(e, mvi_set1(1)), 31); /* all ones where e == 0 */
        return mvf_bits(mvi_or(mvi_slli(e, 23), mvi_and(zero, mvi_set1(0x00400000))));
    }
    case QTK_DTYPE_UE4M3: return mvf_from_e4m3(p);
    default: return mvf_loadu((const float *)(const void *)p);
    }
}

/* Effective scales of groups [g, g+n) times factor (a power of two) into dst, then MV_L
 * zeros (dst holds rs_floats(n)). With `checks` (rs_checks), returns RS_FEXACT when every
 * product with factor is exact, RS_PROD when every scale has at most 16 significant bits
 * and is below 2^120 (so that an 8-bit integer times it is exact in f32 and finite). */
static size_t rs_floats(size_t n) { return (n + MV_L - 1) / MV_L * MV_L + MV_L; }

/* Scratch floats of the row prologue: the scales of one row, then (zero points, from
 * mm_row_zoff) the integer path's -z of each block as f32 (rs_floats of them), or the exact
 * path's z of each byte of the row (zero_bytes), whichever is larger. */
static size_t mm_row_zoff(const qtk__mm *c) { return rs_floats(c->w.p ? c->w.gc : 1); }
static size_t mm_row_ws(const qtk__mm *c) {
    if (!c->w.zb) return mm_row_zoff(c);
    size_t zb = (c->w.row_bytes + MV_B + 3) / 4;
    return mm_row_zoff(c) + (zb > mm_row_zoff(c) ? zb : mm_row_zoff(c));
}
/* The zero point of each byte of row r's fields [c0, c1) (c0 a multiple of the codes a byte;
 * a byte's codes share a block: bc % per == 0, mm_view.c) into z, then MV_B zeros. */
static void zero_bytes(const qtk__mmw *w, size_t r, size_t c0, size_t c1, int8_t *z) {
    const size_t per = w->per, g0 = qtk__mmw_group0(w, r), bc = w->bc >= w->C ? w->C : w->bc;
    size_t k = c0;
    while (k < c1) {
        size_t b = bc ? k / bc : 0, e = bc ? (b + 1) * bc : c1;
        if (e > c1) e = c1;
        size_t n = (e - k + per - 1) / per;
        memset(z + (k - c0) / per, (int)(int8_t)w->zb[g0 + b], n); /* z <= 128: 128 wraps to -128, and q - z wraps back */
        k = e;
    }
    memset(z + (c1 - c0 + per - 1) / per, 0, MV_B);
}

/* Whether the row flags need computing: f16 and ue4m3 scales (one level) always qualify. */
static bool rs_checks(const qtk__mmw *w) {
    return w->two_level || (w->sdt != QTK_DTYPE_F16 && w->sdt != QTK_DTYPE_UE4M3);
}

MV_AI unsigned row_scales_k(const bool checks, const qtk__mmw *w, size_t g, size_t n, float factor, float *dst,
                            float *vmax) {
    const unsigned ssz = w->ssz;
    const uint8_t *s = w->sb + g * ssz;
    const mvf glob = mvf_set1(w->global), fac = mvf_set1(factor), unf = mvf_set1(1.0f / factor);
    const bool two = w->two_level, scale = factor != 1.0f;
    mvi inexact = mvi_zero(), lowbits = mvi_zero(), big = mvi_zero();
    mvf amax = mvf_zero();
    size_t i = 0;
    for (; i < n; i += MV_L) {
        const uint8_t *p = s + i * ssz;
        uint8_t buf[4 * MV_L];
        const bool part = n - i < MV_L;
        /* a row's last scales: a whole vector where the tensor's scales go on (its lanes past
         * the row's then cleared), else through a copy (never read past the last scale), whose
         * reload fails store forwarding: 2-bit GEMV, 8 scales a row, 0.178 ms against 0.211 */
        if (part && g + i + MV_L > w->p->L.n_scales) {
            memset(buf, 0, sizeof buf);
            memcpy(buf, p, (n - i) * ssz);
            p = buf;
        }
        mvf v = scale_vec(w->sdt, p);
        if (part) v = mvf_first(v, n - i);
        if (two) v = mvf_mul(glob, v);
        mvf f = scale ? mvf_mul(v, fac) : v;
        if (checks) {
            mvi vb = mvi_bits(v);
            inexact = mvi_or(inexact, mvi_xor(mvi_bits(mvf_mul(f, unf)), vb));
            lowbits = mvi_or(lowbits, mvi_and(vb, mvi_set1(0xff)));
            /* |s| > 2^120 carries into the sign bit */
            big = mvi_or(big, mvi_add(mvi_and(vb, mvi_set1(0x7fffffff)), mvi_set1(0x047fffff)));
        }
        mvf_storeu(dst + i, f);
        /* |f| (the buffer's zeros count 0); max(|f|, m) keeps m where f is NaN */
        if (vmax) amax = mvf_max(mvf_bits(mvi_and(mvi_bits(f), mvi_set1(0x7fffffff))), amax);
    }
    mvf_storeu(dst + i, mvf_zero());
    if (vmax) *vmax = mvf_hmax(amax); /* amax's lanes are never NaN */
    if (!checks) return RS_FEXACT | RS_PROD;
    int32_t a[MV_L], b[MV_L], c[MV_L];
    mvi_storeu(a, inexact);
    mvi_storeu(b, lowbits);
    mvi_storeu(c, big);
    bool ex = true, prod = true;
    for (unsigned l = 0; l < MV_L; l++) {
        ex = ex && a[l] == 0;
        prod = prod && b[l] == 0 && c[l] >= 0;
    }
    return (ex ? RS_FEXACT : 0u) | (prod ? RS_PROD : 0u);
}

static unsigned row_scales(const qtk__mmw *w, size_t g, size_t n, float factor, float *dst) {
    return rs_checks(w) ? row_scales_k(true, w, g, n, factor, dst, NULL) : row_scales_k(false, w, g, n, factor, dst, NULL);
}
/* The scales without the flags. */
static void row_scales_plain(const qtk__mmw *w, size_t g, size_t n, float factor, float *dst) {
    row_scales_k(false, w, g, n, factor, dst, NULL);
}
/* The scales and the largest |scale| (NaN scales aside: they make NaN whatever is done). */
MV_AI float row_scales_max(const qtk__mmw *w, size_t g, size_t n, float factor, float *dst) {
    float m = 0.0f;
    row_scales_k(false, w, g, n, factor, dst, &m);
    return m;
}

/* The GEMV kernels' prefetch of the scales of row r + QTK__MM_PF_ROWS (when below n1): a
 * stream of their own, which the hardware prefetcher follows badly beside the weights. */
MV_AI void prefetch_row_scales(const qtk__mmw *w, size_t r, size_t n1) {
    const size_t ra = r + QTK__MM_PF_ROWS;
    if (!w->p || ra >= n1) return;
    const uint8_t *sp = w->sb + qtk__mmw_group0(w, ra) * w->ssz;
    for (size_t o = 0, n = w->gc * w->ssz; o < n; o += 64) mv_prefetch(sp + o);
}

/* Scale vector of placement q (natural: vector q) in the step whose first block is bs[0]. */
MV_AI mvf step_scale(const mv_consts *kc, const float *bs, unsigned q, mvf win) {
    (void)bs;
    return kc->split ? mvf_perm(win, kc->spat[q]) : win;
}

/* ---- the exact path: a step's values ---- */

/* The planes of a step: integer values (as bytes) or codes, per 8 / width of them. */
/* The zero point of steps without one (step_planes reads it only with zero points). */
static const int8_t mm_no_z[64] = {0}; /* MV_B bytes at most */

MV_AI void step_planes(const int dk, const mv_consts *kc, mvi b, const int8_t *zs, mvi *P) {
    const unsigned per = dk_per(dk), cw = dk_cw(dk);
    if (dk == DK_I8) {
        P[0] = b;
        return;
    }
    MV_UNROLL
    for (unsigned p = 0; p < per; p++) {
        mvi codes = mvi_and(p ? mvi_srli(b, cw * p) : b, kc->cmask);
        P[p] = dk_int(dk) ? mvi_lookup16(kc->itab, codes) : codes;
    }
    if (dk_int(dk) && kc->zp) {
        /* q - z (z <= 128): SPLIT, the z of each byte of the step (zero_bytes); CHUNK, the
         * step's one block's */
        const mvi z = kc->split ? mvi_loadu(zs) : mvi_set1_8(zs[0]);
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) P[p] = mvi_sub8(P[p], z);
    }
}

/* Vector (q, p) of a step: value x 2^24 (integer view), the value (tables, fp8, f32). src is
 * the step's bytes (natural kinds). */
MV_AI mvf step_value(const int dk, const mv_consts *kc, const mvi *P, unsigned q, unsigned p, const uint8_t *src) {
    if (dk_int(dk)) return mvf_from_i(mvi_place(P[p], q));
    if (dk_lut(dk)) return mvf_lut16(&kc->lut, mvi_place_lo(P[p], q));
    if (dk == DK_F32) return mvf_loadu((const float *)(const void *)src + (size_t)q * MV_L);
    const uint8_t *b = src + (size_t)q * MV_L;
    return dk == DK_E4M3 ? mvf_from_e4m3(b) : mvf_from_e5m2(b);
}

/* bytes of a step, and of a row's fields */
MV_AI size_t step_bytes(const int dk) { return dk == DK_F32 ? 4u * MV_B : MV_B; }
MV_AI size_t row_field_bytes(const int dk, size_t k) {
    return dk == DK_F32 ? 4 * k : (k + dk_per(dk) - 1) / dk_per(dk);
}

/* A row's last, partial step of nf fields: its bytes (only the row's) copied into a buffer
 * of padding fields that the full-step code then reads. The padding fields (those of the
 * row's last byte past its end too) hold the view's pad code, whose w' is finite, so that
 * with x = 0 they add exactly 0 (fp8 and f32: 0 bytes, the value 0). */
#define TAIL_BYTES (4u * MV_B)
MV_AI const uint8_t *tail_copy(uint8_t *buf, const uint8_t *src, const int dk, size_t nf, uint8_t pad) {
    size_t n = row_field_bytes(dk, nf);
    memset(buf, dk_natural(dk) ? 0 : pad, TAIL_BYTES);
    memcpy(buf, src, n);
    const unsigned per = dk_per(dk), used = (unsigned)(nf % per);
    if (dk != DK_F32 && used) { /* the first fields of a byte are in its low bits */
        unsigned keep = (1u << (used * (8u / per))) - 1u;
        buf[n - 1] = (uint8_t)((buf[n - 1] & keep) | (pad & ~keep));
    }
    return buf;
}
/* The same for the integer path, where padding fields meet q = 0 exactly whatever their
 * code (integer products): the row's bytes, then zeros. */
MV_AI const uint8_t *tail_copy_raw(uint8_t *buf, const uint8_t *src, size_t n) {
    memset(buf, 0, TAIL_BYTES);
    memcpy(buf, src, n);
    return buf;
}

enum { MD_MUL, MD_SAFE, MD_BSUM };

/* ---- nk fused: one weight row against up to 4 rows of x ---- */

#define MR_MAX 4u

/* One step of a row (src: its bytes; bs: the step's first block scale; xr: the step's
 * activations of each row) into the accumulators. */
MV_AI void exf_step(const int dk, const int md, const unsigned MR, const mv_consts *kc, const uint8_t *src,
                    const float *bs, const int8_t *zs, const float *const *xr, mvf acc[MR_MAX][4]) {
    const unsigned per = dk_per(dk);
    mvi P[4];
    if (!dk_natural(dk)) step_planes(dk, kc, mvi_loadu(src), zs, P);
    const bool scaled = dk != DK_F32;
    mvf win = mvf_zero();
    if (scaled) win = kc->split ? mvf_loadu(bs) : mvf_bcast(bs);
    if (md == MD_BSUM) {
        /* MR == 1: per placement q, t = Σ_p value x; then acc += t x s once */
        mvf t[4];
        MV_UNROLL
        for (unsigned q = 0; q < 4; q++) {
            mvf tq = mvf_zero();
            MV_UNROLL
            for (unsigned p = 0; p < per; p++) {
                mvf v = step_value(dk, kc, P, q, p, src);
                mvf xv = mvf_loadu(xr[0] + (size_t)(q * per + p) * MV_L);
                tq = p ? mvf_fma(v, xv, tq) : mvf_mul(v, xv);
            }
            t[q] = tq;
        }
        if (kc->split) {
            MV_UNROLL
            for (unsigned q = 0; q < 4; q++) acc[0][q] = mvf_fma(t[q], step_scale(kc, bs, q, win), acc[0][q]);
        } else {
            mvf s = mvf_add(mvf_add(t[0], t[1]), mvf_add(t[2], t[3]));
            acc[0][0] = mvf_fma(s, win, acc[0][0]);
        }
        return;
    }
    const mvf finv = mvf_set1(kc->finv);
    MV_UNROLL
    for (unsigned q = 0; q < 4; q++) {
        mvf s = scaled ? step_scale(kc, bs, q, win) : win;
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) {
            const unsigned v = q * per + p;
            mvf wv = step_value(dk, kc, P, q, p, src);
            if (md == MD_SAFE && dk_int(dk)) wv = mvf_mul(wv, finv); /* the value itself, exactly */
            if (scaled) wv = mvf_mul(wv, s);
            MV_UNROLL
            for (unsigned i = 0; i < MR; i++) {
                const unsigned a = MR == 1 ? v % 4 : MR == 2 ? v % 2 : 0;
                acc[i][a] = mvf_fma(wv, mvf_loadu(xr[i] + (size_t)v * MV_L), acc[i][a]);
            }
        }
    }
}

/* Row r of W (scales converted into bs) times rows m0..m0+MR-1 of x; writes y. */
MV_AI void exf_row(const int dk, const int md, const unsigned MR, const qtk__mm *c, const mv_consts *kc,
                   const float *bs, size_t r, size_t m0) {
    /* zero points: z of each byte (SPLIT) or of each block (CHUNK), from the prologue */
    const int8_t *zs = kc->zp ? (const int8_t *)(const void *)(bs + mm_row_zoff(c)) : NULL;
    const unsigned per = dk_per(dk);
    const size_t K = c->K, kp = c->kp, sf = (size_t)per * MV_B, sb = step_bytes(dk);
    const uint8_t *row = c->w.vals + r * c->w.row_bytes;
    /* the block of each step: split, sf / bc blocks a step; else a block every bc / sf steps */
    const size_t bc = c->w.bc, bstep = kc->split ? sf / bc : 0;
    const size_t spb = kc->split || bc >= K || !c->w.p ? SIZE_MAX : bc / sf;
    const float *xr[MR_MAX];
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) xr[i] = c->xp + (m0 + i) * kp;
    mvf acc[MR_MAX][4];
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++)
        MV_UNROLL
        for (unsigned a = 0; a < 4; a++) acc[i][a] = mvf_zero();
    const size_t nst = qtk__ceil_div(K, sf), nfull = K / sf;
    uint8_t tb[TAIL_BYTES];
    size_t bi = 0, cnt = 0;
    for (size_t st = 0; st < nst; st++) {
        const uint8_t *src = row + st * sb;
        if (st == nfull) src = tail_copy(tb, src, dk, K - st * sf, c->w.pad);
        mv_prefetch(src + QTK__MM_PF_BYTES); /* the row's next bytes (or the next rows') */
        exf_step(dk, md, MR, kc, src, bs + bi, zs ? (kc->split ? zs + st * MV_B : zs + bi) : mm_no_z, xr, acc);
        MV_UNROLL
        for (unsigned i = 0; i < MR; i++) xr[i] += sf;
        bi += bstep;
        if (++cnt == spb) {
            cnt = 0;
            bi++;
        }
    }
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        float s = mvf_hsum(mvf_add(mvf_add(acc[i][0], acc[i][1]), mvf_add(acc[i][2], acc[i][3])));
        c->y[(m0 + i) * c->N + r] = c->bias ? s + c->bias[r] : s;
    }
}


/* Converts row r's scales (factor: 2^-(24 + ishift) for the integer view); returns its mode
 * for the fused kernel. */
static int exf_prologue(const qtk__mm *c, const mv_consts *kc, size_t r, float *bs) {
    if (!c->w.p) return MD_MUL;
    unsigned f = row_scales(&c->w, qtk__mmw_group0(&c->w, r), c->w.gc, kc->finv, bs);
    if (!(f & RS_FEXACT)) { /* a scale too small to carry 2^-24: the plain product */
        row_scales(&c->w, qtk__mmw_group0(&c->w, r), c->w.gc, 1.0f, bs);
        return MD_SAFE;
    }
    if (c->M == 1 && dk_int(kc->dk) && (f & RS_PROD) && !c->xbig) return MD_BSUM;
    return MD_MUL;
}

MV_AI void exf_range_k(const int dk, const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    mv_consts kc;
    consts_init(c, &kc);
    const size_t M = c->M;
    for (size_t r = n0; r < n1; r++) {
        prefetch_row_scales(&c->w, r, n1);
        int md = exf_prologue(c, &kc, r, ws);
        if (kc.zp) {
            int8_t *z8 = (int8_t *)(void *)(ws + mm_row_zoff(c));
            if (kc.split) zero_bytes(&c->w, r, 0, c->K, z8);
            else
                for (size_t g = 0, g0 = qtk__mmw_group0(&c->w, r); g < c->w.gc; g++) z8[g] = (int8_t)c->w.zb[g0 + g];
        }
        if (md == MD_BSUM && dk_int(dk)) {
            exf_row(dk, MD_BSUM, 1, c, &kc, ws, r, 0);
            continue;
        }
        if (md == MD_SAFE && dk_int(dk)) {
            for (size_t m = 0; m < M; m++) exf_row(dk, MD_SAFE, 1, c, &kc, ws, r, m);
            continue;
        }
        size_t m = 0;
        for (; m + 4 <= M; m += 4) exf_row(dk, MD_MUL, 4, c, &kc, ws, r, m);
        for (; m + 2 <= M; m += 2) exf_row(dk, MD_MUL, 2, c, &kc, ws, r, m);
        if (m < M) exf_row(dk, MD_MUL, 1, c, &kc, ws, r, m);
    }
}

#define EXF(name, dk)                                                                                                  \
    static void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) { exf_range_k(dk, c, n0, n1, ws); }
EXF(exf_f32, DK_F32)
EXF(exf_e4m3, DK_E4M3)
EXF(exf_e5m2, DK_E5M2)
EXF(exf_i8, DK_I8)
EXF(exf_t8i, DK_T8I)
EXF(exf_t4i, DK_T4I)
EXF(exf_t2i, DK_T2I)
EXF(exf_t8l, DK_T8L)
EXF(exf_t4l, DK_T4L)
EXF(exf_t2l, DK_T2L)

static void nk_fused(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    switch (dk_of(&c->w)) {
    case DK_F32: exf_f32(c, n0, n1, ws); break;
    case DK_E4M3: exf_e4m3(c, n0, n1, ws); break;
    case DK_E5M2: exf_e5m2(c, n0, n1, ws); break;
    case DK_I8: exf_i8(c, n0, n1, ws); break;
    case DK_T8I: exf_t8i(c, n0, n1, ws); break;
    case DK_T4I: exf_t4i(c, n0, n1, ws); break;
    case DK_T2I: exf_t2i(c, n0, n1, ws); break;
    case DK_T8L: exf_t8l(c, n0, n1, ws); break;
    case DK_T4L: exf_t4l(c, n0, n1, ws); break;
    default: exf_t2l(c, n0, n1, ws); break;
    }
}

/* ---- decoded tiles (step order) for the drivers ---- */

/* w' of a step (MD_SAFE: the value, then times its scale, one rounding) into d. */
MV_AI void dec_step(const int dk, const mv_consts *kc, const uint8_t *src, const float *bs, const int8_t *zs, float *d) {
    const unsigned per = dk_per(dk);
    mvi P[4];
    if (!dk_natural(dk)) step_planes(dk, kc, mvi_loadu(src), zs, P);
    mvf win = mvf_zero();
    if (dk != DK_F32) win = kc->split ? mvf_loadu(bs) : mvf_bcast(bs);
    const mvf finv = mvf_set1(kc->finv);
    MV_UNROLL
    for (unsigned q = 0; q < 4; q++) {
        mvf s = step_scale(kc, bs, q, win);
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) {
            mvf wv = step_value(dk, kc, P, q, p, src);
            if (dk_int(dk)) wv = mvf_mul(wv, finv);
            if (dk != DK_F32) wv = mvf_mul(wv, s);
            mvf_storeu(d + (size_t)(q * per + p) * MV_L, wv);
        }
    }
}

/* Row r, columns [c0, c0+nc) (c0 and nc multiples of the step) in step order into dst. Fields
 * at or past the row's end decode to 0 (fp8 codes there are never read; integer and table
 * values there are padding fields times 0 in every product). */
MV_AI void dec_row(const int dk, const qtk__mm *c, const mv_consts *kc, size_t r, size_t c0, size_t nc, float *dst) {
    const qtk__mmw *w = &c->w;
    const unsigned per = dk_per(dk);
    const size_t C = w->C, sf = (size_t)per * MV_B, sb = step_bytes(dk);
    const uint8_t *row = w->vals + r * w->row_bytes;
    const size_t have = c0 + nc < C ? c0 + nc : C;
    float bs[QTK__MM_KC / 4 + 3 * MV_L];
    int8_t zs[QTK__MM_KC + MV_B];
    size_t b0 = 0, bc = (size_t)-1;
    if (w->p && have > c0) {
        bc = w->bc >= C ? (size_t)-1 : w->bc;
        b0 = bc == (size_t)-1 ? 0 : c0 / bc;
        size_t nblk = bc == (size_t)-1 ? 1 : (have - 1) / bc - b0 + 1;
        row_scales_plain(w, qtk__mmw_group0(w, r) + b0, nblk, 1.0f, bs);
        if (kc->zp && kc->split) zero_bytes(w, r, c0, have, zs);
        else if (kc->zp)
            for (size_t g = 0; g < nblk; g++) zs[g] = (int8_t)w->zb[qtk__mmw_group0(w, r) + b0 + g];
    }
    uint8_t tb[TAIL_BYTES];
    size_t k = c0;
    for (; k < have; k += sf) {
        const uint8_t *src = row + (k / sf) * sb;
        if (have - k < sf) src = tail_copy(tb, src, dk, have - (k / sf) * sf, w->pad);
        const size_t bi = bc == (size_t)-1 ? 0 : k / bc - b0;
        dec_step(dk, kc, src, bs + bi, kc->split ? zs + (k - c0) / per : zs + bi, dst + (k - c0));
    }
    for (; k < c0 + nc; k++) dst[k - c0] = 0.0f;
}

MV_AI void dec_rows_k(const int dk, const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, float *dst,
                      size_t ld) {
    mv_consts kc;
    consts_init(c, &kc);
    kc.finv = dk_int(dk) ? ldexpf(1.0f, -24 - c->w.ishift) : 1.0f;
    for (size_t i = 0; i < nr; i++) dec_row(dk, c, &kc, r0 + i, c0, nc, dst + i * ld);
}

#define DEC(name, dk)                                                                                                  \
    static void name(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld) {          \
        dec_rows_k(dk, c, r0, nr, c0, nc, dst, ld);                                                                    \
    }
DEC(dec_f32, DK_F32)
DEC(dec_e4m3, DK_E4M3)
DEC(dec_e5m2, DK_E5M2)
DEC(dec_i8, DK_I8)
DEC(dec_t8i, DK_T8I)
DEC(dec_t4i, DK_T4I)
DEC(dec_t2i, DK_T2I)
DEC(dec_t8l, DK_T8L)
DEC(dec_t4l, DK_T4L)
DEC(dec_t2l, DK_T2L)

static void decode(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst, size_t ld) {
    (void)chunked; /* the streamed decoders give step order only (the drivers permute to match) */
    switch (dk_of(&c->w)) {
    case DK_F32: dec_f32(c, r0, nr, c0, nc, dst, ld); break;
    case DK_E4M3: dec_e4m3(c, r0, nr, c0, nc, dst, ld); break;
    case DK_E5M2: dec_e5m2(c, r0, nr, c0, nc, dst, ld); break;
    case DK_I8: dec_i8(c, r0, nr, c0, nc, dst, ld); break;
    case DK_T8I: dec_t8i(c, r0, nr, c0, nc, dst, ld); break;
    case DK_T4I: dec_t4i(c, r0, nr, c0, nc, dst, ld); break;
    case DK_T2I: dec_t2i(c, r0, nr, c0, nc, dst, ld); break;
    case DK_T8L: dec_t8l(c, r0, nr, c0, nc, dst, ld); break;
    case DK_T4L: dec_t4l(c, r0, nr, c0, nc, dst, ld); break;
    default: dec_t2l(c, r0, nr, c0, nc, dst, ld); break;
    }
}

/* ---- kn fused: y[m][n] for small M, W [K, N] read along N ---- */

/* Columns [c0, c0+nn) of y for rows m0..m0+MR-1 of x (c0 a multiple of the step): each group
 * of 4 weight rows k is decoded a step at a time and added into accumulators that hold the
 * columns in step order (L1-resident); the rows are read sequentially. ws: the accumulators
 * (MR x np floats), then the scales of 4 rows. */
MV_AI void knf_block(const int dk, const unsigned MR, const qtk__mm *c, const mv_consts *kc, size_t c0, size_t nn,
                     size_t m0, float *ws) {
    const qtk__mmw *w = &c->w;
    const unsigned per = dk_per(dk);
    const size_t K = c->K, N = c->N, sf = (size_t)per * MV_B, sb = step_bytes(dk);
    const size_t np = qtk__ceil_div(nn, sf) * sf, have = c0 + nn;
    float *acc = ws, *bsb = ws + 2 * QTK__MM_KNF_COLS;
    const size_t bsld = rs_floats(QTK__MM_KNF_COLS / 4 + 1);
    for (size_t i = 0; i < MR * np; i++) acc[i] = 0.0f;
    const size_t bc = !w->p || w->bc >= w->C ? (size_t)-1 : w->bc;
    const size_t b0 = bc == (size_t)-1 ? 0 : c0 / bc, nblk = bc == (size_t)-1 ? 1 : (have - 1) / bc - b0 + 1;
    const mvf finv = mvf_set1(kc->finv);
    for (size_t k = 0; k < K; k += 4) {
        const unsigned kg = K - k < 4 ? (unsigned)(K - k) : 4u;
        mvf xb[MR_MAX][4];
        for (unsigned i = 0; i < MR; i++)
                for (unsigned g = 0; g < 4; g++) xb[i][g] = mvf_set1(g < kg ? c->x[(m0 + i) * K + k + g] : 0.0f);
        const uint8_t *rowp[4];
        for (unsigned g = 0; g < 4; g++) {
            size_t rr = k + (g < kg ? g : 0); /* missing rows repeat the first, times x = 0 */
            rowp[g] = w->vals + rr * w->row_bytes;
            if (w->p) row_scales_plain(w, qtk__mmw_group0(w, rr) + b0, nblk, 1.0f, bsb + g * bsld);
        }
        uint8_t tb[4][TAIL_BYTES];
        for (size_t cc = c0; cc < have; cc += sf) {
            const bool tail = have - cc < sf;
            const size_t st = (cc - c0) / sf;
            const size_t bi = bc == (size_t)-1 ? 0 : cc / bc - b0;
            mvi P[4][4];
            mvf win[4];
            const uint8_t *src[4];
                for (unsigned g = 0; g < 4; g++) {
                src[g] = rowp[g] + (cc / sf) * sb;
                if (tail) src[g] = tail_copy(tb[g], src[g], dk, have - (cc / sf) * sf, w->pad);
                if (!dk_natural(dk)) step_planes(dk, kc, mvi_loadu(src[g]), mm_no_z, P[g]); /* never zero points (choose) */
                win[g] = dk == DK_F32 ? mvf_zero() : kc->split ? mvf_loadu(bsb + g * bsld + bi) : mvf_bcast(bsb + g * bsld + bi);
            }
                for (unsigned q = 0; q < 4; q++)
                        for (unsigned p = 0; p < per; p++) {
                    const unsigned v = q * per + p;
                    mvf wv[4];
                                for (unsigned g = 0; g < 4; g++) {
                        wv[g] = step_value(dk, kc, P[g], q, p, src[g]);
                        if (dk_int(dk)) wv[g] = mvf_mul(wv[g], finv);
                        if (dk != DK_F32) wv[g] = mvf_mul(wv[g], step_scale(kc, NULL, q, win[g]));
                    }
                                for (unsigned i = 0; i < MR; i++) {
                        float *ap = acc + i * np + st * sf + (size_t)v * MV_L;
                        mvf s = mvf_loadu(ap);
                                        for (unsigned g = 0; g < 4; g++) s = mvf_fma(wv[g], xb[i][g], s);
                        mvf_storeu(ap, s);
                    }
                }
        }
    }
    /* back to natural order, plus bias */
    for (unsigned i = 0; i < MR; i++)
        for (size_t pos = 0; pos < np; pos++) {
            size_t col = pos / sf * sf + c->perm[pos % sf];
            if (col >= nn) continue;
            float s = acc[i * np + pos];
            c->y[(m0 + i) * N + c0 + col] = c->bias ? s + c->bias[c0 + col] : s;
        }
}

MV_AI void knf_range(const int dk, const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    mv_consts kc;
    consts_init(c, &kc);
    kc.finv = dk_int(dk) ? ldexpf(1.0f, -24 - c->w.ishift) : 1.0f;
    for (size_t c0 = n0; c0 < n1; c0 += QTK__MM_KNF_COLS) {
        size_t nn = n1 - c0 < QTK__MM_KNF_COLS ? n1 - c0 : QTK__MM_KNF_COLS, m = 0;
        for (; m + 2 <= c->M; m += 2) knf_block(dk, 2, c, &kc, c0, nn, m, ws);
        if (m < c->M) knf_block(dk, 1, c, &kc, c0, nn, m, ws);
    }
}

#define KNF(name, dk)                                                                                                  \
    static void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) { knf_range(dk, c, n0, n1, ws); }
KNF(knf_f32, DK_F32)
KNF(knf_e4m3, DK_E4M3)
KNF(knf_e5m2, DK_E5M2)
KNF(knf_i8, DK_I8)
KNF(knf_t8i, DK_T8I)
KNF(knf_t4i, DK_T4I)
KNF(knf_t2i, DK_T2I)
KNF(knf_t8l, DK_T8L)
KNF(knf_t4l, DK_T4L)
KNF(knf_t2l, DK_T2L)

static void kn_fused(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    switch (dk_of(&c->w)) {
    case DK_F32: knf_f32(c, n0, n1, ws); break;
    case DK_E4M3: knf_e4m3(c, n0, n1, ws); break;
    case DK_E5M2: knf_e5m2(c, n0, n1, ws); break;
    case DK_I8: knf_i8(c, n0, n1, ws); break;
    case DK_T8I: knf_t8i(c, n0, n1, ws); break;
    case DK_T4I: knf_t4i(c, n0, n1, ws); break;
    case DK_T2I: knf_t2i(c, n0, n1, ws); break;
    case DK_T8L: knf_t8l(c, n0, n1, ws); break;
    case DK_T4L: knf_t4l(c, n0, n1, ws); break;
    default: knf_t2l(c, n0, n1, ws); break;
    }
}

/* ---- the f32 microkernel: 6 broadcast rows x up to MV_JV vectors ---- */

#define IR 6u

MV_AI void ukr_t(const unsigned JV, size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc,
                 size_t ldc, unsigned ir, bool acc) {
    const float *ap[IR];
    MV_UNROLL
    for (unsigned i = 0; i < IR; i++) ap[i] = a + (i < ir ? i : 0) * lda;
    mvf cv[IR][MV_JV];
    MV_UNROLL
    for (unsigned i = 0; i < IR; i++)
        MV_UNROLL
        for (unsigned v = 0; v < JV; v++)
            cv[i][v] = acc && i < ir ? mvf_loadu(cc + i * ldc + (size_t)MV_L * v) : mvf_zero();
    for (size_t k = 0; k < kc; k++) {
        mvf bv[MV_JV];
        MV_UNROLL
        for (unsigned v = 0; v < JV; v++) bv[v] = mvf_loadu(b + k * ldb + (size_t)MV_L * v);
        MV_UNROLL
        for (unsigned i = 0; i < IR; i++) {
            mvf av = mvf_bcast(ap[i] + k);
            MV_UNROLL
            for (unsigned v = 0; v < JV; v++) cv[i][v] = mvf_fma(av, bv[v], cv[i][v]);
        }
    }
    MV_UNROLL
    for (unsigned i = 0; i < IR; i++)
        MV_UNROLL
        for (unsigned v = 0; v < JV; v++)
            if (i < ir) mvf_storeu(cc + i * ldc + (size_t)MV_L * v, cv[i][v]);
}

static void ukr(size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc, size_t ldc, unsigned ir,
                unsigned jr, bool acc) {
    switch (jr / MV_L) {
#if MV_JV >= 4
    case 4: ukr_t(4, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    case 3: ukr_t(3, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
#endif
    case 2: ukr_t(2, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    default: ukr_t(1, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    }
}

/* ---- the integer path's flavours and their choice ---- */

enum { IV_DP, IV_OFF, IV_SGN, IV_TERN, IV_XOR, IV_XDP };

/* What IV_DP adds to the weights: 128 for a dot product of unsigned weights by signed
 * activations (vpdpbusd); 0 where the vocabulary's mvi_dp multiplies signed bytes (NEON's
 * sdot), which then needs no correction of the sums (no xc). */
#ifndef MV_DP_BIAS
#  define MV_DP_BIAS 128
#endif

/* Whether the codes of a 4- or 2-bit integer view are two's complement integers: value +
 * 2^(width-1) is then the code with its top bit flipped (IV_XOR). */
static bool int_twos(const qtk__mmw *w, int ik) {
    if (ik != DK_T4I && ik != DK_T2I) return false;
    const unsigned cw = dk_cw(ik), half = 1u << (cw - 1);
    for (unsigned code = 0; code < (1u << cw); code++)
        if (w->ival[code] + (int)half != (int)(code ^ half)) return false;
    return true;
}

/* The flavour this call takes: c->ivar and c->ioff. */
static void int_choose(qtk__mm *c) {
    const qtk__mmw *w = &c->w;
    const unsigned hooks = qtk__mm_hooks();
    const int ik = dk_of(w);
    const unsigned per = dk_per(ik);
    int lo = -128, hi = 127;
    if (ik != DK_I8) {
        lo = hi = w->ival[0];
        for (unsigned i = 1; i < 16; i++) {
            lo = w->ival[i] < lo ? w->ival[i] : lo;
            hi = w->ival[i] > hi ? w->ival[i] : hi;
        }
    }
#ifdef MV_DP_FEATURE
    const unsigned feat = qtk__mm_features();
    bool dp = MV_HAS_DP || (feat & MV_DP_FEATURE) != 0;
    /* where vpmaddubsw + vpmaddwd are measured faster than vpdpbusd (QTK_CPU_MADD_OVER_DPBUSD):
     * 8-bit integers and 4-bit codes that take the xor or offset flavour run on them; 4-bit
     * tables that would need the sign flavour, and 2-bit weights, keep vpdpbusd */
    if (dp && (feat & QTK_CPU_MADD_OVER_DPBUSD) &&
        (ik == DK_I8 || (ik == DK_T4I && (int_twos(w, ik) || (int)per * (hi - lo) <= 129))))
        dp = false;
#else
    const bool dp = MV_HAS_DP;
#endif
    /* the multiply-free kernel where the level has no dot product instruction: vpdpbusd is
     * faster (0.58-0.72 of its time at 4096x4096 and 14336x4096, one and two threads, AMD
     * Zen 4; 0.82 on Sapphire Rapids) */
    const bool tern = ik == DK_T2I && !w->p->lookup && !w->zb && c->bx == 32 && c->M <= QTK__MM_INT_MAX_M;
    c->ioff = 0;
#ifdef MV_ONLY_DP
    (void)tern;
    (void)hooks;
    (void)lo;
    (void)hi;
    (void)per;
    (void)dp;
    if (1) {
        c->ivar = IV_DP;
        c->ioff = MV_DP_BIAS;
    } else
#endif
    if (tern && ((MV_TERN && !(dp && !(hooks & QTK__MM_HOOK_INT_MAD)) && !(hooks & QTK__MM_HOOK_NO_TERN)) ||
                 (hooks & QTK__MM_HOOK_TERN))) {
        c->ivar = IV_TERN;
    } else if (dp && !(hooks & QTK__MM_HOOK_INT_MAD)) {
        /* two's complement codes need no table: their top bit flipped is value + 2^(width-1) */
        if (MV_DP_BIAS && int_twos(w, ik)) {
            c->ivar = IV_XDP;
            c->ioff = 1 << (dk_cw(ik) - 1);
        } else {
            c->ivar = IV_DP;
            c->ioff = MV_DP_BIAS;
        }
    } else if (int_twos(w, ik)) {
        c->ivar = IV_XOR;
        c->ioff = 1 << (dk_cw(ik) - 1);
    } else if (ik != DK_I8 && (int)per * (hi - lo) <= 129) {
        c->ivar = IV_OFF;
        c->ioff = -lo;
    } else {
        c->ivar = IV_SGN;
    }
}

/* What the flavour is built on, for qtk_matmul_kernel (the vocabulary names its instructions;
 * MV_DP_NAME may be an expression of the CPU's features) */
#ifndef MV_MAD_INSN
#  define MV_MAD_INSN "lane loops (pmaddubsw's sums)"
#endif
#ifndef MV_TERN_INSN
#  define MV_TERN_INSN "lane loops (psadbw's sums)"
#endif
#ifndef MV_DP_NAME
#  ifdef MV_DP_INSN
#    define MV_DP_NAME MV_NAME " integer: " MV_DP_INSN
#  else
#    define MV_DP_NAME MV_NAME " integer: lane loops (vpdpbusd's sums)"
#  endif
#endif
static const char *int_name(const qtk__mm *c0) {
    qtk__mm c = *c0;
    int_choose(&c);
    switch (c.ivar) {
    case IV_DP: return MV_DP_NAME;
#ifdef MV_DP_INSN
    case IV_XDP: return MV_NAME " integer: " MV_DP_INSN ", weights + offset by xor";
#endif
    case IV_TERN: return MV_NAME " integer: multiply-free, " MV_TERN_INSN;
    case IV_XOR: return MV_NAME " integer: " MV_MAD_INSN ", weights + offset by xor";
    case IV_OFF: return MV_NAME " integer: " MV_MAD_INSN ", weights + offset by table";
    default: return MV_NAME " integer: " MV_MAD_INSN ", abs(w) times x with w's sign";
    }
}

/* The integer path takes rows of W by tiles of int_tile_rows (1 at M = 1), each row's prologue in
 * a slot of int_slot_floats (mm_row_ws, on whole cache lines) of the thread's scratch. */
static size_t int_tile_rows(const qtk__mm *c) { return c->M > 1 ? QTK__MM_INT_TILE : 1; }
static size_t int_slot_floats(const qtk__mm *c) { return qtk__ceil_div(mm_row_ws(c), 16) * 16; }

/* Quantizes the activations and lays them out for the flavour this call takes. */
static qtk_status int_prepare(qtk__mm *c) {
    int_choose(c);
    const bool need_xc = c->ivar != IV_SGN && c->ivar != IV_TERN && !(c->ivar == IV_DP && MV_DP_BIAS == 0);
    qtk_status st = qtk__mm_int_prepare_simd(c, MV_B, c->ioff, need_xc, qtk__mm_quantize_row);
    if (!st) c->ws_floats = int_tile_rows(c) * int_slot_floats(c);
    return st;
}
