/* gguf.c — reading llama.cpp's GGUF container (formats/GGUF.md §1): a 24-byte header, KV
 * records, tensor infos, zero padding to the alignment, then the tensor data.
 *
 * Everything ggml's reader checks (§1.9, rules 1-7 and 9) is checked here, each with a message
 * naming the record, the offset and what was expected: magic, version (v1 and big-endian files
 * are refused, saying so), counts that cannot fit in the file, string and array limits, empty
 * and duplicate keys, unknown value types, general.alignment's type and value, names of 64
 * bytes or more, duplicate names, more than 4 dims, negative or overflowing extents, unknown
 * and retired type ids, ne[0] not a multiple of the block, a data section beyond the file.
 * Beyond ggml: keys and tensor names must be valid UTF-8; arrays of arrays (which ggml
 * refuses) are read; and offsets are checked for what matters to a reader — aligned, inside
 * the file, not overlapping — rather than ggml's "back to back in info order", so files whose
 * tensors are stored in another order or with gaps read too. Trailing padding after the last
 * tensor is not required.
 *
 * Tensors are described in the order of their bytes in the file, with qtk shapes (GGUF's ne[]
 * reversed, §4) and, per ggml type, a raw element type, a qtk scheme (exact types: the bytes
 * are rearranged on load by gguf_import.c), or F32 (types with offsets: decoded on load by
 * gguf_decode.c). */
#include "gguf/gguf_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static bool gguf_sniff(const uint8_t *b, size_t len) {
    /* "FUGG" (a proposed big-endian magic) is claimed too, to refuse it with a reason */
    return len >= 4 && (memcmp(b, "GGUF", 4) == 0 || memcmp(b, "FUGG", 4) == 0);
}

static uint64_t ld64(const uint8_t *p) { return (uint64_t)qtk__ld32(p) | (uint64_t)qtk__ld32(p + 4) << 32; }

/* ---- the header ---- */

static qtk_status parse_header(const uint8_t *b, size_t len, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv) {
    if (len < 4) return qtk__err(QTK_E_FORMAT, "truncated: the file is %zu bytes; GGUF starts with the 4-byte magic \"GGUF\"", len);
    if (memcmp(b, "FUGG", 4) == 0)
        return qtk__err(QTK_E_UNSUPPORTED, "magic \"FUGG\": a big-endian GGUF file; qtk reads little-endian GGUF only "
                                           "(convert it with gguf-py's gguf_convert_endian.py)");
    if (memcmp(b, "GGUF", 4) != 0)
        return qtk__err(QTK_E_FORMAT, "magic is %02x %02x %02x %02x, not \"GGUF\" (47 47 55 46)", b[0], b[1], b[2], b[3]);
    if (len < 8) return qtk__err(QTK_E_FORMAT, "truncated: the version needs 4 bytes at offset 4 but the file ends at %zu", len);
    uint32_t v = qtk__ld32(b + 4);
    if (v == 0) return qtk__err(QTK_E_FORMAT, "version 0 is not a GGUF version");
    if ((v & 0xffffu) == 0)
        return qtk__err(QTK_E_UNSUPPORTED,
                        "the version reads as 0x%08x: a big-endian GGUF file (version %u); qtk reads little-endian GGUF "
                        "only (convert it with gguf-py's gguf_convert_endian.py)",
                        v, (unsigned)((v >> 24) | ((v >> 8) & 0xff00u)));
    if (v == 1)
        return qtk__err(QTK_E_UNSUPPORTED, "GGUF version 1 (2023, 32-bit counts) is no longer supported by ggml or qtk; "
                                           "re-convert the model to GGUF v3");
    if (v > 3) return qtk__err(QTK_E_UNSUPPORTED, "GGUF version %u; qtk reads versions 2 and 3", v);
    if (len < 24)
        return qtk__err(QTK_E_FORMAT, "truncated: %s needs 8 bytes at offset %d but the file ends at %zu",
                        len < 16 ? "n_tensors" : "n_kv", len < 16 ? 8 : 16, len);
    *version = v;
    *n_tensors = ld64(b + 8);
    *n_kv = ld64(b + 16);
    /* ggml reads the counts as int64 and refuses negatives; qtk also refuses counts whose
     * smallest possible records (a KV: 8-byte key length, a 1-byte key, type, 1-byte value;
     * a tensor info: name length, n_dims, type, offset) cannot fit in the file. */
    const char *which = *n_tensors > (uint64_t)INT64_MAX ? "n_tensors" : *n_kv > (uint64_t)INT64_MAX ? "n_kv" : NULL;
    if (which)
        return qtk__err(QTK_E_FORMAT, "%s = %" PRIu64 " is negative as the int64 GGUF stores", which,
                        which[2] == 't' ? *n_tensors : *n_kv);
    size_t left = len - 24;
    if (*n_kv > left / 14)
        return qtk__err(QTK_E_FORMAT, "n_kv = %" PRIu64 ": that many KV records (14 bytes at least each) cannot fit in the %zu bytes after the "
                        "header (a bad count, or a truncated file)",
                        *n_kv, left);
    if (*n_tensors > left / 24)
        return qtk__err(QTK_E_FORMAT,
                        "n_tensors = %" PRIu64 ": that many tensor infos (24 bytes at least each) cannot fit in the %zu bytes after "
                        "the header (a bad count, or a truncated file)",
                        *n_tensors, left);
    /* then qtk's limit, before anything is allocated for the records */
    if (*n_tensors > QTK_CKPT_MAX_TENSORS || *n_kv > QTK_CKPT_MAX_TENSORS)
        return qtk__err(QTK_E_UNSUPPORTED, "%s = %" PRIu64 ": qtk reads at most %d %s per GGUF file",
                        *n_tensors > QTK_CKPT_MAX_TENSORS ? "n_tensors" : "n_kv",
                        *n_tensors > QTK_CKPT_MAX_TENSORS ? *n_tensors : *n_kv, QTK_CKPT_MAX_TENSORS,
                        *n_tensors > QTK_CKPT_MAX_TENSORS ? "tensor infos" : "KV records");
    return QTK_OK;
}

