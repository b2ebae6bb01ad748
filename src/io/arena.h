/* arena.h — a bump allocator for the many small strings and shapes of a checkpoint's
 * description: everything is freed at once with the description, so no string has its
 * own owner to track. */
#ifndef QTK_ARENA_H
#define QTK_ARENA_H

#include <stddef.h>

typedef struct qtk__arena_chunk qtk__arena_chunk;

typedef struct qtk__arena {
    qtk__arena_chunk *head;
} qtk__arena;

/* n bytes aligned for any scalar type, or NULL when out of memory. */
void *qtk__arena_alloc(qtk__arena *a, size_t n);
/* A NUL-terminated copy of s[0..n), or NULL when out of memory. */
char *qtk__arena_strndup(qtk__arena *a, const char *s, size_t n);
char *qtk__arena_strdup(qtk__arena *a, const char *s);
void qtk__arena_free(qtk__arena *a);

#endif
