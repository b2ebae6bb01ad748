/* test_affine.c — qtk's extension (docs/affine.md): the spec grammar and validation of the new
 * values, the affine mode and store=ggml; ggml's block structs (unpack/pack bijective over
 * every bit pattern, values equal to an independent decoder of GGUF.md's formulas and to the
 * reference decoder of the offset types); their quantizers (mse never worse than minmax on any
 * block, importance weights pull the weighted error down, bytes the same for every thread
 * count and kernel level, every misuse refused by message); their bytes checked; conversion;
 * scales and offsets; their containers (burnpack's QtkQuant dtype, safetensors). */
#include "ckpt_util.h"
#include "gguf_ref_decode.h"

#include "gblock/gblock.h"
#include "kernels/cpu.h"

static const char *const PRESETS[] = {"q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
#define N_PRESETS (sizeof PRESETS / sizeof PRESETS[0])

static const qtk__gb_fmt *fmt_of(const char *preset) {
    qtk_scheme s;
    const qtk__gb_fmt *F = qtk_scheme_parse(preset, &s) == QTK_OK ? qtk__gb_fmt_of_scheme(&s) : NULL;
    if (!F) {
        fprintf(stderr, "no ggml format for %s\n", preset);
        abort();
    }
    return F;
}

/* ---- the grammar ---- */

static void spec_strings(void) {
    static const struct {
        const char *in, *canonical;
    } ok[] = {
        {"q4_k", "u4,block=32:u6,min=u6,super=256:f16,store=ggml"},
        {"Q6_K", "q6f,block=16:i8,super=256:f16,store=ggml"},
        {"q2_k", "u2,block=16:u4,min=u4,super=256:f16,store=ggml"},
        {"q3_k", "q3f,block=16:i6,super=256:f16,store=ggml"},
        {"q5_k", "u5,block=32:u6,min=u6,super=256:f16,store=ggml"},
        {"q4_1", "u4,block=32:f16,offset=f16,store=ggml"},
        {"q5_1", "u5,block=32:f16,offset=f16,store=ggml"},
        {"q5_0", "q5f,block=32:f16,store=ggml"},
        {"q8_0", "q8f,block=32:f16,store=native"},
        {"q4_0", "q4f,block=32:f16"},
        {"iq4_nl", "q4f,table=iq4nl,block=32:f16"},
        {"u4,block=32:f16,offset=f16", "u4,block=32:f16,offset=f16"},
        {"u4,offset=bf16,block=64:bf16,store=u32:0", "u4,block=64:bf16,offset=bf16"},
        {"u8,block=128:f16,zero=u8", "u8,block=128:f16,zero=u8"},
        {"u2,block=2x16:f32,min=f32,store=native", "u2,block=2x16:f32,min=f32,store=native"},
        {"u3,block=128:f16,zero=f16,store=packed", "u3,block=128:f16,zero=f16,store=packed:0"},
        {"u5,tensor=f16,offset=f16,store=native", "u5,offset=f16,tensor=f16,store=native"},
        {"q6f,block=16:f32,store=native", "q6f,block=16:f32,store=native"},
        {"q3f,block=16:f16,store=packed", "q3f,block=16:f16,store=packed:0"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        qtk_scheme s, back;
        char buf[160];
        CHECK_OK(qtk_scheme_parse(ok[i].in, &s));
        CHECK_OK(qtk_scheme_format(&s, buf, sizeof buf, NULL));
        CHECK_MSG(strcmp(buf, ok[i].canonical) == 0, "'%s' formats as '%s', expected '%s'", ok[i].in, buf, ok[i].canonical);
        CHECK_OK(qtk_scheme_parse(buf, &back));
        CHECK(qtk_scheme_equal(&s, &back));
    }
    /* the ggml presets are named; q8_0, q4_0 and iq4_nl parse but show their spec */
    qtk_scheme s;
    for (size_t i = 0; i < N_PRESETS; i++) {
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        const char *n = qtk_scheme_preset_name(&s);
        CHECK_MSG(n && strcmp(n, PRESETS[i]) == 0, "%s names itself %s", PRESETS[i], n ? n : "(null)");
        CHECK(s.store == QTK_STORE_GGML);
    }
    CHECK_OK(qtk_scheme_parse("q4_0", &s));
    CHECK(qtk_scheme_preset_name(&s) == NULL);
    /* the fields of a preset */
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    CHECK(s.value == QTK_VALUE_U4 && s.mode == QTK_MODE_AFFINE && s.offset == QTK_OFFSET_MIN && s.offset_dtype == QTK_DTYPE_U6);
    CHECK(s.block_rank == 1 && s.block[0] == 32 && s.block_dtype == QTK_DTYPE_U6 && s.super_block == 256 &&
          s.super_dtype == QTK_DTYPE_F16);
    CHECK_OK(qtk_scheme_parse("u4,block=32:f16,zero=u8", &s));
    CHECK(s.offset == QTK_OFFSET_ZERO && s.offset_dtype == QTK_DTYPE_U8);
    CHECK_EQ_U(qtk_value_bits(QTK_VALUE_U5), 5);
    CHECK(strcmp(qtk_value_name(QTK_VALUE_Q3F), "q3f") == 0);
    CHECK_EQ_U(qtk_dtype_bits(QTK_DTYPE_U6), 6);
    CHECK(qtk_fmt_decode(QTK_DTYPE_I6, 0x3f) == -1.0f && qtk_fmt_decode(QTK_DTYPE_I6, 0x20) == -32.0f);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_U4, 16.7f), 15);
    CHECK_EQ_U(qtk_fmt_encode(QTK_DTYPE_U6, 2.5f), 2);     /* ties to even */
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_U6, 2.01f), 3);
    CHECK_EQ_U(qtk_fmt_round_up(QTK_DTYPE_I8, -2.5f), (uint8_t)-3); /* magnitude up, sign kept */
}

