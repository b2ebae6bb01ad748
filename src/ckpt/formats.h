/* formats.h — the checkpoint formats qtk knows, and opening or writing one by its
 * qtk_ckpt_format. The room above the formats: it alone knows the list. */
#ifndef QTK_CKPT_FORMATS_H
#define QTK_CKPT_FORMATS_H

#include "io/ckpt_internal.h"

/* The format's reader and writer, or NULL. */
const qtk__ckpt_ops *qtk__format_ops(qtk_ckpt_format f);
/* Opens one file as it is stored, in the format its content shows (no Hub layout folding). */
qtk_status qtk__ckpt_open_file(const char *path, qtk_ckpt **out);
qtk_status qtk__ckpt_open_mem(const void *data, size_t len, const char *name, qtk_ckpt **out);
/* qtk__ckpt_writer_open_ops for format fmt. */
qtk_status qtk__ckpt_writer_open(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, int force,
                                 qtk__ckpt_writer **out);
/* Writes a whole description whose tensors' bytes are in memory (tests, small files). */
qtk_status qtk__ckpt_write(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, const void *const *bytes,
                           int force);

#endif
