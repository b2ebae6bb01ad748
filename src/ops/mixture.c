/* mixture.c — llama.cpp's file types as per-tensor ggml types (see mixture.h). The rules
 * restate llama-quantize's (src/llama-quant.cpp: tensor_get_category, tensor_allows_quantization,
 * llama_tensor_get_type_impl, tensor_type_fallback); docs/gguf.md lists them one by one. */
#include "ops/mixture.h"

#include "common/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const char *const ftype_names[QTK__MIX_COUNT] = {"q3_k_m", "q4_k_s", "q4_k_m", "q5_k_s",
                                                        "q5_k_m", "q6_k",   "q8_0"};
static const qtk__mix_type ftype_default[QTK__MIX_COUNT] = {QTK__MT_Q3_K, QTK__MT_Q4_K, QTK__MT_Q4_K, QTK__MT_Q5_K,
                                                            QTK__MT_Q5_K, QTK__MT_Q6_K, QTK__MT_Q8_0};

qtk_status qtk__mixture_find(const char *name, qtk__mix_ftype *out) {
    for (int i = 0; i < QTK__MIX_COUNT; i++)
        if (name && strcasecmp(name, ftype_names[i]) == 0) {
            *out = (qtk__mix_ftype)i;
            return QTK_OK;
        }
    return qtk__err(QTK_E_PARSE, "preset '%s' is not one of llama.cpp's mixtures qtk makes: q3_k_m q4_k_s q4_k_m "
                                 "q5_k_s q5_k_m q6_k q8_0", name ? name : "(null)");
}

const char *qtk__mixture_name(qtk__mix_ftype f) { return (unsigned)f < QTK__MIX_COUNT ? ftype_names[f] : "?"; }

const char *qtk__mix_type_preset(qtk__mix_type t) {
    static const char *const p[] = {NULL, "q3_k", "q4_k", "q5_k", "q6_k", "q8_0", "q4_0", "q5_0", "q5_1", NULL};
    return (unsigned)t < sizeof p / sizeof *p ? p[t] : NULL;
}

static const char *type_name(qtk__mix_type t) {
    static const char *const n[] = {"as is", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q4_0", "Q5_0", "Q5_1", "F16"};
    return n[t];
}

static size_t type_block(qtk__mix_type t) {
    return t == QTK__MT_Q3_K || t == QTK__MT_Q4_K || t == QTK__MT_Q5_K || t == QTK__MT_Q6_K ? 256 : 32;
}

/* ---- what a tensor is (tensor_get_category) ---- */

typedef enum { C_OTHER = 0, C_TOKEN_EMBD, C_OUTPUT, C_ATTN_Q, C_ATTN_K, C_ATTN_V, C_ATTN_QKV, C_ATTN_KV_B,
               C_ATTN_OUTPUT, C_FFN_UP, C_FFN_GATE, C_FFN_DOWN } category;

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }
static bool ends(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* GGUF's names first (llama.cpp's own test order), then the Hugging Face names that
 * convert_hf_to_gguf.py maps onto them */
static category category_of(const char *n) {
    if (strcmp(n, "output.weight") == 0 || strcmp(n, "lm_head.weight") == 0) return C_OUTPUT;
    if (strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0 ||
        ends(n, "embed_tokens.weight"))
        return C_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight") || has(n, "qkv_proj.weight") || has(n, "query_key_value.weight")) return C_ATTN_QKV;
    if (has(n, "attn_kv_b.weight") || has(n, "kv_b_proj.weight")) return C_ATTN_KV_B;
    if (has(n, "attn_v.weight") || has(n, "v_proj.weight")) return C_ATTN_V;
    if (has(n, "attn_k.weight") || has(n, "k_proj.weight")) return C_ATTN_K;
    if (has(n, "attn_q.weight") || has(n, "q_proj.weight")) return C_ATTN_Q;
    if (has(n, "attn_output.weight") || has(n, "o_proj.weight")) return C_ATTN_OUTPUT;
    if (has(n, "ffn_up") || has(n, "up_proj")) return C_FFN_UP;
    if (has(n, "ffn_gate") || has(n, "gate_proj")) return C_FFN_GATE;
    if (has(n, "ffn_down") || has(n, "down_proj")) return C_FFN_DOWN;
    return C_OTHER;
}

