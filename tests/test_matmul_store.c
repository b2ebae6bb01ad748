/* test_matmul_store.c — SPEC §4 for integer fields one per byte, in every path: a `packed`
 * store of q4/q2 values (like `native`) holds each field sign-extended to int8. Quantize writes
 * those bytes, from_bytes/bytes_check insist on them, dequantize and matmul read them, at every
 * kernel level; and matmul gives the same results on every store (native, packed, u32 along
 * either dimension) as the reference does. */
#include "test.h"

#include "qtk_matmul.h"

#include <stdbool.h>

static const qtk_isa LEVELS[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
#define N_LEVELS (sizeof LEVELS / sizeof LEVELS[0])

/* The reproducer of issue 12: W = [4, 64], W[i] = (7i mod 15) - 7, x[k] = k mod 5 - 2. */
static void issue12_reproducer(void) {
    const char *specs[] = {"q4s,block=32:f16,store=packed:0", "q4s,block=32:f16,store=native", "q4s,block=32:f16"};
    float w[4 * 64], x[64], y[4];
    for (int i = 0; i < 4 * 64; i++) w[i] = (float)((7 * i) % 15 - 7);
    for (int k = 0; k < 64; k++) x[k] = (float)(k % 5 - 2);
    const float want[4] = {73, -13, 51, -65};
    size_t shape[2] = {4, 64};
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(specs[si], &s));
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
        if (!t) continue;
        for (size_t li = 0; li < N_LEVELS; li++) {
            if (qtk_set_isa(LEVELS[li]) != QTK_OK) continue;
            for (int prec = 0; prec < 2; prec++) {
                qtk_matmul_options o = {QTK_MM_NK, (qtk_precision)prec, 1};
                CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, 1, 64, NULL, y, 4, &o));
                /* the weights are exact (scale 1) and x is integer: the exact path is exact;
                 * the integer one rounds x to (2 / 127) q, off by at most 1 / 127 per element,
                 * so by at most Σ|w| / 127 <= 7 · 64 / 127 (the wrong answers are 60 or more off) */
                for (int n = 0; n < 4; n++)
                    CHECK_MSG(fabsf(y[n] - want[n]) <= (prec ? 7.0f * 64.0f / 127.0f : 1e-4f), "%s isa %s %s: y[%d] = %g, want %g",
                              specs[si], qtk_isa_name(LEVELS[li]), prec ? "fast" : "exact", n, (double)y[n], (double)want[n]);
            }
        }
        qtk_set_isa(QTK_ISA_AUTO);
        qtk_tensor_free(t);
    }
}

/* Quantized bytes of packed integer stores are the native ones: sign-extended fields. */
static void packed_bytes_are_native(void) {
    const char *values[] = {"q4f", "q4s", "q2f", "q2s", "q8s"};
    uint64_t seed = 5;
    size_t shape[2] = {3, 40};
    float x[3 * 40];
    for (size_t i = 0; i < 120; i++) x[i] = trand_normal(&seed);
    for (size_t vi = 0; vi < sizeof values / sizeof values[0]; vi++)
        for (size_t li = 0; li < N_LEVELS; li++) {
            if (qtk_set_isa(LEVELS[li]) != QTK_OK) continue;
            char sp[64], sn[64];
            snprintf(sp, sizeof sp, "%s,block=8:f16,store=packed", values[vi]);
            snprintf(sn, sizeof sn, "%s,block=8:f16,store=native", values[vi]);
            qtk_scheme s_p, s_n;
            CHECK_OK(qtk_scheme_parse(sp, &s_p));
            CHECK_OK(qtk_scheme_parse(sn, &s_n));
            qtk_tensor *tp = NULL, *tn = NULL;
            CHECK_OK(qtk_quantize(x, shape, 2, &s_p, NULL, &tp));
            CHECK_OK(qtk_quantize(x, shape, 2, &s_n, NULL, &tn));
            if (!tp || !tn) {
                qtk_tensor_free(tp);
                qtk_tensor_free(tn);
                continue;
            }
            size_t lp, ln;
            const uint8_t *bp = qtk_tensor_bytes(tp, &lp), *bn = qtk_tensor_bytes(tn, &ln);
            CHECK_MSG(lp == ln && memcmp(bp, bn, lp) == 0, "%s isa %s: packed bytes differ from native", sp,
                      qtk_isa_name(LEVELS[li]));
            int bits = values[vi][1] - '0', lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
            size_t bad = 0;
            for (size_t i = 0; i < 120; i++) bad += (int8_t)bp[i] < lo || (int8_t)bp[i] > hi;
            CHECK_MSG(bad == 0, "%s isa %s: %zu fields not sign-extended", sp, qtk_isa_name(LEVELS[li]), bad);
            float dp[120], dn[120];
            CHECK_OK(qtk_dequantize(tp, QTK_DTYPE_F32, dp, 120));
            CHECK_OK(qtk_dequantize(tn, QTK_DTYPE_F32, dn, 120));
            CHECK_MSG(memcmp(dp, dn, sizeof dp) == 0, "%s isa %s: packed values differ from native", sp,
                      qtk_isa_name(LEVELS[li]));
            qtk_tensor_free(tp);
            qtk_tensor_free(tn);
        }
    qtk_set_isa(QTK_ISA_AUTO);
}

