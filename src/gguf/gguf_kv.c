/* gguf_kv.c — GGUF KV values (GGUF.md §1.4) and the typed text they travel as.
 *
 * A checkpoint description holds metadata as string pairs, which every format can carry. A GGUF
 * value becomes text that says its type, so that GGUF -> .bpk/.safetensors -> GGUF writes the
 * same KV types back (docs/gguf.md, "KV metadata"):
 *
 *   STRING          the text itself, or str:"..." (quoted) when it is not valid UTF-8, holds a
 *                   NUL, or starts like one of the tags below
 *   UINT8 ... INT64 u8:200  i8:-100  u16:  i16:  u32:  i32:  u64:  i64:
 *   FLOAT32/64      f32:-3.14159274  f64:2.7182818284590451   (shortest round-trip digits)
 *   BOOL            bool:true / bool:false
 *   ARRAY           arr[T]:[e,e,...]  with T one of the names above or str; string elements
 *                   are always quoted; an array of arrays is arr[arr]:[arr[i32]:[1,2],...]
 *
 * Quoted strings use JSON's escapes (\" \\ \n \r \t \u00XX) plus \xNN for a byte that is not
 * part of valid UTF-8, so any byte string survives. Text that starts with a tag but does not
 * parse as that type is an ordinary string (metadata from other files is never an error). */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const kv_names[GGUF_KV_TYPES] = {"u8",  "i8",   "u16", "i16", "u32", "i32", "f32",
                                                    "bool", "str", "arr", "u64", "i64", "f64"};
