/* oracle.c — the naive second implementation of SPEC.md (see oracle.h). */
#include "oracle.h"

#include <math.h>
#include <string.h>

static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- formats: sign bit position, exponent/mantissa widths, bias ---- */
typedef struct {
    int sbit; /* -1: unsigned */
    int E, M, bias;
    int ieee; /* 1: all-ones exponent is inf/NaN; 2: only all-ones code (E4M3FN) is NaN; 0: no specials */
    int ncodes;
} fmt;

static fmt fmt_of(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F16: return (fmt){15, 5, 10, 15, 1, 65536};
    case QTK_DTYPE_BF16: return (fmt){15, 8, 7, 127, 1, 65536};
    case QTK_DTYPE_E4M3: return (fmt){7, 4, 3, 7, 2, 256};
    case QTK_DTYPE_UE4M3: return (fmt){-1, 4, 3, 7, 2, 128};
    case QTK_DTYPE_E5M2: return (fmt){7, 5, 2, 15, 1, 256};
    case QTK_DTYPE_E2M1: return (fmt){3, 2, 1, 1, 0, 16};
    default: return (fmt){0, 0, 0, 0, 0, 0};
    }
}

double oracle_decode(qtk_dtype d, uint32_t code) {
    if (d == QTK_DTYPE_F32) return (double)f32_of(code);
    if (d == QTK_DTYPE_UE8M0) return code == 255 ? NAN : ldexp(1.0, (int)code - 127);
    fmt f = fmt_of(d);
    int neg = f.sbit >= 0 && ((code >> f.sbit) & 1);
    uint32_t e = (code >> f.M) & ((1u << f.E) - 1), m = code & ((1u << f.M) - 1);
    double v;
    if (f.ieee == 1 && e == (1u << f.E) - 1) v = m ? NAN : INFINITY;
    else if (f.ieee == 2 && e == (1u << f.E) - 1 && m == (1u << f.M) - 1) v = NAN;
    else if (e == 0) v = ldexp((double)m, 1 - f.bias - f.M);
    else v = ldexp(1.0 + ldexp((double)m, -f.M), (int)e - f.bias);
    return neg ? -v : v;
}

/* magnitude codes are 0 .. (1 << (E+M)) - 1 */
uint32_t oracle_encode_nearest(qtk_dtype d, double v) {
    fmt f = fmt_of(d);
    double a = fabs(v);
    uint32_t best = 0;
    double bd = INFINITY;
    for (uint32_t c = 0; c < (1u << (f.E + f.M)); c++) {
        double cv = oracle_decode(d, c);
        if (!isfinite(cv)) continue;
        double dist = fabs(a - cv);
        if (dist < bd || (dist == bd && (c & 1) == 0)) {
            bd = dist;
            best = c;
        }
    }
    if (f.sbit >= 0 && signbit(v)) best |= 1u << f.sbit;
    return best;
}

uint32_t oracle_round_up(qtk_dtype d, float v) {
    if (d == QTK_DTYPE_F32) return bits_of(v);
    double a = fabs((double)v);
    int neg = signbit(v) && d != QTK_DTYPE_UE8M0 && d != QTK_DTYPE_UE4M3;
    uint32_t best;
    if (d == QTK_DTYPE_UE8M0) {
        best = 254;
        for (uint32_t c = 0; c <= 254; c++)
            if (oracle_decode(d, c) >= a) {
                best = c;
                break;
            }
        return best;
    }
    fmt f = fmt_of(d);
    /* positive codes are increasing in value: find the first finite one >= a */
    uint32_t lo = 0, hi = (1u << (f.E + f.M)) - 1;
    while (!isfinite(oracle_decode(d, hi))) hi--; /* largest finite */
    if (oracle_decode(d, hi) <= a) best = hi;
    else {
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (oracle_decode(d, mid) >= a) hi = mid;
            else lo = mid + 1;
        }
        best = lo;
    }
    if (neg && f.sbit >= 0) best |= 1u << f.sbit;
    return best;
}

