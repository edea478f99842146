// cuda/ndimage.cu - N-d correlation with the scipy.ndimage boundary modes, on the device, and
// the same per-element code on the host for the tests.  One thread per output element; the
// weights are read through the read-only cache.  Separable and box filters are run by the
// caller as a sequence of 1-D correlations (weights of shape 1 x ... x k x ... x 1).
#include <cuda_runtime.h>
#include "cuda/fp_cuda.h"

// Maps coordinate c onto [0, n) for the boundary mode; returns -1 for "outside" (constant).
__host__ __device__ static inline int64_t
fp_cu_fold(int64_t c, int64_t n, int mode)
{
    if (c >= 0 && c < n)
        return c;
    switch (mode) {
    case FP_CU_CONSTANT:
        return -1;
    case FP_CU_NEAREST:
        return c < 0 ? 0 : n - 1;
    case FP_CU_WRAP: {
        int64_t r = c % n;
        return r < 0 ? r + n : r;
    }
    case FP_CU_MIRROR: {
        if (n == 1)
            return 0;
        int64_t p = 2 * n - 2;
        int64_t r = c % p;
        if (r < 0)
            r += p;
        return r >= n ? p - r : r;
    }
    default: { // reflect: half-sample symmetric
        int64_t p = 2 * n;
        int64_t r = c % p;
        if (r < 0)
            r += p;
        return r >= n ? p - 1 - r : r;
    }
    }
}

// Returns output element idx (linear, C order) of the correlation.
template <typename T>
__host__ __device__ static inline T
fp_cu_point(const T *in, const T *w, const fp_cu_geom &g, int64_t idx)
{
    int64_t coord[FP_CU_MAXDIM];
    int64_t j[FP_CU_MAXDIM];
    int64_t rem = idx;
    for (int d = g.ndim - 1; d >= 0; d--) {
        coord[d] = rem % g.shape[d];
        rem /= g.shape[d];
        j[d] = 0;
    }
    int64_t nw = 1;
    for (int d = 0; d < g.ndim; d++)
        nw *= g.wshape[d];
    T acc = 0;
    const T cval = (T)g.cval;
    const T boxw = (T)g.box_weight;
    for (int64_t k = 0; k < nw; k++) {
        int64_t off = 0;
        bool outside = false;
        for (int d = 0; d < g.ndim; d++) {
            int64_t c = fp_cu_fold(coord[d] + j[d] - g.shift[d], g.shape[d], g.mode);
            if (c < 0) {
                outside = true;
                break;
            }
            off += c * g.in_strides[d];
        }
        T v;
#ifdef __CUDA_ARCH__
        v = outside ? cval : __ldg(in + off);
        T wk = w ? __ldg(w + k) : boxw;
#else
        v = outside ? cval : in[off];
        T wk = w ? w[k] : boxw;
#endif
        acc += wk * v;
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
fp_cu_correlate_kernel(const T *__restrict__ in, T *__restrict__ out, const T *__restrict__ w,
                       const fp_cu_geom g)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.size; i += stride)
        out[i] = fp_cu_point<T>(in, w, g, i);
}

// Returns a grid size covering n elements with 256-thread blocks, capped (grid-stride loop).
static unsigned int
fp_cu_blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    if (b > 65535 * 16)
        b = 65535 * 16;
    return (unsigned int)(b < 1 ? 1 : b);
}

extern "C" int
fp_cu_correlate(int dtype, const void *in, void *out, const void *weights, const fp_cu_geom *g,
                void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (g->size == 0)
        return 0;
    if (dtype == FP_CU_F32)
        fp_cu_correlate_kernel<float><<<fp_cu_blocks(g->size), 256, 0, s>>>(
            (const float *)in, (float *)out, (const float *)weights, *g);
    else
        fp_cu_correlate_kernel<double><<<fp_cu_blocks(g->size), 256, 0, s>>>(
            (const double *)in, (double *)out, (const double *)weights, *g);
    return (int)cudaGetLastError();
}

extern "C" int
fp_cu_correlate_host(int dtype, const void *in, void *out, const void *weights,
                     const fp_cu_geom *g)
{
    for (int64_t i = 0; i < g->size; i++) {
        if (dtype == FP_CU_F32)
            ((float *)out)[i] = fp_cu_point<float>((const float *)in, (const float *)weights, *g, i);
        else
            ((double *)out)[i] =
                fp_cu_point<double>((const double *)in, (const double *)weights, *g, i);
    }
    return 0;
}

__global__ static void
fp_cu_scrub_kernel(unsigned int *p, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (unsigned int)i ^ 0x5bd1e995u;
}

extern "C" int
fp_cu_scrub(void *ptr, int64_t n, void *stream)
{
    int64_t words = n / 4;
    if (words > 0)
        fp_cu_scrub_kernel<<<fp_cu_blocks(words), 256, 0, (cudaStream_t)stream>>>(
            (unsigned int *)ptr, words);
    return (int)cudaGetLastError();
}

__global__ static void
fp_cu_spin_kernel(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

extern "C" int
fp_cu_spin(int64_t cycles, void *stream)
{
    fp_cu_spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((long long)cycles);
    return (int)cudaGetLastError();
}
