/* fuzz_util.h — what the libFuzzer harnesses share: failing loudly (a finding), a private
 * scratch directory, the ISA levels of this machine, and the checkpoint oracles (every tensor
 * opened, loaded and read; the checkpoint converted and read back).
 *
 * A harness calls FZ_CHECK for every property it asserts; a violated one prints what and
 * aborts, which libFuzzer records as a crash with the input that caused it. */
#ifndef QTK_FUZZ_UTIL_H
#define QTK_FUZZ_UTIL_H

#include "qtk.h"
#include "qtk_ckpt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#  define FZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define FZ_PRINTF(a, b)
#endif


/* Prints "finding: <message>" (and the last qtk error) and aborts. */
_Noreturn void fz_fail(const char *file, int line, const char *fmt, ...) FZ_PRINTF(3, 4);
#define FZ_CHECK(cond, ...)                                                                                        \
    do {                                                                                                           \
        if (!(cond)) fz_fail(__FILE__, __LINE__, __VA_ARGS__);                                                     \
    } while (0)

/* A directory of this process for files the harness writes (removed at exit): under
 * $QTK_FUZZ_TMP, else /dev/shm when writable, else $TMPDIR or /tmp. */
const char *fz_dir(void);
/* fz_dir()/name, in a static buffer (one of four, rotated). */
const char *fz_path(const char *name);
void fz_write_file(const char *path, const void *data, size_t len);
/* Removes everything inside dir (not dir itself); recursive. */
void fz_clear_dir(const char *dir);
/* Fails if a temporary output (".qtk-tmp-") is left anywhere under dir. */
void fz_check_no_temporaries(const char *dir);

/* The kernel levels this machine runs, scalar first (at most 5). */
int fz_isa_levels(qtk_isa *levels);

/* Reads input bytes front to back; past the end it yields zeros. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
} fz_reader;
uint8_t fz_u8(fz_reader *r);
uint32_t fz_u32(fz_reader *r);

/* xorshift64 (the shifts drop no bits, as -fsanitize=unsigned-shift-base wants) */
static inline uint64_t fz_next(uint64_t r) {
    r ^= (r & (UINT64_MAX >> 13)) << 13;
    r ^= r >> 7;
    r ^= (r & (UINT64_MAX >> 17)) << 17;
    return r;
}

/* The first 8 bytes of a 64-bit FNV-1a of the input: a stable choice for options. */
uint64_t fz_hash(const uint8_t *p, size_t n);

/* The table of an open checkpoint, nothing loaded: facts (within size, the input's length,
 * when it was opened from memory; 0 otherwise), metadata found by key, scalars, and every
 * tensor named, found at its own index, with type and shape strings, a shard in range, and
 * a byte count its layout (quantized) or its element width (raw) gives. Returns the count. */
size_t fz_ckpt_walk(qtk_ckpt *c, size_t size);

/* Every accessor of an open checkpoint (fz_ckpt_walk first): each tensor listed, found by name, loaded (bytes
 * valid for its scheme), as a qtk_tensor equal to the view, copied, and read as values
 * (quantized and float tensors of at most max_values elements); metadata, scalars, facts,
 * Hub info. Statuses must be QTK_OK or a data error (FORMAT, VALUE, LENGTH, SHAPE,
 * UNSUPPORTED, NOTFOUND, SCHEME) with a message; never INTERNAL. Returns the number of
 * tensors that loaded. */
size_t fz_ckpt_exercise(qtk_ckpt *c, size_t max_values);

/* Converts the checkpoint at in (already known to open) into out in format fmt (a directory
 * of shards when fmt is UNKNOWN and out has no extension; layout for Hub outputs), and checks
 * the result: nothing but out appears, no temporary is left; when the conversion succeeds,
 * out opens with the same tensor names, and each tensor is the same type with the same
 * bytes, or (a type the format cannot hold, dequantized) the same values. A conversion may
 * fail only with a data error the output format explains (UNSUPPORTED, FORMAT, ARG, SHAPE,
 * VALUE), and then leaves no output. */
void fz_ckpt_roundtrip(const char *in, const char *out, qtk_ckpt_format fmt, qtk_hub_layout layout);

/* A status a parser may return for malformed input. */
bool fz_data_error(qtk_status st);



/* One checkpoint file's bytes (ext: ".bpk", ".safetensors", ".gguf"): opened from memory
 * (detected and as stored) and every accessor exercised; written as a file and opened again;
 * converted to its own format and one other, each read back and compared. */
void fz_ckpt_file(const uint8_t *data, size_t size, const char *ext);
#endif
