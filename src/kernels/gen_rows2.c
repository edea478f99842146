/* kernels/gen_rows2.c - the general correlation's loop over two neighbouring output rows at
 * once (3-D; axis-1 indices y and y + 1), which read mostly the same source rows.
 *
 * A source the two rows share is loaded once and feeds a multiply-add into each row's
 * accumulators, so the loop does about one load per multiply-add instead of more than one (a
 * load that crosses a cache line costs two), and the FMA pipes, not the load ports, set its
 * pace.  Sources that feed one row alone come in FP_PAIR_SPLIT runs where they can, one for
 * each row in turn, so that every step still has twelve independent multiply-adds in flight.
 * The sums are written straight to the output rows (rounded to float32 with a vector convert
 * where the output is float32), with no pass through a row of doubles.
 *
 * Each output is summed from zero in its own source order, one (fused) multiply-add per source,
 * so the pair gives the one-row loop's bits (gen_rows.c). */
#include "kernels/conv.h"
#include "kernels/simd.h"

#if FP_HAVE_AVX2_DISPATCH
#include <immintrin.h>

/* Vectors a row of a pair keeps in registers: two rows of six are twelve accumulators, with the
 * two weights and the loaded source fifteen of the sixteen registers (six measured faster than
 * three, four or five).  Blocks of four, two, then one vector take the rest of a row: with
 * one-vector blocks alone a row of 32 ran slower in pairs than alone, and four (eight
 * accumulators) keep the multiply-adds of a shared source apart by their latency where two do
 * not (a row of 256: ten blocks of six and one of four). */
#define FP_PAIR_V 6

/* Keeps a loaded vector in a register: without it the compiler folds the one load into both
 * multiply-adds as memory operands, loading it twice. */
#define FP_IN_REGISTER(v) __asm__("" : "+x"(v))

/* Stores the accumulators a[0..V) and b[0..V) of a block at output x of the two rows, rounded
 * to float32 where the output is float32. */
