/* test_hub_gptq.c — GPTQ and AWQ checkpoints made here, independently of qtk's reader and
 * writer, by transcribing the packers' loops (AutoGPTQ's pack(), GPTQModel's v2 -> v1 save
 * step, AutoAWQ's WQLinear_GEMM.from_linear) over integers quantized with the packers' own
 * min/max rules:
 *
 *   - read back: the layout detected from the config, P.weight one qtk tensor
 *     u{b},block=G:f16,zero=u8 whose dequantization is exactly s (q - z) (f32), and whose
 *     reference dequantization (qtk_ckpt_read_values) is the packers' RN16(s (q - z));
 *     act-order weights read as F16 of exactly those values;
 *   - written back in the same layout: every stored tensor's bytes, and the config's keys;
 *   - multiplied through qtk_matmul without expanding the weight, against the dense values;
 *   - converted to GGUF and to burnpack, and from burnpack back to the layout byte for byte;
 *   - sharded with an index; quantize_config.json in place of config.json;
 *   - traps: each refused with a message naming the tensor or the config key. */
#include "hub_util.h"

#include "qtk_matmul.h"

#include <jansson.h>

static const unsigned awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

typedef struct {
    const char *title;
    int kind;           /* 1 GPTQ, 2 AWQ */
    unsigned bits;
    int G;              /* -1: one group per row */
    bool sym, v2, act;
    int cfg;            /* 0 config.json, 1 quantize_config.json / quant_config.json */
    size_t shard_bytes; /* 0: one file */
} variant;

static const variant variants[] = {
    {"gptq-4bit-g32-asym-v1", 1, 4, 32, false, false, false, 0, 0},
    {"gptq-4bit-g64-sym-v1", 1, 4, 64, true, false, false, 0, 0},
    {"gptq-4bit-g32-asym-v2", 1, 4, 32, false, true, false, 0, 0},
    {"gptq-3bit-g32-asym-v1", 1, 3, 32, false, false, false, 0, 0},
    {"gptq-3bit-g64-sym-v2", 1, 3, 64, true, true, false, 0, 0},
    {"gptq-2bit-whole-asym-v1", 1, 2, -1, false, false, false, 0, 0},
    {"gptq-8bit-g64-asym-v1", 1, 8, 64, false, false, false, 0, 0},
    {"gptq-8bit-g32-sym-v2", 1, 8, 32, true, true, false, 0, 0},
    {"gptq-4bit-quantize_config", 1, 4, 32, false, false, false, 1, 0},
    {"gptq-4bit-sharded", 1, 4, 32, false, false, false, 0, 3000},
    {"gptq-4bit-act-order", 1, 4, 32, false, false, true, 0, 0},
    {"awq-gemm-g32", 2, 4, 32, false, false, false, 0, 0},
    {"awq-gemm-g64-quant_config", 2, 4, 64, false, false, false, 1, 0},
    {"awq-gemm-sharded", 2, 4, 32, false, false, false, 0, 3000},
};

#define NMOD 2
static const char *const mod_name[NMOD] = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"};
static const size_t mod_N[NMOD] = {64, 32}, mod_K[NMOD] = {256, 512}; /* GGUF's K-quants: K a multiple of 256 */

static float f16v(float x) { return qtk_fmt_decode(QTK_DTYPE_F16, qtk_fmt_encode(QTK_DTYPE_F16, x)); }

/* One module's integers, scales and packed tensors. */
typedef struct {
    size_t N, K, G, ng;
    int32_t *q;       /* [N, K] */
    int32_t *z;       /* [ng, N] (v2 meaning) */
    uint16_t *s;      /* [ng, N] f16 codes */
    int32_t *gidx;    /* [K] */
    uint32_t *qw, *qz;
    size_t nqw, nqz;  /* words */
    uint16_t bias[64];
} packed;

static void packed_free(packed *p) {
    free(p->q), free(p->z), free(p->s), free(p->gidx), free(p->qw), free(p->qz);
}

