/* test_gguf.c — GGUF without ggml's files: the hand-derived bytes of GGUF.md §1.10 (a whole
 * file) and §2.16/§3.3 (blocks in ggml's and qtk's byte orders), files qtk's writer makes read
 * back by qtk's reader for every scheme family it writes (and refused for those it cannot),
 * the hinted types (Q5_0, TQ1_0 with every trit pattern, Q1_0, Q8_K, Q6_K) and their
 * data-dependent errors, KV values of every kind through their text form, and malformed files —
 * truncated at every byte, hostile counts, bad ids, overlapping and misaligned offsets, bad
 * UTF-8 — each a precise error. Buffers are exact-size copies so ASan sees any overread. */
#include "ckpt_util.h"

#include "common/internal.h"
#include "gguf/gguf.h"

/* ---- building GGUF files by hand ---- */

static void g_u32(cbuf *b, uint32_t v) {
    uint8_t x[4];
    qtk__st32(x, v);
    cb_raw(b, x, 4);
}
static void g_u64(cbuf *b, uint64_t v) {
    g_u32(b, (uint32_t)v);
    g_u32(b, (uint32_t)(v >> 32));
}
static void g_strn(cbuf *b, const char *s, size_t n) {
    g_u64(b, n);
    if (n) cb_raw(b, s, n);
}
static void g_str(cbuf *b, const char *s) { g_strn(b, s, strlen(s)); }
static void g_header(cbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    cb_raw(b, "GGUF", 4);
    g_u32(b, version);
    g_u64(b, n_tensors);
    g_u64(b, n_kv);
}
static void g_kv_u32(cbuf *b, const char *key, uint32_t v) {
    g_str(b, key);
    g_u32(b, 4);
    g_u32(b, v);
}
static void g_kv_str(cbuf *b, const char *key, const char *v) {
    g_str(b, key);
    g_u32(b, 8);
    g_str(b, v);
}
/* ne in ggml order (innermost first) */
static void g_info(cbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    g_str(b, name);
    g_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) g_u64(b, ne[i]);
    g_u32(b, type);
    g_u64(b, off);
}
static void g_pad(cbuf *b, size_t align) {
    static const uint8_t z[256];
    size_t n = (align - b->n % align) % align;
    if (n) cb_raw(b, z, n);
}

/* Opens an exact-size copy of b[0..n); the copy lives while *c does (freed by close_bytes). */
static uint8_t *held;
static qtk_status open_bytes(const uint8_t *b, size_t n, qtk_ckpt **c) {
    held = malloc(n ? n : 1);
    if (n) memcpy(held, b, n);
    qtk_status st = qtk_ckpt_open_memory(held, n, "t.gguf", NULL, c);
    if (st) {
        free(held);
        held = NULL;
    }
    return st;
}
static void close_bytes(qtk_ckpt *c) {
    qtk_ckpt_close(c);
    free(held);
    held = NULL;
}
static qtk_status try_open(const uint8_t *b, size_t n) {
    qtk_ckpt *c = NULL;
    qtk_status st = open_bytes(b, n, &c);
    if (!st) close_bytes(c);
    return st;
}

static float *dequant(const qtk_ckpt_tensor *t, const uint8_t *bytes) {
    float *y = malloc((t->numel ? t->numel : 1) * sizeof *y);
    qtk_status st = t->quantized ? qtk_dequantize_bytes(bytes, t->nbytes, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, y, t->numel)
                                 : qtk__elem_to_f32(t->elem, bytes, t->numel, y);
    if (st) {
        TEST_FAILMSG("values of '%s': %s", t->name, qtk_last_error());
        free(y);
        return NULL;
    }
    return y;
}

static bool hex_eq(const uint8_t *b, size_t n, const char *hex) {
    size_t m;
    uint8_t *h = hex_bytes(hex, &m);
    bool ok = m == n && memcmp(b, h, n) == 0;
    if (!ok) {
        char *got = bytes_hex(b, n);
        fprintf(stderr, "  got      %s\n  expected %s\n", got, hex);
        free(got);
    }
    free(h);
    return ok;
}

/* ---- GGUF.md §1.10: a complete 224-byte file ---- */

static void q8_rows(uint8_t *data) {
    /* row 0: d = 1.0, fields -127, -15..14, 127; row 1: d = f16(0x1C08), element 5 = -127 */
    qtk__st16(data, 0x3c00);
    data[2] = 0x81;
    for (int j = 1; j <= 30; j++) data[2 + j] = (uint8_t)(int8_t)(j - 16);
    data[33] = 0x7f;
    memset(data + 34, 0, 34);
    qtk__st16(data + 34, 0x1c08);
    data[36 + 5] = 0x81;
}

static void worked_file(void) {
    cbuf b = {0};
    g_header(&b, 3, 1, 1);
    g_kv_u32(&b, "general.alignment", 32);
    uint64_t ne[2] = {32, 2};
    g_info(&b, "w", 2, ne, 8, 0);
    CHECK_EQ_U(b.n, 98); /* end of infos, as GGUF.md counts */
    g_pad(&b, 32);
    uint8_t data[68];
    q8_rows(data);
    cb_raw(&b, data, 68);
    g_pad(&b, 32);
    CHECK_EQ_U(b.n, 224);
    /* a few bytes as GGUF.md lists them */
    CHECK(hex_eq(b.p, 24, "47 47 55 46 03 00 00 00 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00"));
    CHECK(hex_eq(b.p + 0x31, 8, "04 00 00 00 20 00 00 00"));
    CHECK(hex_eq(b.p + 0x80, 4, "00 3C 81 F1"));
    CHECK(hex_eq(b.p + 0xA2, 8, "08 1C 00 00 00 00 00 81"));

    qtk_ckpt *c = NULL;
    CHECK_OK(open_bytes(b.p, b.n, &c));
    if (c) {
        const qtk__desc *d = qtk__ckpt_desc(c);
        qtk_ckpt_facts fx;
        qtk_ckpt_facts_of(c, &fx);
        CHECK_EQ_U(fx.data_start, 128);
        CHECK(strstr(fx.note, "GGUF v3") && strstr(fx.note, "alignment 32"));
        CHECK(d->n_meta == 1 && strcmp(d->meta[0].key, "general.alignment") == 0 && strcmp(d->meta[0].value, "u32:32") == 0);
        CHECK_EQ_U(d->n_tensors, 1);
        const qtk_ckpt_tensor *t = &d->tensors[0];
        char spec[64];
        qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL);
        CHECK(t->quantized && strcmp(spec, "q8f,block=32:f16,store=native") == 0 && strcmp(t->file_type, "Q8_0") == 0);
        CHECK(t->rank == 2 && t->shape[0] == 2 && t->shape[1] == 32 && t->nbytes == 68 && t->file_bytes == 68);
        CHECK_EQ_U(qtk_ckpt_offset_of(c, 0), 128);
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, 0, &v));
        if (v.data) {
            /* qtk's layout: the 64 fields, then the two f16 scales */
            CHECK(memcmp(v.data, data + 2, 32) == 0 && memcmp(v.data + 32, data + 36, 32) == 0);
            CHECK(hex_eq(v.data + 64, 4, "00 3C 08 1C"));
            float *y = dequant(t, v.data);
            if (y) {
                CHECK_BITS(y[0], -127.0f);
                CHECK_BITS(y[1], -15.0f);
                CHECK_BITS(y[30], 14.0f);
                CHECK_BITS(y[31], 127.0f);
                CHECK_BITS(y[32 + 5], -0.499969482421875f);
                CHECK_BITS(y[32 + 6], 0.0f);
            }
            free(y);
            /* qtk's writer: the same tensor and alignment, plus the two KVs it adds */
            const void *bytes[1] = {v.data};
            CHECK_OK(qtk__ckpt_write(tmp_path("w.gguf"), QTK_CKPT_GGUF, d, bytes, 1));
            cbuf e = {0};
            g_header(&e, 3, 1, 3);
            g_kv_str(&e, "general.architecture", "qtk");
            g_kv_u32(&e, "general.quantization_version", 2);
            g_kv_u32(&e, "general.alignment", 32);
            g_info(&e, "w", 2, ne, 8, 0);
            g_pad(&e, 32);
            cb_raw(&e, data, 68);
            g_pad(&e, 32);
            size_t n = 0;
            uint8_t *got = slurp(tmp_path("w.gguf"), &n);
            CHECK_MSG(got && n == e.n && memcmp(got, e.p, n) == 0, "qtk's file for §1.10 (%zu bytes) differs from the expected %zu", n, e.n);
            free(got);
            free(e.p);
            qtk_ckpt_unload(c, &v);
        }
        close_bytes(c);
    }
    free(b.p);
}

