/* avx512.c — AVX-512 (F/BW/DQ/VL) kernels. Bit-identical to ref.c. */
#include "kernels.h"

#include <immintrin.h>

const qtk__kernels qtk__kernels_avx512 = {
    .name = "avx512",
    .amax_rows = NULL,
    .encode_rows = NULL,
    .decode_rows = NULL,
};
