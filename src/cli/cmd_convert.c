/* cmd_convert.c — qtk convert: a checkpoint to another format and/or other schemes. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk convert IN OUT [--scheme SPEC|none | --preset MIX] [--dtype f32|f16|bf16] [--calibration C]\n"
    "                   [--imatrix FILE]\n"
    "                   [--only REGEX] [--skip REGEX] [--rule 'REGEX=SPEC']... [--min-elements N]\n"
    "                   [--layout L] [--max-shard-size SIZE] [--force] [--threads N] [--verbose]\n"
    "\n"
    "Converts the checkpoint IN into OUT. IN is a burnpack, safetensors or GGUF file (recognised\n"
    "by content), a *.safetensors.index.json, or a directory of shards; Hugging Face Hub layouts\n"
    "(gpt-oss MXFP4, ModelOpt, compressed-tensors, DeepSeek block FP8, bitsandbytes NF4) are\n"
    "detected from config.json / hf_quant_config.json beside the files or from tensor names,\n"
    "and each quantized weight with its scales becomes one qtk tensor. OUT's format follows its\n"
    "extension (.bpk, .safetensors or .gguf); an OUT without an extension (or an existing directory)\n"
    "is a directory of safetensors shards with model.safetensors.index.json and config.json.\n"
    "Tensors are streamed one at a time from memory maps; OUT appears only when complete\n"
    "(temporary files beside it are renamed on success and removed on any error).\n"
    "\n";
static const char usage_rules[] =
    "What happens to each tensor (the first that applies):\n"
    "  1. integer, bool and other non-float tensors are copied as they are\n"
    "  2. --skip REGEX matches its name, or --only REGEX is given and does not: copied\n"
    "  3. the first --rule 'REGEX=SPEC' whose REGEX matches: SPEC (a scheme), 'none'\n"
    "     (dequantize) or 'keep' (copy) — whatever the tensor's rank or size\n"
    "  4. --scheme SPEC quantizes tensors of rank >= 2 with at least --min-elements elements\n"
    "     (default 1024): 1-D biases and norms and tiny tensors stay as they are. A quantized\n"
    "     tensor is re-quantized (qtk_convert); one already in SPEC is copied bit for bit.\n"
    "     --scheme none dequantizes every quantized tensor to --dtype (default f32).\n"
    "     --preset MIX instead gives each tensor the ggml type llama.cpp's llama-quantize\n"
    "     picks for that file type (rank >= 2 weights; norms, routers and the like as they\n"
    "     are); --verbose says which rule chose each type (docs/gguf.md, Mixture presets).\n"
    "     Without --scheme every tensor is copied: 'qtk convert a.bpk b.bpk' reproduces the\n"
    "     file byte for byte, and .bpk <-> .safetensors keeps quantized tensors bit-exact.\n"
    "--dtype also converts the float tensors that stay float (not those --skip or a 'keep'\n"
    "rule names): 'qtk convert a.safetensors b.safetensors --dtype f16' casts BF16 to F16.\n"
    "A quantized tensor kept in a scheme the output format cannot hold is written as F32 (its\n"
    "values unchanged) with a note; a scheme asked for that the format cannot hold is an error.\n"
    "REGEX is POSIX extended and matches anywhere in the name (anchor with ^ and $).\n"
    "\n"
    "  --scheme SPEC       a spec string or preset (see 'qtk scheme --help'), or none\n"
    "  --preset MIX        llama.cpp's file type: q4_k_m, q5_k_m, q3_k_m, q4_k_s, q5_k_s, q6_k,\n"
    "                      q8_0 (usually with a .gguf OUT and --calibration mse)\n"
    "  --dtype D           what dequantized tensors become (f32 by default), and float tensors\n"
    "                      that stay float: f32, f16, bf16\n"
    "  --calibration C     how quantized tensors choose their scales: minmax (default), absmean,\n"
    "                      mse (per group, the stored scale of least squared error)\n"
    "  --imatrix FILE      llama.cpp importance matrix (GGUF or legacy .dat) weighing each\n"
    "                      column's error, with --calibration mse; tensors it has no entry for\n"
    "                      are quantized unweighted, and a note names them (docs/imatrix.md);\n"
    "                      iq2_xxs, iq2_xs and iq1_s need an entry for each tensor they make\n"
    "  --only REGEX        consider only tensors whose name matches\n"
    "  --skip REGEX        never touch tensors whose name matches\n"
    "  --rule 'REGEX=SPEC' per-name scheme (repeatable; first match wins)\n"
    "  --min-elements N    smallest tensor --scheme quantizes (default 1024)\n"
    "  --layout L          write safetensors in layout L: qtk (default), gpt-oss, modelopt,\n"
    "                      compressed-tensors, deepseek, bnb, gptq, awq (with the config files\n"
    "                      it needs; gptq/awq take u4,block=128:f16,zero=u8 and the like);\n"
    "                      a tensor whose scheme L cannot hold is an error naming why\n"
    "  --max-shard-size S  write shards of at most S bytes (e.g. 5GB, 500MB); a sharded IN\n"
    "                      written to a directory keeps its shard files otherwise\n"
    "  --force             replace OUT (and files in an OUT directory) if they exist\n"
    "  --threads N         worker threads (default: all cores)\n"
    "  --verbose           print what happens to each tensor\n"
    "\n";
static const char usage_formats[] =
    "Safetensors output stores quantized tensors in qtk's convention (docs/safetensors-quantized.md)\n"
    "unless --layout says otherwise (docs/hub-layouts.md). A DeepSeek/Qwen FP8, NVFP4 or MXFP4\n"
    "model to plain bf16 shards:  qtk convert MODEL_DIR OUT_DIR --scheme none --dtype bf16\n"
    "Burnpack holds block dims up to 255 (Burn's limit) and no F8/F4 raw tensors.\n"
    "\n"
    "GGUF (docs/gguf.md): the ggml types a qtk scheme holds exactly (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,\n"
    "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, TQ1_0, TQ2_0, Q1_0, Q2_0)\n"
    "are read as that scheme and written back as the same type with the same bytes; converting\n"
    "them to another scheme prints what the re-quantization cost (SQNR). GGUF output takes the\n"
    "schemes that have a lossless ggml type (the rule above holds for the others).\n";

typedef struct {
    cli_progress bar; /* first: cli_progress_update reads the context as its bar */
    bool verbose;
    /* notices, printed grouped after the conversion */
    const char **tensor, **text;
    size_t n_notices;
} convert_ctx;

