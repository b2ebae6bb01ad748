/* luts.c — lookup tables found in files: naming the table a lookup-mode tensor's entries are
 * (see qtk__ckpt_resolve_table in ckpt_internal.h). */
#include "io/ckpt_internal.h"

#include <stdio.h>

static bool same_table(const char *name, const float *v, size_t n) {
    float t[256];
    size_t k = 0;
    if (!name || !*name || qtk_table_get(name, t, 256, &k) != QTK_OK || k != n) return false;
    return memcmp(t, v, n * sizeof(float)) == 0;
}

qtk_status qtk__ckpt_resolve_table(qtk_scheme *s, const uint8_t *entries, size_t n, const char *hint) {
    float v[256];
    if (n != 4 && n != 16 && n != 256) return qtk__err(QTK_E_INTERNAL, "a table of %zu entries", n);
    for (size_t i = 0; i < n; i++) {
        v[i] = qtk__bits_f32(qtk__ld32(entries + 4 * i));
        if (!qtk__isfinite(v[i])) return qtk__err(QTK_E_VALUE, "lookup table entry %zu is not finite", i);
    }
    const char *name = NULL;
    char derived[QTK_TABLE_NAME_MAX];
    if (same_table(hint, v, n)) name = hint;
    else if (same_table("nf4", v, n)) name = "nf4";
    else if (same_table("iq4nl", v, n)) name = "iq4nl";
    else if (hint && *hint && qtk_table_get(hint, NULL, 0, &(size_t){0}) != QTK_OK &&
             qtk_table_register(hint, v, n) == QTK_OK)
        name = hint; /* the writer's name, free here: keep it */
    else {
        /* FNV-1a over the entries' bytes: the same table always gets the same name, so
         * registering it again is harmless. */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < 4 * n; i++) h = (h ^ entries[i]) * 0x100000001b3ull;
        snprintf(derived, sizeof derived, "lut-%016llx", (unsigned long long)h);
        qtk_status st = qtk_table_register(derived, v, n);
        if (st) return st;
        name = derived;
    }
    memset(s->table, 0, sizeof s->table);
    snprintf(s->table, sizeof s->table, "%s", name);
    return QTK_OK;
}

