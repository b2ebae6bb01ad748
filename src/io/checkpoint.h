/* checkpoint.h — the checkpoint layer's internal view of a checkpoint (the public one is
 * include/qtk_ckpt.h): the description every format is read into and written from, and the
 * format-independent reader and writer.
 *
 *   - a tensor (qtk_ckpt_tensor) is raw (an element type, a shape, numel x bits / 8 bytes)
 *     or quantized (a qtk_scheme, a shape, exactly qtk_layout_compute().total_bytes bytes in
 *     Burn's layout, SPEC §5);
 *   - string metadata (key/value pairs, in file order) and burnpack's typed scalars.
 *
 * Reading maps the file and hands out one tensor at a time (qtk_ckpt_load / unload);
 * writing takes the whole description first (the container header needs every name, shape
 * and offset) and then the tensors' bytes one at a time, in description order, into a
 * temporary file that is renamed over the target only on commit. So a conversion holds about
 * one tensor in memory, and never leaves a partial output file.
 *
 * A format is one room (burnpack/, safetensors/, gguf/) implementing qtk__ckpt_ops
 * (io/ckpt_internal.h); the list of formats and opening by content live above them, in
 * ckpt/. This layer knows no format. */
#ifndef QTK_IO_CHECKPOINT_H
#define QTK_IO_CHECKPOINT_H

#include "qtk_ckpt.h"

#include <signal.h>

#include "io/arena.h"

#include <stdbool.h>

/* Carries a tensor's source type (a GGUF tensor's ggml type) through formats that have no
 * place for it (burnpack, safetensors): metadata "qtk:file_type:NAME" = "Q5_0". `qtk convert` writes it for every
 * tensor it copies from a GGUF file and the GGUF writer takes it as the hint for which ggml
 * type to write, so GGUF -> bpk -> GGUF gives the same ggml types and bytes. */
#define QTK__META_FILE_TYPE "qtk:file_type:"
/* "qtk:gguf_scales:NAME": the scale bytes of the Q3_K / Q6_K / IQ4_XS blocks of tensor NAME
 * whose f16 d underflowed to 0 (their sub-scales no longer show in the values), as
 * "BLOCK:HEX,..." — carried by convert so that writing the GGUF type again gives the file's
 * bytes back (docs/gguf.md). */
#define QTK__META_GGUF_SCALES "qtk:gguf_scales:"

typedef struct qtk__kv {
    const char *key, *value;
} qtk__kv;

/* A checkpoint's description. Everything it points to is owned by its arena. */
typedef struct qtk__desc {
    qtk_ckpt_tensor *tensors;
    size_t n_tensors, cap_tensors;
    qtk__kv *meta;
    size_t n_meta, cap_meta;
    qtk_ckpt_scalar *scalars;
    size_t n_scalars, cap_scalars;
    /* The tensors are stored tensors whatever their names suggest (a Hub layout's suffixes):
     * safetensors writes and reads it as the metadata "qtk:layout" = "none". */
    bool stored_as_is;
    qtk__arena arena;
} qtk__desc;

void qtk__desc_init(qtk__desc *d);
void qtk__desc_free(qtk__desc *d);
/* Appends a tensor, copying name and shape into the arena; *out (optional) points at the
 * new entry (valid until the next append). The byte count is computed from elem or scheme:
 * an error when the scheme does not fit the shape. */
qtk_status qtk__desc_add_raw(qtk__desc *d, const char *name, qtk_elem e, const size_t *shape, int rank,
                             qtk_ckpt_tensor **out);
qtk_status qtk__desc_add_quantized(qtk__desc *d, const char *name, const qtk_scheme *s, const size_t *shape, int rank,
                                   qtk_ckpt_tensor **out);
/* Appends a copy of t (its name, kind, type, shape, param id and file type). */
qtk_status qtk__desc_add_copy(qtk__desc *d, const qtk_ckpt_tensor *t, qtk_ckpt_tensor **out);
qtk_status qtk__desc_add_meta(qtk__desc *d, const char *key, const char *value);
/* Room for n tensors in all (a parser that knows its count: no doubling slack). */
qtk_status qtk__desc_reserve(qtk__desc *d, size_t n);
qtk_status qtk__desc_add_scalar(qtk__desc *d, const qtk_ckpt_scalar *s);

/* Bytes of numel elements; an error when numel x bits is not a whole number of bytes
 * (F4/F6) or overflows. */
qtk_status qtk__elem_bytes(qtk_elem e, size_t numel, size_t *out);
/* Decodes numel elements (little-endian, any alignment) to f32. F64 rounds to nearest. */
qtk_status qtk__elem_to_f32(qtk_elem e, const uint8_t *src, size_t numel, float *dst);

/* ---- reading ---- */

/* Tensors in the order of their bytes in the file; metadata in file order. */
const qtk__desc *qtk__ckpt_desc(const qtk_ckpt *c);
/* Gives the mapped pages of a view back early, once its bytes have been copied or decoded
 * elsewhere: v->data must not be read again (qtk_ckpt_unload is still due). */
void qtk__ckpt_drop_pages(qtk_ckpt *c, const qtk_ckpt_view *v);

/* ---- writing ---- */

typedef struct qtk__ckpt_writer qtk__ckpt_writer;
struct qtk__ckpt_ops;
struct qtk__afile;

/* Starts writing desc (kept alive by the caller until commit or abort) in the format ops
 * implements to path: validates it for the format (names unique, dtypes and schemes
 * representable) and writes the header to a temporary file beside path. force = 0 refuses
 * to replace an existing file. (ckpt/formats.h has the same by qtk_ckpt_format.) */
qtk_status qtk__ckpt_writer_open_ops(const char *path, const struct qtk__ckpt_ops *ops, const qtk__desc *desc,
                                     int force, qtk__ckpt_writer **out);
/* The next tensor's bytes, in description order; len must be the tensor's nbytes.
 * Quantized bytes are checked with qtk_bytes_check. */
qtk_status qtk__ckpt_writer_put(qtk__ckpt_writer *w, const void *bytes, size_t len);
/* Checks every tensor was written, flushes, renames into place, frees w. On error nothing
 * is left behind. */
qtk_status qtk__ckpt_writer_commit(qtk__ckpt_writer *w);
/* The same up to the rename: the file is complete and synced, and handed to *out (a finished
 * qtk__afile, still a temporary) for the caller to commit with others (qtk__commit_files);
 * frees w. On error nothing is left behind. */
qtk_status qtk__ckpt_writer_finish(qtk__ckpt_writer *w, struct qtk__afile *out);
/* A flag that cancels the commit when set (checked before the rename). */
void qtk__ckpt_writer_set_cancel(qtk__ckpt_writer *w, const volatile sig_atomic_t *cancel);
/* Discards the output and frees w (NULL is fine). */
void qtk__ckpt_writer_abort(qtk__ckpt_writer *w);

#endif
