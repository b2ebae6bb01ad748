/* fuzz_util.c — see fuzz_util.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void fz_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nfinding (%s:%d): ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n  last qtk error: %s\n", qtk_last_error());
    va_end(ap);
    abort();
}

bool fz_data_error(qtk_status st) {
    switch (st) {
    case QTK_E_FORMAT:
    case QTK_E_VALUE:
    case QTK_E_LENGTH:
    case QTK_E_SHAPE:
    case QTK_E_UNSUPPORTED:
    case QTK_E_NOTFOUND:
    case QTK_E_SCHEME:
    case QTK_E_PARSE:
        return true;
    default:
        return false;
    }
}

/* ---- files ---- */

static char dir_buf[512];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag;
    if (f->level > 0) remove(p);
    return 0;
}

void fz_clear_dir(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void remove_dir(void) {
    if (!dir_buf[0]) return;
    fz_clear_dir(dir_buf);
    rmdir(dir_buf);
}

const char *fz_dir(void) {
    if (dir_buf[0]) return dir_buf;
    const char *base = getenv("QTK_FUZZ_TMP");
    if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(dir_buf, sizeof dir_buf, "%s/qtk-fuzz-%ld", base, (long)getpid());
    if (mkdir(dir_buf, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", dir_buf, strerror(errno));
        abort();
    }
    atexit(remove_dir);
    return dir_buf;
}

const char *fz_path(const char *name) {
    static char buf[4][640];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", fz_dir(), name);
    return buf[k];
}

void fz_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
}

static int temp_found;
static char temp_name[600];

static int look_for_temp(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    if (strstr(p, ".qtk-tmp-") || strstr(p, ".qtk-old-")) {
        temp_found = 1;
        snprintf(temp_name, sizeof temp_name, "%s", p);
    }
    return 0;
}

void fz_check_no_temporaries(const char *dir) {
    temp_found = 0;
    nftw(dir, look_for_temp, 16, FTW_PHYS);
    FZ_CHECK(!temp_found, "a temporary output was left behind: %s", temp_name);
}

/* ---- machine ---- */

int fz_isa_levels(qtk_isa *levels) {
    int n = 0;
    const qtk_isa all[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    qtk_isa was = qtk_get_isa();
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (qtk_set_isa(all[i]) == QTK_OK) levels[n++] = all[i];
    qtk_clear_error();
    qtk_set_isa(was);
    return n;
}

/* ---- input ---- */

uint8_t fz_u8(fz_reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

uint32_t fz_u32(fz_reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)fz_u8(r) << (8 * i);
    return v;
}

uint64_t fz_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- checkpoints ---- */

static bool same_bits_f32(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            *at = i;
            return false;
        }
    }
    return true;
}

#define CHECK_STATUS(st, what, name)                                                                                \
    FZ_CHECK((st) == QTK_OK || (fz_data_error(st) && qtk_last_error()[0]), "%s '%s': %s (%s)", what, name,      \
             qtk_status_name(st), qtk_last_error())