/* AutoGPTQ's pack() loop for one column of fields v[0..n) into words w[0], w[stride], ... */
static void gptq_pack_column(const int32_t *v, size_t n, size_t vstride, unsigned bits, uint32_t *w, size_t stride) {
    size_t i = 0, row = 0;
    while (i < n) {
        if (bits != 3) {
            for (size_t j = i; j < i + 32 / bits; j++) w[row * stride] |= (uint32_t)v[j * vstride] << (bits * (j - i));
            i += 32 / bits;
            row++;
        } else {
            for (size_t j = i; j < i + 10; j++) w[row * stride] |= (uint32_t)v[j * vstride] << (3 * (j - i));
            i += 10;
            w[row * stride] |= ((uint32_t)v[i * vstride] & 3u) << 30; /* numpy's uint32 drops the bit above */
            row++;
            w[row * stride] |= ((uint32_t)v[i * vstride] >> 2) & 1u;
            i += 1;
            for (size_t j = i; j < i + 10; j++) w[row * stride] |= (uint32_t)v[j * vstride] << (3 * (j - i) + 1);
            i += 10;
            w[row * stride] |= ((uint32_t)v[i * vstride] & 1u) << 31;
            row++;
            w[row * stride] |= ((uint32_t)v[i * vstride] >> 1) & 3u;
            i += 1;
            for (size_t j = i; j < i + 10; j++) w[row * stride] |= (uint32_t)v[j * vstride] << (3 * (j - i) + 2);
            i += 10;
            row++;
        }
    }
}

static void make_module(const variant *v, size_t N, size_t K, uint64_t seed, packed *p) {
    memset(p, 0, sizeof *p);
    p->N = N, p->K = K, p->G = v->G < 0 ? K : (size_t)v->G, p->ng = (K + p->G - 1) / p->G;
    unsigned maxq = (1u << v->bits) - 1;
    float *w = malloc(N * K * sizeof *w);
    for (size_t i = 0; i < N * K; i++) w[i] = trand_normal(&seed) * (i % 13 == 0 ? 2.0f : 0.3f) + (i % 5 == 0 ? 0.2f : 0.0f);
    p->q = calloc(N * K, sizeof *p->q), p->z = calloc(p->ng * N, sizeof *p->z), p->s = calloc(p->ng * N, sizeof *p->s);
    p->gidx = calloc(K, sizeof *p->gidx);
    /* act-order: GPTQ quantizes the columns in a permuted order, groups of G in that order */
    size_t *perm = malloc(K * sizeof *perm);
    for (size_t k = 0; k < K; k++) perm[k] = k;
    if (v->act)
        for (size_t k = K - 1; k > 0; k--) {
            size_t j = (size_t)(trand_u64(&seed) % (k + 1)), t = perm[k];
            perm[k] = perm[j], perm[j] = t;
        }
    for (size_t i = 0; i < K; i++) p->gidx[perm[i]] = (int32_t)(i / p->G);
    for (size_t n = 0; n < N; n++)
        for (size_t g = 0; g < p->ng; g++) {
            float lo = 0, hi = 0, scale;
            int z;
            for (size_t i = g * p->G; i < K && i < (g + 1) * p->G; i++) {
                float x = w[n * K + perm[i]];
                lo = x < lo ? x : lo, hi = x > hi ? x : hi;
            }
            if (v->kind == 2) { /* AutoAWQ pseudo_quantize_tensor */
                scale = (hi - lo) > 1e-5f ? (hi - lo) / (float)maxq : 1e-5f / (float)maxq;
                scale = f16v(scale);
                z = -(int)nearbyintf(lo / scale);
                z = z < 0 ? 0 : z > (int)maxq ? (int)maxq : z;
            } else { /* GPTQ's Quantizer.find_params */
                if (v->sym) {
                    float m = -lo > hi ? -lo : hi;
                    lo = -m, hi = m;
                }
                scale = (hi - lo) / (float)maxq;
                scale = f16v(scale > 0 ? scale : 1.0f);
                z = v->sym ? (int)(maxq + 1) / 2 : (int)nearbyintf(-lo / scale);
                if (!v->v2 && z < 1) z = 1; /* v1 stores z - 1 */
                z = z > (int)maxq ? (int)maxq : z;
            }
            p->z[g * N + n] = z;
            p->s[g * N + n] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, scale);
            for (size_t i = g * p->G; i < K && i < (g + 1) * p->G; i++) {
                size_t k = perm[i];
                int qq = (int)nearbyintf(w[n * K + k] / scale) + z;
                p->q[n * K + k] = qq < 0 ? 0 : qq > (int)maxq ? (int)maxq : qq;
            }
        }
    free(perm);
    free(w);
    if (v->kind == 2) { /* WQLinear_GEMM.from_linear: along the out dimension, AWQ's order */
        size_t C = N / 8;
        p->nqw = K * C, p->nqz = p->ng * C;
        p->qw = calloc(p->nqw, 4), p->qz = calloc(p->nqz, 4);
        for (size_t c = 0; c < C; c++)
            for (unsigned i = 0; i < 8; i++) {
                for (size_t k = 0; k < K; k++) p->qw[k * C + c] |= (uint32_t)p->q[(8 * c + awq_order[i]) * K + k] << (4 * i);
                for (size_t g = 0; g < p->ng; g++) p->qz[g * C + c] |= (uint32_t)p->z[g * N + 8 * c + awq_order[i]] << (4 * i);
            }
    } else {
        size_t R = K * v->bits / 32, Z = N * v->bits / 32;
        p->nqw = R * N, p->nqz = p->ng * Z;
        p->qw = calloc(p->nqw, 4), p->qz = calloc(p->nqz, 4);
        /* intweight is [K, N]: column n's fields are q[n, 0..K) */
        for (size_t n = 0; n < N; n++) gptq_pack_column(p->q + n * K, K, 1, v->bits, p->qw + n, N);
        int32_t *zs = malloc(p->ng * N * sizeof *zs);
        for (size_t i = 0; i < p->ng * N; i++) zs[i] = p->z[i] - (v->v2 ? 0 : 1); /* AutoGPTQ: zeros -= 1 */
        for (size_t g = 0; g < p->ng; g++) gptq_pack_column(zs + g * N, N, 1, v->bits, p->qz + g * Z, 1);
        free(zs);
    }
    for (size_t i = 0; i < N && i < 64; i++) p->bias[i] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, 0.01f * (float)i);
}

