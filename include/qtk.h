/*
 * qtk.h — the quantized tensor kit: public API of the core library.
 *
 * qtk quantizes f32 tensors into every low-bit scheme of Burn's QuantScheme family
 * (q8f q8s q4f q4s q2f q2s e4m3 e5m2 e2m1; symmetric and lookup modes; native,
 * packed and u32 stores along any dimension; per-tensor, N-D block and two-level
 * scales), dequantizes them, converts between schemes, and reads/writes the exact
 * byte layout Burn uses. The semantics are those of SPEC.md; every function here
 * follows them to the bit.
 *
 * Conventions
 *   - Every function that can fail returns a qtk_status. QTK_OK is 0. On failure,
 *     qtk_last_error() returns a message (per thread) naming what was wrong.
 *   - Nothing in the library prints, aborts or exits.
 *   - Objects the library allocates have one owner and one free function.
 *   - Shapes are row-major arrays of size_t, rank 0..QTK_MAX_RANK.
 *
 * A minimal example:
 *
 *     qtk_scheme s;
 *     if (qtk_scheme_parse("q4f,block=32:f16", &s) != QTK_OK) { puts(qtk_last_error()); ... }
 *     size_t shape[2] = { 64, 128 };
 *     qtk_tensor *t = NULL;
 *     if (qtk_quantize(x, shape, 2, &s, NULL, &t) != QTK_OK) { ... }
 *     size_t n = 0; const uint8_t *bytes = qtk_tensor_bytes(t, &n);   // Burn's layout
 *     qtk_dequantize(t, QTK_DTYPE_F32, y, 64 * 128);
 *     qtk_tensor_free(t);
 */
#ifndef QTK_H
#define QTK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(QTK_SHARED_BUILD)
#  define QTK_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define QTK_API __attribute__((visibility("default")))
#else
#  define QTK_API
#endif

/* QTK_VERSION_MAJOR, _MINOR, _PATCH and QTK_VERSION_STRING, generated from the build's
 * project() version. qtk_version() is the library's own, which may be newer than the header. */
#include "qtk_version.h"

QTK_API const char *qtk_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Status codes and errors                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum qtk_status {
    QTK_OK = 0,
    QTK_E_ARG,         /* a NULL pointer, a bad enum value, an option out of range */
    QTK_E_SCHEME,      /* a scheme that is not valid (or not valid for this shape) */
    QTK_E_PARSE,       /* a spec string that does not parse */
    QTK_E_SHAPE,       /* rank, extent or block mismatch; size overflow */
    QTK_E_LENGTH,      /* a byte or element count that is not the one expected */
    QTK_E_VALUE,       /* a non-finite input value, scale, or table entry; an out-of-range field */
    QTK_E_NOMEM,       /* allocation failure */
    QTK_E_IO,          /* reading or writing a file failed */
    QTK_E_FORMAT,      /* a file whose contents are malformed */
    QTK_E_UNSUPPORTED, /* valid, but not something qtk does */
    QTK_E_NOTFOUND,    /* a named thing (table, tensor, key) that does not exist */
    QTK_E_INTERNAL,    /* a bug in qtk: please report it */
    QTK_E_CANCELLED    /* the caller cancelled the operation (a progress callback or flag) */
} qtk_status;

/* A short stable name for a status ("QTK_E_SHAPE"). Never NULL. */
QTK_API const char *qtk_status_name(qtk_status st);

/* The message of the last failure on the calling thread ("" if none yet). The pointer is
 * valid until the next qtk call on this thread. */
QTK_API const char *qtk_last_error(void);

/* Clears the calling thread's message. */
QTK_API void qtk_clear_error(void);

/* For programs and bindings built on qtk that report their own failures the same way (the
 * qtk CLI does): records a message (printf format) as the calling thread's last error and
 * returns st. qtk_error_context prepends "context: " to the current message. */
