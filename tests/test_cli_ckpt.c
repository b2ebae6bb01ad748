/* test_cli_ckpt.c — qtk inspect / convert / eval / synth / demo as a user runs them: outputs
 * checked, selection rules applied, round trips byte for byte, every error a non-zero exit
 * with a message and no output file (disk full included, simulated with a file size limit).
 * The binary comes from $QTK_BIN. */
#include "ckpt_util.h"

#include <stdarg.h>
#include <sys/wait.h>

static const char *bin;
static char out[1 << 16], err[1 << 14];

/* `qtk ARGS` in the temporary directory; stdout and stderr land in out and err */
#define run(...) cli_run(bin, out, sizeof out, err, sizeof err, __VA_ARGS__)

/* The line of out that contains `key` (a static copy; "" if none). */
static const char *line_with(const char *key) {
    static char line[1024];
    const char *p = strstr(out, key);
    line[0] = '\0';
    if (!p) return line;
    while (p > out && p[-1] != '\n') p--;
    size_t n = strcspn(p, "\n");
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

/* A listing line: name, then (at least) the given columns in order, separated by spaces. */
static bool row(const char *name, const char *cols) {
    const char *l = line_with(name);
    if (strncmp(l, name, strlen(name)) != 0) return false;
    l += strlen(name);
    char want[512];
    snprintf(want, sizeof want, "%s", cols);
    for (char *tok = strtok(want, " "); tok; tok = strtok(NULL, " ")) {
        while (*l == ' ') l++;
        if (strncmp(l, tok, strlen(tok)) != 0) return false;
        l += strlen(tok);
        if (*l != ' ' && *l != '\0') return false;
    }
    return true;
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

static void help(void) {
    const char *cmds[] = {"inspect", "convert", "eval", "synth", "demo"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        CHECK_MSG(run("%s --help", cmds[i]) == 0, "%s --help", cmds[i]);
        CHECK(strncmp(out, "usage: qtk ", 11) == 0 && strlen(out) > 200);
    }
    CHECK(run("--help") == 0 && strstr(out, "convert") && strstr(out, "inspect") && strstr(out, "eval"));
}

static void synth_and_inspect(void) {
    CHECK(run("synth s.safetensors --layers 1 --hidden 32 --ffn 64 --kv 16 --vocab 128") == 0);
    CHECK_MSG(err[0] == '\0', "stderr: %s", err);
    CHECK(run("synth s.safetensors --layers 1") == 1 && strstr(err, "exists; it is replaced only with"));
    CHECK(run("synth s.txt") == 2 && strstr(err, "name it .bpk, .safetensors or .gguf"));
    CHECK(run("inspect s.safetensors") == 0);
    CHECK_MSG(strstr(out, "format    safetensors (JSON header") != NULL, "%s", out);
    /* embed + 12 per layer + norm + head */
    /* embed 4096 + lm_head 4096 + a layer 9344 (norms 64, q 1056, k 528, v 528, o 1024, mlp 6144) + norm 32 */
    CHECK_MSG(strstr(out, "15 tensors, 17568 elements: 0 quantized (0 bytes), 15 unquantized (35136 bytes)") != NULL, "%s", out);
    CHECK_MSG(row("model.layers.0.mlp.down_proj.weight", "BF16 32x64 4096 16.000 24288"), "%s", line_with("down_proj"));
    CHECK(row("model.embed_tokens.weight", "BF16 128x32 8192 16.000 1504"));
    CHECK(strstr(out, "metadata  producer = qtk synth") != NULL);
    /* the same bytes every time */
    CHECK(run("synth s2.safetensors --layers 1 --hidden 32 --ffn 64 --kv 16 --vocab 128") == 0);
    CHECK(same_files("s.safetensors", "s2.safetensors"));
}

static void inspect_real(void) {
    const char *p = shared_file("burn/model.bpk");
    if (!p) return;
    CHECK(run("inspect '%s'", p) == 0);
    CHECK_MSG(strstr(out, "format    burnpack (version 1, metadata 1398 bytes of CBOR, data at byte 1536)") != NULL, "%s", out);
    CHECK(strstr(out, "size      1044776 bytes (1020.3 KiB)") != NULL);
    CHECK(row("conv1.conv.weight", "F32 64x1x3x3 2304 32.000 1536"));
    CHECK(row("conv2.conv.weight", "F32 64x64x3x3 147456 32.000 5120"));
    CHECK(row("fc3.bias", "F32 10 40 32.000 1044736"));
    CHECK(strstr(out, "18 tensors, 260810 elements: 0 quantized (0 bytes), 18 unquantized (1043240 bytes)") != NULL);
    CHECK(run("inspect --json '%s'", p) == 0);
    CHECK(strstr(out, "{\"name\": \"conv1.conv.bias\", \"quantized\": false, \"dtype\": \"F32\", \"shape\": [64], "
                      "\"numel\": 64, \"bytes\": 256, \"offset\": 3840, \"param_id\": 9505838338724798577}") != NULL);
}

static void convert_rules(void) {
    CHECK(run("convert s.safetensors q.bpk --scheme nvfp4 --rule 'down_proj=q8s,block=*:f32' --rule 'q_proj.bias$=q8f' "
              "--skip k_proj --verbose") == 0);
    CHECK_MSG(err[0] == '\0', "no progress bar when stderr is not a terminal: %s", err);
    CHECK(strstr(out, "quantize   model.layers.0.mlp.down_proj.weight [32x64] BF16 -> q8s,block=*:f32  (rule 1") != NULL);
    CHECK(strstr(out, "copy       model.layers.0.self_attn.k_proj.weight [16x32] BF16  (--skip)") != NULL);
    CHECK(strstr(out, "copy       model.layers.0.input_layernorm.weight [32] BF16  (rank 1)") != NULL);
    CHECK(strstr(out, "quantize   model.layers.0.self_attn.q_proj.bias [32] BF16 -> q8f  (rule 2") != NULL);
    CHECK(strstr(out, "copy       model.layers.0.self_attn.v_proj.weight [16x32] BF16  (512 elements < 1024)") != NULL);
    CHECK(strstr(out, "wrote q.bpk (burnpack): 15 tensors: 8 quantized, 0 dequantized, 7 copied") != NULL);
    CHECK(run("inspect --json q.bpk") == 0);
    /* '*' is stored resolved in burnpack: 64 */
    CHECK(strstr(out, "\"model.layers.0.mlp.down_proj.weight\", \"quantized\": true, \"dtype\": \"q8s,block=64:f32\"") != NULL);
    CHECK(strstr(out, "\"model.layers.0.mlp.up_proj.weight\", \"quantized\": true, "
                      "\"dtype\": \"e2m1,block=16:ue4m3,tensor=f32,store=packed:0\"") != NULL);
    CHECK(strstr(out, "\"model.layers.0.self_attn.k_proj.weight\", \"quantized\": false, \"dtype\": \"BF16\"") != NULL);
    /* quantized tensors cross formats bit for bit */
    CHECK(run("convert q.bpk q.safetensors") == 0);
    CHECK(run("convert q.safetensors q2.bpk") == 0);
    CHECK(same_files("q.bpk", "q2.bpk"));
    CHECK(run("convert q.bpk q2.bpk") == 1 && strstr(err, "exists; it is replaced only with"));
    CHECK(run("convert q.bpk q2.bpk --force") == 0);
    /* re-quantizing: a tensor already in the scheme is copied */
    CHECK(run("convert q.bpk r.bpk --scheme nvfp4 --verbose") == 0);
    CHECK(strstr(out, "(already in the scheme)") != NULL);
    CHECK(strstr(out, "quantize   model.layers.0.mlp.down_proj.weight [32x64] q8s,block=64:f32 -> "
                      "e2m1,block=16:ue4m3,tensor=f32,store=packed:0") != NULL);
    /* dequantizing */
    CHECK(run("convert q.safetensors f.safetensors --scheme none --dtype bf16") == 0);
    CHECK(strstr(out, "8 dequantized, 7 copied") != NULL);
    CHECK(run("inspect f.safetensors") == 0 && strstr(out, "0 quantized (0 bytes), 15 unquantized") != NULL);
    CHECK(row("model.layers.0.mlp.down_proj.weight", "BF16 32x64 4096 16.000"));
    CHECK(strstr(line_with("v_proj.weight"), "512 elements < 1024") == NULL); /* (inspect has no reasons) */
}

static void convert_errors(void) {
    CHECK(run("convert s.safetensors x.bpk --dtype f64") == 2 && strstr(err, "--dtype 'f64' is not f32, f16 or bf16"));
    /* --dtype casts the float tensors that stay float, but not what --skip names */
    CHECK(run("convert s.safetensors c16.safetensors --dtype f16 --skip layernorm --verbose") == 0);
    CHECK_MSG(strstr(out, "cast       model.layers.0.mlp.down_proj.weight [32x64] BF16 -> F16  (no --scheme)") != NULL, "%s", out);
    CHECK(strstr(out, "copy       model.layers.0.input_layernorm.weight [32] BF16  (--skip)") != NULL);
    CHECK(strstr(out, "0 dequantized, 13 cast, 2 copied") != NULL);
    CHECK(run("inspect c16.safetensors") == 0);
    CHECK(row("model.layers.0.mlp.down_proj.weight", "F16 32x64 4096 16.000"));
    CHECK(row("model.layers.0.input_layernorm.weight", "BF16 32"));
    CHECK(run("convert s.safetensors x.bpk --scheme q9f") == 2 && strstr(err, "'q9f'"));
    CHECK(run("convert s.safetensors x.bpk --only '('") == 2 && strstr(err, "not a POSIX extended regular expression"));
    CHECK(run("convert s.safetensors x.bpk --rule 'no-equals'") == 2 && strstr(err, "not REGEX=SPEC"));
    CHECK(run("convert s.safetensors x.txt") == 2 && strstr(err, "name it .bpk, .safetensors or .gguf"));
    CHECK(run("convert s.safetensors") == 2);
    /* a scheme the tensors cannot take; a block Burn cannot hold */
    CHECK(run("convert s.safetensors x.bpk --scheme 'q4f,block=2x2x2:f16'") == 1 && strstr(err, "has rank 2"));
    CHECK(run("convert s.safetensors x.bpk --scheme 'q8s,block=300:f32'") == 1 &&
          strstr(err, "has a block dim of 300; Burn's format holds block dims of at most 255"));
    CHECK(run("convert s.safetensors x.safetensors --scheme 'q8s,block=300:f32'") == 0);
    CHECK(!file_exists(tmp_path("x.bpk")));
    /* malformed inputs */
    uint8_t junk[64] = "NRUB\x01\x00\xff\x00\x00\x00garbage";
    FILE *f = fopen(tmp_path("bad.bpk"), "wb");
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    CHECK(run("convert bad.bpk y.safetensors") == 1 && strstr(err, "burnpack 'bad.bpk': truncated") && strstr(err, "[QTK_E_FORMAT]"));
    CHECK(run("inspect bad.bpk") == 1 && strstr(err, "truncated"));
    CHECK(run("eval bad.bpk --scheme nvfp4") == 1);
    CHECK(run("inspect missing.bpk") == 1 && strstr(err, "cannot open 'missing.bpk'"));
    f = fopen(tmp_path("bad.txt"), "wb");
    fputs("hello", f);
    fclose(f);
    CHECK(run("inspect bad.txt") == 1 && strstr(err, "is not a checkpoint qtk reads"));
    CHECK(!file_exists(tmp_path("y.safetensors")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
}

/* Disk full: a file size limit makes writes fail (EFBIG) in the middle of the output. */
static void disk_full(void) {
    CHECK(run("synth big.safetensors --layers 2 --hidden 128 --vocab 512 --dtype f32") == 0);
    char dirbuf[512], cmd[2048];
    snprintf(dirbuf, sizeof dirbuf, "%s", tmp_path(""));
    snprintf(cmd, sizeof cmd, "cd '%s' && sh -c \"trap '' XFSZ; ulimit -f 64; exec %s convert big.safetensors full.bpk\" "
             ">stdout.txt 2>stderr.txt", dirbuf, bin);
    int rc = system(cmd);
    size_t n = 0;
    uint8_t *e = slurp(tmp_path("stderr.txt"), &n);
    snprintf(err, sizeof err, "%.*s", (int)n, e ? (const char *)e : "");
    free(e);
    CHECK_MSG(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "exit %d", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    CHECK_MSG(strstr(err, "cannot write") && strstr(err, "full.bpk") && strstr(err, "File too large"), "stderr: %s", err);
    CHECK(!file_exists(tmp_path("full.bpk")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
}

static void eval_cmd(void) {
    CHECK(run("eval s.safetensors --scheme nvfp4 --scheme 'q8s,block=*:f32' --scheme 'q4f,block=4x4x4:f16'") == 0);
    /* embed, q, o, gate, up, down, head: rank 2 and >= 1024 elements */
    CHECK(strstr(out, "qtk eval: s.safetensors: 7 tensors, 16384 elements, 3 schemes") != NULL);
    CHECK(strstr(out, "model.layers.0.self_attn.q_proj.weight [32x32] BF16\n  nvfp4") != NULL);
    CHECK(strstr(out, "n/a: block 4x4x4 has 3 dims but the tensor 32x32 has rank 2") != NULL);
    CHECK(strstr(out, "(7 tensors left out: the scheme does not fit them)") != NULL);
    CHECK(run("eval s.safetensors --scheme nvfp4 --json --only 'up_proj|down_proj' --plot c.svg") == 0);
    CHECK(strstr(out, "\"tensors\": [\n  {\"name\": \"model.layers.0.mlp.up_proj.weight\", \"stored\": \"BF16\", \"shape\": [64, 32]") != NULL);
    CHECK(strstr(out, "\"totals\": [\n  {\"scheme\": \"nvfp4\", \"calibration\": \"minmax\", \"ok\": true, \"failed_tensors\": 0, \"numel\": 4096, \"bytes\": 2312, "
                      "\"bits_per_element\": 4.515625") != NULL);
    size_t n;
    uint8_t *svg = slurp(tmp_path("c.svg"), &n);
    CHECK(svg && n > 500 && memcmp(svg, "<?xml", 5) == 0 && strstr((char *)svg, "model.layers.0.mlp.up_proj.weight"));
    free(svg);
    CHECK(run("eval s.safetensors --scheme nvfp4 --plot c.svg") == 1 && strstr(err, "exists"));
    CHECK(run("eval s.safetensors") == 2 && strstr(err, "give at least one --scheme"));
    /* the numbers: eval's nvfp4 row matches what convert writes, dequantized */
    CHECK(run("eval s.safetensors --scheme nvfp4 --summary") == 0);
    /* 16384 elements: values 8192 bytes, ue4m3 scales 1024, a global per tensor (7 x 4) */
    CHECK_MSG(row("  nvfp4", "4.514"), "%s", line_with("nvfp4"));
}

/* A legacy llama.cpp .dat importance matrix: entries name -> cols weights (sums with ncall 2). */
static void write_dat(const char *path, const char *const *names, int n, int cols) {
    FILE *f = fopen(path, "wb");
    int32_t v = n;
    fwrite(&v, 4, 1, f);
    for (int e = 0; e < n; e++) {
        v = (int32_t)strlen(names[e]);
        fwrite(&v, 4, 1, f);
        fwrite(names[e], 1, strlen(names[e]), f);
        v = 2;
        fwrite(&v, 4, 1, f);
        v = cols;
        fwrite(&v, 4, 1, f);
        for (int k = 0; k < cols; k++) {
            float w = (float)(1 + (k * 7 + e) % 11) * (k % 5 == 0 ? 40.0f : 1.0f);
            fwrite(&w, 4, 1, f);
        }
    }
    fclose(f);
}

/* --imatrix: eval's weighted column and JSON, convert's note for tensors without an entry,
 * the refusals. */
static void imatrix_cmds(void) {
    static const char *const names[2] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight"};
    write_dat(tmp_path("m.dat"), names, 2, 32);
    CHECK(run("eval s.safetensors --scheme 'q4f,block=8:f16' --calibration minmax --calibration mse --imatrix m.dat --summary") == 0);
    CHECK_MSG(strstr(out, "wSQNR dB") && strstr(out, "q4f,block=8:f16 [mse]"), "%s", out);
    CHECK_MSG(strstr(err, "'model.embed_tokens.weight': no importance-matrix entry (unweighted)"), "%s", err);
    CHECK(!strstr(err, "q_proj") && !strstr(err, "up_proj"));
    CHECK(run("eval s.safetensors --scheme 'q4f,block=8:f16' --calibration mse --imatrix m.dat --json --only q_proj") == 0);
    CHECK_MSG(strstr(out, "\"weighted\": true") && strstr(out, "\"weighted_sqnr_db\": "), "%s", out);
    CHECK(run("convert s.safetensors w.bpk --scheme 'q4f,block=8:f16' --calibration mse --imatrix m.dat") == 0);
    CHECK_MSG(strstr(err, "no importance-matrix entry: quantized unweighted") && strstr(err, "model.embed_tokens.weight"), "%s", err);
    CHECK(!strstr(err, "q_proj"));
    CHECK(run("convert s.safetensors w2.bpk --scheme 'q4f,block=8:f16' --imatrix m.dat") == 2 && strstr(err, "give --calibration mse"));
    CHECK(run("convert s.safetensors w2.bpk --scheme 'q4f,block=8:f16' --calibration mse --imatrix missing.dat") == 1 &&
          strstr(err, "missing.dat"));
    CHECK(!file_exists(tmp_path("w2.bpk")));
    /* an entry that does not fit its tensor (32 columns named for the 64-column down_proj) */
    static const char *const bad[1] = {"blk.0.ffn_down.weight"};
    write_dat(tmp_path("bad.dat"), bad, 1, 32);
    CHECK(run("convert s.safetensors w2.bpk --scheme 'q4f,block=8:f16' --calibration mse --imatrix bad.dat") == 1);
    CHECK_MSG(strstr(err, "has 32 columns; tensor 'model.layers.0.mlp.down_proj.weight' has 64"), "%s", err);
    CHECK(!file_exists(tmp_path("w2.bpk")));
}

static void demo(void) {
    CHECK(run("demo --dir d --layers 1 --hidden 32") == 0);
    CHECK_MSG(strstr(out, "model-nvfp4.bpk and model-nvfp4-again.bpk: identical") != NULL, "%s", out);
    CHECK(strstr(out, "== 5. what each scheme costs and loses on the original") != NULL);
    CHECK(file_exists(tmp_path("d/eval.svg")));
}

int main(int argc, char **argv) {
    bin = getenv("QTK_BIN");
    if (!bin) {
        printf("cli_ckpt: QTK_BIN is not set: skipped\n");
        return 77;
    }
    tmp_dir_make();
    static const test_case cases[] = {T(help), T(synth_and_inspect), T(inspect_real), T(convert_rules),
                                      T(convert_errors), T(disk_full), T(eval_cmd), T(imatrix_cmds), T(demo)};
    int rc = test_run("cli_ckpt", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
