/* hub_bnb.c — bitsandbytes 4-bit (HUB_LAYOUTS.md §6): for a weight P.weight of n elements,
 *
 *   P.weight                               U8 [ceil(n/2), 1]  indices of the FLATTENED weight,
 *                                                             element 2k in the HIGH nibble
 *   P.weight.absmax                        F32 [nb] (or U8 [nb] when double-quantized)
 *   P.weight.quant_map                     F32 [16]  the code table
 *   P.weight.nested_absmax / nested_quant_map         double quantization only
 *   P.weight.quant_state.bitsandbytes__nf4 U8 [len]   JSON: quant_type, blocksize, dtype, shape
 *
 * Blocks run over the flattened tensor, so the qtk tensor is `q4f,table=nf4,block=B:f32`
 * (u32 words) on the original shape when its last dim is a multiple of B (then every block
 * lies in one row and the two are identical), else on [n]. Its bytes are bnb's with each
 * byte's nibbles swapped (qtk puts the first element low), padded to whole words; the absmax
 * decoded to f32 (double quantization: absmax = RN32(RN32(nested_quant_map[code] x
 * nested_absmax[i / 256]) + nested_offset)); the table after them. */
#include "hub/hub_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const methods[] = {"bitsandbytes", NULL};

#define BNB_STATE ".quant_state.bitsandbytes__"

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++)
        if (strstr(h->raw[i].t->name, BNB_STATE)) {
            *why = "*" BNB_STATE "*";
            return true;
        }
    return false;
}

typedef struct {
    size_t n, blocksize, nb;
    bool nested;
    size_t nested_bs;
    float offset;
} bnb_param;

/* parts: weight, absmax, [nested_absmax, nested_quant_map,] quant_map */
static qtk_status decode(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)h;
    const bnb_param *p = it->param;
    size_t nbytes = (p->n + 1) / 2, vbytes = (p->n + 7) / 8 * 4;
    for (size_t k = 0; k < nbytes; k++) out[k] = (uint8_t)(part[0][k] << 4 | part[0][k] >> 4);
    if (p->n & 1) out[nbytes - 1] &= 0x0F; /* the padding nibble: qtk wants unused fields 0 */
    memset(out + nbytes, 0, vbytes - nbytes);
    uint8_t *scales = out + vbytes;
    if (!p->nested) {
        memcpy(scales, part[1], 4 * p->nb);
    } else {
        for (size_t i = 0; i < p->nb; i++) {
            float code = qtk__bits_f32(qtk__ld32(part[3] + 4 * part[1][i]));
            float na = qtk__bits_f32(qtk__ld32(part[2] + 4 * (i / p->nested_bs)));
            volatile float prod = code * na; /* two f32 roundings, as bitsandbytes computes it */
            float v = prod + p->offset;
            if (!qtk__isfinite(v))
                return qtk__err(QTK_E_VALUE, "tensor '%s': double-quantized absmax %zu decodes to a non-finite value", name, i);
            qtk__st32(scales + 4 * i, qtk__f32_bits(v));
        }
    }
    memcpy(scales + 4 * p->nb, part[it->n - 1], 64);
    return QTK_OK;
}

/* bitsandbytes' own FP4 code (bias 2; not OCP e2m1), by bit pattern. */
static void fp4_table(float t[16]) {
    static const float mag[8] = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f};
    for (int i = 0; i < 8; i++) {
        t[i] = mag[i] / 12.0f;
        t[i + 8] = -t[i];
    }
}

/* The state blob: {"quant_type": ..., "blocksize": ..., "dtype": ..., "shape": [...], nested...} */
typedef struct {
    const char *quant_type;
    long long blocksize, nested_bs;
    double offset;
    bool nested;
    size_t shape[QTK_MAX_RANK];
    int rank;
} blob;

