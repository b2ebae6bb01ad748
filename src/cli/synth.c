/* synth.c — deterministic synthetic weights (splitmix64 + Box-Muller). */
#include "synth.h"

#include <math.h>

uint64_t cli_rng_next(cli_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double cli_rng_uniform(cli_rng *r) { return (double)(cli_rng_next(r) >> 11) * 0x1p-53; }

double cli_rng_normal(cli_rng *r) {
    double u = cli_rng_uniform(r), v = cli_rng_uniform(r);
    if (u < 0x1p-60) u = 0x1p-60;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void cli_synth_weights(float *x, size_t rows, size_t cols, float std, size_t outlier_every, uint64_t seed) {
    cli_rng r = {seed};
    float boost[64];
    for (size_t k = 0; k < 64; k++) boost[k] = (float)(8.0 + 12.0 * cli_rng_uniform(&r));
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) {
            float v = (float)cli_rng_normal(&r) * std;
            if (outlier_every && j % outlier_every == outlier_every / 2) v *= boost[(j / outlier_every) % 64];
            x[i * cols + j] = v;
        }
    }
}
