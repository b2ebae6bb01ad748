/* fuzz_parse.c — the fast parser harnesses: one checkpoint container's header, metadata and
 * tensor table, opened from memory, and nothing decoded. Built once per format with
 * FZ_PARSE_EXT (".bpk": fuzz_burnpack_parse, ".safetensors": fuzz_safetensors_parse,
 * ".gguf": fuzz_gguf_parse); the whole-file harnesses (fuzz_burnpack.c, ...) keep the deep
 * oracles (every tensor loaded, dequantized, converted and read back).
 *
 * Oracles: the input opens (layout detected, and as stored) or fails with a data error and a
 * message; the container facts are in range (header and data start within the input); every
 * metadata key is found by qtk_ckpt_meta_get; every tensor has a name found at its own index,
 * a type string and a shape string, a shard index in range, an offset within the input, and
 * for a quantized tensor a layout whose total is the tensor's byte count; raw tensors take
 * numel × bits / 8 bytes (rounded up); the two opens agree on the count of stored tensors or
 * fold them (the detected open never lists more than the stored one). */
#include "fuzz_util.h"

#include <stdio.h>
#include <string.h>

#ifndef FZ_PARSE_EXT
#  error "FZ_PARSE_EXT (the container's extension) is not defined"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(qtk_ckpt *c, size_t size) {
    qtk_ckpt_facts f;
    qtk_ckpt_facts_of(c, &f);
    FZ_CHECK(f.file_bytes == size, "facts: %zu file bytes for an input of %zu", f.file_bytes, size);
    FZ_CHECK(f.header_bytes <= size && f.data_start <= size, "facts: header %zu, data at %zu, input %zu", f.header_bytes,
             f.data_start, size);
    FZ_CHECK(memchr(f.note, '\0', sizeof f.note) != NULL, "facts: the note is not terminated");
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    FZ_CHECK(hi.n_shards == 1, "a file from memory with %zu shards", hi.n_shards);
    for (size_t i = 0; i < qtk_ckpt_meta_count(c); i++) {
        const char *k = NULL, *v = NULL;
        FZ_CHECK(qtk_ckpt_meta_at(c, i, &k, &v) == QTK_OK && k && v, "metadata %zu", i);
        FZ_CHECK(qtk_ckpt_meta_get(c, k) != NULL, "metadata key '%s' not found", k);
    }
    for (size_t i = 0; i < qtk_ckpt_scalar_count(c); i++) {
        const qtk_ckpt_scalar *s = qtk_ckpt_scalar_at(c, i);
        FZ_CHECK(s && s->name && s->kind <= QTK_SCALAR_BOOL, "scalar %zu", i);
    }
    size_t n = qtk_ckpt_count(c);
    FZ_CHECK(qtk_ckpt_tensor_at(c, n) == NULL, "tensor_at(count) is not NULL");
    for (size_t i = 0; i < n; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        FZ_CHECK(t && t->name, "tensor %zu", i);
        char type[256], shape[256];
        qtk_ckpt_type_string(t, type, sizeof type);
        qtk_shape_format(t->shape, t->rank, shape, sizeof shape);
        FZ_CHECK(type[0] && shape[0], "tensor '%s': no type or shape string", t->name);
        size_t j = SIZE_MAX;
        FZ_CHECK(qtk_ckpt_find(c, t->name, &j) == QTK_OK && j == i, "tensor %zu '%s' is found at %zu", i, t->name, j);
        FZ_CHECK(qtk_ckpt_shard_of(c, i) == 0, "tensor '%s' in shard %zu", t->name, qtk_ckpt_shard_of(c, i));
        FZ_CHECK(qtk_ckpt_offset_of(c, i) <= size, "tensor '%s' at offset %zu of %zu", t->name, qtk_ckpt_offset_of(c, i),
                 size);
        if (t->quantized) {
            qtk_layout L;
            FZ_CHECK(qtk_layout_compute(&t->scheme, t->shape, t->rank, &L) == QTK_OK && L.total_bytes == t->nbytes,
                     "tensor '%s' (%s %s): %zu bytes, but its layout does not give that", t->name, type, shape, t->nbytes);
        } else if (!t->value_shape) {
            unsigned bits = qtk_elem_bits(t->elem);
            FZ_CHECK(bits && t->nbytes == (t->numel / 8 * bits + (t->numel % 8 * bits + 7) / 8),
                     "tensor '%s' (%s %s): %zu bytes for %zu elements of %u bits", t->name, type, shape, t->nbytes,
                     t->numel, bits);
        }
    }
    return n;
}

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
    size_t n = st ? 0 : walk(c, size), n_raw = st2 ? 0 : walk(raw, size);
    /* a Hub layout folds stored tensors into fewer; it never invents more */
    if (!st && !st2) FZ_CHECK(n <= n_raw, "%zu tensors detected, %zu stored", n, n_raw);
    qtk_ckpt_close(c);
    qtk_ckpt_close(raw);
    return 0;
}