size_t fz_ckpt_walk(qtk_ckpt *c, size_t size) {
    qtk_ckpt_facts f;
    qtk_ckpt_facts_of(c, &f);
    FZ_CHECK(memchr(f.note, '\0', sizeof f.note) != NULL, "facts: the note is not terminated");
    if (size) {
        FZ_CHECK(f.file_bytes == size, "facts: %zu file bytes for an input of %zu", f.file_bytes, size);
        FZ_CHECK(f.header_bytes <= size && f.data_start <= size, "facts: header %zu, data at %zu, input %zu",
                 f.header_bytes, f.data_start, size);
    }
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    FZ_CHECK(hi.n_shards >= 1 && (!size || hi.n_shards == 1), "a checkpoint of %zu shards%s", hi.n_shards,
             size ? " from one file in memory" : "");
    for (size_t i = 0; i < qtk_ckpt_meta_count(c); i++) {
        const char *k = NULL, *v = NULL;
        FZ_CHECK(qtk_ckpt_meta_at(c, i, &k, &v) == QTK_OK && k && v, "metadata %zu", i);
        FZ_CHECK(qtk_ckpt_meta_get(c, k) != NULL, "metadata key '%s' not found", k);
    }
    for (size_t i = 0; i < qtk_ckpt_scalar_count(c); i++) {
        const qtk_ckpt_scalar *s = qtk_ckpt_scalar_at(c, i);
        FZ_CHECK(s && s->name && s->kind <= QTK_SCALAR_BOOL, "scalar %zu", i);
    }
    size_t n = qtk_ckpt_count(c);
    FZ_CHECK(qtk_ckpt_tensor_at(c, n) == NULL, "tensor_at(count) is not NULL");
    for (size_t i = 0; i < n; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        FZ_CHECK(t && t->name, "tensor %zu", i);
        char type[256], shape[256];
        qtk_ckpt_type_string(t, type, sizeof type);
        qtk_shape_format(t->shape, t->rank, shape, sizeof shape);
        FZ_CHECK(type[0] && shape[0], "tensor '%s': no type or shape string", t->name);
        size_t j = SIZE_MAX;
        FZ_CHECK(qtk_ckpt_find(c, t->name, &j) == QTK_OK && j == i, "tensor %zu '%s' is found at %zu", i, t->name, j);
        FZ_CHECK(qtk_ckpt_shard_of(c, i) < hi.n_shards, "tensor '%s' in shard %zu of %zu", t->name, qtk_ckpt_shard_of(c, i),
                 hi.n_shards);
        size_t off = qtk_ckpt_offset_of(c, i);
        FZ_CHECK(!size || off <= size, "tensor '%s' at offset %zu of %zu", t->name, off, size);
        if (t->quantized) {
            qtk_layout L;
            FZ_CHECK(qtk_layout_compute(&t->scheme, t->shape, t->rank, &L) == QTK_OK && L.total_bytes == t->nbytes,
                     "tensor '%s' (%s %s): %zu bytes, but its layout does not give that", t->name, type, shape, t->nbytes);
        } else if (!t->value_shape) {
            unsigned bits = qtk_elem_bits(t->elem);
            FZ_CHECK(bits && t->nbytes == (t->numel / 8 * bits + (t->numel % 8 * bits + 7) / 8),
                     "tensor '%s' (%s %s): %zu bytes for %zu elements of %u bits", t->name, type, shape, t->nbytes,
                     t->numel, bits);
        }
    }
    return n;
}