static void spec_errors(void) {
    qtk_scheme s;
    CHECK_ERR(qtk_scheme_parse("u4,block=32:f16", &s), QTK_E_SCHEME, "u4 is an unsigned value: it needs an offset");
    CHECK_ERR(qtk_scheme_parse("q4f,block=32:f16,min=f16", &s), QTK_E_SCHEME, "takes unsigned values");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:f16,min=f16,offset=f16", &s), QTK_E_PARSE, "a second offset");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:f16,min=u8", &s), QTK_E_SCHEME, "u8 is for zero= points");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:f16,min=e4m3", &s), QTK_E_PARSE, "'e4m3' is not a scale dtype");
    CHECK_ERR(qtk_scheme_parse("u4,table=nf4,block=32:f16,min=f16", &s), QTK_E_PARSE, "do not combine");
    CHECK_ERR(qtk_scheme_parse("u4,block=16:f16,tensor=f32,min=f16", &s), QTK_E_SCHEME, "one scale level");
    CHECK_ERR(qtk_scheme_parse("q5f,block=32:f16", &s), QTK_E_SCHEME, "5-bit fields (q5f) have no u32 packing");
    CHECK_ERR(qtk_scheme_parse("q5f,table=nf4,block=32:f16,store=native", &s), QTK_E_SCHEME, "cannot index one");
    CHECK_ERR(qtk_scheme_parse("q8f,block=32:u6", &s), QTK_E_SCHEME, "integer block scales exist only under super=");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:u6,min=u6,super=256:f16", &s), QTK_E_SCHEME, "integer block scales exist only under super=");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:f16,min=f16,super=256:f16", &s), QTK_E_SCHEME, "super= exists only in ggml's packings");
    CHECK_ERR(qtk_scheme_parse("u4,block=32:u6,min=u6,super=128:f16,store=ggml", &s), QTK_E_SCHEME,
              "store=ggml holds ggml's block structs, which are exactly");
    CHECK_ERR(qtk_scheme_parse("q4f,block=32:f16,store=ggml", &s), QTK_E_SCHEME, "q4_k = u4,block=32:u6,min=u6,super=256:f16");
    CHECK_ERR(qtk_scheme_parse("q4_k,store=native", &s), QTK_E_PARSE, "preset 'q4_k' takes no options");
    CHECK_ERR(qtk_scheme_parse("q8f,super=256", &s), QTK_E_PARSE, "needs a scale dtype");
    CHECK_ERR(qtk_scheme_parse("q8f,super=0:f16", &s), QTK_E_PARSE, "super-block '0'");
    CHECK_ERR(qtk_scheme_parse("q8f,store=ggml:1", &s), QTK_E_PARSE, "store=ggml has no pack dimension");
    /* hand-made structs */
    qtk_scheme b = {0};
    b.mode = QTK_MODE_AFFINE;
    b.value = QTK_VALUE_U4;
    b.offset_dtype = QTK_DTYPE_F16;
    b.offset = (qtk_offset)7;
    CHECK_ERR(qtk_scheme_validate(&b), QTK_E_SCHEME, "is not a qtk_offset");
    b = (qtk_scheme){0};
    b.offset_dtype = QTK_DTYPE_F16;
    CHECK_ERR(qtk_scheme_validate(&b), QTK_E_SCHEME, "but the mode is not affine");
}

