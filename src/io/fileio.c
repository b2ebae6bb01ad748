/* fileio.c — whole-file reads and all-or-nothing writes. */
#include "fileio.h"
#include "util.h"

#include "common/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
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
    if (!force && stat(path, &sb) == 0)
        return qtk__err(QTK_E_IO, "'%s' exists; it is replaced only with force (--force)", path);
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

qtk_status qtk__afile_commit(qtk__afile *a) {
    qtk_status st = a->err;
    if (!st && fflush(a->f) != 0) st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    if (!st && fsync(fileno(a->f)) != 0 && errno != EINVAL)
        st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    if (fclose(a->f) != 0 && !st) st = qtk__err(QTK_E_IO, "cannot write '%s': %s", a->path, strerror(errno));
    a->f = NULL;
    untrack(temp_files, MAX_TEMPS, a->tmp); /* from here the file is either renamed or removed */
    if (!st && rename(a->tmp, a->path) != 0)
        st = qtk__err(QTK_E_IO, "cannot rename the output into '%s': %s", a->path, strerror(errno));
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
