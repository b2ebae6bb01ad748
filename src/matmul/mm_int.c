/* mm_int.c — the integer path in portable C (precision fast), and the activation
 * quantizer whose bits every ISA reproduces.
 *
 * Each row of x is cut into blocks of bx (32, or 16 when the weight blocks are 16 long) and
 * quantized like ggml's Q8_0: s = max|x| / 127, q = round-half-even(x * (127 / max|x|)),
 * |q| <= 127. For a block b of output (m, n):
 *     isum = Σ_{k in b} ival(w_k) * q_k                 exact, in int32
 *     d    = (effective weight scale * 2^-ishift) * s_b  (two f32 roundings)
 *     acc  = acc + isum * d
 * and y = acc + bias. The only approximation beyond f32 rounding is x ≈ s_b * q, which is
 * off by at most s_b / 2 per element: the bound in qtk_matmul.h follows. */
#include <float.h>
#include "mm.h"

#include <math.h>

/* r rounded to an integer, half to even, for |r| <= 2^22: the addition rounds in the
 * default mode (nearbyintf's), the subtraction is exact. Branch-free, so that the loops
 * below vectorize. */
static inline float round_even(float r) {
    const float magic = 0x1.8p23f;
    return (r + magic) - magic;
}
static inline int8_t clamp_q(float r) {
    r = round_even(r);
    r = r < -127.0f ? -127.0f : r;
    r = r > 127.0f ? 127.0f : r;
    return (int8_t)r;
}

void qtk__mm_quantize_row(const float *x, size_t k, size_t bx, int8_t *q, float *s) {
    for (size_t b0 = 0, b = 0; b0 < k; b0 += bx, b++) {
        const size_t e = k - b0 < bx ? k : b0 + bx;
        /* max |x| in 8 independent parts (the maximum does not depend on the order) */
        float part[8] = {0};
        unsigned bad = 0;
        size_t i = b0;
        for (; i + 8 <= e; i += 8)
            for (unsigned j = 0; j < 8; j++) {
                float a = fabsf(x[i + j]);
                bad |= !(a <= FLT_MAX); /* inf or NaN */
                part[j] = a > part[j] ? a : part[j];
            }
        for (; i < e; i++) {
            float a = fabsf(x[i]);
            bad |= !(a <= FLT_MAX);
            part[0] = a > part[0] ? a : part[0];
        }
        float amax = 0.0f;
        for (unsigned j = 0; j < 8; j++) amax = part[j] > amax ? part[j] : amax;
        if (bad || amax == 0.0f) {
            /* a non-finite activation makes its outputs NaN, as it would on the exact path */
            s[b] = bad ? qtk__bits_f32(0x7fc00000u) : 0.0f;
            memset(q + b0, 0, e - b0);
            continue;
        }
        float sc = amax / 127.0f, inv = 127.0f / amax;
        s[b] = sc;
        if (qtk__isfinite(inv)) {
            for (size_t t = b0; t < e; t++) q[t] = clamp_q(x[t] * inv);
        } else { /* amax below 127 / FLT_MAX: divide instead */
            for (size_t t = b0; t < e; t++) q[t] = clamp_q(x[t] / sc);
        }
    }
}

qtk_status qtk__mm_int_prepare_ref(qtk__mm *c) {
    size_t nb = qtk__ceil_div(c->K, c->bx);
    c->kq = c->K;
    c->xs_ld = nb;
    c->ws_floats = nb;
    c->xq = qtk__malloc(c->M * c->K);
    c->xs = qtk__malloc(c->M * nb * sizeof(float));
    if (!c->xq || !c->xs) return qtk__err(QTK_E_NOMEM, "out of memory for the quantized activations");
    for (size_t m = 0; m < c->M; m++)
        qtk__mm_quantize_row(c->x + m * c->K, c->K, c->bx, c->xq + m * c->K, c->xs + m * nb);
    return QTK_OK;
}

/* Integer value of field k of a stream row. */
static inline int wint(const qtk__mmw *w, const uint8_t *row, size_t k) {
    switch (w->kind) {
    case QTK__MMK_I8: return (int8_t)row[k];
    case QTK__MMK_T8: return w->ival[row[k] & 15u];
    case QTK__MMK_T4: return w->ival[(row[k / 2] >> (4 * (k & 1))) & 15u];
    default: return w->ival[(row[k / 4] >> (2 * (k & 3))) & 3u];
    }
}

