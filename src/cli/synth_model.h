/* synth_model.h — a deterministic, transformer-like checkpoint to try conversions on:
 * token embedding, `layers` blocks of attention (q/k/v/o, with q/k/v biases) and a gated MLP
 * (gate/up/down), RMSNorm weights, a final norm and an output head. Weight matrices are a
 * Gaussian bulk with a few outlier input channels (cli_synth_weights), the distribution
 * that makes low-bit formats hard; norms sit near 1 and biases near 0, all 1-D. It is
 * written tensor by tensor, so a model of many GiB needs memory for one matrix only. */
#ifndef QTK_SYNTH_MODEL_H
#define QTK_SYNTH_MODEL_H

#include "qtk_ckpt.h"

typedef struct cli_synth_config {
    size_t layers, hidden, ffn, kv, vocab;
    qtk_elem elem;   /* F32, F16 or BF16 */
    uint64_t seed;
} cli_synth_config;

/* layers 4, hidden 512, ffn 1536, kv 128, vocab 4096, BF16, seed 42 */
void cli_synth_default(cli_synth_config *c);
qtk_status cli_synth_checkpoint(const char *path, qtk_ckpt_format fmt, const cli_synth_config *c, int force);

#endif
