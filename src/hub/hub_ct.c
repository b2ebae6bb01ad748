/* hub_ct.c — reading compressed-tensors checkpoints (llm-compressor; HUB_LAYOUTS.md §4).
 *
 *   nvfp4-pack-quantized  X_packed U8 [O, K/2], X_scale F8_E4M3 [O, K/16],
 *                         X_global_scale F32 [1] — a DIVISOR          -> nvfp4, g found from G
 *   mxfp4-pack-quantized  X_packed U8 [O, K/2], X_scale U8 [O, K/32]  -> mxfp4
 *   float-quantized       X F8_E4M3, X_scale (model dtype): tensor [1], channel [O, 1],
 *                         group [O, K/G], block [O/bh, K/bw]          -> e4m3,...,store=native
 *   int-quantized         X I8, X_scale                               -> q8f,...,store=native
 *   pack-quantized        X_packed I32 [O, ceil(K/(32/b))] (offset-binary fields), X_scale,
 *                         X_shape [O, K]                              -> q4f/q8f,...,store=u32:0
 *
 * X is the weight's name (P.weight). The config's groups give what the tensors do not
 * (group size, block structure, symmetry); each tensor is matched against the groups'
 * targets and the ignore list as compressed-tensors does ("re:" regexes match from the start
 * of the module name; other targets are module or class names). Asymmetric int weights with
 * channel or group scales become qtk's zero-point schemes (u4/u8,...,zero=u8: the stored
 * offset-binary fields are the unsigned codes); activation-order group indices, and zero
 * points of other strategies, have no qtk form: those tensors are dequantized to F32 (exact
 * values) with a notice. */
#include "hub/hub_ct.h"

#include "io/util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const methods[] = {"compressed-tensors", NULL};

/* ---- the config ---- */

typedef struct {
    bool is_re;
    regex_t re;
    const char *text;
} target;

typedef struct {
    const char *name, *format;
    const json_t *weights;
    target *t;
    size_t n;
} group;

typedef struct {
    group *g;
    size_t n_groups;
    target *ignore;
    size_t n_ignore;
    const char *format;
} ct_config;

static qtk_status compile_targets(const qtk__hub *h, const json_t *arr, const char *what, target **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!arr || json_is_null(arr)) return QTK_OK;
    if (!json_is_array(arr)) return qtk__err(QTK_E_FORMAT, "'%s': %s is not a list", h->config_file, what);
    size_t m = json_array_size(arr);
    target *t = calloc(m ? m : 1, sizeof *t);
    if (!t) return qtk__err(QTK_E_NOMEM, "out of memory");
    *out = t;
    for (size_t i = 0; i < m; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s) return qtk__err(QTK_E_FORMAT, "'%s': %s[%zu] is not a string", h->config_file, what, i);
        t[i].text = s;
        if (strncmp(s, "re:", 3) == 0) {
            /* Python's re.match: from the start of the name */
            size_t l = strlen(s + 3);
            char *pat = malloc(l + 4);
            if (!pat) return qtk__err(QTK_E_NOMEM, "out of memory");
            snprintf(pat, l + 4, "^(%s)", s + 3);
            char why[160];
            if (!qtk__regex_safe(pat, why, sizeof why)) {
                free(pat);
                return qtk__err(QTK_E_UNSUPPORTED, "'%s': %s[%zu] '%.200s' is refused: %s", h->config_file, what, i, s, why);
            }
            int rc = regcomp(&t[i].re, pat, REG_EXTENDED | REG_NOSUB);
            free(pat);
            if (rc)
                return qtk__err(QTK_E_UNSUPPORTED, "'%s': %s[%zu] '%s' is not a POSIX extended regular expression (qtk "
                                "matches targets with those)", h->config_file, what, i, s);
            t[i].is_re = true;
        }
        *n = i + 1;
    }
    return QTK_OK;
}

static void free_targets(target *t, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (t[i].is_re) regfree(&t[i].re);
    free(t);
}

static void config_free(ct_config *c) {
    for (size_t i = 0; i < c->n_groups; i++) free_targets(c->g[i].t, c->g[i].n);
    free(c->g);
    free_targets(c->ignore, c->n_ignore);
    memset(c, 0, sizeof *c);
}

