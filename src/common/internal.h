/* internal.h — helpers shared by every part of libqtk (not installed). */
#ifndef QTK_INTERNAL_H
#define QTK_INTERNAL_H

#include "qtk.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#  define QTK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#  define QTK_LIKELY(x) __builtin_expect(!!(x), 1)
#  define QTK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define QTK_INTERNAL __attribute__((visibility("hidden")))
/* Exported from libqtk for libqtk_ckpt only (the checkpoint layer reports errors through the
 * same per-thread message): not part of the API, no stability promised. */
#  define QTK_PRIVATE_API __attribute__((visibility("default")))
#else
#  define QTK_PRIVATE_API
#  define QTK_PRINTF(a, b)
#  define QTK_LIKELY(x) (x)
#  define QTK_UNLIKELY(x) (x)
#  define QTK_INTERNAL
#endif

/* Records a message for the calling thread and returns st, so callers write
 * `return qtk__err(QTK_E_ARG, "...", ...);`. */
QTK_PRIVATE_API qtk_status qtk__err(qtk_status st, const char *fmt, ...) QTK_PRINTF(2, 3);
/* Prepends context to the current message: "context: previous message". */
QTK_PRIVATE_API qtk_status qtk__err_context(qtk_status st, const char *fmt, ...) QTK_PRINTF(2, 3);

QTK_INTERNAL void *qtk__malloc(size_t n);
QTK_INTERNAL void *qtk__calloc(size_t count, size_t size);
QTK_INTERNAL void qtk__free(void *p);

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool qtk__mul_ok(size_t a, size_t b, size_t *r) {
#if defined(__GNUC__)
    return !__builtin_mul_overflow(a, b, r);
#else
    if (a != 0 && b > SIZE_MAX / a) return false;
    *r = a * b;
    return true;
#endif
}
static inline bool qtk__add_ok(size_t a, size_t b, size_t *r) {
    if (b > SIZE_MAX - a) return false;
    *r = a + b;
    return true;
}
static inline size_t qtk__ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

static inline uint32_t qtk__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float qtk__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline bool qtk__isfinite(float f) { return (qtk__f32_bits(f) & 0x7f800000u) != 0x7f800000u; }

/* Little-endian loads/stores that work at any alignment. */
static inline uint16_t qtk__ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t qtk__ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t qtk__ld64(const uint8_t *p) { return (uint64_t)qtk__ld32(p) | (uint64_t)qtk__ld32(p + 4) << 32; }
static inline void qtk__st16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void qtk__st32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Every result of qtk assumes IEEE arithmetic in its default mode: round to nearest even,
 * no flush-to-zero, no denormals-are-zero. Callers (ML programs often set FTZ/DAZ) may
 * run in another mode; public entry points that compute switch to the default for the
 * duration of the call and restore the caller's environment (flags included) on return.
 * Worker threads inherit the mode from the thread that creates them. */
#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
/* x86: the SSE control/status register holds all of it (rounding, FTZ, DAZ, flags);
 * reading and writing it costs a few cycles, where fegetenv/fesetenv cost hundreds. */
#  include <xmmintrin.h>
typedef struct {
    unsigned csr;
} qtk__fpenv;
static inline void qtk__fpenv_enter(qtk__fpenv *e) {
    e->csr = _mm_getcsr();
    unsigned want = e->csr & ~0xe040u; /* clear FTZ (15), rounding (13-14), DAZ (6) */
    if (want != e->csr) _mm_setcsr(want);
}
static inline void qtk__fpenv_leave(qtk__fpenv *e) { _mm_setcsr(e->csr); /* the caller's flags too */ }
#else
#  include <fenv.h>
typedef struct {
    fenv_t saved;
} qtk__fpenv;
static inline void qtk__fpenv_enter(qtk__fpenv *e) {
    fegetenv(&e->saved);
    fesetenv(FE_DFL_ENV);
}
static inline void qtk__fpenv_leave(qtk__fpenv *e) { fesetenv(&e->saved); }
#endif

/* Thread count to use for a job of `work` elements (≥ 1). */
QTK_INTERNAL int qtk__threads_for(int requested, size_t work);

#endif