/* ---- KV records ---- */

typedef struct {
    const char *key; /* in the temporary arena */
    uint64_t index;
} kv_key;

static int cmp_key(const void *a, const void *b) { return strcmp(((const kv_key *)a)->key, ((const kv_key *)b)->key); }

/* A string at the cursor (length + bytes), checked against GGUF's limit and the file. */
static qtk_status read_string(gguf_cur *cur, const char *what, const uint8_t **s, uint64_t *n) {
    if (cur->len - cur->pos < 8)
        return qtk__err(QTK_E_FORMAT, "truncated: %s: the length needs 8 bytes at offset %zu but the file ends at %zu", what,
                        cur->pos, cur->len);
    *n = ld64(cur->p + cur->pos);
    if (*n > GGUF_MAX_STRING)
        return qtk__err(QTK_E_FORMAT, "%s: a length of %" PRIu64 " bytes at offset %zu exceeds GGUF's limit of 1 GiB", what, *n,
                        cur->pos);
    cur->pos += 8;
    if (*n > cur->len - cur->pos)
        return qtk__err(QTK_E_FORMAT, "truncated: %s: %" PRIu64 " bytes at offset %zu run past the end of the file (%zu bytes)",
                        what, *n, cur->pos, cur->len);
    *s = cur->p + cur->pos;
    cur->pos += (size_t)*n;
    return QTK_OK;
}

static qtk_status read_u32(gguf_cur *cur, const char *what, uint32_t *v) {
    if (cur->len - cur->pos < 4)
        return qtk__err(QTK_E_FORMAT, "truncated: %s needs 4 bytes at offset %zu but the file ends at %zu", what, cur->pos,
                        cur->len);
    *v = qtk__ld32(cur->p + cur->pos);
    cur->pos += 4;
    return QTK_OK;
}

