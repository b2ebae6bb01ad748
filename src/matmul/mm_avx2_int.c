/* mm_avx2_int.c — the integer path (precision fast) with AVX2: activations quantized to
 * int8 per block (mm_int.c defines the bits), integer dot products with AVX-VNNI where the
 * CPU has it and vpmaddubsw otherwise (see mm_avx2_int_body.h). */
#include "mm_avx2.h"

#include "../kernels/cpu.h"

#define QTK__INT_VNNI 1
#include "mm_avx2_int_body.h"
#undef QTK__INT_VNNI
#define QTK__INT_VNNI 0
#include "mm_avx2_int_body.h"
#undef QTK__INT_VNNI

qtk_status qtk__mm_int_prepare_avx2(qtk__mm *c) {
    const qtk__mmw *w = &c->w;
    const size_t M = c->M, K = c->K, CH = 32u * w->per, nb = qtk__ceil_div(K, c->bx);
    c->vnni = (qtk__mm_features() & QTK_CPU_AVXVNNI) != 0;
    c->kq = qtk__ceil_div(K, CH) * CH;
    c->xs_ld = c->xc_ld = c->kq / CH * 8;
    c->ws_floats = 0;
    c->xq = qtk__malloc(M * c->kq);
    c->xs = qtk__malloc(M * c->xs_ld * sizeof(float));
    c->xc = c->vnni ? qtk__malloc(M * c->xc_ld * sizeof(int32_t)) : NULL;
    int8_t *q = qtk__malloc(K);
    float *s = qtk__malloc(nb * sizeof(float));
    qtk_status st = QTK_OK;
    if (!c->xq || !c->xs || (c->vnni && !c->xc) || !q || !s) {
        st = qtk__err(QTK_E_NOMEM, "out of memory for the quantized activations");
    } else {
        for (size_t m = 0; m < M; m++) {
            qtk__mm_quantize_row(c->x + m * K, K, c->bx, q, s);
            qtk__mm_int_layout(q, s, K, c->bx, w->per, 32, 128, c->xq + m * c->kq, c->xs + m * c->xs_ld,
                               c->vnni ? c->xc + m * c->xc_ld : NULL, c->kq);
        }
    }
    qtk__free(q);
    qtk__free(s);
    return st;
}

void qtk__mm_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    if (c->vnni) int_range_vnni(c, n0, n1);
    else int_range_mad(c, n0, n1);
}
