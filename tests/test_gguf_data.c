/* test_gguf_data.c — the GGUF files ggml itself wrote ($QTK_SHARED_DIR/data/ggml, README there):
 * every tensor of types.gguf and types_rank3.gguf read through qtk (as qtk schemes: the types
 * with offsets, mins and 5-/6-/3-bit fields in ggml's own blocks, store=ggml) equals ggml's own
 * dequantization, expected/<name>.f32, bit for bit, and the types with offsets equal the
 * independent reference decoder (gguf_ref_decode.c) too; every KV reads back with its type and
 * value; GGUF -> bpk -> GGUF and GGUF -> safetensors -> GGUF (and GGUF -> GGUF) give every
 * tensor's ggml bytes back.
 * Exits 77 (skipped) when the data is absent. */
#include "ckpt_util.h"
#include "gguf_ref_decode.h"

#include "common/internal.h"
#include "gguf/gguf.h"
#include "ops/select.h"
#include "io/values.h"

static char types_path[1024], rank3_path[1024];

static qtk_status convert(const char *in, const char *out, const char *spec, const char *dtype) {
    qtk_convert_options o = {.scheme = spec, .force = 1};
    if (dtype && qtk_dtype_parse(dtype, &o.dtype)) return QTK_E_ARG;
    return qtk_ckpt_convert(in, out, &o, NULL);
}

/* tensor i's values as f32, as qtk reads them */
static float *values_of(qtk_ckpt *c, size_t i) {
    const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[i];
    qtk_ckpt_view v;
    if (qtk_ckpt_load(c, i, &v) != QTK_OK) {
        TEST_FAILMSG("load '%s': %s", t->name, qtk_last_error());
        return NULL;
    }
    float *y = malloc(t->numel * sizeof *y);
    qtk_status st = t->quantized ? qtk_dequantize_bytes(v.data, v.len, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, y, t->numel)
                                 : qtk__elem_to_f32(t->elem, v.data, t->numel, y);
    qtk_ckpt_unload(c, &v);
    if (st) {
        TEST_FAILMSG("values of '%s': %s", t->name, qtk_last_error());
        free(y);
        return NULL;
    }
    return y;
}

/* Compares every tensor with expected/<name>.f32 bit for bit; returns how many matched. */
static size_t check_expected(const char *path, size_t *n_tensors) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(path, NULL, &c));
    if (!c) return 0;
    const qtk__desc *d = qtk__ckpt_desc(c);
    size_t good = 0;
    for (size_t i = 0; i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        char rel[256];
        snprintf(rel, sizeof rel, "ggml/expected/%s.f32", t->name);
        const char *ep = shared_file(rel);
        size_t n = 0;
        uint8_t *e = ep ? slurp(ep, &n) : NULL;
        CHECK_MSG(e && n == 4 * t->numel, "expected file for '%s' (%zu bytes for %zu elements)", t->name, n, t->numel);
        float *y = values_of(c, i);
        if (e && y && n == 4 * t->numel) {
            size_t bad = 0, first = 0;
            for (size_t k = 0; k < t->numel; k++)
                if (qtk__ld32(e + 4 * k) != qtk__f32_bits(y[k]) && bad++ == 0) first = k;
            CHECK_MSG(bad == 0, "'%s' (%s): %zu of %zu values differ from ggml's; first at %zu: 0x%08x vs ggml 0x%08x", t->name,
                      t->file_type, bad, t->numel, first, qtk__f32_bits(y[first]), qtk__ld32(e + 4 * first));
            good += bad == 0;
        }
        free(e);
        free(y);
    }
    *n_tensors = d->n_tensors;
    qtk_ckpt_close(c);
    return good;
}

/* The types with offsets and mins: qtk's values of the store=ggml tensor equal the reference
 * decoder's on the same bytes (the file's: store=ggml loads them as they are). */
static void reference_decoder(void) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(types_path, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    size_t checked = 0;
    for (size_t i = 0; i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        int id = qtk__gguf_type_id(t->file_type);
        if (id != 3 && id != 7 && id != 10 && id != 12 && id != 13) continue;
        CHECK_MSG(t->quantized && t->scheme.store == QTK_STORE_GGML, "'%s' is held in ggml's blocks", t->name);
        qtk_ckpt_view v;
        if (qtk_ckpt_load(c, i, &v) != QTK_OK) continue;
        const qtk_layout *L = NULL;
        qtk_layout lay;
        if (qtk_layout_compute(&t->scheme, t->shape, t->rank, &lay) == QTK_OK) L = &lay;
        float *y = malloc(t->numel * sizeof *y), *r = malloc(t->numel * sizeof *r);
        CHECK_OK(qtk_dequantize_bytes(v.data, v.len, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, y, t->numel));
        CHECK_OK(test_gguf_ref_decode((uint32_t)id, v.data, L ? L->numel / L->fields_per_unit : 0, r, 0));
        size_t bad = 0;
        for (size_t k = 0; k < t->numel; k++) bad += qtk__f32_bits(y[k]) != qtk__f32_bits(r[k]);
        CHECK_MSG(bad == 0, "'%s': %zu values differ from the reference decoder's", t->name, bad);
        checked += bad == 0;
        free(y);
        free(r);
        qtk_ckpt_unload(c, &v);
    }
    CHECK_EQ_U(checked, 5);
    qtk_ckpt_close(c);
}

