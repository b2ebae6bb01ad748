/* fileio.c — whole-file reads and all-or-nothing writes: one file (a temporary renamed over
 * the target), several files together (renames with the old targets kept as hard links until
 * all are in place), and a directory that replaces another (an atomic exchange). */
#define _GNU_SOURCE /* renameat2 and RENAME_EXCHANGE */
#include "fileio.h"
#include "util.h"

#include "common/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- temporary outputs, for qtk_remove_temporaries ----
 * Lock-free slots a signal handler can read: a path is published when its file is created
 * and withdrawn before it is renamed or removed. Beyond the slots, files are not tracked. */
#define MAX_TEMPS 1024
static _Atomic(char *) temp_files[MAX_TEMPS];
static _Atomic(char *) temp_dirs[64];

static void track(_Atomic(char *) *slots, size_t n, char *p) {
    for (size_t i = 0; i < n; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong(&slots[i], &none, p)) return;
    }
}

static void untrack(_Atomic(char *) *slots, size_t n, char *p) {
    for (size_t i = 0; p && i < n; i++) {
        char *was = p;
        if (atomic_compare_exchange_strong(&slots[i], &was, NULL)) return;
    }
}

void qtk__temp_dir_track(char *dir) { track(temp_dirs, sizeof temp_dirs / sizeof temp_dirs[0], dir); }
void qtk__temp_file_track(char *path) { track(temp_files, MAX_TEMPS, path); }
void qtk__temp_file_untrack(char *path) { untrack(temp_files, MAX_TEMPS, path); }
void qtk__temp_dir_untrack(char *dir) { untrack(temp_dirs, sizeof temp_dirs / sizeof temp_dirs[0], dir); }

void qtk_remove_temporaries(void) {
    for (size_t i = 0; i < MAX_TEMPS; i++) {
        char *p = atomic_load(&temp_files[i]);
        if (p) unlink(p);
    }
    for (size_t i = 0; i < sizeof temp_dirs / sizeof temp_dirs[0]; i++) {
        char *p = atomic_load(&temp_dirs[i]);
        if (p) rmdir(p); /* its files were tracked, and are gone */
    }
}

void qtk__io_free(void *p) { free(p); }

qtk_status qtk__io_read_file(const char *path, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return qtk__err(QTK_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return qtk__err(QTK_E_IO, "'%s' is not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return qtk__err(QTK_E_NOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        int e = errno;
        fclose(f);
        free(buf);
        return qtk__err(QTK_E_IO, "cannot read '%s': %s", path, e ? strerror(e) : "short read");
    }
    fclose(f);
    *data = buf;
    *len = n;
    return QTK_OK;
}

qtk_status qtk__afile_open(qtk__afile *a, const char *path, int force) {
    memset(a, 0, sizeof *a);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return qtk__err(QTK_E_IO, "'%s' is a directory; a file cannot replace it (give another name)", path);
        if (!force) return qtk__err(QTK_E_IO, "'%s' exists; it is replaced only with force (--force)", path);
    }
    size_t n = strlen(path);
    a->path = qtk__strdup(path);
    a->tmp = malloc(n + 16);
    if (!a->path || !a->tmp) {
        qtk__afile_abort(a);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".qtk-tmp-XXXXXX", 16);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        free(a->tmp);
        a->tmp = NULL;
        qtk__afile_abort(a);
        return qtk__err(QTK_E_IO, "cannot create a file beside '%s': %s", path, strerror(e));
    }
    track(temp_files, MAX_TEMPS, a->tmp);
    a->force = force;
    fchmod(fd, 0644);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        qtk__afile_abort(a);
        return qtk__err(QTK_E_IO, "cannot open a temporary file for '%s'", path);
    }
    return QTK_OK;
}

qtk_status qtk__afile_write(qtk__afile *a, const void *data, size_t n) {
    if (a->err) return a->err;
    if (n && fwrite(data, 1, n, a->f) != n) {
        a->err = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
        return a->err;
    }
    a->written += n;
    return QTK_OK;
}

qtk_status qtk__afile_write_at(qtk__afile *a, size_t off, const void *data, size_t n) {
    if (a->err) return a->err;
    if (off > (size_t)INT64_MAX || fseeko(a->f, (off_t)off, SEEK_SET) != 0) {
        a->err = qtk__err(QTK_E_IO, "cannot seek in '%s' to byte %zu: %s", a->path, off, strerror(errno));
        return a->err;
    }
    return qtk__afile_write(a, data, n);
}