static qtk_status read_blob(qtk__hub *h, const hub_raw *r, blob *b, json_t **root) {
    const qtk_ckpt_tensor *t = r->t;
    memset(b, 0, sizeof *b);
    if (t->elem != QTK_ELEM_U8 || t->rank != 1)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s; a bitsandbytes quant_state is U8 [len] (JSON)", t->name,
                        hub_file(h, r), qtk_elem_name(t->elem));
    json_error_t e;
    *root = json_loadb((const char *)hub_bytes(h, r), t->nbytes, 0, &e);
    if (!json_is_object(*root))
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is not a JSON object: %s", t->name, hub_file(h, r), e.text);
    b->quant_type = hub_json_str(*root, "quant_type");
    const json_t *sh = hub_json(*root, "shape");
    if (!b->quant_type || !hub_json_int(hub_json(*root, "blocksize"), &b->blocksize) || b->blocksize < 2 ||
        b->blocksize > 65535 || !json_is_array(sh) || json_array_size(sh) > QTK_MAX_RANK)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') lacks quant_type, blocksize (2..65535) or shape (rank <= %d)", t->name,
                        hub_file(h, r), QTK_MAX_RANK);
    b->rank = (int)json_array_size(sh);
    for (int i = 0; i < b->rank; i++) {
        long long v;
        if (!hub_json_int(json_array_get(sh, (size_t)i), &v) || v < 0)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s'): shape[%d] is not a size", t->name, hub_file(h, r), i);
        b->shape[i] = (size_t)v;
    }
    const json_t *off = hub_json(*root, "nested_offset");
    if (off) {
        b->nested = true;
        b->nested_bs = 256;
        if (hub_json(*root, "nested_blocksize") && !hub_json_int(hub_json(*root, "nested_blocksize"), &b->nested_bs))
            b->nested_bs = 0;
        if (!json_is_number(off) || b->nested_bs < 1)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s'): nested_offset or nested_blocksize is not a number", t->name,
                            hub_file(h, r));
        b->offset = json_number_value(off);
    }
    return QTK_OK;
}

/* Weight x's quant_state (exactly one of ..nf4 and ..fp4, agreeing with the config) and its
 * 16-entry quant_map. */
static qtk_status read_state(qtk__hub *h, const char *x, const hub_raw *w, hub_raw **state, hub_raw **map, blob *b) {
    hub_raw *qm = hub_find(h, x, ".quant_map"), *nf = hub_find(h, x, BNB_STATE "nf4"), *f4 = hub_find(h, x, BNB_STATE "fp4");
    hub_raw *st = nf ? nf : f4;
    if (!st || (nf && f4))
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') needs exactly one of '%s" BNB_STATE "nf4' and '..fp4'", x,
                        hub_file(h, w), x);
    if (!qm || qm->t->elem != QTK_ELEM_F32 || qm->t->numel != 16)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no '%s.quant_map' F32 [16]", x, hub_file(h, w), x);
    json_t *root = NULL;
    qtk_status s = read_blob(h, st, b, &root);
    const char *want = nf ? "nf4" : "fp4";
    if (!s && strcmp(b->quant_type, want) != 0)
        s = qtk__err(QTK_E_FORMAT, "'%s' says quant_type \"%.10s\" but is named ..%s", st->t->name, b->quant_type, want);
    const char *cq = hub_json_str(h->qcfg, "bnb_4bit_quant_type");
    if (!s && cq && strcmp(cq, want) != 0)
        s = qtk__err(QTK_E_FORMAT, "'%s' says bnb_4bit_quant_type \"%.10s\" but '%s' is %s", h->config_file, cq, x, want);
    json_decref(root); /* b keeps only numbers (quant_type is not read after this) */
    b->quant_type = want;
    *state = st;
    *map = qm;
    return s;
}

/* The absmax of nb blocks: F32 [nb], or double-quantized U8 [nb] with .nested_absmax and
 * .nested_quant_map, which join the tensor's parts (*na, *nq). */
static qtk_status read_absmax(qtk__hub *h, const char *x, const hub_raw *w, const hub_raw *am, const blob *b, size_t n,
                              size_t nb, hub_pending *pd, hub_raw **na, hub_raw **nq) {
    const json_t *dq = hub_json(h->qcfg, "bnb_4bit_use_double_quant");
    if (json_is_boolean(dq) && json_is_true(dq) != b->nested)
        return qtk__err(QTK_E_FORMAT, "'%s' says bnb_4bit_use_double_quant %s but '%s' is %sdouble-quantized", h->config_file,
                        json_is_true(dq) ? "true" : "false", x, b->nested ? "" : "not ");
    if (!b->nested) {
        if (am->t->elem != QTK_ELEM_F32 || am->t->numel != nb)
            return qtk__err(QTK_E_SHAPE, "'%s.absmax' (in '%s') is %s with %zu values; blocks of %lld over %zu elements need "
                            "F32 [%zu]", x, hub_file(h, am), qtk_elem_name(am->t->elem), am->t->numel, b->blocksize, n, nb);
        return QTK_OK;
    }
    *na = hub_find(h, x, ".nested_absmax");
    *nq = hub_find(h, x, ".nested_quant_map");
    size_t nnb = qtk__ceil_div(nb, (size_t)b->nested_bs);
    if (!*na || !*nq || (*na)->t->elem != QTK_ELEM_F32 || (*na)->t->numel != nnb || (*nq)->t->elem != QTK_ELEM_F32 ||
        (*nq)->t->numel != 256 || am->t->elem != QTK_ELEM_U8 || am->t->numel != nb)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is double-quantized: it needs .absmax U8 [%zu], .nested_absmax F32 "
                        "[%zu] and .nested_quant_map F32 [256]", x, hub_file(h, w), nb, nnb);
    pd->item.raw[pd->item.n++] = (size_t)(*na - h->raw);
    pd->item.raw[pd->item.n++] = (size_t)(*nq - h->raw);
    if (!qtk__isfinite((float)b->offset)) return qtk__err(QTK_E_VALUE, "'%s': nested_offset is not finite", x);
    return QTK_OK;
}