static void exact_values(void) {
    size_t n = 0, good = check_expected(types_path, &n);
    CHECK_EQ_U(n, 19);
    CHECK_EQ_U(good, 19);
    good = check_expected(rank3_path, &n);
    CHECK_EQ_U(n, 2);
    CHECK_EQ_U(good, 2);
}

/* README's tables: names, ggml types, shapes, offsets, what qtk makes of each. */
static void listing(void) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(types_path, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    static const struct {
        const char *name, *type;
        size_t bytes, abs;
        const char *as; /* scheme, or the raw element */
        bool decoded;
    } want[19] = {
        {"t.f32", "F32", 65536, 1472, "F32", false},
        {"t.f16", "F16", 32768, 67008, "F16", false},
        {"t.bf16", "BF16", 32768, 99776, "BF16", false},
        {"t.q8_0", "Q8_0", 17408, 132544, "q8f,block=32:f16,store=native", false},
        {"t.q4_0", "Q4_0", 9216, 149952, "q4f,block=32:f16", false},
        {"t.q4_1", "Q4_1", 10240, 159168, "u4,block=32:f16,offset=f16,store=ggml", false},
        {"t.q5_0", "Q5_0", 11264, 169408, "q5f,block=32:f16,store=ggml", false},
        {"t.q5_1", "Q5_1", 12288, 180672, "u5,block=32:f16,offset=f16,store=ggml", false},
        {"t.mxfp4", "MXFP4", 8704, 192960, "e2m1,block=32:ue8m0,store=packed:0", false},
        {"t.nvfp4", "NVFP4", 9216, 201664, "e2m1,block=16:ue4m3,store=packed:0", false},
        {"t.iq4_nl", "IQ4_NL", 9216, 210880, "q4f,table=iq4nl,block=32:f16", false},
        {"t.iq4_xs", "IQ4_XS", 8704, 220096, "q4f,table=iq4nl,block=32:f32", false},
        {"t.tq1_0", "TQ1_0", 3456, 228800, "q2s,block=128:f16", false},
        {"t.tq2_0", "TQ2_0", 4224, 232256, "q2s,block=128:f16", false},
        {"t.q2_k", "Q2_K", 5376, 236480, "u2,block=16:u4,min=u4,super=256:f16,store=ggml", false},
        {"t.q3_k", "Q3_K", 7040, 241856, "q3f,block=16:i6,super=256:f16,store=ggml", false},
        {"t.q4_k", "Q4_K", 9216, 248896, "u4,block=32:u6,min=u6,super=256:f16,store=ggml", false},
        {"t.q5_k", "Q5_K", 11264, 258112, "u5,block=32:u6,min=u6,super=256:f16,store=ggml", false},
        {"t.q6_k", "Q6_K", 13440, 269376, "q6f,block=16:i8,super=256:f16,store=ggml", false},
    };
    CHECK_EQ_U(d->n_tensors, 19);
    for (size_t i = 0; i < 19 && i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        char spec[128];
        const char *as = t->quantized ? (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL), spec) : qtk_elem_name(t->elem);
        CHECK_MSG(strcmp(t->name, want[i].name) == 0, "tensor %zu is '%s', expected '%s'", i, t->name, want[i].name);
        CHECK_MSG(t->file_type && strcmp(t->file_type, want[i].type) == 0, "'%s': ggml type %s", t->name, t->file_type);
        CHECK_MSG(strcmp(as, want[i].as) == 0, "'%s' reads as %s, expected %s", t->name, as, want[i].as);
        CHECK_EQ_U(t->file_bytes, want[i].bytes);
        CHECK_EQ_U(qtk_ckpt_offset_of(c, i), want[i].abs);
        CHECK(t->decoded == want[i].decoded);
        CHECK(t->rank == 2 && t->shape[0] == 64 && t->shape[1] == 256);
    }
    qtk_ckpt_facts fx;
    qtk_ckpt_facts_of(c, &fx);
    CHECK_EQ_U(fx.file_bytes, 282816);
    CHECK_EQ_U(fx.data_start, 1472);
    qtk_ckpt_close(c);

    CHECK_OK(qtk_ckpt_open(rank3_path, NULL, &c));
    if (!c) return;
    d = qtk__ckpt_desc(c);
    CHECK_EQ_U(d->n_tensors, 2);
    if (d->n_tensors == 2) {
        const qtk_ckpt_tensor *a = &d->tensors[0], *b = &d->tensors[1];
        CHECK(a->rank == 3 && a->shape[0] == 2 && a->shape[1] == 3 && a->shape[2] == 256);
        CHECK(b->rank == 3 && b->shape[0] == 4 && b->shape[1] == 1 && b->shape[2] == 64);
        CHECK_EQ_U(qtk_ckpt_offset_of(c, 0), 256);
        CHECK_EQ_U(qtk_ckpt_offset_of(c, 1), 1888);
    }
    qtk_ckpt_facts_of(c, &fx);
    CHECK_EQ_U(fx.data_start, 256);
    qtk_ckpt_close(c);
}