static void write_config(const variant *v, const char *dir) {
    char path[1024], txt[1024], q[600];
    if (v->kind == 2)
        snprintf(q, sizeof q,
                 "{\"quant_method\": \"awq\", \"%s\": 4, \"%s\": %d, \"zero_point\": true, \"version\": \"gemm\", "
                 "\"modules_to_not_convert\": null}",
                 v->cfg ? "w_bit" : "bits", v->cfg ? "q_group_size" : "group_size", v->G);
    else
        snprintf(q, sizeof q,
                 "{%s\"bits\": %u, \"group_size\": %d, \"damp_percent\": 0.01, \"desc_act\": %s, \"static_groups\": false, "
                 "\"sym\": %s, \"true_sequential\": true, \"checkpoint_format\": \"%s\"}",
                 v->cfg ? "" : "\"quant_method\": \"gptq\", ", v->bits, v->G, v->act ? "true" : "false",
                 v->sym ? "true" : "false", v->v2 ? "gptq_v2" : "gptq");
    if (v->cfg) {
        snprintf(path, sizeof path, "%s/%s", dir, v->kind == 2 ? "quant_config.json" : "quantize_config.json");
        CHECK(text_write(path, q));
    } else {
        snprintf(path, sizeof path, "%s/config.json", dir);
        snprintf(txt, sizeof txt, "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"quantization_config\": %s}", q);
        CHECK(text_write(path, txt));
    }
}

typedef struct {
    packed m[NMOD];
    uint16_t norm[64];
} model;

/* Writes the variant's checkpoint into dir (one file, or shards with an index). */
static void make_checkpoint(const variant *v, const char *dir, model *md) {
    st_entry_t e[32];
    size_t ne = 0;
    for (int i = 0; i < NMOD; i++) {
        packed *p = &md->m[i];
        make_module(v, mod_N[i], mod_K[i], 77 + (uint64_t)i * 1000 + v->bits, p);
        static char names[NMOD][5][128];
        const char *sfx[5] = {"qweight", "qzeros", "scales", "g_idx", "bias"};
        for (int k = 0; k < 5; k++) snprintf(names[i][k], 128, "%s.%s", mod_name[i], sfx[k]);
        size_t R = v->kind == 2 ? p->K : p->nqw / p->N, C = v->kind == 2 ? p->N / 8 : p->N;
        e[ne++] = (st_entry_t){names[i][0], "I32", {R, C}, 2, p->qw, 4 * p->nqw};
        e[ne++] = (st_entry_t){names[i][1], "I32", {p->ng, p->nqz / p->ng}, 2, p->qz, 4 * p->nqz};
        e[ne++] = (st_entry_t){names[i][2], "F16", {p->ng, p->N}, 2, p->s, 2 * p->ng * p->N};
        if (v->kind == 1) e[ne++] = (st_entry_t){names[i][3], "I32", {p->K}, 1, p->gidx, 4 * p->K};
        if (i == 0) e[ne++] = (st_entry_t){names[i][4], "F16", {p->N}, 1, p->bias, 2 * p->N};
    }
    for (int i = 0; i < 64; i++) md->norm[i] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, 1.0f + 0.001f * (float)i);
    e[ne++] = (st_entry_t){"model.norm.weight", "F16", {64}, 1, md->norm, 128};
    char path[1024];
    if (!v->shard_bytes) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(st_write(path, e, ne, ""));
    } else {
        /* two shards: the first module in one, the rest in the other; an index naming both */
        size_t cut = v->kind == 1 ? 5 : 4;
        char idx[4096];
        size_t n = (size_t)snprintf(idx, sizeof idx, "{\"metadata\": {}, \"weight_map\": {");
        for (size_t k = 0; k < ne; k++)
            n += (size_t)snprintf(idx + n, sizeof idx - n, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", k ? ", " : "",
                                  e[k].name, k < cut ? 1 : 2);
        snprintf(idx + n, sizeof idx - n, "}}");
        snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
        CHECK(st_write(path, e, cut, ""));
        snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
        CHECK(st_write(path, e + cut, ne - cut, ""));
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        CHECK(text_write(path, idx));
    }
    write_config(v, dir);
}

