/* hooks_legacy.c - the call profiler's hook on Python 3.9-3.11: a C profile function set with
 * PyEval_SetProfile in the enabling thread and, when threads=True, in every other thread: those
 * running already (each one that has no profile function of its own) and those started while
 * profiling (through threading.setprofile).  disable() removes it from every thread. */
#include "fp_profile.h"
#include "legacy.h"

#if !FP_PY312

#include <frameobject.h>

/* An event that found no thread record: when p is disabled, the hook was left behind in this
 * thread (one disable() could not reach), so it removes itself; p may die then.  Returns 0. */
static FP_NOINLINE int
fp_legacy_idle(fp_profiler *p)
{
    if (!p->enabled)
        fp_legacy_set_quiet(0, NULL, NULL);
    return 0;
}

/* Every event's general path: every lookup, growing what must grow.  code is the frame's code
 * (PyTrace_CALL), ml the builtin's method and arg the C function (C events).  Returns 0. */
static FP_NOINLINE int
fp_legacy_slow(fp_profiler *p, int what, PyFrameObject *frame, PyObject *code, PyMethodDef *ml,
               PyObject *arg)
{
    fp_thread *t = fp_thread_get(p);
    if (FP_UNLIKELY(t == NULL))
        return fp_legacy_idle(p); /* before the clock: a disabled p's timer is not called */
    fp_tick now = fp_now(p);
    int32_t fi;
    switch (what) {
    case PyTrace_CALL:
        if ((fi = fp_func_for_code(p, code)) >= 0)
            fp_enter(p, t, fi, now, frame);
        break;
    case PyTrace_RETURN: {
        PyCodeObject *c = PyFrame_GetCode(frame);
        fp_leave(p, t, frame, c, now);
        Py_DECREF(c);
        break;
    }
    case PyTrace_C_CALL: /* the session's own __exit__ is never added: it always comes here */
        if (!fp_session_is_own(ml) && (fi = fp_func_for_builtin(p, ml, arg, NULL)) >= 0)
            fp_enter(p, t, fi, now, ml);
        break;
    default: /* PyTrace_C_RETURN, PyTrace_C_EXCEPTION */
        fp_leave(p, t, ml, ml, now);
        break;
    }
    return 0;
}

/* The fast paths below come in two copies, one per wall clock (tsc: 1 for the TSC, 0 for
 * CLOCK_MONOTONIC on a machine without an invariant TSC; a constant in each copy), so that
 * the TSC copy makes no call but PyFrame_GetCode; and in two more, with and without the
 * timeline (tl, a constant too), so that a profiler without one runs no timeline code.
 * enable() sets the copy of its clock and timeline. */

/* PyTrace_CALL: enters the frame's function.  The common case makes no call but
 * PyFrame_GetCode and the clock (so it saves few registers); anything else goes to the
 * general path.  Returns 0. */
FP_INLINE int
fp_legacy_call(fp_profiler *p, PyFrameObject *frame, int tsc)
{
    PyCodeObject *code = PyFrame_GetCode(frame);
    /* The frame holds a reference too: this never reaches zero (no dealloc call here). */
    Py_SET_REFCNT(code, Py_REFCNT(code) - 1);
    if (fp_enter_cached(p, fp_func_cached(p, code), frame, tsc))
        return 0;
    return fp_legacy_slow(p, PyTrace_CALL, frame, (PyObject *)code, NULL, NULL);
}

/* PyTrace_RETURN: leaves the frame.  The common case, the frame entered last (matched by its
 * frame object, no lookup), makes no call but the clock.  Returns 0. */
FP_INLINE int
fp_legacy_return(fp_profiler *p, PyFrameObject *frame, int tsc, int tl)
{
    if (fp_leave_cached(p, frame, tsc, tl))
        return 0;
    return fp_legacy_slow(p, PyTrace_RETURN, frame, NULL, NULL, NULL);
}

/* Returns the PyMethodDef of the C function arg of a C event when builtins are profiled, else
 * NULL.  (The interpreter reports C functions and bound C methods, made for the event from a
 * method descriptor: exact types, checked first.) */