/* Weight x with its .absmax am, quant_state and quant_map (and the nested pair): one qtk
 * q4f tensor on the nf4 (or the stored) table. */
static qtk_status fold_weight(qtk__hub *h, const char *x, hub_raw *w, hub_raw *am) {
    hub_raw *st = NULL, *qm = NULL;
    blob b;
    qtk_status s = read_state(h, x, w, &st, &qm, &b);
    if (s) return s;
    bool nf4 = strcmp(b.quant_type, "nf4") == 0;
    size_t n = 1;
    for (int i = 0; i < b.rank; i++)
        if (!qtk__mul_ok(n, b.shape[i], &n)) return qtk__err(QTK_E_SHAPE, "'%s': shape overflows", x);
    char s1[128];
    if (w->t->nbytes != (n + 1) / 2)
        return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') holds %zu bytes; its quant_state shape [%s] (%zu elements) packs into %zu",
                        x, hub_file(h, w), w->t->nbytes, qtk_shape_format(b.shape, b.rank, s1, sizeof s1), n, (n + 1) / 2);
    size_t B = (size_t)b.blocksize, nb = qtk__ceil_div(n, B);
    bnb_param *p = hub_alloc(h, sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    *p = (bnb_param){n, B, nb, b.nested, (size_t)b.nested_bs, (float)b.offset};
    hub_pending pd = {.name = x, .quantized = true, .item = {.raw = {(size_t)(w - h->raw), (size_t)(am - h->raw)}, .n = 2,
                                                             .decode = decode, .param = p}};
    hub_raw *na = NULL, *nq = NULL;
    if ((s = read_absmax(h, x, w, am, &b, n, nb, &pd, &na, &nq))) return s;
    pd.item.raw[pd.item.n++] = (size_t)(qm - h->raw);
    /* the table: qtk's nf4 when the stored map is it bit for bit, else the stored one */
    qtk_scheme tab;
    memset(&tab, 0, sizeof tab);
    s = qtk__ckpt_resolve_table(h->self, &tab, hub_bytes(h, qm), 16, nf4 ? "nf4" : "bnb_fp4");
    if (s) return qtk__err_context(s, "'%s.quant_map'", x);
    /* Blocks lie within rows when the last dim is a multiple of B (and of 8, for whole words). */
    bool rows = b.rank == 1 || (b.rank > 1 && b.shape[b.rank - 1] % B == 0 && b.shape[b.rank - 1] % 8 == 0);
    size_t *shape = hub_alloc(h, QTK_MAX_RANK * sizeof *shape);
    if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    if (rows) {
        memcpy(shape, b.shape, (size_t)b.rank * sizeof *shape);
        pd.rank = b.rank;
    } else {
        shape[0] = n;
        pd.rank = 1;
        /* the values keep the quant_state's shape (a dequantized tensor takes it) */
        size_t *vs = hub_alloc(h, (size_t)(b.rank ? b.rank : 1) * sizeof *vs);
        if (!vs) return qtk__err(QTK_E_NOMEM, "out of memory");
        memcpy(vs, b.shape, (size_t)b.rank * sizeof *vs);
        pd.value_shape = vs;
        pd.value_rank = b.rank;
    }
    pd.shape = shape;
    s = hub_scheme(&pd.scheme, "q4f,table=%s,block=%zu:f32", tab.table, B);
    if (!s) s = hub_add(h, &pd);
    if (!s && !rows)
        s = hub_notice(h, x, "bitsandbytes blocks of %zu run across the rows of [%s]: held flattened as [%zu]", B,
                       qtk_shape_format(b.shape, b.rank, s1, sizeof s1), n);
    if (s) return s;
    w->used = am->used = qm->used = st->used = true;
    if (na) na->used = nq->used = true;
    return QTK_OK;
}

