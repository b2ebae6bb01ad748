/* mm_avx2_int.c — the integer path (precision fast) with AVX2: activations quantized to
 * int8 per block (mm_int.c defines the bits), integer dot products with AVX-VNNI where the
 * CPU has it and vpmaddubsw otherwise (see mm_avx2_int_body.h). */
#include <float.h>
#include "mm_avx2.h"

#include "../kernels/cpu.h"

#define QTK__INT_VNNI 1
#include "mm_avx2_int_body.h"
#undef QTK__INT_VNNI
#define QTK__INT_VNNI 0
#include "mm_avx2_int_body.h"
#undef QTK__INT_VNNI

qtk_status qtk__mm_int_prepare_avx2(qtk__mm *c) {
    return qtk__mm_int_prepare_simd(c, 32, (qtk__mm_features() & QTK_CPU_AVXVNNI) != 0, qtk__mm_quantize_row);
}

void qtk__mm_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    if (c->vnni) int_range_vnni(c, n0, n1);
    else int_range_mad(c, n0, n1);
}
