/* fuzz_burn_scheme.c — Burn's serialized QuantScheme (qtk_scheme_from_burn_cbor, _json): the
 * input is tried as CBOR and as JSON.
 *
 * Oracles: each parse succeeds or fails with a data error and a message; a decoded scheme
 * (its lookup table, which Burn does not name, given as nf4 for the checks) validates; it
 * encodes in both of Burn's shapes, as CBOR and as JSON, and every encoding decodes back to
 * an equal scheme in the shape it was written in; the CBOR encoding of the current shape is
 * canonical (encoding the decoded scheme again gives the same bytes); a buffer one byte short
 * is refused with the length needed. */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const qtk_scheme *s) {
    /* {"QtkQuant": spec} decodes to qtk's extension, which Burn's shapes do not hold */
    if ((unsigned)s->value >= QTK_VALUE_U8 || s->mode == QTK_MODE_AFFINE || s->store == QTK_STORE_GGML || s->super_block) {
        uint8_t cb[16];
        FZ_CHECK(qtk_scheme_to_burn_cbor(s, NULL, 0, QTK_BURN_CURRENT, cb, sizeof cb, NULL) == QTK_E_UNSUPPORTED,
                 "qtk's extension encodes as a Burn scheme");
        return;
    }
    for (int form = 0; form < 2; form++) {
        uint8_t cb[512];
        char js[1024];
        size_t cn = 0, jn = 0;
        qtk_status st = qtk_scheme_to_burn_cbor(s, NULL, 0, (qtk_burn_form)form, cb, sizeof cb, &cn);
        /* a decoded scheme always has Burn's values, stores and block dims (<= 255, no '*') */
        FZ_CHECK(st == QTK_OK, "a decoded scheme does not encode (form %d): %s", form, qtk_last_error());
        st = qtk_scheme_to_burn_json(s, NULL, 0, (qtk_burn_form)form, js, sizeof js, &jn);
        FZ_CHECK(st == QTK_OK && jn == strlen(js) + 1, "JSON encoding (form %d): %s", form, qtk_last_error());
        qtk_scheme b;
        qtk_burn_form f;
        FZ_CHECK(qtk_scheme_from_burn_cbor(cb, cn, &b, &f) == QTK_OK && f == (qtk_burn_form)form, "CBOR re-decode: %s",
                 qtk_last_error());
        FZ_CHECK(qtk_scheme_equal(&b, s) || (s->table[0] == '\0' && b.table[0] == '\0' && memcmp(&b, s, sizeof b) == 0),
                 "CBOR form %d does not decode to the scheme", form);
        FZ_CHECK(qtk_scheme_from_burn_json(js, jn - 1, &b, &f) == QTK_OK && f == (qtk_burn_form)form, "JSON re-decode: %s",
                 qtk_last_error());
        uint8_t cb2[512];
        size_t cn2 = 0;
        FZ_CHECK(qtk_scheme_to_burn_cbor(&b, NULL, 0, (qtk_burn_form)form, cb2, sizeof cb2, &cn2) == QTK_OK && cn2 == cn &&
                     memcmp(cb, cb2, cn) == 0,
                 "encoding is not canonical (form %d)", form);
        size_t need = 0;
        FZ_CHECK(qtk_scheme_to_burn_cbor(s, NULL, 0, (qtk_burn_form)form, cb, cn - 1, &need) == QTK_E_LENGTH && need == cn,
                 "a short buffer is not refused");
    }
    qtk_scheme v = *s;
    if (v.mode == QTK_MODE_LOOKUP && v.table[0] == '\0') snprintf(v.table, sizeof v.table, "nf4");
    qtk_status st = qtk_scheme_validate(&v);
    /* a 2- or 8-bit lookup with nf4 (16 entries) is refused by size: a data error, not a bug */
    FZ_CHECK(st == QTK_OK || (v.mode == QTK_MODE_LOOKUP && st == QTK_E_SCHEME), "decoded scheme does not validate: %s",
             qtk_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qtk_scheme s;
    qtk_status st = qtk_scheme_from_burn_cbor(data, size, &s, NULL);
    if (st == QTK_OK) roundtrip(&s);
    else FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "CBOR: %s without a data error", qtk_status_name(st));
    st = qtk_scheme_from_burn_json((const char *)data, size, &s, NULL);
    if (st == QTK_OK) roundtrip(&s);
    else FZ_CHECK(fz_data_error(st) && qtk_last_error()[0], "JSON: %s without a data error", qtk_status_name(st));
    return 0;
}
