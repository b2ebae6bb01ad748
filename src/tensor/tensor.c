/* tensor.c — the quantized tensor object; quantize, bytes in/out (Burn's layout, SPEC §5),
 * dequantize. */
#include "tensor_internal.h"

#include "../calib/affine.h"
#include "../calib/calibrate.h"
#include "../calib/mse.h"
#include "../exec/exec.h"

#include <stdio.h>

struct qtk_tensor {
    qtk_scheme scheme;
    qtk_layout layout;
    uint8_t *bytes;
    /* qtk_tensor_wrap: the bytes are borrowed, and given back with release(release_ctx) */
    bool borrowed;
    void (*release)(void *ctx);
    void *release_ctx;
};

static const char *spec_of(const qtk_scheme *s, char *buf, size_t cap) {
    if (qtk_scheme_format(s, buf, cap, NULL) != QTK_OK) snprintf(buf, cap, "?");
    return buf;
}

qtk_status qtk__check_x(const float *x, size_t numel) {
    if (!x && numel > 0) return qtk__err(QTK_E_ARG, "input values are NULL");
    return QTK_OK;
}

void qtk__write_tail(const qtk__plan *p, float global, uint8_t *dst) {
    if (p->L.global_bytes) qtk__st32(dst + p->L.global_offset, qtk__f32_bits(global));
    for (size_t i = 0; i < p->L.table_entries; i++)
        qtk__st32(dst + p->L.table_offset + 4 * i, qtk__f32_bits(p->table[i]));
}

qtk_status qtk__check_calibration(const qtk__plan *p, const qtk_quantize_options *o) {
    if (o->calibration != QTK_CALIB_MINMAX && o->calibration != QTK_CALIB_ABSMEAN && o->calibration != QTK_CALIB_MSE)
        return qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)o->calibration);
    if (o->global && !o->scales) return qtk__err(QTK_E_ARG, "a global scale was given without block scales");
    if (!o->scales && o->calibration == QTK_CALIB_ABSMEAN && p->two_level)
        return qtk__err(QTK_E_SCHEME, "absmean calibration is not defined for two-level schemes (use minmax)");
    if (!o->scales && o->calibration == QTK_CALIB_ABSMEAN && p->fit)
        return qtk__err(QTK_E_SCHEME, "table=fit fits the table for calibration minmax or mse (or given scales), not absmean");
    if ((o->weights || o->n_weights) && !p->fit && (o->scales || o->calibration != QTK_CALIB_MSE))
        return qtk__err(QTK_E_ARG, "importance weights are used by calibration mse and by table=fit only: %s would ignore them",
                        o->scales ? "given scales" : o->calibration == QTK_CALIB_ABSMEAN ? "absmean" : "minmax");
    if (p->lookup && !p->fit && p->tmin == 0.0f && p->tmax == 0.0f)
        return qtk__err(QTK_E_SCHEME, "table '%s' has no non-zero entry: no scale can map values onto it", p->s.table);
    return QTK_OK;
}

static qtk_status quantize_into(const float *x, const size_t *shape, int rank, const qtk_scheme *s,
                                const qtk_quantize_options *opts, void *dst, size_t dst_len);

qtk_status qtk_quantize_into(const float *x, const size_t *shape, int rank, const qtk_scheme *s,
                             const qtk_quantize_options *opts, void *dst, size_t dst_len) {
    qtk__fpenv fe;
    qtk__fpenv_enter(&fe);
    qtk_status st = quantize_into(x, shape, rank, s, opts, dst, dst_len);
    qtk__fpenv_leave(&fe);
    return st;
}

/* store=ggml: the gblock quantizers (docs/affine.md §3). */
static qtk_status quantize_ggml(const qtk__gb_fmt *F, const float *x, const size_t *shape, int rank,
                                const qtk_scheme *s, const qtk_quantize_options *opts, void *dst, size_t dst_len) {
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    if (!dst) return qtk__err(QTK_E_ARG, "destination is NULL");
    if (dst_len != L.total_bytes) {
        char sb[256], ss[160];
        return qtk__err(QTK_E_LENGTH, "destination holds %zu bytes; scheme '%s' on shape %s needs exactly %zu", dst_len,
                        spec_of(s, ss, sizeof ss), qtk_shape_format(shape, rank, sb, sizeof sb), L.total_bytes);
    }
    qtk_quantize_options o = opts ? *opts : (qtk_quantize_options){0};
    return qtk__gb_quantize(F, x, &L, &o, dst);
}

