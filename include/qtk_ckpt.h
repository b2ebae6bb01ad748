/*
 * qtk_ckpt.h — whole checkpoints: open, list, load, write, convert and evaluate the files
 * qtk reads (libqtk_ckpt; link with qtk::ckpt or `pkg-config --libs qtk-ckpt`).
 *
 * Formats, recognised by content: Burn's burnpack (.bpk), safetensors (with qtk's convention
 * for quantized tensors and the Hugging Face Hub's quantized layouts: gpt-oss MXFP4, ModelOpt
 * NVFP4/FP8, compressed-tensors, DeepSeek block FP8, bitsandbytes NF4, torchao), llama.cpp's
 * GGUF, and sharded checkpoints (a *.safetensors.index.json or a directory of shards).
 *
 * A checkpoint is a list of tensors in the order of their bytes in the file, plus string
 * metadata (key/value, in file order). A tensor is either
 *   - raw: an element type (qtk_elem: F32, BF16, I64, F8_E4M3, ...), a shape, and
 *     numel x bits / 8 bytes, little-endian; or
 *   - quantized: a qtk_scheme, a shape, and exactly qtk_layout_compute().total_bytes bytes in
 *     Burn's layout (SPEC §5), whatever the file's own arrangement: a Hub weight and its scale
 *     tensors, or a GGUF Q4_0 tensor, is presented as ONE qtk tensor holding the same bits.
 *
 * Reading maps the file: qtk_ckpt_load hands out a view of one tensor's bytes pointing into
 * the map (zero-copy) where the file stores them as one range in qtk's layout, and into a
 * buffer owned by the view otherwise. qtk_ckpt_load_tensor gives a qtk_tensor that borrows
 * the map the same way; the map stays alive until the checkpoint is closed AND every such
 * tensor is freed, in any order. Nothing reads a whole file.
 *
 * Writing streams: declare every tensor (name, dtype or scheme, shape) and the metadata, then
 * give the tensors' bytes in declaration order. The output is built in temporary files beside
 * the target and renamed into place by qtk_writer_commit; qtk_writer_abort (or any error)
 * leaves nothing behind, and an existing target is replaced only with force.
 *
 *     qtk_ckpt *c = NULL;
 *     if (qtk_ckpt_open("model.safetensors", NULL, &c) != QTK_OK) {
 *         fprintf(stderr, "%s\n", qtk_last_error());
 *         return 1;
 *     }
 *     for (size_t i = 0; i < qtk_ckpt_count(c); i++) {
 *         const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
 *         char type[256], shape[128];
 *         qtk_ckpt_type_string(t, type, sizeof type);
 *         qtk_shape_format(t->shape, t->rank, shape, sizeof shape);
 *         printf("%s %s %s\n", t->name, type, shape);
 *     }
 *     qtk_ckpt_close(c);
 *
 * Conventions are those of qtk.h: a qtk_status from every call that can fail, the reason in
 * qtk_last_error(), nothing printed, one owner and one free per object. A qtk_ckpt or a
 * qtk_writer is used by one thread at a time. The checkpoint layer allocates with malloc
 * (qtk_set_allocator covers libqtk's own allocations).
 */
#ifndef QTK_CKPT_H
#define QTK_CKPT_H

#include "qtk.h"

#include <signal.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Formats, element types, Hub layouts                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef enum qtk_ckpt_format {
    QTK_CKPT_UNKNOWN = 0,
    QTK_CKPT_BURNPACK,    /* Burn's .bpk */
    QTK_CKPT_SAFETENSORS, /* .safetensors (qtk's convention, or a Hub layout) */
    QTK_CKPT_GGUF,        /* llama.cpp's .gguf (ggml types mapped per docs/gguf.md) */
    QTK_CKPT_FORMAT_COUNT_
} qtk_ckpt_format;

/* "burnpack", "safetensors", "gguf", "unknown" */
QTK_API const char *qtk_ckpt_format_name(qtk_ckpt_format f);
/* By file extension (.bpk, .safetensors, .gguf; case-insensitive), else QTK_CKPT_UNKNOWN. */
QTK_API qtk_ckpt_format qtk_ckpt_format_from_path(const char *path);

/* Element types of raw tensors: the union of what the formats can name. */
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