static qtk_status fold(qtk__hub *h) {
    const json_t *l8 = hub_json(h->qcfg, "load_in_8bit"), *l4 = hub_json(h->qcfg, "load_in_4bit");
    if (json_is_true(l8) && !json_is_true(l4))
        return qtk__err(QTK_E_UNSUPPORTED, "'%s': bitsandbytes 8-bit (LLM.int8) checkpoints are not read by qtk; read them "
                        "with --layout none", h->config_file);
    size_t found = 0;
    for (size_t i = 0; i < h->n_raw; i++) {
        hub_raw *am = &h->raw[i];
        char *x = hub_strip(h, am->t->name, ".absmax");
        if (!x || am->used) continue;
        if (qtk__has_suffix(x, ".nested")) continue; /* X.nested_absmax is not an absmax of its own */
        hub_raw *w = hub_find(h, x, "");
        if (!w) return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no weight '%s' beside it", am->t->name, hub_file(h, am), x);
        qtk_status s = fold_weight(h, x, w, am);
        if (s) return s;
        found++;
    }
    static const char *const companions[] = {".quant_map", ".nested_absmax", ".nested_quant_map"};
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        bool orphan = !r->used && strstr(r->t->name, BNB_STATE);
        for (size_t k = 0; k < 3 && !orphan; k++) orphan = !r->used && qtk__has_suffix(r->t->name, companions[k]);
        if (orphan)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') belongs to no 4-bit weight (its weight or .absmax is missing)",
                            r->t->name, hub_file(h, r));
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"bitsandbytes\" but no weight has a .absmax", h->config_file);
    return QTK_OK;
}

/* ---- writing ---- */

typedef struct {
    size_t n;
    uint8_t pad; /* the index of 0.0, for the padding nibble of an odd count */
} enc_param;

static qtk_status enc_weight(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *out) {
    (void)wc;
    (void)t;
    const enc_param *e = p->param;
    size_t nbytes = (e->n + 1) / 2;
    for (size_t k = 0; k < nbytes; k++) out[k] = (uint8_t)(bytes[k] << 4 | bytes[k] >> 4);
    if (e->n & 1) out[nbytes - 1] = (uint8_t)((out[nbytes - 1] & 0xF0) | e->pad);
    return QTK_OK;
}

static const char *quant_type_of(const float *t) {
    float nf4[16], fp4[16];
    size_t n;
    if (qtk_table_get("nf4", nf4, 16, &n) == QTK_OK && memcmp(t, nf4, sizeof nf4) == 0) return "nf4";
    fp4_table(fp4);
    if (memcmp(t, fp4, sizeof fp4) == 0) return "fp4";
    return NULL;
}

