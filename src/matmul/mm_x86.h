/* mm_x86.h — pieces shared by the x86 matmul kernel files (included only by files built
 * with AVX2 or AVX-512 flags). */
#ifndef QTK_MM_X86_H
#define QTK_MM_X86_H

#include "mm.h"

#include <immintrin.h>
#include <stdalign.h>

#define QTK_AI static inline __attribute__((always_inline))

/* Full unrolling of the small constant loops over rows and vectors, so that their arrays of
 * registers stay registers (GCC's own limit leaves big bodies rolled, and spills them). */
#if defined(__clang__)
#  define QTK_UNROLL _Pragma("clang loop unroll(enable)")
#else
#  define QTK_UNROLL _Pragma("GCC unroll 16")
#endif

/* Segment of a row whose scales are converted at once by the fused kernels (fields). */
#define QTK__MM_SEG 1024u

/* The integer path's entries (mm_avx512_int.c, mm_avx2_int.c). */
#ifdef QTK_HAVE_AVX512
QTK_INTERNAL qtk_status qtk__mm_int_prepare_avx512(qtk__mm *c);
QTK_INTERNAL void qtk__mm_int_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws);
/* 2-bit integer weights, multiply-free (mm_avx512_tern.c); activation blocks of 32. */
QTK_INTERNAL void qtk__mm_tern_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws);
#endif
#ifdef QTK_HAVE_AVX2
QTK_INTERNAL qtk_status qtk__mm_int_prepare_avx2(qtk__mm *c);
QTK_INTERNAL void qtk__mm_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws);
#endif

/* Next block boundary bookkeeping for scales along a row: block index (relative to the
 * first block of the current segment) of the chunk starting at column k, when the block
 * is at least a chunk long. */
typedef struct {
    size_t bi, next, bc;
} qtk__blk_walk;

static inline void qtk__blk_start(qtk__blk_walk *b, size_t s0, size_t bc) {
    b->bi = 0;
    b->bc = bc;
    b->next = (s0 / bc + 1) * bc;
}
static inline size_t qtk__blk_at(qtk__blk_walk *b, size_t k) {
    while (k >= b->next) { /* at most once per chunk: bc >= chunk */
        b->bi++;
        b->next += b->bc;
    }
    return b->bi;
}

#endif