static void layouts(void) {
    qtk_scheme s;
    qtk_layout L;
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    size_t sh[2] = {4, 512};
    CHECK_OK(qtk_layout_compute(&s, sh, 2, &L));
    CHECK_EQ_U(L.total_bytes, 4 * 2 * 144);
    CHECK_EQ_U(L.value_bytes, L.total_bytes);
    CHECK_EQ_U(L.n_scales, 4 * 16);
    CHECK_EQ_U(L.scale_bytes, 0);
    CHECK_EQ_U(L.unit_bytes, 144);
    CHECK_EQ_U(L.fields_per_unit, 256);
    CHECK(qtk_layout_bits_per_element(&L) == 4.5);
    size_t bad[2] = {4, 320};
    CHECK_ERR(qtk_layout_compute(&s, bad, 2, &L), QTK_E_SHAPE, "has 320 there, not a multiple of 256");
    CHECK_ERR(qtk_layout_compute(&s, NULL, 0, &L), QTK_E_SHAPE, "needs a tensor of rank 1 or more");
    size_t one[1] = {768};
    CHECK_OK(qtk_layout_compute(&s, one, 1, &L));
    CHECK_EQ_U(L.total_bytes, 3 * 144);
    for (size_t i = 0; i < N_PRESETS; i++) {
        const qtk__gb_fmt *F = fmt_of(PRESETS[i]);
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        size_t s3[3] = {2, 3, 512};
        CHECK_OK(qtk_layout_compute(&s, s3, 3, &L));
        CHECK_EQ_U(L.total_bytes, 6 * (512 / F->qk) * F->bytes);
        CHECK_EQ_U(L.n_scales, 6 * 512 / F->sub);
    }
    /* the affine mode's offsets region: [values][scales][offsets] */
    CHECK_OK(qtk_scheme_parse("u4,block=32:f16,offset=bf16", &s));
    size_t s2[2] = {3, 70};
    CHECK_OK(qtk_layout_compute(&s, s2, 2, &L));
    CHECK_EQ_U(L.value_bytes, 3 * 9 * 4);
    CHECK_EQ_U(L.n_scales, 9);
    CHECK_EQ_U(L.scale_bytes, 18);
    CHECK_EQ_U(L.offset_bytes, 18);
    CHECK_EQ_U(L.offsets_offset, 108 + 18);
    CHECK_EQ_U(L.total_bytes, 108 + 36);
    CHECK_OK(qtk_scheme_parse("u8,block=64:f16,zero=u8", &s));
    CHECK_OK(qtk_layout_compute(&s, s2, 2, &L));
    CHECK_EQ_U(L.offset_bytes, 6);
}

/* ---- ggml's structs ---- */

static void random_block(const qtk__gb_fmt *F, uint64_t *seed, uint8_t *b) {
    for (unsigned i = 0; i < F->bytes; i++) b[i] = (uint8_t)trand_u64(seed);
    /* finite f16 d (and m/dmin): clear one exponent bit */
    size_t d_at = F->f == QTK__GF_Q2_K ? 80 : F->f == QTK__GF_Q3_K ? 108 : F->f == QTK__GF_Q6_K ? 208 : 0;
    b[d_at + 1] &= 0xbf;
    if (F->affine) b[d_at + 3] &= 0xbf;
}

/* every bit pattern: pack(unpack(b)) == b, and unpack(pack(u)) == u for u in range */
static void bijection(void) {
    uint64_t seed = 7;
    for (size_t i = 0; i < N_PRESETS; i++) {
        const qtk__gb_fmt *F = fmt_of(PRESETS[i]);
        uint8_t b[256], c[256];
        size_t bad = 0;
        for (int k = 0; k < 2000; k++) {
            for (unsigned j = 0; j < F->bytes; j++) b[j] = (uint8_t)trand_u64(&seed); /* any bits */
            qtk__gb_unpacked u, v;
            qtk__gb_unpack(F, b, &u);
            for (unsigned e = 0; e < F->qk; e++) bad += u.q[e] < F->qlo || u.q[e] > F->qhi;
            for (unsigned g = 0; F->super && g < F->groups; g++)
                bad += u.sc[g] < F->sclo || u.sc[g] > F->schi || u.mn[g] > F->mnhi;
            qtk__gb_pack(F, &u, c);
            bad += memcmp(b, c, F->bytes) != 0;
            /* the other way, from random in-range parts */
            memset(&u, 0, sizeof u);
            u.d = (uint16_t)trand_u64(&seed);
            if (F->affine) u.m = (uint16_t)trand_u64(&seed);
            for (unsigned e = 0; e < F->qk; e++) u.q[e] = (int8_t)(F->qlo + (int)(trand_u64(&seed) % (uint64_t)(F->qhi - F->qlo + 1)));
            for (unsigned g = 0; F->super && g < F->groups; g++) {
                u.sc[g] = (int8_t)(F->sclo + (int)(trand_u64(&seed) % (uint64_t)(F->schi - F->sclo + 1)));
                if (F->affine) u.mn[g] = (uint8_t)(trand_u64(&seed) % (uint64_t)(F->mnhi + 1));
            }
            qtk__gb_pack(F, &u, c);
            qtk__gb_unpack(F, c, &v);
            bad += u.d != v.d || u.m != v.m || memcmp(u.q, v.q, F->qk) != 0 || memcmp(u.sc, v.sc, sizeof u.sc) != 0 ||
                   memcmp(u.mn, v.mn, sizeof u.mn) != 0;
        }
        CHECK_MSG(bad == 0, "%s: %zu mismatches", PRESETS[i], bad);
    }
}

