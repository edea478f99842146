/* kernels/general.c - correlation with an arbitrary (non-separable) kernel.
 *
 * Work items are (chunk of axis 0) x (tile of axis 1).  The input slices that axis-0 taps
 * read are kept as "extended blocks": the rows of the slice that the tile reads (axis-1
 * extended index, then the other axes), converted to double and extended along the last
 * axis by the boundary mode, so the inner loop is a branch-free, vectorised sum over
 * (row, tap) pairs.  Blocks of a tile stay in L2.  Only nonzero taps are visited (as
 * scipy.ndimage, which drops zero weights); sums are in double.
 *
 * In 3-D, neighbouring output rows of a tile (axis-1 indices y and y + 1) read the same block
 * rows but one: they are summed as a pair (fp_conv_dot_rows2) from a list of sources made once
 * per job, the rows' taps merged by block row and offset, so that each shared source is loaded
 * once for both; each output keeps its own tap order, so a row gives the same bits alone or in
 * a pair. */
#include "kernels/conv.h"
#include "kernels/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FP_GEN_CACHE_BYTES (512 * 1024)

typedef struct {
    ptrdiff_t nk;           /* nonzero taps along the last axis */
    ptrdiff_t first;        /* index of its first entry in off/w */
    ptrdiff_t k[FP_MAXDIM]; /* tap index on axes 0..ndim-2 */
} fp_gen_tap;

typedef struct {
    int ready;
    double *blocks; /* ntaps[0] blocks of block_rows * rowlen doubles */
    ptrdiff_t *tags;
    ptrdiff_t *slotk;
    double *acc;
    double *acc2; /* the second row of a pair */
    double *crow; /* a row of cval */
    const double **rowptr;
    fp_pair_src *psrc; /* the pair sources, weights filled in at allocation */
} fp_gen_scratch;

typedef struct {
    fp_conv *c;
    ptrdiff_t chunk0, nchunks0, tile1, ntiles1;
    ptrdiff_t inner;      /* rows of axes 2..ndim-2 (1 when ndim <= 3) */
    ptrdiff_t block_rows; /* rows of one block: (tile1 + ntaps[1] - 1) * inner, or 1 */
    ptrdiff_t rowlen;     /* extended row length */
    ptrdiff_t ntap;       /* outer taps with a nonzero weight */
    ptrdiff_t nnz;        /* nonzero weights in all */
    fp_gen_tap *taps;
    ptrdiff_t *off;
    double *w;
    fp_gen_scratch *scratch;
    int nworkers;
    /* 3-D pairs of rows: source q reads block row (pk0[q], first row + pe[q]) at offset poff[q]
     * with weights pw0[q], pw1[q]; npair sources in nruns runs (npair 0: no pairs) */
    ptrdiff_t npair, nruns;
    ptrdiff_t *pk0, *pe, *poff;
    double *pw0, *pw1;
    fp_pair_run *runs;
} fp_gen_job;

/* Frees one worker's scratch.  Returns nothing. */
static void
fp_gen_free(fp_gen_scratch *s)
{
    free(s->blocks);
    free(s->tags);
    free(s->slotk);
    free(s->acc);
    free(s->acc2);
    free(s->crow);
    free((void *)s->rowptr);
    free(s->psrc);
    memset(s, 0, sizeof(*s));
}

