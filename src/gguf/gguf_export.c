/* gguf_export.c — qtk tensors -> ggml blocks: which ggml type holds a tensor exactly
 * (GGUF.md §3.5, docs/gguf.md), and the codecs that write it.
 *
 * The choice depends on the description only, since GGUF's header (types included) precedes
 * the data. Types whose exactness depends on nothing but the scheme are chosen by default:
 *   q8s/q8f with f16 scales -> Q8_0, q4s/q4f with f16 -> Q4_0, 4-bit iq4nl lookup with f16 ->
 *   IQ4_NL, e2m1 with ue8m0 -> MXFP4, e2m1 with ue4m3 (+ an f32 global) -> NVFP4 (+ a
 *   companion ".scale" tensor), q2s with f16 -> Q2_0,
 * provided the rank is at most 4 and every ggml block (a run of 32/64 elements along the last
 * dimension) lies inside one qtk block, so its scale is the qtk block's, replicated. Types that
 * also need something of the data — Q5_0 (fields in -16..15), Q3_K/Q6_K/IQ4_XS (sub-scales of
 * the form f16 d x integer), Q8_K/TQ1_0/TQ2_0 (one scale per 256), Q1_0 (no zero field) — are
 * written only when the tensor's hint names them (the type it was read from), and a block that
 * does not fit is then an error naming it. Everything else has no lossless ggml type here. */
#include "gguf/gguf_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- choosing ---- */

enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q3_K = 11, T_Q6_K = 14, T_Q8_K = 15, T_IQ4_NL = 20,
       T_IQ4_XS = 23, T_I8 = 24, T_I16 = 25, T_I32 = 26, T_I64 = 27, T_F64 = 28, T_BF16 = 30, T_TQ1_0 = 34, T_TQ2_0 = 35,
       T_MXFP4 = 39, T_NVFP4 = 40, T_Q1_0 = 41, T_Q2_0 = 42 };

static int raw_type(qtk_elem e) {
    switch (e) {
    case QTK_ELEM_F32:
    case QTK_ELEM_FLEX32: return T_F32;
    case QTK_ELEM_F16: return T_F16;
    case QTK_ELEM_BF16: return T_BF16;
    case QTK_ELEM_F64: return T_F64;
    case QTK_ELEM_I8: return T_I8;
    case QTK_ELEM_I16: return T_I16;
    case QTK_ELEM_I32: return T_I32;
    case QTK_ELEM_I64: return T_I64;
    default: return -1;
    }
}

/* The one scale dtype of a single-level scheme (a block level alone, or a tensor level
 * alone; neither = per-tensor f32); NONE for two-level schemes. */
static qtk_dtype single_dtype(const qtk_scheme *s) {
    if (s->block_rank && s->tensor_dtype != QTK_DTYPE_NONE) return QTK_DTYPE_NONE;
    if (s->block_rank) return s->block_dtype;
    return s->tensor_dtype == QTK_DTYPE_NONE ? QTK_DTYPE_F32 : s->tensor_dtype;
}

/* Every run of g elements along the last dimension lies inside one qtk block. */
static bool covers(const qtk_layout *L, size_t g) {
    if (L->rank < 1) return false;
    size_t last = L->shape[L->rank - 1], qb = L->block[L->rank - 1];
    return last % g == 0 && (qb % g == 0 || qb >= last);
}

static bool is_q8(const qtk_scheme *s) { return s->mode == QTK_MODE_SYMMETRIC && (s->value == QTK_VALUE_Q8F || s->value == QTK_VALUE_Q8S); }
static bool is_q4(const qtk_scheme *s) { return s->mode == QTK_MODE_SYMMETRIC && (s->value == QTK_VALUE_Q4F || s->value == QTK_VALUE_Q4S); }
static bool is_iq4(const qtk_scheme *s) {
    return s->mode == QTK_MODE_LOOKUP && qtk_value_bits(s->value) == 4 && strcmp(s->table, "iq4nl") == 0;
}
static bool is_e2m1(const qtk_scheme *s) { return s->mode == QTK_MODE_SYMMETRIC && s->value == QTK_VALUE_E2M1; }
static bool is_q2s(const qtk_scheme *s) { return s->mode == QTK_MODE_SYMMETRIC && s->value == QTK_VALUE_Q2S; }
/* qtk's affine layout with ggml's convention: fields + f16 offsets (docs/affine.md) */
static bool is_affine_add(const qtk_scheme *s, qtk_value v) {
    return s->mode == QTK_MODE_AFFINE && s->value == v && s->offset == QTK_OFFSET_ADD && s->offset_dtype == QTK_DTYPE_F16 &&
           s->store != QTK_STORE_GGML;
}
/* the ggml type of a store=ggml scheme (its bytes are that type's data), or -1: the type that
 * reads as the scheme's preset */
