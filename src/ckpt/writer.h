/* writer.h — what the checkpoint operations (ops/) know of the public writer beyond
 * qtk_ckpt.h. */
#ifndef QTK_CKPT_WRITER_H
#define QTK_CKPT_WRITER_H

#include "io/checkpoint.h"

/* The files the output takes (shards, once the first tensor is written; else 0), and its
 * format and layout as decided from the path and options. */
size_t qtk__writer_files(const qtk_writer *w);
qtk_ckpt_format qtk__writer_format(const qtk_writer *w);
/* The checkpoint the tensors come from (qtk_write_options.source), known after create. */
void qtk__writer_set_source(qtk_writer *w, const qtk_ckpt *source);
/* qtk_writer_can_hold for the container format alone (not a Hub layout's conventions). */
bool qtk__writer_format_can_hold(const qtk_writer *w, const qtk_ckpt_tensor *t, char *why, size_t cap);
/* The declared tensors, in order. */
const qtk__desc *qtk__writer_desc(const qtk_writer *w);

#endif