/* Allocates one worker's scratch.  Returns 0, or -1 when out of memory. */
static int
fp_gen_alloc(fp_gen_job *job, fp_gen_scratch *s)
{
    fp_conv *c = job->c;
    ptrdiff_t K0 = c->ntaps[0];
    s->blocks = (double *)malloc(sizeof(double) * (size_t)(K0 * job->block_rows * job->rowlen));
    s->tags = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->slotk = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->acc = (double *)malloc(sizeof(double) * (size_t)c->shape[c->ndim - 1]);
    s->crow = (double *)malloc(sizeof(double) * (size_t)job->rowlen);
    s->rowptr = (const double **)malloc(sizeof(double *) * (size_t)(job->nnz + 1));
    s->acc2 = (double *)malloc(sizeof(double) * (size_t)c->shape[c->ndim - 1]);
    s->psrc = (fp_pair_src *)malloc(sizeof(fp_pair_src) * (size_t)(job->npair + 1));
    if (s->blocks == NULL || s->tags == NULL || s->slotk == NULL || s->acc == NULL ||
        s->crow == NULL || s->rowptr == NULL || s->acc2 == NULL || s->psrc == NULL) {
        fp_gen_free(s);
        return -1;
    }
    for (ptrdiff_t q = 0; q < job->npair; q++) {
        s->psrc[q].p = NULL;
        s->psrc[q].w0 = job->pw0[q];
        s->psrc[q].w1 = job->pw1[q];
    }
    for (ptrdiff_t t = 0; t < job->rowlen; t++)
        s->crow[t] = c->cval;
    s->ready = 1;
    return 0;
}

/* Fills block b with the rows of input slice j0 that tile [y0, y0 + T) reads.  Returns
 * nothing. */
static void
fp_gen_fill(fp_gen_job *job, double *b, ptrdiff_t j0, ptrdiff_t y0, ptrdiff_t T)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t idx[FP_MAXDIM];
    if (R == 2) {
        fp_conv_gather_row(c, j0 * c->istride[0], 0, job->rowlen, b);
        return;
    }
    for (ptrdiff_t e = 0; e < T + c->ntaps[1] - 1; e++) {
        ptrdiff_t j1 = c->map[1][y0 + e];
        for (int d = 2; d + 1 < R; d++)
            idx[d] = 0;
        for (ptrdiff_t r = 0; r < job->inner; r++) {
            double *dst = b + (e * job->inner + r) * job->rowlen;
            if (j1 < 0) {
                for (ptrdiff_t t = 0; t < job->rowlen; t++)
                    dst[t] = c->cval;
            } else {
                ptrdiff_t ioff = j0 * c->istride[0] + j1 * c->istride[1];
                for (int d = 2; d + 1 < R; d++)
                    ioff += idx[d] * c->istride[d];
                fp_conv_gather_row(c, ioff, 0, job->rowlen, dst);
            }
            for (int d = R - 2; d >= 2; d--) {
                if (++idx[d] < c->shape[d])
                    break;
                idx[d] = 0;
            }
        }
    }
}

/* Makes the sources of a pair of 3-D output rows (see fp_gen_job): for each block of the
 * axis-0 taps and each of its ntaps[1] + 1 rows, the taps of the first row (axis-1 tap e) and
 * of the second (tap e - 1) merged by offset, so that a source both read is one BOTH source;
 * then groups them into runs of one kind.  Leaves npair 0 when the rows share no source.
 * Returns 0, or -1 when out of memory. */