/* "F32", "BF16", "Bool(U32)", "F8_E4M3", ...; "?" if unknown. */
QTK_API const char *qtk_elem_name(qtk_elem e);
/* The inverse of qtk_elem_name (case-insensitive). */
QTK_API qtk_status qtk_elem_parse(const char *name, qtk_elem *out);
/* Bits per element; 0 for NONE or an unknown value. */
QTK_API unsigned qtk_elem_bits(qtk_elem e);
/* true for the float types qtk decodes (every width except FNUZ and FP6): the tensors
 * conversion may quantize and qtk_ckpt_read_values may read. */
QTK_API bool qtk_elem_is_float(qtk_elem e);

typedef enum qtk_hub_layout {
    QTK_LAYOUT_AUTO = 0, /* reading: detect; writing: qtk's convention */
    QTK_LAYOUT_NONE,     /* reading: the tensors as stored, nothing folded */
    QTK_LAYOUT_QTK,      /* qtk's convention (docs/safetensors-quantized.md) */
    QTK_LAYOUT_GPT_OSS,  /* gpt-oss MXFP4: X_blocks / X_scales */
    QTK_LAYOUT_MODELOPT, /* NVIDIA ModelOpt: weight / weight_scale / weight_scale_2 */
    QTK_LAYOUT_CT,       /* compressed-tensors (llm-compressor) */
    QTK_LAYOUT_DEEPSEEK, /* block FP8: weight / weight_scale_inv */
    QTK_LAYOUT_BNB,      /* bitsandbytes 4-bit: weight / weight.absmax / quant_state */
    QTK_LAYOUT_TORCHAO,  /* torchao's prototype tensor-subclass flattening: read only */
    QTK_LAYOUT_GPTQ,     /* GPTQ: qweight / qzeros / scales / g_idx (AutoGPTQ, GPTQModel) */
    QTK_LAYOUT_AWQ,      /* AWQ, GEMM layout: qweight / qzeros / scales (AutoAWQ) */
    QTK_LAYOUT_COUNT_
} qtk_hub_layout;

/* "auto", "none", "qtk", "gpt-oss", "modelopt", "compressed-tensors", "deepseek", "bnb", "torchao" */
QTK_API const char *qtk_hub_layout_name(qtk_hub_layout l);
/* Case-insensitive; also accepts "ct" and "bitsandbytes". */
QTK_API qtk_status qtk_hub_layout_parse(const char *name, qtk_hub_layout *out);

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct qtk_ckpt qtk_ckpt;

/* Limits, checked before the entries are read (memory stays within about a kilobyte per
 * entry), and by the writers, which never write what the readers refuse: a safetensors or
 * GGUF file holds at most QTK_CKPT_MAX_TENSORS tensor entries (safetensors: a quantized
 * tensor's companions count; a sharded checkpoint: that many per shard) and a GGUF file at
 * most as many KV records; a burnpack file at most 100 000 tensors (Burn's own limit). Other
 * limits: docs/hardening.md. */
#define QTK_CKPT_MAX_TENSORS 262144

/* One tensor of a checkpoint. Every pointer is owned by the checkpoint (or the writer that
 * declared it) and valid until it is closed. */
typedef struct qtk_ckpt_tensor {
    const char *name;     /* UTF-8, no NUL inside */
    bool quantized;
    qtk_elem elem;        /* raw tensors */
    qtk_scheme scheme;    /* quantized tensors */
    int rank;
    const size_t *shape;  /* rank entries (quantized: rank <= QTK_MAX_RANK) */
    size_t numel;
    size_t nbytes;        /* exact length of the tensor's bytes as qtk hands them out */
    /* Burn's parameter id (burnpack; carried through safetensors as metadata). */
    bool has_param_id;
    uint64_t param_id;
    /* The source's own type where it has one: a GGUF tensor's ggml type ("Q6_K"), a Hub
     * weight's layout and stored tensors ("modelopt: weight U8 + weight_scale F8_E4M3 +
     * weight_scale_2 F32"); NULL otherwise. file_bytes: what it takes in the file(s).
     * A writer of the same format takes file_type as a hint for which of its types to write
     * (a q8f,block=32:f16 tensor is GGUF's Q8_0 or Q5_0). */
    const char *file_type;
    size_t file_bytes;
    /* true: no qtk scheme holds the file's type exactly, so it reads as F32 values, bit for
     * bit as the file's reference decoder gives them. No reader of this version sets it: the
     * GGUF types it was for (Q4_1, Q4_K, ...) are quantized tensors now (docs/affine.md). */
    bool decoded;
    /* The shape of the values where the stored tensor has another (NULL: shape): a
     * bitsandbytes weight whose blocks run across rows is held flattened, on [n], its values
     * being the quant_state's [96, 200]. Conversion gives a tensor it dequantizes or
     * re-quantizes this shape (and selects by it); a reader's, ignored by writers. */
    const size_t *value_shape;
    int value_rank;
} qtk_ckpt_tensor;

