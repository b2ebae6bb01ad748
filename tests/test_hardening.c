/* test_hardening.c — the defects fuzzing and hostile files found (issue 12), each pinned:
 *   - what convert writes, qtk reads back: stored tensors named like a Hub layout (item 5);
 *   - configs are never written beside a single file where other checkpoints read them (6);
 *   - lookup tables registered by opened files go with them (8);
 *   - tensor counts are bounded before anything is parsed (9);
 *   - Q3_K / Q6_K / IQ4_XS blocks whose f16 d underflowed come back byte for byte, GGUF key
 *     order survives .bpk, IQ lattice tensors are not called decoded (10) and load as their
 *     store=ggml scheme, the file's bytes as they are (issue 21).
 * (bitsandbytes' flattened shape is in test_hub_traps.c, the faults in test_faults.c.) */
#include "ckpt_util.h"

#include "qtk_ckpt.h"

#include <sys/stat.h>

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    bool ok = f && (!n || fwrite(data, 1, n, f) == n);
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

static size_t count_of(const char *path, const qtk_open_options *o) {
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(path, o, &c);
    CHECK_MSG(st == QTK_OK, "'%s' does not open: %s", path, qtk_last_error());
    size_t n = qtk_ckpt_count(c);
    qtk_ckpt_close(c);
    return n;
}

/* ---- item 5 ---- */

static void stored_tensors_read_back(void) {
    /* a Hub directory whose config names a method qtk does not read: tensors as stored, named
     * like gpt-oss (X_blocks + X_scales) */
    const char *dir = tmp_path("unknown");
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    mkdir(d, 0755);
    uint8_t data[80];
    for (int i = 0; i < 80; i++) data[i] = (uint8_t)(i * 7);
    size_t n = 0;
    uint8_t *f = st_assemble("{\"m.w_blocks\":{\"dtype\":\"U8\",\"shape\":[4,16],\"data_offsets\":[0,64]},"
                             "\"m.w_scales\":{\"dtype\":\"U8\",\"shape\":[4,4],\"data_offsets\":[64,80]}}",
                             data, 80, &n);
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(write_file(p, f, n));
    free(f);
    snprintf(p, sizeof p, "%s/config.json", d);
    const char *cfg = "{\"architectures\": [\"X\"], \"quantization_config\": {\"quant_method\": \"not-a-method\"}}";
    CHECK(write_file(p, cfg, strlen(cfg)));
    CHECK_EQ_U(count_of(d, NULL), 2); /* listed as stored */
    static const char *const outs[] = {"unk-dir", "unk-one.safetensors"};
    for (int k = 0; k < 2; k++) {
        char o[1024];
        snprintf(o, sizeof o, "%s", tmp_path(outs[k]));
        CHECK_OK(qtk_ckpt_convert(d, o, &(qtk_convert_options){0}, NULL));
        /* read back as written: two stored tensors, not a gpt-oss weight */
        CHECK_MSG(count_of(o, NULL) == 2, "'%s' reads as %zu tensors", outs[k], count_of(o, NULL));
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(o, NULL, &c));
        qtk_hub_info hi;
        qtk_ckpt_hub_info(c, &hi);
        CHECK(hi.layout == QTK_LAYOUT_NONE);
        qtk_ckpt_close(c);
        /* and again through burnpack, back to safetensors */
        char b[1200], s2[1200];
        snprintf(b, sizeof b, "%s.bpk", o);
        snprintf(s2, sizeof s2, "%s-again.safetensors", o);
        CHECK_OK(qtk_ckpt_convert(o, b, &(qtk_convert_options){0}, NULL));
        CHECK_OK(qtk_ckpt_convert(b, s2, &(qtk_convert_options){0}, NULL));
        CHECK_EQ_U(count_of(s2, NULL), 2);
    }
}

/* ---- item 6 ---- */

