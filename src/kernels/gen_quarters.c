/* kernels/gen_quarters.c - the general 3-D correlation with the four quarters of a row in the
 * four lanes of a vector (AVX2 builds, with and without FMA; 3 or 5 taps along the last axis;
 * every weight nonzero).
 *
 * A row of n outputs is cut into four quarters of q = ceil(n / 4); vector t of a block row holds
 * extended inputs t, q + t, 2q + t and 3q + t, so vector x of an output row holds outputs x,
 * q + x, 2q + x and 3q + x, and the source of its tap k along the last axis is vector x + k of
 * the block row: every load is one aligned vector (none crosses a cache line), and a vector
 * loaded once feeds the K outputs that read it, with the K weights of the (axis-0, axis-1) tap
 * row in registers (FP_QUARTERS_B vectors of outputs, the K weights and the loaded source take
 * the sixteen registers; about one load per three multiply-adds, where the pair loop of
 * gen_rows2.c, reading its sources at every offset, does one per two and a third of them
 * across a line).  The blocks, their tiles of axis 1 and the slots of the axis-0 taps are those
 * of general.c; a block row is filled from the double row the gather makes, then turned into
 * quarters with 4x4 transposes, and the sums go back to the output row the same way.
 *
 * Each output is summed from zero, one fused multiply-add per tap, taps in C order (axis 0, 1,
 * then the last): the bits of the one-row loop (gen_rows.c).  With exact, each multiply-add is a
 * product then a sum, rounded twice, as scipy computes them. */
#include "kernels/general.h"
#include "kernels/pool.h"
#include "kernels/simd.h"

#include <stdlib.h>
#include <string.h>

#define FP_QUARTERS_MIN_ROW 32 /* outputs a row below which the other loops run */

#if FP_HAVE_AVX2_DISPATCH
#include <immintrin.h>

#define FP_QUARTERS_B 8                      /* output vectors a block keeps in registers */
#define FP_QUARTERS_CACHE_BYTES (256 * 1024) /* what the blocks of a tile may take */

typedef struct {
    int ready;
    double *blocks; /* ntaps[0] slots of block_rows rows of rowvec vectors, 64-byte aligned */
    double *row;    /* one gathered row of 4 q + K - 1 doubles */
    ptrdiff_t *tags, *slotk, *fill;
    const double **src; /* the ntaps[0] * ntaps[1] block rows an output row reads */
} fp_quarters_scratch;

typedef struct {
    fp_conv *c;
    ptrdiff_t K;                /* taps along the last axis (3 or 5) */
    ptrdiff_t q;                /* outputs of a quarter row: vectors of an output row */
    ptrdiff_t rowvec;           /* vectors of a block row: q + K - 1 */
    ptrdiff_t tile1, ntiles1;   /* axis-1 rows a tile takes */
    ptrdiff_t chunk0, nchunks0; /* output slices an item takes */
    ptrdiff_t block_rows;       /* rows of a block: tile1 + ntaps[1] - 1 */
    const double *w;            /* the weights, C order */
    fp_quarters_scratch *scratch;
    int nworkers;
} fp_quarters_job;

/* One block of B output vectors of KK taps along the last axis: out[j] = sum over the tap rows
 * r, then the taps k, of w[r * KK + k] * vector x + j + k of src[r], from zero.  Returns
 * nothing. */
#define FP_QUARTERS_BLOCK(NAME, B, KK, ATTR)                                                       \
    ATTR void NAME##_##B##_##KK(__m256d *out, const double *const *src, ptrdiff_t nrows,           \
                                const double *w, ptrdiff_t x)                                      \
    {                                                                                              \
        __m256d acc[B];                                                                            \
        for (int j = 0; j < (B); j++)                                                              \
            acc[j] = _mm256_setzero_pd();                                                          \
        for (ptrdiff_t r = 0; r < nrows; r++) {                                                    \
            const double *p = src[r] + 4 * x;                                                      \
            __m256d wk[KK];                                                                        \
            __asm__("" : "+r"(p)); /* loads at p + constant: no index register a vector */         \
            for (int k = 0; k < (KK); k++)                                                         \
                wk[k] = _mm256_broadcast_sd(w + r * (KK) + k);                                     \
            FP_QUARTERS_TAPS(B, KK);                                                               \
        }                                                                                          \
        for (int j = 0; j < (B); j++)                                                              \
            out[j] = acc[j];                                                                       \
    }

