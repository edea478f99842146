/* clock.c - detection and calibration of the tick clock, and its Python functions. */
#include "common.h"
#include "clock.h"

#include <stdlib.h>
#include <string.h>
#if FP_HAVE_RDTSC
#include <cpuid.h>
#endif

int fp_clock_use_tsc = 0;

static fp_tick fp_clock_tsc0, fp_clock_mono0; /* taken at import, the calibration's start */
static double fp_clock_spt = 1e-9;            /* seconds per tick once calibrated */
static int fp_clock_calibrated = 0;

/* Returns 1 when the processor reports an invariant TSC (CPUID 0x80000007 EDX bit 8), else 0;
 * FASTPROF_CLOCK=monotonic forces 0. */
static int
fp_clock_tsc_usable(void)
{
    const char *force = getenv("FASTPROF_CLOCK");
    if (force != NULL && strcmp(force, "monotonic") == 0)
        return 0;
#if FP_HAVE_RDTSC
    unsigned int a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1u;
#else
    return 0;
#endif
}

/* Reads the TSC and CLOCK_MONOTONIC as close together as it can (the read with the shortest
 * TSC bracket of a few tries) into *tsc and *mono. */
static void
fp_clock_pair(fp_tick *tsc, fp_tick *mono)
{
    fp_tick best = INT64_MAX;
    for (int i = 0; i < 5; i++) {
        fp_tick a = fp_clock_ticks();
        fp_tick m = fp_clock_ns(CLOCK_MONOTONIC);
        fp_tick b = fp_clock_ticks();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *mono = m;
        }
    }
}

/* See clock.h. */
double
fp_clock_seconds_per_tick(void)
{
    if (fp_clock_calibrated || !fp_clock_use_tsc)
        return fp_clock_use_tsc ? fp_clock_spt : 1e-9;
    fp_tick tsc1, mono1;
    fp_clock_pair(&tsc1, &mono1);
    if (mono1 - fp_clock_mono0 < 20000000) {
        struct timespec ts = {0, (long)(20000000 - (mono1 - fp_clock_mono0))};
        Py_BEGIN_ALLOW_THREADS nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS fp_clock_pair(&tsc1, &mono1);
    }
    if (tsc1 > fp_clock_tsc0)
        fp_clock_spt = (double)(mono1 - fp_clock_mono0) * 1e-9 / (double)(tsc1 - fp_clock_tsc0);
    fp_clock_calibrated = 1;
    return fp_clock_spt;
}

/* See clock.h. */
const char *
fp_clock_source(void)
{
    return fp_clock_use_tsc ? "tsc" : "monotonic";
}

/* _fastprof.ticks() -> int: the current tick count. */
static PyObject *
fp_py_ticks(FP_UNUSED PyObject *m, FP_UNUSED PyObject *unused)
{
    return PyLong_FromLongLong(fp_clock_ticks());
}

/* _fastprof.clock_info() -> (source, seconds_per_tick). */
static PyObject *
fp_py_clock_info(FP_UNUSED PyObject *m, FP_UNUSED PyObject *unused)
{
    double spt = fp_clock_seconds_per_tick();
    return Py_BuildValue("(sd)", fp_clock_source(), spt);
}

static PyMethodDef fp_clock_methods[] = {
    {"ticks", fp_py_ticks, METH_NOARGS, "ticks() -> int: the profilers' tick counter."},
    {"clock_info", fp_py_clock_info, METH_NOARGS,
     "clock_info() -> (source, seconds_per_tick): 'tsc' or 'monotonic' and its calibration."},
    {NULL, NULL, 0, NULL},
};

/* See common.h. */
int
fp_clock_exec(PyObject *m)
{
    static int detected = 0;
    if (!detected) {
        fp_clock_use_tsc = fp_clock_tsc_usable();
        if (fp_clock_use_tsc)
            fp_clock_pair(&fp_clock_tsc0, &fp_clock_mono0);
        detected = 1;
    }
    return PyModule_AddFunctions(m, fp_clock_methods);
}
