/* common.h - helpers shared by every C file of fastprof._fastprof.
 *
 * Symbols shared across files carry the fp_ prefix.  The module state is one struct with a
 * named, typed field for each object the module owns; each part (profile, line, kernels,
 * cuda) reads and writes its own fields alone. */
#ifndef FP_COMMON_H
#define FP_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The interpreter's version: FP_PY310 is 1 on 3.10 and later, and so on.  The one place that
 * compares PY_VERSION_HEX: everything else tests these. */
#if PY_VERSION_HEX >= 0x030A0000
#define FP_PY310 1
#else
#define FP_PY310 0
#endif
#if PY_VERSION_HEX >= 0x030B0000
#define FP_PY311 1
#else
#define FP_PY311 0
#endif
#if PY_VERSION_HEX >= 0x030C0000
#define FP_PY312 1
#else
#define FP_PY312 0
#endif
#if PY_VERSION_HEX >= 0x030D0000
#define FP_PY313 1
#else
#define FP_PY313 0
#endif

#if defined(__GNUC__)
#define FP_UNUSED __attribute__((unused))
#define FP_LIKELY(x) __builtin_expect(!!(x), 1)
#define FP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FP_INLINE static inline __attribute__((always_inline))
#define FP_NOINLINE __attribute__((noinline))
#else
#define FP_UNUSED
#define FP_LIKELY(x) (x)
#define FP_UNLIKELY(x) (x)
#define FP_INLINE static inline
#define FP_NOINLINE
#endif

#if FP_PY312
#define FP_CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define FP_CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define FP_REQUEST_CODE_EXTRA PyUnstable_Eval_RequestCodeExtraIndex
#else
#define FP_CODE_GET_EXTRA _PyCode_GetExtra
#define FP_CODE_SET_EXTRA _PyCode_SetExtra
#define FP_REQUEST_CODE_EXTRA _PyEval_RequestCodeExtraIndex
#endif

/* Py_NewRef / Py_XNewRef appeared in 3.10. */
#if !FP_PY310
static inline PyObject *
fp_newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
static inline PyObject *
fp_xnewref(PyObject *o)
{
    Py_XINCREF(o);
    return o;
}
#define Py_NewRef(o) fp_newref((PyObject *)(o))
#define Py_XNewRef(o) fp_xnewref((PyObject *)(o))
#endif

/* The running thread's state, without the NULL check of PyThreadState_Get() where the
 * interpreter offers that (the profilers' hooks always run holding the GIL). */
#if FP_PY313
#define FP_TSTATE() PyThreadState_GetUnchecked()
#else
#define FP_TSTATE() PyThreadState_Get()
#endif

/* A word that tells the running thread from every other live thread, as cheaply as the
 * platform allows (the thread pointer: one instruction on x86-64 and AArch64 with GCC 11+ or
 * Clang).  Only compared for identity, never dereferenced. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer) && (defined(__x86_64__) || defined(__aarch64__))
#define FP_THREAD_KEY() ((const void *)__builtin_thread_pointer())
#endif
#endif
#ifndef FP_THREAD_KEY
#define FP_THREAD_KEY() ((const void *)FP_TSTATE())
#endif

/* ---- the profilers' hooks: errors and memory ---------------------------------------------
 *
 * One convention for the call profiler (profile/profiler.c, tables.c, tree.c, the hooks) and
 * the line profiler (profile/line.c, line_hooks.c):
 *
 * Errors.  A hook never raises.  When one meets an error (memory, a label that cannot be
 * made, an injected timer that fails where the profiler does not forgive it) it records it
 * with fp_sticky_set in its profiler's `PyObject *error` field: the first exception is kept
 * (with its traceback), later ones are dropped, and no exception is left set.  The profiler
 * says whether recording stops or goes on after it.  disable() removes the hooks first, then
 * reports it once: a RuntimeError naming what failed, raised from the recorded exception
 * (its __cause__), made by fp_sticky_raise (C) or by fastprof.lines (the LineTracer's
 * _stop() returns the exception).  The field is a strong reference: traversed, cleared.
 *
 * Memory.  What the profilers allocate for themselves (tables, maps, stacks, thread records,
 * the shared tool) comes from PyMem_RawMalloc / PyMem_RawCalloc / PyMem_RawRealloc and goes
 * back with PyMem_RawFree: no GIL needed, seen by tracemalloc and checked by
 * PYTHONMALLOC=debug.  Never libc's malloc or PyMem_Malloc.  Hooks allocate only when a table
 * or a stack must grow, never on their common path. */

/* Records the current exception (a MemoryError when none is set) in *error unless an error is
 * recorded there already, and clears the exception indicator.  Returns nothing; never leaves
 * an exception set. */