/* ---- checks ---- */

static void same_stored(const char *a, const char *b, const char *title) {
    qtk_ckpt *x = NULL, *y = NULL;
    CHECK_OK(qtk_ckpt_open(a, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &x));
    CHECK_OK(qtk_ckpt_open(b, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &y));
    if (x && y) {
        CHECK_EQ_U(qtk_ckpt_count(x), qtk_ckpt_count(y));
        for (size_t i = 0; i < qtk_ckpt_count(x); i++) {
            const char *nm = qtk_ckpt_tensor_at(x, i)->name;
            size_t la = 0, lb = 0;
            uint8_t *p = tensor_bytes(x, nm, &la), *q = tensor_bytes(y, nm, &lb);
            CHECK_MSG(p && q && la == lb && memcmp(p, q, la) == 0, "%s: stored tensor '%s' differs after the round trip",
                      title, nm);
            free(p);
            free(q);
        }
    }
    qtk_ckpt_close(x);
    qtk_ckpt_close(y);
}

static json_t *qconfig_of(const char *dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_t *c = json_load_file(p, 0, NULL);
    json_t *q = c ? json_incref(json_object_get(c, "quantization_config")) : NULL;
    if (!q) {
        const char *own[2] = {"quantize_config.json", "quant_config.json"};
        for (int i = 0; i < 2 && !q; i++) {
            snprintf(p, sizeof p, "%s/%s", dir, own[i]);
            q = json_load_file(p, 0, NULL);
        }
    }
    json_decref(c);
    return q;
}

/* every key of the source's config is in the written one with the same value */
static void config_kept(const char *src, const char *dst, const char *title) {
    json_t *a = qconfig_of(src), *b = qconfig_of(dst);
    CHECK_MSG(a && b, "%s: no quantization config", title);
    const char *key;
    json_t *val;
    if (a && b)
        json_object_foreach(a, key, val) {
            CHECK_MSG(json_equal(val, json_object_get(b, key)), "%s: config key '%s' changed", title, key);
        }
    json_decref(a);
    json_decref(b);
}