static const char *type_str(const qtk_ckpt_tensor *t, char *buf, size_t cap) {
    if (!t->quantized) return qtk_elem_name(t->elem);
    return qtk_scheme_format(&t->scheme, buf, cap, NULL) ? "?" : buf;
}

/* Why, in the words of the command line. */
static const char *why_str(const qtk_convert_event *e) {
    switch (e->reason) {
    case QTK_WHY_SKIP: return strcmp(e->why, "skip") == 0 ? "--skip" : "not --only";
    case QTK_WHY_DEFAULT: return "--scheme";
    case QTK_WHY_NO_SCHEME: return "no --scheme";
    case QTK_WHY_MIXTURE: return e->why; /* "q4_k_m: attention v 3 of 32: Q6_K" */
    default: return e->why;
    }
}

static void on_plan(convert_ctx *c, const qtk_convert_event *e) {
    const qtk_ckpt_tensor *in = e->in, *out = e->out;
    /* said whatever --verbose is: values that change form without the user naming it */
    if (in->decoded && e->action == QTK_ACT_KEEP)
        printf("  note: %s: ggml %s has no exact qtk scheme; written as F32 (ggml's dequantized values)\n", in->name,
               in->file_type ? in->file_type : "?");
    else if (e->reason == QTK_WHY_FORMAT)
        printf("  note: %s: %s\n", in->name, e->why);
    if (!c->verbose) return;
    char a[256], b[256], sb[128];
    static const char *const verbs[] = {"copy", "quantize", "dequantize", "cast"};
    bool same = e->action == QTK_ACT_KEEP;
    printf("  %-10s %s [%s] %s%s%s  (%s)\n", verbs[e->action], in->name, qtk_shape_format(in->shape, in->rank, sb, sizeof sb),
           type_str(in, a, sizeof a), same ? "" : " -> ", same ? "" : type_str(out, b, sizeof b), why_str(e));
}

static void on_requantized(const qtk_convert_event *e) {
    char a[256], b[256];
    const char *from = type_str(e->in, a, sizeof a);
    if (e->in->file_type && e->in->decoded) snprintf(a, sizeof a, "ggml %s", e->in->file_type), from = a;
    printf("  requantized %s: %s -> %s: SQNR %.2f dB\n", e->in->name, from, type_str(e->out, b, sizeof b), e->sqnr_db);
}

