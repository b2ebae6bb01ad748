/* burnpack.h — Burn's burnpack (.bpk) container (../shared/formats/BURNPACK.md): CBOR metadata,
 * then aligned tensor data. What the rest of the checkpoint layer sees of it. */
#ifndef QTK_BURNPACK_H
#define QTK_BURNPACK_H

#include "io/ckpt_internal.h"

extern const qtk__ckpt_ops qtk__burnpack_ops;

#endif
