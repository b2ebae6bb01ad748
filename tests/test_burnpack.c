/* test_burnpack.c — the burnpack container: every Burn dtype and every quantized family
 * written, read back and rewritten byte for byte; .bpk <-> .safetensors keeping quantized
 * tensors bit-exact; malformed files (truncated anywhere, bad magic, oversized or
 * inconsistent headers, offsets out of range, overlaps, unknown dtypes, wrong lengths,
 * duplicate names) refused with a message; writer errors leave no file. */
#include "ckpt_util.h"

#include "io/checkpoint.h"

/* A description of one tensor of every Burn dtype and of every quantized family, with its
 * bytes (raw: random; quantized: a real quantization). */
typedef struct {
    qtk__desc d;
    uint8_t **bytes;
} model;

static const char *const families[] = {
    "q8f", "q8s,block=32:f16", "q4f,block=32:f16", "q4s,block=4x8:bf16,store=u32:1", "q2f,block=16:f32",
    "q2s,block=*:f32,store=native", "e4m3,block=32:ue8m0,store=native", "e5m2,tensor=f16", "nvfp4", "mxfp4", "mxfp8",
    "nf4", "q4f,table=iq4nl,block=32:f16", "q8s,block=16:f16,tensor=f32,store=packed", "e2m1,block=8x8:ue4m3,store=packed:1",
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static void model_add(model *m, const uint8_t *b) {
    size_t n = m->d.n_tensors;
    m->bytes = realloc(m->bytes, n * sizeof *m->bytes);
    size_t len = m->d.tensors[n - 1].nbytes;
    m->bytes[n - 1] = malloc(len ? len : 1);
    if (len) memcpy(m->bytes[n - 1], b, len);
}

static void model_make(model *m, bool burn_only_dtypes, bool st_only_dtypes) {
    memset(m, 0, sizeof *m);
    qtk__desc_init(&m->d);
    uint64_t seed = 99;
    uint8_t raw[4096];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)trand_u64(&seed);
    const qtk_elem common[] = {QTK_ELEM_F64, QTK_ELEM_F32, QTK_ELEM_F16, QTK_ELEM_BF16, QTK_ELEM_I64, QTK_ELEM_I32,
                               QTK_ELEM_I16, QTK_ELEM_I8,  QTK_ELEM_U64, QTK_ELEM_U32,  QTK_ELEM_U16, QTK_ELEM_U8,
                               QTK_ELEM_BOOL};
    const qtk_elem burn_only[] = {QTK_ELEM_FLEX32, QTK_ELEM_BOOL_U8, QTK_ELEM_BOOL_U32};
    const qtk_elem st_only[] = {QTK_ELEM_C64, QTK_ELEM_F8_E4M3, QTK_ELEM_F8_E5M2, QTK_ELEM_F8_E8M0,
                                QTK_ELEM_F8_E4M3FNUZ, QTK_ELEM_F8_E5M2FNUZ, QTK_ELEM_F4, QTK_ELEM_F6_E2M3, QTK_ELEM_F6_E3M2};
    size_t shape[3] = {3, 4, 5}, sh0[1] = {0};
    char name[64];
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) {
        snprintf(name, sizeof name, "raw.%s", qtk_elem_name(common[i]));
        CHECK_OK(qtk__desc_add_raw(&m->d, name, common[i], shape, 3, NULL));
        model_add(m, raw);
    }
    for (size_t i = 0; burn_only_dtypes && i < sizeof burn_only / sizeof burn_only[0]; i++) {
        snprintf(name, sizeof name, "burn.%s", qtk_elem_name(burn_only[i]));
        CHECK_OK(qtk__desc_add_raw(&m->d, name, burn_only[i], shape + 1, 2, NULL));
        model_add(m, raw);
    }
    size_t even[2] = {4, 6};
    for (size_t i = 0; st_only_dtypes && i < sizeof st_only / sizeof st_only[0]; i++) {
        snprintf(name, sizeof name, "st.%s", qtk_elem_name(st_only[i]));
        CHECK_OK(qtk__desc_add_raw(&m->d, name, st_only[i], even, 2, NULL));
        model_add(m, raw);
    }
    CHECK_OK(qtk__desc_add_raw(&m->d, "scalar", QTK_ELEM_I64, NULL, 0, NULL));
    model_add(m, raw);
    CHECK_OK(qtk__desc_add_raw(&m->d, "empty", QTK_ELEM_F32, sh0, 1, NULL));
    model_add(m, raw);
    /* quantized: odd extents so edge blocks and padding show */
    size_t qshape[2] = {24, 40};
    float x[24 * 40];
    for (int i = 0; i < 24 * 40; i++) x[i] = trand_normal(&seed) * (i % 37 == 0 ? 20.0f : 1.0f);
    for (size_t k = 0; k < N_FAMILIES; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(families[k], &s));
        snprintf(name, sizeof name, "q.%zu", k);
        qtk_ckpt_tensor *t;
        CHECK_OK(qtk__desc_add_quantized(&m->d, name, &s, qshape, 2, &t));
        uint8_t *q = malloc(t->nbytes);
        CHECK_OK(qtk_quantize_into(x, qshape, 2, &s, NULL, q, t->nbytes));
        t->has_param_id = true;
        t->param_id = 0x8000000000000000ull + k;
        model_add(m, q);
        free(q);
    }
    CHECK_OK(qtk__desc_add_meta(&m->d, "producer", "qtk test"));
    CHECK_OK(qtk__desc_add_meta(&m->d, "format", "burnpack"));
    qtk_ckpt_scalar sc = {.name = "lr", .kind = QTK_SCALAR_FLOAT, .f = 1e-3};
    CHECK_OK(qtk__desc_add_scalar(&m->d, &sc));
    sc = (qtk_ckpt_scalar){.name = "step", .kind = QTK_SCALAR_INT, .i = -70000};
    CHECK_OK(qtk__desc_add_scalar(&m->d, &sc));
}

