/* ckpt_util.h — helpers for the checkpoint tests: hex strings, temporary directories,
 * shared data files, a minimal CBOR emitter for hand-made (malformed) metadata, and the
 * error bound of a scheme. */
#ifndef QTK_CKPT_UTIL_H
#define QTK_CKPT_UTIL_H

#include "test.h"

#include "ckpt/formats.h"

#include <stdbool.h>

/* "a1 66 51.." (spaces allowed) -> malloc'ed bytes */
uint8_t *hex_bytes(const char *hex, size_t *n);
char *bytes_hex(const uint8_t *b, size_t n); /* malloc'ed lower-case hex */

/* A fresh directory under /tmp (removed by tmp_dir_remove) and paths in it. */
const char *tmp_dir_make(void);
void tmp_dir_remove(void);
const char *tmp_path(const char *name); /* valid for the next three calls */
const char *tmp_path_kept(const char *name); /* the same from a ring of four: valid for three more */
/* Runs `BIN ARGS` (ARGS formatted) in the temporary directory; its stdout and stderr land in
 * out and err (NUL-terminated, truncated to fit; either may be NULL) and stay in stdout.txt
 * and stderr.txt there. Returns the exit status, -1 if killed. */
int cli_run(const char *bin, char *out, size_t outcap, char *err, size_t errcap, const char *fmt, ...)
    QTK_TEST_PRINTF(6, 7);
bool file_exists(const char *path);
/* Names in the temporary directory containing `part` (0 if none). */
int tmp_dir_count(const char *part);
uint8_t *slurp(const char *path, size_t *n);

/* $QTK_SHARED_DIR/data/REL if it exists, else NULL. */
const char *shared_file(const char *rel);

/* A growable byte buffer with CBOR heads. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} cbuf;
void cb_raw(cbuf *b, const void *d, size_t n);
void cb_head(cbuf *b, unsigned major, uint64_t v); /* shortest head */
void cb_text(cbuf *b, const char *s);
void cb_u(cbuf *b, uint64_t v);
/* A burnpack file around metadata bytes and a data section (zero padding to 256). */
uint8_t *bpk_assemble(const uint8_t *meta, size_t mlen, const uint8_t *data, size_t dlen, size_t *n);
/* A safetensors file from a JSON header (padded to 8 with spaces) and a data section. */
uint8_t *st_assemble(const char *json, const uint8_t *data, size_t dlen, size_t *n);

/* Checks every element of a quantized tensor against its scheme's error bound:
 * |x - x'| <= half the grid step at x / e, times the effective scale e. Returns failures. */
size_t check_error_bound(const qtk_ckpt_tensor *t, const uint8_t *bytes, const float *x);

#endif