static qtk_status config_read(const qtk__hub *h, ct_config *c) {
    memset(c, 0, sizeof *c);
    if (!h->qcfg) return QTK_OK;
    c->format = hub_json_str(h->qcfg, "format");
    qtk_status st = compile_targets(h, hub_json(h->qcfg, "ignore"), "ignore", &c->ignore, &c->n_ignore);
    const json_t *groups = hub_json(h->qcfg, "config_groups");
    if (st || !groups || json_is_null(groups)) return st;
    if (!json_is_object(groups)) return qtk__err(QTK_E_FORMAT, "'%s': config_groups is not an object", h->config_file);
    c->g = calloc(json_object_size(groups) + 1, sizeof *c->g);
    if (!c->g) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (void *it = json_object_iter((json_t *)(uintptr_t)groups); it && !st;
         it = json_object_iter_next((json_t *)(uintptr_t)groups, it)) {
        const json_t *g = json_object_iter_value(it);
        group *gr = &c->g[c->n_groups++];
        gr->name = json_object_iter_key(it);
        gr->weights = hub_json(g, "weights");
        gr->format = hub_json_str(g, "format");
        if (!gr->format) gr->format = c->format;
        st = compile_targets(h, hub_json(g, "targets"), "targets", &gr->t, &gr->n);
    }
    return st;
}

/* 2: the target names the module or matches it by regex; 1: a class name (which qtk cannot
 * check against a tensor name, so it matches any module); 0: no. */
static int target_match(const target *t, const char *module) {
    if (t->is_re) return regexec(&t->re, module, 0, NULL, 0) == 0 ? 2 : 0;
    if (strcmp(t->text, module) == 0) return 2;
    return strchr(t->text, '.') ? 0 : 1;
}

static bool ignored(const ct_config *c, const char *module) {
    for (size_t i = 0; i < c->n_ignore; i++)
        if (target_match(&c->ignore[i], module) == 2) return true;
    return false;
}

typedef struct {
    const char *group, *format;
    long long bits;       /* 0: not given */
    const char *type;
    bool symmetric;
    int strategy;
    long long G, bh, bw;
    const char *actorder;
} ct_args;

static qtk_status args_of(const qtk__hub *h, const group *g, ct_args *a) {
    memset(a, 0, sizeof *a);
    a->group = g->name;
    a->format = g->format;
    a->symmetric = true;
    const json_t *w = g->weights;
    if (!json_is_object(w)) return QTK_OK;
    hub_json_int(hub_json(w, "num_bits"), &a->bits);
    a->type = hub_json_str(w, "type");
    const json_t *sym = hub_json(w, "symmetric");
    if (json_is_boolean(sym)) a->symmetric = json_is_true(sym);
    long long gs = 0;
    bool has_gs = hub_json_int(hub_json(w, "group_size"), &gs);
    const json_t *bs = hub_json(w, "block_structure");
    if (json_is_array(bs) && json_array_size(bs) == 2) {
        hub_json_int(json_array_get(bs, 0), &a->bh);
        hub_json_int(json_array_get(bs, 1), &a->bw);
    } else if (json_is_string(bs)) {
        if (sscanf(json_string_value(bs), "%lldx%lld", &a->bh, &a->bw) != 2) a->bh = a->bw = 0; /* legacy "128x128" */
    }
    const char *s = hub_json_str(w, "strategy");
    if (!s) a->strategy = has_gs ? (gs > 0 ? CT_GROUP : CT_CHANNEL) : a->bh ? CT_BLOCK : CT_TENSOR;
    else if (strcmp(s, "tensor") == 0) a->strategy = CT_TENSOR;
    else if (strcmp(s, "channel") == 0) a->strategy = CT_CHANNEL;
    else if (strcmp(s, "group") == 0) a->strategy = CT_GROUP;
    else if (strcmp(s, "block") == 0) a->strategy = CT_BLOCK;
    else if (strcmp(s, "tensor_group") == 0) a->strategy = CT_TENSOR_GROUP;
    else a->strategy = CT_OTHER;
    a->G = gs;
    if ((a->strategy == CT_GROUP || a->strategy == CT_TENSOR_GROUP) && gs <= 0)
        return qtk__err(QTK_E_FORMAT, "'%s': group '%s' has strategy %s but group_size %lld", h->config_file, g->name, s, gs);
    if (a->strategy == CT_BLOCK && (a->bh <= 0 || a->bw <= 0))
        return qtk__err(QTK_E_FORMAT, "'%s': group '%s' has strategy block but no block_structure [rows, cols]",
                        h->config_file, g->name);
    a->actorder = hub_json_str(w, "actorder");
    return QTK_OK;
}

/* ---- one weight ---- */

enum { W_NVFP4 = 1, W_MXFP4, W_FLOAT, W_INT8, W_PACK };
static const char *const kind_name[] = {"", "nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized",
                                        "int-quantized", "pack-quantized"};