static void no_configs_beside_other_files(void) {
    char d[1024], in[1200], out[1200], own[1024];
    snprintf(d, sizeof d, "%s", tmp_path("shared"));
    mkdir(d, 0755);
    snprintf(in, sizeof in, "%s/model.safetensors", d);
    float w[64 * 64];
    for (int i = 0; i < 64 * 64; i++) w[i] = (float)((i * 37) % 101 - 50) / 64.0f;
    qtk_writer *wr = NULL;
    size_t shape[2] = {64, 64};
    CHECK_OK(qtk_writer_create(in, NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "model.layers.0.mlp.up_proj.weight", QTK_ELEM_F32, shape, 2, w));
    CHECK_OK(qtk_writer_commit(wr));
    snprintf(out, sizeof out, "%s/model-nvfp4.safetensors", d);
    qtk_convert_options o = {.scheme = "nvfp4", .layout = QTK_LAYOUT_MODELOPT};
    CHECK_ERR(qtk_ckpt_convert(in, out, &o, NULL), QTK_E_ARG, "would read it too");
    CHECK(strstr(qtk_last_error(), "model.safetensors"));
    CHECK(!file_exists(out));
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/hf_quant_config.json", d);
    CHECK(!file_exists(cfg));
    snprintf(cfg, sizeof cfg, "%s/config.json", d);
    CHECK(!file_exists(cfg));
    CHECK_EQ_U(count_of(in, NULL), 1); /* the other file reads as it did */
    /* a directory of its own is fine */
    snprintf(own, sizeof own, "%s", tmp_path("own"));
    mkdir(own, 0755);
    snprintf(out, sizeof out, "%s/model-nvfp4.safetensors", own);
    CHECK_OK(qtk_ckpt_convert(in, out, &o, NULL));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(out, NULL, &c));
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    CHECK(hi.layout == QTK_LAYOUT_MODELOPT);
    qtk_ckpt_close(c);
}

/* ---- item 8 ---- */

/* A burnpack file holding one lookup tensor whose table is base scaled by k. */
static void lookup_file(const char *path, float k) {
    static const float base[16] = {-8, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    qtk_table_register("hard-base", base, 16);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,table=hard-base,block=32:f32", &s));
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i % 17) - 8.0f;
    size_t shape[2] = {2, 32};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 2, &s, NULL, &t));
    size_t n = 0;
    const uint8_t *b = t ? qtk_tensor_bytes(t, &n) : NULL;
    uint8_t *c = malloc(n ? n : 1);
    if (b) memcpy(c, b, n);
    const qtk_layout *L = t ? qtk_tensor_layout(t) : NULL;
    for (int i = 0; L && i < 16; i++) {
        float v = base[i] * k;
        memcpy(c + L->table_offset + 4 * (size_t)i, &v, 4);
    }
    qtk_ckpt_tensor d = {.name = "w", .quantized = true, .scheme = s, .rank = 2, .shape = shape};
    qtk_writer *w = NULL;
    CHECK_OK(qtk_writer_create(path, &(qtk_write_options){.force = 1}, &w));
    CHECK_OK(qtk_writer_add(w, &d, c));
    CHECK_OK(qtk_writer_commit(w));
    free(c);
    qtk_tensor_free(t);
}