#if defined(__GNUC__)
#  define QTK_FORMAT_ATTR(a, b) __attribute__((format(printf, a, b)))
#else
#  define QTK_FORMAT_ATTR(a, b)
#endif
QTK_API qtk_status qtk_set_error(qtk_status st, const char *fmt, ...) QTK_FORMAT_ATTR(2, 3);
QTK_API qtk_status qtk_error_context(qtk_status st, const char *fmt, ...) QTK_FORMAT_ATTR(2, 3);

/* Optional custom allocator for every allocation the library makes (thread-safe to read;
 * set it before other threads use qtk). Passing NULL restores malloc/free. */
typedef struct qtk_allocator {
    void *(*alloc)(void *opaque, size_t size);
    void (*free)(void *opaque, void *ptr);
    void *opaque;
} qtk_allocator;
QTK_API void qtk_set_allocator(const qtk_allocator *a);

/* ------------------------------------------------------------------------------------------ */
/* Scalar number formats                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef enum qtk_dtype {
    QTK_DTYPE_NONE = 0,
    QTK_DTYPE_F32,
    QTK_DTYPE_F16,   /* IEEE binary16 */
    QTK_DTYPE_BF16,  /* bfloat16 */
    QTK_DTYPE_E4M3,  /* FP8 E4M3FN: bias 7, no inf, S.1111.111 is NaN */
    QTK_DTYPE_E5M2,  /* FP8 E5M2: bias 15, IEEE-style inf and NaN */
    QTK_DTYPE_E2M1,  /* FP4: bias 1, no inf or NaN */
    QTK_DTYPE_UE8M0, /* unsigned exponent-only 2^(e-127); 0xFF is NaN; no zero */
    QTK_DTYPE_UE4M3, /* E4M3 with the sign bit 0 */
    /* Integers, for qtk's extension (docs/affine.md): u8 is an integer zero point (zero=u8);
     * u6, u4, i8 and i6 are ggml's integer sub-scales and sub-mins under an f16 super-block
     * scale (super=, store=ggml only). A code is the integer's two's complement bits. */
    QTK_DTYPE_U8,    /* 0..255 */
    QTK_DTYPE_U6,    /* 0..63 */
    QTK_DTYPE_U4,    /* 0..15 */
    QTK_DTYPE_I8,    /* -128..127 */
    QTK_DTYPE_I6,    /* -32..31 (ggml's Q3_K stores it biased by 32) */
    QTK_DTYPE_COUNT_
} qtk_dtype;

QTK_API const char *qtk_dtype_name(qtk_dtype d);      /* "f32", "ue4m3", ...; "?" if unknown */
QTK_API qtk_status qtk_dtype_parse(const char *name, qtk_dtype *out); /* case-insensitive */
QTK_API unsigned qtk_dtype_bits(qtk_dtype d);          /* 32, 16, 8, 6 or 4; 0 if unknown */

/* Decode a code of the format to f32 (exact: every code of these formats is an f32). The
 * integer dtypes decode to their integer; they encode with round to nearest, ties to even,
 * and round up to the ceiling, saturating at their range (NaN gives 0). */
QTK_API float qtk_fmt_decode(qtk_dtype d, uint32_t code);
/* Encode with round to nearest, ties to even. Finite values beyond the format's largest
 * finite value become inf where the format has one (f16, bf16, e5m2; NaN for e4m3 and
 * ue4m3 codes) and saturate otherwise (e2m1). NaN in gives a NaN code where one exists.
 * Unsigned formats (ue8m0, ue4m3) encode |x|. */
QTK_API uint32_t qtk_fmt_encode(qtk_dtype d, float x);
/* The stored-scale rule (SPEC §2 step 4): the smallest value of the format not below |x|,
 * saturating at the format's largest finite value (ue8m0: clamped to [2^-127, 2^127]);
 * f32 returns x unchanged. The sign of x is kept for the signed formats. x must be finite. */