/* The blocks of one build, NAME_B_KK for B in 4, 1 and KK in 5, 3. */
#define FP_QUARTERS_SMALL_BLOCKS(NAME, ATTR)                                                       \
    FP_QUARTERS_BLOCK(NAME, 4, 5, ATTR)                                                            \
    FP_QUARTERS_BLOCK(NAME, 1, 5, ATTR)                                                            \
    FP_QUARTERS_BLOCK(NAME, 4, 3, ATTR)                                                            \
    FP_QUARTERS_BLOCK(NAME, 1, 3, ATTR)

/* The FMA build: one fused multiply-add per tap, each source vector loaded once into a register
 * and fed to the KK outputs that read it. */
#define FP_QUARTERS_TAPS(B, KK)                                                                    \
    for (int xp = 0; xp < (B) + (KK)-1; xp++) {                                                    \
        __m256d v = _mm256_load_pd(p + 4 * xp);                                                    \
        for (int k = 0; k < (KK); k++) {                                                           \
            int j = xp - k;                                                                        \
            if (j >= 0 && j < (B))                                                                 \
                acc[j] = FP_MADD(wk[k], v, acc[j]);                                                \
        }                                                                                          \
    }
#define FP_MADD(w, l, acc) _mm256_fmadd_pd(w, l, acc)
FP_QUARTERS_BLOCK(fp_quarters_block, 8, 5, __attribute__((target("avx2,fma"))) static inline)
FP_QUARTERS_BLOCK(fp_quarters_block, 8, 3, __attribute__((target("avx2,fma"))) static inline)
FP_QUARTERS_SMALL_BLOCKS(fp_quarters_block, __attribute__((target("avx2,fma"))) static inline)
#undef FP_MADD

/* The build without FMA (exact=True): acc + l * w rounded twice, scipy's own arithmetic.  Built
 * for AVX2 alone and never inlined into the FMA code around it, so that no compiler contracts
 * the product and the sum into one FMA. */
#define FP_MADD(w, l, acc) _mm256_add_pd(acc, _mm256_mul_pd(l, w))
FP_QUARTERS_SMALL_BLOCKS(fp_quarters_plain, __attribute__((target("avx2"), noinline)) static)
#undef FP_MADD
#undef FP_QUARTERS_TAPS

/* One tap of the exact block of eight: output vector j gains wb times source vector j of p. */
#define FP_PLAIN_TAP(j) a##j = _mm256_add_pd(a##j, _mm256_mul_pd(_mm256_load_pd(p + 4 * (j)), wb))

/* The exact block of eight output vectors, summed as FP_QUARTERS_BLOCK sums them: tap by tap
 * over the eight, each product reading its source from memory, in eight named sums that pass
 * through one empty asm after each tap.  The asm keeps them in registers and the taps in this
 * order: the block above, with its sums in an array, spilled them to the stack, and ran each
 * output's taps as one chain of dependent sums, at 1.6 times the FMA build's time.  Returns
 * nothing. */
#define FP_QUARTERS_PLAIN_8(KK)                                                                    \
    __attribute__((target("avx2"), noinline)) static void fp_quarters_plain_8_##KK(                \
        __m256d *out, const double *const *src, ptrdiff_t nrows, const double *w, ptrdiff_t x)     \
    {                                                                                              \
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,    \
                a7 = a0;                                                                           \
        for (ptrdiff_t r = 0; r < nrows; r++) {                                                    \
            const double *p = src[r] + 4 * x;                                                      \
            for (int k = 0; k < (KK); k++, p += 4) {                                               \
                __m256d wb = _mm256_broadcast_sd(w + r * (KK) + k);                                \
                FP_PLAIN_TAP(0);                                                                   \
                FP_PLAIN_TAP(1);                                                                   \
                FP_PLAIN_TAP(2);                                                                   \
                FP_PLAIN_TAP(3);                                                                   \
                FP_PLAIN_TAP(4);                                                                   \
                FP_PLAIN_TAP(5);                                                                   \
                FP_PLAIN_TAP(6);                                                                   \
                FP_PLAIN_TAP(7);                                                                   \
                __asm__(""                                                                         \
                        : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6),    \
                          "+x"(a7));                                                               \
            }                                                                                      \
        }                                                                                          \
        out[0] = a0;                                                                               \
        out[1] = a1;                                                                               \
        out[2] = a2;                                                                               \
        out[3] = a3;                                                                               \
        out[4] = a4;                                                                               \
        out[5] = a5;                                                                               \
        out[6] = a6;                                                                               \
        out[7] = a7;                                                                               \
    }
FP_QUARTERS_PLAIN_8(5)
FP_QUARTERS_PLAIN_8(3)
#undef FP_PLAIN_TAP

