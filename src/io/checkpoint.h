/* checkpoint.h — whole checkpoints: a file is a list of named tensors plus string metadata.
 *
 * Every format (burnpack, safetensors; later GGUF and Hub layouts) is read into and written
 * from the same description:
 *
 *   - a tensor is either raw (an element type, a shape, numel x bits / 8 bytes) or quantized
 *     (a qtk_scheme, a shape, and exactly qtk_layout_compute().total_bytes bytes in Burn's
 *     payload layout, SPEC §5);
 *   - string metadata (key/value pairs, in file order) and burnpack's typed scalars.
 *
 * Reading maps the file and hands out one tensor at a time (qtk_ckpt_load /
 * qtk_ckpt_unload); writing takes the whole description first (the container header needs
 * every name, shape and offset) and then the tensors' bytes one at a time, in description
 * order, into a temporary file that is renamed over the target only on commit. So a
 * conversion holds about one tensor in memory, and never leaves a partial output file.
 *
 * The format-specific code lives in one file per format (burnpack.c, safetensors.c) behind
 * the table in ckpt_internal.h; this header is all a command or a new format needs. */
#ifndef QTK_CHECKPOINT_H
#define QTK_CHECKPOINT_H

#include "qtk.h"

#include "io/arena.h"

#include <stdbool.h>

typedef enum qtk_ckpt_format {
    QTK_CKPT_UNKNOWN = 0,
    QTK_CKPT_BURNPACK,    /* Burn's .bpk (formats/BURNPACK.md) */
    QTK_CKPT_SAFETENSORS, /* .safetensors (formats/HUB_LAYOUTS.md §1), quantized tensors per docs/ */
    QTK_CKPT_GGUF,        /* llama.cpp's .gguf (formats/GGUF.md), ggml types mapped per docs/gguf.md */
    QTK_CKPT_FORMAT_COUNT_
} qtk_ckpt_format;

const char *qtk_ckpt_format_name(qtk_ckpt_format f); /* "burnpack", "safetensors", "gguf", "unknown" */
/* By file extension (.bpk, .safetensors, .gguf; case-insensitive), QTK_CKPT_UNKNOWN otherwise. */
qtk_ckpt_format qtk_ckpt_format_from_path(const char *path);

/* Element types of raw tensors: the union of what the formats can name. Each format maps
 * them onto its own dtype names and refuses those it has none for. */
typedef enum qtk_elem {
    QTK_ELEM_NONE = 0,
    QTK_ELEM_F64,
    QTK_ELEM_F32,
    QTK_ELEM_FLEX32, /* Burn's Flex32: f32 bytes */
    QTK_ELEM_F16,
    QTK_ELEM_BF16,
    QTK_ELEM_I64,
    QTK_ELEM_I32,
    QTK_ELEM_I16,
    QTK_ELEM_I8,
    QTK_ELEM_U64,
    QTK_ELEM_U32,
    QTK_ELEM_U16,
    QTK_ELEM_U8,
    QTK_ELEM_BOOL,     /* one byte per value (Burn Bool(Native), safetensors BOOL) */
    QTK_ELEM_BOOL_U8,  /* Burn Bool(U8) */
    QTK_ELEM_BOOL_U32, /* Burn Bool(U32): four bytes per value */
    QTK_ELEM_C64,
    QTK_ELEM_F8_E4M3,  /* E4M3FN */
    QTK_ELEM_F8_E5M2,
    QTK_ELEM_F8_E8M0,
    QTK_ELEM_F8_E4M3FNUZ,
    QTK_ELEM_F8_E5M2FNUZ,
    QTK_ELEM_F4,       /* E2M1, two per byte over the flattened elements, first in the low nibble */
    QTK_ELEM_F6_E2M3,
    QTK_ELEM_F6_E3M2,
    QTK_ELEM_COUNT_
} qtk_elem;

const char *qtk_elem_name(qtk_elem e); /* "F32", "BF16", "Bool(U32)", ... */
unsigned qtk_elem_bits(qtk_elem e);    /* bits per element; 0 for NONE */
/* true for element types qtk__elem_to_f32 decodes: floats of every width except FNUZ and
 * FP6. These are the tensors convert and eval may quantize. */
bool qtk_elem_is_float(qtk_elem e);
/* Bytes of numel elements; an error when numel x bits is not a whole number of bytes
 * (F4/F6) or overflows. */
qtk_status qtk__elem_bytes(qtk_elem e, size_t numel, size_t *out);
/* Decodes numel elements (little-endian, any alignment) to f32. F64 rounds to nearest. */
qtk_status qtk__elem_to_f32(qtk_elem e, const uint8_t *src, size_t numel, float *dst);

typedef struct qtk_ckpt_tensor {
    const char *name;     /* UTF-8, no NUL */
    bool quantized;
    qtk_elem elem;        /* raw tensors */
    qtk_scheme scheme;    /* quantized tensors */
    int rank;
    const size_t *shape;  /* rank entries (quantized: rank <= QTK_MAX_RANK) */
    size_t numel;
    size_t nbytes;        /* exact length of the tensor's bytes */
    /* Burn's parameter id (burnpack); carried through safetensors as metadata. */
    bool has_param_id;
    uint64_t param_id;
    /* Set by readers that translate a tensor (GGUF): the file's own name for its type
     * ("Q6_K", static storage or the description's arena) and the bytes it takes in the
     * file; NULL and 0 otherwise. A writer of that format takes file_type as a hint for
     * which of its types to write. */
    const char *file_type;
    size_t file_bytes;
    /* true: no qtk scheme holds the file's type exactly, so the reader decodes it to the
     * raw elem (GGUF's Q4_K becomes F32, bit for bit as ggml dequantizes it); converting
     * such a tensor to a scheme is a re-quantization. */
    bool decoded;
} qtk_ckpt_tensor;

