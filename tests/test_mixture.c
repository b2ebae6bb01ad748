/* test_mixture.c — llama.cpp's file types (--preset q4_k_m ...): the rule table on model
 * shapes whose llama-quantize results are known, each rule and fallback, and a whole
 * conversion to GGUF that then survives GGUF -> .bpk -> .safetensors -> GGUF byte for byte. */
#include "test.h"

#include "ckpt_util.h"
#include "ops/mixture.h"
#include "qtk_ckpt.h"

enum { NT = 10 };
static const char *const tnames[NT] = {"?", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q4_0", "Q5_0", "Q5_1", "F16"};

/* A llama-shaped description: n_layer layers of q, k, v, o, gate, up, down and two norms,
 * token embeddings, output norm and (unless tied) output; GGUF's names or Hugging Face's. */
typedef struct {
    int n_layer;
    size_t d, ff, vocab, kv; /* kv: attention k/v rows */
    bool hf, tied;
    const char *arch;
    long experts, heads, heads_kv;
} model;

static void add(qtk__desc *d, const char *name, size_t rows, size_t cols) {
    size_t shape[2] = {rows, cols};
    CHECK(qtk__desc_add_raw(d, name, QTK_ELEM_F16, shape, cols ? 2 : 1, NULL) == QTK_OK);
}

static void build(qtk__desc *d, const model *m) {
    qtk__desc_init(d);
    char key[64], val[32];
    if (m->arch) {
        CHECK(qtk__desc_add_meta(d, "general.architecture", m->arch) == QTK_OK);
        snprintf(key, sizeof key, "%s.block_count", m->arch), snprintf(val, sizeof val, "%d", m->n_layer);
        CHECK(qtk__desc_add_meta(d, key, val) == QTK_OK);
        if (m->experts) {
            snprintf(key, sizeof key, "%s.expert_count", m->arch), snprintf(val, sizeof val, "%ld", m->experts);
            CHECK(qtk__desc_add_meta(d, key, val) == QTK_OK);
        }
        if (m->heads) {
            snprintf(key, sizeof key, "%s.attention.head_count", m->arch), snprintf(val, sizeof val, "%ld", m->heads);
            CHECK(qtk__desc_add_meta(d, key, val) == QTK_OK);
            snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch), snprintf(val, sizeof val, "%ld", m->heads_kv);
            CHECK(qtk__desc_add_meta(d, key, val) == QTK_OK);
        }
    }
    add(d, m->hf ? "model.embed_tokens.weight" : "token_embd.weight", m->vocab, m->d);
    char n[96];
    for (int l = 0; l < m->n_layer; l++) {
        static const char *const g[9] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                                         "attn_norm", "ffn_norm"};
        static const char *const h[9] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
                                         "post_attention_layernorm"};
        const size_t rows[9] = {m->d, m->kv, m->kv, m->d, m->ff, m->ff, m->d, m->d, m->d};
        const size_t cols[9] = {m->d, m->d, m->d, m->d, m->d, m->d, m->ff, 0, 0};
        for (int k = 0; k < 9; k++) {
            if (m->hf) snprintf(n, sizeof n, "model.layers.%d.%s.weight", l, h[k]);
            else snprintf(n, sizeof n, "blk.%d.%s.weight", l, g[k]);
            add(d, n, rows[k], cols[k]);
        }
    }
    add(d, m->hf ? "model.norm.weight" : "output_norm.weight", m->d, 0);
    if (!m->tied) add(d, m->hf ? "lm_head.weight" : "output.weight", m->vocab, m->d);
}

/* counts[type] over the plan */
static bool plan(const model *m, qtk__mix_ftype f, int *counts, qtk__desc *d, qtk__mixture *mx) {
    build(d, m);
    memset(counts, 0, NT * sizeof *counts);
    if (qtk__mixture_plan(mx, f, d) != QTK_OK) return false;
    for (size_t i = 0; i < mx->n; i++) counts[mx->choice[i].type]++;
    return true;
}

static const char *type_of(const qtk__desc *d, const qtk__mixture *mx, const char *name) {
    for (size_t i = 0; i < d->n_tensors; i++)
        if (strcmp(d->tensors[i].name, name) == 0) return tnames[mx->choice[i].type];
    return "(absent)";
}

static const model llama2_7b = {.n_layer = 32, .d = 4096, .ff = 11008, .vocab = 32000, .kv = 4096, .arch = "llama",
                                .heads = 32, .heads_kv = 32};

/* llama-2-7b as llama-quantize makes it (the tensor-type counts llama.cpp's loader prints for
 * those files: Q4_K_M "f32 65, q4_K 193, q6_K 33", Q3_K_M "q3_K 129, q4_K 92, q5_K 4, q6_K 1",
 * ...), GGUF's names and Hugging Face's alike */
