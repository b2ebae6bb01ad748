/* hub.c — one logical checkpoint over Hub files: the layout table, detection, the tensors the
 * convention folds, and the checkpoint's load hooks that hand them out. Which files and configs
 * are read is hub_files.c; the conventions themselves are hub_<name>.c. */
#include "hub/hub_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const char *const layout_names[QTK_LAYOUT_COUNT_] = {
    "auto", "none", "qtk", "gpt-oss", "modelopt", "compressed-tensors", "deepseek", "bnb", "torchao", "gptq", "awq",
};

const char *qtk_hub_layout_name(qtk_hub_layout l) {
    return (unsigned)l < QTK_LAYOUT_COUNT_ ? layout_names[l] : "?";
}

qtk_status qtk_hub_layout_parse(const char *name, qtk_hub_layout *out) {
    if (!name || !out) return qtk__err(QTK_E_ARG, "qtk_hub_layout_parse: NULL argument");
    for (int i = 0; i < QTK_LAYOUT_COUNT_; i++)
        if (strcasecmp(name, layout_names[i]) == 0) {
            *out = (qtk_hub_layout)i;
            return QTK_OK;
        }
    if (strcasecmp(name, "ct") == 0) return *out = QTK_LAYOUT_CT, QTK_OK;
    if (strcasecmp(name, "bitsandbytes") == 0) return *out = QTK_LAYOUT_BNB, QTK_OK;
    if (strcasecmp(name, "gptoss") == 0 || strcasecmp(name, "mxfp4") == 0) return *out = QTK_LAYOUT_GPT_OSS, QTK_OK;
    return qtk__err(QTK_E_PARSE,
                    "layout '%s' is not one of qtk, gpt-oss, modelopt, compressed-tensors, deepseek, bnb, gptq, awq (or none, auto)",
                    name);
}

static const hub_conv *const convs[] = {&hub_gptoss_conv, &hub_modelopt_conv, &hub_ct_conv, &hub_deepseek_conv,
                                        &hub_bnb_conv, &hub_torchao_conv, &hub_gptq_conv, &hub_awq_conv};
#define N_CONVS (sizeof convs / sizeof convs[0])

const hub_conv *hub_conv_of(qtk_hub_layout l) {
    for (size_t i = 0; i < N_CONVS; i++)
        if (convs[i]->layout == l) return convs[i];
    return NULL;
}

/* ---- helpers for the conventions ---- */

void *hub_alloc(qtk__hub *h, size_t n) { return qtk__arena_alloc(&h->arena, n ? n : 1); }

char *hub_strip(qtk__hub *h, const char *name, const char *suffix) {
    if (!qtk__has_suffix(name, suffix)) return NULL;
    return qtk__arena_strndup(&h->arena, name, strlen(name) - strlen(suffix));
}

static int cmp_raw(const void *a, const void *b) {
    return strcmp((*(hub_raw *const *)a)->t->name, (*(hub_raw *const *)b)->t->name);
}

