/* avx2.c — AVX2 (+FMA, F16C) kernels. Bit-identical to ref.c. */
#include "kernels.h"

#include <immintrin.h>

const qtk__kernels qtk__kernels_avx2 = {
    .name = "avx2",
    .amax_rows = NULL,
    .encode_rows = NULL,
    .decode_rows = NULL,
};
