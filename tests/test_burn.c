/* test_burn.c — byte-exact cases: Burn's own quantization tests, the worked layouts of
 * BURNPACK.md §3, and the qtk forms of ggml blocks derived by hand in GGUF.md §2.16/§3.3. */
#include "test.h"

static qtk_scheme parse(const char *spec) {
    qtk_scheme s;
    memset(&s, 0, sizeof s);
    CHECK_OK(qtk_scheme_parse(spec, &s));
    return s;
}

static uint32_t f32bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* [-1.8, -1.0, 0.0, 0.5] with the given scale 0.014173228 -> [-127, -71, 0, 35] */
static void burn_per_tensor_given_scale(void) {
    qtk_scheme s = parse("q8s,store=native");
    const float x[4] = {-1.8f, -1.0f, 0.0f, 0.5f};
    const float scale = 0.014173228f;
    size_t shape[1] = {4};
    qtk_quantize_options o = {.scales = &scale, .n_scales = 1};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 1, &s, &o, &t));
    size_t n;
    const uint8_t *b = qtk_tensor_bytes(t, &n);
    CHECK_EQ_U(n, 8);
    CHECK_EQ_U(b[0], 0x81);
    CHECK_EQ_U(b[1], (uint8_t)(int8_t)-71);
    CHECK_EQ_U(b[2], 0);
    CHECK_EQ_U(b[3], 35);
    uint32_t sb = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    CHECK_EQ_U(sb, f32bits(scale));
    float y[4];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 4));
    CHECK_BITS(y[0], -127.0f * scale);
    CHECK_BITS(y[1], -71.0f * scale);
    CHECK_BITS(y[3], 35.0f * scale);
    qtk_tensor_free(t);
}

/* dynamic q8s of [5, 0, 4, -12.7] -> scale 0.1, [50, 0, 40, -127] */
static void burn_dynamic_q8s(void) {
    qtk_scheme s = parse("q8s");
    const float x[4] = {5.0f, 0.0f, 4.0f, -12.7f};
    size_t shape[1] = {4};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 1, &s, NULL, &t));
    float sc;
    CHECK_OK(qtk_tensor_scales(t, &sc, 1));
    CHECK_BITS(sc, 0.1f);
    const uint8_t *b = qtk_tensor_bytes(t, NULL);
    /* u32 store of 8-bit fields: the bytes are the int8 sequence */
    CHECK_EQ_U(b[0], 50);
    CHECK_EQ_U(b[1], 0);
    CHECK_EQ_U(b[2], 40);
    CHECK_EQ_U(b[3], 0x81);
    qtk_tensor_free(t);
}

/* two-level: 8 q8s values, 2 ue4m3 block scales, f32 global = 14 bytes, dense */
static void burn_two_level_layout(void) {
    qtk_scheme s = parse("q8s,block=4:ue4m3,tensor=f32,store=native");
    const float x[8] = {1, 2, 3, 4, -10, 20, -30, 40};
    size_t shape[1] = {8};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 1, &s, NULL, &t));
    size_t n;
    const uint8_t *b = qtk_tensor_bytes(t, &n);
    CHECK_EQ_U(n, 14);
    /* raw scales 4/127 and 40/127; g = max(40/127/448, 2^-126); block 1 is exactly 448 */
    float g = (40.0f / 127.0f) / 448.0f;
    uint32_t gb = (uint32_t)b[10] | (uint32_t)b[11] << 8 | (uint32_t)b[12] << 16 | (uint32_t)b[13] << 24;
    CHECK_EQ_U(gb, f32bits(g));
    CHECK_EQ_U(b[9], 0x7e); /* 448 in ue4m3 */
    CHECK_EQ_U(b[8], qtk_fmt_round_up(QTK_DTYPE_UE4M3, (4.0f / 127.0f) / g));
    CHECK_EQ_U((int8_t)b[7], 127);
    float y[8];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 8));
    for (int i = 0; i < 8; i++) CHECK_MSG(fabsf(y[i] - x[i]) <= 0.5f * fabsf(x[i]) / 100 + 0.2f, "two-level value %d", i);
    qtk_tensor_free(t);
}

