/* test_formats.c — the scalar number formats, exhaustively: every code of every 4/8-bit
 * format and every f16/bf16 code decodes to the exact value and re-encodes to itself;
 * midpoints between neighbours round to the even code; the round-up rule never lands
 * below its input and never skips a code. */
#include "oracle.h"
#include "test.h"

static const qtk_dtype small_formats[] = {QTK_DTYPE_E4M3, QTK_DTYPE_E5M2, QTK_DTYPE_E2M1, QTK_DTYPE_UE8M0,
                                          QTK_DTYPE_UE4M3};

static uint32_t ncodes(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_E2M1: return 16;
    case QTK_DTYPE_UE4M3: return 128;
    case QTK_DTYPE_F16:
    case QTK_DTYPE_BF16: return 65536;
    default: return 256;
    }
}

static int is_nan_code(qtk_dtype d, uint32_t c) { return isnan(oracle_decode(d, c)); }

static void every_code_decodes_exactly_and_reencodes(void) {
    const qtk_dtype all[] = {QTK_DTYPE_E4M3, QTK_DTYPE_E5M2, QTK_DTYPE_E2M1, QTK_DTYPE_UE8M0,
                             QTK_DTYPE_UE4M3, QTK_DTYPE_F16, QTK_DTYPE_BF16};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        qtk_dtype d = all[k];
        for (uint32_t c = 0; c < ncodes(d); c++) {
            double want = oracle_decode(d, c);
            float got = qtk_fmt_decode(d, c);
            if (isnan(want)) {
                CHECK_MSG(isnan(got), "%s code 0x%x should decode to NaN", qtk_dtype_name(d), c);
                CHECK_MSG(is_nan_code(d, qtk_fmt_encode(d, got)), "%s NaN re-encodes to a non-NaN code", qtk_dtype_name(d));
                continue;
            }
            CHECK_MSG((double)got == want && !!signbit(got) == !!signbit(want), "%s code 0x%x decodes to %.9g, expected %.9g",
                      qtk_dtype_name(d), c, (double)got, want);
            CHECK_MSG(qtk_fmt_encode(d, got) == c, "%s code 0x%x: decode %.9g re-encodes to 0x%x", qtk_dtype_name(d), c,
                      (double)got, qtk_fmt_encode(d, got));
        }
    }
}

/* Known values, stated in the formats' definitions. */
static void known_values(void) {
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E4M3, 0x7e), 448.0f);
    CHECK(isnan(qtk_fmt_decode(QTK_DTYPE_E4M3, 0x7f)));
    CHECK(isnan(qtk_fmt_decode(QTK_DTYPE_E4M3, 0xff)));
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E4M3, 0x01), 0x1p-9f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E4M3, 0x08), 0x1p-6f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E4M3, 0x80), -0.0f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E5M2, 0x7b), 57344.0f);
    CHECK(isinf(qtk_fmt_decode(QTK_DTYPE_E5M2, 0x7c)));
    CHECK(isnan(qtk_fmt_decode(QTK_DTYPE_E5M2, 0x7d)));
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E5M2, 0x01), 0x1p-16f);
    const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (uint32_t c = 0; c < 8; c++) {
        CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E2M1, c), e2m1[c]);
        CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_E2M1, c | 8), -e2m1[c]);
    }
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_UE8M0, 127), 1.0f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_UE8M0, 0), 0x1p-127f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_UE8M0, 254), 0x1p127f);
    CHECK(isnan(qtk_fmt_decode(QTK_DTYPE_UE8M0, 255)));
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_UE4M3, 0x7e), 448.0f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_UE4M3, 0x01), 0x1p-9f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_F16, 0x3c00), 1.0f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_F16, 0x7bff), 65504.0f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_F16, 0x0001), 0x1p-24f);
    CHECK_BITS(qtk_fmt_decode(QTK_DTYPE_BF16, 0x3f80), 1.0f);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_F16, 1.0f), 0x3c00);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_F16, 65520.0f), 0x7c00);  /* rounds to inf */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_F16, 65519.99f), 0x7bff);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_BF16, 1.00390625f), 0x3f80); /* tie to even */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_BF16, 1.01171875f), 0x3f82); /* tie to even, up */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E4M3, 1000.0f), 0x7f);  /* beyond range: NaN code */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E4M3, 460.0f), 0x7e);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E5M2, 1e6f), 0x7c);     /* inf */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, 100.0f), 0x7);    /* saturates */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, -0.2f), 0x8);     /* -0 */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, -0.0f), 0x8);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E4M3, -0.0f), 0x80);
}

