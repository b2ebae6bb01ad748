/* quantize_matmul.c — quantize a weight matrix to NVFP4, multiply activations by it, and
 * compare with the product of the float weights.
 *
 *     quantize_matmul [SPEC]        (default nvfp4; any scheme or preset qtk knows) */
#include <qtk.h>
#include <qtk_matmul.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 256, K = 512, M = 4 };

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "nvfp4";
    qtk_scheme s;
    if (qtk_scheme_parse(spec, &s) != QTK_OK) {
        fprintf(stderr, "%s\n", qtk_last_error());
        return 1;
    }
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * M * K);
    float *y = malloc(sizeof(float) * M * N), *wq = malloc(sizeof(float) * N * K);
    if (!w || !x || !y || !wq) return 1;
    /* a smooth weight matrix and activations, the same on every run */
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)sin(0.37 * (double)i) * (float)(1 + i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)cos(0.11 * (double)i);

    size_t shape[2] = {N, K};
    qtk_tensor *t = NULL;
    qtk_matmul_options o = {0}; /* layout [N, K], exact precision */
    if (qtk_quantize(w, shape, 2, &s, NULL, &t) != QTK_OK ||
        qtk_matmul(t, x, QTK_DTYPE_F32, M, K, NULL, y, N, &o) != QTK_OK ||
        qtk_dequantize(t, QTK_DTYPE_F32, wq, (size_t)N * K) != QTK_OK) {
        fprintf(stderr, "%s\n", qtk_last_error());
        return 1;
    }
    /* against the float weights (what quantizing cost), and against the dequantized weights'
     * product within qtk_matmul.h's bound gamma(K+1) * sum |x w'| (what matmul adds) */
    const double u = ldexp(1.0, -24), gamma = (K + 1) * u / (1 - (K + 1) * u);
    double err_q = 0, sig = 0, worst = 0; /* worst: the largest error as a fraction of its bound */
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double ref = 0, deq = 0, mag = 0;
            for (size_t k = 0; k < K; k++) {
                ref += (double)x[m * K + k] * w[n * K + k];
                deq += (double)x[m * K + k] * wq[n * K + k];
                mag += fabs((double)x[m * K + k] * wq[n * K + k]);
            }
            err_q += (y[m * N + n] - ref) * (y[m * N + n] - ref);
            if (mag > 0) worst = fmax(worst, fabs(y[m * N + n] - deq) / (gamma * mag));
            sig += ref * ref;
        }
    size_t nbytes = 0;
    qtk_tensor_bytes(t, &nbytes);
    printf("%s: W [%d, %d] in %zu bytes (%.3f bits/element); Y [%d, %d]: SQNR %.2f dB against the float weights; "
           "matmul's error at most %.2f of its documented bound\n",
           spec, N, K, nbytes, 8.0 * (double)nbytes / (N * K), M, N, 10 * log10(sig / err_q), worst);
    qtk_tensor_free(t);
    free(w), free(x), free(y), free(wq);
    return worst <= 1.0 ? 0 : 1;
}
