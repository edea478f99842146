/* kernels/conv_loops.h - the row loops of the correlation paths, written once for an
 * accumulation type: included by conv_common.c with FP_T = double (names as declared in
 * conv.h) and FP_T = float (names with an _f suffix, used for float32 data with short
 * kernels, where direct small-tap sums lose nothing against scipy's per-pass rounding).
 * Expects FP_T and FP_NAME(x) to be defined; undefines nothing. */

/* The body of fp_conv_gather_row (see conv.h). */
FP_BODY void
FP_CAT(FP_NAME(fp_conv_gather_row), _body)(const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo,
                                           ptrdiff_t len, FP_T *dst)
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
        dst[t] = (FP_T)(m[t] < 0     ? c->cval
                        : c->idouble ? *(const double *)(base + m[t] * s)
                                     : (double)*(const float *)(base + m[t] * s));
    if (t1 > t0) {
        const char *p = base + m[t0] * s;
        ptrdiff_t n = t1 - t0;
        FP_T *q = dst + t0;
        if (c->idouble) {
            if (s == sizeof(double)) {
                const double *f = (const double *)p;
                for (ptrdiff_t i = 0; i < n; i++)
                    q[i] = (FP_T)f[i];
            } else {
                for (ptrdiff_t i = 0; i < n; i++)
                    q[i] = (FP_T) * (const double *)(p + i * s);
            }
        } else if (s == sizeof(float)) {
            const float *f = (const float *)p;
            for (ptrdiff_t i = 0; i < n; i++)
                q[i] = (FP_T)f[i];
        } else {
            for (ptrdiff_t i = 0; i < n; i++)
                q[i] = (FP_T) * (const float *)(p + i * s);
        }
    }
    for (t = t1; t < len; t++)
        dst[t] = (FP_T)(m[t] < 0     ? c->cval
                        : c->idouble ? *(const double *)(base + m[t] * s)
                                     : (double)*(const float *)(base + m[t] * s));
}

/* The body of fp_conv_store_row (see conv.h). */
FP_BODY void
FP_CAT(FP_NAME(fp_conv_store_row), _body)(const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len,
                                          const FP_T *src)
{
    int last = c->ndim - 1;
    ptrdiff_t s = c->ostride[last];
    char *p = c->odata + ooff;
    if (c->odouble) {
        if (s == sizeof(double)) {
            double *f = (double *)p;
            for (ptrdiff_t i = 0; i < len; i++)
                f[i] = (double)src[i];
        } else {
            for (ptrdiff_t i = 0; i < len; i++)
                *(double *)(p + i * s) = (double)src[i];
        }
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
#undef FP_COMBINE_BODY
/* dst[x] = (init ? dst[x] : add) + sum_{k<NK} w[k] * src[k][x]; NK is a constant after
 * inlining, so the tap loop unrolls, the x loop vectorises, and up to four independent
 * accumulators keep the FMA units busy instead of waiting on one dependency chain. */
#define FP_COMBINE_BODY(NK)                                                                        \
    do {                                                                                           \
        const FP_T *s_[NK];                                                                        \
        FP_T w_[NK];                                                                               \
        for (int k_ = 0; k_ < NK; k_++) {                                                          \
            s_[k_] = src[k_];                                                                      \
            w_[k_] = w[k_];                                                                        \
        }                                                                                          \
        for (ptrdiff_t x = 0; x < n; x++) {                                                        \
            FP_T a_[4];                                                                            \
            a_[0] = (init ? dst[x] : add) + w_[0] * s_[0][x];                                      \
            for (int k_ = 1; k_ < NK && k_ < 4; k_++)                                              \
                a_[k_] = w_[k_] * s_[k_][x];                                                       \
            for (int k_ = 4; k_ < NK; k_++)                                                        \
                a_[k_ & 3] += w_[k_] * s_[k_][x];                                                  \
            dst[x] = NK >= 4   ? (a_[0] + a_[1]) + (a_[2] + a_[3])                                 \
                     : NK == 3 ? (a_[0] + a_[1]) + a_[2]                                           \
                     : NK == 2 ? a_[0] + a_[1]                                                     \
                               : a_[0];                                                            \
        }                                                                                          \
    } while (0)

/* Up to 8 sources into dst.  Returns nothing. */
FP_BODY void
FP_NAME(fp_combine_upto8)(FP_T *restrict dst, const FP_T *const *src, const FP_T *w, int nk,
                          FP_T add, ptrdiff_t n, int init)
{
    switch (nk) {
    case 1:
        FP_COMBINE_BODY(1);
        break;
    case 2:
        FP_COMBINE_BODY(2);
        break;
    case 3:
        FP_COMBINE_BODY(3);
        break;
    case 4:
        FP_COMBINE_BODY(4);
        break;
    case 5:
        FP_COMBINE_BODY(5);
        break;
    case 6:
        FP_COMBINE_BODY(6);
        break;
    case 7:
        FP_COMBINE_BODY(7);
        break;
    default:
        FP_COMBINE_BODY(8);
        break;
    }
}

/* The body of fp_conv_combine (see conv.h). */
FP_BODY void
FP_CAT(FP_NAME(fp_conv_combine), _body)(FP_T *dst, const FP_T *const *src, const FP_T *w, int nk,
                                        FP_T add, ptrdiff_t n, int accumulate)
{
    if (nk == 0) {
        if (!accumulate)
            for (ptrdiff_t x = 0; x < n; x++)
                dst[x] = add;
        return;
    }
    for (int k = 0; k < nk; k += 8) {
        int m = nk - k < 8 ? nk - k : 8;
        FP_NAME(fp_combine_upto8)(dst, src + k, w + k, m, add, n, accumulate || k > 0);
    }
}

/* The body of fp_conv_taps (see conv.h). */
FP_BODY void
FP_CAT(FP_NAME(fp_conv_taps), _body)(FP_T *dst, const FP_T *row, const FP_T *w,
                                     const ptrdiff_t *off, int nk, ptrdiff_t n, int accumulate)
{
    const FP_T *src[8];
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
        FP_NAME(fp_combine_upto8)(dst, src, w + k, m, 0.0, n, accumulate || k > 0);
    }
}

/* The entry points declared in conv.h: each calls the AVX2/FMA or the baseline build of its
 * body, by the CPU (see simd.h). */
FP_DISPATCH(void, FP_NAME(fp_conv_gather_row),
            (const fp_conv *c, ptrdiff_t ioff, ptrdiff_t lo, ptrdiff_t len, FP_T *dst),
            (c, ioff, lo, len, dst))
FP_DISPATCH(void, FP_NAME(fp_conv_store_row),
            (const fp_conv *c, ptrdiff_t ooff, ptrdiff_t len, const FP_T *src), (c, ooff, len, src))
FP_DISPATCH(void, FP_NAME(fp_conv_combine),
            (FP_T * dst, const FP_T *const *src, const FP_T *w, int nk, FP_T add, ptrdiff_t n,
             int accumulate),
            (dst, src, w, nk, add, n, accumulate))
FP_DISPATCH(void, FP_NAME(fp_conv_taps),
            (FP_T * dst, const FP_T *row, const FP_T *w, const ptrdiff_t *off, int nk, ptrdiff_t n,
             int accumulate),
            (dst, row, w, off, nk, n, accumulate))
