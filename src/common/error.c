/* error.c — status names and the per-thread last-error message. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

#define QTK_ERRBUF 1024

static _Thread_local char errbuf[QTK_ERRBUF];

const char *qtk_version(void) { return QTK_VERSION_STRING; }

const char *qtk_status_name(qtk_status st) {
    switch (st) {
    case QTK_OK: return "QTK_OK";
    case QTK_E_ARG: return "QTK_E_ARG";
    case QTK_E_SCHEME: return "QTK_E_SCHEME";
    case QTK_E_PARSE: return "QTK_E_PARSE";
    case QTK_E_SHAPE: return "QTK_E_SHAPE";
    case QTK_E_LENGTH: return "QTK_E_LENGTH";
    case QTK_E_VALUE: return "QTK_E_VALUE";
    case QTK_E_NOMEM: return "QTK_E_NOMEM";
    case QTK_E_IO: return "QTK_E_IO";
    case QTK_E_FORMAT: return "QTK_E_FORMAT";
    case QTK_E_UNSUPPORTED: return "QTK_E_UNSUPPORTED";
    case QTK_E_NOTFOUND: return "QTK_E_NOTFOUND";
    case QTK_E_INTERNAL: return "QTK_E_INTERNAL";
    case QTK_E_CANCELLED: return "QTK_E_CANCELLED";
    }
    return "QTK_E_UNKNOWN";
}

const char *qtk_last_error(void) { return errbuf; }

void qtk_clear_error(void) { errbuf[0] = '\0'; }

QTK_PRINTF(1, 0) static void set_message(const char *fmt, va_list ap) { vsnprintf(errbuf, sizeof errbuf, fmt, ap); }

QTK_PRINTF(1, 0) static void prefix_message(const char *fmt, va_list ap) {
    char prev[QTK_ERRBUF];
    memcpy(prev, errbuf, sizeof prev);
    int n = vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    if (n >= 0 && (size_t)n + 2 < sizeof errbuf && prev[0] != '\0') {
        /* append ": previous message", truncated to the buffer */
        size_t at = (size_t)n, room = sizeof errbuf - at - 3, len = strlen(prev);
        if (len > room) len = room;
        errbuf[at] = ':';
        errbuf[at + 1] = ' ';
        memcpy(errbuf + at + 2, prev, len);
        errbuf[at + 2 + len] = '\0';
    }
}

qtk_status qtk__err(qtk_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return st;
}

qtk_status qtk__err_context(qtk_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    prefix_message(fmt, ap);
    va_end(ap);
    return st;
}

qtk_status qtk_set_error(qtk_status st, const char *fmt, ...) {
    va_list ap;
    if (!fmt) { /* no message: an empty one */
        errbuf[0] = '\0';
        return st;
    }
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return st;
}

qtk_status qtk_error_context(qtk_status st, const char *fmt, ...) {
    va_list ap;
    if (!fmt) return st; /* no context to add */
    va_start(ap, fmt);
    prefix_message(fmt, ap);
    va_end(ap);
    return st;
}

const char *qtk_shape_format(const size_t *shape, int rank, char *buf, size_t cap) {
    if (!buf || cap == 0) return buf;
    buf[0] = '\0';
    if (rank <= 0 || !shape) {
        snprintf(buf, cap, "scalar");
        return buf;
    }
    size_t used = 0;
    for (int i = 0; i < rank && used < cap; i++) {
        int n = snprintf(buf + used, cap - used, i ? "x%zu" : "%zu", shape[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}
