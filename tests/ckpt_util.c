/* ckpt_util.c — see ckpt_util.h. */
#include "ckpt_util.h"

#include <stdarg.h>
#include <sys/wait.h>

#include "io/fileio.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

uint8_t *hex_bytes(const char *hex, size_t *n) {
    size_t len = strlen(hex);
    uint8_t *b = malloc(len / 2 + 1);
    size_t k = 0;
    int hi = -1;
    for (size_t i = 0; i < len; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) continue;
        if (hi < 0) hi = v;
        else b[k++] = (uint8_t)(hi << 4 | v), hi = -1;
    }
    *n = k;
    return b;
}

char *bytes_hex(const uint8_t *b, size_t n) {
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", b[i]);
    s[2 * n] = '\0';
    return s;
}

static char tdir[256];

const char *tmp_dir_make(void) {
    snprintf(tdir, sizeof tdir, "/tmp/qtk-ckpt-test-XXXXXX");
    if (!mkdtemp(tdir)) {
        perror("mkdtemp");
        exit(1);
    }
    return tdir;
}

void tmp_dir_remove(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    if (tdir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tdir);
}

const char *tmp_path(const char *name) {
    /* a few buffers in turn, so that two paths can be used in one call */
    static char paths[4][1024];
    static unsigned next;
    char *b = paths[next++ % 4];
    snprintf(b, sizeof paths[0], "%s/%s", tdir, name);
    return b;
}

static void read_into(const char *name, char *buf, size_t cap) {
    if (!buf) return;
    size_t n = 0;
    uint8_t *b = slurp(tmp_path(name), &n);
    if (n >= cap) n = cap - 1;
    if (b) memcpy(buf, b, n);
    buf[b ? n : 0] = '\0';
    free(b);
}