/* The 4x4 transpose of doubles: row l of the result is lane l of a, b, c, d.  Returns
 * nothing. */
#define FP_QUARTERS_T4(a, b, c, d, r0, r1, r2, r3)                                                 \
    do {                                                                                           \
        __m256d t0_ = _mm256_unpacklo_pd(a, b), t1_ = _mm256_unpackhi_pd(a, b);                    \
        __m256d t2_ = _mm256_unpacklo_pd(c, d), t3_ = _mm256_unpackhi_pd(c, d);                    \
        r0 = _mm256_permute2f128_pd(t0_, t2_, 0x20);                                               \
        r1 = _mm256_permute2f128_pd(t1_, t3_, 0x20);                                               \
        r2 = _mm256_permute2f128_pd(t0_, t2_, 0x31);                                               \
        r3 = _mm256_permute2f128_pd(t1_, t3_, 0x31);                                               \
    } while (0)

/* Writes n (<= FP_QUARTERS_B) output vectors v[0..n), vector x first, to the output row at
 * byte offset ooff: lane l of vector x + j to output l q + x + j where that output exists, four
 * vectors at a time with transposes where the row is contiguous and all four land in it, else
 * one by one.  Returns nothing. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
fp_quarters_store(const fp_quarters_job *job, const __m256d *v, ptrdiff_t n, ptrdiff_t ooff,
                  ptrdiff_t x)
{
    const fp_conv *c = job->c;
    ptrdiff_t esize = c->odouble ? (ptrdiff_t)sizeof(double) : (ptrdiff_t)sizeof(float);
    ptrdiff_t os = c->ostride[2], nout = c->shape[2], q = job->q, j = 0;
    char *row = c->odata + ooff;
    if (os == esize) {
        for (; j + 4 <= n && 3 * q + x + j + 3 < nout; j += 4) {
            __m256d r0, r1, r2, r3;
            FP_QUARTERS_T4(v[j], v[j + 1], v[j + 2], v[j + 3], r0, r1, r2, r3);
            if (c->odouble) {
                double *o = (double *)row + x + j;
                _mm256_storeu_pd(o, r0);
                _mm256_storeu_pd(o + q, r1);
                _mm256_storeu_pd(o + 2 * q, r2);
                _mm256_storeu_pd(o + 3 * q, r3);
            } else {
                float *o = (float *)row + x + j;
                _mm_storeu_ps(o, _mm256_cvtpd_ps(r0));
                _mm_storeu_ps(o + q, _mm256_cvtpd_ps(r1));
                _mm_storeu_ps(o + 2 * q, _mm256_cvtpd_ps(r2));
                _mm_storeu_ps(o + 3 * q, _mm256_cvtpd_ps(r3));
            }
        }
    }
    for (; j < n; j++) {
        double lanes[4];
        _mm256_storeu_pd(lanes, v[j]);
        for (int l = 0; l < 4; l++) {
            ptrdiff_t i = l * q + x + j;
            if (i >= nout)
                break;
            if (c->odouble)
                *(double *)(row + i * os) = lanes[l];
            else
                *(float *)(row + i * os) = (float)lanes[l];
        }
    }
}

/* Fills the block of slice jz (-1: cval) for the rows of the tile from y0 (T rows and the
 * ntaps[1] - 1 more its taps read): vector t of block row e holds extended inputs t, q + t,
 * 2 q + t and 3 q + t of extended row y0 + e (those past the extended row only feed outputs past
 * the row, which are not written).  Returns nothing. */
__attribute__((target("avx2,fma"))) static void
fp_quarters_fill(const fp_quarters_job *job, fp_quarters_scratch *s, double *block, ptrdiff_t jz,
                 ptrdiff_t y0, ptrdiff_t T)
{
    const fp_conv *c = job->c;
    ptrdiff_t q = job->q, need = 4 * q + job->K - 1;
    ptrdiff_t rowlen = c->shape[2] + c->ntaps[2] - 1;
    for (ptrdiff_t e = 0; e < T + c->ntaps[1] - 1; e++) {
        double *dst = block + e * job->rowvec * 4, *r = s->row;
        ptrdiff_t j1 = c->map[1][y0 + e], t = 0;
        if (jz < 0 || j1 < 0) {
            for (ptrdiff_t i = 0; i < need; i++)
                r[i] = c->cval;
        } else {
            fp_conv_gather_row(c, jz * c->istride[0] + j1 * c->istride[1], 0, rowlen, r);
            for (ptrdiff_t i = rowlen; i < need; i++)
                r[i] = c->cval;
        }
        for (; t + 4 <= job->rowvec; t += 4) {
            __m256d r0, r1, r2, r3;
            FP_QUARTERS_T4(_mm256_loadu_pd(r + t), _mm256_loadu_pd(r + q + t),
                           _mm256_loadu_pd(r + 2 * q + t), _mm256_loadu_pd(r + 3 * q + t), r0, r1,
                           r2, r3);
            _mm256_store_pd(dst + 4 * t, r0);
            _mm256_store_pd(dst + 4 * t + 4, r1);
            _mm256_store_pd(dst + 4 * t + 8, r2);
            _mm256_store_pd(dst + 4 * t + 12, r3);
        }
        for (; t < job->rowvec; t++)
            for (int l = 0; l < 4; l++)
                dst[4 * t + l] = r[l * q + t];
    }
}