typedef struct {
    const char *x;     /* the weight's name */
    int kind;
    hub_raw *w, *scale, *global, *shape, *zp, *gidx;
    size_t lshape[QTK_MAX_RANK];
    int rank;          /* logical */
    unsigned bits;
} weight;

/* Does a config group describe this weight? */
static bool compatible(const weight *w, const ct_args *a) {
    bool is_float = w->kind == W_NVFP4 || w->kind == W_MXFP4 || w->kind == W_FLOAT;
    if (a->type && strcmp(a->type, is_float ? "float" : "int") != 0) return false;
    if (a->bits) {
        if (w->kind == W_NVFP4 || w->kind == W_MXFP4) return a->bits == 4;
        if (w->kind == W_FLOAT || w->kind == W_INT8) return a->bits == 8;
        return a->bits == 4 || a->bits == 8;
    }
    return true;
}

/* The args for a weight: from the config's groups, or inferred from shapes without one. */
static qtk_status resolve(qtk__hub *h, const ct_config *c, weight *w, ct_args *a, bool *inferred) {
    *inferred = false;
    memset(a, 0, sizeof *a);
    a->symmetric = true;
    const char *module = w->x;
    char *m = hub_strip(h, w->x, ".weight");
    if (m) module = m;
    if (c->n_groups == 0) {
        *inferred = true;
        return QTK_OK;
    }
    if (ignored(c, module))
        return qtk__err(QTK_E_FORMAT, "'%s' lists module '%s' under ignore, but '%s' (in '%s') is quantized (%s)",
                        h->config_file, module, w->x, hub_file(h, w->w), kind_name[w->kind]);
    char tried[256] = "";
    for (int level = 2; level >= 1; level--)
        for (size_t i = 0; i < c->n_groups; i++) {
            const group *g = &c->g[i];
            bool hit = false;
            for (size_t k = 0; k < g->n && !hit; k++) hit = target_match(&g->t[k], module) == level;
            if (!hit) continue;
            qtk_status st = args_of(h, g, a);
            if (st) return st;
            if (compatible(w, a)) return QTK_OK;
            size_t n = strlen(tried);
            snprintf(tried + n, sizeof tried - n, "%s'%s' (%s %lld-bit)", n ? ", " : "", g->name, a->type ? a->type : "?",
                     a->bits);
        }
    if (tried[0])
        return qtk__err(QTK_E_FORMAT, "'%s': the config groups that target '%s' (%s) do not describe it: '%s' (in '%s') is %s",
                        h->config_file, module, tried, w->x, hub_file(h, w->w), kind_name[w->kind]);
    return qtk__err(QTK_E_FORMAT, "'%s': no config group targets module '%s', but '%s' (in '%s') is quantized (%s)",
                    h->config_file, module, w->x, hub_file(h, w->w), kind_name[w->kind]);
}

/* The scale grid a strategy gives on [O, K]. */
static bool grid_of(const ct_args *a, const size_t *sh, int rank, size_t *g, int *grank) {
    if (a->strategy == CT_TENSOR) {
        *grank = 0;
        return true;
    }
    if (rank != 2) return false;
    *grank = 2;
    switch (a->strategy) {
    case CT_CHANNEL: g[0] = sh[0], g[1] = 1; return true;
    case CT_GROUP:
    case CT_TENSOR_GROUP: g[0] = sh[0], g[1] = qtk__ceil_div(sh[1], (size_t)a->G); return true;
    case CT_BLOCK: g[0] = qtk__ceil_div(sh[0], (size_t)a->bh), g[1] = qtk__ceil_div(sh[1], (size_t)a->bw); return true;
    default: return false;
    }
}