static bool is_attn_v(category c) { return c == C_ATTN_V || c == C_ATTN_QKV || c == C_ATTN_KV_B; }

/* "blk.N." (GGUF), "layers.N." or "h.N." (Hugging Face) anywhere in the name; -1: none */
static int layer_of(const char *n) {
    static const char *const pre[] = {"blk.", "layers.", "h."};
    for (size_t k = 0; k < sizeof pre / sizeof *pre; k++)
        for (const char *p = strstr(n, pre[k]); p; p = strstr(p + 1, pre[k])) {
            if (p != n && p[-1] != '.') continue;
            const char *q = p + strlen(pre[k]);
            if (*q < '0' || *q > '9') continue;
            long v = 0;
            while (*q >= '0' && *q <= '9' && v < 1000000) v = v * 10 + (*q++ - '0');
            if (*q == '.' && v < 1000000) return (int)v;
        }
    return -1;
}

/* tensor_allows_quantization: rank 2 or 3, named ...weight, and none of the small or special
 * tensors llama.cpp leaves as they are */
static bool allowed(const qtk_ckpt_tensor *t) {
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
        "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
    const int rank = t->value_shape ? t->value_rank : t->rank;
    if (rank < 2 || !(t->quantized || qtk_elem_is_float(t->elem))) return false;
    if (!ends(t->name, "weight")) return false;
    if (strcmp(t->name, "position_embd.weight") == 0 || strcmp(t->name, "token_types.weight") == 0) return false;
    if (ends(t->name, ".mlp.gate.weight")) return false; /* Hugging Face's name for ffn_gate_inp */
    for (size_t k = 0; k < sizeof never / sizeof *never; k++)
        if (has(t->name, never[k])) return false;
    return true;
}

static size_t row_len(const qtk_ckpt_tensor *t) {
    const int rank = t->value_shape ? t->value_rank : t->rank;
    const size_t *sh = t->value_shape ? t->value_shape : t->shape;
    return rank > 0 ? sh[rank - 1] : 0;
}

/* ---- the model's facts ---- */

static const char *meta(const qtk__desc *d, const char *key) {
    for (size_t i = 0; i < d->n_meta; i++)
        if (strcmp(d->meta[i].key, key) == 0) return d->meta[i].value;
    return NULL;
}

static long meta_int(const qtk__desc *d, const char *arch, const char *field, long dflt) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, field);
    const char *v = meta(d, key);
    if (!v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return end != v ? x : dflt;
}

/* what the rules need of every tensor, computed once */
typedef struct {
    const qtk__desc *d;
    category *cat;
    int *layer;
    bool *ok; /* allowed */
} facts;

/* llama_model_loader's weight_name_comparer: by layer (none first), then by name */
static bool before(const facts *x, size_t a, size_t b) {
    if (x->layer[a] != x->layer[b]) return x->layer[a] < x->layer[b];
    return strcmp(x->d->tensors[a].name, x->d->tensors[b].name) < 0;
}

/* how many allowed tensors like tensor i (same category; any attention-v-like one for
 * those) come before it in the loader's order: llama.cpp's running counters
 * i_attention_wv and i_ffn_down */
static int rank_of(const facts *x, size_t i) {
    int r = 0;
    for (size_t k = 0; k < x->d->n_tensors; k++) {
        bool like = is_attn_v(x->cat[i]) ? is_attn_v(x->cat[k]) : x->cat[k] == x->cat[i];
        if (k != i && like && x->ok[k] && before(x, k, i)) r++;
    }
    return r;
}

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* ---- llama_tensor_get_type_impl, for the file types qtk makes ---- */

