/* neon.c — the vector kernels on AArch64 (NEON, 4 lanes). Bit-identical to ref.c. */
#include "simd_neon.h"

#include "simd_body.h"
