/* imatrix.h — llama.cpp importance matrices, parsed from bytes (no file I/O).
 *
 * llama-imatrix runs a model over text and records, for every weight matrix W [out, in]
 * that multiplies activations a, the sum of a_j^2 per input column j. Divided by the number
 * of activations seen, that is E[a_j^2]: the weight of column j in the error of W a, which
 * is what qtk_quantize_options.weights takes per column (n_weights = in). This module holds
 * those means per tensor name; two file formats feed it:
 *
 *   legacy .dat (qtk__imatrix_parse_dat, little-endian):
 *       int32 n_entries (>= 1)
 *       n_entries x { int32 name_len; name_len bytes name (no NUL); int32 ncall (>= 1);
 *                     int32 nval (>= 1); nval x f32 value }
 *       optional trailer: int32 last_chunk, then optionally int32 len + len bytes dataset
 *     where value = E[a^2] x ncall (so the mean is value / ncall). For a merged-expert
 *     tensor nval = in x n_experts; the .dat does not say `in`: qtk__imatrix_weights takes it
 *     from the tensor.
 *   GGUF (phase 2, through the GGUF reader): F32 tensors <name>.in_sum2 [in, n_mat] and
 *     <name>.counts [1, n_mat] (and an ignored <name>.in_sum); the mean of column j of
 *     matrix m is in_sum2[m][j] / counts[m]: qtk__imatrix_add(im, name, in_sum2, counts,
 *     in, n_mat).
 *
 * Names are ggml's (blk.0.attn_q.weight, output.weight, ...), as llama.cpp gives them;
 * mapping them to a checkpoint's own names is the caller's (docs/quantizers.md). */
#ifndef QTK_IMATRIX_H
#define QTK_IMATRIX_H

#include "../common/internal.h"

typedef struct qtk__imatrix_entry {
    char *name;       /* NUL-terminated */
    float *mean;      /* nval means E[a^2] (>= 0, finite) */
    size_t nval;      /* in x n_mat */
    size_t n_mat;     /* matrices (experts); 0 when the file does not say (legacy .dat) */
    double count;     /* activations seen (legacy: ncall; GGUF: the largest count) */
} qtk__imatrix_entry;

typedef struct qtk__imatrix {
    qtk__imatrix_entry *e;
    size_t n, cap;
    int64_t chunks;   /* legacy trailer's last_chunk, or -1 */
    char *dataset;    /* legacy trailer's dataset name, or NULL */
} qtk__imatrix;

/* Parses a legacy .dat file's bytes into *out (zeroed first; free with qtk__imatrix_free,
 * also after a failure). A malformed file is QTK_E_FORMAT with a message naming the entry
 * and what is wrong. */
QTK_INTERNAL qtk_status qtk__imatrix_parse_dat(const void *bytes, size_t len, qtk__imatrix *out);

/* Adds one entry from sums and per-matrix counts (the GGUF flavour): mean[m * in + j] =
 * sums[m * in + j] / counts[m]. A matrix with count 0 gets means 1 (no information: every
 * column weighs the same). Names must be unique. */
QTK_INTERNAL qtk_status qtk__imatrix_add(qtk__imatrix *im, const char *name, const float *sums, const float *counts,
                                         size_t in, size_t n_mat);

/* The entry named name, or NULL. */
QTK_INTERNAL const qtk__imatrix_entry *qtk__imatrix_find(const qtk__imatrix *im, const char *name);

/* The per-column weights (in of them) of matrix `mat` (0 unless the tensor holds several
 * experts) for a tensor whose last dimension is `in`: checks that nval is a multiple of in
 * (and n_mat x in when known). */
QTK_INTERNAL qtk_status qtk__imatrix_weights(const qtk__imatrix_entry *e, size_t in, size_t mat, const float **out);

QTK_INTERNAL void qtk__imatrix_free(qtk__imatrix *im);

#endif
