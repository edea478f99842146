/* kernels/conv_common.c - pieces shared by the separable and general correlation paths:
 * boundary extension, index maps, row gather/store and the vectorised tap loops. */
#include "kernels/conv.h"
#include "kernels/simd.h"

#include <stdlib.h>
#include <string.h>

/* See conv.h: the one fold of fold.h, which the CUDA kernels use too. */
ptrdiff_t
fp_conv_extend(ptrdiff_t j, ptrdiff_t n, int mode)
{
    return (ptrdiff_t)fp_fold((int64_t)j, (int64_t)n, mode);
}

/* See conv.h. */
int
fp_conv_make_maps(fp_conv *c, const int *modes, const ptrdiff_t *shift)
{
    for (int d = 0; d < c->ndim; d++)
        c->map[d] = NULL;
    for (int d = 0; d < c->ndim; d++) {
        ptrdiff_t len = c->shape[d] + c->ntaps[d] - 1;
        c->shift[d] = shift[d];
        ptrdiff_t *m = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)(len > 0 ? len : 1));
        if (m == NULL)
            goto error;
        for (ptrdiff_t e = 0; e < len; e++)
            m[e] = fp_conv_extend(e - shift[d], c->shape[d], modes[d]);
        c->map[d] = m;
    }
    return 0;
error:
    fp_conv_free_maps(c);
    return -1;
}

/* See conv.h. */
void
fp_conv_free_maps(fp_conv *c)
{
    for (int d = 0; d < c->ndim; d++) {
        free(c->map[d]);
        c->map[d] = NULL;
    }
}

#define FP_T double
#define FP_NAME(x) x
#include "kernels/conv_loops.h"
#undef FP_T
#undef FP_NAME
#define FP_PASTE(a, b) a##_##b
#define FP_T float
#define FP_NAME(x) FP_PASTE(x, f)
#include "kernels/conv_loops.h"
#undef FP_T
#undef FP_NAME

/* See simd.h. */
int
fp_simd_level(void)
{
    static int level = -1;
    int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (v < 0) {
#if FP_HAVE_AVX2_DISPATCH
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
#else
        v = 0;
#endif
        __atomic_store_n(&level, v, __ATOMIC_RELAXED);
    }
    return v;
}