static qtk_status read_u64(gguf_cur *cur, const char *what, uint64_t *v) {
    if (cur->len - cur->pos < 8)
        return qtk__err(QTK_E_FORMAT, "truncated: %s needs 8 bytes at offset %zu but the file ends at %zu", what, cur->pos,
                        cur->len);
    *v = ld64(cur->p + cur->pos);
    cur->pos += 8;
    return QTK_OK;
}

/* A "qtk.param_id.NAME" KV, applied once the tensors exist. */
typedef struct {
    const char *key, *text;
    uint64_t id;
} pending_pid;

typedef struct {
    qtk__arena tmp;
    kv_key *keys;
    pending_pid *pids;
    size_t n_pids;
    uint32_t align;
} kv_state;

#define SCALAR_PREFIX "qtk.scalar."
#define PARAM_PREFIX "qtk.param_id."

/* Records burnpack scalars and parameter ids that a qtk-written GGUF carries as KVs
 * (docs/gguf.md); true if the KV was one. */
static bool take_qtk_kv(qtk_ckpt *c, kv_state *ks, const char *key, uint32_t type, const uint8_t *val, const char *text,
                        qtk_status *st) {
    if (strncmp(key, SCALAR_PREFIX, strlen(SCALAR_PREFIX)) == 0 && key[strlen(SCALAR_PREFIX)]) {
        qtk_ckpt_scalar s = {.name = key + strlen(SCALAR_PREFIX)};
        uint64_t u = type == GGUF_BOOL ? val[0] : type == GGUF_I64 || type == GGUF_U64 || type == GGUF_F64 ? ld64(val) : 0;
        if (type == GGUF_I64) s.kind = QTK_SCALAR_INT, s.i = (int64_t)u;
        else if (type == GGUF_U64) s.kind = QTK_SCALAR_UINT, s.u = u;
        else if (type == GGUF_F64) s.kind = QTK_SCALAR_FLOAT, memcpy(&s.f, &u, 8);
        else if (type == GGUF_BOOL) s.kind = QTK_SCALAR_BOOL, s.b = u != 0;
        else return false;
        *st = qtk__desc_add_scalar(&c->desc, &s);
        return true;
    }
    if (strncmp(key, PARAM_PREFIX, strlen(PARAM_PREFIX)) == 0 && type == GGUF_U64) {
        pending_pid *p = &ks->pids[ks->n_pids++];
        p->key = qtk__arena_strdup(&ks->tmp, key);
        p->text = qtk__arena_strdup(&ks->tmp, text);
        p->id = ld64(val);
        if (!p->key || !p->text) *st = qtk__err(QTK_E_NOMEM, "out of memory");
        return true;
    }
    return false;
}

