/* gguf_types.c — the ggml type table (GGUF.md §2.1) and what each type becomes in qtk
 * (GGUF.md §3.2, docs/gguf.md). */
#include "gguf/gguf_internal.h"

#include <strings.h>

#define RAW(n, b, e) {n, 1, b, GK_RAW, e, NULL, -1, -1}
#define EXACT(n, k, b, s) {n, k, b, GK_EXACT, QTK_ELEM_NONE, s, -1, -1}
#define NATIVE(n, k, b, s, d, m) {n, k, b, GK_NATIVE, QTK_ELEM_NONE, s, d, m}
#define REMOVED {NULL, 0, 0, GK_REMOVED, QTK_ELEM_NONE, NULL, -1, -1}

/* Why these schemes (GGUF.md §3.2-§3.3, with the settled decisions of §3.6):
 *   - negative stored scales are accepted by qtk, so Q4_0, IQ4_NL, Q5_0, Q3_K, Q6_K, Q8_K and
 *     IQ4_XS keep ggml's signed scales as they are;
 *   - 256-element super-blocks with one scale (Q8_K, TQ1_0, TQ2_0) become block=128 with the
 *     scale written twice: Burn's containers hold block dims up to 255 only, and these tensors
 *     must convert to .bpk;
 *   - the types with offsets, mins or 5/6/3-bit fields (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K) and
 *     the lattice types (IQ1_S ... IQ3_S, docs/lattice.md) are held in ggml's own block
 *     structs (store=ggml, docs/affine.md): their bytes as they are;
 *   - Q8_K's and IQ4_XS's sub-scales d x sc are exact in f32, hence f32 block scales;
 *   - NVFP4 reads as single-level e2m1/ue4m3 (ggml's tensor has no global scale); with a
 *     companion ".scale" tensor it reads as the two-level nvfp4 preset (gguf.c). */
static const gguf_type types[QTK__GGUF_TYPE_COUNT] = {
    [0] = RAW("F32", 4, QTK_ELEM_F32),
    [1] = RAW("F16", 2, QTK_ELEM_F16),
    [2] = EXACT("Q4_0", 32, 18, "q4f,block=32:f16"),
    [3] = NATIVE("Q4_1", 32, 20, "q4_1", 0, 2),
    [4] = REMOVED,
    [5] = REMOVED,
    [6] = NATIVE("Q5_0", 32, 22, "q5_0", 0, -1),
    [7] = NATIVE("Q5_1", 32, 24, "q5_1", 0, 2),
    [8] = EXACT("Q8_0", 32, 34, "q8f,block=32:f16,store=native"),
    [9] = EXACT("Q8_1", 32, 36, "q8f,block=32:f16,store=native"),
    [10] = NATIVE("Q2_K", 256, 84, "q2_k", 80, 82),
    [11] = NATIVE("Q3_K", 256, 110, "q3_k", 108, -1),
    [12] = NATIVE("Q4_K", 256, 144, "q4_k", 0, 2),
    [13] = NATIVE("Q5_K", 256, 176, "q5_k", 0, 2),
    [14] = NATIVE("Q6_K", 256, 210, "q6_k", 208, -1),
    [15] = EXACT("Q8_K", 256, 292, "q8f,block=128:f32,store=native"),
    [16] = NATIVE("IQ2_XXS", 256, 66, "iq2_xxs", 0, -1),
    [17] = NATIVE("IQ2_XS", 256, 74, "iq2_xs", 0, -1),
    [18] = NATIVE("IQ3_XXS", 256, 98, "iq3_xxs", 0, -1),
    [19] = NATIVE("IQ1_S", 256, 50, "iq1_s", 0, -1),
    [20] = EXACT("IQ4_NL", 32, 18, "q4f,table=iq4nl,block=32:f16"),
    [21] = NATIVE("IQ3_S", 256, 110, "iq3_s", 0, -1),
    [22] = NATIVE("IQ2_S", 256, 82, "iq2_s", 0, -1),
    [23] = EXACT("IQ4_XS", 256, 136, "q4f,table=iq4nl,block=32:f32"),
    [24] = RAW("I8", 1, QTK_ELEM_I8),
    [25] = RAW("I16", 2, QTK_ELEM_I16),
    [26] = RAW("I32", 4, QTK_ELEM_I32),
    [27] = RAW("I64", 8, QTK_ELEM_I64),
    [28] = RAW("F64", 8, QTK_ELEM_F64),
    [29] = NATIVE("IQ1_M", 256, 56, "iq1_m", GGUF_D_IQ1M, -1),
    [30] = RAW("BF16", 2, QTK_ELEM_BF16),
    [31] = REMOVED,
    [32] = REMOVED,
    [33] = REMOVED,
    [34] = EXACT("TQ1_0", 256, 54, "q2s,block=128:f16"),
    [35] = EXACT("TQ2_0", 256, 66, "q2s,block=128:f16"),
    [36] = REMOVED,
    [37] = REMOVED,
    [38] = REMOVED,
    [39] = EXACT("MXFP4", 32, 17, "mxfp4"),
    [40] = EXACT("NVFP4", 64, 36, "e2m1,block=16:ue4m3,store=packed:0"),
    [41] = EXACT("Q1_0", 128, 18, "q2s,block=128:f16"),
    [42] = EXACT("Q2_0", 64, 18, "q2s,block=64:f16"),
};

const gguf_type *qtk__gguf_type(uint32_t id) { return id < QTK__GGUF_TYPE_COUNT ? &types[id] : NULL; }

const char *qtk__gguf_type_name(uint32_t id) { return id < QTK__GGUF_TYPE_COUNT ? types[id].name : NULL; }

int qtk__gguf_type_id(const char *name) {
    for (int i = 0; name && i < QTK__GGUF_TYPE_COUNT; i++)
        if (types[i].name && strcasecmp(types[i].name, name) == 0) return i;
    return -1;
}

float qtk__gguf_f16(uint16_t h) { return qtk_fmt_decode(QTK_DTYPE_F16, h); }