static int ggml_native(const qtk_scheme *s) {
    if (s->store != QTK_STORE_GGML) return -1;
    const char *name = qtk_scheme_preset_name(s);
    for (uint32_t id = 0; name && id < QTK__GGUF_TYPE_COUNT; id++) {
        const gguf_type *ty = qtk__gguf_type(id);
        if (ty->kind == GK_NATIVE && strcmp(ty->spec, name) == 0) return (int)id;
    }
    return -1;
}

/* Does type `ty` hold tensor t (scheme s, layout L) as far as the description tells? */
static bool fits(int ty, const qtk_scheme *s, const qtk_layout *L, bool *companion) {
    qtk_dtype d = single_dtype(s);
    size_t last = L->rank ? L->shape[L->rank - 1] : 1;
    *companion = false;
    if (s->store == QTK_STORE_GGML) return ggml_native(s) == ty;
    switch (ty) {
    case T_Q8_0: return is_q8(s) && d == QTK_DTYPE_F16 && covers(L, 32);
    case T_Q5_0:
        return (is_q8(s) || (s->mode == QTK_MODE_SYMMETRIC && s->value == QTK_VALUE_Q5F)) && d == QTK_DTYPE_F16 &&
               covers(L, 32);
    case T_Q4_1: return is_affine_add(s, QTK_VALUE_U4) && d == QTK_DTYPE_F16 && covers(L, 32);
    case T_Q5_1: return is_affine_add(s, QTK_VALUE_U5) && d == QTK_DTYPE_F16 && covers(L, 32);
    case T_Q4_0: return is_q4(s) && d == QTK_DTYPE_F16 && covers(L, 32);
    case T_IQ4_NL: return is_iq4(s) && d == QTK_DTYPE_F16 && covers(L, 32);
    case T_MXFP4: return is_e2m1(s) && d == QTK_DTYPE_UE8M0 && covers(L, 32);
    case T_NVFP4:
        if (!is_e2m1(s) || !covers(L, 16) || last % 64) return false;
        if (d == QTK_DTYPE_UE4M3) return true;
        /* two-level: ue4m3 blocks under an f32 global, which goes to the companion */
        *companion = s->block_rank && s->block_dtype == QTK_DTYPE_UE4M3 && s->tensor_dtype == QTK_DTYPE_F32;
        return *companion;
    case T_Q2_0: return is_q2s(s) && d == QTK_DTYPE_F16 && covers(L, 64);
    case T_Q1_0: return is_q2s(s) && d == QTK_DTYPE_F16 && covers(L, 128);
    case T_TQ1_0:
    case T_TQ2_0: return is_q2s(s) && d == QTK_DTYPE_F16 && covers(L, 128) && last % 256 == 0;
    case T_Q3_K: return is_q4(s) && d == QTK_DTYPE_F32 && covers(L, 16) && last % 256 == 0;
    case T_Q6_K: return is_q8(s) && d == QTK_DTYPE_F32 && covers(L, 16) && last % 256 == 0;
    case T_Q8_K: return is_q8(s) && d == QTK_DTYPE_F32 && covers(L, 128) && last % 256 == 0;
    case T_IQ4_XS: return is_iq4(s) && d == QTK_DTYPE_F32 && covers(L, 32) && last % 256 == 0;
    default: return false;
    }
}

int qtk__gguf_choose(const qtk_ckpt_tensor *t, const char *hint, bool *companion, char *why, size_t cap) {
    *companion = false;
    if (t->rank > GGUF_MAX_DIMS) {
        snprintf(why, cap, "rank %d: GGUF tensors have at most %d dims", t->rank, GGUF_MAX_DIMS);
        return -1;
    }
    if (!t->quantized) {
        int ty = raw_type(t->elem);
        if (ty < 0) snprintf(why, cap, "GGUF has no type for %s elements", qtk_elem_name(t->elem));
        return ty;
    }
    qtk_layout L;
    if (qtk_layout_compute(&t->scheme, t->shape, t->rank, &L) != QTK_OK) {
        snprintf(why, cap, "%s", qtk_last_error());
        return -1;
    }
    int g = ggml_native(&t->scheme);
    if (g >= 0) return g; /* ggml's own blocks */
    int h = qtk__gguf_type_id(hint);
    if (h >= 0 && fits(h, &t->scheme, &L, companion)) return h;
    static const int defaults[] = {T_Q8_0, T_Q4_0, T_IQ4_NL, T_MXFP4, T_NVFP4, T_Q2_0, T_Q4_1, T_Q5_1, T_Q5_0};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (fits(defaults[i], &t->scheme, &L, companion)) return defaults[i];
    char spec[160];
    if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL) != QTK_OK) snprintf(spec, sizeof spec, "?");
    snprintf(why, cap,
             "no ggml type holds %s exactly on shape %s (GGUF takes ggml's own types q4_1 q5_0 q5_1 q2_k q3_k "
             "q4_k q5_k q6_k, and q8/q4/q5f with f16 scales, u4/u5 with f16 scales and offset=f16, 4-bit iq4nl "
             "with f16, mxfp4, e2m1/ue4m3 (nvfp4) and q2s with f16, in blocks of 32 (64 for nvfp4 and q2s) along "
             "the last dimension)",
             spec, qtk_shape_format(t->shape, t->rank, (char[128]){0}, 128));
    return -1;
}

