/* gguf.h — llama.cpp's GGUF (../shared/formats/GGUF.md) as the rest of the checkpoint layer
 * sees it: the format, ggml type names, and whether the GGUF writer can hold a tensor
 * exactly (docs/gguf.md). */
#ifndef QTK_GGUF_H
#define QTK_GGUF_H

#include "io/ckpt_internal.h"

extern const qtk__ckpt_ops qtk__gguf_ops;

#define QTK__GGUF_TYPE_COUNT 43 /* GGML_TYPE_COUNT at ggml d99724f2 */

/* "Q4_K", "F32", ...; NULL for an id ggml does not define (or retired). */
const char *qtk__gguf_type_name(uint32_t id);
/* The id of a type name (case-insensitive), or -1. */
int qtk__gguf_type_id(const char *name);

/* true if the GGUF writer can write tensor t (its description: scheme or element type,
 * shape) without changing a value; hint is a ggml type name or NULL. On false, why says
 * what stands in the way. */
bool qtk__gguf_writable(const qtk_ckpt_tensor *t, const char *hint, char *why, size_t cap);

/* For tensor i of a GGUF checkpoint c: its qtk:gguf_scales value (malloc'ed; see
 * io/checkpoint.h), NULL when none is needed or c is not a GGUF file. Reads the blocks' scale
 * bytes from the map. */
qtk_status qtk__gguf_tensor_scale_records(const qtk_ckpt *c, size_t i, char **out);

#endif