static void model_free(model *m) {
    for (size_t i = 0; i < m->d.n_tensors; i++) free(m->bytes[i]);
    free(m->bytes);
    qtk__desc_free(&m->d);
}

/* Same scheme on this shape: burnpack stores '*' block dims resolved (block=* on [24, 40]
 * comes back as block=40), which is the same layout and the same bytes. */
static bool equivalent(const qtk_scheme *a, const qtk_scheme *b, const size_t *shape, int rank) {
    if (qtk_scheme_equal(a, b)) return true;
    qtk_layout la, lb;
    if (qtk_layout_compute(a, shape, rank, &la) || qtk_layout_compute(b, shape, rank, &lb)) return false;
    qtk_scheme x = *a, y = *b;
    x.block_rank = y.block_rank = 0;
    memset(x.block, 0, sizeof x.block);
    memset(y.block, 0, sizeof y.block);
    return qtk_scheme_equal(&x, &y) && memcmp(la.block, lb.block, sizeof la.block) == 0 &&
           memcmp(la.grid, lb.grid, sizeof la.grid) == 0 && la.scale_dtype == lb.scale_dtype &&
           la.total_bytes == lb.total_bytes;
}

/* The file at path holds exactly m (names, types, shapes, bytes, ids, metadata, scalars). */
static void check_same(const char *path, const model *m, bool labels_exact) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(path, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    CHECK_EQ_U(d->n_tensors, m->d.n_tensors);
    for (size_t i = 0; i < d->n_tensors && i < m->d.n_tensors; i++) {
        const qtk_ckpt_tensor *a = &d->tensors[i], *b = &m->d.tensors[i];
        CHECK_MSG(strcmp(a->name, b->name) == 0, "tensor %zu: '%s' vs '%s'", i, a->name, b->name);
        CHECK(a->quantized == b->quantized && a->rank == b->rank && a->nbytes == b->nbytes);
        if (a->quantized) CHECK_MSG(equivalent(&a->scheme, &b->scheme, a->shape, a->rank), "tensor '%s': scheme", a->name);
        else if (labels_exact) CHECK_MSG(a->elem == b->elem, "tensor '%s': %s vs %s", a->name, qtk_elem_name(a->elem), qtk_elem_name(b->elem));
        for (int k = 0; k < a->rank && k < b->rank; k++) CHECK(a->shape[k] == b->shape[k]);
        CHECK(a->has_param_id == b->has_param_id && a->param_id == b->param_id);
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, i, &v));
        CHECK_MSG(v.len == b->nbytes && (v.len == 0 || memcmp(v.data, m->bytes[i], v.len) == 0), "tensor '%s': bytes differ", a->name);
        qtk_ckpt_unload(c, &v);
    }
    CHECK_EQ_U(d->n_meta, m->d.n_meta);
    CHECK_EQ_U(d->n_scalars, m->d.n_scalars);
    for (size_t i = 0; i < d->n_scalars && i < m->d.n_scalars; i++) {
        /* burnpack keeps scalars in name order */
        const qtk_ckpt_scalar *s = NULL;
        for (size_t j = 0; j < m->d.n_scalars; j++)
            if (strcmp(m->d.scalars[j].name, d->scalars[i].name) == 0) s = &m->d.scalars[j];
        CHECK(s && s->kind == d->scalars[i].kind && s->i == d->scalars[i].i && s->f == d->scalars[i].f);
    }
    qtk_ckpt_close(c);
}

