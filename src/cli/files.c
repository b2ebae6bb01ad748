/* files.c — see files.h. */
#include "files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

qtk_status cli_read_file(const char *path, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return qtk_set_error(QTK_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return qtk_set_error(QTK_E_IO, "'%s' is not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return qtk_set_error(QTK_E_NOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        int e = errno;
        fclose(f);
        free(buf);
        return qtk_set_error(QTK_E_IO, "cannot read '%s': %s", path, e ? strerror(e) : "short read");
    }
    fclose(f);
    *data = buf;
    *len = n;
    return QTK_OK;
}

qtk_status cli_check_target(const char *path, bool force) {
    struct stat sb;
    if (!force && stat(path, &sb) == 0)
        return qtk_set_error(QTK_E_IO, "'%s' exists; it is replaced only with --force", path);
    return QTK_OK;
}
