/* cmd_demo.c — qtk demo: the main job on a built-in default. Generates a transformer-like
 * checkpoint as safetensors, converts it to an NVFP4 burnpack, inspects the result, shows
 * that quantized tensors survive .bpk -> .safetensors -> .bpk bit for bit, and evaluates the
 * presets on the original. Each step prints the command that does the same thing. */
#include "cli.h"

#include "synth_model.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: qtk demo [--dir DIR] [--layers N] [--hidden N] [--seed S]\n"
    "\n"
    "Runs the main job on a built-in default:\n"
    "  1. qtk synth:   a deterministic transformer-like checkpoint (default 4 layers, hidden 512,\n"
    "                  16.3 M parameters, BF16; Gaussian weights with outlier channels)\n"
    "                  written as DIR/model.safetensors\n"
    "  2. qtk convert: to NVFP4 as DIR/model-nvfp4.bpk (matrices quantized; norms, biases kept)\n"
    "  3. qtk inspect: the burnpack's tensors, schemes, sizes and offsets\n"
    "  4. round trip:  DIR/model-nvfp4.bpk -> .safetensors -> .bpk, checked byte for byte\n"
    "  5. qtk eval:    every preset and a few other schemes on the original, with a chart\n"
    "                  DIR/eval.svg\n"
    "Without --dir the files go to a temporary directory that is removed at the end; with\n"
    "--dir they are kept (DIR is created if needed; files in it are replaced).\n";

static const char *const eval_schemes[] = {"nvfp4", "mxfp4", "mxfp8", "nf4", "q4f,block=32:f16", "q8s,block=*:f32",
                                           "e4m3"};
#define N_EVAL (sizeof eval_schemes / sizeof eval_schemes[0])

static const char *const demo_files[] = {"model.safetensors", "model-nvfp4.bpk", "model-nvfp4.safetensors",
                                         "model-nvfp4-again.bpk", "eval.svg"};

static int step_convert(const char *in, const char *out, const char *spec) {
    qtk_convert_summary s;
    cli_progress bar;
    cli_progress_init(&bar, "convert");
    qtk_convert_options o = {.scheme = spec, .force = 1, .progress = cli_progress_update, .ctx = &bar,
                             .cancel = cli_cancel_flag()};
    double t0 = cli_now();
    qtk_status st = qtk_ckpt_convert(in, out, &o, &s);
    double dt = cli_now() - t0;
    cli_progress_end(&bar);
    if (st) return cli_fail("demo", st, "converting '%s'", in);
    char a[32], b[32];
    printf("%zu tensors: %zu quantized, %zu copied; tensor bytes %s -> %s (%.2f s)\n", s.tensors, s.quantized, s.kept,
           cli_bytes((double)s.in_bytes, a, sizeof a), cli_bytes((double)s.out_bytes, b, sizeof b), dt);
    return CLI_OK;
}

static int same_files(const char *a, const char *b, bool *same, size_t *len) {
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    qtk_status st = cli_read_file(a, &x, &nx);
    if (!st) st = cli_read_file(b, &y, &ny);
    *same = !st && nx == ny && memcmp(x, y, nx) == 0;
    *len = nx;
    free(x);
    free(y);
    return st ? cli_fail("demo", st, "comparing '%s' and '%s'", a, b) : CLI_OK;
}