size_t fz_ckpt_exercise(qtk_ckpt *c, size_t max_values) {
    size_t n = fz_ckpt_walk(c, 0), loaded = 0;
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    for (size_t i = 0; i < n; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        qtk_ckpt_view v;
        qtk_status st = qtk_ckpt_load(c, i, &v);
        CHECK_STATUS(st, "load", t->name);
        if (st) continue;
        loaded++;
        FZ_CHECK(v.len == t->nbytes && (v.data || !v.len), "tensor '%s': a view of %zu bytes for %zu", t->name, v.len,
                 t->nbytes);
        uint8_t *copy = malloc(t->nbytes ? t->nbytes : 1);
        FZ_CHECK(copy, "out of memory");
        st = qtk_ckpt_read(c, i, copy, t->nbytes);
        FZ_CHECK(st == QTK_OK, "tensor '%s' loads but does not read: %s", t->name, qtk_last_error());
        FZ_CHECK(!t->nbytes || memcmp(copy, v.data, t->nbytes) == 0, "tensor '%s': read differs from load", t->name);
        float *deq = NULL;
        if (t->quantized) {
            FZ_CHECK(qtk_bytes_check(v.data, v.len, t->shape, t->rank, &t->scheme) == QTK_OK,
                     "tensor '%s' loaded bytes that fail qtk_bytes_check: %s", t->name, qtk_last_error());
            qtk_tensor *q = NULL;
            st = qtk_ckpt_load_tensor(c, i, &q);
            FZ_CHECK(st == QTK_OK, "tensor '%s' loads but not as a qtk_tensor: %s", t->name, qtk_last_error());
            size_t qn = 0;
            const uint8_t *qb = qtk_tensor_bytes(q, &qn);
            FZ_CHECK(qn == t->nbytes && (!qn || memcmp(qb, v.data, qn) == 0), "tensor '%s': qtk_tensor bytes differ",
                     t->name);
            if (t->numel <= max_values) {
                deq = malloc((t->numel ? t->numel : 1) * sizeof(float));
                FZ_CHECK(deq, "out of memory");
                st = qtk_dequantize(q, QTK_DTYPE_F32, deq, t->numel);
                FZ_CHECK(st == QTK_OK, "tensor '%s' does not dequantize: %s", t->name, qtk_last_error());
            }
            qtk_tensor_free(q);
        }
        qtk_ckpt_unload(c, &v);
        free(copy);
        if ((t->quantized || qtk_elem_is_float(t->elem)) && t->numel <= max_values) {
            float *y = malloc((t->numel ? t->numel : 1) * sizeof(float));
            uint16_t *h = malloc((t->numel ? t->numel : 1) * sizeof(uint16_t));
            FZ_CHECK(y && h, "out of memory");
            st = qtk_ckpt_read_values(c, i, QTK_DTYPE_F32, y, t->numel);
            FZ_CHECK(st == QTK_OK, "tensor '%s' loads but its values do not read: %s", t->name, qtk_last_error());
            st = qtk_ckpt_read_values(c, i, QTK_DTYPE_BF16, h, t->numel);
            FZ_CHECK(st == QTK_OK, "tensor '%s': bf16 values do not read: %s", t->name, qtk_last_error());
            /* qtk's own dequantization equals the values read, but where a Hub convention
             * has its own formula (compressed-tensors' s / G; zero points rounded to the
             * scales' dtype as GPTQ's, AWQ's and compressed-tensors' torch code does) */
            size_t at = 0;
            bool own_formula = hi.layout == QTK_LAYOUT_CT || hi.layout == QTK_LAYOUT_TORCHAO ||
                               hi.layout == QTK_LAYOUT_GPTQ || hi.layout == QTK_LAYOUT_AWQ;
            if (deq && !own_formula)
                FZ_CHECK(same_bits_f32(deq, y, t->numel, &at), "tensor '%s': read_values[%zu] = %a, dequantize gives %a",
                         t->name, at, (double)y[at], (double)deq[at]);
            free(y);
            free(h);
        }
        free(deq);
    }
    qtk_ckpt_hub_info(c, &hi); /* notices may have been added by loads */
    for (size_t i = 0; i < hi.n_notices; i++) FZ_CHECK(hi.notices[i].text, "notice %zu has no text", i);
    return loaded;
}

static bool path_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Tensor i of a and tensor j of b hold the same bytes. */
static void same_bytes(qtk_ckpt *a, size_t i, qtk_ckpt *b, size_t j, const char *ya, const char *yb, const char *out) {
    const qtk_ckpt_tensor *ta = qtk_ckpt_tensor_at(a, i), *tb = qtk_ckpt_tensor_at(b, j);
    uint8_t *x = malloc(ta->nbytes ? ta->nbytes : 1), *y = malloc(tb->nbytes ? tb->nbytes : 1);
    FZ_CHECK(x && y, "out of memory");
    FZ_CHECK(qtk_ckpt_read(a, i, x, ta->nbytes) == QTK_OK, "tensor '%s' no longer reads", ta->name);
    qtk_status st = qtk_ckpt_read(b, j, y, tb->nbytes);
    FZ_CHECK(st == QTK_OK, "tensor '%s' (%s) of '%s', which qtk wrote, does not read: %s", tb->name, yb, out,
             qtk_last_error());
    FZ_CHECK(ta->nbytes == tb->nbytes && (!ta->nbytes || memcmp(x, y, ta->nbytes) == 0),
             "tensor '%s' (%s): other bytes in '%s'", ta->name, ya, out);
    free(x);
    free(y);
}

