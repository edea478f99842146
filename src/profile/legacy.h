/* legacy.h - below Python 3.12: setting the profile or trace function of other threads,
 * shared by the call profiler and the line profiler. */
#ifndef FP_LEGACY_H
#define FP_LEGACY_H

#include "common.h"

#if !FP_PY312
/* Sets (func, obj) as the trace function (trace != 0) or the profile function (trace == 0)
 * of every thread of the interpreter but the calling one whose current one is (old, old_obj).
 * Returns 0, or -1 with an exception set (an audit hook refused). */
int fp_legacy_set_others(int trace, Py_tracefunc old, PyObject *old_obj, Py_tracefunc func,
                         PyObject *obj);
#endif

#endif
