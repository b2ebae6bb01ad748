/* imatrix.c — llama.cpp importance matrices (see imatrix.h). */
#include "imatrix.h"

#include <stdio.h>

#define NAME_MAX_LEN 4096

static qtk_status push(qtk__imatrix *im, const char *name, size_t name_len, qtk__imatrix_entry **out) {
    for (size_t i = 0; i < im->n; i++)
        if (strlen(im->e[i].name) == name_len && memcmp(im->e[i].name, name, name_len) == 0)
            return qtk__err(QTK_E_FORMAT, "importance matrix: tensor '%.*s' appears twice", (int)name_len, name);
    if (im->n == im->cap) {
        size_t cap = im->cap ? 2 * im->cap : 16;
        qtk__imatrix_entry *e = qtk__malloc(cap * sizeof *e);
        if (!e) return qtk__err(QTK_E_NOMEM, "out of memory for %zu importance matrix entries", cap);
        if (im->n) memcpy(e, im->e, im->n * sizeof *e);
        qtk__free(im->e);
        im->e = e;
        im->cap = cap;
    }
    qtk__imatrix_entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    e->name = qtk__malloc(name_len + 1);
    if (!e->name) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(e->name, name, name_len);
    e->name[name_len] = '\0';
    im->n++;
    *out = e;
    return QTK_OK;
}

static int32_t rd32(const uint8_t *p) { return (int32_t)qtk__ld32(p); }

qtk_status qtk__imatrix_parse_dat(const void *bytes, size_t len, qtk__imatrix *out) {
    memset(out, 0, sizeof *out);
    out->chunks = -1;
    const uint8_t *b = bytes;
    if (!b && len) return qtk__err(QTK_E_ARG, "importance matrix bytes are NULL");
    if (len < 4) return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): %zu bytes, too short for the entry count", len);
    int32_t n = rd32(b);
    size_t at = 4;
    if (n < 1) return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): %d entries (at least 1 expected)", (int)n);
    /* the smallest entry is 17 bytes (name of 1, one value) */
    if ((size_t)n > (len - 4) / 17)
        return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): %d entries claimed but %zu bytes hold at most %zu",
                        (int)n, len, (len - 4) / 17);
    for (int32_t i = 0; i < n; i++) {
        if (len - at < 4)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d: truncated before its name length (byte %zu)",
                            (int)i, at);
        int32_t nl = rd32(b + at);
        at += 4;
        if (nl < 1 || nl > NAME_MAX_LEN)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d: name length %d (1..%d expected)", (int)i,
                            (int)nl, NAME_MAX_LEN);
        if ((size_t)nl > len - at)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d: name of %d bytes, %zu remain", (int)i,
                            (int)nl, len - at);
        const char *name = (const char *)b + at;
        if (memchr(name, 0, (size_t)nl))
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d: the name holds a NUL byte", (int)i);
        at += (size_t)nl;
        if (len - at < 8)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d ('%.*s'): truncated before ncall and nval",
                            (int)i, (int)nl, name);
        int32_t ncall = rd32(b + at), nval = rd32(b + at + 4);
        at += 8;
        if (ncall < 1)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d ('%.*s'): ncall %d (at least 1 expected)",
                            (int)i, (int)nl, name, (int)ncall);
        if (nval < 1)
            return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): entry %d ('%.*s'): nval %d (at least 1 expected)",
                            (int)i, (int)nl, name, (int)nval);
        if ((size_t)nval > (len - at) / 4)
            return qtk__err(QTK_E_FORMAT,
                            "importance matrix (.dat): entry %d ('%.*s'): %d values need %zu bytes, %zu remain", (int)i,
                            (int)nl, name, (int)nval, (size_t)nval * 4, len - at);
        qtk__imatrix_entry *e;
        qtk_status st = push(out, name, (size_t)nl, &e);
        if (st) return st;
        e->nval = (size_t)nval;
        e->count = (double)ncall;
        e->mean = qtk__malloc((size_t)nval * sizeof(float));
        if (!e->mean) return qtk__err(QTK_E_NOMEM, "out of memory for %d importance values", (int)nval);
        for (int32_t j = 0; j < nval; j++) {
            float v = qtk__bits_f32(qtk__ld32(b + at + 4 * (size_t)j));
            if (!qtk__isfinite(v) || v < 0.0f)
                return qtk__err(QTK_E_FORMAT,
                                "importance matrix (.dat): entry %d ('%s'): value %d is %g (finite and >= 0 expected)",
                                (int)i, e->name, (int)j, (double)v);
            e->mean[j] = (float)((double)v / (double)ncall);
        }
        at += (size_t)nval * 4;
    }
    /* the trailer: nothing, or last_chunk, or last_chunk and the dataset's name */
    size_t rest = len - at;
    if (rest == 0) return QTK_OK;
    if (rest < 4 || (rest > 4 && rest < 8))
        return qtk__err(QTK_E_FORMAT, "importance matrix (.dat): %zu bytes after the entries (a trailer is 4 bytes, or "
                                      "8 + the dataset name's length)", rest);
    out->chunks = rd32(b + at);
    if (rest == 4) return QTK_OK;
    int32_t dl = rd32(b + at + 4);
    if (dl < 0 || (size_t)dl != rest - 8)
        return qtk__err(QTK_E_FORMAT,
                        "importance matrix (.dat): the trailer's dataset name is %d bytes but %zu bytes follow it", (int)dl,
                        rest - 8);
    out->dataset = qtk__malloc((size_t)dl + 1);
    if (!out->dataset) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(out->dataset, b + at + 8, (size_t)dl);
    out->dataset[dl] = '\0';
    return QTK_OK;
}

