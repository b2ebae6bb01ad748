/* fuzz_safetensors.c — safetensors files (.safetensors): opened from memory and as a file, every tensor loaded,
 * read as a qtk_tensor, copied and read as values; converted to .safetensors and one other format,
 * and read back the same (fuzz_util.h, fz_ckpt_file, says exactly what is checked). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 21)) return 0;
    fz_ckpt_file(data, size, ".safetensors");
    return 0;
}
