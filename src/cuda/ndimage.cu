// cuda/ndimage.cu - N-d correlation with the scipy.ndimage boundary modes, on the device, and
// the same per-element code on the host for the tests.  One thread per output element; the
// weights are taken in the kernel's parameters (the constant bank) where they fit, else read
// through the read-only cache.  The boundary fold is kernels/fold.h's, which the CPU uses too.
// Separable and box filters are run by the caller as a sequence of 1-D correlations (weights of
// shape 1 x ... x k x ... x 1); a long box along one axis runs as running sums (a few reads per
// output whatever its length).
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include "cuda/fp_cuda.h"

// Counts one load of an input element into *reads in the host emulation (reads may be NULL);
// nothing on the device.
#ifdef __CUDA_ARCH__
#define FP_CU_READ(reads) ((void)0)
#else
#define FP_CU_READ(reads) ((reads) != NULL ? (void)++*(reads) : (void)0)
#endif

// Maps coordinate c onto [0, n) for the boundary mode (MODE when >= 0, fixed at compile time,
// else mode); returns -1 for "outside" (constant).  The one definition is kernels/fold.h's,
// which the CPU kernels use too.
template <int MODE = -1>
__host__ __device__ static inline int64_t
fp_cu_fold(int64_t c, int64_t n, int mode)
{
    return fp_fold(c, n, MODE >= 0 ? MODE : mode);
}

// Weights of the per-element kernel taken by value in its parameters, which the device keeps
// in its constant bank: read through the constant cache and broadcast to a warp whose threads
// all read the same weight (as they do), and copied at launch, so launches on different
// streams cannot see each other's weights (as they could through one __constant__ array
// written before each launch).
template <typename T> struct fp_cu_cweights {
    T w[FP_CU_CW_BYTES / sizeof(T)];
};

// Reads weight k from global memory through the read-only cache (every weight box_weight when
// there is no weights array).
template <typename T> struct fp_cu_wglobal {
    const T *w;
    T boxw;
    __host__ __device__ T operator()(int64_t k) const
    {
#ifdef __CUDA_ARCH__
        return w ? __ldg(w + k) : boxw;
#else
        return w ? w[k] : boxw;
#endif
    }
};

// Reads weight k from the kernel's parameters (the constant bank).
template <typename T> struct fp_cu_wconst {
    const fp_cu_cweights<T> &c;
    __host__ __device__ T operator()(int64_t k) const
    {
        return c.w[k];
    }
};

// Returns output element idx (linear, C order) of the correlation, weight k read as wget(k).
template <typename T, typename W>
__host__ __device__ static inline T
fp_cu_point(const T *in, const W &wget, const fp_cu_geom &g, int64_t idx, int64_t *reads)
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
#else
        v = outside ? cval : in[off];
        if (!outside)
            FP_CU_READ(reads);
#endif
        acc += wget(k) * v;
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
    const fp_cu_wglobal<T> wget = {w, (T)g.box_weight};
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.size; i += stride)
        out[i] = fp_cu_point<T>(in, wget, g, i, NULL);
}

// The per-element kernel with its weights in its parameters (the constant bank).
template <typename T>
__global__ static void
fp_cu_correlate_const_kernel(const T *__restrict__ in, T *__restrict__ out, const fp_cu_geom g,
                             const __grid_constant__ fp_cu_cweights<T> cw)
{
    const fp_cu_wconst<T> wget = {cw};
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.size; i += stride)
        out[i] = fp_cu_point<T>(in, wget, g, i, NULL);
}

// Runs the per-element path on stream s or, with host, element by element on the host: the
// weights from the kernel's parameters when host_w (their values on the host) is given and
// they fit, else from global memory (w, or box_weight when w is NULL).  Returns a cudaError_t
// (0 on the host).
template <typename T>
static int
fp_cu_point_impl(const T *in, T *out, const T *w, const T *host_w, const fp_cu_geom &g, bool host,
                 cudaStream_t s, int64_t *reads)
{
    int64_t nw = 1;
    for (int d = 0; d < g.ndim; d++)
        nw *= g.wshape[d];
    const bool in_params = w != NULL && host_w != NULL && nw * (int64_t)sizeof(T) <= FP_CU_CW_BYTES;
    if (!host) {
        if (in_params) {
            fp_cu_cweights<T> cw;
            memcpy(cw.w, host_w, (size_t)nw * sizeof(T));
            fp_cu_correlate_const_kernel<T><<<fp_cu_blocks(g.size), 256, 0, s>>>(in, out, g, cw);
        } else {
            fp_cu_correlate_kernel<T><<<fp_cu_blocks(g.size), 256, 0, s>>>(in, out, w, g);
        }
        return (int)cudaGetLastError();
    }
    if (in_params) {
        fp_cu_cweights<T> cw;
        memcpy(cw.w, host_w, (size_t)nw * sizeof(T));
        const fp_cu_wconst<T> wget = {cw};
        for (int64_t i = 0; i < g.size; i++)
            out[i] = fp_cu_point<T>(in, wget, g, i, reads);
    } else {
        const fp_cu_wglobal<T> wget = {w, (T)g.box_weight};
        for (int64_t i = 0; i < g.size; i++)
            out[i] = fp_cu_point<T>(in, wget, g, i, reads);
    }
    return 0;
}

// --- tiled 2-D / 3-D path ----------------------------------------------------------------------
// A block of FP_TX x FP_TY threads computes an FP_TX x FP_TY x TZ tile of the output (TZ = 8 for
// 3-D, 1 for 2-D).  It first stages the tile's input window (boundary modes applied once per
// element) and the weights in shared memory, then each thread sums over the window, keeping
// its TZ outputs in registers and reading each staged value once per (dy, dx).  The two phases
// are __host__ __device__ functions so the host emulation runs the very same code.

#define FP_TX 32
#define FP_TY 8
#define FP_SMEM_MAX (48 * 1024)