QTK_API uint32_t qtk_fmt_round_up(qtk_dtype d, float x);
/* Largest finite value of the format. */
QTK_API float qtk_fmt_max(qtk_dtype d);

/* ------------------------------------------------------------------------------------------ */
/* The scheme                                                                                  */
/* ------------------------------------------------------------------------------------------ */

#define QTK_MAX_RANK 8
#define QTK_MAX_BLOCK_DIMS 5
#define QTK_BLOCK_MAX_EXTENT 65535u
#define QTK_BLOCK_WHOLE 0u  /* a block dimension of 0 means "*": the whole extent */
#define QTK_TABLE_NAME_MAX 32

typedef enum qtk_value {
    QTK_VALUE_Q8F = 0,
    QTK_VALUE_Q8S,
    QTK_VALUE_Q4F,
    QTK_VALUE_Q4S,
    QTK_VALUE_Q2F,
    QTK_VALUE_Q2S,
    QTK_VALUE_E4M3,
    QTK_VALUE_E5M2,
    QTK_VALUE_E2M1,
    /* qtk's extension (docs/affine.md): unsigned integers 0..2^bits-1, the fields of the
     * affine mode (and only there), and signed 6-, 5- and 3-bit integers (ggml's Q6_K, Q5_0,
     * Q3_K). Fields of 6, 5 and 3 bits are stored native/packed (one per byte) or ggml. */
    QTK_VALUE_U8,
    QTK_VALUE_U5,
    QTK_VALUE_U4,
    QTK_VALUE_U3,
    QTK_VALUE_U2,
    QTK_VALUE_Q6F,
    QTK_VALUE_Q5F,
    QTK_VALUE_Q3F,
    QTK_VALUE_COUNT_
} qtk_value;

typedef enum qtk_mode {
    QTK_MODE_SYMMETRIC = 0,
    QTK_MODE_LOOKUP,
    QTK_MODE_AFFINE,      /* an offset per scale group (qtk's extension, docs/affine.md) */
    QTK_MODE_LATTICE      /* a vector codebook: each code selects 4 or 8 values at once (qtk's
                           * extension, docs/lattice.md; ggml's IQ1/IQ2/IQ3 types, store=ggml only) */
} qtk_mode;

/* How the affine mode's offset enters the value (s the scale, q the unsigned field, each
 * operation rounded to f32): */
typedef enum qtk_offset {
    QTK_OFFSET_ADD = 0,   /* offset=D: x = s q + o   (o: the group's minimum; ggml Q4_1, Q5_1) */
    QTK_OFFSET_MIN,       /* min=D:    x = s q - m   (m: the minimum negated; ggml's K-quants) */
    QTK_OFFSET_ZERO       /* zero=D:   x = s (q - z) (z: a zero point; GPTQ, AWQ) */
} qtk_offset;

typedef enum qtk_store {
    QTK_STORE_U32 = 0,    /* 32/bits fields per little-endian u32 word (the default) */
    QTK_STORE_NATIVE,     /* one field per byte */
    QTK_STORE_PACKED,     /* the value's native packing: e2m1 two per byte, others one */
    QTK_STORE_GGML        /* ggml's block structs, verbatim (docs/affine.md §3): only the schemes
                           * of ggml's types Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K and the
                           * lattice types IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M */
} qtk_store;

/* A scheme is a plain value: copy it, compare it with qtk_scheme_equal, zero-initialise
 * then set fields, or fill it with qtk_scheme_parse. An all-zero scheme is Burn's
 * default: q8f, symmetric, u32 store along dim 0, one f32 scale for the tensor. */
