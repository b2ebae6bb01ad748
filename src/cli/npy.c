/* npy.c — the NumPy .npy format (versions 1.0, 2.0 and 3.0). */
#include "npy.h"

#include "files.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

void cli_npy_free(cli_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* A tiny parser for the header's Python dict literal:
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}
static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}
static bool parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= cap) return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[n] = '\0';
    return true;
}

static qtk_status hdr_err(const char *what) { return qtk_set_error(QTK_E_FORMAT, "malformed .npy header: %s", what); }

qtk_status cli_npy_parse(const uint8_t *buf, size_t len, cli_npy *out) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, npy_magic, 6) != 0)
        return qtk_set_error(QTK_E_FORMAT, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = cli_ld16(buf + 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return qtk_set_error(QTK_E_FORMAT, ".npy file truncated in its preamble");
        hlen = cli_ld32(buf + 8);
        hstart = 12;
    } else {
        return qtk_set_error(QTK_E_FORMAT, ".npy version %u.%u is not supported (1.0, 2.0, 3.0 are)", major, buf[7]);
    }
    if (hlen > len - hstart) return qtk_set_error(QTK_E_FORMAT, ".npy header (%zu bytes) runs past the end of the file", hlen);
    cursor c = {(const char *)buf + hstart, (const char *)buf + hstart + hlen};
    bool have_descr = false, have_fortran = false, have_shape = false, fortran = false;
    if (!eat(&c, '{')) return hdr_err("it does not start with '{'");
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (!parse_str(&c, key, sizeof key)) return hdr_err("expected a quoted key");
        if (!eat(&c, ':')) return hdr_err("expected ':' after a key");
        if (strcmp(key, "descr") == 0) {
            if (!parse_str(&c, out->descr, sizeof out->descr)) return hdr_err("'descr' is not a short dtype string");
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                fortran = true;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                c.p += 5;
            } else {
                return hdr_err("'fortran_order' is not True or False");
            }
            have_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!eat(&c, '(')) return hdr_err("'shape' is not a tuple");
            int r = 0;
            for (;;) {
                if (eat(&c, ')')) break;
                skip_ws(&c);
                if (c.p >= c.end || !isdigit((unsigned char)*c.p)) return hdr_err("a 'shape' entry is not a non-negative integer");
                size_t v = 0;
                while (c.p < c.end && isdigit((unsigned char)*c.p)) {
                    size_t d = (size_t)(*c.p++ - '0');
                    if (v > (SIZE_MAX - d) / 10) return hdr_err("a 'shape' entry is too large");
                    v = v * 10 + d;
                }
                if (c.p < c.end && (*c.p == 'L' || *c.p == 'l')) c.p++; /* Python 2 longs */
                if (r == QTK_MAX_RANK)
                    return qtk_set_error(QTK_E_SHAPE, ".npy array has more than %d dimensions", QTK_MAX_RANK);
                out->shape[r++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')')) return hdr_err("expected ',' or ')' in 'shape'");
                    break;
                }
            }
            out->rank = r;
            have_shape = true;
        } else {
            return qtk_set_error(QTK_E_FORMAT, "malformed .npy header: unknown key '%s'", key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return hdr_err("expected ',' or '}'");
            break;
        }
    }
    if (!have_descr || !have_fortran || !have_shape) return hdr_err("it lacks 'descr', 'fortran_order' or 'shape'");
    char order = out->descr[0], kind = out->descr[1];
    unsigned size = (unsigned)atoi(out->descr + 2);
    bool swap = order == '>';
    if (!(order == '<' || order == '>' || order == '=' || order == '|') || kind != 'f' ||
        !(size == 2 || size == 4 || size == 8) || strlen(out->descr) != 3)
        return qtk_set_error(QTK_E_UNSUPPORTED, ".npy dtype '%s' is not supported; use float32 (<f4), float16 (<f2) or float64 (<f8)",
                        out->descr);
    size_t numel = 1;
    for (int i = 0; i < out->rank; i++)
        if (out->shape[i] && numel > SIZE_MAX / out->shape[i]) return qtk_set_error(QTK_E_SHAPE, ".npy shape overflows");
        else numel *= out->shape[i];
    size_t nbytes = numel * size, dstart = hstart + hlen;
    if (numel > SIZE_MAX / size || len - dstart != nbytes)
        return qtk_set_error(QTK_E_LENGTH, ".npy data is %zu bytes; shape and dtype '%s' need %zu", len - dstart, out->descr,
                        numel * size);
    out->numel = numel;
    out->data = malloc(numel ? numel * sizeof(float) : 1);
    if (!out->data) return qtk_set_error(QTK_E_NOMEM, "out of memory for %zu values", numel);
    const uint8_t *d = buf + dstart;
    /* Fortran (column-major) order: element i of the row-major result is element src of the
     * file, found by walking i's coordinates with column-major strides */
    size_t cstride[QTK_MAX_RANK], coord[QTK_MAX_RANK] = {0}, src = 0;
    size_t acc = 1;
    for (int k = 0; k < out->rank; k++) cstride[k] = acc, acc *= out->shape[k];
    for (size_t i = 0; i < numel; i++) {
        uint8_t b[8];
        size_t at = fortran ? src : i;
        for (unsigned k = 0; k < size; k++) b[k] = swap ? d[at * size + size - 1 - k] : d[at * size + k];
        if (fortran) /* next row-major coordinate: the last dimension moves fastest */
            for (int k = out->rank - 1; k >= 0; k--) {
                src += cstride[k];
                if (++coord[k] < out->shape[k]) break;
                src -= cstride[k] * out->shape[k];
                coord[k] = 0;
            }
        if (size == 2) {
            out->data[i] = qtk_fmt_decode(QTK_DTYPE_F16, cli_ld16(b));
        } else if (size == 4) {
            out->data[i] = cli_f32_of(cli_ld32(b));
        } else {
            uint64_t u = (uint64_t)cli_ld32(b) | ((uint64_t)cli_ld32(b + 4) << 32);
            double v;
            memcpy(&v, &u, 8);
            /* beyond f32's range becomes inf (which quantizing refuses), as IEEE rounding does */
            out->data[i] = v > FLT_MAX ? INFINITY : v < -FLT_MAX ? -INFINITY : (float)v;
        }
    }
    return QTK_OK;
}