/* from_bytes/bytes_check: a packed q4 field is a signed byte in -8..7; the raw nibble of a
 * negative value (0x0f for -1) is refused with a message naming it. */
static void packed_bytes_checked(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,store=packed", &s)); /* per-tensor f32 scale */
    size_t shape[1] = {4};
    uint8_t b[8] = {0x01, 0xff, 0xf8, 0x07, 0, 0, 0x80, 0x3f}; /* 1, -1, -8, 7; scale 1.0 */
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_bytes_check(b, 8, shape, 1, &s));
    CHECK_OK(qtk_tensor_from_bytes(b, 8, shape, 1, &s, &t));
    float v[4] = {0};
    if (t) CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, v, 4));
    CHECK(v[0] == 1.0f && v[1] == -1.0f && v[2] == -8.0f && v[3] == 7.0f);
    size_t len = 0;
    if (t) CHECK(memcmp(qtk_tensor_bytes(t, &len), b, 8) == 0 && len == 8);
    qtk_tensor_free(t);
    b[1] = 0x0f; /* the raw nibble of -1 */
    CHECK_ERR(qtk_bytes_check(b, 8, shape, 1, &s), QTK_E_VALUE, "packed field at index 1 (coordinates [1]) is 0x0f");
    CHECK_ERR(qtk_tensor_from_bytes(b, 8, shape, 1, &s, &t), QTK_E_VALUE, "sign-extended");
    CHECK_ERR(qtk_dequantize_bytes(b, 8, shape, 1, &s, QTK_DTYPE_F32, v, 4), QTK_E_VALUE, "packed field");
    /* q2: -2..1 */
    CHECK_OK(qtk_scheme_parse("q2f,store=packed", &s));
    uint8_t c[8] = {0xfe, 0x01, 0xff, 0x00, 0, 0, 0x80, 0x3f};
    CHECK_OK(qtk_bytes_check(c, 8, shape, 1, &s));
    c[0] = 0x02; /* the raw crumb of -2 */
    CHECK_ERR(qtk_bytes_check(c, 8, shape, 1, &s), QTK_E_VALUE, "is 0x02, which is not a 2-bit signed field");
    /* lookup indices and e4m3 codes in packed stores are not integers: only their width counts */
    CHECK_OK(qtk_scheme_parse("q4f,table=nf4,store=packed", &s));
    uint8_t d[8 + 64] = {0x0f, 0x00, 0x07, 0x08, 0, 0, 0x80, 0x3f};
    float tab[16];
    size_t nt = 0;
    CHECK_OK(qtk_table_get("nf4", tab, 16, &nt));
    memcpy(d + 8, tab, sizeof tab);
    CHECK_OK(qtk_bytes_check(d, sizeof d, shape, 1, &s));
    d[0] = 0xff;
    CHECK_ERR(qtk_bytes_check(d, sizeof d, shape, 1, &s), QTK_E_VALUE, "is 0xff, which is not a 4-bit field");
}

/* Matmul on every store of the integer values, both layouts, both precisions, every level,
 * against an f64 product of the dequantized weights, within the bounds of qtk_matmul.h (fast:
 * with the activation rounding of blocks of 16, the weights' block length). */
