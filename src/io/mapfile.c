/* mapfile.c — read-only file maps (see mapfile.h), and what a fault on one becomes.
 *
 * A mapped file that shrinks while it is read (another program truncates it, a network file
 * system drops it) makes the next access to the lost pages raise SIGBUS, which would kill
 * the process without a word. qtk installs a SIGBUS handler (once, when the first file is
 * mapped; it passes every other fault on to the handler that was there before): a fault
 * inside one of qtk's maps replaces the page with zeros and marks the map, the access goes on,
 * and the reader then reports the file as changed (qtk__map_check) before anything it read is
 * used or written. The maps are in lock-free slots the handler can read. */
#define _DEFAULT_SOURCE /* madvise(), MADV_* and MAP_ANONYMOUS beside _POSIX_C_SOURCE */
#include "mapfile.h"

#include "common/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MAPS 4096

static _Atomic uintptr_t map_start[MAX_MAPS];
static _Atomic size_t map_len[MAX_MAPS];
static _Atomic int map_faulted[MAX_MAPS];
static struct sigaction previous_bus;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static void on_bus(int sig, siginfo_t *info, void *uctx) {
    uintptr_t a = (uintptr_t)info->si_addr;
    for (size_t i = 0; i < MAX_MAPS; i++) {
        uintptr_t s = atomic_load(&map_start[i]);
        if (!s || a < s || a - s >= atomic_load(&map_len[i])) continue;
        long ps = sysconf(_SC_PAGESIZE);
        uintptr_t page = a & ~(uintptr_t)((ps > 0 ? ps : 4096) - 1);
        void *z = mmap((void *)page, (size_t)(ps > 0 ? ps : 4096), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (z != MAP_FAILED) {
            atomic_store(&map_faulted[i], 1);
            return; /* the access is retried and reads zeros */
        }
        break;
    }
    /* not ours (or the page could not be replaced): what was there before */
    if (previous_bus.sa_flags & SA_SIGINFO) {
        previous_bus.sa_sigaction(sig, info, uctx);
    } else if (previous_bus.sa_handler != SIG_DFL && previous_bus.sa_handler != SIG_IGN) {
        previous_bus.sa_handler(sig);
    } else {
        signal(SIGBUS, SIG_DFL); /* the fault happens again on return, and ends the process */
    }
}

static void install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous_bus);
}

/* The slot's index + 1 (0: none). */
static int register_map(const void *p, size_t len) {
    pthread_once(&handler_once, install_handler);
    for (int i = 0; i < MAX_MAPS; i++) {
        if (atomic_load(&map_start[i])) continue;
        uintptr_t none = 0;
        atomic_store(&map_faulted[i], 0);
        atomic_store(&map_len[i], len);
        if (atomic_compare_exchange_strong(&map_start[i], &none, (uintptr_t)p)) return i + 1;
    }
    return 0; /* beyond the slots: a fault on this map is not caught */
}

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
    m->dev = (uint64_t)sb.st_dev;
    m->ino = (uint64_t)sb.st_ino;
    m->slot = register_map(p, len);
    return QTK_OK;
}

void qtk__map_borrow(qtk__mapfile *m, const void *data, size_t len) {
    m->data = len ? data : NULL;
    m->len = len;
    m->mapped = false;
    m->slot = 0;
}

bool qtk__map_faulted(const qtk__mapfile *m) { return m->slot > 0 && atomic_load(&map_faulted[m->slot - 1]) != 0; }

qtk_status qtk__map_check(const qtk__mapfile *m, const char *path) {
    if (!m->mapped || !m->data) return QTK_OK;
    bool faulted = qtk__map_faulted(m);
    struct stat sb;
    bool same = stat(path, &sb) == 0 && (uint64_t)sb.st_dev == m->dev && (uint64_t)sb.st_ino == m->ino;
    if (same && (uintmax_t)sb.st_size < (uintmax_t)m->len)
        return qtk__err(QTK_E_IO, "'%s' was truncated while it was being read (%zu bytes when opened, %jd now)", path, m->len,
                        (intmax_t)sb.st_size);
    if (faulted) return qtk__err(QTK_E_IO, "'%s' could not be read: part of the file went away while it was being read", path);
    return QTK_OK;
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
    if (m->slot > 0) atomic_store(&map_start[m->slot - 1], 0); /* the handler no longer claims it */
    if (m->mapped && m->data) munmap((void *)(uintptr_t)m->data, m->len);
    memset(m, 0, sizeof *m);
}
