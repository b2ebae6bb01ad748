/* fuzz_imatrix.c — llama.cpp importance matrices (GGUF and the legacy .dat), from memory.
 *
 * Oracles: the input opens or fails with a data error and a message; every entry has a name,
 * columns >= 1, experts >= 1 and columns × experts finite, non-negative weights; each entry
 * is what qtk_imatrix_lookup gives for its own name; a name that is no entry's is NOTFOUND. */
#include "fuzz_util.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    for (int k = 0; k < 2; k++) {
        qtk_imatrix *m = NULL;
        qtk_clear_error();
        qtk_status st = qtk_imatrix_open_memory(data, size, k ? "fuzz.dat" : "fuzz.gguf", &m);
        if (st) {
            FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "open: %s without a data error", qtk_status_name(st));
            continue;
        }
        for (size_t i = 0; i < qtk_imatrix_count(m); i++) {
            const qtk_imatrix_entry *e = qtk_imatrix_entry_at(m, i);
            FZ_CHECK(e && e->name && e->weights && e->columns >= 1 && e->experts >= 1, "entry %zu", i);
            for (size_t j = 0; j < e->columns * e->experts; j++)
                FZ_CHECK(isfinite(e->weights[j]) && e->weights[j] >= 0, "entry '%s' weight %zu is %g", e->name, j,
                         (double)e->weights[j]);
            qtk_imatrix_entry l;
            FZ_CHECK(qtk_imatrix_lookup(m, e->name, &l) == QTK_OK, "entry '%s' is not found by its name", e->name);
            FZ_CHECK(l.columns == e->columns && l.experts == e->experts, "entry '%s' looks up as another", e->name);
        }
        qtk_imatrix_entry l;
        FZ_CHECK(qtk_imatrix_lookup(m, "no.such.tensor.qtk-fuzz", &l) == QTK_E_NOTFOUND, "a missing name is found");
        FZ_CHECK(qtk_imatrix_entry_at(m, qtk_imatrix_count(m)) == NULL, "entry_at(count) is not NULL");
        qtk_imatrix_close(m);
    }
    return 0;
}