typedef struct qtk_scheme {
    qtk_value value;
    qtk_mode mode;                       /* lookup requires table[] */
    qtk_store store;
    uint8_t pack_dim;                    /* counted from the innermost dimension (0 = last) */
    uint8_t block_rank;                  /* 0: no block level; else 1..5 */
    uint32_t block[QTK_MAX_BLOCK_DIMS];  /* block[0..block_rank), outermost first;
                                            1..65535 or QTK_BLOCK_WHOLE */
    qtk_dtype block_dtype;               /* scale dtype of the block level */
    qtk_dtype tensor_dtype;              /* tensor level, or QTK_DTYPE_NONE */
    char table[QTK_TABLE_NAME_MAX];      /* lookup table name (lower case), "" for symmetric;
                                            lattice mode: the codebook's name (iq2xxs ...) */
    /* qtk's extension (docs/affine.md); zero for every SPEC scheme */
    qtk_offset offset;                   /* affine mode: how the offset enters the value */
    qtk_dtype offset_dtype;              /* affine mode: the offsets' dtype; else QTK_DTYPE_NONE */
    uint32_t super_block;                /* store=ggml: elements under one super-block scale
                                            (256), which multiplies the integer block scales
                                            (and mins, by a second one); 0: none */
    qtk_dtype super_dtype;               /* the super-block scales' dtype (f16) */
} qtk_scheme;

/* Parse a spec string (SPEC §1.1, and docs/affine.md's options min=, offset=, zero=, super=,
 * store=ggml) or a preset name. Case-insensitive. On error the message quotes the offending
 * part. Presets: nvfp4 mxfp4 mxfp8 nf4, and ggml's types q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k
 * q4_k q5_k q6_k iq4_nl (docs/affine.md; q8_0, q4_0 and iq4_nl in qtk's layouts, the others
 * store=ggml) and iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m (docs/lattice.md, lattice=). */
QTK_API qtk_status qtk_scheme_parse(const char *spec, qtk_scheme *out);
/* Canonical spec string of a valid scheme; it parses back to an equal scheme. Writes at most
 * cap bytes including the terminator; *needed (optional) gets the full length + 1. */
QTK_API qtk_status qtk_scheme_format(const qtk_scheme *s, char *buf, size_t cap, size_t *needed);
/* Name of the preset the scheme equals ("nvfp4", "q4_k", ...) or NULL. */
QTK_API const char *qtk_scheme_preset_name(const qtk_scheme *s);
/* Checks a scheme on its own (value/store/level combinations, table present and sized). */
QTK_API qtk_status qtk_scheme_validate(const qtk_scheme *s);
/* 1 if equal (block dims compared after canonicalisation), else 0. */
QTK_API int qtk_scheme_equal(const qtk_scheme *a, const qtk_scheme *b);
/* Field width in bits of a value (8, 6, 5, 4, 3 or 2), its name, and its largest magnitude
 * (integers: hi of the range [lo, hi]; minifloats: max). */
QTK_API unsigned qtk_value_bits(qtk_value v);
QTK_API const char *qtk_value_name(qtk_value v);
QTK_API float qtk_value_max(qtk_value v);
/* 1 if the scheme has both levels (two-level scaling). */
QTK_API int qtk_scheme_is_two_level(const qtk_scheme *s);

/* Everything derived from a scheme and a shape. */
typedef struct qtk_layout {
    int rank;
    size_t shape[QTK_MAX_RANK];
    size_t numel;
    unsigned bits;               /* field width */
    unsigned fields_per_unit;    /* fields in one storage unit: 1, 2, 4, 8 or 16 */
    unsigned unit_bytes;         /* bytes of one storage unit: 1 or 4 */
    int pack_axis;               /* tensor axis the fields are packed along, -1 if 1 per unit */
    size_t storage_shape[QTK_MAX_RANK]; /* shape in storage units (rank 0 -> [1]) */
    size_t value_bytes;          /* bytes of the packed-values region */
    size_t block[QTK_MAX_RANK];  /* resolved block extent per tensor dim (per-tensor: shape) */
    size_t grid[QTK_MAX_RANK];   /* blocks per dim */
    size_t n_scales;             /* scales stored (1 for per-tensor) */
    qtk_dtype scale_dtype;       /* dtype of the stored scales */
    size_t scale_bytes;          /* bytes of the scale region */
    size_t global_bytes;         /* 4 for two-level, else 0 */
    size_t table_entries;        /* 2^bits for lookup, else 0 */
    size_t table_bytes;          /* 4 * table_entries */
    size_t scales_offset, global_offset, table_offset;
    size_t total_bytes;          /* exact length of the tensor's bytes (SPEC §5) */
    /* the affine mode's offsets, one per scale group, after the scales (docs/affine.md) */
    qtk_dtype offset_dtype;      /* QTK_DTYPE_NONE when there are none */
    size_t offset_bytes, offsets_offset;
} qtk_layout;
/* For store=ggml the whole tensor is its blocks: value_bytes == total_bytes, unit_bytes is
 * one block's bytes and fields_per_unit its elements (QK); n_scales and the grid count the
 * sub-blocks (the scale groups), whose scales and offsets are inside the blocks (scale_bytes
 * and offset_bytes 0). */