bool qtk__gguf_writable(const qtk_ckpt_tensor *t, const char *hint, char *why, size_t cap) {
    bool comp;
    char buf[8];
    return qtk__gguf_choose(t, hint, &comp, why ? why : buf, why ? cap : sizeof buf) >= 0;
}

/* ---- reading fields and scales out of any qtk layout ---- */

typedef struct {
    const qtk_layout *L;
    const uint8_t *v, *sc, *off;
    unsigned ssz;          /* bytes per scale (and per offset) */
    unsigned bits, fpu, ub;
    bool sign;             /* integer values: sign-extend */
    bool along_last;       /* fields packed along the last dimension (or one per unit) */
    size_t sstride[QTK_MAX_RANK], gstride[QTK_MAX_RANK];
    /* per row */
    size_t unit_base, scale_base;
    unsigned fixed_pos;
} qsrc;

static void qsrc_init(qsrc *q, const qtk_scheme *s, const qtk_layout *L, const uint8_t *bytes) {
    memset(q, 0, sizeof *q);
    q->L = L;
    q->v = bytes;
    q->sc = bytes + L->scales_offset;
    q->off = bytes + L->offsets_offset;
    q->ssz = qtk_dtype_bits(L->scale_dtype) / 8;
    q->fpu = L->fields_per_unit;
    q->ub = L->unit_bytes;
    /* one field per unit (native, or packed for non-e2m1): the byte is the field, integers
     * sign-extended to the byte */
    q->bits = q->fpu == 1 ? 8 * L->unit_bytes : L->bits;
    q->sign = s->mode == QTK_MODE_SYMMETRIC && s->value != QTK_VALUE_E2M1 && s->value != QTK_VALUE_E4M3 &&
              s->value != QTK_VALUE_E5M2;
    q->along_last = q->fpu == 1 || L->pack_axis == L->rank - 1;
    size_t st = 1, gs = 1;
    for (int d = L->rank - 1; d >= 0; d--) {
        q->sstride[d] = st;
        q->gstride[d] = gs;
        st *= L->storage_shape[d];
        gs *= L->grid[d];
    }
}

static void qsrc_row(qsrc *q, size_t row) {
    const qtk_layout *L = q->L;
    size_t ub = 0, sb = 0;
    q->fixed_pos = 0;
    for (int d = L->rank - 2; d >= 0; d--) {
        size_t c = row % L->shape[d];
        row /= L->shape[d];
        if (d == L->pack_axis && q->fpu > 1) {
            ub += c / q->fpu * q->sstride[d];
            q->fixed_pos = (unsigned)(c % q->fpu);
        } else {
            ub += c * q->sstride[d];
        }
        sb += c / L->block[d] * q->gstride[d];
    }
    q->unit_base = ub;
    q->scale_base = sb;
}

static int qsrc_field(const qsrc *q, size_t col) {
    size_t unit;
    unsigned pos;
    if (q->along_last) {
        unit = q->unit_base + col / q->fpu;
        pos = (unsigned)(col % q->fpu);
    } else {
        unit = q->unit_base + col;
        pos = q->fixed_pos;
    }
    uint32_t w = q->ub == 4 ? qtk__ld32(q->v + 4 * unit) : q->v[unit];
    unsigned x = (w >> (pos * q->bits)) & ((1u << q->bits) - 1u); /* bits <= 8 */
    if (q->sign && (x >> (q->bits - 1))) return (int)x - (1 << q->bits);
    return (int)x;
}

/* Fields of columns col .. col + n - 1 of the current row. In the usual layouts (fields packed
 * along the last dimension, the run starting on a unit boundary) the bytes are the fields
 * packed first-in-lowest-bits, whatever the unit (a u32 word is little-endian): unpacked byte
 * by byte. The rest go field by field. */
