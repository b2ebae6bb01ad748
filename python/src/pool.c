/* pool.c — the allocator the extension's libqtk allocates with (qtk_set_allocator; the
 * static libqtk linked into the module is its own, so nothing else in the process is
 * affected).
 *
 * Why: qtk.quantize returns a new tensor, so each call writes its bytes into memory the
 * library has just allocated. Fresh pages cost a fault each on first touch (on this VM about
 * 2.5 us per 4 KiB page, 30-40 % of a 64M-element quantize), which the CLI's benchmark, writing
 * into one buffer, never pays. Blocks of 1 MiB and more are therefore mapped with transparent
 * huge pages where the kernel allows (madvise), and when freed are kept for the next request
 * of a similar size (at least half the block), up to a limit -- 256 MiB by default,
 * qtk.set_buffer_cache() to change it, 0 to keep nothing. Smaller blocks go to malloc. */
#include "qtkpy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HDR 64                         /* keeps 64-byte alignment of mapped blocks */
#define BIG ((size_t)1 << 20)          /* from here on: mapped, and pooled when freed */
#define HUGE_PAGE ((size_t)2 << 20)
#define SLOTS 8

typedef struct {
    size_t cap; /* bytes mapped (header included); 0: a malloc'd block */
    size_t pad[HDR / sizeof(size_t) - 1];
} hdr;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *base;
    size_t cap;
} slot[SLOTS];
static int used;
static size_t held, limit = (size_t)256 << 20;

static void *pool_alloc(void *opaque, size_t n) {
    (void)opaque;
    if (n > SIZE_MAX - HDR - HUGE_PAGE) return NULL;
    size_t need = n + HDR;
    if (need < BIG) {
        hdr *h = malloc(need);
        if (!h) return NULL;
        h->cap = 0;
        return (char *)h + HDR;
    }
    void *base = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&mu);
    int best = -1;
    for (int i = 0; i < used; i++) /* the smallest block that fits and is not twice too big */
        if (slot[i].cap >= need && slot[i].cap / 2 <= need && (best < 0 || slot[i].cap < slot[best].cap)) best = i;
    if (best >= 0) {
        base = slot[best].base;
        cap = slot[best].cap;
        held -= cap;
        slot[best] = slot[--used];
    }
    pthread_mutex_unlock(&mu);
    if (!base) {
        cap = (need + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        base = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(base, cap, MADV_HUGEPAGE); /* a hint: fewer faults where THP is on */
#endif
    }
    ((hdr *)base)->cap = cap;
    return (char *)base + HDR;
}

/* Unmaps pooled blocks until `held + extra <= max` and a slot is free (mu held). */
static void evict_locked(size_t extra, size_t max) {
    while (used && (held + extra > max || used == SLOTS)) {
        int old = 0; /* the largest goes first: it is the likeliest to be over the limit */
        for (int i = 1; i < used; i++)
            if (slot[i].cap > slot[old].cap) old = i;
        munmap(slot[old].base, slot[old].cap);
        held -= slot[old].cap;
        slot[old] = slot[--used];
    }
}

static void pool_free(void *opaque, void *p) {
    (void)opaque;
    if (!p) return;
    hdr *h = (hdr *)((char *)p - HDR);
    size_t cap = h->cap;
    if (!cap) {
        free(h);
        return;
    }
    pthread_mutex_lock(&mu);
    if (cap <= limit) {
        evict_locked(cap, limit);
        slot[used].base = h;
        slot[used].cap = cap;
        used++;
        held += cap;
        h = NULL;
    }
    pthread_mutex_unlock(&mu);
    if (h) munmap(h, cap);
}

static const qtk_allocator pool = {pool_alloc, pool_free, NULL};

void qtkpy_pool_install(void) { qtk_set_allocator(&pool); }

size_t qtkpy_pool_set_limit(size_t max) {
    pthread_mutex_lock(&mu);
    size_t prev = limit;
    limit = max;
    evict_locked(0, max);
    pthread_mutex_unlock(&mu);
    return prev;
}

void qtkpy_pool_stats(size_t *blocks, size_t *bytes, size_t *max) {
    pthread_mutex_lock(&mu);
    *blocks = (size_t)used;
    *bytes = held;
    *max = limit;
    pthread_mutex_unlock(&mu);
}
