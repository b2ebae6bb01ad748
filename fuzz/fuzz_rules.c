/* fuzz_rules.c — the conversion options qtk parses before touching a file (qtk_convert_check):
 * the input's lines are the default scheme, the only and skip regexes, a mixture name and
 * 'REGEX=SPEC' rules, each line's first byte choosing which (so every field is reached).
 *
 * Oracles: the options are accepted, or refused with QTK_E_PARSE / ARG / SCHEME /
 * UNSUPPORTED / NOTFOUND and a message; the same options are accepted twice alike (the check
 * keeps no state). */
#include "fuzz_util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RULES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    FZ_CHECK(text, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    qtk_convert_options o = {0};
    const char *rules[MAX_RULES];
    size_t nr = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!line[0]) continue;
        switch ((unsigned char)line[0] % 6) {
        case 0: o.scheme = line + 1; break;
        case 1: o.only = line + 1; break;
        case 2: o.skip = line + 1; break;
        case 3: o.mixture = line + 1; break;
        default:
            if (nr < MAX_RULES) rules[nr++] = line + 1;
        }
    }
    o.rules = nr ? rules : NULL;
    o.n_rules = nr;
    o.calibration = (qtk_calibration)(size % 3);
    qtk_clear_error();
    qtk_status st = qtk_convert_check(&o);
    FZ_CHECK(st == QTK_OK || ((st == QTK_E_PARSE || st == QTK_E_ARG || st == QTK_E_SCHEME || st == QTK_E_UNSUPPORTED ||
                               st == QTK_E_NOTFOUND) &&
                              qtk_last_error()[0]),
             "convert_check: %s (%s)", qtk_status_name(st), qtk_last_error());
    FZ_CHECK(qtk_convert_check(&o) == st, "a second check of the same options differs");
    free(text);
    return 0;
}
