/* avx2.c — the vector kernels at 8 lanes (AVX2 + FMA + F16C). Bit-identical to ref.c. */
#include "simd_avx2.h"

#include "simd_body.h"
