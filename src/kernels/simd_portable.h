/* simd_portable.h — the vector vocabulary of simd_body.h in portable C: GCC/Clang vector
 * extensions at 4 lanes of 32 bits — one 128-bit register, the width every target has (NEON
 * on ARM, SSE2 on any x86-64; plain scalar code elsewhere). Lane-wise helpers that have no
 * operator are loops the compiler may vectorize. Every operation keeps the IEEE semantics the
 * x86 vocabularies have (max/min as maxps/minps, truncating conversions of in-range values,
 * shifts by 32 or more giving 0), so the body computes the same bits.
 *
 * simd_neon.h reuses this vocabulary with SIMD_NATIVE_OPS defined: it then supplies the
 * operations in the #ifndef SIMD_NATIVE_OPS blocks (lane loops here) as NEON instructions. */
#ifndef QTK_SIMD_PORTABLE_H
#define QTK_SIMD_PORTABLE_H

#include "../numfmt/scalar.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VW 4
#define VALIGN 16
#ifndef SIMD_NAME
#  define SIMD_NAME "portable"
#  define SIMD_TABLE qtk__kernels_portable
#endif

typedef float vf __attribute__((vector_size(16)));
typedef int32_t vi __attribute__((vector_size(16)));
typedef uint32_t vu __attribute__((vector_size(16)));
typedef vi vm; /* lanes of -1 (true) or 0 */

#define LANES for (int l_ = 0; l_ < VW; l_++)

static inline vi vi_set1(int v) { return (vi){v, v, v, v}; }
static inline vi vi_zero(void) { return vi_set1(0); }
static inline vi vi_iota(void) { return (vi){0, 1, 2, 3}; }

static inline vm vm_first(size_t n) { return vi_iota() < vi_set1((int)(n > VW ? VW : n)); }
static inline bool vm_any(vm m) {
    int32_t a = 0;
    LANES a |= m[l_];
    return a != 0;
}
static inline vm vm_or(vm a, vm b) { return a | b; }
static inline vm vm_and(vm a, vm b) { return a & b; }
static inline vm vm_not(vm a) { return ~a; }

static inline vi vf_bits(vf a) {
    vi r;
    memcpy(&r, &a, sizeof r);
    return r;
}
static inline vf vi_bits(vi a) {
    vf r;
    memcpy(&r, &a, sizeof r);
    return r;
}