static qtk_status parse_kvs(qtk_ckpt *c, gguf_cur *cur, uint64_t n_kv, kv_state *ks) {
    ks->align = GGUF_DEFAULT_ALIGN;
    ks->keys = malloc((n_kv ? n_kv : 1) * sizeof *ks->keys);
    ks->pids = malloc((n_kv ? n_kv : 1) * sizeof *ks->pids);
    if (!ks->keys || !ks->pids) return qtk__err(QTK_E_NOMEM, "out of memory for %" PRIu64 " KV records", n_kv);
    gguf_text text = {0};
    qtk_status st = QTK_OK;
    for (uint64_t i = 0; i < n_kv && !st; i++) {
        char what[160];
        snprintf(what, sizeof what, "KV %" PRIu64 " (at offset %zu)", i, cur->pos);
        const uint8_t *ks_p;
        uint64_t kn;
        uint32_t type = 0;
        st = read_string(cur, what, &ks_p, &kn);
        if (st) break;
        if (kn == 0) {
            st = qtk__err(QTK_E_FORMAT, "%s: the key is empty", what);
            break;
        }
        if (!qtk__utf8_ok((const char *)ks_p, (size_t)kn)) {
            st = qtk__err(QTK_E_FORMAT, "%s: the key (%" PRIu64 " bytes) is not valid UTF-8 or holds a NUL", what, kn);
            break;
        }
        char *key = qtk__arena_strndup(&ks->tmp, (const char *)ks_p, (size_t)kn);
        if (!key) {
            st = qtk__err(QTK_E_NOMEM, "out of memory");
            break;
        }
        ks->keys[i] = (kv_key){key, i};
        snprintf(what, sizeof what, "KV %" PRIu64 " '%.80s'", i, key);
        st = read_u32(cur, what, &type);
        if (st) break;
        if (type >= GGUF_KV_TYPES) {
            st = qtk__err(QTK_E_FORMAT, "%s: unknown value type %u at offset %zu (GGUF defines 0..12)", what, type, cur->pos - 4);
            break;
        }
        size_t at = cur->pos;
        text.n = 0;
        st = qtk__gguf_read_value(cur, type, &text, what);
        if (st) break;
        const uint8_t *val = cur->p + at;
        if (strcmp(key, "general.alignment") == 0) {
            /* ggml and gguf-py: UINT32 only, a non-zero power of two (§1.6) */
            if (type != GGUF_U32) {
                st = qtk__err(QTK_E_FORMAT, "%s has type %s; it must be u32", what, qtk__gguf_kv_type_name(type));
                break;
            }
            uint32_t a = qtk__ld32(val);
            if (a == 0 || (a & (a - 1))) {
                st = qtk__err(QTK_E_FORMAT, "%s = %u is not a power of two", what, a);
                break;
            }
            ks->align = a;
        }
        if (!take_qtk_kv(c, ks, key, type, val, text.p ? text.p : "", &st))
            st = qtk__desc_add_meta(&c->desc, key, text.p ? text.p : "");
    }
    qtk__gguf_text_free(&text);
    if (st) return st;
    /* duplicate keys */
    qsort(ks->keys, (size_t)n_kv, sizeof *ks->keys, cmp_key);
    for (uint64_t i = 1; i < n_kv; i++)
        if (strcmp(ks->keys[i - 1].key, ks->keys[i].key) == 0) {
            uint64_t a = ks->keys[i - 1].index, b = ks->keys[i].index;
            return qtk__err(QTK_E_FORMAT, "the key '%s' appears twice (KV %" PRIu64 " and KV %" PRIu64 ")", ks->keys[i].key,
                            a < b ? a : b, a < b ? b : a);
        }
    return QTK_OK;
}

/* ---- tensor infos ---- */

typedef struct {
    const char *name;
    uint64_t index;
    uint32_t n_dims, type;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t offset;      /* relative to the data section */
    size_t nbytes, numel;
    size_t abs;           /* absolute file offset */
    size_t companion_of;  /* a companion: the NVFP4 tensor's info index, else SIZE_MAX */
    size_t g_index;       /* NVFP4 with a companion: its info index, else SIZE_MAX */
} tinfo;

