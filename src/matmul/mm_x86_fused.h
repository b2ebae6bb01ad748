/* mm_x86_fused.h — the per-kind instances of the fused GEMV / small-M kernel (layout nk)
 * and their dispatch, shared by mm_avx2.c and mm_avx512.c. Included after the file defines
 * fused_range(kind, c, n0, n1) for its vector width. */
#ifndef QTK_MM_X86_FUSED_H
#define QTK_MM_X86_FUSED_H

#define FUSED(name, kind)                                                                                              \
    static void name(const qtk__mm *c, size_t n0, size_t n1) { fused_range(kind, c, n0, n1); }
FUSED(fused_f32, QTK__MMK_F32)
FUSED(fused_i8, QTK__MMK_I8)
FUSED(fused_t8, QTK__MMK_T8)
FUSED(fused_e4m3, QTK__MMK_E4M3)
FUSED(fused_e5m2, QTK__MMK_E5M2)
FUSED(fused_t4, QTK__MMK_T4)
FUSED(fused_t2, QTK__MMK_T2)

static void nk_fused(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    switch (c->w.kind) {
    case QTK__MMK_F32: fused_f32(c, n0, n1); break;
    case QTK__MMK_I8: fused_i8(c, n0, n1); break;
    case QTK__MMK_T8: fused_t8(c, n0, n1); break;
    case QTK__MMK_E4M3: fused_e4m3(c, n0, n1); break;
    case QTK__MMK_E5M2: fused_e5m2(c, n0, n1); break;
    case QTK__MMK_T4: fused_t4(c, n0, n1); break;
    case QTK__MMK_T2: fused_t2(c, n0, n1); break;
    default: break;
    }
}

#endif
