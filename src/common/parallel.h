/* parallel.h — a minimal fork-join helper over pthreads.
 *
 * qtk__parallel_for splits [0, n) into `threads` contiguous ranges of near-equal size and
 * runs fn on each, the calling thread taking the first. It returns when all are done. The
 * split depends only on n and threads, so a caller that makes each item's work independent
 * of which thread runs it gets bit-identical results for every thread count. */
#ifndef QTK_PARALLEL_H
#define QTK_PARALLEL_H

#include "internal.h"

typedef qtk_range_fn qtk__range_fn;

/* Runs fn over [0, n) on up to `threads` threads (1 = inline). Falls back to fewer threads
 * (down to running inline) if threads cannot be created; never fails. */
QTK_INTERNAL void qtk__parallel_for(int threads, size_t n, qtk__range_fn fn, void *ctx);

#endif