static inline vf vf_set1(float v) { return (vf){v, v, v, v}; }
static inline vf vf_zero(void) { return vf_set1(0.0f); }
static inline vf vf_loadu(const float *p) {
    vf r;
    memcpy(&r, p, sizeof r);
    return r;
}
static inline vf vf_load_n(const float *p, size_t n) {
    vf r = vf_zero();
    memcpy(&r, p, n * sizeof(float));
    return r;
}
static inline void vf_storeu(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline void vf_store_n(float *p, vf v, size_t n) { memcpy(p, &v, n * sizeof(float)); }
static inline void vf_stream(float *p, vf v) { vf_storeu(p, v); }
static inline vf vf_blend(vm m, vf a, vf b) { return vi_bits((vf_bits(a) & ~m) | (vf_bits(b) & m)); }
static inline vf vf_abs(vf a) { return vi_bits(vf_bits(a) & vi_set1(0x7fffffff)); }
static inline vf vf_max(vf a, vf b) { return vf_blend(a > b, b, a); } /* a > b ? a : b */
static inline vf vf_min(vf a, vf b) { return vf_blend(a < b, b, a); } /* a < b ? a : b */
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_div(vf a, vf b) { return a / b; }
#ifndef SIMD_NATIVE_OPS
static inline vf vf_fma(vf a, vf b, vf c) { /* a b + c, rounded once (fmaf) */
    vf r = c;
    LANES r[l_] = fmaf(a[l_], b[l_], c[l_]);
    return r;
}
static inline vf vf_trunc(vf a) {
    vf r = a; /* (initialised: GCC cannot see that every lane is written) */
    LANES r[l_] = truncf(a[l_]);
    return r;
}
#endif
static inline vm vf_ge(vf a, vf b) { return a >= b; }
static inline vm vf_gt(vf a, vf b) { return a > b; }
static inline vm vf_eq(vf a, vf b) { return a == b; }
static inline float vf_hmax(vf a) {
    float m = a[0];
    for (int l = 1; l < VW; l++) m = a[l] > m ? a[l] : m;
    return m;
}
static inline int vi_hmax(vi a) {
    int32_t m = a[0];
    for (int l = 1; l < VW; l++) m = a[l] > m ? a[l] : m;
    return m;
}
/* int -> float rounds to nearest; float -> int truncates. The body only keeps lanes whose
 * value is in range; the others (and NaN) are clamped first so that no lane's conversion is
 * undefined in C (x86 would give INT_MIN there, and the body discards such lanes). */
static inline vf vf_from_i(vi a) { return __builtin_convertvector(a, vf); }
static inline vi vi_from_f(vf a) {
    a = vf_min(vf_max(a, vf_set1(-0x1p31f)), vf_set1(0x1p31f - 128.0f));
    return __builtin_convertvector(a, vi);
}

/* integer lanes wrap as the x86 instructions do: the arithmetic is done unsigned */
static inline vi vi_add(vi a, vi b) { return (vi)((vu)a + (vu)b); }
static inline vi vi_sub(vi a, vi b) { return (vi)((vu)a - (vu)b); }
static inline vi vi_and(vi a, vi b) { return a & b; }
static inline vi vi_or(vi a, vi b) { return a | b; }
#ifndef SIMD_NATIVE_OPS
static inline vi vi_srlv(vi a, vi s) {
    vi r;
    LANES r[l_] = (uint32_t)s[l_] > 31u ? 0 : (int32_t)((uint32_t)a[l_] >> s[l_]);
    return r;
}
static inline vi vi_sllv(vi a, vi s) {
    vi r;
    LANES r[l_] = (uint32_t)s[l_] > 31u ? 0 : (int32_t)((uint32_t)a[l_] << s[l_]);
    return r;
}
#endif
#define vi_srl(a, n) ((vi)((vu)(a) >> (n)))
#define vi_sll(a, n) ((vi)((vu)(a) << (n)))
static inline vi vi_blend(vm m, vi a, vi b) { return (a & ~m) | (b & m); }
static inline vi vi_max(vi a, vi b) { return vi_blend(a > b, b, a); }
static inline vi vi_min(vi a, vi b) { return vi_blend(a < b, b, a); }
static inline vi vi_minu(vi a, vi b) { return vi_blend((vu)a < (vu)b, b, a); }
static inline vm vi_gt(vi a, vi b) { return a > b; }
static inline vm vi_eq(vi a, vi b) { return a == b; }
static inline vm vi_ne(vi a, vi b) { return a != b; }
static inline vi vi_count(vi c, vm m) { return vi_sub(c, m); /* mask lanes are -1 */ }

static inline vi vi_load_u8(const uint8_t *p) {
    vi r;
    LANES r[l_] = p[l_];
    return r;
}
static inline vi vi_load_i8(const uint8_t *p) {
    vi r;
    LANES r[l_] = (int8_t)p[l_];
    return r;
}
static inline vi vi_load_u16(const uint8_t *p) {
    vi r;
    LANES r[l_] = qtk__ld16(p + 2 * l_);
    return r;
}
static inline vi vi_load_u32(const uint8_t *p) {
    vi r;
    LANES r[l_] = (int32_t)qtk__ld32(p + 4 * l_);
    return r;
}
#ifndef SIMD_NATIVE_OPS
/* VW nibbles from VW/2 bytes, element 2k in the low nibble of byte k */
static inline vi vi_load_codes4(const uint8_t *p) {
    vi r;
    LANES r[l_] = (p[l_ / 2] >> (4 * (l_ & 1))) & 15;
    return r;
}
static inline vi vi_load_codes2(const uint8_t *p) {
    vi r;
    LANES r[l_] = (p[l_ / 4] >> (2 * (l_ & 3))) & 3;
    return r;
}
static inline void vi_load_codes4x2_lut(const uint8_t *p, vi *c0, vi *c1) {
    *c0 = vi_load_codes4(p);
    *c1 = vi_load_codes4(p + VW / 2);
}
#endif

static inline void vi_store_u8(uint8_t *p, vi a) { LANES p[l_] = (uint8_t)a[l_]; }
static inline void vi_store_u16(uint8_t *p, vi a) { LANES qtk__st16(p + 2 * l_, (uint16_t)a[l_]); }
static inline void vi_store_u32(uint8_t *p, vi a) { LANES qtk__st32(p + 4 * l_, (uint32_t)a[l_]); }
static inline void vi_store_codes4(uint8_t *p, vi a) {
    for (int k = 0; k < VW / 2; k++) p[k] = (uint8_t)((a[2 * k] & 15) | (a[2 * k + 1] & 15) << 4);
}
static inline void vi_store_codes2(uint8_t *p, vi a) {
    for (int k = 0; k < VW / 4; k++)
        p[k] = (uint8_t)((a[4 * k] & 3) | (a[4 * k + 1] & 3) << 2 | (a[4 * k + 2] & 3) << 4 | (a[4 * k + 3] & 3) << 6);
}

/* 16-entry table lookup by the low 4 bits of each index */
#ifndef SIMD_NATIVE_OPS
typedef struct {
    float t[16];
} lut16;
static inline lut16 lut16_load(const float *t) {
    lut16 l;
    memcpy(l.t, t, sizeof l.t);
    return l;
}
static inline lut16 lut16_scale(lut16 l, vf s) {
    for (int i = 0; i < 16; i++) l.t[i] *= s[0];
    return l;
}
static inline vf vf_lut16(lut16 l, vi idx) {
    vf r;
    LANES r[l_] = l.t[idx[l_] & 15];
    return r;
}
#endif
/* out[j * VW + l] = base[l * stride + j] for j, l < VW: a VW x VW block transposed */
static inline void vf_transpose_block(const float *b, ptrdiff_t st, float *out) {
    for (int j = 0; j < VW; j++)
        for (int l = 0; l < VW; l++) out[j * VW + l] = b[l * st + j];
}
static inline vf vf_gather(const float *base, vi idx) {
    vf r;
    LANES r[l_] = base[idx[l_]];
    return r;
}
static inline vf vf_perm2(vf a, vi idx, vf b) {
    vf r;
    LANES r[l_] = (idx[l_] & (2 * VW - 1)) < VW ? a[idx[l_] & (VW - 1)] : b[idx[l_] & (VW - 1)];
    return r;
}

static inline void vf_store_f16(uint16_t *p, vf a) { LANES p[l_] = qtk__f32_to_f16(a[l_]); }
static inline void vf_store_f16_n(uint16_t *p, vf a, size_t n) {
    for (size_t l = 0; l < n; l++) p[l] = qtk__f32_to_f16(a[l]);
}
static inline void vi_store_u16_n(uint16_t *p, vi a, size_t n) {
    for (size_t l = 0; l < n; l++) p[l] = (uint16_t)a[l];
}
static inline void vi_store_u16_full(uint16_t *p, vi a) { LANES p[l_] = (uint16_t)a[l_]; }
static inline vf vf_from_f16_codes(vi codes) {
    vf r;
    LANES r[l_] = qtk__f16_to_f32((uint16_t)codes[l_]);
    return r;
}
static inline vf vf_from_e5m2_bytes(const uint8_t *p) {
    vf r;
    LANES r[l_] = qtk__e5m2_to_f32(p[l_]);
    return r;
}

#define simd_prefetch(p) __builtin_prefetch((const void *)(p), 0, 2)
static inline void simd_fence(void) {}

#endif