QTK_API qtk_status qtk_layout_compute(const qtk_scheme *s, const size_t *shape, int rank,
                                      qtk_layout *out);
/* Storage bits per element including scales, global and table. */
QTK_API double qtk_layout_bits_per_element(const qtk_layout *l);

/* A shape as text: "64x128", "scalar" for rank 0 (the CLI's --shape syntax). Writes at most
 * cap bytes, truncating; returns buf. */
QTK_API const char *qtk_shape_format(const size_t *shape, int rank, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Lookup tables                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Registers (or replaces) a table of n = 2, 4, 16 or 256 finite f32 entries under a name
 * (letters, digits, '_' and '-', at most 31 characters; stored lower case). The built-in
 * "nf4" and "iq4nl" cannot be replaced, and "fit" is reserved. Thread-safe.
 *
 * table=fit (any 2-, 4- or 8-bit value) names no registered table: quantizing fits the
 * table's 2^bits entries to the tensor (weighted k-means of the scale-normalised values,
 * seeded from nf4 or an even grid; deterministic, the same for every thread count), and
 * the entries travel in the tensor's bytes (SPEC §5), where qtk_tensor_from_bytes and
 * qtk_dequantize_bytes read them: the table lives exactly as long as the bytes. */
QTK_API qtk_status qtk_table_register(const char *name, const float *entries, size_t n);
/* Copies up to cap entries of a table into out; *n gets its size. Thread-safe. */
QTK_API qtk_status qtk_table_get(const char *name, float *out, size_t cap, size_t *n);

/* ------------------------------------------------------------------------------------------ */
/* Quantized tensors                                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct qtk_tensor qtk_tensor;

typedef enum qtk_calibration {
    QTK_CALIB_MINMAX = 0, /* alpha = max |x| over the group */
    QTK_CALIB_ABSMEAN,    /* alpha = mean |x| (BitNet b1.58); not for two-level schemes */
    /* Minimum squared error: per scale group, the stored scale (the value after the scale
     * dtype's rounding; for the affine mode the scale and the offset, searched together:
     * docs/affine.md) whose fields give the least sum of w (x - x')^2 — the fields are
     * the encoder's nearest rounding under that scale, so the bytes are those of the
     * scheme's layout and decode with the same dequantizer. Two-level schemes also choose
     * the global. The result is never worse than minmax's on any group (same global), is
     * the same on every kernel level and for every thread count. docs/quantizers.md has the
     * method and its cost (about 1 GB/s per core of f32 input for 4-bit schemes). */
    QTK_CALIB_MSE
} qtk_calibration;

/* "minmax", "absmean", "mse"; "?" if unknown. parse is case-insensitive. */
QTK_API const char *qtk_calibration_name(qtk_calibration c);
QTK_API qtk_status qtk_calibration_parse(const char *name, qtk_calibration *out);

