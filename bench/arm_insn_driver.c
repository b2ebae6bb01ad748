/* arm_insn_driver.c — one qtk operation, repeated, for counting instructions under qemu-user
 * (bench/arm_insn.sh): the difference between REPS = 2 and REPS = 1 is one operation alone.
 *
 *   arm_insn_driver quantize|dequantize|gemv-exact|gemv-fast SPEC N K REPS
 *
 * W is [N, K] of a fixed pseudo-random normal-ish distribution, x is [1, K]; one thread. */
#include "qtk.h"
#include "qtk_matmul.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    int32_t a = (int32_t)(*s >> 40) - (1 << 23), b = (int32_t)((*s >> 16) & 0xffffff) - (1 << 23);
    return (float)(a + b) * 0x1p-24f; /* a triangular distribution on (-1, 1) */
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s quantize|dequantize|gemv-exact|gemv-fast SPEC N K REPS\n", argv[0]);
        return 2;
    }
    const char *op = argv[1];
    size_t N = strtoull(argv[3], NULL, 10), K = strtoull(argv[4], NULL, 10);
    int reps = atoi(argv[5]);
    qtk_scheme s;
    if (qtk_scheme_parse(argv[2], &s) != QTK_OK) {
        fprintf(stderr, "%s\n", qtk_last_error());
        return 1;
    }
    qtk_set_threads(1);
    float *w = malloc(N * K * sizeof(float)), *x = malloc(K * sizeof(float)), *y = malloc(N * K * sizeof(float));
    uint64_t seed = 7;
    for (size_t i = 0; i < N * K; i++) w[i] = next(&seed);
    for (size_t i = 0; i < K; i++) x[i] = next(&seed);
    size_t shape[2] = {N, K};
    qtk_tensor *t = NULL;
    if (strcmp(op, "quantize") != 0 && qtk_quantize(w, shape, 2, &s, NULL, &t) != QTK_OK) {
        fprintf(stderr, "%s\n", qtk_last_error());
        return 1;
    }
    qtk_matmul_options o = {QTK_MM_NK, strcmp(op, "gemv-fast") == 0 ? QTK_PRECISION_FAST : QTK_PRECISION_EXACT, 1};
    for (int r = 0; r < reps; r++) {
        qtk_status st;
        if (strcmp(op, "quantize") == 0) {
            qtk_tensor *q = NULL;
            st = qtk_quantize(w, shape, 2, &s, NULL, &q);
            qtk_tensor_free(q);
        } else if (strcmp(op, "dequantize") == 0) {
            st = qtk_dequantize(t, QTK_DTYPE_F32, y, N * K);
        } else {
            st = qtk_matmul(t, x, QTK_DTYPE_F32, 1, K, NULL, y, N, &o);
        }
        if (st != QTK_OK) {
            fprintf(stderr, "%s\n", qtk_last_error());
            return 1;
        }
    }
    printf("%s %s isa %s: %g\n", op, argv[2], qtk_isa_name(qtk_get_isa()), (double)y[0]);
    qtk_tensor_free(t);
    free(w);
    free(x);
    free(y);
    return 0;
}
