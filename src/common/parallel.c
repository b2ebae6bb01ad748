/* parallel.c — fork-join over pthreads (see parallel.h). */
#include "parallel.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

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

/* Starts run(arg[t]) on threads 1..threads-1 (termination signals blocked in them), runs
 * arg[0] here, joins; a thread that cannot start has its share run here. */
static void fork_join(int threads, void *(*run)(void *), void *args, size_t arg_size) {
    pthread_t tids[QTK_MAX_THREADS];
    bool started[QTK_MAX_THREADS];
    char *a = args;
    /* Workers start with the termination signals blocked (they inherit the mask), so a
     * handler for them runs in the caller's thread, never beside it in a worker. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, run, a + (size_t)t * arg_size) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    run(a);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else run(a + (size_t)t * arg_size); /* could not start a thread: do its share here */
    }
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
    for (int t = 0; t < threads; t++)
        jobs[t] = (job){fn, ctx, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, t};
    fork_join(threads, run_job, jobs, sizeof jobs[0]);
}

/* ---- dynamic: chunks claimed from a shared counter ---- */

typedef struct {
    qtk__range_fn fn;
    void *ctx;
    size_t n, grain;
    atomic_size_t next; /* the first item not yet claimed */
} dyn_shared;

typedef struct {
    dyn_shared *sh;
    int worker;
} dyn_job;

static void *run_dyn(void *arg) {
    dyn_job *j = arg;
    dyn_shared *sh = j->sh;
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&sh->next, sh->grain, memory_order_relaxed);
        if (b >= sh->n) break;
        size_t e = sh->n - b < sh->grain ? sh->n : b + sh->grain;
        sh->fn(sh->ctx, b, e, j->worker);
    }
    return NULL;
}

void qtk__parallel_for_dynamic(int threads, size_t n, size_t grain, qtk__range_fn fn, void *ctx) {
    if (n == 0) return;
    if (grain == 0) grain = 1;
    size_t chunks = (n + grain - 1) / grain;
    if (threads > QTK_MAX_THREADS) threads = QTK_MAX_THREADS;
    if ((size_t)threads > chunks) threads = (int)chunks;
    if (threads <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    dyn_shared sh = {fn, ctx, n, grain, 0};
    atomic_init(&sh.next, 0);
    dyn_job jobs[QTK_MAX_THREADS];
    for (int t = 0; t < threads; t++) jobs[t] = (dyn_job){&sh, t};
    fork_join(threads, run_dyn, jobs, sizeof jobs[0]);
}

void qtk_parallel_for(int threads, size_t n, qtk_range_fn fn, void *ctx) {
    if (!fn) return;
    qtk__parallel_for(threads > 0 ? threads : qtk_get_threads(), n, fn, ctx);
}