static qtk__mix_type choose(const qtk__mixture *m, const facts *x, size_t i, char *why, size_t nwhy) {
    const qtk_ckpt_tensor *t = &x->d->tensors[i];
    const qtk__mix_ftype f = m->ftype;
    const qtk__mix_type dflt = ftype_default[f];
    const category c = x->cat[i];
    qtk__mix_type ty = dflt;
    snprintf(why, nwhy, "%s default", ftype_names[f]);
    if (c == C_OUTPUT || (m->tied && c == C_TOKEN_EMBD)) {
        if (m->falcon || row_len(t) % type_block(dflt) != 0) ty = QTK__MT_Q8_0;
        else if (dflt != QTK__MT_Q8_0) ty = QTK__MT_Q6_K;
        snprintf(why, nwhy, "%s", c == C_OUTPUT ? "output tensor" : "token embeddings tied to the output");
    } else if (c == C_TOKEN_EMBD) {
        /* no rule for these file types: the default */
    } else if (is_attn_v(c)) {
        const int iv = rank_of(x, i);
        if (f == QTK__MIX_Q3_K_M) ty = iv < 2 ? QTK__MT_Q5_K : QTK__MT_Q4_K;
        else if ((f == QTK__MIX_Q4_K_M || f == QTK__MIX_Q5_K_M) && use_more_bits(iv, m->n_attn_v)) ty = QTK__MT_Q6_K;
        else if (f == QTK__MIX_Q4_K_S && iv < 4) ty = QTK__MT_Q5_K;
        if (m->llama_70b && (ty == QTK__MT_Q3_K || ty == QTK__MT_Q4_K)) ty = QTK__MT_Q5_K;
        if (m->n_expert == 8) ty = QTK__MT_Q8_0;
        snprintf(why, nwhy, "attention v %d of %d", iv, m->n_attn_v);
    } else if (c == C_ATTN_K) {
        if (m->n_expert == 8) ty = QTK__MT_Q8_0, snprintf(why, nwhy, "attention k, 8 experts");
    } else if (c == C_FFN_DOWN) {
        const int il = m->n_expert > 1 ? x->layer[i] : rank_of(x, i);
        const int nl = m->n_layer;
        if (f == QTK__MIX_Q3_K_M)
            ty = il < nl / 16 ? QTK__MT_Q5_K : !m->falcon || use_more_bits(il, nl) ? QTK__MT_Q4_K : QTK__MT_Q3_K;
        else if (f == QTK__MIX_Q4_K_M) {
            if (m->falcon) ty = il < nl / 16 ? QTK__MT_Q6_K : use_more_bits(il, nl) ? QTK__MT_Q5_K : QTK__MT_Q4_K;
            else if (use_more_bits(il, nl)) ty = QTK__MT_Q6_K;
        } else if (f == QTK__MIX_Q5_K_M && use_more_bits(il, nl)) ty = QTK__MT_Q6_K;
        else if (f == QTK__MIX_Q4_K_S && !m->falcon && il < nl / 8) ty = QTK__MT_Q5_K;
        snprintf(why, nwhy, "ffn_down of layer %d of %d", il, nl);
    } else if (c == C_ATTN_OUTPUT) {
        if (!m->falcon) {
            if (m->n_expert == 8) {
                if (f == QTK__MIX_Q3_K_M || f == QTK__MIX_Q4_K_S || f == QTK__MIX_Q4_K_M) ty = QTK__MT_Q5_K;
            } else if (f == QTK__MIX_Q3_K_M) ty = QTK__MT_Q4_K;
        }
        snprintf(why, nwhy, "attention output");
    } else if (c == C_ATTN_QKV) {
        /* unreachable: attn_qkv is attention-v-like above, as in llama.cpp */
    }
    return ty;
}

/* tensor_type_fallback: rows no block of the type fits */
static qtk__mix_type fallback(qtk__mix_type ty, size_t row, bool *none) {
    *none = false;
    if (row % type_block(ty) == 0) return ty;
    qtk__mix_type r;
    switch (ty) {
    case QTK__MT_Q3_K: r = QTK__MT_Q4_0; break;
    case QTK__MT_Q4_K: r = QTK__MT_Q5_0; break;
    case QTK__MT_Q5_K: r = QTK__MT_Q5_1; break;
    case QTK__MT_Q6_K: r = QTK__MT_Q8_0; break;
    default: *none = true; return ty;
    }
    return row % type_block(r) == 0 ? r : QTK__MT_F16;
}

