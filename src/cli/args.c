/* args.c — option parsing and error printing shared by the commands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "qtk %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'qtk %s --help')\n", cmd);
    return CLI_USAGE;
}

int cli_fail(const char *cmd, qtk_status st, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "qtk %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (st != QTK_OK) fprintf(stderr, ": %s [%s]", qtk_last_error(), qtk_status_name(st));
    fputc('\n', stderr);
    return CLI_FAIL;
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int n_opts, const char **pos, int max_pos,
              int *n_pos, bool *help) {
    *n_pos = 0;
    *help = false;
    bool only_pos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (!only_pos && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            *help = true;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t nl = eq ? (size_t)(eq - name) : strlen(name);
            const cli_opt *o = NULL;
            for (int k = 0; k < n_opts; k++)
                if (strlen(opts[k].name) == nl && strncmp(opts[k].name, name, nl) == 0) o = &opts[k];
            if (!o) return cli_usage_error(cmd, "unknown option '%.*s'", (int)(nl + 2), a);
            if (!o->has_value) {
                if (eq) return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
                *o->flag = true;
                continue;
            }
            const char *v = eq ? eq + 1 : NULL;
            if (!v) {
                if (i + 1 >= argc) return cli_usage_error(cmd, "option '--%s' needs a value", o->name);
                v = argv[++i];
            }
            if (o->multi) {
                const char **arr = realloc((void *)*o->multi, (size_t)(*o->n_multi + 1) * sizeof *arr);
                if (!arr) return cli_fail(cmd, QTK_OK, "out of memory");
                arr[(*o->n_multi)++] = v;
                *o->multi = arr;
            } else {
                if (*o->value) return cli_usage_error(cmd, "option '--%s' given twice", o->name);
                *o->value = v;
            }
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] != '\0')
            return cli_usage_error(cmd, "unknown option '%s'", a);
        if (*n_pos >= max_pos) return cli_usage_error(cmd, "unexpected argument '%s'", a);
        pos[(*n_pos)++] = a;
    }
    return CLI_OK;
}

bool cli_parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, float *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (*end || !isfinite(v) || errno == ERANGE) return false;
    *out = v;
    return true;
}

bool cli_parse_shape(const char *s, size_t *shape, int *rank) {
    if (!s || !*s) return false;
    if (strcmp(s, "scalar") == 0) {
        *rank = 0;
        return true;
    }
    int r = 0;
    const char *p = s;
    for (;;) {
        if (r == QTK_MAX_RANK) return false;
        if (*p < '0' || *p > '9') return false;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || (unsigned long long)(size_t)v != v) return false;
        shape[r++] = (size_t)v;
        if (*end == '\0') break;
        if (*end != 'x' && *end != 'X' && *end != ',') return false;
        p = end + 1;
    }
    *rank = r;
    return true;
}


int cli_parse_layout(const char *cmd, const char *s, bool for_reading, qtk_hub_layout *out) {
    if (qtk_hub_layout_parse(s, out) == QTK_OK && *out != QTK_LAYOUT_AUTO &&
        (for_reading || (*out != QTK_LAYOUT_NONE && *out != QTK_LAYOUT_TORCHAO)))
        return CLI_OK;
    return cli_usage_error(cmd, "--layout '%s' is not one of %sqtk, gpt-oss, modelopt, compressed-tensors, deepseek, bnb, gptq, awq%s", s,
                           for_reading ? "none, " : "", for_reading ? ", torchao" : "");
}