static int
fp_gen_pairs(fp_gen_job *job)
{
    fp_conv *c = job->c;
    ptrdiff_t K0 = c->ntaps[0], K1 = c->ntaps[1], q = 0;
    ptrdiff_t *tap_of = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)(K0 * K1));
    size_t most = (size_t)(2 * job->nnz + 1);
    int result = -1;
    job->pk0 = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * most);
    job->pe = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * most);
    job->poff = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * most);
    job->pw0 = (double *)malloc(sizeof(double) * most);
    job->pw1 = (double *)malloc(sizeof(double) * most);
    job->runs = (fp_pair_run *)malloc(sizeof(fp_pair_run) * most);
    if (tap_of == NULL || job->pk0 == NULL || job->pe == NULL || job->poff == NULL ||
        job->pw0 == NULL || job->pw1 == NULL || job->runs == NULL)
        goto error;
    for (ptrdiff_t t = 0; t < K0 * K1; t++)
        tap_of[t] = -1;
    for (ptrdiff_t t = 0; t < job->ntap; t++)
        tap_of[job->taps[t].k[0] * K1 + job->taps[t].k[1]] = t;
    job->nruns = 0;
    for (ptrdiff_t k0 = 0; k0 < K0; k0++) {
        for (ptrdiff_t e = 0; e <= K1; e++) {
            const fp_gen_tap *ta =
                e < K1 && tap_of[k0 * K1 + e] >= 0 ? &job->taps[tap_of[k0 * K1 + e]] : NULL;
            const fp_gen_tap *tb =
                e >= 1 && tap_of[k0 * K1 + e - 1] >= 0 ? &job->taps[tap_of[k0 * K1 + e - 1]] : NULL;
            ptrdiff_t ia = 0, ib = 0, na = ta != NULL ? ta->nk : 0, nb = tb != NULL ? tb->nk : 0;
            while (ia < na || ib < nb) {
                ptrdiff_t oa = ia < na ? job->off[ta->first + ia] : PTRDIFF_MAX;
                ptrdiff_t ob = ib < nb ? job->off[tb->first + ib] : PTRDIFF_MAX;
                int kind;
                job->pk0[q] = k0;
                job->pe[q] = e;
                job->pw0[q] = 0.0;
                job->pw1[q] = 0.0;
                if (oa == ob) {
                    kind = FP_PAIR_BOTH;
                    job->pw0[q] = job->w[ta->first + ia++];
                    job->pw1[q] = job->w[tb->first + ib++];
                } else if (oa < ob) {
                    kind = FP_PAIR_FIRST;
                    job->pw0[q] = job->w[ta->first + ia++];
                } else {
                    kind = FP_PAIR_SECOND;
                    job->pw1[q] = job->w[tb->first + ib++];
                }
                job->poff[q] = oa < ob ? oa : ob;
                if (job->nruns > 0 && job->runs[job->nruns - 1].kind == kind) {
                    job->runs[job->nruns - 1].count++;
                } else {
                    job->runs[job->nruns].kind = kind;
                    job->runs[job->nruns].first = q;
                    job->runs[job->nruns].count = 1;
                    job->nruns++;
                }
                q++;
            }
        }
    }
    /* without a source the two rows share (one row of axis-1 taps), pairs save nothing */
    job->npair = 0;
    for (ptrdiff_t r = 0; r < job->nruns; r++)
        if (job->runs[r].kind == FP_PAIR_BOTH)
            job->npair = q;
    result = 0;
error:
    free(tap_of);
    return result;
}

