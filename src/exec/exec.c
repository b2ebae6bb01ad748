/* exec.c — drives the kernels over all rows, split across threads and chunked.
 *
 * Threads never share a write target, so results are bit-identical for any thread count:
 *   - decode writes each row's own output: any row split is safe;
 *   - encode writes storage units; when fields are packed along an axis other than the
 *     last, fpu consecutive rows along that axis share units, so the split follows "units"
 *     of rows that own whole storage units;
 *   - calibration updates per-group statistics; the split follows units of rows that own
 *     whole groups (the outermost blocked axis), or, when such units are too coarse to
 *     share out, each thread keeps its own maxima and they are merged (max is exact and
 *     order-free). absmean's ordered sums are never split inside a group.
 *
 * When scale groups lie within rows ("chunkable" plans, the common case: blocks along the
 * last dimension), work goes a chunk of rows at a time (~64 KiB of f32): the chunk's
 * ranges, stored scales and fields are computed while it is in cache, with the next chunk
 * prefetched, and only a chunk's worth of effective scales ever exists. */
#include "exec.h"

#include "../common/parallel.h"

#define CHUNK_ELEMS 16384u
#define QTK__MAX_WORKERS 256

#include <stddef.h>

/* Contiguous row ranges along a leading axis: unit u = (outer index o, chunk k of `ext`
 * along `axis`) covers rows [begin(u), begin(u + 1)). axis < 0: every row is a unit. */
typedef struct {
    int axis;
    size_t ext, kunits, extent, rstride, n, rows;
} row_units;

static void units_init(const qtk__plan *p, int axis, size_t ext, row_units *u) {
    memset(u, 0, sizeof *u);
    u->axis = axis;
    u->rows = p->rows;
    if (axis < 0 || p->rows == 0) {
        u->axis = -1;
        u->n = p->rows;
        return;
    }
    u->ext = ext;
    u->extent = p->eshape[axis];
    u->kunits = qtk__ceil_div(u->extent, ext);
    size_t outer = 1, rs = 1;
    for (int i = 0; i < axis; i++) outer *= p->eshape[i];
    for (int i = axis + 1; i < p->erank - 1; i++) rs *= p->eshape[i];
    u->rstride = rs;
    u->n = outer * u->kunits;
}

static size_t unit_begin(const row_units *u, size_t k) {
    if (k >= u->n) return u->rows;
    if (u->axis < 0) return k;
    size_t o = k / u->kunits, c = (k % u->kunits) * u->ext;
    return (o * u->extent + c) * u->rstride;
}

/* Encode units: rows sharing storage units. */
static void encode_units(const qtk__plan *p, row_units *u) {
    if (p->fpu > 1 && !p->pack_last) units_init(p, p->L.pack_axis, p->fpu, u);
    else units_init(p, -1, 0, u);
}

size_t qtk__exec_unit_align(const qtk__plan *p, size_t r) {
    row_units u;
    encode_units(p, &u);
    if (u.axis < 0 || r >= p->rows) return r < p->rows ? r : p->rows;
    size_t span = u.extent * u.rstride, o = r / span, within = r % span;
    size_t c = within / u.rstride, k = o * u.kunits + c / u.ext;
    size_t b = unit_begin(&u, k);
    return b == r ? r : unit_begin(&u, k + 1);
}

size_t qtk__exec_unit_rows(const qtk__plan *p) {
    row_units u;
    encode_units(p, &u);
    return u.axis < 0 ? 1 : u.ext * u.rstride;
}

/* First storage unit of row r (r on an encode-unit boundary, or r == rows). */
static size_t first_unit(const qtk__plan *p, size_t r) {
    if (r >= p->rows) return p->L.value_bytes / p->unit_bytes;
    qtk__row ri;
    qtk__plan_row(p, r, &ri);
    return ri.unit_base;
}

size_t qtk__exec_first_group(const qtk__plan *p, size_t r) {
    if (r >= p->rows) return p->L.n_scales;
    qtk__row ri;
    qtk__plan_row(p, r, &ri);
    return ri.scale_base;
}

/* The outermost leading axis along which a scale group spans more than one row. */
static int group_axis(const qtk__plan *p) {
    for (int i = 0; i < p->erank - 1; i++)
        if (p->L.block[i] > 1) return i;
    return -1;
}

bool qtk__exec_chunkable(const qtk__plan *p) {
    return p->L.rank > 0 && p->rows > 0 && group_axis(p) < 0 && !(p->fpu > 1 && !p->pack_last);
}