static void qsrc_fields(const qsrc *q, size_t col, unsigned n, int *f) {
    if (!q->along_last || col % q->fpu || n % q->fpu) {
        for (unsigned j = 0; j < n; j++) f[j] = qsrc_field(q, col + j);
        return;
    }
    const uint8_t *p = q->v + q->unit_base * q->ub + col * q->bits / 8;
    const int sg = q->sign;
    if (q->bits == 8) {
        for (unsigned j = 0; j < n; j++) f[j] = sg ? (int)(int8_t)p[j] : (int)p[j];
    } else if (q->bits == 4) {
        for (unsigned j = 0; j < n; j += 2, p++) {
            int lo = p[0] & 15, hi = p[0] >> 4;
            f[j] = sg ? (lo ^ 8) - 8 : lo;
            f[j + 1] = sg ? (hi ^ 8) - 8 : hi;
        }
    } else {
        for (unsigned j = 0; j < n; j += 4, p++)
            for (unsigned k = 0; k < 4; k++) {
                int x = (p[0] >> (2 * k)) & 3;
                f[j + k] = sg ? (x ^ 2) - 2 : x;
            }
    }
}

/* the stored scale of the qtk block holding column col of the current row */
static const uint8_t *qsrc_scale(const qsrc *q, size_t col) {
    const qtk_layout *L = q->L;
    size_t idx = q->scale_base + col / L->block[L->rank - 1];
    return q->sc + idx * q->ssz;
}

/* the stored offset of the qtk block holding column col (affine layouts, f16 like the scales) */
static const uint8_t *qsrc_offset(const qsrc *q, size_t col) {
    const qtk_layout *L = q->L;
    size_t idx = q->scale_base + col / L->block[L->rank - 1];
    return q->off + idx * q->ssz;
}

/* ---- writing blocks ---- */

typedef struct {
    const char *name, *type;
    size_t row, col; /* where the block starts */
} ectx;

static qtk_status block_err(const ectx *x, const char *fmt, ...) QTK_PRINTF(2, 3);
static qtk_status block_err(const ectx *x, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return qtk__err(QTK_E_VALUE, "tensor '%s' cannot be written as %s: the block at row %zu, column %zu %s", x->name, x->type,
                    x->row, x->col, what);
}

/* h bytes of ggml split order from 2h 4-bit codes in element order */
static void seq_to_split(const int *c, uint8_t *out, unsigned h) {
    for (unsigned k = 0; k < h; k++) out[k] = (uint8_t)((c[k] & 15) | (c[k + h] & 15) << 4);
}

static float f32_of(const uint8_t *p) { return qtk__bits_f32(qtk__ld32(p)); }

/* Finds an f16 d and integers k_i in [lo, hi] with f32(d) x k_i == s_i bit for bit — the
 * K-quants' "super-scale x sub-scale" — preferring what ggml's quantizers produce (the sub-block
 * with the largest |s| gets k = lo, e.g. -128 for Q6_K), so that ggml's bytes come back. */
static bool try_d(const float *s, int n, float d, int lo, int hi, int *k) {
    for (int i = 0; i < n; i++) {
        if (d == 0.0f) {
            if (s[i] != 0.0f) return false;
            /* 0 x 0 keeps d's sign, 0 x negative flips it */
            k[i] = signbit(s[i]) == signbit(d) ? 0 : lo;
            continue;
        }
        double q = (double)s[i] / (double)d;
        if (q != floor(q) || q < lo || q > hi) return false;
        k[i] = (int)q;
        if (qtk__f32_bits(d * (float)k[i]) != qtk__f32_bits(s[i])) return false;
    }
    return true;
}

static bool split_scales(const float *s, int n, int lo, int hi, uint16_t *dh, int *k) {
    int imax = 0;
    for (int i = 1; i < n; i++)
        if (fabsf(s[i]) > fabsf(s[imax])) imax = i;
    if (!qtk__isfinite(s[imax])) return false;
    if (s[imax] == 0.0f) {
        *dh = 0;
        return try_d(s, n, 0.0f, lo, hi, k);
    }
    /* candidates for the largest sub-block's k: lo first, then by decreasing magnitude */
    int top = -lo > hi ? -lo : hi;
    for (int step = 0; step <= 2 * top; step++) {
        int m = top - (step - 1) / 2, kc = step == 0 ? lo : step % 2 ? -m : m;
        if ((step > 0 && kc == lo) || kc < lo || kc > hi) continue;
        double dd = (double)s[imax] / kc;
        uint16_t h = (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, (float)dd);
        if ((double)qtk__gguf_f16(h) != dd) continue;
        if (try_d(s, n, qtk__gguf_f16(h), lo, hi, k)) {
            *dh = h;
            return true;
        }
    }
    return false;
}

