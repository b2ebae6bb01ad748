/* make_seeds.c — writes the fuzzers' seed corpora: fuzz_seeds OUT [DATA]
 *
 * OUT/<harness>/ gets small inputs made with qtk's own writers: every scheme family as
 * tensor bytes, spec strings, .npy variants, a tiny model as burnpack, safetensors (qtk's
 * convention and each Hub layout) and GGUF, Hub directories packed in fuzz_hub's container;
 * with DATA (../shared/data), also small subsets of the real files (a few tensors each).
 * The checked-in fuzz/corpus was made by `scripts/fuzz.sh --seeds`; the real files are added
 * whole at run time by scripts/fuzz.sh when they are present. */
#define _DEFAULT_SOURCE
#include "qtk.h"
#include "qtk_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *out_dir;

static void die(const char *what) {
    fprintf(stderr, "fuzz_seeds: %s: %s\n", what, qtk_last_error());
    exit(1);
}

static void put(const char *harness, const char *name, const void *data, size_t len) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", out_dir, harness);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/%s", out_dir, harness, name);
    FILE *f = fopen(p, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", p, strerror(errno));
        exit(1);
    }
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) exit(1);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static float rnd(uint64_t *s) {
    *s ^= (*s & (UINT64_MAX >> 13)) << 13, *s ^= *s >> 7, *s ^= (*s & (UINT64_MAX >> 17)) << 17; /* no bit shifted out: unsigned-shift-base */
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ---- tensor bytes: [family][rank][extents][flags][bytes] (fuzz_tensor.c's list) ---- */

static const char *const families[] = {
    "q8f", "q8s,block=32:f16", "q8s,block=*:f32,store=native", "q8f,block=7:bf16,store=u32:1", "q8s,store=u32:1",
    "q4f,block=32:f16", "q4s,block=16:bf16", "q4f,block=7:f16", "q4s,block=3:ue8m0,store=native",
    "q4f,store=u32:1,block=8:f16", "q4s,block=32:f16,store=packed:0", "q4f,block=4x8:f16", "q4s,block=64:f16,tensor=f32",
    "q4f,block=*x1:f32", "q2s,block=32:f16", "q2f,block=12:f32", "q2s,block=5:f16", "q2s,store=u32:2,block=5:bf16",
    "q2f,block=64:f32,store=native", "q2s,store=packed:1,block=4:f16", "q2s,block=*:f32",
    "e4m3", "e4m3,block=32:f16", "e4m3,block=128x128:f32,store=native", "e4m3,block=16:ue4m3,tensor=f32",
    "e5m2,block=32:ue8m0", "e5m2,block=9:f16,store=native", "e5m2,store=u32:1", "e2m1,block=16:f16",
    "e2m1,block=3:f32,store=packed:0", "e2m1,store=packed:1,block=4:f16", "e2m1,block=32:ue8m0,store=u32",
    "nvfp4", "mxfp4", "mxfp8", "nf4", "q8s,block=2x3:ue4m3", "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1",
    "q4f,table=iq4nl,block=32:f16", "q4f,table=nf4,block=*:f32", "q2f,table=t2x,block=8:f16",
    "q8f,table=t8x,block=16:f32", "q4s,table=t4x,block=5:bf16,store=native", "q2s,table=t2x,store=u32:1",
    "q4f,table=iq4nl,block=32:f32",
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static void tensor_seeds(void) {
    static const float t2[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    float t8[256], t4[16];
    for (int i = 0; i < 16; i++) t4[i] = (float)(i - 8) * 0.25f;
    for (int i = 0; i < 256; i++) t8[i] = (float)(i - 128) / 16.0f;
    if (qtk_table_register("t2x", t2, 4) || qtk_table_register("t4x", t4, 16) || qtk_table_register("t8x", t8, 256))
        die("tables");
    static const size_t shapes[][2] = {{8, 32}, {3, 17}, {16, 16}};
    uint64_t s = 7;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (size_t k = 0; k < 3; k++) {
            qtk_scheme sc;
            if (qtk_scheme_parse(families[f], &sc)) die(families[f]);
            size_t n = shapes[k][0] * shapes[k][1];
            float x[512];
            for (size_t i = 0; i < n; i++) x[i] = rnd(&s) * (i % 13 == 0 ? 8.0f : 1.0f);
            qtk_tensor *t = NULL;
            if (qtk_quantize(x, shapes[k], 2, &sc, NULL, &t)) continue; /* a shape the scheme does not fit */
            size_t len = 0;
            const uint8_t *b = qtk_tensor_bytes(t, &len);
            uint8_t buf[8192];
            if (len + 5 > sizeof buf) die("seed too large");
            buf[0] = (uint8_t)f;
            buf[1] = 2;
            buf[2] = (uint8_t)shapes[k][0];
            buf[3] = (uint8_t)shapes[k][1];
            buf[4] = 0;
            memcpy(buf + 5, b, len);
            char name[64];
            snprintf(name, sizeof name, "f%02zu-%zux%zu", f, shapes[k][0], shapes[k][1]);
            put("tensor", name, buf, len + 5);
            qtk_tensor_free(t);
        }
    /* a spec given as text, rank 3 */
    const char text[] = "\xff" "q4s,block=2x4:f16;" "\x03\x02\x03\x08\x01";
    put("tensor", "text-rank3", text, sizeof text - 1);
}

/* ---- Burn's serialized QuantScheme: every Burn-expressible family in both shapes, CBOR and
 * JSON, the whole {"QFloat": ...} dtype, a {"QtkQuant": spec} one ---- */

static void burn_scheme_seeds(void) {
    int k = 0;
    for (size_t f = 0; f < N_FAMILIES; f++) {
        qtk_scheme s;
        if (qtk_scheme_parse(families[f], &s)) die(families[f]);
        for (int form = 0; form < 2; form++) {
            uint8_t cb[512];
            char js[1024], name[64];
            size_t n;
            if (qtk_scheme_to_burn_cbor(&s, NULL, 0, (qtk_burn_form)form, cb, sizeof cb, &n) != QTK_OK) continue; /* '*' */
            snprintf(name, sizeof name, "cbor-%02d", k);
            put("burn_scheme", name, cb, n);
            if (qtk_scheme_to_burn_json(&s, NULL, 0, (qtk_burn_form)form, js, sizeof js, &n) != QTK_OK) die("json");
            snprintf(name, sizeof name, "json-%02d", k++);
            put("burn_scheme", name, js, n - 1);
        }
    }
    static const char qfloat[] = "{\"QFloat\":{\"value\":\"Q4S\",\"store\":\"Native\",\"mode\":\"Lookup\",\"tensor\":\"F16\","
                                 "\"block\":null}}";
    put("burn_scheme", "json-qfloat", qfloat, strlen(qfloat));
    static const uint8_t qtkq[] = {0xa1, 0x68, 'Q', 't', 'k', 'Q', 'u', 'a', 'n', 't', 0x64, 'q', '4', '_', 'k'};
    put("burn_scheme", "cbor-qtkquant", qtkq, sizeof qtkq);
    /* the first finding (a float where 'tensor' is read: libcbor asserted), kept as a seed */
    static const uint8_t float_tensor[] = {0xa5, 0x65, 'v', 'a', 'l', 'u', 'e', 0x63, 'Q', '4', 'S', 0x65, 's', 't',
                                           'o', 'r', 'e', 0x66, 'N', 'a', 't', 'i', 'v', 'e', 0x64, 'm', 'o', 'd',
                                           'e', 0x66, 'L', 'o', 'o', 'k', 'u', 'p', 0x66, 't', 'e', 'n', 's', 'o',
                                           'r', 0xfa, 0x65, 0x65, 0x64, 0x62, 0x42, 0x46, 0x31, 0x36};
    put("burn_scheme", "finding-float-tensor", float_tensor, sizeof float_tensor);
}

/* ---- spec strings ---- */

static void spec_seeds(void) {
    static const char *const more[] = {
        "Q4F,BLOCK=32:F16", "q8s,block=*x*:f32", "q4f,block=1x2x3x4x5:f16", "e4m3,tensor=f32",
        "q4f,block=65535:f32", "q2s,store=u32:7", "e2m1,block=16:ue4m3,tensor=f32,store=packed:0",
        "q4f,table=nf4,block=64:f32", "q8f,block=0:f16", "q4f,block=32:f16,block=16:f16", "nvfp5", "",
    };
    char name[32];
    for (size_t f = 0; f < N_FAMILIES; f++) {
        snprintf(name, sizeof name, "family-%02zu", f);
        put("spec", name, families[f], strlen(families[f]));
    }
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        snprintf(name, sizeof name, "more-%02zu", i);
        put("spec", name, more[i], strlen(more[i]));
    }
    static const char *const names[] = {"bf16", "ue8m0", "absmean", "F8_E4M3", "Bool(U32)", "compressed-tensors", "bitsandbytes"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(name, sizeof name, "name-%zu", i);
        put("spec", name, names[i], strlen(names[i]));
    }
}

/* ---- .npy ---- */

static void npy(const char *name, int major, const char *dict, const void *data, size_t dlen) {
    uint8_t b[4096];
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict) + 1, total = pre + hl;
    size_t pad = (64 - total % 64) % 64;
    hl += pad;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    if (major == 1) b[8] = (uint8_t)hl, b[9] = (uint8_t)(hl >> 8);
    else b[8] = (uint8_t)hl, b[9] = (uint8_t)(hl >> 8), b[10] = 0, b[11] = 0;
    memcpy(b + pre, dict, strlen(dict));
    memset(b + pre + strlen(dict), ' ', pad);
    b[pre + hl - 1] = '\n';
    memcpy(b + pre + hl, data, dlen);
    put("npy", name, b, pre + hl + dlen);
}

static void npy_seeds(void) {
    float f[12];
    for (int i = 0; i < 12; i++) f[i] = (float)i - 5.5f;
    uint16_t h[12];
    for (int i = 0; i < 12; i++) h[i] = (uint16_t)(0x3c00 + i * 0x100);
    double d[6] = {1.0, -2.5, 1e-40, 3e38, -0.0, 0.1};
    uint8_t be[24];
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        be[4 * i] = (uint8_t)(u >> 24), be[4 * i + 1] = (uint8_t)(u >> 16), be[4 * i + 2] = (uint8_t)(u >> 8),
                   be[4 * i + 3] = (uint8_t)u;
    }
    npy("f32-3x4", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", f, sizeof f);
    npy("f32-fortran", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2, 2), }", f, sizeof f);
    npy("f16-12", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (12,), }", h, sizeof h);
    npy("f64-v2", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", d, sizeof d);
    npy("f32-be", 3, "{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3), }", be, sizeof be);
    npy("scalar", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f, 4);
    npy("empty", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", f, 0);
}

/* ---- checkpoints ---- */

static char tmp[512];

static const char *tpath(const char *name) {
    static char b[4][700];
    static int k;
    k = (k + 1) % 4;
    snprintf(b[k], sizeof b[k], "%s/%s", tmp, name);
    return b[k];
}

/* A tiny model: an embedding, attention and MLP weights, a norm, a bias, an integer tensor. */
static void tiny_model(const char *path) {
    qtk_writer *w = NULL;
    if (qtk_writer_create(path, &(qtk_write_options){.force = 1}, &w)) die("writer");
    uint64_t s = 11;
    static float emb[16 * 64], wq[64 * 64], up[64 * 64], down[64 * 64], norm[64], bias[64];
    static uint16_t embh[16 * 64];
    for (size_t i = 0; i < 16 * 64; i++) emb[i] = rnd(&s);
    for (size_t i = 0; i < 16 * 64; i++) {
        uint32_t u;
        memcpy(&u, &emb[i], 4);
        embh[i] = (uint16_t)(u >> 16);
    }
    for (size_t i = 0; i < 64 * 64; i++) wq[i] = rnd(&s) * 0.1f;
    for (size_t i = 0; i < 64 * 64; i++) up[i] = rnd(&s) * 0.05f, down[i] = rnd(&s) * 0.05f;
    for (size_t i = 0; i < 64; i++) norm[i] = 1.0f + rnd(&s) * 0.1f, bias[i] = rnd(&s) * 0.01f;
    static const int64_t steps[1] = {1234};
    /* 64 wide: blocks of 64 (nvfp4 and q2s in GGUF, bnb) fit every weight */
    size_t se[2] = {16, 64}, sq[2] = {32, 64}, su[2] = {32, 64}, sd[2] = {32, 64}, sn[1] = {64}, si[1] = {1};
    if (qtk_writer_add_raw(w, "model.embed_tokens.weight", QTK_ELEM_BF16, se, 2, embh) ||
        qtk_writer_add_raw(w, "model.layers.0.self_attn.q_proj.weight", QTK_ELEM_F32, sq, 2, wq) ||
        qtk_writer_add_raw(w, "model.layers.0.self_attn.q_proj.bias", QTK_ELEM_F32, sn, 1, bias) ||
        qtk_writer_add_raw(w, "model.layers.0.mlp.up_proj.weight", QTK_ELEM_F32, su, 2, up) ||
        qtk_writer_add_raw(w, "model.layers.0.mlp.down_proj.weight", QTK_ELEM_F32, sd, 2, down) ||
        qtk_writer_add_raw(w, "model.layers.0.input_layernorm.weight", QTK_ELEM_F32, sn, 1, norm) ||
        qtk_writer_add_raw(w, "steps", QTK_ELEM_I64, si, 1, steps) || qtk_writer_add_meta(w, "general.name", "tiny") ||
        qtk_writer_commit(w))
        die("tiny model");
}

static void convert(const char *in, const char *out, const char *scheme, qtk_hub_layout layout, const char *only,
                    size_t shard) {
    qtk_convert_options o = {.scheme = scheme, .layout = layout, .only = only, .force = 1, .min_elements = 64,
                             .max_shard_bytes = shard, .threads = 1};
    if (qtk_ckpt_convert(in, out, &o, NULL)) die(out);
}

static void seed_file(const char *harness, const char *name, const char *path) {
    size_t n = 0;
    uint8_t *b = slurp(path, &n);
    if (!b) die(path);
    put(harness, name, b, n);
    free(b);
}

/* fuzz_hub's container: [n][name id][u24 length][bytes]... [how] */
static const char *const hub_names[] = {
    "config.json", "hf_quant_config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors", "model.safetensors", "other.safetensors.index.json", "quantize_config.json",
    "quant_config.json",
};

static void pack_dir(const char *name, const char *dir, uint8_t how) {
    uint8_t *b = malloc(1 << 22);
    size_t at = 1, nf = 0;
    for (size_t i = 0; i < sizeof hub_names / sizeof hub_names[0]; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/%s", dir, hub_names[i]);
        size_t n = 0;
        uint8_t *f = slurp(p, &n);
        if (!f) {
            if (how == 1 && i >= 2 && i <= 4) die("a hub seed opened by its index lacks the index or one of two shards");
            continue;
        }
        if (n >= (1u << 21)) die("hub seed too large");
        b[at++] = (uint8_t)i;
        b[at++] = (uint8_t)n, b[at++] = (uint8_t)(n >> 8), b[at++] = (uint8_t)(n >> 16);
        memcpy(b + at, f, n);
        at += n;
        nf++;
        free(f);
    }
    b[0] = (uint8_t)(nf - 1);
    b[at++] = how;
    put("hub", name, b, at);
    free(b);
}

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[800];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Every element type the container at path holds, 2 x 4 of varied bit patterns each: the
 * raw decoders a tensor of each type goes through. */
static void elem_zoo(const char *path) {
    static uint8_t bytes[2 * 4 * 8];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 37 + 11);
    size_t shape[2] = {2, 4};
    qtk_writer *w = NULL;
    if (qtk_writer_create(path, &(qtk_write_options){.force = 1}, &w)) die(path);
    for (int e = QTK_ELEM_NONE + 1; e < QTK_ELEM_COUNT_; e++) {
        qtk_ckpt_tensor t = {.name = qtk_elem_name((qtk_elem)e), .elem = (qtk_elem)e, .rank = 2, .shape = shape};
        if (qtk_writer_can_hold(w, &t, NULL, 0) && qtk_writer_add(w, &t, bytes)) die(path);
    }
    if (qtk_writer_commit(w)) die(path);
}

/* torchao's flattening of its tensor subclasses (qtk reads it, does not write it): an
 * NVFP4Tensor [130, 64] with swizzled scales (tiles of 128 x 4), an MXTensor fp8 [4, 64] and a
 * plain tensor, described in the metadata as torchao's safetensors support writes them */
static uint8_t *quantized(const char *spec, const size_t *shape) {
    qtk_scheme s;
    qtk_layout L;
    if (qtk_scheme_parse(spec, &s) || qtk_layout_compute(&s, shape, 2, &L)) die(spec);
    float *x = malloc(L.numel * sizeof *x);
    uint8_t *b = malloc(L.total_bytes);
    uint64_t r = 5;
    for (size_t i = 0; i < L.numel; i++) x[i] = rnd(&r);
    if (!x || !b || qtk_quantize_into(x, shape, 2, &s, NULL, b, L.total_bytes)) die(spec);
    free(x);
    return b;
}

static void torchao_dir(const char *dir) {
    mkdir(dir, 0755);
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    size_t nv_shape[2] = {130, 64}, mx_shape[2] = {4, 64};
    uint8_t *nv = quantized("nvfp4", nv_shape), *mx = quantized("mxfp8", mx_shape);
    const size_t vb = 130 * 32, rows = 130, cols = 4;
    static uint8_t swz[2 * 512];
    for (size_t r = 0; r < rows; r++) /* byte 16b + 4a + c of tile (r / 128, c / 4) holds S[r][c] */
        for (size_t c = 0; c < cols; c++) swz[(r / 128) * 512 + 16 * (r % 32) + 4 * ((r % 128) / 32) + c % 4] = nv[vb + r * cols + c];
    static const uint16_t plain[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    size_t s0[1] = {0}, s4[1] = {4}, ssw[2] = {64, 16}, smx[2] = {4, 64}, smxs[2] = {4, 2}, sq[2] = {130, 32};
    qtk_writer *w = NULL;
    if (qtk_writer_create(p, &(qtk_write_options){.force = 1}, &w) ||
        qtk_writer_add_raw(w, "m.proj._weight_per_tensor_scale", QTK_ELEM_F32, s0, 0, nv + vb + rows * cols) ||
        qtk_writer_add_raw(w, "norm.weight", QTK_ELEM_BF16, s4, 1, plain) ||
        qtk_writer_add_raw(w, "m.proj._weight_scale", QTK_ELEM_F8_E4M3, ssw, 2, swz) ||
        qtk_writer_add_raw(w, "m.up._weight_qdata", QTK_ELEM_F8_E4M3, smx, 2, mx) ||
        qtk_writer_add_raw(w, "m.up._weight_scale", QTK_ELEM_F8_E8M0, smxs, 2, mx + 256) ||
        qtk_writer_add_raw(w, "m.proj._weight_qdata", QTK_ELEM_U8, sq, 2, nv) || qtk_writer_add_meta(w, "format", "pt") ||
        qtk_writer_add_meta(w, "tensor_names", "[\"m.proj.weight\"]") ||
        qtk_writer_add_meta(w, "m.proj.weight",
                            "{\"_type\": \"NVFP4Tensor\", \"_data\": {\"block_size\": 16, \"is_swizzled_scales\": true, "
                            "\"orig_dtype\": {\"_type\": \"torch.dtype\", \"_data\": \"bfloat16\"}}, "
                            "\"_tensor_data_names\": [\"qdata\", \"scale\", \"per_tensor_scale\"]}") ||
        qtk_writer_add_meta(w, "m.up.weight",
                            "{\"_type\": \"MXTensor\", \"_data\": {\"block_size\": 32, \"elem_dtype\": {\"_type\": "
                            "\"torch.dtype\", \"_data\": \"float8_e4m3fn\"}, \"is_swizzled_scales\": false}}") ||
        qtk_writer_add_meta(w, "norm.weight", "{\"_type\": \"Tensor\"}") || qtk_writer_commit(w))
        die("torchao seed");
    free(nv);
    free(mx);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f || fputs("{\"quantization_config\": {\"quant_method\": \"torchao\", \"quant_type\": {}}}\n", f) < 0 ||
        fclose(f) != 0)
        die(p);
}

/* ---- small subsets of the real files ---- */

/* Tensors of a real file (those whose name matches keep) written to out with the public
 * writer: the same names, types, shapes and bytes. */
static void subset(const char *in, const char *out, bool (*keep)(const char *name)) {
    qtk_ckpt *c = NULL;
    if (qtk_ckpt_open(in, NULL, &c)) die(in);
    qtk_writer *w = NULL;
    if (qtk_writer_create(out, &(qtk_write_options){.force = 1}, &w)) die(out);
    uint8_t *bufs[64];
    size_t nb = 0;
    for (size_t i = 0; i < qtk_ckpt_count(c) && nb < 64; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        if (!keep(t->name)) continue;
        bufs[nb] = malloc(t->nbytes ? t->nbytes : 1);
        if (qtk_ckpt_read(c, i, bufs[nb], t->nbytes) || qtk_writer_add(w, t, bufs[nb])) die(t->name);
        nb++;
    }
    for (size_t i = 0; i < qtk_ckpt_meta_count(c); i++) {
        const char *k, *v;
        if (qtk_ckpt_meta_at(c, i, &k, &v) || qtk_writer_add_meta(w, k, v)) die("meta");
    }
    for (size_t i = 0; i < qtk_ckpt_scalar_count(c); i++)
        if (qtk_writer_add_scalar(w, qtk_ckpt_scalar_at(c, i))) die("scalar");
    if (qtk_writer_commit(w)) die(out);
    for (size_t i = 0; i < nb; i++) free(bufs[i]);
    qtk_ckpt_close(c);
}

static bool keep_model(const char *n) { return strstr(n, "fc3") || strstr(n, "norm1."); }
static bool keep_mnist(const char *n) { return strstr(n, "conv1") || strstr(n, "norm1") || strstr(n, "fc2.bias"); }

/* The ggml type ids of the types in ../shared/data/ggml (GGUF.md §2.1). */
static int ggml_id(const char *type) {
    static const struct {
        const char *n;
        int id;
    } ids[] = {{"F32", 0},    {"F16", 1},    {"Q4_0", 2},   {"Q4_1", 3},   {"Q5_0", 6},    {"Q5_1", 7},
               {"Q8_0", 8},   {"Q2_K", 10},  {"Q3_K", 11},  {"Q4_K", 12},  {"Q5_K", 13},   {"Q6_K", 14},
               {"Q8_K", 15},  {"IQ2_XXS", 16}, {"IQ4_NL", 20}, {"IQ4_XS", 23}, {"BF16", 30}, {"TQ1_0", 34},
               {"TQ2_0", 35}, {"MXFP4", 39}, {"NVFP4", 40}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (strcmp(ids[i].n, type) == 0) return ids[i].id;
    return -1;
}

typedef struct {
    uint8_t *p;
    size_t n;
} gbuf;
static void g_put(gbuf *b, const void *d, size_t n) {
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void g_u32(gbuf *b, uint32_t v) { g_put(b, &v, 4); }
static void g_u64(gbuf *b, uint64_t v) { g_put(b, &v, 8); }
static void g_str(gbuf *b, const char *s) {
    g_u64(b, strlen(s));
    g_put(b, s, strlen(s));
}

/* A GGUF v3 file holding the first `rows` rows of every tensor of a real GGUF file, in its
 * ggml type and bytes (qtk's writer would write the types it decodes as F32), plus (lattice)
 * `rows` rows of 256 of each lattice type (docs/lattice.md; qtk cannot make them) of made-up
 * bytes whose d is 1 (IQ1_M: in its scale words' top nibbles). */
static void gguf_rows(const char *in, const char *name, size_t rows, bool lattice) {
    qtk_ckpt *c = NULL;
    if (qtk_ckpt_open(in, NULL, &c)) die(in);
    size_t n_in = 0;
    const uint8_t *file = slurp(in, &n_in);
    gbuf h = {malloc(1 << 20), 0}, d = {malloc(1 << 20), 0};
    size_t nt = 0;
    uint8_t infos[1 << 16];
    gbuf inf = {infos, 0};
    for (size_t i = 0; i < qtk_ckpt_count(c); i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        const char *type = t->file_type ? t->file_type : qtk_elem_name(t->elem);
        int id = ggml_id(type);
        size_t inner = t->shape[t->rank - 1], nrows = t->numel / inner;
        if (id < 0 || nrows < rows) continue;
        size_t fb = t->file_type && t->file_bytes ? t->file_bytes : t->nbytes, rb = fb / nrows;
        g_str(&inf, t->name);
        g_u32(&inf, (uint32_t)t->rank);
        g_u64(&inf, inner);
        for (int k = t->rank - 2; k >= 0; k--) g_u64(&inf, k == t->rank - 2 ? rows : 1);
        g_u32(&inf, (uint32_t)id);
        g_u64(&inf, d.n);
        g_put(&d, file + qtk_ckpt_offset_of(c, i), rb * rows);
        while (d.n % 32) d.p[d.n++] = 0;
        nt++;
    }
    static const struct {
        const char *name;
        uint32_t id, bytes;
    } lat[] = {{"t.iq2_xxs", 16, 66}, {"t.iq2_xs", 17, 74}, {"t.iq3_xxs", 18, 98}, {"t.iq1_s", 19, 50},
               {"t.iq3_s", 21, 110},  {"t.iq2_s", 22, 82}, {"t.iq1_m", 29, 56}};
    for (size_t j = 0; lattice && j < sizeof lat / sizeof lat[0]; j++) {
        g_str(&inf, lat[j].name);
        g_u32(&inf, 2);
        g_u64(&inf, 256);
        g_u64(&inf, rows);
        g_u32(&inf, lat[j].id);
        g_u64(&inf, d.n);
        for (size_t r = 0; r < rows; r++) {
            uint8_t *b = d.p + d.n;
            for (size_t k = 0; k < lat[j].bytes; k++) b[k] = (uint8_t)((k + r) * 29 + 3 + j);
            if (lat[j].id == 29) {
                for (size_t k = 49; k < 56; k += 2) b[k] &= 0x0f;
                b[53] |= 0xc0, b[55] |= 0x30; /* d = 0x3c00 */
            } else {
                b[0] = 0x00, b[1] = 0x3c;
            }
            d.n += lat[j].bytes;
        }
        while (d.n % 32) d.p[d.n++] = 0;
        nt++;
    }
    g_put(&h, "GGUF", 4);
    g_u32(&h, 3);
    g_u64(&h, nt);
    g_u64(&h, 2);
    g_str(&h, "general.architecture");
    g_u32(&h, 8);
    g_str(&h, "qtk-seed");
    g_str(&h, "test.u8");
    g_u32(&h, 0);
    h.p[h.n++] = 200;
    g_put(&h, infos, inf.n);
    while (h.n % 32) h.p[h.n++] = 0;
    g_put(&h, d.p, d.n);
    put("gguf", name, h.p, h.n);
    free(h.p);
    free(d.p);
    free((void *)(uintptr_t)file);
    qtk_ckpt_close(c);
}

static void real_seeds(const char *data) {
    char p[800];
    snprintf(p, sizeof p, "%s/burn/model.bpk", data);
    if (access(p, R_OK) == 0) {
        subset(p, tpath("model-fc3.bpk"), keep_model);
        seed_file("burnpack", "real-model-fc3.bpk", tpath("model-fc3.bpk"));
    }
    snprintf(p, sizeof p, "%s/burn/mnist.safetensors", data);
    if (access(p, R_OK) == 0) {
        subset(p, tpath("mnist-conv1.safetensors"), keep_mnist);
        seed_file("safetensors", "real-mnist-conv1.safetensors", tpath("mnist-conv1.safetensors"));
    }
    snprintf(p, sizeof p, "%s/ggml/types.gguf", data);
    if (access(p, R_OK) == 0) {
        gguf_rows(p, "real-types-1row.gguf", 1, true);
        gguf_rows(p, "real-types-2rows.gguf", 2, false);
    }
    snprintf(p, sizeof p, "%s/ggml/types_rank3.gguf", data);
    if (access(p, R_OK) == 0) gguf_rows(p, "real-rank3-1row.gguf", 1, false);
}


/* ---- importance matrices (GGUF and .dat) and conversion options (fuzz_rules' lines) ---- */

static void dat(const char *name, const char *const *names, int n, int cols, int calls) {
    uint8_t b[4096];
    size_t at = 0;
#define W32(v) (memcpy(b + at, &(int32_t){(int32_t)(v)}, 4), at += 4)
    W32(n);
    for (int e = 0; e < n; e++) {
        W32(strlen(names[e]));
        memcpy(b + at, names[e], strlen(names[e]));
        at += strlen(names[e]);
        W32(calls);
        W32(cols);
        for (int k = 0; k < cols; k++) {
            float w = (float)(1 + (k * 7 + e) % 11);
            memcpy(b + at, &w, 4);
            at += 4;
        }
    }
#undef W32
    put("imatrix", name, b, at);
}

static void imatrix_seeds(void) {
    static const char *const two[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"};
    dat("dat-2x32", two, 2, 32, 2);
    dat("dat-1x8-0calls", two, 1, 8, 0);
    /* GGUF: per-expert sums and counts, and a dense entry */
    qtk_writer *w = NULL;
    float sums[2 * 8], cnt[2] = {2, 0}, one[1] = {5}, dense[8];
    for (int k = 0; k < 16; k++) sums[k] = (float)(k + 1);
    for (int k = 0; k < 8; k++) dense[k] = 10.0f;
    size_t s16[2] = {2, 8}, s2[1] = {2}, s1[1] = {1}, s8[1] = {8};
    char p[128];
    snprintf(p, sizeof p, "/tmp/qtk-seeds-imatrix-%ld.gguf", (long)getpid());
    if (qtk_writer_create(p, &(qtk_write_options){.force = 1}, &w) ||
        qtk_writer_add_raw(w, "blk.3.ffn_up_exps.weight.in_sum2", QTK_ELEM_F32, s16, 2, sums) ||
        qtk_writer_add_raw(w, "blk.3.ffn_up_exps.weight.counts", QTK_ELEM_F32, s2, 1, cnt) ||
        qtk_writer_add_raw(w, "blk.3.attn_k.weight.in_sum2", QTK_ELEM_F32, s8, 1, dense) ||
        qtk_writer_add_raw(w, "blk.3.attn_k.weight.counts", QTK_ELEM_F32, s1, 1, one) ||
        qtk_writer_add_meta(w, "general.type", "imatrix") || qtk_writer_commit(w))
        die(qtk_last_error());
    seed_file("imatrix", "gguf-experts", p);
    remove(p);
}

static void rules_seeds(void) {
    /* first byte % 6: 0 scheme, 1 only, 2 skip, 3 mixture, else a rule */
    static const char *const seeds[] = {
        "0nvfp4\n4attn=q8s,block=32:f16\n4embed=keep\n4lm_head=none",
        "0q4f,block=32:f16\n1layers\\.[0-9]+\\.\n2norm",
        "3q4_k_m\n4ffn_down=q6_k",
        "0none\n4(q|k|v)_proj=mxfp4\n4^model\\.embed=q8_0",
        "4[=q8s\n0q9",
        "3q4_k_x\n1(",
    };
    char name[32];
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        snprintf(name, sizeof name, "rules-%zu", i);
        char b[256];
        size_t n = strlen(seeds[i]);
        memcpy(b, seeds[i], n);
        /* the selector bytes: '0'..'5' are 48..53, whose residues mod 6 are 0..5 */
        put("rules", name, b, n);
    }
}

static void ckpt_seeds(const char *data) {
    snprintf(tmp, sizeof tmp, "/tmp/qtk-seeds-%ld", (long)getpid());
    mkdir(tmp, 0700);
    char st[700];
    snprintf(st, sizeof st, "%s", tpath("tiny.safetensors"));
    tiny_model(st);
    seed_file("safetensors", "tiny", st);
    static const char *const schemes[] = {"nvfp4", "q4f,block=32:f16", "q8s,block=*:f32,store=native", "mxfp4",
                                          "nf4", "e4m3,block=32:ue8m0", "q2s,block=16:f16"};
    char name[64];
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        snprintf(name, sizeof name, "tiny-%zu.bpk", i);
        convert(st, tpath(name), schemes[i], QTK_LAYOUT_AUTO, NULL, 0);
        seed_file("burnpack", name, tpath(name));
        snprintf(name, sizeof name, "tiny-%zu.safetensors", i);
        convert(st, tpath(name), schemes[i], QTK_LAYOUT_AUTO, NULL, 0);
        seed_file("safetensors", name, tpath(name));
    }
    convert(st, tpath("tiny.bpk"), NULL, QTK_LAYOUT_AUTO, NULL, 0);
    seed_file("burnpack", "tiny.bpk", tpath("tiny.bpk"));
    /* GGUF: the schemes a ggml type holds */
    static const char *const gg[] = {"q8f,block=32:f16,store=native", "q4f,block=32:f16", "mxfp4", "nvfp4",
                                     "q4f,table=iq4nl,block=32:f16", "q2s,block=64:f16", NULL};
    for (size_t i = 0; i < sizeof gg / sizeof gg[0]; i++) {
        snprintf(name, sizeof name, "tiny-%zu.gguf", i);
        convert(st, tpath(name), gg[i], QTK_LAYOUT_AUTO, NULL, 0);
        seed_file("gguf", name, tpath(name));
    }
    /* every element type each container holds */
    static const char *const zoo[] = {"elems.safetensors", "elems.bpk", "elems.gguf"};
    static const char *const zoo_h[] = {"safetensors", "burnpack", "gguf"};
    for (size_t i = 0; i < 3; i++) {
        elem_zoo(tpath(zoo[i]));
        seed_file(zoo_h[i], zoo[i], tpath(zoo[i]));
    }
    /* Hub layouts: one file (read by its tensor names) and a directory (with its configs) */
    static const struct {
        qtk_hub_layout l;
        const char *scheme, *only;
        size_t shard; /* non-zero: written in two shards of at most this many bytes, opened by its index */
    } hub[] = {
        {QTK_LAYOUT_GPT_OSS, "mxfp4", NULL, 0},
        {QTK_LAYOUT_MODELOPT, "nvfp4", NULL, 0},
        {QTK_LAYOUT_CT, "q4f,block=32:bf16", NULL, 0},
        {QTK_LAYOUT_CT, "nvfp4", NULL, 0},
        {QTK_LAYOUT_DEEPSEEK, "e4m3,block=32x32:f32,store=native", NULL, 6000},
        {QTK_LAYOUT_BNB, "nf4", NULL, 0},
        {QTK_LAYOUT_MODELOPT, "e4m3,block=*:f32,store=native", NULL, 0},
        {QTK_LAYOUT_GPTQ, "u4,block=32:f16,zero=u8", "layers", 4096},
        {QTK_LAYOUT_GPTQ, "u3,block=32:f16,zero=u8,store=native", "layers", 0},
        {QTK_LAYOUT_AWQ, "u4,block=32:f16,zero=u8", "layers", 0},
        {QTK_LAYOUT_CT, "u4,block=32:bf16,zero=u8", NULL, 0},
        {QTK_LAYOUT_MODELOPT, "mxfp4", NULL, 0},
        {QTK_LAYOUT_MODELOPT, "e4m3,tensor=f32,store=native", NULL, 0},
        {QTK_LAYOUT_MODELOPT, "e4m3,block=128x128:f32,store=native", NULL, 0},
        {QTK_LAYOUT_DEEPSEEK, "e4m3,block=32x32:ue8m0,store=native", NULL, 0},
        {QTK_LAYOUT_CT, "e4m3,block=*:f32,store=native", NULL, 0},
    };
    for (size_t i = 0; i < sizeof hub / sizeof hub[0]; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "hub-%zu", i);
        convert(st, tpath(dir), hub[i].scheme, hub[i].l, hub[i].only, hub[i].shard);
        char p[800];
        snprintf(p, sizeof p, "%s/model.safetensors", tpath(dir));
        snprintf(name, sizeof name, "%s-%zu.safetensors", qtk_hub_layout_name(hub[i].l), i);
        if (access(p, R_OK) == 0) seed_file("safetensors", name, p);
        snprintf(name, sizeof name, "%s-%zu", qtk_hub_layout_name(hub[i].l), i);
        pack_dir(name, tpath(dir), hub[i].shard ? 1 : 0);
        rm_dir(tpath(dir));
    }
    torchao_dir(tpath("torchao"));
    seed_file("safetensors", "torchao.safetensors", tpath("torchao/model.safetensors"));
    pack_dir("torchao", tpath("torchao"), 0);
    rm_dir(tpath("torchao"));
    if (data) real_seeds(data);
    rm_dir(tmp);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_seeds OUT [DATA]\n");
        return 2;
    }
    out_dir = argv[1];
    mkdir(out_dir, 0755);
    qtk_set_threads(1);
    tensor_seeds();
    spec_seeds();
    burn_scheme_seeds();
    npy_seeds();
    ckpt_seeds(argc > 2 ? argv[2] : NULL);
    imatrix_seeds();
    rules_seeds();
    return 0;
}