typedef struct qtk_open_options {
    qtk_hub_layout layout; /* AUTO: detect; NONE: the stored tensors; else read in that layout */
} qtk_open_options;

/* Opens a checkpoint: a .bpk, .safetensors or .gguf file (recognised by content, falling
 * back to the extension for the message), a *.safetensors.index.json, or a directory holding
 * shards. opts may be NULL (detect everything). Validates the whole container (lengths
 * against shapes and schemes, offsets, overlaps, limits) without reading tensor data. */
QTK_API qtk_status qtk_ckpt_open(const char *path, const qtk_open_options *opts, qtk_ckpt **out);
/* The same over caller memory, which must stay alive and unchanged until the checkpoint is
 * closed and every tensor loaded from it is freed. name is used in messages. */
QTK_API qtk_status qtk_ckpt_open_memory(const void *data, size_t len, const char *name,
                                        const qtk_open_options *opts, qtk_ckpt **out);
/* Closes c (NULL is fine). Tensors loaded with qtk_ckpt_load_tensor stay valid. */
QTK_API void qtk_ckpt_close(qtk_ckpt *c);

QTK_API qtk_ckpt_format qtk_ckpt_format_of(const qtk_ckpt *c);
/* Tensors, in the order of their bytes in the file. */
QTK_API size_t qtk_ckpt_count(const qtk_ckpt *c);
/* Tensor i, or NULL when i >= count. */
QTK_API const qtk_ckpt_tensor *qtk_ckpt_tensor_at(const qtk_ckpt *c, size_t i);
/* The index of the tensor named name (QTK_E_NOTFOUND when there is none). */
QTK_API qtk_status qtk_ckpt_find(const qtk_ckpt *c, const char *name, size_t *index);
/* A tensor's type as text: its preset name or canonical spec if quantized, else its element
 * type's name. Writes at most cap bytes (truncating); returns buf. */
QTK_API const char *qtk_ckpt_type_string(const qtk_ckpt_tensor *t, char *buf, size_t cap);

/* String metadata, in file order (GGUF: every KV, with its value rendered as text). */
QTK_API size_t qtk_ckpt_meta_count(const qtk_ckpt *c);
QTK_API qtk_status qtk_ckpt_meta_at(const qtk_ckpt *c, size_t i, const char **key, const char **value);
/* The value of key, or NULL. */
QTK_API const char *qtk_ckpt_meta_get(const qtk_ckpt *c, const char *key);

/* Burnpack's typed scalars (Burn's Writer::with_scalar). */
typedef enum qtk_scalar_kind { QTK_SCALAR_INT, QTK_SCALAR_UINT, QTK_SCALAR_FLOAT, QTK_SCALAR_BOOL } qtk_scalar_kind;
typedef struct qtk_ckpt_scalar {
    const char *name;
    qtk_scalar_kind kind;
    int64_t i;
    uint64_t u;
    double f;
    bool b;
} qtk_ckpt_scalar;
QTK_API size_t qtk_ckpt_scalar_count(const qtk_ckpt *c);
QTK_API const qtk_ckpt_scalar *qtk_ckpt_scalar_at(const qtk_ckpt *c, size_t i);

/* Container facts: file size, header bytes, where data starts, and a one-line note
 * ("version 1, metadata 1398 bytes of CBOR"). */
typedef struct qtk_ckpt_facts {
    size_t file_bytes;
    size_t header_bytes;
    size_t data_start;
    char note[128];
} qtk_ckpt_facts;
QTK_API void qtk_ckpt_facts_of(const qtk_ckpt *c, qtk_ckpt_facts *f);
/* Absolute offset of tensor i's (first) bytes in its file, and which shard holds them
 * (an index into qtk_hub_info.shards; 0 for a single file). */
QTK_API size_t qtk_ckpt_offset_of(const qtk_ckpt *c, size_t i);
QTK_API size_t qtk_ckpt_shard_of(const qtk_ckpt *c, size_t i);

/* Where the tensors came from: the Hub layout detected and why, the config and the index
 * read, the shards, and notices (tensors with no exact qtk form, dequantized on read). */
