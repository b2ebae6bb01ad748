/* mm_avx2.c — the matmul kernels at 8 lanes (AVX2 + FMA + F16C; AVX-VNNI where the CPU has it). */
#include "mmv_avx2.h"

#include "mm_simd.h"

/* store=ggml's integer kernel is this level's (gb_int) at the AVX-512 level too (mm_avx512.c),
 * where the 32-element types take vpdpbusd when the CPU has AVX512-VNNI (at 32 bytes: VL):
 * the same bits as gb_int's pmaddubsw (mm_body_gb32.h) */
#define GB_IT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define GB_SFX(x) x##_vnni
#define GB_DOT(acc, u, x) _mm256_dpbusd_epi32((acc), (u), (x))
#include "mm_body_gb32.h"

static GB_IT void gb_int_vnni(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    switch (c->w.gb->f) {
    case QTK__GF_Q4_1: gb_rows32_vnni(QTK__GF_Q4_1, c, n0, n1); break;
    case QTK__GF_Q5_0: gb_rows32_vnni(QTK__GF_Q5_0, c, n0, n1); break;
    case QTK__GF_Q5_1: gb_rows32_vnni(QTK__GF_Q5_1, c, n0, n1); break;
    default: gb_int(c, n0, n1, ws); break;
    }
}
#undef GB_IT
#undef GB_SFX
#undef GB_DOT

void qtk__mm_gb_int_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const unsigned need = QTK_CPU_AVX512VL | QTK_CPU_AVX512VNNI;
    if ((qtk__mm_features() & need) == need && !(qtk__mm_hooks() & QTK__MM_HOOK_INT_MAD)) gb_int_vnni(c, n0, n1, ws);
    else gb_int(c, n0, n1, ws);
}

void qtk__mm_gb_lat_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws) { gb_lat_int(c, n0, n1, ws); }
void qtk__mm_gb_lat_exact_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws) { gb_lat_exact(c, n0, n1, ws); }
