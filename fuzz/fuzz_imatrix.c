/* fuzz_imatrix.c — llama.cpp importance matrices (GGUF and the legacy .dat), from memory.
 *
 * Oracles: the input opens or fails with a data error and a message; every entry has a name,
 * columns >= 1, experts >= 1 and columns × experts finite, non-negative weights; each entry
 * is what qtk_imatrix_lookup gives for its own name; a name that is no entry's is NOTFOUND; an
 * entry with a llama.cpp name ("blk.3.attn_q.weight") is what the Hugging Face name mapping to
 * it gives ("model.layers.3.self_attn.q_proj.weight"), and expert E of a per-expert entry
 * ("blk.3.ffn_up_exps.weight") is its E-th row of weights, E = experts not found. */
#include "fuzz_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_entry(const qtk_imatrix *m, const char *name) {
    for (size_t i = 0; i < qtk_imatrix_count(m); i++)
        if (strcmp(qtk_imatrix_entry_at(m, i)->name, name) == 0) return true;
    return false;
}

/* a few of the mapped names (docs/imatrix.md has them all) */
static const char *const dense[][2] = {{"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
                                       {"ffn_down", "mlp.down_proj"},   {"attn_norm", "input_layernorm"}};
static const char *const experts[][2] = {{"ffn_up_exps", "up_proj"}, {"ffn_gate_exps", "gate_proj"},
                                         {"ffn_down_exps", "down_proj"}};

static void hf_lookups(const qtk_imatrix *m, const qtk_imatrix_entry *e) {
    unsigned long layer;
    int at = 0;
    if (sscanf(e->name, "blk.%lu.%n", &layer, &at) != 1 || at == 0) return;
    char canon[600], hf[600];
    qtk_imatrix_entry l;
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        snprintf(canon, sizeof canon, "blk.%lu.%s.weight", layer, dense[i][0]);
        if (strcmp(canon, e->name) != 0) continue;
        snprintf(hf, sizeof hf, "model.layers.%lu.%s.weight", layer, dense[i][1]);
        if (has_entry(m, hf)) continue; /* its own entry comes first */
        FZ_CHECK(qtk_imatrix_lookup(m, hf, &l) == QTK_OK && l.weights == e->weights && l.columns == e->columns &&
                     l.experts == e->experts,
                 "'%s' does not look up as '%s'", hf, e->name);
    }
    for (size_t i = 0; i < sizeof experts / sizeof experts[0]; i++) {
        snprintf(canon, sizeof canon, "blk.%lu.%s.weight", layer, experts[i][0]);
        if (strcmp(canon, e->name) != 0) continue;
        size_t picks[3] = {0, e->experts - 1, e->experts};
        for (size_t k = 0; k < 3; k++) {
            snprintf(hf, sizeof hf, "model.layers.%lu.mlp.experts.%zu.%s.weight", layer, picks[k], experts[i][1]);
            if (has_entry(m, hf)) continue;
            qtk_status st = qtk_imatrix_lookup(m, hf, &l);
            if (picks[k] < e->experts)
                FZ_CHECK(st == QTK_OK && l.experts == 1 && l.columns == e->columns &&
                             l.weights == e->weights + picks[k] * e->columns,
                         "'%s' is not expert %zu of '%s'", hf, picks[k], e->name);
            else
                FZ_CHECK(st == QTK_E_NOTFOUND, "'%s' is found though '%s' has %zu experts", hf, e->name, e->experts);
        }
    }
}

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
            hf_lookups(m, e);
        }
        qtk_imatrix_entry l;
        FZ_CHECK(qtk_imatrix_lookup(m, "no.such.tensor.qtk-fuzz", &l) == QTK_E_NOTFOUND, "a missing name is found");
        FZ_CHECK(qtk_imatrix_entry_at(m, qtk_imatrix_count(m)) == NULL, "entry_at(count) is not NULL");
        qtk_imatrix_close(m);
    }
    return 0;
}
