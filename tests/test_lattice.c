/* test_lattice.c — ggml's lattice types (docs/lattice.md, issue 21): the schemes and their
 * spec strings; the codebooks (their structure, a pinned digest, and every entry and the sign
 * table against ggml's source when QTK_GGML_SRC names a ggml tree); pack inverting unpack over
 * random blocks; hand-made blocks' values; the GGUF file ggml wrote (tests/data/lattice): every
 * value ggml's bit for bit, every byte back through .bpk, .safetensors and GGUF; matmul on them
 * (exact against a double reference, fast the same bits at every level and thread count); and
 * the errors. */
#include "ckpt_util.h"

#include "common/internal.h"
#include "gblock/gblock.h"
#include "matmul/mm.h"
#include "qtk_matmul.h"

#include <math.h>
#include <stddef.h>

#define N_TYPES 7
#define GRIDS_DIGEST 0x538b386a767b688cull
static const char *const TYPES[N_TYPES] = {"iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"};
static const char *const GGML[N_TYPES] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"};
static const unsigned BYTES[N_TYPES] = {66, 74, 82, 98, 110, 50, 56};

static const qtk__gb_fmt *fmt_of(size_t i) {
    qtk_scheme s;
    if (qtk_scheme_parse(TYPES[i], &s) != QTK_OK) return NULL;
    return qtk__gb_fmt_of_scheme(&s);
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next(void) { return trand_u64(&rng); }

/* a random block whose d is finite (every other bit pattern is a block) */
static void random_block(const qtk__gb_fmt *F, uint8_t *b) {
    for (unsigned j = 0; j < F->bytes; j++) b[j] = (uint8_t)next();
    if (F->f == QTK__GF_IQ1_M) {
        b[55] = (uint8_t)((b[55] & 0x0fu) | 0x30u); /* d's exponent bits below the top: finite */
    } else {
        b[1] = (uint8_t)((b[1] & 0x83u) | 0x30u);
    }
}

/* IQ1's largest integer sums: every group on the grid row with the most +1 coordinates, the
 * largest sub-scales, delta +1/8, d = 1 (met by activations all +1: each term 8 x 127 x 15 x 9) */
static void iq1_extreme_block(const qtk__gb_fmt *F, uint8_t *b) {
    const qtk__lattice_grids *T = qtk__lattice();
    unsigned best = 0, bn = 0;
    for (unsigned i = 0; i < 2048; i++) {
        unsigned n = 0;
        for (unsigned j = 0; j < 8; j++) n += T->iq1s[i][j] == 1;
        if (n > bn) bn = n, best = i;
    }
    memset(b, 0, F->bytes);
    if (F->f == QTK__GF_IQ1_S) { /* d, qs[32], qh[8]: 4 x 3 index bits, 3 sub-scale bits, the delta's sign */
        b[1] = 0x3c;
        for (unsigned k = 0; k < 8; k++) {
            unsigned h = 7u << 12;
            for (unsigned l = 0; l < 4; l++) b[2 + 4 * k + l] = (uint8_t)best, h |= (best >> 8) << (3 * l);
            b[34 + 2 * k] = (uint8_t)h, b[35 + 2 * k] = (uint8_t)(h >> 8);
        }
    } else { /* qs[32], qh[16] nibbles (3 index bits, the delta's sign), 4 u16: 4 x 3 sub-scale bits, d's nibble */
        for (unsigned j = 0; j < 32; j++) b[j] = (uint8_t)best;
        for (unsigned j = 0; j < 16; j++) b[32 + j] = (uint8_t)((best >> 8) | (best >> 8) << 4);
        for (unsigned j = 0; j < 4; j++) {
            const unsigned h = 0xfffu | ((0x3c00u >> (4 * j)) & 15u) << 12;
            b[48 + 2 * j] = (uint8_t)h, b[49 + 2 * j] = (uint8_t)(h >> 8);
        }
    }
}

static void schemes(void) {
    for (size_t i = 0; i < N_TYPES; i++) {
        qtk_scheme s, back;
        CHECK_OK(qtk_scheme_parse(TYPES[i], &s));
        CHECK(s.mode == QTK_MODE_LATTICE && s.store == QTK_STORE_GGML && s.super_block == 256);
        char spec[256];
        CHECK_OK(qtk_scheme_format(&s, spec, sizeof spec, NULL));
        CHECK_MSG(strstr(spec, "lattice=") && strstr(spec, ",store=ggml"), "%s formats as '%s'", TYPES[i], spec);
        CHECK_OK(qtk_scheme_parse(spec, &back));
        CHECK(qtk_scheme_equal(&s, &back));
        const char *pn = qtk_scheme_preset_name(&s);
        CHECK_MSG(pn && strcmp(pn, TYPES[i]) == 0, "%s: preset name %s", TYPES[i], pn ? pn : "NULL");
        qtk_layout L;
        size_t sh[2] = {4, 512};
        CHECK_OK(qtk_layout_compute(&s, sh, 2, &L));
        CHECK_EQ_U(L.total_bytes, 8u * BYTES[i]);
        const qtk__gb_fmt *F = fmt_of(i);
        CHECK(F && F->lattice && F->bytes == BYTES[i] && strcmp(qtk__gfmt_info_of(F->f)->ggml, GGML[i]) == 0);
    }
    qtk_scheme s;
    CHECK_ERR(qtk_scheme_parse("q8f,lattice=iq2xxs,block=32:u4,super=256:f16", &s), QTK_E_SCHEME,
              "exist only in ggml's block structs");
    CHECK_ERR(qtk_scheme_parse("q8f,lattice=iq9,block=32:u4,super=256:f16,store=ggml", &s), QTK_E_SCHEME,
              "store=ggml holds ggml's block structs");
    CHECK_ERR(qtk_scheme_parse("q8f,lattice=iq2xxs,table=nf4,block=32:u4,super=256:f16,store=ggml", &s), QTK_E_PARSE,
              "a second table");
    CHECK_ERR(qtk_scheme_parse("iq2_xxs,block=64:f16", &s), QTK_E_PARSE, "takes no options");
    qtk_scheme m = {0};
    m.mode = (qtk_mode)4;
    CHECK_ERR(qtk_scheme_validate(&m), QTK_E_SCHEME, "is not a qtk_mode");
}

/* FNV-1a over the expanded grids: pins the data checked against ggml below */
static uint64_t grids_digest(const qtk__lattice_grids *G) {
    const uint8_t *p = (const uint8_t *)G;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < offsetof(qtk__lattice_grids, iq1q); i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void grids_structure(void) {
    const qtk__lattice_grids *G = qtk__lattice();
    struct {
        const int8_t *g;
        size_t n;
        unsigned w;
        int lo, hi;
    } k[] = {{&G->iq2xxs[0][0], 256, 8, 8, 43},  {&G->iq2xs[0][0], 512, 8, 8, 43}, {&G->iq2s[0][0], 1024, 8, 8, 43},
             {&G->iq1s[0][0], 2048, 8, -1, 1}, {&G->iq3xxs[0][0], 256, 4, 4, 62}, {&G->iq3s[0][0], 512, 4, 1, 15}};
    for (size_t t = 0; t < sizeof k / sizeof k[0]; t++) {
        size_t dup = 0, out = 0;
        for (size_t i = 0; i < k[t].n; i++) {
            for (unsigned j = 0; j < k[t].w; j++) out += k[t].g[i * k[t].w + j] < k[t].lo || k[t].g[i * k[t].w + j] > k[t].hi;
            for (size_t l = 0; l < i; l++) dup += memcmp(k[t].g + i * k[t].w, k[t].g + l * k[t].w, k[t].w) == 0;
        }
        CHECK_MSG(dup == 0 && out == 0, "grid %zu: %zu repeated points, %zu coordinates off the levels", t, dup, out);
    }
    /* the kernels' tables, derived */
    size_t bad = 0;
    for (unsigned i = 0; i < 2048; i++)
        for (unsigned j = 0; j < 8; j++)
            bad += G->iq1q[i][j] != 8 * G->iq1s[i][j] + 1;
    for (unsigned i = 0; i < 256; i++)
        for (unsigned j = 0; j < 8; j++) bad += (uint8_t)(G->smask[i] >> (8 * j)) != ((i >> j) & 1u ? 0xffu : 0u);
    for (unsigned i = 0; i < 128; i++) bad += (G->ksigns[i] & 127u) != i || __builtin_popcount(G->ksigns[i]) % 2 != 0;
    CHECK_MSG(bad == 0, "%zu entries of the derived tables are wrong", bad);
    const uint64_t want = GRIDS_DIGEST;
    CHECK_MSG(grids_digest(G) == want, "grids digest 0x%016llx, want 0x%016llx", (unsigned long long)grids_digest(G),
              (unsigned long long)want);
}

/* ggml's table NAME in ggml-common.h, its hex or decimal entries into v (at most cap); count */
static size_t ggml_table(const char *src, const char *name, uint64_t *v, size_t cap) {
    char key[96];
    snprintf(key, sizeof key, ", %s,", name);
    const char *p = strstr(src, key);
    if (!p) return 0;
    p = strchr(p, ')');
    const char *end = p ? strstr(p, "GGML_TABLE_END") : NULL;
    size_t n = 0;
    while (p && end && p < end && n < cap) {
        char *q;
        unsigned long long x = strtoull(p, &q, 0);
        if (q == p) {
            p++;
            continue;
        }
        v[n++] = x;
        p = q;
    }
    return n;
}

static void grids_vs_ggml(void) {
    const char *dir = getenv("QTK_GGML_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/src/ggml-common.h", dir ? dir : "");
    size_t len = 0;
    char *src = dir ? (char *)slurp(path, &len) : NULL;
    if (!src) {
        printf("  skipped: the codebooks against ggml's source (set QTK_GGML_SRC to a ggml tree)\n");
        return;
    }
    src = realloc(src, len + 1);
    src[len] = '\0';
    const qtk__lattice_grids *G = qtk__lattice();
    struct {
        const char *name;
        const int8_t *g;
        size_t n;
        unsigned w;
    } k[] = {{"iq2xxs_grid", &G->iq2xxs[0][0], 256, 8}, {"iq2xs_grid", &G->iq2xs[0][0], 512, 8},
             {"iq2s_grid", &G->iq2s[0][0], 1024, 8},    {"iq1s_grid", &G->iq1s[0][0], 2048, 8},
             {"iq3xxs_grid", &G->iq3xxs[0][0], 256, 4}, {"iq3s_grid", &G->iq3s[0][0], 512, 4}};
    uint64_t *v = malloc(2048 * sizeof *v);
    for (size_t t = 0; t < sizeof k / sizeof k[0]; t++) {
        size_t n = ggml_table(src, k[t].name, v, 2048), bad = 0;
        CHECK_MSG(n == k[t].n, "%s: %zu entries in ggml's source, %zu in qtk's", k[t].name, n, k[t].n);
        for (size_t i = 0; i < n && i < k[t].n; i++)
            for (unsigned j = 0; j < k[t].w; j++) bad += (int8_t)(uint8_t)(v[i] >> (8 * j)) != k[t].g[i * k[t].w + j];
        CHECK_MSG(bad == 0, "%s: %zu coordinates differ from ggml's", k[t].name, bad);
    }
    /* the signs: IQ2_XXS's 7 stored bits of group 0 are i; ggml's ksigns_iq2xs[i] says which
     * of the 8 values are negative */
    size_t n = ggml_table(src, "ksigns_iq2xs", v, 128), bad = 0;
    CHECK_EQ_U(n, 128);
    const qtk__gb_fmt *F = fmt_of(0);
    uint8_t b[66] = {0};
    qtk__st16(b, 0x3c00);
    qtk__gb_unpacked u;
    for (unsigned i = 0; i < 128 && n == 128 && F; i++) {
        qtk__st32(b + 6, i);
        qtk__gb_unpack(F, b, &u);
        unsigned neg = 0;
        for (unsigned j = 0; j < 8; j++) neg |= (u.q[j] < 0 ? 1u : 0u) << j;
        bad += neg != v[i];
    }
    CHECK_MSG(bad == 0, "%zu of ggml's 128 sign patterns differ", bad);
    free(v);
    free(src);
}

static void pack_inverts_unpack(void) {
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtk__gb_fmt *F = fmt_of(i);
        if (!F) continue;
        uint8_t b[128], c[128];
        qtk__gb_unpacked u;
        size_t bad = 0, refused = 0;
        for (int r = 0; r < 300; r++) {
            random_block(F, b);
            qtk__gb_unpack(F, b, &u);
            refused += !qtk__gb_lattice_pack(F, &u, c);
            bad += memcmp(b, c, F->bytes) != 0;
        }
        CHECK_MSG(bad == 0 && refused == 0, "%s: %zu of 300 random blocks did not come back (%zu refused)", TYPES[i], bad,
                  refused);
        /* off the codebook: a coordinate no grid point has, an even sub-scale */
        random_block(F, b);
        qtk__gb_unpack(F, b, &u);
        u.q[3] = (int8_t)(u.q[3] + 2);
        CHECK_MSG(!qtk__gb_lattice_pack(F, &u, c), "%s: a coordinate off the grid was packed", TYPES[i]);
        qtk__gb_unpack(F, b, &u);
        u.sc[1] = 2;
        CHECK_MSG(!qtk__gb_lattice_pack(F, &u, c), "%s: an even sub-scale was packed", TYPES[i]);
    }
}

/* blocks made by hand: the first values of each, as ggml's formulas give them */
static void hand_blocks(void) {
    float y[256];
    size_t sh[1] = {256};
    qtk_scheme s;
    {   /* IQ2_XXS: d = 1, group 0: s = 3 (0.875), grid point 0 (all 8), sign bits 1 -> elements 0 and 7 */
        uint8_t b[66] = {0};
        qtk__st16(b, 0x3c00);
        qtk__st32(b + 6, 1u | 3u << 28);
        CHECK_OK(qtk_scheme_parse("iq2_xxs", &s));
        CHECK_OK(qtk_dequantize_bytes(b, sizeof b, sh, 1, &s, QTK_DTYPE_F32, y, 256));
        CHECK_BITS(y[0], -7.0f);
        CHECK_BITS(y[1], 7.0f);
        CHECK_BITS(y[7], -7.0f);
        CHECK_BITS(y[8], 7.0f);
        CHECK_BITS(y[32], 1.0f); /* group 1: s = 0: 0.125 x 8 */
    }
    {   /* IQ3_S: d = 0.5, group 0 s = 1 (x 3), grid point 0 (all 1), signs 0xff on the first 8 */
        uint8_t b[110] = {0};
        qtk__st16(b, 0x3800);
        b[106] = 1;
        b[74] = 0xff;
        CHECK_OK(qtk_scheme_parse("iq3_s", &s));
        CHECK_OK(qtk_dequantize_bytes(b, sizeof b, sh, 1, &s, QTK_DTYPE_F32, y, 256));
        CHECK_BITS(y[0], -1.5f);
        CHECK_BITS(y[7], -1.5f);
        CHECK_BITS(y[8], 1.5f);
        CHECK_BITS(y[32], 0.5f);
    }
    {   /* IQ1_S: d = 1, group 0: s = 2 (x 5), delta -1/8, grid point 0 (all -1): 5 x -1.125 */
        uint8_t b[50] = {0};
        qtk__st16(b, 0x3c00);
        qtk__st16(b + 34, (uint16_t)(0x8000u | 2u << 12));
        CHECK_OK(qtk_scheme_parse("iq1_s", &s));
        CHECK_OK(qtk_dequantize_bytes(b, sizeof b, sh, 1, &s, QTK_DTYPE_F32, y, 256));
        CHECK_BITS(y[0], -5.625f);
        CHECK_BITS(y[32], -0.875f); /* group 1: s = 0, delta +1/8: -1 + 0.125 */
    }
    {   /* IQ1_M: d = 2 (0x4000: nibble 3 = 4), group 0 (16 values) s = 1 (x 3), group 1 s = 0, delta
         * of the first 8 negative: 2 x 3 x -1.125, then 2 x 3 x -0.875, then 2 x -0.875 */
        uint8_t b[56] = {0};
        b[32] = 0x08;
        qtk__st16(b + 48, 1u);
        b[55] = 0x40;
        CHECK_OK(qtk_scheme_parse("iq1_m", &s));
        CHECK_OK(qtk_dequantize_bytes(b, sizeof b, sh, 1, &s, QTK_DTYPE_F32, y, 256));
        CHECK_BITS(y[0], -6.75f);
        CHECK_BITS(y[8], -5.25f);
        CHECK_BITS(y[16], -1.75f);
    }
}

static char data_dir[1024];

/* the file ggml wrote: values bit for bit at every level and thread count, bytes back */
static void ggml_file(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/lattice.gguf", data_dir);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(path, NULL, &c));
    if (!c) return;
    CHECK_EQ_U(qtk_ckpt_count(c), N_TYPES);
    static const qtk_isa isas[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    for (size_t i = 0; i < qtk_ckpt_count(c); i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        CHECK(t->quantized && !t->decoded && strcmp(t->file_type, GGML[i]) == 0);
        char ep[1200];
        snprintf(ep, sizeof ep, "%s/%s.expected.f32", data_dir, t->name);
        size_t n = 0;
        uint8_t *e = slurp(ep, &n);
        CHECK_MSG(e && n == 4 * t->numel, "%s: expected values", ep);
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, i, &v));
        float *y = malloc(t->numel * sizeof *y);
        for (size_t li = 0; e && li < sizeof isas / sizeof isas[0]; li++) {
            if (qtk_set_isa(isas[li]) != QTK_OK) {
                qtk_clear_error();
                continue;
            }
            qtk_tensor *w = NULL;
            CHECK_OK(qtk_tensor_from_bytes(v.data, v.len, t->shape, t->rank, &t->scheme, &w));
            for (int th = 1; w && th <= 3; th++) {
                qtk_set_threads(th);
                CHECK_OK(qtk_dequantize(w, QTK_DTYPE_F32, y, t->numel));
                size_t bad = 0;
                for (size_t k = 0; k < t->numel; k++) bad += qtk__ld32(e + 4 * k) != qtk__f32_bits(y[k]);
                CHECK_MSG(bad == 0, "%s at %s, %d threads: %zu of %zu values differ from ggml's", t->name,
                          qtk_isa_name(isas[li]), th, bad, t->numel);
            }
            qtk_set_threads(0);
            qtk_tensor_free(w);
        }
        qtk_set_isa(QTK_ISA_AUTO);
        qtk_ckpt_unload(c, &v);
        free(y);
        free(e);
    }
    qtk_ckpt_close(c);
    size_t n0 = 0, n1 = 0;
    uint8_t *orig = slurp(path, &n0);
    static const char *const via[] = {"l.bpk", "l.safetensors", "l.gguf"};
    for (size_t k = 0; k < 3; k++) {
        const char *a = tmp_path_kept(via[k]), *b = tmp_path_kept("back.gguf");
        qtk_convert_options o = {.force = 1};
        CHECK_OK(qtk_ckpt_convert(path, a, &o, NULL));
        CHECK_OK(qtk_ckpt_convert(a, b, &o, NULL));
        uint8_t *back = slurp(b, &n1);
        CHECK_MSG(back && n1 == n0 && memcmp(back, orig, n0) == 0, "GGUF -> %s -> GGUF is not byte-identical", via[k]);
        free(back);
    }
    /* requantized to another scheme, with an SQNR that says the values were read */
    qtk_convert_options o = {.force = 1, .scheme = "q8_0"};
    CHECK_OK(qtk_ckpt_convert(path, tmp_path_kept("q8.gguf"), &o, NULL));
    free(orig);
}