// Window and tile sizes of one tiled launch.
struct fp_cu_tile {
    int64_t nz, ny, nx; // output (= input) shape, 2-D as nz = 1
    int64_t sz, sy, sx; // input strides (elements)
    int kz, ky, kx;     // weights shape
    int64_t hz, hy, hx; // shifts
    int SZ, SY, SX;     // staged window
    int off32;          // 1 when every offset inside a block's window fits in 32 bits
};

// Fills t from g for the tiled path; returns the shared-memory bytes it needs, or 0 when the
// geometry does not fit the tiled path (not 2-D/3-D, or a window too large).
static size_t
fp_cu_tile_plan(const fp_cu_geom *g, size_t item, int tz, fp_cu_tile *t)
{
    int off = g->ndim == 3 ? 0 : 1;
    if (g->ndim != 2 && g->ndim != 3)
        return 0;
    t->nz = off ? 1 : g->shape[0];
    t->sz = off ? 0 : g->in_strides[0];
    t->kz = off ? 1 : (int)g->wshape[0];
    t->hz = off ? 0 : g->shift[0];
    t->ny = g->shape[1 - off];
    t->sy = g->in_strides[1 - off];
    t->ky = (int)g->wshape[1 - off];
    t->hy = g->shift[1 - off];
    t->nx = g->shape[2 - off];
    t->sx = g->in_strides[2 - off];
    t->kx = (int)g->wshape[2 - off];
    t->hx = g->shift[2 - off];
    if (t->kz > 64 || t->ky > 64 || t->kx > 64)
        return 0;
    t->SZ = tz + t->kz - 1;
    t->SY = FP_TY + t->ky - 1;
    t->SX = FP_TX + t->kx - 1;
    size_t n = (size_t)t->SZ * t->SY * t->SX + (size_t)t->kz * t->ky * t->kx;
    if (n * item > FP_SMEM_MAX || t->ny > 65535LL * FP_TY || t->nz > 65535LL * tz)
        return 0;
    const int64_t span = (int64_t)t->SZ * llabs(t->sz) + (int64_t)t->SY * llabs(t->sy) +
                         (int64_t)t->SX * llabs(t->sx);
    t->off32 = span < 0x7fffffffLL;
    return n * item;
}

// Returns 1 when the window of block (bx, by, bz) lies inside the input (no boundary folding
// needed), else 0.
template <int TZ>
__host__ __device__ static inline int
fp_cu_tile_inside(const fp_cu_tile &t, int bx, int by, int bz)
{
    const int64_t x0 = (int64_t)bx * FP_TX - t.hx;
    const int64_t y0 = (int64_t)by * FP_TY - t.hy;
    const int64_t z0 = (int64_t)bz * TZ - t.hz;
    return t.off32 && x0 >= 0 && x0 + t.SX <= t.nx && y0 >= 0 && y0 + t.SY <= t.ny && z0 >= 0 &&
           z0 + t.SZ <= t.nz;
}

// Phase 1 for thread tid of block (bx, by, bz): stages input window and weights.  KZ, KY, KX
// (0: not known at compile time) fix the window's shape, MODE (-1: g.mode at run time) the
// boundary mode.  A block whose window lies inside the
// input reads it with 32-bit offsets from the window's corner and folds nothing; the others
// fold each coordinate for the boundary mode.
template <typename T, int TZ, int KZ, int KY, int KX, int MODE>
__host__ __device__ static inline void
fp_cu_tile_load(const T *in, const T *w, const fp_cu_geom &g, const fp_cu_tile &t, int bx, int by,
                int bz, int tid, T *win, T *ws, int64_t *reads)
{
    const int SX = KX > 0 ? FP_TX + KX - 1 : t.SX;
    const int SY = KY > 0 ? FP_TY + KY - 1 : t.SY;
    const int SZ = KZ > 0 ? TZ + KZ - 1 : t.SZ;
    const int nwin = SZ * SY * SX;
    const int nw = t.kz * t.ky * t.kx;
    const int64_t x0 = (int64_t)bx * FP_TX - t.hx;
    const int64_t y0 = (int64_t)by * FP_TY - t.hy;
    const int64_t z0 = (int64_t)bz * TZ - t.hz;
    if (fp_cu_tile_inside<TZ>(t, bx, by, bz)) {
        const T *base = in + z0 * t.sz + y0 * t.sy + x0 * t.sx;
        const int isz = (int)t.sz, isy = (int)t.sy, isx = (int)t.sx;
        for (int i = tid; i < nwin; i += FP_TX * FP_TY) {
            const int sx = i % SX, sy = (i / SX) % SY, sz = i / (SX * SY);
#ifdef __CUDA_ARCH__
            win[i] = __ldg(base + (sz * isz + sy * isy + sx * isx));
#else
            win[i] = base[sz * isz + sy * isy + sx * isx];
            FP_CU_READ(reads);
#endif
        }
    } else {
        for (int i = tid; i < nwin; i += FP_TX * FP_TY) {
            const int sx = i % SX, sy = (i / SX) % SY, sz = i / (SX * SY);
            const int64_t cx = fp_cu_fold<MODE>(x0 + sx, t.nx, g.mode);
            const int64_t cy = fp_cu_fold<MODE>(y0 + sy, t.ny, g.mode);
            const int64_t cz = fp_cu_fold<MODE>(z0 + sz, t.nz, g.mode);
            win[i] =
                (cx < 0 || cy < 0 || cz < 0) ? (T)g.cval : in[cz * t.sz + cy * t.sy + cx * t.sx];
            if (cx >= 0 && cy >= 0 && cz >= 0)
                FP_CU_READ(reads);
        }
    }
    if (ws != NULL)
        for (int i = tid; i < nw; i += FP_TX * FP_TY)
            ws[i] = w ? w[i] : (T)g.box_weight;
}