/* Every KV of README's table, with its type and value, in file order. */
static void kvs(void) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(types_path, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    static const char *want[16][2] = {
        {"general.architecture", "qtk-test"},
        {"general.name", "ggml types sample"},
        {"test.u8", "u8:200"},
        {"test.i8", "i8:-100"},
        {"test.u16", "u16:60000"},
        {"test.i16", "i16:-30000"},
        {"test.u32", "u32:3735928559"},
        {"test.i32", "i32:-2000000000"},
        {"test.f32", "f32:-3.14159274"},
        {"test.bool", "bool:true"},
        {"test.string", "Grüße, GGUF ✓"},
        {"test.u64", "u64:81985529216486895"},
        {"test.i64", "i64:-1234567890123456789"},
        {"test.f64", "f64:2.7182818284590451"},
        {"test.arr_string", "arr[str]:[\"alpha\",\"\",\"γάμμα\"]"},
        {"test.arr_i32", "arr[i32]:[-2147483648,-1,0,1,2147483647]"},
    };
    CHECK_EQ_U(d->n_meta, 16);
    for (size_t i = 0; i < 16 && i < d->n_meta; i++) {
        CHECK_MSG(strcmp(d->meta[i].key, want[i][0]) == 0, "KV %zu is '%s', expected '%s'", i, d->meta[i].key, want[i][0]);
        CHECK_MSG(strcmp(d->meta[i].value, want[i][1]) == 0, "KV '%s' = '%s', expected '%s'", d->meta[i].key, d->meta[i].value,
                  want[i][1]);
    }
    /* the bits, not just the digits */
    CHECK(strtof("-3.14159274", NULL) == qtk__bits_f32(0xC0490FDBu));
    double f64 = strtod("2.7182818284590451", NULL);
    uint64_t u;
    memcpy(&u, &f64, 8);
    CHECK(u == 0x4005BF0A8B145769ull);
    CHECK_EQ_U(strlen("Grüße, GGUF ✓"), 17);
    qtk_ckpt_close(c);
}

/* The ggml bytes of every tensor of a GGUF file, by name. */
typedef struct {
    size_t n;
    char name[32][64];
    const char *type[32];
    uint8_t *bytes[32];
    size_t len[32];
} gbytes;

static void grab(const char *path, gbytes *g) {
    memset(g, 0, sizeof *g);
    qtk_ckpt *c = NULL;
    size_t n = 0;
    uint8_t *file = slurp(path, &n);
    CHECK_OK(qtk_ckpt_open(path, NULL, &c));
    if (!c || !file) {
        free(file);
        qtk_ckpt_close(c);
        return;
    }
    const qtk__desc *d = qtk__ckpt_desc(c);
    for (size_t i = 0; i < d->n_tensors && g->n < 32; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        snprintf(g->name[g->n], 64, "%s", t->name);
        g->type[g->n] = t->file_type;
        size_t off = qtk_ckpt_offset_of(c, i);
        g->len[g->n] = t->file_bytes;
        g->bytes[g->n] = malloc(t->file_bytes + 1);
        memcpy(g->bytes[g->n], file + off, t->file_bytes);
        g->n++;
    }
    free(file);
    qtk_ckpt_close(c);
}

static void gfree(gbytes *g) {
    for (size_t i = 0; i < g->n; i++) free(g->bytes[i]);
}

/* b (a round trip of a) holds every tensor of a with the same type and bytes (every type of
 * these files has a qtk scheme: the ones with offsets and mins are held in ggml's blocks). */
static void same_ggml(const gbytes *a, const gbytes *b, const char *what) {
    CHECK_MSG(a->n == b->n, "%s: %zu tensors, expected %zu", what, b->n, a->n);
    for (size_t i = 0; i < a->n && i < b->n; i++) {
        CHECK_MSG(strcmp(a->name[i], b->name[i]) == 0, "%s: tensor %zu is '%s', expected '%s'", what, i, b->name[i], a->name[i]);
        CHECK_MSG(strcmp(a->type[i], b->type[i]) == 0, "%s: '%s' comes back as %s, expected %s", what, a->name[i], b->type[i],
                  a->type[i]);
        CHECK_MSG(a->len[i] == b->len[i] && memcmp(a->bytes[i], b->bytes[i], a->len[i]) == 0, "%s: '%s' (%s): the bytes differ",
                  what, a->name[i], a->type[i]);
    }
}