static qtk_status parse_info(gguf_cur *cur, uint64_t i, qtk__arena *a, tinfo *t) {
    char what[160];
    snprintf(what, sizeof what, "tensor info %" PRIu64 " (at offset %zu)", i, cur->pos);
    memset(t, 0, sizeof *t);
    t->index = i;
    t->companion_of = SIZE_MAX;
    t->g_index = SIZE_MAX;
    const uint8_t *s;
    uint64_t n;
    qtk_status st = read_string(cur, what, &s, &n);
    if (st) return st;
    if (n > GGUF_MAX_NAME)
        return qtk__err(QTK_E_FORMAT, "%s: the name is %" PRIu64 " bytes; ggml's limit is %u", what, n, GGUF_MAX_NAME);
    if (!qtk__utf8_ok((const char *)s, (size_t)n))
        return qtk__err(QTK_E_FORMAT, "%s: the name (%" PRIu64 " bytes at offset %zu) is not valid UTF-8 or holds a NUL", what, n,
                        cur->pos - (size_t)n);
    if (!(t->name = qtk__arena_strndup(a, (const char *)s, (size_t)n))) return qtk__err(QTK_E_NOMEM, "out of memory");
    snprintf(what, sizeof what, "tensor '%s'", t->name);
    if ((st = read_u32(cur, what, &t->n_dims))) return st;
    if (t->n_dims > GGUF_MAX_DIMS)
        return qtk__err(QTK_E_FORMAT, "%s: n_dims = %u at offset %zu; GGUF tensors have at most 4", what, t->n_dims, cur->pos - 4);
    for (unsigned d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (unsigned d = 0; d < t->n_dims; d++) {
        if ((st = read_u64(cur, what, &t->ne[d]))) return st;
        if (t->ne[d] > (uint64_t)INT64_MAX)
            return qtk__err(QTK_E_FORMAT, "%s: ne[%u] = %" PRIu64 " is negative as the int64 GGUF stores", what, d, t->ne[d]);
    }
    if ((st = read_u32(cur, what, &t->type))) return st;
    const gguf_type *ty = qtk__gguf_type(t->type);
    if (!ty)
        return qtk__err(QTK_E_FORMAT, "%s: unknown ggml type %u at offset %zu (ggml d99724f2 defines 0..%d)", what, t->type,
                        cur->pos - 4, QTK__GGUF_TYPE_COUNT - 1);
    if (ty->kind == GK_REMOVED)
        return qtk__err(QTK_E_FORMAT, "%s: ggml type %u was removed from ggml (an old Q4_2/Q4_3 or repacked Q4_0/IQ4_NL id)", what,
                        t->type);
    if ((st = read_u64(cur, what, &t->offset))) return st;
    /* element count: ggml's int64 rule, then size_t */
    uint64_t numel = 1;
    for (unsigned d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && numel > (uint64_t)INT64_MAX / t->ne[d])
            return qtk__err(QTK_E_SHAPE, "%s: the element count of ne = [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "] overflows int64",
                            what, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        numel *= t->ne[d];
    }
    if (numel > SIZE_MAX) return qtk__err(QTK_E_SHAPE, "%s: %" PRIu64 " elements do not fit in size_t", what, numel);
    t->numel = (size_t)numel;
    if (t->ne[0] % ty->blck)
        return qtk__err(QTK_E_SHAPE, "%s: ne[0] = %" PRIu64 " is not a multiple of %s's block of %u elements", what, t->ne[0],
                        ty->name, ty->blck);
    /* bytes = ne[0] / blck x block bytes x ne[1] x ne[2] x ne[3] */
    size_t nb = (size_t)(numel / ty->blck), bytes;
    if (!qtk__mul_ok(nb, ty->bytes, &bytes)) return qtk__err(QTK_E_SHAPE, "%s: its byte size overflows size_t", what);
    t->nbytes = bytes;
    return QTK_OK;
}