qtk_status qtk__afile_zeros(qtk__afile *a, size_t n) {
    static const uint8_t z[4096];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        qtk_status st = qtk__afile_write(a, z, k);
        if (st) return st;
        n -= k;
    }
    return QTK_OK;
}

qtk_status qtk__afile_finish(qtk__afile *a) {
    if (a->finished) return QTK_OK;
    qtk_status st = a->err;
    if (!st && fflush(a->f) != 0) st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    if (!st && fsync(fileno(a->f)) != 0 && errno != EINVAL)
        st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    if (fclose(a->f) != 0 && !st) st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    a->f = NULL;
    a->finished = true;
    if (!st) a->err = QTK_OK;
    return st;
}

static qtk_status cancelled(const char *path) {
    return qtk__err(QTK_E_CANCELLED, "writing '%s' was cancelled; nothing was written", path);
}

void qtk__signals_hold(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigaddset(&s, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

void qtk__signals_release(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

qtk_status qtk__afile_commit(qtk__afile *a) {
    qtk_status st = qtk__afile_finish(a);
    if (!st && a->cancel && *a->cancel) st = cancelled(a->path);
    if (st) {
        qtk__afile_abort(a);
        return st;
    }
    sigset_t old;
    qtk__signals_hold(&old);
    /* from here the file is either renamed or removed; no handler runs in between */
    untrack(temp_files, MAX_TEMPS, a->tmp);
    if (rename(a->tmp, a->path) != 0)
        st = qtk__err(QTK_E_IO, "cannot rename the output into '%s': %s", a->path, strerror(errno));
    qtk__signals_release(&old);
    if (st) {
        qtk__afile_abort(a);
        return st;
    }
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
    return QTK_OK;
}

void qtk__afile_abort(qtk__afile *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    untrack(temp_files, MAX_TEMPS, a->tmp);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

qtk_status qtk_file_write_atomic(const char *path, const void *data, size_t len, int force) {
    if (!path || (!data && len)) return qtk__err(QTK_E_ARG, "qtk_file_write_atomic: NULL argument");
    qtk__afile a;
    qtk_status st = qtk__afile_open(&a, path, force);
    if (st) return st;
    st = qtk__afile_write(&a, data, len);
    if (st) {
        qtk__afile_abort(&a);
        return st;
    }
    return qtk__afile_commit(&a);
}

/* ---- several files at once ---- */

static char *backup_name(const char *path) {
    static atomic_ulong counter;
    size_t n = strlen(path);
    char *b = malloc(n + 48);
    if (b) snprintf(b, n + 48, "%s.qtk-old-%ld-%lu", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    return b;
}

qtk_status qtk__commit_files(qtk__afile *files, size_t n, const volatile sig_atomic_t *cancel) {
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < n && !st; i++) st = qtk__afile_finish(&files[i]);
    for (size_t i = 0; i < n && !st; i++) {
        struct stat sb;
        if (stat(files[i].path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) st = qtk__err(QTK_E_IO, "'%s' is a directory; a file cannot replace it", files[i].path);
        else if (!files[i].force) st = qtk__err(QTK_E_IO, "'%s' exists; it is replaced only with force (--force)", files[i].path);
    }
    if (!st && cancel && *cancel) st = cancelled(n ? files[0].path : "the output");
    char **backup = calloc(n ? n : 1, sizeof *backup);
    bool *moved = calloc(n ? n : 1, sizeof *moved);
    if (!st && (!backup || !moved)) st = qtk__err(QTK_E_NOMEM, "out of memory");
    sigset_t old;
    qtk__signals_hold(&old);
    /* the old targets stay reachable as hard links (or, where links fail, by a rename) */
    for (size_t i = 0; i < n && !st; i++) {
        if (access(files[i].path, F_OK) != 0) continue;
        if (!(backup[i] = backup_name(files[i].path))) {
            st = qtk__err(QTK_E_NOMEM, "out of memory");
            break;
        }
        if (link(files[i].path, backup[i]) != 0 && rename(files[i].path, backup[i]) != 0)
            st = qtk__err(QTK_E_IO, "cannot keep the old '%s' aside while replacing it: %s", files[i].path, strerror(errno));
        if (st) {
            free(backup[i]);
            backup[i] = NULL;
        }
    }
    for (size_t i = 0; i < n && !st; i++) {
        if (rename(files[i].tmp, files[i].path) != 0)
            st = qtk__err(QTK_E_IO, "cannot rename the output into '%s': %s", files[i].path, strerror(errno));
        else moved[i] = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (st && backup && backup[i]) {
            /* the old file back where it was (over the new one, if it was moved) */
            if (rename(backup[i], files[i].path) != 0) unlink(backup[i]);
        } else if (st && moved && moved[i]) {
            unlink(files[i].path); /* there was no old file */
        } else if (backup && backup[i]) {
            unlink(backup[i]);
        }
        if (moved && moved[i]) {
            untrack(temp_files, MAX_TEMPS, files[i].tmp);
            free(files[i].tmp);
            files[i].tmp = NULL;
        }
        if (backup) free(backup[i]);
    }
    qtk__signals_release(&old);
    for (size_t i = 0; i < n; i++) qtk__afile_abort(&files[i]); /* removes what was not moved */
    free(backup);
    free(moved);
    return st;
}

/* ---- a directory in place of another ---- */

typedef struct {
    char **name;
    bool *is_dir;
    size_t n, cap, cap_dir;
} names;

static bool names_add(names *l, const char *name, bool is_dir) {
    if (!qtk__grow((void **)&l->name, &l->cap, l->n, sizeof *l->name) ||
        !qtk__grow((void **)&l->is_dir, &l->cap_dir, l->n, sizeof *l->is_dir) || !(l->name[l->n] = qtk__strdup(name)))
        return false;
    l->is_dir[l->n++] = is_dir;
    return true;
}

static void names_free(names *l) {
    for (size_t i = 0; i < l->n; i++) free(l->name[i]);
    free(l->name);
    free(l->is_dir);
    memset(l, 0, sizeof *l);
}

static qtk_status list_dir(const char *dir, names *l) {
    memset(l, 0, sizeof *l);
    DIR *d = opendir(dir);
    if (!d) return qtk__err(QTK_E_IO, "cannot read the directory '%s': %s", dir, strerror(errno));
    qtk_status st = QTK_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = qtk__path_join(dir, e->d_name);
        struct stat sb;
        bool isdir = p && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (!names_add(l, e->d_name, isdir)) st = qtk__err(QTK_E_NOMEM, "out of memory");
    }
    closedir(d);
    if (st) names_free(l);
    return st;
}

static bool is_temporary(const char *name) { return strstr(name, ".qtk-tmp-") || strstr(name, ".qtk-old-"); }

/* A copy of a file the old directory holds, for a filesystem without hard links. */
static qtk_status copy_file(const char *from, const char *to) {
    uint8_t *data = NULL;
    size_t len = 0;
    qtk_status st = qtk__io_read_file(from, &data, &len);
    if (!st) {
        FILE *f = fopen(to, "wbx");
        if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
            st = qtk__err(QTK_E_IO, "cannot carry '%s' over into the new directory: %s", from, strerror(errno));
    }
    free(data);
    return st;
}

qtk_status qtk__dir_replace(const char *tmpdir, const char *target, bool (*keep_out)(const char *name),
                            const volatile sig_atomic_t *cancel) {
    if (cancel && *cancel) return cancelled(target);
    struct stat sb;
    if (lstat(target, &sb) != 0) {
        sigset_t old;
        qtk__signals_hold(&old);
        qtk__temp_dir_untrack((char *)(uintptr_t)tmpdir);
        qtk_status st = QTK_OK;
        if (rename(tmpdir, target) != 0) {
            st = qtk__err(QTK_E_IO, "cannot rename the output directory into '%s': %s", target, strerror(errno));
            qtk__temp_dir_track((char *)(uintptr_t)tmpdir);
        }
        qtk__signals_release(&old);
        return st;
    }
    if (!S_ISDIR(sb.st_mode)) return qtk__err(QTK_E_IO, "'%s' exists and is not a directory", target);
    /* what the old directory holds besides its checkpoint: carried over */
    names old;
    qtk_status st = list_dir(target, &old);
    if (st) return st;
    names subdirs = {0};
    for (size_t i = 0; i < old.n && !st; i++) {
        const char *nm = old.name[i];
        if (is_temporary(nm) || keep_out(nm)) continue;
        char *a = qtk__path_join(target, nm), *b = qtk__path_join(tmpdir, nm);
        if (!a || !b) st = qtk__err(QTK_E_NOMEM, "out of memory");
        else if (access(b, F_OK) == 0) {
            /* the new checkpoint has its own */
        } else if (old.is_dir[i]) {
            if (!names_add(&subdirs, nm, true)) st = qtk__err(QTK_E_NOMEM, "out of memory");
        } else if (link(a, b) != 0) {
            st = copy_file(a, b);
        }
        free(a);
        free(b);
    }
    /* after the exchange the old directory is at tmpdir: its files, as paths to remove */
    char **gone = calloc(old.n ? old.n : 1, sizeof *gone);
    if (!st && !gone) st = qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < old.n && !st; i++)
        if (!old.is_dir[i] && !(gone[i] = qtk__path_join(tmpdir, old.name[i]))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && cancel && *cancel) st = cancelled(target);
    bool exchanged = false;
    if (!st) {
        sigset_t mask;
        qtk__signals_hold(&mask);
        size_t moved = 0;
        for (; moved < subdirs.n && !st; moved++) {
            char *a = qtk__path_join(target, subdirs.name[moved]), *b = qtk__path_join(tmpdir, subdirs.name[moved]);
            if (!a || !b || rename(a, b) != 0)
                st = qtk__err(QTK_E_IO, "cannot carry the directory '%s' over: %s", subdirs.name[moved], strerror(errno));
            free(a);
            free(b);
            if (st) break;
        }
        if (!st) {
#ifdef RENAME_EXCHANGE
            int ex = renameat2(AT_FDCWD, tmpdir, AT_FDCWD, target, RENAME_EXCHANGE);
#else
            int ex = -1; /* no atomic exchange on this system: the two renames below */
            errno = ENOSYS;
#endif
            if (ex == 0) {
                exchanged = true;
            } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
                /* no exchange on this filesystem: the old one aside, the new one in, or back */
                char *aside = backup_name(target);
                if (!aside) st = qtk__err(QTK_E_NOMEM, "out of memory");
                else if (rename(target, aside) != 0)
                    st = qtk__err(QTK_E_IO, "cannot move the old '%s' aside: %s", target, strerror(errno));
                else if (rename(tmpdir, target) != 0) {
                    st = qtk__err(QTK_E_IO, "cannot rename the output directory into '%s': %s", target, strerror(errno));
                    rename(aside, target);
                } else if (rename(aside, tmpdir) != 0) {
                    st = qtk__err(QTK_E_IO, "cannot remove the old '%s' (it is at '%s'): %s", target, aside, strerror(errno));
                } else {
                    exchanged = true;
                }
                free(aside);
            } else {
                st = qtk__err(QTK_E_IO, "cannot exchange '%s' with the new directory: %s", target, strerror(errno));
            }
        }
        if (!exchanged) /* the subdirectories back where they were */
            for (size_t i = 0; i < moved && i < subdirs.n; i++) {
                char *a = qtk__path_join(target, subdirs.name[i]), *b = qtk__path_join(tmpdir, subdirs.name[i]);
                if (a && b) rename(b, a);
                free(a);
                free(b);
            }
        if (exchanged) {
            chmod(target, sb.st_mode & 07777);
            for (size_t i = 0; i < old.n; i++)
                if (gone[i]) qtk__temp_file_track(gone[i]); /* the old checkpoint, now a temporary */
        }
        qtk__signals_release(&mask);
    }
    if (exchanged) {
        for (size_t i = 0; i < old.n; i++) {
            if (!gone[i]) continue;
            unlink(gone[i]);
            qtk__temp_file_untrack(gone[i]);
        }
        sigset_t mask;
        qtk__signals_hold(&mask);
        qtk__temp_dir_untrack((char *)(uintptr_t)tmpdir);
        if (rmdir(tmpdir) != 0) st = qtk__err(QTK_E_IO, "the new '%s' is in place, but the old one is left at '%s': %s",
                                              target, tmpdir, strerror(errno));
        qtk__signals_release(&mask);
    }
    for (size_t i = 0; gone && i < old.n; i++) free(gone[i]);
    free(gone);
    names_free(&old);
    names_free(&subdirs);
    return st;
}
