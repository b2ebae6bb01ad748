/* arena.h — a bump allocator for the many small strings and shapes of a checkpoint's
 * description: everything is freed at once with the description, so no string has its
 * own owner to track. */
#ifndef QTK_ARENA_H
#define QTK_ARENA_H

#include <stddef.h>

typedef struct qtk_arena_chunk qtk_arena_chunk;

typedef struct qtk_arena {
    qtk_arena_chunk *head;
} qtk_arena;

/* n bytes aligned for any scalar type, or NULL when out of memory. */
void *qtk_arena_alloc(qtk_arena *a, size_t n);
/* A NUL-terminated copy of s[0..n), or NULL when out of memory. */
char *qtk_arena_strndup(qtk_arena *a, const char *s, size_t n);
char *qtk_arena_strdup(qtk_arena *a, const char *s);
void qtk_arena_free(qtk_arena *a);

#endif
