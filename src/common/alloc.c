/* alloc.c — the library's allocator (replaceable with qtk_set_allocator). */
#include "internal.h"

#include <stdlib.h>

static void *default_alloc(void *opaque, size_t n) {
    (void)opaque;
    return malloc(n);
}
static void default_free(void *opaque, void *p) {
    (void)opaque;
    free(p);
}

static qtk_allocator current = {default_alloc, default_free, NULL};

void qtk_set_allocator(const qtk_allocator *a) {
    if (a && a->alloc && a->free)
        current = *a;
    else
        current = (qtk_allocator){default_alloc, default_free, NULL};
}

void *qtk__malloc(size_t n) { return current.alloc(current.opaque, n ? n : 1); }

void *qtk__calloc(size_t count, size_t size) {
    size_t n;
    if (!qtk__mul_ok(count, size, &n)) return NULL;
    void *p = qtk__malloc(n);
    if (p) memset(p, 0, n);
    return p;
}

void qtk__free(void *p) {
    if (p) current.free(current.opaque, p);
}
