/* test_api.c — the public checkpoint API (qtk_ckpt.h), used as a program outside qtk would
 * use it: this file includes the public headers only. Every format written, read back and
 * copied byte for byte; zero-copy loads; the writer's stream and its all-or-nothing commit;
 * conversion and evaluation with progress, events and cancellation; every error path with
 * its status and message; and every allocation of the checkpoint layer failing in turn. */
#include "qtk.h"
#include "qtk_ckpt.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- allocation failure: the checkpoint layer's malloc/calloc/realloc, wrapped at link ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static long alloc_countdown = -1; /* the allocation that fails (0 = the next); -1: none */
static long alloc_count;
static bool alloc_fails(void) {
    alloc_count++;
    if (alloc_countdown < 0) return false;
    return alloc_countdown-- == 0;
}
void *__wrap_malloc(size_t n) { return alloc_fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return alloc_fails() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return alloc_fails() ? NULL : __real_realloc(p, n); }

/* ---- a temporary directory ---- */

static char dir[256];
static const char *at(const char *name) {
    static char ring[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(ring[k], sizeof ring[k], "%s/%s", dir, name);
    return ring[k];
}
static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}
/* Names in the directory holding part. */
static int count_names(const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = __real_malloc(len > 0 ? (size_t)len : 1);
    if (b && len > 0 && fread(b, 1, (size_t)len, f) != (size_t)len) len = -1;
    fclose(f);
    *n = len > 0 ? (size_t)len : 0;
    return b;
}
static bool same_files(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* ---- a small model: raw tensors of several types and two quantized ones ---- */

enum { R = 4, C = 64 };
static float w[R * C], v[C];
static uint16_t vb[C];
static int64_t ids[3] = {7, -1, 1LL << 40};
static qtk_tensor *q4, *nv;

static void make_model(void) {
    uint64_t s = 42;
    for (size_t i = 0; i < R * C; i++) w[i] = trand_normal(&s) * 0.1f;
    for (size_t i = 0; i < C; i++) v[i] = 1.0f + 0.01f * (float)i, vb[i] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_BF16, v[i]);
    qtk_scheme a, b;
    size_t shape[2] = {R, C};
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &a));
    CHECK_OK(qtk_scheme_parse("nvfp4", &b));
    CHECK_OK(qtk_quantize(w, shape, 2, &a, NULL, &q4));
    CHECK_OK(qtk_quantize(w, shape, 2, &b, NULL, &nv));
}

/* Writes the model to path (format by extension, or opts). */
static qtk_status write_model(const char *path, const qtk_write_options *opts) {
    qtk_writer *wr = NULL;
    size_t s2[2] = {R, C}, s1[1] = {C}, s3[1] = {3};
    qtk_status st = qtk_writer_create(path, opts, &wr);
    if (!st) st = qtk_writer_add_raw(wr, "w.f32", QTK_ELEM_F32, s2, 2, w);
    if (!st) st = qtk_writer_add_raw(wr, "norm.bf16", QTK_ELEM_BF16, s1, 1, vb);
    if (!st) st = qtk_writer_add_raw(wr, "ids", QTK_ELEM_I64, s3, 1, NULL); /* given later */
    if (!st) st = qtk_writer_add_tensor(wr, "w.q4", q4);
    if (!st) st = qtk_writer_add_tensor(wr, "w.nvfp4", nv);
    if (!st) st = qtk_writer_add_meta(wr, "producer", "test_api");
    if (!st) st = qtk_writer_add_meta(wr, "note", "two tensors quantized");
    if (!st) st = qtk_writer_write(wr, ids, sizeof ids);
    if (!st) return qtk_writer_commit(wr);
    qtk_writer_abort(wr);
    return st;
}

/* Copies every tensor, metadata entry and scalar of path a into b through the public API. */
static qtk_status copy_ckpt(const char *a, const char *b) {
    qtk_ckpt *c = NULL;
    qtk_writer *wr = NULL;
    qtk_status st = qtk_ckpt_open(a, NULL, &c);
    if (!st) st = qtk_writer_create(b, NULL, &wr);
    for (size_t i = 0; !st && i < qtk_ckpt_count(c); i++) st = qtk_writer_add(wr, qtk_ckpt_tensor_at(c, i), NULL);
    for (size_t i = 0; !st && i < qtk_ckpt_meta_count(c); i++) {
        const char *k, *val;
        st = qtk_ckpt_meta_at(c, i, &k, &val);
        if (!st) st = qtk_writer_add_meta(wr, k, val);
    }
    for (size_t i = 0; !st && i < qtk_ckpt_scalar_count(c); i++) st = qtk_writer_add_scalar(wr, qtk_ckpt_scalar_at(c, i));
    for (size_t i = 0; !st && i < qtk_ckpt_count(c); i++) {
        qtk_ckpt_view view;
        st = qtk_ckpt_load(c, i, &view);
        if (!st) st = qtk_writer_write(wr, view.data, view.len);
        qtk_ckpt_unload(c, &view);
    }
    if (!st) st = qtk_writer_commit(wr);
    else qtk_writer_abort(wr);
    qtk_ckpt_close(c);
    return st;
}

static const qtk_ckpt_tensor *named(qtk_ckpt *c, const char *name) {
    size_t i;
    return qtk_ckpt_find(c, name, &i) == QTK_OK ? qtk_ckpt_tensor_at(c, i) : NULL;
}