// Phase 2 for thread (tx, ty) of block (bx, by, bz): sums and writes up to TZ outputs.  With
// KZ > 0 (the weights' depth known at compile time) each (dy, dx) column of the window and of
// the weights is read once into registers and reused across the TZ outputs; KZ = 0 is the
// general version for any depth.  KY, KX > 0 fix the other two extents too (fully unrolled
// sums with constant shared-memory offsets).
template <typename T, int TZ, int KZ, int KY, int KX>
__host__ __device__ static inline void
fp_cu_tile_compute(T *out, const fp_cu_tile &t, int bx, int by, int bz, int tx, int ty,
                   const T *win, const T *ws)
{
    T acc[TZ];
#pragma unroll
    for (int k = 0; k < TZ; k++)
        acc[k] = 0;
    const int ky = KY > 0 ? KY : t.ky, kx = KX > 0 ? KX : t.kx;
    const int SX = KX > 0 ? FP_TX + KX - 1 : t.SX;
    const int SY = KY > 0 ? FP_TY + KY - 1 : t.SY;
    const int plane = SY * SX;
    const int wstep = ky * kx;
#pragma unroll
    for (int dy = 0; dy < ky; dy++) {
#pragma unroll
        for (int dx = 0; dx < kx; dx++) {
            const T *col = win + (ty + dy) * SX + (tx + dx);
            const T *wc = ws + dy * kx + dx;
            if (KZ > 0) {
                T cv[TZ + (KZ > 0 ? KZ : 1) - 1];
                T wv[KZ > 0 ? KZ : 1];
#pragma unroll
                for (int j = 0; j < TZ + KZ - 1; j++)
                    cv[j] = col[j * plane];
#pragma unroll
                for (int dz = 0; dz < KZ; dz++)
                    wv[dz] = wc[dz * wstep];
#pragma unroll
                for (int k = 0; k < TZ; k++)
#pragma unroll
                    for (int dz = 0; dz < KZ; dz++)
                        acc[k] += wv[dz] * cv[k + dz];
            } else {
                for (int j = 0; j < t.SZ; j++) {
                    const T v = col[j * plane];
#pragma unroll
                    for (int k = 0; k < TZ; k++) {
                        const int dz = j - k;
                        if (dz >= 0 && dz < t.kz)
                            acc[k] += wc[dz * wstep] * v;
                    }
                }
            }
        }
    }
    const int64_t x = (int64_t)bx * FP_TX + tx, y = (int64_t)by * FP_TY + ty;
    if (x >= t.nx || y >= t.ny)
        return;
#pragma unroll
    for (int k = 0; k < TZ; k++) {
        const int64_t z = (int64_t)bz * TZ + k;
        if (z < t.nz)
            out[(z * t.ny + y) * t.nx + x] = acc[k];
    }
}

template <typename T, int TZ, int KZ, int KY, int KX, int MODE>
__global__ static void
__launch_bounds__(FP_TX *FP_TY)
    fp_cu_tiled_kernel(const T *__restrict__ in, T *__restrict__ out, const T *__restrict__ w,
                       const fp_cu_geom g, const fp_cu_tile t)
{
    extern __shared__ unsigned char fp_smem[];
    T *win = (T *)fp_smem;
    T *ws = win + t.SZ * t.SY * t.SX;
    const int tid = threadIdx.y * FP_TX + threadIdx.x;
    fp_cu_tile_load<T, TZ, KZ, KY, KX, MODE>(in, w, g, t, blockIdx.x, blockIdx.y, blockIdx.z, tid,
                                             win, ws, NULL);
    __syncthreads();
    fp_cu_tile_compute<T, TZ, KZ, KY, KX>(out, t, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
                                          threadIdx.y, win, ws);
}

// Runs one tiled correlation: launched on stream s, or (host) block by block, phase by phase
// on the host.  Returns a cudaError_t, or -1 when the host run is out of memory.
template <typename T, int TZ, int KZ, int KY, int KX, int MODE>
static int
fp_cu_tiled_impl(const T *in, T *out, const T *w, const fp_cu_geom &g, const fp_cu_tile &t,
                 size_t smem, bool host, cudaStream_t s, int64_t *reads)
{
    unsigned gx = (unsigned)((t.nx + FP_TX - 1) / FP_TX),
             gy = (unsigned)((t.ny + FP_TY - 1) / FP_TY);
    unsigned gz = (unsigned)((t.nz + TZ - 1) / TZ);
    if (!host) {
        fp_cu_tiled_kernel<T, TZ, KZ, KY, KX, MODE>
            <<<dim3(gx, gy, gz), dim3(FP_TX, FP_TY, 1), smem, s>>>(in, out, w, g, t);
        return (int)cudaGetLastError();
    }
    T *buf = (T *)malloc(smem);
    if (buf == NULL)
        return -1;
    T *ws = buf + t.SZ * t.SY * t.SX;
    for (unsigned bz = 0; bz < gz; bz++)
        for (unsigned by = 0; by < gy; by++)
            for (unsigned bx = 0; bx < gx; bx++) {
                for (int tid = 0; tid < FP_TX * FP_TY; tid++)
                    fp_cu_tile_load<T, TZ, KZ, KY, KX, MODE>(in, w, g, t, bx, by, bz, tid, buf, ws,
                                                             reads);
                for (int ty = 0; ty < FP_TY; ty++)
                    for (int tx = 0; tx < FP_TX; tx++)
                        fp_cu_tile_compute<T, TZ, KZ, KY, KX>(out, t, bx, by, bz, tx, ty, buf, ws);
            }
    free(buf);
    return 0;
}