hub_raw *hub_find(const qtk__hub *h, const char *name, const char *suffix) {
    size_t nl = strlen(name), lo = 0, hi = h->n_raw;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = h->by_name[mid]->t->name;
        size_t ml = strlen(m);
        /* compare m with name + suffix without building it */
        int c = strncmp(m, name, nl);
        if (!c) c = ml < nl ? -1 : strcmp(m + nl, suffix);
        if (c == 0) return h->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *hub_file(const qtk__hub *h, const hub_raw *r) { return h->shard_path[r->shard]; }

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

const uint8_t *hub_bytes(const qtk__hub *h, const hub_raw *r) {
    static const uint8_t empty[1];
    const qtk_ckpt *c = h->shard[r->shard];
    const qtk__ckpt_piece *p = &c->loc[r->idx].piece[0];
    return p->len ? c->map.data + p->off : empty;
}

bool hub_same_shape(const qtk_ckpt_tensor *t, const size_t *shape, int rank) {
    if (t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

qtk_status hub_add(qtk__hub *h, const hub_pending *p) {
    if (!qtk__grow((void **)&h->pend, &h->cap_pend, h->n_pend, sizeof *h->pend))
        return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensors", h->n_pend + 1);
    h->pend[h->n_pend++] = *p;
    return QTK_OK;
}

qtk_status hub_notice(qtk__hub *h, const char *tensor, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!qtk__grow((void **)&h->notices, &h->cap_notices, h->n_notices, sizeof *h->notices))
        return qtk__err(QTK_E_NOMEM, "out of memory");
    const char *t = tensor ? qtk__arena_strdup(&h->arena, tensor) : NULL;
    const char *x = qtk__arena_strdup(&h->arena, buf);
    if ((tensor && !t) || !x) return qtk__err(QTK_E_NOMEM, "out of memory");
    h->notices[h->n_notices++] = (qtk_hub_notice){t, x};
    return QTK_OK;
}

/* ---- the logical checkpoint's hooks ---- */

/* Gives a view's buffer back: a shard's own (a tensor passed through) is freed; an assembly
 * buffer becomes the spare when it is larger than the one kept. */
static void hub_release(qtk_ckpt *c, qtk_ckpt_view *v) {
    qtk__hub *h = c->impl;
    if (!v->owned) return;
    const hub_item *it = &h->item[v->index];
    if (it->n == 1 && !it->decode) {
        free(v->owned);
        return;
    }
    size_t cap;
    memcpy(&cap, v->owned, sizeof cap);
    if (!h->spare || h->spare_cap < cap) {
        free(h->spare);
        h->spare = v->owned;
        h->spare_cap = cap;
    } else {
        free(v->owned);
    }
}

static qtk_status hub_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v) {
    qtk__hub *h = c->impl;
    const hub_item *it = &h->item[i];
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    if (it->n == 1 && !it->decode) {
        /* a tensor as its shard holds it (qtk's convention included: the shard checks it) */
        const hub_raw *r = &h->raw[it->raw[0]];
        qtk_ckpt_view iv;
        qtk_status st = qtk__ckpt_load_unchecked(h->shard[r->shard], r->idx, &iv);
        if (st) return st;
        v->data = iv.data;
        v->owned = iv.owned; /* ours now: freed by qtk_ckpt_unload */
        return QTK_OK;
    }
    const uint8_t *part[HUB_MAX_PARTS];
    bool contiguous = true;
    for (unsigned k = 0; k < it->n; k++) {
        const hub_raw *r = &h->raw[it->raw[k]];
        part[k] = hub_bytes(h, r);
        if (k) {
            const hub_raw *p = &h->raw[it->raw[k - 1]];
            contiguous = contiguous && p->shard == r->shard && part[k - 1] + p->t->nbytes == part[k];
        }
    }
    if (!it->decode && contiguous) { /* the pieces follow each other in one file: no copy */
        v->data = part[0];
        return QTK_OK;
    }
    /* an assembly buffer: [capacity][bytes...], the spare one when it is large enough */
    size_t need = t->nbytes ? t->nbytes : 1, hdr = sizeof(max_align_t);
    uint8_t *buf = h->spare;
    if (buf && h->spare_cap >= need) {
        h->spare = NULL;
    } else {
        buf = need <= SIZE_MAX - hdr ? malloc(hdr + need) : NULL;
        if (!buf) return qtk__err(QTK_E_NOMEM, "out of memory for tensor '%s' (%zu bytes)", t->name, t->nbytes);
        memcpy(buf, &need, sizeof need);
    }
    uint8_t *b = buf + hdr;
    v->owned = buf;
    v->data = b;
    qtk_status st = QTK_OK;
    if (it->decode) {
        st = it->decode(h, t->name, it, part, b);
    } else {
        size_t at = 0;
        for (unsigned k = 0; k < it->n; k++) {
            size_t n = h->raw[it->raw[k]].t->nbytes;
            if (n) memcpy(b + at, part[k], n);
            at += n;
        }
    }
    if (st) {
        hub_release(c, v);
        v->owned = NULL;
    }
    return st;
}

static void hub_drop_pages(qtk_ckpt *c, size_t i) {
    qtk__hub *h = c->impl;
    const hub_item *it = &h->item[i];
    for (unsigned k = 0; k < it->n; k++) {
        const hub_raw *r = &h->raw[it->raw[k]];
        qtk_ckpt_view v = {.index = r->idx};
        qtk__ckpt_drop_pages(h->shard[r->shard], &v);
    }
}

static size_t hub_offset_of(const qtk_ckpt *c, size_t i) {
    const qtk__hub *h = c->impl;
    const hub_raw *r = &h->raw[h->item[i].raw[0]];
    return qtk_ckpt_offset_of(h->shard[r->shard], r->idx);
}

static void hub_free(qtk__hub *h, bool close_shards) {
    if (!h) return;
    for (size_t i = 0; i < h->n_shards; i++) {
        if (close_shards) qtk_ckpt_close(h->shard[i]);
        free(h->shard_path[i]);
    }
    free(h->shard);
    free(h->shard_path);
    free(h->raw);
    free(h->by_name);
    free(h->pend);
    free(h->item);
    free(h->notices);
    free(h->spare);
    json_decref(h->config);
    json_decref(h->hfq);
    json_decref(h->qfile);
    qtk__arena_free(&h->arena);
    free(h);
}

static void hub_close(void *impl) { hub_free(impl, true); }

static qtk_status hub_status(const qtk_ckpt *c) {
    const qtk__hub *h = c->impl;
    for (size_t s = 0; s < h->n_shards; s++) {
        qtk_status st = qtk_ckpt_status(h->shard[s]);
        if (st) return st;
    }
    return QTK_OK;
}

static const qtk__ckpt_virt hub_virt = {hub_load, hub_release, hub_drop_pages, hub_offset_of, hub_close, hub_status};

const qtk__hub *hub_of(const qtk_ckpt *c) { return c && c->virt == &hub_virt ? c->impl : NULL; }

void qtk_ckpt_hub_info(const qtk_ckpt *c, qtk_hub_info *info) {
    memset(info, 0, sizeof *info);
    if (!c) return;
    if (c->virt != &hub_virt) {
        bool q = false;
        for (size_t i = 0; i < c->desc.n_tensors; i++) q |= c->desc.tensors[i].quantized;
        info->layout = q ? QTK_LAYOUT_QTK : QTK_LAYOUT_NONE;
        info->detected_by = q ? "qtk metadata" : "no quantized tensors";
        info->n_shards = 1;
        info->shards = (const char *const *)&c->name;
        return;
    }
    const qtk__hub *h = c->impl;
    info->layout = h->layout;
    info->detected_by = h->detected_by;
    info->config_file = h->config_file;
    info->quant_config = h->quant_json;
    info->index_file = h->index_file;
    info->n_shards = h->n_shards;
    info->shards = (const char *const *)h->shard_path;
    info->n_notices = h->n_notices;
    info->notices = h->notices;
}

qtk_status qtk__hub_dequantize(const qtk_ckpt *c, size_t i, const qtk_ckpt_view *v, qtk_dtype dtype, void *out) {
    if (!c || !v || i >= c->desc.n_tensors) return qtk__err(QTK_E_ARG, "qtk__hub_dequantize: no tensor %zu", i);
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    if (!t->quantized) return qtk__err(QTK_E_ARG, "tensor '%s' is not quantized", t->name);
    const qtk__hub *h = hub_of(c);
    if (h && h->item[i].deq) {
        bool done = false;
        qtk_status st = h->item[i].deq(h, &h->item[i], t, v->data, dtype, out, &done);
        if (st || done) return st;
    }
    return qtk_dequantize_bytes(v->data, v->len, t->shape, t->rank, &t->scheme, dtype, out, t->numel);
}

size_t qtk_ckpt_shard_of(const qtk_ckpt *c, size_t i) {
    if (!c || c->virt != &hub_virt || i >= c->desc.n_tensors) return 0;
    const qtk__hub *h = c->impl;
    return h->raw[h->item[i].raw[0]].shard;
}

/* ---- detection ---- */

static qtk_status detect(qtk__hub *h, qtk_hub_layout forced) {
    char why[160];
    bool any_q = false;
    for (size_t i = 0; i < h->n_raw; i++) any_q |= h->raw[i].t->quantized;
    if (any_q) {
        if (forced != QTK_LAYOUT_AUTO && forced != QTK_LAYOUT_QTK && forced != QTK_LAYOUT_NONE)
            return qtk__err(QTK_E_FORMAT, "the files use qtk's convention (qtk:scheme metadata), not layout %s",
                            qtk_hub_layout_name(forced));
        h->layout = QTK_LAYOUT_QTK;
        h->detected_by = "qtk metadata";
        if (h->qcfg)
            return hub_notice(h, NULL, "the files use qtk's convention; the quantization config in '%s' is ignored",
                              h->config_file);
        return QTK_OK;
    }
    if (forced != QTK_LAYOUT_AUTO) {
        h->layout = forced == QTK_LAYOUT_QTK ? QTK_LAYOUT_NONE : forced;
        h->detected_by = "given";
        return QTK_OK;
    }
    const char *method = h->qcfg == h->hfq ? NULL : hub_json_str(h->qcfg, "quant_method");
    /* AutoGPTQ's quantize_config.json and AutoAWQ's quant_config.json may not name the method */
    if (h->qcfg && h->qcfg == h->qfile && !method)
        method = hub_json(h->qcfg, "w_bit") || hub_json(h->qcfg, "zero_point") || hub_json(h->qcfg, "version") ? "awq" : "gptq";
    if (h->qcfg && h->qcfg == h->hfq) {
        h->layout = QTK_LAYOUT_MODELOPT;
        h->detected_by = "hf_quant_config.json";
        return QTK_OK;
    }
    if (method) {
        for (size_t i = 0; i < N_CONVS; i++)
            for (const char *const *m = convs[i]->methods; *m; m++)
                if (strcmp(*m, method) == 0) {
                    h->layout = convs[i]->layout;
                    if (h->qcfg == h->qfile) {
                        const char *base = strrchr(h->config_file, '/');
                        snprintf(why, sizeof why, "%.60s quant_method \"%.20s\"%s", base ? base + 1 : h->config_file, method,
                                 hub_json_str(h->qcfg, "quant_method") ? "" : " (implied by its keys)");
                    } else {
                        snprintf(why, sizeof why, "config.json quant_method \"%.60s\"", method);
                    }
                    h->detected_by = qtk__arena_strdup(&h->arena, why);
                    return h->detected_by ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
                }
        h->layout = QTK_LAYOUT_NONE;
        h->detected_by = "config.json (a quant_method qtk does not read)";
        return hub_notice(h, NULL,
                          "config.json quant_method '%.60s' is not a layout qtk reads (gpt-oss mxfp4, modelopt, "
                          "compressed-tensors, fp8, bitsandbytes, torchao, gptq, awq): the tensors are listed as stored",
                          method);
    }
    /* written by qtk as the tensors they are (qtk:layout "none"), whatever their names say */
    bool as_is = h->n_shards > 0;
    for (size_t s = 0; s < h->n_shards; s++) as_is = as_is && h->shard[s]->desc.stored_as_is;
    if (as_is) {
        h->layout = QTK_LAYOUT_NONE;
        h->detected_by = "qtk:layout metadata (the tensors as stored)";
        return QTK_OK;
    }
    const hub_conv *found = NULL;
    const char *found_why = NULL;
    for (size_t i = 0; i < N_CONVS; i++) {
        const char *w = NULL;
        if (!convs[i]->sniff(h, &w)) continue;
        if (found)
            return qtk__err(QTK_E_FORMAT,
                            "the tensor names mix two conventions (%s: '%s'; %s: '%s') and no config.json says which "
                            "one the files follow; add the model's config.json beside them, or read with a --layout",
                            found->name, found_why, convs[i]->name, w);
        found = convs[i];
        found_why = w;
    }
    if (!found) {
        h->layout = QTK_LAYOUT_NONE;
        h->detected_by = "no quantized tensors";
        return QTK_OK;
    }
    h->layout = found->layout;
    snprintf(why, sizeof why, "tensor names (%.120s)", found_why);
    h->detected_by = qtk__arena_strdup(&h->arena, why);
    return h->detected_by ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
}

/* A Hub layout the names of d's tensors would be read as (by the sniffing above), or NULL:
 * what a writer of stored tensors marks as qtk:layout "none" so that they read back as they
 * were written. */
const char *qtk__hub_names_suggest(const qtk__desc *d) {
    qtk__hub h;
    memset(&h, 0, sizeof h);
    h.raw = calloc(d->n_tensors ? d->n_tensors : 1, sizeof *h.raw);
    h.by_name = malloc((d->n_tensors ? d->n_tensors : 1) * sizeof *h.by_name);
    const char *found = NULL;
    if (h.raw && h.by_name) {
        for (size_t i = 0; i < d->n_tensors; i++) {
            h.raw[i] = (hub_raw){&d->tensors[i], 0, i, false};
            h.by_name[i] = &h.raw[i];
        }
        h.n_raw = d->n_tensors;
        qsort(h.by_name, h.n_raw, sizeof *h.by_name, cmp_raw);
        for (size_t i = 0; i < N_CONVS && !found; i++) {
            const char *why = NULL;
            if (convs[i]->sniff(&h, &why)) found = convs[i]->name;
        }
    } else {
        found = "(out of memory: assume one)";
    }
    free(h.raw);
    free(h.by_name);
    return found;
}

/* ---- building the logical checkpoint ---- */

/* The order of the tensors: by file (shard order), then by the place of their first piece;
 * ties keep the order they were added in. */
typedef struct {
    size_t shard, off, seq;
} pkey;

static int cmp_pkey(const void *a, const void *b) {
    const pkey *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static qtk_status order_and_describe(qtk__hub *h) {
    size_t n = h->n_pend;
    pkey *k = malloc((n ? n : 1) * sizeof *k);
    h->item = malloc((n ? n : 1) * sizeof *h->item);
    if (!k || !h->item) {
        free(k);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const hub_raw *r = &h->raw[h->pend[i].item.raw[0]];
        k[i] = (pkey){r->shard, qtk_ckpt_offset_of(h->shard[r->shard], r->idx), i};
    }
    qsort(k, n, sizeof *k, cmp_pkey);
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const hub_pending *p = &h->pend[k[i].seq];
        qtk_ckpt_tensor *t = NULL;
        st = p->quantized ? qtk__desc_add_quantized(&h->self->desc, p->name, &p->scheme, p->shape, p->rank, &t)
                          : qtk__desc_add_raw(&h->self->desc, p->name, p->elem, p->shape, p->rank, &t);
        if (st) break;
        t->has_param_id = p->has_param_id;
        t->param_id = p->param_id;
        t->value_shape = p->value_shape;
        t->value_rank = p->value_rank;
        h->item[i] = p->item;
    }
    free(k);
    return st;
}

/* Every raw entry the convention did not fold is a tensor of its own. */
static qtk_status add_unfolded(qtk__hub *h) {
    for (size_t i = 0; i < h->n_raw; i++) {
        hub_raw *r = &h->raw[i];
        if (r->used) continue;
        hub_pending p = {.name = r->t->name, .quantized = r->t->quantized, .scheme = r->t->scheme, .elem = r->t->elem,
                         .rank = r->t->rank, .shape = r->t->shape, .item = {.raw = {i}, .n = 1},
                         .has_param_id = r->t->has_param_id, .param_id = r->t->param_id};
        qtk_status st = hub_add(h, &p);
        if (st) return st;
    }
    return QTK_OK;
}

/* The raw entries of every shard, and the index by name (a name in two shards is an error). */
static qtk_status index_raw(qtk__hub *h) {
    size_t n = 0;
    for (size_t s = 0; s < h->n_shards; s++) n += h->shard[s]->desc.n_tensors;
    h->raw = calloc(n ? n : 1, sizeof *h->raw);
    h->by_name = malloc((n ? n : 1) * sizeof *h->by_name);
    if (!h->raw || !h->by_name) return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensors", n);
    for (size_t s = 0; s < h->n_shards; s++)
        for (size_t i = 0; i < h->shard[s]->desc.n_tensors; i++) {
            h->raw[h->n_raw] = (hub_raw){&h->shard[s]->desc.tensors[i], (uint32_t)s, i, false};
            h->by_name[h->n_raw] = &h->raw[h->n_raw];
            h->n_raw++;
        }
    qsort(h->by_name, n, sizeof *h->by_name, cmp_raw);
    for (size_t i = 1; i < n; i++)
        if (strcmp(h->by_name[i - 1]->t->name, h->by_name[i]->t->name) == 0)
            return qtk__err(QTK_E_FORMAT, "tensor '%s' is in both '%s' and '%s'", h->by_name[i]->t->name,
                            base_name(hub_file(h, h->by_name[i - 1])), base_name(hub_file(h, h->by_name[i])));
    return QTK_OK;
}

/* The index's weight_map against the shards: each entry names a tensor its file holds (qtk's
 * convention lists a quantized tensor's companions too), and every tensor is listed. */
static qtk_status check_weight_map(qtk__hub *h, const json_t *wm) {
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        const char *f = hub_json_str(wm, r->t->name);
        if (!f)
            return qtk__err(QTK_E_FORMAT, "'%s': tensor '%s' of '%s' is not in the index's weight_map", h->index_file,
                            r->t->name, hub_file(h, r));
        if (strcmp(base_name(f), base_name(hub_file(h, r))) != 0)
            return qtk__err(QTK_E_FORMAT, "'%s': the weight_map puts tensor '%s' in '%s', but it is in '%s'", h->index_file,
                            r->t->name, f, base_name(hub_file(h, r)));
    }
    static const char *const qtk_suffix[] = {".qtk_scales", ".qtk_offsets", ".qtk_global", ".qtk_table"};
    for (void *it = json_object_iter((json_t *)(uintptr_t)wm); it; it = json_object_iter_next((json_t *)(uintptr_t)wm, it)) {
        const char *k = json_object_iter_key(it);
        hub_raw *r = hub_find(h, k, "");
        for (int s = 0; s < (int)(sizeof qtk_suffix / sizeof qtk_suffix[0]) && !r; s++) {
            size_t kl = strlen(k), sl = strlen(qtk_suffix[s]);
            if (kl > sl && strcmp(k + kl - sl, qtk_suffix[s]) == 0) {
                char *base = qtk__arena_strndup(&h->arena, k, kl - sl);
                if (!base) return qtk__err(QTK_E_NOMEM, "out of memory");
                r = hub_find(h, base, "");
                if (r && !r->t->quantized) r = NULL;
            }
        }
        if (!r)
            return qtk__err(QTK_E_FORMAT, "'%s': the weight_map lists tensor '%s' in '%s', which has no such tensor",
                            h->index_file, k, json_string_value(json_object_iter_value(it)));
    }
    return QTK_OK;
}

