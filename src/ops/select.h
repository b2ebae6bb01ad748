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

#include <regex.h>

typedef enum qtk_action { QTK_ACT_KEEP = 0, QTK_ACT_QUANTIZE, QTK_ACT_DEQUANTIZE } qtk_action;

typedef enum { QTK_TARGET_KEEP = 0, QTK_TARGET_NONE, QTK_TARGET_SCHEME } qtk_target_kind;

typedef struct qtk_target {
    qtk_target_kind kind;
    qtk_scheme scheme;
} qtk_target;

typedef struct qtk_rule {
    regex_t re;
    qtk_target target;
    char *text; /* as given, for messages */
} qtk_rule;

#define QTK_SELECT_MIN_NUMEL 1024

typedef struct qtk_select {
    bool has_only, has_skip;
    regex_t only, skip;
    qtk_rule *rules;
    size_t n_rules;
    qtk_target dflt;   /* the --scheme; kind KEEP when none was given */
    size_t min_numel;  /* default QTK_SELECT_MIN_NUMEL */
    qtk_elem out_elem; /* what dequantized tensors become: F32 (default), F16 or BF16 */
} qtk_select;

void qtk_select_init(qtk_select *s);
void qtk_select_free(qtk_select *s);
/* Each returns QTK_E_PARSE with a message naming the bad regex or spec. */
qtk_status qtk_select_only(qtk_select *s, const char *regex);
qtk_status qtk_select_skip(qtk_select *s, const char *regex);
/* 'REGEX=SPEC': split at the first '=' after which a spec, "none" or "keep" parses, so
 * specs keep their own '=' (block=32:f16). */
qtk_status qtk_select_rule(qtk_select *s, const char *rule);
/* A spec, or "none". */
qtk_status qtk_select_default(qtk_select *s, const char *spec);
/* f32, f16 or bf16 */
qtk_status qtk_select_dtype(qtk_select *s, const char *name);

typedef struct qtk_decision {
    qtk_action act;
    qtk_scheme scheme; /* QUANTIZE */
    qtk_elem elem;     /* DEQUANTIZE */
    char why[96];      /* "rank 1", "--skip", "rule 2 'attn=q8s'", "default scheme", ... */
} qtk_decision;

void qtk_select_decide(const qtk_select *s, const qtk_ckpt_tensor *t, qtk_decision *d);
/* Steps 1, 2 and the rank/size test of 4, without rules: the tensors eval measures. */
bool qtk_select_eligible(const qtk_select *s, const qtk_ckpt_tensor *t);

#endif