/* What a reader of path must find: the tensors, their types, shapes and bytes. */
static void check_model(const char *path) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(path, NULL, &c));
    if (!c) return;
    CHECK_EQ_U(qtk_ckpt_count(c), 5);
    CHECK(qtk_ckpt_format_of(c) == qtk_ckpt_format_from_path(path));
    const qtk_ckpt_tensor *t = named(c, "w.f32");
    CHECK(t && !t->quantized && t->elem == QTK_ELEM_F32 && t->rank == 2 && t->shape[0] == R && t->shape[1] == C);
    t = named(c, "w.nvfp4");
    char buf[256];
    CHECK(t && t->quantized && strcmp(qtk_ckpt_type_string(t, buf, sizeof buf), "nvfp4") == 0);
    t = named(c, "w.q4");
    CHECK(t && strcmp(qtk_ckpt_type_string(t, buf, sizeof buf), "q4f,block=32:f16") == 0);
    t = named(c, "ids");
    CHECK(t && t->elem == QTK_ELEM_I64 && t->nbytes == sizeof ids);
    CHECK(qtk_ckpt_meta_get(c, "producer") && strcmp(qtk_ckpt_meta_get(c, "producer"), "test_api") == 0);
    CHECK(qtk_ckpt_meta_get(c, "no such key") == NULL);
    /* bytes as written: raw ones read back, quantized ones load as the same tensor */
    size_t i;
    CHECK_OK(qtk_ckpt_find(c, "ids", &i));
    int64_t got[3] = {0};
    CHECK_OK(qtk_ckpt_read(c, i, got, sizeof got));
    CHECK(memcmp(got, ids, sizeof ids) == 0);
    CHECK_OK(qtk_ckpt_find(c, "w.nvfp4", &i));
    qtk_tensor *lt = NULL;
    CHECK_OK(qtk_ckpt_load_tensor(c, i, &lt));
    size_t n1 = 0, n2 = 0;
    const uint8_t *b1 = lt ? qtk_tensor_bytes(lt, &n1) : NULL, *b2 = qtk_tensor_bytes(nv, &n2);
    CHECK(b1 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    /* values: dequantized as qtk_dequantize does, floats converted */
    float y[R * C], y2[R * C];
    CHECK_OK(qtk_ckpt_read_values(c, i, QTK_DTYPE_F32, y, R * C));
    CHECK_OK(qtk_dequantize(nv, QTK_DTYPE_F32, y2, R * C));
    CHECK(memcmp(y, y2, sizeof y) == 0);
    CHECK_OK(qtk_ckpt_find(c, "norm.bf16", &i));
    CHECK_OK(qtk_ckpt_read_values(c, i, QTK_DTYPE_F32, y, C));
    bool ok = true;
    for (size_t k = 0; k < C; k++) ok &= y[k] == qtk_fmt_decode(QTK_DTYPE_BF16, vb[k]);
    CHECK(ok);
    uint16_t h[C];
    CHECK_OK(qtk_ckpt_read_values(c, i, QTK_DTYPE_BF16, h, C)); /* the same dtype: the bits as stored */
    CHECK(memcmp(h, vb, sizeof h) == 0);
    CHECK_OK(qtk_ckpt_find(c, "w.f32", &i));
    CHECK_ERR(qtk_ckpt_read_values(c, i, QTK_DTYPE_F16, h, C), QTK_E_LENGTH, "has 256 elements; the buffer holds 64");
    qtk_ckpt_close(c);
    /* the loaded tensor outlives its checkpoint */
    float z[R * C];
    CHECK_OK(qtk_dequantize(lt, QTK_DTYPE_F32, z, R * C));
    CHECK(memcmp(z, y2, sizeof z) == 0);
    qtk_tensor_free(lt);
}

static void every_format(void) {
    const char *names[] = {"m.bpk", "m.safetensors", "m.gguf"};
    const char *copies[] = {"m2.bpk", "m2.safetensors", "m2.gguf"};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(write_model(at(names[k]), NULL));
        check_model(at(names[k]));
        /* read -> write through the API: the same bytes */
        CHECK_OK(copy_ckpt(at(names[k]), at(copies[k])));
        CHECK_MSG(same_files(at(names[k]), at(copies[k])), "%s: a copy through the API differs", names[k]);
    }
    /* across formats: bpk -> safetensors -> bpk keeps every byte of the burnpack */
    CHECK_OK(copy_ckpt(at("m.bpk"), at("x.safetensors")));
    CHECK_OK(copy_ckpt(at("x.safetensors"), at("x.bpk")));
    CHECK(same_files(at("m.bpk"), at("x.bpk")));
    /* a Hub layout, sharded into a directory, and one file */
    qtk_write_options o = {.layout = QTK_LAYOUT_MODELOPT, .max_shard_bytes = 1024};
    CHECK_ERR(write_model(at("mo"), &o), QTK_E_UNSUPPORTED, "does not fit layout modelopt"); /* q4f is not ModelOpt's */
    CHECK(!exists(at("mo")));
    qtk_writer *wr = NULL;
    size_t s2[2] = {R, C};
    CHECK_OK(qtk_writer_create(at("mo"), &o, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a.weight", QTK_ELEM_F32, s2, 2, w));
    CHECK_OK(qtk_writer_add_tensor(wr, "b.weight", nv));
    CHECK_OK(qtk_writer_commit(wr));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(at("mo"), NULL, &c));
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    CHECK(hi.layout == QTK_LAYOUT_MODELOPT && hi.n_shards == 2 && hi.index_file != NULL);
    const qtk_ckpt_tensor *bw = named(c, "b.weight");
    CHECK(bw && bw->quantized && qtk_ckpt_shard_of(c, 1) == 1);
    qtk_ckpt_close(c);
    /* the stored tensors, read in layout none */
    qtk_open_options none = {.layout = QTK_LAYOUT_NONE};
    CHECK_OK(qtk_ckpt_open(at("mo"), &none, &c));
    CHECK(c && named(c, "b.weight_scale") && named(c, "b.weight_scale_2") && qtk_ckpt_count(c) == 4);
    qtk_ckpt_close(c);
    /* Burn's own file, copied through the API: byte for byte */
    const char *sd = getenv("QTK_SHARED_DIR");
    char bpk[600];
    snprintf(bpk, sizeof bpk, "%s/data/burn/model.bpk", sd ? sd : "../shared");
    if (exists(bpk)) {
        CHECK_OK(copy_ckpt(bpk, at("burn.bpk")));
        CHECK(same_files(bpk, at("burn.bpk")));
    }
}

/* A tensor loaded from caller memory points into it: no copy. */
static void zero_copy(void) {
    size_t n = 0;
    uint8_t *file = slurp(at("m.safetensors"), &n);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open_memory(file, n, "mem.safetensors", NULL, &c));
    size_t i;
    CHECK_OK(qtk_ckpt_find(c, "w.q4", &i));
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_ckpt_load_tensor(c, i, &t));
    size_t len = 0;
    const uint8_t *b = t ? qtk_tensor_bytes(t, &len) : NULL;
    CHECK_MSG(b >= file && b + len <= file + n, "the tensor's bytes are a copy, not the file's");
    qtk_ckpt_view view;
    CHECK_OK(qtk_ckpt_load(c, i, &view));
    CHECK(view.data == b && view.len == len);
    qtk_ckpt_unload(c, &view);
    qtk_ckpt_close(c); /* the tensor keeps the checkpoint alive */
    float y[R * C];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, R * C));
    qtk_tensor_free(t); /* now the checkpoint goes */
    free(file);
}