/* ---- scheme facts, independently ---- */
static unsigned vbits(qtk_value v) {
    return v == QTK_VALUE_Q8F || v == QTK_VALUE_Q8S || v == QTK_VALUE_E4M3 || v == QTK_VALUE_E5M2 ? 8
           : v == QTK_VALUE_Q2F || v == QTK_VALUE_Q2S                                              ? 2
                                                                                                   : 4;
}
static int is_int(qtk_value v) { return v <= QTK_VALUE_Q2S; }
static void int_range(qtk_value v, int *lo, int *hi) {
    static const int r[6][2] = {{-128, 127}, {-127, 127}, {-8, 7}, {-7, 7}, {-2, 1}, {-1, 1}};
    *lo = r[v][0];
    *hi = r[v][1];
}
static qtk_dtype vfmt(qtk_value v) {
    return v == QTK_VALUE_E4M3 ? QTK_DTYPE_E4M3 : v == QTK_VALUE_E5M2 ? QTK_DTYPE_E5M2 : QTK_DTYPE_E2M1;
}
static double vmax(qtk_value v) { return v == QTK_VALUE_E4M3 ? 448 : v == QTK_VALUE_E5M2 ? 57344 : 6; }
static unsigned ssize(qtk_dtype d) {
    return d == QTK_DTYPE_F32 ? 4 : d == QTK_DTYPE_F16 || d == QTK_DTYPE_BF16 ? 2 : 1;
}

typedef struct {
    int rank, erank;
    size_t shape[8], numel;
    unsigned bits, fpu, ubytes;
    int axis;
    size_t sshape[8], units;
    size_t blk[8], grid[8], ngroups;
    qtk_dtype sdt;
    int two, lookup;
    size_t vbytes, sbytes, gbytes, tbytes, total;
} geo;

static int geo_of(const qtk_scheme *s, const size_t *shape, int rank, geo *g) {
    memset(g, 0, sizeof *g);
    g->rank = rank;
    g->erank = rank ? rank : 1;
    g->numel = 1;
    for (int i = 0; i < g->erank; i++) {
        g->shape[i] = rank ? shape[i] : 1;
        g->numel *= g->shape[i];
    }
    g->bits = vbits(s->value);
    g->fpu = s->store == QTK_STORE_U32 ? 32 / g->bits : s->store == QTK_STORE_PACKED && s->value == QTK_VALUE_E2M1 ? 2 : 1;
    g->ubytes = s->store == QTK_STORE_U32 ? 4 : 1;
    if (s->store != QTK_STORE_NATIVE && s->pack_dim >= g->erank) return 0;
    g->axis = g->erank - 1 - (s->store == QTK_STORE_NATIVE ? 0 : s->pack_dim);
    g->units = 1;
    for (int i = 0; i < g->erank; i++) {
        g->sshape[i] = i == g->axis ? (g->shape[i] + g->fpu - 1) / g->fpu : g->shape[i];
        g->units *= g->sshape[i];
    }
    g->vbytes = g->units * g->ubytes;
    /* blocks: strip leading 1s, right-align */
    unsigned br = s->block_rank, lead = 0;
    while (lead + 1 < br && s->block[lead] == 1) lead++;
    g->ngroups = 1;
    if (br) {
        if ((int)(br - lead) > rank) return 0;
        for (int i = 0; i < rank; i++) {
            int k = i - (rank - (int)(br - lead));
            size_t b = k < 0 ? 1 : s->block[lead + (unsigned)k];
            if (b == 0) b = shape[i] ? shape[i] : 1;
            g->blk[i] = b;
            g->grid[i] = (shape[i] + b - 1) / b;
            g->ngroups *= g->grid[i];
        }
        g->sdt = s->block_dtype;
    } else {
        for (int i = 0; i < g->erank; i++) {
            g->blk[i] = g->shape[i] ? g->shape[i] : 1;
            g->grid[i] = 1;
        }
        g->sdt = s->tensor_dtype ? s->tensor_dtype : QTK_DTYPE_F32;
    }
    if (rank == 0) g->blk[0] = 1;
    g->two = br && s->tensor_dtype;
    g->lookup = s->mode == QTK_MODE_LOOKUP;
    g->sbytes = g->ngroups * ssize(g->sdt);
    g->gbytes = g->two ? 4 : 0;
    g->tbytes = g->lookup ? 4u << g->bits : 0;
    g->total = g->vbytes + g->sbytes + g->gbytes + g->tbytes;
    return 1;
}

size_t oracle_length(const qtk_scheme *s, const size_t *shape, int rank, int *ok) {
    geo g;
    *ok = geo_of(s, shape, rank, &g);
    return *ok ? g.total : 0;
}

