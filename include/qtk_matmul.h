/*
 * qtk_matmul.h — matrix products with quantized weights: y = x · Wᵀ (+ bias).
 *
 * W is a qtk_tensor of any scheme, rank 2, in one of two layouts:
 *   QTK_MM_NK  W is [N, K]: y[m][n] = Σ_k x[m][k] · W[n][k]   (a linear layer's [out, in])
 *   QTK_MM_KN  W is [K, N]: y[m][n] = Σ_k x[m][k] · W[k][n]   (Burn's Linear stores [in, out])
 * x is [M, K] row-major, f32, f16 or bf16; bias is NULL or N f32 values; y is [M, N] f32.
 * M = 1 is the decode-time GEMV. M, K and N may be any sizes (K = 0 gives y = bias); pointers
 * need no particular alignment. W is never expanded to f32 as a whole: kernels decode a few
 * registers or one small tile of it at a time.
 *
 *     #include <qtk_matmul.h>
 *     qtk_matmul_options o = {0};              // layout nk, precision exact, default threads
 *     if (qtk_matmul(w, x, QTK_DTYPE_F32, m, k, bias, y, n, &o) != QTK_OK)
 *         fprintf(stderr, "%s\n", qtk_last_error());
 *
 * Precision (what the result means; see README "Matmul" for the derivation)
 *
 *   QTK_PRECISION_EXACT (the default). The product of the activations with exactly the
 *   weights qtk_dequantize gives (w' = value(field) · effective scale, rounded once to f32),
 *   accumulated in f32. Only the order of the additions differs between kernels, so with
 *   u = 2^-24 and γ(n) = n·u / (1 - n·u), every output satisfies
 *       |y - y*| <= γ(K + 1) · (Σ_k |x_k · w'_k| + |bias|) + K · 2^-149
 *   where y* is the exact real value of bias + Σ_k x_k · w'_k. The last term is underflow:
 *   a product below f32's normal range is rounded to a multiple of 2^-149, not to a relative
 *   u (sums are exact there), so it matters only for outputs near 2^-126. The portable reference
 *   (QTK_ISA_SCALAR) adds the products in order of k without FMA and is bit-reproducible
 *   on every machine; the SIMD kernels are not bit-identical to it (they add in lanes), but
 *   give the same bits for every thread count.
 *
 *   QTK_PRECISION_FAST. For integer-valued weights (q8f q8s q4f q4s q2f q2s, e2m1 whose
 *   values are halves of integers, and lookup tables of integers, such as iq4nl) in layout
 *   nk with fields packed along K, and M up to the kernel level's limit (GEMV and small
 *   batches: 8; with AVX2 16 for 8-bit weights, 32 for 4-bit and any M for 2-bit, where the
 *   integer kernel measured faster than the exact tiled one): each row of x is
 *   quantized on the fly to int8 in blocks of B = 32 (16 when the weight blocks are 16
 *   long): s_b = max|x| / 127, q = round(x / s_b), the way ggml pairs Q4_0 with Q8_0. Block
 *   dot products are exact integers (2-bit weights: additions and subtractions only, as
 *   BitNet b1.58 intends); each is scaled once by (weight scale · s_b). The activation
 *   rounding adds
 *       |y - y*| <= Σ_b (s_b / 2) · Σ_{k in b} |w'_k| · (1 + 2^-8)  +  γ(K + 4) · (Σ_k |x_k w'_k| + |bias| + 2 E_q)
 *                   + K · 2^-134
 *   (E_q the first term; the last is underflow: a block's scale, weight scale · s_b, may
 *   lose 2^-150 when it falls below f32's normal range, times the block's integer sum), about max|x| / 254 · Σ|w'| in the worst case and ~0.3% of the
 *   output's scale typically. ggml's block structs (store=ggml: q4_1 q5_0 q5_1 q2_k q3_k
 *   q4_k q5_k q6_k, docs/affine.md) have an integer path of their own at any M on the vector
 *   levels (8 on the scalar reference): x is quantized per ggml block (B = 256 for the K
 *   types, as ggml's Q8_K; 32 for the others), the block sums and the mins' and offsets'
 *   corrections are exact integers, and the same bound holds with that B; its results are the
 *   same bits at every kernel level and thread count. Zero points (u4/u2 codes, zero=u8:
 *   GPTQ, AWQ, compressed-tensors) take the integer path with the block sums of (q - z), an
 *   exact integer Σ q·x_q - z Σ x_q per lane, under the same bound. Everything else runs the exact path even when FAST is asked
 *   for: schemes without an integer path (nf4, e4m3, e5m2, 8-bit tables, other layouts),
 *   and M above that limit, where the exact tiled kernel is faster. FAST only ever
 *   allows the integer path; it never trades accuracy silently. qtk_matmul_path() tells
 *   which path a call takes.
 *
 * Threads share N (in chunks they claim as they go); each output is computed by one thread in
 * the same order whatever the thread count. Results do not depend on the thread count.
 */