/* Declared tensors written in order; an abort or a failed commit leaves nothing. */
static void writer_stream(void) {
    qtk_writer *wr = NULL;
    size_t s1[1] = {C};
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, NULL));
    CHECK_OK(qtk_writer_add_raw(wr, "b", QTK_ELEM_F32, s1, 1, v)); /* written when its turn comes */
    CHECK_OK(qtk_writer_add_raw(wr, "c", QTK_ELEM_F32, s1, 1, NULL));
    CHECK_OK(qtk_writer_write(wr, w, sizeof v));
    CHECK_ERR(qtk_writer_add_meta(wr, "late", "x"), QTK_E_ARG, "declare everything before the first write");
    CHECK(count_names("s.safetensors") == 1 && !exists(at("s.safetensors"))); /* only the temporary file */
    qtk_writer_abort(wr);
    CHECK(count_names("s.safetensors") == 0);
    /* commit with a tensor never given */
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, NULL));
    CHECK_ERR(qtk_writer_commit(wr), QTK_E_ARG, "tensor 'a' was declared without data and never written");
    CHECK(count_names("s.safetensors") == 0);
    /* a failed write kills the writer: later calls say so, and nothing appears */
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, NULL));
    CHECK_ERR(qtk_writer_write(wr, v, 7), QTK_E_LENGTH, "takes 256 bytes; got 7");
    CHECK_ERR(qtk_writer_write(wr, v, sizeof v), QTK_E_LENGTH, "failed earlier");
    CHECK_ERR(qtk_writer_commit(wr), QTK_E_LENGTH, "nothing was written");
    CHECK(count_names("s.safetensors") == 0);
    /* more tensors than declared, names twice */
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, v));
    CHECK_ERR(qtk_writer_write(wr, v, sizeof v), QTK_E_ARG, "are written already");
    qtk_writer_abort(wr);
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, v));
    CHECK_OK(qtk_writer_add_raw(wr, "a", QTK_ELEM_F32, s1, 1, v));
    CHECK_ERR(qtk_writer_commit(wr), QTK_E_ARG, "two tensors are named 'a'");
    CHECK(count_names("s.safetensors") == 0);
    /* quantized bytes are checked */
    qtk_ckpt_tensor bad = {.name = "q", .quantized = true, .rank = 1, .shape = s1};
    CHECK_OK(qtk_scheme_parse("q4s,block=32:ue4m3,store=native", &bad.scheme));
    uint8_t junk[64 + 2];
    memset(junk, 0x08, sizeof junk); /* 0x08 is no sign-extended 4-bit field */
    CHECK_OK(qtk_writer_create(at("s.safetensors"), NULL, &wr));
    CHECK_OK(qtk_writer_add(wr, &bad, junk));
    CHECK_ERR(qtk_writer_commit(wr), QTK_E_VALUE, "tensor 'q'");
    CHECK(count_names("s.safetensors") == 0);
    /* an existing file is replaced only with force */
    CHECK_OK(write_model(at("m.bpk"), &(qtk_write_options){.force = 1}));
    CHECK_ERR(write_model(at("m.bpk"), NULL), QTK_E_IO, "exists; it is replaced only with force");
    CHECK(same_files(at("m.bpk"), at("m2.bpk")));
    /* what a format can hold */
    qtk_ckpt_tensor nf = {.name = "n", .quantized = true, .rank = 1, .shape = s1};
    CHECK_OK(qtk_scheme_parse("nf4", &nf.scheme));
    char why[400];
    CHECK_OK(qtk_writer_create(at("h.gguf"), NULL, &wr));
    CHECK(!qtk_writer_can_hold(wr, &nf, why, sizeof why) && strstr(why, "no ggml type holds q4f,table=nf4"));
    CHECK(qtk_writer_can_hold(wr, &(qtk_ckpt_tensor){.name = "f", .elem = QTK_ELEM_F32, .rank = 1, .shape = s1}, why, sizeof why));
    qtk_writer_abort(wr);
    CHECK_OK(qtk_writer_create(at("h.bpk"), NULL, &wr));
    CHECK_OK(qtk_scheme_parse("q8s,block=300:f32", &nf.scheme));
    size_t s300[1] = {600};
    nf.shape = s300;
    CHECK(!qtk_writer_can_hold(wr, &nf, why, sizeof why) && strstr(why, "at most 255"));
    qtk_writer_abort(wr);
    CHECK(count_names("h.") == 0);
}