static qtk_status quantize_into(const float *x, const size_t *shape, int rank, const qtk_scheme *s,
                                const qtk_quantize_options *opts, void *dst, size_t dst_len) {
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(s);
    if (F && qtk_scheme_validate(s) == QTK_OK) return quantize_ggml(F, x, shape, rank, s, opts, dst, dst_len);
    qtk__plan *p = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__plan_init(p, s, shape, rank, NULL);
    if (!st) st = qtk__check_x(x, p->L.numel);
    if (!st && !dst) st = qtk__err(QTK_E_ARG, "destination is NULL");
    if (!st && dst_len != p->L.total_bytes) {
        char sb[256], ss[160];
        st = qtk__err(QTK_E_LENGTH, "destination holds %zu bytes; scheme '%s' on shape %s needs exactly %zu", dst_len,
                      spec_of(&p->s, ss, sizeof ss), qtk_shape_format(p->L.shape, rank, sb, sizeof sb),
                      p->L.total_bytes);
    }
    qtk_quantize_options o = opts ? *opts : (qtk_quantize_options){0};
    if (!st) st = qtk__check_calibration(p, &o);
    qtk__scales sc = {.global = 1.0f};
    qtk__weights wts = {0};
    if (!st) st = qtk__weights_resolve(p, &o, &wts);
    uint8_t *d = dst;
    if (!st && p->affine) {
        st = qtk__affine_quantize(p, x, &o, &wts, o.threads, d); /* docs/affine.md §2 */
    } else if (!st && o.scales) {
        size_t bad = qtk__ref_first_nonfinite(x, p->L.numel);
        if (bad != SIZE_MAX) st = qtk__nonfinite_error(p, x[bad], bad, "input value");
        if (!st) st = qtk__scales_alloc(p, &sc);
        if (!st) st = qtk__scales_given(p, o.scales, o.n_scales, o.global, d, &sc);
        if (!st && p->fit) st = qtk__fit_table(p, x, &wts, o.calibration, sc.eff, o.threads, d);
        if (!st) st = qtk__exec_encode(p, x, sc.eff, d, o.threads);
    } else if (!st && p->fit && (st = qtk__fit_table(p, x, &wts, o.calibration, NULL, o.threads, d)) != QTK_OK) {
        /* table=fit: the table is fitted first, the scales then calibrated with it */
    } else if (!st && o.calibration == QTK_CALIB_MSE) {
        st = qtk__mse_quantize(p, x, &wts, o.threads, d, &sc.global);
    } else if (!st && qtk__exec_chunkable(p)) {
        /* scale groups within rows: one sweep, a chunk of rows at a time. One-level minmax
         * measures ranges as it goes; otherwise (two-level, absmean) a first pass gathers
         * them, since the global or the means need every row first. */
        float *alpha = NULL;
        if (p->two_level || o.calibration == QTK_CALIB_ABSMEAN) {
            alpha = qtk__calloc(p->L.n_scales, sizeof(float));
            if (!alpha) st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", p->L.n_scales);
            if (!st) st = qtk__calibrate_alpha(p, x, o.calibration, o.threads, alpha);
            if (!st) sc.global = qtk__scales_global(p, alpha, p->L.n_scales);
        }
        size_t bad = SIZE_MAX, bad_group = SIZE_MAX;
        if (!st) st = qtk__exec_quantize_chunked(p, x, d, alpha, sc.global, o.threads, &bad, &bad_group);
        if (!st && bad != SIZE_MAX) st = qtk__nonfinite_error(p, x[bad], bad, "input value");
        if (!st && bad_group != SIZE_MAX)
            st = qtk__err(QTK_E_VALUE, "effective scale of group %zu overflows f32 (global %g x its block scale)",
                          bad_group, (double)sc.global);
        qtk__free(alpha);
    } else if (!st) {
        st = qtk__scales_alloc(p, &sc);
        if (!st) st = qtk__scales_calibrate(p, x, o.calibration, o.threads, d, &sc);
        if (!st) st = qtk__exec_encode(p, x, sc.eff, d, o.threads);
    }
    if (!st) qtk__write_tail(p, sc.global, d);
    qtk__scales_free(&sc);
    qtk__free(p);
    return st;
}