static void fill_facts(qtk__hub *h) {
    qtk_ckpt *c = h->self;
    c->fmt = QTK_CKPT_SAFETENSORS;
    for (size_t s = 0; s < h->n_shards; s++) {
        c->facts.file_bytes += h->shard[s]->facts.file_bytes;
        c->facts.header_bytes += h->shard[s]->facts.header_bytes;
    }
    c->facts.data_start = h->n_shards ? h->shard[0]->facts.data_start : 0;
    if (h->n_shards == 1)
        snprintf(c->facts.note, sizeof c->facts.note, "%.80s; layout %s", h->shard[0]->facts.note, qtk_hub_layout_name(h->layout));
    else
        snprintf(c->facts.note, sizeof c->facts.note, "%zu shards, headers %zu bytes in all; layout %s", h->n_shards,
                 c->facts.header_bytes, qtk_hub_layout_name(h->layout));
}

/* Metadata and scalars of the shards, each key once (shards usually repeat {"format":"pt"}),
 * except keys the convention read as descriptions of its tensors. */
static qtk_status merge_meta(qtk__hub *h) {
    qtk__desc *d = &h->self->desc;
    for (size_t s = 0; s < h->n_shards; s++) {
        const qtk__desc *sd = &h->shard[s]->desc;
        for (size_t i = 0; i < sd->n_meta; i++) {
            bool seen = h->conv && h->conv->meta_used && h->conv->meta_used(h, sd->meta[i].key);
            for (size_t j = 0; j < d->n_meta && !seen; j++) seen = strcmp(d->meta[j].key, sd->meta[i].key) == 0;
            qtk_status st = seen ? QTK_OK : qtk__desc_add_meta(d, sd->meta[i].key, sd->meta[i].value);
            if (st) return st;
        }
        for (size_t i = 0; i < sd->n_scalars; i++) {
            bool seen = false;
            for (size_t j = 0; j < d->n_scalars && !seen; j++) seen = strcmp(d->scalars[j].name, sd->scalars[i].name) == 0;
            qtk_status st = seen ? QTK_OK : qtk__desc_add_scalar(d, &sd->scalars[i]);
            if (st) return st;
        }
    }
    return QTK_OK;
}

