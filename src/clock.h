/* clock.h - the tick clock shared by the profilers: the invariant TSC calibrated to seconds
 * where the processor has one, else CLOCK_MONOTONIC in nanoseconds; and CPU-time clocks. */
#ifndef FP_CLOCK_H
#define FP_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define FP_HAVE_RDTSC 1
#else
#define FP_HAVE_RDTSC 0
#endif

typedef int64_t fp_tick;

/* 1 when fp_clock_ticks() reads the TSC, 0 when it reads CLOCK_MONOTONIC (set at import). */
extern int fp_clock_use_tsc;

/* Returns nanoseconds of the given POSIX clock. */
static inline fp_tick
fp_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (fp_tick)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Returns the TSC; only called where fp_clock_use_tsc is 1 (0 where there is no TSC). */
static inline fp_tick
fp_clock_tsc(void)
{
#if FP_HAVE_RDTSC
    return (fp_tick)__rdtsc();
#else
    return 0;
#endif
}

/* Returns the wall-clock tick counter (one read, no calibration on this path). */
static inline fp_tick
fp_clock_ticks(void)
{
#if FP_HAVE_RDTSC
    if (__builtin_expect(fp_clock_use_tsc, 1))
        return fp_clock_tsc();
#endif
    return fp_clock_ns(CLOCK_MONOTONIC);
}

/* Returns the seconds per tick of fp_clock_ticks(), calibrating once on first use (which may
 * wait up to 20 ms).  Never fails. */
double fp_clock_seconds_per_tick(void);

/* Returns "tsc" or "monotonic". */
const char *fp_clock_source(void);

#endif