/* ---- kernel entry points with the reference as the fallback ---- */

void qtk__exec_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t gbase, size_t r0, size_t r1) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->amax_rows || !k->amax_rows(p, x, st, gbase, r0, r1)) qtk__kernels_ref.amax_rows(p, x, st, gbase, r0, r1);
}

void qtk__exec_encode_rows(const qtk__plan *p, const float *x, const float *eff, size_t gbase, uint8_t *dst, size_t r0,
                           size_t r1) {
    size_t u0 = first_unit(p, r0), u1 = first_unit(p, r1);
    memset(dst + u0 * p->unit_bytes, 0, (u1 - u0) * p->unit_bytes);
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->encode_rows || !k->encode_rows(p, x, eff, gbase, dst, r0, r1))
        qtk__kernels_ref.encode_rows(p, x, eff, gbase, dst, r0, r1);
}

void qtk__exec_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, size_t gbase, qtk_dtype dtype,
                           void *out, size_t r0, size_t r1) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->decode_rows || !k->decode_rows(p, vals, eff, gbase, dtype, out, r0, r1))
        qtk__kernels_ref.decode_rows(p, vals, eff, gbase, dtype, out, r0, r1);
}

void qtk__exec_finish_scales(const qtk__plan *p, const float *alpha, size_t g0, size_t n, float g, uint8_t *dst,
                             float *eff) {
    if (n == 0) return;
    uint8_t *codes = dst + p->L.scales_offset + g0 * qtk__scale_size(p->L.scale_dtype);
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->finish_scales || !k->finish_scales(p, alpha, n, g, codes, eff))
        qtk__kernels_ref.finish_scales(p, alpha, n, g, codes, eff);
}

void qtk__exec_load_scales(const qtk__plan *p, const uint8_t *bytes, size_t g0, size_t n, float g, float *eff) {
    qtk_dtype d = p->L.scale_dtype;
    unsigned sz = qtk__scale_size(d);
    const uint8_t *codes = bytes + p->L.scales_offset + g0 * sz;
    const qtk__kernels *k = qtk__kernels_active();
    if (k->load_scales && k->load_scales(p, codes, n, g, eff)) return;
    for (size_t i = 0; i < n; i++) {
        float v = qtk__scale_load(d, codes + i * sz);
        eff[i] = p->two_level ? g * v : v;
    }
}

/* ---- threaded passes ---- */

typedef struct {
    const qtk__plan *p;
    row_units u;
    const float *x;
    const float *eff;
    const float *alpha;      /* chunked quantize: precomputed ranges, or NULL */
    float g;                 /* two-level global */
    uint8_t *dst;
    const uint8_t *cvals;
    qtk_dtype dtype;
    void *out;
    const qtk__stats *stats; /* shared arrays (unit split) */
    float *priv_amax;        /* n_scales floats per worker (merge split) */
    float *scratch;          /* chunked passes: 2 x chunk_groups floats per worker */
    size_t chunk_rows, chunk_groups;
    bool absmean;
    size_t bad[QTK__MAX_WORKERS];       /* first non-finite input seen by each worker */
    size_t bad_group[QTK__MAX_WORKERS]; /* first overflowing effective scale seen by each worker */
} job;

/* Jobs live on the caller's stack (a few KiB): no allocation on the hot path. */
static void job_init(job *j, const qtk__plan *p, int threads) {
    memset(j, 0, offsetof(job, bad));
    j->p = p;
    for (int w = 0; w < threads && w < QTK__MAX_WORKERS; w++) j->bad[w] = j->bad_group[w] = SIZE_MAX;
}

static void encode_job(void *ctx, size_t b, size_t e, int w) {
    (void)w;
    const job *j = ctx;
    size_t r0 = unit_begin(&j->u, b), r1 = unit_begin(&j->u, e);
    qtk__exec_encode_rows(j->p, j->x + r0 * j->p->inner, j->eff, 0, j->dst, r0, r1);
}

static void stats_job(void *ctx, size_t b, size_t e, int w) {
    job *j = ctx;
    size_t r0 = unit_begin(&j->u, b), r1 = unit_begin(&j->u, e);
    qtk__stats local = *j->stats;
    if (j->priv_amax) local.amax = j->priv_amax + (size_t)w * j->p->L.n_scales;
    local.bad = SIZE_MAX;
    const float *x = j->x + r0 * j->p->inner;
    if (j->absmean) qtk__ref_absmean_rows(j->p, x, &local, r0, r1);
    else qtk__exec_amax_rows(j->p, x, &local, 0, r0, r1);
    j->bad[w] = local.bad;
}

