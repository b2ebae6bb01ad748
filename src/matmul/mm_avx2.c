/* mm_avx2.c — the matmul kernels at 8 lanes (AVX2 + FMA + F16C; AVX-VNNI where the CPU has it). */
#include "mmv_avx2.h"

#include "mm_simd.h"