/* ---- the sub-scales of Q3_K, Q6_K and IQ4_XS blocks ---- */

/* Where a block's scale bytes are (d and the integer sub-scales) and how many. */
static void scale_part(int ty, size_t *off, size_t *len) {
    if (ty == T_IQ4_XS) *off = 0, *len = 8;
    else if (ty == T_Q6_K) *off = 192, *len = 18;
    else *off = 96, *len = 14;
}

/* Writes d (f16 bits) and the sub-scale integers k into a block's scale bytes. */
static void encode_scales(int ty, uint16_t dh, const int *k, uint8_t *o) {
    if (ty == T_IQ4_XS) {
        qtk__st16(o, dh);
        unsigned sh = 0;
        memset(o + 4, 0, 4);
        for (unsigned b = 0; b < 8; b++) {
            unsigned ls = (unsigned)(k[b] + 32);
            o[4 + b / 2] |= (uint8_t)((ls & 15u) << (4 * (b % 2)));
            sh |= (ls >> 4) << (2 * b);
        }
        qtk__st16(o + 2, (uint16_t)sh);
    } else if (ty == T_Q6_K) {
        for (unsigned i = 0; i < 16; i++) o[192 + i] = (uint8_t)(int8_t)k[i];
        qtk__st16(o + 208, dh);
    } else {
        memset(o + 96, 0, 12);
        for (unsigned i = 0; i < 16; i++) {
            unsigned S = (unsigned)(k[i] + 32);
            o[96 + (i < 8 ? i : i - 8)] |= (uint8_t)((S & 15u) << (i < 8 ? 0 : 4));
            o[96 + 8 + i % 4] |= (uint8_t)((S >> 4) << (2 * (i / 4)));
        }
        qtk__st16(o + 108, dh);
    }
}

/* The sub-scales f32(d) x k of a block, as the reader makes them (gguf_import.c). */
static unsigned decode_scales(int ty, const uint8_t *blk, float *sv) {
    if (ty == T_IQ4_XS) {
        float d = qtk__gguf_f16(qtk__ld16(blk));
        unsigned sh = qtk__ld16(blk + 2);
        for (unsigned k = 0; k < 8; k++) {
            unsigned ls = ((blk[4 + k / 2] >> (4 * (k % 2))) & 15u) | ((sh >> (2 * k)) & 3u) << 4;
            sv[k] = d * (float)((int)ls - 32);
        }
        return 8;
    }
    if (ty == T_Q6_K) {
        float d = qtk__gguf_f16(qtk__ld16(blk + 208));
        for (unsigned k = 0; k < 16; k++) sv[k] = d * (float)(int8_t)blk[192 + k];
        return 16;
    }
    const uint8_t *sc = blk + 96;
    float d = qtk__gguf_f16(qtk__ld16(blk + 108));
    for (unsigned k = 0; k < 16; k++) {
        unsigned lo4 = k < 8 ? sc[k] & 15u : sc[k - 8] >> 4;
        unsigned hi2 = (sc[8 + k % 4] >> (2 * (k / 4))) & 3u;
        sv[k] = d * (float)((int)(lo4 | hi2 << 4) - 32);
    }
    return 16;
}

static void scale_range(int ty, int *lo, int *hi) {
    *lo = ty == T_Q6_K ? -128 : -32;
    *hi = ty == T_Q6_K ? 127 : 31;
}

bool qtk__gguf_scales_come_back(uint32_t type, const uint8_t *blk) {
    int ty = (int)type, lo, hi, k[16];
    if (ty != T_Q3_K && ty != T_Q6_K && ty != T_IQ4_XS) return true;
    float sv[16];
    unsigned ns = decode_scales(ty, blk, sv);
    scale_range(ty, &lo, &hi);
    uint16_t dh;
    if (!split_scales(sv, (int)ns, lo, hi, &dh, k)) return false;
    uint8_t o[210];
    size_t off, len;
    scale_part(ty, &off, &len);
    memcpy(o, blk, qtk__gguf_type(type)->bytes);
    encode_scales(ty, dh, k, o);
    return memcmp(o + off, blk + off, len) == 0;
}

/* A block's scale bytes as the file had them (a record of qtk:gguf_scales): used in place of
 * what the sub-scales give when they decode to the same sub-scales bit for bit. */
typedef struct {
    size_t block;
    uint8_t bytes[18];
} scale_record;

static bool apply_record(int ty, const float *sv, const scale_record *r, uint8_t *o) {
    size_t off, len;
    scale_part(ty, &off, &len);
    uint8_t blk[210];
    memcpy(blk, o, ty == T_IQ4_XS ? 136 : ty == T_Q6_K ? 210 : 110);
    memcpy(blk + off, r->bytes, len);
    float rv[16];
    unsigned ns = decode_scales(ty, blk, rv);
    for (unsigned i = 0; i < ns; i++)
        if (qtk__f32_bits(rv[i]) != qtk__f32_bits(sv[i])) return false;
    memcpy(o + off, r->bytes, len);
    return true;
}

