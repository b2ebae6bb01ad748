/* gguf_ref_decode.h — the tests' reference decoder of ggml's offset types (gguf_ref_decode.c). */
#ifndef TEST_GGUF_REF_DECODE_H
#define TEST_GGUF_REF_DECODE_H

#include "qtk.h"

#include <stddef.h>
#include <stdint.h>

/* nb blocks of ggml type 3 (Q4_1), 7 (Q5_1), 10 (Q2_K), 12 (Q4_K) or 13 (Q5_K) at src into
 * dst as ggml's dequantize_row_* computes them; an error names a non-finite d/m/dmin with the
 * block's file offset (off: the first block's). */
qtk_status test_gguf_ref_decode(uint32_t type, const uint8_t *src, size_t nb, float *dst, size_t off);

#endif
