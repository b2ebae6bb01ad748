/* formats.c — see formats.h. Adding a format is one line in the table. */
#include "ckpt/formats.h"

#include "burnpack/burnpack.h"
#include "gguf/gguf.h"
#include "safetensors/safetensors.h"

/* In the order their signatures are tried. */
static const qtk__ckpt_ops *const formats[] = {&qtk__burnpack_ops, &qtk__safetensors_ops, &qtk__gguf_ops};
#define N_FORMATS (sizeof formats / sizeof formats[0])

const qtk__ckpt_ops *qtk__format_ops(qtk_ckpt_format f) {
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i]->fmt == f) return formats[i];
    return NULL;
}

qtk_status qtk__ckpt_open_file(const char *path, qtk_ckpt **out) {
    return qtk__ckpt_open_path(path, formats, N_FORMATS, out);
}

qtk_status qtk__ckpt_open_mem(const void *data, size_t len, const char *name, qtk_ckpt **out) {
    return qtk__ckpt_open_buffer(data, len, name, formats, N_FORMATS, out);
}

qtk_status qtk__ckpt_writer_open(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, int force,
                                 qtk__ckpt_writer **out) {
    const qtk__ckpt_ops *ops = qtk__format_ops(fmt);
    if (!ops) return qtk__err(QTK_E_ARG, "cannot write format %d: it is not a qtk_ckpt_format", (int)fmt);
    return qtk__ckpt_writer_open_ops(path, ops, desc, force, out);
}

qtk_status qtk__ckpt_write(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, const void *const *bytes,
                           int force) {
    qtk__ckpt_writer *w;
    qtk_status st = qtk__ckpt_writer_open(path, fmt, desc, force, &w);
    if (st) return st;
    for (size_t i = 0; i < desc->n_tensors; i++) {
        st = qtk__ckpt_writer_put(w, bytes[i], desc->tensors[i].nbytes);
        if (st) {
            qtk__ckpt_writer_abort(w);
            return st;
        }
    }
    return qtk__ckpt_writer_commit(w);
}