/* u32 packing of [-128, 2, -3, 127] = 0x7ffd0280 */
static void burn_u32_packing(void) {
    qtk_scheme s = parse("q8f");
    const float x[4] = {-128, 2, -3, 127};
    const float one = 1.0f;
    size_t shape[1] = {4};
    qtk_quantize_options o = {.scales = &one, .n_scales = 1};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 1, &s, &o, &t));
    const uint8_t *b = qtk_tensor_bytes(t, NULL);
    uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    CHECK_EQ_U(w, 0x7ffd0280u);
    qtk_tensor_free(t);
}

/* BURNPACK.md §3.8: NVFP4 [64, 32]: byte k of row r holds (r, 2k) low, (r, 2k+1) high;
 * 128 ue4m3 scales over grid [64, 2]; global at 1152. Built from bytes, read back. */
static void burnpack_nvfp4_byte_map(void) {
    qtk_scheme s = parse("nvfp4");
    size_t shape[2] = {64, 32};
    uint8_t b[1156];
    memset(b, 0, sizeof b);
    /* element (3, 6) = code 0x2 (1.0) low nibble of byte 3*16+3; (3, 7) = 0xF (-6) high */
    b[3 * 16 + 3] = 0xF2;
    /* element (5, 17): row 5, block 1 -> scale index 5*2+1 */
    b[5 * 16 + 8] = 0x07; /* (5,16) = 6.0 */
    b[1024 + 3 * 2 + 0] = 0x38; /* ue4m3 1.0 for block (3, 0) */
    b[1024 + 5 * 2 + 1] = 0x40; /* ue4m3 2.0 for block (5, 1) */
    float g = 0.25f;
    uint32_t gb = f32bits(g);
    for (int i = 0; i < 4; i++) b[1152 + i] = (uint8_t)(gb >> (8 * i));
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_tensor_from_bytes(b, sizeof b, shape, 2, &s, &t));
    float *y = malloc(64 * 32 * sizeof(float));
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 64 * 32));
    CHECK_BITS(y[3 * 32 + 6], 1.0f * 0.25f);
    CHECK_BITS(y[3 * 32 + 7], -6.0f * 0.25f);
    CHECK_BITS(y[5 * 32 + 16], 6.0f * (0.25f * 2.0f));
    CHECK_BITS(y[5 * 32 + 17], 0.0f);
    CHECK_BITS(qtk_tensor_global(t), 0.25f);
    size_t n;
    const uint8_t *back = qtk_tensor_bytes(t, &n);
    CHECK(n == sizeof b && memcmp(back, b, n) == 0);
    free(y);
    qtk_tensor_free(t);
}

static void from_hex(const char *hex, uint8_t *out, size_t *n) {
    size_t k = 0;
    for (const char *p = hex; *p;) {
        if (*p == ' ' || *p == '|') {
            p++;
            continue;
        }
        unsigned v;
        sscanf(p, "%2x", &v);
        out[k++] = (uint8_t)v;
        p += 2;
    }
    *n = k;
}