// Returns f(std::integral_constant<int, MODE>()) with MODE the boundary mode m fixed at compile
// time: the kernels of the common sizes fold coordinates for one mode only.
template <typename F>
static int
fp_cu_with_mode(int m, const F &f)
{
    switch (m) {
    case FP_CU_CONSTANT:
        return f(std::integral_constant<int, FP_CU_CONSTANT>());
    case FP_CU_NEAREST:
        return f(std::integral_constant<int, FP_CU_NEAREST>());
    case FP_CU_MIRROR:
        return f(std::integral_constant<int, FP_CU_MIRROR>());
    case FP_CU_WRAP:
        return f(std::integral_constant<int, FP_CU_WRAP>());
    default:
        return f(std::integral_constant<int, FP_CU_REFLECT>());
    }
}

// --- box path: sums along x, then y, then z in shared memory ---------------------------------
// For a box (all weights equal, no weights array) the staged window is summed along x into s1
// ([SZ][SY][TX]), s1 along y into the window's space ([SZ][TY][TX]), and each thread sums its
// column along z: a few adds per output instead of kz*ky*kx multiply-adds.

// Returns the shared-memory bytes of the box path for t, or 0 when it does not fit.
static size_t
fp_cu_box_smem(const fp_cu_tile *t, size_t item)
{
    size_t n = (size_t)t->SZ * t->SY * t->SX + (size_t)t->SZ * t->SY * FP_TX;
    return n * item <= FP_SMEM_MAX ? n * item : 0;
}

// The box paths below take K = k when the box is k x k x k (k x k in 2-D) with k = 3, 5, 7, 9
// (extents and window fixed at compile time), K = 0 for any other box.

// Phase 2 of the box path for thread tid: window rows summed along x into s1.
template <typename T, int TZ, int K>
__host__ __device__ static inline void
fp_cu_box_xsum(const fp_cu_tile &t, int tid, const T *win, T *s1)
{
    const int SX = K > 0 ? FP_TX + K - 1 : t.SX;
    const int SY = K > 0 ? FP_TY + K - 1 : t.SY;
    const int SZ = K > 0 ? (TZ > 1 ? TZ + K - 1 : 1) : t.SZ;
    const int kx = K > 0 ? K : t.kx;
    const int n = SZ * SY * FP_TX;
    for (int i = tid; i < n; i += FP_TX * FP_TY) {
        const T *p = win + (i / FP_TX) * SX + (i % FP_TX);
        T a = 0;
#pragma unroll
        for (int dx = 0; dx < kx; dx++)
            a += p[dx];
        s1[i] = a;
    }
}

// Phase 3 of the box path for thread tid: s1 summed along y into s2.
template <typename T, int TZ, int K>
__host__ __device__ static inline void
fp_cu_box_ysum(const fp_cu_tile &t, int tid, const T *s1, T *s2)
{
    const int SY = K > 0 ? FP_TY + K - 1 : t.SY;
    const int SZ = K > 0 ? (TZ > 1 ? TZ + K - 1 : 1) : t.SZ;
    const int ky = K > 0 ? K : t.ky;
    const int n = SZ * FP_TY * FP_TX;
    for (int i = tid; i < n; i += FP_TX * FP_TY) {
        const int tx = i % FP_TX, ty = (i / FP_TX) % FP_TY, sz = i / (FP_TX * FP_TY);
        const T *p = s1 + (sz * SY + ty) * FP_TX + tx;
        T a = 0;
#pragma unroll
        for (int dy = 0; dy < ky; dy++)
            a += p[dy * FP_TX];
        s2[i] = a;
    }
}

// Returns 1 when v is finite (neither NaN nor an infinity), else 0.
template <typename T>
__host__ __device__ static inline int
fp_cu_finite(T v)
{
    return v - v == (T)0;
}

// Phase 4 of the box path for thread (tx, ty): s2 summed along z, scaled, written.  Along z
// the sum runs: the first output sums its kz planes, each next one adds the plane that enters
// and takes away the one that leaves; a sum that is not finite, or a plane leaving that is
// not, is summed again directly (a window gives NaN or an infinity only while it holds one).
template <typename T, int TZ, int K>
__host__ __device__ static inline void
fp_cu_box_zsum(T *out, const fp_cu_geom &g, const fp_cu_tile &t, int bx, int by, int bz, int tx,
               int ty, const T *s2)
{
    const int kz = K > 0 ? (TZ > 1 ? K : 1) : t.kz;
    const int64_t x = (int64_t)bx * FP_TX + tx, y = (int64_t)by * FP_TY + ty;
    if (x >= t.nx || y >= t.ny)
        return;
    const T *col = s2 + ty * FP_TX + tx;
    const int plane = FP_TY * FP_TX;
    T *dst = out + y * t.nx + x;
    const int64_t zplane = t.ny * t.nx;
    T a = 0;
#pragma unroll
    for (int dz = 0; dz < kz; dz++)
        a += col[dz * plane];
#pragma unroll
    for (int k = 0; k < TZ; k++) {
        const int64_t z = (int64_t)bz * TZ + k;
        if (z >= t.nz)
            break;
        if (k > 0) {
            const T leave = col[(k - 1) * plane];
            if (fp_cu_finite(a) && fp_cu_finite(leave)) {
                a += col[(k + kz - 1) * plane] - leave;
            } else {
                a = 0;
                for (int dz = 0; dz < kz; dz++)
                    a += col[(k + dz) * plane];
            }
        }
        dst[z * zplane] = a * (T)g.box_weight;
    }
}

template <typename T, int TZ, int K, int MODE>
__global__ static void
__launch_bounds__(FP_TX *FP_TY) fp_cu_box_kernel(const T *__restrict__ in, T *__restrict__ out,
                                                 const fp_cu_geom g, const fp_cu_tile t)
{
    extern __shared__ unsigned char fp_smem[];
    T *win = (T *)fp_smem;
    T *s1 = win + t.SZ * t.SY * t.SX;
    const int tid = threadIdx.y * FP_TX + threadIdx.x;
    constexpr int KZ = TZ > 1 ? K : (K > 0 ? 1 : 0);
    fp_cu_tile_load<T, TZ, KZ, K, K, MODE>(in, NULL, g, t, blockIdx.x, blockIdx.y, blockIdx.z, tid,
                                           win, NULL, NULL);
    __syncthreads();
    fp_cu_box_xsum<T, TZ, K>(t, tid, win, s1);
    __syncthreads();
    fp_cu_box_ysum<T, TZ, K>(t, tid, s1, win);
    __syncthreads();
    fp_cu_box_zsum<T, TZ, K>(out, g, t, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
                             threadIdx.y, win);
}