FP_INLINE PyMethodDef *
fp_legacy_cfunc(fp_profiler *p, PyObject *arg)
{
    if (!p->builtins || arg == NULL)
        return NULL;
    if (FP_LIKELY(Py_IS_TYPE(arg, &PyCFunction_Type) || Py_IS_TYPE(arg, &PyCMethod_Type) ||
                  PyCFunction_Check(arg)))
        return ((PyCFunctionObject *)arg)->m_ml;
    return NULL;
}

/* PyTrace_C_CALL: enters a builtin; the common case makes no call but the clock.  Returns 0. */
FP_INLINE int
fp_legacy_c_call(fp_profiler *p, PyObject *arg, int tsc)
{
    PyMethodDef *ml = fp_legacy_cfunc(p, arg);
    if (ml == NULL)
        return 0;
    if (fp_enter_cached(p, fp_map_get(&p->builtin_map, (uint64_t)(uintptr_t)ml), ml, tsc))
        return 0;
    return fp_legacy_slow(p, PyTrace_C_CALL, NULL, NULL, ml, arg);
}

/* PyTrace_C_RETURN, PyTrace_C_EXCEPTION: leaves a builtin; the common case makes no call but
 * the clock.  Returns 0. */
FP_INLINE int
fp_legacy_c_return(fp_profiler *p, PyObject *arg, int tsc, int tl)
{
    PyMethodDef *ml = fp_legacy_cfunc(p, arg);
    if (ml == NULL)
        return 0;
    if (fp_leave_cached(p, ml, tsc, tl))
        return 0;
    return fp_legacy_slow(p, PyTrace_C_RETURN, NULL, NULL, ml, NULL);
}

/* Defines one copy of the profile function for the wall clock tsc and the timeline tl (see
 * above), named fp_legacy_hook_<sfx>: one out-of-line function per event, each keeping to the
 * registers it needs, behind a dispatcher that returns 0 always (a hook never raises). */
#define FP_LEGACY_HOOK_COPY(sfx, tsc, tl)                                                          \
    static FP_NOINLINE int fp_legacy_call_##sfx(fp_profiler *p, PyFrameObject *frame)              \
    {                                                                                              \
        return fp_legacy_call(p, frame, tsc);                                                      \
    }                                                                                              \
    static FP_NOINLINE int fp_legacy_return_##sfx(fp_profiler *p, PyFrameObject *frame)            \
    {                                                                                              \
        return fp_legacy_return(p, frame, tsc, tl);                                                \
    }                                                                                              \
    static FP_NOINLINE int fp_legacy_c_call_##sfx(fp_profiler *p, PyObject *arg)                   \
    {                                                                                              \
        return fp_legacy_c_call(p, arg, tsc);                                                      \
    }                                                                                              \
    static FP_NOINLINE int fp_legacy_c_return_##sfx(fp_profiler *p, PyObject *arg)                 \
    {                                                                                              \
        return fp_legacy_c_return(p, arg, tsc, tl);                                                \
    }                                                                                              \
    static int fp_legacy_hook_##sfx(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)  \
    {                                                                                              \
        fp_profiler *p = (fp_profiler *)obj;                                                       \
        if (FP_LIKELY(what == PyTrace_CALL))                                                       \
            return fp_legacy_call_##sfx(p, frame);                                                 \
        if (FP_LIKELY(what == PyTrace_RETURN))                                                     \
            return fp_legacy_return_##sfx(p, frame);                                               \
        if (what == PyTrace_C_CALL)                                                                \
            return fp_legacy_c_call_##sfx(p, arg);                                                 \
        if (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION)                               \
            return fp_legacy_c_return_##sfx(p, arg);                                               \
        return 0;                                                                                  \
    }

FP_LEGACY_HOOK_COPY(tsc, 1, 0)
FP_LEGACY_HOOK_COPY(mono, 0, 0)
FP_LEGACY_HOOK_COPY(tsc_tl, 1, 1)
FP_LEGACY_HOOK_COPY(mono_tl, 0, 1)

/* Returns p's profile function: the copy for its wall clock and its timeline (both fixed
 * while p is enabled). */
static Py_tracefunc
fp_legacy_hook_of(const fp_profiler *p)
{
    if (p->tl != NULL)
        return p->tsc ? fp_legacy_hook_tsc_tl : fp_legacy_hook_mono_tl;
    return p->tsc ? fp_legacy_hook_tsc : fp_legacy_hook_mono;
}