/* GGUF.md §3.3: Q4_0 as q4f,block=32:f16, and the same nibbles with a negative scale. */
static void ggml_q4_0_block(void) {
    qtk_scheme s = parse("q4f,block=32:f16");
    size_t shape[2] = {1, 32}, n;
    uint8_t b[64];
    from_hex("98 BA DC FE 10 32 54 76 67 45 23 01 EF CD AB 89 00 38", b, &n);
    CHECK_EQ_U(n, 18);
    float y[32];
    CHECK_OK(qtk_dequantize_bytes(b, n, shape, 2, &s, QTK_DTYPE_F32, y, 32));
    for (int j = 0; j < 32; j++) CHECK_BITS(y[j], j < 16 ? 0.5f * (float)(j - 8) : 0.5f * (float)(23 - j));
    b[17] = 0xB8; /* d = -0.5: accepted, as SPEC allows negative stored scales */
    CHECK_OK(qtk_dequantize_bytes(b, n, shape, 2, &s, QTK_DTYPE_F32, y, 32));
    for (int j = 0; j < 32; j++) CHECK_BITS(y[j], j < 16 ? -0.5f * (float)(j - 8) : -0.5f * (float)(23 - j));
    /* qtk's own quantization of that input: s = 2*4/15 rounded up to f16 = 0x3845 */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = j < 16 ? 0.5f * (float)(j - 8) : 0.5f * (float)(23 - j);
    uint8_t q[18];
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, q, sizeof q));
    CHECK_EQ_U(q[16], 0x45);
    CHECK_EQ_U(q[17], 0x38);
}

static void ggml_q8_0_block(void) {
    qtk_scheme s = parse("q8f,block=32:f16,store=native");
    size_t shape[2] = {1, 32}, n;
    uint8_t b[64];
    from_hex("81 F1 F2 F3 F4 F5 F6 F7 F8 F9 FA FB FC FD FE FF 00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 7F 00 3C", b,
             &n);
    float y[32];
    CHECK_OK(qtk_dequantize_bytes(b, n, shape, 2, &s, QTK_DTYPE_F32, y, 32));
    CHECK_BITS(y[0], -127.0f);
    for (int j = 1; j <= 30; j++) CHECK_BITS(y[j], (float)(j - 16));
    CHECK_BITS(y[31], 127.0f);
    /* GGUF.md §2.16: with amax 1.0 qtk's q8s scale rounds up to f16 0x2009 */
    qtk_scheme s8 = parse("q8s,block=32:f16,store=native");
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) / 16.0f;
    uint8_t q[34];
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s8, NULL, q, sizeof q));
    CHECK_EQ_U(q[32], 0x09);
    CHECK_EQ_U(q[33], 0x20);
}

/* GGUF.md §2.16 MXFP4 input under qtk's mxfp4: codes derived by hand with round to
 * nearest even (the three ties differ from ggml's lowest-code rule). */
static void mxfp4_quantize_by_hand(void) {
    qtk_scheme s = parse("mxfp4");
    const float first[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 5, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    float x[32];
    for (int j = 0; j < 16; j++) {
        x[j] = first[j];
        x[16 + j] = first[j] / 2;
    }
    size_t shape[2] = {1, 32};
    uint8_t q[17], want[17];
    size_t n;
    from_hex("10 32 54 76 96 BA DC FE 00 21 32 54 84 A9 BA DC 7F", want, &n);
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, q, sizeof q));
    for (int i = 0; i < 17; i++) CHECK_MSG(q[i] == want[i], "mxfp4 byte %d: 0x%02x, expected 0x%02x", i, q[i], want[i]);
    /* and ggml's MXFP4 block in qtk's byte order dequantizes to ggml's values */
    uint8_t g[17];
    from_hex("10 32 54 76 96 BA DC FE 00 11 32 54 04 99 BA DC 7F", g, &n);
    const float gv[32] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, 4, -.5f, -1, -1.5f, -2, -3, -4, -6,
                          0, 0, .5f, .5f, 1, 1.5f, 2, 3, 2, 0, -.5f, -.5f, -1, -1.5f, -2, -3};
    float y[32];
    CHECK_OK(qtk_dequantize_bytes(g, 17, shape, 2, &s, QTK_DTYPE_F32, y, 32));
    for (int j = 0; j < 32; j++) CHECK_MSG(y[j] == gv[j], "mxfp4 element %d: %g, expected %g", j, (double)y[j], (double)gv[j]);
}