/* Strategy and sizes from the scale's shape alone (no config). */
static qtk_status infer(qtk__hub *h, const weight *w, ct_args *a) {
    const qtk_ckpt_tensor *s = w->scale->t;
    const size_t *sh = w->lshape;
    char b1[128], b2[128];
    if (s->numel == 1) a->strategy = CT_TENSOR;
    else if (w->rank == 2 && s->rank == 2 && s->shape[0] == sh[0] && s->shape[1] == 1 && sh[1] > 1) a->strategy = CT_CHANNEL;
    else if (w->rank == 2 && s->rank == 2 && s->shape[0] == sh[0] && s->shape[1] > 0 && sh[1] % s->shape[1] == 0)
        a->strategy = CT_GROUP, a->G = (long long)(sh[1] / s->shape[1]);
    else if (w->rank == 2 && s->rank == 2 && s->shape[0] > 0 && s->shape[1] > 0 && sh[0] % s->shape[0] == 0 &&
             sh[1] % s->shape[1] == 0)
        a->strategy = CT_BLOCK, a->bh = (long long)(sh[0] / s->shape[0]), a->bw = (long long)(sh[1] / s->shape[1]);
    else
        return qtk__err(QTK_E_FORMAT, "'%s' [%s] with '%s' [%s]: without config.json qtk cannot tell the group or block size",
                        w->x, qtk_shape_format(sh, w->rank, b1, sizeof b1), s->name, qtk_shape_format(s->shape, s->rank, b2, sizeof b2));
    if (w->kind == W_NVFP4 && a->strategy == CT_GROUP) a->strategy = CT_TENSOR_GROUP;
    if ((a->strategy == CT_GROUP && w->kind != W_MXFP4) || a->strategy == CT_BLOCK) /* MXFP4's 32 is fixed */
        return hub_notice(h, w->x, "no config.json: %s inferred from the scale shape (%lld%s%lld)",
                          a->strategy == CT_GROUP ? "group size" : "block size", a->strategy == CT_GROUP ? a->G : a->bh,
                          a->strategy == CT_GROUP ? "" : "x", a->strategy == CT_GROUP ? 0LL : a->bw);
    return QTK_OK;
}

/* The logical shape of a pack-quantized weight: its weight_shape tensor's values. */
static qtk_status read_shape(qtk__hub *h, weight *w) {
    const qtk_ckpt_tensor *t = w->shape->t;
    if ((t->elem != QTK_ELEM_I64 && t->elem != QTK_ELEM_I32) || t->rank != 1 || t->numel < 1 || t->numel > QTK_MAX_RANK)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s with %zu values; a weight_shape is I64 (or I32) [rank]", t->name,
                        hub_file(h, w->shape), qtk_elem_name(t->elem), t->numel);
    const uint8_t *b = hub_bytes(h, w->shape);
    for (size_t i = 0; i < t->numel; i++) {
        int64_t v = t->elem == QTK_ELEM_I64 ? (int64_t)((uint64_t)qtk__ld32(b + 8 * i) | (uint64_t)qtk__ld32(b + 8 * i + 4) << 32)
                                            : (int32_t)qtk__ld32(b + 4 * i);
        if (v < 0) return qtk__err(QTK_E_FORMAT, "'%s' (in '%s')[%zu] is %lld", t->name, hub_file(h, w->shape), i, (long long)v);
        w->lshape[i] = (size_t)v;
    }
    w->rank = (int)t->numel;
    return QTK_OK;
}

static qtk_status check_scale(qtk__hub *h, const weight *w, const ct_args *a, bool inferred) {
    const qtk_ckpt_tensor *s = w->scale->t;
    size_t g[2];
    int gr;
    char b1[128], b2[128], b3[128];
    if (!grid_of(a, w->lshape, w->rank, g, &gr))
        return qtk__err(QTK_E_UNSUPPORTED, "'%s' [%s]: strategy of config group '%s' is not one qtk reads for it "
                        "(tensor, channel, group, block on 2-D weights)", w->x,
                        qtk_shape_format(w->lshape, w->rank, b1, sizeof b1), a->group ? a->group : "?");
    bool ok = gr == 0 ? s->numel == 1
                      : (s->rank == 2 && hub_same_shape(s, g, 2)) ||
                            (a->strategy == CT_CHANNEL && s->rank == 1 && s->shape[0] == g[0]);
    if (!ok)
        return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') is [%s]; %s on '%s' [%s] needs [%s]", s->name, hub_file(h, w->scale),
                        qtk_shape_format(s->shape, s->rank, b1, sizeof b1),
                        inferred ? "the inferred strategy" : a->group ? "the config group's strategy" : "the strategy", w->x,
                        qtk_shape_format(w->lshape, w->rank, b2, sizeof b2), gr ? qtk_shape_format(g, 2, b3, sizeof b3) : "1");
    return QTK_OK;
}