qtk_status qtk__mixture_plan(qtk__mixture *m, qtk__mix_ftype f, const qtk__desc *d) {
    memset(m, 0, sizeof *m);
    if ((unsigned)f >= QTK__MIX_COUNT) return qtk__err(QTK_E_ARG, "mixture %d is not one qtk makes", (int)f);
    m->ftype = f;
    m->n = d->n_tensors;
    m->choice = calloc(d->n_tensors ? d->n_tensors : 1, sizeof *m->choice);
    const size_t n1 = d->n_tensors ? d->n_tensors : 1;
    facts x = {d, calloc(n1, sizeof *x.cat), calloc(n1, sizeof *x.layer), calloc(n1, sizeof *x.ok)};
    if (!m->choice || !x.cat || !x.layer || !x.ok) {
        free(x.cat), free(x.layer), free(x.ok);
        qtk__mixture_free(m);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    const char *arch = meta(d, "general.architecture");
    if (!arch) arch = "";
    int max_layer = -1;
    m->tied = true;
    for (size_t i = 0; i < d->n_tensors; i++) {
        x.cat[i] = category_of(d->tensors[i].name);
        x.layer[i] = layer_of(d->tensors[i].name);
        x.ok[i] = allowed(&d->tensors[i]);
        if (is_attn_v(x.cat[i])) m->n_attn_v++;
        if (x.cat[i] == C_OUTPUT) m->tied = false;
        if (x.layer[i] > max_layer) max_layer = x.layer[i];
    }
    long nl = meta_int(d, arch, "block_count", max_layer + 1);
    m->n_layer = nl > 0 && nl < 1000000 ? (int)nl : max_layer + 1;
    long ne = meta_int(d, arch, "expert_count", 0);
    m->n_expert = ne > 0 && ne < 1000000 ? (int)ne : 0;
    m->falcon = strcmp(arch, "falcon") == 0;
    /* llama.cpp's LLM_TYPE_70B for the llama architecture: 80 layers, grouped-query heads */
    long nh = meta_int(d, arch, "attention.head_count", 0), nkv = meta_int(d, arch, "attention.head_count_kv", nh);
    m->llama_70b = strcmp(arch, "llama") == 0 && m->n_layer == 80 && nh != nkv;
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        qtk__mix_choice *ch = &m->choice[i];
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (!x.ok[i]) {
            ch->type = QTK__MT_KEEP;
            snprintf(ch->why, sizeof ch->why, "%s: not quantized by llama.cpp", ftype_names[f]);
            continue;
        }
        char why[80];
        qtk__mix_type ty = choose(m, &x, i, why, sizeof why);
        bool none;
        qtk__mix_type fb = fallback(ty, row_len(t), &none);
        if (none)
            st = qtk__err(QTK_E_FORMAT, "tensor '%s': rows of %zu fit no %s block and llama.cpp has no fallback for %s; "
                                        "give it a --rule", t->name, row_len(t), type_name(ty), type_name(ty));
        else if (fb != ty)
            snprintf(ch->why, sizeof ch->why, "%s: %.40s: %s, rows of %zu: %s", ftype_names[f], why, type_name(ty),
                     row_len(t), fb == QTK__MT_F16 ? "F16 (kept)" : type_name(fb));
        else
            snprintf(ch->why, sizeof ch->why, "%s: %.60s: %s", ftype_names[f], why, type_name(ty));
        ch->type = fb;
    }
    free(x.cat), free(x.layer), free(x.ok);
    if (st) qtk__mixture_free(m);
    return st;
}

void qtk__mixture_free(qtk__mixture *m) {
    free(m->choice);
    memset(m, 0, sizeof *m);
}