/* GGUF.md §2.6-2.7 and §2.15 written out again, element by element, for the symmetric types */
static float oracle_value(qtk__gfmt f, const uint8_t *b, unsigned e) {
    float d;
    int q;
    switch (f) {
    case QTK__GF_Q5_0: {
        d = qtk_fmt_decode(QTK_DTYPE_F16, (uint32_t)(b[0] | b[1] << 8));
        uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        int lo = e < 16 ? b[6 + e] & 15 : b[6 + e - 16] >> 4;
        q = (lo | (int)((qh >> e) & 1) << 4) - 16;
        return (float)q * d;
    }
    case QTK__GF_Q3_K: {
        d = qtk_fmt_decode(QTK_DTYPE_F16, (uint32_t)(b[108] | b[109] << 8));
        unsigned h = e / 128, j = (e / 32) % 4, l = e % 32, s = e / 16;
        int low2 = (b[32 + 32 * h + l] >> (2 * j)) & 3, hb = (b[l] >> (e / 32)) & 1;
        q = low2 - (hb ? 0 : 4);
        int S = (s < 8 ? b[96 + s] & 15 : b[96 + s - 8] >> 4) | ((b[96 + 8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
        float dl = d * (float)(S - 32);
        return dl * (float)q;
    }
    default: { /* Q6_K */
        d = qtk_fmt_decode(QTK_DTYPE_F16, (uint32_t)(b[208] | b[209] << 8));
        unsigned h = e / 128, g = (e / 32) % 4, l = e % 32;
        int lo4 = (b[64 * h + 32 * (g & 1) + l] >> (g < 2 ? 0 : 4)) & 15, hi2 = (b[128 + 32 * h + l] >> (2 * g)) & 3;
        q = (lo4 | hi2 << 4) - 32;
        float dl = d * (float)(int8_t)b[192 + e / 16];
        return dl * (float)q;
    }
    }
}

static void values(void) {
    uint64_t seed = 11;
    static const uint32_t ref_id[] = {3, 0, 7, 10, 0, 12, 13, 0}; /* the reference decoder's types */
    for (size_t i = 0; i < N_PRESETS; i++) {
        const qtk__gb_fmt *F = fmt_of(PRESETS[i]);
        enum { NB = 64 };
        uint8_t *b = malloc(NB * F->bytes);
        for (int k = 0; k < NB; k++) random_block(F, &seed, b + k * F->bytes);
        size_t n = NB * F->qk, bad = 0;
        float *y = malloc(n * 4), *r = malloc(n * 4);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        size_t sh[2] = {NB * F->qk / 256 ? NB * F->qk / 256 : 1, 256};
        if (F->qk == 32) sh[0] = NB / 8;
        CHECK_OK(qtk_dequantize_bytes(b, NB * F->bytes, sh, 2, &s, QTK_DTYPE_F32, y, n));
        if (ref_id[i]) {
            CHECK_OK(test_gguf_ref_decode(ref_id[i], b, NB, r, 0));
        } else {
            for (size_t e = 0; e < n; e++) r[e] = oracle_value(F->f, b + (e / F->qk) * F->bytes, (unsigned)(e % F->qk));
        }
        for (size_t e = 0; e < n; e++) bad += memcmp(&y[e], &r[e], 4) != 0;
        CHECK_MSG(bad == 0, "%s: %zu of %zu values differ from the independent decoder", PRESETS[i], bad, n);
        /* f16 and bf16 outputs are the f32 values rounded */
        uint16_t *h = malloc(n * 2);
        CHECK_OK(qtk_dequantize_bytes(b, NB * F->bytes, sh, 2, &s, QTK_DTYPE_F16, h, n));
        bad = 0;
        for (size_t e = 0; e < n; e++) bad += h[e] != (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, y[e]);
        CHECK_EQ_U(bad, 0);
        CHECK_OK(qtk_dequantize_bytes(b, NB * F->bytes, sh, 2, &s, QTK_DTYPE_BF16, h, n));
        bad = 0;
        for (size_t e = 0; e < n; e++) bad += h[e] != (uint16_t)qtk_fmt_encode(QTK_DTYPE_BF16, y[e]);
        CHECK_EQ_U(bad, 0);
        free(h);
        free(b);
        free(y);
        free(r);
    }
}

static void bytes_checks(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    size_t sh[2] = {2, 512};
    uint8_t b[4 * 144] = {0};
    CHECK_OK(qtk_bytes_check(b, sizeof b, sh, 2, &s));
    CHECK_ERR(qtk_bytes_check(b, sizeof b - 1, sh, 2, &s), QTK_E_LENGTH, "takes exactly 576 bytes (4 ggml Q4_K blocks of 144); got 575");
    b[3 * 144 + 3] = 0x7c; /* dmin of block 3 = inf */
    CHECK_ERR(qtk_bytes_check(b, sizeof b, sh, 2, &s), QTK_E_VALUE, "Q4_K block 3 (row 1, block 1 of the row; byte 432): dmin is not finite");
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_tensor_from_bytes(b, sizeof b, sh, 2, &s, &t), QTK_E_VALUE, "dmin is not finite");
    CHECK(t == NULL);
    float y[1024];
    CHECK_ERR(qtk_dequantize_bytes(b, sizeof b, sh, 2, &s, QTK_DTYPE_F32, y, 1024), QTK_E_VALUE, "dmin is not finite");
    b[3 * 144 + 3] = 0;
    b[1] = 0x7e; /* d of block 0: NaN */
    CHECK_ERR(qtk_bytes_check(b, sizeof b, sh, 2, &s), QTK_E_VALUE, "block 0 (row 0, block 0 of the row; byte 0): d is not finite");
    CHECK_OK(qtk_scheme_parse("q4_1", &s));
    uint8_t c[20] = {0};
    size_t s1[1] = {32};
    c[3] = 0xfc;
    CHECK_ERR(qtk_bytes_check(c, sizeof c, s1, 1, &s), QTK_E_VALUE, "Q4_1 block 0 (row 0, block 0 of the row; byte 0): m is not finite");
}

/* ---- quantizing ---- */

static float *data(size_t n, uint64_t seed, int style) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        float v = trand_normal(&seed);
        switch (style) {
        case 0: break;                                     /* Gaussian */
        case 1: v = v * v * v; break;                      /* heavy tails */
        case 2: v = fabsf(v) + 0.5f; break;                /* all positive, offset */
        case 3: v = i % 37 == 0 ? 20.0f * v : v; break;    /* outlier columns */
        case 4: v = (i / 256) % 3 == 0 ? 0.0f : v * 1e-6f; break; /* zero and tiny blocks */
        default: v = -fabsf(v) - 2.0f; break;              /* all negative */
        }
        x[i] = v;
    }
    return x;
}