#define FP_PAIR_STORE(V)                                                                           \
    do {                                                                                           \
        if (out->single) {                                                                         \
            for (int v = 0; v < (V); v++) {                                                        \
                _mm_storeu_ps((float *)out->row0 + x + 4 * v, _mm256_cvtpd_ps(a[v]));              \
                _mm_storeu_ps((float *)out->row1 + x + 4 * v, _mm256_cvtpd_ps(b[v]));              \
            }                                                                                      \
        } else {                                                                                   \
            for (int v = 0; v < (V); v++) {                                                        \
                _mm256_storeu_pd((double *)out->row0 + x + 4 * v, a[v]);                           \
                _mm256_storeu_pd((double *)out->row1 + x + 4 * v, b[v]);                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Blocks of V vectors of both output rows: the outputs [x, x + 4 V) of each, for x from the
 * current x while a whole block fits in n; leaves x at the first output not done. */
#define FP_PAIR_BLOCK(V)                                                                           \
    for (; x + 4 * (V) <= n; x += 4 * (V)) {                                                       \
        __m256d a[V], b[V];                                                                        \
        const double *bx = base + x;                                                               \
        for (int v = 0; v < (V); v++) {                                                            \
            a[v] = _mm256_setzero_pd();                                                            \
            b[v] = _mm256_setzero_pd();                                                            \
        }                                                                                          \
        for (ptrdiff_t r = 0; r < nruns; r++) {                                                    \
            const fp_pair_src *s = src + runs[r].first;                                            \
            const fp_pair_src *e = s + runs[r].count;                                              \
            if (runs[r].kind == FP_PAIR_BOTH) {                                                    \
                for (; s < e; s++) {                                                               \
                    const double *p = bx + s->rel;                                                 \
                    __m256d w0 = _mm256_broadcast_sd(&s->w0), w1 = _mm256_broadcast_sd(&s->w1);    \
                    for (int v = 0; v < (V); v++) {                                                \
                        __m256d l = _mm256_loadu_pd(p + 4 * v);                                    \
                        FP_IN_REGISTER(l);                                                         \
                        a[v] = FP_MADD(w0, l, a[v]);                                               \
                        b[v] = FP_MADD(w1, l, b[v]);                                               \
                    }                                                                              \
                }                                                                                  \
            } else if (runs[r].kind == FP_PAIR_SPLIT) {                                            \
                for (; s < e; s += 2) {                                                            \
                    const double *p = bx + s[0].rel, *q = bx + s[1].rel;                           \
                    __m256d w0 = _mm256_broadcast_sd(&s[0].w0);                                    \
                    __m256d w1 = _mm256_broadcast_sd(&s[1].w1);                                    \
                    for (int v = 0; v < (V); v++) {                                                \
                        a[v] = FP_MADD(w0, _mm256_loadu_pd(p + 4 * v), a[v]);                      \
                        b[v] = FP_MADD(w1, _mm256_loadu_pd(q + 4 * v), b[v]);                      \
                    }                                                                              \
                }                                                                                  \
            } else if (runs[r].kind == FP_PAIR_FIRST) {                                            \
                for (; s < e; s++) {                                                               \
                    const double *p = bx + s->rel;                                                 \
                    __m256d w0 = _mm256_broadcast_sd(&s->w0);                                      \
                    for (int v = 0; v < (V); v++)                                                  \
                        a[v] = FP_MADD(w0, _mm256_loadu_pd(p + 4 * v), a[v]);                      \
                }                                                                                  \
            } else {                                                                               \
                for (; s < e; s++) {                                                               \
                    const double *p = bx + s->rel;                                                 \
                    __m256d w1 = _mm256_broadcast_sd(&s->w1);                                      \
                    for (int v = 0; v < (V); v++)                                                  \
                        b[v] = FP_MADD(w1, _mm256_loadu_pd(p + 4 * v), b[v]);                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        FP_PAIR_STORE(V);                                                                          \
    }

/* An AVX2 build of fp_conv_dot_rows2 named NAME for TARGET, with FP_MADD(w, l, acc) as its
 * multiply-add.  Returns nothing. */
#define FP_DOT_ROWS2_FN(NAME, TARGET)                                                              \
    __attribute__((target(TARGET))) static void NAME(                                              \
        const fp_pair_out *out, const double *base, const fp_pair_src *src,                        \
        const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n)                                     \
    {                                                                                              \
        ptrdiff_t x = 0;                                                                           \
        FP_PAIR_BLOCK(FP_PAIR_V)                                                                   \
        FP_PAIR_BLOCK(4)                                                                           \
        FP_PAIR_BLOCK(2)                                                                           \
        FP_PAIR_BLOCK(1)                                                                           \
        if (x < n) {                                                                               \
            /* the last 1..3 outputs: the same sums in the low lanes of masked vectors */          \
            __m256i mask = _mm256_setr_epi64x(-1, n - x > 1 ? -1 : 0, n - x > 2 ? -1 : 0, 0);      \
            __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();                              \
            for (ptrdiff_t r = 0; r < nruns; r++) {                                                \
                int kind = runs[r].kind;                                                           \
                for (ptrdiff_t i = 0; i < runs[r].count; i++) {                                    \
                    const fp_pair_src *s = &src[runs[r].first + i];                                \
                    __m256d l = _mm256_maskload_pd(base + x + s->rel, mask);                       \
                    int row =                                                                      \
                        kind == FP_PAIR_SPLIT ? (i & 1 ? FP_PAIR_SECOND : FP_PAIR_FIRST) : kind;   \
                    if (row != FP_PAIR_SECOND)                                                     \
                        a = FP_MADD(_mm256_broadcast_sd(&s->w0), l, a);                            \
                    if (row != FP_PAIR_FIRST)                                                      \
                        b = FP_MADD(_mm256_broadcast_sd(&s->w1), l, b);                            \
                }                                                                                  \
            }                                                                                      \
            if (out->single) {                                                                     \
                __m128i m4 = _mm_setr_epi32(-1, n - x > 1 ? -1 : 0, n - x > 2 ? -1 : 0, 0);        \
                _mm_maskstore_ps((float *)out->row0 + x, m4, _mm256_cvtpd_ps(a));                  \
                _mm_maskstore_ps((float *)out->row1 + x, m4, _mm256_cvtpd_ps(b));                  \
            } else {                                                                               \
                _mm256_maskstore_pd((double *)out->row0 + x, mask, a);                             \
                _mm256_maskstore_pd((double *)out->row1 + x, mask, b);                             \
            }                                                                                      \
        }                                                                                          \
    }
#endif

/* The AVX2/FMA build: one fused multiply-add per source.  Returns nothing. */
#define FP_MADD(w, l, acc) _mm256_fmadd_pd(w, l, acc)
FP_DOT_ROWS2_FN(fp_dot_rows2_avx2, "avx2,fma")
#undef FP_MADD

/* The AVX2 build without FMA: acc + l * w rounded twice, scipy's own arithmetic (exact=True).
 * Returns nothing. */
#define FP_MADD(w, l, acc) _mm256_add_pd(acc, _mm256_mul_pd(l, w))
FP_DOT_ROWS2_FN(fp_dot_rows2_plain, "avx2")
#undef FP_MADD

/* The baseline build of fp_conv_dot_rows2: the same sums, output by output.  Returns
 * nothing. */
static void
fp_dot_rows2_base(const fp_pair_out *out, const double *base, const fp_pair_src *src,
                  const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n)
{
    for (ptrdiff_t x = 0; x < n; x++) {
        double a = 0.0, b = 0.0;
        for (ptrdiff_t r = 0; r < nruns; r++) {
            int kind = runs[r].kind;
            for (ptrdiff_t i = 0; i < runs[r].count; i++) {
                const fp_pair_src *s = &src[runs[r].first + i];
                double v = base[x + s->rel];
                int row = kind == FP_PAIR_SPLIT ? (i & 1 ? FP_PAIR_SECOND : FP_PAIR_FIRST) : kind;
                if (row != FP_PAIR_SECOND)
                    a += s->w0 * v;
                if (row != FP_PAIR_FIRST)
                    b += s->w1 * v;
            }
        }
        if (out->single) {
            ((float *)out->row0)[x] = (float)a;
            ((float *)out->row1)[x] = (float)b;
        } else {
            ((double *)out->row0)[x] = a;
            ((double *)out->row1)[x] = b;
        }
    }
}

/* See conv.h. */
void
fp_conv_dot_rows2(const fp_pair_out *out, const double *base, const fp_pair_src *src,
                  const fp_pair_run *runs, ptrdiff_t nruns, ptrdiff_t n, int exact)
{
#if FP_HAVE_AVX2_DISPATCH
    if (fp_simd_level() > 0) {
        if (exact)
            fp_dot_rows2_plain(out, base, src, runs, nruns, n);
        else
            fp_dot_rows2_avx2(out, base, src, runs, nruns, n);
        return;
    }
#endif
    fp_dot_rows2_base(out, base, src, runs, nruns, n);
}