static void open_errors(void) {
    qtk_ckpt *c = (qtk_ckpt *)1;
    CHECK_ERR(qtk_ckpt_open(NULL, NULL, &c), QTK_E_ARG, "path is NULL");
    CHECK(c == NULL);
    CHECK_ERR(qtk_ckpt_open(at("m.bpk"), NULL, NULL), QTK_E_ARG, "out is NULL");
    CHECK_ERR(qtk_ckpt_open(at("missing.safetensors"), NULL, &c), QTK_E_IO, "missing.safetensors");
    FILE *f = fopen(at("junk.txt"), "w");
    if (f) fputs("hello, I am not a checkpoint", f), fclose(f);
    CHECK_ERR(qtk_ckpt_open(at("junk.txt"), NULL, &c), QTK_E_FORMAT, "is not a checkpoint qtk reads");
    CHECK_ERR(qtk_ckpt_open(at("m.bpk"), &(qtk_open_options){.layout = QTK_LAYOUT_COUNT_}, &c), QTK_E_ARG, "not a qtk_hub_layout");
    CHECK_ERR(qtk_ckpt_open(at("m.bpk"), &(qtk_open_options){.layout = QTK_LAYOUT_MODELOPT}, &c), QTK_E_FORMAT,
              "Hub layouts are safetensors conventions");
    CHECK_ERR(qtk_ckpt_open_memory(NULL, 5, "x", NULL, &c), QTK_E_ARG, "data is NULL");
    CHECK_ERR(qtk_ckpt_open_memory("NRUB\x01", 5, "tiny.bpk", NULL, &c), QTK_E_FORMAT, "tiny.bpk");
    CHECK_OK(qtk_ckpt_open(at("m.safetensors"), NULL, &c));
    size_t i = 99;
    CHECK(qtk_ckpt_tensor_at(c, 5) == NULL && qtk_ckpt_scalar_at(c, 0) == NULL);
    CHECK_ERR(qtk_ckpt_find(c, "nope", &i), QTK_E_NOTFOUND, "has no tensor named 'nope'");
    CHECK_ERR(qtk_ckpt_meta_at(c, 1000, NULL, NULL), QTK_E_ARG, "no metadata entry 1000");
    CHECK_OK(qtk_ckpt_find(c, "ids", &i));
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_ckpt_load_tensor(c, i, &t), QTK_E_ARG, "tensor 'ids' is I64, not quantized");
    float y[C];
    CHECK_ERR(qtk_ckpt_read_values(c, i, QTK_DTYPE_F32, y, 3), QTK_E_UNSUPPORTED, "I64 elements, which are not float values");
    CHECK_ERR(qtk_ckpt_read(c, i, y, 7), QTK_E_LENGTH, "tensor 'ids' takes 24 bytes; the buffer holds 7");
    CHECK_OK(qtk_ckpt_find(c, "norm.bf16", &i));
    CHECK_ERR(qtk_ckpt_read_values(c, i, QTK_DTYPE_E4M3, y, C), QTK_E_ARG, "f32, f16 or bf16");
    CHECK_ERR(qtk_ckpt_read_values(c, i, QTK_DTYPE_F32, y, C - 1), QTK_E_LENGTH, "has 64 elements; the buffer holds 63");
    CHECK_ERR(qtk_ckpt_load_tensor(c, 77, &t), QTK_E_ARG, "no tensor 77");
    qtk_ckpt_view view;
    CHECK_ERR(qtk_ckpt_load(c, 77, &view), QTK_E_ARG, "no tensor 77");
    qtk_ckpt_close(c);
    qtk_ckpt_close(NULL);
    qtk_elem e;
    CHECK_OK(qtk_elem_parse("bf16", &e));
    CHECK(e == QTK_ELEM_BF16 && strcmp(qtk_elem_name(e), "BF16") == 0 && qtk_elem_bits(e) == 16 && qtk_elem_is_float(e));
    CHECK_ERR(qtk_elem_parse("F7", &e), QTK_E_PARSE, "'F7' is not an element type");
    qtk_writer *wr = NULL;
    CHECK_ERR(qtk_writer_create(at("w.txt"), NULL, &wr), QTK_E_ARG, "cannot tell the output format");
    CHECK_ERR(qtk_writer_create(at("w.bpk"), &(qtk_write_options){.layout = QTK_LAYOUT_GPT_OSS}, &wr), QTK_E_ARG,
              "a burnpack output takes neither");
    CHECK_ERR(qtk_writer_create(at("w.safetensors"), &(qtk_write_options){.layout = QTK_LAYOUT_TORCHAO}, &wr), QTK_E_ARG,
              "cannot write layout 'torchao'");
    CHECK_ERR(qtk_writer_create(NULL, NULL, &wr), QTK_E_ARG, "no path");
    CHECK_ERR(qtk_writer_add(NULL, NULL, NULL), QTK_E_ARG, "writer is NULL");
    CHECK_ERR(qtk_file_write_atomic(NULL, "x", 1, 0), QTK_E_ARG, "NULL argument");
    CHECK_OK(qtk_file_write_atomic(at("f.bin"), "abc", 3, 0));
    CHECK_ERR(qtk_file_write_atomic(at("f.bin"), "xyz", 3, 0), QTK_E_IO, "exists");
    size_t n;
    uint8_t *b = slurp(at("f.bin"), &n);
    CHECK(b && n == 3 && memcmp(b, "abc", 3) == 0);
    free(b);
}

/* ---- conversion and evaluation ---- */

typedef struct {
    int progress, plans, notices, requantized;
    int cancel_after; /* progress returns non-zero at this call (0: never) */
    qtk_action actions[8];
} watch;

static int on_progress(void *ctx, const qtk_progress *p) {
    watch *wt = ctx;
    wt->progress++;
    CHECK(p->done <= p->total && p->bytes_done <= p->bytes_total);
    return wt->cancel_after && wt->progress >= wt->cancel_after;
}

static void on_event(void *ctx, const qtk_convert_event *e) {
    watch *wt = ctx;
    if (e->kind == QTK_EVENT_PLAN) {
        if (wt->plans < 8) wt->actions[wt->plans] = e->action;
        wt->plans++;
        CHECK(e->in && e->out && e->why && strcmp(e->in->name, e->out->name) == 0);
    } else if (e->kind == QTK_EVENT_REQUANTIZED) {
        wt->requantized++;
        CHECK(e->sqnr_db > 5 && e->sqnr_db < 60);
    } else {
        wt->notices++;
    }
}