static void coords(const geo *g, size_t i, size_t *c) {
    for (int d = g->erank - 1; d >= 0; d--) {
        c[d] = i % g->shape[d];
        i /= g->shape[d];
    }
}
static size_t group_of(const geo *g, const size_t *c) {
    size_t gi = 0;
    for (int d = 0; d < g->rank; d++) gi = gi * g->grid[d] + c[d] / g->blk[d];
    return gi;
}
/* byte and bit offset of element with coordinates c */
static void position(const geo *g, const size_t *c, size_t *byte, unsigned *bit) {
    size_t u = 0;
    for (int d = 0; d < g->erank; d++) u = u * g->sshape[d] + (d == g->axis ? c[d] / g->fpu : c[d]);
    unsigned slot = (unsigned)(c[g->axis] % g->fpu) * g->bits;
    *byte = u * g->ubytes + slot / 8;
    *bit = slot % 8;
}

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int load_table(const qtk_scheme *s, unsigned bits, float *t) {
    size_t n = 0;
    if (qtk_table_get(s->table, t, 256, &n) != QTK_OK || n != (1u << bits)) return 0;
    return 1;
}

/* |q - u| < |q - v| exactly, for f32 values. The distances are computed as unevaluated sums
 * hi + lo of doubles (Knuth's TwoSum), then compared: hi values first, the tails when the
 * hi parts are equal (each distance is then the same double plus a tail below half its ulp). */
static void two_diff(double a, double b, double *hi, double *lo) {
    double s = a - b, bv = a - s, av = s + bv;
    *hi = s;
    *lo = (a - av) + (bv - b);
}

static int nearer(float q, float u, float v) {
    double hu, lu, hv, lv;
    two_diff(q, u, &hu, &lu);
    two_diff(q, v, &hv, &lv);
    if (hu < 0 || (hu == 0 && lu < 0)) hu = -hu, lu = -lu; /* |q - u| */
    if (hv < 0 || (hv == 0 && lv < 0)) hv = -hv, lv = -lv;
    if (hu != hv) return hu < hv;
    return lu < lv;
}

static uint32_t nearest_index(const float *t, unsigned n, float q) {
    float mn = t[0], mx = t[0];
    for (unsigned i = 1; i < n; i++) {
        if (t[i] < mn) mn = t[i];
        if (t[i] > mx) mx = t[i];
    }
    float qc = q < mn ? mn : q > mx ? mx : q;
    uint32_t best = 0;
    for (unsigned i = 1; i < n; i++)
        if (nearer(qc, t[i], t[best])) best = i;
    return best;
}

