/* floors.c - what the benchmarks measure fastprof's hooks against: hooks that do nothing, or
 * the least a timing profiler must.  Not used by the profilers.
 *
 * 3.12+: _EmptyCallback.  benchmarks/floors.py registers one for the events a profiler takes,
 * so that the interpreter's own cost of delivering those events shows apart from what
 * fastprof's callbacks do with them.  The callback is called the way fastprof's hooks are
 * (through its own vectorcall, without a builtin function's argument handling), so what lies
 * between it and a hook is the hook's work alone.
 *
 * Below 3.12: _empty_profile_hook and _stamp_profile_hook (benchmarks/overhead.py's floor
 * columns) set C profile functions that do nothing, or only name and time each call. */
#include "common.h"
#include "clock.h"

#include <structmember.h>
#if !FP_PY312
#include <frameobject.h>
#endif

typedef struct fp_empty {
    PyObject_HEAD vectorcallfunc vectorcall;
} fp_empty;

/* The callback's vectorcall: does nothing, for any event's arguments.  Returns None (never
 * fails). */
static PyObject *
fp_empty_call(FP_UNUSED PyObject *self, FP_UNUSED PyObject *const *args, FP_UNUSED size_t nargsf,
              FP_UNUSED PyObject *kwnames)
{
    Py_RETURN_NONE;
}

/* tp_new of _EmptyCallback: a callback object.  Returns it, or NULL with an exception set. */
static PyObject *
fp_empty_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "_EmptyCallback() takes no arguments");
        return NULL;
    }
    fp_empty *e = (fp_empty *)type->tp_alloc(type, 0);
    if (e == NULL)
        return NULL;
    e->vectorcall = fp_empty_call;
    return (PyObject *)e;
}

/* Frees the callback object and drops its reference to its heap type.  Returns nothing. */
static void
fp_empty_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef fp_empty_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(fp_empty, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot fp_empty_slots[] = {
    {Py_tp_doc, "_EmptyCallback(): a callable that does nothing, called as fastprof's hooks "
                "are (a benchmark floor)."},
    {Py_tp_new, fp_empty_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, fp_empty_dealloc},
    {Py_tp_members, fp_empty_members},
    {0, NULL},
};

static PyType_Spec fp_empty_spec = {
    .name = "fastprof._fastprof._EmptyCallback",
    .basicsize = sizeof(fp_empty),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = fp_empty_slots,
};

#if !FP_PY312

/* A profile function that does nothing: what the interpreter's profiling mode costs by
 * itself.  Returns 0. */
static int
fp_legacy_empty_hook(FP_UNUSED PyObject *obj, FP_UNUSED PyFrameObject *frame, FP_UNUSED int what,
                     FP_UNUSED PyObject *arg)
{
    return 0;
}

/* The stamp hook's state (plain data, used under the GIL): the open calls' keys and start
 * times, how many calls it timed and their total time in ticks. */
#define FP_STAMP_DEPTH 4096
static struct {
    int32_t depth;
    int64_t timed;
    fp_tick total;
    fp_tick t0[FP_STAMP_DEPTH];
    const void *key[FP_STAMP_DEPTH];
} fp_stamps;

/* A profile function that does the least a profiler timing each call must: it names the
 * function (the code object, or the C function) and reads the clock at every call, and
 * reads it again and adds up the elapsed time at every return.  No lookups, no records: the
 * floor of any timing profiler on this hook.  Returns 0. */
static int
fp_legacy_stamp_hook(FP_UNUSED PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    const void *key;
    if (what == PyTrace_CALL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        Py_SET_REFCNT(code, Py_REFCNT(code) - 1); /* the frame holds a reference too */
        key = code;
    } else if (what == PyTrace_C_CALL) {
        key = arg;
    } else if (what == PyTrace_RETURN || what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) {
        if (fp_stamps.depth > 0) { /* not a call begun before the hook was set */
            int32_t d = --fp_stamps.depth;
            if (d < FP_STAMP_DEPTH)
                fp_stamps.total += fp_clock_ticks() - fp_stamps.t0[d];
            fp_stamps.timed++;
        }
        return 0;
    } else {
        return 0;
    }
    int32_t d = fp_stamps.depth++;
    if (d < FP_STAMP_DEPTH) {
        fp_stamps.t0[d] = fp_clock_ticks();
        fp_stamps.key[d] = key;
    }
    return 0;
}

/* Sets (on true) or removes (on false) hook, a floor profile function of benchmarks/
 * overhead.py, in the calling thread; name is the caller's for messages.  Refuses to replace
 * another profile function or to remove one that is not hook.  Returns 0, or -1 with an
 * exception set. */
static int
fp_legacy_floor_set(Py_tracefunc hook, const char *name, PyObject *on)
{
    PyThreadState *ts = PyThreadState_Get();
    int want = PyObject_IsTrue(on);
    if (want < 0)
        return -1;
    if (ts->c_profilefunc != NULL && ts->c_profilefunc != hook) {
        PyErr_Format(PyExc_RuntimeError, "%s(): this thread has another profile function", name);
        return -1;
    }
    PyEval_SetProfile(want ? hook : NULL, NULL);
    return 0;
}

/* _empty_profile_hook(on): sets or removes the empty profile function, for benchmarks/
 * overhead.py's floor column.  Returns None, or NULL with an exception set. */
static PyObject *
fp_legacy_empty_hook_set(FP_UNUSED PyObject *m, PyObject *on)
{
    if (fp_legacy_floor_set(fp_legacy_empty_hook, "_empty_profile_hook", on) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _stamp_profile_hook(on): sets (starting from zero) or removes the stamp profile function.
 * Returns (calls timed, their total ticks) so far, or NULL with an exception set. */
static PyObject *
fp_legacy_stamp_hook_set(FP_UNUSED PyObject *m, PyObject *on)
{
    PyThreadState *ts = PyThreadState_Get();
    int fresh = ts->c_profilefunc != fp_legacy_stamp_hook;
    if (fp_legacy_floor_set(fp_legacy_stamp_hook, "_stamp_profile_hook", on) < 0)
        return NULL;
    if (fresh && ts->c_profilefunc == fp_legacy_stamp_hook) {
        fp_stamps.depth = 0;
        fp_stamps.timed = 0;
        fp_stamps.total = 0;
    }
    return Py_BuildValue("(LL)", (long long)fp_stamps.timed, (long long)fp_stamps.total);
}

static PyMethodDef fp_floor_legacy_methods[] = {
    {"_empty_profile_hook", fp_legacy_empty_hook_set, METH_O,
     "_empty_profile_hook(on): set or remove a profile function that does nothing (the floor "
     "of profiling below 3.12, for benchmarks)."},
    {"_stamp_profile_hook", fp_legacy_stamp_hook_set, METH_O,
     "_stamp_profile_hook(on): set or remove a profile function that only names each call and "
     "times it (the floor of a timing profiler below 3.12, for benchmarks); returns (calls "
     "timed, total ticks)."},
    {NULL, NULL, 0, NULL},
};

#endif /* !FP_PY312 */

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_floors_exec(PyObject *m)
{
    if (fp_add_type(m, &fp_state(m)->empty_callback_type, &fp_empty_spec, NULL) == NULL)
        return -1;
#if !FP_PY312
    if (PyModule_AddFunctions(m, fp_floor_legacy_methods) < 0)
        return -1;
#endif
    return 0;
}
