/* mapfile.h — a read-only memory map of a whole input file.
 *
 * Checkpoint readers work on a map rather than reading the file: tensors are handed out as
 * pointers into it, so a conversion touches one tensor's pages at a time, and
 * qtk__map_release() gives those pages back once the tensor is done. That is what keeps the
 * resident memory of a conversion near one tensor instead of the whole model. */
#ifndef QTK_MAPFILE_H
#define QTK_MAPFILE_H

#include "qtk.h"

#include <stdbool.h>

typedef struct qtk__mapfile {
    const uint8_t *data; /* NULL for an empty file */
    size_t len;
    bool mapped;         /* false: data is a borrowed caller buffer (qtk__map_borrow) */
    int slot;            /* its place among the maps the SIGBUS handler knows (+1), or 0 */
    uint64_t dev, ino;   /* the file mapped, to tell it shrank from it being replaced */
} qtk__mapfile;

/* Maps a regular file read-only. Errors name the path and the system's reason. */
qtk_status qtk__map_open(const char *path, qtk__mapfile *m);
/* Wraps caller memory (kept by the caller until qtk__map_close) so the same readers parse
 * in-memory files; used by tests. */
void qtk__map_borrow(qtk__mapfile *m, const void *data, size_t len);
/* Drops the resident pages of [off, off + len) from this process (the page cache keeps
 * them); a later access faults them back in. A no-op for borrowed memory. */
void qtk__map_release(qtk__mapfile *m, size_t off, size_t len);
void qtk__map_close(qtk__mapfile *m);

/* A read of the map faulted (the file shrank while mapped; the lost pages read as zeros):
 * true. qtk__map_check gives the error naming path for that, and also when path is still
 * the file mapped and is now shorter than the map (a read from a lost page by the kernel,
 * write(2) from the map, fails with EFAULT instead of faulting); QTK_OK otherwise. */
bool qtk__map_faulted(const qtk__mapfile *m);
qtk_status qtk__map_check(const qtk__mapfile *m, const char *path);

#endif