qtk_status qtk__tensor_new(const qtk_scheme *s, const qtk_layout *L, qtk_tensor **out) {
    qtk_tensor *t = qtk__malloc(sizeof *t);
    uint8_t *b = qtk__malloc(L->total_bytes);
    if (!t || !b) {
        qtk__free(t);
        qtk__free(b);
        return qtk__err(QTK_E_NOMEM, "out of memory for a %zu-byte tensor", L->total_bytes);
    }
    t->scheme = *s;
    qtk__scheme_canonical_block(&t->scheme);
    t->layout = *L;
    t->bytes = b;
    t->borrowed = false;
    t->release = NULL;
    t->release_ctx = NULL;
    *out = t;
    return QTK_OK;
}

qtk_status qtk_quantize(const float *x, const size_t *shape, int rank, const qtk_scheme *s,
                        const qtk_quantize_options *opts, qtk_tensor **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_quantize: out is NULL");
    *out = NULL;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    qtk_tensor *t;
    st = qtk__tensor_new(s, &L, &t);
    if (st) return st;
    st = qtk_quantize_into(x, shape, rank, s, opts, t->bytes, L.total_bytes);
    if (st) {
        qtk_tensor_free(t);
        return st;
    }
    *out = t;
    return QTK_OK;
}

uint8_t *qtk__tensor_mutable_bytes(qtk_tensor *t) { return t->bytes; }

void qtk_tensor_free(qtk_tensor *t) {
    if (!t) return;
    if (!t->borrowed) qtk__free(t->bytes);
    else if (t->release) t->release(t->release_ctx);
    qtk__free(t);
}

/* ---- bytes in ---- */

qtk_status qtk__bytes_plan(const void *bytes, size_t len, const size_t *shape, int rank, const qtk_scheme *s,
                           qtk__plan *p) {
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    if (!bytes && len > 0) return qtk__err(QTK_E_ARG, "bytes are NULL");
    if (len != L.total_bytes) {
        char sb[256], ss[160];
        return qtk__err(QTK_E_LENGTH,
                        "scheme '%s' on shape %s takes exactly %zu bytes (values %zu + scales %zu + global %zu + table %zu); got %zu",
                        spec_of(s, ss, sizeof ss), qtk_shape_format(shape, rank, sb, sizeof sb), L.total_bytes,
                        L.value_bytes, L.scale_bytes, L.global_bytes, L.table_bytes, len);
    }
    const uint8_t *b = bytes;
    float table[256];
    for (size_t i = 0; i < L.table_entries; i++) {
        table[i] = qtk__bits_f32(qtk__ld32(b + L.table_offset + 4 * i));
        if (!qtk__isfinite(table[i]))
            return qtk__err(QTK_E_VALUE, "lookup table entry %zu (byte %zu) is not finite", i, L.table_offset + 4 * i);
    }
    return qtk__plan_from_layout(p, s, &L, L.table_entries ? table : NULL);
}

/* The vector kernels' fast path: true when every scale is valid (eff filled if given). */
static bool scales_fast(const qtk__plan *p, const uint8_t *b, float g, float *eff) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->load_scales) return false;
    unsigned sz = qtk__scale_size(p->L.scale_dtype);
    float tmp[1024];
    for (size_t i = 0; i < p->L.n_scales; i += 1024) {
        size_t n = p->L.n_scales - i < 1024 ? p->L.n_scales - i : 1024;
        if (!k->load_scales(p, b + p->L.scales_offset + i * sz, n, g, eff ? eff + i : tmp)) return false;
    }
    return true;
}

