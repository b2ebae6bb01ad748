/* dispatch.c — the kernel table for the level in use (see cpu.c for detection). */
#include "cpu.h"
#include "kernels.h"

const qtk__kernels *qtk__kernels_active(void) {
    switch (qtk__isa_active()) {
#ifdef QTK_HAVE_AVX512
    case QTK_ISA_AVX512: return &qtk__kernels_avx512;
#endif
#ifdef QTK_HAVE_AVX2
    case QTK_ISA_AVX2: return &qtk__kernels_avx2;
#endif
#ifdef QTK_HAVE_NEON
    case QTK_ISA_NEON: return &qtk__kernels_neon;
#endif
    case QTK_ISA_PORTABLE: return &qtk__kernels_portable;
    default: return &qtk__kernels_ref;
    }
}