/* Returns 1 when f is a copy of the call profiler's profile function, else 0. */
static int
fp_legacy_is_hook(Py_tracefunc f)
{
    return f == fp_legacy_hook_tsc || f == fp_legacy_hook_mono || f == fp_legacy_hook_tsc_tl ||
           f == fp_legacy_hook_mono_tl;
}

/* Returns 1 when f is the function fastprof gives threading.setprofile, else 0. */
static int fp_legacy_is_thread_start(PyObject *f);

/* The function given to threading.setprofile, bound to a weak reference to the profiler (the
 * threading module must not keep a dropped profiler alive): in a new thread, replaces itself
 * with the C hook and accounts the call event it was called for; when the profiler is gone or
 * disabled, removes itself.  Returns None. */
static PyObject *
fp_legacy_thread_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj = PyWeakref_GetObject(self);
    if (obj == NULL) {
        PyErr_Clear();
        obj = Py_None;
    }
    if (obj == Py_None || !((fp_profiler *)obj)->enabled) {
        PyEval_SetProfile(NULL, NULL);
        Py_RETURN_NONE;
    }
    Py_INCREF(obj);
    Py_tracefunc hook = fp_legacy_hook_of((fp_profiler *)obj);
    PyEval_SetProfile(hook, obj);
    if (nargs >= 2 && PyFrame_Check(args[0]) && PyUnicode_Check(args[1]) &&
        PyUnicode_CompareWithASCIIString(args[1], "call") == 0)
        hook(obj, (PyFrameObject *)args[0], PyTrace_CALL, Py_None);
    Py_DECREF(obj);
    Py_RETURN_NONE;
}

static PyMethodDef fp_legacy_thread_def = {"_fastprof_thread_start",
                                           (PyCFunction)(void (*)(void))fp_legacy_thread_start,
                                           METH_FASTCALL, NULL};

/* See its declaration above. */
static int
fp_legacy_is_thread_start(PyObject *f)
{
    return f != NULL && PyCFunction_Check(f) &&
           ((PyCFunctionObject *)f)->m_ml == &fp_legacy_thread_def;
}

/* Calls threading.setprofile(func) of the module threading.  Returns 0, or -1 with an
 * exception set. */