static qtk_status exp_block(int ty, const qsrc *q, const ectx *x, size_t col, uint8_t *o, const scale_record *rec) {
    int f[256];
    const gguf_type *gt = qtk__gguf_type((uint32_t)ty);
    qsrc_fields(q, col, gt->blck, f);
    switch (ty) {
    case T_Q8_0:
        memcpy(o, qsrc_scale(q, col), 2);
        for (unsigned j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)f[j];
        return QTK_OK;
    case T_Q5_0: {
        memcpy(o, qsrc_scale(q, col), 2);
        uint32_t qh = 0;
        int c[32];
        for (unsigned j = 0; j < 32; j++) {
            if (f[j] < -16 || f[j] > 15) return block_err(x, "holds the field %d at column %zu; Q5_0 holds -16..15", f[j], col + j);
            c[j] = f[j] + 16;
            qh |= (uint32_t)(c[j] >> 4) << j;
        }
        qtk__st32(o + 2, qh);
        seq_to_split(c, o + 6, 16);
        return QTK_OK;
    }
    case T_Q4_1:
        memcpy(o, qsrc_scale(q, col), 2);
        memcpy(o + 2, qsrc_offset(q, col), 2);
        seq_to_split(f, o + 4, 16);
        return QTK_OK;
    case T_Q5_1: {
        memcpy(o, qsrc_scale(q, col), 2);
        memcpy(o + 2, qsrc_offset(q, col), 2);
        uint32_t qh = 0;
        for (unsigned j = 0; j < 32; j++) qh |= (uint32_t)((f[j] >> 4) & 1) << j;
        qtk__st32(o + 4, qh);
        seq_to_split(f, o + 8, 16);
        return QTK_OK;
    }
    case T_Q4_0:
    case T_IQ4_NL:
        memcpy(o, qsrc_scale(q, col), 2);
        if (ty == T_Q4_0)
            for (unsigned j = 0; j < 32; j++) f[j] = (f[j] + 8) & 15;
        seq_to_split(f, o + 2, 16);
        return QTK_OK;
    case T_MXFP4:
        o[0] = *qsrc_scale(q, col);
        seq_to_split(f, o + 1, 16);
        return QTK_OK;
    case T_NVFP4:
        for (unsigned k = 0; k < 4; k++) {
            o[k] = *qsrc_scale(q, col + 16 * k);
            seq_to_split(f + 16 * k, o + 4 + 8 * k, 8);
        }
        return QTK_OK;
    case T_Q2_0:
        memcpy(o, qsrc_scale(q, col), 2);
        memset(o + 2, 0, 16);
        for (unsigned j = 0; j < 64; j++) {
            if (f[j] < -1) return block_err(x, "holds the field %d at column %zu; q2s fields are -1..1", f[j], col + j);
            o[2 + j / 4] |= (uint8_t)((f[j] + 1) << (2 * (j % 4)));
        }
        return QTK_OK;
    case T_Q1_0:
        memcpy(o, qsrc_scale(q, col), 2);
        memset(o + 2, 0, 16);
        for (unsigned j = 0; j < 128; j++) {
            if (f[j] != 1 && f[j] != -1) return block_err(x, "holds the field %d at column %zu; Q1_0 holds only -1 and +1", f[j], col + j);
            if (f[j] > 0) o[2 + j / 8] |= (uint8_t)(1u << (j % 8));
        }
        return QTK_OK;
    case T_TQ1_0:
    case T_TQ2_0: {
        const uint8_t *s0 = qsrc_scale(q, col), *s1 = qsrc_scale(q, col + 128);
        if (memcmp(s0, s1, 2) != 0)
            return block_err(x, "has two different scales (f16 0x%04x, 0x%04x) where %s has one per 256 elements", qtk__ld16(s0),
                             qtk__ld16(s1), x->type);
        for (unsigned j = 0; j < 256; j++)
            if (f[j] < -1) return block_err(x, "holds the field %d at column %zu; q2s fields are -1..1", f[j], col + j);
        if (ty == T_TQ2_0) {
            memset(o, 0, 64);
            for (unsigned e = 0; e < 256; e++) {
                unsigned h = e / 128, l = (e / 32) % 4, m = e % 32;
                o[32 * h + m] |= (uint8_t)((f[e] + 1) << (2 * l));
            }
            memcpy(o + 64, s0, 2);
            return QTK_OK;
        }
        /* TQ1_0: 5 (or 4) trits as a base-3 number, first most significant, scaled to a byte
         * rounding up, so that ((q x 3^i mod 256) x 3) >> 8 gives trit i back (GGUF.md §2.12) */
        for (unsigned m = 0; m < 48; m++) {
            unsigned v = 0;
            for (unsigned i = 0; i < 5; i++) v = 3 * v + (unsigned)(f[m < 32 ? m + 32 * i : 160 + (m - 32) + 16 * i] + 1);
            o[m] = (uint8_t)((v * 256 + 242) / 243);
        }
        for (unsigned j = 0; j < 4; j++) {
            unsigned v = 0;
            for (unsigned i = 0; i < 4; i++) v = 3 * v + (unsigned)(f[240 + j + 4 * i] + 1);
            v *= 3;
            o[48 + j] = (uint8_t)((v * 256 + 242) / 243);
        }
        memcpy(o + 52, s0, 2);
        return QTK_OK;
    }
    case T_Q8_K: {
        const uint8_t *s0 = qsrc_scale(q, col), *s1 = qsrc_scale(q, col + 128);
        if (memcmp(s0, s1, 4) != 0)
            return block_err(x, "has two different scales (%g, %g) where Q8_K has one per 256 elements", (double)f32_of(s0),
                             (double)f32_of(s1));
        memcpy(o, s0, 4);
        for (unsigned j = 0; j < 256; j++) o[4 + j] = (uint8_t)(int8_t)f[j];
        for (unsigned i = 0; i < 16; i++) {
            int sum = 0;
            for (unsigned j = 0; j < 16; j++) sum += f[16 * i + j];
            qtk__st16(o + 260 + 2 * i, (uint16_t)(int16_t)sum);
        }
        return QTK_OK;
    }
    case T_Q3_K:
    case T_Q6_K:
    case T_IQ4_XS: {
        unsigned sub = ty == T_IQ4_XS ? 32 : 16, ns = 256 / sub;
        int lo, hi, k[16];
        scale_range(ty, &lo, &hi);
        float sv[16];
        uint16_t dh;
        for (unsigned i = 0; i < ns; i++) sv[i] = f32_of(qsrc_scale(q, col + sub * i));
        if (!split_scales(sv, (int)ns, lo, hi, &dh, k))
            return block_err(x, "has sub-block scales (%g, %g, ...) that are not one f16 times integers in %d..%d", (double)sv[0],
                             (double)sv[1], lo, hi);
        int qlo = ty == T_Q3_K ? -4 : -32, qhi = ty == T_Q3_K ? 3 : 31;
        for (unsigned j = 0; ty != T_IQ4_XS && j < 256; j++)
            if (f[j] < qlo || f[j] > qhi)
                return block_err(x, "holds the field %d at column %zu; %s holds %d..%d", f[j], col + j, x->type, qlo, qhi);
        if (ty == T_IQ4_XS) {
            for (unsigned b = 0; b < 8; b++) seq_to_split(f + 32 * b, o + 8 + 16 * b, 16);
        } else if (ty == T_Q6_K) {
            memset(o, 0, 192);
            for (unsigned e = 0; e < 256; e++) {
                unsigned u = (unsigned)(f[e] + 32), h = e / 128, g = (e / 32) % 4, l = e % 32;
                o[64 * h + 32 * (g & 1) + l] |= (uint8_t)((u & 15u) << (g < 2 ? 0 : 4));
                o[128 + 32 * h + l] |= (uint8_t)((u >> 4) << (2 * g));
            }
        } else {
            memset(o, 0, 96);
            for (unsigned e = 0; e < 256; e++) {
                unsigned h = e / 128, j = (e / 32) % 4, l = e % 32;
                o[32 + 32 * h + l] |= (uint8_t)(((unsigned)f[e] & 3u) << (2 * j));
                if (f[e] >= 0) o[l] |= (uint8_t)(1u << (e / 32));
            }
        }
        encode_scales(ty, dh, k, o);
        /* a block whose f16 d underflowed to 0 keeps sub-scales its values no longer show:
         * the file's own scale bytes, recorded, come back (when they give these values) */
        if (rec) apply_record(ty, sv, rec, o);
        return QTK_OK;
    }
    default: return qtk__err(QTK_E_INTERNAL, "no exporter for ggml type %d", ty);
    }
}