static double block_err(const float *x, const float *y, const float *w, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e += (double)(w ? w[i] : 1.0f) * ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    return e;
}

static void mse_never_worse(void) {
    enum { R = 8, C = 512 };
    for (size_t i = 0; i < N_PRESETS; i++) {
        const qtk__gb_fmt *F = fmt_of(PRESETS[i]);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        for (int style = 0; style < 6; style++)
            for (int wk = 0; wk < 2; wk++) {
                float *x = data(R * C, 100 + (uint64_t)style, style), *w = wk ? data(C, 5, 2) : NULL;
                size_t sh[2] = {R, C};
                qtk_quantize_options om = {.calibration = QTK_CALIB_MINMAX}, oe = {.calibration = QTK_CALIB_MSE, .weights = w,
                                                                                    .n_weights = w ? C : 0};
                qtk_tensor *a = NULL, *b = NULL;
                CHECK_OK(qtk_quantize(x, sh, 2, &s, &om, &a));
                CHECK_OK(qtk_quantize(x, sh, 2, &s, &oe, &b));
                if (a && b) {
                    float *ya = malloc(R * C * 4), *yb = malloc(R * C * 4);
                    CHECK_OK(qtk_dequantize(a, QTK_DTYPE_F32, ya, R * C));
                    CHECK_OK(qtk_dequantize(b, QTK_DTYPE_F32, yb, R * C));
                    size_t worse = 0;
                    double ta = 0, tb = 0;
                    for (size_t k = 0; k < R * C; k += F->qk) {
                        const float *wb = w ? w + k % C : NULL;
                        double ea = block_err(x + k, ya + k, wb, F->qk), eb = block_err(x + k, yb + k, wb, F->qk);
                        worse += eb > ea * (1 + 1e-6) + 1e-30;
                        ta += ea, tb += eb;
                    }
                    CHECK_MSG(worse == 0, "%s style %d weights %d: mse worse than minmax on %zu blocks", PRESETS[i], style, wk, worse);
                    /* and a real gain where there is something to gain */
                    if (style != 4) CHECK_MSG(tb < ta, "%s style %d: mse %g, minmax %g", PRESETS[i], style, tb, ta);
                    CHECK_OK(qtk_bytes_check(qtk_tensor_bytes(b, NULL), qtk_tensor_layout(b)->total_bytes, sh, 2, &s));
                    free(ya);
                    free(yb);
                }
                qtk_tensor_free(a);
                qtk_tensor_free(b);
                free(x);
                free(w);
            }
    }
}