// Runs the box path on stream s or, with host, phase by phase on the host (MODE: the boundary
// mode fixed at compile time, -1 for g.mode at run time).  Returns a cudaError_t, or -1 when
// the host run is out of memory.
template <typename T, int TZ, int K, int MODE>
static int
fp_cu_box_impl(const T *in, T *out, const fp_cu_geom &g, const fp_cu_tile &t, size_t smem,
               bool host, cudaStream_t s, int64_t *reads)
{
    constexpr int KZ = TZ > 1 ? K : (K > 0 ? 1 : 0);
    unsigned gx = (unsigned)((t.nx + FP_TX - 1) / FP_TX),
             gy = (unsigned)((t.ny + FP_TY - 1) / FP_TY);
    unsigned gz = (unsigned)((t.nz + TZ - 1) / TZ);
    if (!host) {
        fp_cu_box_kernel<T, TZ, K, MODE>
            <<<dim3(gx, gy, gz), dim3(FP_TX, FP_TY, 1), smem, s>>>(in, out, g, t);
        return (int)cudaGetLastError();
    }
    T *win = (T *)malloc(smem);
    if (win == NULL)
        return -1;
    T *s1 = win + t.SZ * t.SY * t.SX;
    for (unsigned bz = 0; bz < gz; bz++)
        for (unsigned by = 0; by < gy; by++)
            for (unsigned bx = 0; bx < gx; bx++) {
                for (int tid = 0; tid < FP_TX * FP_TY; tid++)
                    fp_cu_tile_load<T, TZ, KZ, K, K, MODE>(in, NULL, g, t, bx, by, bz, tid, win,
                                                           NULL, reads);
                for (int tid = 0; tid < FP_TX * FP_TY; tid++)
                    fp_cu_box_xsum<T, TZ, K>(t, tid, win, s1);
                for (int tid = 0; tid < FP_TX * FP_TY; tid++)
                    fp_cu_box_ysum<T, TZ, K>(t, tid, s1, win);
                for (int ty = 0; ty < FP_TY; ty++)
                    for (int tx = 0; tx < FP_TX; tx++)
                        fp_cu_box_zsum<T, TZ, K>(out, g, t, bx, by, bz, tx, ty, win);
            }
    free(win);
    return 0;
}

// Runs the box path with the box's extent fixed at compile time when it is k x k x k (k x k in
// 2-D) with k = 3, 5, 7, 9 (and the boundary mode too for k = 3, 5), else the general one.
// Returns what fp_cu_box_impl returns.
template <typename T, int TZ>
static int
fp_cu_box_pick(const T *in, T *out, const fp_cu_geom &g, const fp_cu_tile &t, size_t smem,
               bool host, cudaStream_t s, int64_t *reads)
{
    const int k = t.kx;
    // 3-D boxes of 7 and 9 do not fit the shared memory (fp_cu_box_smem): no instantiation
    if (t.ky == k && t.kz == (TZ > 1 ? k : 1)) {
        switch (k) {
        case 3:
            return fp_cu_with_mode(g.mode, [&](auto m) {
                return fp_cu_box_impl<T, TZ, 3, decltype(m)::value>(in, out, g, t, smem, host, s,
                                                                    reads);
            });
        case 5:
            return fp_cu_with_mode(g.mode, [&](auto m) {
                return fp_cu_box_impl<T, TZ, 5, decltype(m)::value>(in, out, g, t, smem, host, s,
                                                                    reads);
            });
        case 7:
            return fp_cu_box_impl<T, TZ, (TZ > 1 ? 0 : 7), -1>(in, out, g, t, smem, host, s, reads);
        case 9:
            return fp_cu_box_impl<T, TZ, (TZ > 1 ? 0 : 9), -1>(in, out, g, t, smem, host, s, reads);
        default:
            break;
        }
    }
    return fp_cu_box_impl<T, TZ, 0, -1>(in, out, g, t, smem, host, s, reads);
}

// Runs the box path when g is a 2-D/3-D box that fits; returns -2 when it does not apply,
// else what fp_cu_box_impl returns.
template <typename T>
static int
fp_cu_box_run(const T *in, T *out, const T *w, const fp_cu_geom *g, bool host, cudaStream_t s,
              int64_t *reads)
{
    fp_cu_tile t;
    const int tz = g->ndim == 3 ? 8 : 1;
    size_t smem;
    if (w != NULL || fp_cu_tile_plan(g, sizeof(T), tz, &t) == 0 ||
        (smem = fp_cu_box_smem(&t, sizeof(T))) == 0)
        return -2;
    if (tz == 1)
        return fp_cu_box_pick<T, 1>(in, out, *g, t, smem, host, s, reads);
    return fp_cu_box_pick<T, 8>(in, out, *g, t, smem, host, s, reads);
}

// Shapes of weights with extents fixed at compile time: k x k x k (k x k in 2-D), 1 x 1 x k
// and 1 x k x 1 (the passes of separable filters).
enum { FP_CU_FORM_CUBE, FP_CU_FORM_X, FP_CU_FORM_Y };

