/* fileio.h — whole-file reads and all-or-nothing writes. */
#ifndef QTK_FILEIO_H
#define QTK_FILEIO_H

#include "qtk.h"

#include <stdio.h>

/* Reads a whole file into a new buffer (free with qtk_io_free). */
qtk_status qtk_io_read_file(const char *path, uint8_t **data, size_t *len);
void qtk_io_free(void *p);

/* An output file that appears only when committed: data goes to a temporary file in the
 * target's directory, renamed over the target on commit, deleted on abort. */
typedef struct qtk_afile {
    FILE *f;
    char *path;
    char *tmp;
    size_t written;
    qtk_status err; /* first write error, reported by commit */
} qtk_afile;

/* force = 0 refuses to replace an existing file. */
qtk_status qtk_afile_open(qtk_afile *a, const char *path, int force);
qtk_status qtk_afile_write(qtk_afile *a, const void *data, size_t n);
/* Writes n bytes at absolute offset off (any order; the file grows as needed). The write
 * position afterwards is unspecified: mix with qtk_afile_write only before the first call. */
qtk_status qtk_afile_write_at(qtk_afile *a, size_t off, const void *data, size_t n);
/* Writes n zero bytes. */
qtk_status qtk_afile_zeros(qtk_afile *a, size_t n);
qtk_status qtk_afile_commit(qtk_afile *a);
void qtk_afile_abort(qtk_afile *a);

/* Writes a whole buffer atomically. */
qtk_status qtk_io_write_file(const char *path, const void *data, size_t len, int force);

#endif
