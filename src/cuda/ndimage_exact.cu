// cuda/ndimage_exact.cu - scipy.ndimage's own arithmetic on the device (exact=True), and the
// same code on the host for the tests.  Every value is a double, as in scipy's line buffers:
//
// - correlate: one thread per output sums every nonzero tap of the whole kernel from 0.0, in C
//   order of the taps, a product then a sum each (never one fused multiply-add), the weights
//   read as doubles; a window inside the input steps its offsets by the strides, one that
//   crosses a border folds each tap's coordinates;
// - a box along one axis (uniform_filter's passes): one thread per line sums the first window
//   from 0.0, then moves it with sum + (entering - leaving), and stores sum / size.
//
// The results are rounded to the output's element type, or to float32 and kept in a double
// (g->exact == 2: the float32 array scipy stores between the axes of a uniform_filter).  The
// intrinsics (__dmul_rn, __dadd_rn, ...) round each operation on its own: nvcc never fuses
// them.  The boundary fold is kernels/fold.h's, as everywhere else.
#include <cuda_runtime.h>
#include <stdlib.h>
#include "cuda/fp_cuda.h"

// Returns acc + v * w, the product rounded to double before the sum.
__host__ __device__ static inline double
fp_cx_madd(double acc, double v, double w)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(acc, __dmul_rn(v, w));
#else
    volatile double p = v * w; // the host compiler may not fuse it either
    return acc + p;
#endif
}

// Returns a + b rounded to double.
__host__ __device__ static inline double
fp_cx_add(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

// Returns a + (b - c), each operation rounded to double.
__host__ __device__ static inline double
fp_cx_step(double a, double b, double c)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, __dsub_rn(b, c));
#else
    return a + (b - c);
#endif
}

// Returns a / b rounded to double.
__host__ __device__ static inline double
fp_cx_div(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

// Stores v as a T; with round32 (T double) rounded to float32 first.  Returns nothing.
template <typename T>
__host__ __device__ static inline void
fp_cx_store(T *p, double v, bool round32)
{
    if (sizeof(T) == sizeof(float))
        *p = (T)(float)v;
    else
        *p = round32 ? (T)(float)v : (T)v;
}

// Returns input element at offset off as a double.
template <typename T>
__host__ __device__ static inline double
fp_cx_in(const T *in, int64_t off)
{
#ifdef __CUDA_ARCH__
    return (double)__ldg(in + off);
#else
    return (double)in[off];
#endif
}

// Returns the weight at w + k (doubles), read through the read-only cache on the device.
__host__ __device__ static inline double
fp_cx_weight(const double *w, int64_t k)
{
#ifdef __CUDA_ARCH__
    return __ldg(w + k);
#else
    return w[k];
#endif
}

// Returns scipy's sum over the nonzero taps for an output whose window lies inside the input
// on every axis (no fold): the window's first element at in + off0, the taps in C order, rows
// of the last axis innermost, each tap's offset moved on by the strides, not recomputed.
template <typename T>
__host__ __device__ static inline double
fp_cx_point_inside(const T *in, const double *w, const fp_cu_geom &g, int64_t off0)
{
    const int last = g.ndim - 1;
    const int64_t nl = g.wshape[last], sl = g.in_strides[last];
    int64_t j[FP_CU_MAXDIM], rows = 1, off = off0;
    double acc = 0.0;
    for (int d = 0; d < last; d++) {
        j[d] = 0;
        rows *= g.wshape[d];
    }
    for (int64_t r = 0; r < rows; r++) {
        const double *wr = w + r * nl;
        for (int64_t k = 0; k < nl; k++) {
            const double wk = fp_cx_weight(wr, k);
            if (wk != 0.0)
                acc = fp_cx_madd(acc, fp_cx_in(in, off + k * sl), wk);
        }
        for (int d = last - 1; d >= 0; d--) { // the next row of taps: an odometer on offsets
            off += g.in_strides[d];
            if (++j[d] < g.wshape[d])
                break;
            off -= g.wshape[d] * g.in_strides[d];
            j[d] = 0;
        }
    }
    return acc;
}

// Returns output element idx (linear, C order) of the correlation with weights w (doubles,
// C order, wshape): scipy's sum over the nonzero taps.  A window inside the input takes
// fp_cx_point_inside; one that crosses a border folds each tap's coordinates.
template <typename T>
__host__ __device__ static inline double
fp_cx_point(const T *in, const double *w, const fp_cu_geom &g, int64_t idx)
{
    int64_t coord[FP_CU_MAXDIM], j[FP_CU_MAXDIM], rem = idx, nw = 1, off0 = 0;
    double acc = 0.0;
    bool inside = true;
    for (int d = g.ndim - 1; d >= 0; d--) {
        coord[d] = rem % g.shape[d];
        rem /= g.shape[d];
        j[d] = 0;
        nw *= g.wshape[d];
        const int64_t lo = coord[d] - g.shift[d];
        inside = inside && lo >= 0 && lo + g.wshape[d] <= g.shape[d];
        off0 += lo * g.in_strides[d];
    }
    if (inside)
        return fp_cx_point_inside<T>(in, w, g, off0);
    for (int64_t k = 0; k < nw; k++) {
        const double wk = fp_cx_weight(w, k);
        if (wk != 0.0) { // scipy leaves zero (and tiny, zeroed by the caller) taps out
            int64_t off = 0;
            bool outside = false;
            for (int d = 0; d < g.ndim; d++) {
                int64_t c = fp_fold(coord[d] + j[d] - g.shift[d], g.shape[d], g.mode);
                if (c < 0) {
                    outside = true;
                    break;
                }
                off += c * g.in_strides[d];
            }
            acc = fp_cx_madd(acc, outside ? g.cval : fp_cx_in(in, off), wk);
        }
        for (int d = g.ndim - 1; d >= 0; d--) { // odometer over the weight indices
            if (++j[d] < g.wshape[d])
                break;
            j[d] = 0;
        }
    }
    return acc;
}

template <typename T>
__global__ static void
fp_cx_point_kernel(const T *__restrict__ in, T *__restrict__ out, const double *__restrict__ w,
                   const fp_cu_geom g)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.size; i += stride)
        fp_cx_store(out + i, fp_cx_point<T>(in, w, g, i), g.exact == 2);
}

