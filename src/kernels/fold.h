/* kernels/fold.h - the boundary modes of the ndimage filters and the one definition of where
 * a coordinate outside the input reads from, shared by the CPU kernels (C) and the CUDA
 * kernels (cuda/ndimage.cu, where it compiles for both host and device).  Plain C, no Python
 * header. */
#ifndef FP_KERNELS_FOLD_H
#define FP_KERNELS_FOLD_H

#include <stdint.h>

/* Extension modes, numbered as Python passes them (fastprof.kernels.args.MODE_CODES). */
enum {
    FP_MODE_REFLECT = 0,
    FP_MODE_CONSTANT = 1,
    FP_MODE_NEAREST = 2,
    FP_MODE_MIRROR = 3,
    FP_MODE_WRAP = 4
};

#ifdef __CUDACC__
#define FP_FOLD_FN __host__ __device__ static inline
#else
#define FP_FOLD_FN static inline
#endif

/* Returns the input index read for coordinate c (any integer) on an axis of length n >= 1 in
 * mode: c itself inside [0, n), else its reflection (half-sample symmetric), mirror (whole
 * sample), nearest end or wrap; -1 for constant mode outside (the value is cval).  With mode
 * a compile-time constant the switch folds away.  Sets no error. */
FP_FOLD_FN int64_t
fp_fold(int64_t c, int64_t n, int mode)
{
    int64_t p, r;
    if (c >= 0 && c < n)
        return c;
    switch (mode) {
    case FP_MODE_CONSTANT:
        return -1;
    case FP_MODE_NEAREST:
        return c < 0 ? 0 : n - 1;
    case FP_MODE_WRAP:
        r = c % n;
        return r < 0 ? r + n : r;
    case FP_MODE_MIRROR:
        if (n == 1)
            return 0;
        p = 2 * n - 2;
        r = c % p;
        if (r < 0)
            r += p;
        return r < n ? r : p - r;
    default: /* reflect */
        p = 2 * n;
        r = c % p;
        if (r < 0)
            r += p;
        return r < n ? r : p - 1 - r;
    }
}

#endif