typedef struct qtk_hub_notice {
    const char *tensor; /* NULL: about the whole checkpoint */
    const char *text;
} qtk_hub_notice;
typedef struct qtk_hub_info {
    qtk_hub_layout layout;         /* NONE for a plain checkpoint, QTK for qtk's convention */
    const char *detected_by;       /* "config.json quant_method \"fp8\"", "tensor names (*_scale_inv)", ... */
    const char *config_file;       /* config.json or hf_quant_config.json, or NULL */
    const char *quant_config;      /* the quantization config read, compact JSON, or NULL */
    const char *index_file;        /* NULL without an index */
    size_t n_shards;
    const char *const *shards;     /* paths */
    size_t n_notices;
    const qtk_hub_notice *notices; /* valid until the next load or close */
} qtk_hub_info;
QTK_API void qtk_ckpt_hub_info(const qtk_ckpt *c, qtk_hub_info *info);

/* A tensor's bytes, zero-copy where the file allows: data points into the map or into a
 * buffer the view owns. The bytes are validated (a quantized tensor as qtk_bytes_check
 * does). Release with qtk_ckpt_unload; owned and index are qtk's, not to be touched. */
typedef struct qtk_ckpt_view {
    const uint8_t *data;
    size_t len;
    void *owned;
    size_t index;
} qtk_ckpt_view;
QTK_API qtk_status qtk_ckpt_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
/* QTK_OK while the files under c are intact; QTK_E_IO naming the file when one shrank while
 * it was mapped (another program truncated it). Reading a lost page of a map does not kill
 * the process with SIGBUS: qtk's SIGBUS handler (installed when the first file is mapped; it
 * passes other faults on to the handler there before) maps zeros there and marks the file,
 * so bytes read from a view since are not the file's. qtk_ckpt_read, qtk_ckpt_read_values,
 * qtk_ckpt_load_tensor (when it copies), conversion and evaluation check this themselves;
 * a caller reading views directly calls it after using one. */
QTK_API qtk_status qtk_ckpt_status(const qtk_ckpt *c);
QTK_API void qtk_ckpt_unload(qtk_ckpt *c, qtk_ckpt_view *v);

/* A quantized tensor as a qtk_tensor (QTK_E_ARG for a raw one). Zero-copy where the view
 * is: the tensor then borrows the map, which stays alive until the tensor is freed too. */
QTK_API qtk_status qtk_ckpt_load_tensor(qtk_ckpt *c, size_t i, qtk_tensor **out);
/* Copies tensor i's bytes (exactly nbytes of them, the layout qtk_ckpt_load gives) to dst. */
QTK_API qtk_status qtk_ckpt_read(qtk_ckpt *c, size_t i, void *dst, size_t len);
/* Tensor i's values as numel elements of dtype (f32, f16 or bf16): a quantized tensor
 * dequantized (with the stored convention's own formula where it has one), a float tensor
 * converted (round to nearest even). Other raw types are QTK_E_UNSUPPORTED. */