qtk_status hub_build(qtk_ckpt **shards, char **paths, size_t n, const char *dir, const char *index_file,
                     const json_t *weight_map, qtk_hub_layout forced, const char *name, qtk_ckpt **out) {
    *out = NULL;
    qtk__hub *h = calloc(1, sizeof *h);
    if (!h) {
        for (size_t i = 0; i < n; i++) qtk_ckpt_close(shards[i]), free(paths[i]);
        free(shards);
        free(paths);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    h->shard = shards;
    h->shard_path = paths;
    h->n_shards = n;
    qtk_status st = hub_read_configs(h, dir);
    if (!st && index_file && !(h->index_file = qtk__arena_strdup(&h->arena, index_file)))
        st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = index_raw(h);
    if (!st && weight_map) st = check_weight_map(h, weight_map);
    if (!st) st = detect(h, forced);
    if (st) {
        hub_free(h, true);
        return st;
    }
    if (n == 1 && !index_file && h->n_notices == 0 && forced == QTK_LAYOUT_AUTO &&
        (h->layout == QTK_LAYOUT_NONE || h->layout == QTK_LAYOUT_QTK)) {
        *out = shards[0]; /* a plain file: no logical layer needed */
        hub_free(h, false);
        return QTK_OK;
    }
    h->conv = hub_conv_of(h->layout);
    st = qtk__ckpt_new(name, &h->self);
    if (st) {
        hub_free(h, true);
        return st;
    }
    qtk_ckpt *c = h->self;
    c->virt = &hub_virt;
    c->impl = h;
    if (h->conv) st = h->conv->fold(h);
    if (!st) st = add_unfolded(h);
    if (!st) st = order_and_describe(h);
    if (!st) st = merge_meta(h);
    if (st) {
        if (h->conv) qtk__err_context(st, "%s layout", h->conv->name);
        qtk_ckpt_close(c);
        return st;
    }
    fill_facts(h);
    *out = c;
    return QTK_OK;
}