typedef struct qtk_quantize_options {
    qtk_calibration calibration;
    /* Caller-given scales (Burn's quantize with qparams): one per scale group, row-major over
     * the block grid; NULL to calibrate. n_scales must equal the layout's n_scales. */
    const float *scales;
    size_t n_scales;
    /* Caller-given two-level global scale; required with scales for two-level schemes. */
    const float *global;
    int threads; /* 0: the library default (qtk_set_threads) */
    /* Importance weights of the squared error, for calibration mse and for fitting a table
     * (table=fit); NULL: every element weighs 1. Refused with other calibrations (where
     * nothing would use them). Three shapes:
     *   n_weights == numel: one weight per element, in the order of x;
     *   n_weights == shape[rank - 1] (1 for rank 0): one weight per column — weights[j]
     *     weighs every element whose last index is j. For an [out, in] weight matrix this
     *     is llama.cpp's importance matrix: the mean squared activation of input j;
     *   rank >= 3 and n_weights == shape[0] * shape[rank - 1]: one weight per first index
     *     and column — weights[i0 * in + j], an importance matrix's per-expert weights
     *     (expert-major) for a merged-expert [experts, out, in] tensor.
     * (Where two readings apply they agree.) Every weight must be finite and >= 0; a group
     * whose weights are all 0 keeps the minmax scale. */
    const float *weights;
    size_t n_weights;
    /* The affine mode with caller-given scales: one offset per scale group (as the scheme
     * stores it: o, m or z), required with scales and refused otherwise. store=ggml schemes
     * take no given scales (theirs are integers under a computed f16). */
    const float *offsets;
    size_t n_offsets;
} qtk_quantize_options;

/* Quantize n = numel(shape) f32 values. opts may be NULL (minmax calibration). */
QTK_API qtk_status qtk_quantize(const float *x, const size_t *shape, int rank,
                                const qtk_scheme *s, const qtk_quantize_options *opts,
                                qtk_tensor **out);

/* Quantize into caller memory: dst must hold exactly qtk_layout.total_bytes bytes. On failure
 * the contents of dst are unspecified (a non-finite input found late in a large tensor is
 * reported after earlier rows were written); qtk_quantize never returns a partial tensor. */
QTK_API qtk_status qtk_quantize_into(const float *x, const size_t *shape, int rank,
                                     const qtk_scheme *s, const qtk_quantize_options *opts,
                                     void *dst, size_t dst_len);

/* Build a tensor from Burn-layout bytes (SPEC §5); the bytes are copied. The length must be
 * exactly the layout's total_bytes. Scales must be finite; ue4m3/ue8m0 scales must not be
 * NaN codes or have the sign bit; native sub-byte fields must be sign extensions of their
 * width; lookup tables finite. */
QTK_API qtk_status qtk_tensor_from_bytes(const void *bytes, size_t len, const size_t *shape,
                                         int rank, const qtk_scheme *s, qtk_tensor **out);

/* The same without a copy: the tensor borrows bytes, which must stay alive and unchanged
 * until qtk_tensor_free, which then calls release(ctx) (release may be NULL). On failure
 * release is not called: the bytes stay the caller's. */
QTK_API qtk_status qtk_tensor_wrap(const void *bytes, size_t len, const size_t *shape, int rank,
                                   const qtk_scheme *s, void (*release)(void *ctx), void *ctx,
                                   qtk_tensor **out);

/* Validate Burn-layout bytes without building a tensor (what from_bytes checks). */
QTK_API qtk_status qtk_bytes_check(const void *bytes, size_t len, const size_t *shape, int rank,
                                   const qtk_scheme *s);

QTK_API void qtk_tensor_free(qtk_tensor *t);

/* The tensor's bytes in Burn's layout, owned by the tensor. */
QTK_API const uint8_t *qtk_tensor_bytes(const qtk_tensor *t, size_t *len);
QTK_API const qtk_scheme *qtk_tensor_scheme(const qtk_tensor *t);
QTK_API const qtk_layout *qtk_tensor_layout(const qtk_tensor *t);
/* Copies the stored scales decoded to f32 (n = layout.n_scales); the two-level global
 * (1.0 when there is none). For store=ggml, each sub-block's scale d x sc. */
