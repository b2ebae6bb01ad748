/* portable.c — the vector kernels in portable C (GCC/Clang vector extensions, 4 lanes):
 * the level for CPUs without AVX2, ARM included. Bit-identical to ref.c. */
#include "simd_portable.h"

#include "simd_body.h"