// Runs fp_cu_tiled_impl instantiated for weights of shape form with extent K and boundary mode
// MODE (-1: at run time).  Returns what it returns.
template <typename T, int TZ, int FORM, int K, int MODE>
static int
fp_cu_tiled_form(const T *in, T *out, const T *w, const fp_cu_geom &g, const fp_cu_tile &t,
                 size_t smem, bool host, cudaStream_t s, int64_t *reads)
{
    constexpr int kz = FORM == FP_CU_FORM_CUBE && TZ > 1 ? K : 1;
    constexpr int ky = FORM == FP_CU_FORM_X ? 1 : K;
    constexpr int kx = FORM == FP_CU_FORM_Y ? 1 : K;
    // windows beyond the shared memory never come here (fp_cu_tile_plan): no instantiation
    constexpr bool fits =
        sizeof(T) * ((TZ + kz - 1) * (FP_TY + ky - 1) * (FP_TX + kx - 1) + kz * ky * kx) <=
        FP_SMEM_MAX;
    return fp_cu_tiled_impl < T, TZ, fits ? kz : 0, fits ? ky : 0, fits ? kx : 0,
           MODE > (in, out, w, g, t, smem, host, s, reads);
}

// Runs the instantiation for weights of shape form with extent k (3, 5, 7 or 9), the boundary
// mode fixed at compile time too for the common sizes (k x k x k with k = 3, 5; k x k in 2-D).
// Returns what fp_cu_tiled_impl returns.
template <typename T, int TZ>
static int
fp_cu_tiled_fixed(int form, int k, const T *in, T *out, const T *w, const fp_cu_geom &g,
                  const fp_cu_tile &t, size_t smem, bool host, cudaStream_t s, int64_t *reads)
{
#define FP_CU_FORM_CASES(F)                                                                        \
    switch (k) {                                                                                   \
    case 3:                                                                                        \
        return fp_cu_tiled_form<T, TZ, F, 3, -1>(in, out, w, g, t, smem, host, s, reads);          \
    case 5:                                                                                        \
        return fp_cu_tiled_form<T, TZ, F, 5, -1>(in, out, w, g, t, smem, host, s, reads);          \
    case 7:                                                                                        \
        return fp_cu_tiled_form<T, TZ, F, 7, -1>(in, out, w, g, t, smem, host, s, reads);          \
    default:                                                                                       \
        return fp_cu_tiled_form<T, TZ, F, 9, -1>(in, out, w, g, t, smem, host, s, reads);          \
    }
    if (form == FP_CU_FORM_CUBE) {
        switch (k) {
        case 3:
            return fp_cu_with_mode(g.mode, [&](auto m) {
                return fp_cu_tiled_form<T, TZ, FP_CU_FORM_CUBE, 3, decltype(m)::value>(
                    in, out, w, g, t, smem, host, s, reads);
            });
        case 5:
            return fp_cu_with_mode(g.mode, [&](auto m) {
                return fp_cu_tiled_form<T, TZ, FP_CU_FORM_CUBE, 5, decltype(m)::value>(
                    in, out, w, g, t, smem, host, s, reads);
            });
        case 7:
            return fp_cu_tiled_form<T, TZ, FP_CU_FORM_CUBE, 7, -1>(in, out, w, g, t, smem, host, s,
                                                                   reads);
        default:
            return fp_cu_tiled_form<T, TZ, FP_CU_FORM_CUBE, 9, -1>(in, out, w, g, t, smem, host, s,
                                                                   reads);
        }
    }
    if (form == FP_CU_FORM_X)
        FP_CU_FORM_CASES(FP_CU_FORM_X)
    FP_CU_FORM_CASES(FP_CU_FORM_Y)
#undef FP_CU_FORM_CASES
}

// Picks the box path for boxes that fit, else the instantiation of the tiled path for the
// geometry: extents fixed at compile time for k x k x k, 1 x 1 x k and 1 x k x 1 weights with
// k = 3, 5, 7, 9 (k x k, 1 x k, k x 1 in 2-D), else 2-D, or 3-D with weights 1, 3, 5, 7 or any
// deep.
// Returns what fp_cu_tiled_impl returns.
template <typename T>
static int
fp_cu_tiled_run(const T *in, T *out, const T *w, const fp_cu_geom *g, bool host, cudaStream_t s,
                int64_t *reads)
{
    fp_cu_tile t;
    const int tz = g->ndim == 3 ? 8 : 1;
    int rc = fp_cu_box_run<T>(in, out, w, g, host, s, reads);
    if (rc != -2)
        return rc;
    size_t smem = fp_cu_tile_plan(g, sizeof(T), tz, &t);
    int form = -1, k = 0;
    if (t.kx == t.ky && t.kz == (tz == 1 ? 1 : t.kx))
        form = FP_CU_FORM_CUBE, k = t.kx;
    else if (t.kz == 1 && t.ky == 1)
        form = FP_CU_FORM_X, k = t.kx;
    else if (t.kz == 1 && t.kx == 1)
        form = FP_CU_FORM_Y, k = t.ky;
    if (form >= 0 && (k == 3 || k == 5 || k == 7 || k == 9)) {
        if (tz == 1)
            return fp_cu_tiled_fixed<T, 1>(form, k, in, out, w, *g, t, smem, host, s, reads);
        return fp_cu_tiled_fixed<T, 8>(form, k, in, out, w, *g, t, smem, host, s, reads);
    }
    if (tz == 1)
        return fp_cu_tiled_impl<T, 1, 1, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    switch (t.kz) {
    case 1:
        return fp_cu_tiled_impl<T, 8, 1, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    case 3:
        return fp_cu_tiled_impl<T, 8, 3, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    case 5:
        return fp_cu_tiled_impl<T, 8, 5, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    case 7:
        return fp_cu_tiled_impl<T, 8, 7, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    default:
        return fp_cu_tiled_impl<T, 8, 0, 0, 0, -1>(in, out, w, *g, t, smem, host, s, reads);
    }
}

