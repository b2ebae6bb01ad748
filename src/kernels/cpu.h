/* cpu.h — what the CPU can do (detected once) and which kernel level is in use. */
#ifndef QTK_CPU_H
#define QTK_CPU_H

#include "../common/internal.h"

enum {
    QTK_CPU_AVX2 = 1u << 0,
    QTK_CPU_FMA = 1u << 1,
    QTK_CPU_F16C = 1u << 2,
    QTK_CPU_AVX512F = 1u << 3,
    QTK_CPU_AVX512BW = 1u << 4,
    QTK_CPU_AVX512DQ = 1u << 5,
    QTK_CPU_AVX512VL = 1u << 6,
    QTK_CPU_AVX512VBMI = 1u << 7,
    QTK_CPU_AVX512VNNI = 1u << 8,
    QTK_CPU_AVX512BF16 = 1u << 9,
    QTK_CPU_AVX512FP16 = 1u << 10,
    QTK_CPU_AVXVNNI = 1u << 11,
    QTK_CPU_BMI2 = 1u << 12,
    QTK_CPU_NEON = 1u << 13,    /* AArch64 Advanced SIMD (HWCAP_ASIMD) */
    QTK_CPU_DOTPROD = 1u << 14, /* AArch64 sdot/udot (HWCAP_ASIMDDP) */
    /* not an instruction set: a CPU (AMD family 19h, Zen 4) where vpmaddubsw + vpmaddwd beat
     * vpdpbusd for 8- and 4-bit integer weights (docs/performance.md, bench_ggml's fast-alt) */
    QTK_CPU_MADD_OVER_DPBUSD = 1u << 15,
};

/* Feature bits of this CPU (with OS support for the register state), detected once. */
QTK_INTERNAL unsigned qtk__cpu_features(void);
/* The level in use (never QTK_ISA_AUTO). */
QTK_INTERNAL qtk_isa qtk__isa_active(void);

#endif
