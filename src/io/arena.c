/* arena.c — a bump allocator (see arena.h). */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct qtk__arena_chunk {
    qtk__arena_chunk *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

#define ARENA_CHUNK 65536u

void *qtk__arena_alloc(qtk__arena *a, size_t n) {
    const size_t al = alignof(max_align_t);
    if (n > SIZE_MAX - al) return NULL;
    n = (n + al - 1) / al * al;
    qtk__arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        /* A chunk made for one large request goes behind the head so the head keeps
         * serving small requests. */
        if (a->head && cap > ARENA_CHUNK) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *qtk__arena_strndup(qtk__arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *d = qtk__arena_alloc(a, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *qtk__arena_strdup(qtk__arena *a, const char *s) { return qtk__arena_strndup(a, s, strlen(s)); }

void qtk__arena_free(qtk__arena *a) {
    qtk__arena_chunk *c = a->head;
    while (c) {
        qtk__arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}
