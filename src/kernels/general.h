/* kernels/general.h - the general correlation's job, shared by general.c (blocks, tiles and
 * the walk over output rows) and gen_pairs.c (the source list of a pair of 3-D rows). */
#ifndef FP_KERNELS_GENERAL_H
#define FP_KERNELS_GENERAL_H

#include "kernels/conv.h"

typedef struct {
    ptrdiff_t nk;           /* nonzero taps along the last axis */
    ptrdiff_t first;        /* index of its first entry in off/w */
    ptrdiff_t k[FP_MAXDIM]; /* tap index on axes 0..ndim-2 */
} fp_gen_tap;

/* One source of a pair of 3-D output rows: block row (k0, first row of the pair + e) read at
 * offset off along the row, with weight w0 for the first row and w1 for the second. */
typedef struct {
    ptrdiff_t k0, e, off;
    double w0, w1;
} fp_gen_psrc;

typedef struct {
    int ready;
    double *blocks; /* ntaps[0] blocks of block_rows rows of rowstride doubles, 64-byte aligned */
    ptrdiff_t *tags;
    ptrdiff_t *slotk;
    ptrdiff_t *fill; /* slots to fill for the current output slice */
    double *acc;
    double *acc2; /* the second row of a pair */
    double *crow; /* a row of cval */
    const double **rowptr;
    fp_pair_src *psrc; /* the pair sources: weights filled in at allocation, rel per slice */
} fp_gen_scratch;

typedef struct {
    fp_conv *c;
    ptrdiff_t chunk0, nchunks0, tile1, ntiles1;
    ptrdiff_t inner;      /* rows of axes 2..ndim-2 (1 when ndim <= 3) */
    ptrdiff_t block_rows; /* rows of one block: (tile1 + ntaps[1] - 1) * inner, or 1 */
    ptrdiff_t rowlen;     /* extended row length */
    ptrdiff_t rowstride;  /* doubles from one block row to the next: rowlen rounded up to 4 */
    ptrdiff_t ntap;       /* outer taps with a nonzero weight */
    ptrdiff_t nnz;        /* nonzero weights in all */
    fp_gen_tap *taps;
    ptrdiff_t *off;
    double *w;
    fp_gen_scratch *scratch;
    int nworkers;
    /* 3-D pairs of rows: npair sources in nruns runs (npair 0: no pairs) */
    ptrdiff_t npair, nruns;
    fp_gen_psrc *psrc;
    fp_pair_run *runs;
} fp_gen_job;

/* Places the ntaps[0] input slices that output slice i0 reads in as many blocks (slots), a
 * slot keeping its slice while a later output slice still reads it: tags[t] is the slice in
 * slot t (-1: cval, for constant mode outside the input; -2 before any), slotk[k] the slot of
 * slice map[0][i0 + k].  The slots whose slice changed are written to fill.  Returns their
 * number; sets no error. */
ptrdiff_t fp_gen_place(const fp_conv *c, ptrdiff_t i0, ptrdiff_t *tags, ptrdiff_t *slotk,
                       ptrdiff_t *fill);

/* Asks the cache for the input rows that block rows [e0, e1) of slice j (tile from y0) will
 * be filled from, 3-D and rows of stride at most a double only: the fill of the next slice then
 * reads them from cache instead of waiting on memory (the input is read once and seldom
 * cached).  Returns nothing. */
void fp_gen_prefetch(const fp_conv *c, ptrdiff_t j, ptrdiff_t y0, ptrdiff_t e0, ptrdiff_t e1);

/* 1 when fp_gen_quarters takes the call: 3-D, 3 or 5 taps along the last axis, every weight
 * nonzero, rows of at least 32 outputs, on a CPU with AVX2 and FMA.  Sets no error. */
int fp_gen_quarters_fits(const fp_conv *c);

/* The general 3-D correlation with the four quarters of a row in the lanes of a vector
 * (gen_quarters.c), for a call fp_gen_quarters_fits accepts.  Same contract as
 * fp_conv_general. */
int fp_gen_quarters(fp_conv *c);

/* Makes job->psrc and job->runs, the sources of a pair of 3-D output rows, from job->taps,
 * off and w; leaves npair 0 when the two rows share no source.  Returns 0, or -1 when out of
 * memory (no exception set; what was allocated is left in the job for the caller to free). */
int fp_gen_pairs(fp_gen_job *job);

#endif