static void ggml_iq4_nl_block(void) {
    qtk_scheme s = parse("q4f,table=iq4nl,block=32:f16");
    size_t shape[2] = {1, 32}, n;
    uint8_t b[128];
    from_hex("10 32 54 76 98 BA DC FE EF CD AB 89 67 45 23 01 00 20", b, &n);
    const float tab[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int i = 0; i < 16; i++) {
        uint32_t u = f32bits(tab[i]);
        for (int k = 0; k < 4; k++) b[n++] = (uint8_t)(u >> (8 * k));
    }
    CHECK_EQ_U(b[16], 0x00); /* d = f16 0x2000 */
    CHECK_EQ_U(b[17], 0x20);
    CHECK_EQ_U(b[20], 0xFE); /* -127 = 0xC2FE0000, little-endian 00 00 FE C2 */
    CHECK_EQ_U(b[21], 0xC2);
    float y[32];
    CHECK_OK(qtk_dequantize_bytes(b, n, shape, 2, &s, QTK_DTYPE_F32, y, 32));
    CHECK_BITS(y[0], -0.9921875f);
    CHECK_BITS(y[7], -0.078125f);
    CHECK_BITS(y[8], 0.0078125f);
    CHECK_BITS(y[15], 0.8828125f);
    CHECK_BITS(y[16], 0.8828125f);
    CHECK_BITS(y[31], -0.9921875f);
}

static void ggml_tq2_0_as_q2s(void) {
    qtk_scheme s = parse("q2s,block=128:f16");
    size_t shape[2] = {1, 256};
    uint8_t b[64 + 4];
    /* elements e: (e mod 3) - 1 -> fields 11 00 01 ... ; build via quantize and check bytes */
    float x[256];
    for (int e = 0; e < 256; e++) x[e] = (float)(e % 3 - 1);
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, b, sizeof b));
    CHECK_EQ_U(b[0], 0xD3);
    CHECK_EQ_U(b[1], 0x34);
    CHECK_EQ_U(b[2], 0x4D);
    CHECK_EQ_U(b[3], 0xD3);
    CHECK_EQ_U(b[64], 0x00);
    CHECK_EQ_U(b[65], 0x3C);
    CHECK_EQ_U(b[66], 0x00);
    CHECK_EQ_U(b[67], 0x3C);
}

/* Sub-byte native stores hold sign-extended int8 (what Burn's CPU backends write). */
static void native_sub_byte_is_sign_extended(void) {
    qtk_scheme s = parse("q4s,store=native");
    const float x[5] = {-7, -1, 0, 3, 7};
    const float one = 1.0f;
    size_t shape[1] = {5};
    qtk_quantize_options o = {.scales = &one, .n_scales = 1};
    uint8_t b[9];
    CHECK_OK(qtk_quantize_into(x, shape, 1, &s, &o, b, sizeof b));
    CHECK_EQ_U(b[0], 0xF9);
    CHECK_EQ_U(b[1], 0xFF);
    CHECK_EQ_U(b[2], 0x00);
    CHECK_EQ_U(b[3], 0x03);
    CHECK_EQ_U(b[4], 0x07);
    qtk_scheme s2 = parse("q2f,store=u32");
    const float x2[3] = {-2, 1, -1};
    uint8_t b2[8];
    size_t shape3[1] = {3};
    CHECK_OK(qtk_quantize_into(x2, shape3, 1, &s2, &o, b2, sizeof b2));
    /* fields 10, 01, 11 in bits 0-1, 2-3, 4-5 -> 0b110110 = 0x36 */
    CHECK_EQ_U(b2[0], 0x36);
    CHECK_EQ_U(b2[1], 0);
}

TEST_MAIN("burn", T(burn_per_tensor_given_scale), T(burn_dynamic_q8s), T(burn_two_level_layout), T(burn_u32_packing),
          T(burnpack_nvfp4_byte_map), T(ggml_q4_0_block), T(ggml_q8_0_block), T(mxfp4_quantize_by_hand),
          T(ggml_iq4_nl_block), T(ggml_tq2_0_as_q2s), T(native_sub_byte_is_sign_extended))