/* ---- GGUF.md §2.16 blocks, read into §3.3's qtk bytes, written back as they were ---- */

static const char *q4_0_blk = "00 38 F0 E1 D2 C3 B4 A5 96 87 78 69 5A 4B 3C 2D 1E 0F";
static const char *q4_0_neg = "00 B8 F0 E1 D2 C3 B4 A5 96 87 78 69 5A 4B 3C 2D 1E 0F";
static const char *mxfp4_blk = "7F 00 01 12 13 24 35 46 57 46 09 9A 9B AC BD CE DF";
static const char *iq4nl_blk = "00 20 F0 E1 D2 C3 B4 A5 96 87 78 69 5A 4B 3C 2D 1E 0F";

static void tq2_block(uint8_t *o) {
    static const uint8_t a[3] = {0x18, 0x61, 0x86}, c[3] = {0x86, 0x18, 0x61};
    for (int i = 0; i < 32; i++) o[i] = a[i % 3], o[32 + i] = c[i % 3];
    qtk__st16(o + 64, 0x3c00);
}

typedef struct {
    const char *name;
    uint32_t type;
    uint64_t ne0;
    uint8_t blk[80];
    size_t len;
} blk_case;

static void worked_blocks(void) {
    blk_case k[6] = {{"q4_0", 2, 32, {0}, 0}, {"q4_0.neg", 2, 32, {0}, 0}, {"q8_0", 8, 32, {0}, 0},
                     {"mxfp4", 39, 32, {0}, 0}, {"iq4_nl", 20, 32, {0}, 0}, {"tq2_0", 35, 256, {0}, 0}};
    const char *hex[5] = {q4_0_blk, q4_0_neg, NULL, mxfp4_blk, iq4nl_blk};
    for (int i = 0; i < 5; i++) {
        if (!hex[i]) continue;
        uint8_t *h = hex_bytes(hex[i], &k[i].len);
        memcpy(k[i].blk, h, k[i].len);
        free(h);
    }
    /* Q8_0: d = 1.0, x_0 = -127, x_j = j - 16, x_31 = 127 */
    uint8_t q8[68];
    q8_rows(q8);
    memcpy(k[2].blk, q8, 34);
    k[2].len = 34;
    tq2_block(k[5].blk);
    k[5].len = 66;
    cbuf b = {0};
    g_header(&b, 3, 6, 0);
    uint64_t off = 0, offs[6];
    for (int i = 0; i < 6; i++) {
        uint64_t ne[2] = {k[i].ne0, 1};
        offs[i] = off;
        g_info(&b, k[i].name, 2, ne, k[i].type, off);
        off += (k[i].len + 31) / 32 * 32;
    }
    g_pad(&b, 32);
    size_t data_start = b.n;
    for (int i = 0; i < 6; i++) {
        cb_raw(&b, k[i].blk, k[i].len);
        g_pad(&b, 32);
    }
    qtk_ckpt *c = NULL;
    CHECK_OK(open_bytes(b.p, b.n, &c));
    if (!c) {
        free(b.p);
        return;
    }
    const qtk__desc *d = qtk__ckpt_desc(c);
    CHECK_EQ_U(d->n_tensors, 6);
    /* §3.3's qtk bytes */
    const char *want[5] = {
        "98 BA DC FE 10 32 54 76 67 45 23 01 EF CD AB 89 00 38",
        "98 BA DC FE 10 32 54 76 67 45 23 01 EF CD AB 89 00 B8",
        "81 F1 F2 F3 F4 F5 F6 F7 F8 F9 FA FB FC FD FE FF 00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 7F 00 3C",
        "10 32 54 76 96 BA DC FE 00 11 32 54 04 99 BA DC 7F",
        "10 32 54 76 98 BA DC FE EF CD AB 89 67 45 23 01 00 20"
        " 00 00 FE C2 00 00 D0 C2 00 00 A6 C2 00 00 82 C2 00 00 44 C2 00 00 0C C2 00 00 B0 C1 00 00 20 C1"
        " 00 00 80 3F 00 00 50 41 00 00 C8 41 00 00 18 42 00 00 54 42 00 00 8A 42 00 00 B2 42 00 00 E2 42",
    };
    const void *bytes[6] = {NULL};
    qtk_ckpt_view v[6];
    memset(v, 0, sizeof v);
    for (size_t i = 0; i < 6 && i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        CHECK_OK(qtk_ckpt_load(c, i, &v[i]));
        bytes[i] = v[i].data;
        if (!v[i].data) continue;
        if (i < 5) CHECK_MSG(hex_eq(v[i].data, v[i].len, want[i]), "tensor '%s'", t->name);
        float *y = dequant(t, v[i].data);
        if (y && i == 0) { /* x_j = 0.5 (j - 8), then 0.5 (23 - j) */
            for (int j = 0; j < 32; j++) CHECK_BITS(y[j], 0.5f * (float)(j < 16 ? j - 8 : 23 - j));
        }
        if (y && i == 1) CHECK_BITS(y[0], 4.0f); /* field -8 times d = -0.5 */
        if (y && i == 3) {
            static const float w[32] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, 4, -.5f, -1, -1.5f, -2, -3, -4, -6,
                                        0, 0, .5f, .5f, 1, 1.5f, 2, 3, 2, 0, -.5f, -.5f, -1, -1.5f, -2, -3};
            for (int j = 0; j < 32; j++) CHECK_BITS(y[j], w[j]);
        }
        if (y && i == 4) {
            CHECK_BITS(y[0], -0.9921875f);
            CHECK_BITS(y[7], -0.078125f);
            CHECK_BITS(y[8], 0.0078125f);
            CHECK_BITS(y[15], 0.8828125f);
            CHECK_BITS(y[16], 0.8828125f);
            CHECK_BITS(y[31], -0.9921875f);
        }
        if (y && i == 5) {
            for (int e = 0; e < 256; e++) CHECK_BITS(y[e], (float)(e % 3 - 1));
            /* §3.3: elements 0..3 = -1, 0, +1, -1 -> fields 11 00 01 11 -> 0xD3 */
            CHECK(hex_eq(v[i].data, 3, "D3 34 4D"));
            CHECK(hex_eq(v[i].data + 64, 4, "00 3C 00 3C"));
        }
        free(y);
    }
    /* written back: the same ggml blocks at the same offsets */
    CHECK_OK(qtk__ckpt_write(tmp_path("blocks.gguf"), QTK_CKPT_GGUF, d, bytes, 1));
    qtk_ckpt *c2 = NULL;
    size_t n = 0;
    uint8_t *f = slurp(tmp_path("blocks.gguf"), &n);
    CHECK_OK(qtk_ckpt_open(tmp_path("blocks.gguf"), NULL, &c2));
    if (c2 && f) {
        const qtk__desc *d2 = qtk__ckpt_desc(c2);
        for (size_t i = 0; i < d2->n_tensors && i < 6; i++) {
            size_t at = qtk_ckpt_offset_of(c2, i);
            CHECK_MSG(strcmp(d2->tensors[i].file_type, qtk__gguf_type_name(k[i].type)) == 0, "'%s' written as %s", k[i].name,
                      d2->tensors[i].file_type);
            CHECK_MSG(at + k[i].len <= n && memcmp(f + at, b.p + data_start + offs[i], k[i].len) == 0, "'%s': block bytes differ",
                      k[i].name);
        }
    }
    qtk_ckpt_close(c2);
    free(f);
    for (int i = 0; i < 6; i++) qtk_ckpt_unload(c, &v[i]);
    close_bytes(c);
    free(b.p);
}

/* ---- qtk's writer, qtk's reader: every scheme family GGUF holds ---- */