static qtk_status add_weight(qtk__hub *h, weight *w, const ct_args *a, bool inferred) {
    hub_pending p = {.name = w->x, .quantized = true, .rank = w->rank};
    size_t *shape = hub_alloc(h, (size_t)(w->rank ? w->rank : 1) * sizeof *shape);
    if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(shape, w->lshape, (size_t)w->rank * sizeof *shape);
    p.shape = shape;
    p.item.raw[p.item.n++] = (size_t)(w->w - h->raw);
    p.item.raw[p.item.n++] = (size_t)(w->scale - h->raw);
    qtk_status st = check_scale(h, w, a, inferred);
    if (st) return st;
    const char *dt = hub_dtype_spec(hub_scale_dtype(w->scale->t->elem));
    char level[64];
    switch (a->strategy) {
    case CT_TENSOR: snprintf(level, sizeof level, "tensor=%s", dt); break;
    case CT_CHANNEL: snprintf(level, sizeof level, "block=*:%s", dt); break;
    case CT_GROUP: snprintf(level, sizeof level, "block=%lld:%s", a->G, dt); break;
    default: snprintf(level, sizeof level, "block=%lldx%lld:%s", a->bh, a->bw, dt); break;
    }
    bool asym = w->zp != NULL || !a->symmetric;
    bool gidx = false;
    if (w->gidx) {
        /* activation order: exact only when every column is in group k / G */
        const qtk_ckpt_tensor *gt = w->gidx->t;
        if (gt->elem != QTK_ELEM_I32 || gt->numel != (w->rank == 2 ? w->lshape[1] : 0) || a->strategy != CT_GROUP)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s with %zu values; with group strategy it is I32 [K]", gt->name,
                            hub_file(h, w->gidx), qtk_elem_name(gt->elem), gt->numel);
        const uint8_t *b = hub_bytes(h, w->gidx);
        for (size_t k = 0; k < gt->numel && !gidx; k++) gidx = (int32_t)qtk__ld32(b + 4 * k) != (int32_t)(k / (size_t)a->G);
        w->gidx->used = true;
        if (!gidx && (st = hub_notice(h, w->x, "weight_g_idx is the identity order (k / %lld): left out", a->G))) return st;
    }
    if (asym && !w->zp)
        return qtk__err(QTK_E_FORMAT, "config group '%s' is asymmetric but '%s' (in '%s') has no '%s_zero_point'",
                        a->group ? a->group : "?", w->x, hub_file(h, w->w), w->x);
    if (w->zp && a->group && a->symmetric)
        return qtk__err(QTK_E_FORMAT, "'%s_zero_point' (in '%s') exists but config group '%s' is symmetric", w->x,
                        hub_file(h, w->zp), a->group);
    if (w->kind == W_FLOAT && asym)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is FP8 with a zero point; float formats are symmetric", w->x,
                        hub_file(h, w->w));
    if (w->kind == W_NVFP4) {
        if (a->strategy != CT_TENSOR_GROUP || a->G != 16)
            return qtk__err(QTK_E_FORMAT, "'%s': nvfp4-pack-quantized weights have tensor_group strategy with group_size 16",
                            w->x);
        p.item.raw[p.item.n++] = (size_t)(w->global - h->raw);
        p.item.decode = hub_ct_decode_nvfp4;
        p.item.deq = hub_ct_deq_nvfp4;
        st = hub_scheme(&p.scheme, "nvfp4");
    } else if (w->kind == W_MXFP4) {
        st = hub_scheme(&p.scheme, "mxfp4");
    } else if ((w->kind == W_FLOAT || w->kind == W_INT8) && !asym) {
        st = hub_scheme(&p.scheme, "%s,%s,store=native",
                        w->kind == W_INT8 ? "q8f" : w->w->t->elem == QTK_ELEM_F8_E5M2 ? "e5m2" : "e4m3", level);
    } else if (w->kind == W_PACK && !asym && !gidx) {
        /* the words are qtk's u32:0 words; only the field encoding differs */
        const qtk_ckpt_tensor *pt = w->w->t;
        hub_ct_pack_param *pp = hub_alloc(h, sizeof *pp);
        if (!pp) return qtk__err(QTK_E_NOMEM, "out of memory");
        pp->bits = w->bits;
        pp->cols = w->rank ? w->lshape[w->rank - 1] : 1;
        pp->wpr = pt->rank ? pt->shape[pt->rank - 1] : 1;
        pp->rows = pp->wpr ? pt->numel / pp->wpr : 0;
        p.item.decode = hub_ct_decode_pack;
        p.item.param = pp;
        st = hub_scheme(&p.scheme, "%s,%s", w->bits == 4 ? "q4f" : "q8f", level);
    } else if ((w->kind == W_PACK || w->kind == W_INT8) && asym && w->zp && !gidx && w->rank == 2 &&
               (a->strategy == CT_CHANNEL || a->strategy == CT_GROUP)) {
        /* zero points: qtk's unsigned fields are the offset-binary codes as stored */
        const qtk_ckpt_tensor *z = w->zp->t;
        bool packed = w->kind == W_PACK;
        unsigned bits = packed ? w->bits : 8, fpw = 32 / bits;
        size_t O = w->lshape[0], K = w->lshape[1], gcols = a->strategy == CT_GROUP ? qtk__ceil_div(K, (size_t)a->G) : 1;
        size_t want = packed ? qtk__ceil_div(O, fpw) * gcols : O * gcols;
        if (z->elem != (packed ? QTK_ELEM_I32 : QTK_ELEM_I8) || z->numel != want)
            return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') is %s with %zu values; zero points here are %s with %zu (%s)", z->name,
                            hub_file(h, w->zp), qtk_elem_name(z->elem), z->numel, packed ? "I32" : "I8", want,
                            packed ? "packed along the rows" : "one per scale");
        hub_ct_zp_param *zp = hub_alloc(h, sizeof *zp);
        if (!zp) return qtk__err(QTK_E_NOMEM, "out of memory");
        *zp = (hub_ct_zp_param){.packed = packed, .bits = bits, .O = O, .K = K,
                                .wpr = packed ? w->w->t->shape[1] : K, .gcols = gcols};
        p.item.raw[p.item.n++] = (size_t)(w->zp - h->raw);
        w->zp->used = true;
        p.item.decode = hub_ct_decode_zp;
        p.item.param = zp;
        if (w->scale->t->elem != QTK_ELEM_F32) p.item.deq = hub_deq_zero_point;
        st = hub_scheme(&p.scheme, "u%u,%s,zero=u8,store=%s", bits, level, packed ? "u32" : "native");
    } else {
        if (w->rank != 2 || (a->strategy == CT_TENSOR && w->zp && w->zp->t->numel != 1))
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': qtk dequantizes zero points and group indices of 2-D weights only", w->x);
        hub_ct_deq_param *dp = hub_alloc(h, sizeof *dp);
        if (!dp) return qtk__err(QTK_E_NOMEM, "out of memory");
        size_t g[2] = {1, 1};
        int gr = 0;
        grid_of(a, w->lshape, 2, g, &gr);
        *dp = (hub_ct_deq_param){.packed = w->kind == W_PACK, .bits = w->kind == W_PACK ? w->bits : 8, .O = w->lshape[0],
                          .K = w->lshape[1], .wpr = w->kind == W_PACK ? w->w->t->shape[1] : 0, .strategy = a->strategy,
                          .G = (size_t)a->G, .bh = (size_t)a->bh, .bw = (size_t)a->bw, .gcols = gr ? g[1] : 1,
                          .scale_elem = w->scale->t->elem, .zp_part = -1, .gidx_part = -1};
        size_t grows = gr ? g[0] : 1;
        if (w->zp) {
            const qtk_ckpt_tensor *z = w->zp->t;
            unsigned fpw = 32 / dp->bits;
            bool packed = w->kind == W_PACK;
            size_t want = packed ? qtk__ceil_div(grows, fpw) * dp->gcols : grows * dp->gcols;
            if (z->elem != (packed ? QTK_ELEM_I32 : QTK_ELEM_I8) || z->numel != want)
                return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') is %s with %zu values; zero points here are %s with %zu (%s)",
                                z->name, hub_file(h, w->zp), qtk_elem_name(z->elem), z->numel, packed ? "I32" : "I8", want,
                                packed ? "packed along the rows" : "one per scale");
            dp->zp_packed = packed;
            dp->zp_part = (int)p.item.n;
            p.item.raw[p.item.n++] = (size_t)(w->zp - h->raw);
            w->zp->used = true;
        }
        if (gidx) {
            dp->gidx_part = (int)p.item.n;
            p.item.raw[p.item.n++] = (size_t)(w->gidx - h->raw);
        }
        p.quantized = false;
        p.elem = QTK_ELEM_F32;
        p.item.decode = hub_ct_decode_deq;
        p.item.param = dp;
        st = hub_notice(h, w->x, "%s has no qtk scheme: dequantized to F32 (exact values)",
                        gidx ? "an activation-order group index (weight_g_idx)"
                             : "a zero point of tensor or block strategy (qtk's zero points follow per-row or group scales)");
    }
    if (!st) st = hub_add(h, &p);
    return st;
}

