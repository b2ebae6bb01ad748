/* exec.h — runs kernel row loops over a whole tensor, split across threads where the
 * split cannot change a single bit of the result, and chunked so that a scale group's
 * inputs and its effective scale are used while they are in cache. */
#ifndef QTK_EXEC_H
#define QTK_EXEC_H

#include "../kernels/kernels.h"

/* ---- whole tensors (threads: 0 = the library default) ---- */

/* Per-group statistics over all rows (absolute group indices). */
QTK_INTERNAL qtk_status qtk__exec_amax(const qtk__plan *p, const float *x, qtk__stats *st, int threads);
QTK_INTERNAL qtk_status qtk__exec_absmean(const qtk__plan *p, const float *x, qtk__stats *st, int threads);
/* Encodes every row into dst's values region (zeroed here) with a full array of effective
 * scales. */
QTK_INTERNAL qtk_status qtk__exec_encode(const qtk__plan *p, const float *x, const float *eff, uint8_t *dst,
                                         int threads);

/* Plans whose scale groups lie within rows and whose rows own their storage units: these
 * are quantized and dequantized a chunk of rows at a time. */
QTK_INTERNAL bool qtk__exec_chunkable(const qtk__plan *p);
/* Quantizes a chunkable plan in one sweep: per chunk, the groups' ranges (from alpha, or
 * measured here when alpha is NULL), their stored scales (codes into dst; g is the
 * two-level global), then the fields. *bad: the lowest non-finite input index, *bad_group:
 * the lowest group whose effective scale overflows (SIZE_MAX if none). */
QTK_INTERNAL qtk_status qtk__exec_quantize_chunked(const qtk__plan *p, const float *x, uint8_t *dst, const float *alpha,
                                                   float g, int threads, size_t *bad, size_t *bad_group);
/* Dequantizes Burn-layout bytes (scales already validated) with global g. */
QTK_INTERNAL qtk_status qtk__exec_decode(const qtk__plan *p, const uint8_t *bytes, float g, qtk_dtype dtype,
                                         void *out, int threads);

/* ---- pieces ---- */

/* Groups [g0, g0 + n): ranges alpha[0..n) -> codes into dst's scale region, effective
 * scales into eff[0..n). */
QTK_INTERNAL void qtk__exec_finish_scales(const qtk__plan *p, const float *alpha, size_t g0, size_t n, float g,
                                          uint8_t *dst, float *eff);
/* Effective scales of groups [g0, g0 + n) from the stored codes in bytes (no validation). */
QTK_INTERNAL void qtk__exec_load_scales(const qtk__plan *p, const uint8_t *bytes, size_t g0, size_t n, float g,
                                        float *eff);

/* Single-threaded row ranges (x/out point at row r0; eff and st->amax at group gbase).
 * encode_rows needs r0 and r1 on encode-unit boundaries (qtk__exec_unit_align) and zeroes
 * the rows' value bytes first. */
QTK_INTERNAL void qtk__exec_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t gbase, size_t r0,
                                      size_t r1);
QTK_INTERNAL void qtk__exec_encode_rows(const qtk__plan *p, const float *x, const float *eff, size_t gbase,
                                        uint8_t *dst, size_t r0, size_t r1);
QTK_INTERNAL void qtk__exec_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, size_t gbase,
                                        qtk_dtype dtype, void *out, size_t r0, size_t r1);
/* The first encode-unit boundary at or after row r, and the most rows one unit spans. */
QTK_INTERNAL size_t qtk__exec_unit_align(const qtk__plan *p, size_t r);
QTK_INTERNAL size_t qtk__exec_unit_rows(const qtk__plan *p);
/* The first scale group of row r (n_scales for r == rows). */
QTK_INTERNAL size_t qtk__exec_first_group(const qtk__plan *p, size_t r);

#endif