static void llama_7b_counts(void) {
    static const struct {
        qtk__mix_ftype f;
        int q3, q4, q5, q6, q8;
    } want[] = {
        {QTK__MIX_Q4_K_M, 0, 193, 0, 33, 0}, {QTK__MIX_Q5_K_M, 0, 0, 193, 33, 0}, {QTK__MIX_Q3_K_M, 129, 92, 4, 1, 0},
        {QTK__MIX_Q4_K_S, 0, 217, 8, 1, 0},  {QTK__MIX_Q5_K_S, 0, 0, 225, 1, 0},  {QTK__MIX_Q6_K, 0, 0, 0, 226, 0},
        {QTK__MIX_Q8_0, 0, 0, 0, 0, 226},
    };
    for (int hf = 0; hf < 2; hf++)
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            model m = llama2_7b;
            m.hf = hf;
            if (hf) m.arch = NULL; /* the layer count from the names */
            qtk__desc d;
            qtk__mixture mx;
            int c[NT];
            CHECK(plan(&m, want[k].f, c, &d, &mx));
            CHECK_MSG(c[QTK__MT_KEEP] == 65 && c[QTK__MT_Q3_K] == want[k].q3 && c[QTK__MT_Q4_K] == want[k].q4 &&
                          c[QTK__MT_Q5_K] == want[k].q5 && c[QTK__MT_Q6_K] == want[k].q6 && c[QTK__MT_Q8_0] == want[k].q8,
                      "%s (%s names): kept %d q3_K %d q4_K %d q5_K %d q6_K %d q8_0 %d", qtk__mixture_name(want[k].f),
                      hf ? "HF" : "GGUF", c[0], c[1], c[2], c[3], c[4], c[5]);
            qtk__mixture_free(&mx);
            qtk__desc_free(&d);
        }
}

/* use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2: which layers' attn_v and
 * ffn_down get Q6_K in Q4_K_M, layer by layer; the embeddings keep the default type and the
 * output gets Q6_K */
static void q4_k_m_layers(void) {
    model m = llama2_7b;
    qtk__desc d;
    qtk__mixture mx;
    int c[NT];
    CHECK(plan(&m, QTK__MIX_Q4_K_M, c, &d, &mx));
    const int more[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
    for (int l = 0; l < 32; l++) {
        bool six = false;
        for (size_t k = 0; k < sizeof more / sizeof *more; k++) six |= more[k] == l;
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", l);
        CHECK_MSG(strcmp(type_of(&d, &mx, n), six ? "Q6_K" : "Q4_K") == 0, "%s: %s", n, type_of(&d, &mx, n));
        snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l);
        CHECK_MSG(strcmp(type_of(&d, &mx, n), six ? "Q6_K" : "Q4_K") == 0, "%s: %s", n, type_of(&d, &mx, n));
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", l);
        CHECK(strcmp(type_of(&d, &mx, n), "Q4_K") == 0);
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        CHECK(strcmp(type_of(&d, &mx, n), "?") == 0);
    }
    CHECK(strcmp(type_of(&d, &mx, "output.weight"), "Q6_K") == 0);
    CHECK(strcmp(type_of(&d, &mx, "token_embd.weight"), "Q4_K") == 0);
    /* the reason names the rule */
    for (size_t i = 0; i < d.n_tensors; i++)
        if (strcmp(d.tensors[i].name, "blk.6.attn_v.weight") == 0)
            CHECK_MSG(strstr(mx.choice[i].why, "attention v 6 of 32") && strstr(mx.choice[i].why, "Q6_K"), "%s",
                      mx.choice[i].why);
    qtk__mixture_free(&mx);
    qtk__desc_free(&d);
}

