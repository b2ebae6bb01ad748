/* fuzz_npy.c — the CLI's .npy reader (src/cli/npy.c): versions 1-3, any byte order, f16/f32/f64,
 * C and Fortran order.
 *
 * Oracles: a file parses, or fails with a data error and a message; a parsed array has
 * numel = the product of its shape and one f32 per element; written back as f32 (C order)
 * it parses to the same shape and bits. */
#include "fuzz_util.h"

#include "npy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cli_npy a;
    qtk_clear_error();
    qtk_status st = cli_npy_parse(data, size, &a);
    if (st) {
        FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "npy parse failed with %s", qtk_status_name(st));
        return 0;
    }
    size_t n = 1;
    for (int i = 0; i < a.rank; i++) n *= a.shape[i];
    FZ_CHECK(a.numel == n && a.rank >= 0 && a.rank <= QTK_MAX_RANK, "numel %zu for a shape of %zu", a.numel, n);
    FZ_CHECK(n == 0 || a.data, "no data for %zu elements", n);
    uint8_t *f = NULL;
    size_t flen = 0;
    st = cli_npy_build(a.data, QTK_DTYPE_F32, a.shape, a.rank, &f, &flen);
    FZ_CHECK(st == QTK_OK, "cannot write back: %s", qtk_last_error());
    cli_npy b;
    st = cli_npy_parse(f, flen, &b);
    FZ_CHECK(st == QTK_OK, "qtk's own .npy does not parse: %s", qtk_last_error());
    FZ_CHECK(b.rank == a.rank && !memcmp(b.shape, a.shape, (size_t)a.rank * sizeof a.shape[0]), "the shape changed");
    FZ_CHECK(!n || memcmp(a.data, b.data, n * sizeof(float)) == 0, "the values changed");
    cli_npy_free(&a);
    cli_npy_free(&b);
    free(f);
    return 0;
}