// --- running-sum path: a long box along one axis -----------------------------------------------
// One thread runs a segment of outputs of one line (all outputs along the axis for fixed other
// coordinates): it sums its first window directly, then moves the window by adding the value
// that enters and taking away the one that leaves, so an output costs a few reads whatever
// the box length.  A box longer than its axis is folded: constant and nearest windows count
// the values beyond the ends instead of reading them, periodic ones (reflect, mirror, wrap)
// take whole periods as multiples of one period's sum.  Sums are in double with Neumaier's
// compensation (drift stays at rounding level however long the segment); NaN and infinities
// are counted apart, so that a window gives what a direct sum gives (NaN, +inf, -inf) only
// while it holds them.  Adjacent threads run adjacent lines (coalesced reads when the axis is
// not the last).

#define FP_CU_RUN_MIN 24 // boxes longer than this along one axis use running sums
#define FP_CU_RUN_SEG 64 // fewest outputs per thread (more for longer boxes)

// Geometry of one running-sum launch.
struct fp_cu_run {
    int axis;
    int64_t n, k, h; // axis length, box length, shift
    int64_t sa;      // input stride along the axis (elements)
    int64_t ostride; // output stride along the axis (elements)
    int64_t seg;     // outputs per thread
    int64_t nseg;    // segments per line
    int64_t nlines;  // lines
};

// Fills r when g is a box (no weights) along exactly one axis, longer than FP_CU_RUN_MIN.
// Returns 1 when the running-sum path applies, else 0.
static int
fp_cu_run_plan(const fp_cu_geom *g, const void *w, fp_cu_run *r)
{
    int axis = -1;
    int64_t ostride = 1;
    if (w != NULL || g->size == 0)
        return 0;
    for (int d = 0; d < g->ndim; d++) {
        if (g->wshape[d] == 1)
            continue;
        if (axis >= 0)
            return 0;
        axis = d;
    }
    if (axis < 0 || g->wshape[axis] <= FP_CU_RUN_MIN)
        return 0;
    for (int d = axis + 1; d < g->ndim; d++)
        ostride *= g->shape[d];
    r->axis = axis;
    r->n = g->shape[axis];
    r->k = g->wshape[axis];
    r->h = g->shift[axis];
    r->sa = g->in_strides[axis];
    r->ostride = ostride;
    r->seg = r->k > FP_CU_RUN_SEG ? r->k : FP_CU_RUN_SEG;
    if (r->seg > r->n)
        r->seg = r->n;
    r->nseg = (r->n + r->seg - 1) / r->seg;
    r->nlines = g->size / r->n;
    return 1;
}

// A window's sum: the finite values (compensated) and the counts of NaN, +inf and -inf.
struct fp_cu_acc {
    double s, c;
    int64_t nan, pinf, ninf;
};

// Adds m copies of v to a (m may be negative: takes them away).  Returns nothing.
__host__ __device__ static inline void
fp_cu_acc_add(fp_cu_acc &a, double v, int64_t m)
{
    if (v != v) {
        a.nan += m;
    } else if (v - v != 0.0) {
        if (v > 0)
            a.pinf += m;
        else
            a.ninf += m;
    } else {
        double x = (double)m * v, t = a.s + x;
        if (fabs(a.s) >= fabs(x))
            a.c += (a.s - t) + x;
        else
            a.c += (x - t) + a.s;
        a.s = t;
    }
}

// Returns the window's sum times w, as a direct sum of the same values would give it
// (NaN when it holds a NaN or both infinities, an infinity when it holds one).
__host__ __device__ static inline double
fp_cu_acc_value(const fp_cu_acc &a, double w)
{
    if (a.nan > 0 || (a.pinf > 0 && a.ninf > 0))
        return NAN;
    if (a.pinf > 0)
        return w > 0 ? INFINITY : w < 0 ? -INFINITY : NAN;
    if (a.ninf > 0)
        return w > 0 ? -INFINITY : w < 0 ? INFINITY : NAN;
    return (a.s + a.c) * w;
}

// Returns the value at extended coordinate c of a line (cval outside, for constant mode).
template <typename T>
__host__ __device__ static inline double
fp_cu_run_at(const T *line, const fp_cu_geom &g, const fp_cu_run &r, int64_t c, int64_t *reads)
{
    int64_t f = fp_cu_fold(c, r.n, g.mode);
    if (f < 0)
        return g.cval;
    FP_CU_READ(reads);
    return (double)line[f * r.sa];
}

// Adds the extended values of a line at coordinates [lo, lo + r.k) to a, reading at most
// about three axis lengths of it however long the box.  Returns nothing.
template <typename T>
__host__ __device__ static inline void
fp_cu_run_window(const T *line, const fp_cu_geom &g, const fp_cu_run &r, int64_t lo, fp_cu_acc &a,
                 int64_t *reads)
{
    const int64_t n = r.n, k = r.k;
    int64_t p, q;
    if (g.mode == FP_CU_CONSTANT || g.mode == FP_CU_NEAREST) {
        int64_t a0 = lo > 0 ? lo : 0, a1 = lo + k < n ? lo + k : n;
        int64_t below = -lo > 0 ? (-lo < k ? -lo : k) : 0;
        int64_t above = lo + k - n > 0 ? (lo + k - n < k ? lo + k - n : k) : 0;
        for (int64_t c = a0; c < a1; c++)
            fp_cu_acc_add(a, fp_cu_run_at<T>(line, g, r, c, reads), 1);
        if (g.mode == FP_CU_CONSTANT) {
            if (below + above > 0)
                fp_cu_acc_add(a, g.cval, below + above);
        } else {
            if (below > 0)
                fp_cu_acc_add(a, fp_cu_run_at<T>(line, g, r, 0, reads), below);
            if (above > 0)
                fp_cu_acc_add(a, fp_cu_run_at<T>(line, g, r, n - 1, reads), above);
        }
        return;
    }
    p = g.mode == FP_CU_WRAP ? n : g.mode == FP_CU_MIRROR ? (n > 1 ? 2 * n - 2 : 1) : 2 * n;
    q = k / p;
    if (q > 0) { // whole periods: q times one period's sum
        fp_cu_acc per = {0.0, 0.0, 0, 0, 0};
        for (int64_t c = 0; c < p; c++)
            fp_cu_acc_add(per, fp_cu_run_at<T>(line, g, r, c, reads), 1);
        fp_cu_acc_add(a, per.s, q);
        fp_cu_acc_add(a, per.c, q);
        a.nan += q * per.nan;
        a.pinf += q * per.pinf;
        a.ninf += q * per.ninf;
    }
    for (int64_t c = lo + q * p; c < lo + k; c++)
        fp_cu_acc_add(a, fp_cu_run_at<T>(line, g, r, c, reads), 1);
}