static void convert_and_eval(void) {
    watch wt = {0};
    qtk_convert_options o = {.scheme = "mxfp4", .rules = (const char *const[]){"^norm=none", "ids=keep"}, .n_rules = 2,
                             .min_elements = 64, .progress = on_progress, .event = on_event, .ctx = &wt, .force = 1};
    qtk_convert_summary s;
    CHECK_OK(qtk_ckpt_convert(at("m.safetensors"), at("c.bpk"), &o, &s));
    CHECK(s.tensors == 5 && s.quantized == 3 && s.kept == 2 && s.dequantized == 0 && s.out_files == 1);
    CHECK(s.in_format == QTK_CKPT_SAFETENSORS && s.out_format == QTK_CKPT_BURNPACK && !s.out_directory);
    CHECK(wt.progress == 5 && wt.plans == 5 && wt.requantized == 2); /* w.q4 and w.nvfp4 re-quantized */
    CHECK(wt.actions[0] == QTK_ACT_QUANTIZE && wt.actions[1] == QTK_ACT_KEEP && wt.actions[2] == QTK_ACT_KEEP);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(at("c.bpk"), NULL, &c));
    char buf[64];
    CHECK(c && named(c, "w.f32") && strcmp(qtk_ckpt_type_string(named(c, "w.f32"), buf, sizeof buf), "mxfp4") == 0);
    qtk_ckpt_close(c);
    /* --dtype's cast of the float tensors that stay float */
    qtk_convert_options cast = {.dtype = QTK_DTYPE_F16, .cast_floats = true, .force = 1};
    CHECK_OK(qtk_ckpt_convert(at("m.safetensors"), at("c16.safetensors"), &cast, &s));
    CHECK(s.cast == 2 && s.kept == 3);
    CHECK_OK(qtk_ckpt_open(at("c16.safetensors"), NULL, &c));
    const qtk_ckpt_tensor *a = named(c, "w.f32"), *b = named(c, "norm.bf16");
    CHECK(a && b && a->elem == QTK_ELEM_F16 && b->elem == QTK_ELEM_F16);
    qtk_ckpt_close(c);
    /* cancelled by the progress callback, and by the flag: nothing written */
    wt = (watch){.cancel_after = 2};
    CHECK_ERR(qtk_ckpt_convert(at("m.safetensors"), at("x1.bpk"), &o, NULL), QTK_E_CANCELLED, "cancelled after 2 of 5");
    volatile sig_atomic_t flag = 1;
    qtk_convert_options oc = {.cancel = &flag};
    CHECK_ERR(qtk_ckpt_convert(at("m.safetensors"), at("x2.bpk"), &oc, NULL), QTK_E_CANCELLED, "cancelled after 0 of 5");
    CHECK(!exists(at("x1.bpk")) && !exists(at("x2.bpk")) && count_names(".qtk-tmp-") == 0);
    /* options checked before any file is touched */
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.only = "("}), QTK_E_PARSE, "not a POSIX extended regular expression");
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.scheme = "q9f"}), QTK_E_PARSE, "'q9f'");
    /* regexes glibc would expand into gigabytes (the rules fuzzer's finding: "emod++++..."
     * doubles per '+'), refused before regcomp; ordinary ones pass */
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.only = "emod++++++++++++++++++++++++++++++++++++"}), QTK_E_PARSE,
              "adjacent repetition operators");
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.skip = "((a{20}){20}){20}"}), QTK_E_PARSE, "more than 4096 nodes");
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.rules = (const char *[]){"(x{100}){100}=q8s"}, .n_rules = 1}),
              QTK_E_PARSE, "more than 4096 nodes");
    CHECK_OK(qtk_convert_check(&(qtk_convert_options){.only = "model\\.layers\\.[0-9]+\\.(q|k|v)_proj", .skip = "[]a+]+x{1000}"}));
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.n_rules = 1}), QTK_E_ARG, "1 rules but no rules array");
    CHECK_ERR(qtk_convert_check(&(qtk_convert_options){.dtype = QTK_DTYPE_E4M3}), QTK_E_ARG, "f32, f16 or bf16");
    CHECK_ERR(qtk_ckpt_convert(at("missing.bpk"), at("y.bpk"), NULL, NULL), QTK_E_IO, "missing.bpk");
    CHECK_ERR(qtk_ckpt_convert(at("m.bpk"), at("y.gguf"), &(qtk_convert_options){.scheme = "nf4", .min_elements = 1}, NULL),
              QTK_E_UNSUPPORTED, "cannot be written to gguf in the scheme asked for");
    CHECK(!exists(at("y.bpk")) && !exists(at("y.gguf")));
    /* evaluation: columns are schemes x calibrations */
    qtk_calibration cals[2] = {QTK_CALIB_MINMAX, QTK_CALIB_ABSMEAN};
    qtk_eval_options eo = {.schemes = (const char *const[]){"q8s,block=32:f16", "nvfp4"}, .n_schemes = 2,
                           .calibrations = cals, .n_calibrations = 2, .min_elements = 64};
    qtk_eval_report *r = NULL;
    CHECK_OK(qtk_ckpt_eval(at("m.safetensors"), &eo, &r));
    CHECK(qtk_eval_rows(r) == 3 && qtk_eval_columns(r) == 4); /* w.f32 and the two quantized tensors */
    const qtk_eval_column *col = qtk_eval_column_at(r, 3);
    CHECK(col && strcmp(col->spec, "nvfp4") == 0 && col->calibration == QTK_CALIB_ABSMEAN);
    const qtk_eval_cell *cell = qtk_eval_cell_at(r, 0, 3);
    CHECK(cell && !cell->ok && strstr(cell->err, "absmean")); /* absmean is not for two levels */
    qtk_eval_cell tot;
    size_t failed;
    qtk_eval_metrics m;
    qtk_eval_total(r, 0, &tot, &failed);
    qtk_eval_metrics_of(&tot, &m);
    CHECK(failed == 0 && tot.numel == 3 * R * C && m.sqnr_db > 30 && m.bits_per_el == 8.5);
    CHECK(qtk_eval_row_at(r, 3) == NULL && qtk_eval_cell_at(r, 0, 4) == NULL);
    qtk_eval_report_free(r);
    CHECK_ERR(qtk_ckpt_eval(at("m.safetensors"), &(qtk_eval_options){0}, &r), QTK_E_ARG, "at least one scheme");
    CHECK_ERR(qtk_ckpt_eval(at("m.safetensors"), &(qtk_eval_options){.schemes = (const char *const[]){"q4x"}, .n_schemes = 1},
                            &r),
              QTK_E_PARSE, "scheme 1");
    CHECK(r == NULL);
}

/* Every allocation of a small session failing in turn: a clean status, no leak (ASan), no
 * output left behind. */
static void allocation_failures(void) {
    long total = 0, nomem = 0;
    for (long k = 0;; k++) {
        alloc_count = 0;
        alloc_countdown = k;
        qtk_status st = write_model(at("a.safetensors"), &(qtk_write_options){.force = 1});
        if (!st) st = copy_ckpt(at("a.safetensors"), at("a.bpk"));
        qtk_convert_options o = {.scheme = "q8s,block=32:f16", .force = 1};
        if (!st) st = qtk_ckpt_convert(at("a.bpk"), at("a.gguf"), &o, NULL);
        bool hit = alloc_countdown < 0; /* the k-th allocation happened and failed */
        alloc_countdown = -1;
        unlink(at("a.bpk"));
        unlink(at("a.gguf"));
        if (!hit) {
            CHECK_OK(st); /* every allocation succeeded: so did the session */
            total = alloc_count;
            break;
        }
        nomem += st == QTK_E_NOMEM;
        /* a failed allocation is reported as such, or worked around (a cache not built) */
        CHECK_MSG(st == QTK_OK || st == QTK_E_NOMEM, "allocation %ld failing gave %s: %s", k, qtk_status_name(st),
                  qtk_last_error());
        CHECK_MSG(count_names(".qtk-tmp-") == 0, "allocation %ld failing left a temporary file", k);
        if (k > 100000) break;
    }
    CHECK_MSG(total > 50 && nomem > 0, "%ld allocations, %ld gave QTK_E_NOMEM", total, nomem);
    if (getenv("QTK_TEST_VERBOSE")) fprintf(stderr, "allocation_failures: %ld allocations failed in turn, %ld reported QTK_E_NOMEM\n", total, nomem);
}

/* ---- importance matrices ---- */

static void put_i32(uint8_t **p, int32_t x) {
    memcpy(*p, &x, 4);
    *p += 4;
}

