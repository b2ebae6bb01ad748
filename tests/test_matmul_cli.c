/* test_matmul_cli.c — the 'qtk matmul' contract: it quantizes W.npy (or reads --weights-bin),
 * multiplies, and writes exactly what qtk_matmul gives; a 1-D X [K] gives Y [1, N]; errors exit
 * non-zero with a message and leave no output file; --help works. The binary is $QTK_BIN. */
#include "ckpt_util.h"
#include "test.h"

#include "io/fileio.h"
#include "npy.h"
#include "qtk_matmul.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *bin;
static char dir[256];

static int run(const char *args, char *err, size_t errcap) { return cli_run(bin, NULL, 0, err, errcap, "%s", args); }

static char *path(const char *name) {
    static char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static int exists(const char *name) {
    struct stat sb;
    return stat(path(name), &sb) == 0;
}

static void write_npy(const char *name, const float *v, const size_t *shape, int rank) {
    CHECK_OK(cli_npy_write(path(name), v, QTK_DTYPE_F32, shape, rank, 1));
}

enum { M = 3, N = 37, K = 70 };
static float W[N * K], WT[K * N], X[M * K], B[N];

static void setup(void) {
    bin = getenv("QTK_BIN");
    snprintf(dir, sizeof dir, "%s", tmp_dir_make());
    uint64_t s = 5;
    for (int i = 0; i < N * K; i++) W[i] = trand_normal(&s) * 0.1f;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) WT[k * N + n] = W[n * K + k];
    for (int i = 0; i < M * K; i++) X[i] = trand_normal(&s);
    for (int i = 0; i < N; i++) B[i] = trand_normal(&s);
    size_t ws[2] = {N, K}, wts[2] = {K, N}, xs[2] = {M, K}, bs[1] = {N}, x1[1] = {K};
    write_npy("W.npy", W, ws, 2);
    write_npy("WT.npy", WT, wts, 2);
    write_npy("X.npy", X, xs, 2);
    write_npy("x1.npy", X, x1, 1);
    write_npy("B.npy", B, bs, 1);
}

/* Y from the library for the same inputs. */
static void expect(const char *spec, qtk_mm_layout lay, qtk_precision prec, bool bias, size_t m, float *y) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    size_t shape[2] = {lay == QTK_MM_NK ? N : K, lay == QTK_MM_NK ? K : N};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(lay == QTK_MM_NK ? W : WT, shape, 2, &s, NULL, &t));
    qtk_matmul_options o = {lay, prec, 0};
    CHECK_OK(qtk_matmul(t, X, QTK_DTYPE_F32, m, K, bias ? B : NULL, y, N, &o));
    qtk_tensor_free(t);
}

static void check_output(const char *name, const float *want, size_t m, int rank) {
    cli_npy a = {0};
    CHECK_OK(cli_npy_read(path(name), &a));
    CHECK_MSG(a.rank == rank && a.shape[rank - 1] == N && (rank == 1 || a.shape[0] == m), "%s: rank %d", name, a.rank);
    CHECK_MSG(strcmp(a.descr, "<f4") == 0, "%s: dtype %s", name, a.descr);
    if (a.numel == m * N) CHECK_MSG(memcmp(a.data, want, m * N * sizeof(float)) == 0, "%s: values differ", name);
    cli_npy_free(&a);
}

