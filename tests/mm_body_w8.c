/* mm_body_w8.c — the matmul body over the portable vocabulary at 8 lanes (AVX2's width),
 * for the tests only: qtk__mm_set_isa_override(&qtk__mm_isa_portable8). */
#include "matmul/mm.h"

extern const qtk__mm_isa qtk__mm_isa_portable8;

#define MV_L 8
#define MV_ALL_FLAVOURS 1
#define MV_NAME "portable-8"
#define MV_TABLE qtk__mm_isa_portable8
#include "matmul/mm_portable.c"