static int
fp_legacy_threading_setprofile(PyObject *threading, PyObject *func)
{
    PyObject *r = PyObject_CallMethod(threading, "setprofile", "O", func);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Returns a new reference to the threading.setprofile hook of the module threading (None
 * when there is none), or NULL with an exception set. */
static PyObject *
fp_legacy_threading_hook(PyObject *threading)
{
#if FP_PY310
    return PyObject_CallMethod(threading, "getprofile", NULL);
#else
    return PyObject_GetAttrString(threading, "_profile_hook");
#endif
}

/* Sets the threading.setprofile hook that makes threads started while p is enabled profiled
 * too, keeping the user's hook found there to put back at disable().  Returns 0, or -1 with
 * an exception set (nothing changed). */
static int
fp_legacy_threading_install(fp_profiler *p)
{
    PyObject *threading = NULL, *prev = NULL, *ref = NULL, *start = NULL;
    int rc = -1;
    threading = PyImport_ImportModule("threading");
    if (threading == NULL)
        goto error;
    prev = fp_legacy_threading_hook(threading);
    if (prev == NULL)
        goto error;
    ref = PyWeakref_NewRef((PyObject *)p, NULL);
    if (ref == NULL)
        goto error;
    start = PyCFunction_NewEx(&fp_legacy_thread_def, ref, NULL);
    if (start == NULL || fp_legacy_threading_setprofile(threading, start) < 0)
        goto error;
    /* A fastprof hook left there (its profiler gone) is not the user's. */
    if (prev == Py_None || fp_legacy_is_thread_start(prev))
        Py_CLEAR(prev);
    Py_XSETREF(p->thread_prev, prev);
    prev = NULL;
    p->thread_hook_set = 1;
    rc = 0;
error:
    Py_XDECREF(threading);
    Py_XDECREF(prev);
    Py_XDECREF(ref);
    Py_XDECREF(start);
    return rc;
}

/* Puts prev back as threading's profile hook when the hook there, cur, is p's own (or one
 * whose profiler died).  Returns 0, or -1 with an exception set. */
static int
fp_legacy_threading_put_back(fp_profiler *p, PyObject *threading, PyObject *cur, PyObject *prev)
{
    if (!fp_legacy_is_thread_start(cur))
        return 0;
    PyObject *target = PyWeakref_GetObject(((PyCFunctionObject *)cur)->m_self);
    if (target == NULL)
        return -1;
    /* p's own hook, or one whose profiler died (weak references are cleared first) */
    if (target == (PyObject *)p || target == Py_None)
        return fp_legacy_threading_setprofile(threading, prev != NULL ? prev : Py_None);
    return 0;
}

/* Puts back the threading.setprofile hook that p's enable() found, when the hook there is
 * still fastprof's (another tool's hook set since stays).  Does nothing when the threading
 * module is gone (the interpreter is shutting down).  A KeyboardInterrupt (any exception
 * that is no Exception) raised by a signal handler while threading's hook was read is kept:
 * the hook is read again and put back, then that exception is set.  Returns 0, or -1 with an
 * exception set. */
static int
fp_legacy_threading_restore(fp_profiler *p)
{
    PyObject *name = NULL, *threading = NULL, *cur = NULL, *prev = p->thread_prev;
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    int rc = -1;
    p->thread_prev = NULL;
    p->thread_hook_set = 0;
    name = PyUnicode_FromString("threading");
    if (name == NULL)
        goto error;
    threading = PyImport_GetModule(name); /* no import: at shutdown it may be gone */
    if (threading == NULL || !PyModule_Check(threading)) {
        PyErr_Clear();
        rc = 0;
        goto error;
    }
    cur = fp_legacy_threading_hook(threading);
    if (cur == NULL && !PyErr_ExceptionMatches(PyExc_Exception)) {
        /* threading.getprofile() is Python code: a signal handler ran inside it */
        PyErr_Fetch(&et, &ev, &etb);
        cur = fp_legacy_threading_hook(threading);
    }
    if (cur == NULL) { /* a module torn down at shutdown */
        PyErr_Clear();
        rc = 0;
        goto error;
    }
    if (fp_legacy_threading_put_back(p, threading, cur, prev) < 0)
        goto error;
    rc = 0;
error:
    if (et != NULL) { /* the interrupt is what the caller sees, whatever else failed */
        PyErr_Clear();
        PyErr_Restore(et, ev, etb);
        rc = -1;
    }
    Py_XDECREF(name);
    Py_XDECREF(threading);
    Py_XDECREF(cur);
    Py_XDECREF(prev);
    return rc;
}

/* See legacy.h. */
int
fp_legacy_set_on(PyThreadState *ts, int trace, Py_tracefunc func, PyObject *obj)
{
    int had = ts->curexc_type != NULL;
    int rc = trace ? _PyEval_SetTrace(ts, func, obj) : _PyEval_SetProfile(ts, func, obj);
    if (!had && ts->curexc_type != NULL) {
        PyObject *type = ts->curexc_type, *value = ts->curexc_value, *tb = ts->curexc_traceback;
        ts->curexc_type = ts->curexc_value = ts->curexc_traceback = NULL;
        if (PyErr_Occurred()) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        } else {
            PyErr_Restore(type, value, tb);
        }
        rc = -1;
    }
    if (rc < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "could not set the %s function of thread %lu",
                     trace ? "trace" : "profile", ts->thread_id);
    return rc;
}

/* See legacy.h. */
int
fp_legacy_each_thread(int (*fn)(PyThreadState *ts, void *arg), void *arg)
{
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    uint64_t *seen = NULL;
    Py_ssize_t nseen = 0, cap = 0;
    int rc = 0;
    for (;;) {
        PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
        for (; ts != NULL; ts = PyThreadState_Next(ts)) {
            uint64_t id = PyThreadState_GetID(ts);
            Py_ssize_t i = 0;
            while (i < nseen && seen[i] != id)
                i++;
            if (i == nseen)
                break;
        }
        if (ts == NULL)
            break;
        if (nseen == cap) {
            Py_ssize_t ncap = cap ? 2 * cap : 16;
            uint64_t *grown = PyMem_RawRealloc(seen, (size_t)ncap * sizeof(*grown));
            if (grown == NULL) {
                PyErr_NoMemory();
                rc = -1;
                break;
            }
            seen = grown;
            cap = ncap;
        }
        seen[nseen++] = PyThreadState_GetID(ts);
        if (fn(ts, arg) < 0) {
            rc = -1;
            break;
        }
    }
    PyMem_RawFree(seen);
    return rc;
}