static void check_variant(const variant *v) {
    char dir[512], dir2[512], dir3[512], bpk[600], gguf[600];
    snprintf(dir, sizeof dir, "%s", tmp_subdir(v->title));
    model md;
    make_checkpoint(v, dir, &md);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(dir, NULL, &c));
    if (!c) {
        for (int i = 0; i < NMOD; i++) packed_free(&md.m[i]);
        return;
    }
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    CHECK_MSG(hi.layout == (v->kind == 2 ? QTK_LAYOUT_AWQ : QTK_LAYOUT_GPTQ), "%s: detected %s", v->title,
              qtk_hub_layout_name(hi.layout));
    CHECK_MSG(hi.detected_by && strstr(hi.detected_by, "quant_method") != NULL, "%s: detected by %s", v->title,
              hi.detected_by ? hi.detected_by : "?");
    if (v->shard_bytes) CHECK(hi.n_shards == 2 && hi.index_file);
    for (int i = 0; i < NMOD; i++) {
        packed *p = &md.m[i];
        char x[160];
        snprintf(x, sizeof x, "%s.weight", mod_name[i]);
        size_t ti = tensor_index(c, x);
        CHECK_MSG(ti != SIZE_MAX, "%s: '%s' is missing", v->title, x);
        if (ti == SIZE_MAX) continue;
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, ti);
        CHECK(t->rank == 2 && t->shape[0] == p->N && t->shape[1] == p->K);
        size_t n = p->N * p->K;
        float *exact = malloc(n * sizeof *exact), *rn = malloc(n * sizeof *rn);
        for (size_t r = 0; r < p->N; r++)
            for (size_t k = 0; k < p->K; k++) {
                size_t g = (size_t)p->gidx[k];
                float s = qtk_fmt_decode(QTK_DTYPE_F16, p->s[g * p->N + r]);
                exact[r * p->K + k] = s * (float)(p->q[r * p->K + k] - p->z[g * p->N + r]);
                rn[r * p->K + k] = f16v(exact[r * p->K + k]); /* torch: int tensor x f16 tensor */
            }
        if (v->act) {
            CHECK_MSG(!t->quantized && t->elem == QTK_ELEM_F16, "%s: act-order '%s' is not F16", v->title, x);
            bool noticed = false;
            for (size_t k = 0; k < hi.n_notices; k++) noticed |= strcmp(hi.notices[k].tensor, x) == 0;
            CHECK(noticed);
        } else {
            char want[96], got[160] = "";
            char blk[16];
            if (v->G < 0) snprintf(blk, sizeof blk, "*");
            else snprintf(blk, sizeof blk, "%d", v->G);
            snprintf(want, sizeof want, "u%u,block=%s:f16,zero=u8%s", v->bits, blk, v->bits == 3 ? ",store=native" : "");
            qtk_scheme ws;
            CHECK_OK(qtk_scheme_parse(want, &ws));
            if (t->quantized) qtk_scheme_format(&t->scheme, got, sizeof got, NULL);
            CHECK_MSG(t->quantized && qtk_scheme_equal(&t->scheme, &ws), "%s: '%s' reads as '%s', not '%s'", v->title, x, got,
                      want);
            /* qtk's values: s (q - z), exact */
            size_t len = 0;
            uint8_t *b = tensor_bytes(c, x, &len);
            float *y = calloc(n, sizeof *y);
            CHECK_OK(qtk_dequantize_bytes(b, len, t->shape, 2, &t->scheme, QTK_DTYPE_F32, y, n));
            size_t bad = 0;
            for (size_t k = 0; k < n; k++) bad += memcmp(&y[k], &exact[k], 4) != 0;
            CHECK_MSG(bad == 0, "%s: '%s': %zu of %zu values differ from s (q - z)", v->title, x, bad, n);
            /* matmul on the quantized tensor, both precisions, against the dense product */
            qtk_tensor *qt = NULL;
            CHECK_OK(qtk_ckpt_load_tensor(c, ti, &qt));
            size_t M = 3;
            float *xa = malloc(M * p->K * sizeof *xa), *ya = malloc(M * p->N * sizeof *ya), *yr = malloc(M * p->N * sizeof *yr);
            uint64_t sd = 5;
            for (size_t k = 0; k < M * p->K; k++) xa[k] = trand_normal(&sd);
            CHECK_OK(qtk_matmul_f32(exact, xa, QTK_DTYPE_F32, M, p->K, NULL, yr, p->N, NULL));
            for (int prec = 0; prec < 2 && qt; prec++) {
                qtk_matmul_options mo = {.precision = prec ? QTK_PRECISION_FAST : QTK_PRECISION_EXACT};
                CHECK_OK(qtk_matmul(qt, xa, QTK_DTYPE_F32, M, p->K, NULL, ya, p->N, &mo));
                double e = 0, r = 0;
                for (size_t k = 0; k < M * p->N; k++) e += (ya[k] - yr[k]) * (double)(ya[k] - yr[k]), r += yr[k] * (double)yr[k];
                CHECK_MSG(e <= r * (prec ? 1e-3 : 1e-10), "%s: '%s' matmul (%s) relative error %g", v->title, x,
                          prec ? "fast" : "exact", r > 0 ? sqrt(e / r) : e);
            }
            qtk_tensor_free(qt);
            free(xa), free(ya), free(yr), free(y), free(b);
        }
        /* the packers' reference: RN16(s (q - z)) */
        float *ref = calloc(n, sizeof *ref);
        CHECK_OK(qtk_ckpt_read_values(c, ti, QTK_DTYPE_F32, ref, n));
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) bad += memcmp(&ref[k], &rn[k], 4) != 0;
        CHECK_MSG(bad == 0, "%s: '%s': %zu of %zu values differ from RN16(s (q - z))", v->title, x, bad, n);
        uint16_t *h = calloc(n, 2);
        CHECK_OK(qtk_ckpt_read_values(c, ti, QTK_DTYPE_F16, h, n));
        bad = 0;
        for (size_t k = 0; k < n; k++) bad += h[k] != (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, rn[k]);
        CHECK_MSG(bad == 0, "%s: '%s': %zu f16 values differ", v->title, x, bad);
        free(h), free(ref), free(exact), free(rn);
        test_checks += (long)n;
    }
    if (!v->act) {
        /* read -> write in the same layout: the stored tensors and the config */
        snprintf(dir2, sizeof dir2, "%s", tmp_path("rewrite"));
        CHECK_OK(hub_rewrite(c, dir2, v->kind == 2 ? QTK_LAYOUT_AWQ : QTK_LAYOUT_GPTQ));
        same_stored(dir, dir2, v->title);
        config_kept(dir, dir2, v->title);
        /* -> burnpack -> the layout again: byte for byte */
        snprintf(bpk, sizeof bpk, "%s", tmp_path("m.bpk"));
        CHECK_OK(qtk_ckpt_convert(dir, bpk, &(qtk_convert_options){.force = 1}, NULL));
        snprintf(dir3, sizeof dir3, "%s", tmp_path("back"));
        CHECK_OK(qtk_ckpt_convert(bpk, dir3,
                                  &(qtk_convert_options){.layout = v->kind == 2 ? QTK_LAYOUT_AWQ : QTK_LAYOUT_GPTQ, .force = 1},
                                  NULL));
        qtk_ckpt *b1 = NULL, *b2 = NULL;
        CHECK_OK(qtk_ckpt_open(dir, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &b1));
        CHECK_OK(qtk_ckpt_open(dir3, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &b2));
        for (size_t i = 0; b1 && b2 && i < qtk_ckpt_count(b1); i++) {
            const char *nm = qtk_ckpt_tensor_at(b1, i)->name;
            size_t la = 0, lb = 0;
            uint8_t *p1 = tensor_bytes(b1, nm, &la), *p2 = tensor_bytes(b2, nm, &lb);
            /* written from a source with no GPTQ config: checkpoint_format gptq (v1), so a v2 source's
             * qzeros are stored minus one; the values stay */
            bool zeros_v2 = v->v2 && strstr(nm, ".qzeros");
            CHECK_MSG(p1 && p2 && la == lb && (zeros_v2 || memcmp(p1, p2, la) == 0), "%s: '%s' differs after .bpk and back",
                      v->title, nm);
            free(p1), free(p2);
        }
        qtk_ckpt *b3 = NULL;
        CHECK_OK(qtk_ckpt_open(dir3, NULL, &b3));
        for (int i = 0; b3 && i < NMOD; i++) {
            char x[160];
            size_t n1 = 0, n2 = 0;
            snprintf(x, sizeof x, "%s.weight", mod_name[i]);
            float *y1 = tensor_f32(c, x, &n1), *y2 = tensor_f32(b3, x, &n2);
            CHECK_MSG(y1 && y2 && n1 == n2 && memcmp(y1, y2, 4 * n1) == 0, "%s: '%s' values differ after .bpk and back",
                      v->title, x);
            free(y1), free(y2);
        }
        qtk_ckpt_close(b3);
        qtk_ckpt_close(b1);
        qtk_ckpt_close(b2);
        char cmd[2000];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", dir2, dir3, bpk);
        CHECK(system(cmd) == 0);
    }
    /* -> GGUF: re-quantized (the zero points have no ggml type), every tensor there */
    snprintf(gguf, sizeof gguf, "%s", tmp_path("m.gguf"));
    CHECK_OK(qtk_ckpt_convert(dir, gguf, &(qtk_convert_options){.scheme = "q4_k", .min_elements = 1, .force = 1}, NULL));
    qtk_ckpt *g = NULL;
    CHECK_OK(qtk_ckpt_open(gguf, NULL, &g));
    if (g) {
        char x[160];
        snprintf(x, sizeof x, "%s.weight", mod_name[0]);
        size_t ti = tensor_index(g, x);
        CHECK_MSG(ti != SIZE_MAX && qtk_ckpt_tensor_at(g, ti)->quantized, "%s: '%s' not quantized in the GGUF", v->title, x);
    }
    qtk_ckpt_close(g);
    remove(gguf);
    qtk_ckpt_close(c);
    for (int i = 0; i < NMOD; i++) packed_free(&md.m[i]);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void every_variant(void) {
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) check_variant(&variants[i]);
}

