/* mm.h — internals of the quantized matmul: how kernels see the weight tensor, the
 * prepared activations, and the table of per-ISA kernels.
 *
 * Vocabulary. W is a rank-2 tensor [R, C] ("tensor rows" r, "columns" c). In layout nk a
 * tensor row is an output n and its columns run along K; in layout kn a tensor row is a k
 * and its columns run along N. All kernels work on ranges of tensor rows and columns.
 *
 * The stream view. When the fields of a tensor row are consecutive in memory (store
 * native, packed or u32 along the last axis), row r starts at byte r * row_bytes and its
 * field c sits at bit c * cw of that run (cw = 8, 4 or 2; the first field in the lowest
 * bits). The SIMD kernels decode such runs straight from the packed bytes. Everything
 * else (fields packed along the rows, 8-bit lookup tables, block sizes that do not line up
 * with a vector) goes through the element codecs of plan.h: the generic path.
 *
 * Step order. The SIMD kernels (mm_body.h) decode a row a step at a time (a few vectors'
 * worth of fields) into vectors whose lanes hold the fields in an order of their own (see
 * mm_body.h); the activations are permuted to match once per call (qtk__mm_permute_steps
 * with the order isa->order gives), and kn kernels put their output columns back. */
#ifndef QTK_MM_H
#define QTK_MM_H

#include "../kernels/kernels.h"
#include "qtk_matmul.h"

/* Stream decoders (how a field of the stream becomes a value). */
typedef enum qtk__mmk {
    QTK__MMK_NONE = 0, /* no stream decoder: generic element path */
    QTK__MMK_F32,      /* dense f32 weights (qtk_matmul_f32), no scales */
    QTK__MMK_I8,       /* one int8 per byte (q8f, q8s, native q4/q2 sign-extended) */
    QTK__MMK_T8,       /* one code per byte in its low 4 bits, value table[code] */
    QTK__MMK_E4M3,     /* one e4m3 code per byte */
    QTK__MMK_E5M2,     /* one e5m2 code per byte */
    QTK__MMK_T4,       /* two 4-bit codes per byte, value table[code] */
    QTK__MMK_T2        /* four 2-bit codes per byte, value table[code & 3] */
} qtk__mmk;

/* How a step of the stream finds its scales (isa->stream_mode). */
enum {
    QTK__SM_NONE = 0, /* not streamable at this vector width */
    QTK__SM_CHUNK,    /* one scale per step: blocks of whole steps, or one block per row */
    QTK__SM_SPLIT     /* the step spans several blocks, each of whole groups of lanes */
};

/* Fields in one step of the widest kernels (4 codes per byte x 64 bytes). */
#define QTK__MM_STEP_MAX 256u

typedef struct qtk__mmw {
    const qtk__plan *p;     /* geometry and codecs; NULL for dense f32 weights */
    const uint8_t *vals;    /* packed values (or the dense f32 weights) */
    const uint8_t *sb;      /* the first stored scale */
    qtk_dtype sdt;          /* stored scale dtype */
    unsigned ssz;           /* bytes per stored scale */
    bool two_level;
    float global;           /* two-level global scale (1 otherwise) */
    size_t R, C;            /* tensor shape */
    size_t br, bc, gc;      /* block extent along R and along C; scale groups per grid row */
    const float *eff;       /* effective scale of every group (generic path only) */
    const float *off;       /* the affine mode: every group's stored offset (generic path only) */
    const qtk__gb_fmt *gb;  /* store=ggml: ggml's block struct (p is NULL; row_bytes is a row's
                             * blocks); the generic path decodes whole blocks */
    /* stream view */
    qtk__mmk kind;
    unsigned per;           /* codes per byte in the stream: 1, 2 or 4 */
    size_t row_bytes;       /* bytes from one tensor row's first field to the next's */
    float table[16];        /* value of each code (T8, T4; T2 repeats its 4 values) */
    uint8_t pad;            /* a byte of padding fields: the code of least |value| in each
                             * (so that value x scale is finite and meets x = 0 as 0) */
    /* integer view (precision fast): value(code) = ival[code] * 2^-ishift */
    bool int_ok;
    /* the affine mode's zero points (one u8 per scale group, ival = the unsigned codes): the
     * integer path subtracts z x Σq per lane, the exact path z from each step's codes (one
     * block a step, layout nk, z <= 128) */
    const uint8_t *zb;
    unsigned zmax;          /* the largest zero point */
    int8_t ival[16];        /* integer value of each code for T8/T4/T2; I8 needs none */
    int ishift;
} qtk__mmw;