typedef struct {
    const char *spec;
    int rank;
    size_t shape[5];
    const char *type;      /* ggml type expected in the file; NULL: refused */
    const char *name;
    const char *msg;       /* refused: the message (default "no ggml type holds") */
} family;

static void write_family(const family *fm, uint64_t *seed) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(fm->spec, &s));
    size_t numel = 1;
    for (int i = 0; i < fm->rank; i++) numel *= fm->shape[i];
    float *x = malloc(numel * sizeof *x);
    for (size_t i = 0; i < numel; i++) x[i] = trand_normal(seed) * (i % 37 == 0 ? 8.0f : 1.0f);
    qtk_tensor *q = NULL;
    CHECK_OK(qtk_quantize(x, fm->shape, fm->rank, &s, NULL, &q));
    qtk__desc d;
    qtk__desc_init(&d);
    CHECK_OK(qtk__desc_add_quantized(&d, fm->name, &s, fm->shape, fm->rank, NULL));
    size_t len = 0;
    const void *bytes[1] = {q ? qtk_tensor_bytes(q, &len) : NULL};
    const char *path = tmp_path("family.gguf");
    remove(path);
    if (!fm->type) {
        CHECK_ERR(qtk__ckpt_write(path, QTK_CKPT_GGUF, &d, bytes, 1), QTK_E_UNSUPPORTED, fm->msg ? fm->msg : "no ggml type holds");
        CHECK(!file_exists(path));
    } else if (q) {
        CHECK_OK(qtk__ckpt_write(path, QTK_CKPT_GGUF, &d, bytes, 1));
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(path, NULL, &c));
        if (c) {
            const qtk__desc *r = qtk__ckpt_desc(c);
            bool comp = strcmp(fm->type, "NVFP4") == 0 && qtk_scheme_is_two_level(&s);
            CHECK_MSG(r->n_tensors == 1 && strcmp(r->tensors[0].file_type, fm->type) == 0, "%s: written as %s, expected %s", fm->spec,
                      r->n_tensors ? r->tensors[0].file_type : "-", fm->type);
            qtk_ckpt_facts fx;
            qtk_ckpt_facts_of(c, &fx);
            CHECK_MSG(strstr(fx.note, comp ? "2 tensor infos" : "1 tensor infos") != NULL, "%s: %s", fm->spec, fx.note);
            qtk_ckpt_view v;
            CHECK_OK(qtk_ckpt_load(c, 0, &v));
            float *y0 = dequant(&d.tensors[0], bytes[0]), *y1 = v.data ? dequant(&r->tensors[0], v.data) : NULL;
            size_t bad = 0;
            for (size_t i = 0; y0 && y1 && i < numel; i++) bad += qtk__f32_bits(y0[i]) != qtk__f32_bits(y1[i]);
            CHECK_MSG(y0 && y1 && bad == 0, "%s: %zu values changed through GGUF", fm->spec, bad);
            free(y0);
            free(y1);
            qtk_ckpt_unload(c, &v);
            qtk_ckpt_close(c);
        }
    }
    qtk_tensor_free(q);
    qtk__desc_free(&d);
    free(x);
}

static void writer_families(void) {
    static const family fams[] = {
        {"q8f,block=32:f16", 2, {3, 128}, "Q8_0", "a", NULL},
        {"q8s,block=64:f16,store=native", 2, {2, 192}, "Q8_0", "a", NULL},
        {"q8s,tensor=f16", 3, {2, 2, 64}, "Q8_0", "a", NULL},
        {"q8f,block=2x32:f16", 2, {4, 96}, "Q8_0", "a", NULL},
        {"q8s,block=*:f16", 2, {3, 96}, "Q8_0", "a", NULL},
        {"q4f,block=32:f16,store=u32:1", 2, {16, 64}, "Q4_0", "a", NULL},
        {"q4s,block=128:f16,store=native", 4, {2, 1, 2, 256}, "Q4_0", "a", NULL},
        {"q4f,block=32:f16,store=packed", 1, {160}, "Q4_0", "a", NULL},
        {"q4f,table=iq4nl,block=32:f16", 2, {5, 64}, "IQ4_NL", "a", NULL},
        {"mxfp4", 2, {3, 64}, "MXFP4", "a", NULL},
        {"e2m1,block=32:ue8m0,store=native", 2, {2, 96}, "MXFP4", "a", NULL},
        {"nvfp4", 2, {4, 128}, "NVFP4", "blk.0.ffn_up.weight", NULL},
        {"nvfp4", 2, {4, 64}, "NVFP4", "proj", NULL},
        {"e2m1,block=16:ue4m3,store=packed:0", 2, {2, 64}, "NVFP4", "a", NULL},
        {"q2s,block=64:f16", 2, {3, 128}, "Q2_0", "a", NULL},
        {"q2s,block=128:f16,store=native", 2, {2, 256}, "Q2_0", "a", NULL},
        /* no lossless ggml type */
        {"nf4", 2, {2, 128}, NULL, "a", NULL},
        {"e4m3", 2, {2, 64}, NULL, "a", NULL},
        {"mxfp8", 2, {2, 64}, NULL, "a", NULL},
        {"q8s,block=32:f32", 2, {2, 64}, NULL, "a", NULL},
        {"q8s,block=32:bf16", 2, {2, 64}, NULL, "a", NULL},
        {"q4f,block=16:f16", 2, {2, 64}, NULL, "a", NULL},
        {"q8s,block=32:f16", 2, {2, 48}, NULL, "a", NULL},   /* a ragged edge block */
        {"q2f,block=64:f16", 2, {2, 64}, NULL, "a", NULL},
        {"nvfp4", 2, {2, 96}, NULL, "a", NULL},              /* NVFP4 needs the last dim % 64 */
        {"q8s,block=32x1:f16", 2, {64, 32}, NULL, "a", NULL}, /* blocks across rows */
        {"q8s,block=32:f16", 5, {1, 1, 1, 2, 32}, NULL, "a", "rank 5: GGUF tensors have at most 4 dims"},
    };
    uint64_t seed = 42;
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) write_family(&fams[i], &seed);
}