/* Pool callback: one (axis-0 chunk, axis-1 tile).  Returns 0, or -1 when out of memory. */
static int
fp_gen_item(void *ctx, ptrdiff_t item, int worker)
{
    fp_gen_job *job = (fp_gen_job *)ctx;
    fp_conv *c = job->c;
    fp_gen_scratch *s = &job->scratch[worker];
    int R = c->ndim;
    ptrdiff_t K0 = c->ntaps[0];
    ptrdiff_t a = item / job->ntiles1, bt = item % job->ntiles1;
    ptrdiff_t lo = a * job->chunk0;
    ptrdiff_t hi = lo + job->chunk0 < c->shape[0] ? lo + job->chunk0 : c->shape[0];
    ptrdiff_t y0 = 0, T = 1, nrows;
    ptrdiff_t n = c->shape[R - 1];
    ptrdiff_t *slotk;
    if (!s->ready && fp_gen_alloc(job, s) < 0)
        return -1;
    slotk = s->slotk;
    if (R >= 3) {
        y0 = bt * job->tile1;
        T = y0 + job->tile1 < c->shape[1] ? job->tile1 : c->shape[1] - y0;
    }
    nrows = R >= 3 ? T * job->inner : 1;
    for (ptrdiff_t k = 0; k < K0; k++)
        s->tags[k] = -2;
    for (ptrdiff_t i0 = lo; i0 < hi; i0++) {
        ptrdiff_t idx[FP_MAXDIM];
        /* make sure every slice read by i0 is in a block; slotk[k0] = its block or -1 */
        for (ptrdiff_t k = 0; k < K0; k++) {
            ptrdiff_t j = c->map[0][i0 + k], slot = -1;
            if (j < 0) {
                slotk[k] = -1;
                continue;
            }
            for (ptrdiff_t t = 0; t < K0; t++)
                if (s->tags[t] == j) {
                    slot = t;
                    break;
                }
            if (slot < 0) {
                for (ptrdiff_t t = 0; t < K0 && slot < 0; t++) {
                    int used = 0;
                    for (ptrdiff_t q = 0; q < K0; q++)
                        if (c->map[0][i0 + q] == s->tags[t]) {
                            used = 1;
                            break;
                        }
                    if (!used)
                        slot = t;
                }
                fp_gen_fill(job, s->blocks + slot * job->block_rows * job->rowlen, j, y0, T);
                s->tags[slot] = j;
            }
            slotk[k] = slot;
        }
        /* output rows: axis 1 over the tile, axes 2..ndim-2 in full */
        idx[1] = y0;
        for (int d = 2; d + 1 < R; d++)
            idx[d] = 0;
        for (ptrdiff_t r = 0; r < nrows; r++) {
            ptrdiff_t ooff = i0 * c->ostride[0];
            for (int d = 1; d + 1 < R; d++)
                ooff += idx[d] * c->ostride[d];
            if (job->npair > 0 && r + 1 < nrows) {
                /* 3-D: output rows idx[1] and idx[1] + 1 as a pair */
                const double *base = s->blocks + (idx[1] - y0) * job->rowlen;
                for (ptrdiff_t q = 0; q < job->npair; q++) {
                    ptrdiff_t slot = slotk[job->pk0[q]];
                    const double *row =
                        slot >= 0 ? base + (slot * job->block_rows + job->pe[q]) * job->rowlen
                                  : s->crow;
                    s->psrc[q].p = row + job->poff[q];
                }
                fp_conv_dot_rows2(s->acc, s->acc2, s->psrc, job->runs, job->nruns, n);
                fp_conv_store_row(c, ooff, n, s->acc);
                fp_conv_store_row(c, ooff + c->ostride[1], n, s->acc2);
                idx[1] += 2;
                r++;
                continue;
            }
            /* every (row, tap) pair of this output row, summed by one combine call */
            for (ptrdiff_t t = 0; t < job->ntap; t++) {
                const fp_gen_tap *tp = &job->taps[t];
                const double *row = s->crow;
                ptrdiff_t slot = slotk[tp->k[0]];
                if (slot >= 0) {
                    ptrdiff_t rr = 0;
                    if (R >= 3) {
                        rr = idx[1] - y0 + tp->k[1]; /* extended axis-1 row in the block */
                        for (int d = 2; d + 1 < R; d++) {
                            ptrdiff_t j = c->map[d][idx[d] + tp->k[d]];
                            if (j < 0) {
                                rr = -1;
                                break;
                            }
                            rr = rr * c->shape[d] + j;
                        }
                    }
                    if (rr >= 0)
                        row = s->blocks + (slot * job->block_rows + rr) * job->rowlen;
                }
                for (ptrdiff_t q = 0; q < tp->nk; q++)
                    s->rowptr[tp->first + q] = row + job->off[tp->first + q];
            }
            fp_conv_dot_rows(s->acc, s->rowptr, job->w, job->nnz, n);
            fp_conv_store_row(c, ooff, n, s->acc);
            for (int d = R - 2; d >= 1; d--) {
                if (++idx[d] < (d == 1 ? y0 + T : c->shape[d]))
                    break;
                idx[d] = d == 1 ? y0 : 0;
            }
        }
    }
    return 0;
}

