/* cuda/fp_cuda.h - the interface between the C side of the CUDA part (compiled by the C
 * compiler against the Python API) and the .cu files (compiled by nvcc, no Python header).
 * Only used in CUDA builds. */
#ifndef FP_CUDA_H
#define FP_CUDA_H

#include <stdint.h>

#include "kernels/fold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Boundary modes of the ndimage filters (the grid-* names map onto these): the CPU kernels'
 * codes, folded by the one fp_fold of kernels/fold.h. */
enum {
    FP_CU_REFLECT = FP_MODE_REFLECT,
    FP_CU_CONSTANT = FP_MODE_CONSTANT,
    FP_CU_NEAREST = FP_MODE_NEAREST,
    FP_CU_MIRROR = FP_MODE_MIRROR,
    FP_CU_WRAP = FP_MODE_WRAP
};

/* Element types of the filters. */
enum { FP_CU_F32, FP_CU_F64 };

#define FP_CU_MAXDIM 8

/* Returns a grid size covering n threads with 256-thread blocks, capped (the kernels launched
 * with it run grid-stride loops). */
static inline unsigned int
fp_cu_blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    if (b > 65535 * 16)
        b = 65535 * 16;
    return (unsigned int)(b < 1 ? 1 : b);
}

/* Bytes of weights the per-element kernel takes in its parameters (the constant bank; the
 * parameters' 4 KiB hold these and the geometry): 448 float64 or 896 float32 weights. */
#define FP_CU_CW_BYTES 3584

/* Geometry of one correlation: the input (strides in elements, may be negative), the
 * C-contiguous output of the same shape, and the weights (C-contiguous, wshape). The input
 * coordinate read for output i and weight j along dimension d is i + j - shift[d]. When
 * weights is NULL every weight is box_weight (the box fast path). */
typedef struct fp_cu_geom {
    int ndim;
    int mode;
    double cval;
    double box_weight;
    int64_t size; /* number of output elements */
    int64_t shape[FP_CU_MAXDIM];
    int64_t in_strides[FP_CU_MAXDIM];
    int64_t wshape[FP_CU_MAXDIM];
    int64_t shift[FP_CU_MAXDIM];
    int exact; /* 0: the fast kernels; 1: scipy's arithmetic (fp_cu_correlate_exact); 2: that,
                  each result rounded to float32 (kept in a double) */
} fp_cu_geom;

/* Launches the correlation of in into out on stream (a cudaStream_t): running sums for a box
 * along one axis longer than 24 (a few reads per output whatever its length), else the tiled
 * kernel when fp_cu_tiled_ok, else one thread per output element.  host_weights (may be NULL)
 * holds the weights' values on the host: the per-element kernel then takes them in its
 * parameters (the constant bank) when they fit FP_CU_CW_BYTES, else it reads weights from
 * global memory.  Returns a cudaError_t (0 on success); sets no Python exception. */
int fp_cu_correlate(int dtype, const void *in, void *out, const void *weights,
                    const void *host_weights, const fp_cu_geom *g, void *stream);

/* Runs the very same device code on the host (in, out, weights in host memory), block by
 * block for the tiled path, thread by thread for the others; used by the tests to check
 * indexing and boundary logic without a device.  path: 0 the path the device would take, 1 the
 * direct per-element path.  Adds the number of input elements the device code loads to *reads
 * (reads may be NULL).  Returns 0, or -1 when out of memory. */
int fp_cu_correlate_host(int dtype, const void *in, void *out, const void *weights,
                         const fp_cu_geom *g, int path, int64_t *reads);

/* Runs scipy.ndimage's arithmetic (g->exact 1 or 2) on stream, or with host on the host: with
 * weights (doubles, C order) one thread per output sums every nonzero tap from 0.0 in C order,
 * a product then a sum each; without, a box of g->wshape along its one long axis as scipy's
 * running sum, one thread per line.  Returns a cudaError_t (0 on success, and on the host);
 * sets no Python exception. */
int fp_cu_correlate_exact(int dtype, const void *in, void *out, const double *weights,
                          const fp_cu_geom *g, int host, void *stream);

/* Returns 1 when fp_cu_correlate takes the shared-memory tiled path for g (2-D or 3-D, window
 * and weights fit in 48 KiB of shared memory), else 0. */
int fp_cu_tiled_ok(int dtype, const fp_cu_geom *g);

/* Fills n bytes at ptr with a pattern on stream (the L2 flush of the benchmarks): a kernel,
 * so that the writes go through L2.  Returns a cudaError_t. */
int fp_cu_scrub(void *ptr, int64_t n, void *stream);

/* Spins on the device for about cycles clock cycles on stream (the known-length kernel of
 * the timer tests).  Returns a cudaError_t. */
int fp_cu_spin(int64_t cycles, void *stream);

#ifdef __cplusplus
}
#endif

#endif