qtk_status qtk__bytes_scales(const qtk__plan *p, const uint8_t *b, float *eff, float *global) {
    qtk_dtype d = p->L.scale_dtype;
    unsigned sz = qtk__scale_size(d);
    float g = 1.0f;
    if (p->L.global_bytes) {
        g = qtk__bits_f32(qtk__ld32(b + p->L.global_offset));
        if (!qtk__isfinite(g))
            return qtk__err(QTK_E_VALUE, "global scale (byte %zu) is not finite", p->L.global_offset);
    }
    if (global) *global = g;
    if (scales_fast(p, b, g, eff)) return QTK_OK;
    /* the reference: decode one by one, naming the first invalid scale */
    for (size_t i = 0; i < p->L.n_scales; i++) {
        const uint8_t *q = b + p->L.scales_offset + i * sz;
        if (d == QTK_DTYPE_UE4M3 && (q[0] & 0x80u))
            return qtk__err(QTK_E_VALUE, "scale %zu (byte %zu) is 0x%02x: the sign bit of a ue4m3 scale must be 0", i,
                            p->L.scales_offset + i * sz, q[0]);
        float v = qtk__scale_load(d, q);
        if (!qtk__isfinite(v))
            return qtk__err(QTK_E_VALUE, "scale %zu (byte %zu) is not finite (%s code 0x%0*x)", i,
                            p->L.scales_offset + i * sz, qtk_dtype_name(d), (int)sz * 2,
                            sz == 1 ? q[0] : sz == 2 ? qtk__ld16(q) : qtk__ld32(q));
        float e = p->two_level ? g * v : v;
        if (!qtk__isfinite(e))
            return qtk__err(QTK_E_VALUE, "effective scale of group %zu overflows f32 (global %g x scale %g)", i,
                            (double)g, (double)v);
        if (eff) eff[i] = e;
    }
    return QTK_OK;
}

/* Native and packed stores of anything but e2m1 keep one field per byte: integer fields must
 * be sign extensions of their width, other fields (minifloat codes, lookup indices) must fit
 * in it. */
static qtk_status check_native_fields(const qtk__plan *p, const uint8_t *b) {
    if (p->s.store == QTK_STORE_U32 || p->fpu != 1 || p->bits == 8) return QTK_OK;
    const char *store = p->s.store == QTK_STORE_NATIVE ? "native" : "packed";
    for (size_t i = 0; i < p->L.numel; i++) {
        bool ok;
        if (p->native_int && p->unsig) {
            ok = b[i] <= p->mask;
        } else if (p->native_int) {
            int v = (int8_t)b[i];
            ok = v >= -(1 << (p->bits - 1)) && v < (1 << (p->bits - 1));
        } else {
            ok = b[i] <= p->mask;
        }
        if (!ok) {
            char ib[256];
            return qtk__err(QTK_E_VALUE, "%s field at %s is 0x%02x, which is not a %u-bit %s", store,
                            qtk__index_str(p, i, ib, sizeof ib), b[i], p->bits,
                            p->native_int && !p->unsig ? "signed field (sign-extended to a byte)" : "field");
        }
    }
    return QTK_OK;
}

/* store=ggml: the exact length, then every block's f16 scales. */
static qtk_status bytes_check_ggml(const qtk__gb_fmt *F, const void *bytes, size_t len, const size_t *shape, int rank,
                                   const qtk_scheme *s, qtk_layout *L) {
    qtk_status st = qtk_layout_compute(s, shape, rank, L);
    if (st) return st;
    if (!bytes && len > 0) return qtk__err(QTK_E_ARG, "bytes are NULL");
    if (len != L->total_bytes) {
        char sb[256], ss[160];
        const qtk__gfmt_info *I = qtk__gfmt_info_of(F->f);
        return qtk__err(QTK_E_LENGTH, "scheme '%s' on shape %s takes exactly %zu bytes (%zu ggml %s blocks of %u); got %zu",
                        spec_of(s, ss, sizeof ss), qtk_shape_format(shape, rank, sb, sizeof sb), L->total_bytes,
                        L->numel / F->qk, I->ggml, F->bytes, len);
    }
    return qtk__gb_check(F, bytes, L);
}