static int run(const char *dir, const cli_synth_config *cfg) {
    char p[5][1024];
    for (int i = 0; i < 5; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, demo_files[i]);
    size_t params = cfg->vocab * cfg->hidden * 2 + cfg->hidden +
                    cfg->layers * (2 * cfg->hidden + 2 * cfg->hidden * cfg->hidden + cfg->hidden + 2 * (cfg->kv * cfg->hidden + cfg->kv) +
                                   3 * cfg->ffn * cfg->hidden);
    printf("== 1. a synthetic transformer checkpoint: %zu layers, hidden %zu, %.1f M parameters, BF16\n", cfg->layers,
           cfg->hidden, (double)params / 1e6);
    printf("$ qtk synth %s --layers %zu --hidden %zu --seed %llu\n", p[0], cfg->layers, cfg->hidden,
           (unsigned long long)cfg->seed);
    qtk_status st = cli_synth_checkpoint(p[0], QTK_CKPT_SAFETENSORS, cfg, 1);
    if (st) return cli_fail("demo", st, "cannot write '%s'", p[0]);
    struct stat sb;
    if (stat(p[0], &sb) == 0) printf("wrote %lld bytes\n", (long long)sb.st_size);

    printf("\n== 2. convert it to NVFP4 in Burn's burnpack format\n$ qtk convert %s %s --scheme nvfp4\n", p[0], p[1]);
    int rc = step_convert(p[0], p[1], "nvfp4");
    if (rc) return rc;

    printf("\n== 3. inspect the result\n$ qtk inspect %s\n", p[1]);
    fflush(stdout);
    rc = cli_inspect_print(stdout, p[1], false);
    if (rc) return rc;

    printf("\n== 4. quantized tensors cross formats bit for bit\n$ qtk convert %s %s\n", p[1], p[2]);
    if ((rc = step_convert(p[1], p[2], NULL))) return rc;
    printf("$ qtk convert %s %s\n", p[2], p[3]);
    if ((rc = step_convert(p[2], p[3], NULL))) return rc;
    bool same;
    size_t len;
    if ((rc = same_files(p[1], p[3], &same, &len))) return rc;
    printf("%s and %s: %s (%zu bytes)\n", demo_files[1], demo_files[3], same ? "identical" : "DIFFERENT", len);
    if (!same) return cli_fail("demo", QTK_OK, "the round trip changed the file");

    printf("\n== 5. what each scheme costs and loses on the original\n$ qtk eval %s", p[0]);
    for (size_t j = 0; j < N_EVAL; j++) printf(" --scheme '%s'", eval_schemes[j]);
    printf(" --summary --plot %s\n", p[4]);
    cli_progress bar;
    cli_progress_init(&bar, "eval");
    qtk_eval_options eo = {.schemes = eval_schemes, .n_schemes = N_EVAL, .progress = cli_progress_update, .ctx = &bar,
                           .cancel = cli_cancel_flag()};
    qtk_eval_report *r = NULL;
    st = qtk_ckpt_eval(p[0], &eo, &r);
    cli_progress_end(&bar);
    if (st) return cli_fail("demo", st, "evaluating '%s'", p[0]);
    cli_eval_print(stdout, p[0], r, true);
    st = cli_eval_svg(r, p[4], 1);
    qtk_eval_report_free(r);
    if (st) return cli_fail("demo", st, "cannot write the chart");
    printf("\nchart: %s\n", p[4]);
    return CLI_OK;
}

int cmd_demo(int argc, char **argv) {
    const char *cmd = "demo";
    const char *dir_s = NULL, *layers_s = NULL, *hidden_s = NULL, *seed_s = NULL;
    const cli_opt opts[] = {
        {"dir", true, &dir_s, NULL, NULL, NULL},
        {"layers", true, &layers_s, NULL, NULL, NULL},
        {"hidden", true, &hidden_s, NULL, NULL, NULL},
        {"seed", true, &seed_s, NULL, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, 4, pos, 0, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    cli_synth_config cfg;
    cli_synth_default(&cfg);
    long v;
    if (layers_s) {
        if (!cli_parse_int(layers_s, 1, 1024, &v)) return cli_usage_error(cmd, "--layers '%s' is not 1..1024", layers_s);
        cfg.layers = (size_t)v;
    }
    if (hidden_s) {
        if (!cli_parse_int(hidden_s, 16, 65536, &v)) return cli_usage_error(cmd, "--hidden '%s' is not 16..65536", hidden_s);
        cfg.hidden = (size_t)v;
        cfg.ffn = 3 * cfg.hidden;
        cfg.kv = cfg.hidden / 4;
    }
    if (seed_s) {
        if (!cli_parse_int(seed_s, 0, 0x7fffffffL, &v)) return cli_usage_error(cmd, "--seed '%s' is not a number", seed_s);
        cfg.seed = (uint64_t)v;
    }
    char tmp[] = "/tmp/qtk-demo-XXXXXX";
    const char *dir = dir_s;
    if (!dir) {
        if (!mkdtemp(tmp)) return cli_fail(cmd, QTK_OK, "cannot create a temporary directory in /tmp");
        dir = tmp;
    } else if (mkdir(dir, 0755) != 0 && (stat(dir, &(struct stat){0}) != 0)) {
        return cli_fail(cmd, QTK_OK, "cannot create the directory '%s'", dir);
    }
    rc = run(dir, &cfg);
    if (!dir_s) {
        for (size_t i = 0; i < sizeof demo_files / sizeof demo_files[0]; i++) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, demo_files[i]);
            unlink(p);
        }
        rmdir(dir);
        printf("(the files were in %s, now removed; keep them with --dir DIR)\n", dir);
    }
    return rc;
}
