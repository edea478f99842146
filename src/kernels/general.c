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
 * rows but one: they are summed as a pair (fp_conv_dot_rows2, gen_rows2.c) from a list of
 * sources made once per job (gen_pairs.c), the rows' taps merged by block row and offset, so
 * that each shared source is loaded once for both; each output keeps its own tap order, so a
 * row gives the same bits alone or in a pair.  Where each source reads (its block, row and
 * offset, relative to the pair's first row) is worked out once per output slice, and the pair
 * loop writes a contiguous output row itself. */
#include "kernels/general.h"
#include "kernels/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the ntaps[0] blocks of a tile may take: the blocks and the rows the pair loop is
 * writing stay in the 512 KiB L2 with room to spare (tiles of 20 rows of 256 for the 5x5x5
 * kernel; 46-row tiles, whose blocks filled L2, ran about 5% slower). */
#define FP_GEN_CACHE_BYTES (256 * 1024)

/* Frees one worker's scratch.  Returns nothing. */
static void
fp_gen_free(fp_gen_scratch *s)
{
    free(s->blocks);
    free(s->tags);
    free(s->slotk);
    free(s->fill);
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
    void *blocks = NULL;
    /* 64-byte aligned, rows of a multiple of four doubles: every row starts on a 32-byte
     * boundary, so the loads of the tap offsets that are a multiple of four are aligned */
    if (posix_memalign(&blocks, 64,
                       sizeof(double) * (size_t)(K0 * job->block_rows * job->rowstride)) != 0)
        blocks = NULL;
    s->blocks = (double *)blocks;
    s->tags = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->slotk = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->fill = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->acc = (double *)malloc(sizeof(double) * (size_t)c->shape[c->ndim - 1]);
    s->crow = (double *)malloc(sizeof(double) * (size_t)job->rowlen);
    s->rowptr = (const double **)malloc(sizeof(double *) * (size_t)(job->nnz + 1));
    s->acc2 = (double *)malloc(sizeof(double) * (size_t)c->shape[c->ndim - 1]);
    s->psrc = (fp_pair_src *)malloc(sizeof(fp_pair_src) * (size_t)(job->npair + 1));
    if (s->blocks == NULL || s->tags == NULL || s->slotk == NULL || s->fill == NULL ||
        s->acc == NULL || s->crow == NULL || s->rowptr == NULL || s->acc2 == NULL ||
        s->psrc == NULL) {
        fp_gen_free(s);
        return -1;
    }
    for (ptrdiff_t q = 0; q < job->npair; q++) {
        s->psrc[q].rel = 0;
        s->psrc[q].w0 = job->psrc[q].w0;
        s->psrc[q].w1 = job->psrc[q].w1;
    }
    for (ptrdiff_t t = 0; t < job->rowlen; t++)
        s->crow[t] = c->cval;
    s->ready = 1;
    return 0;
}

/* Fills block b with the rows of input slice j0 that tile [y0, y0 + T) reads, or with cval
 * when j0 is -1 (constant mode outside the input).  Returns nothing. */
static void
fp_gen_fill(fp_gen_job *job, double *b, ptrdiff_t j0, ptrdiff_t y0, ptrdiff_t T)
{
    fp_conv *c = job->c;
    int R = c->ndim;
    ptrdiff_t idx[FP_MAXDIM];
    if (j0 < 0) {
        for (ptrdiff_t r = 0; r < job->block_rows; r++)
            for (ptrdiff_t t = 0; t < job->rowlen; t++)
                b[r * job->rowstride + t] = c->cval;
        return;
    }
    if (R == 2) {
        fp_conv_gather_row(c, j0 * c->istride[0], 0, job->rowlen, b);
        return;
    }
    for (ptrdiff_t e = 0; e < T + c->ntaps[1] - 1; e++) {
        ptrdiff_t j1 = c->map[1][y0 + e];
        for (int d = 2; d + 1 < R; d++)
            idx[d] = 0;
        for (ptrdiff_t r = 0; r < job->inner; r++) {
            double *dst = b + (e * job->inner + r) * job->rowstride;
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

/* See general.h. */
ptrdiff_t
fp_gen_place(const fp_conv *c, ptrdiff_t i0, ptrdiff_t *tags, ptrdiff_t *slotk, ptrdiff_t *fill)
{
    ptrdiff_t K0 = c->ntaps[0], nfill = 0;
    for (ptrdiff_t k = 0; k < K0; k++) {
        ptrdiff_t j = c->map[0][i0 + k], slot = -1;
        for (ptrdiff_t t = 0; t < K0; t++)
            if (tags[t] == j) {
                slot = t;
                break;
            }
        if (slot < 0) {
            for (ptrdiff_t t = 0; t < K0 && slot < 0; t++) {
                int used = 0;
                for (ptrdiff_t q = 0; q < K0; q++)
                    if (c->map[0][i0 + q] == tags[t]) {
                        used = 1;
                        break;
                    }
                if (!used)
                    slot = t;
            }
            tags[slot] = j;
            fill[nfill++] = slot;
        }
        slotk[k] = slot;
    }
    return nfill;
}

/* See general.h. */
void
fp_gen_prefetch(const fp_conv *c, ptrdiff_t j, ptrdiff_t y0, ptrdiff_t e0, ptrdiff_t e1)
{
    ptrdiff_t s = c->istride[2], len = (c->shape[2] - 1) * s;
    if (c->ndim != 3 || j < 0 || s > (ptrdiff_t)sizeof(double) || s < -(ptrdiff_t)sizeof(double))
        return;
    for (ptrdiff_t e = e0; e < e1; e++) {
        ptrdiff_t j1 = c->map[1][y0 + e];
        const char *p;
        if (j1 < 0)
            continue;
        p = c->idata + j * c->istride[0] + j1 * c->istride[1] + (len < 0 ? len : 0);
        for (ptrdiff_t b = 0; b <= (len < 0 ? -len : len); b += 64)
            __builtin_prefetch(p + b, 0, 2);
    }
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
    ptrdiff_t y0 = 0, T = 1, nrows, erows, per_pair;
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
    erows = T + (R >= 3 ? c->ntaps[1] - 1 : 0);
    per_pair = (erows + (nrows + 1) / 2 - 1) / ((nrows + 1) / 2);
    for (ptrdiff_t k = 0; k < K0; k++)
        s->tags[k] = -2;
    for (ptrdiff_t i0 = lo; i0 < hi; i0++) {
        ptrdiff_t idx[FP_MAXDIM];
        /* every slice read by i0 in a block; slotk[k0] = its block */
        ptrdiff_t nfill = fp_gen_place(c, i0, s->tags, slotk, s->fill);
        for (ptrdiff_t f = 0; f < nfill; f++)
            fp_gen_fill(job, s->blocks + s->fill[f] * job->block_rows * job->rowstride,
                        s->tags[s->fill[f]], y0, T);
        /* the pair sources of this slice: where each reads, from the pair's first block row */
        for (ptrdiff_t q = 0; q < job->npair; q++) {
            const fp_gen_psrc *ps = &job->psrc[q];
            s->psrc[q].rel = (slotk[ps->k0] * job->block_rows + ps->e) * job->rowstride + ps->off;
        }
        /* output rows: axis 1 over the tile, axes 2..ndim-2 in full */
        idx[1] = y0;
        for (int d = 2; d + 1 < R; d++)
            idx[d] = 0;
        for (ptrdiff_t r = 0; r < nrows; r++) {
            ptrdiff_t ooff = i0 * c->ostride[0];
            if (i0 + 1 < hi && r % 2 == 0 && R == 3) {
                /* a share of the rows of the slice the next output slice adds */
                ptrdiff_t e0 = (r / 2) * per_pair, e1 = e0 + per_pair;
                fp_gen_prefetch(c, c->map[0][i0 + K0], y0, e0, e1 < erows ? e1 : erows);
            }
            for (int d = 1; d + 1 < R; d++)
                ooff += idx[d] * c->ostride[d];
            if (job->npair > 0 && r + 1 < nrows) {
                /* 3-D: output rows idx[1] and idx[1] + 1 as a pair, written straight to a
                 * contiguous output row, else through rows of doubles */
                const double *base = s->blocks + (idx[1] - y0) * job->rowstride;
                fp_pair_out po;
                ptrdiff_t esize = c->odouble ? (ptrdiff_t)sizeof(double) : (ptrdiff_t)sizeof(float);
                int direct = c->ostride[R - 1] == esize;
                po.single = direct && !c->odouble;
                po.row0 = direct ? (void *)(c->odata + ooff) : (void *)s->acc;
                po.row1 = direct ? (void *)(c->odata + ooff + c->ostride[1]) : (void *)s->acc2;
                fp_conv_dot_rows2(&po, base, s->psrc, job->runs, job->nruns, n, c->exact);
                if (!direct) {
                    fp_conv_store_row(c, ooff, n, s->acc);
                    fp_conv_store_row(c, ooff + c->ostride[1], n, s->acc2);
                }
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
                        row = s->blocks + (slot * job->block_rows + rr) * job->rowstride;
                }
                for (ptrdiff_t q = 0; q < tp->nk; q++)
                    s->rowptr[tp->first + q] = row + job->off[tp->first + q];
            }
            fp_conv_dot_rows(s->acc, s->rowptr, job->w, job->nnz, n, c->exact);
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
    if (fp_gen_quarters_fits(c))
        return fp_gen_quarters(c);
    memset(&job, 0, sizeof(job));
    job.c = c;
    job.inner = 1;
    for (int d = 2; d + 1 < R; d++)
        job.inner *= c->shape[d];
    job.rowlen = c->shape[R - 1] + Klast - 1;
    job.rowstride = (job.rowlen + 3) / 4 * 4;
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
        ptrdiff_t per = c->ntaps[0] * job.inner * job.rowstride * (ptrdiff_t)sizeof(double);
        ptrdiff_t t1 = FP_GEN_CACHE_BYTES / (per > 0 ? per : 1) - (c->ntaps[1] - 1);
        if (t1 < 2 * c->ntaps[1])
            t1 = 2 * c->ntaps[1];
        if (t1 % 2 == 1)
            t1--; /* an even tile: its rows go in pairs */
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
    free(job.psrc);
    free(job.runs);
    return result;
}
