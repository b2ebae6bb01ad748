/* convert.h — checkpoint to checkpoint: each tensor kept, quantized, re-quantized or
 * dequantized as a qtk__select decides, streamed one tensor at a time from a mapped input
 * into an all-or-nothing output. */
#ifndef QTK_TOOLS_CONVERT_H
#define QTK_TOOLS_CONVERT_H

#include "hub/hub.h"
#include "ops/select.h"

typedef struct qtk_progress {
    size_t done, total;             /* tensors */
    size_t bytes_done, bytes_total; /* input bytes */
} qtk_progress;

typedef void (*qtk_progress_fn)(void *ctx, const qtk_progress *p);

typedef struct qtk__convert_opts {
    const qtk__select *select;
    qtk_ckpt_format out_format; /* QTK_CKPT_UNKNOWN: by the output's extension */
    int force;                  /* replace an existing output */
    int threads;                /* 0: the library default */
    qtk_progress_fn progress;   /* optional, called after each tensor */
    /* optional, called once per tensor before any data is written */
    void (*plan)(void *ctx, const qtk_ckpt_tensor *in, const qtk_ckpt_tensor *out, const qtk__decision *d);
    /* optional, called after each re-quantization — a quantized tensor, or one a reader decoded
     * from a quantized type (GGUF's Q4_K), quantized to another scheme — with its SQNR in dB
     * against the values it had (+inf when nothing changed) */
    void (*requantized)(void *ctx, const qtk_ckpt_tensor *in, const qtk_ckpt_tensor *out, double sqnr_db);
    void *ctx;
    /* Hub output (io/hub.h): a layout other than AUTO, a shard size, or an output that is a
     * directory write safetensors in that layout (AUTO: qtk's), as shards when asked or when
     * the input is sharded, with the index and config files beside them. */
    qtk_hub_layout layout;
    size_t max_shard_bytes;
    /* optional: remarks about single tensors (dequantized on read, inexact global scales) */
    qtk__hub_notice_fn notice;
} qtk__convert_opts;

typedef struct qtk__convert_stats {
    size_t tensors, quantized, dequantized, kept;
    size_t in_bytes, out_bytes; /* tensor bytes, containers excluded */
    qtk_ckpt_format in_format, out_format;
    qtk_hub_layout in_layout, out_layout;
    size_t in_files, out_files;  /* shards */
} qtk__convert_stats;

qtk_status qtk__convert_file(const char *in, const char *out, const qtk__convert_opts *o, qtk__convert_stats *stats);

#endif
