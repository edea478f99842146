/* kernels/conv_common.c - pieces shared by the separable and general correlation paths:
 * boundary extension, index maps, row gather/store and the vectorised tap loops. */
#include "kernels/conv.h"
#include "kernels/simd.h"

#include <stdlib.h>
#include <string.h>

/* See conv.h. */
ptrdiff_t
fp_conv_extend(ptrdiff_t j, ptrdiff_t n, int mode)
{
    ptrdiff_t p;
    if (j >= 0 && j < n)
        return j;
    switch (mode) {
    case FP_MODE_CONSTANT:
        return -1;
    case FP_MODE_NEAREST:
        return j < 0 ? 0 : n - 1;
    case FP_MODE_WRAP:
        p = j % n;
        return p < 0 ? p + n : p;
    case FP_MODE_MIRROR:
        if (n == 1)
            return 0;
        p = j % (2 * n - 2);
        if (p < 0)
            p += 2 * n - 2;
        return p < n ? p : 2 * n - 2 - p;
    default: /* reflect */
        p = j % (2 * n);
        if (p < 0)
            p += 2 * n;
        return p < n ? p : 2 * n - 1 - p;
    }
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

/* The body of fp_conv_gather_row (see conv.h). */
FP_BODY void
fp_conv_gather_row_body(const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo, ptrdiff_t len,
                        double *dst)
{
    int last = c->ndim - 1;
    const ptrdiff_t *m = c->map[last] + lo;
    ptrdiff_t s = c->istride[last];
    const char *base = c->idata + ioff;
    ptrdiff_t t = 0;
    /* the stretch where the map is the identity: one strided (often contiguous) copy */
    ptrdiff_t t0 = c->shift[last] - lo, t1 = c->shift[last] + c->shape[last] - lo;
    if (t0 < 0)
        t0 = 0;
    if (t1 > len)
        t1 = len;
    if (t1 < t0)
        t1 = t0;
    for (; t < t0; t++)
        dst[t] = m[t] < 0 ? c->cval
                 : c->idouble ? *(const double *)(base + m[t] * s)
                              : (double)*(const float *)(base + m[t] * s);
    if (t1 > t0) {
        const char *p = base + m[t0] * s;
        ptrdiff_t n = t1 - t0;
        double *q = dst + t0;
        if (c->idouble) {
            if (s == sizeof(double))
                memcpy(q, p, sizeof(double) * (size_t)n);
            else
                for (ptrdiff_t i = 0; i < n; i++)
                    q[i] = *(const double *)(p + i * s);
        } else if (s == sizeof(float)) {
            const float *f = (const float *)p;
            for (ptrdiff_t i = 0; i < n; i++)
                q[i] = (double)f[i];
        } else {
            for (ptrdiff_t i = 0; i < n; i++)
                q[i] = (double)*(const float *)(p + i * s);
        }
    }
    for (t = t1; t < len; t++)
        dst[t] = m[t] < 0 ? c->cval
                 : c->idouble ? *(const double *)(base + m[t] * s)
                              : (double)*(const float *)(base + m[t] * s);
}

/* The body of fp_conv_store_row (see conv.h). */
FP_BODY void
fp_conv_store_row_body(const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len, const double *src)
{
    int last = c->ndim - 1;
    ptrdiff_t s = c->ostride[last];
    char *p = c->odata + ooff;
    if (c->odouble) {
        if (s == sizeof(double))
            memcpy(p, src, sizeof(double) * (size_t)len);
        else
            for (ptrdiff_t i = 0; i < len; i++)
                *(double *)(p + i * s) = src[i];
    } else if (s == sizeof(float)) {
        float *f = (float *)p;
        for (ptrdiff_t i = 0; i < len; i++)
            f[i] = (float)src[i];
    } else {
        for (ptrdiff_t i = 0; i < len; i++)
            *(float *)(p + i * s) = (float)src[i];
    }
}

/* dst[x] = (init ? dst[x] : add) + sum_{k<NK} w[k] * src[k][x]; NK is a constant after
 * inlining, so the tap loop unrolls and the x loop vectorises. */
#define FP_COMBINE_BODY(NK)                                                                   \
    do {                                                                                      \
        const double *s_[NK];                                                                 \
        double w_[NK];                                                                        \
        for (int k_ = 0; k_ < NK; k_++) {                                                     \
            s_[k_] = src[k_];                                                                 \
            w_[k_] = w[k_];                                                                   \
        }                                                                                     \
        if (init) {                                                                           \
            for (ptrdiff_t x = 0; x < n; x++) {                                               \
                double a_ = dst[x];                                                           \
                for (int k_ = 0; k_ < NK; k_++)                                               \
                    a_ += w_[k_] * s_[k_][x];                                                 \
                dst[x] = a_;                                                                  \
            }                                                                                 \
        } else {                                                                              \
            for (ptrdiff_t x = 0; x < n; x++) {                                               \
                double a_ = add;                                                              \
                for (int k_ = 0; k_ < NK; k_++)                                               \
                    a_ += w_[k_] * s_[k_][x];                                                 \
                dst[x] = a_;                                                                  \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* Up to 8 sources into dst.  Returns nothing. */
FP_BODY void
fp_combine_upto8(double *restrict dst, const double *const *src, const double *w, int nk,
                 double add, ptrdiff_t n, int init)
{
    switch (nk) {
    case 1: FP_COMBINE_BODY(1); break;
    case 2: FP_COMBINE_BODY(2); break;
    case 3: FP_COMBINE_BODY(3); break;
    case 4: FP_COMBINE_BODY(4); break;
    case 5: FP_COMBINE_BODY(5); break;
    case 6: FP_COMBINE_BODY(6); break;
    case 7: FP_COMBINE_BODY(7); break;
    default: FP_COMBINE_BODY(8); break;
    }
}

/* The body of fp_conv_combine (see conv.h). */
FP_BODY void
fp_conv_combine_body(double *dst, const double *const *src, const double *w, int nk,
                     double add, ptrdiff_t n, int accumulate)
{
    if (nk == 0) {
        if (!accumulate)
            for (ptrdiff_t x = 0; x < n; x++)
                dst[x] = add;
        return;
    }
    for (int k = 0; k < nk; k += 8) {
        int m = nk - k < 8 ? nk - k : 8;
        fp_combine_upto8(dst, src + k, w + k, m, add, n, accumulate || k > 0);
    }
}

/* The body of fp_conv_taps (see conv.h). */
FP_BODY void
fp_conv_taps_body(double *dst, const double *row, const double *w, const ptrdiff_t *off,
                  int nk, ptrdiff_t n, int accumulate)
{
    const double *src[8];
    if (nk == 0) {
        if (!accumulate)
            for (ptrdiff_t x = 0; x < n; x++)
                dst[x] = 0.0;
        return;
    }
    for (int k = 0; k < nk; k += 8) {
        int m = nk - k < 8 ? nk - k : 8;
        for (int j = 0; j < m; j++)
            src[j] = row + off[k + j];
        fp_combine_upto8(dst, src, w + k, m, 0.0, n, accumulate || k > 0);
    }
}

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

/* The dispatching entry points declared in conv.h. */
FP_DISPATCH(void, fp_conv_gather_row,
            (const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo, ptrdiff_t len, double *dst),
            (c, ioff, lo, len, dst))
FP_DISPATCH(void, fp_conv_store_row,
            (const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len, const double *src),
            (c, ooff, len, src))
FP_DISPATCH(void, fp_conv_combine,
            (double *dst, const double *const *src, const double *w, int nk, double add,
             ptrdiff_t n, int accumulate),
            (dst, src, w, nk, add, n, accumulate))
FP_DISPATCH(void, fp_conv_taps,
            (double *dst, const double *row, const double *w, const ptrdiff_t *off, int nk,
             ptrdiff_t n, int accumulate),
            (dst, row, w, off, nk, n, accumulate))