static void every_store(void) {
    const char *values[] = {"q8s", "q4f", "q4s", "q2f", "q2s"};
    const char *stores[] = {"native", "packed", "packed:1", "u32:0", "u32:1"};
    const size_t M = 3, N = 9, K = 70;
    uint64_t seed = 17;
    float *w = malloc(N * K * sizeof(float)), *x = malloc(M * K * sizeof(float));
    float *y = malloc(M * N * sizeof(float)), *wd = malloc(N * K * sizeof(float));
    for (size_t i = 0; i < N * K; i++) w[i] = trand_normal(&seed);
    for (size_t i = 0; i < M * K; i++) x[i] = trand_normal(&seed);
    for (size_t vi = 0; vi < sizeof values / sizeof values[0]; vi++)
        for (int lay = 0; lay < 2; lay++) {
            size_t shape[2] = {lay ? K : N, lay ? N : K};
            for (size_t si = 0; si < sizeof stores / sizeof stores[0]; si++) {
                char spec[64];
                snprintf(spec, sizeof spec, "%s,block=16:f16,store=%s", values[vi], stores[si]);
                qtk_scheme s;
                CHECK_OK(qtk_scheme_parse(spec, &s));
                qtk_tensor *t = NULL;
                CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
                if (!t) continue;
                CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, wd, N * K));
                for (size_t li = 0; li < N_LEVELS; li++) {
                    if (qtk_set_isa(LEVELS[li]) != QTK_OK) continue;
                    for (int prec = 0; prec < 2; prec++) {
                        qtk_matmul_options o = {(qtk_mm_layout)lay, (qtk_precision)prec, 2};
                        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, M, K, NULL, y, N, &o));
                        size_t bad = 0;
                        for (size_t m = 0; m < M; m++)
                            for (size_t n = 0; n < N; n++) {
                                double acc = 0, sa = 0, eq = 0;
                                for (size_t k = 0; k < K; k++) {
                                    double wv = lay ? wd[k * N + n] : wd[n * K + k], p = (double)x[m * K + k] * wv;
                                    acc += p;
                                    sa += fabs(p);
                                }
                                for (size_t b0 = 0; b0 < K; b0 += 16) { /* E_q */
                                    float amax = 0;
                                    double sw = 0;
                                    for (size_t k = b0; k < K && k < b0 + 16; k++) {
                                        amax = fabsf(x[m * K + k]) > amax ? fabsf(x[m * K + k]) : amax;
                                        sw += fabs(lay ? wd[k * N + n] : wd[n * K + k]);
                                    }
                                    eq += (double)(amax / 127.0f) / 2.0 * sw * (1.0 + 0x1p-8);
                                }
                                double g = (K + 4) * 0x1p-24 / (1 - (K + 4) * 0x1p-24);
                                bool integer = prec && lay == 0 && si != 4; /* u32:1 packs across rows */
                                double tol = integer ? eq + g * (sa + 2 * eq) : g * sa;
                                if (!(fabs(y[m * N + n] - acc) <= tol)) bad++;
                            }
                        CHECK_MSG(bad == 0, "%s %s isa %s %s: %zu outputs off", spec, lay ? "kn" : "nk",
                                  qtk_isa_name(LEVELS[li]), prec ? "fast" : "exact", bad);
                    }
                }
                qtk_set_isa(QTK_ISA_AUTO);
                qtk_tensor_free(t);
            }
        }
    free(w);
    free(x);
    free(y);
    free(wd);
}

/* Rows shorter than a vector in one-field-per-byte stores (the kernels' tail loads, where a
 * pointer before a local buffer was once formed: clang's -fsanitize=array-bounds caught it
 * on q2f,block=64:f32,store=native of shape [40]): every level gives the reference's bytes
 * and values. */
static void byte_store_tails(void) {
    const char *specs[] = {"q2f,block=64:f32,store=native", "q2f,block=64:f32,store=packed", "q4s,block=8:f16,store=native",
                           "q8s,block=64:f32,store=native", "e4m3,block=64:f32,store=native", "q4f,table=nf4,block=64:f32,store=packed"};
    const size_t lens[] = {1, 3, 7, 13, 40};
    uint64_t seed = 9;
    float x[40], ref[40], got[40];
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t shape[1] = {lens[li]};
            for (size_t i = 0; i < lens[li]; i++) x[i] = trand_normal(&seed);
            qtk_scheme s;
            CHECK_OK(qtk_scheme_parse(specs[si], &s));
            qtk_set_isa(QTK_ISA_SCALAR);
            qtk_tensor *t0 = NULL;
            CHECK_OK(qtk_quantize(x, shape, 1, &s, NULL, &t0));
            if (t0) CHECK_OK(qtk_dequantize(t0, QTK_DTYPE_F32, ref, lens[li]));
            for (size_t v = 1; v < N_LEVELS && t0; v++) {
                if (qtk_set_isa(LEVELS[v]) != QTK_OK) continue;
                qtk_tensor *t = NULL;
                CHECK_OK(qtk_quantize(x, shape, 1, &s, NULL, &t));
                if (!t) continue;
                size_t l0, l1;
                const uint8_t *b0 = qtk_tensor_bytes(t0, &l0), *b1 = qtk_tensor_bytes(t, &l1);
                CHECK_MSG(l0 == l1 && memcmp(b0, b1, l0) == 0, "%s [%zu] isa %s: bytes differ from the reference", specs[si],
                          lens[li], qtk_isa_name(LEVELS[v]));
                CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, got, lens[li]));
                CHECK_MSG(memcmp(got, ref, lens[li] * sizeof(float)) == 0, "%s [%zu] isa %s: values differ", specs[si],
                          lens[li], qtk_isa_name(LEVELS[v]));
                qtk_tensor_free(t);
            }
            qtk_set_isa(QTK_ISA_AUTO);
            qtk_tensor_free(t0);
        }
}

TEST_MAIN("matmul_store", T(issue12_reproducer), T(packed_bytes_are_native), T(packed_bytes_checked), T(every_store), T(byte_store_tails))
