/* util.h — the checkpoint layer's small helpers, one set for every room above io/: strings,
 * paths and growing arrays. Allocations are malloc'ed; NULL / false means out of memory. */
#ifndef QTK_IO_UTIL_H
#define QTK_IO_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* true if s[0..n) is valid UTF-8 without NUL bytes. */
bool qtk__utf8_ok(const char *s, size_t n);
/* A copy of s (NULL for NULL). */
char *qtk__strdup(const char *s);
/* dir + "/" + name. */
char *qtk__path_join(const char *dir, const char *name);
/* The directory part of path: "." when it has none, "/" for a file in the root. */
char *qtk__path_dir(const char *path);
/* true if name ends with suffix and has something before it ("x.json", not ".json"). */
bool qtk__has_suffix(const char *name, const char *suffix);

/* Makes room for element n of *arr (capacity *cap elements of elem bytes), doubling. */
bool qtk__grow(void **arr, size_t *cap, size_t n, size_t elem);

/* Whether a POSIX extended regex is safe to give glibc's regcomp, which expands repetitions by
 * copying subtrees: "a++++..." doubles per '+', "((a{255}){255}){255}" is 16 M nodes, and
 * either takes gigabytes. Refuses adjacent repetition operators (undefined in POSIX ERE), an
 * estimated expansion above 4096 nodes, and patterns over 1024 bytes; false with the reason
 * in why. For the regexes users and checkpoint configs give (rules, only/skip, a
 * compressed-tensors config's "re:" targets). */
bool qtk__regex_safe(const char *pattern, char *why, size_t cap);

#endif