/* tied embeddings, 8 experts, the 70B rule, Falcon's output, and the row fallbacks */
static void special_rules(void) {
    qtk__desc d;
    qtk__mixture mx;
    int c[NT];
    model m = llama2_7b;
    m.tied = true; /* no output.weight: token_embd takes the output's rule */
    CHECK(plan(&m, QTK__MIX_Q4_K_M, c, &d, &mx));
    CHECK(strcmp(type_of(&d, &mx, "token_embd.weight"), "Q6_K") == 0);
    qtk__mixture_free(&mx), qtk__desc_free(&d);
    CHECK(plan(&m, QTK__MIX_Q8_0, c, &d, &mx));
    CHECK(strcmp(type_of(&d, &mx, "token_embd.weight"), "Q8_0") == 0);
    qtk__mixture_free(&mx), qtk__desc_free(&d);

    m = llama2_7b;
    m.experts = 8; /* Mixtral: attn_v and attn_k Q8_0, attn_output Q5_K */
    CHECK(plan(&m, QTK__MIX_Q4_K_M, c, &d, &mx));
    CHECK(strcmp(type_of(&d, &mx, "blk.5.attn_v.weight"), "Q8_0") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.5.attn_k.weight"), "Q8_0") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.5.attn_output.weight"), "Q5_K") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.6.ffn_down.weight"), "Q6_K") == 0); /* layer from the name */
    qtk__mixture_free(&mx), qtk__desc_free(&d);

    m = llama2_7b;
    m.n_layer = 80, m.heads = 64, m.heads_kv = 8, m.kv = 1024; /* LLM_TYPE_70B: attn_v Q4_K -> Q5_K */
    CHECK(plan(&m, QTK__MIX_Q4_K_M, c, &d, &mx));
    CHECK(strcmp(type_of(&d, &mx, "blk.12.attn_v.weight"), "Q6_K") == 0);   /* (12 - 80/8) % 3 == 2 */
    CHECK(strcmp(type_of(&d, &mx, "blk.13.attn_v.weight"), "Q5_K") == 0);   /* Q4_K, raised */
    CHECK(strcmp(type_of(&d, &mx, "blk.13.ffn_down.weight"), "Q4_K") == 0); /* the rule is attn_v's only */
    qtk__mixture_free(&mx), qtk__desc_free(&d);

    m = llama2_7b;
    m.arch = "falcon"; /* the output is Q8_0; Q4_K_M's ffn_down: Q6_K below n/16, Q5_K where more bits */
    CHECK(plan(&m, QTK__MIX_Q4_K_M, c, &d, &mx));
    CHECK(strcmp(type_of(&d, &mx, "output.weight"), "Q8_0") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.1.ffn_down.weight"), "Q6_K") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.2.ffn_down.weight"), "Q5_K") == 0);
    CHECK(strcmp(type_of(&d, &mx, "blk.5.ffn_down.weight"), "Q4_K") == 0);
    qtk__mixture_free(&mx), qtk__desc_free(&d);

    /* rows no 256 block fits: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q3_K -> Q4_0; rows no
     * 32 block fits: F16 (kept); the output at such rows: Q8_0 */
    m = llama2_7b;
    m.n_layer = 2, m.d = 4128, m.ff = 4100, m.vocab = 64;
    static const struct {
        qtk__mix_ftype f;
        const char *q, *down, *out;
    } fb[] = {{QTK__MIX_Q4_K_M, "Q5_0", "F16", "Q8_0"}, {QTK__MIX_Q5_K_S, "Q5_1", "F16", "Q8_0"},
              {QTK__MIX_Q6_K, "Q8_0", "F16", "Q8_0"},   {QTK__MIX_Q3_K_M, "Q4_0", "F16", "Q8_0"}};
    for (size_t k = 0; k < sizeof fb / sizeof *fb; k++) {
        CHECK(plan(&m, fb[k].f, c, &d, &mx));
        CHECK_MSG(strcmp(type_of(&d, &mx, "blk.0.attn_q.weight"), fb[k].q) == 0, "%s: %s", qtk__mixture_name(fb[k].f),
                  type_of(&d, &mx, "blk.0.attn_q.weight"));
        CHECK(strcmp(type_of(&d, &mx, "blk.0.ffn_down.weight"), fb[k].down) == 0);
        CHECK(strcmp(type_of(&d, &mx, "output.weight"), fb[k].out) == 0);
        qtk__mixture_free(&mx), qtk__desc_free(&d);
    }
    /* Q8_0 has no fallback in llama.cpp: refused, naming the tensor */
    build(&d, &m);
    CHECK(qtk__mixture_plan(&mx, QTK__MIX_Q8_0, &d) == QTK_E_FORMAT);
    CHECK_MSG(strstr(qtk_last_error(), "blk.0.ffn_down.weight") != NULL, "%s", qtk_last_error());
    CHECK(mx.choice == NULL);
    qtk__desc_free(&d);

    qtk__mix_ftype f;
    CHECK(qtk__mixture_find("Q4_K_M", &f) == QTK_OK && f == QTK__MIX_Q4_K_M);
    CHECK(qtk__mixture_find("q4_k_l", &f) == QTK_E_PARSE);
    CHECK(strstr(qtk_last_error(), "q4_k_l") != NULL);
}

/* qtk_ckpt_convert with a mixture: a small llama written as safetensors becomes a GGUF
 * whose types are the plan's, and that GGUF goes to .bpk, to .safetensors and back to GGUF
 * with the same bytes */