static void file_tables_released(void) {
    /* 100 files, each with its own table, one after another: none runs out of table slots
     * (the 65th did, in a long-running process) */
    char p[1200], table[QTK_TABLE_NAME_MAX] = "";
    for (int i = 0; i < 100; i++) {
        snprintf(p, sizeof p, "%s", tmp_path("lut.bpk"));
        lookup_file(p, 1.0f + (float)i / 128.0f);
        qtk_ckpt *c = NULL;
        qtk_status st = qtk_ckpt_open(p, NULL, &c);
        CHECK_MSG(st == QTK_OK, "file %d: %s", i, qtk_last_error());
        if (!c) break;
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, 0);
        snprintf(table, sizeof table, "%s", t->scheme.table);
        float y[64];
        CHECK_OK(qtk_ckpt_read_values(c, 0, QTK_DTYPE_F32, y, 64));
        qtk_ckpt_close(c);
        size_t n = 0;
        CHECK_MSG(qtk_table_get(table, NULL, 0, &n) == QTK_E_NOTFOUND, "file %d: table '%s' outlived its file", i, table);
    }
    /* the same table in two files: one entry, kept while either is open */
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s", tmp_path("lut-a.bpk"));
    snprintf(b, sizeof b, "%s", tmp_path("lut-b.bpk"));
    lookup_file(a, 3.0f);
    lookup_file(b, 3.0f);
    qtk_ckpt *ca = NULL, *cb = NULL;
    CHECK_OK(qtk_ckpt_open(a, NULL, &ca));
    CHECK_OK(qtk_ckpt_open(b, NULL, &cb));
    if (ca && cb) {
        CHECK(strcmp(qtk_ckpt_tensor_at(ca, 0)->scheme.table, qtk_ckpt_tensor_at(cb, 0)->scheme.table) == 0);
        snprintf(table, sizeof table, "%s", qtk_ckpt_tensor_at(ca, 0)->scheme.table);
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_ckpt_load_tensor(cb, 0, &t)); /* borrows b's map: b lives on with it */
        float want[64];
        CHECK_OK(qtk_ckpt_read_values(cb, 0, QTK_DTYPE_F32, want, 64));
        qtk_ckpt_close(ca);
        size_t n = 0;
        CHECK_OK(qtk_table_get(table, NULL, 0, &n));
        qtk_ckpt_close(cb);
        CHECK_OK(qtk_table_get(table, NULL, 0, &n)); /* the tensor still holds b */
        float y[64];
        CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 64));
        CHECK(memcmp(y, want, sizeof y) == 0);
        qtk_tensor_free(t);
        CHECK(qtk_table_get(table, NULL, 0, &n) == QTK_E_NOTFOUND);
    }
}

/* ---- item 9 ---- */

