/* cmd_synth.c — qtk synth: write a deterministic transformer-like checkpoint. */
#include "cli.h"

#include "synth_model.h"

#include <string.h>

static const char usage[] =
    "usage: qtk synth OUT [--layers N] [--hidden N] [--ffn N] [--kv N] [--vocab N]\n"
    "                 [--dtype f32|f16|bf16] [--seed S] [--force]\n"
    "\n"
    "Writes a deterministic synthetic checkpoint shaped like a small decoder-only transformer\n"
    "(Hugging Face Llama/Qwen tensor names): model.embed_tokens.weight [vocab, hidden]; per layer\n"
    "input_layernorm / post_attention_layernorm weights [hidden], self_attn q/k/v/o projections\n"
    "(q/k/v with biases; k and v [kv, hidden]), mlp gate/up [ffn, hidden] and down [hidden, ffn];\n"
    "model.norm.weight and lm_head.weight [vocab, hidden]. Matrices are N(0, 1/fan_in) (the\n"
    "embedding N(0, 0.02^2)) with every 97th input channel an outlier channel (8-20x), norms\n"
    "N(1, 0.05^2), biases N(0, 0.02^2). The same options give the same bytes on every machine.\n"
    "OUT's extension picks the format (.safetensors, .bpk or .gguf); tensors are generated and written\n"
    "one at a time.\n"
    "\n"
    "  defaults: --layers 4 --hidden 512 --ffn 1536 --kv 128 --vocab 4096 --dtype bf16 --seed 42\n";

int cmd_synth(int argc, char **argv) {
    const char *cmd = "synth";
    const char *v[7] = {NULL};
    bool force = false;
    const cli_opt opts[] = {
        {"layers", true, &v[0], NULL, NULL, NULL}, {"hidden", true, &v[1], NULL, NULL, NULL},
        {"ffn", true, &v[2], NULL, NULL, NULL},    {"kv", true, &v[3], NULL, NULL, NULL},
        {"vocab", true, &v[4], NULL, NULL, NULL},  {"seed", true, &v[5], NULL, NULL, NULL},
        {"dtype", true, &v[6], NULL, NULL, NULL},  {"force", false, NULL, &force, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (npos != 1) return cli_usage_error(cmd, "expected OUT");
    cli_synth_config c;
    cli_synth_default(&c);
    size_t *dims[5] = {&c.layers, &c.hidden, &c.ffn, &c.kv, &c.vocab};
    for (int i = 0; i < 5; i++) {
        long x;
        if (!v[i]) continue;
        if (!cli_parse_int(v[i], 1, 1L << 24, &x)) return cli_usage_error(cmd, "--%s '%s' is not 1..16777216", opts[i].name, v[i]);
        *dims[i] = (size_t)x;
    }
    long seed;
    if (v[5]) {
        if (!cli_parse_int(v[5], 0, 0x7fffffffL, &seed)) return cli_usage_error(cmd, "--seed '%s' is not a number", v[5]);
        c.seed = (uint64_t)seed;
    }
    if (v[6]) {
        if (strcmp(v[6], "f32") == 0) c.elem = QTK_ELEM_F32;
        else if (strcmp(v[6], "f16") == 0) c.elem = QTK_ELEM_F16;
        else if (strcmp(v[6], "bf16") == 0) c.elem = QTK_ELEM_BF16;
        else return cli_usage_error(cmd, "--dtype '%s' is not f32, f16 or bf16", v[6]);
    }
    qtk_ckpt_format fmt = qtk_ckpt_format_from_path(pos[0]);
    if (fmt == QTK_CKPT_UNKNOWN) return cli_usage_error(cmd, "cannot tell the format of '%s': name it .bpk, .safetensors or .gguf", pos[0]);
    qtk_status st = cli_synth_checkpoint(pos[0], fmt, &c, force);
    if (st) return cli_fail(cmd, st, "cannot write '%s'", pos[0]);
    return CLI_OK;
}
