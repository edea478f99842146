/* kernels/conv.h - shared description of one N-D correlation job (scipy.ndimage semantics).
 *
 * Python normalises the arguments (dtypes, modes, origins, flipping for convolve); C sees
 * float32/float64 arrays of one shape, per-axis extension modes and tap counts.  Axes are
 * permuted so that axis ndim-1 has the smallest input stride (the row walked by the vector
 * loops) and axis 0 the largest. */
#ifndef FP_KERNELS_CONV_H
#define FP_KERNELS_CONV_H

#include <stddef.h>

#include "kernels/fold.h" /* the extension modes (FP_MODE_*) and fp_fold, shared with CUDA */

#define FP_MAXDIM 32
/* the longest line a box filter extends into a buffer (a line plus its box, less one): 128 GiB
 * of doubles, beyond what scipy could allocate for it too; no byte count of the buffers wraps
 * around below it, and a lone line's running sum over it ends in seconds */
#define FP_BOX_MAX_EXT ((npy_intp)1 << 34)

typedef struct fp_conv {
    int ndim;
    ptrdiff_t shape[FP_MAXDIM];
    ptrdiff_t istride[FP_MAXDIM]; /* bytes */
    ptrdiff_t ostride[FP_MAXDIM]; /* bytes */
    char *idata;
    char *odata;
    int idouble; /* input is float64 (else float32) */
    int odouble; /* output is float64 (else float32) */
    double cval;
    ptrdiff_t ntaps[FP_MAXDIM]; /* kernel length per axis */
    /* map[d][e], e in [0, shape[d] + ntaps[d] - 1): input index read by output index i with
     * tap k at e = i + k, or -1 for "cval" (constant mode outside the input). */
    ptrdiff_t *map[FP_MAXDIM];
    ptrdiff_t shift[FP_MAXDIM]; /* map[d][e] == e - shift[d] for e in [shift, shift + shape) */
    /* separable: factors[d] holds ntaps[d] weights; general: weights holds prod(ntaps) weights,
     * C order over the permuted axes. */
    const double *factors[FP_MAXDIM];
    const double *weights;
    int nthreads;
    int single; /* separable path: accumulate in float (float32 data, short kernels) */
    int exact;  /* general path: scipy's arithmetic, a product and a sum per tap (no FMA) */
} fp_conv;

/* Input index read for extended index j (any integer) on an axis of length n >= 1 in mode.
 * Returns the index in [0, n), or -1 for constant mode outside: what fp_fold (kernels/fold.h,
 * which the CUDA kernels use) returns. */
ptrdiff_t fp_conv_extend(ptrdiff_t j, ptrdiff_t n, int mode);

/* Fills c->map for every axis, with shift[d] = ntaps[d] / 2 + origin[d].  Returns 0, or -1 when
 * out of memory (no exception set).  fp_conv_free_maps() releases them. */
int fp_conv_make_maps(fp_conv *c, const int *modes, const ptrdiff_t *shift);
void fp_conv_free_maps(fp_conv *c);

/* Reads input elements into doubles: dst[t] = in[map[lo + t]] along the row at byte offset
 * ioff (or cval), t in [0, len).  Returns nothing. */
void fp_conv_gather_row(const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo, ptrdiff_t len, double *dst);

/* Writes doubles to an output row at byte offset ooff, len elements.  Returns nothing. */
void fp_conv_store_row(const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len, const double *src);

/* dst[x] = (accumulate ? dst[x] : add) + sum_k w[k] * src[k][x] for x in [0, n); with no
 * sources and no accumulate dst is set to add.  Returns nothing. */
void fp_conv_combine(double *dst, const double *const *src, const double *w, int nk, double add,
                     ptrdiff_t n, int accumulate);

/* dst[x] = sum_k w[k] * src[k][x], x in [0, n): each output summed from zero with one
 * (fused, where the CPU has FMA) multiply-add per source in source order, whatever its place in
 * the row; with exact, a product then a sum (scipy's arithmetic).  The general path's inner
 * loop.  Returns nothing. */
void fp_conv_dot_rows(double *dst, const double *const *src, const double *w, ptrdiff_t nk,
                      ptrdiff_t n, int exact);

/* One source of a pair of output rows (fp_conv_dot_rows2): the source row, read at base + rel
 * (doubles) from the base pointer the call is given, and its weight for each output row (only
 * those its run names are read). */
typedef struct {
    ptrdiff_t rel;
    double w0, w1;
} fp_pair_src;

/* A run of consecutive sources of one kind: FP_PAIR_BOTH sources feed both output rows (one
 * load, two multiply-adds), FP_PAIR_FIRST / FP_PAIR_SECOND feed one of them, and FP_PAIR_SPLIT
 * holds an even count of sources that alternate: the first of each two feeds the first row
 * (w0), the second the second row (w1), so that a loop step has a multiply-add for each row's
 * accumulators (a run that feeds one row alone waits on the multiply-add latency). */
enum { FP_PAIR_BOTH = 0, FP_PAIR_FIRST = 1, FP_PAIR_SECOND = 2, FP_PAIR_SPLIT = 3 };
typedef struct {
    int kind;
    ptrdiff_t first, count; /* sources [first, first + count) */
} fp_pair_run;

/* Where fp_conv_dot_rows2 writes its two rows of n outputs: contiguous float32 rows (single 1:
 * each sum rounded once to float) or contiguous float64 rows (single 0). */
typedef struct {
    void *row0, *row1;
    int single;
} fp_pair_out;

/* Two output rows at once: row0[x] = sum w0 * src[x] over the sources of the runs that feed the
 * first row, row1[x] likewise with w1 over those that feed the second, x in [0, n), each source
 * read at base + rel; each output summed from zero with one (fused, where the CPU has FMA)
 * multiply-add per source in source order, exactly as fp_conv_dot_rows sums it, then stored
 * (rounded to float32 where out->single).  A source row shared by the two outputs is loaded
 * once for both.  With exact, each multiply-add is a product then a sum, rounded twice, as
 * scipy's C loop computes it (no FMA).  Returns nothing. */
void fp_conv_dot_rows2(const fp_pair_out *out, const double *base, const fp_pair_src *src,
                       const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n, int exact);

/* dst[x] = sum_j w[j] * row[x + off[j]] (+ dst[x] when accumulate), x in [0, n).  Returns
 * nothing. */
void fp_conv_taps(double *dst, const double *row, const double *w, const ptrdiff_t *off, int nk,
                  ptrdiff_t n, int accumulate);

/* The same four loops accumulating in float (for float32 data and short kernels). */
void fp_conv_gather_row_f(const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo, ptrdiff_t len,
                          float *dst);
void fp_conv_store_row_f(const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len, const float *src);
void fp_conv_combine_f(float *dst, const float *const *src, const float *w, int nk, float add,
                       ptrdiff_t n, int accumulate);
void fp_conv_taps_f(float *dst, const float *row, const float *w, const ptrdiff_t *off, int nk,
                    ptrdiff_t n, int accumulate);

/* Separable correlation (weights = outer product of c->factors).  Runs with the GIL released
 * by the caller.  Returns 0, or -1 when out of memory (no exception set). */
int fp_conv_separable(fp_conv *c);

/* General correlation with c->weights.  Same contract as fp_conv_separable. */
int fp_conv_general(fp_conv *c);

#endif