/* GPTQModel's v1: z - 1 subtracted from whole words, a zero point of 0 borrowing from its
 * neighbour; read back, every zero point is what it was, and the words are written again. */
static void gptq_v1_borrow(void) {
    const char *dir = tmp_subdir("borrow");
    size_t N = 8, K = 32;
    int32_t z[8] = {0, 5, 0, 0, 15, 1, 0, 8}, q[8 * 32];
    uint32_t qw[4 * 8] = {0}, qz = 0;
    for (int n = 0; n < 8; n++) qz |= (uint32_t)z[n] << (4 * n);
    qz -= 0x11111111u; /* GPTQModel's v2 -> v1 */
    uint64_t sd = 9;
    for (size_t i = 0; i < N * K; i++) q[i] = (int32_t)(trand_u64(&sd) % 16);
    for (size_t n = 0; n < N; n++) gptq_pack_column(q + n * K, K, 1, 4, qw + n, N);
    uint16_t s[8];
    for (int n = 0; n < 8; n++) s[n] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_F16, 0.125f * (float)(n + 1));
    int32_t gi[32] = {0};
    st_entry_t e[4] = {{"l.qweight", "I32", {4, 8}, 2, qw, sizeof qw},
                       {"l.qzeros", "I32", {1, 1}, 2, &qz, 4},
                       {"l.scales", "F16", {1, 8}, 2, s, 16},
                       {"l.g_idx", "I32", {32}, 1, gi, 128}};
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(st_write(p, e, 4, ""));
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK(text_write(p, "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": -1, "
                        "\"sym\": false, \"desc_act\": false}}"));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(dir, NULL, &c));
    float *y = c ? tensor_f32(c, "l.weight", &(size_t){0}) : NULL;
    CHECK(y != NULL);
    for (size_t i = 0; y && i < N * K; i++)
        CHECK_BITS(y[i], 0.125f * (float)(i / K + 1) * (float)(q[i] - z[i / K]));
    free(y);
    if (c) {
        const char *d2 = tmp_path("borrow2");
        CHECK_OK(hub_rewrite(c, d2, QTK_LAYOUT_GPTQ));
        same_stored(dir, d2, "borrow");
    }
    qtk_ckpt_close(c);
}