static qtk_status plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    const qtk_scheme *s = &t->scheme;
    char spec[160], sh[128];
    float table[16];
    size_t nt = 0;
    const char *qt = NULL;
    int r = t->rank;
    size_t B = s->block_rank == 1 ? s->block[0] : 0;
    bool ok = s->value == QTK_VALUE_Q4F && s->mode == QTK_MODE_LOOKUP && s->store == QTK_STORE_U32 && s->pack_dim == 0 &&
              s->block_rank == 1 && B >= 32 && B <= 4096 && (B & (B - 1)) == 0 && s->block_dtype == QTK_DTYPE_F32 &&
              s->tensor_dtype == QTK_DTYPE_NONE && r >= 1 && (r == 1 || t->shape[r - 1] % B == 0) &&
              qtk_table_get(s->table, table, 16, &nt) == QTK_OK && nt == 16 && (qt = quant_type_of(table));
    if (!ok) {
        if (qtk_scheme_format(s, spec, sizeof spec, NULL)) spec[0] = '\0';
        return qtk__err(QTK_E_UNSUPPORTED,
                        "layout bnb stores q4f,table=nf4,block=B:f32 (or bitsandbytes' fp4 table), B a power of two in "
                        "32..4096, on [n] or on a shape whose last dim is a multiple of B; this is '%s' on [%s]",
                        spec, qtk_shape_format(t->shape, r, sh, sizeof sh));
    }
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, t->shape, r, &L);
    if (st) return st;
    size_t n = t->numel, nb = L.n_scales;
    enc_param *ep = qtk__arena_alloc(wc->arena, sizeof *ep);
    if (!ep) return qtk__err(QTK_E_NOMEM, "out of memory");
    ep->n = n;
    ep->pad = 0;
    for (uint8_t i = 0; i < 16; i++)
        if (fabsf(table[i]) < fabsf(table[ep->pad])) ep->pad = i;
    /* the JSON blob as Python's json.dumps writes it */
    const char *dtype = hub_json_str(wc->src_config, "torch_dtype");
    if (!dtype) dtype = hub_json_str(wc->src_config, "dtype");
    if (!dtype) dtype = "bfloat16";
    char text[512];
    int k = snprintf(text, sizeof text, "{\"quant_type\": \"%s\", \"blocksize\": %zu, \"dtype\": \"%.32s\", \"shape\": [", qt,
                     B, dtype);
    for (int i = 0; i < r && k > 0 && (size_t)k < sizeof text; i++)
        k += snprintf(text + k, sizeof text - (size_t)k, i ? ", %zu" : "%zu", t->shape[i]);
    if (k > 0 && (size_t)k < sizeof text) k += snprintf(text + k, sizeof text - (size_t)k, "]}");
    if (k < 0 || (size_t)k >= sizeof text) return qtk__err(QTK_E_INTERNAL, "quant_state of '%s' too long", t->name);
    uint8_t *bb = qtk__arena_alloc(wc->arena, (size_t)k);
    if (!bb) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(bb, text, (size_t)k);
    char suffix[64];
    snprintf(suffix, sizeof suffix, BNB_STATE "%s", qt);
    size_t wsh[2] = {(n + 1) / 2, 1}, nbs[1] = {nb}, sixteen[1] = {16}, blen[1] = {(size_t)k};
    hub_wpiece *pw = hub_wpiece_add(wc, w, t, "", QTK_ELEM_U8, wsh, 2, (n + 1) / 2);
    hub_wpiece *pa = hub_wpiece_add(wc, w, t, ".absmax", QTK_ELEM_F32, nbs, 1, 4 * nb);
    hub_wpiece *pq = hub_wpiece_add(wc, w, t, ".quant_map", QTK_ELEM_F32, sixteen, 1, 64);
    hub_wpiece *ps = hub_wpiece_add(wc, w, t, suffix, QTK_ELEM_U8, blen, 1, (size_t)k);
    if (!pw || !pa || !pq || !ps) return qtk__err(QTK_E_NOMEM, "out of memory");
    pw->encode = enc_weight;
    pw->param = ep;
    pa->src_off = L.scales_offset;
    pq->src_off = L.table_offset;
    ps->constant = bb;
    w->kind = strcmp(qt, "nf4") == 0 ? 1 : 2;
    return QTK_OK;
}

static qtk_status config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    int kind = 0;
    for (size_t i = 0; i < wc->d->n_tensors; i++) {
        if (!wc->d->tensors[i].quantized) continue;
        if (kind && wc->wt[i].kind != kind)
            return qtk__err(QTK_E_UNSUPPORTED, "layout bnb has one bnb_4bit_quant_type per checkpoint; the tensors mix nf4 "
                            "and fp4 (e.g. '%s')", wc->d->tensors[i].name);
        kind = wc->wt[i].kind;
    }
    if (!kind)
        return qtk__err(QTK_E_UNSUPPORTED, "layout bnb: no tensor is quantized; a checkpoint without one is written with "
                        "--layout qtk");
    qtk_status st = QTK_OK;
    if (!json_object_get(q, "bnb_4bit_compute_dtype")) st = hub_jset(q, "bnb_4bit_compute_dtype", json_string("bfloat16"));
    if (!st && !json_object_get(q, "bnb_4bit_quant_storage")) st = hub_jset(q, "bnb_4bit_quant_storage", json_string("uint8"));
    if (!st) st = hub_jset(q, "bnb_4bit_quant_type", json_string(kind == 1 ? "nf4" : "fp4"));
    /* qtk writes the absmax decoded (f32): not double-quantized */
    if (!st) st = hub_jset(q, "bnb_4bit_use_double_quant", json_false());
    if (!st) st = hub_jset(q, "load_in_4bit", json_true());
    if (!st) st = hub_jset(q, "load_in_8bit", json_false());
    if (!st) st = hub_jset(q, "quant_method", json_string("bitsandbytes"));
    return st;
}

const hub_conv hub_bnb_conv = {QTK_LAYOUT_BNB, "bnb", methods, sniff, fold, plan, config, NULL};