static void rewrite(const char *in, const char *out, int force) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(in, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    qtk__ckpt_writer *w = NULL;
    CHECK_OK(qtk__ckpt_writer_open(out, qtk_ckpt_format_from_path(out), d, force, &w));
    for (size_t i = 0; w && i < d->n_tensors; i++) {
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, i, &v));
        CHECK_OK(qtk__ckpt_writer_put(w, v.data, v.len));
        qtk_ckpt_unload(c, &v);
    }
    if (w) CHECK_OK(qtk__ckpt_writer_commit(w));
    qtk_ckpt_close(c);
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void roundtrip_all_dtypes(void) {
    tmp_dir_make();
    model m;
    model_make(&m, true, false);
    CHECK_OK(qtk__ckpt_write(tmp_path("m.bpk"), QTK_CKPT_BURNPACK, &m.d, (const void *const *)m.bytes, 0));
    check_same(tmp_path("m.bpk"), &m, true);
    char a[512];
    snprintf(a, sizeof a, "%s", tmp_path("m.bpk"));
    rewrite(a, tmp_path("m2.bpk"), 0);
    CHECK_MSG(same_file(a, tmp_path("m2.bpk")), "burnpack rewrite is not byte-identical");
    /* every tensor 256-aligned, the file ending at the last tensor */
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(a, NULL, &c));
    if (c) {
        const qtk__desc *d = qtk__ckpt_desc(c);
        for (size_t i = 0; i < d->n_tensors; i++) CHECK_EQ_U(qtk_ckpt_offset_of(c, i) % 256, 0);
        qtk_ckpt_facts fx;
        qtk_ckpt_facts_of(c, &fx);
        CHECK_EQ_U(fx.file_bytes, qtk_ckpt_offset_of(c, d->n_tensors - 1) + d->tensors[d->n_tensors - 1].nbytes);
        qtk_ckpt_close(c);
    }
    model_free(&m);
    tmp_dir_remove();
}

/* .bpk -> .safetensors -> .bpk gives the same file; quantized bytes identical in both. */
static void cross_format(void) {
    tmp_dir_make();
    model m;
    model_make(&m, false, false);
    CHECK_OK(qtk__ckpt_write(tmp_path("a.bpk"), QTK_CKPT_BURNPACK, &m.d, (const void *const *)m.bytes, 0));
    char a[512], s[512];
    snprintf(a, sizeof a, "%s", tmp_path("a.bpk"));
    snprintf(s, sizeof s, "%s", tmp_path("a.safetensors"));
    rewrite(a, s, 0);
    check_same(s, &m, true);
    rewrite(s, tmp_path("b.bpk"), 0);
    CHECK_MSG(same_file(a, tmp_path("b.bpk")), ".bpk -> .safetensors -> .bpk changed the file");
    rewrite(s, tmp_path("b.safetensors"), 0);
    CHECK_MSG(same_file(s, tmp_path("b.safetensors")), "safetensors rewrite is not byte-identical");
    model_free(&m);
    /* Burn-only labels become what Burn's safetensors store writes */
    model_make(&m, true, false);
    CHECK_OK(qtk__ckpt_write(s, QTK_CKPT_SAFETENSORS, &m.d, (const void *const *)m.bytes, 1));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(s, NULL, &c));
    for (size_t i = 0; c && i < qtk__ckpt_desc(c)->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[i];
        if (strcmp(t->name, "burn.Flex32") == 0) CHECK(t->elem == QTK_ELEM_F32);
        if (strcmp(t->name, "burn.Bool(U8)") == 0) CHECK(t->elem == QTK_ELEM_U8);
        if (strcmp(t->name, "burn.Bool(U32)") == 0) CHECK(t->elem == QTK_ELEM_U32);
    }
    qtk_ckpt_close(c);
    check_same(s, &m, false);
    model_free(&m);
    tmp_dir_remove();
}