/* A legacy .dat: two entries, ncall 4, then the optional trailer. */
static size_t legacy_dat(uint8_t *b, bool trailer) {
    uint8_t *p = b;
    put_i32(&p, 2);
    const char *names[2] = {"blk.0.attn_q.weight", "output.weight"};
    for (int e = 0; e < 2; e++) {
        put_i32(&p, (int32_t)strlen(names[e]));
        memcpy(p, names[e], strlen(names[e]));
        p += strlen(names[e]);
        put_i32(&p, 4);  /* ncall */
        put_i32(&p, 8);  /* nval */
        for (int k = 0; k < 8; k++) {
            float f = (float)(4 * (k + 1 + 10 * e)); /* sums: weights are these / 4 */
            memcpy(p, &f, 4);
            p += 4;
        }
    }
    if (trailer) {
        put_i32(&p, 17);
        put_i32(&p, 4);
        memcpy(p, "wiki", 4);
        p += 4;
    }
    return (size_t)(p - b);
}

static void imatrix_files(void) {
    uint8_t dat[512];
    size_t n = legacy_dat(dat, true);
    qtk_imatrix *m = NULL;
    CHECK_OK(qtk_imatrix_open_memory(dat, n, "i.dat", &m));
    CHECK(qtk_imatrix_count(m) == 2);
    qtk_imatrix_entry e;
    CHECK_OK(qtk_imatrix_lookup(m, "blk.0.attn_q.weight", &e));
    CHECK(e.columns == 8 && e.experts == 1 && e.weights[0] == 1.0f && e.weights[7] == 8.0f);
    /* a Hugging Face name finds llama.cpp's */
    CHECK_OK(qtk_imatrix_lookup(m, "model.layers.0.self_attn.q_proj.weight", &e));
    CHECK(e.columns == 8 && e.weights[3] == 4.0f);
    CHECK_OK(qtk_imatrix_lookup(m, "lm_head.weight", &e));
    CHECK(e.weights[0] == 11.0f);
    CHECK_ERR(qtk_imatrix_lookup(m, "model.layers.1.self_attn.q_proj.weight", &e), QTK_E_NOTFOUND, "no entry for");
    qtk_imatrix_close(m);
    CHECK_OK(qtk_imatrix_open_memory(dat, legacy_dat(dat, false), "i.dat", &m)); /* no trailer */
    qtk_imatrix_close(m);
    /* truncated anywhere: an error, never a crash */
    n = legacy_dat(dat, true);
    size_t refused = 0;
    for (size_t k = 0; k < n; k++) {
        qtk_status st = qtk_imatrix_open_memory(dat, k, "t.dat", &m);
        refused += st == QTK_E_FORMAT;
        if (st == QTK_OK) qtk_imatrix_close(m);
    }
    CHECK_MSG(refused >= n - 2, "%zu of %zu truncations refused", refused, n); /* cut at the trailer's edges is whole */
    uint8_t bad[512];
    memcpy(bad, dat, n);
    put_i32(&(uint8_t *){bad}, 1000000);
    CHECK_ERR(qtk_imatrix_open_memory(bad, n, "b.dat", &m), QTK_E_FORMAT, "claims 1000000 imatrix entries");
    memcpy(bad, dat, n);
    float neg = -1.0f;
    memcpy(bad + 4 + 4 + 19 + 8, &neg, 4); /* the first entry's first sum */
    CHECK_ERR(qtk_imatrix_open_memory(bad, n, "b.dat", &m), QTK_E_VALUE, "importance is finite and >= 0");
    CHECK_ERR(qtk_imatrix_open_memory("", 0, "e.dat", &m), QTK_E_FORMAT, "neither GGUF nor a legacy imatrix");
    /* GGUF: sums and counts per expert, and a dense one */
    qtk_writer *wr = NULL;
    float sums[2 * 8], cnt[2] = {2, 0}, one[1] = {5}, dense[8];
    for (int k = 0; k < 16; k++) sums[k] = (float)(k + 1);
    for (int k = 0; k < 8; k++) dense[k] = 10.0f;
    size_t s16[2] = {2, 8}, s2[1] = {2}, s1[1] = {1}, s8[1] = {8};
    CHECK_OK(qtk_writer_create(at("i.gguf"), &(qtk_write_options){.force = 1}, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "blk.3.ffn_up_exps.weight.in_sum2", QTK_ELEM_F32, s16, 2, sums));
    CHECK_OK(qtk_writer_add_raw(wr, "blk.3.ffn_up_exps.weight.counts", QTK_ELEM_F32, s2, 1, cnt));
    CHECK_OK(qtk_writer_add_raw(wr, "blk.3.attn_k.weight.in_sum2", QTK_ELEM_F32, s8, 1, dense));
    CHECK_OK(qtk_writer_add_raw(wr, "blk.3.attn_k.weight.counts", QTK_ELEM_F32, s1, 1, one));
    CHECK_OK(qtk_writer_add_meta(wr, "general.type", "imatrix"));
    CHECK_OK(qtk_writer_commit(wr));
    CHECK_OK(qtk_imatrix_open(at("i.gguf"), &m));
    CHECK(qtk_imatrix_count(m) == 2);
    CHECK_OK(qtk_imatrix_lookup(m, "blk.3.ffn_up_exps.weight", &e));
    CHECK(e.columns == 8 && e.experts == 2 && e.weights[0] == 0.5f && e.weights[8] == 1.0f); /* count 0: weights 1 */
    CHECK_OK(qtk_imatrix_lookup(m, "model.layers.3.mlp.experts.0.up_proj.weight", &e)); /* one expert's slice */
    CHECK(e.experts == 1 && e.weights[7] == 4.0f);
    CHECK_ERR(qtk_imatrix_lookup(m, "model.layers.3.mlp.experts.2.up_proj.weight", &e), QTK_E_NOTFOUND, "has 2 experts");
    CHECK_OK(qtk_imatrix_lookup(m, "model.layers.3.self_attn.k_proj.weight", &e));
    CHECK(e.weights[0] == 2.0f);
    qtk_imatrix_close(m);
    /* GGUF without counts, or not an imatrix at all */
    CHECK_OK(qtk_writer_create(at("j.gguf"), &(qtk_write_options){.force = 1}, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "x.in_sum2", QTK_ELEM_F32, s8, 1, dense));
    CHECK_OK(qtk_writer_commit(wr));
    CHECK_ERR(qtk_imatrix_open(at("j.gguf"), &m), QTK_E_FORMAT, "'x.in_sum2' has no 'x.counts' beside it");
    CHECK_ERR(qtk_imatrix_open(at("m.gguf"), &m), QTK_E_FORMAT, "without imatrix entries");
    CHECK_ERR(qtk_imatrix_open(at("missing.dat"), &m), QTK_E_IO, "missing.dat");
    CHECK(m == NULL);
}

