/* test_cli_gguf.c — qtk inspect / convert / eval on GGUF files as a user runs them: the listing
 * with ggml types and KVs, conversions in every direction (byte-identical round trips), the
 * notes for types qtk decodes and the SQNR of re-quantizations, --scheme none --dtype, schemes
 * GGUF cannot hold, and malformed files (exit 1, a message, no output file). ggml's own files
 * are used when $QTK_SHARED_DIR/data/ggml exists; the rest runs on files qtk makes. The binary
 * comes from $QTK_BIN. */
#include "ckpt_util.h"

#include "common/internal.h"

#include <stdarg.h>
#include <sys/wait.h>

static const char *bin;
static char out[1 << 17], err[1 << 14];

/* `qtk ARGS` in the temporary directory; stdout and stderr land in out and err */
#define run(...) cli_run(bin, out, sizeof out, err, sizeof err, __VA_ARGS__)

/* The line of out that starts with name followed by the given columns (space separated). */
static bool row(const char *name, const char *cols) {
    char want[512];
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, strlen(name)) != 0 || p[strlen(name)] != ' ') continue;
        const char *l = p + strlen(name);
        snprintf(want, sizeof want, "%s", cols);
        bool ok = true;
        for (char *tok = strtok(want, " "); tok && ok; tok = strtok(NULL, " ")) {
            while (*l == ' ') l++;
            ok = strncmp(l, tok, strlen(tok)) == 0 && (l[strlen(tok)] == ' ' || l[strlen(tok)] == '\n');
            l += strlen(tok);
        }
        if (ok) return true;
    }
    return false;
}

