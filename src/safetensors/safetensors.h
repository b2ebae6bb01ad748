/* safetensors.h — the safetensors container and qtk's convention for quantized tensors in it
 * (docs/safetensors-quantized.md). What the rest of the checkpoint layer sees of it. */
#ifndef QTK_SAFETENSORS_H
#define QTK_SAFETENSORS_H

#include "io/ckpt_internal.h"

extern const qtk__ckpt_ops qtk__safetensors_ops;

#endif
