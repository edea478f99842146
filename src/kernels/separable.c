/* kernels/separable.c - correlation with a rank-1 kernel (outer product of 1-D factors, box
 * kernels included) as streamed 1-D passes.
 *
 * The result at axis d for a fixed input prefix is the weighted sum of level d+1 results of
 * the input slices it reads; each level keeps a small cache of those slices (keyed by input
 * index) so that every slice is filtered once per sweep.  Work items are (chunk of axis 0) x
 * (tile of axis 1): the level-0 cache of a tile stays in L2, input and output are touched
 * once.  Short kernels use direct sums, in double, or in float for float32 data (each pass
 * then rounds as scipy's float32 passes do).  Boxes longer than FP_RUN_MIN use running sums
 * in double while the values in the window are finite (restarted every FP_RUN_RESTART
 * outputs, so drift stays at rounding level), direct sums where a NaN or inf is near, so a
 * non-finite value only reaches the windows that hold it. */
#include "kernels/conv.h"
#include "kernels/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FP_SEP_CACHE_BYTES (384 * 1024)
#define FP_RUN_MIN 24     /* boxes longer than this use running sums */
#define FP_RUN_RESTART 64 /* a running sum restarts from a direct sum this often */
#define FP_CAT2_(a, b) a##_##b
#define FP_CAT2(a, b) FP_CAT2_(a, b)

#define FP_T double
#define FP_NAME(x) FP_CAT2(x, d)
#define FP_LOOP(x) x
#include "kernels/separable_impl.h"
#undef FP_T
#undef FP_NAME
#undef FP_LOOP

#define FP_T float
#define FP_NAME(x) FP_CAT2(x, f)
#define FP_LOOP(x) FP_CAT2(x, f)
#include "kernels/separable_impl.h"
#undef FP_T
#undef FP_NAME
#undef FP_LOOP

/* See conv.h. */
int
fp_conv_separable(fp_conv *c)
{
    return c->single ? fp_conv_separable_t_f(c) : fp_conv_separable_t_d(c);
}
