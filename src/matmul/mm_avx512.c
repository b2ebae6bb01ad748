/* mm_avx512.c — the matmul kernels at 16 lanes (AVX-512 F/BW/DQ/VL; AVX512-VNNI where the CPU has it). */
#include "mmv_avx512.h"

#include "mm_simd.h"
