/* kernels/gen_rows.c - the inner loop of the general correlation: one output row as the
 * weighted sum of many source rows, dst[x] = sum_k w[k] * src[k][x].
 *
 * The AVX2/FMA build keeps a block of outputs in registers (eight vectors of four doubles,
 * then four, then one, then a masked tail) across every source, so each tap costs one
 * broadcast weight and one FMA per vector reading the source straight from memory, and the
 * output is written once.  Every output, wherever it lies in the row, is summed the same way:
 * from zero, one fused multiply-add per source, in source order.
 *
 * fp_conv_dot_rows2 does the same for two output rows at once, for the general path's
 * neighbouring rows that read mostly the same source rows: a source the two share is loaded
 * once and feeds a multiply-add into each row's accumulators, so the loop does about one load
 * per multiply-add instead of more than one (a load that crosses a cache line costs two), and
 * the FMA pipes, not the load ports, set its pace.  Each output is still summed from zero in
 * its own source order, so the pair gives the single row's bits. */
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
                a[v] = _mm256_fmadd_pd(wk, _mm256_loadu_pd(p + 4 * v), a[v]);                      \
        }                                                                                          \
        for (int v = 0; v < (V); v++)                                                              \
            _mm256_storeu_pd(dst + x + 4 * v, a[v]);                                               \
    }

/* Keeps a loaded vector in a register: without it the compiler folds the one load into both
 * multiply-adds as memory operands, loading it twice. */
/* Vectors a row of a pair keeps in registers: two rows of six are twelve accumulators, with the
 * two weights and the loaded source fifteen of the sixteen registers (six measured faster than
 * three, four or five).  Blocks of two vectors then one take the rest of a row: with one-vector
 * blocks alone a row of 32 ran slower in pairs than alone. */
#define FP_PAIR_V 6
#define FP_IN_REGISTER(v) __asm__("" : "+x"(v))

/* Blocks of V vectors of both output rows of fp_conv_dot_rows2: the outputs [x, x + 4 V) of
 * dst0 and dst1, for x from the current x while a whole block fits in n; leaves x at the first
 * output not done. */