/* Parses a qtk:gguf_scales value, "BLOCK:HEX,BLOCK:HEX,..." with blocks in increasing order. */
static qtk_status parse_records(int ty, const char *text, const char *name, scale_record **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!text || !*text) return QTK_OK;
    size_t off, len, cap = 1;
    scale_part(ty, &off, &len);
    for (const char *p = text; *p; p++) cap += *p == ',';
    scale_record *r = calloc(cap, sizeof *r);
    if (!r) return qtk__err(QTK_E_NOMEM, "out of memory");
    const char *p = text;
    size_t k = 0;
    while (*p) {
        char *end;
        unsigned long long b = strtoull(p, &end, 10);
        bool ok = end != p && *end == ':' && (k == 0 || b > r[k - 1].block);
        p = end + (ok ? 1 : 0);
        for (size_t i = 0; ok && i < len; i++) {
            int hi = p[0] >= '0' && p[0] <= '9' ? p[0] - '0' : p[0] >= 'a' && p[0] <= 'f' ? p[0] - 'a' + 10 : -1;
            int lo = hi < 0 ? -1 : p[1] >= '0' && p[1] <= '9' ? p[1] - '0' : p[1] >= 'a' && p[1] <= 'f' ? p[1] - 'a' + 10 : -1;
            ok = lo >= 0;
            if (ok) r[k].bytes[i] = (uint8_t)(hi << 4 | lo), p += 2;
        }
        ok = ok && (*p == ',' || *p == '\0');
        if (!ok) {
            free(r);
            return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_GGUF_SCALES "%s' is not BLOCK:HEX,... (%zu scale bytes each)", name,
                            len);
        }
        r[k++].block = (size_t)b;
        if (*p == ',') p++;
    }
    *out = r;
    *n = k;
    return QTK_OK;
}