static const unsigned kv_size[GGUF_KV_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *qtk__gguf_kv_type_name(uint32_t type) { return type < GGUF_KV_TYPES ? kv_names[type] : NULL; }

/* ---- text buffer ---- */

void qtk__gguf_text_free(gguf_text *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

static void put(gguf_text *t, const void *s, size_t n) {
    if (t->oom) return;
    if (t->cap - t->n <= n) {
        size_t nc = t->cap ? t->cap : 64;
        while (nc - t->n <= n) {
            if (nc > SIZE_MAX / 2) {
                t->oom = true;
                return;
            }
            nc *= 2;
        }
        char *p = realloc(t->p, nc);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = nc;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}
static void puts_(gguf_text *t, const char *s) { put(t, s, strlen(s)); }
static void putf(gguf_text *t, const char *fmt, ...) QTK_PRINTF(2, 3);
static void putf(gguf_text *t, const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k > 0) put(t, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

/* ---- reading values ---- */

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if there is none; NUL is not
 * accepted (a C string cannot hold it). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    size_t k;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07;
    else return 0;
    if (n <= k) return 0;
    for (size_t j = 1; j <= k; j++) {
        if ((s[j] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[j] & 0x3fu);
    }
    if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
    return k + 1;
}

static void put_quoted(gguf_text *t, const unsigned char *s, size_t n) {
    put(t, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = utf8_len(s + i, n - i);
        if (c == '"' || c == '\\') putf(t, "\\%c", (char)c), i++;
        else if (c == '\n') puts_(t, "\\n"), i++;
        else if (c == '\r') puts_(t, "\\r"), i++;
        else if (c == '\t') puts_(t, "\\t"), i++;
        else if (c < 0x20 || c == 0x7f) putf(t, "\\u%04x", c), i++;
        else if (k == 0) putf(t, "\\x%02x", c), i++;
        else put(t, s + i, k), i += k;
    }
    put(t, "\"", 1);
}

/* true when text would be read back as a tag rather than as the string itself */
static bool looks_tagged(const char *s, size_t n) {
    if (n >= 4 && memcmp(s, "arr[", 4) == 0) return true;
    for (unsigned i = 0; i < GGUF_KV_TYPES; i++) {
        size_t k = strlen(kv_names[i]);
        if (n > k && memcmp(s, kv_names[i], k) == 0 && s[k] == ':') return true;
    }
    return false;
}

static qtk_status truncated(const gguf_cur *c, size_t need, const char *what, const char *part) {
    return qtk__err(QTK_E_FORMAT, "truncated: %s: %s needs %zu byte%s at offset %zu but the file ends at %zu", what, part, need,
                    need == 1 ? "" : "s", c->pos, c->len);
}

static uint64_t ld64(const uint8_t *p) { return (uint64_t)qtk__ld32(p) | (uint64_t)qtk__ld32(p + 4) << 32; }

/* One value of type `type`; tagged: print the "u8:" tag (top level and arrays of arrays). */
static qtk_status read_value(gguf_cur *c, uint32_t type, gguf_text *out, const char *what, int depth, bool tagged,
                             bool top) {
    if (type >= GGUF_KV_TYPES) return qtk__err(QTK_E_FORMAT, "%s: unknown value type %u (GGUF defines 0..12)", what, type);
    const uint8_t *p = c->p + c->pos;
    size_t left = c->len - c->pos;
    if (type != GGUF_STR && type != GGUF_ARR) {
        unsigned n = kv_size[type];
        if (left < n) return truncated(c, n, what, "the value");
        if (tagged) putf(out, "%s:", kv_names[type]);
        switch (type) {
        case GGUF_U8: putf(out, "%u", (unsigned)p[0]); break;
        case GGUF_I8: putf(out, "%d", (int)(int8_t)p[0]); break;
        case GGUF_U16: putf(out, "%u", (unsigned)qtk__ld16(p)); break;
        case GGUF_I16: putf(out, "%d", (int)(int16_t)qtk__ld16(p)); break;
        case GGUF_U32: putf(out, "%" PRIu32, qtk__ld32(p)); break;
        case GGUF_I32: putf(out, "%" PRId32, (int32_t)qtk__ld32(p)); break;
        case GGUF_F32: putf(out, "%.9g", (double)qtk__bits_f32(qtk__ld32(p))); break;
        case GGUF_BOOL: puts_(out, p[0] ? "true" : "false"); break; /* ggml reads any non-zero byte as true */
        case GGUF_U64: putf(out, "%" PRIu64, ld64(p)); break;
        case GGUF_I64: putf(out, "%" PRId64, (int64_t)ld64(p)); break;
        default: {
            double d;
            uint64_t u = ld64(p);
            memcpy(&d, &u, 8);
            putf(out, "%.17g", d);
        }
        }
        c->pos += n;
        return QTK_OK;
    }
    if (type == GGUF_STR) {
        if (left < 8) return truncated(c, 8, what, "the string length");
        uint64_t n = ld64(p);
        if (n > GGUF_MAX_STRING)
            return qtk__err(QTK_E_FORMAT, "%s: a string of %" PRIu64 " bytes at offset %zu exceeds GGUF's limit of 1 GiB", what, n,
                            c->pos);
        c->pos += 8;
        if (n > left - 8) return truncated(c, (size_t)n, what, "the string");
        const unsigned char *s = c->p + c->pos;
        if (top && qtk__utf8_ok((const char *)s, (size_t)n) && !looks_tagged((const char *)s, (size_t)n)) {
            put(out, s, (size_t)n);
        } else {
            if (top) puts_(out, "str:");
            put_quoted(out, s, (size_t)n);
        }
        c->pos += (size_t)n;
        return QTK_OK;
    }
    /* an array: element type, count, elements without tags */
    if (left < 12) return truncated(c, 12, what, "the array header");
    uint32_t et = qtk__ld32(p);
    uint64_t n = ld64(p + 4);
    if (et >= GGUF_KV_TYPES)
        return qtk__err(QTK_E_FORMAT, "%s: array of unknown element type %u at offset %zu (GGUF defines 0..12)", what, et, c->pos);
    if (et == GGUF_ARR && depth >= GGUF_MAX_NESTING)
        return qtk__err(QTK_E_FORMAT, "%s: arrays nested more than %d deep at offset %zu", what, GGUF_MAX_NESTING, c->pos);
    if (n > GGUF_MAX_ARRAY)
        return qtk__err(QTK_E_FORMAT, "%s: an array of %" PRIu64 " elements at offset %zu exceeds GGUF's limit of 2^30", what, n,
                        c->pos);
    /* the least the elements can take: strings 8 bytes, arrays 12 */
    uint64_t min = et == GGUF_STR ? 8 : et == GGUF_ARR ? 12 : kv_size[et];
    if (n * min > left - 12)
        return qtk__err(QTK_E_FORMAT,
                        "truncated: %s: an array of %" PRIu64 " %s elements needs at least %" PRIu64
                        " bytes after offset %zu but the file has %zu",
                        what, n, kv_names[et], n * min, c->pos + 12, left - 12);
    c->pos += 12;
    if (tagged) putf(out, "arr[%s]:", kv_names[et]);
    put(out, "[", 1);
    for (uint64_t i = 0; i < n; i++) {
        if (i) put(out, ",", 1);
        qtk_status st = read_value(c, et, out, what, depth + 1, et == GGUF_ARR, false);
        if (st) return st;
    }
    put(out, "]", 1);
    return out->oom ? qtk__err(QTK_E_NOMEM, "%s: out of memory for the value's text", what) : QTK_OK;
}

qtk_status qtk__gguf_read_value(gguf_cur *c, uint32_t type, gguf_text *out, const char *what) {
    qtk_status st = read_value(c, type, out, what, 0, true, true);
    if (!st && out->oom) st = qtk__err(QTK_E_NOMEM, "%s: out of memory for the value's text", what);
    return st;
}

/* ---- parsing text back into values ---- */

typedef struct {
    const char *s;
    bool nested, oom;
} tparse;

static void skip_ws(const char **s) {
    while (**s == ' ') (*s)++;
}

static void put_le(gguf_text *o, uint64_t v, unsigned n) {
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, n);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A quoted string at *s -> u64 length + bytes into o. */
static bool parse_quoted(const char **s, gguf_text *o) {
    const char *p = *s;
    if (*p != '"') return false;
    p++;
    gguf_text b = {0};
    bool ok = true;
    while (ok && *p != '"') {
        if (*p == '\0') ok = false;
        else if (*p != '\\') put(&b, p++, 1);
        else {
            char e = p[1];
            unsigned char c;
            if (e == '"' || e == '\\' || e == '/') c = (unsigned char)e, p += 2;
            else if (e == 'n') c = '\n', p += 2;
            else if (e == 'r') c = '\r', p += 2;
            else if (e == 't') c = '\t', p += 2;
            else if (e == 'x' && hexval(p[2]) >= 0 && hexval(p[3]) >= 0) c = (unsigned char)(hexval(p[2]) << 4 | hexval(p[3])), p += 4;
            else if (e == 'u' && p[2] == '0' && p[3] == '0' && hexval(p[4]) >= 0 && hexval(p[5]) >= 0)
                c = (unsigned char)(hexval(p[4]) << 4 | hexval(p[5])), p += 6;
            else {
                ok = false;
                break;
            }
            put(&b, &c, 1);
        }
    }
    if (ok) {
        put_le(o, b.n, 8);
        if (b.n) put(o, b.p, b.n);
        *s = p + 1;
    }
    if (b.oom) o->oom = true;
    qtk__gguf_text_free(&b);
    return ok;
}

static int type_by_name(const char *s, size_t n) {
    for (int i = 0; i < GGUF_KV_TYPES; i++)
        if (strlen(kv_names[i]) == n && memcmp(kv_names[i], s, n) == 0) return i;
    return -1;
}

/* A number or bool of type t at *s (up to ',' ']' or the end) -> its bytes. */
static bool parse_scalar(const char **s, uint32_t t, gguf_text *o) {
    const char *p = *s;
    size_t n = strcspn(p, ",]");
    while (n && p[n - 1] == ' ') n--;
    if (n == 0 || n > 40) return false;
    char buf[48], *end;
    memcpy(buf, p, n);
    buf[n] = '\0';
    errno = 0;
    if (t == GGUF_BOOL) {
        if (strcmp(buf, "true") && strcmp(buf, "false")) return false;
        uint8_t b = buf[0] == 't';
        put(o, &b, 1);
    } else if (t == GGUF_F32) {
        float f = strtof(buf, &end);
        if (*end) return false;
        put_le(o, qtk__f32_bits(f), 4);
    } else if (t == GGUF_F64) {
        double d = strtod(buf, &end);
        if (*end) return false;
        uint64_t u;
        memcpy(&u, &d, 8);
        put_le(o, u, 8);
    } else if (t == GGUF_U8 || t == GGUF_U16 || t == GGUF_U32 || t == GGUF_U64) {
        if (buf[0] == '-') return false;
        unsigned long long v = strtoull(buf, &end, 10);
        unsigned bytes = kv_size[t];
        if (*end || errno || (bytes < 8 && v >> (8 * bytes))) return false;
        put_le(o, v, bytes);
    } else {
        long long v = strtoll(buf, &end, 10);
        unsigned bytes = kv_size[t];
        long long lim = bytes < 8 ? 1ll << (8 * bytes - 1) : 0;
        if (*end || errno || (bytes < 8 && (v < -lim || v >= lim))) return false;
        put_le(o, (uint64_t)v, bytes);
    }
    *s = p + n;
    return true;
}

/* "arr[T]:[...]" at *s -> element type + count + elements. */
static bool parse_array(tparse *tp, const char **s, gguf_text *o, int depth) {
    const char *p = *s;
    if (depth > GGUF_MAX_NESTING || strncmp(p, "arr[", 4) != 0) return false;
    p += 4;
    size_t n = strcspn(p, "]");
    int t = type_by_name(p, n);
    if (t < 0 || p[n] != ']' || p[n + 1] != ':' || p[n + 2] != '[') return false;
    if (t == GGUF_ARR) tp->nested = true;
    p += n + 3;
    put_le(o, (uint32_t)t, 4);
    size_t count_at = o->n;
    put_le(o, 0, 8);
    uint64_t count = 0;
    skip_ws(&p);
    if (*p != ']')
        for (;;) {
            skip_ws(&p);
            bool ok = t == GGUF_STR ? parse_quoted(&p, o) : t == GGUF_ARR ? parse_array(tp, &p, o, depth + 1) : parse_scalar(&p, (uint32_t)t, o);
            if (!ok) return false;
            count++;
            skip_ws(&p);
            if (*p == ']') break;
            if (*p != ',') return false;
            p++;
        }
    if (!o->oom) /* the count, now that it is known */
        for (unsigned i = 0; i < 8; i++) o->p[count_at + i] = (char)(uint8_t)(count >> (8 * i));
    *s = p + 1;
    return true;
}

/* text -> (type, bytes) if it is well-formed tagged text; false otherwise */
static bool parse_tagged(tparse *tp, const char *text, gguf_text *o, uint32_t *type) {
    const char *p = text;
    if (strncmp(p, "arr[", 4) == 0) {
        *type = GGUF_ARR;
        return parse_array(tp, &p, o, 1) && *p == '\0';
    }
    const char *colon = strchr(p, ':');
    if (!colon) return false;
    int t = type_by_name(p, (size_t)(colon - p));
    if (t < 0 || t == GGUF_ARR) return false;
    p = colon + 1;
    *type = (uint32_t)t;
    if (t == GGUF_STR) return parse_quoted(&p, o) && *p == '\0';
    return parse_scalar(&p, (uint32_t)t, o) && *p == '\0';
}

qtk_status qtk__gguf_parse_value(const char *text, gguf_wvalue *out, bool *nested) {
    memset(out, 0, sizeof *out);
    *nested = false;
    tparse tp = {text, false, false};
    gguf_text o = {0};
    uint32_t type = GGUF_STR;
    if (!looks_tagged(text, strlen(text)) || !parse_tagged(&tp, text, &o, &type)) {
        /* an ordinary string */
        qtk__gguf_text_free(&o);
        type = GGUF_STR;
        size_t n = strlen(text);
        put_le(&o, n, 8);
        put(&o, text, n);
        tp.nested = false;
    }
    if (o.oom) {
        qtk__gguf_text_free(&o);
        return qtk__err(QTK_E_NOMEM, "out of memory encoding a metadata value");
    }
    out->type = type;
    out->bytes = (uint8_t *)o.p;
    out->len = o.n;
    *nested = tp.nested;
    return QTK_OK;
}

void qtk__gguf_wvalue_free(gguf_wvalue *v) {
    free(v->bytes);
    memset(v, 0, sizeof *v);
}