QTK_API qtk_status qtk_tensor_scales(const qtk_tensor *t, float *out, size_t cap);
/* The affine mode's offsets decoded to f32 (n = layout.n_scales), as the scheme stores them:
 * offset=: o, min=: m (store=ggml: dmin x mn), zero=: z. QTK_E_SCHEME without an offset. */
QTK_API qtk_status qtk_tensor_offsets(const qtk_tensor *t, float *out, size_t cap);
QTK_API float qtk_tensor_global(const qtk_tensor *t);

/* Dequantize into out (n_out elements of dtype f32, f16 or bf16; n_out must equal numel). */
QTK_API qtk_status qtk_dequantize(const qtk_tensor *t, qtk_dtype dtype, void *out, size_t n_out);
/* Dequantize straight from Burn-layout bytes (validated as by qtk_tensor_from_bytes). */
QTK_API qtk_status qtk_dequantize_bytes(const void *bytes, size_t len, const size_t *shape,
                                        int rank, const qtk_scheme *s, qtk_dtype dtype,
                                        void *out, size_t n_out);

/* Re-quantize a tensor under another scheme: the result equals
 * qtk_quantize(dequantize(t), shape, s, opts), computed a slab at a time. */
QTK_API qtk_status qtk_convert(const qtk_tensor *t, const qtk_scheme *s,
                               const qtk_quantize_options *opts, qtk_tensor **out);

/* ------------------------------------------------------------------------------------------ */
/* Execution                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Instruction-set levels of the kernels. Every level gives the same bits as QTK_ISA_SCALAR
 * (the reference); higher levels are faster. */
typedef enum qtk_isa {
    QTK_ISA_AUTO = 0,  /* the best level this CPU supports (the default) */
    QTK_ISA_SCALAR,    /* portable C, one element at a time: the reference */
    QTK_ISA_PORTABLE,  /* portable C vectors (compiler vector extensions): any CPU */
    QTK_ISA_AVX2,      /* x86-64 AVX2 + FMA + F16C */
    QTK_ISA_AVX512,    /* x86-64 AVX-512 F/BW/DQ/VL (VBMI, VNNI used when present) */
    QTK_ISA_NEON       /* 64-bit ARM Advanced SIMD (the dot product, sdot, used when present) */
} qtk_isa;

/* Forces a level for this process (QTK_ISA_AUTO restores detection). A level the CPU or the
 * build lacks is an error (QTK_E_UNSUPPORTED). The environment variable QTK_ISA
 * (scalar|portable|avx2|avx512|neon) sets the initial level. Levels are ordered within an
 * architecture only: x86 builds have scalar < portable < avx2 < avx512, ARM builds
 * scalar < portable < neon. */
QTK_API qtk_status qtk_set_isa(qtk_isa isa);
/* The level in use. */
QTK_API qtk_isa qtk_get_isa(void);
/* The best level this CPU and build support. */
QTK_API qtk_isa qtk_detect_isa(void);
QTK_API const char *qtk_isa_name(qtk_isa isa); /* "scalar", "portable", "avx2", "avx512", "neon", "auto" */

/* Default thread count for operations (0 = number of available cores). */
QTK_API void qtk_set_threads(int n);
QTK_API int qtk_get_threads(void);

/* The fork-join helper qtk's own kernels use, for callers that split work the same way:
 * runs fn over [0, n) cut into `threads` contiguous ranges of near-equal size (the split
 * depends only on n and threads; threads <= 0: qtk_get_threads()), the calling thread taking
 * the first, and returns when all are done. worker is the range's index. When threads cannot
 * be created it runs with fewer, down to inline: it never fails. */
typedef void (*qtk_range_fn)(void *ctx, size_t begin, size_t end, int worker);
QTK_API void qtk_parallel_for(int threads, size_t n, qtk_range_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* QTK_H */
