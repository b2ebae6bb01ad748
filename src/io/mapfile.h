/* mapfile.h — a read-only memory map of a whole input file.
 *
 * Checkpoint readers work on a map rather than reading the file: tensors are handed out as
 * pointers into it, so a conversion touches one tensor's pages at a time, and
 * qtk_map_release() gives those pages back once the tensor is done. That is what keeps the
 * resident memory of a conversion near one tensor instead of the whole model. */
#ifndef QTK_MAPFILE_H
#define QTK_MAPFILE_H

#include "qtk.h"

#include <stdbool.h>

typedef struct qtk_mapfile {
    const uint8_t *data; /* NULL for an empty file */
    size_t len;
    bool mapped;         /* false: data is a borrowed caller buffer (qtk_map_borrow) */
} qtk_mapfile;

/* Maps a regular file read-only. Errors name the path and the system's reason. */
qtk_status qtk_map_open(const char *path, qtk_mapfile *m);
/* Wraps caller memory (kept by the caller until qtk_map_close) so the same readers parse
 * in-memory files; used by tests. */
void qtk_map_borrow(qtk_mapfile *m, const void *data, size_t len);
/* Drops the resident pages of [off, off + len) from this process (the page cache keeps
 * them); a later access faults them back in. A no-op for borrowed memory. */
void qtk_map_release(qtk_mapfile *m, size_t off, size_t len);
void qtk_map_close(qtk_mapfile *m);

#endif
