/* cpu.c — CPU feature detection (x86: cpuid + xgetbv; AArch64 Linux: the kernel's HWCAP
 * bits) and the kernel level in use. */
#include "cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#  include <cpuid.h>
#  define QTK_X86 1
#else
#  define QTK_X86 0
#endif
#if defined(__aarch64__) && defined(__linux__)
#  include <sys/auxv.h>
#  define QTK_ARM64_LINUX 1
#else
#  define QTK_ARM64_LINUX 0
#endif

static unsigned features;
static qtk_isa detected = QTK_ISA_SCALAR;
static atomic_int active; /* qtk_isa; set once by init, then by qtk_set_isa */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if QTK_X86
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static unsigned detect(void) {
    unsigned f = 0;
#if QTK_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    /* family: base 0xf plus the extended family (bits 20-27) */
    const unsigned family = ((a >> 8) & 0xf) == 0xf ? 0xf + ((a >> 20) & 0xff) : (a >> 8) & 0xf;
    if (amd && family == 0x19) f |= QTK_CPU_MADD_OVER_DPBUSD;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    if (!osxsave || !avx) return 0;
    unsigned long long xcr0 = xgetbv0();
    bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
    if (!ymm) return 0;
    if (fma) f |= QTK_CPU_FMA;
    if (f16c) f |= QTK_CPU_F16C;
    if (__get_cpuid_max(0, NULL) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned max_sub7 = a;
    if (b & (1u << 5)) f |= QTK_CPU_AVX2;
    if (b & (1u << 8)) f |= QTK_CPU_BMI2;
    if (zmm) {
        if (b & (1u << 16)) f |= QTK_CPU_AVX512F;
        if (b & (1u << 17)) f |= QTK_CPU_AVX512DQ;
        if (b & (1u << 30)) f |= QTK_CPU_AVX512BW;
        if (b & (1u << 31)) f |= QTK_CPU_AVX512VL;
        if (c & (1u << 1)) f |= QTK_CPU_AVX512VBMI;
        if (c & (1u << 11)) f |= QTK_CPU_AVX512VNNI;
        if (d & (1u << 23)) f |= QTK_CPU_AVX512FP16;
    }
    unsigned a1 = 0, b1, c1, d1;
    if (max_sub7 >= 1) __cpuid_count(7, 1, a1, b1, c1, d1); /* AVX-VNNI, AVX512-BF16 live in sub-leaf 1 */
    (void)b1;
    (void)c1;
    (void)d1;
    if (a1 & (1u << 4)) f |= QTK_CPU_AVXVNNI;
    if (zmm && (a1 & (1u << 5))) f |= QTK_CPU_AVX512BF16;
#elif QTK_ARM64_LINUX
    /* the kernel's HWCAP bits (arch/arm64/include/uapi/asm/hwcap.h): ASIMD 1 << 1, ASIMDDP 1 << 20 */
    unsigned long hw = getauxval(AT_HWCAP);
    if (hw & (1ul << 1)) f |= QTK_CPU_NEON;
    if (hw & (1ul << 20)) f |= QTK_CPU_DOTPROD;
#elif defined(__aarch64__)
    f |= QTK_CPU_NEON; /* Advanced SIMD is part of AArch64; the dot product is not assumed */
#endif
    return f;
}

static bool isa_built(qtk_isa isa) {
    switch (isa) {
    case QTK_ISA_SCALAR:
    case QTK_ISA_PORTABLE: return true;
#ifdef QTK_HAVE_AVX2
    case QTK_ISA_AVX2: return true;
#endif
#ifdef QTK_HAVE_AVX512
    case QTK_ISA_AVX512: return true;
#endif
#ifdef QTK_HAVE_NEON
    case QTK_ISA_NEON: return true;
#endif
    default: return false;
    }
}

static bool isa_runs(qtk_isa isa) {
    const unsigned avx2 = QTK_CPU_AVX2 | QTK_CPU_FMA | QTK_CPU_F16C | QTK_CPU_BMI2;
    const unsigned avx512 = avx2 | QTK_CPU_AVX512F | QTK_CPU_AVX512BW | QTK_CPU_AVX512DQ | QTK_CPU_AVX512VL;
    switch (isa) {
    case QTK_ISA_SCALAR:
    case QTK_ISA_PORTABLE: return true;
    case QTK_ISA_AVX2: return (features & avx2) == avx2;
    case QTK_ISA_AVX512: return (features & avx512) == avx512;
    case QTK_ISA_NEON: return (features & QTK_CPU_NEON) != 0;
    default: return false;
    }
}

static void init(void) {
    features = detect();
    detected = QTK_ISA_PORTABLE;
    if (isa_built(QTK_ISA_AVX2) && isa_runs(QTK_ISA_AVX2)) detected = QTK_ISA_AVX2;
    if (isa_built(QTK_ISA_AVX512) && isa_runs(QTK_ISA_AVX512)) detected = QTK_ISA_AVX512;
    if (isa_built(QTK_ISA_NEON) && isa_runs(QTK_ISA_NEON)) detected = QTK_ISA_NEON;
    qtk_isa use = detected;
    const char *env = getenv("QTK_ISA");
    if (env && *env) {
        qtk_isa want = strcasecmp(env, "scalar") == 0     ? QTK_ISA_SCALAR
                       : strcasecmp(env, "portable") == 0 ? QTK_ISA_PORTABLE
                       : strcasecmp(env, "avx2") == 0     ? QTK_ISA_AVX2
                       : strcasecmp(env, "avx512") == 0 ? QTK_ISA_AVX512
                       : strcasecmp(env, "neon") == 0   ? QTK_ISA_NEON
                                                        : QTK_ISA_AUTO;
        /* an unknown or unsupported request keeps the detected level (a library must not
         * fail to load over an environment variable; qtk_get_isa tells what is used) */
        if (want != QTK_ISA_AUTO && isa_built(want) && isa_runs(want) && want <= detected) use = want;
    }
    atomic_store(&active, (int)use);
}

unsigned qtk__cpu_features(void) {
    pthread_once(&once, init);
    return features;
}

qtk_isa qtk__isa_active(void) {
    pthread_once(&once, init);
    return (qtk_isa)atomic_load(&active);
}

qtk_isa qtk_detect_isa(void) {
    pthread_once(&once, init);
    return detected;
}

qtk_isa qtk_get_isa(void) { return qtk__isa_active(); }

const char *qtk_isa_name(qtk_isa isa) {
    switch (isa) {
    case QTK_ISA_AUTO: return "auto";
    case QTK_ISA_SCALAR: return "scalar";
    case QTK_ISA_PORTABLE: return "portable";
    case QTK_ISA_AVX2: return "avx2";
    case QTK_ISA_AVX512: return "avx512";
    case QTK_ISA_NEON: return "neon";
    }
    return "?";
}

qtk_status qtk_set_isa(qtk_isa isa) {
    pthread_once(&once, init);
    if (isa == QTK_ISA_AUTO) {
        atomic_store(&active, (int)detected);
        return QTK_OK;
    }
    if ((unsigned)isa > QTK_ISA_NEON) return qtk__err(QTK_E_ARG, "isa %d is not a qtk_isa", (int)isa);
    if (!isa_built(isa))
        return qtk__err(QTK_E_UNSUPPORTED, "this build of qtk has no %s kernels", qtk_isa_name(isa));
    if (!isa_runs(isa))
        return qtk__err(QTK_E_UNSUPPORTED, "this CPU cannot run the %s kernels", qtk_isa_name(isa));
    atomic_store(&active, (int)isa);
    return QTK_OK;
}