/* Effective scale of group g (global x stored, rounded once, as qtk_dequantize uses it). */
static inline float qtk__mmw_scale(const qtk__mmw *w, size_t g) {
    float s = qtk__scale_load(w->sdt, w->sb + g * w->ssz);
    return w->two_level ? w->global * s : s;
}
/* Index of the scale group of tensor row r, column 0 (no division for blocks one row tall: GCC
 * folds `br == 1 ? r : r / br` into the division, a 64-bit div in every GEMV row's prologue). */
static inline size_t qtk__mmw_group0(const qtk__mmw *w, size_t r) {
    if (QTK_LIKELY(w->br == 1)) return r * w->gc;
    return r / w->br * w->gc;
}

struct qtk__mm_isa;

/* One call of qtk_matmul, with everything prepared before the threads start. */
typedef struct qtk__mm {
    qtk__mmw w;
    qtk_mm_layout layout;
    size_t M, N, K;
    const float *x;     /* [M][K] f32 (converted from f16/bf16 when needed) */
    const float *bias;  /* N values or NULL */
    float *y;           /* [M][N] */
    const struct qtk__mm_isa *isa;
    qtk_mm_path path;
    bool fused;         /* registers-only kernel (small M) instead of tiles */
    int smode;          /* QTK__SM_* for the stream at the isa's width */
    /* exact path: the order of the fields in a step of sf (identity: sf = 0) */
    size_t sf;
    uint16_t perm[QTK__MM_STEP_MAX];
    bool xbig;          /* some |x| >= 2^90 or not finite (the fused kernel's exact shortcut is off) */
    /* nk exact: activations in step order, K padded with zeros to kp */
    size_t kp;
    float *xp;          /* [M][kp] (fused) */
    float *xt;          /* [kp][mp] transposed (tiles) */
    size_t mp;          /* M padded to the microkernel's column tile */
    /* integer path: activations quantized per block of bx */
    size_t bx, kq;      /* block length; K padded for the kernel's layout */
    int8_t *xq;         /* [M][kq] int8 in the kernel's order */
    float *xs;          /* scales: per block (portable) or per lane (SIMD), see the kernels */
    int32_t *xc;        /* SIMD: per-lane offset corrections (see mm_avx512_int.c) */
    float *xz;          /* zero points (w.zb): Σq of each lane (SIMD, stride xs_ld) as f32 */
    int16_t *xb;        /* store=ggml: each block's per-group sums of q (mm_gb.h) */
    size_t xb_ld;
    float *xlf;         /* store=ggml's 32 types: each block's 8 lane sums of q (as f32: Q4_1, Q5_1) */
    int32_t *xli;       /*   (as integers: Q5_0); [M][K / 4] */
    size_t xs_ld, xc_ld;/* per-row strides of xs and xc */
    float xs_max;       /* integer path: the largest activation scale (NaN aside) */
    int ivar;           /* integer path: the flavour of dot product (mm_body_int.h) */
    int ioff;           /* integer path: the offset added to the weights (xc holds -ioff x Σq) */
    /* per-thread scratch */
    size_t ws_floats;
} qtk__mm;

/* Per-ISA kernels. All compute y[:, n0:n1] completely (bias included) for a range of N
 * that the caller gives each thread; ws is that thread's scratch (ws_floats floats). */
