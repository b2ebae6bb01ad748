/* test_cli.c — the qtk command line (SPEC §6 contract): quantize/dequantize produce the
 * library's bytes and values; every error exits non-zero with a message and leaves no
 * output file; every command has --help. The binary comes from $QTK_BIN. */
#include "ckpt_util.h"
#include "test.h"

#include "io/fileio.h"
#include "npy.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *bin;
static char dir[256];

static int run(const char *args, char *err, size_t errcap) { return cli_run(bin, NULL, 0, err, errcap, "%s", args); }

static int exists(const char *name) {
    char p[400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

static void write_npy(const char *name, const float *v, const size_t *shape, int rank) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK_OK(cli_npy_write(p, v, QTK_DTYPE_F32, shape, rank, 1));
}

static uint8_t *read_file(const char *name, size_t *n) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    uint8_t *b = NULL;
    if (qtk__io_read_file(p, &b, n) != QTK_OK) return NULL;
    return b;
}

/* a file's text, NUL-terminated (read_file's bytes are not), or NULL */
static char *read_text(const char *name) {
    size_t n = 0;
    uint8_t *b = read_file(name, &n);
    char *t = b ? malloc(n + 1) : NULL;
    if (t) memcpy(t, b, n), t[n] = '\0';
    free(b);
    return t;
}

static void setup(void) {
    bin = getenv("QTK_BIN");
    snprintf(dir, sizeof dir, "%s", tmp_dir_make());
}

static void quantize_dequantize_roundtrip(void) {
    const char *specs[] = {"nvfp4", "mxfp4", "mxfp8", "nf4", "q4f,block=32:f16", "q2s,block=2x8:bf16,store=u32:1",
                           "e5m2,block=*:f32,store=native"};
    size_t shape[2] = {6, 64};
    float x[6 * 64];
    uint64_t seed = 1;
    for (int i = 0; i < 6 * 64; i++) x[i] = trand_normal(&seed);
    write_npy("in.npy", x, shape, 2);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        char args[512], err[2048];
        unlink("out.bin");
        snprintf(args, sizeof args, "quantize --force --scheme '%s' in.npy out.bin", specs[k]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(specs[k], &s));
        qtk_layout L;
        CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
        uint8_t *want = malloc(L.total_bytes);
        CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, want, L.total_bytes));
        size_t n = 0;
        uint8_t *got = read_file("out.bin", &n);
        CHECK_MSG(got && n == L.total_bytes && memcmp(got, want, n) == 0, "%s: OUT.bin differs from the library's bytes",
                  specs[k]);
        snprintf(args, sizeof args, "dequantize --force --scheme '%s' --shape 6x64 out.bin y.npy", specs[k]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        cli_npy y;
        char p[400];
        snprintf(p, sizeof p, "%s/y.npy", dir);
        CHECK_OK(cli_npy_read(p, &y));
        float ref[6 * 64];
        CHECK_OK(qtk_dequantize_bytes(want, L.total_bytes, shape, 2, &s, QTK_DTYPE_F32, ref, 6 * 64));
        CHECK(y.rank == 2 && y.shape[0] == 6 && y.shape[1] == 64);
        CHECK(y.data && memcmp(y.data, ref, sizeof ref) == 0);
        cli_npy_free(&y);
        /* f16 and bf16 outputs */
        snprintf(args, sizeof args, "dequantize --force --scheme '%s' --shape 6x64 --dtype bf16 out.bin yb.npy", specs[k]);
        CHECK(run(args, err, sizeof err) == 0);
        size_t bn;
        uint8_t *bb = read_file("yb.npy", &bn);
        CHECK(bb && strstr((char *)bb + 10, "'<u2'") != NULL);
        if (bb) {
            size_t off = bn - 6 * 64 * 2;
            uint16_t h0 = (uint16_t)(bb[off] | bb[off + 1] << 8);
            CHECK_EQ_U(h0, qtk_fmt_encode(QTK_DTYPE_BF16, ref[0]));
        }
        free(bb);
        free(got);
        free(want);
    }
}