qtk_status qtk__imatrix_add(qtk__imatrix *im, const char *name, const float *sums, const float *counts, size_t in,
                            size_t n_mat) {
    if (!im || !name || !sums || !counts) return qtk__err(QTK_E_ARG, "qtk__imatrix_add: NULL argument");
    size_t nval;
    if (in == 0 || n_mat == 0 || !qtk__mul_ok(in, n_mat, &nval) || nval > SIZE_MAX / sizeof(float))
        return qtk__err(QTK_E_FORMAT, "importance matrix: tensor '%s' has %zu x %zu values", name, in, n_mat);
    size_t nl = strlen(name);
    if (nl == 0 || nl > NAME_MAX_LEN)
        return qtk__err(QTK_E_FORMAT, "importance matrix: a tensor name of %zu bytes (1..%d expected)", nl, NAME_MAX_LEN);
    for (size_t m = 0; m < n_mat; m++)
        if (!qtk__isfinite(counts[m]) || counts[m] < 0.0f)
            return qtk__err(QTK_E_FORMAT, "importance matrix: tensor '%s': count %zu is %g (finite and >= 0 expected)",
                            name, m, (double)counts[m]);
    for (size_t i = 0; i < nval; i++)
        if (!qtk__isfinite(sums[i]) || sums[i] < 0.0f)
            return qtk__err(QTK_E_FORMAT, "importance matrix: tensor '%s': sum %zu is %g (finite and >= 0 expected)",
                            name, i, (double)sums[i]);
    qtk__imatrix_entry *e;
    qtk_status st = push(im, name, nl, &e);
    if (st) return st;
    e->nval = nval;
    e->n_mat = n_mat;
    e->mean = qtk__malloc(nval * sizeof(float));
    if (!e->mean) return qtk__err(QTK_E_NOMEM, "out of memory for %zu importance values", nval);
    for (size_t m = 0; m < n_mat; m++) {
        if (counts[m] > e->count) e->count = counts[m];
        for (size_t j = 0; j < in; j++)
            e->mean[m * in + j] = counts[m] > 0.0f ? (float)((double)sums[m * in + j] / (double)counts[m]) : 1.0f;
    }
    return QTK_OK;
}

const qtk__imatrix_entry *qtk__imatrix_find(const qtk__imatrix *im, const char *name) {
    if (!im || !name) return NULL;
    for (size_t i = 0; i < im->n; i++)
        if (strcmp(im->e[i].name, name) == 0) return &im->e[i];
    return NULL;
}

qtk_status qtk__imatrix_weights(const qtk__imatrix_entry *e, size_t in, size_t mat, const float **out) {
    if (!e || !out || in == 0) return qtk__err(QTK_E_ARG, "qtk__imatrix_weights: bad argument");
    if (e->nval % in != 0 || (e->n_mat && e->nval != e->n_mat * in))
        return qtk__err(QTK_E_SHAPE,
                        "importance matrix entry '%s' holds %zu values, which is not a whole number of rows of %zu columns%s",
                        e->name, e->nval, in, e->n_mat ? " per matrix" : "");
    size_t mats = e->nval / in;
    if (mat >= mats)
        return qtk__err(QTK_E_SHAPE, "importance matrix entry '%s' holds %zu matri%s of %zu columns; %zu asked for", e->name,
                        mats, mats == 1 ? "x" : "ces", in, mat);
    *out = e->mean + mat * in;
    return QTK_OK;
}

void qtk__imatrix_free(qtk__imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        qtk__free(im->e[i].name);
        qtk__free(im->e[i].mean);
    }
    qtk__free(im->e);
    qtk__free(im->dataset);
    memset(im, 0, sizeof *im);
    im->chunks = -1;
}
