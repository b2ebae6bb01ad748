/* hub_util.h — helpers for the Hub layout tests: hand-made safetensors files, raw tensor
 * access by name, and a tensor's dequantized values. */
#ifndef QTK_TEST_HUB_UTIL_H
#define QTK_TEST_HUB_UTIL_H

#include "ckpt_util.h"

#include "hub/hub.h"

/* One stored tensor of a hand-made file. */
typedef struct {
    const char *name, *dtype;
    size_t shape[4];
    int rank;
    const void *data;
    size_t len;
} st_entry_t;

/* Writes a safetensors file of these tensors (in this order) with optional __metadata__ JSON
 * ("" for none). Returns false on failure. */
bool st_write(const char *path, const st_entry_t *e, size_t n, const char *meta_json);
/* A whole file as a NUL-terminated string (malloc'ed), or NULL. */
char *text_read(const char *path);
/* Writes text to path. */
bool text_write(const char *path, const char *text);

/* Index of a tensor by name in a checkpoint's description, or SIZE_MAX. */
size_t tensor_index(const qtk_ckpt *c, const char *name);
/* A copy of a tensor's bytes (malloc'ed; NULL if absent). */
uint8_t *tensor_bytes(qtk_ckpt *c, const char *name, size_t *len);
/* Tensor name's values as f32 (quantized: dequantized; raw floats decoded). */
float *tensor_f32(qtk_ckpt *c, const char *name, size_t *n);

/* Writes every tensor of c, as read, into layout l at path (a file or a directory); an
 * error aborts the writer and leaves nothing. */
qtk_status hub_rewrite(qtk_ckpt *c, const char *path, qtk_hub_layout l);

/* A directory inside the test's temporary directory (created). */
const char *tmp_subdir(const char *name);

#endif
