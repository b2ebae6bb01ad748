/* cmd_inspect.c — qtk inspect: what a checkpoint holds. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: qtk inspect [--json] [--layout L] FILE|INDEX|DIR\n"
    "\n"
    "Lists a checkpoint (.bpk burnpack, .safetensors or .gguf; recognised by content; or a\n"
    "sharded one: a *.safetensors.index.json or a directory): its format and container facts; for\n"
    "safetensors the Hub layout detected (from config.json / hf_quant_config.json beside the\n"
    "files, else tensor names), the quantization config read, and the shards; then every\n"
    "tensor in the order of its bytes: name, dtype or qtk scheme (a quantized weight and its\n"
    "scale tensors are one qtk tensor), shape, bytes, bits per element, file offset (shard:\n"
    "offset when sharded); then totals, the string metadata, burnpack scalars, and notices\n"
    "(tensors with no exact qtk form, dequantized on read). Everything is validated on the way\n"
    "(lengths against shapes and schemes, offsets, companions, the config), but values are not\n"
    "read.\n"
    "GGUF files also list each tensor's ggml type (the qtk column is what qtk reads it as: a\n"
    "scheme, or F32 for the types qtk decodes), and bytes are the file's. KV values show their\n"
    "GGUF type (u32:4096, arr[str]:[...]; strings as they are); long ones are shortened here,\n"
    "--json prints them whole.\n"
    "\n"
    "  --json      the same as one JSON object on stdout\n"
    "  --layout L  read in layout L instead of detecting it; 'none' lists the stored tensors\n";

static const char *type_of(const qtk_ckpt_tensor *t, char *buf, size_t cap) { return qtk_ckpt_type_string(t, buf, cap); }

static void print_json(FILE *f, qtk_ckpt *c, const char *path) {
    size_t n_tensors = qtk_ckpt_count(c), n_meta = qtk_ckpt_meta_count(c), n_scalars = qtk_ckpt_scalar_count(c);
    qtk_ckpt_facts fx;
    qtk_ckpt_facts_of(c, &fx);
    char buf[256];
    fputs("{\"file\": ", f);
    cli_json_str(f, path);
    fprintf(f, ", \"format\": \"%s\", \"file_bytes\": %zu, \"data_start\": %zu, ",
            qtk_ckpt_format_name(qtk_ckpt_format_of(c)), fx.file_bytes, fx.data_start);
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    fprintf(f, "\"layout\": \"%s\", \"detected_by\": ", qtk_hub_layout_name(hi.layout));
    cli_json_str(f, hi.detected_by ? hi.detected_by : "");
    fputs(", \"config_file\": ", f);
    if (hi.config_file) cli_json_str(f, hi.config_file);
    else fputs("null", f);
    fprintf(f, ", \"quantization_config\": %s, \"index\": ", hi.quant_config ? hi.quant_config : "null");
    if (hi.index_file) cli_json_str(f, hi.index_file);
    else fputs("null", f);
    fputs(", \"shards\": [", f);
    for (size_t k = 0; k < hi.n_shards; k++) {
        if (k) fputs(", ", f);
        cli_json_str(f, hi.shards[k]);
    }
    fputs("], \"notices\": [", f);
    for (size_t k = 0; k < hi.n_notices; k++) {
        fputs(k ? ", {\"tensor\": " : "{\"tensor\": ", f);
        if (hi.notices[k].tensor) cli_json_str(f, hi.notices[k].tensor);
        else fputs("null", f);
        fputs(", \"text\": ", f);
        cli_json_str(f, hi.notices[k].text);
        fputc('}', f);
    }
    fputs("], \"tensors\": [", f);
    for (size_t i = 0; i < n_tensors; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        cli_json_str(f, t->name);
        fprintf(f, ", \"quantized\": %s, \"dtype\": ", t->quantized ? "true" : "false");
        if (t->quantized) {
            if (qtk_scheme_format(&t->scheme, buf, sizeof buf, NULL) != QTK_OK) buf[0] = '\0';
            cli_json_str(f, buf);
        } else {
            cli_json_str(f, qtk_elem_name(t->elem));
        }
        fputs(", \"shape\": [", f);
        for (int k = 0; k < t->rank; k++) fprintf(f, k ? ", %zu" : "%zu", t->shape[k]);
        fprintf(f, "], \"numel\": %zu, \"bytes\": %zu, \"offset\": %zu", t->numel, t->nbytes, qtk_ckpt_offset_of(c, i));
        if (hi.n_shards > 1) fprintf(f, ", \"shard\": %zu", qtk_ckpt_shard_of(c, i));
        if (t->file_type) {
            fputs(", \"file_type\": ", f);
            cli_json_str(f, t->file_type);
            fprintf(f, ", \"file_bytes\": %zu, \"decoded\": %s", t->file_bytes, t->decoded ? "true" : "false");
        }
        if (t->has_param_id) fprintf(f, ", \"param_id\": %llu", (unsigned long long)t->param_id);
        fputc('}', f);
    }
    fputs("],\n \"metadata\": {", f);
    for (size_t i = 0; i < n_meta; i++) {
        if (i) fputs(", ", f);
        const char *k, *v;
        qtk_ckpt_meta_at(c, i, &k, &v);
        cli_json_str(f, k);
        fputs(": ", f);
        cli_json_str(f, v);
    }
    fputs("},\n \"scalars\": {", f);
    for (size_t i = 0; i < n_scalars; i++) {
        const qtk_ckpt_scalar *s = qtk_ckpt_scalar_at(c, i);
        if (i) fputs(", ", f);
        cli_json_str(f, s->name);
        switch (s->kind) {
        case QTK_SCALAR_INT: fprintf(f, ": {\"Int\": %lld}", (long long)s->i); break;
        case QTK_SCALAR_UINT: fprintf(f, ": {\"UInt\": %llu}", (unsigned long long)s->u); break;
        case QTK_SCALAR_FLOAT: fputs(": {\"Float\": ", f), cli_json_num(f, s->f), fputc('}', f); break;
        case QTK_SCALAR_BOOL: fprintf(f, ": {\"Bool\": %s}", s->b ? "true" : "false"); break;
        }
    }
    fputs("}}\n", f);
}

static void print_text(FILE *f, qtk_ckpt *c, const char *path) {
    size_t n_tensors = qtk_ckpt_count(c), n_meta = qtk_ckpt_meta_count(c), n_scalars = qtk_ckpt_scalar_count(c);
    qtk_ckpt_facts fx;
    qtk_ckpt_facts_of(c, &fx);
    char tb[256], sb[128], hb[32];
    fprintf(f, "file      %s\n", path);
    fprintf(f, "format    %s (%s)\n", qtk_ckpt_format_name(qtk_ckpt_format_of(c)), fx.note);
    fprintf(f, "size      %zu bytes (%s)\n", fx.file_bytes, cli_bytes((double)fx.file_bytes, hb, sizeof hb));
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    if (qtk_ckpt_format_of(c) == QTK_CKPT_SAFETENSORS) {
        fprintf(f, "layout    %s (%s)\n", qtk_hub_layout_name(hi.layout), hi.detected_by ? hi.detected_by : "");
        if (hi.quant_config) fprintf(f, "config    %s: %s\n", hi.config_file, hi.quant_config);
        if (hi.n_shards > 1 || hi.index_file) {
            fprintf(f, "shards    %zu%s%s%s\n", hi.n_shards, hi.index_file ? " (index " : "", hi.index_file ? hi.index_file : "",
                    hi.index_file ? ")" : "");
            for (size_t k = 0; k < hi.n_shards; k++) fprintf(f, "          %zu: %s\n", k, hi.shards[k]);
        }
    }
    fputc('\n', f);
    int nw = 4, tw = 5, fw = 0; /* fw: the file's own type column (GGUF's ggml types) */
    for (size_t i = 0; i < n_tensors; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        int n = (int)strlen(t->name), k = (int)strlen(type_of(t, tb, sizeof tb));
        if (n > nw) nw = n > 60 ? 60 : n;
        if (k > tw) tw = k > 48 ? 48 : k;
        if (t->file_type && (int)strlen(t->file_type) > fw) fw = (int)strlen(t->file_type);
    }
    if (fw) fw = fw < 4 ? 4 : fw;
    fprintf(f, "%-*s  ", nw, "name");
    if (fw) fprintf(f, "%-*s  ", fw, "ggml");
    fprintf(f, "%-*s  %-14s %12s %8s %12s\n", tw, fw ? "qtk" : "dtype", "shape", "bytes", "bits/el", "offset");
    size_t nq = 0, bq = 0, br = 0, el = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        size_t bytes = t->file_type ? t->file_bytes : t->nbytes; /* what the file holds */
        double bpe = t->numel ? (double)bytes * 8.0 / (double)t->numel : 0.0;
        char off[48];
        if (hi.n_shards > 1) snprintf(off, sizeof off, "%zu:%zu", qtk_ckpt_shard_of(c, i), qtk_ckpt_offset_of(c, i));
        else snprintf(off, sizeof off, "%zu", qtk_ckpt_offset_of(c, i));
        fprintf(f, "%-*s  ", nw, t->name);
        if (fw) fprintf(f, "%-*s  ", fw, t->file_type ? t->file_type : "");
        fprintf(f, "%-*s  %-14s %12zu %8.3f %12s\n", tw, type_of(t, tb, sizeof tb), qtk_shape_format(t->shape, t->rank, sb, sizeof sb),
                bytes, bpe, off);
        if (t->quantized || t->decoded) nq++, bq += bytes;
        else br += bytes;
        el += t->numel;
    }
    fprintf(f, "\n%zu tensors, %zu elements: %zu quantized (%zu bytes), %zu unquantized (%zu bytes)", n_tensors, el, nq, bq,
            n_tensors - nq, br);
    if (el) fprintf(f, "; %.3f bits per element overall", (double)(bq + br) * 8.0 / (double)el);
    fputc('\n', f);
    if (n_meta == 0) fprintf(f, "metadata  (none)\n");
    for (size_t i = 0; i < n_meta; i++) {
        /* a GGUF tokenizer's arrays run to megabytes: show their start */
        const char *key, *v;
        qtk_ckpt_meta_at(c, i, &key, &v);
        size_t n = strlen(v);
        fprintf(f, "%s %s = ", i ? "         " : "metadata ", key);
        if (n <= 160) fprintf(f, "%s\n", v);
        else {
            size_t k = 120;
            while (k > 0 && ((unsigned char)v[k] & 0xc0) == 0x80) k--; /* not inside a UTF-8 character */
            fprintf(f, "%.*s... (%zu bytes)\n", (int)k, v, n);
        }
    }
    for (size_t i = 0; i < n_scalars; i++) {
        const qtk_ckpt_scalar *s = qtk_ckpt_scalar_at(c, i);
        fprintf(f, "%s %s = ", i ? "         " : "scalars  ", s->name);
        switch (s->kind) {
        case QTK_SCALAR_INT: fprintf(f, "Int %lld\n", (long long)s->i); break;
        case QTK_SCALAR_UINT: fprintf(f, "UInt %llu\n", (unsigned long long)s->u); break;
        case QTK_SCALAR_FLOAT: fprintf(f, "Float %.17g\n", s->f); break;
        case QTK_SCALAR_BOOL: fprintf(f, "Bool %s\n", s->b ? "true" : "false"); break;
        }
    }
    if (hi.n_notices) {
        const char **t = malloc(hi.n_notices * sizeof *t), **x = malloc(hi.n_notices * sizeof *x);
        for (size_t k = 0; t && x && k < hi.n_notices; k++) t[k] = hi.notices[k].tensor, x[k] = hi.notices[k].text;
        if (t && x) cli_notices_print(f, "notice    ", t, x, hi.n_notices);
        free(t);
        free(x);
    }
}

int cli_inspect_print(FILE *f, const char *path, bool json) { return cli_inspect_print_as(f, path, json, NULL); }

int cli_inspect_print_as(FILE *f, const char *path, bool json, const char *layout_s) {
    qtk_open_options oo = {.layout = QTK_LAYOUT_AUTO};
    if (layout_s && cli_parse_layout("inspect", layout_s, true, &oo.layout)) return CLI_USAGE;
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(path, &oo, &c);
    if (st) return cli_fail("inspect", st, "cannot read the checkpoint");
    if (json) print_json(f, c, path);
    else print_text(f, c, path);
    qtk_ckpt_close(c);
    return CLI_OK;
}

int cmd_inspect(int argc, char **argv) {
    const char *cmd = "inspect";
    bool json = false;
    const char *layout = NULL;
    const cli_opt opts[] = {{"json", false, NULL, &json, NULL, NULL}, {"layout", true, &layout, NULL, NULL, NULL}};
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, 2, pos, 1, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (npos != 1) return cli_usage_error(cmd, "expected one FILE");
    return cli_inspect_print_as(stdout, pos[0], json, layout);
}
