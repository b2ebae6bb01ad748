/* fileio.h — whole-file reads and all-or-nothing writes. */
#ifndef QTK_FILEIO_H
#define QTK_FILEIO_H

#include "qtk_ckpt.h"

#include <stdio.h>

/* Reads a whole file into a new buffer (free with qtk__io_free). */
qtk_status qtk__io_read_file(const char *path, uint8_t **data, size_t *len);
void qtk__io_free(void *p);

/* An output file that appears only when committed: data goes to a temporary file in the
 * target's directory, renamed over the target on commit, deleted on abort. */
typedef struct qtk__afile {
    FILE *f;
    char *path;
    char *tmp;
    size_t written;
    qtk_status err; /* first write error, reported by commit */
} qtk__afile;

/* force = 0 refuses to replace an existing file. */
qtk_status qtk__afile_open(qtk__afile *a, const char *path, int force);
qtk_status qtk__afile_write(qtk__afile *a, const void *data, size_t n);
/* Writes n bytes at absolute offset off (any order; the file grows as needed). The write
 * position afterwards is unspecified: mix with qtk__afile_write only before the first call. */
qtk_status qtk__afile_write_at(qtk__afile *a, size_t off, const void *data, size_t n);
/* Writes n zero bytes. */
qtk_status qtk__afile_zeros(qtk__afile *a, size_t n);
qtk_status qtk__afile_commit(qtk__afile *a);
void qtk__afile_abort(qtk__afile *a);

/* qtk_file_write_atomic (qtk_ckpt.h) writes a whole buffer this way. */

/* A temporary directory (the Hub writer's) for qtk_remove_temporaries to remove after its
 * files; untracked before it is renamed or removed. dir must outlive the tracking. */
void qtk__temp_dir_track(char *dir);
void qtk__temp_dir_untrack(char *dir);

#endif
