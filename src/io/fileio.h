/* fileio.h — whole-file reads and all-or-nothing writes. */
#ifndef QTK_FILEIO_H
#define QTK_FILEIO_H

#include "qtk_ckpt.h"

#include <signal.h>
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
    bool finished;  /* flushed, synced and closed; tmp still there (qtk__afile_finish) */
    int force;
    const volatile sig_atomic_t *cancel; /* optional: checked before the rename */
} qtk__afile;

/* force = 0 refuses to replace an existing file. */
qtk_status qtk__afile_open(qtk__afile *a, const char *path, int force);
qtk_status qtk__afile_write(qtk__afile *a, const void *data, size_t n);
/* Writes n bytes at absolute offset off (any order; the file grows as needed). The write
 * position afterwards is unspecified: mix with qtk__afile_write only before the first call. */
qtk_status qtk__afile_write_at(qtk__afile *a, size_t off, const void *data, size_t n);
/* Writes n zero bytes. */
qtk_status qtk__afile_zeros(qtk__afile *a, size_t n);
/* Flushes, syncs and closes the temporary file without renaming it (it stays a temporary:
 * abort removes it). Commit finishes first when this was not called. */
qtk_status qtk__afile_finish(qtk__afile *a);
/* Moves the file into place (a->cancel set: QTK_E_CANCELLED instead, when it is). */
qtk_status qtk__afile_commit(qtk__afile *a);
void qtk__afile_abort(qtk__afile *a);

/* Moves n files into place together: all of them, or (an error, a cancel) none, each old
 * target then as it was. Files not finished yet are finished first. Refuses targets that are
 * directories. The renames run with SIGINT/SIGTERM/SIGHUP/SIGQUIT held, so a signal handler
 * calling qtk_remove_temporaries sees the files before or after, never half of them. Every
 * afile is reset (committed or aborted) on return. */
qtk_status qtk__commit_files(qtk__afile *files, size_t n, const volatile sig_atomic_t *cancel);

/* A directory built at tmpdir (its files committed inside it) takes the place of target:
 * renamed there when target does not exist; else atomically exchanged with it (renameat2),
 * after the old directory's other files — everything but keep_out() names — are carried over
 * (hard links; subdirectories moved), and the old checkpoint is then removed. tmpdir must be
 * tracked (qtk__temp_dir_track); it is untracked once gone. */
qtk_status qtk__dir_replace(const char *tmpdir, const char *target, bool (*keep_out)(const char *name),
                            const volatile sig_atomic_t *cancel);

/* Holds (blocks) SIGINT, SIGTERM, SIGHUP and SIGQUIT in the calling thread; release restores
 * the mask it had. */
void qtk__signals_hold(sigset_t *old);
void qtk__signals_release(const sigset_t *old);

/* Tracks a path for qtk_remove_temporaries (a file committed inside a temporary directory),
 * and stops (untrack matches the same pointer). */
void qtk__temp_file_track(char *path);
void qtk__temp_file_untrack(char *path);

/* qtk_file_write_atomic (qtk_ckpt.h) writes a whole buffer this way. */

/* A temporary directory (the Hub writer's) for qtk_remove_temporaries to remove after its
 * files; untracked before it is renamed or removed. dir must outlive the tracking. */
void qtk__temp_dir_track(char *dir);
void qtk__temp_dir_untrack(char *dir);

#endif