/* ws: one f32 per activation block (the row's weight scales). */
void qtk__mm_int_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const qtk__mmw *w = &c->w;
    const size_t K = c->K, bx = c->bx, nb = c->xs_ld;
    const float unit = ldexpf(1.0f, -w->ishift);
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = w->vals + n * w->row_bytes;
        size_t g0 = qtk__mmw_group0(w, n);
        for (size_t b = 0; b < nb; b++) ws[b] = qtk__mmw_scale(w, g0 + (b * bx) / w->bc) * unit;
        for (size_t m = 0; m < c->M; m++) {
            const int8_t *q = c->xq + m * c->kq;
            const float *s = c->xs + m * nb;
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                size_t k0 = b * bx, k1 = K - k0 < bx ? K : k0 + bx;
                int32_t isum = 0;
                if (w->kind == QTK__MMK_T2 && !w->p->lookup && !w->zb) {
                    /* 2-bit integers, v = b0 - 2 b1: additions and subtractions only (BitNet) */
                    for (size_t k = k0; k < k1; k++) {
                        unsigned code = (row[k / 4] >> (2 * (k & 3))) & 3u;
                        if (code & 1u) isum += q[k];
                        if (code & 2u) isum -= 2 * q[k];
                    }
                } else {
                    for (size_t k = k0; k < k1; k++) isum += wint(w, row, k) * q[k];
                }
                if (w->zb) { /* zero points: Σ (q - z) x = Σ q x - z Σ x, exact */
                    int32_t qs = 0;
                    for (size_t k = k0; k < k1; k++) qs += q[k];
                    isum -= (int32_t)w->zb[g0 + (b * bx) / w->bc] * qs;
                }
                /* d can overflow under a weight scale near FLT_MAX; isum = 0 must give 0, not
                 * 0 x inf = NaN (|isum| >= 1 overflows anyway): d clamped, NaN kept */
                float d = ws[b] * s[b];
                if (d > FLT_MAX) d = FLT_MAX;
                else if (d < -FLT_MAX) d = -FLT_MAX;
                float prod = (float)isum * d;
                acc = acc + prod;
            }
            c->y[m * c->N + n] = c->bias ? acc + c->bias[n] : acc;
        }
    }
}

/* The planes of one step of L bytes a plane: dst[j L + i] = q[per i + j]. per is a
 * constant in each instantiation, so that the strided reads vectorize. */
static inline void planes_k(const unsigned per, const int8_t *q, unsigned L, int8_t *dst) {
    for (unsigned j = 0; j < per; j++)
        for (unsigned i = 0; i < L; i++) dst[(size_t)j * L + i] = q[(size_t)per * i + j];
}

void qtk__mm_int_layout(const int8_t *q, const float *s, size_t k, size_t bx, unsigned per, unsigned L, float *xz,
                        int offset, int8_t *dst, float *xs, int32_t *xc, size_t kq) {
    /* q holds kq values, zeros past k (the caller's padding) */
    const size_t CH = (size_t)per * L, lanes = L / 4, lf = 4 * (size_t)per;
    for (size_t st = 0, f0 = 0; f0 < kq; st++, f0 += CH) {
        switch (per) {
        case 1: memcpy(dst + f0, q + f0, L); break;
        case 2: planes_k(2, q + f0, L, dst + f0); break;
        default: planes_k(4, q + f0, L, dst + f0); break;
        }
        for (size_t l = 0; l < lanes; l++) {
            const size_t f = f0 + lf * l; /* the lane's first field; its 4*per fields share a block */
            xs[st * lanes + l] = f < k ? s[f / bx] : 0.0f;
            if (!xc && !xz) continue;
            int32_t sum = 0;
            for (size_t e = 0; e < lf; e++) sum += q[f + e];
            if (xc) xc[st * lanes + l] = -offset * sum;
            if (xz) xz[st * lanes + l] = (float)sum; /* |sum| <= 16 x 127: exact */
        }
    }
}

qtk_status qtk__mm_int_prepare_simd(qtk__mm *c, unsigned vbytes, int offset, bool need_xc, qtk__mm_qrow_fn qrow) {
    const qtk__mmw *w = &c->w;
    const size_t M = c->M, K = c->K, CH = (size_t)vbytes * w->per, nb = qtk__ceil_div(K, c->bx);
    c->kq = qtk__ceil_div(K, CH) * CH;
    c->xs_ld = c->xc_ld = c->kq / CH * (vbytes / 4);
    c->ws_floats = 0;
    c->xq = qtk__malloc(M * c->kq);
    c->xs = qtk__malloc(M * c->xs_ld * sizeof(float));
    c->xc = need_xc ? qtk__malloc(M * c->xc_ld * sizeof(int32_t)) : NULL;
    c->xz = w->zb ? qtk__malloc(M * c->xs_ld * sizeof(float)) : NULL;
    int8_t *q = qtk__calloc(c->kq, 1); /* zeros past K */
    float *s = qtk__malloc(nb * sizeof(float));
    qtk_status st = QTK_OK;
    if (!c->xq || !c->xs || (need_xc && !c->xc) || (w->zb && !c->xz) || !q || !s) {
        st = qtk__err(QTK_E_NOMEM, "out of memory for the quantized activations");
    } else {
        for (size_t m = 0; m < M; m++) {
            qrow(c->x + m * K, K, c->bx, q, s);
            qtk__mm_int_layout(q, s, K, c->bx, w->per, vbytes, c->xz ? c->xz + m * c->xs_ld : NULL, offset,
                               c->xq + m * c->kq, c->xs + m * c->xs_ld,
                               need_xc ? c->xc + m * c->xc_ld : NULL, c->kq);
        }
    }
    qtk__free(q);
    qtk__free(s);
    float m = 0.0f;
    for (size_t i = 0; !st && i < M * c->xs_ld; i++) {
        float a = fabsf(c->xs[i]);
        m = a > m ? a : m; /* NaN scales (non-finite activations) make NaN whatever is done */
    }
    c->xs_max = m;
    return st;
}