static bool same_files(const char *a, const char *b) {
    char pa[1024];
    snprintf(pa, sizeof pa, "%s", tmp_path(a));
    size_t na, nb;
    uint8_t *x = slurp(pa, &na), *y = slurp(tmp_path(b), &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static const char *types_gguf;

/* ggml's file: the listing, KVs, JSON */
static void inspect_ggml(void) {
    if (!types_gguf) return;
    CHECK(run("inspect '%s'", types_gguf) == 0);
    CHECK(strstr(out, "format    gguf (GGUF v3, 16 KVs, 19 tensor infos, alignment 32, data at byte 1472)") != NULL);
    CHECK(strstr(out, "name      ggml    qtk ") != NULL);
    CHECK(row("t.q8_0", "Q8_0 q8f,block=32:f16,store=native 64x256 17408 8.500 132544"));
    CHECK(row("t.q4_k", "Q4_K q4_k 64x256 9216 4.500 248896"));
    CHECK(row("t.q6_k", "Q6_K q6_k 64x256 13440 6.562 269376"));
    CHECK(row("t.q4_1", "Q4_1 q4_1 64x256 10240 5.000 159168"));
    CHECK(row("t.nvfp4", "NVFP4 e2m1,block=16:ue4m3,store=packed:0 64x256 9216 4.500 201664"));
    CHECK(strstr(out, "19 tensors, 311296 elements: 16 quantized (150272 bytes), 3 unquantized (131072 bytes)") != NULL);
    CHECK(strstr(out, "metadata  general.architecture = qtk-test\n") != NULL);
    CHECK(strstr(out, "          test.u32 = u32:3735928559\n") != NULL);
    CHECK(strstr(out, "          test.arr_string = arr[str]:[\"alpha\",\"\",\"γάμμα\"]\n") != NULL);
    CHECK(run("inspect --json '%s'", types_gguf) == 0);
    CHECK(strstr(out, "\"name\": \"t.q4_k\", \"quantized\": true, \"dtype\": \"u4,block=32:u6,min=u6,super=256:f16,store=ggml\"") != NULL);
    CHECK(strstr(out, "\"file_type\": \"Q4_K\", \"file_bytes\": 9216, \"decoded\": false") != NULL);
    CHECK(strstr(out, "\"test.f64\": \"f64:2.7182818284590451\"") != NULL);
}

/* ggml's file to .bpk and back: notes, bytes; re-quantization with its SQNR; dequantizing */
static void convert_ggml(void) {
    if (!types_gguf) return;
    CHECK(run("convert '%s' t.bpk", types_gguf) == 0);
    CHECK(strstr(out, "note:") == NULL); /* every type is held: nothing is decoded */
    CHECK(run("inspect t.bpk") == 0 && strstr(out, "qtk:file_type:t.q6_k = Q6_K") != NULL);
    CHECK(run("convert t.bpk t.gguf") == 0 && strstr(out, "wrote t.gguf (gguf): 19 tensors") != NULL);
    CHECK(run("inspect t.gguf") == 0);
    CHECK(row("t.q6_k", "Q6_K q6_k 64x256 13440"));
    CHECK(row("t.tq1_0", "TQ1_0 q2s,block=128:f16 64x256 3456"));
    CHECK(row("t.q4_k", "Q4_K q4_k 64x256 9216"));
    CHECK(strstr(out, "qtk:file_type") == NULL);
    CHECK(run("convert t.gguf t2.gguf") == 0 && same_files("t.gguf", "t2.gguf"));
    CHECK(run("convert t.gguf t.safetensors") == 0 && run("convert t.safetensors t3.gguf") == 0 && same_files("t.gguf", "t3.gguf"));
    /* re-quantization: every quantized or decoded tensor says what it cost */
    CHECK(run("convert '%s' q.gguf --scheme 'q4f,block=32:f16'", types_gguf) == 0);
    CHECK(strstr(out, "  requantized t.q4_k: u4,block=32:u6,min=u6,super=256:f16,store=ggml -> q4f,block=32:f16: SQNR ") != NULL);
    CHECK(strstr(out, "  requantized t.q8_0: q8f,block=32:f16,store=native -> q4f,block=32:f16: SQNR ") != NULL);
    CHECK(strstr(out, "requantized t.f32") == NULL && strstr(out, "requantized t.q4_0") == NULL);
    CHECK(run("inspect q.gguf") == 0 && row("t.q4_k", "Q4_0 q4f,block=32:f16 64x256 9216"));
    /* --scheme none --dtype: every quantized or decoded tensor, and the float ones cast */
    CHECK(run("convert '%s' b.gguf --scheme none --dtype bf16", types_gguf) == 0 &&
          strstr(out, "16 dequantized, 2 cast, 1 copied") != NULL);
    CHECK(run("inspect b.gguf") == 0 && row("t.q4_k", "BF16 BF16 64x256 32768") && row("t.f32", "BF16 BF16 64x256 32768") &&
          row("t.f16", "BF16 BF16 64x256 32768") && row("t.bf16", "BF16 BF16 64x256 32768"));
    /* eval reads GGUF tensors (a quantized one's reference is its dequantization) */
    CHECK(run("eval '%s' --scheme q8s,block=32:f16 --scheme mxfp4", types_gguf) == 0);
    CHECK(strstr(out, "t.q4_k [64x256] u4,block=32:u6,min=u6,super=256:f16,store=ggml\n") != NULL &&
          strstr(out, "total, per scheme") != NULL);
}

/* files qtk makes: synth -> gguf -> bpk -> gguf, schemes GGUF holds or not */
static void convert_synth(void) {
    CHECK(run("synth s.gguf --layers 1 --hidden 64 --vocab 256 --dtype f32") == 0);
    CHECK(run("inspect s.gguf") == 0 && strstr(out, "general.architecture = qtk") != NULL);
    CHECK(run("convert s.gguf s.bpk") == 0 && run("convert s.bpk s2.gguf") == 0 && same_files("s.gguf", "s2.gguf"));
    CHECK(run("convert s.gguf sq.gguf --scheme 'q8s,block=32:f16' --verbose") == 0);
    CHECK(strstr(out, "quantize   model.layers.0.mlp.up_proj.weight [1536x64] F32 -> q8s,block=32:f16  (--scheme)") != NULL);
    CHECK(run("inspect sq.gguf") == 0 && strstr(out, "general.quantization_version = u32:2") != NULL);
    CHECK(row("model.layers.0.mlp.up_proj.weight", "Q8_0 q8f,block=32:f16,store=native"));
    CHECK(run("convert sq.gguf sq.safetensors") == 0 && run("convert sq.safetensors sq2.gguf") == 0 && same_files("sq.gguf", "sq2.gguf"));
    /* a scheme GGUF cannot hold: refused when asked for, dequantized when only kept */
    CHECK(run("convert s.gguf n.gguf --scheme nf4") == 1 && strstr(err, "cannot be written to gguf in the scheme asked for") &&
          strstr(err, "no ggml type holds q4f,table=nf4,block=64:f32"));
    CHECK(!file_exists(tmp_path("n.gguf")));
    CHECK(run("convert s.gguf n.bpk --scheme nf4") == 0);
    CHECK(run("convert n.bpk n.gguf") == 0 && strstr(out, "gguf cannot hold its scheme: written as F32") != NULL);
    CHECK(run("inspect n.gguf") == 0 && row("model.layers.0.mlp.up_proj.weight", "F32 F32"));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
}

/* ggml's lattice types made by qtk (docs/lattice.md section 8): IQ3_XXS without an importance
 * matrix; IQ2_XXS refused without one, naming the need */
static void convert_lattice(void) {
    CHECK(run("synth l.gguf --layers 1 --hidden 256 --ffn 512 --vocab 256 --dtype f32") == 0);
    CHECK(run("convert l.gguf li.gguf --scheme iq3_xxs --calibration mse") == 0 &&
          strstr(out, "9 quantized, 0 dequantized, 6 copied") != NULL);
    CHECK(run("inspect li.gguf") == 0 && row("model.layers.0.mlp.down_proj.weight", "IQ3_XXS iq3_xxs 256x512 50176"));
    CHECK(run("convert li.gguf li2.gguf") == 0 && same_files("li.gguf", "li2.gguf"));
    CHECK(run("convert l.gguf lx.gguf --scheme iq2_xxs --calibration mse") == 1 &&
          strstr(err, "quantizing to iq2_xxs (ggml IQ2_XXS) needs an importance matrix") != NULL);
    CHECK(!file_exists(tmp_path("lx.gguf")));
}

/* --preset: llama.cpp's Q4_K_M mixture on Hugging Face names; each choice says its rule */
static void convert_preset(void) {
    CHECK(run("synth h.safetensors --layers 8 --hidden 256 --ffn 512 --kv 256 --vocab 512 --dtype f32") == 0);
    CHECK(run("convert h.safetensors h.gguf --preset q4_k_m --verbose") == 0);
    /* 8 layers: more bits where i < 1, i >= 7 or (i - 1) % 3 == 2 */
    CHECK_MSG(strstr(out, "model.layers.3.self_attn.v_proj.weight [256x256] F32 -> ") &&
                  strstr(out, "(q4_k_m: attention v 3 of 8: Q6_K)") && strstr(out, "(q4_k_m: attention v 2 of 8: Q4_K)") &&
                  strstr(out, "(q4_k_m: ffn_down of layer 7 of 8: Q6_K)") && strstr(out, "(q4_k_m: output tensor: Q6_K)") &&
                  strstr(out, "(q4_k_m: not quantized by llama.cpp)"),
              "%s", out);
    CHECK(run("inspect h.gguf") == 0 && row("model.layers.3.self_attn.v_proj.weight", "Q6_K") &&
          row("model.layers.2.self_attn.v_proj.weight", "Q4_K") && row("lm_head.weight", "Q6_K") &&
          row("model.norm.weight", "F32"));
    CHECK(run("convert h.safetensors x.gguf --preset q4_k_m --scheme q8s") != 0 && strstr(err, "give one"));
    CHECK(run("convert h.safetensors x.gguf --preset q4_k_x") != 0 && strstr(err, "q4_k_x") &&
          strstr(err, "q3_k_m q4_k_s q4_k_m"));
    CHECK(!file_exists(tmp_path("x.gguf")));
}

static void write_file(const char *name, const uint8_t *b, size_t n) {
    FILE *f = fopen(tmp_path(name), "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void malformed(void) {
    CHECK(run("synth m.gguf --layers 1 --hidden 64 --vocab 256") == 0);
    size_t n = 0;
    uint8_t *b = slurp(tmp_path("m.gguf"), &n);
    if (!b) return;
    write_file("cut.gguf", b, n - 1000);
    CHECK(run("inspect cut.gguf") == 1 && strstr(err, "gguf 'cut.gguf': truncated") && strstr(err, "[QTK_E_FORMAT]"));
    CHECK(run("convert cut.gguf x.bpk") == 1 && strstr(err, "truncated"));
    CHECK(run("eval cut.gguf --scheme nvfp4") == 1);
    qtk__st32(b + 4, 0x03000000u);
    write_file("be.gguf", b, n);
    CHECK(run("convert be.gguf x.safetensors") == 1 && strstr(err, "a big-endian GGUF file (version 3)"));
    qtk__st32(b + 4, 1);
    write_file("v1.gguf", b, n);
    CHECK(run("inspect v1.gguf") == 1 && strstr(err, "GGUF version 1 (2023, 32-bit counts) is no longer supported"));
    CHECK(!file_exists(tmp_path("x.bpk")) && !file_exists(tmp_path("x.safetensors")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
    free(b);
}

int main(int argc, char **argv) {
    bin = getenv("QTK_BIN");
    if (!bin) {
        printf("cli_gguf: QTK_BIN is not set: skipped\n");
        return 77;
    }
    static char tp[1024];
    const char *p = shared_file("ggml/types.gguf");
    if (p) {
        snprintf(tp, sizeof tp, "%s", p);
        types_gguf = tp;
    } else {
        printf("cli_gguf: $QTK_SHARED_DIR/data/ggml is missing: ggml's files are not tested\n");
    }
    tmp_dir_make();
    static const test_case cases[] = {T(inspect_ggml), T(convert_ggml), T(convert_synth), T(convert_lattice), T(convert_preset), T(malformed)};
    int rc = test_run("cli_gguf", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