qtk_status qtk_bytes_check(const void *bytes, size_t len, const size_t *shape, int rank, const qtk_scheme *s) {
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(s);
    if (F && qtk_scheme_validate(s) == QTK_OK) {
        qtk_layout L;
        return bytes_check_ggml(F, bytes, len, shape, rank, s, &L);
    }
    qtk__plan *p = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__bytes_plan(bytes, len, shape, rank, s, p);
    if (!st) st = qtk__bytes_scales(p, bytes, NULL, NULL);
    if (!st && p->affine) st = qtk__affine_load(p, bytes, NULL, NULL);
    if (!st) st = check_native_fields(p, bytes);
    qtk__free(p);
    return st;
}

qtk_status qtk_tensor_from_bytes(const void *bytes, size_t len, const size_t *shape, int rank, const qtk_scheme *s,
                                 qtk_tensor **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_tensor_from_bytes: out is NULL");
    *out = NULL;
    qtk_status st = qtk_bytes_check(bytes, len, shape, rank, s);
    if (st) return st;
    qtk_layout L;
    st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    qtk_tensor *t;
    st = qtk__tensor_new(s, &L, &t);
    if (st) return st;
    if (len) memcpy(t->bytes, bytes, len);
    *out = t;
    return QTK_OK;
}

qtk_status qtk_tensor_wrap(const void *bytes, size_t len, const size_t *shape, int rank, const qtk_scheme *s,
                           void (*release)(void *ctx), void *ctx, qtk_tensor **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_tensor_wrap: out is NULL");
    *out = NULL;
    qtk_status st = qtk_bytes_check(bytes, len, shape, rank, s);
    if (st) return st;
    qtk_layout L;
    st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return st;
    qtk_tensor *t = qtk__malloc(sizeof *t);
    if (!t) return qtk__err(QTK_E_NOMEM, "out of memory");
    t->scheme = *s;
    qtk__scheme_canonical_block(&t->scheme);
    t->layout = L;
    t->bytes = (uint8_t *)(uintptr_t)bytes; /* never written: only qtk__tensor_new's tensors are */
    t->borrowed = true;
    t->release = release;
    t->release_ctx = ctx;
    *out = t;
    return QTK_OK;
}

/* ---- accessors ---- */

const uint8_t *qtk_tensor_bytes(const qtk_tensor *t, size_t *len) {
    if (!t) return NULL;
    if (len) *len = t->layout.total_bytes;
    return t->bytes;
}
const qtk_scheme *qtk_tensor_scheme(const qtk_tensor *t) { return t ? &t->scheme : NULL; }
const qtk_layout *qtk_tensor_layout(const qtk_tensor *t) { return t ? &t->layout : NULL; }

qtk_status qtk_tensor_scales(const qtk_tensor *t, float *out, size_t cap) {
    if (!t || (!out && t->layout.n_scales)) return qtk__err(QTK_E_ARG, "qtk_tensor_scales: NULL argument");
    if (cap < t->layout.n_scales)
        return qtk__err(QTK_E_LENGTH, "room for %zu scales; the tensor has %zu", cap, t->layout.n_scales);
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(&t->scheme);
    if (F) return qtk__gb_scales(F, t->bytes, &t->layout, false, out);
    unsigned sz = qtk__scale_size(t->layout.scale_dtype);
    for (size_t i = 0; i < t->layout.n_scales; i++)
        out[i] = qtk__scale_load(t->layout.scale_dtype, t->bytes + t->layout.scales_offset + i * sz);
    return QTK_OK;
}

qtk_status qtk_tensor_offsets(const qtk_tensor *t, float *out, size_t cap) {
    if (!t) return qtk__err(QTK_E_ARG, "qtk_tensor_offsets: NULL tensor");
    if (t->scheme.mode != QTK_MODE_AFFINE) {
        char ss[160];
        return qtk__err(QTK_E_SCHEME, "scheme '%s' has no offsets (it is not affine)", spec_of(&t->scheme, ss, sizeof ss));
    }
    if (!out && t->layout.n_scales) return qtk__err(QTK_E_ARG, "qtk_tensor_offsets: NULL argument");
    if (cap < t->layout.n_scales)
        return qtk__err(QTK_E_LENGTH, "room for %zu offsets; the tensor has %zu", cap, t->layout.n_scales);
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(&t->scheme);
    if (F) return qtk__gb_scales(F, t->bytes, &t->layout, true, out);
    unsigned sz = qtk__scale_size(t->layout.offset_dtype);
    for (size_t i = 0; i < t->layout.n_scales; i++)
        out[i] = qtk__scale_load(t->layout.offset_dtype, t->bytes + t->layout.offsets_offset + i * sz);
    return QTK_OK;
}