typedef struct qtk__kv {
    const char *key, *value;
} qtk__kv;

typedef enum qtk_scalar_kind { QTK_SCALAR_INT, QTK_SCALAR_UINT, QTK_SCALAR_FLOAT, QTK_SCALAR_BOOL } qtk_scalar_kind;

/* burnpack's named typed scalars (Writer::with_scalar). */
typedef struct qtk_ckpt_scalar {
    const char *name;
    qtk_scalar_kind kind;
    int64_t i;
    uint64_t u;
    double f;
    bool b;
} qtk_ckpt_scalar;

/* A checkpoint's description. Everything it points to is owned by its arena. */
typedef struct qtk__desc {
    qtk_ckpt_tensor *tensors;
    size_t n_tensors, cap_tensors;
    qtk__kv *meta;
    size_t n_meta, cap_meta;
    qtk_ckpt_scalar *scalars;
    size_t n_scalars, cap_scalars;
    qtk__arena arena;
} qtk__desc;

void qtk__desc_init(qtk__desc *d);
void qtk__desc_free(qtk__desc *d);
/* Appends a tensor, copying name and shape into the arena; *out (optional) points at the
 * new entry (valid until the next append). The byte count is computed from elem or scheme:
 * an error when the scheme does not fit the shape. */
qtk_status qtk__desc_add_raw(qtk__desc *d, const char *name, qtk_elem e, const size_t *shape, int rank,
                                 qtk_ckpt_tensor **out);
qtk_status qtk__desc_add_quantized(qtk__desc *d, const char *name, const qtk_scheme *s,
                                       const size_t *shape, int rank, qtk_ckpt_tensor **out);
qtk_status qtk__desc_add_meta(qtk__desc *d, const char *key, const char *value);
qtk_status qtk__desc_add_scalar(qtk__desc *d, const qtk_ckpt_scalar *s);

/* ---- reading ---- */

typedef struct qtk_ckpt qtk_ckpt;

/* Opens and validates a checkpoint; the format is recognised by content (burnpack magic,
 * safetensors header), falling back to the extension for the error message. */
qtk_status qtk_ckpt_open(const char *path, qtk_ckpt **out);
/* The same on a caller buffer kept alive until qtk_ckpt_close (tests, embedded files).
 * name is used in messages and for the extension fallback. */
qtk_status qtk_ckpt_open_buffer(const void *data, size_t len, const char *name, qtk_ckpt **out);
void qtk_ckpt_close(qtk_ckpt *c);

qtk_ckpt_format qtk_ckpt_format_of(const qtk_ckpt *c);
/* Tensors in the order of their bytes in the file; metadata in file order. */
const qtk__desc *qtk__ckpt_desc(const qtk_ckpt *c);
/* Container facts for inspect: file size, header + metadata bytes, where data starts, and
 * a one-line format-specific note ("version 1, metadata 1398 bytes"). */
typedef struct qtk_ckpt_facts {
    size_t file_bytes;
    size_t header_bytes; /* everything before the tensor data */
    size_t data_start;
    char note[128];
} qtk_ckpt_facts;
void qtk_ckpt_facts_of(const qtk_ckpt *c, qtk_ckpt_facts *f);
/* Absolute file offset where tensor i's bytes begin (its first piece). */
size_t qtk_ckpt_offset_of(const qtk_ckpt *c, size_t i);

/* The bytes of tensor i (validated: a quantized tensor's scales and fields are checked as
 * qtk_bytes_check does). data points into the map or, when the format stores the tensor
 * in pieces, into a buffer owned by the view. Release it with qtk_ckpt_unload. */
typedef struct qtk_ckpt_view {
    const uint8_t *data;
    size_t len;
    void *owned; /* internal */
    size_t index;
} qtk_ckpt_view;
qtk_status qtk_ckpt_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
void qtk_ckpt_unload(qtk_ckpt *c, qtk_ckpt_view *v);
/* Gives the mapped pages of a view back early, once its bytes have been copied or decoded
 * elsewhere: v->data must not be read again (qtk_ckpt_unload is still due). */
void qtk__ckpt_drop_pages(qtk_ckpt *c, const qtk_ckpt_view *v);

/* ---- writing ---- */

typedef struct qtk__ckpt_writer qtk__ckpt_writer;

/* Starts writing desc (kept alive by the caller until commit or abort) as format fmt to
 * path: validates it for the format (names unique, dtypes and schemes representable) and
 * writes the header to a temporary file beside path. force = 0 refuses to replace an
 * existing file. */
qtk_status qtk__ckpt_writer_open(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, int force,
                                qtk__ckpt_writer **out);
/* The next tensor's bytes, in description order; len must be the tensor's nbytes.
 * Quantized bytes are checked with qtk_bytes_check. */
qtk_status qtk__ckpt_writer_put(qtk__ckpt_writer *w, const void *bytes, size_t len);
/* Checks every tensor was written, flushes, renames into place, frees w. On error nothing
 * is left behind. */
qtk_status qtk__ckpt_writer_commit(qtk__ckpt_writer *w);
/* Discards the output and frees w (NULL is fine). */
void qtk__ckpt_writer_abort(qtk__ckpt_writer *w);

/* Writes a whole description whose tensors' bytes are in memory (tests, small files). */
qtk_status qtk__ckpt_write(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc,
                          const void *const *bytes, int force);

#endif