static int cmp_name(const void *a, const void *b) {
    const tinfo *x = *(const tinfo *const *)a, *y = *(const tinfo *const *)b;
    return strcmp(x->name, y->name);
}
static int cmp_offset(const void *a, const void *b) {
    const tinfo *x = *(const tinfo *const *)a, *y = *(const tinfo *const *)b;
    if (x->abs != y->abs) return x->abs < y->abs ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static tinfo *find_name(tinfo **by_name, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(by_name[mid]->name, name);
        if (c == 0) return by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* NVFP4's companion global scale (GGUF.md §1.11, decision §3.6.4): an F32 tensor of one
 * element named "<stem>.scale" (stem = the name without ".weight"), else "<name>.scale". */
static void find_companions(tinfo *t, size_t n, tinfo **by_name) {
    char buf[2 * GGUF_MAX_NAME + 16];
    for (size_t i = 0; i < n; i++) {
        if (t[i].type != 40) continue;
        const char *nm = t[i].name;
        size_t nl = strlen(nm);
        for (int form = 0; form < 2 && t[i].g_index == SIZE_MAX; form++) {
            if (form == 0) {
                if (nl < 7 || strcmp(nm + nl - 7, ".weight") != 0) continue;
                snprintf(buf, sizeof buf, "%.*s.scale", (int)(nl - 7), nm);
            } else {
                snprintf(buf, sizeof buf, "%s.scale", nm);
            }
            tinfo *g = find_name(by_name, n, buf);
            if (g && g->type == 0 && g->numel == 1 && g->companion_of == SIZE_MAX) {
                g->companion_of = i;
                t[i].g_index = (size_t)(g - t);
            }
        }
    }
}

static qtk_status check_layout(tinfo *t, size_t n, tinfo **by_off, size_t data_start, uint32_t align, size_t len) {
    for (size_t i = 0; i < n; i++) {
        if (t[i].offset % align)
            return qtk__err(QTK_E_FORMAT, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %u", t[i].name,
                            t[i].offset, align);
        size_t end;
        if (t[i].offset > len || !qtk__add_ok(data_start, (size_t)t[i].offset, &t[i].abs) ||
            !qtk__add_ok(t[i].abs, t[i].nbytes, &end) || end > len)
            return qtk__err(QTK_E_FORMAT,
                            "truncated: tensor '%s' (%s, %zu bytes at data offset %" PRIu64 ", file offset %zu + %" PRIu64
                            ") runs past the end of the file (%zu bytes)",
                            t[i].name, qtk__gguf_type_name(t[i].type), t[i].nbytes, t[i].offset, data_start, t[i].offset, len);
        by_off[i] = &t[i];
    }
    qsort(by_off, n, sizeof *by_off, cmp_offset);
    for (size_t i = 1; i < n; i++) {
        const tinfo *p = by_off[i - 1], *q = by_off[i];
        if (q->abs < p->abs + p->nbytes)
            return qtk__err(QTK_E_FORMAT, "tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap (file offsets)", p->name, p->abs,
                            p->abs + p->nbytes, q->name, q->abs, q->abs + q->nbytes);
    }
    return QTK_OK;
}

/* Adds tensor t to the description with the shape ne reversed (§4). */
static qtk_status describe(qtk_ckpt *c, const tinfo *t, const tinfo *all, gguf_rtensor *rt) {
    const gguf_type *ty = qtk__gguf_type(t->type);
    size_t shape[GGUF_MAX_DIMS];
    int rank = (int)t->n_dims;
    for (int d = 0; d < rank; d++) shape[d] = (size_t)t->ne[rank - 1 - d];
    qtk_ckpt_tensor *dt = NULL;
    qtk_status st;
    if (ty->kind == GK_EXACT || ty->kind == GK_NATIVE) {
        qtk_scheme s;
        st = qtk_scheme_parse(t->g_index != SIZE_MAX ? "nvfp4" : ty->spec, &s);
        if (!st) st = qtk__desc_add_quantized(&c->desc, t->name, &s, shape, rank, &dt);
    } else {
        st = qtk__desc_add_raw(&c->desc, t->name, ty->elem, shape, rank, &dt);
    }
    if (st) return st;
    dt->file_type = ty->name;
    dt->file_bytes = t->nbytes;
    dt->decoded = false;
    *rt = (gguf_rtensor){t->type, t->abs, t->nbytes, SIZE_MAX};
    qtk__ckpt_loc loc = {.piece = {{t->abs, t->nbytes}}, .n = 1};
    if (t->g_index != SIZE_MAX) {
        rt->g_off = all[t->g_index].abs;
        loc.piece[1] = (qtk__ckpt_piece){rt->g_off, 4};
        loc.n = 2;
    }
    return qtk__ckpt_add_loc(c, &loc);
}

/* Parameter ids carried as "qtk.param_id.NAME" u64 KVs; a key that names no tensor stays
 * ordinary metadata. */
static qtk_status apply_pids(qtk_ckpt *c, const kv_state *ks, tinfo **by_name, size_t n) {
    for (size_t k = 0; k < ks->n_pids; k++) {
        const pending_pid *p = &ks->pids[k];
        tinfo *t = find_name(by_name, n, p->key + strlen(PARAM_PREFIX));
        bool done = false;
        for (size_t i = 0; t && t->companion_of == SIZE_MAX && i < c->desc.n_tensors && !done; i++)
            if (strcmp(c->desc.tensors[i].name, t->name) == 0) {
                c->desc.tensors[i].has_param_id = true;
                c->desc.tensors[i].param_id = p->id;
                done = true;
            }
        if (!done) {
            qtk_status st = qtk__desc_add_meta(&c->desc, p->key, p->text);
            if (st) return st;
        }
    }
    return QTK_OK;
}

static qtk_status build(qtk_ckpt *c, gguf_cur *cur, uint64_t n_tensors, kv_state *ks, gguf_reader *r) {
    size_t n = (size_t)n_tensors;
    tinfo *t = malloc((n ? n : 1) * sizeof *t);
    tinfo **by_name = malloc((n ? n : 1) * sizeof *by_name), **by_off = malloc((n ? n : 1) * sizeof *by_off);
    r->t = malloc((n ? n : 1) * sizeof *r->t);
    qtk_status st = !t || !by_name || !by_off || !r->t ? qtk__err(QTK_E_NOMEM, "out of memory for %zu tensor infos", n) : QTK_OK;
    if (!st) st = qtk__desc_reserve(&c->desc, n); /* no slack in the per-tensor arrays */
    if (!st) st = qtk__ckpt_reserve_loc(c, n);
    for (size_t i = 0; i < n && !st; i++) st = parse_info(cur, i, &ks->tmp, &t[i]);
    if (!st) {
        for (size_t i = 0; i < n; i++) by_name[i] = &t[i];
        qsort(by_name, n, sizeof *by_name, cmp_name);
        for (size_t i = 1; i < n && !st; i++)
            if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0) {
                uint64_t a = by_name[i - 1]->index, b = by_name[i]->index;
                st = qtk__err(QTK_E_FORMAT, "the tensor name '%s' appears twice (tensor infos %" PRIu64 " and %" PRIu64 ")",
                              by_name[i]->name, a < b ? a : b, a < b ? b : a);
            }
    }
    size_t data_start = cur->pos;
    if (!st && n > 0) {
        /* the data section starts at the end of the infos rounded up to the alignment; with
         * no tensors ggml does not round (§1.6) */
        if (!qtk__add_ok(cur->pos, ks->align - 1, &data_start))
            st = qtk__err(QTK_E_FORMAT, "the data section start overflows");
        data_start = data_start / ks->align * ks->align;
        if (!st && data_start > cur->len)
            st = qtk__err(QTK_E_FORMAT,
                          "truncated: the tensor infos end at %zu, so the data section starts at %zu (alignment %u), beyond the "
                          "end of the file (%zu bytes)",
                          cur->pos, data_start, ks->align, cur->len);
    }
    if (!st) st = check_layout(t, n, by_off, data_start, ks->align, cur->len);
    if (!st) find_companions(t, n, by_name);
    for (size_t i = 0; i < n && !st; i++) {
        const tinfo *ti = by_off[i];
        if (ti->companion_of != SIZE_MAX) continue;
        st = describe(c, ti, t, &r->t[r->n]);
        if (!st) r->n++;
    }
    if (!st) st = apply_pids(c, ks, by_name, n);
    c->facts.header_bytes = data_start;
    c->facts.data_start = data_start;
    free(t);
    free(by_name);
    free(by_off);
    return st;
}

static qtk_status gguf_parse(qtk_ckpt *c) {
    uint32_t version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    qtk_status st = parse_header(c->map.data, c->map.len, &version, &n_tensors, &n_kv);
    if (st) return st;
    gguf_reader *r = calloc(1, sizeof *r);
    if (!r) return qtk__err(QTK_E_NOMEM, "out of memory");
    c->priv = r;
    gguf_cur cur = {c->map.data, c->map.len, 24};
    kv_state ks = {0};
    st = parse_kvs(c, &cur, n_kv, &ks);
    if (!st) st = build(c, &cur, n_tensors, &ks, r);
    free(ks.keys);
    free(ks.pids);
    qtk__arena_free(&ks.tmp);
    if (st) return st;
    snprintf(c->facts.note, sizeof c->facts.note, "GGUF v%u, %" PRIu64 " KVs, %" PRIu64 " tensor infos, alignment %u, data at byte %zu",
             version, n_kv, n_tensors, ks.align, c->facts.data_start);
    return QTK_OK;
}

/* ---- loading ---- */

static qtk_status gguf_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v) {
    const gguf_reader *r = c->priv;
    const gguf_rtensor *rt = &r->t[i];
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    const gguf_type *ty = qtk__gguf_type(rt->type);
    static const uint8_t empty[1];
    const uint8_t *src = rt->len ? c->map.data + rt->off : empty;
    size_t nb = rt->len / ty->bytes;
    if (ty->kind == GK_NATIVE) /* ggml's blocks held as they are (store=ggml): checked here to name the file offset */
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + b * ty->bytes;
            for (int k = 0; k < 2; k++) {
                int at = k ? ty->m_at : ty->d_at;
                uint16_t h = at >= 0            ? qtk__ld16(blk + at)
                             : at == GGUF_D_IQ1M ? (uint16_t)((blk[49] >> 4) | (blk[51] & 0xf0u) | (blk[53] >> 4) << 8 |
                                                              (blk[55] & 0xf0u) << 8)
                                                 : 0;
                if ((h & 0x7c00u) == 0x7c00u)
                    return qtk__err(QTK_E_VALUE, "%s block %zu (file offset %zu): %s (f16 0x%04x) is not finite", ty->name, b,
                                    rt->off + b * ty->bytes, k == 0 ? "d" : ty->blck == 32 ? "m" : "dmin", h);
            }
        }
    if (ty->kind == GK_RAW || ty->kind == GK_NATIVE) {
        /* little-endian elements, or ggml's blocks: the file's bytes are the tensor's */
        v->data = src;
        return QTK_OK;
    }
    uint8_t *buf = malloc(t->nbytes ? t->nbytes : 1);
    if (!buf) return qtk__err(QTK_E_NOMEM, "out of memory for %zu bytes", t->nbytes);
    v->owned = buf;
    v->data = buf;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (!st) st = qtk__gguf_import(rt->type, src, nb, &L, buf, rt->off);
    if (!st && L.global_bytes) memcpy(buf + L.global_offset, c->map.data + rt->g_off, 4);
    if (!st && L.table_bytes) {
        float k[16];
        size_t n = 0;
        st = qtk_table_get(t->scheme.table, k, 16, &n);
        for (size_t j = 0; !st && j < n && j < L.table_entries; j++) qtk__st32(buf + L.table_offset + 4 * j, qtk__f32_bits(k[j]));
    }
    return st;
}

