/* mm_avx512.c — the matmul kernels at 16 lanes (AVX-512 F/BW/DQ/VL; AVX512-VNNI where the CPU has it). */
#include "mmv_avx512.h"

/* store=ggml's integer kernel is AVX2's (32-byte vectors; every AVX-512 CPU runs it) */
#ifdef QTK_HAVE_AVX2
#  define GB_INT qtk__mm_gb_int_avx512
#  define GB_LAT_INT qtk__mm_gb_lat_int_avx2
#  define GB_LAT_EXACT qtk__mm_gb_lat_exact_avx2
#  define GB_LAT_INSN "AVX2's: codebook rows from tables, pmaddubsw by |q| with the signs on x, pmaddwd by the sub-scales (IQ1: pmaddubsw by the sub-scales, the deltas once a block)"
#endif
#include "mm_simd.h"