void fp_sticky_set(PyObject **error);

/* Records type(what) in *error unless an error is recorded there already, raised from the
 * current exception when one is set (its __cause__), and clears the exception indicator.
 * Returns nothing; never leaves an exception set. */
void fp_sticky_set_what(PyObject **error, PyObject *type, const char *what);

/* When *error holds an error, raises RuntimeError(message) from it (its __cause__ and
 * context) and empties *error.  Returns 0 when there was none, -1 with the RuntimeError set. */
int fp_sticky_raise(PyObject **error, const char *message);

struct fp_mon_tool; /* profile/hooks_monitoring.c */

/* The module state: what the module owns, one field each (NULL until its part's exec sets
 * it).  module.c's traverse and clear list every field: a field added here is added there. */
typedef struct fp_module_state {
    /* the call profiler (profile/) */
    PyTypeObject *profiler_type; /* Profiler */
    PyTypeObject *session_type;  /* _Session (session.c) */
    PyTypeObject *guarded_type;  /* _Guarded (session.c) */
    PyTypeObject
        *guarded_call_type;  /* _GuardedCall, a decorated coroutine's awaitable (session.c) */
    PyTypeObject *hook_type; /* _MonitoringHook: 3.12+ callbacks (NULL below 3.12) */
    /* 3.12+: the sys.monitoring tool id that the call profilers share (hooks_monitoring.c);
     * owned, freed by fp_mon_tool_free; NULL below 3.12 */
    struct fp_mon_tool *mon_tool;
    PyTypeObject *empty_callback_type; /* _EmptyCallback, the benchmarks' floor (floors.c) */
    /* the line profiler (profile/line.c) */
    PyTypeObject *line_tracer_type; /* LineTracer */
    Py_ssize_t line_extra;          /* its code-object extra index in this interpreter */
    /* the CUDA part (cuda/cuda.c): the classes fastprof.cuda registers, NULL until then */
    PyObject *cuda_error;       /* CudaError */
    PyObject *cuda_unavailable; /* CudaUnavailableError */
} fp_module_state;

/* The module's definition (for PyType_GetModuleByDef). */
extern struct PyModuleDef fp_module_def;

/* Returns the state of module m (never NULL for fastprof._fastprof). */
static inline fp_module_state *
fp_state(PyObject *m)
{
    return (fp_module_state *)PyModule_GetState(m);
}

/* Creates a heap type from spec with the module as its module, adds it to m under its
 * short name and keeps a strong reference in *field (a field of m's state).
 * Returns a borrowed reference to the type, or NULL with an exception set. */
PyTypeObject *fp_add_type(PyObject *m, PyTypeObject **field, PyType_Spec *spec, PyObject *base);

/* Each part's exec function: registers its types and functions on m.
 * Returns 0, or -1 with an exception set. */
int fp_clock_exec(PyObject *m);
int fp_profile_exec(PyObject *m);
int fp_line_exec(PyObject *m);
int fp_kernels_exec(PyObject *m);
int fp_cuda_exec(PyObject *m);
int fp_floors_exec(PyObject *m);       /* the benchmarks' floor hooks (profile/floors.c) */
int fp_watchdog_exec(PyObject *m);     /* the SIGTERM watchdog of job children (exit_watchdog.c) */
int fp_exit_gate_exec(PyObject *m);    /* the os._exit of job children (exit_gate.c) */
int fp_marshal_exec(PyObject *m);      /* the reader of pstats files (util/marshal_reader.c) */
int fp_chrome_exec(PyObject *m);       /* a trace's span events as text (util/chrome_text.c) */
int fp_quiet_exec(PyObject *m);        /* readers run with hooks off (profile/quiet.c) */
int fp_tl_read_exec(PyObject *m);      /* a timeline's Span objects (profile/timeline_read.c) */
int fp_tree_fold_exec(PyObject *m);    /* the views' row folding (profile/tree_fold.c) */
int fp_tree_columns_exec(PyObject *m); /* the HTML report's rows (profile/tree_columns.c) */

/* Suspends the profile and trace hooks (sys.monitoring's events too) of thread state ts, as
 * CPython suspends them while a hook runs (profile/quiet.c).  Returns nothing. */
void fp_quiet_enter(PyThreadState *ts);
/* Resumes what fp_quiet_enter suspended.  Returns nothing. */
void fp_quiet_leave(PyThreadState *ts);

#if FP_PY312
/* Frees the call profilers' shared tool (hooks_monitoring.c; NULL does nothing), letting go
 * of the profilers still on it: module.c's clear calls it.  Returns nothing. */
void fp_mon_tool_free(struct fp_mon_tool *tool);
#endif

#endif
