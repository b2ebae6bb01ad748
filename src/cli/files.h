/* files.h — the CLI's small file and byte helpers (outputs are written with the library's
 * qtk_file_write_atomic, so they appear whole or not at all). */
#ifndef QTK_CLI_FILES_H
#define QTK_CLI_FILES_H

#include "qtk_ckpt.h"

#include <string.h>

/* Reads a whole regular file into a new buffer (free() it). Errors name the path. */
qtk_status cli_read_file(const char *path, uint8_t **data, size_t *len);
/* QTK_E_IO naming path when it exists and force is false: checked before any work is done,
 * so a command refuses at once (the final write checks again). */
qtk_status cli_check_target(const char *path, bool force);

/* Little-endian loads and stores at any alignment. */
static inline uint16_t cli_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t cli_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void cli_st16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline float cli_f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t cli_bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#endif
