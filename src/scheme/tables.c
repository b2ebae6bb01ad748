/* tables.c — lookup tables: the built-in codebooks and a registry for caller tables. */
#include "scheme_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>

#define QTK_MAX_TABLES 64

typedef struct {
    char name[QTK_TABLE_NAME_MAX];
    size_t n;
    float v[256];
} table_entry;

/* bitsandbytes' NF4 code: quantiles of N(0,1) normalised to [-1, 1], 0 at index 7. */
static const float nf4_values[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

/* ggml's IQ4_NL codebook (integers), as f32. */
static const float iq4nl_values[16] = {
    -127.0f, -104.0f, -83.0f, -65.0f, -49.0f, -35.0f, -22.0f, -10.0f,
    1.0f,    13.0f,   25.0f,  38.0f,  53.0f,  69.0f,  89.0f,  113.0f,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static table_entry user_tables[QTK_MAX_TABLES];
static size_t n_user;

/* file tables (qtk__table_acquire): any number, each with its reference count */
typedef struct {
    table_entry t;
    size_t refs;
} file_table;
static file_table *file_tables;
static size_t n_file, cap_file;

static file_table *file_find(const char *lower) {
    for (size_t i = 0; i < n_file; i++)
        if (strcmp(file_tables[i].t.name, lower) == 0) return &file_tables[i];
    return NULL;
}

static bool valid_name(const char *name, char *lower) {
    size_t n = strlen(name);
    if (n == 0 || n >= QTK_TABLE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '_' && c != '-') return false;
        lower[i] = (char)tolower(c);
    }
    lower[n] = '\0';
    return true;
}

static const float *builtin(const char *lower) {
    if (strcmp(lower, "nf4") == 0) return nf4_values;
    if (strcmp(lower, "iq4nl") == 0) return iq4nl_values;
    return NULL;
}

bool qtk__table_is_fit(const char *name) {
    char lower[QTK_TABLE_NAME_MAX];
    return valid_name(name, lower) && strcmp(lower, QTK_TABLE_FIT) == 0;
}

void qtk__table_fit_seed(float *out, size_t n) {
    if (n == 16) {
        memcpy(out, nf4_values, sizeof nf4_values);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = -1.0f + 2.0f * (float)i / (float)(n - 1);
}

qtk_status qtk__table_find(const char *name, float *out, size_t *n) {
    char lower[QTK_TABLE_NAME_MAX];
    if (!valid_name(name, lower)) return qtk__err(QTK_E_NOTFOUND, "no lookup table named '%s'", name);
    if (strcmp(lower, QTK_TABLE_FIT) == 0)
        return qtk__err(QTK_E_NOTFOUND, "table 'fit' is fitted to each tensor: its entries are in that tensor's bytes, not in the registry");
    const float *b = builtin(lower);
    if (b) {
        memcpy(out, b, 16 * sizeof(float));
        *n = 16;
        return QTK_OK;
    }
    qtk_status st = QTK_E_NOTFOUND;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_user; i++) {
        if (strcmp(user_tables[i].name, lower) == 0) {
            memcpy(out, user_tables[i].v, user_tables[i].n * sizeof(float));
            *n = user_tables[i].n;
            st = QTK_OK;
            break;
        }
    }
    const file_table *f = st ? file_find(lower) : NULL;
    if (f) {
        memcpy(out, f->t.v, f->t.n * sizeof(float));
        *n = f->t.n;
        st = QTK_OK;
    }
    pthread_mutex_unlock(&lock);
    if (st) return qtk__err(st, "no lookup table named '%s' (built in: nf4, iq4nl; others must be registered with qtk_table_register)", name);
    return QTK_OK;
}

qtk_status qtk_table_register(const char *name, const float *entries, size_t n) {
    char lower[QTK_TABLE_NAME_MAX];
    if (!name || !entries) return qtk__err(QTK_E_ARG, "qtk_table_register: NULL argument");
    if (!valid_name(name, lower))
        return qtk__err(QTK_E_ARG, "table name '%s' must be 1..%d letters, digits, '_' or '-'", name,
                        QTK_TABLE_NAME_MAX - 1);
    if (builtin(lower)) return qtk__err(QTK_E_ARG, "table '%s' is built in and cannot be replaced", lower);
    if (strcmp(lower, QTK_TABLE_FIT) == 0)
        return qtk__err(QTK_E_ARG, "table name 'fit' is reserved for tables fitted to each tensor (table=fit)");
    if (n != 4 && n != 16 && n != 256)
        return qtk__err(QTK_E_ARG, "table '%s' has %zu entries; a table has 2^bits entries: 4, 16 or 256", lower, n);
    for (size_t i = 0; i < n; i++)
        if (!qtk__isfinite(entries[i]))
            return qtk__err(QTK_E_VALUE, "table '%s' entry %zu is not finite", lower, i);
    qtk_status st = QTK_OK;
    pthread_mutex_lock(&lock);
    size_t slot = n_user;
    for (size_t i = 0; i < n_user; i++)
        if (strcmp(user_tables[i].name, lower) == 0) slot = i;
    if (slot == QTK_MAX_TABLES) {
        st = QTK_E_UNSUPPORTED;
    } else {
        memcpy(user_tables[slot].name, lower, sizeof lower);
        user_tables[slot].n = n;
        memcpy(user_tables[slot].v, entries, n * sizeof(float));
        if (slot == n_user) n_user++;
    }
    pthread_mutex_unlock(&lock);
    if (st) return qtk__err(st, "cannot register table '%s': %d tables are registered already", lower, QTK_MAX_TABLES);
    return QTK_OK;
}

qtk_status qtk_table_get(const char *name, float *out, size_t cap, size_t *n) {
    if (!name || !n) return qtk__err(QTK_E_ARG, "qtk_table_get: NULL argument");
    float tmp[256];
    size_t k = 0;
    qtk_status st = qtk__table_find(name, tmp, &k);
    if (st) return st;
    *n = k;
    if (out) memcpy(out, tmp, (k < cap ? k : cap) * sizeof(float));
    return QTK_OK;
}

qtk_status qtk__table_acquire(const char *name, const float *v, size_t n) {
    char lower[QTK_TABLE_NAME_MAX];
    if (!name || !v || !valid_name(name, lower)) return qtk__err(QTK_E_ARG, "a file table needs a valid name");
    if (n != 4 && n != 16 && n != 256) return qtk__err(QTK_E_ARG, "table '%s' has %zu entries", lower, n);
    for (size_t i = 0; i < n; i++)
        if (!qtk__isfinite(v[i])) return qtk__err(QTK_E_VALUE, "table '%s' entry %zu is not finite", lower, i);
    if (builtin(lower)) return qtk__err(QTK_E_ARG, "table '%s' is built in", lower);
    qtk_status st = QTK_OK;
    pthread_mutex_lock(&lock);
    bool user = false;
    for (size_t i = 0; i < n_user && !user; i++) user = strcmp(user_tables[i].name, lower) == 0;
    file_table *f = user ? NULL : file_find(lower);
    if (user) {
        st = qtk__err(QTK_E_ARG, "table '%s' is registered (qtk_table_register)", lower);
    } else if (f) {
        if (f->t.n == n && memcmp(f->t.v, v, n * sizeof(float)) == 0) f->refs++;
        else st = qtk__err(QTK_E_ARG, "a file table named '%s' with other entries is in use", lower);
    } else {
        if (n_file == cap_file) {
            size_t cap = cap_file ? 2 * cap_file : 8;
            file_table *g = realloc(file_tables, cap * sizeof *g); /* the registry's own: plain malloc */
            if (!g) st = qtk__err(QTK_E_NOMEM, "out of memory for table '%s'", lower);
            else file_tables = g, cap_file = cap;
        }
        if (!st) {
            f = &file_tables[n_file++];
            memset(f, 0, sizeof *f);
            memcpy(f->t.name, lower, sizeof lower);
            f->t.n = n;
            memcpy(f->t.v, v, n * sizeof(float));
            f->refs = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}

void qtk__table_release(const char *name) {
    char lower[QTK_TABLE_NAME_MAX];
    if (!name || !valid_name(name, lower)) return;
    pthread_mutex_lock(&lock);
    file_table *f = file_find(lower);
    if (f && --f->refs == 0) {
        *f = file_tables[--n_file]; /* order does not matter */
        if (n_file == 0) {
            free(file_tables);
            file_tables = NULL;
            cap_file = 0;
        }
    }
    pthread_mutex_unlock(&lock);
}

int qtk__table_is_file(const char *name) {
    char lower[QTK_TABLE_NAME_MAX];
    if (!name || !valid_name(name, lower)) return 0;
    pthread_mutex_lock(&lock);
    int r = file_find(lower) != NULL;
    pthread_mutex_unlock(&lock);
    return r;
}
