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

/* Calls fn(ts, arg) once on every thread state of the calling thread's interpreter, walking
 * the list again from its head after each call: fn may run Python code (the audit hooks that
 * setting another thread's hook runs) in which other threads run and end, freeing the thread
 * state a walk kept across the call would go on from.  Returns 0, or the first -1 of fn (an
 * exception set), or -1 with MemoryError. */
int fp_legacy_each_thread(int (*fn)(PyThreadState *ts, void *arg), void *arg);

/* Sets (func, obj) as the trace function (trace != 0) or the profile function of thread ts,
 * another thread than the calling one.  An exception Python leaves set on ts itself (3.11
 * refuses while a third thread is inside sys.settrace with an audit hook on, and may say so
 * on the thread it was setting, which then fails wherever it next checks) is taken off ts
 * and set on the calling thread.  Returns 0, or -1 with an exception set. */
int fp_legacy_set_on(PyThreadState *ts, int trace, Py_tracefunc func, PyObject *obj);

/* Sets (func, obj) as the calling thread's trace function (trace != 0) or profile function
 * from inside a hook, which never raises: an exception the interpreter leaves set (on 3.11 it
 * refuses while another thread is inside sys.settrace with an audit hook) is dropped, and
 * the one set before, if any, kept.  Returns nothing; a hook that failed to leave its thread
 * tries again at its next event. */
static inline void
fp_legacy_set_quiet(int trace, Py_tracefunc func, PyObject *obj)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    /* not PyEval_SetTrace/SetProfile: they print a refusal ("Exception ignored in
     * PyEval_SetTrace") where this drops it */
    PyThreadState *ts = PyThreadState_Get();
    if (trace)
        _PyEval_SetTrace(ts, func, obj);
    else
        _PyEval_SetProfile(ts, func, obj);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}
#endif

#endif
