/* util.c — see util.h. */
#include "io/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool qtk__utf8_ok(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0) return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07;
        else return false;
        if (n - i <= k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3fu);
        }
        /* overlong forms, surrogates, beyond U+10FFFF */
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return false;
        i += k + 1;
    }
    return true;
}

char *qtk__strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *qtk__path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

char *qtk__path_dir(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return qtk__strdup(".");
    if (s == path) return qtk__strdup("/");
    size_t n = (size_t)(s - path);
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = '\0';
    return d;
}

bool qtk__has_suffix(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && memcmp(name + n - k, suffix, k) == 0;
}

bool qtk__grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = nc <= SIZE_MAX / elem ? realloc(*arr, nc * elem) : NULL;
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* ---- regex guard (util.h) ---- */

#define RE_MAX_LEN 1024u
#define RE_MAX_NODES 4096u
#define RE_MAX_DEPTH 32

bool qtk__regex_safe(const char *pattern, char *why, size_t cap) {
    size_t len = strlen(pattern);
    if (len > RE_MAX_LEN) {
        snprintf(why, cap, "it is %zu bytes; qtk takes regular expressions of at most %u", len, RE_MAX_LEN);
        return false;
    }
    /* per group: the nodes so far and the cost of the last atom (which a repetition copies) */
    size_t sum[RE_MAX_DEPTH + 1] = {0}, last[RE_MAX_DEPTH + 1] = {0};
    int d = 0;
    bool prev_rep = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)pattern[i];
        size_t rep = 0; /* > 0: a repetition copying the last atom rep times */
        if (c == '\\' && i + 1 < len) {
            i++;
            last[d] = 1, sum[d] += 1;
        } else if (c == '[') {
            /* a bracket expression: ']' first (or after '^') is literal; [:class:] etc. inside */
            size_t j = i + 1;
            if (j < len && pattern[j] == '^') j++;
            if (j < len && pattern[j] == ']') j++;
            while (j < len && pattern[j] != ']') {
                if (pattern[j] == '[' && j + 1 < len && strchr(":.=", pattern[j + 1])) {
                    const char *end = strstr(pattern + j + 2, (char[]){pattern[j + 1], ']', '\0'});
                    j = end ? (size_t)(end - pattern) + 2 : len;
                } else {
                    j++;
                }
            }
            i = j < len ? j : len - 1;
            last[d] = 1, sum[d] += 1;
        } else if (c == '(') {
            if (d == RE_MAX_DEPTH) {
                snprintf(why, cap, "it nests groups deeper than %d", RE_MAX_DEPTH);
                return false;
            }
            d++;
            sum[d] = last[d] = 0;
        } else if (c == ')' && d > 0) {
            size_t g = sum[d] ? sum[d] : 1;
            d--;
            last[d] = g, sum[d] += g;
        } else if (c == '*' || c == '+' || c == '?') {
            rep = 2;
        } else if (c == '{' && i + 1 < len && pattern[i + 1] >= '0' && pattern[i + 1] <= '9') {
            size_t m = 0, n = 0, j = i + 1;
            while (j < len && pattern[j] >= '0' && pattern[j] <= '9' && m <= 100000) m = m * 10 + (size_t)(pattern[j++] - '0');
            n = m;
            if (j < len && pattern[j] == ',') {
                j++;
                if (j < len && pattern[j] >= '0' && pattern[j] <= '9') {
                    n = 0;
                    while (j < len && pattern[j] >= '0' && pattern[j] <= '9' && n <= 100000) n = n * 10 + (size_t)(pattern[j++] - '0');
                } else {
                    n = m + 1;
                }
            }
            while (j < len && pattern[j] != '}') j++;
            i = j < len ? j : len - 1;
            rep = (n > m ? n : m) + 1;
        } else if (c == '|' || c == '^' || c == '$') {
            last[d] = 0;
        } else {
            last[d] = 1, sum[d] += 1;
        }
        if (rep) {
            if (prev_rep) {
                snprintf(why, cap, "it has adjacent repetition operators near byte %zu (undefined in POSIX extended "
                                   "regular expressions)", i);
                return false;
            }
            size_t base = last[d] ? last[d] : 1;
            size_t add = base > RE_MAX_NODES / rep ? RE_MAX_NODES + 1 : base * (rep - 1);
            sum[d] += add;
            last[d] = base > RE_MAX_NODES / rep ? RE_MAX_NODES + 1 : base * rep;
        }
        prev_rep = rep != 0;
        if (sum[d] > RE_MAX_NODES || last[d] > RE_MAX_NODES) {
            snprintf(why, cap, "its repetitions expand to more than %u nodes", RE_MAX_NODES);
            return false;
        }
    }
    return true;
}
