/* npy.h — NumPy .npy arrays: read f32/f16/f64 (either byte order) as f32, write
 * f32/f16/bf16 (bf16 as '<u2' bit patterns). */
#ifndef QTK_NPY_H
#define QTK_NPY_H

#include "qtk.h"

typedef struct cli_npy {
    int rank;
    size_t shape[QTK_MAX_RANK];
    size_t numel;
    char descr[8]; /* as read, e.g. "<f4" */
    float *data;   /* numel values converted to f32 (free with cli_npy_free) */
} cli_npy;

/* Parses an in-memory .npy file. Errors name the problem (bad magic, unsupported dtype,
 * fortran order, length mismatch). Values convert exactly (f16) or round to nearest (f64). */
qtk_status cli_npy_parse(const uint8_t *buf, size_t len, cli_npy *out);
qtk_status cli_npy_read(const char *path, cli_npy *out);
void cli_npy_free(cli_npy *a);

/* Builds the bytes of a .npy file holding `data` (numel elements of dtype f32, f16 or bf16,
 * already encoded) with the given shape. *out is malloc'ed. */
qtk_status cli_npy_build(const void *data, qtk_dtype dtype, const size_t *shape, int rank, uint8_t **out,
                         size_t *out_len);
qtk_status cli_npy_write(const char *path, const void *data, qtk_dtype dtype, const size_t *shape, int rank,
                         int force);

#endif