QTK_API qtk_status qtk_ckpt_read_values(qtk_ckpt *c, size_t i, qtk_dtype dtype, void *dst, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct qtk_writer qtk_writer;

typedef struct qtk_write_options {
    qtk_ckpt_format format;   /* UNKNOWN: by the path's extension; a path without one (or an
                                 existing directory) is a directory of safetensors shards */
    qtk_hub_layout layout;    /* safetensors: AUTO/QTK (qtk's convention) or a Hub layout,
                                 with the config files it needs beside the tensors */
    size_t max_shard_bytes;   /* > 0: safetensors shards of at most this many tensor bytes */
    const qtk_ckpt *source;   /* optional: the checkpoint the tensors come from; its shard
                                 files are mirrored and its config.json carried over */
    int force;                /* replace an existing output */
    /* optional: remarks about single tensors (an inexact global scale in a Hub layout) */
    void (*notice)(void *ctx, const char *tensor, const char *text);
    void *ctx;
    /* optional: non-zero makes qtk_writer_commit fail with QTK_E_CANCELLED (checked last,
     * right before anything is moved into place; nothing is written then) */
    const volatile sig_atomic_t *cancel;
} qtk_write_options;

/* Starts an output at path (nothing appears there before commit). opts may be NULL. */
QTK_API qtk_status qtk_writer_create(const char *path, const qtk_write_options *opts, qtk_writer **out);
/* Declares the next tensor as t describes it (name, quantized, elem or scheme, rank, shape;
 * param_id and file_type are kept when set; numel and nbytes are computed). data: its bytes
 * (nbytes of them: raw little-endian elements, or Burn's layout for a quantized tensor),
 * borrowed until the writer writes them during qtk_writer_write or qtk_writer_commit; NULL
 * to give them later with qtk_writer_write. Declaring ends with the first write. */
QTK_API qtk_status qtk_writer_add(qtk_writer *w, const qtk_ckpt_tensor *t, const void *data);
/* Shorthands for qtk_writer_add: a raw tensor, and a qtk_tensor (borrowed likewise). */
QTK_API qtk_status qtk_writer_add_raw(qtk_writer *w, const char *name, qtk_elem e, const size_t *shape, int rank,
                                      const void *data);
QTK_API qtk_status qtk_writer_add_tensor(qtk_writer *w, const char *name, const qtk_tensor *t);
QTK_API qtk_status qtk_writer_add_meta(qtk_writer *w, const char *key, const char *value);
QTK_API qtk_status qtk_writer_add_scalar(qtk_writer *w, const qtk_ckpt_scalar *s);
/* true if the output can hold tensor t as it is; else false with the reason in why (GGUF
 * holds only the schemes a ggml type holds exactly; burnpack's block dims stop at 255). */
QTK_API bool qtk_writer_can_hold(const qtk_writer *w, const qtk_ckpt_tensor *t, char *why, size_t cap);
/* The bytes of the next declared tensor without data (tensors declared with data before it
 * are written first). The first call checks every declaration and writes the header. */
QTK_API qtk_status qtk_writer_write(qtk_writer *w, const void *bytes, size_t len);
/* Writes what is still due, checks every tensor was given, flushes and moves everything
 * into place. Frees w, whatever the result; on error nothing is left behind. */
QTK_API qtk_status qtk_writer_commit(qtk_writer *w);
/* Discards the output and frees w (NULL is fine). */
QTK_API void qtk_writer_abort(qtk_writer *w);

/* ------------------------------------------------------------------------------------------ */
/* Whole-checkpoint conversion and evaluation                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct qtk_progress {
    size_t done, total;             /* tensors */
    size_t bytes_done, bytes_total; /* input bytes */
} qtk_progress;
/* Called after each tensor; a non-zero return cancels (QTK_E_CANCELLED, nothing written). */
typedef int (*qtk_progress_fn)(void *ctx, const qtk_progress *p);

typedef enum qtk_action {
    QTK_ACT_KEEP = 0,   /* copied as it is */
    QTK_ACT_QUANTIZE,   /* quantized, or re-quantized to another scheme */
    QTK_ACT_DEQUANTIZE, /* a quantized (or decoded) tensor to raw floats of the chosen dtype */
    QTK_ACT_CAST        /* a raw float tensor converted to the chosen dtype (cast_floats) */
} qtk_action;

/* Why a tensor gets its action. */
typedef enum qtk_reason {
    QTK_WHY_NOT_FLOAT = 0, /* integer, bool, FNUZ or FP6 elements: copied */
    QTK_WHY_SKIP,          /* matched skip, or did not match only: copied */
    QTK_WHY_RULE,          /* a rule named it (rule says which) */
    QTK_WHY_DEFAULT,       /* the default scheme (or none) applied */
    QTK_WHY_SMALL,         /* the default scheme passed it over: rank < 2 or < min_elements */
    QTK_WHY_NO_SCHEME,     /* no default scheme: copied */
    QTK_WHY_SAME,          /* already in the scheme asked for: copied bit for bit */
    QTK_WHY_FORMAT,        /* the output format cannot hold it as it is: dequantized */
    QTK_WHY_MIXTURE        /* the mixture (llama.cpp's file type) chose its type, or keeps it */
} qtk_reason;

typedef enum qtk_event_kind {
    QTK_EVENT_PLAN = 0,    /* before any data: what happens to one tensor */
    QTK_EVENT_REQUANTIZED, /* after a quantized (or decoded) tensor went to another scheme */
    QTK_EVENT_NOTICE       /* a remark: dequantized on read, an inexact global, ... */
} qtk_event_kind;

typedef struct qtk_convert_event {
    qtk_event_kind kind;
    const qtk_ckpt_tensor *in, *out; /* PLAN, REQUANTIZED */
    qtk_action action;               /* PLAN */
    qtk_reason reason;               /* PLAN */
    int rule;                        /* PLAN with QTK_WHY_RULE: its index, else -1 */
    const char *why;                 /* PLAN: the reason in words ("rule 2 'attn=q8s'", "rank 1") */
    double sqnr_db;                  /* REQUANTIZED: against the values it had (+inf: unchanged) */
    const char *tensor, *text;       /* NOTICE (tensor NULL: the whole checkpoint) */
} qtk_convert_event;
typedef void (*qtk_event_fn)(void *ctx, const qtk_convert_event *e);

