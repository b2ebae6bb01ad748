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

/* The same with the work claimed in chunks of `grain` items (the last one shorter) from a
 * shared counter, each chunk a call of fn with the claiming thread's index: a thread slowed
 * by other work on its core (a shared machine, a small core) takes fewer chunks instead of
 * holding the others up. Which thread runs an item varies from call to call, so fn must make
 * each item's result independent of it (worker only picks scratch). */
QTK_INTERNAL void qtk__parallel_for_dynamic(int threads, size_t n, size_t grain, qtk__range_fn fn, void *ctx);

#endif
