/* spec.c — spec strings (SPEC §1.1): parsing, presets, canonical formatting. */
#include "scheme_internal.h"

#include "../numfmt/scalar.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

typedef struct {
    const char *name;
    const char *spec;
    bool alias; /* parsed, but not the name qtk_scheme_preset_name gives the scheme */
} preset;

static const preset presets[] = {
    {"nvfp4", "e2m1,block=16:ue4m3,tensor=f32,store=packed:0", false},
    {"mxfp4", "e2m1,block=32:ue8m0,store=packed:0", false},
    {"mxfp8", "e4m3,block=32:ue8m0,store=native", false},
    {"nf4", "q4f,table=nf4,block=64:f32", false},
    /* ggml's types (docs/affine.md): the first three in qtk's own layouts, which GGUF reads
     * them as; the others in ggml's block structs */
    {"q8_0", "q8f,block=32:f16,store=native", true},
    {"q4_0", "q4f,block=32:f16", true},
    {"iq4_nl", "q4f,table=iq4nl,block=32:f16", true},
    {"q4_1", "u4,block=32:f16,offset=f16,store=ggml", false},
    {"q5_0", "q5f,block=32:f16,store=ggml", false},
    {"q5_1", "u5,block=32:f16,offset=f16,store=ggml", false},
    {"q2_k", "u2,block=16:u4,min=u4,super=256:f16,store=ggml", false},
    {"q3_k", "q3f,block=16:i6,super=256:f16,store=ggml", false},
    {"q4_k", "u4,block=32:u6,min=u6,super=256:f16,store=ggml", false},
    {"q5_k", "u5,block=32:u6,min=u6,super=256:f16,store=ggml", false},
    {"q6_k", "q6f,block=16:i8,super=256:f16,store=ggml", false},
    /* ggml's lattice types (docs/lattice.md) */
    {"iq2_xxs", "q8f,lattice=iq2xxs,block=32:u4,super=256:f16,store=ggml", false},
    {"iq2_xs", "q8f,lattice=iq2xs,block=16:u4,super=256:f16,store=ggml", false},
    {"iq2_s", "q8f,lattice=iq2s,block=16:u4,super=256:f16,store=ggml", false},
    {"iq3_xxs", "q8f,lattice=iq3xxs,block=32:u4,super=256:f16,store=ggml", false},
    {"iq3_s", "q8f,lattice=iq3s,block=32:u4,super=256:f16,store=ggml", false},
    {"iq1_s", "q8f,lattice=iq1s,block=32:u4,super=256:f16,store=ggml", false},
    {"iq1_m", "q8f,lattice=iq1m,block=16:u4,super=256:f16,store=ggml", false},
};

#define SPEC_MAX 512

/* Error with the whole spec quoted and the offending part named. */
#define PERR(...) perr(spec, __VA_ARGS__)
static qtk_status perr(const char *spec, const char *fmt, ...) QTK_PRINTF(2, 3);
static qtk_status perr(const char *spec, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return qtk__err(QTK_E_PARSE, "invalid scheme '%s': %s", spec, what);
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *out) {
    if (!*s) return false;
    unsigned long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s)) return false;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max) return false;
    }
    *out = v;
    return true;
}

/* A scale or offset dtype: the float scale dtypes, and the integer dtypes of the extension
 * (whose place qtk_scheme_validate checks, naming it). */
static qtk_status parse_scale_dtype(const char *spec, const char *opt, const char *txt, qtk_dtype *out) {
    qtk_dtype d;
    if (qtk_dtype_parse(txt, &d) != QTK_OK || !(qtk__is_scale_dtype(d) || qtk__dtype_is_int(d)))
        return PERR("in '%s': '%s' is not a scale dtype (f32, f16, bf16, ue8m0, ue4m3; u8 u6 u4 i8 i6 where "
                    "docs/affine.md allows them)",
                    opt, txt);
    *out = d;
    return QTK_OK;
}

