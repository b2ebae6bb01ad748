/* oracle.h — a second, deliberately naive implementation of SPEC.md used only by tests.
 *
 * It shares no code with the library: number formats are decoded with ldexp in double
 * and encoded by brute-force search over every code (nearest, ties to the even code);
 * scales round up by searching the sorted codes; every element's group and storage
 * position come from its coordinates. Slow, and written to be obviously right. */
#ifndef QTK_ORACLE_H
#define QTK_ORACLE_H

#include "qtk.h"

/* Value of a code in a format (NaN codes give NaN), in double. */
double oracle_decode(qtk_dtype d, uint32_t code);
/* Nearest code to v (finite, within range) by exhaustive search, ties to the even code;
 * keeps the sign of v (including -0) for signed formats. */
uint32_t oracle_encode_nearest(qtk_dtype d, double v);
/* Smallest code whose value is >= |v| (saturating; sign kept for signed formats). */
uint32_t oracle_round_up(qtk_dtype d, float v);

/* Total byte length (SPEC §5), computed independently. Returns 0 and sets *ok = 0 when the
 * shape does not fit the scheme. */
size_t oracle_length(const qtk_scheme *s, const size_t *shape, int rank, int *ok);

/* Quantizes x like SPEC §2 into out (oracle_length bytes). given/global may be NULL.
 * Returns 0 on success, -1 if the input or scales are invalid (the library must then fail). */
int oracle_quantize(const float *x, const size_t *shape, int rank, const qtk_scheme *s, int absmean,
                    const float *given, const float *global, uint8_t *out);
/* Dequantizes bytes to f32 (SPEC §2, "Dequantizing"). */
void oracle_dequantize(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *out);
/* The effective scale (global x stored scale) of every element. */
void oracle_effective_scales(const uint8_t *b, const size_t *shape, int rank, const qtk_scheme *s, float *eff);

#endif