/* raw tensors, a scalar, metadata, burnpack scalars and parameter ids */
static void writer_raw_and_meta(void) {
    qtk__desc d;
    qtk__desc_init(&d);
    static const qtk_elem elems[] = {QTK_ELEM_F32, QTK_ELEM_F16, QTK_ELEM_BF16, QTK_ELEM_F64, QTK_ELEM_I8, QTK_ELEM_I16,
                                     QTK_ELEM_I32, QTK_ELEM_I64, QTK_ELEM_FLEX32};
    static const char *types[] = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "F32"};
    const size_t n = sizeof elems / sizeof elems[0];
    uint8_t *bytes[16];
    size_t shape[3] = {2, 3, 5};
    uint64_t seed = 7;
    for (size_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%zu", i);
        qtk_ckpt_tensor *t;
        CHECK_OK(qtk__desc_add_raw(&d, name, elems[i], shape, 1 + (int)(i % 3), &t));
        bytes[i] = malloc(t->nbytes);
        for (size_t k = 0; k < t->nbytes; k++) bytes[i][k] = (uint8_t)trand_u64(&seed);
        if (elems[i] == QTK_ELEM_F32 || elems[i] == QTK_ELEM_FLEX32)
            for (size_t k = 0; k < t->numel; k++) qtk__st32(bytes[i] + 4 * k, qtk__f32_bits((float)k));
        t->has_param_id = i == 2;
        t->param_id = 0xfedcba9876543210ull;
    }
    size_t none[1];
    CHECK_OK(qtk__desc_add_raw(&d, "scalar", QTK_ELEM_F32, none, 0, NULL));
    bytes[n] = malloc(4);
    qtk__st32(bytes[n], qtk__f32_bits(1.5f));
    CHECK_OK(qtk__desc_add_meta(&d, "general.name", "a qtk test"));
    CHECK_OK(qtk__desc_add_meta(&d, "format", "pt"));
    CHECK_OK(qtk__desc_add_meta(&d, "ctx", "u32:4096"));
    CHECK_OK(qtk__desc_add_meta(&d, "weird", "u8:not a number"));
    CHECK_OK(qtk__desc_add_meta(&d, "qtk:file_type:t0", "Q8_0")); /* bookkeeping: not a KV */
    qtk_ckpt_scalar sc[4] = {{.name = "epoch", .kind = QTK_SCALAR_INT, .i = -3},
                             {.name = "step", .kind = QTK_SCALAR_UINT, .u = 1ull << 40},
                             {.name = "lr", .kind = QTK_SCALAR_FLOAT, .f = 0.1},
                             {.name = "done", .kind = QTK_SCALAR_BOOL, .b = true}};
    for (int i = 0; i < 4; i++) CHECK_OK(qtk__desc_add_scalar(&d, &sc[i]));
    CHECK_OK(qtk__ckpt_write(tmp_path("raw.gguf"), QTK_CKPT_GGUF, &d, (const void *const *)bytes, 1));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(tmp_path("raw.gguf"), NULL, &c));
    if (c) {
        const qtk__desc *r = qtk__ckpt_desc(c);
        CHECK_EQ_U(r->n_tensors, n + 1);
        for (size_t i = 0; i < n && i < r->n_tensors; i++) {
            const qtk_ckpt_tensor *t = &r->tensors[i];
            CHECK_MSG(strcmp(t->file_type, types[i]) == 0, "t%zu is %s", i, t->file_type);
            CHECK(t->rank == 1 + (int)(i % 3) && t->shape[0] == 2);
            CHECK(t->has_param_id == (i == 2) && (i != 2 || t->param_id == 0xfedcba9876543210ull));
            qtk_ckpt_view v;
            CHECK_OK(qtk_ckpt_load(c, i, &v));
            CHECK(v.data && v.len == d.tensors[i].nbytes && memcmp(v.data, bytes[i], v.len) == 0);
            qtk_ckpt_unload(c, &v);
        }
        if (r->n_tensors == n + 1) /* a scalar is written as [1] */
            CHECK(r->tensors[n].rank == 1 && r->tensors[n].shape[0] == 1 && r->tensors[n].elem == QTK_ELEM_F32);
        const char *mk[5][2] = {{"general.architecture", "qtk"}, {"general.name", "a qtk test"}, {"format", "pt"},
                                {"ctx", "u32:4096"}, {"weird", "str:\"u8:not a number\""}};
        CHECK_EQ_U(r->n_meta, 5);
        for (size_t i = 0; i < 5 && i < r->n_meta; i++)
            CHECK_MSG(strcmp(r->meta[i].key, mk[i][0]) == 0 && strcmp(r->meta[i].value, mk[i][1]) == 0, "meta %zu: %s = %s", i,
                      r->meta[i].key, r->meta[i].value);
        CHECK_EQ_U(r->n_scalars, 4);
        for (size_t i = 0; i < 4 && i < r->n_scalars; i++) {
            const qtk_ckpt_scalar *s = &r->scalars[i];
            CHECK(strcmp(s->name, sc[i].name) == 0 && s->kind == sc[i].kind && s->i == sc[i].i && s->u == sc[i].u &&
                  s->f == sc[i].f && s->b == sc[i].b);
        }
        qtk_ckpt_close(c);
    }
    /* element types GGUF has no type for; ranks above 4; long names */
    qtk__desc e;
    qtk__desc_init(&e);
    CHECK_OK(qtk__desc_add_raw(&e, "u8", QTK_ELEM_U8, shape, 1, NULL));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_UNSUPPORTED,
              "tensor 'u8': GGUF has no type for U8 elements");
    qtk__desc_free(&e);
    qtk__desc_init(&e);
    size_t s5[5] = {1, 1, 1, 1, 2};
    CHECK_OK(qtk__desc_add_raw(&e, "r5", QTK_ELEM_F32, s5, 5, NULL));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_UNSUPPORTED,
              "rank 5: GGUF tensors have at most 4 dims");
    qtk__desc_free(&e);
    qtk__desc_init(&e);
    char long_name[80];
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    CHECK_OK(qtk__desc_add_raw(&e, long_name, QTK_ELEM_F32, shape, 1, NULL));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_UNSUPPORTED,
              "is 64 bytes; GGUF (ggml) names are at most 63");
    qtk__desc_free(&e);
    /* bad metadata for GGUF */
    qtk__desc_init(&e);
    CHECK_OK(qtk__desc_add_raw(&e, "a", QTK_ELEM_F32, shape, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&e, "general.alignment", "u32:24"));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_ARG,
              "it must be u32:N with N a power of two");
    qtk__desc_free(&e);
    qtk__desc_init(&e);
    CHECK_OK(qtk__desc_add_raw(&e, "a", QTK_ELEM_F32, shape, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&e, "", "x"));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_ARG, "a metadata key is empty");
    qtk__desc_free(&e);
    qtk__desc_init(&e);
    CHECK_OK(qtk__desc_add_raw(&e, "a", QTK_ELEM_F32, shape, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&e, "qtk.scalar.epoch", "x"));
    CHECK_OK(qtk__desc_add_scalar(&e, &sc[0]));
    CHECK_ERR(qtk__ckpt_write(tmp_path("bad.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1), QTK_E_ARG,
              "the metadata key 'qtk.scalar.epoch' would be written twice");
    qtk__desc_free(&e);
    /* a 64-byte alignment from metadata is used */
    qtk__desc_init(&e);
    CHECK_OK(qtk__desc_add_raw(&e, "a", QTK_ELEM_F32, shape, 1, NULL));
    CHECK_OK(qtk__desc_add_raw(&e, "b", QTK_ELEM_F32, shape, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&e, "general.alignment", "u32:64"));
    CHECK_OK(qtk__ckpt_write(tmp_path("a64.gguf"), QTK_CKPT_GGUF, &e, (const void *const *)bytes, 1));
    CHECK_OK(qtk_ckpt_open(tmp_path("a64.gguf"), NULL, &c));
    if (c) {
        qtk_ckpt_facts fx;
        qtk_ckpt_facts_of(c, &fx);
        CHECK(fx.data_start % 64 == 0 && qtk_ckpt_offset_of(c, 1) == fx.data_start + 64 && fx.file_bytes == fx.data_start + 128);
        qtk_ckpt_close(c);
    }
    qtk__desc_free(&e);
    CHECK(!file_exists(tmp_path("bad.gguf")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
    for (size_t i = 0; i <= n; i++) free(bytes[i]);
    qtk__desc_free(&d);
}

/* ---- types written only when hinted, and what stops them ---- */

/* One quantized tensor from hand-made qtk bytes, written with a hint; returns the status. */
static qtk_status write_hinted(const char *spec, const size_t *shape, int rank, const uint8_t *bytes, const char *hint,
                               const char *path) {
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_ckpt_tensor *t = NULL;
    if (!st) st = qtk__desc_add_quantized(&d, "h", &s, shape, rank, &t);
    if (!st) t->file_type = hint;
    const void *b[1] = {bytes};
    if (!st) st = qtk__ckpt_write(path, QTK_CKPT_GGUF, &d, b, 1);
    qtk__desc_free(&d);
    return st;
}

/* Reads back the one tensor of path: its ggml type and qtk bytes (malloc'ed). */
static uint8_t *read_back(const char *path, const char **type, size_t *len) {
    qtk_ckpt *c = NULL;
    uint8_t *out = NULL;
    *type = "";
    if (qtk_ckpt_open(path, NULL, &c) != QTK_OK) {
        TEST_FAILMSG("open %s: %s", path, qtk_last_error());
        return NULL;
    }
    qtk_ckpt_view v;
    if (qtk_ckpt_load(c, 0, &v) == QTK_OK) {
        out = malloc(v.len);
        memcpy(out, v.data, v.len);
        *len = v.len;
        *type = qtk__ckpt_desc(c)->tensors[0].file_type;
        qtk_ckpt_unload(c, &v);
    } else {
        TEST_FAILMSG("load %s: %s", path, qtk_last_error());
    }
    qtk_ckpt_close(c);
    return out;
}

/* The values of the one tensor of path equal those of bytes in scheme spec (shape sh). */
static bool same_values(const char *path, const char *spec, const size_t *sh, int rank, const uint8_t *bytes, size_t len) {
    qtk_ckpt *c = NULL;
    if (qtk_ckpt_open(path, NULL, &c) != QTK_OK) return false;
    float *y = NULL, *z = NULL;
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, 0);
    bool ok = t != NULL;
    if (ok) {
        y = malloc(t->numel * sizeof *y), z = malloc(t->numel * sizeof *z);
        qtk_scheme s;
        ok = qtk_ckpt_read_values(c, 0, QTK_DTYPE_F32, y, t->numel) == QTK_OK && qtk_scheme_parse(spec, &s) == QTK_OK &&
             qtk_dequantize_bytes(bytes, len, sh, rank, &s, QTK_DTYPE_F32, z, t->numel) == QTK_OK;
        for (size_t i = 0; ok && i < t->numel; i++) ok = qtk__f32_bits(y[i]) == qtk__f32_bits(z[i]);
    }
    free(y);
    free(z);
    qtk_ckpt_close(c);
    return ok;
}

static void hinted_types(void) {
    const char *path = tmp_path("h.gguf");
    const char *type;
    size_t len = 0;
    /* Q5_0 from q8f fields in -16..15 */
    uint8_t q8[64 + 4];
    for (int i = 0; i < 64; i++) q8[i] = (uint8_t)(int8_t)(i % 32 - 16);
    qtk__st16(q8 + 64, 0x3c00);
    qtk__st16(q8 + 66, 0xb800);
    size_t sh[2] = {1, 64};
    CHECK_OK(write_hinted("q8f,block=32:f16,store=native", sh, 2, q8, "Q5_0", path));
    uint8_t *r = read_back(path, &type, &len);
    /* it reads back as q5_0 (ggml's blocks) with the same values */
    CHECK(r && strcmp(type, "Q5_0") == 0 && len == 2 * 22);
    CHECK(same_values(path, "q8f,block=32:f16,store=native", sh, 2, q8, sizeof q8));
    free(r);
    remove(path);
    q8[7] = 16; /* out of Q5_0's range */
    CHECK_ERR(write_hinted("q8f,block=32:f16,store=native", sh, 2, q8, "Q5_0", path), QTK_E_VALUE,
              "cannot be written as Q5_0: the block at row 0, column 0 holds the field 16 at column 7; Q5_0 holds -16..15");
    CHECK(!file_exists(path));
    /* an unknown or unfitting hint falls back to the default type */
    CHECK_OK(write_hinted("q8f,block=32:f16,store=native", sh, 2, q8, "Q6_K", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "Q8_0") == 0 && memcmp(r, q8, len) == 0);
    free(r);
    CHECK_OK(write_hinted("q8f,block=32:f16,store=native", sh, 2, q8, "no such type", path));

    /* TQ1_0: every 5-trit and 4-trit pattern through ggml's base-3 bytes and back */
    enum { NB = 21 };
    size_t shq[2] = {1, 256 * NB};
    uint8_t *q2 = calloc(64 * NB + 4 * NB, 1);
    for (int b = 0; b < NB; b++) {
        int f[256];
        for (int m = 0; m < 48; m++) {
            int v = (b * 48 + m) % 243;
            for (int i = 4; i >= 0; i--, v /= 3) f[m < 32 ? m + 32 * i : 160 + (m - 32) + 16 * i] = v % 3 - 1;
        }
        for (int j = 0; j < 4; j++) {
            int v = (b * 4 + j) % 81;
            for (int i = 3; i >= 0; i--, v /= 3) f[240 + j + 4 * i] = v % 3 - 1;
        }
        for (int e = 0; e < 256; e++) q2[64 * b + e / 4] |= (uint8_t)((f[e] & 3) << (2 * (e % 4)));
        qtk__st16(q2 + 64 * NB + 4 * b, (uint16_t)(0x3c00 + b));
        qtk__st16(q2 + 64 * NB + 4 * b + 2, (uint16_t)(0x3c00 + b));
    }
    CHECK_OK(write_hinted("q2s,block=128:f16", shq, 2, q2, "TQ1_0", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "TQ1_0") == 0 && len == 68 * NB && memcmp(r, q2, len) == 0);
    free(r);
    /* and TQ2_0, Q2_0 from the same fields */
    CHECK_OK(write_hinted("q2s,block=128:f16", shq, 2, q2, "TQ2_0", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "TQ2_0") == 0 && memcmp(r, q2, 68 * NB) == 0);
    free(r);
    CHECK_OK(write_hinted("q2s,block=128:f16", shq, 2, q2, NULL, path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "Q2_0") == 0 && len == 64 * NB + 8 * NB); /* one f16 per 64 now */
    free(r);
    /* TQ1_0 needs one scale per 256 */
    qtk__st16(q2 + 64 * NB + 2, 0x4000);
    CHECK_ERR(write_hinted("q2s,block=128:f16", shq, 2, q2, "TQ1_0", path), QTK_E_VALUE,
              "has two different scales (f16 0x3c00, 0x4000) where TQ1_0 has one per 256 elements");
    /* Q1_0 holds +-d only */
    CHECK_ERR(write_hinted("q2s,block=128:f16", shq, 2, q2, "Q1_0", path), QTK_E_VALUE, "Q1_0 holds only -1 and +1");
    memset(q2, 0x55, 64 * NB); /* every field +1 */
    CHECK_OK(write_hinted("q2s,block=128:f16", shq, 2, q2, "Q1_0", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "Q1_0") == 0 && memcmp(r, q2, len) == 0);
    free(r);
    free(q2);

    /* Q8_K: an f32 scale per 256 (written twice in qtk), bsums recomputed */
    uint8_t k8[256 + 8];
    for (int i = 0; i < 256; i++) k8[i] = (uint8_t)(int8_t)(i - 128);
    qtk__st32(k8 + 256, qtk__f32_bits(-0.01f));
    qtk__st32(k8 + 260, qtk__f32_bits(-0.01f));
    size_t s256[2] = {1, 256};
    CHECK_OK(write_hinted("q8f,block=128:f32,store=native", s256, 2, k8, "Q8_K", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "Q8_K") == 0 && len == sizeof k8 && memcmp(r, k8, len) == 0);
    free(r);
    size_t n = 0;
    uint8_t *f = slurp(path, &n);
    if (f && n >= 292) { /* the block is the last 292 + 28 padding bytes: bsums[0] = sum(-128..-113) = -1928 */
        const uint8_t *blk = f + n - 320;
        CHECK_EQ_U(qtk__ld16(blk + 260), (uint16_t)(int16_t)-1928);
    }
    free(f);

    /* Q6_K: sub-scales d x int8 with d an f16 */
    uint8_t k6[256 + 64];
    for (int i = 0; i < 256; i++) k6[i] = (uint8_t)(int8_t)((i * 7) % 64 - 32);
    for (int s = 0; s < 16; s++) qtk__st32(k6 + 256 + 4 * s, qtk__f32_bits(0.0078125f * (float)(s == 3 ? -128 : s * 5 - 40)));
    CHECK_OK(write_hinted("q8f,block=16:f32,store=native", s256, 2, k6, "Q6_K", path));
    r = read_back(path, &type, &len);
    CHECK(r && strcmp(type, "Q6_K") == 0 && len == 210);
    CHECK(same_values(path, "q8f,block=16:f32,store=native", s256, 2, k6, sizeof k6));
    free(r);
    remove(path);
    qtk__st32(k6 + 256, qtk__f32_bits(0.1f)); /* not f16 x integer with the others */
    CHECK_ERR(write_hinted("q8f,block=16:f32,store=native", s256, 2, k6, "Q6_K", path), QTK_E_VALUE,
              "that are not one f16 times integers in -128..127");
    CHECK(!file_exists(path));
}

/* ---- KV values of every kind, read as typed text and written back ---- */

static void kv_values(void) {
    cbuf b = {0};
    g_header(&b, 2, 0, 9);
    g_kv_str(&b, "s.tagged", "u8:5");
    g_str(&b, "s.bytes");
    g_u32(&b, 8);
    g_strn(&b, "a\0b\xff\"\\\n", 7);
    g_str(&b, "b.two");
    g_u32(&b, 7);
    cb_raw(&b, "\x02", 1);
    g_str(&b, "a.empty");
    g_u32(&b, 9);
    g_u32(&b, 5);
    g_u64(&b, 0);
    g_str(&b, "a.nested");
    g_u32(&b, 9);
    g_u32(&b, 9);
    g_u64(&b, 2);
    g_u32(&b, 0), g_u64(&b, 2), cb_raw(&b, "\x01\x02", 2);
    g_u32(&b, 8), g_u64(&b, 1), g_str(&b, "x");
    g_str(&b, "f.nan");
    g_u32(&b, 6);
    g_u32(&b, 0x7fc00000u);
    g_str(&b, "a.f64");
    g_u32(&b, 9);
    g_u32(&b, 12);
    g_u64(&b, 2);
    double dv[2] = {-0.0, 1e308};
    cb_raw(&b, dv, 16);
    g_str(&b, "a.bool");
    g_u32(&b, 9);
    g_u32(&b, 7);
    g_u64(&b, 2);
    cb_raw(&b, "\x00\x01", 2);
    g_kv_str(&b, "s.empty", "");
    qtk_ckpt *c = NULL;
    CHECK_OK(open_bytes(b.p, b.n, &c)); /* v2, no tensors, no padding after the KVs */
    if (c) {
        const qtk__desc *d = qtk__ckpt_desc(c);
        static const char *want[9][2] = {
            {"s.tagged", "str:\"u8:5\""},
            {"s.bytes", "str:\"a\\u0000b\\xff\\\"\\\\\\n\""},
            {"b.two", "bool:true"},
            {"a.empty", "arr[i32]:[]"},
            {"a.nested", "arr[arr]:[arr[u8]:[1,2],arr[str]:[\"x\"]]"},
            {"f.nan", "f32:nan"},
            {"a.f64", "arr[f64]:[-0,1e+308]"}, /* %.17g, trailing zeros dropped */
            {"a.bool", "arr[bool]:[false,true]"},
            {"s.empty", ""},
        };
        CHECK_EQ_U(d->n_meta, 9);
        for (size_t i = 0; i < 9 && i < d->n_meta; i++)
            CHECK_MSG(strcmp(d->meta[i].key, want[i][0]) == 0 && strcmp(d->meta[i].value, want[i][1]) == 0, "KV %zu: %s = %s", i,
                      d->meta[i].key, d->meta[i].value);
        qtk_ckpt_facts fx;
        qtk_ckpt_facts_of(c, &fx);
        CHECK_EQ_U(fx.data_start, b.n);
        /* written back: the same values (the nested array is left out, ggml cannot read it) */
        CHECK_OK(qtk__ckpt_write(tmp_path("kv.gguf"), QTK_CKPT_GGUF, d, NULL, 1));
        qtk_ckpt *c2 = NULL;
        CHECK_OK(qtk_ckpt_open(tmp_path("kv.gguf"), NULL, &c2));
        if (c2) {
            const qtk__desc *d2 = qtk__ckpt_desc(c2);
            CHECK_EQ_U(d2->n_meta, 9); /* + general.architecture, - a.nested */
            for (size_t i = 0, j = 1; i < 9 && j < d2->n_meta; i++) {
                if (i == 4) continue;
                CHECK_MSG(strcmp(d2->meta[j].key, want[i][0]) == 0 && strcmp(d2->meta[j].value, want[i][1]) == 0, "KV %zu: %s = %s", j,
                          d2->meta[j].key, d2->meta[j].value);
                j++;
            }
            qtk_ckpt_close(c2);
        }
        close_bytes(c);
    }
    free(b.p);
}

/* ---- malformed files ---- */

/* A valid file with every KV kind and three tensors; fields' positions for the edits below. */
typedef struct {
    cbuf b;
    size_t key0, type0, arr_type, arr_count, key3, name1, name2, ndims1, ne1, type1, off1, off2, end_data;
} base_file;

static void make_base(base_file *f) {
    memset(f, 0, sizeof *f);
    cbuf *b = &f->b;
    g_header(b, 3, 3, 6);
    f->key0 = b->n;
    g_kv_str(b, "general.architecture", "x");
    f->type0 = f->key0 + 8 + 20;
    g_kv_u32(b, "general.alignment", 32);
    g_str(b, "k.arr");
    g_u32(b, 9);
    f->arr_type = b->n;
    g_u32(b, 8);
    f->arr_count = b->n;
    g_u64(b, 2);
    g_str(b, "ab");
    g_str(b, "");
    f->key3 = b->n;
    g_str(b, "k.f64");
    g_u32(b, 12);
    g_u64(b, 0);
    g_str(b, "k.nested");
    g_u32(b, 9);
    g_u32(b, 9);
    g_u64(b, 1);
    g_u32(b, 4), g_u64(b, 1), g_u32(b, 7);
    g_str(b, "k.i8");
    g_u32(b, 1);
    cb_raw(b, "\xff", 1);
    uint64_t ne_a[2] = {3, 2}, ne_b[1] = {64}, ne_c[1] = {1};
    g_info(b, "a", 2, ne_a, 0, 0); /* F32 [2, 3]: 24 bytes */
    f->name1 = b->n;
    f->ndims1 = f->name1 + 8 + 8;
    f->ne1 = f->ndims1 + 4;
    f->type1 = f->ne1 + 8;
    f->off1 = f->type1 + 4;
    g_info(b, "b.weight", 1, ne_b, 8, 32); /* Q8_0 [64]: 68 bytes */
    f->name2 = b->n;
    f->off2 = b->n + 8 + 8 + 4 + 8 + 4;
    g_info(b, "c.weight", 1, ne_c, 0, 128);
    g_pad(b, 32);
    uint8_t data[132] = {0};
    for (int i = 0; i < 6; i++) qtk__st32(data + 4 * i, qtk__f32_bits((float)i));
    qtk__st16(data + 32, 0x3c00);
    qtk__st16(data + 66, 0x3c00);
    qtk__st32(data + 128, qtk__f32_bits(2.0f));
    cb_raw(b, data, 132);
    f->end_data = b->n;
    g_pad(b, 32);
}

static void patch32(base_file *f, size_t at, uint32_t v) { qtk__st32(f->b.p + at, v); }
static void patch64(base_file *f, size_t at, uint64_t v) {
    qtk__st32(f->b.p + at, (uint32_t)v);
    qtk__st32(f->b.p + at + 4, (uint32_t)(v >> 32));
}

static void truncated_everywhere(void) {
    base_file f;
    make_base(&f);
    qtk_ckpt *c = NULL;
    CHECK_OK(open_bytes(f.b.p, f.b.n, &c));
    if (c) {
        const qtk__desc *d = qtk__ckpt_desc(c);
        CHECK_EQ_U(d->n_tensors, 3);
        CHECK_EQ_U(d->n_meta, 6);
        if (d->n_meta == 6) CHECK(strcmp(d->meta[4].value, "arr[arr]:[arr[u32]:[7]]") == 0);
        close_bytes(c);
    }
    size_t bad = 0, worded = 0;
    for (size_t n = 0; n < f.end_data; n++) {
        qtk_status st = try_open(f.b.p, n);
        bad += st == QTK_E_FORMAT;
        worded += strstr(qtk_last_error(), "truncated") || strstr(qtk_last_error(), "cannot fit");
        if (st != QTK_E_FORMAT) TEST_FAILMSG("prefix of %zu bytes: %s (%s)", n, qtk_status_name(st), qtk_last_error());
    }
    CHECK_EQ_U(bad, f.end_data);
    CHECK_EQ_U(worded, f.end_data);
    /* the padding after the last tensor is not needed */
    for (size_t n = f.end_data; n <= f.b.n; n++) CHECK_OK(try_open(f.b.p, n));
    free(f.b.p);
}

typedef void (*edit_fn)(base_file *f);
typedef struct {
    const char *what;
    void (*edit)(base_file *f);
    qtk_status st;
    const char *msg;
} bad_case;

static void e_magic(base_file *f) { memcpy(f->b.p, "GGUG", 4); }
static void e_fugg(base_file *f) { memcpy(f->b.p, "FUGG", 4); }
static void e_v0(base_file *f) { patch32(f, 4, 0); }
static void e_v1(base_file *f) { patch32(f, 4, 1); }
static void e_v4(base_file *f) { patch32(f, 4, 4); }
static void e_be(base_file *f) { patch32(f, 4, 0x03000000u); }
static void e_nkv_neg(base_file *f) { patch64(f, 16, 1ull << 63); }
static void e_nkv_huge(base_file *f) { patch64(f, 16, 1ull << 40); }
static void e_nt_huge(base_file *f) { patch64(f, 8, 0x0fffffffffffffffull); }
static void e_key_empty(base_file *f) { patch64(f, f->key0, 0); }
static void e_key_long(base_file *f) { patch64(f, f->key0, 1ull << 31); }
static void e_key_utf8(base_file *f) { f->b.p[f->key0 + 8 + 3] = 0xc3; }
static void e_key_dup(base_file *f) { memcpy(f->b.p + f->key3 + 8, "k.arr", 5); }
static void e_kv_type(base_file *f) { patch32(f, f->type0, 13); }
static void e_arr_type(base_file *f) { patch32(f, f->arr_type, 13); }
static void e_arr_count(base_file *f) { patch64(f, f->arr_count, (1ull << 30) + 1); }
static void e_arr_short(base_file *f) { patch64(f, f->arr_count, 1ull << 29); }
static void e_name_utf8(base_file *f) { f->b.p[f->name1 + 8 + 1] = 0xff; }
static void e_name_dup(base_file *f) { memcpy(f->b.p + f->name2 + 8, "b.weight", 8); }
static void e_ndims(base_file *f) { patch32(f, f->ndims1, 5); }
static void e_ne_neg(base_file *f) { patch64(f, f->ne1, 1ull << 63); }
static void e_type(base_file *f) { patch32(f, f->type1, 43); }
static void e_type_removed(base_file *f) { patch32(f, f->type1, 4); }
static void e_type_ne0(base_file *f) { patch32(f, f->type1, 23); } /* IQ4_XS: blocks of 256 */
static void e_misaligned(base_file *f) { patch64(f, f->off1, 40); }
static void e_overlap(base_file *f) { patch64(f, f->off2, 96); }
static void e_beyond(base_file *f) { patch64(f, f->off2, 1u << 20); }
static void e_align_type(base_file *f) { patch32(f, f->type0 + 4 + 8 + 1 + 8 + 17, 5); }
static void e_align_24(base_file *f) { patch32(f, f->type0 + 4 + 8 + 1 + 8 + 17 + 4, 24); }

static void malformed(void) {
    static const bad_case cases[] = {
        {"magic", e_magic, QTK_E_FORMAT, "magic is 47 47 55 47, not \"GGUF\""},
        {"FUGG", e_fugg, QTK_E_UNSUPPORTED, "big-endian GGUF file; qtk reads little-endian GGUF only"},
        {"version 0", e_v0, QTK_E_FORMAT, "version 0 is not a GGUF version"},
        {"version 1", e_v1, QTK_E_UNSUPPORTED, "GGUF version 1 (2023, 32-bit counts) is no longer supported"},
        {"version 4", e_v4, QTK_E_UNSUPPORTED, "GGUF version 4; qtk reads versions 2 and 3"},
        {"big-endian", e_be, QTK_E_UNSUPPORTED, "reads as 0x03000000: a big-endian GGUF file (version 3)"},
        {"n_kv negative", e_nkv_neg, QTK_E_FORMAT, "n_kv = 9223372036854775808 is negative"},
        {"n_kv huge", e_nkv_huge, QTK_E_FORMAT, "n_kv = 1099511627776: that many KV records"},
        {"n_tensors huge", e_nt_huge, QTK_E_FORMAT, "n_tensors = 1152921504606846975: that many tensor infos"},
        {"empty key", e_key_empty, QTK_E_FORMAT, "KV 0 (at offset 24): the key is empty"},
        {"long key", e_key_long, QTK_E_FORMAT, "a length of 2147483648 bytes at offset 24 exceeds GGUF's limit of 1 GiB"},
        {"key utf-8", e_key_utf8, QTK_E_FORMAT, "KV 0 (at offset 24): the key (20 bytes) is not valid UTF-8"},
        {"duplicate key", e_key_dup, QTK_E_FORMAT, "the key 'k.arr' appears twice (KV 2 and KV 3)"},
        {"KV type", e_kv_type, QTK_E_FORMAT, "KV 0 'general.architecture': unknown value type 13"},
        {"array type", e_arr_type, QTK_E_FORMAT, "KV 2 'k.arr': array of unknown element type 13"},
        {"array count", e_arr_count, QTK_E_FORMAT, "an array of 1073741825 elements at offset"},
        {"array short", e_arr_short, QTK_E_FORMAT, "truncated: KV 2 'k.arr': an array of 536870912 str elements needs at least"},
        {"name utf-8", e_name_utf8, QTK_E_FORMAT, "the name (8 bytes at offset"},
        {"duplicate name", e_name_dup, QTK_E_FORMAT, "the tensor name 'b.weight' appears twice (tensor infos 1 and 2)"},
        {"n_dims", e_ndims, QTK_E_FORMAT, "n_dims = 5 at offset"},
        {"ne negative", e_ne_neg, QTK_E_FORMAT, "ne[0] = 9223372036854775808 is negative"},
        {"type id", e_type, QTK_E_FORMAT, "tensor 'b.weight': unknown ggml type 43"},
        {"removed type", e_type_removed, QTK_E_FORMAT, "ggml type 4 was removed from ggml"},
        {"ne[0] % block", e_type_ne0, QTK_E_SHAPE, "ne[0] = 64 is not a multiple of IQ4_XS's block of 256 elements"},
        {"misaligned", e_misaligned, QTK_E_FORMAT, "tensor 'b.weight': data offset 40 is not a multiple of the alignment 32"},
        {"overlap", e_overlap, QTK_E_FORMAT, "tensors 'b.weight' ["},
        {"beyond", e_beyond, QTK_E_FORMAT, "truncated: tensor 'c.weight' (F32, 4 bytes at data offset 1048576"},
        {"alignment type", e_align_type, QTK_E_FORMAT, "KV 1 'general.alignment' has type i32; it must be u32"},
        {"alignment 24", e_align_24, QTK_E_FORMAT, "KV 1 'general.alignment' = 24 is not a power of two"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        base_file f;
        make_base(&f);
        cases[i].edit(&f);
        qtk_status st = try_open(f.b.p, f.b.n);
        CHECK_MSG(st == cases[i].st && strstr(qtk_last_error(), cases[i].msg), "%s: got %s '%s', expected %s '%s'", cases[i].what,
                  qtk_status_name(st), qtk_last_error(), qtk_status_name(cases[i].st), cases[i].msg);
        free(f.b.p);
    }
    /* element count overflow; names of 64 bytes; nesting too deep */
    cbuf b = {0};
    uint64_t ne[4] = {1ull << 32, 1ull << 31, 1, 1};
    g_header(&b, 3, 1, 0);
    g_info(&b, "big", 2, ne, 0, 0);
    g_pad(&b, 32);
    CHECK_ERR(try_open(b.p, b.n), QTK_E_SHAPE, "overflows int64");
    free(b.p);
    b = (cbuf){0};
    char name[65];
    memset(name, 'n', 64);
    name[64] = '\0';
    g_header(&b, 3, 1, 0);
    g_info(&b, name, 1, ne + 2, 0, 0);
    g_pad(&b, 32);
    cb_raw(&b, "\0\0\0\0", 4);
    CHECK_ERR(try_open(b.p, b.n), QTK_E_FORMAT, "the name is 64 bytes; ggml's limit is 63");
    free(b.p);
    b = (cbuf){0};
    g_header(&b, 3, 0, 1);
    g_str(&b, "deep");
    g_u32(&b, 9);
    for (int i = 0; i < 9; i++) g_u32(&b, 9), g_u64(&b, 1);
    g_u32(&b, 0), g_u64(&b, 0);
    CHECK_ERR(try_open(b.p, b.n), QTK_E_FORMAT, "arrays nested more than 8 deep");
    free(b.p);
}

/* Blocks a qtk scheme cannot hold: errors at load naming the tensor, block and file offset. */
static void bad_blocks(void) {
    struct {
        uint32_t type, ne0, bytes;
        size_t at;
        uint8_t v;
        qtk_status st;
        const char *msg;
    } k[] = {
        {39, 32, 17, 0, 0xff, QTK_E_VALUE, "the E8M0 exponent is 0xff (NaN)"},
        {8, 32, 34, 1, 0x7c, QTK_E_VALUE, "the scale d (f16 0x7c00) is not finite"},
        {35, 256, 66, 5, 0xff, QTK_E_VALUE, "holds code 3 (+2, byte 0xff), which q2s cannot hold and ggml never writes"},
        {42, 64, 18, 5, 0x03, QTK_E_VALUE, "holds code 3 (+2, byte 0x03)"},
        {40, 64, 36, 2, 0xff, QTK_E_VALUE, "a UE4M3 scale byte is 0xff, which ggml reads as 480 (above 448)"},
        {12, 256, 144, 3, 0x7e, QTK_E_VALUE, "dmin (f16 0x7e00) is not finite"},
        {16, 256, 66, 1, 0x7c, QTK_E_VALUE, "d (f16 0x7c00) is not finite"},
        {29, 256, 56, 55, 0x70, QTK_E_VALUE, "d (f16 0x7c00) is not finite"}, /* IQ1_M: d's nibbles in the scale words */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cbuf b = {0};
        uint64_t ne[2] = {k[i].ne0, 2};
        g_header(&b, 3, 1, 0);
        g_info(&b, "x", 2, ne, k[i].type, 0);
        g_pad(&b, 32);
        size_t data = b.n;
        uint8_t *z = calloc(2, k[i].bytes);
        if (k[i].type == 8) qtk__st16(z, 0x3c00);
        if (k[i].type == 29) z[56 + 53] = 0xc0; /* d's bits 8-11 */
        cb_raw(&b, z, 2 * k[i].bytes);
        free(z);
        b.p[data + k[i].bytes + k[i].at] = k[i].v; /* in block 1 */
        char where[128];
        snprintf(where, sizeof where, "tensor 'x': %s block 1 (file offset %zu): ", qtk__gguf_type_name(k[i].type), data + k[i].bytes);
        qtk_ckpt *c = NULL;
        CHECK_OK(open_bytes(b.p, b.n, &c)); /* contents are checked on load */
        if (c) {
            qtk_ckpt_view v;
            qtk_status st = qtk_ckpt_load(c, 0, &v);
            CHECK_MSG(st == k[i].st && strstr(qtk_last_error(), k[i].msg) && strstr(qtk_last_error(), where),
                      "type %u: got %s '%s'", k[i].type, qtk_status_name(st), qtk_last_error());
            if (!st) qtk_ckpt_unload(c, &v);
            close_bytes(c);
        }
        free(b.p);
    }
}

/* Layouts ggml's writer never makes but the format allows: gaps, tensors stored in another
 * order than their infos; n_dims 0; NVFP4 with its companion global under both names. */
static void lenient_layouts(void) {
    cbuf b = {0};
    uint64_t ne3[1] = {3};
    g_header(&b, 3, 3, 0);
    g_info(&b, "late", 1, ne3, 0, 128);
    g_info(&b, "early", 1, ne3, 0, 0);
    g_info(&b, "scalar", 0, NULL, 0, 64);
    g_pad(&b, 32);
    size_t data = b.n;
    uint8_t z[160] = {0};
    cb_raw(&b, z, sizeof z);
    qtk__st32(b.p + data + 64, qtk__f32_bits(5.0f));
    qtk_ckpt *c = NULL;
    CHECK_OK(open_bytes(b.p, b.n - 20, &c)); /* ends where 'late' ends */
    if (c) {
        const qtk__desc *d = qtk__ckpt_desc(c);
        CHECK(d->n_tensors == 3 && strcmp(d->tensors[0].name, "early") == 0 && strcmp(d->tensors[1].name, "scalar") == 0 &&
              strcmp(d->tensors[2].name, "late") == 0);
        CHECK(d->tensors[1].rank == 0 && d->tensors[1].numel == 1);
        close_bytes(c);
    }
    free(b.p);

    /* NVFP4 + companion: "<stem>.scale" first, then "<name>.scale" */
    const char *names[2][2] = {{"blk.0.up.weight", "blk.0.up.scale"}, {"proj", "proj.scale"}};
    for (int k = 0; k < 2; k++) {
        b = (cbuf){0};
        uint64_t ne[1] = {64}, one[1] = {1};
        g_header(&b, 3, 2, 0);
        g_info(&b, names[k][1], 1, one, 0, 64);
        g_info(&b, names[k][0], 1, ne, 40, 0);
        g_pad(&b, 32);
        data = b.n;
        uint8_t blk[96] = {0};
        for (int s = 0; s < 4; s++) blk[s] = 0x38; /* ue4m3 1.0 */
        for (int i = 0; i < 32; i++) blk[4 + i] = 0x72; /* codes 2 (1.0) and 7 (6.0) */
        qtk__st32(blk + 64, qtk__f32_bits(0.25f));
        cb_raw(&b, blk, sizeof blk);
        CHECK_OK(open_bytes(b.p, b.n, &c));
        if (c) {
            const qtk__desc *d = qtk__ckpt_desc(c);
            CHECK_EQ_U(d->n_tensors, 1);
            const qtk_ckpt_tensor *t = &d->tensors[0];
            CHECK(strcmp(t->name, names[k][0]) == 0 && qtk_scheme_is_two_level(&t->scheme) &&
                  strcmp(qtk_scheme_preset_name(&t->scheme) ? qtk_scheme_preset_name(&t->scheme) : "", "nvfp4") == 0);
            qtk_ckpt_view v;
            CHECK_OK(qtk_ckpt_load(c, 0, &v));
            float *y = v.data ? dequant(t, v.data) : NULL;
            if (y) {
                CHECK_BITS(y[0], 0.25f);  /* code 2 (1.0) x 1.0 x 0.25 */
                CHECK_BITS(y[8], 1.5f);   /* code 7 (6.0) */
            }
            free(y);
            /* written back with its companion under llama.cpp's name */
            const void *bytes[1] = {v.data};
            CHECK_OK(qtk__ckpt_write(tmp_path("nv.gguf"), QTK_CKPT_GGUF, d, bytes, 1));
            size_t n = 0;
            uint8_t *f = slurp(tmp_path("nv.gguf"), &n);
            const char *cn = names[k][1];
            bool found = false;
            for (size_t i = 0; f && i + strlen(cn) <= n && !found; i++) found = memcmp(f + i, cn, strlen(cn)) == 0;
            CHECK_MSG(found, "companion '%s' not written", cn);
            CHECK(f && n >= 64 + 32 && memcmp(f + n - 96, blk, 36) == 0 && qtk__ld32(f + n - 32) == qtk__f32_bits(0.25f));
            free(f);
            qtk_ckpt_unload(c, &v);
            close_bytes(c);
        }
        free(b.p);
    }
}

static void type_names(void) {
    CHECK(strcmp(qtk__gguf_type_name(0), "F32") == 0 && strcmp(qtk__gguf_type_name(42), "Q2_0") == 0);
    CHECK(qtk__gguf_type_name(4) == NULL && qtk__gguf_type_name(43) == NULL);
    CHECK(qtk__gguf_type_id("q6_k") == 14 && qtk__gguf_type_id("IQ4_XS") == 23 && qtk__gguf_type_id("Q4_2") == -1);
    CHECK(qtk_ckpt_format_from_path("m.GGUF") == QTK_CKPT_GGUF && strcmp(qtk_ckpt_format_name(QTK_CKPT_GGUF), "gguf") == 0);
}

int main(int argc, char **argv) {
    tmp_dir_make();
    static const test_case cases[] = {T(worked_file),        T(worked_blocks), T(writer_families), T(writer_raw_and_meta),
                                      T(hinted_types),       T(kv_values),     T(truncated_everywhere), T(malformed),
                                      T(bad_blocks),         T(lenient_layouts), T(type_names)};
    int rc = test_run("gguf", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
