/* select.c — tensor selection rules (see select.h). */
#include "ops/select.h"

#include "common/internal.h"
#include "io/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

void qtk__select_init(qtk__select *s) {
    memset(s, 0, sizeof *s);
    s->min_numel = QTK_MIN_ELEMENTS_DEFAULT;
    s->out_elem = QTK_ELEM_F32;
}

void qtk__select_free(qtk__select *s) {
    if (s->has_only) regfree(&s->only);
    if (s->has_skip) regfree(&s->skip);
    for (size_t i = 0; i < s->n_rules; i++) {
        regfree(&s->rules[i].re);
        free(s->rules[i].text);
    }
    free(s->rules);
    memset(s, 0, sizeof *s);
}

static qtk_status compile(regex_t *re, const char *pattern, const char *what) {
    char why[160];
    if (!qtk__regex_safe(pattern, why, sizeof why))
        return qtk__err(QTK_E_PARSE, "%s '%.200s' is refused: %s", what, pattern, why);
    int rc = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc == 0) return QTK_OK;
    char msg[160];
    regerror(rc, re, msg, sizeof msg);
    return qtk__err(QTK_E_PARSE, "%s '%s' is not a POSIX extended regular expression: %s", what, pattern, msg);
}

qtk_status qtk__select_only(qtk__select *s, const char *regex) {
    if (s->has_only) return qtk__err(QTK_E_ARG, "only given twice");
    qtk_status st = compile(&s->only, regex, "only");
    s->has_only = st == QTK_OK;
    return st;
}

qtk_status qtk__select_skip(qtk__select *s, const char *regex) {
    if (s->has_skip) return qtk__err(QTK_E_ARG, "skip given twice");
    qtk_status st = compile(&s->skip, regex, "skip");
    s->has_skip = st == QTK_OK;
    return st;
}

static qtk_status parse_target(const char *spec, qtk__target *t) {
    memset(t, 0, sizeof *t);
    if (strcasecmp(spec, "none") == 0) {
        t->kind = QTK__TARGET_NONE;
        return QTK_OK;
    }
    if (strcasecmp(spec, "keep") == 0) {
        t->kind = QTK__TARGET_KEEP;
        return QTK_OK;
    }
    t->kind = QTK__TARGET_SCHEME;
    return qtk_scheme_parse(spec, &t->scheme);
}

qtk_status qtk__select_default(qtk__select *s, const char *spec) {
    qtk_status st = parse_target(spec, &s->dflt);
    if (!st && s->dflt.kind == QTK__TARGET_KEEP)
        return qtk__err(QTK_E_PARSE, "scheme 'keep': give no scheme to keep every tensor as it is");
    return st;
}