/* y = x W^T in double from the dequantized weights */
static void reference(const float *w, const float *x, size_t M, size_t N, size_t K, double *y, double *mag) {
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < K; k++) {
                s += (double)x[m * K + k] * w[n * K + k];
                a += fabs((double)x[m * K + k] * w[n * K + k]);
            }
            y[m * N + n] = s;
            mag[m * N + n] = a;
        }
}

static void matmul(void) {
    /* M > 8: the integer kernels take rows of x 8 at a time (fast: the scalar level's integer kernel
     * too, which it runs up to 8 rows of x unless told otherwise) */
    enum { N = 40, K = 768, M = 11 };
    static const qtk_isa isas[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    float *x = malloc(M * K * sizeof *x), *w = malloc(N * K * sizeof *w), *y = malloc(M * N * sizeof *y),
          *y0 = malloc(M * N * sizeof *y0);
    double *ref = malloc(M * N * sizeof *ref), *mag = malloc(M * N * sizeof *mag);
    for (size_t i = 0; i < M * K; i++) x[i] = (float)((double)(next() % 20001) / 10000.0 - 1.0);
    float x0[K];
    memcpy(x0, x, sizeof x0);
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtk__gb_fmt *F = fmt_of(i);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(TYPES[i], &s));
        if (!F) continue;
        const size_t nb = N * K / 256;
        uint8_t *bytes = malloc(nb * F->bytes);
        for (size_t b = 0; b < nb; b++) random_block(F, bytes + b * F->bytes);
        const bool iq1 = F->f == QTK__GF_IQ1_S || F->f == QTK__GF_IQ1_M;
        for (size_t b = 0; iq1 && b < K / 256; b++) iq1_extreme_block(F, bytes + b * F->bytes); /* row 0, for x's row 0 */
        for (size_t k = 0; k < K; k++) x[k] = iq1 ? 1.0f : x0[k];
        size_t sh[2] = {N, K};
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_tensor_from_bytes(bytes, nb * F->bytes, sh, 2, &s, &t));
        if (!t) continue;
        CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, w, N * K));
        reference(w, x, M, N, K, ref, mag);
        /* exact at 8 rows of x (its lattice kernel's limit) and at M (the generic tiles); fast at M */
        for (int pass = 0; pass < 3; pass++) {
            const int fast = pass == 2;
            const size_t Mp = pass == 0 ? 8 : M;
            bool first = true;
            qtk__mm_set_hooks(fast ? QTK__MM_HOOK_INT_ANY_M : 0);
            for (size_t li = 0; li < sizeof isas / sizeof isas[0]; li++) {
                if (qtk_set_isa(isas[li]) != QTK_OK) {
                    qtk_clear_error();
                    continue;
                }
                for (int th = 1; th <= 3; th++) {
                    qtk_matmul_options o = {.precision = fast ? QTK_PRECISION_FAST : QTK_PRECISION_EXACT, .threads = th};
                    CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, Mp, K, NULL, y, N, &o));
                    double worst = 0;
                    for (size_t j = 0; j < Mp * N; j++) {
                        double e = fabs(y[j] - ref[j]) / (mag[j] + 1e-30);
                        worst = e > worst ? e : worst;
                    }
                    /* exact: f32 sums; fast: int8 activations (1/254 of a block's largest each) */
                    CHECK_MSG(worst < (fast ? 2e-2 : 1e-5), "%s %s M = %zu at %s: error %g of the magnitude", TYPES[i],
                              fast ? "fast" : "exact", Mp, qtk_isa_name(isas[li]), worst);
                    /* fast: the same bits everywhere; exact: for every thread count at a level */
                    if (first || (!fast && th == 1)) memcpy(y0, y, Mp * N * sizeof *y);
                    else
                        CHECK_MSG(memcmp(y0, y, Mp * N * sizeof *y) == 0, "%s %s M = %zu: bits differ at %s, %d threads", TYPES[i],
                                  fast ? "fast" : "exact", Mp, qtk_isa_name(isas[li]), th);
                    first = false;
                    if (fast) { /* one row of x (the M = 1 kernel): row 0's bits */
                        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, 1, K, NULL, y, N, &o));
                        CHECK_MSG(memcmp(y0, y, N * sizeof *y) == 0, "%s fast M = 1: bits differ from row 0 of M = %d at %s, %d threads",
                                  TYPES[i], M, qtk_isa_name(isas[li]), th);
                    }
                }
            }
            qtk_set_isa(QTK_ISA_AUTO);
            qtk__mm_set_hooks(0);
        }
        for (int fast = 0; fast < 2; fast++) { /* the lattice kernels run (exact: up to 8 rows of x) */
            const char *kn = NULL;
            qtk_matmul_options o = {.precision = fast ? QTK_PRECISION_FAST : QTK_PRECISION_EXACT};
            CHECK_OK(qtk_matmul_kernel(t, 8, &o, &kn));
            bool scalar = qtk_get_isa() == QTK_ISA_SCALAR;
            CHECK_MSG(kn && (strstr(kn, "lattice") || (scalar && !fast)), "%s: kernel '%s'", TYPES[i], kn ? kn : "NULL");
        }
        qtk_tensor_free(t);
        free(bytes);
    }
    free(x), free(w), free(y), free(y0), free(ref), free(mag);
}

