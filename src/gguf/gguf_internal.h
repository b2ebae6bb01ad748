/* gguf_internal.h — what the GGUF files share (formats/GGUF.md; docs/gguf.md):
 *
 *   gguf.c         the container reader: header, KV records, tensor infos, validation (§1.9)
 *   gguf_kv.c      KV values <-> the typed text the description carries them as
 *   gguf_types.c   the ggml type table: ids, block sizes, and what each becomes in qtk
 *   gguf_import.c  ggml blocks -> qtk bytes for the exactly-mapped types (§3.3)
 *   gguf_export.c  qtk bytes -> ggml blocks (the writer's codecs, K-quant scale splitting)
 *   gguf_write.c   the container writer: which ggml type each tensor becomes, header, data
 */
#ifndef QTK_GGUF_INTERNAL_H
#define QTK_GGUF_INTERNAL_H

#include "io/ckpt_internal.h"
#include "gguf/gguf.h"

#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63u                     /* ggml: GGML_MAX_NAME (64) includes the NUL */
#define GGUF_MAX_STRING (1ull << 30)          /* GGUF_MAX_STRING_LENGTH */
#define GGUF_MAX_ARRAY (1ull << 30)           /* GGUF_MAX_ARRAY_ELEMENTS */
#define GGUF_MAX_NESTING 8                    /* qtk's bound on arrays of arrays (ggml allows none) */

/* KV value types (§1.4) */
enum {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
    GGUF_STR, GGUF_ARR, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_KV_TYPES
};

/* What a ggml type becomes when read. */
typedef enum {
    GK_REMOVED = 0, /* an id ggml retired (block size 0): the file is rejected */
    GK_RAW,         /* plain elements: a raw tensor of `elem` */
    GK_EXACT,       /* a qtk scheme holds the same values: bytes rearranged on load */
    GK_NATIVE       /* a store=ggml scheme (docs/affine.md): the file's bytes are the tensor's */
} gguf_kind;

#define GGUF_D_IQ1M (-2)

typedef struct gguf_type {
    const char *name;   /* "Q4_K" */
    uint32_t blck;      /* elements per block */
    uint32_t bytes;     /* bytes per block */
    gguf_kind kind;
    qtk_elem elem;      /* GK_RAW */
    const char *spec;   /* GK_EXACT, GK_NATIVE: the scheme its tensors read as */
    int16_t d_at, m_at; /* GK_NATIVE: the byte offsets of the block's f16 d and m/dmin (-1: none;
                           GGUF_D_IQ1M: IQ1_M's d, in the top nibbles of its four scale words),
                           which must be finite (ggml_validate_row_data's rule) */
} gguf_type;

/* NULL for ids >= QTK__GGUF_TYPE_COUNT. */
const gguf_type *qtk__gguf_type(uint32_t id);

/* ---- reading ---- */

/* Per tensor of the description (parallel to c->desc.tensors). */
typedef struct gguf_rtensor {
    uint32_t type;
    size_t off, len;    /* absolute file range of the ggml bytes */
    size_t g_off;       /* NVFP4 with a companion: absolute offset of its f32, else SIZE_MAX */
} gguf_rtensor;

typedef struct gguf_reader {
    gguf_rtensor *t;
    size_t n;
} gguf_reader;

/* Fills the bytes of one exactly-mapped tensor in qtk's layout for its scheme: values at 0,
 * scales at L->scales_offset (then the global and the table, which the caller writes).
 * nblocks ggml blocks at src, the first at file offset file_off. Errors name the block and its
 * file offset (the loader adds the tensor). */
qtk_status qtk__gguf_import(uint32_t type, const uint8_t *src, size_t nblocks, const qtk_layout *L, uint8_t *dst,
                            size_t file_off);

/* ---- KV values as text (gguf_kv.c) ---- */

/* A growable text buffer. */
typedef struct gguf_text {
    char *p;
    size_t n, cap;
    bool oom;
} gguf_text;
void qtk__gguf_text_free(gguf_text *t);

/* A cursor over the file for the reader. */
typedef struct gguf_cur {
    const uint8_t *p;
    size_t len, pos;
} gguf_cur;

/* Reads one KV value of type `type` at the cursor and appends its typed text (docs/gguf.md
 * §KV text) to out; `what` names the record in messages ("KV 3 'test.u8'"). */
qtk_status qtk__gguf_read_value(gguf_cur *c, uint32_t type, gguf_text *out, const char *what);
const char *qtk__gguf_kv_type_name(uint32_t type); /* "u8", ... "arr", NULL if unknown */

/* A parsed typed value (from text), ready to be written. */
typedef struct gguf_wvalue {
    uint32_t type;   /* GGUF_U8 ... (GGUF_ARR: elem + count + encoded elements) */
    uint8_t *bytes;  /* the encoded value exactly as it goes into the file, after the type */
    size_t len;
} gguf_wvalue;
/* Parses a description metadata value: tagged text -> that type, anything else -> STRING
 * holding the text as it is. Nested arrays set *nested (the writer leaves them out). */
qtk_status qtk__gguf_parse_value(const char *text, gguf_wvalue *out, bool *nested);
void qtk__gguf_wvalue_free(gguf_wvalue *v);

/* ---- writing (gguf_export.c) ---- */

/* The part of the writer's decision that depends only on the tensor's description: which
 * ggml type, or -1 with the reason in why. hint: a ggml type name or NULL. */
int qtk__gguf_choose(const qtk_ckpt_tensor *t, const char *hint, bool *companion, char *why, size_t cap);
/* Converts a quantized tensor's qtk bytes into `type` blocks at dst (exactly
 * numel / blck x bytes); data-dependent conditions (a field out of the type's range, scales a
 * K-quant cannot hold) are errors naming the block. */
/* records: the tensor's qtk:gguf_scales value, or NULL (see io/checkpoint.h). */
qtk_status qtk__gguf_export(uint32_t type, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *dst,
                            const char *records);
/* true when exporting the block's sub-scales (decoded as the reader does) gives its scale
 * bytes back; Q3_K, Q6_K and IQ4_XS only (others: true). */
bool qtk__gguf_scales_come_back(uint32_t type, const uint8_t *blk);
/* The qtk:gguf_scales value for nblocks ggml blocks (malloc'ed), or NULL when every block's
 * scale bytes come back by themselves. */
qtk_status qtk__gguf_scale_records(uint32_t type, const uint8_t *data, size_t nblocks, char **out);

/* the writer's entries in qtk__gguf_ops (gguf_write.c) */
qtk_status qtk__gguf_begin(qtk__ckpt_writer *w);
qtk_status qtk__gguf_put(qtk__ckpt_writer *w, const uint8_t *bytes, size_t len);
void qtk__gguf_wfree(qtk__ckpt_writer *w);

/* f16 bits <-> f32 (exact both ways for values f16 holds) */
float qtk__gguf_f16(uint16_t h);

#endif
