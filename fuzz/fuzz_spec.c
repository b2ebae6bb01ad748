/* fuzz_spec.c — spec strings (SPEC §1.1) and the other names qtk parses.
 *
 * Oracles: a spec parses, or fails with QTK_E_PARSE / QTK_E_SCHEME and a message; a parsed
 * scheme validates, formats to a canonical string that parses back to an equal scheme and
 * formats to itself; a truncated format buffer is refused and stays terminated; a preset
 * name parses to its scheme; layouts computed for a few shapes add up (values + scales +
 * global + table = total, offsets in order); a small tensor quantizes, its bytes pass
 * qtk_bytes_check and come back from qtk_tensor_from_bytes unchanged. Element, dtype,
 * calibration and layout names parse back from the names they give. */
#include "fuzz_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const float t2[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    float t8[256], t4[16];
    for (int i = 0; i < 16; i++) t4[i] = (float)(i - 8) * 0.25f;
    for (int i = 0; i < 256; i++) t8[i] = (float)(i - 128) / 16.0f;
    if (qtk_table_register("t2x", t2, 4) || qtk_table_register("t4x", t4, 16) || qtk_table_register("t8x", t8, 256))
        abort();
    return 0;
}

static void check_names(const char *s) {
    qtk_dtype d;
    if (qtk_dtype_parse(s, &d) == QTK_OK) {
        qtk_dtype e;
        FZ_CHECK(qtk_dtype_parse(qtk_dtype_name(d), &e) == QTK_OK && e == d, "dtype '%s'", s);
    }
    qtk_calibration c;
    if (qtk_calibration_parse(s, &c) == QTK_OK) {
        qtk_calibration e;
        FZ_CHECK(qtk_calibration_parse(qtk_calibration_name(c), &e) == QTK_OK && e == c, "calibration '%s'", s);
    }
    qtk_elem el;
    if (qtk_elem_parse(s, &el) == QTK_OK) {
        qtk_elem e;
        FZ_CHECK(qtk_elem_parse(qtk_elem_name(el), &e) == QTK_OK && e == el, "element type '%s'", s);
    }
    qtk_hub_layout l;
    if (qtk_hub_layout_parse(s, &l) == QTK_OK) {
        qtk_hub_layout e;
        FZ_CHECK(qtk_hub_layout_parse(qtk_hub_layout_name(l), &e) == QTK_OK && e == l, "layout '%s'", s);
    }
}

static void check_layout(const qtk_scheme *s, const size_t *shape, int rank, uint64_t h) {
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, shape, rank, &L);
    if (st) {
        FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "layout: %s", qtk_status_name(st));
        return;
    }
    FZ_CHECK(L.value_bytes + L.scale_bytes + L.global_bytes + L.table_bytes == L.total_bytes, "layout bytes do not add up");
    FZ_CHECK(L.scales_offset == L.value_bytes && L.global_offset == L.scales_offset + L.scale_bytes &&
                 L.table_offset == L.global_offset + L.global_bytes,
             "layout offsets out of order");
    size_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= shape[i];
    FZ_CHECK(L.numel == numel, "layout numel %zu for %zu", L.numel, numel);
    double bpe = qtk_layout_bits_per_element(&L);
    FZ_CHECK(numel == 0 || (isfinite(bpe) && bpe > 0), "bits per element %g", bpe);
    if (numel > 4096 || L.total_bytes > 1 << 16) return;
    float *x = malloc((numel ? numel : 1) * sizeof(float));
    FZ_CHECK(x, "out of memory");
    uint64_t r = h | 1;
    for (size_t i = 0; i < numel; i++) {
        r = fz_next(r);
        x[i] = (float)((int)(r % 2001) - 1000) / 64.0f;
    }
    qtk_tensor *t = NULL, *u = NULL;
    st = qtk_quantize(x, shape, rank, s, NULL, &t);
    if (st == QTK_OK) {
        size_t n = 0;
        const uint8_t *b = qtk_tensor_bytes(t, &n);
        FZ_CHECK(n == L.total_bytes, "quantized to %zu bytes, layout says %zu", n, L.total_bytes);
        FZ_CHECK(qtk_bytes_check(b, n, shape, rank, s) == QTK_OK, "quantized bytes fail qtk_bytes_check: %s", qtk_last_error());
        FZ_CHECK(qtk_tensor_from_bytes(b, n, shape, rank, s, &u) == QTK_OK, "quantized bytes fail from_bytes");
        size_t m = 0;
        const uint8_t *c = qtk_tensor_bytes(u, &m);
        FZ_CHECK(m == n && (!n || memcmp(b, c, n) == 0), "bytes -> tensor -> bytes changed them");
    } else {
        FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "quantize: %s", qtk_status_name(st));
    }
    qtk_tensor_free(t);
    qtk_tensor_free(u);
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 400) return 0;
    char s[401];
    memcpy(s, data, size);
    s[size] = '\0';
    check_names(s);
    qtk_scheme a;
    qtk_clear_error();
    qtk_status st = qtk_scheme_parse(s, &a);
    if (st) {
        FZ_CHECK((st == QTK_E_PARSE || st == QTK_E_SCHEME || st == QTK_E_NOTFOUND) && qtk_last_error()[0],
                 "parse failed with %s", qtk_status_name(st));
        return 0;
    }
    FZ_CHECK(qtk_scheme_validate(&a) == QTK_OK, "a parsed scheme does not validate: %s", qtk_last_error());
    char f[512], g[512];
    size_t need = 0;
    FZ_CHECK(qtk_scheme_format(&a, f, sizeof f, &need) == QTK_OK, "format: %s", qtk_last_error());
    FZ_CHECK(need == strlen(f) + 1, "format needs %zu for '%s'", need, f);
    char small[512];
    memset(small, 'x', sizeof small);
    st = qtk_scheme_format(&a, small, need - 1, NULL);
    FZ_CHECK(st != QTK_OK && memchr(small, '\0', need - 1), "a format into %zu bytes for '%s' succeeded or was not terminated",
             need - 1, f);
    qtk_scheme b;
    FZ_CHECK(qtk_scheme_parse(f, &b) == QTK_OK, "canonical '%s' (of '%s') does not parse: %s", f, s, qtk_last_error());
    FZ_CHECK(qtk_scheme_equal(&a, &b), "canonical '%s' parses to another scheme", f);
    FZ_CHECK(qtk_scheme_format(&b, g, sizeof g, NULL) == QTK_OK && strcmp(f, g) == 0, "'%s' formats to '%s'", f, g);
    const char *preset = qtk_scheme_preset_name(&a);
    if (preset) {
        qtk_scheme p;
        FZ_CHECK(qtk_scheme_parse(preset, &p) == QTK_OK && qtk_scheme_equal(&a, &p), "preset '%s'", preset);
    }
    uint64_t h = fz_hash(data, size);
    static const size_t shapes[][3] = {{64, 32, 0}, {3, 5, 7}, {1, 1, 1}, {16, 48, 0}, {130, 0, 0}, {2, 33, 17}};
    static const int ranks[] = {2, 3, 3, 2, 1, 3};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) check_layout(&a, shapes[i], ranks[i], h + i);
    check_layout(&a, NULL, 0, h);
    size_t odd[2] = {1 + h % 37, 1 + (h >> 8) % 129};
    check_layout(&a, odd, 2, h);
    return 0;
}