/* ---- quantizing (gb_lattice_quant.c) ---- */

static float *values(size_t n, uint64_t seed, int style) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        float v = trand_normal(&seed);
        switch (style) {
        case 0: break;                                            /* Gaussian */
        case 1: v = v * v * v; break;                             /* heavy tails */
        case 2: v = i % 37 == 0 ? 20.0f * v : v; break;           /* outlier columns */
        case 3: v = (i / 256) % 3 == 0 ? 0.0f : v * 1e-6f; break; /* zero and tiny blocks */
        case 4: v *= 1e7f; break;                                 /* beyond f16's d */
        default: v = -fabsf(v) - 2.0f; break;                     /* all negative */
        }
        x[i] = v;
    }
    return x;
}

static double wsqnr(const float *x, const float *y, const float *w, size_t n, size_t cols) {
    double sx = 0, se = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i % cols] : 1.0, e = (double)x[i] - y[i];
        sx += wi * x[i] * x[i], se += wi * e * e;
    }
    return 10.0 * log10(sx / se);
}

/* bytes of x quantized to TYPES[i] (threads th; NULL on failure) */
static uint8_t *make(size_t i, const float *x, size_t R, size_t C, const float *w, qtk_calibration cal, int th,
                     float *y) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(TYPES[i], &s));
    size_t sh[2] = {R, C};
    qtk_quantize_options o = {.calibration = cal, .weights = w, .n_weights = w ? C : 0, .threads = th};
    qtk_tensor *t = NULL;
    if (qtk_quantize(x, sh, 2, &s, &o, &t) != QTK_OK) {
        CHECK_MSG(0, "%s: %s", TYPES[i], qtk_last_error());
        return NULL;
    }
    size_t nb = 0;
    const uint8_t *tb = qtk_tensor_bytes(t, &nb);
    uint8_t *b = malloc(nb);
    memcpy(b, tb, nb);
    if (y) CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, R * C));
    qtk_tensor_free(t);
    return b;
}