#ifndef QTK_MATMUL_H
#define QTK_MATMUL_H

#include "qtk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qtk_mm_layout {
    QTK_MM_NK = 0, /* W is [N, K] (the default) */
    QTK_MM_KN      /* W is [K, N] */
} qtk_mm_layout;

typedef enum qtk_precision {
    QTK_PRECISION_EXACT = 0, /* f32 activations × exactly dequantized weights, f32 sums */
    QTK_PRECISION_FAST       /* allow the int8-activation integer path where one exists */
} qtk_precision;

typedef struct qtk_matmul_options {
    qtk_mm_layout layout;
    qtk_precision precision;
    int threads; /* 0: the library default (qtk_set_threads) */
} qtk_matmul_options;

/* The kernel family a call runs (qtk_matmul_path). */
typedef enum qtk_mm_path {
    QTK_MM_PATH_REFERENCE = 0, /* portable C: decode a block, multiply-accumulate in f32 in order of k */
    QTK_MM_PATH_EXACT,         /* SIMD, weights decoded on the fly from their packed fields */
    QTK_MM_PATH_GENERIC,       /* SIMD multiply of tiles decoded by the element codecs (any layout) */
    QTK_MM_PATH_INTEGER        /* precision FAST: int8 activations × integer weights */
} qtk_mm_path;

/* y[M, N] = x[M, K] · Wᵀ + bias. k and n must match W's shape under opts->layout (they are
 * passed to catch mismatched buffers: the message names the dimension at fault). x_dtype is
 * QTK_DTYPE_F32, F16 or BF16. bias may be NULL. opts may be NULL (nk, exact, default
 * threads). y must not overlap x, bias or W. */
QTK_API qtk_status qtk_matmul(const qtk_tensor *w, const void *x, qtk_dtype x_dtype, size_t m, size_t k,
                              const float *bias, float *y, size_t n, const qtk_matmul_options *opts);

/* The same product with dense f32 weights (w is [N, K] or [K, N] row-major f32): the
 * baseline the quantized kernels are measured against. precision is ignored (exact). */
QTK_API qtk_status qtk_matmul_f32(const float *w, const void *x, qtk_dtype x_dtype, size_t m, size_t k,
                                  const float *bias, float *y, size_t n, const qtk_matmul_options *opts);

/* Which path qtk_matmul(w, ..., m, ..., opts) takes on this machine at the current ISA
 * level (qtk_set_isa). */
QTK_API qtk_status qtk_matmul_path(const qtk_tensor *w, size_t m, const qtk_matmul_options *opts,
                                   qtk_mm_path *path);
/* "reference", "exact", "generic", "integer"; "?" if unknown. */
QTK_API const char *qtk_mm_path_name(qtk_mm_path p);
/* The kernel qtk_matmul(w, ..., m, ..., opts) runs on this machine at the current level, as
 * static text: the level, the path and what it is built on, e.g. "avx512 integer: vpdpbusd
 * (AVX512-VNNI)", "avx2 integer: vpmaddubsw, weights + offset by xor", "neon integer: sdot",
 * "avx512 exact: fused GEMV", "avx512 exact: tiled GEMM". For benchmarks and logs; the words
 * may change between versions. */
QTK_API qtk_status qtk_matmul_kernel(const qtk_tensor *w, size_t m, const qtk_matmul_options *opts,
                                     const char **kernel);

#ifdef __cplusplus
}
#endif
#endif /* QTK_MATMUL_H */