/* Frees one worker's scratch.  Returns nothing. */
static void
fp_quarters_free(fp_quarters_scratch *s)
{
    free(s->blocks);
    free(s->row);
    free(s->tags);
    free(s->slotk);
    free(s->fill);
    free((void *)s->src);
    memset(s, 0, sizeof(*s));
}

/* Allocates one worker's scratch.  Returns 0, or -1 when out of memory. */
static int
fp_quarters_alloc(const fp_quarters_job *job, fp_quarters_scratch *s)
{
    const fp_conv *c = job->c;
    ptrdiff_t K0 = c->ntaps[0];
    void *blocks = NULL;
    if (posix_memalign(&blocks, 64,
                       sizeof(double) * 4 * (size_t)(K0 * job->block_rows * job->rowvec)) != 0)
        blocks = NULL;
    s->blocks = (double *)blocks;
    s->row = (double *)malloc(sizeof(double) * (size_t)(4 * job->q + job->K - 1));
    s->tags = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->slotk = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->fill = (ptrdiff_t *)malloc(sizeof(ptrdiff_t) * (size_t)K0);
    s->src = (const double **)malloc(sizeof(double *) * (size_t)(K0 * c->ntaps[1]));
    if (s->blocks == NULL || s->row == NULL || s->tags == NULL || s->slotk == NULL ||
        s->fill == NULL || s->src == NULL) {
        fp_quarters_free(s);
        return -1;
    }
    s->ready = 1;
    return 0;
}

/* The output vectors [x, x + B) of one output row, for each block size B in turn, summed and
 * stored.  Leaves x at the first vector not done. */
#define FP_QUARTERS_ROW(NAME, KK)                                                                  \
    do {                                                                                           \
        for (; x + 8 <= job->q; x += 8) {                                                          \
            NAME##_8_##KK(v, s->src, nrows, job->w, x);                                            \
            fp_quarters_store(job, v, 8, ooff, x);                                                 \
        }                                                                                          \
        for (; x + 4 <= job->q; x += 4) {                                                          \
            NAME##_4_##KK(v, s->src, nrows, job->w, x);                                            \
            fp_quarters_store(job, v, 4, ooff, x);                                                 \
        }                                                                                          \
        for (; x < job->q; x++) {                                                                  \
            NAME##_1_##KK(v, s->src, nrows, job->w, x);                                            \
            fp_quarters_store(job, v, 1, ooff, x);                                                 \
        }                                                                                          \
    } while (0)

