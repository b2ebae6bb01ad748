/* mixture.h — llama.cpp's file types (Q4_K_M, ...): a ggml type for each tensor of a model,
 * chosen by llama-quantize's rules (docs/gguf.md, "Mixture presets", says each rule and where
 * in llama.cpp's src/llama-quant.cpp it comes from).
 *
 * A mixture is planned once over a checkpoint's whole description (the rules count tensors:
 * which attention-v tensor this is, how many layers the model has, whether the output tensor
 * exists) and then answers per tensor. Tensor names are GGUF's (blk.N.attn_v.weight) or
 * Hugging Face's (model.layers.N.self_attn.v_proj.weight). */
#ifndef QTK_MIXTURE_H
#define QTK_MIXTURE_H

#include "io/checkpoint.h"

typedef enum {
    QTK__MIX_Q3_K_M = 0,
    QTK__MIX_Q4_K_S,
    QTK__MIX_Q4_K_M,
    QTK__MIX_Q5_K_S,
    QTK__MIX_Q5_K_M,
    QTK__MIX_Q6_K,
    QTK__MIX_Q8_0,
    QTK__MIX_COUNT
} qtk__mix_ftype;

/* The ggml types a mixture may choose (lower case: they are qtk presets too). */
typedef enum {
    QTK__MT_KEEP = 0, /* not quantized by llama-quantize: as it is */
    QTK__MT_Q3_K,
    QTK__MT_Q4_K,
    QTK__MT_Q5_K,
    QTK__MT_Q6_K,
    QTK__MT_Q8_0,
    QTK__MT_Q4_0,
    QTK__MT_Q5_0,
    QTK__MT_Q5_1,
    QTK__MT_F16 /* no block fits the rows: llama.cpp writes F16; qtk keeps the source's floats */
} qtk__mix_type;

typedef struct qtk__mix_choice {
    qtk__mix_type type;
    char why[96];
} qtk__mix_choice;

typedef struct qtk__mixture {
    qtk__mix_ftype ftype;
    /* what the rules read off the model */
    int n_layer, n_attn_v, n_expert;
    bool tied, falcon, llama_70b;
    qtk__mix_choice *choice; /* per tensor of the description */
    size_t n;
} qtk__mixture;

/* "q4_k_m" (any case) -> its ftype; QTK_E_PARSE naming the known ones otherwise. */
qtk_status qtk__mixture_find(const char *name, qtk__mix_ftype *out);
const char *qtk__mixture_name(qtk__mix_ftype f);
/* The choices for every tensor of d. QTK_E_FORMAT when llama.cpp itself would refuse (a
 * Q8_0 tensor whose rows no 32 block fits: it has no fallback), naming the tensor. */
qtk_status qtk__mixture_plan(qtk__mixture *m, qtk__mix_ftype f, const qtk__desc *d);
void qtk__mixture_free(qtk__mixture *m);
/* The qtk preset of a type ("q6_k"), NULL for KEEP and F16. */
const char *qtk__mix_type_preset(qtk__mix_type t);

#endif