#define QTK_MIN_ELEMENTS_DEFAULT 1024

/* What a conversion does to each tensor — the first that applies:
 *   1. not a float or quantized tensor (ints, bools, FNUZ, FP6): copied;
 *   2. skip matches its name, or only is given and does not match: copied;
 *   3. the first rule 'REGEX=SPEC' whose REGEX matches: SPEC (a scheme), "none"
 *      (dequantize) or "keep" (copy), whatever the tensor's rank or size;
 *   4. scheme quantizes tensors of rank >= 2 with at least min_elements elements;
 *      "none" dequantizes every quantized tensor; NULL copies everything.
 * A tensor already in the chosen scheme is copied bit for bit. Dequantized tensors become
 * dtype (F32 when NONE); with cast_floats, raw float tensors of another type that nothing
 * above quantizes are converted to it too (not those skip or a "keep" rule names). A tensor
 * the output format cannot hold as it is (GGUF has no ggml type for most schemes) is
 * dequantized to F32 with its values unchanged; one whose scheme was asked for is an error.
 * REGEX is POSIX extended and unanchored. */
/* An importance matrix (see "Importance matrices" below). */
typedef struct qtk_imatrix qtk_imatrix;

typedef struct qtk_convert_options {
    const char *scheme;            /* a spec, a preset, "none", or NULL */
    const char *const *rules;      /* n_rules strings 'REGEX=SPEC' */
    size_t n_rules;
    const char *only, *skip;       /* optional regexes */
    size_t min_elements;           /* 0: QTK_MIN_ELEMENTS_DEFAULT */
    qtk_dtype dtype;               /* NONE: f32 */
    bool cast_floats;
    qtk_calibration calibration;   /* how quantized tensors choose their scales */
    qtk_hub_layout input_layout;   /* how to read the input (AUTO: detect) */
    /* the output: format by extension (or this), a layout, shards (see qtk_write_options) */
    qtk_ckpt_format format;
    qtk_hub_layout layout;
    size_t max_shard_bytes;
    int force;
    int threads;                   /* 0: the library default */
    qtk_progress_fn progress;      /* optional */
    qtk_event_fn event;            /* optional */
    void *ctx;                     /* for progress and event */
    const volatile sig_atomic_t *cancel; /* optional: non-zero cancels (checked per tensor) */
    /* Optional importance weights, with calibration mse (refused with the others, which would
     * ignore them): each tensor quantized takes its entry (qtk_imatrix_lookup) as
     * qtk_quantize_options.weights; a tensor with no entry is quantized unweighted and a
     * NOTICE event names it; an entry whose columns (or experts) do not match the tensor's
     * shape is an error. The matrix is only read, and must outlive the call. */
    const qtk_imatrix *imatrix;
    /* Optional: one of llama.cpp's file types ("q4_k_m", "q5_k_m", "q3_k_m", "q4_k_s",
     * "q5_k_s", "q6_k", "q8_0"), which chooses each tensor's ggml type by llama-quantize's
     * rules (docs/gguf.md) in place of a default scheme: scheme must be NULL. Rules, only and
     * skip still come first; min_elements does not apply (llama.cpp's own tests do). */
    const char *mixture;
} qtk_convert_options;

/* What checks the options (regexes, specs, dtype, layout) without touching a file. */
QTK_API qtk_status qtk_convert_check(const qtk_convert_options *o);

typedef struct qtk_convert_summary {
    size_t tensors, quantized, dequantized, cast, kept;
    size_t in_bytes, out_bytes; /* tensor bytes as the files hold them, containers excluded */
    qtk_ckpt_format in_format, out_format;
    qtk_hub_layout in_layout, out_layout;
    size_t in_files, out_files; /* shards */
    bool out_directory;         /* out is a directory of shards (with index and config) */
} qtk_convert_summary;

/* Converts the checkpoint at in into out, one tensor at a time; out appears only when
 * complete. summary may be NULL. */
QTK_API qtk_status qtk_ckpt_convert(const char *in, const char *out, const qtk_convert_options *o,
                                    qtk_convert_summary *summary);

/* Evaluation: every eligible tensor (steps 1, 2 and the rank/size test of 4 above) quantized
 * under each scheme and calibration, and dequantized, against its values as stored. */
