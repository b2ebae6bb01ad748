/* mm_body_w16.c — the matmul body over the portable vocabulary at 16 lanes (AVX-512's
 * width), for the tests only: qtk__mm_set_isa_override(&qtk__mm_isa_portable16). */
#include "matmul/mm.h"

extern const qtk__mm_isa qtk__mm_isa_portable16;

#define MV_L 16
#define MV_ALL_FLAVOURS 1
#define MV_NAME "portable-16"
#define MV_TABLE qtk__mm_isa_portable16
#include "matmul/mm_portable.c"