float qtk_tensor_global(const qtk_tensor *t) {
    if (!t || !t->layout.global_bytes) return 1.0f;
    return qtk__bits_f32(qtk__ld32(t->bytes + t->layout.global_offset));
}

/* ---- dequantize ---- */

static qtk_status check_out(qtk_dtype dtype, const void *out, size_t n_out, size_t numel) {
    if (dtype != QTK_DTYPE_F32 && dtype != QTK_DTYPE_F16 && dtype != QTK_DTYPE_BF16)
        return qtk__err(QTK_E_ARG, "output dtype '%s' is not f32, f16 or bf16", qtk_dtype_name(dtype));
    if (!out && numel) return qtk__err(QTK_E_ARG, "output buffer is NULL");
    if (n_out != numel) return qtk__err(QTK_E_LENGTH, "output holds %zu elements; the tensor has %zu", n_out, numel);
    return QTK_OK;
}

/* Dequantizes bytes with plan p; their scales are checked first unless `valid` (a tensor's
 * bytes were checked when it was made). */
static qtk_status dequantize_plan(const qtk__plan *p, const uint8_t *b, bool valid, qtk_dtype dtype, void *out) {
    float g = 1.0f;
    qtk_status st = QTK_OK;
    qtk__fpenv fe;
    qtk__fpenv_enter(&fe);
    if (valid) {
        if (p->L.global_bytes) g = qtk__bits_f32(qtk__ld32(b + p->L.global_offset));
    } else {
        st = qtk__bytes_scales(p, b, NULL, &g);
    }
    if (!st) st = p->affine ? qtk__affine_dequantize(p, b, dtype, out, 0) : qtk__exec_decode(p, b, g, dtype, out, 0);
    qtk__fpenv_leave(&fe);
    return st;
}

static qtk_status dequantize_ggml(const qtk__gb_fmt *F, const uint8_t *b, const qtk_layout *L, qtk_dtype dtype,
                                  void *out, size_t n_out) {
    qtk_status st = check_out(dtype, out, n_out, L->numel);
    if (st) return st;
    qtk__fpenv fe;
    qtk__fpenv_enter(&fe);
    qtk__gb_dequantize(F, b, L, dtype, out, 0);
    qtk__fpenv_leave(&fe);
    return QTK_OK;
}

qtk_status qtk_dequantize_bytes(const void *bytes, size_t len, const size_t *shape, int rank, const qtk_scheme *s,
                                qtk_dtype dtype, void *out, size_t n_out) {
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(s);
    if (F && qtk_scheme_validate(s) == QTK_OK) {
        qtk_layout L;
        qtk_status st = bytes_check_ggml(F, bytes, len, shape, rank, s, &L);
        return st ? st : dequantize_ggml(F, bytes, &L, dtype, out, n_out);
    }
    qtk__plan *p = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__bytes_plan(bytes, len, shape, rank, s, p);
    if (!st) st = check_out(dtype, out, n_out, p->L.numel);
    if (!st) st = check_native_fields(p, bytes);
    if (!st) st = dequantize_plan(p, bytes, false, dtype, out);
    qtk__free(p);
    return st;
}

qtk_status qtk_dequantize(const qtk_tensor *t, qtk_dtype dtype, void *out, size_t n_out) {
    if (!t) return qtk__err(QTK_E_ARG, "qtk_dequantize: tensor is NULL");
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(&t->scheme);
    if (F) return dequantize_ggml(F, t->bytes, &t->layout, dtype, out, n_out);
    qtk__plan *p = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__bytes_plan(t->bytes, t->layout.total_bytes, t->layout.shape, t->layout.rank, &t->scheme, p);
    if (!st) st = check_out(dtype, out, n_out, p->L.numel);
    if (!st) st = dequantize_plan(p, t->bytes, true, dtype, out);
    qtk__free(p);
    return st;
}
