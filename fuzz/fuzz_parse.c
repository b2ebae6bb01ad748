/* fuzz_parse.c — the fast parser harnesses: one checkpoint container's header, metadata and
 * tensor table, opened from memory, and nothing decoded. Built once per format with
 * FZ_PARSE_EXT (".bpk": fuzz_burnpack_parse, ".safetensors": fuzz_safetensors_parse,
 * ".gguf": fuzz_gguf_parse); the whole-file harnesses (fuzz_burnpack.c, ...) keep the deep
 * oracles (every tensor loaded, dequantized, converted and read back).
 *
 * Oracles: the input opens (layout detected, and as stored) or fails with a data error and a
 * message; fz_ckpt_walk's table checks hold (facts within the input, metadata found by key,
 * every tensor found at its own index, with type and shape strings, an offset within the
 * input, the byte count its layout or element width gives); the two opens agree on the count
 * of stored tensors or fold them (the detected open never lists more than the stored one). */
#include "fuzz_util.h"


#ifndef FZ_PARSE_EXT
#  error "FZ_PARSE_EXT (the container's extension) is not defined"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 21)) return 0;
    const char *name = "fuzz" FZ_PARSE_EXT;
    qtk_ckpt *c = NULL, *raw = NULL;
    qtk_clear_error();
    qtk_status st = qtk_ckpt_open_memory(data, size, name, NULL, &c);
    if (st) FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "open: %s without a data error", qtk_status_name(st));
    qtk_open_options none = {.layout = QTK_LAYOUT_NONE};
    qtk_status st2 = qtk_ckpt_open_memory(data, size, name, &none, &raw);
    if (st2) FZ_CHECK(fz_data_error(st2) && qtk_last_error()[0], "open as stored: %s", qtk_status_name(st2));
    size_t n = st ? 0 : fz_ckpt_walk(c, size), n_raw = st2 ? 0 : fz_ckpt_walk(raw, size);
    /* a Hub layout folds stored tensors into fewer; it never invents more */
    if (!st && !st2) FZ_CHECK(n <= n_raw, "%zu tensors detected, %zu stored", n, n_raw);
    qtk_ckpt_close(c);
    qtk_ckpt_close(raw);
    return 0;
}