/* Tensor i of a and its namesake in b: the same type and bytes; or, written as another type,
 * the same values (floats) or the same bytes (a raw non-float the output names by another
 * type of its width: Burn's Bool(U8) and Bool(U32) are U8 and U32 in safetensors, as Burn's
 * own store writes them). */
static void compare_tensor(qtk_ckpt *a, size_t i, qtk_ckpt *b, const char *out) {
    const qtk_ckpt_tensor *ta = qtk_ckpt_tensor_at(a, i);
    size_t j = 0;
    FZ_CHECK(qtk_ckpt_find(b, ta->name, &j) == QTK_OK, "'%s' lost tensor '%s'", out, ta->name);
    const qtk_ckpt_tensor *tb = qtk_ckpt_tensor_at(b, j);
    char ya[256], yb[256];
    qtk_ckpt_type_string(ta, ya, sizeof ya);
    qtk_ckpt_type_string(tb, yb, sizeof yb);
    FZ_CHECK(ta->numel == tb->numel, "tensor '%s': %zu elements, %zu after conversion", ta->name, ta->numel, tb->numel);
    bool same_type = ta->quantized == tb->quantized &&
                     (ta->quantized ? qtk_scheme_equal(&ta->scheme, &tb->scheme) != 0 : ta->elem == tb->elem);
    if (same_type) {
        bool same_shape = ta->rank == tb->rank;
        for (int k = 0; same_shape && k < ta->rank; k++) same_shape = ta->shape[k] == tb->shape[k];
        /* GGUF writes a scalar as [1], as ggml's writer does (docs/gguf.md) */
        same_shape |= ta->rank == 0 && tb->rank == 1 && tb->shape[0] == 1 && qtk_ckpt_format_of(b) == QTK_CKPT_GGUF;
        FZ_CHECK(same_shape, "tensor '%s' (%s): its shape changed in '%s'", ta->name, ya, out);
        same_bytes(a, i, b, j, ya, yb, out);
        return;
    }
    if (!ta->quantized && !tb->quantized && !(qtk_elem_is_float(ta->elem) && qtk_elem_is_float(tb->elem)) &&
        qtk_elem_bits(ta->elem) == qtk_elem_bits(tb->elem)) {
        same_bytes(a, i, b, j, ya, yb, out);
        return;
    }
    /* written as another type (the format cannot hold the scheme; a decoded GGUF type): the
     * same values, bit for bit */
    bool va = ta->quantized || qtk_elem_is_float(ta->elem), vb = tb->quantized || qtk_elem_is_float(tb->elem);
    FZ_CHECK(va && vb, "tensor '%s': %s became %s in '%s'", ta->name, ya, yb, out);
    if (ta->numel > (1u << 22)) return;
    float *x = malloc((ta->numel ? ta->numel : 1) * sizeof(float)), *y = malloc((ta->numel ? ta->numel : 1) * sizeof(float));
    FZ_CHECK(x && y, "out of memory");
    FZ_CHECK(qtk_ckpt_read_values(a, i, QTK_DTYPE_F32, x, ta->numel) == QTK_OK, "tensor '%s' no longer reads", ta->name);
    qtk_status st = qtk_ckpt_read_values(b, j, QTK_DTYPE_F32, y, tb->numel);
    FZ_CHECK(st == QTK_OK, "tensor '%s' (%s) of '%s', which qtk wrote, does not read: %s", tb->name, yb, out,
             qtk_last_error());
    size_t at = 0;
    FZ_CHECK(same_bits_f32(x, y, ta->numel, &at), "tensor '%s' %s -> %s in '%s': value %zu %a became %a", ta->name, ya,
             yb, out, at, (double)x[at], (double)y[at]);
    free(x);
    free(y);
}

