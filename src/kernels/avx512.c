/* avx512.c — the vector kernels at 16 lanes (AVX-512 F/BW/DQ/VL). Bit-identical to ref.c. */
#include "simd_avx512.h"

#include "simd_body.h"
