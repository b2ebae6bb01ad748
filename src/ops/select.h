/* select.h — which tensors of a checkpoint a conversion quantizes, dequantizes or keeps.
 *
 * Order of decision for a tensor (first that applies):
 *   1. not a float or quantized tensor (ints, bools, FNUZ, FP6)  -> keep
 *   2. --skip REGEX matches, or --only REGEX is given and does not -> keep
 *   3. the first --rule 'REGEX=SPEC' whose REGEX matches: SPEC, "none" (dequantize) or
 *      "keep" — a rule applies whatever the tensor's rank and size: naming it is explicit
 *   4. the default --scheme: "none" dequantizes every quantized tensor; a scheme quantizes
 *      tensors of rank >= 2 with at least min_numel elements (1-D biases and norms, and tiny
 *      tensors, stay as they are); no --scheme keeps everything
 * A tensor already in the chosen scheme is kept as it is (bit for bit).
 * REGEX is POSIX extended, unanchored (use ^...$ to match whole names). */
#ifndef QTK_SELECT_H
#define QTK_SELECT_H

#include "io/checkpoint.h"
#include "ops/mixture.h"

#include <regex.h>


typedef enum { QTK__TARGET_KEEP = 0, QTK__TARGET_NONE, QTK__TARGET_SCHEME } qtk__target_kind;

typedef struct qtk__target {
    qtk__target_kind kind;
    qtk_scheme scheme;
} qtk__target;

typedef struct qtk__rule {
    regex_t re;
    qtk__target target;
    char *text; /* as given, for messages */
} qtk__rule;


typedef struct qtk__select {
    bool has_only, has_skip;
    regex_t only, skip;
    qtk__rule *rules;
    size_t n_rules;
    qtk__target dflt;   /* the --scheme; kind KEEP when none was given */
    size_t min_numel;  /* default QTK_MIN_ELEMENTS_DEFAULT */
    qtk_elem out_elem; /* what dequantized tensors become: F32 (default), F16 or BF16 */
    const qtk__mixture *mix; /* in place of the default scheme (planned over the input) */
} qtk__select;

void qtk__select_init(qtk__select *s);
void qtk__select_free(qtk__select *s);
/* Each returns QTK_E_PARSE with a message naming the bad regex or spec. */
qtk_status qtk__select_only(qtk__select *s, const char *regex);
qtk_status qtk__select_skip(qtk__select *s, const char *regex);
/* 'REGEX=SPEC': split at the first '=' after which a spec, "none" or "keep" parses, so
 * specs keep their own '=' (block=32:f16). */
qtk_status qtk__select_rule(qtk__select *s, const char *rule);
/* A spec, or "none". */
qtk_status qtk__select_default(qtk__select *s, const char *spec);
/* Everything from the public options' fields (see qtk_convert_options). */
qtk_status qtk__select_from(qtk__select *s, const char *scheme, const char *const *rules, size_t n_rules,
                            const char *only, const char *skip, size_t min_elements, qtk_dtype dtype);

typedef struct qtk__decision {
    qtk_action act;
    qtk_scheme scheme; /* QUANTIZE */
    qtk_elem elem;     /* DEQUANTIZE */
    qtk_reason reason;
    int rule;          /* QTK_WHY_RULE: the rule's index, else -1 */
    char why[96];      /* "rank 1", "skip", "rule 2 'attn=q8s'", "default scheme", ... */
} qtk__decision;

/* t is the description's tensor index i (the mixture's choices are by index). */
void qtk__select_decide(const qtk__select *s, const qtk_ckpt_tensor *t, size_t i, qtk__decision *d);
/* Steps 1, 2 and the rank/size test of 4, without rules: the tensors eval measures. */
bool qtk__select_eligible(const qtk__select *s, const qtk_ckpt_tensor *t);

#endif
