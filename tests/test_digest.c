/* test_digest.c — the same bits on every architecture: digests (FNV-1a, 64 bits) of what qtk
 * computes for fixed inputs — the quantized bytes and the dequantized values of a set of
 * schemes at every kernel level, and matmuls (exact and fast) at the levels of the portable
 * vocabulary's 4 lanes (portable, and neon on AArch64, which computes the same operations in
 * the same order) — against constants recorded on x86-64. The inputs are made with integer
 * and exactly rounded arithmetic only (no libm), so they are the same everywhere; a pass under
 * qemu-aarch64 (scripts/test-arm64.sh) shows the ARM build gives x86's bits. */
#include "test.h"

#include "qtk_matmul.h"

static const char *const SPECS[] = {
    "q8s,block=32:f16", "q4f,block=32:f16", "q4s,block=64:bf16", "q2s,block=256:f16", "q2f,block=16:f32",
    "e4m3,block=32:f32", "e5m2,block=16:ue8m0", "e2m1,block=32:f16", "nvfp4", "mxfp4", "mxfp8", "nf4",
    "q4f,table=iq4nl,block=32:f16", "q8f,store=u32:1,block=8:f16", "q4_1", "q4_k", "q6_k",
    "u4,block=128:f16,zero=u8", "e4m3,block=16:ue4m3,tensor=f32", "q4s,block=4x8:f16",
};
#define N_SPECS (sizeof SPECS / sizeof SPECS[0])
enum { R = 48, C = 256, M = 3 };

/* recorded on x86-64 (the scalar reference; every level agrees) */
static const uint64_t WANT_CODEC = 0x408a49c36eb9c0d2ull;
/* recorded on x86-64 at the portable level */
static const uint64_t WANT_MATMUL = 0x46c72da98ddda2f1ull;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* uniform in [-1, 1) from the top 24 bits (exact in f32), every 37th element x 8 (outliers) */
static void fill(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        float u = (float)(int32_t)((trand_u64(&seed) >> 40) - (1u << 23)) * 0x1p-23f;
        x[i] = i % 37 == 5 ? 8.0f * u : u;
    }
}

static uint64_t codec_digest(const float *w) {
    uint64_t h = 0xcbf29ce484222325ull;
    float *y = malloc(R * C * sizeof(float));
    for (size_t i = 0; i < N_SPECS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(SPECS[i], &s));
        size_t shape[2] = {R, C}, n = 0;
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
        if (!t) continue;
        const uint8_t *b = qtk_tensor_bytes(t, &n);
        h = fnv(h, b, n);
        CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, R * C));
        h = fnv(h, y, R * C * sizeof(float));
        qtk_tensor_free(t);
    }
    free(y);
    return h;
}

static uint64_t matmul_digest(const float *w, const float *x, const float *bias) {
    uint64_t h = 0xcbf29ce484222325ull;
    float y[M * R];
    for (size_t i = 0; i < N_SPECS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(SPECS[i], &s));
        size_t shape[2] = {R, C};
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
        if (!t) continue;
        for (int prec = 0; prec < 2; prec++)
            for (size_t m = 1; m <= M; m += 2) {
                qtk_matmul_options o = {QTK_MM_NK, (qtk_precision)prec, 1};
                CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, m, C, bias, y, R, &o));
                h = fnv(h, y, m * R * sizeof(float));
            }
        qtk_tensor_free(t);
    }
    return h;
}

static void same_bits_everywhere(void) {
    float *w = malloc(R * C * sizeof(float)), x[M * C], bias[R];
    fill(w, R * C, 11);
    fill(x, M * C, 12);
    fill(bias, R, 13);
    const qtk_isa all[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    int codecs = 0, matmuls = 0;
    for (size_t li = 0; li < sizeof all / sizeof all[0]; li++) {
        if (qtk_set_isa(all[li]) != QTK_OK) {
            qtk_clear_error();
            continue;
        }
        uint64_t d = codec_digest(w);
        CHECK_MSG(d == WANT_CODEC, "level %s: quantize/dequantize digest 0x%016llx, x86-64's 0x%016llx",
                  qtk_isa_name(all[li]), (unsigned long long)d, (unsigned long long)WANT_CODEC);
        codecs++;
        if (all[li] == QTK_ISA_PORTABLE || all[li] == QTK_ISA_NEON) {
            d = matmul_digest(w, x, bias);
            CHECK_MSG(d == WANT_MATMUL, "level %s: matmul digest 0x%016llx, x86-64's 0x%016llx", qtk_isa_name(all[li]),
                      (unsigned long long)d, (unsigned long long)WANT_MATMUL);
            matmuls++;
        }
    }
    qtk_set_isa(QTK_ISA_AUTO);
    printf("  %zu schemes: quantize/dequantize digests at %d levels, matmul digests at %d\n", N_SPECS, codecs, matmuls);
    CHECK(codecs >= 2 && matmuls >= 1);
    free(w);
}

TEST_MAIN("digest", T(same_bits_everywhere))
