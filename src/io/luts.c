/* luts.c — lookup tables found in files: naming the table a lookup-mode tensor's entries are
 * (see qtk__ckpt_resolve_table in ckpt_internal.h), and giving it the checkpoint's lifetime.
 *
 * A table that is neither built in nor registered by the program becomes a file table of
 * libqtk (qtk__table_acquire): counted, one reference per checkpoint that resolved it, kept
 * in the checkpoint's list and released when the checkpoint is freed (qtk_ckpt_close, or the
 * last tensor borrowing it). The same table in many files is one entry (it is named by a hash
 * of its entries, or by the writer's name); a long-running process opening files one after
 * another holds only the tables of the files still open. */
#include "io/ckpt_internal.h"

#include "scheme/scheme_internal.h"

#include <stdio.h>
#include <stdlib.h>

static bool same_table(const char *name, const float *v, size_t n) {
    float t[256];
    size_t k = 0;
    if (!name || !*name || qtk_table_get(name, t, 256, &k) != QTK_OK || k != n) return false;
    return memcmp(t, v, n * sizeof(float)) == 0;
}

/* A reference of c to the file table name (none for built-in and registered tables). */
static qtk_status hold(qtk_ckpt *c, const char *name, const float *v, size_t n) {
    if (!qtk__table_is_file(name) && qtk_table_get(name, NULL, 0, &(size_t){0}) == QTK_OK) return QTK_OK;
    if (!qtk__grow((void **)&c->tables, &c->cap_tables, c->n_tables, sizeof *c->tables))
        return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__table_acquire(name, v, n);
    if (st) return st;
    snprintf(c->tables[c->n_tables++], QTK_TABLE_NAME_MAX, "%s", name);
    return QTK_OK;
}

void qtk__ckpt_release_tables(qtk_ckpt *c) {
    for (size_t i = 0; i < c->n_tables; i++) qtk__table_release(c->tables[i]);
    free(c->tables);
    c->tables = NULL;
    c->n_tables = c->cap_tables = 0;
}

qtk_status qtk__ckpt_resolve_table(qtk_ckpt *c, qtk_scheme *s, const uint8_t *entries, size_t n, const char *hint) {
    float v[256];
    if (n != 4 && n != 16 && n != 256) return qtk__err(QTK_E_INTERNAL, "a table of %zu entries", n);
    for (size_t i = 0; i < n; i++) {
        v[i] = qtk__bits_f32(qtk__ld32(entries + 4 * i));
        if (!qtk__isfinite(v[i])) return qtk__err(QTK_E_VALUE, "lookup table entry %zu is not finite", i);
    }
    const char *name = NULL;
    char derived[QTK_TABLE_NAME_MAX];
    qtk_status st = QTK_OK;
    if (same_table(hint, v, n)) {
        name = hint;
        st = hold(c, name, v, n);
    } else if (same_table("nf4", v, n)) {
        name = "nf4";
    } else if (same_table("iq4nl", v, n)) {
        name = "iq4nl";
    } else if (hint && *hint && qtk_table_get(hint, NULL, 0, &(size_t){0}) != QTK_OK &&
               qtk__table_acquire(hint, v, n) == QTK_OK) {
        /* the writer's name, free here: keep it (acquired just now: counted) */
        if (!qtk__grow((void **)&c->tables, &c->cap_tables, c->n_tables, sizeof *c->tables)) {
            qtk__table_release(hint);
            return qtk__err(QTK_E_NOMEM, "out of memory");
        }
        snprintf(c->tables[c->n_tables++], QTK_TABLE_NAME_MAX, "%s", hint);
        name = hint;
    } else {
        /* FNV-1a over the entries' bytes: the same table always gets the same name, so a
         * second file holding it shares the entry. */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < 4 * n; i++) h = (h ^ entries[i]) * 0x100000001b3ull;
        snprintf(derived, sizeof derived, "lut-%016llx", (unsigned long long)h);
        name = derived;
        st = hold(c, name, v, n);
    }
    if (st) return st;
    memset(s->table, 0, sizeof s->table);
    snprintf(s->table, sizeof s->table, "%s", name);
    return QTK_OK;
}
