/* hub.h — Hugging Face Hub checkpoints as they are published.
 *
 * Quantized models on the Hub are safetensors files in a handful of conventions
 * (../shared/formats/HUB_LAYOUTS.md): a quantized weight is stored as several tensors — values,
 * block scales, a global scale, sometimes a shape or a JSON blob — named by suffixes, with the
 * rest of the meaning in config.json's quantization_config (or hf_quant_config.json). Large
 * models are sharded: model.safetensors.index.json maps every tensor name to its file, and a
 * weight's scales may sit in another shard than the weight.
 *
 * Reading: a .safetensors file, an index, or a directory: detect the layout (config first,
 * then tensor names), and present ONE logical
 * checkpoint in which each quantized weight and its companions are a single quantized tensor
 * whose scheme is the exact qtk equivalent (HUB_LAYOUTS.md §8.1) holding the same bits —
 * rearranged only where a convention differs from Burn's byte layout (compressed-tensors'
 * offset-binary ints, bitsandbytes' high-nibble-first bytes and double-quantized absmax,
 * compressed-tensors' divisor global scale). What has no exact qtk form (asymmetric zero
 * points, activation-order groups, per-expert globals) is dequantized to F32 on load, and
 * the checkpoint carries a notice saying so for that tensor.
 *
 * Writing: qtk__hub_writer_* write a description in one layout (qtk's own convention, or a
 * Hub one), as one file or as shards with an index, plus the config JSON the layout needs;
 * a tensor whose scheme the layout cannot hold is refused before anything is written, with
 * the reason. Reading a Hub checkpoint and writing it in the same layout reproduces every
 * tensor's bytes. */
#ifndef QTK_HUB_H
#define QTK_HUB_H

#include "io/checkpoint.h"

/* Opening (ckpt/open.c decides which applies; the layout types are in qtk_ckpt.h):
 * a directory (its index if it has one, else its .safetensors files), an index (its
 * weight_map's shards), or one safetensors file c already opened (path: where it lies, for the
 * configs beside it; NULL for a buffer). layout AUTO detects (config first, then tensor
 * names); NONE lists the tensors as stored; any other reads the files in that convention (an
 * error if they do not follow it). open_file takes c over, closing it on failure. */
qtk_status qtk__hub_open_dir(const char *path, qtk_hub_layout layout, qtk_ckpt **out);
qtk_status qtk__hub_open_index(const char *index, qtk_hub_layout layout, qtk_ckpt **out);
qtk_status qtk__hub_open_file(qtk_ckpt *c, const char *path, qtk_hub_layout layout, qtk_ckpt **out);

/* Dequantizes tensor i from its loaded view v into out (numel values of f32, f16 or bf16).
 * Where the stored convention's reference computes values qtk's scheme reproduces only to an
 * ulp (compressed-tensors' divisor global scale), this uses the convention's own formula, so
 * the output equals the reference; everywhere else it is qtk_dequantize_bytes. */
qtk_status qtk__hub_dequantize(const qtk_ckpt *c, size_t i, const qtk_ckpt_view *v, qtk_dtype dtype, void *out);

/* ---- writing ---- */

typedef void (*qtk__hub_notice_fn)(void *ctx, const char *tensor, const char *text);

typedef struct qtk__hub_write_opts {
    qtk_hub_layout layout;      /* AUTO or QTK: qtk's convention */
    size_t max_shard_bytes;     /* > 0: shards of at most this many tensor bytes (a larger tensor gets its own) */
    const qtk_ckpt *source;     /* optional: the checkpoint the description was made from; its
                                   shard files are mirrored (when max_shard_bytes is 0) and its
                                   config.json carried over */
    int force;                  /* replace existing output files */
    qtk__hub_notice_fn notice;   /* optional: per-tensor remarks (e.g. an inexact global scale) */
    void *ctx;
    const volatile sig_atomic_t *cancel; /* optional: cancels the commit when set */
} qtk__hub_write_opts;

typedef struct qtk__hub_writer qtk__hub_writer;

/* The Hub layout (its name) the tensor names of d would be read as, or NULL. */
const char *qtk__hub_names_suggest(const qtk__desc *d);

/* true if layout can store tensor t (its scheme); else false with the reason in why. */
bool qtk__hub_can_hold(qtk_hub_layout layout, const qtk_ckpt_tensor *t, char *why, size_t cap);

/* true when out names a directory: an existing one, a path ending in '/', or one whose last
 * component has no extension. */
bool qtk__hub_out_is_dir(const char *out);

/* Plans the whole output (every tensor fitted to the layout, shard files, index, config)
 * and creates it in temporary files; nothing appears at out before commit. out is a
 * .safetensors file (config files go beside it) or a directory. */
qtk_status qtk__hub_writer_open(const char *out, const qtk__desc *d, const qtk__hub_write_opts *o,
                               qtk__hub_writer **w);
/* The next tensor's bytes, in description order (Burn's layout for quantized tensors). */
qtk_status qtk__hub_writer_put(qtk__hub_writer *w, const void *bytes, size_t len);
/* Moves everything into place; on error nothing is left behind. Frees w. */
qtk_status qtk__hub_writer_commit(qtk__hub_writer *w);
void qtk__hub_writer_abort(qtk__hub_writer *w);
size_t qtk__hub_writer_shards(const qtk__hub_writer *w);

/* A whole description whose bytes are in memory (tests, small files). */
qtk_status qtk__hub_write(const char *out, const qtk__desc *d, const void *const *bytes,
                         const qtk__hub_write_opts *o);

#endif
