/* kernels/gen_rows.c - the inner loop of the general correlation: one output row as the
 * weighted sum of many source rows, dst[x] = sum_k w[k] * src[k][x].
 *
 * The AVX2/FMA build keeps a block of outputs in registers (eight vectors of four doubles,
 * then four, then one, then a masked tail) across every source, so each tap costs one
 * broadcast weight and one FMA per vector reading the source straight from memory, and the
 * output is written once.  Every output, wherever it lies in the row, is summed the same way:
 * from zero, one fused multiply-add per source, in source order.
 *
 * The loop over two output rows at once (fp_conv_dot_rows2) is in gen_rows2.c. */
#include "kernels/conv.h"
#include "kernels/simd.h"

#if FP_HAVE_AVX2_DISPATCH
#include <immintrin.h>

/* Blocks of V vectors: the outputs [x, x + 4 V) of dst, for x from the current x while a whole
 * block fits in n; leaves x at the first output not done. */
#define FP_DOT_BLOCK(V)                                                                            \
    for (; x + 4 * (V) <= n; x += 4 * (V)) {                                                       \
        __m256d a[V];                                                                              \
        for (int v = 0; v < (V); v++)                                                              \
            a[v] = _mm256_setzero_pd();                                                            \
        for (ptrdiff_t k = 0; k < nk; k++) {                                                       \
            const double *p = src[k] + x;                                                          \
            __m256d wk = _mm256_broadcast_sd(w + k);                                               \
            for (int v = 0; v < (V); v++)                                                          \
                a[v] = FP_MADD(wk, _mm256_loadu_pd(p + 4 * v), a[v]);                              \
        }                                                                                          \
        for (int v = 0; v < (V); v++)                                                              \
            _mm256_storeu_pd(dst + x + 4 * v, a[v]);                                               \
    }

/* An AVX2 build of fp_conv_dot_rows named NAME for TARGET, with FP_MADD(w, l, acc) as its
 * multiply-add.  Returns nothing. */
#define FP_DOT_ROWS_FN(NAME, TARGET)                                                               \
    __attribute__((target(TARGET))) static void NAME(double *restrict dst,                         \
                                                     const double *const *src, const double *w,    \
                                                     ptrdiff_t nk, ptrdiff_t n)                    \
    {                                                                                              \
        ptrdiff_t x = 0;                                                                           \
        FP_DOT_BLOCK(8)                                                                            \
        FP_DOT_BLOCK(4)                                                                            \
        FP_DOT_BLOCK(1)                                                                            \
        if (x < n) {                                                                               \
            /* the last 1..3 outputs: the same sums in the low lanes of a masked vector */         \
            __m256i mask = _mm256_setr_epi64x(-1, n - x > 1 ? -1 : 0, n - x > 2 ? -1 : 0, 0);      \
            __m256d a = _mm256_setzero_pd();                                                       \
            for (ptrdiff_t k = 0; k < nk; k++)                                                     \
                a = FP_MADD(_mm256_broadcast_sd(w + k), _mm256_maskload_pd(src[k] + x, mask), a);  \
            _mm256_maskstore_pd(dst + x, mask, a);                                                 \
        }                                                                                          \
    }
#endif

/* The AVX2/FMA build: one fused multiply-add per source.  Returns nothing. */
#define FP_MADD(w, l, acc) _mm256_fmadd_pd(w, l, acc)
FP_DOT_ROWS_FN(fp_dot_rows_avx2, "avx2,fma")
#undef FP_MADD

/* The AVX2 build without FMA: acc + l * w rounded twice, scipy's own arithmetic (exact=True).
 * Returns nothing. */
#define FP_MADD(w, l, acc) _mm256_add_pd(acc, _mm256_mul_pd(l, w))
FP_DOT_ROWS_FN(fp_dot_rows_plain, "avx2")
#undef FP_MADD

/* The baseline build: the same sums, source by source.  Returns nothing. */
static void
fp_dot_rows_base(double *restrict dst, const double *const *src, const double *w, ptrdiff_t nk,
                 ptrdiff_t n)
{
    for (ptrdiff_t x = 0; x < n; x++)
        dst[x] = 0.0;
    for (ptrdiff_t k = 0; k < nk; k++) {
        const double *p = src[k];
        double wk = w[k];
        for (ptrdiff_t x = 0; x < n; x++)
            dst[x] += wk * p[x];
    }
}

/* See conv.h. */
void
fp_conv_dot_rows(double *dst, const double *const *src, const double *w, ptrdiff_t nk, ptrdiff_t n,
                 int exact)
{
#if FP_HAVE_AVX2_DISPATCH
    if (fp_simd_level() > 0) {
        if (exact)
            fp_dot_rows_plain(dst, src, w, nk, n);
        else
            fp_dot_rows_avx2(dst, src, w, nk, n);
        return;
    }
#endif
    fp_dot_rows_base(dst, src, w, nk, n);
}
