/* synth.h — deterministic synthetic weights: a Gaussian bulk with a few outlier input
 * channels, the distribution of trained transformer weight matrices. */
#ifndef QTK_SYNTH_H
#define QTK_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_rng {
    uint64_t s;
} cli_rng;

uint64_t cli_rng_next(cli_rng *r);
/* Uniform in [0, 1). */
double cli_rng_uniform(cli_rng *r);
/* Standard normal. */
double cli_rng_normal(cli_rng *r);

/* rows x cols weights, N(0, std^2) with every outlier_every-th column (0: none) scaled by
 * a factor between 8 and 20. Same seed, same values, on every machine. */
void cli_synth_weights(float *x, size_t rows, size_t cols, float std, size_t outlier_every, uint64_t seed);

#endif