static void tensor_counts_bounded(void) {
    /* a safetensors header of QTK_CKPT_MAX_TENSORS + 1 empty tensors: refused before parsing */
    size_t n = (size_t)QTK_CKPT_MAX_TENSORS + 1, cap = n * 64 + 16, at = 0;
    char *h = malloc(cap);
    h[at++] = '{';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(h + at, cap - at, "%s\"t%zu\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                               i ? "," : "", i);
    h[at++] = '}';
    h[at] = '\0';
    size_t len = 0;
    uint8_t *f = st_assemble(h, NULL, 0, &len);
    qtk_ckpt *c = NULL;
    CHECK_ERR(qtk_ckpt_open_memory(f, len, "many.safetensors", NULL, &c), QTK_E_UNSUPPORTED, "more than 262144 tensor entries");
    free(f);
    free(h);
    /* a GGUF file claiming more tensor infos (and room for them) than qtk reads */
    size_t gl = 24 + 24 * ((size_t)QTK_CKPT_MAX_TENSORS + 1);
    uint8_t *g = calloc(1, gl);
    memcpy(g, "GGUF", 4);
    g[4] = 3;
    uint64_t nt = (uint64_t)QTK_CKPT_MAX_TENSORS + 1;
    memcpy(g + 8, &nt, 8);
    CHECK_ERR(qtk_ckpt_open_memory(g, gl, "many.gguf", NULL, &c), QTK_E_UNSUPPORTED, "at most 262144 tensor infos");
    uint64_t zero = 0, nk = nt;
    memcpy(g + 8, &zero, 8);
    memcpy(g + 16, &nk, 8);
    CHECK_ERR(qtk_ckpt_open_memory(g, gl, "many.gguf", NULL, &c), QTK_E_UNSUPPORTED, "at most 262144 KV records");
    free(g);
}

/* ---- item 10: GGUF ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gb;
static void gput(gb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void g32(gb *b, uint32_t v) { gput(b, &v, 4); }
static void g64(gb *b, uint64_t v) { gput(b, &v, 8); }
static void gstr(gb *b, const char *s) {
    g64(b, strlen(s));
    gput(b, s, strlen(s));
}

typedef struct {
    const char *name;
    uint32_t type;
    const uint8_t *data;
    size_t len;
} gtensor;

/* A GGUF v3 file: string KVs in the given order, tensors of one row of 256 elements. */
static uint8_t *gguf_file(const char *const *keys, size_t nk, const gtensor *t, size_t nt, size_t *len) {
    gb b = {0}, d = {0};
    gput(&b, "GGUF", 4);
    g32(&b, 3);
    g64(&b, nt);
    g64(&b, nk);
    for (size_t i = 0; i < nk; i++) {
        gstr(&b, keys[i]);
        g32(&b, 8);
        gstr(&b, "v");
    }
    for (size_t i = 0; i < nt; i++) {
        gstr(&b, t[i].name);
        g32(&b, 1);
        g64(&b, 256);
        g32(&b, t[i].type);
        g64(&b, d.n);
        gput(&d, t[i].data, t[i].len);
        while (d.n % 32) gput(&d, "", 1);
    }
    while (b.n % 32) gput(&b, "", 1);
    gput(&b, d.p, d.n);
    free(d.p);
    *len = b.n;
    return b.p;
}

/* the bytes of tensor name in a GGUF file qtk wrote (its data, as the file holds it) */
static bool gguf_block_of(const char *path, const char *name, uint8_t *out, size_t n) {
    qtk_ckpt *c = NULL;
    if (qtk_ckpt_open(path, NULL, &c) != QTK_OK) return false;
    size_t i = 0;
    bool ok = qtk_ckpt_find(c, name, &i) == QTK_OK;
    size_t off = ok ? qtk_ckpt_offset_of(c, i) : 0;
    qtk_ckpt_close(c);
    size_t len = 0;
    uint8_t *f = ok ? slurp(path, &len) : NULL;
    ok = f && off + n <= len;
    if (ok) memcpy(out, f + off, n);
    free(f);
    return ok;
}

static void gguf_underflowed_scales(void) {
    /* one block each of Q3_K, Q6_K and IQ4_XS whose f16 d is 0 (-0 for Q6_K) while the
     * integer sub-scales are not: the values are all zeros, the bytes are not ggml's zeros */
    uint8_t q3[110], q6[210], iq[136];
    for (size_t i = 0; i < sizeof q3; i++) q3[i] = (uint8_t)(i * 29 + 5);
    for (size_t i = 0; i < sizeof q6; i++) q6[i] = (uint8_t)(i * 13 + 1);
    for (size_t i = 0; i < sizeof iq; i++) iq[i] = (uint8_t)(i * 53 + 7);
    q3[108] = q3[109] = 0;
    q6[208] = 0, q6[209] = 0x80;
    iq[0] = iq[1] = 0;
    gtensor t[3] = {{"b.q3_k", 11, q3, 110}, {"b.q6_k", 14, q6, 210}, {"b.iq4_xs", 23, iq, 136}};
    const char *keys[1] = {"general.architecture"};
    size_t len = 0;
    uint8_t *f = gguf_file(keys, 1, t, 3, &len);
    char in[1200];
    snprintf(in, sizeof in, "%s", tmp_path("under.gguf"));
    CHECK(write_file(in, f, len));
    free(f);
    static const char *const via[] = {"under-again.gguf", "under.bpk", "under.safetensors"};
    for (int k = 0; k < 3; k++) {
        char mid[1024], back[1200];
        snprintf(mid, sizeof mid, "%s", tmp_path(via[k]));
        CHECK_OK(qtk_ckpt_convert(in, mid, &(qtk_convert_options){.force = 1}, NULL));
        snprintf(back, sizeof back, "%s.back.gguf", mid);
        const char *last = mid;
        if (k > 0) {
            CHECK_OK(qtk_ckpt_convert(mid, back, &(qtk_convert_options){.force = 1}, NULL));
            last = back;
        }
        for (int i = 0; i < 3; i++) {
            uint8_t got[210];
            CHECK(gguf_block_of(last, t[i].name, got, t[i].len));
            CHECK_MSG(memcmp(got, t[i].data, t[i].len) == 0, "%s through %s: the block's bytes changed", t[i].name, via[k]);
        }
    }
}

static void gguf_key_order(void) {
    static const char *const keys[] = {"general.architecture", "z.last", "a.first", "m.middle", "general.name"};
    uint8_t q8[34] = {0x00, 0x3c};
    gtensor t[1] = {{"w", 8, NULL, 0}};
    uint8_t data[34 * 8];
    for (int b = 0; b < 8; b++) memcpy(data + 34 * b, q8, 34);
    t[0].data = data;
    t[0].len = sizeof data;
    size_t len = 0;
    uint8_t *f = gguf_file(keys, 5, t, 1, &len);
    char in[1200], bpk[1200], out[1200];
    snprintf(in, sizeof in, "%s", tmp_path("order.gguf"));
    snprintf(bpk, sizeof bpk, "%s", tmp_path("order.bpk"));
    snprintf(out, sizeof out, "%s", tmp_path("order-back.gguf"));
    CHECK(write_file(in, f, len));
    free(f);
    CHECK_OK(qtk_ckpt_convert(in, bpk, &(qtk_convert_options){.force = 1}, NULL));
    CHECK_OK(qtk_ckpt_convert(bpk, out, &(qtk_convert_options){.force = 1}, NULL));
    for (int k = 0; k < 2; k++) {
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(k ? out : bpk, NULL, &c));
        size_t j = 0;
        for (size_t i = 0; c && i < qtk_ckpt_meta_count(c); i++) {
            const char *key, *v;
            CHECK_OK(qtk_ckpt_meta_at(c, i, &key, &v));
            if (strncmp(key, "qtk:", 4) == 0 || strcmp(key, "general.quantization_version") == 0) continue;
            CHECK_MSG(j < 5 && strcmp(key, keys[j]) == 0, "%s: key %zu is '%s', want '%s'", k ? "gguf" : "bpk", j, key,
                      j < 5 ? keys[j] : "(none)");
            CHECK(strcmp(key, "qtk:meta_order") != 0);
            j++;
        }
        CHECK_EQ_U(j, 5);
        qtk_ckpt_close(c);
    }
}