/* What fp_legacy_set_others sets, and on which threads. */
typedef struct fp_set_others_args {
    PyThreadState *self;
    int trace;
    Py_tracefunc old, func;
    PyObject *old_obj, *obj;
} fp_set_others_args;

/* fp_legacy_each_thread's step of fp_legacy_set_others.  Returns 0, or -1 with an
 * exception set. */
static int
fp_set_others_one(PyThreadState *ts, void *arg)
{
    fp_set_others_args *a = arg;
    if (ts == a->self)
        return 0;
    if (a->trace ? (ts->c_tracefunc != a->old || ts->c_traceobj != a->old_obj)
                 : (ts->c_profilefunc != a->old || ts->c_profileobj != a->old_obj))
        return 0;
    return fp_legacy_set_on(ts, a->trace, a->func, a->obj);
}

/* See legacy.h. */
int
fp_legacy_set_others(int trace, Py_tracefunc old, PyObject *old_obj, Py_tracefunc func,
                     PyObject *obj)
{
    fp_set_others_args a = {PyThreadState_Get(), trace, old, func, old_obj, obj};
    return fp_legacy_each_thread(fp_set_others_one, &a);
}

/* Warns (RuntimeWarning) with msg, a new reference to a str (NULL: an error already set,
 * returned as one), with thread state ts's hooks suspended: the profiler that holds the hook
 * must not record the warnings module printing it.  Returns 1 once warned, -1 with an
 * exception set (the warning turned into an error, say). */
static int
fp_legacy_warn(PyThreadState *ts, PyObject *msg)
{
    if (msg == NULL)
        return -1;
    const char *text = PyUnicode_AsUTF8(msg);
    int rc = -1;
    if (text != NULL) {
        fp_quiet_enter(ts);
        rc = PyErr_WarnEx(PyExc_RuntimeWarning, text, 1);
        fp_quiet_leave(ts);
    }
    Py_DECREF(msg);
    return rc < 0 ? -1 : 1;
}

/* See fp_profile.h. */
int
fp_hooks_check_free(fp_profiler *p, int nests)
{
    PyThreadState *ts = PyThreadState_Get();
    if (fp_legacy_is_hook(ts->c_profilefunc)) {
        if (ts->c_profileobj == (PyObject *)p)
            return 0;
        if (nests == 2) /* one profile hook per thread: the session holding it goes on alone */
            return fp_legacy_warn(
                ts, PyUnicode_FromString(
                        "fastprof: profile sessions nest on Python 3.12+ only; below, this inner "
                        "session records nothing while an outer fastprof profiler holds this "
                        "thread's profile hook"));
        PyErr_SetString(PyExc_ValueError,
                        "Another profiling tool is already active: another fastprof profiler "
                        "holds this thread's profile hook (enabled here, or in another thread "
                        "with threads=True); below Python 3.12 a thread has one: disable it "
                        "first, or give both threads=False in threads of their own");
        return -1;
    }
    if (ts->c_profilefunc != NULL && nests == 2) {
        /* another tool's hook (cProfile, IPython's %prun): the session's call goes on, as it
         * goes on under an outer fastprof profiler, where raising would break it */
        PyObject *holder = ts->c_profileobj;
        return fp_legacy_warn(
            ts, holder != NULL
                    ? PyUnicode_FromFormat("fastprof: this profile session records nothing: the "
                                           "profile hook of this thread is held by %R (one per "
                                           "thread below Python 3.12)",
                                           holder)
                    : PyUnicode_FromString("fastprof: this profile session records nothing: the "
                                           "profile hook of this thread is held by a C profile "
                                           "function (one per thread below Python 3.12)"));
    }
    if (ts->c_profilefunc != NULL && ts->c_profileobj == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "Another profiling tool is already active: the profile hook of this "
                        "thread is held by a C profile function with "
                        "no object; disable that profiler first (sys.setprofile(None))");
        return -1;
    }
    if (ts->c_profilefunc != NULL) {
        PyErr_Format(PyExc_ValueError,
                     "Another profiling tool is already active: the profile hook of this "
                     "thread is held by %R; disable that profiler "
                     "first (for example sys.setprofile(None) or its disable())",
                     ts->c_profileobj);
        return -1;
    }
    return 0;
}

