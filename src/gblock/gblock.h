/* gblock.h — ggml's block structs as qtk holds them (store=ggml, docs/affine.md §3).
 *
 * A store=ggml tensor is rows of ggml blocks along its last dimension, the bytes exactly
 * ggml's. This room knows the bytes: unpack (a block -> its fields, integer sub-scales and
 * f16 scales) and pack (the inverse; both are bijections between byte strings and unpacked
 * blocks, so every block round-trips), the value of every element, the checks on bytes, and
 * the quantizers that make blocks from f32 values.
 *
 * Values. Every format computes x = S_g q + O_g per scale group g, where S_g (d, or d x sc)
 * and O_g (0, m, or -(dmin x mn)) are exact f32 and S_g q is exact (docs/affine.md §3): so
 * x is S_g q for the symmetric formats (no rounding) and one rounding of S_g q + O_g for the
 * affine ones — ggml's dequantize_row_* to the bit, with or without FMA. */
#ifndef QTK_GBLOCK_H
#define QTK_GBLOCK_H

#include "../numfmt/scalar.h"
#include "../scheme/scheme_internal.h"

#define QTK__GB_QK_MAX 256u
#define QTK__GB_GROUPS_MAX 16u

/* One block, unpacked. */
typedef struct qtk__gb_unpacked {
    uint16_t d;                     /* f16 bits: the block scale d (K types: the super-block's) */
    uint16_t m;                     /* f16 bits: Q4_1/Q5_1 the offset m; Q2_K/Q4_K/Q5_K dmin; else 0 */
    int8_t sc[QTK__GB_GROUPS_MAX];  /* K types: the integer sub-scales (Q3_K: -32..31, Q6_K: int8) */
    uint8_t mn[QTK__GB_GROUPS_MAX]; /* Q2_K/Q4_K/Q5_K: the integer sub-mins */
    int8_t q[QTK__GB_QK_MAX];       /* fields, as the value reads them (u: 0..Q; q6f: -32..31 ...) */
} qtk__gb_unpacked;

/* A format's facts beside qtk__gfmt_info (scheme_internal.h). */
typedef struct qtk__gb_fmt {
    qtk__gfmt f;
    unsigned qk, bytes, sub, groups; /* elements, bytes, elements per group, groups per block */
    int qlo, qhi;                    /* field range */
    bool affine;                     /* an offset (m or dmin x mn) */
    bool super;                      /* integer sub-scales under d (K types) */
    int sclo, schi;                  /* K types: sub-scale range */
    int mnhi;                        /* affine K types: sub-min range 0..mnhi */
    bool lattice;                    /* a lattice type (docs/lattice.md): q are codebook coordinates */
    float dmul;                      /* S_g = d x sc_g x dmul (a power of two; 1 but for lattice types) */
} qtk__gb_fmt;

QTK_INTERNAL const qtk__gb_fmt *qtk__gb_fmt_of(qtk__gfmt f);
/* The format of a store=ggml scheme (validated), or NULL. */
QTK_INTERNAL const qtk__gb_fmt *qtk__gb_fmt_of_scheme(const qtk_scheme *s);

QTK_INTERNAL void qtk__gb_unpack(const qtk__gb_fmt *F, const uint8_t *blk, qtk__gb_unpacked *u);
QTK_INTERNAL void qtk__gb_pack(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, uint8_t *blk);
/* The f16 words and the integer sub-scales and sub-mins only (the fields are left as they are). */
QTK_INTERNAL void qtk__gb_unpack_scales(const qtk__gb_fmt *F, const uint8_t *blk, qtk__gb_unpacked *u);

/* S_g and O_g of every group of an unpacked block (F->groups each); the f16 scales must be
 * finite for the values to be finite. */
QTK_INTERNAL void qtk__gb_params(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, float *S, float *O);
/* The value of field q under (S, O). */
static inline float qtk__gb_value(const qtk__gb_fmt *F, float S, float O, int q) {
    float t = S * (float)q; /* exact */
    if (!F->affine) return t;
    return t + O;
}

/* The block's f16 scales are finite (ggml_validate_row_data's rule); else false and *what
 * names the field ("d", "dmin", "m"). */
QTK_INTERNAL bool qtk__gb_block_ok(const qtk__gb_fmt *F, const uint8_t *blk, const char **what);

