/* gb_values.c — what the elements of ggml's blocks are worth, and the checks on their bytes. */
#include "gblock.h"

void qtk__gb_params(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, float *S, float *O) {
    const float d = qtk__f16_to_f32(u->d) * F->dmul, m = qtk__f16_to_f32(u->m); /* exact: dmul is a power of two */
    for (unsigned g = 0; g < F->groups; g++) {
        if (!F->super) {
            S[g] = d;
            O[g] = F->affine ? m : 0.0f; /* Q4_1, Q5_1: x = q d + m */
        } else {
            S[g] = d * (float)u->sc[g];                     /* exact: f16 x an integer of <= 8 bits */
            O[g] = F->affine ? -(m * (float)u->mn[g]) : 0.0f; /* x = (d sc) q - (dmin mn) */
        }
    }
}

float qtk__gb_stored_offset(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, unsigned g) {
    if (!F->affine) return 0.0f;
    const float m = qtk__f16_to_f32(u->m);
    return F->super ? m * (float)u->mn[g] : m;
}

static bool f16_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

bool qtk__gb_block_ok(const qtk__gb_fmt *F, const uint8_t *blk, const char **what) {
    size_t d_at = F->f == QTK__GF_Q2_K ? 80 : F->f == QTK__GF_Q3_K ? 108 : F->f == QTK__GF_Q6_K ? 208 : 0;
    if (!f16_finite(F->lattice ? qtk__gb_lattice_d(F->f, blk) : qtk__ld16(blk + d_at))) {
        *what = "d";
        return false;
    }
    if (F->affine && !f16_finite(qtk__ld16(blk + d_at + 2))) {
        *what = F->super ? "dmin" : "m";
        return false;
    }
    return true;
}

void qtk__gb_dequant_ref(const qtk__gb_fmt *F, const uint8_t *src, size_t nb, float *y) {
    qtk__gb_unpacked u;
    float S[QTK__GB_GROUPS_MAX], O[QTK__GB_GROUPS_MAX];
    for (size_t b = 0; b < nb; b++, src += F->bytes, y += F->qk) {
        qtk__gb_unpack(F, src, &u);
        qtk__gb_params(F, &u, S, O);
        for (unsigned e = 0; e < F->qk; e++) y[e] = qtk__gb_value(F, S[e / F->sub], O[e / F->sub], u.q[e]);
    }
}