typedef void (*qtk__mm_range_fn)(const qtk__mm *c, size_t n0, size_t n1, float *ws);

typedef struct qtk__mm_isa {
    const char *name;
    /* what each path is built on at this level (qtk_matmul_kernel) */
    const char *generic_name, *fused_name, *tiled_name;
    const char *(*int_name)(const qtk__mm *c);
    const char *gb_int_name, *gb_lat_int_name;
    unsigned lanes;     /* f32 lanes per vector: the chunk geometry */
    unsigned ir, jr;    /* microkernel tile: ir broadcast rows x jr vector columns (max) */
    size_t fused_max_m; /* nk exact: M up to this runs the fused kernel */
    /* precision fast takes the integer path up to this many rows of x, for weights of 1, 2
     * and 4 codes a byte (8-, 4-, 2-bit); above it the exact tiled kernel is faster */
    size_t int_max_m[3];
    /* nk exact, streamed, small M */
    qtk__mm_range_fn nk_fused;
    /* kn exact, streamed, small M (ws: qtk__mm_knf_ws floats) */
    qtk__mm_range_fn kn_fused;
    /* Decodes tensor rows [r0, r0+nr), columns [c0, c0+nc) into dst (row stride ld),
     * scaled: in step order for the SIMD decoders (c0 and nc multiples of the step), natural
     * order for the generic one. */
    void (*decode)(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst,
                   size_t ld);
    /* C[i][j] = (acc ? C[i][j] : 0) + Σ_k A[i*lda + k] · B[k*ldb + j], i < ir, j < jr (a
     * multiple of lanes, at most the isa's jr). */
    void (*ukr)(size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc, size_t ldc,
                unsigned ir, unsigned jr, bool acc);
    /* integer path (NULL: none at this level) */
    qtk_status (*int_prepare)(qtk__mm *c);
    qtk__mm_range_fn nk_int;
    /* store=ggml's integer path (mm_gb.c; NULL: none at this level), up to this many rows of x */
    qtk__mm_range_fn gb_int;
    size_t gb_int_max_m;
    /* the same for the lattice types (docs/lattice.md), and their exact path at M up to
     * QTK__MM_GB_MAX_M (nk; NULL: the generic tiles) */
    qtk__mm_range_fn gb_lat_int, gb_lat_exact;
    const char *gb_lat_exact_name;
    /* the stream: fields per step, their order in a step, how a step finds its scales (for
     * rows of len fields), and the fused kernels' scratch (floats per thread) */
    size_t (*step)(const qtk__mmw *w);
    void (*order)(const qtk__mmw *w, uint16_t *perm);
    int (*stream_mode)(const qtk__mmw *w, size_t len);
    size_t (*row_ws)(const qtk__mm *c);
} qtk__mm_isa;

QTK_INTERNAL extern const qtk__mm_isa qtk__mm_isa_ref;
QTK_INTERNAL extern const qtk__mm_isa qtk__mm_isa_portable;
#ifdef QTK_HAVE_AVX2
QTK_INTERNAL extern const qtk__mm_isa qtk__mm_isa_avx2;
#endif
#ifdef QTK_HAVE_AVX512
QTK_INTERNAL extern const qtk__mm_isa qtk__mm_isa_avx512;
#endif
#ifdef QTK_HAVE_NEON
QTK_INTERNAL extern const qtk__mm_isa qtk__mm_isa_neon;
#endif

/* ---- mm_view.c: the weight view ---- */

/* Fills the view of a validated rank-2 tensor (stream and integer views included). */
QTK_INTERNAL void qtk__mmw_init(qtk__mmw *w, const qtk__plan *p, const uint8_t *bytes);
/* The view of a validated rank-2 store=ggml tensor of shape [R, C]. */
QTK_INTERNAL void qtk__mmw_init_gb(qtk__mmw *w, const qtk__gb_fmt *F, const uint8_t *bytes, size_t R, size_t C);
/* Activations row x (k values) into step order (field perm[j] of each step of sf at j; sf = 0:
 * natural order), zero-padded to kp; returns false if some |x| >= 2^90 or is not finite. */