/* super=N:DTYPE */
static qtk_status parse_super(const char *spec, const char *opt, char *val, qtk_scheme *s) {
    char *colon = strchr(val, ':');
    if (!colon) return PERR("in '%s': a super-block needs a scale dtype, as in super=256:f16", opt);
    *colon = '\0';
    unsigned long v;
    if (!parse_uint(val, QTK_BLOCK_MAX_EXTENT, &v) || v == 0)
        return PERR("in '%s': super-block '%s' is not a number in 1..%u", opt, val, QTK_BLOCK_MAX_EXTENT);
    s->super_block = (uint32_t)v;
    return parse_scale_dtype(spec, opt, colon + 1, &s->super_dtype);
}

static qtk_status parse_block(const char *spec, const char *opt, char *val, qtk_scheme *s) {
    char *colon = strchr(val, ':');
    if (!colon) return PERR("in '%s': a block needs a scale dtype, as in block=32:f16", opt);
    *colon = '\0';
    qtk_status st = parse_scale_dtype(spec, opt, colon + 1, &s->block_dtype);
    if (st) return st;
    unsigned n = 0;
    char *p = val;
    for (;;) {
        char *x = strchr(p, 'x');
        if (x) *x = '\0';
        if (n == QTK_MAX_BLOCK_DIMS)
            return PERR("in '%s': a block has at most %d dims", opt, QTK_MAX_BLOCK_DIMS);
        if (strcmp(p, "*") == 0) {
            s->block[n++] = QTK_BLOCK_WHOLE;
        } else {
            unsigned long v;
            if (!parse_uint(p, QTK_BLOCK_MAX_EXTENT, &v) || v == 0)
                return PERR("in '%s': block dim '%s' is not a number in 1..%u or '*'", opt, p,
                            QTK_BLOCK_MAX_EXTENT);
            s->block[n++] = (uint32_t)v;
        }
        if (!x) break;
        p = x + 1;
    }
    s->block_rank = (uint8_t)n;
    qtk__scheme_canonical_block(s);
    return QTK_OK;
}

static qtk_status parse_store(const char *spec, const char *opt, char *val, qtk_scheme *s) {
    char *colon = strchr(val, ':');
    unsigned long d = 0;
    if (colon) {
        *colon = '\0';
        if (!parse_uint(colon + 1, QTK_MAX_RANK - 1, &d))
            return PERR("in '%s': pack dimension '%s' is not a number in 0..%d", opt, colon + 1, QTK_MAX_RANK - 1);
    }
    if (strcmp(val, "native") == 0 || strcmp(val, "ggml") == 0) {
        if (colon) return PERR("in '%s': store=%s has no pack dimension", opt, val);
        s->store = val[0] == 'n' ? QTK_STORE_NATIVE : QTK_STORE_GGML;
    } else if (strcmp(val, "packed") == 0) {
        s->store = QTK_STORE_PACKED;
    } else if (strcmp(val, "u32") == 0) {
        s->store = QTK_STORE_U32;
    } else {
        return PERR("in '%s': '%s' is not a store (native, packed[:D], u32[:D], ggml)", opt, val);
    }
    s->pack_dim = (uint8_t)d;
    return QTK_OK;
}