/* For every pair of adjacent finite codes: the exact midpoint goes to the even code, and
 * the f32 neighbours of the midpoint go to the nearer code. */
static void midpoints_round_to_even(void) {
    const qtk_dtype all[] = {QTK_DTYPE_E4M3, QTK_DTYPE_E5M2, QTK_DTYPE_E2M1, QTK_DTYPE_UE4M3, QTK_DTYPE_F16,
                             QTK_DTYPE_BF16};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        qtk_dtype d = all[k];
        uint32_t nmag = d == QTK_DTYPE_E2M1 ? 8 : d == QTK_DTYPE_F16 || d == QTK_DTYPE_BF16 ? 32768 : 128;
        for (uint32_t c = 0; c + 1 < nmag; c++) {
            double a = oracle_decode(d, c), b = oracle_decode(d, c + 1);
            if (!isfinite(a) || !isfinite(b)) continue;
            double mid = (a + b) / 2;
            float fm = (float)mid;
            if ((double)fm != mid) continue; /* bf16 midpoints beyond f32 precision: none in practice */
            uint32_t even = (c & 1) ? c + 1 : c;
            CHECK_MSG(qtk_fmt_encode(d, fm) == even, "%s midpoint %.9g of 0x%x/0x%x -> 0x%x, expected 0x%x",
                      qtk_dtype_name(d), mid, c, c + 1, qtk_fmt_encode(d, fm), even);
            if (d != QTK_DTYPE_UE4M3 && d != QTK_DTYPE_E2M1 && fm != 0.0f) {
                CHECK_MSG(qtk_fmt_encode(d, -fm) == (even | (d == QTK_DTYPE_F16 || d == QTK_DTYPE_BF16 ? 0x8000u : 0x80u)),
                          "%s negative midpoint of 0x%x", qtk_dtype_name(d), c);
            }
            float below = nextafterf(fm, 0.0f), above = nextafterf(fm, INFINITY);
            CHECK_MSG(qtk_fmt_encode(d, below) == c, "%s just below midpoint of 0x%x/0x%x", qtk_dtype_name(d), c, c + 1);
            CHECK_MSG(qtk_fmt_encode(d, above) == c + 1, "%s just above midpoint of 0x%x/0x%x", qtk_dtype_name(d), c,
                      c + 1);
        }
    }
    /* e2m1 through its sign bit */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, -2.5f), 0xc); /* between 2 (0x4) and 3 (0x5): even -> 2 */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, 5.0f), 0x6);  /* between 4 and 6: even -> 4 */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, 0.25f), 0x0); /* between 0 and 0.5: even -> 0 */
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_E2M1, 0.75f), 0x2); /* between 0.5 and 1: even -> 1 */
}

/* ue8m0 rounds to nearest power of two; ties (significand 1.5) go up. */
static void ue8m0_encode(void) {
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 1.0f), 127);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 1.49f), 127);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 1.5f), 128);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 0.0f), 0);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 0x1p-127f), 0);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 0x1p-126f), 1);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_UE8M0, 0x1.8p-127f), 1);
}

/* Round-up: equals the oracle's search for the smallest code >= |x| on random and
 * adversarial inputs; never below the input; saturates at the maximum. */
