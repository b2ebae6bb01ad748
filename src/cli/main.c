/* main.c — the qtk command-line tool: parses the command name and dispatches. */
#include "cli.h"

#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"demo", cmd_demo, "the main job: generate a checkpoint, convert it to nvfp4 burnpack, inspect, eval"},
    {"inspect", cmd_inspect, "list a checkpoint's tensors, dtypes/schemes, shapes, sizes, metadata"},
    {"convert", cmd_convert, "convert a checkpoint between formats and quantization schemes"},
    {"eval", cmd_eval, "measure bits/element, RMSE, max error and SQNR of schemes on a checkpoint"},
    {"synth", cmd_synth, "write a deterministic transformer-like checkpoint"},
    {"quantize", cmd_quantize, "quantize an f32 .npy array to a tensor's bytes (SPEC §5)"},
    {"dequantize", cmd_dequantize, "dequantize a tensor's bytes to a .npy array"},
    {"scheme", cmd_scheme, "explain a spec string and its byte layout on a shape"},
    {"bench", cmd_bench, "time quantize/dequantize per scheme against memory baselines"},
    {"matmul", cmd_matmul, "y = x · Wᵀ + b with W quantized under a scheme"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: qtk COMMAND [OPTIONS] [ARGS]\n\nqtk %s — the quantized tensor kit\n\ncommands:\n",
            qtk_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'qtk COMMAND --help' describes a command. Exit status: 0 ok, 1 failure, 2 bad usage.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(c, "--version") == 0 || strcmp(c, "version") == 0) {
        printf("qtk %s\n", qtk_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(c, commands[i].name) == 0) {
            cli_signals_install();
            int rc = commands[i].run(argc - 1, argv + 1);
            cli_signals_finish(); /* a command cancelled by a signal exits by it */
            return rc;
        }
    fprintf(stderr, "qtk: unknown command '%s'\n", c);
    usage(stderr);
    return CLI_USAGE;
}
