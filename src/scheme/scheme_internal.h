/* scheme_internal.h — facts about values and schemes shared inside the library. */
#ifndef QTK_SCHEME_INTERNAL_H
#define QTK_SCHEME_INTERNAL_H

#include "../common/internal.h"

typedef enum { QTK__KIND_INT, QTK__KIND_FLOAT } qtk__value_kind;

typedef struct qtk__value_info {
    const char *name;
    unsigned bits;
    qtk__value_kind kind;
    bool unsig;          /* an unsigned integer 0..2^bits-1 (the affine mode's fields) */
    int lo, hi;          /* integer range (integers only) */
    float max;           /* largest magnitude: hi for integers (the half-range is below) */
    float half_range;    /* (hi - lo) / 2: the divisor of the raw scale (SPEC §2 step 2) */
    qtk_dtype fmt;       /* minifloat format (floats only) */
} qtk__value_info;

QTK_INTERNAL const qtk__value_info *qtk__value(qtk_value v);

/* ggml's block structs held verbatim by store=ggml (docs/affine.md §3). */
typedef enum qtk__gfmt {
    QTK__GF_Q4_1 = 0,
    QTK__GF_Q5_0,
    QTK__GF_Q5_1,
    QTK__GF_Q2_K,
    QTK__GF_Q3_K,
    QTK__GF_Q4_K,
    QTK__GF_Q5_K,
    QTK__GF_Q6_K,
    /* the lattice types (docs/lattice.md) */
    QTK__GF_IQ2_XXS,
    QTK__GF_IQ2_XS,
    QTK__GF_IQ2_S,
    QTK__GF_IQ3_XXS,
    QTK__GF_IQ3_S,
    QTK__GF_IQ1_S,
    QTK__GF_IQ1_M,
    QTK__GF_COUNT
} qtk__gfmt;

typedef struct qtk__gfmt_info {
    const char *preset;  /* "q4_k" */
    const char *ggml;    /* "Q4_K" */
    unsigned ggml_id;    /* ggml's type id */
    unsigned qk;         /* elements per block */
    unsigned bytes;      /* bytes per block */
    unsigned sub;        /* elements per scale group (sub-block) */
    qtk_scheme scheme;   /* the scheme it holds (canonical) */
} qtk__gfmt_info;

QTK_INTERNAL const qtk__gfmt_info *qtk__gfmt_info_of(qtk__gfmt f);
/* The ggml format whose scheme is s (store=ggml), or -1. */
QTK_INTERNAL int qtk__scheme_gfmt(const qtk_scheme *s);

/* Leading 1s dropped, at least one dim kept. */
QTK_INTERNAL void qtk__scheme_canonical_block(qtk_scheme *s);

/* Table registry: copies the named table into out[256]; *n gets its size. */
QTK_INTERNAL qtk_status qtk__table_find(const char *name, float *out, size_t *n);

/* table=fit: the entries are fitted to each tensor and stored in its bytes (SPEC §5); no
 * registry entry exists for it. */
#define QTK_TABLE_FIT "fit"
QTK_INTERNAL bool qtk__table_is_fit(const char *name);
/* The entries a fit starts from: nf4 for 16 entries, evenly spaced in [-1, 1] otherwise. */
QTK_INTERNAL void qtk__table_fit_seed(float *out, size_t n);
/* Tables that came with a file (exported for libqtk_ckpt, which registers them per checkpoint:
 * src/io/luts.c): counted references, so that each lives as long as the
 * checkpoints (the readers) using it and no longer; qtk__table_find finds them beside the
 * built-in and registered ones, which never go. acquire takes a reference to the file table
 * called name, creating it with the n entries v when there is none; a name already held by a
 * built-in, a registered table or a file table with other entries is QTK_E_ARG. release drops
 * one reference; the table goes with the last. */
QTK_PRIVATE_API qtk_status qtk__table_acquire(const char *name, const float *v, size_t n);
QTK_PRIVATE_API void qtk__table_release(const char *name);
/* 1 if name is a file table (acquired, not yet released), else 0. */
QTK_PRIVATE_API int qtk__table_is_file(const char *name);

static inline bool qtk__is_scale_dtype(qtk_dtype d) {
    return d == QTK_DTYPE_F32 || d == QTK_DTYPE_F16 || d == QTK_DTYPE_BF16 || d == QTK_DTYPE_UE8M0 ||
           d == QTK_DTYPE_UE4M3;
}

#endif
