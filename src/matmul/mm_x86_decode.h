/* mm_x86_decode.h — the per-kind tile decoders of the exact tiled path, shared by
 * mm_avx2.c and mm_avx512.c. Included after the file defines its vector helpers: consts,
 * consts_init, decode_row (the row decoder for one value kind) and prefetch_row. Each
 * instance below is decode_row with its kind fixed, so the compiler specialises it. */
#ifndef QTK_MM_X86_DECODE_H
#define QTK_MM_X86_DECODE_H

#define DECODE(name, kind)                                                                                             \
    static void name(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst,          \
                     size_t ld) {                                                                                      \
        consts kc;                                                                                                     \
        consts_init(c, &kc);                                                                                           \
        const size_t bc = c->w.bc, end = c0 + nc < c->w.C ? c0 + nc : c->w.C;                                         \
        const size_t b0 = c0 / bc, nblk = end > c0 ? (end - 1) / bc - b0 + 1 : 0;                                      \
        for (size_t i = 0; i < nr; i++) {                                                                              \
            if (c->layout == QTK_MM_NK) prefetch_row(&c->w, r0 + nr + i, c0, nc);                                      \
            decode_row(kind, c, &kc, r0 + i, c0, nc, chunked, b0, nblk, dst + i * ld);                                 \
        }                                                                                                              \
    }
DECODE(decode_f32, QTK__MMK_F32)
DECODE(decode_i8, QTK__MMK_I8)
DECODE(decode_t8, QTK__MMK_T8)
DECODE(decode_e4m3, QTK__MMK_E4M3)
DECODE(decode_e5m2, QTK__MMK_E5M2)
DECODE(decode_t4, QTK__MMK_T4)
DECODE(decode_t2, QTK__MMK_T2)

static void decode(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst, size_t ld) {
    switch (c->w.kind) {
    case QTK__MMK_F32: decode_f32(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_I8: decode_i8(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T8: decode_t8(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_E4M3: decode_e4m3(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_E5M2: decode_e5m2(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T4: decode_t4(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T2: decode_t2(c, r0, nr, c0, nc, chunked, dst, ld); break;
    default: break;
    }
}

#endif
