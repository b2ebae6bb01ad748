/* synth.h — deterministic synthetic weights: a Gaussian bulk with a few outlier input
 * channels, the distribution of trained transformer weight matrices. */
#ifndef QTK_SYNTH_H
#define QTK_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct qtk_rng {
    uint64_t s;
} qtk_rng;

uint64_t qtk_rng_next(qtk_rng *r);
/* Uniform in [0, 1). */
double qtk_rng_uniform(qtk_rng *r);
/* Standard normal. */
double qtk_rng_normal(qtk_rng *r);

/* rows x cols weights, N(0, std^2) with every outlier_every-th column (0: none) scaled by
 * a factor between 8 and 20. Same seed, same values, on every machine. */
void qtk_synth_weights(float *x, size_t rows, size_t cols, float std, size_t outlier_every, uint64_t seed);

#endif