static void convert_round_trip(void) {
    tmp_dir_make();
    char *src = strdup(tmp_path("model.safetensors"));
    qtk_writer *w = NULL;
    CHECK(qtk_writer_create(src, NULL, &w) == QTK_OK);
    if (!w) return;
    const int L = 4;
    const size_t D = 256, F = 512;
    float *buf = malloc(F * D * sizeof *buf);
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < F * D; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        buf[i] = (float)((int64_t)(s >> 11) - (int64_t)(1ull << 52)) / (float)(1ull << 52) * 0.05f;
    }
    char n[64];
    size_t sh2[2], sh1[1] = {D};
    sh2[0] = 128, sh2[1] = D;
    CHECK(qtk_writer_add_raw(w, "token_embd.weight", QTK_ELEM_F32, sh2, 2, buf) == QTK_OK);
    for (int l = 0; l < L; l++) {
        static const char *const g[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
        for (int k = 0; k < 7; k++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", l, g[k]);
            sh2[0] = k == 4 || k == 5 ? F : D, sh2[1] = k == 6 ? F : D;
            CHECK(qtk_writer_add_raw(w, n, QTK_ELEM_F32, sh2, 2, buf) == QTK_OK);
        }
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        CHECK(qtk_writer_add_raw(w, n, QTK_ELEM_F32, sh1, 1, buf) == QTK_OK);
    }
    sh2[0] = 128, sh2[1] = D;
    CHECK(qtk_writer_add_raw(w, "output.weight", QTK_ELEM_F32, sh2, 2, buf) == QTK_OK);
    CHECK(qtk_writer_commit(w) == QTK_OK);

    char *g1 = strdup(tmp_path("m.gguf"));
    qtk_convert_options o = {.mixture = "q4_k_m", .calibration = QTK_CALIB_MSE};
    CHECK_MSG(qtk_ckpt_convert(src, g1, &o, NULL) == QTK_OK, "%s", qtk_last_error());
    qtk_ckpt *c = NULL;
    CHECK(qtk_ckpt_open(g1, NULL, &c) == QTK_OK);
    if (c) {
        /* 4 layers: use_more_bits holds for layer 3 (>= 7n/8 = 3) and 2 ((i - n/8) % 3 == 2) */
        static const struct {
            const char *name, *type;
        } want[] = {{"blk.0.attn_v.weight", "Q4_K"},   {"blk.1.attn_v.weight", "Q4_K"},  {"blk.2.attn_v.weight", "Q6_K"},
                    {"blk.3.ffn_down.weight", "Q6_K"}, {"blk.1.ffn_down.weight", "Q4_K"}, {"blk.1.attn_q.weight", "Q4_K"},
                    {"output.weight", "Q6_K"},         {"token_embd.weight", "Q4_K"},     {"blk.1.attn_norm.weight", NULL}};
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            size_t i;
            CHECK(qtk_ckpt_find(c, want[k].name, &i) == QTK_OK);
            const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
            const char *ft = t && t->file_type ? t->file_type : NULL;
            CHECK_MSG(want[k].type ? ft && strcmp(ft, want[k].type) == 0 : !t->quantized, "%s: %s", want[k].name,
                      ft ? ft : "(none)");
        }
        qtk_ckpt_close(c);
    }
    char *b = strdup(tmp_path("m.bpk")), *st = strdup(tmp_path("m2.safetensors")), *g2 = strdup(tmp_path("m2.gguf"));
    qtk_convert_options keep = {0};
    CHECK_MSG(qtk_ckpt_convert(g1, b, &keep, NULL) == QTK_OK, "%s", qtk_last_error());
    CHECK_MSG(qtk_ckpt_convert(b, st, &keep, NULL) == QTK_OK, "%s", qtk_last_error());
    CHECK_MSG(qtk_ckpt_convert(st, g2, &keep, NULL) == QTK_OK, "%s", qtk_last_error());
    size_t n1 = 0, n2 = 0;
    uint8_t *a1 = slurp(g1, &n1), *a2 = slurp(g2, &n2);
    CHECK_MSG(a1 && a2 && n1 == n2 && memcmp(a1, a2, n1) == 0, "GGUF -> bpk -> safetensors -> GGUF: %zu vs %zu bytes%s", n1,
              n2, a1 && a2 && n1 == n2 ? ", contents differ" : "");
    free(a1), free(a2);

    /* a scheme and a mixture together, and an unknown mixture, are refused before any file */
    qtk_convert_options both = {.mixture = "q4_k_m", .scheme = "q8s"};
    CHECK(qtk_convert_check(&both) == QTK_E_ARG);
    qtk_convert_options bad = {.mixture = "q9_k"};
    CHECK(qtk_convert_check(&bad) == QTK_E_PARSE);
    free(buf);
    free(src), free(g1), free(b), free(st), free(g2);
    tmp_dir_remove();
}

TEST_MAIN("mixture", T(llama_7b_counts), T(q4_k_m_layers), T(special_rules), T(convert_round_trip))
