/* fuzz_hub.c — Hugging Face Hub checkpoints as multi-file directories: shards, an index and
 * the configs that select a layout (gpt-oss, ModelOpt, compressed-tensors, DeepSeek,
 * bitsandbytes, torchao, GPTQ, AWQ).
 *
 * Input: [n][name id][u16 length][bytes]... — up to six files, each one of the names below,
 * written into a fresh directory; the last byte chooses what is opened (the directory, its
 * index, or model.safetensors with the configs beside it) and how it is written back.
 *
 * Oracles (fuzz_util.h): the checkpoint opens or fails with a data error and a message;
 * every tensor loads, reads as a qtk_tensor and as values; converted to a directory (in the
 * layout read when qtk writes it, else qtk's convention; sometimes resharded) it reads back
 * with the same tensors, bytes or values, and nothing temporary is left.
 *
 * Built twice: fuzz_hub (the oracles above) and, with FZ_PARSE_ONLY, fuzz_hub_parse: the
 * index and configs parsed, the layout detected and the tensor table checked (fz_ckpt_walk,
 * both opens), nothing loaded or converted. */
#include "fuzz_util.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "config.json",
    "hf_quant_config.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors",
    "other.safetensors.index.json",
    "quantize_config.json",
    "quant_config.json",
};
#define N_NAMES (sizeof names / sizeof names[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > (1u << 21)) return 0;
    fz_clear_dir(fz_dir());
    const char *dir = fz_path("in");
    char dirbuf[600];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    if (mkdir(dirbuf, 0700) != 0) return 0;
    fz_reader r = {data, size - 1, 0};
    uint8_t how = data[size - 1];
    int nf = 1 + fz_u8(&r) % 6;
    bool have_model = false;
    for (int f = 0; f < nf && r.at < r.n; f++) {
        const char *nm = names[fz_u8(&r) % N_NAMES];
        size_t len = fz_u8(&r);
        len |= (size_t)fz_u8(&r) << 8;
        len |= (size_t)(fz_u8(&r) & 0x1f) << 16;
        if (len > r.n - r.at) len = r.n - r.at;
        char p[700];
        snprintf(p, sizeof p, "%s/%s", dirbuf, nm);
        fz_write_file(p, r.p + r.at, len);
        r.at += len;
        have_model |= strcmp(nm, "model.safetensors") == 0;
    }
    char in[700];
    if ((how & 3) == 1) snprintf(in, sizeof in, "%s/model.safetensors.index.json", dirbuf);
    else if ((how & 3) == 2 && have_model) snprintf(in, sizeof in, "%s/model.safetensors", dirbuf);
    else snprintf(in, sizeof in, "%s", dirbuf);
    qtk_ckpt *c = NULL;
    qtk_clear_error();
    qtk_status st = qtk_ckpt_open(in, NULL, &c);
    if (st) {
        FZ_CHECK(fz_data_error(st) || st == QTK_E_IO, "open failed with %s", qtk_status_name(st));
        FZ_CHECK(qtk_last_error()[0], "open failed without a message");
        return 0;
    }
#ifdef FZ_PARSE_ONLY
    size_t n = fz_ckpt_walk(c, 0);
    qtk_ckpt_close(c);
    qtk_open_options stored = {.layout = QTK_LAYOUT_NONE};
    st = qtk_ckpt_open(in, &stored, &c);
    FZ_CHECK(st == QTK_OK || fz_data_error(st), "open as stored failed with %s", qtk_status_name(st));
    /* a Hub layout folds stored tensors into fewer; it never invents more */
    if (!st) FZ_CHECK(n <= fz_ckpt_walk(c, 0), "%zu tensors detected, fewer stored", n);
    qtk_ckpt_close(c);
    (void)how;
#else
    fz_ckpt_exercise(c, (size_t)1 << 20);
    qtk_hub_info hi;
    qtk_ckpt_hub_info(c, &hi);
    qtk_hub_layout layout = hi.layout;
    qtk_ckpt_close(c);
    qtk_open_options none = {.layout = QTK_LAYOUT_NONE};
    st = qtk_ckpt_open(in, &none, &c);
    FZ_CHECK(st == QTK_OK || fz_data_error(st), "open as stored failed with %s", qtk_status_name(st));
    if (!st) fz_ckpt_exercise(c, (size_t)1 << 20);
    qtk_ckpt_close(c);
    /* written back: in the layout read (qtk writes all but torchao's), else qtk's convention */
    if (layout == QTK_LAYOUT_TORCHAO || layout == QTK_LAYOUT_NONE || (how & 4)) layout = QTK_LAYOUT_AUTO;
    fz_ckpt_roundtrip(in, fz_path("out"), QTK_CKPT_UNKNOWN, layout);
#endif
    return 0;
}