qtk_status cli_npy_read(const char *path, cli_npy *out) {
    uint8_t *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    qtk_status st = cli_read_file(path, &buf, &len);
    if (st) return st;
    st = cli_npy_parse(buf, len, out);
    free(buf);
    if (st) return qtk_error_context(st, "%s", path);
    return QTK_OK;
}

qtk_status cli_npy_build(const void *data, qtk_dtype dtype, const size_t *shape, int rank, uint8_t **out,
                         size_t *out_len) {
    const char *descr;
    size_t esize;
    switch (dtype) {
    case QTK_DTYPE_F32: descr = "<f4"; esize = 4; break;
    case QTK_DTYPE_F16: descr = "<f2"; esize = 2; break;
    case QTK_DTYPE_BF16: descr = "<u2"; esize = 2; break;
    default: return qtk_set_error(QTK_E_ARG, "cannot write dtype '%s' to .npy", qtk_dtype_name(dtype));
    }
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, rank == 1 ? "%zu," : i ? ", %zu" : "%zu", shape[i]);
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* pad with spaces and a newline so data starts on a 64-byte boundary */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    size_t dbytes = numel * esize;
    uint8_t *b = malloc(10 + hlen + dbytes);
    if (!b) return qtk_set_error(QTK_E_NOMEM, "out of memory for a %zu-byte .npy", 10 + hlen + dbytes);
    memcpy(b, npy_magic, 6);
    b[6] = 1;
    b[7] = 0;
    cli_st16(b + 8, (uint16_t)hlen);
    memcpy(b + 10, hdr, (size_t)n);
    memset(b + 10 + n, ' ', pad);
    b[10 + hlen - 1] = '\n';
    if (dbytes) memcpy(b + 10 + hlen, data, dbytes);
    *out = b;
    *out_len = 10 + hlen + dbytes;
    return QTK_OK;
}

qtk_status cli_npy_write(const char *path, const void *data, qtk_dtype dtype, const size_t *shape, int rank,
                         int force) {
    uint8_t *b;
    size_t n;
    qtk_status st = cli_npy_build(data, dtype, shape, rank, &b, &n);
    if (st) return st;
    st = qtk_file_write_atomic(path, b, n, force);
    free(b);
    return st;
}