static void quantizing(void) {
    enum { R = 4, C = 512 };
    /* weighted SQNR floors on Gaussian values with lognormal column weights (measured, less
     * 0.3 dB; bench/ggml_compare.sh --lattice compares with ggml on larger data) */
    static const double FLOOR[N_TYPES] = {11.6, 12.8, 13.9, 17.2, 19.6, 8.3, 9.3};
    uint64_t ws = 77;
    float w[C], *y = malloc(R * C * sizeof *y);
    for (size_t j = 0; j < C; j++) w[j] = expf(1.2f * trand_normal(&ws));
    uint64_t digest = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtk__gb_fmt *F = fmt_of(i);
        for (int style = 0; style < 6; style++) {
            float *x = values(R * C, 300 + (uint64_t)style, style);
            uint8_t *b = make(i, x, R, C, w, QTK_CALIB_MSE, 1, y);
            if (!b) {
                free(x);
                continue;
            }
            /* every block is a block pack makes again from its unpacking (the codes are on the codebook) */
            for (size_t k = 0; k < R * C / 256; k++) {
                qtk__gb_unpacked u;
                uint8_t again[110];
                qtk__gb_lattice_unpack(F, b + k * F->bytes, &u);
                CHECK_MSG(qtk__gb_lattice_pack(F, &u, again) && memcmp(again, b + k * F->bytes, F->bytes) == 0,
                          "%s style %d block %zu: not a codebook block", TYPES[i], style, k);
            }
            bool finite = true;
            for (size_t k = 0; k < R * C; k++) finite &= isfinite(y[k]) != 0;
            CHECK_MSG(finite, "%s style %d: non-finite values", TYPES[i], style);
            if (style == 0) {
                double db = wsqnr(x, y, w, R * C, C);
                CHECK_MSG(db >= FLOOR[i], "%s: weighted SQNR %.3f dB < %.1f", TYPES[i], db, FLOOR[i]);
                for (size_t k = 0; k < R * C / 256 * F->bytes; k++) digest = (digest ^ b[k]) * 0x100000001b3ull;
                /* the same bytes on 2 and 3 threads */
                for (int th = 2; th <= 3; th++) {
                    uint8_t *b2 = make(i, x, R, C, w, QTK_CALIB_MSE, th, NULL);
                    CHECK_MSG(b2 && memcmp(b, b2, R * C / 256 * F->bytes) == 0, "%s: bytes differ on %d threads", TYPES[i], th);
                    free(b2);
                }
            }
            if (style == 1 || style == 2) CHECK_MSG(wsqnr(x, y, w, R * C, C) > 3.0, "%s style %d", TYPES[i], style);
            if (style == 3) /* zero blocks decode to 0 exactly */
                for (size_t r = 0; r < R * C; r += 3 * 256) {
                    bool zero = true;
                    for (size_t k = 0; k < 256; k++) zero &= y[r + k] == 0.0f;
                    CHECK_MSG(zero, "%s: a zero block at %zu is not zero", TYPES[i], r);
                }
            free(b);
            free(x);
        }
        /* without weights: refused where ggml refuses, else the plain squared error; minmax too */
        float *x = values(R * C, 300, 0);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(TYPES[i], &s));
        size_t sh[2] = {R, C};
        qtk_quantize_options o = {.calibration = QTK_CALIB_MSE};
        qtk_tensor *t = NULL;
        bool needs = F->f == QTK__GF_IQ2_XXS || F->f == QTK__GF_IQ2_XS || F->f == QTK__GF_IQ1_S;
        if (needs) {
            char want[128];
            snprintf(want, sizeof want, "quantizing to %s (ggml %s) needs an importance matrix", TYPES[i], GGML[i]);
            CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_ARG, want);
            o.calibration = QTK_CALIB_MINMAX;
            CHECK_ERR(qtk_quantize(x, sh, 2, &s, &o, &t), QTK_E_ARG, want);
        } else {
            uint8_t *bm = make(i, x, R, C, NULL, QTK_CALIB_MSE, 1, y);
            double mse = wsqnr(x, y, NULL, R * C, C);
            uint8_t *bx = make(i, x, R, C, NULL, QTK_CALIB_MINMAX, 1, y);
            double mm = wsqnr(x, y, NULL, R * C, C);
            CHECK_MSG(mse > mm && mm > 0.0, "%s: mse %.3f dB, minmax %.3f dB", TYPES[i], mse, mm);
            free(bm), free(bx);
        }
        free(x);
    }
    /* pinned: the bytes are the same on every platform (scalar C, no libm in the search) */
    CHECK_MSG(digest == 0xa913ed48157363eaull, "quantized bytes digest %016llx", (unsigned long long)digest);
    free(y);
}

