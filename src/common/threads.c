/* threads.c — the library-wide default thread count. */
#include "internal.h"

#include <stdatomic.h>
#include <unistd.h>

static atomic_int default_threads;

void qtk_set_threads(int n) { atomic_store(&default_threads, n < 0 ? 0 : n); }

int qtk_get_threads(void) {
    int n = atomic_load(&default_threads);
    if (n > 0) return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

int qtk__threads_for(int requested, size_t work) {
    int n = requested > 0 ? requested : qtk_get_threads();
    /* below ~64K elements a thread costs more than it saves */
    size_t cap = work / 65536 + 1;
    if ((size_t)n > cap) n = (int)cap;
    return n < 1 ? 1 : n;
}