/* Pool callback: one (axis-0 chunk, axis-1 tile).  Returns 0, or -1 when out of memory. */
__attribute__((target("avx2,fma"))) static int
fp_quarters_item(void *ctx, ptrdiff_t item, int worker)
{
    fp_quarters_job *job = (fp_quarters_job *)ctx;
    fp_conv *c = job->c;
    fp_quarters_scratch *s = &job->scratch[worker];
    ptrdiff_t K0 = c->ntaps[0], K1 = c->ntaps[1], nrows = K0 * K1;
    ptrdiff_t a = item / job->ntiles1, bt = item % job->ntiles1;
    ptrdiff_t lo = a * job->chunk0;
    ptrdiff_t hi = lo + job->chunk0 < c->shape[0] ? lo + job->chunk0 : c->shape[0];
    ptrdiff_t y0 = bt * job->tile1;
    ptrdiff_t T = y0 + job->tile1 < c->shape[1] ? job->tile1 : c->shape[1] - y0;
    ptrdiff_t slot_size = job->block_rows * job->rowvec * 4;
    ptrdiff_t erows = T + K1 - 1, per_row = (erows + T - 1) / T;
    if (!s->ready && fp_quarters_alloc(job, s) < 0)
        return -1;
    for (ptrdiff_t k = 0; k < K0; k++)
        s->tags[k] = -2;
    for (ptrdiff_t i0 = lo; i0 < hi; i0++) {
        ptrdiff_t nfill = fp_gen_place(c, i0, s->tags, s->slotk, s->fill);
        for (ptrdiff_t f = 0; f < nfill; f++)
            fp_quarters_fill(job, s, s->blocks + s->fill[f] * slot_size, s->tags[s->fill[f]], y0,
                             T);
        for (ptrdiff_t y = y0; y < y0 + T; y++) {
            __m256d v[FP_QUARTERS_B];
            ptrdiff_t x = 0, ooff = i0 * c->ostride[0] + y * c->ostride[1];
            if (i0 + 1 < hi) {
                /* a share of the rows of the slice the next output slice adds */
                ptrdiff_t e0 = (y - y0) * per_row, e1 = e0 + per_row;
                fp_gen_prefetch(c, c->map[0][i0 + K0], y0, e0, e1 < erows ? e1 : erows);
            }
            for (ptrdiff_t kz = 0; kz < K0; kz++)
                for (ptrdiff_t ky = 0; ky < K1; ky++)
                    s->src[kz * K1 + ky] =
                        s->blocks + s->slotk[kz] * slot_size + (y - y0 + ky) * job->rowvec * 4;
            if (c->exact && job->K == 5)
                FP_QUARTERS_ROW(fp_quarters_plain, 5);
            else if (c->exact)
                FP_QUARTERS_ROW(fp_quarters_plain, 3);
            else if (job->K == 5)
                FP_QUARTERS_ROW(fp_quarters_block, 5);
            else
                FP_QUARTERS_ROW(fp_quarters_block, 3);
        }
    }
    return 0;
}
#endif

/* See general.h. */
int
fp_gen_quarters_fits(const fp_conv *c)
{
#if FP_HAVE_AVX2_DISPATCH
    ptrdiff_t n = 1;
    if (c->ndim != 3 || (c->ntaps[2] != 5 && c->ntaps[2] != 3) ||
        c->shape[2] < FP_QUARTERS_MIN_ROW || fp_simd_level() <= 0)
        return 0;
    for (int d = 0; d < 3; d++)
        n *= c->ntaps[d];
    for (ptrdiff_t i = 0; i < n; i++)
        if (c->weights[i] == 0.0)
            return 0; /* zero weights are skipped (as scipy does): the pair and one-row loops */
    return 1;
#else
    (void)c;
    return 0;
#endif
}

/* See general.h. */
int
fp_gen_quarters(fp_conv *c)
{
    int result = -1;
#if FP_HAVE_AVX2_DISPATCH
    fp_quarters_job job;
    ptrdiff_t K0 = c->ntaps[0], K1 = c->ntaps[1];
    memset(&job, 0, sizeof(job));
    job.c = c;
    job.K = c->ntaps[2];
    job.w = c->weights;
    job.q = (c->shape[2] + 3) / 4;
    job.rowvec = job.q + job.K - 1;
    {
        /* tiles of axis 1 whose ntaps[0] blocks fit the cache budget, all about as tall */
        ptrdiff_t per = K0 * job.rowvec * 4 * (ptrdiff_t)sizeof(double);
        ptrdiff_t t1 = FP_QUARTERS_CACHE_BYTES / per - (K1 - 1);
        if (t1 < 4)
            t1 = 4;
        job.ntiles1 = (c->shape[1] + t1 - 1) / t1;
        job.tile1 = (c->shape[1] + job.ntiles1 - 1) / job.ntiles1;
        job.ntiles1 = (c->shape[1] + job.tile1 - 1) / job.tile1;
        job.block_rows = job.tile1 + K1 - 1;
    }
    {
        ptrdiff_t n0 = c->shape[0], want = 16 * (ptrdiff_t)c->nthreads, chunks = 1;
        if (job.ntiles1 < want) {
            chunks = (want + job.ntiles1 - 1) / job.ntiles1;
            if (chunks > n0)
                chunks = n0;
        }
        job.chunk0 = (n0 + chunks - 1) / chunks;
        job.nchunks0 = (n0 + job.chunk0 - 1) / job.chunk0;
    }
    job.nworkers = c->nthreads;
    job.scratch = (fp_quarters_scratch *)calloc((size_t)job.nworkers, sizeof(fp_quarters_scratch));
    if (job.scratch == NULL)
        return -1;
    result = fp_pool_run(job.nchunks0 * job.ntiles1, c->nthreads, fp_quarters_item, &job);
    for (int w = 0; w < job.nworkers; w++)
        fp_quarters_free(&job.scratch[w]);
    free(job.scratch);
#else
    (void)c;
#endif
    return result;
}