typedef struct qtk_eval_options {
    const char *const *schemes;    /* n_schemes specs or presets */
    size_t n_schemes;
    const qtk_calibration *calibrations; /* n_calibrations; NULL/0: minmax only */
    size_t n_calibrations;
    const char *only, *skip;
    size_t min_elements;           /* 0: QTK_MIN_ELEMENTS_DEFAULT */
    qtk_hub_layout input_layout;
    int threads;
    qtk_progress_fn progress;
    void *ctx;
    const volatile sig_atomic_t *cancel;
    /* Optional importance weights: columns under calibration mse quantize with each tensor's
     * entry (as convert does), and every cell of a tensor with an entry also gets the
     * weighted error (qtk_eval_cell.weighted). Tensors with no entry have row.weighted
     * false. */
    const qtk_imatrix *imatrix;
} qtk_eval_options;

typedef struct qtk_eval_report qtk_eval_report;

/* One result: a tensor under one (scheme, calibration) column. */
typedef struct qtk_eval_cell {
    bool ok;            /* false: the scheme does not fit this tensor (err says why) */
    size_t bytes;       /* the quantized tensor's bytes, scales included */
    size_t numel;
    double sum_sq_err;  /* sum of (x - x')^2 */
    double sum_sq_sig;  /* sum of x^2 */
    double max_abs;     /* max |x - x'| */
    /* With an importance matrix (qtk_eval_options.imatrix) and an entry for the tensor: the
     * sums above weighted by each element's importance w (its column's; per expert for
     * [experts, out, in] tensors): sum of w (x - x')^2 and of w x^2. A total sums the
     * weighted rows only. */
    bool weighted;
    double sum_w_sq_err, sum_w_sq_sig;
    char err[160];
} qtk_eval_cell;

typedef struct qtk_eval_row {
    const char *name;
    const char *stored;  /* "BF16", or the stored scheme's spec */
    int rank;
    const size_t *shape;
    size_t numel;
    bool weighted;       /* the importance matrix has an entry for it */
} qtk_eval_row;

typedef struct qtk_eval_column {
    const char *spec;              /* as given (a preset keeps its name) */
    qtk_scheme scheme;
    qtk_calibration calibration;
} qtk_eval_column;

typedef struct qtk_eval_metrics {
    double bits_per_el, rmse, max_abs, sqnr_db; /* sqnr_db: +inf when exact */
    double wsqnr_db; /* weighted SQNR, 10 log10(sum w x^2 / sum w (x - x')^2); NaN if not weighted */
} qtk_eval_metrics;

QTK_API qtk_status qtk_ckpt_eval(const char *path, const qtk_eval_options *o, qtk_eval_report **out);
QTK_API void qtk_eval_report_free(qtk_eval_report *r);
QTK_API size_t qtk_eval_rows(const qtk_eval_report *r);
QTK_API size_t qtk_eval_columns(const qtk_eval_report *r);
QTK_API const qtk_eval_row *qtk_eval_row_at(const qtk_eval_report *r, size_t i);
QTK_API const qtk_eval_column *qtk_eval_column_at(const qtk_eval_report *r, size_t j);
QTK_API const qtk_eval_cell *qtk_eval_cell_at(const qtk_eval_report *r, size_t i, size_t j);
/* Column j over every row where it fits, as one cell; *n_failed (optional) gets the rest. */
QTK_API void qtk_eval_total(const qtk_eval_report *r, size_t j, qtk_eval_cell *total, size_t *n_failed);
QTK_API void qtk_eval_metrics_of(const qtk_eval_cell *c, qtk_eval_metrics *m);

/* ------------------------------------------------------------------------------------------ */
/* Importance matrices (llama.cpp's imatrix)                                                   */
/* ------------------------------------------------------------------------------------------ */

/* llama.cpp's llama-imatrix measures, per weight matrix, the mean squared activation of each
 * input column over a calibration text; quantizers weigh each element's squared error by its
 * column's value (qtk_quantize_options.weights with calibration mse). Both file formats are
 * read, recognised by content: GGUF (tensors NAME.in_sum2 and NAME.counts, F32: the sums of
 * squares and the token counts, one per expert) and the legacy .dat (entries of name, call
 * count and sums). Weights are sums / count (a GGUF count of 0 gives 1s, as llama.cpp does). */