// Thread t of a running-sum launch: the outputs of its segment of its line.  Returns nothing.
template <typename T>
__host__ __device__ static inline void
fp_cu_run_thread(const T *in, T *out, const fp_cu_geom &g, const fp_cu_run &r, int64_t t,
                 int64_t *reads)
{
    int64_t line = t % r.nlines, seg = t / r.nlines;
    int64_t ioff = 0, ooff = 0, rem = line, ostr = 1;
    for (int d = g.ndim - 1; d >= 0; d--) {
        if (d != r.axis) {
            int64_t c = rem % g.shape[d];
            rem /= g.shape[d];
            ioff += c * g.in_strides[d];
            ooff += c * ostr;
        }
        ostr *= g.shape[d];
    }
    const T *src = in + ioff;
    T *dst = out + ooff;
    const int64_t i0 = seg * r.seg, i1 = i0 + r.seg < r.n ? i0 + r.seg : r.n;
    fp_cu_acc a = {0.0, 0.0, 0, 0, 0};
    fp_cu_run_window<T>(src, g, r, i0 - r.h, a, reads);
    for (int64_t i = i0;; i++) {
        dst[i * r.ostride] = (T)fp_cu_acc_value(a, g.box_weight);
        if (i + 1 >= i1)
            break;
        fp_cu_acc_add(a, fp_cu_run_at<T>(src, g, r, i - r.h + r.k, reads), 1);
        fp_cu_acc_add(a, fp_cu_run_at<T>(src, g, r, i - r.h, reads), -1);
    }
}

template <typename T>
__global__ static void
fp_cu_run_kernel(const T *__restrict__ in, T *__restrict__ out, const fp_cu_geom g,
                 const fp_cu_run r)
{
    const int64_t total = r.nlines * r.nseg, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride)
        fp_cu_run_thread<T>(in, out, g, r, t, NULL);
}

// Runs the running-sum path for r on stream s or, with host, thread by thread on the host.
// Returns a cudaError_t (0 on the host).
template <typename T>
static int
fp_cu_run_impl(const T *in, T *out, const fp_cu_geom &g, const fp_cu_run &r, bool host,
               cudaStream_t s, int64_t *reads)
{
    const int64_t total = r.nlines * r.nseg;
    if (!host) {
        fp_cu_run_kernel<T><<<fp_cu_blocks(total), 256, 0, s>>>(in, out, g, r);
        return (int)cudaGetLastError();
    }
    for (int64_t t = 0; t < total; t++)
        fp_cu_run_thread<T>(in, out, g, r, t, reads);
    return 0;
}

// --- entry points ----------------------------------------------------------------------------

extern "C" int
fp_cu_tiled_ok(int dtype, const fp_cu_geom *g)
{
    fp_cu_tile t;
    return fp_cu_tile_plan(g, dtype == FP_CU_F32 ? 4 : 8, g->ndim == 3 ? 8 : 1, &t) != 0;
}

// Runs the correlation the way the device does (running sums, tiled, or one thread per
// output), on stream s or, with host, on the host (direct forces the per-output path).
// Returns a cudaError_t, or -1 when the host run is out of memory.
static int
fp_cu_dispatch(int dtype, const void *in, void *out, const void *weights, const void *host_w,
               const fp_cu_geom *g, bool host, bool direct, cudaStream_t s, int64_t *reads)
{
    fp_cu_run r;
    if (g->size == 0)
        return 0;
    if (!direct && fp_cu_run_plan(g, weights, &r)) {
        if (dtype == FP_CU_F32)
            return fp_cu_run_impl<float>((const float *)in, (float *)out, *g, r, host, s, reads);
        return fp_cu_run_impl<double>((const double *)in, (double *)out, *g, r, host, s, reads);
    }
    if (!direct && fp_cu_tiled_ok(dtype, g)) {
        if (dtype == FP_CU_F32)
            return fp_cu_tiled_run<float>((const float *)in, (float *)out, (const float *)weights,
                                          g, host, s, reads);
        return fp_cu_tiled_run<double>((const double *)in, (double *)out, (const double *)weights,
                                       g, host, s, reads);
    }
    if (dtype == FP_CU_F32)
        return fp_cu_point_impl<float>((const float *)in, (float *)out, (const float *)weights,
                                       (const float *)host_w, *g, host, s, reads);
    return fp_cu_point_impl<double>((const double *)in, (double *)out, (const double *)weights,
                                    (const double *)host_w, *g, host, s, reads);
}

extern "C" int
fp_cu_correlate(int dtype, const void *in, void *out, const void *weights, const void *host_weights,
                const fp_cu_geom *g, void *stream)
{
    return fp_cu_dispatch(dtype, in, out, weights, host_weights, g, false, false,
                          (cudaStream_t)stream, NULL);
}

extern "C" int
fp_cu_correlate_host(int dtype, const void *in, void *out, const void *weights, const fp_cu_geom *g,
                     int path, int64_t *reads)
{
    // the weights are host memory here: the per-element path reads them as the device
    // would, from the kernel's parameters where they fit
    return fp_cu_dispatch(dtype, in, out, weights, weights, g, true, path == 1, NULL, reads);
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