static void notice_count(void *ctx, const qtk_convert_event *e) {
    if (e->kind == QTK_EVENT_NOTICE && e->tensor && strcmp(e->tensor, "other.weight") == 0 && strstr(e->text, "importance"))
        ++*(int *)ctx;
}

/* ggml's types through convert with an importance matrix: --scheme q4_k and --preset q4_k_m
 * give the bytes of qtk_quantize with the tensor's weights (which change them) */
static void imatrix_convert_ggml_types(void) {
    enum { KR = 8, KC = 256 };
    static uint8_t dat[64 + 4 * KC];
    uint8_t *p = dat;
    const char *iname = "blk.0.ffn_down.weight";
    put_i32(&p, 1);
    put_i32(&p, (int32_t)strlen(iname));
    memcpy(p, iname, strlen(iname));
    p += strlen(iname);
    put_i32(&p, 1); /* ncall */
    put_i32(&p, KC); /* nval */
    static float wk[KC], x[KR * KC];
    for (int k = 0; k < KC; k++) {
        wk[k] = k % 7 == 3 ? 50.0f : 0.5f + (float)(k % 5); /* sums over one call: the weights */
        memcpy(p, &wk[k], 4);
        p += 4;
    }
    qtk_imatrix *m = NULL;
    CHECK_OK(qtk_imatrix_open_memory(dat, (size_t)(p - dat), "k.dat", &m));
    if (!m) return;
    uint64_t seed = 7;
    for (int i = 0; i < KR * KC; i++) x[i] = trand_normal(&seed) + 0.3f;
    size_t shape[2] = {KR, KC};
    const char *hf = "model.layers.0.mlp.down_proj.weight";
    qtk_writer *wr = NULL;
    CHECK_OK(qtk_writer_create(at("k.safetensors"), &(qtk_write_options){.force = 1}, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, hf, QTK_ELEM_F32, shape, 2, x));
    CHECK_OK(qtk_writer_commit(wr));
    /* a one-layer model: its only ffn_down is layer 0 of 1, which q4_k_m gives Q6_K */
    const char *schemes[2] = {"q4_k", NULL};
    const char *wants[2] = {"q4_k", "q6_k"};
    for (int vi = 0; vi < 2; vi++) {
        qtk_convert_options o = {.scheme = schemes[vi], .mixture = vi ? "q4_k_m" : NULL, .min_elements = 1,
                                 .calibration = QTK_CALIB_MSE, .imatrix = m, .force = 1};
        CHECK_OK(qtk_ckpt_convert(at("k.safetensors"), at("k.gguf"), &o, NULL));
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(wants[vi], &s));
        qtk_quantize_options qo = {.calibration = QTK_CALIB_MSE, .weights = wk, .n_weights = KC};
        qtk_tensor *want = NULL, *plain = NULL, *got = NULL;
        CHECK_OK(qtk_quantize(x, shape, 2, &s, &qo, &want));
        qo.weights = NULL, qo.n_weights = 0;
        CHECK_OK(qtk_quantize(x, shape, 2, &s, &qo, &plain));
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(at("k.gguf"), NULL, &c));
        size_t idx = 0;
        CHECK_OK(qtk_ckpt_find(c, hf, &idx));
        CHECK_OK(qtk_ckpt_load_tensor(c, idx, &got));
        CHECK_MSG(got && qtk_scheme_equal(qtk_tensor_scheme(got), &s), "%s: not written as %s", hf, wants[vi]);
        size_t na = 0, nb = 0;
        const uint8_t *a = want ? qtk_tensor_bytes(want, &na) : NULL, *b = got ? qtk_tensor_bytes(got, &nb) : NULL;
        CHECK_MSG(a && b && na == nb && memcmp(a, b, na) == 0, "%s: converted bytes are not quantize's with the weights",
                  wants[vi]);
        CHECK(plain && b && memcmp(qtk_tensor_bytes(plain, NULL), b, nb) != 0);
        qtk_tensor_free(want);
        qtk_tensor_free(plain);
        qtk_tensor_free(got);
        qtk_ckpt_close(c);
    }
    qtk_imatrix_close(m);
}

/* convert and eval with an importance matrix: each tensor with an entry (by its own or its
 * Hugging Face name) quantized with its weights (the bytes of qtk_quantize with them), the
 * others unweighted with a notice; eval's weighted sums recomputed here; the refusals. */