QTK_INTERNAL bool qtk__mm_permute_steps(const float *x, size_t k, const uint16_t *perm, size_t sf, float *dst, size_t kp);

/* ---- mm_ref.c: the reference and the generic element decoder ---- */

/* Decodes columns [c0, c0+nc) of tensor row r with the element codecs (w->eff needed). */
QTK_INTERNAL void qtk__mm_decode_elems(const qtk__mmw *w, size_t r, size_t c0, size_t nc, float *dst);
/* The reference: y[:, n0:n1], in order of k, no FMA; ws holds qtk__mm_ref_ws floats. */
QTK_INTERNAL void qtk__mm_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws);
QTK_INTERNAL size_t qtk__mm_ref_ws(const qtk__mm *c);
/* The generic tile decoder (any scheme; natural order only). */
QTK_INTERNAL void qtk__mm_decode_generic(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked,
                                         float *dst, size_t ld);

/* ---- mm_int.c: the portable integer path ---- */

/* Quantizes one row of activations in blocks of bx: q (k values), per-block scales s. Defines
 * the bits every ISA reproduces: amax = max|x|, s = amax / 127, q = round-half-even(x * (127 / amax)). */
QTK_INTERNAL void qtk__mm_quantize_row(const float *x, size_t k, size_t bx, int8_t *q, float *s);
QTK_INTERNAL qtk_status qtk__mm_int_prepare_ref(qtk__mm *c);
/* The vector kernels' activation layout (vbytes: bytes of one vector, 32 or 64): quantizes
 * each row of x with qrow (the portable qtk__mm_quantize_row or a vector twin with its bits)
 * and lays it out for the integer kernels. */
typedef void (*qtk__mm_qrow_fn)(const float *x, size_t k, size_t bx, int8_t *q, float *s);
QTK_INTERNAL qtk_status qtk__mm_int_prepare_simd(qtk__mm *c, unsigned vbytes, int offset, bool need_xc, qtk__mm_qrow_fn qrow);
/* Lays out one quantized row (q: k values, s: per-block scales) for the SIMD integer
 * kernels. A kernel step reads `per` vectors of L bytes of a weight row (per*L fields);
 * byte i of vector j is field per*i + j of the step, so dst holds the activations in that
 * order (zero past k, up to kq). Each 32-bit lane l covers bytes 4l..4l+3 of every vector,
 * fields [4 per l, 4 per (l+1)) of the step, all in one activation block: xs gets that
 * block's scale per step and lane, and xc (if not NULL) -offset x the sum of q over the
 * lane, which turns the dot product of unsigned weights (value + offset) back into the
 * signed one. q holds kq values (zeros past k). */
QTK_INTERNAL void qtk__mm_int_layout(const int8_t *q, const float *s, size_t k, size_t bx, unsigned per, unsigned L, float *xz,
                                     int offset, int8_t *dst, float *xs, int32_t *xc, size_t kq);
QTK_INTERNAL void qtk__mm_int_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws);

/* Prefetch distances of the streamed GEMV kernels (DRAM-sized weights): the weights'
 * stream this many bytes ahead, their scales (a stream of their own) this many rows. */
#define QTK__MM_PF_BYTES 4096u
#define QTK__MM_PF_ROWS 16u
/* Rows of W the integer path takes at a time where M > 1: each group of x's rows (4 rows of K
 * bytes) then meets the tile's rows while it is in L1, instead of coming from L2 for every row
 * of W (mm_body_int.h's int_range_m) */
#define QTK__MM_INT_TILE 8u

/* ---- mm_gb.c: store=ggml's integer path ---- */

/* rows of x a store=ggml integer kernel takes at once, and the path's default row limit */
#define QTK__MM_GB_MAX_M 8u