static void round_up_rule(void) {
    const qtk_dtype all[] = {QTK_DTYPE_F16, QTK_DTYPE_BF16, QTK_DTYPE_UE8M0, QTK_DTYPE_UE4M3, QTK_DTYPE_E4M3,
                             QTK_DTYPE_E5M2, QTK_DTYPE_E2M1};
    uint64_t seed = 7;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        qtk_dtype d = all[k];
        float mx = qtk_fmt_max(d);
        for (int i = 0; i < 20000; i++) {
            float x;
            int mode = i % 4;
            if (mode == 0) x = ldexpf(trand_uniform(&seed, 1.0f, 2.0f), (int)(trand_u64(&seed) % 300) - 150);
            else if (mode == 1) {
                /* a code's value, or one ulp either side */
                uint32_t c = (uint32_t)(trand_u64(&seed) % ncodes(d));
                double v = oracle_decode(d, c);
                if (!isfinite(v)) continue;
                x = (float)fabs(v);
                int s = (int)(trand_u64(&seed) % 3);
                if (s == 1) x = nextafterf(x, 0.0f);
                if (s == 2) x = nextafterf(x, INFINITY);
            } else if (mode == 2) x = trand_uniform(&seed, 0.0f, mx * 1.5f);
            else x = ldexpf(trand_uniform(&seed, 1.0f, 2.0f), -140 + (int)(trand_u64(&seed) % 20));
            if (!isfinite(x)) continue;
            uint32_t got = qtk_fmt_round_up(d, x), want = oracle_round_up(d, x);
            CHECK_MSG(got == want, "%s round_up(%.9g) = 0x%x, expected 0x%x", qtk_dtype_name(d), (double)x, got, want);
            double v = oracle_decode(d, got);
            CHECK_MSG(v >= (double)x || v == (double)mx, "%s round_up(%.9g) = %.9g is below the input", qtk_dtype_name(d),
                      (double)x, v);
            /* negative inputs round away from zero for signed formats */
            if (d != QTK_DTYPE_UE8M0 && d != QTK_DTYPE_UE4M3 && x > 0) {
                double vn = oracle_decode(d, qtk_fmt_round_up(d, -x));
                CHECK_MSG(vn == -v, "%s round_up(-%.9g) = %.9g, expected %.9g", qtk_dtype_name(d), (double)x, vn, -v);
            }
        }
        CHECK_MSG(oracle_decode(d, qtk_fmt_round_up(d, mx * 2.0f > mx ? mx * 2.0f : mx)) == mx, "%s saturates",
                  qtk_dtype_name(d));
        if (mx < 3.0e38f)
            CHECK_MSG(oracle_decode(d, qtk_fmt_round_up(d, 3.0e38f)) == mx, "%s saturates at 3e38", qtk_dtype_name(d));
        else
            CHECK_MSG(oracle_decode(d, qtk_fmt_round_up(d, 3.4e38f)) == mx, "%s saturates at 3.4e38", qtk_dtype_name(d));
    }
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE8M0, 0.0f), 0); /* 2^-127: ue8m0 has no zero */
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE4M3, 0.0f), 0);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_F16, 1e-30f), 1); /* smallest subnormal */
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE4M3, 1e-30f), 1);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE8M0, 3.0f), 129);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE8M0, 4.0f), 129);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE8M0, 1e38f), 254);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_F32, 0.1f), 0x3dcccccd);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_F16, 1.0f), 0x3c00);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_F16, 1.0001f), 0x3c01);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_F16, -1.0001f), 0xbc01);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_BF16, 1.0001f), 0x3f81);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_UE4M3, 449.0f), 0x7e);
    (void)small_formats;
}

/* Every f32 bit pattern in a dense sample goes to the oracle's nearest f16/bf16/fp8 code. */
static void encode_matches_oracle_on_sampled_f32(void) {
    uint64_t seed = 11;
    const qtk_dtype all[] = {QTK_DTYPE_E4M3, QTK_DTYPE_E5M2, QTK_DTYPE_E2M1, QTK_DTYPE_UE4M3};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        qtk_dtype d = all[k];
        float mx = qtk_fmt_max(d);
        for (int i = 0; i < 30000; i++) {
            float x = trand_uniform(&seed, -mx, mx);
            if (i % 3 == 0) x = ldexpf(x, -(int)(trand_u64(&seed) % 24));
            if (d == QTK_DTYPE_UE4M3) x = fabsf(x);
            uint32_t got = qtk_fmt_encode(d, x), want = oracle_encode_nearest(d, x);
            CHECK_MSG(got == want, "%s encode(%.9g) = 0x%x, expected 0x%x", qtk_dtype_name(d), (double)x, got, want);
        }
    }
    /* f16: every 97th f32 pattern in the finite range below 65504 */
    for (uint32_t u = 0; u < 0x477fe000u; u += 97) {
        float x;
        memcpy(&x, &u, 4);
        uint32_t got = qtk_fmt_encode(QTK_DTYPE_F16, x);
        double v = oracle_decode(QTK_DTYPE_F16, got);
        /* nearest: neither neighbour is strictly closer, and ties go to even */
        double lo = got > 0 ? oracle_decode(QTK_DTYPE_F16, got - 1) : -1, hi = oracle_decode(QTK_DTYPE_F16, got + 1);
        double dv = fabs(v - x);
        int ok = dv <= fabs(hi - x) && (got == 0 || dv <= fabs(lo - x));
        if (ok && dv == fabs(hi - x)) ok = (got & 1) == 0;
        if (ok && got > 0 && dv == fabs(lo - x)) ok = (got & 1) == 0;
        if (!ok) {
            CHECK_MSG(0, "f16 encode(%.9g) = 0x%x is not the nearest even code", (double)x, got);
            break;
        }
    }
    test_checks++;
}

TEST_MAIN("formats", T(every_code_decodes_exactly_and_reencodes), T(known_values), T(midpoints_round_to_even),
          T(ue8m0_encode), T(round_up_rule), T(encode_matches_oracle_on_sampled_f32))
