/* test_hub_layouts.c — every convention of HUB_LAYOUTS.md §8.1, on checkpoints qtk writes in
 * that layout from known weights (with the config it writes beside them):
 *
 *   - read back (the layout detected from the config), every tensor is the same qtk tensor:
 *     the same scheme and the same bytes;
 *   - its dequantized values equal an independent decoder written here from the spec that
 *     reads the STORED tensors (nibble order, multiplier or divisor, offset binary, bnb's
 *     high-nibble-first bytes), so a reader that swapped any of those fails;
 *   - the same as shards (index + several files) and as one file;
 *   - read -> write in the same layout reproduces every stored tensor's bytes (and files). */
#include "hub_util.h"

#include <math.h>

typedef struct {
    const char *name, *spec;
    int rank;
    size_t shape[3];
} qt;

typedef struct {
    const char *title;
    qtk_hub_layout layout;
    qt t[12];
    size_t n;
} lset;

static const lset sets[] = {
    {"gpt-oss", QTK_LAYOUT_GPT_OSS,
     {{"model.layers.0.mlp.experts.gate_up_proj", "mxfp4", 3, {2, 8, 64}},
      {"model.layers.0.mlp.experts.down_proj", "mxfp4", 3, {2, 4, 96}}}, 2},
    {"modelopt", QTK_LAYOUT_MODELOPT,
     {{"m.q_proj.weight", "nvfp4", 2, {16, 64}},
      {"m.experts.weight", "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1", 3, {2, 32, 8}},
      {"m.fp8.weight", "e4m3,tensor=f32,store=native", 2, {8, 40}},
      {"m.pc.weight", "e4m3,block=*:f32,store=native", 2, {8, 40}},
      {"m.pb.weight", "e4m3,block=128x128:f32,store=native", 2, {200, 300}},
      {"m.mx.weight", "mxfp4", 2, {4, 64}}}, 6},
    {"modelopt-nvfp4", QTK_LAYOUT_MODELOPT,
     {{"model.layers.0.self_attn.q_proj.weight", "nvfp4", 2, {32, 64}},
      {"model.layers.0.mlp.down_proj.weight", "nvfp4", 2, {64, 32}}}, 2},
    {"compressed-tensors", QTK_LAYOUT_CT,
     {{"c.nv.weight", "nvfp4", 2, {16, 64}},
      {"c.fp8t.weight", "e4m3,tensor=bf16,store=native", 2, {8, 40}},
      {"c.fp8c.weight", "e4m3,block=*:bf16,store=native", 2, {8, 40}},
      {"c.fp8g.weight", "e4m3,block=16:bf16,store=native", 2, {8, 40}},
      {"c.fp8b.weight", "e4m3,block=64x64:f32,store=native", 2, {100, 130}},
      {"c.i4.weight", "q4f,block=32:bf16", 2, {8, 100}},
      {"c.i8.weight", "q8f,block=*:f16", 2, {6, 10}},
      {"c.int8.weight", "q8f,block=*:bf16,store=native", 2, {6, 10}},
      {"c.mx.weight", "mxfp4", 2, {4, 64}},
      {"c.a4.weight", "u4,block=32:bf16,zero=u8", 2, {8, 100}},
      {"c.a8.weight", "u8,block=*:f16,zero=u8", 2, {6, 10}},
      {"c.ai8.weight", "u8,block=*:bf16,zero=u8,store=native", 2, {6, 10}}}, 12},
    {"compressed-tensors-w4a16", QTK_LAYOUT_CT,
     {{"model.layers.0.self_attn.o_proj.weight", "q4f,block=128:bf16", 2, {16, 256}},
      {"model.layers.0.mlp.up_proj.weight", "q4f,block=128:bf16", 2, {32, 200}}}, 2},
    {"deepseek", QTK_LAYOUT_DEEPSEEK,
     {{"model.layers.0.self_attn.q_b_proj.weight", "e4m3,block=128x128:f32,store=native", 2, {200, 300}},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", "e4m3,block=128x128:f32,store=native", 2, {576, 256}}}, 2},
    {"gptq", QTK_LAYOUT_GPTQ,
     {{"model.layers.0.self_attn.q_proj.weight", "u4,block=32:f16,zero=u8", 2, {32, 64}},
      {"model.layers.0.mlp.down_proj.weight", "u4,block=32:f16,zero=u8", 2, {64, 128}}}, 2},
    {"gptq-3bit", QTK_LAYOUT_GPTQ,
     {{"model.layers.0.self_attn.q_proj.weight", "u3,block=32:f16,zero=u8,store=native", 2, {32, 64}},
      {"model.layers.0.mlp.down_proj.weight", "u3,block=32:f16,zero=u8,store=native", 2, {64, 96}}}, 2},
    {"gptq-8bit-per-row", QTK_LAYOUT_GPTQ,
     {{"model.layers.0.self_attn.q_proj.weight", "u8,block=*:f16,zero=u8", 2, {8, 64}}}, 1},
    {"awq", QTK_LAYOUT_AWQ,
     {{"model.layers.0.self_attn.q_proj.weight", "u4,block=32:f16,zero=u8", 2, {32, 64}},
      {"model.layers.0.mlp.down_proj.weight", "u4,block=32:f16,zero=u8", 2, {64, 128}}}, 2},
    {"bnb", QTK_LAYOUT_BNB,
     {{"b.q.weight", "nf4", 2, {16, 128}},
      {"b.flat.weight", "q4f,table=nf4,block=64:f32", 1, {99}},
      {"b.big.weight", "q4f,table=nf4,block=256:f32", 2, {4, 512}}}, 3},
};

/* ---- the generated checkpoint ---- */

typedef struct {
    qtk__desc d;
    uint8_t **bytes;
} model;

static void model_free(model *m) {
    for (size_t i = 0; i < m->d.n_tensors; i++) free(m->bytes[i]);
    free(m->bytes);
    qtk__desc_free(&m->d);
}

static void make_model(const lset *ls, model *m, uint64_t seed) {
    qtk__desc_init(&m->d);
    m->bytes = calloc(ls->n + 2, sizeof *m->bytes);
    for (size_t i = 0; i < ls->n; i++) {
        const qt *q = &ls->t[i];
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(q->spec, &s));
        qtk_ckpt_tensor *t = NULL;
        CHECK_OK(qtk__desc_add_quantized(&m->d, q->name, &s, q->shape, q->rank, &t));
        if (!t) continue;
        float *x = malloc(t->numel * sizeof *x);
        for (size_t k = 0; k < t->numel; k++) x[k] = trand_normal(&seed) * (k % 7 == 0 ? 3.0f : 0.5f);
        m->bytes[i] = malloc(t->nbytes);
        CHECK_OK(qtk_quantize_into(x, q->shape, q->rank, &s, NULL, m->bytes[i], t->nbytes));
        free(x);
    }
    /* unquantized tensors ride along: a norm and a head in BF16 */
    size_t ns[1] = {64}, hs[2] = {32, 64};
    CHECK_OK(qtk__desc_add_raw(&m->d, "model.norm.weight", QTK_ELEM_BF16, ns, 1, NULL));
    CHECK_OK(qtk__desc_add_raw(&m->d, "lm_head.weight", QTK_ELEM_BF16, hs, 2, NULL));
    for (size_t k = ls->n; k < ls->n + 2; k++) {
        size_t nb = m->d.tensors[k].nbytes;
        m->bytes[k] = malloc(nb);
        for (size_t j = 0; j < nb; j++) m->bytes[k][j] = (uint8_t)trand_u64(&seed);
        for (size_t j = 1; j < nb; j += 2) m->bytes[k][j] &= 0x3f; /* finite bf16 */
    }
}

/* ---- independent decoders of the stored tensors ---- */

static float ld_f(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static float bf16_at(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float scale_at(const char *dtype_of_scale, const uint8_t *p, size_t i) {
    if (strcmp(dtype_of_scale, "BF16") == 0) return bf16_at(p + 2 * i);
    if (strcmp(dtype_of_scale, "F16") == 0) return qtk_fmt_decode(QTK_DTYPE_F16, (uint32_t)(p[2 * i] | p[2 * i + 1] << 8));
    return ld_f(p + 4 * i);
}
static float e2m1(unsigned c) { return qtk_fmt_decode(QTK_DTYPE_E2M1, c & 15); }
static float e4m3(uint8_t c) { return qtk_fmt_decode(QTK_DTYPE_E4M3, c); }

typedef struct {
    qtk_ckpt *raw;
    const char *x;
    uint8_t *b[4];
    size_t len[4];
    const char *dt[4];
} stored;

static void get(stored *s, int k, const char *suffix) {
    char nm[512];
    snprintf(nm, sizeof nm, "%s%s", s->x, suffix);
    s->b[k] = tensor_bytes(s->raw, nm, &s->len[k]);
    size_t i = tensor_index(s->raw, nm);
    s->dt[k] = i == SIZE_MAX ? "?" : qtk_elem_name(qtk__ckpt_desc(s->raw)->tensors[i].elem);
    CHECK_MSG(s->b[k] != NULL, "stored tensor '%s' is missing", nm);
}

/* y = the values the convention's reference implementation computes, from the stored
 * tensors only. */
static bool reference(qtk_ckpt *raw, qtk_hub_layout l, const qt *q, float *y) {
    stored s = {raw, q->name, {0}, {0}, {0}};
    size_t n = 1;
    for (int i = 0; i < q->rank; i++) n *= q->shape[i];
    size_t K = q->shape[q->rank - 1], O = q->rank >= 2 ? q->shape[q->rank - 2] : 1;
    bool nv = strcmp(q->spec, "nvfp4") == 0, mx = strcmp(q->spec, "mxfp4") == 0, bmm = strstr(q->spec, "packed:1") != NULL;
    if (l == QTK_LAYOUT_GPT_OSS || ((l == QTK_LAYOUT_MODELOPT || l == QTK_LAYOUT_CT) && mx)) {
        get(&s, 0, l == QTK_LAYOUT_GPT_OSS ? "_blocks" : l == QTK_LAYOUT_CT ? "_packed" : "");
        get(&s, 1, l == QTK_LAYOUT_GPT_OSS ? "_scales" : "_scale");
        if (!s.b[0] || !s.b[1]) return false;
        for (size_t i = 0; i < n; i++) /* low nibble first; scale 2^(s - 127) */
            y[i] = e2m1(s.b[0][i / 2] >> (4 * (i % 2))) * ldexpf(1.0f, (int)s.b[1][i / 32] - 127);
    } else if (l == QTK_LAYOUT_MODELOPT && (nv || bmm)) {
        get(&s, 0, ""), get(&s, 1, "_scale"), get(&s, 2, "_scale_2");
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        float g = ld_f(s.b[2]); /* weight_scale_2 multiplies */
        for (size_t i = 0; i < n; i++) {
            size_t byte, blk, nib;
            if (!bmm) byte = i / 2, nib = i % 2, blk = i / 16;
            else { /* [E, K, O] stored [E, K/2, O], pairs along K */
                size_t Kd = q->shape[1], Od = q->shape[2], e = i / (Kd * Od), k = i / Od % Kd, o = i % Od;
                byte = e * (Kd / 2) * Od + (k / 2) * Od + o, nib = k % 2, blk = e * (Kd / 16) * Od + (k / 16) * Od + o;
            }
            float blockv = e4m3(s.b[1][blk]) * g;
            y[i] = e2m1(s.b[0][byte] >> (4 * nib)) * blockv;
        }
    } else if (l == QTK_LAYOUT_CT && nv) {
        get(&s, 0, "_packed"), get(&s, 1, "_scale"), get(&s, 2, "_global_scale");
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        float G = ld_f(s.b[2]); /* weight_global_scale divides */
        for (size_t i = 0; i < n; i++) {
            float e = e4m3(s.b[1][i / 16]) / G;
            y[i] = e2m1(s.b[0][i / 2] >> (4 * (i % 2))) * e;
        }
    } else if (l == QTK_LAYOUT_GPTQ || l == QTK_LAYOUT_AWQ) {
        /* GPTQ: qweight [K b/32, N], column n one LSB-first bit stream down the column;
         * qzeros [ng, N b/32] z - 1 (v1: the constant subtracted from whole words, 3 bits
         * per field); AWQ: qweight [K, N/8], qzeros [ng, N/8], field i = column 8c + order[i] */
        char P[256], nm[300];
        snprintf(P, sizeof P, "%.*s", (int)(strlen(q->name) - 7), q->name);
        const char *sfx[3] = {"qweight", "qzeros", "scales"};
        for (int k = 0; k < 3; k++) {
            snprintf(nm, sizeof nm, "%s.%s", P, sfx[k]);
            s.b[k] = tensor_bytes(raw, nm, &s.len[k]);
        }
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        unsigned b = (unsigned)(q->spec[1] - '0');
        size_t N = O, G = strstr(q->spec, "block=*") ? K : (size_t)atoi(strstr(q->spec, "block=") + 6), ng = (K + G - 1) / G;
        static const unsigned order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
        for (size_t r = 0; r < N; r++)
            for (size_t k = 0; k < K; k++) {
                size_t g = k / G;
                unsigned qv, zv;
                if (l == QTK_LAYOUT_AWQ) {
                    size_t c = r / 8;
                    unsigned i = 0;
                    while (order[i] != r % 8) i++;
                    uint32_t wq, wz;
                    memcpy(&wq, s.b[0] + 4 * (k * (N / 8) + c), 4);
                    memcpy(&wz, s.b[1] + 4 * (g * (N / 8) + c), 4);
                    qv = (wq >> (4 * i)) & 15, zv = (wz >> (4 * i)) & 15;
                } else {
                    uint64_t bit = (uint64_t)k * b, zbit = (uint64_t)r * b;
                    uint32_t w0, w1 = 0, z0, z1 = 0;
                    size_t wi = (size_t)(bit / 32), zi = (size_t)(zbit / 32), zr = N * b / 32;
                    memcpy(&w0, s.b[0] + 4 * (wi * N + r), 4);
                    if (bit % 32 + b > 32) memcpy(&w1, s.b[0] + 4 * ((wi + 1) * N + r), 4);
                    qv = (unsigned)(((uint64_t)w1 << 32 | w0) >> (bit % 32)) & ((1u << b) - 1);
                    memcpy(&z0, s.b[1] + 4 * (g * zr + zi), 4);
                    if (zbit % 32 + b > 32) memcpy(&z1, s.b[1] + 4 * (g * zr + zi + 1), 4);
                    if (b != 3) z0 += b == 2 ? 0x55555555u : b == 4 ? 0x11111111u : 0x01010101u, z1 = 0;
                    zv = (unsigned)(((uint64_t)z1 << 32 | z0) >> (zbit % 32)) & ((1u << b) - 1);
                    if (b == 3) zv = (zv + 1) & 7;
                }
                float sc = qtk_fmt_decode(QTK_DTYPE_F16, (uint32_t)(s.b[2][2 * (g * N + r)] | s.b[2][2 * (g * N + r) + 1] << 8));
                y[r * K + k] = sc * (float)((int)qv - (int)zv);
            }
        (void)ng;
    } else if (l == QTK_LAYOUT_CT && q->spec[0] == 'u') {
        /* zero points: offset-binary fields (packed) or int8, minus the zero point (packed
         * along the rows, or int8), times the scale */
        bool native = strstr(q->spec, "native") != NULL;
        get(&s, 0, native ? "" : "_packed"), get(&s, 1, "_scale"), get(&s, 2, "_zero_point");
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        unsigned bits = q->spec[1] == '4' ? 4 : 8, fpw = 32 / bits;
        size_t wpr = (K + fpw - 1) / fpw, G = strstr(q->spec, "block=*") ? K : (size_t)atoi(strstr(q->spec, "block=") + 6);
        size_t gc = (K + G - 1) / G;
        for (size_t o = 0; o < O; o++)
            for (size_t k = 0; k < K; k++) {
                int qv, zv;
                if (native) {
                    qv = (int8_t)s.b[0][o * K + k], zv = (int8_t)s.b[2][o * gc + k / G];
                } else {
                    uint32_t w, zw;
                    memcpy(&w, s.b[0] + 4 * (o * wpr + k / fpw), 4);
                    memcpy(&zw, s.b[2] + 4 * ((o / fpw) * gc + k / G), 4);
                    qv = (int)((w >> (bits * (k % fpw))) & ((1u << bits) - 1)) - (1 << (bits - 1));
                    zv = (int)((zw >> (bits * (o % fpw))) & ((1u << bits) - 1)) - (1 << (bits - 1));
                }
                y[o * K + k] = (float)(qv - zv) * scale_at(s.dt[1], s.b[1], o * gc + k / G);
            }
    } else if (l == QTK_LAYOUT_CT && strstr(q->spec, "q") == q->spec && !strstr(q->spec, "native")) {
        get(&s, 0, "_packed"), get(&s, 1, "_scale"), get(&s, 2, "_shape");
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        CHECK(strcmp(s.dt[0], "I32") == 0 && strcmp(s.dt[2], "I64") == 0);
        CHECK(s.len[2] == 16 && s.b[2][0] == (O & 255) && s.b[2][8] == (K & 255)); /* weight_shape [O, K] */
        unsigned bits = q->spec[1] == '4' ? 4 : 8, fpw = 32 / bits;
        size_t wpr = (K + fpw - 1) / fpw, G = strstr(q->spec, "block=*") ? K : (size_t)atoi(strstr(q->spec, "block=") + 6);
        for (size_t o = 0; o < O; o++)
            for (size_t k = 0; k < K; k++) {
                const uint8_t *w = s.b[0] + 4 * (o * wpr + k / fpw);
                uint32_t word = (uint32_t)(w[0] | w[1] << 8 | w[2] << 16 | (uint32_t)w[3] << 24);
                int q0 = (int)((word >> (bits * (k % fpw))) & ((1u << bits) - 1)) - (1 << (bits - 1)); /* offset binary */
                y[o * K + k] = (float)q0 * scale_at(s.dt[1], s.b[1], o * ((K + G - 1) / G) + k / G);
            }
    } else if (l == QTK_LAYOUT_CT || l == QTK_LAYOUT_MODELOPT || l == QTK_LAYOUT_DEEPSEEK) {
        /* FP8 (and int8) weights times their scale, however the scale grid is laid out */
        get(&s, 0, ""), get(&s, 1, l == QTK_LAYOUT_DEEPSEEK ? "_scale_inv" : "_scale");
        if (!s.b[0] || !s.b[1]) return false;
        qtk_scheme sc;
        qtk_layout L;
        CHECK_OK(qtk_scheme_parse(q->spec, &sc));
        CHECK_OK(qtk_layout_compute(&sc, q->shape, q->rank, &L));
        for (size_t o = 0; o < O; o++)
            for (size_t k = 0; k < K; k++) {
                size_t gi = L.n_scales == 1 ? 0 : (o / L.block[0]) * L.grid[1] + k / L.block[1];
                uint8_t c = s.b[0][o * K + k];
                float v = q->spec[0] == 'q' ? (float)(int8_t)c : e4m3(c);
                y[o * K + k] = v * scale_at(s.dt[1], s.b[1], gi); /* scale_inv multiplies */
            }
    } else if (l == QTK_LAYOUT_BNB) {
        get(&s, 0, ""), get(&s, 1, ".absmax"), get(&s, 2, ".quant_map");
        if (!s.b[0] || !s.b[1] || !s.b[2]) return false;
        size_t B = strcmp(q->spec, "nf4") == 0 ? 64 : (size_t)atoi(strstr(q->spec, "block=") + 6);
        for (size_t i = 0; i < n; i++) { /* element 2k in the HIGH nibble; blocks over the flat tensor */
            unsigned idx = i % 2 == 0 ? s.b[0][i / 2] >> 4 : s.b[0][i / 2] & 15;
            y[i] = ld_f(s.b[2] + 4 * idx) * ld_f(s.b[1] + 4 * (i / B));
        }
    } else {
        return false;
    }
    for (int k = 0; k < 4; k++) free(s.b[k]);
    return true;
}

/* ---- checks ---- */

/* Every stored tensor of a is in b with the same dtype, shape and bytes. */
static void same_stored(const char *a, const char *b) {
    qtk_ckpt *x = NULL, *y = NULL;
    CHECK_OK(qtk_ckpt_open(a, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &x));
    CHECK_OK(qtk_ckpt_open(b, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &y));
    if (x && y) {
        const qtk__desc *dx = qtk__ckpt_desc(x), *dy = qtk__ckpt_desc(y);
        CHECK_EQ_U(dx->n_tensors, dy->n_tensors);
        for (size_t i = 0; i < dx->n_tensors; i++) {
            const char *nm = dx->tensors[i].name;
            size_t j = tensor_index(y, nm), la = 0, lb = 0;
            CHECK_MSG(j != SIZE_MAX, "'%s' is missing after the round trip", nm);
            if (j == SIZE_MAX) continue;
            CHECK(dx->tensors[i].elem == dy->tensors[j].elem && dx->tensors[i].rank == dy->tensors[j].rank);
            uint8_t *p = tensor_bytes(x, nm, &la), *q = tensor_bytes(y, nm, &lb);
            CHECK_MSG(p && q && la == lb && memcmp(p, q, la) == 0, "stored tensor '%s' differs after the round trip", nm);
            free(p);
            free(q);
        }
    }
    qtk_ckpt_close(x);
    qtk_ckpt_close(y);
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void check_set(const lset *ls, size_t max_shard) {
    model m;
    make_model(ls, &m, 1234 + ls->layout);
    char dir[512], dir2[512];
    snprintf(dir, sizeof dir, "%s", tmp_path(max_shard ? "sharded" : "single"));
    snprintf(dir2, sizeof dir2, "%s", tmp_path(max_shard ? "sharded2" : "single2"));
    qtk__hub_write_opts o = {.layout = ls->layout, .max_shard_bytes = max_shard};
    CHECK_OK(qtk__hub_write(dir, &m.d, (const void *const *)m.bytes, &o));
    qtk_ckpt *c = NULL, *raw = NULL;
    CHECK_OK(qtk_ckpt_open(dir, NULL, &c));
    CHECK_OK(qtk_ckpt_open(dir, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &raw));
    if (!c || !raw) {
        qtk_ckpt_close(c);
        qtk_ckpt_close(raw);
        model_free(&m);
        return;
    }
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    CHECK_MSG(hi.layout == ls->layout, "%s: detected %s", ls->title, qtk_hub_layout_name(hi.layout));
    CHECK_MSG(hi.config_file != NULL && strstr(hi.detected_by, "config") != NULL, "%s: detected by %s", ls->title,
              hi.detected_by);
    if (max_shard) CHECK_MSG(hi.n_shards >= 2 && hi.index_file, "%s: %zu shards", ls->title, hi.n_shards);
    else CHECK(hi.n_shards == 1 && !hi.index_file);
    for (size_t k = 0; k < hi.n_notices; k++) printf("  notice: %s: %s\n", hi.notices[k].tensor, hi.notices[k].text);
    CHECK_EQ_U(hi.n_notices, 0);
    const qtk__desc *d = qtk__ckpt_desc(c);
    CHECK_EQ_U(d->n_tensors, m.d.n_tensors);
    for (size_t i = 0; i < m.d.n_tensors; i++) {
        const qtk_ckpt_tensor *want = &m.d.tensors[i];
        size_t j = tensor_index(c, want->name), len = 0;
        CHECK_MSG(j != SIZE_MAX, "%s: tensor '%s' is missing", ls->title, want->name);
        if (j == SIZE_MAX) continue;
        const qtk_ckpt_tensor *got = &d->tensors[j];
        char a[160] = "", b[160] = "";
        if (got->quantized) qtk_scheme_format(&got->scheme, a, sizeof a, NULL);
        if (want->quantized) qtk_scheme_format(&want->scheme, b, sizeof b, NULL);
        CHECK_MSG(got->quantized == want->quantized && (!want->quantized || qtk_scheme_equal(&got->scheme, &want->scheme)),
                  "%s: '%s' reads as '%s', written as '%s'", ls->title, want->name, a, b);
        CHECK(got->rank == want->rank && memcmp(got->shape, want->shape, (size_t)want->rank * sizeof(size_t)) == 0);
        uint8_t *bytes = tensor_bytes(c, want->name, &len);
        CHECK_MSG(bytes && len == want->nbytes && memcmp(bytes, m.bytes[i], len) == 0, "%s: '%s' bytes differ", ls->title,
                  want->name);
        free(bytes);
        if (!want->quantized) continue;
        /* the values: qtk's dequantization of what it read = the convention's reference */
        size_t n = 0;
        float *y = tensor_f32(c, want->name, &n), *ref = calloc(want->numel, sizeof *ref);
        const qt *q = &ls->t[i];
        CHECK(reference(raw, ls->layout, q, ref));
        size_t bad = 0;
        for (size_t k = 0; y && k < n; k++) bad += memcmp(&y[k], &ref[k], 4) != 0;
        CHECK_MSG(y && n == want->numel && bad == 0, "%s: '%s': %zu of %zu values differ from the reference decoder", ls->title,
                  want->name, bad, n);
        test_checks += (long)n;
        free(y);
        free(ref);
    }
    /* read -> write in the same layout: every stored tensor's bytes, and the files themselves */
    CHECK_OK(hub_rewrite(c, dir2, ls->layout));
    same_stored(dir, dir2);
    for (size_t s = 0; s < hi.n_shards; s++) {
        const char *f = strrchr(hi.shards[s], '/') + 1;
        char p2[1024];
        snprintf(p2, sizeof p2, "%s/%s", dir2, f);
        CHECK_MSG(same_file(hi.shards[s], p2), "%s: %s differs after the round trip", ls->title, f);
    }
    qtk_ckpt_close(raw);
    qtk_ckpt_close(c);
    model_free(&m);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, dir2);
    CHECK(system(cmd) == 0);
}

static void every_layout(void) {
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) check_set(&sets[i], 0);
}

static void every_layout_sharded(void) {
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) check_set(&sets[i], 2000);
}

int main(int argc, char **argv) {
    tmp_dir_make();
    static const test_case cases[] = {T(every_layout), T(every_layout_sharded)};
    int rc = test_run("hub_layouts", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