static void gguf_close(qtk_ckpt *c) {
    gguf_reader *r = c->priv;
    if (!r) return;
    free(r->t);
    free(r);
    c->priv = NULL;
}

static bool gguf_can_hold(const qtk_ckpt_tensor *t, char *why, size_t cap) {
    return qtk__gguf_writable(t, t->file_type, why, cap);
}

const qtk__ckpt_ops qtk__gguf_ops = {
    .fmt = QTK_CKPT_GGUF,
    .name = "gguf",
    .signature = "GGUF magic",
    .ext = ".gguf",
    .sniff = gguf_sniff,
    .parse = gguf_parse,
    .begin = qtk__gguf_begin,
    .put = qtk__gguf_put,
    .load = gguf_load,
    .can_hold = gguf_can_hold,
    .close = gguf_close,
    .wfree = qtk__gguf_wfree,
};

qtk_status qtk__gguf_tensor_scale_records(const qtk_ckpt *c, size_t i, char **out) {
    *out = NULL;
    if (!c || c->ops != &qtk__gguf_ops || !c->priv || i >= c->desc.n_tensors) return QTK_OK;
    const gguf_reader *r = c->priv;
    const gguf_rtensor *rt = &r->t[i];
    const gguf_type *ty = qtk__gguf_type(rt->type);
    if (!ty || ty->kind != GK_EXACT || !ty->bytes) return QTK_OK;
    qtk_status st = qtk__gguf_scale_records(rt->type, c->map.data + rt->off, rt->len / ty->bytes, out);
    qtk_status fs = qtk_ckpt_status(c); /* the blocks were read from the map */
    if (fs) {
        free(*out);
        *out = NULL;
        return fs;
    }
    return st;
}