static void imatrix_convert_eval(void) {
    uint8_t dat[512];
    qtk_imatrix *m = NULL;
    CHECK_OK(qtk_imatrix_open_memory(dat, legacy_dat(dat, false), "i.dat", &m));
    if (!m) return;
    enum { IR = 16, IC = 8 };
    static const char *const names[3] = {"model.layers.0.self_attn.q_proj.weight", "output.weight", "other.weight"};
    float x[3][IR * IC];
    uint64_t seed = 99;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < IR * IC; i++) x[t][i] = trand_normal(&seed) * (i % IC == 2 ? 8.0f : 1.0f);
    size_t shape[2] = {IR, IC};
    qtk_writer *wr = NULL;
    CHECK_OK(qtk_writer_create(at("im.safetensors"), &(qtk_write_options){.force = 1}, &wr));
    for (int t = 0; t < 3; t++) CHECK_OK(qtk_writer_add_raw(wr, names[t], QTK_ELEM_F32, shape, 2, x[t]));
    CHECK_OK(qtk_writer_commit(wr));
    const char *spec = "q4f,block=4:f16";
    int notices = 0;
    qtk_convert_options o = {.scheme = spec, .min_elements = 1, .calibration = QTK_CALIB_MSE, .imatrix = m, .force = 1,
                             .event = notice_count, .ctx = &notices};
    CHECK_OK(qtk_ckpt_convert(at("im.safetensors"), at("im.bpk"), &o, NULL));
    CHECK(notices == 1);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(at("im.bpk"), NULL, &c));
    for (int t = 0; c && t < 3; t++) {
        qtk_imatrix_entry e = {0};
        bool has = qtk_imatrix_lookup(m, names[t], &e) == QTK_OK;
        CHECK(has == (t < 2));
        qtk_quantize_options qo = {.calibration = QTK_CALIB_MSE, .weights = has ? e.weights : NULL, .n_weights = has ? IC : 0};
        qtk_tensor *want = NULL, *got = NULL;
        CHECK_OK(qtk_quantize(x[t], shape, 2, &s, &qo, &want));
        size_t idx = 0;
        CHECK_OK(qtk_ckpt_find(c, names[t], &idx));
        CHECK_OK(qtk_ckpt_load_tensor(c, idx, &got));
        size_t na = 0, nb = 0;
        const uint8_t *a = want ? qtk_tensor_bytes(want, &na) : NULL, *b = got ? qtk_tensor_bytes(got, &nb) : NULL;
        CHECK_MSG(a && b && na == nb && memcmp(a, b, na) == 0, "%s: converted bytes are not quantize's with the weights", names[t]);
        if (has) { /* and the weights changed something (else the test could not fail) */
            qtk_tensor *plain = NULL;
            qo.weights = NULL, qo.n_weights = 0;
            CHECK_OK(qtk_quantize(x[t], shape, 2, &s, &qo, &plain));
            CHECK(plain && b && memcmp(qtk_tensor_bytes(plain, NULL), b, nb) != 0);
            qtk_tensor_free(plain);
        }
        qtk_tensor_free(want);
        qtk_tensor_free(got);
    }
    qtk_ckpt_close(c);
    /* eval: weighted sums per tensor with an entry, none for the other */
    const char *specs[1] = {spec};
    qtk_calibration cals[2] = {QTK_CALIB_MINMAX, QTK_CALIB_MSE};
    qtk_eval_options eo = {.schemes = specs, .n_schemes = 1, .calibrations = cals, .n_calibrations = 2, .min_elements = 1,
                           .imatrix = m};
    qtk_eval_report *r = NULL;
    CHECK_OK(qtk_ckpt_eval(at("im.safetensors"), &eo, &r));
    CHECK(qtk_eval_rows(r) == 3 && qtk_eval_columns(r) == 2);
    double tot_e = 0, tot_s = 0;
    for (size_t i = 0; r && i < 3; i++) {
        const qtk_eval_row *row = qtk_eval_row_at(r, i);
        CHECK(row->weighted == (i < 2));
        for (size_t j = 0; j < 2; j++) {
            const qtk_eval_cell *cell = qtk_eval_cell_at(r, i, j);
            CHECK(cell->ok && cell->weighted == row->weighted);
            if (!row->weighted) continue;
            qtk_imatrix_entry e;
            CHECK_OK(qtk_imatrix_lookup(m, row->name, &e));
            qtk_quantize_options qo = {.calibration = cals[j], .weights = j ? e.weights : NULL, .n_weights = j ? IC : 0};
            float y[IR * IC];
            qtk_tensor *q = NULL;
            CHECK_OK(qtk_quantize(x[i], shape, 2, &s, &qo, &q));
            CHECK_OK(qtk_dequantize(q, QTK_DTYPE_F32, y, IR * IC));
            qtk_tensor_free(q);
            double we = 0, wsig = 0;
            for (int k = 0; k < IR * IC; k++) {
                double d = (double)x[i][k] - y[k];
                we += e.weights[k % IC] * d * d;
                wsig += e.weights[k % IC] * (double)x[i][k] * x[i][k];
            }
            CHECK_MSG(fabs(cell->sum_w_sq_err - we) <= 1e-9 * we && fabs(cell->sum_w_sq_sig - wsig) <= 1e-9 * wsig,
                      "%s column %zu: weighted sums %g %g, want %g %g", row->name, j, cell->sum_w_sq_err, cell->sum_w_sq_sig, we, wsig);
            if (j == 1) tot_e += we, tot_s += wsig;
        }
    }
    qtk_eval_cell tot;
    qtk_eval_total(r, 1, &tot, NULL);
    qtk_eval_metrics met;
    qtk_eval_metrics_of(&tot, &met);
    CHECK(tot.weighted && fabs(met.wsqnr_db - 10.0 * log10(tot_s / tot_e)) < 1e-9);
    /* mse under weights does at least as well as minmax on the weighted error, per tensor */
    for (size_t i = 0; r && i < 2; i++)
        CHECK(qtk_eval_cell_at(r, i, 1)->sum_w_sq_err <= qtk_eval_cell_at(r, i, 0)->sum_w_sq_err);
    qtk_eval_metrics_of(qtk_eval_cell_at(r, 2, 0), &met);
    CHECK(isnan(met.wsqnr_db));
    qtk_eval_report_free(r);
    /* refusals: an imatrix with minmax; an entry that does not fit the tensor */
    o.calibration = QTK_CALIB_MINMAX;
    CHECK_ERR(qtk_convert_check(&o), QTK_E_ARG, "calibration minmax would ignore it");
    CHECK_ERR(qtk_ckpt_convert(at("im.safetensors"), at("im2.bpk"), &o, NULL), QTK_E_ARG, "would ignore it");
    CHECK(!exists(at("im2.bpk")));
    size_t tshape[2] = {IC, IR};
    CHECK_OK(qtk_writer_create(at("imt.safetensors"), &(qtk_write_options){.force = 1}, &wr));
    CHECK_OK(qtk_writer_add_raw(wr, "output.weight", QTK_ELEM_F32, tshape, 2, x[0]));
    CHECK_OK(qtk_writer_commit(wr));
    o.calibration = QTK_CALIB_MSE;
    CHECK_ERR(qtk_ckpt_convert(at("imt.safetensors"), at("im2.bpk"), &o, NULL), QTK_E_SHAPE, "has 8 columns; tensor 'output.weight' has 16");
    CHECK(!exists(at("im2.bpk")));
    CHECK_ERR(qtk_ckpt_eval(at("imt.safetensors"), &eo, &r), QTK_E_SHAPE, "has 8 columns");
    CHECK(r == NULL);
    qtk_imatrix_close(m);
}

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/qtk-api-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    make_model();
}

static void teardown(void) {
    qtk_tensor_free(q4);
    qtk_tensor_free(nv);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            DIR *s = opendir(p);
            for (struct dirent *f; s && (f = readdir(s));) {
                char q[900];
                snprintf(q, sizeof q, "%s/%s", p, f->d_name);
                if (f->d_name[0] != '.') unlink(q);
            }
            if (s) closedir(s);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    if (d) closedir(d);
    rmdir(dir);
}

TEST_MAIN("api", T(setup), T(every_format), T(zero_copy), T(writer_stream), T(open_errors), T(convert_and_eval),
          T(imatrix_files), T(imatrix_convert_eval), T(imatrix_convert_ggml_types), T(allocation_failures), T(teardown))