/* Finds the weight X's tensors and kind; false if X is not a compressed-tensors weight. */
static qtk_status gather(qtk__hub *h, const char *x, weight *w, bool *is) {
    memset(w, 0, sizeof *w);
    *is = false;
    w->x = x;
    hub_raw *packed = hub_find(h, x, "_packed"), *plain = hub_find(h, x, "");
    w->scale = hub_find(h, x, "_scale");
    w->global = hub_find(h, x, "_global_scale");
    w->shape = hub_find(h, x, "_shape");
    w->zp = hub_find(h, x, "_zero_point");
    w->gidx = hub_find(h, x, "_g_idx");
    char b1[128], b2[128];
    if (packed) {
        w->w = packed;
        if (!w->scale) return qtk__err(QTK_E_FORMAT, "'%s_packed' (in '%s') has no '%s_scale'", x, hub_file(h, packed), x);
        const qtk_ckpt_tensor *pt = packed->t, *st = w->scale->t;
        if (pt->elem == QTK_ELEM_U8) {
            if (pt->rank < 1) return qtk__err(QTK_E_FORMAT, "'%s_packed' (in '%s') is a scalar", x, hub_file(h, packed));
            w->rank = pt->rank;
            memcpy(w->lshape, pt->shape, (size_t)pt->rank * sizeof *pt->shape);
            w->lshape[w->rank - 1] *= 2;
            if (st->elem == QTK_ELEM_F8_E4M3) {
                w->kind = W_NVFP4;
                if (!w->global)
                    return qtk__err(QTK_E_FORMAT, "'%s_packed' (in '%s') is NVFP4 (F8_E4M3 scales) but has no '%s_global_scale'",
                                    x, hub_file(h, packed), x);
                if (w->global->t->elem != QTK_ELEM_F32 || w->global->t->numel != 1)
                    return qtk__err(QTK_E_FORMAT, "'%s_global_scale' (in '%s') is %s [%s]; it is F32 [1]", x,
                                    hub_file(h, w->global), qtk_elem_name(w->global->t->elem),
                                    qtk_shape_format(w->global->t->shape, w->global->t->rank, b1, sizeof b1));
            } else if (st->elem == QTK_ELEM_U8 || st->elem == QTK_ELEM_F8_E8M0) {
                w->kind = W_MXFP4;
                size_t want[QTK_MAX_RANK];
                memcpy(want, w->lshape, sizeof want);
                want[w->rank - 1] = qtk__ceil_div(want[w->rank - 1], 32);
                if (!hub_same_shape(st, want, w->rank))
                    return qtk__err(QTK_E_SHAPE, "'%s_scale' (in '%s') is [%s]; MXFP4 scales of '%s' need [%s]", x,
                                    hub_file(h, w->scale), qtk_shape_format(st->shape, st->rank, b1, sizeof b1), x,
                                    qtk_shape_format(want, w->rank, b2, sizeof b2));
            } else {
                return qtk__err(QTK_E_FORMAT, "'%s_scale' (in '%s') is %s; packed FP4 scales are F8_E4M3 or U8", x,
                                hub_file(h, w->scale), qtk_elem_name(st->elem));
            }
        } else if (pt->elem == QTK_ELEM_I32) {
            w->kind = W_PACK;
            if (!w->shape)
                return qtk__err(QTK_E_FORMAT, "'%s_packed' (in '%s') has no '%s_shape' (the unpacked [O, K])", x,
                                hub_file(h, packed), x);
            qtk_status s = read_shape(h, w);
            if (s) return s;
        } else {
            return qtk__err(QTK_E_FORMAT, "'%s_packed' (in '%s') is %s; compressed-tensors packs U8 (FP4) or I32 (ints)", x,
                            hub_file(h, packed), qtk_elem_name(pt->elem));
        }
    } else if (plain && w->scale &&
               (plain->t->elem == QTK_ELEM_F8_E4M3 || plain->t->elem == QTK_ELEM_F8_E5M2 || plain->t->elem == QTK_ELEM_I8)) {
        w->w = plain;
        w->kind = plain->t->elem == QTK_ELEM_I8 ? W_INT8 : W_FLOAT;
        w->rank = plain->t->rank;
        if (w->rank > QTK_MAX_RANK) return qtk__err(QTK_E_UNSUPPORTED, "'%s' has rank %d", x, w->rank);
        memcpy(w->lshape, plain->t->shape, (size_t)w->rank * sizeof *w->lshape);
    } else {
        return QTK_OK;
    }
    if (w->kind != W_NVFP4 && w->kind != W_MXFP4 && hub_scale_dtype(w->scale->t->elem) != QTK_DTYPE_F32 &&
        w->scale->t->elem != QTK_ELEM_BF16 && w->scale->t->elem != QTK_ELEM_F16)
        return qtk__err(QTK_E_FORMAT, "'%s_scale' (in '%s') is %s; scales of this format are F32, BF16 or F16", x,
                        hub_file(h, w->scale), qtk_elem_name(w->scale->t->elem));
    *is = true;
    return QTK_OK;
}

