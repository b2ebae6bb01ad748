/* hub_util.c — see hub_util.h. */
#include "hub_util.h"

#include "io/values.h"

#include <sys/stat.h>

bool st_write(const char *path, const st_entry_t *e, size_t n, const char *meta_json) {
    size_t cap = 4096 + n * 256, off = 0, total = 0;
    char *h = malloc(cap);
    int k = snprintf(h, cap, "{%s%s", meta_json && *meta_json ? "\"__metadata__\":" : "", meta_json ? meta_json : "");
    size_t hl = (size_t)k;
    for (size_t i = 0; i < n; i++) {
        hl += (size_t)snprintf(h + hl, cap - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", (i || (meta_json && *meta_json)) ? "," : "",
                               e[i].name, e[i].dtype);
        for (int d = 0; d < e[i].rank; d++) hl += (size_t)snprintf(h + hl, cap - hl, d ? ",%zu" : "%zu", e[i].shape[d]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%zu,%zu]}", off, off + e[i].len);
        off += e[i].len;
    }
    hl += (size_t)snprintf(h + hl, cap - hl, "}");
    total = off;
    uint8_t *data = malloc(total ? total : 1);
    off = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].len) memcpy(data + off, e[i].data, e[i].len);
        off += e[i].len;
    }
    size_t fn;
    uint8_t *f = st_assemble(h, data, total, &fn);
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(f, 1, fn, fp) == fn;
    if (fp) ok = fclose(fp) == 0 && ok;
    free(f);
    free(data);
    free(h);
    return ok;
}

char *text_read(const char *path) {
    size_t n;
    uint8_t *b = slurp(path, &n);
    if (!b) return NULL;
    char *s = realloc(b, n + 1);
    if (!s) {
        free(b);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

bool text_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

size_t tensor_index(const qtk_ckpt *c, const char *name) {
    const qtk__desc *d = qtk__ckpt_desc(c);
    for (size_t i = 0; i < d->n_tensors; i++)
        if (strcmp(d->tensors[i].name, name) == 0) return i;
    return SIZE_MAX;
}

uint8_t *tensor_bytes(qtk_ckpt *c, const char *name, size_t *len) {
    size_t i = tensor_index(c, name);
    if (i == SIZE_MAX) return NULL;
    qtk_ckpt_view v;
    if (qtk_ckpt_load(c, i, &v) != QTK_OK) return NULL;
    uint8_t *b = malloc(v.len ? v.len : 1);
    if (v.len) memcpy(b, v.data, v.len);
    *len = v.len;
    qtk_ckpt_unload(c, &v);
    return b;
}

float *tensor_f32(qtk_ckpt *c, const char *name, size_t *n) {
    size_t i = tensor_index(c, name);
    if (i == SIZE_MAX) return NULL;
    const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[i];
    qtk_ckpt_view v;
    if (qtk_ckpt_load(c, i, &v) != QTK_OK) return NULL;
    qtk__buf b = {0};
    const float *x = NULL;
    float *out = NULL;
    if (qtk__values_f32(t, v.data, &b, &x) == QTK_OK) {
        out = malloc((t->numel ? t->numel : 1) * sizeof *out);
        memcpy(out, x, t->numel * sizeof *out);
        *n = t->numel;
    }
    qtk__buf_free(&b);
    qtk_ckpt_unload(c, &v);
    return out;
}

const char *tmp_subdir(const char *name) {
    const char *p = tmp_path(name);
    mkdir(p, 0755);
    return p;
}

qtk_status hub_rewrite(qtk_ckpt *c, const char *path, qtk_hub_layout l) {
    const qtk__desc *d = qtk__ckpt_desc(c);
    qtk__hub_write_opts o = {.layout = l, .source = c};
    qtk__hub_writer *w = NULL;
    qtk_status st = qtk__hub_writer_open(path, d, &o, &w);
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        qtk_ckpt_view v;
        st = qtk_ckpt_load(c, i, &v);
        if (!st) st = qtk__hub_writer_put(w, v.data, v.len);
        qtk_ckpt_unload(c, &v);
    }
    if (st) {
        qtk__hub_writer_abort(w);
        return st;
    }
    return qtk__hub_writer_commit(w);
}