static void products(void) {
    const char *specs[] = {"q4f,block=32:f16", "nvfp4", "e4m3,block=32:f32", "q2s", "nf4"};
    for (size_t i = 0; i < 5; i++) {
        char args[512], err[2048];
        float want[M * N];
        /* nk, exact, no bias */
        unlink(path("Y.npy"));
        snprintf(args, sizeof args, "matmul --force --scheme '%s' W.npy X.npy Y.npy", specs[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        expect(specs[i], QTK_MM_NK, QTK_PRECISION_EXACT, false, M, want);
        check_output("Y.npy", want, M, 2);
        /* kn, fast, bias */
        snprintf(args, sizeof args, "matmul --force --scheme '%s' --layout kn --precision fast --bias B.npy WT.npy X.npy Y.npy",
                 specs[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        expect(specs[i], QTK_MM_KN, QTK_PRECISION_FAST, true, M, want);
        check_output("Y.npy", want, M, 2);
        /* one row: [K] in, [1, N] out */
        snprintf(args, sizeof args, "matmul --force --scheme '%s' --precision fast --bias B.npy W.npy x1.npy y1.npy", specs[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        expect(specs[i], QTK_MM_NK, QTK_PRECISION_FAST, true, 1, want);
        check_output("y1.npy", want, 1, 2); /* [K] in, [1, N] out: Y is [M, N] */
        /* --weights-bin: quantize first, then multiply the bytes */
        snprintf(args, sizeof args, "quantize --force --scheme '%s' W.npy W.bin", specs[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        snprintf(args, sizeof args, "matmul --force --scheme '%s' --weights-bin W.bin --shape %dx%d X.npy Yb.npy", specs[i], N, K);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        expect(specs[i], QTK_MM_NK, QTK_PRECISION_EXACT, false, M, want);
        check_output("Yb.npy", want, M, 2);
        snprintf(args, sizeof args, "quantize --force --scheme '%s' WT.npy WT.bin", specs[i]);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        snprintf(args, sizeof args, "matmul --force --scheme '%s' --layout kn --weights-bin WT.bin --shape %dx%d X.npy Yb.npy",
                 specs[i], K, N);
        CHECK_MSG(run(args, err, sizeof err) == 0, "%s: %s", args, err);
        expect(specs[i], QTK_MM_KN, QTK_PRECISION_EXACT, false, M, want);
        check_output("Yb.npy", want, M, 2);
    }
}

static void errors_leave_no_output(void) {
    struct {
        const char *args, *msg;
        int rc;
    } cases[] = {
        {"matmul W.npy X.npy Z.npy", "--scheme is required", 2},
        {"matmul --scheme q4f W.npy X.npy", "expected W.npy, X.npy and Y.npy", 2},
        {"matmul --scheme q4f --layout nm W.npy X.npy Z.npy", "--layout 'nm'", 2},
        {"matmul --scheme q4f --precision low W.npy X.npy Z.npy", "--precision 'low'", 2},
        {"matmul --scheme q4f --shape 3x4 W.npy X.npy Z.npy", "--shape goes with --weights-bin", 2},
        {"matmul --scheme q4f --weights-bin W.bin X.npy Z.npy", "needs --shape", 2},
        {"matmul --scheme q4f --weights-bin W.bin --shape 37x70 W.npy X.npy Z.npy", "expected X.npy and Y.npy", 2},
        {"matmul --scheme q4f --weights-bin W.bin --shape 37x70x1 X.npy Z.npy", "has 3 dims", 2},
        {"matmul --scheme q9f W.npy X.npy Z.npy", "--scheme", 1},
        {"matmul --scheme q4f --layout kn W.npy X.npy Z.npy", "X.npy has K = 70", 1},
        {"matmul --scheme q4f WT.npy X.npy Z.npy", "X.npy has K = 70", 1},
        {"matmul --scheme q4f --bias X.npy W.npy X.npy Z.npy", "--bias has shape 3x70", 1},
        {"matmul --scheme q4f W.npy missing.npy Z.npy", "cannot read the activations", 1},
        {"matmul --scheme q4f,block=32:f16 --weights-bin W.bin --shape 37x71 X.npy Z.npy", "takes exactly", 1},
        {"matmul --scheme q4f B.npy X.npy Z.npy", "W is a matrix", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[2048];
        unlink(path("Z.npy"));
        int rc = run(cases[i].args, err, sizeof err);
        CHECK_MSG(rc == cases[i].rc, "%s: exit %d, expected %d (%s)", cases[i].args, rc, cases[i].rc, err);
        CHECK_MSG(strstr(err, cases[i].msg) != NULL, "%s: message '%s' lacks '%s'", cases[i].args, err, cases[i].msg);
        CHECK_MSG(!exists("Z.npy"), "%s: left an output file", cases[i].args);
    }
    /* an existing Y is replaced only with --force */
    char err[2048];
    CHECK(run("matmul --scheme q4f W.npy X.npy X.npy", err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "'X.npy' exists; it is replaced only with --force") != NULL, "stderr: %s", err);
    cli_npy a = {0};
    CHECK_OK(cli_npy_read(path("X.npy"), &a)); /* untouched: still the activations */
    CHECK(a.rank == 2 && a.shape[1] == 70);
    cli_npy_free(&a);
}

static void help(void) {
    char err[256];
    CHECK(run("matmul --help", err, sizeof err) == 0);
    FILE *f = fopen(path("stdout.txt"), "r");
    char buf[4096] = {0};
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    CHECK(strstr(buf, "--weights-bin") && strstr(buf, "--precision") && strstr(buf, "--layout"));
}

static void cleanup(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST_MAIN("matmul_cli", T(setup), T(products), T(errors_leave_no_output), T(help), T(cleanup))