qtk_status qtk__exec_encode(const qtk__plan *p, const float *x, const float *eff, uint8_t *dst, int threads) {
    job j;
    int t = qtk__threads_for(threads, p->L.numel);
    job_init(&j, p, t);
    j.x = x;
    j.eff = eff;
    j.dst = dst;
    encode_units(p, &j.u);
    if (j.u.n == 0) memset(dst, 0, p->L.value_bytes);
    qtk__parallel_for(t, j.u.n, encode_job, &j);
    return QTK_OK;
}

static qtk_status exec_stats(const qtk__plan *p, const float *x, qtk__stats *st, int threads, bool absmean) {
    int t = qtk__threads_for(threads, p->L.numel);
    job jj, *j = &jj;
    job_init(j, p, t);
    if (t > 1) {
        j->x = x;
        j->absmean = absmean;
        j->stats = st;
        int ax = group_axis(p);
        units_init(p, ax, ax >= 0 ? p->L.block[ax] : 0, &j->u);
        size_t n = p->L.n_scales;
        if (j->u.n < (size_t)t * 4) {
            /* units too coarse to share out: maxima per worker over row ranges, merged
             * (absmean's ordered sums cannot be split: it runs in one thread) */
            j->priv_amax = absmean ? NULL : qtk__calloc((size_t)t * (n ? n : 1), sizeof(float));
            if (!j->priv_amax) t = 1;
            else units_init(p, -1, 0, &j->u);
        }
        if (t > 1) {
            qtk__parallel_for(t, j->u.n, stats_job, j);
            for (int w = 0; w < t; w++) {
                if (j->bad[w] < st->bad) st->bad = j->bad[w];
                if (j->priv_amax) {
                    const float *m = j->priv_amax + (size_t)w * n;
                    for (size_t g = 0; g < n; g++)
                        if (m[g] > st->amax[g]) st->amax[g] = m[g];
                }
            }
        }
        qtk__free(j->priv_amax);
    }
    if (t > 1) return QTK_OK;
    /* one thread: rows in order */
    if (absmean) qtk__ref_absmean_rows(p, x, st, 0, p->rows);
    else qtk__exec_amax_rows(p, x, st, 0, 0, p->rows);
    return QTK_OK;
}

qtk_status qtk__exec_amax(const qtk__plan *p, const float *x, qtk__stats *st, int threads) {
    return exec_stats(p, x, st, threads, false);
}

qtk_status qtk__exec_absmean(const qtk__plan *p, const float *x, qtk__stats *st, int threads) {
    return exec_stats(p, x, st, threads, true);
}

/* ---- chunked passes ---- */

/* Sizes chunks and allocates each worker's scratch (effective scales and ranges of one
 * chunk's groups). Returns the thread count to use, 0 on allocation failure. */
static int chunks_init(job *j, int threads, size_t *chunks) {
    const qtk__plan *p = j->p;
    j->chunk_rows = p->inner >= CHUNK_ELEMS ? 1 : CHUNK_ELEMS / (p->inner ? p->inner : 1);
    j->chunk_groups = j->chunk_rows * qtk__ceil_div(p->inner, p->blk_last);
    *chunks = qtk__ceil_div(p->rows, j->chunk_rows);
    int t = qtk__threads_for(threads, p->L.numel);
    if ((size_t)t > *chunks) t = *chunks ? (int)*chunks : 1;
    j->scratch = qtk__malloc((size_t)t * 2 * (j->chunk_groups ? j->chunk_groups : 1) * sizeof(float));
    return j->scratch ? t : 0;
}

static void quantize_chunk_job(void *ctx, size_t b, size_t e, int w) {
    job *j = ctx;
    const qtk__plan *p = j->p;
    float *eff = j->scratch + (size_t)w * 2 * j->chunk_groups, *alpha = eff + j->chunk_groups;
    for (size_t c = b; c < e; c++) {
        size_t r0 = c * j->chunk_rows, r1 = r0 + j->chunk_rows < p->rows ? r0 + j->chunk_rows : p->rows;
        size_t g0 = qtk__exec_first_group(p, r0), n = qtk__exec_first_group(p, r1) - g0;
        const float *x = j->x + r0 * p->inner;
        const float *a = alpha;
        if (j->alpha) {
            a = j->alpha + g0;
        } else {
            memset(alpha, 0, n * sizeof(float));
            qtk__stats st = {.amax = alpha, .bad = SIZE_MAX};
            qtk__exec_amax_rows(p, x, &st, g0, r0, r1);
            if (st.bad != SIZE_MAX) {
                j->bad[w] = st.bad;
                return;
            }
        }
        qtk__exec_finish_scales(p, a, g0, n, j->g, j->dst, eff);
        if (p->two_level)
            for (size_t i = 0; i < n; i++)
                if (!qtk__isfinite(eff[i])) {
                    j->bad_group[w] = g0 + i;
                    return;
                }
        qtk__exec_encode_rows(p, x, eff, g0, j->dst, r0, r1);
    }
}