/* a heavily weighted column's error shrinks, and per-column weights equal their expansion */
static void weights(void) {
    enum { R = 16, C = 256 };
    float *x = data(R * C, 9, 0), col[C], full[R * C];
    for (int j = 0; j < C; j++) col[j] = j == 17 ? 1000.0f : 1.0f;
    for (int k = 0; k < R * C; k++) full[k] = col[k % C];
    size_t sh[2] = {R, C};
    for (size_t i = 0; i < N_PRESETS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        qtk_quantize_options o0 = {.calibration = QTK_CALIB_MSE}, o1 = o0, o2 = o0;
        o1.weights = col, o1.n_weights = C;
        o2.weights = full, o2.n_weights = R * C;
        qtk_tensor *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(qtk_quantize(x, sh, 2, &s, &o0, &a));
        CHECK_OK(qtk_quantize(x, sh, 2, &s, &o1, &b));
        CHECK_OK(qtk_quantize(x, sh, 2, &s, &o2, &c));
        if (!a || !b || !c) continue;
        size_t n;
        const uint8_t *bb = qtk_tensor_bytes(b, &n), *cb = qtk_tensor_bytes(c, NULL);
        CHECK_MSG(memcmp(bb, cb, n) == 0, "%s: per-column weights differ from their expansion", PRESETS[i]);
        float ya[R * C], yb[R * C];
        qtk_dequantize(a, QTK_DTYPE_F32, ya, R * C);
        qtk_dequantize(b, QTK_DTYPE_F32, yb, R * C);
        double ea = 0, eb = 0;
        for (int r = 0; r < R; r++) {
            ea += (x[r * C + 17] - ya[r * C + 17]) * (double)(x[r * C + 17] - ya[r * C + 17]);
            eb += (x[r * C + 17] - yb[r * C + 17]) * (double)(x[r * C + 17] - yb[r * C + 17]);
        }
        CHECK_MSG(eb < ea, "%s: the weighted column's error %g is not below the unweighted %g", PRESETS[i], eb, ea);
        qtk_tensor_free(a);
        qtk_tensor_free(b);
        qtk_tensor_free(c);
    }
    free(x);
}

/* the same bytes for every thread count and every kernel level */
static void invariance(void) {
    enum { R = 24, C = 1024 };
    float *x = data(R * C, 77, 1);
    size_t sh[2] = {R, C};
    static const qtk_isa isas[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    for (size_t i = 0; i < N_PRESETS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        for (int cal = 0; cal < 2; cal++) {
            uint8_t *first = NULL;
            size_t n = 0;
            float *y0 = malloc(R * C * 4), *y = malloc(R * C * 4);
            for (size_t li = 0; li < sizeof isas / sizeof isas[0]; li++) {
                if (qtk_set_isa(isas[li]) != QTK_OK) {
                    qtk_clear_error();
                    continue;
                }
                for (int th = 1; th <= 3; th++) {
                    qtk_quantize_options o = {.calibration = cal ? QTK_CALIB_MSE : QTK_CALIB_MINMAX, .threads = th};
                    qtk_tensor *t = NULL;
                    CHECK_OK(qtk_quantize(x, sh, 2, &s, &o, &t));
                    if (!t) continue;
                    const uint8_t *b = qtk_tensor_bytes(t, &n);
                    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, R * C));
                    if (!first) {
                        first = malloc(n);
                        memcpy(first, b, n);
                        memcpy(y0, y, R * C * 4);
                    } else {
                        CHECK_MSG(memcmp(first, b, n) == 0, "%s %s: bytes differ at level %s, %d threads", PRESETS[i],
                                  cal ? "mse" : "minmax", qtk_isa_name(isas[li]), th);
                        CHECK_MSG(memcmp(y0, y, R * C * 4) == 0, "%s: values differ at level %s", PRESETS[i], qtk_isa_name(isas[li]));
                    }
                    qtk_tensor_free(t);
                }
            }
            qtk_set_isa(QTK_ISA_AUTO);
            free(first);
            free(y0);
            free(y);
        }
    }
    free(x);
}