static void round_trips(void) {
    const char *srcs[2] = {types_path, rank3_path};
    for (int k = 0; k < 2; k++) {
        gbytes a, b;
        grab(srcs[k], &a);
        CHECK_OK(convert(srcs[k], tmp_path_kept("via.bpk"), NULL, NULL));
        CHECK_OK(convert(tmp_path_kept("via.bpk"), tmp_path_kept("back1.gguf"), NULL, NULL));
        grab(tmp_path_kept("back1.gguf"), &b);
        same_ggml(&a, &b, "gguf -> bpk -> gguf");
        gfree(&b);
        CHECK_OK(convert(srcs[k], tmp_path_kept("via.safetensors"), NULL, NULL));
        CHECK_OK(convert(tmp_path_kept("via.safetensors"), tmp_path_kept("back2.gguf"), NULL, NULL));
        grab(tmp_path_kept("back2.gguf"), &b);
        same_ggml(&a, &b, "gguf -> safetensors -> gguf");
        gfree(&b);
        CHECK_OK(convert(srcs[k], tmp_path_kept("back3.gguf"), NULL, NULL));
        grab(tmp_path_kept("back3.gguf"), &b);
        same_ggml(&a, &b, "gguf -> gguf");
        gfree(&b);
        gfree(&a);
    }
    /* a GGUF qtk wrote, converted again, is the same file */
    CHECK_OK(convert(tmp_path_kept("back3.gguf"), tmp_path_kept("again.gguf"), NULL, NULL));
    size_t na, nb;
    uint8_t *x = slurp(tmp_path_kept("back3.gguf"), &na), *y = slurp(tmp_path_kept("again.gguf"), &nb);
    CHECK(x && y && na == nb && memcmp(x, y, na) == 0);
    free(x);
    free(y);
}

/* The KVs survive .bpk and .safetensors with their types. */
static void kv_round_trip(void) {
    CHECK_OK(convert(types_path, tmp_path_kept("kv.bpk"), NULL, NULL));
    CHECK_OK(convert(tmp_path_kept("kv.bpk"), tmp_path_kept("kv.gguf"), NULL, NULL));
    qtk_ckpt *a = NULL, *b = NULL;
    CHECK_OK(qtk_ckpt_open(types_path, NULL, &a));
    CHECK_OK(qtk_ckpt_open(tmp_path_kept("kv.gguf"), NULL, &b));
    if (a && b) {
        const qtk__desc *da = qtk__ckpt_desc(a), *db = qtk__ckpt_desc(b);
        for (size_t i = 0; i < da->n_meta; i++) {
            bool found = false;
            for (size_t j = 0; j < db->n_meta && !found; j++)
                found = strcmp(da->meta[i].key, db->meta[j].key) == 0 && strcmp(da->meta[i].value, db->meta[j].value) == 0;
            CHECK_MSG(found, "KV '%s' = '%s' is lost through .bpk", da->meta[i].key, da->meta[i].value);
        }
    }
    qtk_ckpt_close(a);
    qtk_ckpt_close(b);
}

/* --scheme none --dtype: every tensor dequantized, decoded ones included. */
static void dequantize_all(void) {
    CHECK_OK(convert(types_path, tmp_path_kept("f16.gguf"), "none", "f16"));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(tmp_path_kept("f16.gguf"), NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    size_t f16 = 0;
    for (size_t i = 0; i < d->n_tensors; i++) f16 += d->tensors[i].elem == QTK_ELEM_F16 || d->tensors[i].elem == QTK_ELEM_BF16;
    /* t.f32 stays F32 (not quantized), t.bf16 stays BF16 */
    CHECK_EQ_U(f16, 18);
    qtk_ckpt_close(c);
}

int main(int argc, char **argv) {
    const char *p = shared_file("ggml/types.gguf");
    if (!p) {
        printf("gguf_data: $QTK_SHARED_DIR/data/ggml is missing: skipped\n");
        return 77;
    }
    snprintf(types_path, sizeof types_path, "%s", p);
    p = shared_file("ggml/types_rank3.gguf");
    if (!p) return 77;
    snprintf(rank3_path, sizeof rank3_path, "%s", p);
    tmp_dir_make();
    static const test_case cases[] = {T(listing), T(exact_values), T(reference_decoder), T(kvs), T(round_trips), T(kv_round_trip), T(dequantize_all)};
    int rc = test_run("gguf_data", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
