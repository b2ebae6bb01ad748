/* ggml_lattice.c — ggml's side of the lattice types' checks (docs/lattice.md): quantizes the
 * same made-up weights to IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M with ggml's own
 * quantizer and an importance matrix, writes them to one GGUF file with ggml's writer, and
 * beside it ggml's to_float of every tensor, the inputs and the importance matrix.
 *
 *   ggml_lattice OUT_DIR [ROWS COLS SEED]
 *
 * writes OUT_DIR/lattice.gguf, OUT_DIR/<tensor>.expected.f32 (ggml's dequantization, raw
 * little-endian f32), OUT_DIR/<tensor>.input.f32 and OUT_DIR/imatrix.f32 (COLS weights).
 * Built by bench/ggml_lattice.sh against a ggml build; never part of CI. The small file it
 * makes with the defaults is committed as tests/data/lattice (test_lattice reads it). */
#include <ggml.h>
#include <gguf.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((rng >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform())); }

static int write_f32(const char *dir, const char *name, const char *what, const float *x, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.f32", dir, name, what);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 5) {
        fprintf(stderr, "usage: %s OUT_DIR [ROWS COLS SEED]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    const int64_t rows = argc == 5 ? atoll(argv[2]) : 8, cols = argc == 5 ? atoll(argv[3]) : 512;
    if (argc == 5) rng ^= (uint64_t)atoll(argv[4]) * 0x2545f4914f6cdd1dull;
    static const enum ggml_type types[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                                           GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M};
    const size_t nt = sizeof types / sizeof types[0], n = (size_t)(rows * cols);
    float *im = malloc(cols * sizeof(float)), *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    for (int64_t c = 0; c < cols; c++) im[c] = (float)(0.05 + uniform() * uniform() * 4.0);
    struct gguf_context *g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "qtk-lattice-check");
    gguf_set_val_u32(g, "general.quantization_version", 2);
    struct ggml_init_params ip = {.mem_size = nt * (ggml_tensor_overhead() + 64) + 1024, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    void *bufs[16];
    int rc = write_f32(dir, "imatrix", "weights", im, (size_t)cols);
    for (size_t t = 0; t < nt && !rc; t++) {
        for (size_t i = 0; i < n; i++) x[i] = gauss() * ((i % (size_t)cols) % 37 == 0 ? 6.0f : 1.0f);
        const size_t bytes = ggml_row_size(types[t], cols) * (size_t)rows;
        bufs[t] = malloc(bytes);
        ggml_quantize_init(types[t]);
        ggml_quantize_chunk(types[t], x, bufs[t], 0, rows, cols, im);
        ggml_get_type_traits(types[t])->to_float(bufs[t], y, (int64_t)n);
        char name[64];
        snprintf(name, sizeof name, "t.%s", ggml_type_name(types[t]));
        struct ggml_tensor *tt = ggml_new_tensor_2d(ctx, types[t], cols, rows);
        ggml_set_name(tt, name);
        gguf_add_tensor(g, tt);
        gguf_set_tensor_data(g, name, bufs[t]);
        rc = write_f32(dir, name, "input", x, n) || write_f32(dir, name, "expected", y, n);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/lattice.gguf", dir);
    if (!rc && !gguf_write_to_file(g, path, false)) {
        fprintf(stderr, "cannot write %s\n", path);
        rc = 1;
    }
    if (!rc) printf("%s: %zu tensors [%lld, %lld]\n", path, nt, (long long)rows, (long long)cols);
    return rc;
}