/* ---- traps ---- */

static void expect_refusal(const char *dir, const char *what, const char *needle) {
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(dir, NULL, &c);
    const char *msg = qtk_last_error();
    CHECK_MSG(st != QTK_OK && msg && strstr(msg, needle), "%s: status %d, message '%s' (wanted '%s')", what, (int)st,
              msg ? msg : "", needle);
    qtk_ckpt_close(c);
}

static void traps(void) {
    static const variant base = {"trap", 1, 4, 32, false, false, false, 0, 0};
    struct {
        const char *what, *config, *needle;
        int edit; /* 0 none, 1 g_idx out of range, 2 qzeros shape, 3 drop qzeros */
        int kind;
    } cases[] = {
        {"mismatched group_size", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 64}}",
         "model.layers.0.self_attn.q_proj.scales", 0, 1},
        {"bits 5", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 5, \"group_size\": 32}}", "bits 5", 0, 1},
        {"unknown checkpoint_format",
         "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"checkpoint_format\": "
         "\"gptq_v9\"}}", "gptq_v9", 0, 1},
        {"marlin", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, "
                   "\"is_marlin_format\": true}}", "Marlin", 0, 1},
        {"g_idx out of range", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32}}",
         "model.layers.0.self_attn.q_proj.g_idx", 1, 1},
        {"qzeros shape", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32}}",
         "model.layers.0.self_attn.q_proj.qzeros", 2, 1},
        {"no qzeros", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32}}",
         "model.layers.0.self_attn.q_proj.qweight", 3, 1},
        {"awq gemv", "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"version\": "
                     "\"gemv\"}}", "gemv", 0, 2},
        {"awq bits 3", "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 3, \"group_size\": 32}}", "bits 3", 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        variant v = base;
        v.kind = cases[i].kind;
        char name[32];
        snprintf(name, sizeof name, "trap%zu", i);
        const char *dir = tmp_subdir(name);
        packed p;
        make_module(&v, 64, 128, 3, &p);
        if (cases[i].edit == 1) p.gidx[17] = 4;
        st_entry_t e[4];
        size_t ne = 0;
        size_t R = v.kind == 2 ? p.K : p.nqw / p.N, C = v.kind == 2 ? p.N / 8 : p.N;
        e[ne++] = (st_entry_t){"model.layers.0.self_attn.q_proj.qweight", "I32", {R, C}, 2, p.qw, 4 * p.nqw};
        if (cases[i].edit != 3)
            e[ne++] = (st_entry_t){"model.layers.0.self_attn.q_proj.qzeros", "I32",
                                   {cases[i].edit == 2 ? p.nqz / p.ng : p.ng, cases[i].edit == 2 ? p.ng : p.nqz / p.ng}, 2,
                                   p.qz, 4 * p.nqz};
        e[ne++] = (st_entry_t){"model.layers.0.self_attn.q_proj.scales", "F16", {p.ng, p.N}, 2, p.s, 2 * p.ng * p.N};
        if (v.kind == 1) e[ne++] = (st_entry_t){"model.layers.0.self_attn.q_proj.g_idx", "I32", {p.K}, 1, p.gidx, 4 * p.K};
        char path[1024];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(st_write(path, e, ne, ""));
        snprintf(path, sizeof path, "%s/config.json", dir);
        CHECK(text_write(path, cases[i].config));
        expect_refusal(dir, cases[i].what, cases[i].needle);
        packed_free(&p);
    }
}