static void quantize_errors(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    float x[512] = {0}, sc[16] = {1};
    size_t sh[2] = {2, 256}, bad[2] = {2, 200};
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_quantize(x, bad, 2, &s, NULL, &t), QTK_E_SHAPE, "not a multiple of 256");
    qtk_quantize_options o = {.scales = sc, .n_scales = 16};
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_UNSUPPORTED, "takes no caller-given scales");
    o = (qtk_quantize_options){.calibration = QTK_CALIB_ABSMEAN};
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_SCHEME, "absmean calibration is not defined for q4_k");
    o = (qtk_quantize_options){.weights = sc, .n_weights = 256};
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_ARG, "used by calibration mse only");
    o = (qtk_quantize_options){.calibration = QTK_CALIB_MSE, .weights = sc, .n_weights = 16};
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_LENGTH, "16 importance weights given for a tensor of shape 2x256");
    float neg[256];
    for (int i = 0; i < 256; i++) neg[i] = i == 3 ? -1.0f : 1.0f;
    o.weights = neg, o.n_weights = 256;
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_VALUE, "importance weight 3 is -1");
    x[300] = NAN;
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, NULL, &t), QTK_E_VALUE, "input value 300 is not finite");
    CHECK(t == NULL);
    x[300] = 0;
    uint8_t dst[2 * 144];
    CHECK_ERR(qtk_quantize_into(x, sh, 2, &s, NULL, dst, sizeof dst - 1), QTK_E_LENGTH, "needs exactly 288");
    CHECK_OK(qtk_quantize_into(x, sh, 2, &s, NULL, dst, sizeof dst));
}

/* a constant, a zero and a tiny block: exact or nearly so, never non-finite */
static void edge_blocks(void) {
    for (size_t i = 0; i < N_PRESETS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        float x[768];
        for (int k = 0; k < 256; k++) x[k] = 0.0f, x[256 + k] = 1e-30f * (float)(k % 7), x[512 + k] = 3.0f;
        size_t sh[1] = {768};
        for (int cal = 0; cal < 2; cal++) {
            qtk_quantize_options o = {.calibration = cal ? QTK_CALIB_MSE : QTK_CALIB_MINMAX};
            qtk_tensor *t = NULL;
            CHECK_OK(qtk_quantize(x, sh, 1, &s, &o, &t));
            float y[768];
            if (t && qtk_dequantize(t, QTK_DTYPE_F32, y, 768) == QTK_OK) {
                bool zero_ok = true, finite = true;
                for (int k = 0; k < 256; k++) zero_ok = zero_ok && y[k] == 0.0f;
                for (int k = 0; k < 768; k++) finite = finite && isfinite(y[k]);
                CHECK_MSG(zero_ok && finite, "%s: zeros %d finite %d", PRESETS[i], zero_ok, finite);
                double e = 0;
                for (int k = 512; k < 768; k++) e += fabs(y[k] - 3.0);
                /* minmax maps 3 onto the middle of the range's asymmetric end (q3f: 3.5, clamped to
                 * 3: 14 % off, as SPEC's minmax does for q4f); mse finds the exact scale */
                CHECK_MSG(e / 256 < (cal ? 3e-3 : 0.45), "%s %s: a constant block of 3 is off by %g on average", PRESETS[i],
                          cal ? "mse" : "minmax", e / 256);
            }
            qtk_tensor_free(t);
        }
    }
}

static void scales_offsets(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    const qtk__gb_fmt *F = fmt_of("q4_k");
    uint64_t seed = 3;
    uint8_t b[2 * 144];
    random_block(F, &seed, b);
    random_block(F, &seed, b + 144);
    size_t sh[1] = {512};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_tensor_from_bytes(b, sizeof b, sh, 1, &s, &t));
    float sc[16], of[16];
    CHECK_OK(qtk_tensor_scales(t, sc, 16));
    CHECK_OK(qtk_tensor_offsets(t, of, 16));
    CHECK_ERR(qtk_tensor_offsets(t, of, 15), QTK_E_LENGTH, "room for 15 offsets; the tensor has 16");
    qtk__gb_unpacked u;
    qtk__gb_unpack(F, b + 144, &u);
    float d = qtk_fmt_decode(QTK_DTYPE_F16, u.d), dm = qtk_fmt_decode(QTK_DTYPE_F16, u.m);
    CHECK_BITS(sc[8 + 5], d * (float)u.sc[5]);
    CHECK_BITS(of[8 + 5], dm * (float)u.mn[5]);
    /* element 5 x 32 + 7 of block 1 is sc q - mn */
    float y[512];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 512));
    CHECK_BITS(y[256 + 5 * 32 + 7], sc[13] * (float)u.q[5 * 32 + 7] - of[13]);
    qtk_tensor_free(t);
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
    float z[64] = {0};
    size_t s2[1] = {64};
    CHECK_OK(qtk_quantize(z, s2, 1, &s, NULL, &t));
    CHECK_ERR(qtk_tensor_offsets(t, of, 16), QTK_E_SCHEME, "has no offsets");
    qtk_tensor_free(t);
}

