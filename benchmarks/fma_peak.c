/* benchmarks/fma_peak.c - the machine's floor for the general 5x5x5 correlation: the peak rate
 * of double-precision fused multiply-adds on one core (AVX2/FMA, four doubles a vector, twelve
 * independent accumulators so that neither latency nor loads limit it), in the thread's CPU
 * time, so that other jobs on the machine do not count.
 *
 *     gcc -O2 -o fma_peak benchmarks/fma_peak.c && ./fma_peak
 *     ./fma_peak & ./fma_peak & wait      # both cores at once
 *
 * The 512x512x256 general 5x5x5 case needs 512*512*256*125 = 8.39e9 multiply-adds; at the
 * printed rate on each of two cores that is the floor in seconds, before any load, conversion
 * or store. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

/* The thread's CPU time in seconds. */
static double
cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define FP_STEP(r) r = _mm256_fmadd_pd(r, w, x);

/* Prints the peak rate three times.  Returns 0. */
__attribute__((target("avx2,fma"))) int
main(void)
{
    const long n = 200000000;
    __m256d w = _mm256_set1_pd(0.999999), x = _mm256_set1_pd(1e-9);
    __m256d a0 = _mm256_set1_pd(0), a1 = _mm256_set1_pd(1), a2 = _mm256_set1_pd(2);
    __m256d a3 = _mm256_set1_pd(3), a4 = _mm256_set1_pd(4), a5 = _mm256_set1_pd(5);
    __m256d a6 = _mm256_set1_pd(6), a7 = _mm256_set1_pd(7), a8 = _mm256_set1_pd(8);
    __m256d a9 = _mm256_set1_pd(9), a10 = _mm256_set1_pd(10), a11 = _mm256_set1_pd(11);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = cpu_now(), t, out[4];
        for (long i = 0; i < n; i++) {
            FP_STEP(a0) FP_STEP(a1) FP_STEP(a2) FP_STEP(a3) FP_STEP(a4) FP_STEP(a5);
            FP_STEP(a6) FP_STEP(a7) FP_STEP(a8) FP_STEP(a9) FP_STEP(a10) FP_STEP(a11);
            /* keeps the twelve chains apart and in registers */
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
            __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
        }
        t = cpu_now() - t0;
        _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(a0, a11), _mm256_add_pd(a5, a6)));
        printf("%.4f ns a vector FMA, %.2f G double FMA/s on this core (checksum %g); "
               "8.39e9 FMAs on 2 such cores: %.0f ms\n",
               t * 1e9 / (n * 12.0), n * 48.0 / t / 1e9, out[0], 8.39e9 / (2 * n * 48.0 / t) * 1e3);
    }
    return 0;
}