/* Reference dequantization of nb blocks at src into y (F->qk x nb values). */
QTK_INTERNAL void qtk__gb_dequant_ref(const qtk__gb_fmt *F, const uint8_t *src, size_t nb, float *y);

/* Quantizes one block of F->qk values x (weights w, NULL: all 1) into blk: calibration mse
 * when `mse`, else minmax (docs/quantizers.md). */
QTK_INTERNAL void qtk__gb_quantize_block(const qtk__gb_fmt *F, const float *x, const float *w, bool mse, uint8_t *blk);

/* The continuous (a > 0, c) of least weighted squared error for x ~ a q + c with q in [0, Q]
 * nearest: trial scales with Lloyd steps, as the ggml formats' mse searches them (a == 0 when
 * the group is constant: every field 0, c its value). w: NULL = all 1. */
QTK_INTERNAL void qtk__fit_affine(const float *x, const float *w, size_t n, int Q, float *a, float *c);

/* ---- the lattice types (gb_lattice.c, docs/lattice.md) ---- */

/* ggml's grids as carried (gb_grids.c): entry i's coordinates as level indices, base 3 for the
 * 8-wide grids (levels 8 25 43; iq1s: -1 0 1), base 8 for the 4-wide ones (iq3xxs: 4 12 20 28
 * 36 44 52 62; iq3s: 1 3 ... 15), first coordinate in the lowest digit. */
QTK_INTERNAL extern const uint16_t qtk__grid_iq2xxs[256], qtk__grid_iq2xs[512], qtk__grid_iq2s[1024],
    qtk__grid_iq1s[2048], qtk__grid_iq3xxs[256], qtk__grid_iq3s[512];

/* The grids expanded to their coordinates (as ggml's tables hold them), built once. */
typedef struct qtk__lattice_grids {
    int8_t iq2xxs[256][8], iq2xs[512][8], iq2s[1024][8], iq1s[2048][8];
    int8_t iq3xxs[256][4], iq3s[512][4];
    /* for the kernels: IQ1's 8 (level + 1/8) (8 (level - 1/8) is 2 less); the 8
     * signs of 7 stored bits (ggml's ksigns_iq2xs); byte j of smask[s] is 0xff when bit j of s
     * is set, else 0 */
    int8_t iq1q[2048][8];
    uint8_t ksigns[128];
    uint64_t smask[256];
    /* the same as bytes of -1 (set) and +1 (clear): of 8 bits, and of 7 stored bits */
    uint64_t spm8[256], spm7[128];
    /* a point's code (its level indices as digits, as gb_grids.c holds it) -> its index, or -1 */
    int16_t inv2xxs[6561], inv2xs[6561], inv2s[6561], inv1s[6561], inv3xxs[4096], inv3s[4096];
} qtk__lattice_grids;
QTK_INTERNAL const qtk__lattice_grids *qtk__lattice(void);

QTK_INTERNAL void qtk__gb_lattice_unpack(const qtk__gb_fmt *F, const uint8_t *blk, qtk__gb_unpacked *u);
/* The inverse of unpack for every block unpack gives (false: q or sc not on the codebook). */
QTK_INTERNAL bool qtk__gb_lattice_pack(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, uint8_t *blk);
/* Makes the tables quantizing to F's codebook needs (once; false: out of memory). */
QTK_INTERNAL bool qtk__gb_lattice_quant_ready(const qtk__gb_fmt *F);
/* Quantizes one block of 256 values x (weights w, NULL: all 1) into blk: the lattice search
 * when `mse`, else each group's largest magnitude on the top level (gb_lattice_quant.c). */
QTK_INTERNAL void qtk__gb_lattice_quantize(const qtk__gb_fmt *F, const float *x, const float *w, bool mse, uint8_t *blk);
/* The block's f16 d (IQ1_M: gathered from its scale words' top nibbles); the kernels read it too. */
static inline uint16_t qtk__gb_lattice_d(qtk__gfmt f, const uint8_t *b) {
    if (f != QTK__GF_IQ1_M) return qtk__ld16(b);
    return (uint16_t)((b[49] >> 4) | (b[51] & 0xf0u) | (b[53] >> 4) << 8 | (b[55] & 0xf0u) << 8);
}

/* The stored offset of group g as the scheme states it (docs/affine.md: offset= m, min=
 * dmin x mn), for qtk_tensor_offsets; 0 for symmetric formats. */
QTK_INTERNAL float qtk__gb_stored_offset(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, unsigned g);

#endif
