/* open.c — qtk_ckpt_open: what a path names (a directory of shards, an index, or one file in
 * any format), and the Hub layer on top of safetensors. */
#include "ckpt/formats.h"

#include "hub/hub.h"

#include <sys/stat.h>

static qtk_status layout_of(const qtk_open_options *o, qtk_hub_layout *out) {
    *out = o ? o->layout : QTK_LAYOUT_AUTO;
    if ((unsigned)*out >= QTK_LAYOUT_COUNT_) return qtk__err(QTK_E_ARG, "layout %d is not a qtk_hub_layout", (int)*out);
    return QTK_OK;
}

/* A file just opened as stored: safetensors gets the Hub layer; others take no layout. */
static qtk_status finish(qtk_ckpt *c, const char *path, qtk_hub_layout layout, qtk_ckpt **out) {
    if (c->fmt == QTK_CKPT_SAFETENSORS) return qtk__hub_open_file(c, path, layout, out);
    if (layout != QTK_LAYOUT_AUTO && layout != QTK_LAYOUT_NONE && layout != QTK_LAYOUT_QTK) {
        qtk_status st = qtk__err(QTK_E_FORMAT, "'%s' is %s: Hub layouts are safetensors conventions", c->name,
                                 qtk_ckpt_format_name(c->fmt));
        qtk_ckpt_close(c);
        return st;
    }
    *out = c;
    return QTK_OK;
}

qtk_status qtk_ckpt_open(const char *path, const qtk_open_options *o, qtk_ckpt **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_ckpt_open: out is NULL");
    *out = NULL;
    if (!path) return qtk__err(QTK_E_ARG, "qtk_ckpt_open: path is NULL");
    qtk_hub_layout layout;
    qtk_status st = layout_of(o, &layout);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return qtk__hub_open_dir(path, layout, out);
    if (qtk__has_suffix(path, ".json")) return qtk__hub_open_index(path, layout, out);
    qtk_ckpt *c = NULL;
    st = qtk__ckpt_open_file(path, &c);
    return st ? st : finish(c, path, layout, out);
}

qtk_status qtk_ckpt_open_memory(const void *data, size_t len, const char *name, const qtk_open_options *o,
                                qtk_ckpt **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_ckpt_open_memory: out is NULL");
    *out = NULL;
    if (!data && len) return qtk__err(QTK_E_ARG, "qtk_ckpt_open_memory: data is NULL");
    qtk_hub_layout layout;
    qtk_status st = layout_of(o, &layout);
    if (st) return st;
    qtk_ckpt *c = NULL;
    st = qtk__ckpt_open_mem(data, len, name, &c);
    return st ? st : finish(c, NULL, layout, out); /* names alone: no config beside */
}