#define FP_PAIR_BLOCK(V)                                                                           \
    for (; x + 4 * (V) <= n; x += 4 * (V)) {                                                       \
        __m256d a[V], b[V];                                                                        \
        for (int v = 0; v < (V); v++) {                                                            \
            a[v] = _mm256_setzero_pd();                                                            \
            b[v] = _mm256_setzero_pd();                                                            \
        }                                                                                          \
        for (ptrdiff_t r = 0; r < nruns; r++) {                                                    \
            const fp_pair_src *s = src + runs[r].first;                                            \
            const fp_pair_src *e = s + runs[r].count;                                              \
            if (runs[r].kind == FP_PAIR_BOTH) {                                                    \
                for (; s < e; s++) {                                                               \
                    const double *p = s->p + x;                                                    \
                    __m256d w0 = _mm256_broadcast_sd(&s->w0), w1 = _mm256_broadcast_sd(&s->w1);    \
                    for (int v = 0; v < (V); v++) {                                                \
                        __m256d l = _mm256_loadu_pd(p + 4 * v);                                    \
                        FP_IN_REGISTER(l);                                                         \
                        a[v] = _mm256_fmadd_pd(w0, l, a[v]);                                       \
                        b[v] = _mm256_fmadd_pd(w1, l, b[v]);                                       \
                    }                                                                              \
                }                                                                                  \
            } else if (runs[r].kind == FP_PAIR_FIRST) {                                            \
                for (; s < e; s++) {                                                               \
                    const double *p = s->p + x;                                                    \
                    __m256d w0 = _mm256_broadcast_sd(&s->w0);                                      \
                    for (int v = 0; v < (V); v++)                                                  \
                        a[v] = _mm256_fmadd_pd(w0, _mm256_loadu_pd(p + 4 * v), a[v]);              \
                }                                                                                  \
            } else {                                                                               \
                for (; s < e; s++) {                                                               \
                    const double *p = s->p + x;                                                    \
                    __m256d w1 = _mm256_broadcast_sd(&s->w1);                                      \
                    for (int v = 0; v < (V); v++)                                                  \
                        b[v] = _mm256_fmadd_pd(w1, _mm256_loadu_pd(p + 4 * v), b[v]);              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int v = 0; v < (V); v++) {                                                            \
            _mm256_storeu_pd(dst0 + x + 4 * v, a[v]);                                              \
            _mm256_storeu_pd(dst1 + x + 4 * v, b[v]);                                              \
        }                                                                                          \
    }

/* The AVX2/FMA build of fp_conv_dot_rows2.  Returns nothing. */
__attribute__((target("avx2,fma"))) static void
fp_dot_rows2_avx2(double *restrict dst0, double *restrict dst1, const fp_pair_src *src,
                  const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n)
{
    ptrdiff_t x = 0;
    FP_PAIR_BLOCK(FP_PAIR_V)
    FP_PAIR_BLOCK(2)
    FP_PAIR_BLOCK(1)
    if (x < n) {
        /* the last 1..3 outputs: the same sums in the low lanes of masked vectors */
        __m256i mask = _mm256_setr_epi64x(-1, n - x > 1 ? -1 : 0, n - x > 2 ? -1 : 0, 0);
        __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
        for (ptrdiff_t r = 0; r < nruns; r++) {
            int kind = runs[r].kind;
            for (ptrdiff_t i = runs[r].first; i < runs[r].first + runs[r].count; i++) {
                __m256d l = _mm256_maskload_pd(src[i].p + x, mask);
                if (kind != FP_PAIR_SECOND)
                    a = _mm256_fmadd_pd(_mm256_broadcast_sd(&src[i].w0), l, a);
                if (kind != FP_PAIR_FIRST)
                    b = _mm256_fmadd_pd(_mm256_broadcast_sd(&src[i].w1), l, b);
            }
        }
        _mm256_maskstore_pd(dst0 + x, mask, a);
        _mm256_maskstore_pd(dst1 + x, mask, b);
    }
}

/* The AVX2/FMA build of fp_conv_dot_rows.  Returns nothing. */
__attribute__((target("avx2,fma"))) static void
fp_dot_rows_avx2(double *restrict dst, const double *const *src, const double *w, ptrdiff_t nk,
                 ptrdiff_t n)
{
    ptrdiff_t x = 0;
    FP_DOT_BLOCK(8)
    FP_DOT_BLOCK(4)
    FP_DOT_BLOCK(1)
    if (x < n) {
        /* the last 1..3 outputs: the same sums in the low lanes of a masked vector */
        __m256i mask = _mm256_setr_epi64x(-1, n - x > 1 ? -1 : 0, n - x > 2 ? -1 : 0, 0);
        __m256d a = _mm256_setzero_pd();
        for (ptrdiff_t k = 0; k < nk; k++)
            a = _mm256_fmadd_pd(_mm256_broadcast_sd(w + k), _mm256_maskload_pd(src[k] + x, mask),
                                a);
        _mm256_maskstore_pd(dst + x, mask, a);
    }
}
#endif

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

/* The baseline build of fp_conv_dot_rows2: the same sums, source by source.  Returns
 * nothing. */
static void
fp_dot_rows2_base(double *restrict dst0, double *restrict dst1, const fp_pair_src *src,
                  const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n)
{
    for (ptrdiff_t x = 0; x < n; x++) {
        dst0[x] = 0.0;
        dst1[x] = 0.0;
    }
    for (ptrdiff_t r = 0; r < nruns; r++) {
        int kind = runs[r].kind;
        for (ptrdiff_t i = runs[r].first; i < runs[r].first + runs[r].count; i++) {
            const double *p = src[i].p;
            double w0 = src[i].w0, w1 = src[i].w1;
            if (kind != FP_PAIR_SECOND)
                for (ptrdiff_t x = 0; x < n; x++)
                    dst0[x] += w0 * p[x];
            if (kind != FP_PAIR_FIRST)
                for (ptrdiff_t x = 0; x < n; x++)
                    dst1[x] += w1 * p[x];
        }
    }
}

/* See conv.h. */
void
fp_conv_dot_rows2(double *dst0, double *dst1, const fp_pair_src *src, const fp_pair_run *runs,
                  ptrdiff_t nruns, ptrdiff_t n)
{
#if FP_HAVE_AVX2_DISPATCH
    if (fp_simd_level() > 0) {
        fp_dot_rows2_avx2(dst0, dst1, src, runs, nruns, n);
        return;
    }
#endif
    fp_dot_rows2_base(dst0, dst1, src, runs, nruns, n);
}

/* See conv.h. */
void
fp_conv_dot_rows(double *dst, const double *const *src, const double *w, ptrdiff_t nk, ptrdiff_t n)
{
#if FP_HAVE_AVX2_DISPATCH
    if (fp_simd_level() > 0) {
        fp_dot_rows_avx2(dst, src, w, nk, n);
        return;
    }
#endif
    fp_dot_rows_base(dst, src, w, nk, n);
}