/* Writing from float: --layout gptq / awq with the zero-point scheme, read back the same. */
static void write_from_float(void) {
    for (int kind = 1; kind <= 2; kind++) {
        const char *dir = tmp_subdir(kind == 1 ? "float_gptq" : "float_awq");
        size_t N = 32, K = 128;
        uint16_t *w = malloc(N * K * 2);
        uint64_t sd = 11;
        for (size_t i = 0; i < N * K; i++) w[i] = (uint16_t)qtk_fmt_encode(QTK_DTYPE_BF16, trand_normal(&sd) * 0.1f);
        st_entry_t e[1] = {{"model.layers.0.mlp.up_proj.weight", "BF16", {N, K}, 2, w, N * K * 2}};
        char in[1024];
        snprintf(in, sizeof in, "%s/model.safetensors", dir);
        CHECK(st_write(in, e, 1, ""));
        const char *out = tmp_path(kind == 1 ? "float_gptq_out" : "float_awq_out");
        char outdir[600];
        snprintf(outdir, sizeof outdir, "%s", out);
        for (int cal = 0; cal < 2; cal++) {
            qtk_convert_options o = {.scheme = "u4,block=32:f16,zero=u8", .layout = kind == 1 ? QTK_LAYOUT_GPTQ : QTK_LAYOUT_AWQ,
                                     .calibration = cal ? QTK_CALIB_MSE : QTK_CALIB_MINMAX, .force = 1};
            CHECK_OK(qtk_ckpt_convert(in, outdir, &o, NULL));
            qtk_ckpt *c = NULL;
            CHECK_OK(qtk_ckpt_open(outdir, NULL, &c));
            if (!c) continue;
            qtk_hub_info hi;
            qtk_ckpt_hub_info(c, &hi);
            CHECK(hi.layout == (kind == 1 ? QTK_LAYOUT_GPTQ : QTK_LAYOUT_AWQ));
            size_t n = 0;
            float *y = tensor_f32(c, "model.layers.0.mlp.up_proj.weight", &n);
            double e2 = 0, r2 = 0;
            for (size_t i = 0; y && i < n; i++) {
                float x = qtk_fmt_decode(QTK_DTYPE_BF16, w[i]);
                e2 += (y[i] - x) * (double)(y[i] - x), r2 += x * (double)x;
            }
            double sqnr = 10 * log10(r2 / (e2 > 0 ? e2 : 1e-30));
            CHECK_MSG(y && n == N * K && sqnr > 18.0, "%s %s: SQNR %.2f dB", kind == 1 ? "gptq" : "awq", cal ? "mse" : "minmax",
                      sqnr);
            free(y);
            qtk_ckpt_close(c);
        }
        free(w);
    }
}

int main(int argc, char **argv) {
    tmp_dir_make();
    static const test_case cases[] = {T(every_variant), T(gptq_v1_borrow), T(traps), T(write_from_float)};
    int rc = test_run("hub_gptq", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