/* See fp_profile.h. */
int
fp_hooks_install(fp_profiler *p, FP_UNUSED PyTypeObject *hook_type)
{
    PyThreadState *ts = PyThreadState_Get();
    if (fp_legacy_is_hook(ts->c_profilefunc) && ts->c_profileobj == (PyObject *)p)
        return 0;
    if (fp_hooks_check_free(p, 0) < 0)
        return -1;
    p->taken_warned = 0;
    if (p->threads) {
        if (fp_legacy_threading_install(p) < 0)
            return -1;
        if (fp_legacy_set_others(0, NULL, NULL, fp_legacy_hook_of(p), (PyObject *)p) < 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            fp_hooks_remove(p);
            PyErr_Restore(type, value, tb);
            return -1;
        }
    }
    PyEval_SetProfile(fp_legacy_hook_of(p), (PyObject *)p);
    return 0;
}

/* See fp_profile.h. */
int
fp_hooks_remove(fp_profiler *p)
{
    int rc = 0;
    PyThreadState *ts = PyThreadState_Get();
    /* This thread's hook first, so the calls below are not profiled. */
    Py_tracefunc hook = fp_legacy_hook_of(p); /* p's clock and timeline are fixed while enabled */
    if (ts->c_profilefunc == hook && ts->c_profileobj == (PyObject *)p)
        PyEval_SetProfile(NULL, NULL);
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    if (p->thread_hook_set && fp_legacy_threading_restore(p) < 0) {
        rc = -1;
        PyErr_Fetch(&et, &ev, &etb); /* set aside: the other threads' hooks go all the same */
    }
    /* Every other thread still holding it.  (One that is missed removes it at its next
     * event, finding p disabled.) */
    if (fp_legacy_set_others(0, hook, (PyObject *)p, NULL, NULL) < 0)
        rc = -1;
    if (et != NULL) { /* the first error is the one reported */
        PyErr_Clear();
        PyErr_Restore(et, ev, etb);
    }
    return rc;
}

/* Returns 1 when p profiles thread ts (it has a record of it, or it is the enabling thread
 * and the calling one), else 0. */
static int
fp_legacy_profiles(const fp_profiler *p, PyThreadState *ts, PyThreadState *self)
{
    if (ts == self && ts == p->owner && PyThreadState_GetID(ts) == p->owner_tsid)
        return 1;
    return fp_thread_find(p, ts) != NULL;
}

/* See fp_profile.h. */
int
fp_hooks_check(fp_profiler *p)
{
    if (!p->enabled || p->taken_warned)
        return 0;
    Py_tracefunc hook = fp_legacy_hook_of(p);
    PyThreadState *self = PyThreadState_Get();
    PyInterpreterState *interp = PyThreadState_GetInterpreter(self);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts != NULL;
         ts = PyThreadState_Next(ts)) {
        if ((ts->c_profilefunc == hook && ts->c_profileobj == (PyObject *)p) ||
            !fp_legacy_profiles(p, ts, self))
            continue;
        p->taken_warned = 1;
        if (ts->c_profilefunc == NULL)
            return PyErr_WarnFormat(
                PyExc_RuntimeWarning, 1,
                "fastprof: the profile hook of thread %lu was removed while profiling "
                "(sys.setprofile(None), or another profiler's disable()); nothing was recorded "
                "there from then on, the stats up to then are kept",
                ts->thread_id);
        if (ts->c_profileobj == NULL)
            return PyErr_WarnFormat(
                PyExc_RuntimeWarning, 1,
                "fastprof: the profile hook of thread %lu was taken by a C profile function "
                "while profiling; nothing was recorded there from then on, the stats up to "
                "then are kept",
                ts->thread_id);
        return PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                "fastprof: the profile hook of thread %lu was taken by %R "
                                "(another profiler, a debugger or sys.setprofile()) while "
                                "profiling; nothing was recorded there from then on, the "
                                "stats up to then are kept",
                                ts->thread_id, ts->c_profileobj);
    }
    return 0;
}

#endif /* !FP_PY312 */
