/* ggml_read_check.c — does ggml read what qtk writes, with exactly qtk's values?
 *
 *   ggml_read_check FILE.gguf [FILE.gguf ...]
 *
 * For each file: ggml's own GGUF reader (gguf_init_from_file, which loads every tensor into a
 * ggml context and applies ggml's checks of the header, the alignment and the sizes) and then
 * for every tensor ggml's row validator (ggml_validate_row_data) and its dequantizer (the
 * type's to_float); beside it qtk's reader and qtk's dequantization (qtk_ckpt_read_values to
 * f32). Every tensor must have the same name, type, shape and bytes' length on both sides,
 * pass ggml's validation, and dequantize to the same f32 bits. E2M1's -0 (code 8) is the one
 * documented difference (docs/gguf.md: ggml decodes it as +0); it is counted and reported, not
 * failed. Exit status 0 when every file agrees.
 *
 * Not part of qtk's build or CI: bench/ggml_read_check.sh builds it against a ggml build and
 * makes the files with qtk's CLI. */
#include "qtk.h"
#include "qtk_ckpt.h"

#include "ggml.h"
#include "gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* one tensor: 0 when ggml and qtk agree */
/* NVFP4's global: the F32 [1] companion "<stem>.scale" of "<stem>.weight", else "<name>.scale"
 * (llama.cpp's convention, docs/gguf.md), which qtk folds into the tensor */
static const struct ggml_tensor *companion_of(struct ggml_context *gctx, const char *name) {
    char key[256];
    size_t n = strlen(name);
    if (n > 7 && strcmp(name + n - 7, ".weight") == 0) {
        snprintf(key, sizeof key, "%.*s.scale", (int)(n - 7), name);
        const struct ggml_tensor *t = ggml_get_tensor(gctx, key);
        if (t) return t;
    }
    snprintf(key, sizeof key, "%s.scale", name);
    return ggml_get_tensor(gctx, key);
}

static int ulps(float a, float b) {
    int32_t x = (int32_t)bits_of(a), y = (int32_t)bits_of(b);
    if ((x < 0) != (y < 0)) return a == b ? 0 : 1 << 30;
    return x > y ? x - y : y - x;
}

