/* fuzz_rules.c — the conversion options qtk parses before touching a file (qtk_convert_check):
 * the input's lines are the default scheme, the only and skip regexes, a mixture name and
 * 'REGEX=SPEC' rules, each line's first byte choosing which (so every field is reached).
 *
 * Oracles: the options are accepted, or refused with QTK_E_PARSE / ARG / SCHEME /
 * UNSUPPORTED / NOTFOUND and a message; the same options are accepted twice alike (the check
 * keeps no state). Options accepted are then applied (ops/select.h, what convert does per
 * tensor) to a fixed table of tensors: non-float tensors are kept, a rule's index is in range,
 * a tensor quantized by the default scheme is one eval would measure, skip and only agree with
 * their regexes, a tensor kept as "already in the scheme" is in it. */
#include "fuzz_util.h"
#include "ops/select.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RULES 16

static const size_t sq[2] = {64, 64}, se[2] = {16, 64}, sn[1] = {64}, s1[1] = {1}, s2[2] = {2, 2};
static qtk_ckpt_tensor table[] = {
    {.name = "model.layers.0.self_attn.q_proj.weight", .elem = QTK_ELEM_F32, .rank = 2, .shape = sq, .numel = 4096},
    {.name = "model.embed_tokens.weight", .elem = QTK_ELEM_BF16, .rank = 2, .shape = se, .numel = 1024},
    {.name = "model.layers.0.input_layernorm.weight", .elem = QTK_ELEM_F32, .rank = 1, .shape = sn, .numel = 64},
    {.name = "steps", .elem = QTK_ELEM_I64, .rank = 1, .shape = s1, .numel = 1},
    {.name = "lm_head.weight", .quantized = true, .rank = 2, .shape = sq, .numel = 4096},
    {.name = "tiny", .elem = QTK_ELEM_F16, .rank = 2, .shape = s2, .numel = 4},
};
#define N_TABLE (sizeof table / sizeof table[0])

static void decide_table(const qtk_convert_options *o) {
    static bool ready;
    if (!ready) FZ_CHECK(qtk_scheme_parse("q4f,block=32:f16", &table[4].scheme) == QTK_OK, "the table's scheme");
    ready = true;
    qtk__select sel;
    qtk__select_init(&sel);
    qtk_status st = qtk__select_from(&sel, o->scheme, o->rules, o->n_rules, o->only, o->skip, 0, QTK_DTYPE_NONE);
    FZ_CHECK(st == QTK_OK, "convert_check accepted options the selection refuses: %s", qtk_last_error());
    for (size_t i = 0; i < N_TABLE; i++) {
        const qtk_ckpt_tensor *t = &table[i];
        qtk__decision d;
        qtk__select_decide(&sel, t, i, &d);
        FZ_CHECK(d.act <= QTK_ACT_CAST && d.reason <= QTK_WHY_MIXTURE && d.why[0], "'%s': act %d reason %d", t->name,
                 (int)d.act, (int)d.reason);
        if (!t->quantized && !qtk_elem_is_float(t->elem))
            FZ_CHECK(d.act == QTK_ACT_KEEP && d.reason == QTK_WHY_NOT_FLOAT, "'%s' (not a float) is not kept", t->name);
        /* a rule's target may find the tensor already in its scheme (reason SAME) */
        FZ_CHECK(d.rule >= 0 ? (size_t)d.rule < o->n_rules && (d.reason == QTK_WHY_RULE || d.reason == QTK_WHY_SAME)
                             : d.rule == -1 && d.reason != QTK_WHY_RULE,
                 "'%s': rule %d with reason %d", t->name, d.rule, (int)d.reason);
        if (d.act == QTK_ACT_QUANTIZE) {
            char spec[160];
            FZ_CHECK(qtk_scheme_format(&d.scheme, spec, sizeof spec, NULL) == QTK_OK, "'%s': its scheme has no spec", t->name);
            FZ_CHECK(d.reason == QTK_WHY_RULE || d.reason == QTK_WHY_DEFAULT, "'%s' quantized for reason %d", t->name,
                     (int)d.reason);
        }
        if (d.reason == QTK_WHY_DEFAULT && d.act == QTK_ACT_QUANTIZE)
            FZ_CHECK(qtk__select_eligible(&sel, t), "'%s' is quantized by default but not eligible", t->name);
        if (d.reason == QTK_WHY_SAME)
            FZ_CHECK(t->quantized && d.act == QTK_ACT_KEEP, "'%s' is kept as already in a scheme it is not in", t->name);
        if (d.reason == QTK_WHY_SKIP)
            FZ_CHECK((sel.has_skip && regexec(&sel.skip, t->name, 0, NULL, 0) == 0) ||
                         (sel.has_only && regexec(&sel.only, t->name, 0, NULL, 0) != 0),
                     "'%s' is skipped without skip or only saying so", t->name);
    }
    qtk__select_free(&sel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    FZ_CHECK(text, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    qtk_convert_options o = {0};
    const char *rules[MAX_RULES];
    size_t nr = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!line[0]) continue;
        switch ((unsigned char)line[0] % 6) {
        case 0: o.scheme = line + 1; break;
        case 1: o.only = line + 1; break;
        case 2: o.skip = line + 1; break;
        case 3: o.mixture = line + 1; break;
        default:
            if (nr < MAX_RULES) rules[nr++] = line + 1;
        }
    }
    o.rules = nr ? rules : NULL;
    o.n_rules = nr;
    o.calibration = (qtk_calibration)(size % 3);
    qtk_clear_error();
    qtk_status st = qtk_convert_check(&o);
    FZ_CHECK(st == QTK_OK || ((st == QTK_E_PARSE || st == QTK_E_ARG || st == QTK_E_SCHEME || st == QTK_E_UNSUPPORTED ||
                               st == QTK_E_NOTFOUND) &&
                              qtk_last_error()[0]),
             "convert_check: %s (%s)", qtk_status_name(st), qtk_last_error());
    FZ_CHECK(qtk_convert_check(&o) == st, "a second check of the same options differs");
    if (st == QTK_OK) decide_table(&o);
    free(text);
    return 0;
}