// Returns the axis the box of g runs along: the one with wshape > 1 (0 when none).
static int
fp_cx_box_axis(const fp_cu_geom *g)
{
    for (int d = 0; d < g->ndim; d++)
        if (g->wshape[d] > 1)
            return d;
    return 0;
}

// Line t (C order over the axes other than a) of the box along axis a: scipy's running sum,
// sum / size stored for each output (a copy where the box is one long).  Returns nothing.
template <typename T>
__host__ __device__ static inline void
fp_cx_line(const T *in, T *out, const fp_cu_geom &g, int a, int64_t t)
{
    int64_t ioff = 0, ooff = 0, ostride = 1, ostep = 1, rem = t;
    const int64_t n = g.shape[a], s = g.wshape[a], sh = g.shift[a], istep = g.in_strides[a];
    const bool r32 = g.exact == 2;
    for (int d = g.ndim - 1; d >= 0; d--) {
        if (d == a) {
            ostep = ostride;
        } else {
            int64_t c = rem % g.shape[d];
            rem /= g.shape[d];
            ioff += c * g.in_strides[d];
            ooff += c * ostride;
        }
        ostride *= g.shape[d];
    }
    const T *line = in + ioff;
    T *o = out + ooff;
#define FP_CX_AT(e)                                                                                \
    (fp_fold((e)-sh, n, g.mode) < 0 ? g.cval : fp_cx_in(line, fp_fold((e)-sh, n, g.mode) * istep))
    if (s == 1) { // scipy filters no axis of size 1: the values as they are
        for (int64_t i = 0; i < n; i++)
            fp_cx_store(o + i * ostep, fp_cx_in(line, i * istep), r32);
        return;
    }
    double sum = 0.0;
    for (int64_t k = 0; k < s; k++)
        sum = fp_cx_add(sum, FP_CX_AT(k));
    fp_cx_store(o, fp_cx_div(sum, (double)s), r32);
    // outputs [i0, i1) read their entering and leaving values inside the line: no fold
    const int64_t i0 = sh + 1 > 1 ? sh + 1 : 1, i1 = n - s + sh + 1 < n ? n - s + sh + 1 : n;
    int64_t i = 1;
    for (; i < i0 && i < n; i++) {
        sum = fp_cx_step(sum, FP_CX_AT(i + s - 1), FP_CX_AT(i - 1));
        fp_cx_store(o + i * ostep, fp_cx_div(sum, (double)s), r32);
    }
    for (; i < i1; i++) {
        sum = fp_cx_step(sum, fp_cx_in(line, (i + s - 1 - sh) * istep),
                         fp_cx_in(line, (i - 1 - sh) * istep));
        fp_cx_store(o + i * ostep, fp_cx_div(sum, (double)s), r32);
    }
    for (; i < n; i++) {
        sum = fp_cx_step(sum, FP_CX_AT(i + s - 1), FP_CX_AT(i - 1));
        fp_cx_store(o + i * ostep, fp_cx_div(sum, (double)s), r32);
    }
#undef FP_CX_AT
}

template <typename T>
__global__ static void
fp_cx_line_kernel(const T *__restrict__ in, T *__restrict__ out, const fp_cu_geom g, int a,
                  int64_t nlines)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nlines; t += stride)
        fp_cx_line<T>(in, out, g, a, t);
}

// Runs scipy's arithmetic for T on stream s or, with host, thread by thread on the host.
// Returns a cudaError_t (0 on the host).
template <typename T>
static int
fp_cx_run(const T *in, T *out, const double *w, const fp_cu_geom &g, bool host, cudaStream_t s)
{
    if (w != NULL) {
        if (!host) {
            fp_cx_point_kernel<T><<<fp_cu_blocks(g.size), 256, 0, s>>>(in, out, w, g);
            return (int)cudaGetLastError();
        }
        for (int64_t i = 0; i < g.size; i++)
            fp_cx_store(out + i, fp_cx_point<T>(in, w, g, i), g.exact == 2);
        return 0;
    }
    const int a = fp_cx_box_axis(&g);
    const int64_t nlines = g.shape[a] > 0 ? g.size / g.shape[a] : 0;
    if (!host) {
        fp_cx_line_kernel<T><<<fp_cu_blocks(nlines), 256, 0, s>>>(in, out, g, a, nlines);
        return (int)cudaGetLastError();
    }
    for (int64_t t = 0; t < nlines; t++)
        fp_cx_line<T>(in, out, g, a, t);
    return 0;
}

extern "C" int
fp_cu_correlate_exact(int dtype, const void *in, void *out, const double *weights,
                      const fp_cu_geom *g, int host, void *stream)
{
    if (g->size == 0)
        return 0;
    if (dtype == FP_CU_F32)
        return fp_cx_run<float>((const float *)in, (float *)out, weights, *g, host != 0,
                                (cudaStream_t)stream);
    return fp_cx_run<double>((const double *)in, (double *)out, weights, *g, host != 0,
                             (cudaStream_t)stream);
}