static void on_notice(convert_ctx *c, const char *tensor, const char *text) {
    const char **a = realloc(c->tensor, (c->n_notices + 1) * sizeof *a), **b = a ? realloc(c->text, (c->n_notices + 1) * sizeof *b) : NULL;
    if (a) c->tensor = a;
    if (b) c->text = b;
    char *t = tensor ? strdup(tensor) : NULL, *x = strdup(text);
    if (!a || !b || !x || (tensor && !t)) { /* out of memory: say it now, ungrouped */
        fprintf(stderr, "qtk convert: note: %s%s%s%s\n", tensor ? "'" : "", tensor ? tensor : "", tensor ? "': " : "", text);
        free(t);
        free(x);
        return;
    }
    c->tensor[c->n_notices] = t;
    c->text[c->n_notices++] = x;
}

static void on_event(void *ctx, const qtk_convert_event *e) {
    convert_ctx *c = ctx;
    if (e->kind == QTK_EVENT_PLAN) on_plan(c, e);
    else if (e->kind == QTK_EVENT_REQUANTIZED) on_requantized(e);
    else on_notice(c, e->tensor, e->text);
}

/* "5GB", "500MB", "64KiB", "1000000" */
static bool parse_size(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return false;
    double m = 1;
    if (!*end || strcmp(end, "B") == 0) m = 1;
    else if (strcmp(end, "KB") == 0 || strcmp(end, "kB") == 0) m = 1e3;
    else if (strcmp(end, "MB") == 0) m = 1e6;
    else if (strcmp(end, "GB") == 0) m = 1e9;
    else if (strcmp(end, "KiB") == 0) m = 1024.0;
    else if (strcmp(end, "MiB") == 0) m = 1048576.0;
    else if (strcmp(end, "GiB") == 0) m = 1073741824.0;
    else return false;
    v *= m;
    if (v < 1 || v > 1e18) return false;
    *out = (size_t)v;
    return true;
}