qtk_status qtk_scheme_parse(const char *spec_in, qtk_scheme *out) {
    if (!spec_in || !out) return qtk__err(QTK_E_ARG, "qtk_scheme_parse: NULL argument");
    const char *spec = spec_in;
    size_t len = strlen(spec_in);
    if (len == 0) return qtk__err(QTK_E_PARSE, "invalid scheme '': empty spec");
    if (len >= SPEC_MAX) return qtk__err(QTK_E_PARSE, "invalid scheme: spec is %zu characters long (at most %d)", len, SPEC_MAX - 1);
    char buf[SPEC_MAX];
    for (size_t i = 0; i <= len; i++) buf[i] = (char)tolower((unsigned char)spec_in[i]);

    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(buf, presets[i].name) == 0) return qtk_scheme_parse(presets[i].spec, out);
        size_t pl = strlen(presets[i].name);
        if (strncmp(buf, presets[i].name, pl) == 0 && buf[pl] == ',')
            return PERR("preset '%s' takes no options (write its expansion '%s' and change that)",
                        presets[i].name, presets[i].spec);
    }

    qtk_scheme s;
    memset(&s, 0, sizeof s);
    /* strtok skips empty fields; detect them first so "q8f,,block=..." is an error */
    if (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,")) return PERR("empty option (stray ',')");
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok) return PERR("no value");
    int v = -1;
    for (int i = 0; i < QTK_VALUE_COUNT_; i++)
        if (strcmp(tok, qtk_value_name((qtk_value)i)) == 0) v = i;
    if (v < 0)
        return PERR("'%s' is not a value (q8f q8s q4f q4s q2f q2s e4m3 e5m2 e2m1; u8 u5 u4 u3 u2 q6f q5f q3f) or a "
                    "preset (nvfp4 mxfp4 mxfp8 nf4; q8_0 q4_0 iq4_nl q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k; iq2_xxs iq2_xs "
                    "iq2_s iq3_xxs iq3_s iq1_s iq1_m)",
                    tok);
    s.value = (qtk_value)v;

    bool seen_block = false, seen_tensor = false, seen_store = false, seen_table = false, seen_offset = false,
         seen_super = false;
    while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
        char opt[SPEC_MAX];
        snprintf(opt, sizeof opt, "%s", tok);
        char *eq = strchr(tok, '=');
        if (!eq)
            return PERR("option '%s' is not KEY=VALUE (block=, tensor=, store=, table=, lattice=, min=, offset=, zero=, super=)",
                        opt);
        *eq = '\0';
        char *val = eq + 1;
        qtk_status st;
        if (strcmp(tok, "block") == 0) {
            if (seen_block) return PERR("block= given twice");
            seen_block = true;
            st = parse_block(spec, opt, val, &s);
        } else if (strcmp(tok, "tensor") == 0) {
            if (seen_tensor) return PERR("tensor= given twice");
            seen_tensor = true;
            st = parse_scale_dtype(spec, opt, val, &s.tensor_dtype);
        } else if (strcmp(tok, "store") == 0) {
            if (seen_store) return PERR("store= given twice");
            seen_store = true;
            st = parse_store(spec, opt, val, &s);
        } else if (strcmp(tok, "table") == 0 || strcmp(tok, "lattice") == 0) {
            if (seen_table) return PERR("a second table ('%s'): give one of table=, lattice=", opt);
            seen_table = true;
            size_t tl = strlen(val);
            if (tl == 0 || tl >= QTK_TABLE_NAME_MAX) return PERR("in '%s': table name must be 1..%d characters", opt, QTK_TABLE_NAME_MAX - 1);
            if (seen_offset) return PERR("%s= and an offset (min=, offset=, zero=) do not combine", tok);
            memcpy(s.table, val, tl + 1);
            s.mode = tok[0] == 't' ? QTK_MODE_LOOKUP : QTK_MODE_LATTICE;
            st = QTK_OK;
        } else if (strcmp(tok, "min") == 0 || strcmp(tok, "offset") == 0 || strcmp(tok, "zero") == 0) {
            if (seen_offset) return PERR("a second offset ('%s'): give one of min=, offset=, zero=", opt);
            if (seen_table) return PERR("table= and an offset (min=, offset=, zero=) do not combine");
            seen_offset = true;
            s.mode = QTK_MODE_AFFINE;
            s.offset = tok[0] == 'm' ? QTK_OFFSET_MIN : tok[0] == 'o' ? QTK_OFFSET_ADD : QTK_OFFSET_ZERO;
            st = parse_scale_dtype(spec, opt, val, &s.offset_dtype);
        } else if (strcmp(tok, "super") == 0) {
            if (seen_super) return PERR("super= given twice");
            seen_super = true;
            st = parse_super(spec, opt, val, &s);
        } else {
            return PERR("unknown option '%s' (block=, tensor=, store=, table=, lattice=, min=, offset=, zero=, super=)", tok);
        }
        if (st) return st;
    }
    qtk_status st = qtk_scheme_validate(&s);
    if (st) return qtk__err_context(st, "invalid scheme '%s'", spec);
    *out = s;
    return QTK_OK;
}