static void given_scales_and_global(void) {
    float x[8] = {1, 2, 3, 4, -10, 20, -30, 40};
    size_t shape[1] = {8}, gshape[1] = {2};
    float sc[2] = {0.5f, 2.0f};
    write_npy("x8.npy", x, shape, 1);
    write_npy("s2.npy", sc, gshape, 1);
    char err[2048];
    CHECK(run("quantize --scheme q8s,block=4:f16,store=native --scales s2.npy x8.npy o.bin", err, sizeof err) == 0);
    size_t n;
    uint8_t *b = read_file("o.bin", &n);
    CHECK(b && n == 12);
    if (b) {
        CHECK_EQ_U(b[0], 2);   /* 1 / 0.5 */
        CHECK_EQ_U(b[7], 20);  /* 40 / 2 */
        CHECK_EQ_U(b[8], 0x00);
        CHECK_EQ_U(b[9], 0x38); /* f16 0.5 */
    }
    free(b);
    CHECK(run("quantize --scheme q8s,block=4:ue4m3,tensor=f32,store=native --scales s2.npy --global 0.25 x8.npy o2.bin",
              err, sizeof err) == 0);
    b = read_file("o2.bin", &n);
    CHECK(b && n == 14);
    if (b) {
        CHECK_EQ_U(b[0], 8); /* 1 / (0.25 * 0.5) */
        CHECK_EQ_U(b[13], 0x3e); /* f32 0.25 = 0x3e800000 */
    }
    free(b);
    unlink("o3.bin");
    CHECK(run("quantize --scheme q8s,block=4:ue4m3,tensor=f32 --scales s2.npy x8.npy o3.bin", err, sizeof err) == 1);
    CHECK(strstr(err, "need a global scale too") != NULL);
    CHECK(!exists("o3.bin"));
    CHECK(run("quantize --scheme q8s --global 2 x8.npy o3.bin", err, sizeof err) == 2);
    CHECK(strstr(err, "--global goes with --scales") != NULL);
    /* grid-shaped scales must match the grid */
    float sc6[6] = {1, 1, 1, 1, 1, 1};
    size_t g23[2] = {2, 3};
    write_npy("s23.npy", sc6, g23, 2);
    float x24[24] = {0};
    size_t s24[2] = {4, 6};
    write_npy("x24.npy", x24, s24, 2);
    CHECK(run("quantize --scheme q8s,block=2x2:f32 --scales s23.npy x24.npy o4.bin", err, sizeof err) == 0);
    CHECK(run("quantize --scheme q8s,block=4x1:f32 --scales s23.npy x24.npy o5.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "--scales has shape 2x3 but the block grid is 1x6") != NULL, "stderr: %s", err);
    CHECK(!exists("o5.bin"));
}

/* --calibration mse and --weights: the library's bytes; table=fit reads back through
 * dequantize (the table is in OUT.bin) */
static void calibration_mse_and_weights(void) {
    size_t shape[2] = {6, 64}, wshape[1] = {64}, bshape[2] = {3, 4};
    float x[6 * 64], w[64], bad[12] = {0};
    uint64_t seed = 3;
    for (int i = 0; i < 6 * 64; i++) x[i] = trand_normal(&seed);
    for (int j = 0; j < 64; j++) w[j] = (float)(j % 5);
    write_npy("xm.npy", x, shape, 2);
    write_npy("wm.npy", w, wshape, 1);
    write_npy("wbad.npy", bad, bshape, 2);
    const char *specs[] = {"q4f,block=32:f16", "nvfp4", "q4f,table=fit,block=32:f16"};
    for (size_t k = 0; k < 3; k++) {
        for (int weighted = 0; weighted < 2; weighted++) {
            char args[512], err[2048];
            snprintf(args, sizeof args, "quantize --force --scheme '%s' --calibration mse %s xm.npy om.bin", specs[k],
                     weighted ? "--weights wm.npy" : "");
            CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
            qtk_scheme s;
            CHECK_OK(qtk_scheme_parse(specs[k], &s));
            qtk_layout L;
            CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
            uint8_t *want = malloc(L.total_bytes);
            qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = weighted ? w : NULL,
                                      .n_weights = weighted ? 64u : 0u};
            CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, want, L.total_bytes));
            size_t n = 0;
            uint8_t *got = read_file("om.bin", &n);
            CHECK_MSG(got && n == L.total_bytes && memcmp(got, want, n) == 0, "%s: OUT.bin differs from the library's",
                      args);
            snprintf(args, sizeof args, "dequantize --force --scheme '%s' --shape 6x64 om.bin ym.npy", specs[k]);
            CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
            free(got);
            free(want);
        }
    }
    char err[2048];
    CHECK(run("quantize --scheme q4f,block=32:f16 --calibration best xm.npy om2.bin", err, sizeof err) == 2);
    CHECK(strstr(err, "'best' is not minmax, absmean or mse") != NULL);
    CHECK(run("quantize --scheme q4f,block=32:f16 --calibration mse --weights wbad.npy xm.npy om2.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "--weights has shape 3x4 but the input is 6x64") != NULL, "stderr: %s", err);
    CHECK(run("quantize --scheme q4f,block=32:f16 --weights wm.npy xm.npy om2.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "used by calibration mse and by table=fit only") != NULL, "stderr: %s", err);
    CHECK(!exists("om2.bin"));
    /* --imatrix: a legacy .dat with two entries of 64 columns; the entry named (by its
     * Hugging Face name) gives the bytes of quantize with its weights */
    char ip[400];
    snprintf(ip, sizeof ip, "%s/im.dat", dir);
    FILE *f = fopen(ip, "wb");
    int32_t v = 2;
    fwrite(&v, 4, 1, f);
    static const char *const en[2] = {"blk.0.attn_q.weight", "output.weight"};
    float iw[2][64];
    for (int e = 0; e < 2; e++) {
        v = (int32_t)strlen(en[e]);
        fwrite(&v, 4, 1, f);
        fwrite(en[e], 1, strlen(en[e]), f);
        v = 1; /* ncall: the weights are the sums */
        fwrite(&v, 4, 1, f);
        v = 64;
        fwrite(&v, 4, 1, f);
        for (int j = 0; j < 64; j++) iw[e][j] = (float)((j * 5 + e) % 9) + (j == 3 ? 50.0f : 0.0f);
        fwrite(iw[e], 4, 64, f);
    }
    fclose(f);
    CHECK(run("quantize --force --scheme q4f,block=32:f16 --calibration mse --imatrix im.dat "
              "--name model.layers.0.self_attn.q_proj.weight xm.npy oi.bin", err, sizeof err) == 0);
    {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
        uint8_t want[6 * 32 + 12 * 2], plain[sizeof want];
        qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = iw[0], .n_weights = 64};
        CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, want, sizeof want));
        o.weights = NULL, o.n_weights = 0;
        CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, plain, sizeof plain));
        size_t n = 0;
        uint8_t *got = read_file("oi.bin", &n);
        CHECK_MSG(got && n == sizeof want && memcmp(got, want, n) == 0, "--imatrix: OUT.bin is not quantize's with the weights");
        CHECK(memcmp(want, plain, sizeof want) != 0); /* the weights changed something */
        free(got);
    }
    CHECK(run("quantize --scheme q4f,block=32:f16 --calibration mse --imatrix im.dat xm.npy oi2.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "has 2 entries: say which with --name TENSOR") != NULL, "stderr: %s", err);
    CHECK(run("quantize --scheme q4f,block=32:f16 --calibration mse --imatrix im.dat --name nope xm.npy oi2.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "no entry for 'nope'") != NULL, "stderr: %s", err);
    CHECK(run("quantize --scheme q4f,block=32:f16 --calibration mse --imatrix im.dat --weights wm.npy xm.npy oi2.bin", err, sizeof err) == 2);
    CHECK(run("quantize --scheme q4f,block=32:f16 --name x xm.npy oi2.bin", err, sizeof err) == 2);
    CHECK(!exists("oi2.bin"));
}

static void errors_leave_no_output(void) {
    char err[2048];
    float x[4] = {1, NAN, 3, 4};
    size_t shape[1] = {4};
    write_npy("nan.npy", x, shape, 1);
    CHECK(run("quantize --scheme q8f nan.npy bad.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "index 1 (coordinates [1]) is NaN") != NULL, "stderr: %s", err);
    CHECK(!exists("bad.bin"));
    CHECK(run("quantize --scheme q9f nan.npy bad.bin", err, sizeof err) == 1);
    CHECK(strstr(err, "'q9f' is not a value") != NULL);
    CHECK(!exists("bad.bin"));
    CHECK(run("quantize --scheme q8f missing.npy bad.bin", err, sizeof err) == 1);
    CHECK(strstr(err, "cannot open") != NULL);
    /* wrong length for the scheme */
    FILE *f = fopen("/dev/null", "r");
    if (f) fclose(f);
    char p[400];
    snprintf(p, sizeof p, "%s/short.bin", dir);
    uint8_t junk[10] = {0};
    CHECK_OK(qtk_file_write_atomic(p, junk, sizeof junk, 1));
    CHECK(run("dequantize --scheme q8f --shape 3x3 short.bin bad.npy", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "takes exactly 16 bytes") != NULL && strstr(err, "got 10") != NULL, "stderr: %s", err);
    CHECK(!exists("bad.npy"));
    CHECK(run("dequantize --scheme q8f --shape 3xx3 short.bin bad.npy", err, sizeof err) == 2);
    CHECK(run("dequantize --scheme q8f --shape 3x3 --dtype f64 short.bin bad.npy", err, sizeof err) == 2);
    CHECK(run("dequantize --scheme q8f,block=4x4:f16 --shape 16 short.bin bad.npy", err, sizeof err) == 1);
    CHECK(strstr(err, "has rank 1") != NULL);
    CHECK(!exists("bad.npy"));
    CHECK(run("quantize --scheme q8f", err, sizeof err) == 2);
    CHECK(run("quantize --bogus", err, sizeof err) == 2);
    CHECK(strstr(err, "unknown option '--bogus'") != NULL);
    CHECK(run("frobnicate", err, sizeof err) == 2);
    /* scalar tensors */
    float one = 3.0f;
    write_npy("s.npy", &one, NULL, 0);
    CHECK(run("quantize --scheme e4m3 s.npy s.bin", err, sizeof err) == 0);
    CHECK(run("dequantize --scheme e4m3 --shape scalar s.bin s_out.npy", err, sizeof err) == 0);
    cli_npy y;
    snprintf(p, sizeof p, "%s/s_out.npy", dir);
    CHECK_OK(cli_npy_read(p, &y));
    CHECK(y.rank == 0 && y.numel == 1 && y.data[0] == 3.0f);
    cli_npy_free(&y);
    /* an existing output is replaced only with --force, and is untouched without it */
    size_t n0, n1;
    uint8_t *before = read_file("s.bin", &n0);
    CHECK(run("quantize --scheme q8f s.npy s.bin", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "'s.bin' exists; it is replaced only with --force") != NULL, "stderr: %s", err);
    uint8_t *after = read_file("s.bin", &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(after);
    CHECK(run("dequantize --scheme e4m3 --shape scalar s.bin s_out.npy", err, sizeof err) == 1);
    CHECK(strstr(err, "'s_out.npy' exists; it is replaced only with --force") != NULL);
    CHECK(run("quantize --scheme q8f --force s.npy s.bin", err, sizeof err) == 0);
    after = read_file("s.bin", &n1);
    CHECK(after && (n0 != n1 || memcmp(before, after, n0) != 0)); /* q8f bytes, not e4m3's */
    free(before);
    free(after);
}

static void help_everywhere(void) {
    const char *cmds[] = {"quantize", "dequantize", "scheme", "demo"};
    char err[2048], args[64];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s", args);
        size_t n;
        uint8_t *o = read_file("stdout.txt", &n);
        CHECK(o && n > 40 && memcmp(o, "usage: qtk ", 11) == 0);
        free(o);
    }
    CHECK(run("--help", err, sizeof err) == 0);
    CHECK(run("", err, sizeof err) == 2);
    CHECK(run("scheme 'q4f,block=32:f16' --shape 64x70", err, sizeof err) == 0);
    char *t = read_text("stdout.txt");
    CHECK(t && strstr(t, "2688 bytes") != NULL);
    free(t);
}

/* qtk scheme describes the extension's schemes as what they are (docs/affine.md) */
static void scheme_extension(void) {
    char err[2048];
    CHECK(run("scheme q4_k --shape 64x256", err, sizeof err) == 0);
    char *o = read_text("stdout.txt");
    CHECK(o && strstr(o, "(preset q4_k)") && strstr(o, "4-bit unsigned integer, range [0, 15]") &&
          strstr(o, "affine: value = field x scale - min") && strstr(o, "store     ggml: ggml's q4_k blocks of 256") &&
          strstr(o, "super     one f16 per 256 elements") && strstr(o, "9216 bytes = 4.5000 bits"));
    CHECK(o && !strstr(o, "symmetric") && !strstr(o, "u32 along"));
    free(o);
    CHECK(run("scheme iq1_m --shape 4x512", err, sizeof err) == 0); /* docs/lattice.md */
    o = read_text("stdout.txt");
    CHECK(o && strstr(o, "(preset iq1_m)") && strstr(o, "lattice: each code selects a point of codebook 'iq1m'") &&
          strstr(o, "ggml's iq1_m blocks of 256") && strstr(o, "448 bytes = 1.7500 bits"));
    CHECK(o && !strstr(o, "symmetric"));
    free(o);
    CHECK(run("scheme 'u4,block=128:f16,zero=u8' --shape 64x256", err, sizeof err) == 0);
    o = read_text("stdout.txt");
    CHECK(o && strstr(o, "value = (field - zero point) x scale, one u8 zero point") &&
          strstr(o, "offsets 128 x u8 = 128 bytes") && strstr(o, "8576 bytes"));
    free(o);
    CHECK(run("scheme q6_k --shape 64x256", err, sizeof err) == 0);
    o = read_text("stdout.txt");
    CHECK(o && strstr(o, "6-bit integer, range [-32, 31]") && strstr(o, "symmetric") && strstr(o, "13440 bytes"));
    free(o);
}

static void cleanup(void) { tmp_dir_remove(); }

static void all(void) {
    setup();
    if (!bin) {
        printf("  QTK_BIN is not set: skipped\n");
        return;
    }
    quantize_dequantize_roundtrip();
    given_scales_and_global();
    calibration_mse_and_weights();
    errors_leave_no_output();
    help_everywhere();
    scheme_extension();
    cleanup();
}

TEST_MAIN("cli", T(all))