static void errors(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("iq2_xs", &s));
    float x[512] = {0};
    size_t sh[2] = {2, 256}, bad[2] = {2, 200}, row[1] = {512};
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_quantize(x, bad, 2, &s, NULL, &t), QTK_E_SHAPE, "not a multiple of 256");
    CHECK_ERR(qtk_quantize(x, sh, 2, &s, NULL, &t), QTK_E_ARG, "quantizing to iq2_xs (ggml IQ2_XS) needs an importance matrix");
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtk__gb_fmt *F = fmt_of(i);
        if (!F) continue;
        uint8_t b[2 * 110];
        random_block(F, b);
        random_block(F, b + F->bytes);
        if (F->f == QTK__GF_IQ1_M) b[F->bytes + 53] |= 0xc0, b[F->bytes + 55] = (uint8_t)(b[F->bytes + 55] | 0x70);
        else b[F->bytes + 1] = 0x7e;
        CHECK_OK(qtk_scheme_parse(TYPES[i], &s));
        CHECK_ERR(qtk_tensor_from_bytes(b, 2 * F->bytes, row, 1, &s, &t), QTK_E_VALUE, "block 1 (row 0, block 1 of the row");
        CHECK_ERR(qtk_tensor_from_bytes(b, 2 * F->bytes - 1, row, 1, &s, &t), QTK_E_LENGTH, "");
    }
}

static void start(void) {
    tmp_dir_make();
    snprintf(data_dir, sizeof data_dir, "%s", QTK_TEST_DATA_DIR "/lattice");
}
static void finish(void) { tmp_dir_remove(); }

TEST_MAIN("lattice", T(start), T(schemes), T(grids_structure), T(grids_vs_ggml), T(pack_inverts_unpack), T(hand_blocks),
          T(ggml_file), T(matmul), T(quantizing), T(errors), T(finish))