/* bits of a pack-quantized weight: the config's, else what the packed width implies */
static qtk_status pack_bits(qtk__hub *h, weight *w, const ct_args *a) {
    if (w->kind != W_PACK) return QTK_OK;
    size_t K = w->rank ? w->lshape[w->rank - 1] : 1, cols = w->w->t->rank ? w->w->t->shape[w->w->t->rank - 1] : 0;
    size_t rows = 1;
    for (int i = 0; i < w->rank - 1; i++) rows *= w->lshape[i];
    unsigned bits = a->bits == 4 || a->bits == 8 ? (unsigned)a->bits : qtk__ceil_div(K, 8) == cols ? 4 : 8;
    char b1[128], b2[128];
    if ((a->bits && a->bits != 4 && a->bits != 8) || qtk__ceil_div(K, 32 / bits) != cols || w->w->t->numel != rows * cols)
        return qtk__err(QTK_E_SHAPE, "'%s_packed' (in '%s') is I32 [%s]; %u-bit fields of '%s' [%s] need %zu words a row%s", w->x,
                        hub_file(h, w->w), qtk_shape_format(w->w->t->shape, w->w->t->rank, b1, sizeof b1), bits, w->x,
                        qtk_shape_format(w->lshape, w->rank, b2, sizeof b2), qtk__ceil_div(K, 32 / bits),
                        a->bits ? " (num_bits from the config)" : "");
    w->bits = bits;
    return QTK_OK;
}