void fz_ckpt_roundtrip(const char *in, const char *out, qtk_ckpt_format fmt, qtk_hub_layout layout) {
    qtk_convert_options o = {.format = fmt, .layout = layout, .force = 1, .threads = 1};
    qtk_convert_summary s;
    qtk_clear_error();
    qtk_status st = qtk_ckpt_convert(in, out, &o, &s);
    fz_check_no_temporaries(fz_dir());
    if (st) {
        FZ_CHECK(fz_data_error(st) || st == QTK_E_ARG, "converting '%s' to '%s' failed with %s: %s", in, out,
                 qtk_status_name(st), qtk_last_error());
        FZ_CHECK(qtk_last_error()[0], "converting '%s' failed without a message", in);
        FZ_CHECK(!path_exists(out), "a failed conversion left '%s'", out);
        return;
    }
    FZ_CHECK(path_exists(out), "a conversion said it wrote '%s'", out);
    qtk_ckpt *a = NULL, *b = NULL;
    FZ_CHECK(qtk_ckpt_open(in, NULL, &a) == QTK_OK, "'%s' no longer opens", in);
    st = qtk_ckpt_open(out, NULL, &b);
    FZ_CHECK(st == QTK_OK, "'%s', which qtk wrote from '%s', does not open: %s", out, in, qtk_last_error());
    FZ_CHECK(qtk_ckpt_count(a) == qtk_ckpt_count(b), "'%s' has %zu tensors, '%s' %zu", in, qtk_ckpt_count(a), out,
             qtk_ckpt_count(b));
    for (size_t i = 0; i < qtk_ckpt_count(a); i++) compare_tensor(a, i, b, out);
    qtk_ckpt_close(a);
    qtk_ckpt_close(b);
}

void fz_ckpt_file(const uint8_t *data, size_t size, const char *ext) {
    char name[32];
    snprintf(name, sizeof name, "fuzz%s", ext);
    qtk_ckpt *c = NULL;
    qtk_clear_error();
    qtk_status st = qtk_ckpt_open_memory(data, size, name, NULL, &c);
    if (st) {
        FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "open failed with %s", qtk_status_name(st));
        return;
    }
    size_t n = qtk_ckpt_count(c);
    fz_ckpt_exercise(c, (size_t)1 << 20);
    /* the tensors as they are stored, and a second open sharing nothing with the first */
    qtk_open_options none = {.layout = QTK_LAYOUT_NONE};
    qtk_ckpt *raw = NULL;
    st = qtk_ckpt_open_memory(data, size, name, &none, &raw);
    FZ_CHECK(st == QTK_OK || fz_data_error(st), "open as stored: %s", qtk_status_name(st));
    if (!st) fz_ckpt_exercise(raw, (size_t)1 << 20);
    qtk_ckpt_close(raw);
    qtk_ckpt_close(c);
    /* the same bytes as a file (nothing beside it): the same checkpoint; then converted */
    fz_clear_dir(fz_dir());
    const char *in = fz_path(name);
    fz_write_file(in, data, size);
    st = qtk_ckpt_open(in, NULL, &c);
    FZ_CHECK(st == QTK_OK, "opens from memory but not as the file '%s': %s", in, qtk_last_error());
    FZ_CHECK(qtk_ckpt_count(c) == n, "%zu tensors from memory, %zu from the file", n, qtk_ckpt_count(c));
    qtk_ckpt_close(c);
    static const char *const exts[] = {".bpk", ".safetensors", ".gguf"};
    static const qtk_ckpt_format fmts[] = {QTK_CKPT_BURNPACK, QTK_CKPT_SAFETENSORS, QTK_CKPT_GGUF};
    uint64_t h = fz_hash(data, size);
    for (int k = 0; k < 3; k++) {
        /* the same format always, one other chosen by the input */
        if (strcmp(exts[k], ext) != 0 && (int)(h % 3) != k) continue;
        char out[32];
        snprintf(out, sizeof out, "out%s", exts[k]);
        fz_ckpt_roundtrip(in, fz_path(out), fmts[k], QTK_LAYOUT_AUTO);
        remove(fz_path(out));
    }
}
