/* parallel.c — fork-join over pthreads (see parallel.h). */
#include "parallel.h"

#include <pthread.h>
#include <signal.h>

#define QTK_MAX_THREADS 256

typedef struct {
    qtk__range_fn fn;
    void *ctx;
    size_t begin, end;
    int worker;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->fn(j->ctx, j->begin, j->end, j->worker);
    return NULL;
}

void qtk__parallel_for(int threads, size_t n, qtk__range_fn fn, void *ctx) {
    if (n == 0) return;
    if (threads > QTK_MAX_THREADS) threads = QTK_MAX_THREADS;
    if ((size_t)threads > n) threads = (int)n;
    if (threads <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    job jobs[QTK_MAX_THREADS];
    pthread_t tids[QTK_MAX_THREADS];
    bool started[QTK_MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){fn, ctx, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, t};
        started[t] = false;
    }
    /* Workers start with the termination signals blocked (they inherit the mask), so a
     * handler for them runs in the caller's thread, never beside it in a worker. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, run_job, &jobs[t]) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    run_job(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else run_job(&jobs[t]); /* could not start a thread: do its share here */
    }
}

void qtk_parallel_for(int threads, size_t n, qtk_range_fn fn, void *ctx) {
    if (!fn) return;
    qtk__parallel_for(threads > 0 ? threads : qtk_get_threads(), n, fn, ctx);
}