/* See conv.h. */
int
fp_conv_general(fp_conv *c)
{
    fp_gen_job job;
    int R = c->ndim, result = -1;
    ptrdiff_t Klast = c->ntaps[R - 1], nouter = 1, nnz = 0;
    memset(&job, 0, sizeof(job));
    job.c = c;
    job.inner = 1;
    for (int d = 2; d + 1 < R; d++)
        job.inner *= c->shape[d];
    job.rowlen = c->shape[R - 1] + Klast - 1;
    for (int d = 0; d + 1 < R; d++)
        nouter *= c->ntaps[d];
    job.taps = (fp_gen_tap *)malloc(sizeof(fp_gen_tap) * (size_t)nouter);
    job.off = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)(nouter * Klast));
    job.w = (double *)malloc(sizeof(double) * (size_t)(nouter * Klast));
    if (job.taps == NULL || job.off == NULL || job.w == NULL)
        goto done;
    for (ptrdiff_t t = 0; t < nouter; t++) {
        fp_gen_tap *tp = &job.taps[job.ntap];
        ptrdiff_t rest = t;
        tp->first = nnz;
        tp->nk = 0;
        for (int d = R - 2; d >= 0; d--) {
            tp->k[d] = rest % c->ntaps[d];
            rest /= c->ntaps[d];
        }
        for (ptrdiff_t k = 0; k < Klast; k++) {
            double v = c->weights[t * Klast + k];
            if (v == 0.0)
                continue;
            job.off[nnz] = k;
            job.w[nnz++] = v;
            tp->nk++;
        }
        if (tp->nk > 0)
            job.ntap++;
    }
    job.nnz = nnz;
    if (R >= 3) {
        /* tile axis 1 so that the ntaps[0] blocks of a tile fit the cache budget */
        ptrdiff_t per = c->ntaps[0] * job.inner * job.rowlen * (ptrdiff_t)sizeof(double);
        ptrdiff_t t1 = FP_GEN_CACHE_BYTES / (per > 0 ? per : 1) - (c->ntaps[1] - 1);
        if (t1 < 2 * c->ntaps[1])
            t1 = 2 * c->ntaps[1];
        if (t1 > c->shape[1])
            t1 = c->shape[1];
        job.tile1 = t1;
        job.ntiles1 = (c->shape[1] + t1 - 1) / t1;
        job.block_rows = (t1 + c->ntaps[1] - 1) * job.inner;
    } else {
        job.tile1 = 1;
        job.ntiles1 = 1;
        job.block_rows = 1;
    }
    {
        ptrdiff_t n0 = c->shape[0], want = 16 * (ptrdiff_t)c->nthreads, chunks = 1;
        if (job.ntiles1 < want) {
            chunks = (want + job.ntiles1 - 1) / job.ntiles1;
            if (chunks > n0)
                chunks = n0;
        }
        job.chunk0 = (n0 + chunks - 1) / chunks;
        job.nchunks0 = (n0 + job.chunk0 - 1) / job.chunk0;
    }
    if (R == 3 && job.nnz > 0 && fp_gen_pairs(&job) < 0)
        goto done;
    job.nworkers = c->nthreads;
    job.scratch = (fp_gen_scratch *)calloc((size_t)job.nworkers, sizeof(fp_gen_scratch));
    if (job.scratch == NULL)
        goto done;
    result = fp_pool_run(job.nchunks0 * job.ntiles1, c->nthreads, fp_gen_item, &job);
done:
    if (job.scratch != NULL) {
        for (int w = 0; w < job.nworkers; w++)
            fp_gen_free(&job.scratch[w]);
        free(job.scratch);
    }
    free(job.taps);
    free(job.off);
    free(job.w);
    free(job.pk0);
    free(job.pe);
    free(job.poff);
    free(job.pw0);
    free(job.pw1);
    free(job.runs);
    return result;
}