static void writer_errors(void) {
    tmp_dir_make();
    model m;
    model_make(&m, false, true); /* F8/F4/C64: safetensors only */
    CHECK_ERR(qtk__ckpt_write(tmp_path("x.bpk"), QTK_CKPT_BURNPACK, &m.d, (const void *const *)m.bytes, 0), QTK_E_UNSUPPORTED,
              "which burnpack has no dtype for");
    CHECK(!file_exists(tmp_path("x.bpk")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
    CHECK_OK(qtk__ckpt_write(tmp_path("x.safetensors"), QTK_CKPT_SAFETENSORS, &m.d, (const void *const *)m.bytes, 0));
    check_same(tmp_path("x.safetensors"), &m, true);
    /* exists, no force */
    CHECK_ERR(qtk__ckpt_write(tmp_path("x.safetensors"), QTK_CKPT_SAFETENSORS, &m.d, (const void *const *)m.bytes, 0),
              QTK_E_IO, "exists; it is replaced only with");
    model_free(&m);

    qtk__desc d;
    qtk__desc_init(&d);
    size_t shape[2] = {4, 300};
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q8s,block=*:f32", &s));
    CHECK_OK(qtk__desc_add_quantized(&d, "wide", &s, shape, 2, NULL));
    qtk__ckpt_writer *w = NULL;
    CHECK_ERR(qtk__ckpt_writer_open(tmp_path("wide.bpk"), QTK_CKPT_BURNPACK, &d, 0, &w), QTK_E_UNSUPPORTED,
              "block dim of 300; Burn's format holds block dims of at most 255");
    CHECK(!file_exists(tmp_path("wide.bpk")));
    /* duplicate names */
    CHECK_OK(qtk__desc_add_quantized(&d, "wide", &s, shape, 2, NULL));
    CHECK_ERR(qtk__ckpt_writer_open(tmp_path("dup.safetensors"), QTK_CKPT_SAFETENSORS, &d, 0, &w), QTK_E_ARG,
              "two tensors are named 'wide'");
    qtk__desc_free(&d);
    /* wrong length, missing tensors, bad quantized bytes: commit refuses, nothing left */
    qtk__desc_init(&d);
    CHECK_OK(qtk__desc_add_raw(&d, "a", QTK_ELEM_F32, shape, 2, NULL));
    CHECK_OK(qtk_scheme_parse("q8f,block=4:ue4m3", &s));
    CHECK_OK(qtk__desc_add_quantized(&d, "b", &s, shape, 2, NULL));
    CHECK_OK(qtk__ckpt_writer_open(tmp_path("p.bpk"), QTK_CKPT_BURNPACK, &d, 0, &w));
    uint8_t *buf = calloc(1, 4 * 4 * 300);
    CHECK_ERR(qtk__ckpt_writer_put(w, buf, 7), QTK_E_LENGTH, "tensor 'a' takes 4800 bytes; got 7");
    CHECK_OK(qtk__ckpt_writer_put(w, buf, 4800));
    memset(buf + 1200, 0xff, 1); /* a ue4m3 scale with its sign bit set */
    CHECK_ERR(qtk__ckpt_writer_put(w, buf, d.tensors[1].nbytes), QTK_E_VALUE, "tensor 'b'");
    CHECK_ERR(qtk__ckpt_writer_commit(w), QTK_E_ARG, "only 1 of 2 tensors were written");
    CHECK(!file_exists(tmp_path("p.bpk")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
    free(buf);
    qtk__desc_free(&d);
    tmp_dir_remove();
}

/* ---- malformed files ---- */

/* Metadata for tensors a: F32 [2, 2] at [0, 16) and b: F32 [4] at [256, 272). */
static void meta_two(cbuf *c, uint64_t a_end, uint64_t b_start, uint64_t b_end, const char *b_name) {
    c->n = 0;
    cb_head(c, 5, 1), cb_text(c, "tensors"), cb_head(c, 5, 2);
    cb_text(c, "a"), cb_head(c, 5, 3), cb_text(c, "dtype"), cb_text(c, "F32"), cb_text(c, "shape"), cb_head(c, 4, 2),
        cb_u(c, 2), cb_u(c, 2), cb_text(c, "data_offsets"), cb_head(c, 4, 2), cb_u(c, 0), cb_u(c, a_end);
    cb_text(c, b_name), cb_head(c, 5, 3), cb_text(c, "dtype"), cb_text(c, "F32"), cb_text(c, "shape"), cb_head(c, 4, 1),
        cb_u(c, 4), cb_text(c, "data_offsets"), cb_head(c, 4, 2), cb_u(c, b_start), cb_u(c, b_end);
}

static qtk_status open_bytes(const uint8_t *f, size_t n) {
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open_memory(f, n, "t.bpk", NULL, &c);
    qtk_ckpt_close(c);
    return st;
}

static void check_meta(cbuf *c, size_t data_len, qtk_status want, const char *msg) {
    uint8_t data[1024] = {0};
    size_t n;
    uint8_t *f = bpk_assemble(c->p, c->n, data, data_len, &n);
    CHECK_ERR(open_bytes(f, n), want, msg);
    free(f);
}

static void malformed(void) {
    cbuf c = {0};
    uint8_t data[272] = {0};
    size_t n;
    meta_two(&c, 16, 256, 272, "b");
    uint8_t *good = bpk_assemble(c.p, c.n, data, 272, &n);
    CHECK_OK(open_bytes(good, n));
    /* truncated at every length */
    for (size_t k = 0; k < n; k++) {
        qtk_status st = open_bytes(good, k);
        CHECK_MSG(st == QTK_E_FORMAT && qtk_last_error()[0], "truncated to %zu bytes: %s", k, qtk_status_name(st));
    }
    CHECK_ERR(open_bytes(good, 5), QTK_E_FORMAT, "burnpack 't.bpk': the file is 5 bytes; a burnpack starts with a 10-byte header");
    CHECK_ERR(open_bytes(good, 20), QTK_E_FORMAT, "truncated: the metadata takes bytes [10,");
    CHECK_ERR(open_bytes(good, n - 1), QTK_E_FORMAT, "tensor 'b': bytes [256, 272) of the data section");
    uint8_t *f = malloc(n + 8);
    memcpy(f, good, n);
    f[3] = 'C';
    CHECK_ERR(open_bytes(f, n), QTK_E_FORMAT, "bad magic 4e 52 55 43; a burnpack starts with 4e 52 55 42");
    memcpy(f, good, n);
    f[4] = 2;
    CHECK_ERR(open_bytes(f, n), QTK_E_UNSUPPORTED, "format version 2");
    memcpy(f, good, n);
    f[4] = 0; /* version 0 is read, as Burn does */
    CHECK_OK(open_bytes(f, n));
    memcpy(f, good, n);
    f[6] = 0x01, f[7] = 0x00, f[8] = 0x40, f[9] = 0x06; /* 100 MiB + 1 */
    CHECK_ERR(open_bytes(f, n), QTK_E_FORMAT, "exceeds Burn's limit of 104857600 bytes");
    memcpy(f, good, n);
    f[6] = (uint8_t)(c.n - 1); /* the CBOR item is cut */
    CHECK_ERR(open_bytes(f, n), QTK_E_FORMAT, "metadata: CBOR");
    memcpy(f, good, n);
    memset(f + n, 0, 8);
    CHECK_ERR(open_bytes(f, n + 8), QTK_E_FORMAT, "8 unexpected trailing bytes");
    free(f);
    free(good);

    meta_two(&c, 16, 0, 16, "b");
    check_meta(&c, 16, QTK_E_FORMAT, "tensors 'a' [0, 16) and 'b' [0, 16) overlap");
    meta_two(&c, 16, 256, 300, "b");
    check_meta(&c, 300, QTK_E_LENGTH, "tensor 'b' (F32, shape 4) takes 16 bytes; its data_offsets [256, 300) give 44");
    meta_two(&c, 16, 256, 250, "b");
    check_meta(&c, 272, QTK_E_FORMAT, "end before they start");
    meta_two(&c, 16, 16, 32, "b");
    check_meta(&c, 32, QTK_E_FORMAT, "starts at data offset 16, not a multiple of 256");
    meta_two(&c, 16, 256, 1ull << 40, "b");
    check_meta(&c, 272, QTK_E_FORMAT, "Burn's reader takes at most");
    meta_two(&c, 16, 1ull << 33, (1ull << 33) + 16, "b");
    check_meta(&c, 272, QTK_E_FORMAT, "beyond the end of the file");
    meta_two(&c, 16, 256, 272, "a"); /* two "a" keys: Burn keeps the last, qtk refuses */
    check_meta(&c, 272, QTK_E_FORMAT, "tensor 'a' is listed twice");

    /* dtype and descriptor problems */
    const struct {
        const char *dtype_hex, *msg;
        qtk_status st;
    } dt[] = {
        {"62 4638", "unknown dtype 'F8'", QTK_E_FORMAT},
        {"a1 64426f6f6c 63 493634", "Bool store 'I64'", QTK_E_FORMAT},
        {"a1 66 51466c6f6174 a5 6576616c7565 635138 46 6573746f7265 664e6174697665 646d6f6465 6953796d6d6574726963 "
         "6674656e736f72 f6 65626c6f636b f6", "takes exactly 8 bytes (values 4 + scales 4", QTK_E_LENGTH},
        {"a2 6146 01 6147 02", "dtype is not a text or a 1-entry map", QTK_E_FORMAT},
    };
    for (size_t k = 0; k < sizeof dt / sizeof dt[0]; k++) {
        c.n = 0;
        cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_head(&c, 5, 1), cb_text(&c, "q"), cb_head(&c, 5, 3);
        cb_text(&c, "dtype");
        size_t hn;
        uint8_t *h = hex_bytes(dt[k].dtype_hex, &hn);
        cb_raw(&c, h, hn);
        free(h);
        cb_text(&c, "shape"), cb_head(&c, 4, 1), cb_u(&c, 4), cb_text(&c, "data_offsets"), cb_head(&c, 4, 2), cb_u(&c, 0), cb_u(&c, 16);
        check_meta(&c, 16, dt[k].st, dt[k].msg);
    }
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_head(&c, 5, 1), cb_text(&c, "q"), cb_head(&c, 5, 2);
    cb_text(&c, "dtype"), cb_text(&c, "F32"), cb_text(&c, "shape"), cb_head(&c, 4, 0);
    check_meta(&c, 0, QTK_E_FORMAT, "tensor 'q': the descriptor lacks 'data_offsets'");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "metadata"), cb_head(&c, 5, 0);
    check_meta(&c, 0, QTK_E_FORMAT, "no 'tensors' field");
    c.n = 0;
    cb_head(&c, 4, 0);
    check_meta(&c, 0, QTK_E_FORMAT, "the CBOR item is not a map");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_head(&c, 5, 0), cb_u(&c, 7);
    check_meta(&c, 0, QTK_E_FORMAT, "1 bytes follow its CBOR item");
    /* hostile CBOR: nested 200 deep; an array claiming 2^32 entries; a string past the end */
    c.n = 0;
    for (int i = 0; i < 200; i++) cb_head(&c, 4, 1);
    cb_u(&c, 0);
    check_meta(&c, 0, QTK_E_FORMAT, "nests deeper than 128 levels");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_head(&c, 4, 0xffffffffull);
    check_meta(&c, 0, QTK_E_FORMAT, "claims 4294967295 entries");
    c.n = 0;
    cb_head(&c, 5, 1), cb_head(&c, 3, 1000);
    check_meta(&c, 0, QTK_E_FORMAT, "needs");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_raw(&c, "\xff", 1);
    check_meta(&c, 0, QTK_E_FORMAT, "break at byte");
    /* a tensor name that is not UTF-8 */
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "tensors"), cb_head(&c, 5, 1), cb_head(&c, 3, 2), cb_raw(&c, "\xc3\x28", 2);
    cb_head(&c, 5, 0);
    check_meta(&c, 0, QTK_E_FORMAT, "not valid UTF-8");
    free(c.p);
}

/* What ciborium accepts, qtk reads: indefinite maps, arrays and strings, tags, integers in
 * longer encodings than the shortest, null param_id, unknown keys. */
static void lenient_cbor(void) {
    cbuf c = {0};
    cb_head(&c, 5, 2), cb_text(&c, "tensors");
    cb_raw(&c, "\xbf", 1);                                      /* indefinite map */
    cb_raw(&c, "\x7f\x61" "w" "\x62" "ei" "\xff", 7); /* (_ "w", "ei") */
    cb_head(&c, 5, 5);
    cb_text(&c, "dtype"), cb_head(&c, 6, 1000), cb_text(&c, "F32"); /* a tag around the value */
    cb_text(&c, "shape"), cb_raw(&c, "\x9f\x1b\0\0\0\0\0\0\0\x04\xff", 11); /* [_ 4 as u64] */
    cb_text(&c, "data_offsets"), cb_head(&c, 4, 2), cb_u(&c, 0), cb_raw(&c, "\x19\x00\x10", 3);
    cb_text(&c, "param_id"), cb_head(&c, 7, 22);
    cb_text(&c, "future"), cb_text(&c, "ignored");
    cb_raw(&c, "\xff", 1);
    cb_text(&c, "something_else"), cb_u(&c, 1);
    uint8_t data[16] = {0};
    size_t n;
    uint8_t *f = bpk_assemble(c.p, c.n, data, 16, &n);
    qtk_ckpt *ck = NULL;
    CHECK_OK(qtk_ckpt_open_memory(f, n, "lenient.bpk", NULL, &ck));
    if (ck) {
        const qtk_ckpt_tensor *t = &qtk__ckpt_desc(ck)->tensors[0];
        CHECK(strcmp(t->name, "wei") == 0 && t->elem == QTK_ELEM_F32 && t->rank == 1 && t->shape[0] == 4 && !t->has_param_id);
        qtk_ckpt_close(ck);
    }
    free(f);
    free(c.p);
}

/* Lookup tensors: the table rides at the end of the payload; a foreign table gets a name. */
static void lookup_tables(void) {
    tmp_dir_make();
    float t4[4] = {-1.5f, -0.25f, 0.25f, 1.5f};
    CHECK_OK(qtk_table_register("mytab", t4, 4));
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q2f,table=mytab,block=8:f16", &s));
    size_t shape[2] = {4, 16};
    CHECK_OK(qtk__desc_add_quantized(&d, "w", &s, shape, 2, NULL));
    float x[64];
    uint64_t seed = 3;
    for (int i = 0; i < 64; i++) x[i] = trand_normal(&seed);
    uint8_t q[64];
    CHECK(d.tensors[0].nbytes <= sizeof q);
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, q, d.tensors[0].nbytes));
    const void *b[1] = {q};
    CHECK_OK(qtk__ckpt_write(tmp_path("l.bpk"), QTK_CKPT_BURNPACK, &d, b, 0));
    CHECK_OK(qtk__ckpt_write(tmp_path("l.safetensors"), QTK_CKPT_SAFETENSORS, &d, b, 0));
    for (int k = 0; k < 2; k++) {
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(tmp_path(k ? "l.safetensors" : "l.bpk"), NULL, &c));
        if (!c) continue;
        const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[0];
        /* burnpack has no table name: the entries are matched to a registered table; the
         * safetensors spec names it */
        CHECK(t->quantized && t->scheme.mode == QTK_MODE_LOOKUP);
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, 0, &v));
        CHECK(v.len == d.tensors[0].nbytes && memcmp(v.data, q, v.len) == 0);
        float y[64], z[64];
        CHECK_OK(qtk_dequantize_bytes(v.data, v.len, shape, 2, &t->scheme, QTK_DTYPE_F32, y, 64));
        CHECK_OK(qtk_dequantize_bytes(q, v.len, shape, 2, &s, QTK_DTYPE_F32, z, 64));
        CHECK(memcmp(y, z, sizeof y) == 0);
        qtk_ckpt_unload(c, &v);
        qtk_ckpt_close(c);
    }
    qtk__desc_free(&d);
    tmp_dir_remove();
}

TEST_MAIN("burnpack", T(roundtrip_all_dtypes), T(cross_format), T(writer_errors), T(malformed), T(lenient_cbor), T(lookup_tables))