/* Quantizes x for ggml's blocks (mm_gb.c has the layout) into c->xq, c->xs, c->xc. */
QTK_INTERNAL qtk_status qtk__mm_gb_prepare(qtk__mm *c);
/* The scalar kernel: the bits every level gives. */
QTK_INTERNAL void qtk__mm_gb_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws);
/* The AVX-512 level's kernel (mm_avx2.c): AVX2's, the 32-element types with vpdpbusd where the
 * CPU has AVX512-VNNI (and the test hook QTK__MM_HOOK_INT_MAD does not withhold it). */
QTK_INTERNAL void qtk__mm_gb_int_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws);
/* the lattice types' (AVX2's, which the AVX-512 level runs) */
QTK_INTERNAL void qtk__mm_gb_lat_int_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws);
QTK_INTERNAL void qtk__mm_gb_lat_exact_avx2(const qtk__mm *c, size_t n0, size_t n1, float *ws);

/* ---- mm_gemm.c: tiled drivers over isa->decode and isa->ukr ---- */

#define QTK__MM_KC 256u   /* k per tile (a multiple of every chunk) */
#define QTK__MM_NB 384u   /* nk: output rows per pass over the activations */
#define QTK__MM_NC 256u   /* kn: output columns per panel */
QTK_INTERNAL void qtk__mm_gemm_nk(const qtk__mm *c, size_t n0, size_t n1, float *ws);
QTK_INTERNAL void qtk__mm_gemm_kn(const qtk__mm *c, size_t n0, size_t n1, float *ws);
/* kn fused kernels: columns of y accumulated at once (per row of x), and their scratch
 * (accumulators for 2 rows of x, then the scales of 4 weight rows). */
#define QTK__MM_KNF_COLS 1024u
#define QTK__MM_KNF_WS (2u * QTK__MM_KNF_COLS + 4u * (QTK__MM_KNF_COLS / 4u + 64u))
/* Scratch floats the drivers need per thread for a range of up to n_range outputs. */
QTK_INTERNAL size_t qtk__mm_gemm_ws(const qtk__mm *c, size_t n_range);

/* ---- test hooks (tests only) ---- */

enum {
    QTK__MM_HOOK_GENERIC = 1u,
    QTK__MM_HOOK_NO_FUSED = 2u,
    QTK__MM_HOOK_FUSED = 4u,
    QTK__MM_HOOK_NO_TERN = 8u,
    QTK__MM_HOOK_INT_ANY_M = 16u,
    QTK__MM_HOOK_TERN = 32u,
    QTK__MM_HOOK_INT_MAD = 64u
};
/* Bits of QTK__MM_HOOK_*: force the generic decoder; never/always use the fused kernel;
 * 2-bit integer weights on the integer path with dot products instead of adds; the integer
 * path for every M (normally M <= QTK__MM_INT_MAX_M); the multiply-free 2-bit kernel where
 * it applies, at every level; the integer path without vpdpbusd (pmaddubsw flavours). */

/* The integer path's row limit where a level has not measured its own (isa->int_max_m): above
 * it the exact tiled kernel was both faster (1.3-2x at M = 64, AVX-512) and more accurate. The
 * ternary flavour keeps to it on every level. */
#define QTK__MM_INT_MAX_M 8u
QTK_INTERNAL void qtk__mm_set_hooks(unsigned hooks);
QTK_INTERNAL unsigned qtk__mm_hooks(void);
/* Makes qtk_matmul use these kernels whatever the ISA level (NULL: the level's own); the
 * tests build the portable body at other widths with it. */
QTK_INTERNAL void qtk__mm_set_isa_override(const qtk__mm_isa *isa);
/* The active kernels' integer-path row limit for weights of `per` codes a byte (1, 2, 4). */
QTK_INTERNAL size_t qtk__mm_int_max_m(unsigned per);
/* Masks CPU feature bits (cpu.h) the matmul kernels may use (0 = no mask). */
QTK_INTERNAL void qtk__mm_set_feature_mask(unsigned drop);
QTK_INTERNAL unsigned qtk__mm_features(void);

#endif
