/* mm_avx2.c — the matmul kernels at 8 lanes (AVX2 + FMA + F16C; AVX-VNNI where the CPU has it). */
#include "mmv_avx2.h"

#include "mm_simd.h"

/* store=ggml's integer kernel, which the AVX-512 level runs too (mm_avx512.c) */
void qtk__mm_gb_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws) { gb_int(c, n0, n1, ws); }