static void conversion(void) {
    enum { R = 4, C = 512 };
    float *x = data(R * C, 21, 0);
    size_t sh[2] = {R, C};
    qtk_scheme k4, q8, k6;
    CHECK_OK(qtk_scheme_parse("q4_k", &k4));
    CHECK_OK(qtk_scheme_parse("q8f,block=32:f16", &q8));
    CHECK_OK(qtk_scheme_parse("q6_k", &k6));
    qtk_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(qtk_quantize(x, sh, 2, &k4, NULL, &a));
    CHECK_OK(qtk_convert(a, &q8, NULL, &b)); /* quantize(dequantize(a)) */
    float ya[R * C], yb[R * C], yc[R * C];
    CHECK_OK(qtk_dequantize(a, QTK_DTYPE_F32, ya, R * C));
    CHECK_OK(qtk_quantize(ya, sh, 2, &q8, NULL, &c));
    CHECK(b && c && memcmp(qtk_tensor_bytes(b, NULL), qtk_tensor_bytes(c, NULL), qtk_tensor_layout(c)->total_bytes) == 0);
    CHECK_OK(qtk_convert(b, &k6, NULL, &d));
    CHECK_OK(qtk_dequantize(d, QTK_DTYPE_F32, yc, R * C));
    CHECK_OK(qtk_dequantize(b, QTK_DTYPE_F32, yb, R * C));
    double e = 0, sx = 0;
    for (int i = 0; i < R * C; i++) e += (yc[i] - yb[i]) * (double)(yc[i] - yb[i]), sx += yb[i] * (double)yb[i];
    CHECK_MSG(10 * log10(sx / e) > 28, "q8 -> q6_k SQNR %.2f dB", 10 * log10(sx / e));
    size_t bad[2] = {4, 96};
    qtk_tensor *e1 = NULL;
    float z[384] = {0};
    CHECK_OK(qtk_quantize(z, bad, 2, &q8, NULL, &e1));
    qtk_tensor *e2 = NULL;
    CHECK_ERR(qtk_convert(e1, &k4, NULL, &e2), QTK_E_SHAPE, "not a multiple of 256");
    qtk_tensor_free(e1);
    qtk_tensor_free(a);
    qtk_tensor_free(b);
    qtk_tensor_free(c);
    qtk_tensor_free(d);
    free(x);
}

/* burnpack and safetensors carry store=ggml tensors byte for byte */
static void containers(void) {
    enum { R = 3, C = 512 };
    float *x = data(R * C, 5, 1);
    size_t sh[2] = {R, C};
    for (size_t i = 0; i < N_PRESETS; i++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(PRESETS[i], &s));
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_quantize(x, sh, 2, &s, NULL, &t));
        if (!t) continue;
        const char *fmts[2] = {"t.bpk", "t.safetensors"};
        for (int f = 0; f < 2; f++) {
            const char *p = tmp_path(fmts[f]);
            qtk_writer *w = NULL;
            qtk_write_options wo = {.force = 1};
            CHECK_OK(qtk_writer_create(p, &wo, &w));
            CHECK_OK(qtk_writer_add_tensor(w, "w", t));
            CHECK_OK(qtk_writer_commit(w));
            qtk_ckpt *c = NULL;
            CHECK_OK(qtk_ckpt_open(p, NULL, &c));
            qtk_tensor *back = NULL;
            if (c) CHECK_OK(qtk_ckpt_load_tensor(c, 0, &back));
            size_t n;
            const uint8_t *tb = qtk_tensor_bytes(t, &n);
            CHECK_MSG(back && qtk_scheme_equal(qtk_tensor_scheme(back), &s) &&
                          memcmp(qtk_tensor_bytes(back, NULL), tb, n) == 0,
                      "%s through %s", PRESETS[i], fmts[f]);
            qtk_tensor_free(back);
            qtk_ckpt_close(c);
            if (f == 0) { /* Burn's reader meets a dtype variant it does not know */
                size_t len;
                uint8_t *file = slurp(p, &len);
                char spec[128];
                qtk_scheme_format(&s, spec, sizeof spec, NULL);
                int has = 0;
                for (size_t k = 0; file && k + 8 < len && !has; k++) has = memcmp(file + k, "QtkQuant", 8) == 0;
                for (size_t k = 0; file && has && k + strlen(spec) < len; k++)
                    if (memcmp(file + k, spec, strlen(spec)) == 0) has = 2;
                CHECK_MSG(has == 2, "%s: the burnpack holds {\"QtkQuant\": \"%s\"}", PRESETS[i], spec);
                free(file);
            }
        }
        qtk_tensor_free(t);
    }
    free(x);
}

static void containers_in_tmp(void) {
    tmp_dir_make();
    containers();
    tmp_dir_remove();
}

TEST_MAIN("affine", T(spec_strings), T(spec_errors), T(layouts), T(bijection), T(values), T(bytes_checks),
          T(mse_never_worse), T(weights), T(invariance), T(quantize_errors), T(edge_blocks), T(scales_offsets),
          T(conversion), T(containers_in_tmp))