qtk_status qtk__gguf_scale_records(uint32_t type, const uint8_t *data, size_t nblocks, char **out) {
    *out = NULL;
    const gguf_type *gt = qtk__gguf_type(type);
    int ty = (int)type;
    if (!gt || (ty != T_Q3_K && ty != T_Q6_K && ty != T_IQ4_XS)) return QTK_OK;
    size_t off, len, n = 0, cap = 0;
    scale_part(ty, &off, &len);
    char *s = NULL;
    for (size_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = data + b * gt->bytes;
        if (qtk__gguf_scales_come_back(type, blk)) continue;
        char item[64];
        int k = snprintf(item, sizeof item, "%s%zu:", n ? "," : "", b);
        for (size_t i = 0; i < len; i++) k += snprintf(item + k, sizeof item - (size_t)k, "%02x", blk[off + i]);
        if (n + (size_t)k + 1 > cap) {
            size_t nc = cap ? 2 * cap : 256;
            while (nc < n + (size_t)k + 1) nc *= 2;
            char *g = realloc(s, nc);
            if (!g) {
                free(s);
                return qtk__err(QTK_E_NOMEM, "out of memory");
            }
            s = g, cap = nc;
        }
        memcpy(s + n, item, (size_t)k + 1);
        n += (size_t)k;
    }
    *out = s;
    return QTK_OK;
}

qtk_status qtk__gguf_export(uint32_t type, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *dst,
                            const char *records) {
    const gguf_type *gt = qtk__gguf_type(type);
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (st) return st;
    if (ggml_native(&t->scheme) == (int)type) { /* ggml's blocks already */
        memcpy(dst, bytes, L.total_bytes);
        return QTK_OK;
    }
    if (is_iq4(&t->scheme)) {
        /* the table travels with the bytes: it must be ggml's codebook */
        float k[16];
        size_t n;
        st = qtk_table_get("iq4nl", k, 16, &n);
        if (st) return st;
        for (size_t i = 0; i < 16; i++)
            if (qtk__ld32(bytes + L.table_offset + 4 * i) != qtk__f32_bits(k[i]))
                return qtk__err(QTK_E_VALUE, "tensor '%s': lookup table entry %zu is %g, not ggml's IQ4_NL codebook value %g", t->name, i,
                                (double)f32_of(bytes + L.table_offset + 4 * i), (double)k[i]);
    }
    scale_record *rec = NULL;
    size_t n_rec = 0, next = 0, block = 0;
    st = parse_records((int)type, records, t->name, &rec, &n_rec);
    if (st) return st;
    qsrc q;
    qsrc_init(&q, &t->scheme, &L, bytes);
    size_t last = L.shape[L.rank - 1], rows = last ? L.numel / last : 0;
    ectx x = {t->name, gt->name, 0, 0};
    for (size_t r = 0; r < rows && !st; r++) {
        qsrc_row(&q, r);
        x.row = r;
        for (size_t c = 0; c < last && !st; c += gt->blck, block++) {
            x.col = c;
            const scale_record *br = next < n_rec && rec[next].block == block ? &rec[next++] : NULL;
            st = exp_block((int)type, &q, &x, c, dst, br);
            dst += gt->bytes;
        }
    }
    free(rec);
    return st;
}