qtk_status qtk_scheme_format(const qtk_scheme *s0, char *buf, size_t cap, size_t *needed) {
    if (!s0) return qtk__err(QTK_E_ARG, "qtk_scheme_format: NULL scheme");
    qtk_status st = qtk_scheme_validate(s0);
    if (st) return st;
    qtk_scheme s = *s0;
    qtk__scheme_canonical_block(&s);
    char tmp[SPEC_MAX];
    size_t n = 0;
#define APPEND(...) n += (size_t)snprintf(tmp + n, sizeof tmp - n, __VA_ARGS__)
    APPEND("%s", qtk_value_name(s.value));
    if (s.mode == QTK_MODE_LOOKUP) APPEND(",table=%s", s.table);
    if (s.mode == QTK_MODE_LATTICE) APPEND(",lattice=%s", s.table);
    if (s.block_rank) {
        APPEND(",block=");
        for (unsigned i = 0; i < s.block_rank; i++) {
            if (i) APPEND("x");
            if (s.block[i] == QTK_BLOCK_WHOLE) APPEND("*");
            else APPEND("%u", (unsigned)s.block[i]);
        }
        APPEND(":%s", qtk_dtype_name(s.block_dtype));
    }
    if (s.mode == QTK_MODE_AFFINE)
        APPEND(",%s=%s", s.offset == QTK_OFFSET_MIN ? "min" : s.offset == QTK_OFFSET_ADD ? "offset" : "zero",
               qtk_dtype_name(s.offset_dtype));
    if (s.super_block) APPEND(",super=%u:%s", (unsigned)s.super_block, qtk_dtype_name(s.super_dtype));
    if (s.tensor_dtype != QTK_DTYPE_NONE) APPEND(",tensor=%s", qtk_dtype_name(s.tensor_dtype));
    if (s.store == QTK_STORE_NATIVE) APPEND(",store=native");
    else if (s.store == QTK_STORE_GGML) APPEND(",store=ggml");
    else if (s.store == QTK_STORE_PACKED) APPEND(",store=packed:%u", s.pack_dim);
    else if (s.pack_dim != 0) APPEND(",store=u32:%u", s.pack_dim);
#undef APPEND
    if (needed) *needed = n + 1;
    if (buf && cap) {
        if (n + 1 > cap) {
            snprintf(buf, cap, "%s", tmp);
            return qtk__err(QTK_E_LENGTH, "qtk_scheme_format: buffer of %zu bytes; %zu needed", cap, n + 1);
        }
        memcpy(buf, tmp, n + 1);
    } else if (!needed) {
        return qtk__err(QTK_E_ARG, "qtk_scheme_format: no buffer");
    }
    return QTK_OK;
}

const char *qtk_scheme_preset_name(const qtk_scheme *s) {
    if (!s) return NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        qtk_scheme p;
        if (!presets[i].alias && qtk_scheme_parse(presets[i].spec, &p) == QTK_OK && qtk_scheme_equal(&p, s))
            return presets[i].name;
    }
    return NULL;
}

/* ---- calibrations by name ---- */

static const char *const calibration_names[] = {"minmax", "absmean", "mse"};
#define N_CALIBRATIONS (sizeof calibration_names / sizeof calibration_names[0])

const char *qtk_calibration_name(qtk_calibration c) {
    return (unsigned)c < N_CALIBRATIONS ? calibration_names[c] : "?";
}

qtk_status qtk_calibration_parse(const char *name, qtk_calibration *out) {
    if (!name || !out) return qtk__err(QTK_E_ARG, "qtk_calibration_parse: NULL argument");
    for (size_t i = 0; i < N_CALIBRATIONS; i++)
        if (strcasecmp(name, calibration_names[i]) == 0) {
            *out = (qtk_calibration)i;
            return QTK_OK;
        }
    return qtk__err(QTK_E_PARSE, "calibration '%s' is not one of minmax, absmean, mse", name);
}
