/* imatrix.h — an importance matrix's entry as the weights of one tensor's quantization. */
#ifndef QTK_OPS_IMATRIX_H
#define QTK_OPS_IMATRIX_H

#include "qtk_ckpt.h"

/* The weights of the tensor called name, of that shape, as qtk_quantize_options.weights
 * takes them: one per column (*n = shape[rank - 1]), or one per expert and column for a
 * merged-expert tensor (rank >= 3, *n = shape[0] x shape[rank - 1]). QTK_E_NOTFOUND: no entry
 * (the message names the tensor); QTK_E_SHAPE: the entry does not fit the shape. */
qtk_status qtk__imatrix_weights(const qtk_imatrix *m, const char *name, const size_t *shape, int rank, const float **w,
                                size_t *n);

#endif