qtk_status qtk__exec_quantize_chunked(const qtk__plan *p, const float *x, uint8_t *dst, const float *alpha, float g,
                                      int threads, size_t *bad, size_t *bad_group) {
    *bad = *bad_group = SIZE_MAX;
    job jj, *j = &jj;
    job_init(j, p, QTK__MAX_WORKERS);
    qtk__plan *pp = qtk__malloc(sizeof *pp);
    size_t chunks = 0;
    int t = pp ? chunks_init(j, threads, &chunks) : 0;
    if (!t) {
        qtk__free(j->scratch);
        qtk__free(pp);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    /* while a chunk is encoded, the next one is prefetched: memory and arithmetic overlap */
    *pp = *p;
    pp->prefetch = j->chunk_rows * p->inner;
    j->p = pp;
    j->x = x;
    j->dst = dst;
    j->alpha = alpha;
    j->g = g;
    qtk__parallel_for(t, chunks, quantize_chunk_job, j);
    for (int w = 0; w < t; w++) {
        if (j->bad[w] < *bad) *bad = j->bad[w];
        if (j->bad_group[w] < *bad_group) *bad_group = j->bad_group[w];
    }
    qtk__free(j->scratch);
    qtk__free(pp);
    return QTK_OK;
}

static void decode_chunk_job(void *ctx, size_t b, size_t e, int w) {
    const job *j = ctx;
    const qtk__plan *p = j->p;
    float *eff = j->scratch + (size_t)w * 2 * j->chunk_groups;
    size_t esz = j->dtype == QTK_DTYPE_F32 ? 4 : 2;
    for (size_t c = b; c < e; c++) {
        size_t r0 = c * j->chunk_rows, r1 = r0 + j->chunk_rows < p->rows ? r0 + j->chunk_rows : p->rows;
        size_t g0 = qtk__exec_first_group(p, r0), n = qtk__exec_first_group(p, r1) - g0;
        qtk__exec_load_scales(p, j->cvals, g0, n, j->g, eff);
        qtk__exec_decode_rows(p, j->cvals, eff, g0, j->dtype, (uint8_t *)j->out + r0 * p->inner * esz, r0, r1);
    }
}

static void decode_job(void *ctx, size_t b, size_t e, int w) {
    (void)w;
    const job *j = ctx;
    size_t esz = j->dtype == QTK_DTYPE_F32 ? 4 : 2;
    qtk__exec_decode_rows(j->p, j->cvals, j->eff, 0, j->dtype, (uint8_t *)j->out + b * j->p->inner * esz, b, e);
}

qtk_status qtk__exec_decode(const qtk__plan *p, const uint8_t *bytes, float g, qtk_dtype dtype, void *out,
                            int threads) {
    job jj, *j = &jj;
    job_init(j, p, 1);
    j->cvals = bytes;
    j->g = g;
    j->dtype = dtype;
    j->out = out;
    qtk_status st = QTK_OK;
    size_t chunks;
    int t;
    if (p->L.rank > 0 && p->rows > 0 && group_axis(p) < 0 && (t = chunks_init(j, threads, &chunks)) > 0) {
        qtk__parallel_for(t, chunks, decode_chunk_job, j);
    } else {
        /* groups span rows (or per-tensor): all effective scales at once */
        float *eff = qtk__malloc((p->L.n_scales ? p->L.n_scales : 1) * sizeof(float));
        if (!eff) {
            st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", p->L.n_scales);
        } else {
            qtk__exec_load_scales(p, bytes, 0, p->L.n_scales, g, eff);
            j->eff = eff;
            qtk__parallel_for(qtk__threads_for(threads, p->L.numel), p->rows, decode_job, j);
            qtk__free(eff);
        }
    }
    qtk__free(j->scratch);
    return st;
}