int cli_run(const char *bin, char *out, size_t outcap, char *err, size_t errcap, const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s %s >stdout.txt 2>stderr.txt", tmp_path(""), bin, args);
    int rc = system(cmd);
    read_into("stdout.txt", out, outcap);
    read_into("stderr.txt", err, errcap);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

int tmp_dir_count(const char *part) {
    DIR *d = opendir(tdir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

uint8_t *slurp(const char *path, size_t *n) {
    uint8_t *b = NULL;
    if (qtk__io_read_file(path, &b, n) != QTK_OK) return NULL;
    return b;
}

const char *shared_file(const char *rel) {
    static char p[1024];
    const char *d = getenv("QTK_SHARED_DIR");
    if (!d) return NULL;
    snprintf(p, sizeof p, "%s/data/%s", d, rel);
    return file_exists(p) ? p : NULL;
}

void cb_raw(cbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

void cb_head(cbuf *b, unsigned major, uint64_t v) {
    uint8_t h[9];
    size_t k;
    if (v < 24) h[0] = (uint8_t)(major << 5 | v), k = 1;
    else if (v <= 0xff) h[0] = (uint8_t)(major << 5 | 24), h[1] = (uint8_t)v, k = 2;
    else if (v <= 0xffff) h[0] = (uint8_t)(major << 5 | 25), h[1] = (uint8_t)(v >> 8), h[2] = (uint8_t)v, k = 3;
    else if (v <= 0xffffffffu) {
        h[0] = (uint8_t)(major << 5 | 26);
        for (int i = 0; i < 4; i++) h[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        k = 5;
    } else {
        h[0] = (uint8_t)(major << 5 | 27);
        for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)(v >> (56 - 8 * i));
        k = 9;
    }
    cb_raw(b, h, k);
}

void cb_text(cbuf *b, const char *s) {
    cb_head(b, 3, strlen(s));
    cb_raw(b, s, strlen(s));
}

void cb_u(cbuf *b, uint64_t v) { cb_head(b, 0, v); }

uint8_t *bpk_assemble(const uint8_t *meta, size_t mlen, const uint8_t *data, size_t dlen, size_t *n) {
    size_t d = (10 + mlen + 255) / 256 * 256;
    uint8_t *f = calloc(1, d + dlen + 1);
    memcpy(f, "NRUB\x01\x00", 6);
    for (int i = 0; i < 4; i++) f[6 + i] = (uint8_t)(mlen >> (8 * i));
    memcpy(f + 10, meta, mlen);
    if (dlen) memcpy(f + d, data, dlen);
    *n = d + dlen;
    return f;
}

uint8_t *st_assemble(const char *json, const uint8_t *data, size_t dlen, size_t *n) {
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    uint8_t *f = malloc(8 + hl + dlen + 1);
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(f + 8, json, jl);
    memset(f + 8 + jl, ' ', hl - jl);
    if (dlen) memcpy(f + 8 + hl, data, dlen);
    *n = 8 + hl + dlen;
    return f;
}

/* Largest gap between neighbouring representable field values, over the range a scale maps
 * onto: an element can be off by half of it. */
static double half_gap(const qtk_scheme *s) {
    if (s->mode == QTK_MODE_LOOKUP) {
        float t[256];
        size_t n = 0;
        if (qtk_table_get(s->table, t, 256, &n) != QTK_OK || n < 2) return 1e30;
        /* sorted copy */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
                float x = t[j];
                t[j] = t[j - 1];
                t[j - 1] = x;
            }
        double g = 0;
        for (size_t i = 1; i < n; i++)
            if (t[i] - t[i - 1] > g) g = t[i] - t[i - 1];
        return g / 2;
    }
    switch (s->value) {
    case QTK_VALUE_E2M1: return 1.0;    /* 4 .. 6 */
    case QTK_VALUE_E4M3: return 16.0;   /* 416 .. 448 */
    case QTK_VALUE_E5M2: return 4096.0; /* 49152 .. 57344 */
    default: return 0.5;                /* integers */
    }
}

/* Relative bound for the minifloats (half an ulp at the element's magnitude, plus half the
 * smallest subnormal), which is much tighter than the largest gap for small values. */
static double fp_bound(qtk_value v, double y) {
    int m = v == QTK_VALUE_E2M1 ? 1 : v == QTK_VALUE_E4M3 ? 3 : 2;
    double sub = v == QTK_VALUE_E2M1 ? 0.5 : v == QTK_VALUE_E4M3 ? 0x1p-9 : 0x1p-16;
    return fabs(y) * ldexp(1.0, -(m + 1)) + sub / 2;
}

size_t check_error_bound(const qtk_ckpt_tensor *t, const uint8_t *bytes, const float *x) {
    qtk_tensor *q = NULL;
    if (qtk_tensor_from_bytes(bytes, t->nbytes, t->shape, t->rank, &t->scheme, &q) != QTK_OK) return t->numel + 1;
    const qtk_layout *L = qtk_tensor_layout(q);
    float *sc = malloc((L->n_scales ? L->n_scales : 1) * sizeof(float));
    float *y = malloc((t->numel ? t->numel : 1) * sizeof(float));
    qtk_tensor_scales(q, sc, L->n_scales);
    float g = qtk_tensor_global(q);
    qtk_dequantize(q, QTK_DTYPE_F32, y, t->numel);
    double hg = half_gap(&t->scheme);
    bool fp = t->scheme.mode == QTK_MODE_SYMMETRIC &&
              (t->scheme.value == QTK_VALUE_E2M1 || t->scheme.value == QTK_VALUE_E4M3 || t->scheme.value == QTK_VALUE_E5M2);
    size_t bad = 0;
    for (size_t i = 0; i < t->numel; i++) {
        /* the block of element i: its coordinates divided by the block extents */
        size_t rem = i, blk = 0, stride = 1;
        for (int k = t->rank - 1; k >= 0; k--) {
            size_t c = rem % t->shape[k];
            rem /= t->shape[k];
            blk += (c / L->block[k]) * stride;
            stride *= L->grid[k];
        }
        double e = (double)sc[blk] * (L->global_bytes ? (double)g : 1.0);
        double err = fabs((double)x[i] - (double)y[i]);
        double bound = fabs(e) * (fp ? fp_bound(t->scheme.value, (double)x[i] / fabs(e)) : hg);
        /* one f32 rounding in x/e and in field*e */
        bound += fabs((double)x[i]) * 0x1p-22 + 1e-30;
        if (e == 0 ? err != 0 : err > bound) {
            if (bad < 3)
                fprintf(stderr, "  %s[%zu]: x %.9g x' %.9g error %.3g > bound %.3g (scale %.6g)\n", t->name, i,
                        (double)x[i], (double)y[i], err, bound, e);
            bad++;
        }
    }
    free(sc);
    free(y);
    qtk_tensor_free(q);
    return bad;
}

const char *tmp_path_kept(const char *name) {
    static char ring[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(ring[k], sizeof ring[k], "%s", tmp_path(name));
    return ring[k];
}