typedef struct qtk_imatrix_entry {
    const char *name;      /* as the file names it: llama.cpp's tensor name ("blk.0.attn_q.weight") */
    const float *weights;  /* columns x experts values, expert-major */
    size_t columns;        /* the weight matrix's input dimension (its last extent) */
    size_t experts;        /* 1, or the experts of a 3-D [experts, out, in] tensor */
} qtk_imatrix_entry;

QTK_API qtk_status qtk_imatrix_open(const char *path, qtk_imatrix **out);
QTK_API qtk_status qtk_imatrix_open_memory(const void *data, size_t len, const char *name, qtk_imatrix **out);
QTK_API void qtk_imatrix_close(qtk_imatrix *m);
QTK_API size_t qtk_imatrix_count(const qtk_imatrix *m);
QTK_API const qtk_imatrix_entry *qtk_imatrix_entry_at(const qtk_imatrix *m, size_t i);
/* The importance of the checkpoint tensor named tensor: the entry of that name, else of the
 * llama.cpp name a Hugging Face name maps to ("model.layers.3.self_attn.q_proj.weight" ->
 * "blk.3.attn_q.weight"; one expert "model.layers.3.mlp.experts.5.up_proj.weight" -> expert 5
 * of "blk.3.ffn_up_exps.weight"; docs/imatrix.md lists the mapping). Fills *e (its weights
 * point into m) or returns QTK_E_NOTFOUND. */
QTK_API qtk_status qtk_imatrix_lookup(const qtk_imatrix *m, const char *tensor, qtk_imatrix_entry *e);

/* ------------------------------------------------------------------------------------------ */
/* Burn's serialized QuantScheme                                                               */
/* ------------------------------------------------------------------------------------------ */

/* What a Burn program holds for a scheme: its QuantScheme serialized by serde, as ciborium
 * writes it into burnpack metadata (CBOR) or as serde_json writes it (JSON). Burn has used two
 * shapes (formats/BURNPACK.md §1.8, §2.5):
 *   CURRENT  {value, store, mode, tensor, block}   (since 2026-08-19, cubecl PR #1514)
 *   LEGACY   {value, param, store, level, mode}     (before: level "Tensor", {"Block": size}
 *            or {"BlockTensor": {block, global}}; param the innermost level's dtype)
 * Decoding reads either (the burnpack reader refuses LEGACY descriptors in files, which Burn
 * itself misreads) and also takes a whole DType {"QFloat": scheme}. A Lookup scheme comes back
 * with table "" (Burn names no table): set one before using it. Block dims are what Burn
 * stores, right-aligned on the tensor's last dims (at most 255 each). LEGACY's "Tensor" level
 * with param P reads as tensor=P. Encoding writes the shortest-head, declaration-order bytes
 * ciborium writes (compact JSON in serde_json's field order); only Burn's schemes (SPEC values,
 * symmetric or lookup, native/packed/u32 stores) can be written, and a `*` block dim only with
 * a shape to resolve it on (shape may be NULL otherwise). Output follows qtk_scheme_format's
 * convention: at most cap bytes (JSON: including a terminator), *needed (optional) the full
 * length (JSON: + 1). */
typedef enum qtk_burn_form {
    QTK_BURN_CURRENT = 0,
    QTK_BURN_LEGACY
} qtk_burn_form;

QTK_API qtk_status qtk_scheme_from_burn_cbor(const void *data, size_t len, qtk_scheme *out, qtk_burn_form *form);
QTK_API qtk_status qtk_scheme_to_burn_cbor(const qtk_scheme *s, const size_t *shape, int rank, qtk_burn_form form,
                                           void *buf, size_t cap, size_t *needed);
QTK_API qtk_status qtk_scheme_from_burn_json(const char *json, size_t len, qtk_scheme *out, qtk_burn_form *form);
QTK_API qtk_status qtk_scheme_to_burn_json(const qtk_scheme *s, const size_t *shape, int rank, qtk_burn_form form,
                                           char *buf, size_t cap, size_t *needed);

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Writes len bytes to path all or nothing, as the checkpoint writers do: into a temporary
 * file beside path, flushed, then renamed over it. force = 0 refuses to replace a file. */
QTK_API qtk_status qtk_file_write_atomic(const char *path, const void *data, size_t len, int force);

/* Removes every temporary output file this process has open (async-signal-safe: call it
 * from a SIGINT/SIGTERM handler before re-raising the signal). */
QTK_API void qtk_remove_temporaries(void);

#ifdef __cplusplus
}
#endif
#endif /* QTK_CKPT_H */