qtk_status qtk__select_rule(qtk__select *s, const char *rule) {
    qtk__target t;
    const char *eq = NULL;
    for (const char *p = strchr(rule, '='); p; p = strchr(p + 1, '='))
        if (p > rule && parse_target(p + 1, &t) == QTK_OK) {
            eq = p;
            break;
        }
    if (!eq) {
        /* say why the last candidate failed, the likeliest intended split */
        const char *first = strchr(rule, '=');
        if (!first || first == rule)
            return qtk__err(QTK_E_PARSE, "rule '%s' is not REGEX=SPEC", rule);
        qtk_status st = parse_target(first + 1, &t);
        return qtk__err_context(st, "rule '%s'", rule);
    }
    size_t n = (size_t)(eq - rule);
    char *pat = malloc(n + 1), *text = qtk__strdup(rule);
    qtk__rule *r = realloc(s->rules, (s->n_rules + 1) * sizeof *r);
    if (r) s->rules = r;
    if (!pat || !text || !r) {
        free(pat);
        free(text);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    memcpy(pat, rule, n);
    pat[n] = '\0';
    qtk__rule *nr = &s->rules[s->n_rules];
    qtk_status st = compile(&nr->re, pat, "rule regex");
    free(pat);
    if (st) {
        free(text);
        return st;
    }
    nr->target = t;
    nr->text = text;
    s->n_rules++;
    return QTK_OK;
}

static bool matches(const regex_t *re, const char *name) { return regexec(re, name, 0, NULL, 0) == 0; }

static bool candidate(const qtk_ckpt_tensor *t) { return t->quantized || qtk_elem_is_float(t->elem); }

/* the rank of the values (a bitsandbytes weight held flattened has its matrix's) */
static int value_rank(const qtk_ckpt_tensor *t) { return t->value_shape ? t->value_rank : t->rank; }

static bool big_enough(const qtk__select *s, const qtk_ckpt_tensor *t) {
    return value_rank(t) >= 2 && t->numel >= s->min_numel;
}

bool qtk__select_eligible(const qtk__select *s, const qtk_ckpt_tensor *t) {
    if (!candidate(t)) return false;
    if (s->has_skip && matches(&s->skip, t->name)) return false;
    if (s->has_only && !matches(&s->only, t->name)) return false;
    return big_enough(s, t);
}

/* Applies a target to a tensor. */
static void apply(const qtk__select *s, const qtk__target *tg, const qtk_ckpt_tensor *t, qtk__decision *d) {
    if (tg->kind == QTK__TARGET_KEEP) {
        d->act = QTK_ACT_KEEP;
    } else if (tg->kind == QTK__TARGET_NONE) {
        /* a tensor the reader decoded from a quantized type (GGUF's Q4_K) counts as quantized */
        bool q = t->quantized || t->decoded;
        d->act = q ? QTK_ACT_DEQUANTIZE : QTK_ACT_KEEP;
        d->elem = s->out_elem;
        if (!q) snprintf(d->why, sizeof d->why, "not quantized");
    } else if (t->quantized && qtk_scheme_equal(&t->scheme, &tg->scheme)) {
        d->act = QTK_ACT_KEEP;
        d->reason = QTK_WHY_SAME;
        snprintf(d->why, sizeof d->why, "already in the scheme");
    } else {
        d->act = QTK_ACT_QUANTIZE;
        d->scheme = tg->scheme;
    }
}

void qtk__select_decide(const qtk__select *s, const qtk_ckpt_tensor *t, size_t i, qtk__decision *d) {
    memset(d, 0, sizeof *d);
    d->act = QTK_ACT_KEEP;
    d->rule = -1;
    d->reason = QTK_WHY_NOT_FLOAT;
    if (!candidate(t)) {
        snprintf(d->why, sizeof d->why, "%s is not a float type", qtk_elem_name(t->elem));
        return;
    }
    d->reason = QTK_WHY_SKIP;
    if (s->has_skip && matches(&s->skip, t->name)) {
        snprintf(d->why, sizeof d->why, "skip");
        return;
    }
    if (s->has_only && !matches(&s->only, t->name)) {
        snprintf(d->why, sizeof d->why, "not matched by only");
        return;
    }
    for (size_t r = 0; r < s->n_rules; r++)
        if (matches(&s->rules[r].re, t->name)) {
            d->reason = QTK_WHY_RULE;
            d->rule = (int)r;
            snprintf(d->why, sizeof d->why, "rule %zu '%.60s'", r + 1, s->rules[r].text);
            apply(s, &s->rules[r].target, t, d);
            return;
        }
    if (s->mix && i < s->mix->n) {
        const qtk__mix_choice *ch = &s->mix->choice[i];
        const char *preset = qtk__mix_type_preset(ch->type);
        d->reason = QTK_WHY_MIXTURE;
        snprintf(d->why, sizeof d->why, "%s", ch->why);
        qtk__target tg = {.kind = QTK__TARGET_SCHEME};
        if (preset && qtk_scheme_parse(preset, &tg.scheme) == QTK_OK) apply(s, &tg, t, d);
        return;
    }
    if (s->dflt.kind == QTK__TARGET_KEEP) {
        d->reason = QTK_WHY_NO_SCHEME;
        snprintf(d->why, sizeof d->why, "no default scheme");
        return;
    }
    if (s->dflt.kind == QTK__TARGET_SCHEME && !big_enough(s, t)) {
        d->reason = QTK_WHY_SMALL;
        if (value_rank(t) < 2) snprintf(d->why, sizeof d->why, "rank %d", value_rank(t));
        else snprintf(d->why, sizeof d->why, "%zu elements < %zu", t->numel, s->min_numel);
        return;
    }
    d->reason = QTK_WHY_DEFAULT;
    snprintf(d->why, sizeof d->why, "default scheme");
    apply(s, &s->dflt, t, d);
}

qtk_status qtk__select_from(qtk__select *s, const char *scheme, const char *const *rules, size_t n_rules,
                            const char *only, const char *skip, size_t min_elements, qtk_dtype dtype) {
    qtk__select_init(s);
    qtk_status st = QTK_OK;
    if (dtype != QTK_DTYPE_NONE && dtype != QTK_DTYPE_F32 && dtype != QTK_DTYPE_F16 && dtype != QTK_DTYPE_BF16)
        st = qtk__err(QTK_E_ARG, "dtype %s: dequantized tensors are f32, f16 or bf16", qtk_dtype_name(dtype));
    if (!st && scheme) st = qtk__select_default(s, scheme);
    if (!st && only) st = qtk__select_only(s, only);
    if (!st && skip) st = qtk__select_skip(s, skip);
    if (!st && n_rules && !rules) st = qtk__err(QTK_E_ARG, "%zu rules but no rules array", n_rules);
    for (size_t i = 0; !st && i < n_rules; i++)
        st = rules[i] ? qtk__select_rule(s, rules[i]) : qtk__err(QTK_E_ARG, "rule %zu is NULL", i + 1);
    if (st) {
        qtk__select_free(s);
        return st;
    }
    s->min_numel = min_elements ? min_elements : QTK_MIN_ELEMENTS_DEFAULT;
    s->out_elem = dtype == QTK_DTYPE_F16 ? QTK_ELEM_F16 : dtype == QTK_DTYPE_BF16 ? QTK_ELEM_BF16 : QTK_ELEM_F32;
    return QTK_OK;
}