static qtk_status fold(qtk__hub *h) {
    ct_config c;
    qtk_status st = config_read(h, &c);
    size_t found = 0;
    for (size_t i = 0; i < h->n_raw && !st; i++) {
        hub_raw *r = &h->raw[i];
        if (r->used) continue;
        char *x = hub_strip(h, r->t->name, "_scale");
        if (!x) continue;
        weight w;
        bool is;
        st = gather(h, x, &w, &is);
        if (st || !is) continue;
        ct_args a;
        bool inferred;
        st = resolve(h, &c, &w, &a, &inferred);
        if (!st && inferred) st = infer(h, &w, &a);
        if (!st) st = pack_bits(h, &w, &a);
        if (!st) st = add_weight(h, &w, &a, inferred);
        if (st) break;
        w.w->used = w.scale->used = true;
        if (w.global) w.global->used = true;
        if (w.shape) w.shape->used = true;
        found++;
    }
    config_free(&c);
    if (st) return st;
    static const char *const companions[] = {"_packed", "weight_scale", "weight_global_scale", "weight_shape",
                                             "weight_zero_point", "weight_g_idx"};
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        for (size_t k = 0; k < sizeof companions / sizeof companions[0] && !r->used; k++)
            if (qtk__has_suffix(r->t->name, companions[k]))
                return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') belongs to no quantized weight (its weight or scale is missing)",
                                r->t->name, hub_file(h, r));
        if (!r->used && (r->t->elem == QTK_ELEM_F8_E4M3 || r->t->elem == QTK_ELEM_I8) && qtk__has_suffix(r->t->name, "weight"))
            return qtk__err(QTK_E_FORMAT, "%s weight '%s' (in '%s') has no '%s_scale'", qtk_elem_name(r->t->elem), r->t->name,
                            hub_file(h, r), r->t->name);
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"compressed-tensors\" but no weight has a *_scale",
                        h->config_file);
    return QTK_OK;
}

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++) {
        const char *n = h->raw[i].t->name;
        if (qtk__has_suffix(n, "weight_packed") || qtk__has_suffix(n, "weight_global_scale") || qtk__has_suffix(n, "weight_shape")) {
            *why = qtk__has_suffix(n, "weight_packed") ? "*.weight_packed" : qtk__has_suffix(n, "weight_shape") ? "*.weight_shape"
                                                                                               : "*.weight_global_scale";
            return true;
        }
    }
    /* FP8 / int8 with a non-scalar or non-F32 scale: compressed-tensors (ModelOpt writes F32 []) */
    for (size_t i = 0; i < h->n_raw; i++) {
        const qtk_ckpt_tensor *t = h->raw[i].t;
        if (!qtk__has_suffix(t->name, "weight_scale") || (t->elem == QTK_ELEM_F32 && t->rank == 0)) continue;
        char buf[1024];
        size_t k = strlen(t->name) - 6;
        if (k >= sizeof buf) continue;
        memcpy(buf, t->name, k);
        buf[k] = '\0';
        const hub_raw *w = hub_find(h, buf, "");
        if (w && (w->t->elem == QTK_ELEM_F8_E4M3 || w->t->elem == QTK_ELEM_I8)) {
            *why = "*.weight_scale beside an F8_E4M3 or I8 weight";
            return true;
        }
    }
    return false;
}

const hub_conv hub_ct_conv = {QTK_LAYOUT_CT, "compressed-tensors", methods, sniff, fold, hub_ct_plan, hub_ct_config, NULL};