int cmd_convert(int argc, char **argv) {
    const char *cmd = "convert";
    const char *spec = NULL, *dtype = NULL, *only = NULL, *skip = NULL, *min_s = NULL, *threads_s = NULL;
    const char *layout_s = NULL, *shard_s = NULL, *cal_s = NULL, *imatrix_s = NULL, *preset = NULL;
    const char **rules = NULL;
    int n_rules = 0;
    bool force = false, verbose = false;
    const cli_opt opts[] = {
        {"scheme", true, &spec, NULL, NULL, NULL},  {"dtype", true, &dtype, NULL, NULL, NULL},
        {"only", true, &only, NULL, NULL, NULL},    {"skip", true, &skip, NULL, NULL, NULL},
        {"rule", true, NULL, NULL, &rules, &n_rules}, {"min-elements", true, &min_s, NULL, NULL, NULL},
        {"force", false, NULL, &force, NULL, NULL}, {"threads", true, &threads_s, NULL, NULL, NULL},
        {"verbose", false, NULL, &verbose, NULL, NULL}, {"layout", true, &layout_s, NULL, NULL, NULL},
        {"max-shard-size", true, &shard_s, NULL, NULL, NULL}, {"calibration", true, &cal_s, NULL, NULL, NULL},
        {"imatrix", true, &imatrix_s, NULL, NULL, NULL}, {"preset", true, &preset, NULL, NULL, NULL},
    };
    const char *pos[2];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &npos, &help);
    if (rc || help) {
        free(rules);
        if (help) fputs(usage, stdout), fputs(usage_rules, stdout), fputs(usage_formats, stdout);
        return rc;
    }
    long threads = 0, min_el = QTK_MIN_ELEMENTS_DEFAULT;
    convert_ctx ctx = {.verbose = verbose};
    qtk_convert_options o = {.scheme = spec, .rules = rules, .n_rules = (size_t)n_rules, .only = only, .skip = skip,
                             .force = force, .event = on_event, .ctx = &ctx, .mixture = preset};
    if (npos != 2) rc = cli_usage_error(cmd, "expected IN and OUT");
    else if (threads_s && !cli_parse_int(threads_s, 1, 4096, &threads))
        rc = cli_usage_error(cmd, "--threads '%s' is not 1..4096", threads_s);
    else if (min_s && !cli_parse_int(min_s, 0, 0x7fffffffL, &min_el))
        rc = cli_usage_error(cmd, "--min-elements '%s' is not a count", min_s);
    if (!rc && dtype) {
        if (qtk_dtype_parse(dtype, &o.dtype) || (o.dtype != QTK_DTYPE_F32 && o.dtype != QTK_DTYPE_F16 && o.dtype != QTK_DTYPE_BF16))
            rc = cli_usage_error(cmd, "--dtype '%s' is not f32, f16 or bf16", dtype);
        o.cast_floats = true;
    }
    if (!rc && cal_s && qtk_calibration_parse(cal_s, &o.calibration))
        rc = cli_usage_error(cmd, "--calibration: %s", qtk_last_error());
    if (!rc && imatrix_s && o.calibration != QTK_CALIB_MSE)
        rc = cli_usage_error(cmd, "--imatrix weighs the error --calibration mse minimizes; give --calibration mse");
    if (!rc && layout_s && cli_parse_layout(cmd, layout_s, false, &o.layout)) rc = CLI_USAGE;
    if (!rc && shard_s && !parse_size(shard_s, &o.max_shard_bytes))
        rc = cli_usage_error(cmd, "--max-shard-size '%s' is not a size (5GB, 500MB, 1048576)", shard_s);
    if (!rc && qtk_convert_check(&o)) rc = cli_usage_error(cmd, "%s", qtk_last_error());
    /* the output's format, before any input is read */
    qtk_writer *probe = NULL;
    qtk_write_options wo = {.layout = o.layout, .max_shard_bytes = o.max_shard_bytes};
    if (!rc && qtk_writer_create(pos[1], &wo, &probe)) rc = cli_usage_error(cmd, "%s", qtk_last_error());
    qtk_writer_abort(probe);
    if (rc) {
        free(rules);
        return rc;
    }
    qtk_imatrix *im = NULL;
    if (imatrix_s) {
        qtk_status ist = qtk_imatrix_open(imatrix_s, &im);
        if (ist) {
            free(rules);
            return cli_fail(cmd, ist, "--imatrix");
        }
        o.imatrix = im;
    }
    o.min_elements = min_el ? (size_t)min_el : 1; /* 0 on the command line: every size */
    o.threads = (int)threads;
    if (threads) qtk_set_threads((int)threads);
    cli_progress_init(&ctx.bar, "convert");
    o.progress = cli_progress_update;
    o.cancel = cli_cancel_flag();
    qtk_convert_summary s;
    double t0 = cli_now();
    qtk_status st = qtk_ckpt_convert(pos[0], pos[1], &o, &s);
    double dt = cli_now() - t0;
    cli_progress_end(&ctx.bar);
    qtk_imatrix_close(im);
    cli_notices_print(stderr, "qtk convert: note: ", ctx.tensor, ctx.text, ctx.n_notices);
    for (size_t i = 0; i < ctx.n_notices; i++) free((void *)(uintptr_t)ctx.tensor[i]), free((void *)(uintptr_t)ctx.text[i]);
    free(ctx.tensor);
    free(ctx.text);
    if (st) {
        rc = cli_fail(cmd, st, "'%s' -> '%s'", pos[0], pos[1]);
    } else {
        char a[32], b[32], r[32], lay[96] = "", cast[48] = "";
        bool hub_out = o.layout != QTK_LAYOUT_AUTO || o.max_shard_bytes > 0 || s.out_directory;
        if (hub_out)
            snprintf(lay, sizeof lay, ", layout %s, %zu file%s", qtk_hub_layout_name(s.out_layout), s.out_files,
                     s.out_files == 1 ? "" : "s");
        if (s.cast) snprintf(cast, sizeof cast, ", %zu cast", s.cast);
        printf("qtk convert: wrote %s (%s%s): %zu tensors: %zu quantized, %zu dequantized%s, %zu copied; "
               "tensor bytes %s -> %s in %.2f s (%s/s)\n",
               pos[1], qtk_ckpt_format_name(s.out_format), lay, s.tensors, s.quantized, s.dequantized, cast, s.kept,
               cli_bytes((double)s.in_bytes, a, sizeof a), cli_bytes((double)s.out_bytes, b, sizeof b), dt,
               cli_bytes(dt > 0 ? (double)s.in_bytes / dt : 0.0, r, sizeof r));
    }
    free(rules);
    return rc;
}