static int check_tensor(struct ggml_context *gctx, struct gguf_context *g, int64_t gi, qtk_ckpt *c, const char *file,
                        size_t *n_signed_zero, size_t *n_folded, int *max_ulps) {
    const char *name = gguf_get_tensor_name(g, gi);
    struct ggml_tensor *gt = ggml_get_tensor(gctx, name);
    const enum ggml_type ty = gguf_get_tensor_type(g, gi);
    size_t qi;
    size_t nl = strlen(name);
    if (gt && nl > 6 && strcmp(name + nl - 6, ".scale") == 0 && qtk_ckpt_find(c, name, &qi) != QTK_OK &&
        ggml_nelements(gt) == 1) {
        (*n_folded)++; /* an NVFP4 global qtk folded into its tensor: checked with the tensor */
        return 0;
    }
    if (!gt || qtk_ckpt_find(c, name, &qi) != QTK_OK) {
        printf("%s: %s: on one side only\n", file, name);
        return 1;
    }
    const qtk_ckpt_tensor *qt = qtk_ckpt_tensor_at(c, qi);
    const int64_t n = ggml_nelements(gt);
    const size_t nbytes = ggml_nbytes(gt);
    if ((size_t)n != qt->numel || nbytes != qt->file_bytes) {
        printf("%s: %s: ggml has %lld elements in %zu bytes, qtk %zu in %zu\n", file, name, (long long)n, nbytes,
               qt->numel, qt->file_bytes);
        return 1;
    }
    /* ggml names its types in lower case with a capital K ("q4_K"), qtk as GGUF.md ("Q4_K") */
    if (qt->file_type && strcasecmp(qt->file_type, ggml_type_name(ty)) != 0) {
        printf("%s: %s: ggml reads type %s, qtk %s\n", file, name, ggml_type_name(ty), qt->file_type);
        return 1;
    }
    if (!ggml_validate_row_data(ty, gt->data, nbytes)) {
        printf("%s: %s: ggml_validate_row_data refuses the bytes\n", file, name);
        return 1;
    }
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    int bad = 0;
    if (!want || !got) {
        printf("out of memory\n");
        bad = 1;
        goto done;
    }
    if (ty == GGML_TYPE_F32) memcpy(want, gt->data, (size_t)n * 4);
    else {
        const struct ggml_type_traits *tr = ggml_get_type_traits(ty);
        if (!tr->to_float) {
            printf("%s: %s: ggml has no to_float for %s\n", file, name, ggml_type_name(ty));
            bad = 1;
            goto done;
        }
        /* row by row, as ggml dequantizes (rows are whole blocks) */
        const int64_t row = gt->ne[0], rows = n / row;
        for (int64_t r = 0; r < rows; r++)
            tr->to_float((const char *)gt->data + (size_t)r * gt->nb[1], want + r * row, row);
    }
    qtk_status st = qtk_ckpt_read_values(c, qi, QTK_DTYPE_F32, got, (size_t)n);
    if (st) {
        printf("%s: %s: qtk cannot read it: %s\n", file, name, qtk_last_error());
        bad = 1;
        goto done;
    }
    const struct ggml_tensor *comp = ty == GGML_TYPE_NVFP4 && qt->quantized && qtk_scheme_is_two_level(&qt->scheme)
                                         ? companion_of(gctx, name)
                                         : NULL;
    if (comp) {
        /* ggml multiplies the matmul's output by the global; qtk's value is e2m1 x (global x
         * scale) (SPEC's two-level order): equal up to where the one rounding falls */
        const float gs = *(const float *)comp->data;
        for (int64_t k = 0; k < n; k++) {
            float w = want[k] * gs;
            int u = ulps(w, got[k]);
            if (u > *max_ulps) *max_ulps = u;
            want[k] = u <= 1 ? got[k] : w;
        }
    }
    size_t diff = 0, first = 0;
    for (int64_t k = 0; k < n; k++) {
        uint32_t a = bits_of(want[k]), b = bits_of(got[k]);
        if (a == b) continue;
        if (a == 0 && b == 0x80000000u && (ty == GGML_TYPE_MXFP4 || ty == GGML_TYPE_NVFP4)) {
            (*n_signed_zero)++;
            continue;
        }
        if (!diff++) first = (size_t)k;
    }
    if (diff) {
        printf("%s: %s (%s): %zu of %lld values differ, first at %zu: ggml %.9g, qtk %.9g\n", file, name,
               ggml_type_name(ty), diff, (long long)n, first, (double)want[first], (double)got[first]);
        bad = 1;
    }
done:
    free(want);
    free(got);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.gguf [FILE.gguf ...]\n", argv[0]);
        return 2;
    }
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        const char *file = argv[a];
        struct ggml_context *gctx = NULL;
        struct gguf_init_params p = {.no_alloc = false, .ctx = &gctx};
        struct gguf_context *g = gguf_init_from_file(file, p);
        if (!g) {
            printf("%s: ggml's reader refuses the file\n", file);
            failed++;
            continue;
        }
        qtk_ckpt *c = NULL;
        if (qtk_ckpt_open(file, NULL, &c) != QTK_OK) {
            printf("%s: qtk cannot open it: %s\n", file, qtk_last_error());
            gguf_free(g);
            ggml_free(gctx);
            failed++;
            continue;
        }
        const int64_t nt = gguf_get_n_tensors(g);
        int bad = 0;
        size_t signed_zero = 0, folded = 0, types[GGML_TYPE_COUNT] = {0};
        int max_ulps = -1;
        for (int64_t i = 0; i < nt; i++) {
            bad |= check_tensor(gctx, g, i, c, file, &signed_zero, &folded, &max_ulps);
            types[gguf_get_tensor_type(g, i)]++;
        }
        printf("%s: %s: %lld tensors (", file,
               bad                ? "DIFFERS"
               : max_ulps > 0     ? "ggml reads qtk's values, bit for bit but for the folded globals below"
                                  : "ggml reads qtk's values bit for bit",
               (long long)nt);
        for (int t = 0, first = 1; t < GGML_TYPE_COUNT; t++)
            if (types[t]) printf("%s%s %zu", first ? "" : ", ", ggml_type_name((enum ggml_type)t), types[t]), first = 0;
        printf(")");
        if (folded != (size_t)nt - qtk_ckpt_count(c)) {
            printf("; ggml lists %lld tensors, qtk %zu", (long long)nt, qtk_ckpt_count(c));
            bad = 1;
        }
        if (signed_zero) printf("; %zu E2M1 -0 read by ggml as +0 (documented)", signed_zero);
        if (folded)
            printf("; %zu NVFP4 globals (.scale) folded by qtk, values x global within %d ulp of qtk's", folded,
                   max_ulps);
        printf("\n");
        failed += bad;
        qtk_ckpt_close(c);
        gguf_free(g);
        ggml_free(gctx);
    }
    return failed ? 1 : 0;
}