int oracle_quantize(const float *x, const size_t *shape, int rank, const qtk_scheme *s, int absmean,
                    const float *given, const float *global, uint8_t *out) {
    geo g;
    if (!geo_of(s, shape, rank, &g)) return -1;
    for (size_t i = 0; i < g.numel; i++)
        if (!isfinite(x[i])) return -1;
    float table[256];
    if (g.lookup && !load_table(s, g.bits, table)) return -1;
    size_t ng = g.ngroups;
    float raw[4096];
    if (ng > 4096) return -1; /* tests stay small */
    float gl = 1.0f;
    size_t c[8];
    if (given) {
        for (size_t k = 0; k < ng; k++) raw[k] = given[k];
        if (global) gl = *global;
    } else {
        float alpha[4096];
        double run[4096], tot[4096];
        size_t cnt[4096];
        for (size_t k = 0; k < ng; k++) {
            alpha[k] = 0;
            run[k] = tot[k] = 0;
            cnt[k] = 0;
        }
        for (size_t i = 0; i < g.numel; i++) {
            coords(&g, i, c);
            size_t k = group_of(&g, c);
            float a = fabsf(x[i]);
            if (a > alpha[k]) alpha[k] = a;
            run[k] += a;
            if (++cnt[k] % 65536 == 0) {
                tot[k] += run[k];
                run[k] = 0;
            }
        }
        if (absmean)
            for (size_t k = 0; k < ng; k++) alpha[k] = cnt[k] ? (float)((tot[k] + run[k]) / (double)cnt[k]) : 0.0f;
        float div;
        if (g.lookup) {
            div = 0;
            for (unsigned i = 0; i < (1u << g.bits); i++)
                if (fabsf(table[i]) > div) div = fabsf(table[i]);
        } else if (is_int(s->value)) {
            int lo, hi;
            int_range(s->value, &lo, &hi);
            div = (float)(hi - lo) / 2.0f;
        } else {
            div = (float)vmax(s->value);
        }
        for (size_t k = 0; k < ng; k++) raw[k] = alpha[k] / div;
        if (g.two) {
            float m = 0;
            for (size_t k = 0; k < ng; k++)
                if (raw[k] > m) m = raw[k];
            float dmax = s->block_dtype == QTK_DTYPE_F16 ? 65504.0f : 448.0f;
            gl = m / dmax;
            if (gl < ldexpf(1.0f, -126)) gl = ldexpf(1.0f, -126);
            for (size_t k = 0; k < ng; k++) raw[k] = raw[k] / gl;
        }
    }
    memset(out, 0, g.total);
    float eff[4096];
    for (size_t k = 0; k < ng; k++) {
        uint32_t code = oracle_round_up(g.sdt, raw[k]);
        float stored = (float)oracle_decode(g.sdt, code);
        eff[k] = g.two ? gl * stored : stored;
        uint8_t *p = out + g.vbytes + k * ssize(g.sdt);
        for (unsigned b = 0; b < ssize(g.sdt); b++) p[b] = (uint8_t)(code >> (8 * b));
    }
    if (g.two) wr32(out + g.vbytes + g.sbytes, bits_of(gl));
    if (g.lookup)
        for (unsigned i = 0; i < (1u << g.bits); i++) wr32(out + g.vbytes + g.sbytes + g.gbytes + 4 * i, bits_of(table[i]));
    /* SPEC §4: native and packed stores of everything but e2m1 hold one field per byte,
     * integer fields sign-extended to int8 */
    int native_int = s->store != QTK_STORE_U32 && g.fpu == 1 && is_int(s->value) && !g.lookup;
    for (size_t i = 0; i < g.numel; i++) {
        coords(&g, i, c);
        float e = eff[group_of(&g, c)];
        uint32_t field;
        if (g.lookup) {
            field = nearest_index(table, 1u << g.bits, e == 0.0f ? 0.0f : x[i] / e);
        } else if (e == 0.0f) {
            field = 0;
        } else if (is_int(s->value)) {
            int lo, hi;
            int_range(s->value, &lo, &hi);
            float q = roundf(x[i] / e);
            if (q < (float)lo) q = (float)lo;
            if (q > (float)hi) q = (float)hi;
            field = (uint32_t)(int)q & ((1u << g.bits) - 1);
        } else {
            double q = (double)(x[i] / e), mx = vmax(s->value);
            if (q > mx) q = mx;
            if (q < -mx) q = -mx;
            field = oracle_encode_nearest(vfmt(s->value), q);
        }
        size_t byte;
        unsigned bit;
        position(&g, c, &byte, &bit);
        if (native_int) {
            int v = (int)field;
            if (v >= (1 << (g.bits - 1))) v -= 1 << g.bits;
            out[byte] = (uint8_t)(int8_t)v;
        } else {
            out[byte] |= (uint8_t)(field << bit);
        }
    }
    return 0;
}

static void dequant(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *out, float *effout);
void oracle_dequantize(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *out) {
    dequant(b, shape, rank, s, out, NULL);
}
void oracle_effective_scales(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *eff) {
    dequant(b, shape, rank, s, NULL, eff);
}
static void dequant(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *out, float *effout) {
    geo g;
    if (!geo_of(s, shape, rank, &g)) return;
    float gl = g.two ? f32_of(rd32(b + g.vbytes + g.sbytes)) : 1.0f;
    size_t c[8];
    for (size_t i = 0; i < g.numel; i++) {
        coords(&g, i, c);
        size_t k = group_of(&g, c);
        const uint8_t *sp = b + g.vbytes + k * ssize(g.sdt);
        uint32_t code = 0;
        for (unsigned j = 0; j < ssize(g.sdt); j++) code |= (uint32_t)sp[j] << (8 * j);
        float e = (float)oracle_decode(g.sdt, code);
        if (g.two) e = gl * e;
        if (effout) effout[i] = e;
        if (!out) continue;
        size_t byte;
        unsigned bit;
        position(&g, c, &byte, &bit);
        uint32_t field = (uint32_t)(b[byte] >> bit) & ((1u << g.bits) - 1);
        float v;
        if (g.lookup) {
            v = f32_of(rd32(b + g.vbytes + g.sbytes + g.gbytes + 4 * field));
        } else if (is_int(s->value)) {
            int iv = (int)field;
            if (iv >= (1 << (g.bits - 1))) iv -= 1 << g.bits;
            v = (float)iv;
        } else {
            v = (float)oracle_decode(vfmt(s->value), field);
        }
        out[i] = v * e;
    }
}
