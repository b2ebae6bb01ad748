/* mapfile.c — read-only file maps (see mapfile.h). */
#define _DEFAULT_SOURCE /* madvise() and MADV_* beside _POSIX_C_SOURCE */
#include "mapfile.h"

#include "common/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

qtk_status qtk__map_open(const char *path, qtk__mapfile *m) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return qtk__err(QTK_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return qtk__err(QTK_E_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return qtk__err(QTK_E_IO, "'%s' is not a regular file", path);
    }
    if ((uintmax_t)sb.st_size > (uintmax_t)SIZE_MAX) {
        close(fd);
        return qtk__err(QTK_E_IO, "'%s' is larger than this machine's address space", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len == 0) { /* mmap cannot map nothing; an empty file is simply empty */
        close(fd);
        m->mapped = true;
        return QTK_OK;
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the map keeps its own reference to the file */
    if (p == MAP_FAILED) return qtk__err(QTK_E_IO, "cannot map '%s' (%zu bytes): %s", path, len, strerror(e));
#ifdef MADV_SEQUENTIAL
    /* Tensors are visited front to back: ask for read-ahead. Advisory; failure is harmless. */
    (void)madvise(p, len, MADV_SEQUENTIAL);
#endif
    m->data = p;
    m->len = len;
    m->mapped = true;
    return QTK_OK;
}

void qtk__map_borrow(qtk__mapfile *m, const void *data, size_t len) {
    m->data = len ? data : NULL;
    m->len = len;
    m->mapped = false;
}

void qtk__map_release(qtk__mapfile *m, size_t off, size_t len) {
#ifdef MADV_DONTNEED
    if (!m->mapped || !m->data || len == 0 || off >= m->len) return;
    if (len > m->len - off) len = m->len - off;
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    /* Whole pages around the range: a page shared with a neighbouring tensor is simply
     * faulted in again if that tensor is read later. posix_madvise(POSIX_MADV_DONTNEED) is
     * a no-op in glibc, hence madvise. The map is private and never written, so dropping
     * pages loses nothing. */
    size_t begin = off / page * page, end = off + len; /* the kernel rounds the length up */
    if (end > begin) (void)madvise((void *)(uintptr_t)(m->data + begin), end - begin, MADV_DONTNEED);
#else
    (void)m;
    (void)off;
    (void)len;
#endif
}

void qtk__map_close(qtk__mapfile *m) {
    if (m->mapped && m->data) munmap((void *)(uintptr_t)m->data, m->len);
    memset(m, 0, sizeof *m);
}