static void gguf_lattice_not_decoded(void) {
    uint8_t iq2[66];
    for (size_t i = 0; i < sizeof iq2; i++) iq2[i] = (uint8_t)(i + 1);
    gtensor t[1] = {{"t.iq2_xxs", 16, iq2, 66}};
    const char *keys[1] = {"general.architecture"};
    size_t len = 0;
    uint8_t *f = gguf_file(keys, 1, t, 1, &len);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open_memory(f, len, "iq2.gguf", NULL, &c));
    const qtk_ckpt_tensor *d = c ? qtk_ckpt_tensor_at(c, 0) : NULL;
    CHECK(d && !d->decoded && d->quantized && d->file_type && strcmp(d->file_type, "IQ2_XXS") == 0);
    CHECK(d && qtk_scheme_preset_name(&d->scheme) && strcmp(qtk_scheme_preset_name(&d->scheme), "iq2_xxs") == 0);
    qtk_ckpt_view v;
    CHECK_OK(c ? qtk_ckpt_load(c, 0, &v) : QTK_E_ARG);
    if (c && d) {
        CHECK(v.len == sizeof iq2 && memcmp(v.data, iq2, sizeof iq2) == 0);
        qtk_ckpt_unload(c, &v);
    }
    qtk_ckpt_close(c);
    free(f);
}

static void start(void) { tmp_dir_make(); }
static void finish(void) { tmp_dir_remove(); }

TEST_MAIN("hardening", T(start), T(stored_tensors_read_back), T(no_configs_beside_other_files), T(file_tables_released),
          T(tensor_counts_bounded), T(gguf_underflowed_scales), T(gguf_key_order), T(gguf_lattice_not_decoded), T(finish))
