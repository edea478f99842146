/* hooks_monitoring.c - the call profiler's hooks on Python 3.12+: sys.monitoring callbacks
 * written in C (METH_FASTCALL).  PY_START/PY_RESUME/PY_THROW enter a frame, PY_RETURN/PY_YIELD/
 * PY_UNWIND leave it, CALL/C_RETURN/C_RAISE account builtins (registered only when builtins
 * are on).  The tool id is the profiler's (2) when free, else another free one, and is always
 * given back. */
#include "fp_profile.h"

#if FP_PY312

#include <structmember.h>

/* A callback given to sys.monitoring: a small object called through vectorcall, so an event
 * reaches the profiler without the argument handling of a builtin function. */
typedef struct fp_hook {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    fp_profiler *prof; /* strong */
} fp_hook;

#define FP_HOOK_PROLOGUE                                                                       \
    fp_profiler *p = ((fp_hook *)self)->prof;                                                  \
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);                                             \
    (void)kwnames

enum { FP_MON_ENTER, FP_MON_LEAVE, FP_MON_C_ENTER, FP_MON_C_LEAVE };

/* Every callback's general path (what: FP_MON_*): every lookup, growing what must grow.  code
 * is the code object (Python events), ml the builtin's method, callable and self_arg its
 * callable and first argument (C events).  Returns None. */
static FP_NOINLINE PyObject *
fp_mon_slow(fp_profiler *p, int what, PyObject *code, PyMethodDef *ml, PyObject *callable,
            PyObject *self_arg)
{
    fp_tick now = fp_now(p);
    fp_thread *t = fp_thread_get(p);
    if (FP_UNLIKELY(t == NULL))
        Py_RETURN_NONE;
    int32_t fi;
    switch (what) {
    case FP_MON_ENTER:
        if ((fi = fp_func_for_code(p, code)) >= 0)
            fp_enter(p, t, fi, now, code);
        break;
    case FP_MON_LEAVE:
        fp_leave(p, t, code, code, now);
        break;
    case FP_MON_C_ENTER:
        if ((fi = fp_func_for_builtin(p, ml, callable, self_arg)) >= 0)
            fp_enter(p, t, fi, now, ml);
        break;
    default: /* FP_MON_C_LEAVE */
        fp_leave(p, t, ml, ml, now);
        break;
    }
    Py_RETURN_NONE;
}

/* The callbacks below come in two copies, one per wall clock (tsc: 1 for the TSC, 0 for
 * CLOCK_MONOTONIC on a machine without an invariant TSC; a constant in each copy), so that
 * the TSC copy's common cases make no call.  enable() registers the copy of its clock. */

/* PY_START, PY_RESUME, PY_THROW (code, offset[, exc]); the common case makes no call but the
 * clock.  Returns None. */
FP_INLINE PyObject *
fp_mon_start(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames, int tsc)
{
    FP_HOOK_PROLOGUE;
    if (FP_UNLIKELY(nargs < 1))
        Py_RETURN_NONE;
    if (fp_enter_cached(p, fp_func_cached(p, args[0]), args[0], tsc))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_ENTER, args[0], NULL, NULL, NULL);
}

/* PY_RETURN, PY_YIELD, PY_UNWIND (code, offset, value); the common case makes no call but
 * the clock.  Returns None. */
FP_INLINE PyObject *
fp_mon_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames, int tsc)
{
    FP_HOOK_PROLOGUE;
    if (FP_UNLIKELY(nargs < 1))
        Py_RETURN_NONE;
    if (fp_leave_cached(p, args[0], tsc))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_LEAVE, args[0], NULL, NULL, NULL);
}

/* Returns the PyMethodDef of a C function being called, or NULL when the callable is not one
 * (a Python function, a class, ...) or is an unbound method descriptor called without self. */
FP_INLINE PyMethodDef *
fp_mon_cfunc(fp_profiler *p, PyObject *callable, PyObject *self_arg)
{
    PyTypeObject *type = Py_TYPE(callable);
    /* exact types first: PyCFunction_Check walks the MRO for every other callable */
    if (type == &PyCFunction_Type || type == &PyCMethod_Type)
        return ((PyCFunctionObject *)callable)->m_ml;
    if (type == &PyMethodDescr_Type)
        return self_arg != p->missing ? ((PyMethodDescrObject *)callable)->d_method : NULL;
    if (type == &PyFunction_Type || type == &PyMethod_Type)
        return NULL;
    if (PyCFunction_Check(callable))
        return ((PyCFunctionObject *)callable)->m_ml;
    return NULL;
}

/* CALL (code, offset, callable, arg0): enters a builtin.  Returns None, or DISABLE for a call
 * site whose callee is not a C function (a Python function, a class...) unless strict: such a
 * site then costs nothing more, at the price of missing a builtin called there later. */
FP_INLINE PyObject *
fp_mon_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames, int tsc)
{
    FP_HOOK_PROLOGUE;
    if (FP_UNLIKELY(nargs < 4))
        Py_RETURN_NONE;
    PyMethodDef *ml = fp_mon_cfunc(p, args[2], args[3]);
    if (ml == NULL) {
        /* PY_START accounts a Python callee */
        if (!p->strict && p->disable != NULL)
            return Py_NewRef(p->disable);
        Py_RETURN_NONE;
    }
    if (fp_enter_cached(p, fp_map_get(&p->builtin_map, (uint64_t)(uintptr_t)ml), ml, tsc))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_C_ENTER, NULL, ml, args[2],
                       args[3] == p->missing ? NULL : args[3]);
}

/* C_RETURN, C_RAISE (code, offset, callable, arg0): leaves a builtin.  Returns None. */
FP_INLINE PyObject *
fp_mon_creturn(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames,
               int tsc)
{
    FP_HOOK_PROLOGUE;
    if (FP_UNLIKELY(nargs < 4))
        Py_RETURN_NONE;
    PyMethodDef *ml = fp_mon_cfunc(p, args[2], args[3]);
    if (ml == NULL)
        Py_RETURN_NONE;
    if (fp_leave_cached(p, ml, tsc))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_C_LEAVE, NULL, ml, NULL, NULL);
}

/* Defines the copy of callback name for the wall clock tsc, as name_<sfx>. */
#define FP_MON_COPY(name, sfx, tsc)                                                            \
    static PyObject *name##_##sfx(PyObject *self, PyObject *const *args, size_t nargsf,        \
                                  PyObject *kwnames)                                           \
    {                                                                                          \
        return name(self, args, nargsf, kwnames, tsc);                                         \
    }
FP_MON_COPY(fp_mon_start, tsc, 1)
FP_MON_COPY(fp_mon_return, tsc, 1)
FP_MON_COPY(fp_mon_call, tsc, 1)
FP_MON_COPY(fp_mon_creturn, tsc, 1)
FP_MON_COPY(fp_mon_start, mono, 0)
FP_MON_COPY(fp_mon_return, mono, 0)
FP_MON_COPY(fp_mon_call, mono, 0)
FP_MON_COPY(fp_mon_creturn, mono, 0)

/* The callbacks of each copy, indexed [tsc][callback]. */
static const vectorcallfunc fp_mon_funcs[2][FP_MON_NCALLBACKS] = {
    {fp_mon_start_mono, fp_mon_return_mono, fp_mon_call_mono, fp_mon_creturn_mono},
    {fp_mon_start_tsc, fp_mon_return_tsc, fp_mon_call_tsc, fp_mon_creturn_tsc},
};

static void
fp_hook_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(((fp_hook *)self)->prof);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef fp_hook_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(fp_hook, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot fp_hook_slots[] = {
    {Py_tp_doc, "A fastprof sys.monitoring callback."},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, fp_hook_dealloc},
    {Py_tp_members, fp_hook_members},
    {0, NULL},
};

PyType_Spec fp_hook_spec = {
    .name = "fastprof._fastprof._MonitoringHook",
    .basicsize = sizeof(fp_hook),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = fp_hook_slots,
};

/* Returns a new hook calling func for p, or NULL with an exception set. */
static PyObject *
fp_hook_new(PyTypeObject *type, fp_profiler *p, vectorcallfunc func)
{
    fp_hook *h = PyObject_New(fp_hook, type);
    if (h == NULL)
        return NULL;
    h->vectorcall = func;
    h->prof = (fp_profiler *)Py_NewRef(p);
    return (PyObject *)h;
}

/* Which callback each event gets, and whether it belongs to builtins. */
static const struct {
    const char *event;
    int callback;
    int builtin;
} fp_mon_events[] = {
    {"PY_START", 0, 0},  {"PY_RESUME", 0, 0}, {"PY_THROW", 0, 0},   {"PY_RETURN", 1, 0},
    {"PY_YIELD", 1, 0},  {"PY_UNWIND", 1, 0}, {"CALL", 2, 1},       {"C_RETURN", 3, 1},
    {"C_RAISE", 3, 1},
};
#define FP_MON_NEVENTS ((int)(sizeof(fp_mon_events) / sizeof(fp_mon_events[0])))

/* Returns a new reference to sys.monitoring, or NULL with an exception set. */
static PyObject *
fp_mon_module(void)
{
    PyObject *sys = PyImport_ImportModule("sys");
    if (sys == NULL)
        return NULL;
    PyObject *mon = PyObject_GetAttrString(sys, "monitoring");
    Py_DECREF(sys);
    return mon;
}

/* Returns the value of sys.monitoring.events.<name>, or -1 with an exception set. */
static long
fp_mon_event_bit(PyObject *mon, const char *name)
{
    PyObject *events = PyObject_GetAttrString(mon, "events");
    if (events == NULL)
        return -1;
    PyObject *v = PyObject_GetAttrString(events, name);
    Py_DECREF(events);
    if (v == NULL)
        return -1;
    long bit = PyLong_AsLong(v);
    Py_DECREF(v);
    return bit;
}

/* Claims a free tool id, preferring the profiler's.  Returns it, or -1 with a RuntimeError
 * that names the tools holding every id. */
static int
fp_mon_claim(PyObject *mon)
{
    static const int order[] = {2, 3, 4, 0, 1, 5};
    for (int i = 0; i < 6; i++) {
        PyObject *holder = PyObject_CallMethod(mon, "get_tool", "i", order[i]);
        if (holder == NULL)
            return -1;
        int free_id = holder == Py_None;
        Py_DECREF(holder);
        if (!free_id)
            continue;
        PyObject *r = PyObject_CallMethod(mon, "use_tool_id", "is", order[i], "fastprof");
        if (r != NULL) {
            Py_DECREF(r);
            return order[i];
        }
        PyErr_Clear(); /* taken meanwhile: try the next */
    }
    PyObject *names = PyList_New(0);
    for (int i = 0; names != NULL && i < 6; i++) {
        PyObject *holder = PyObject_CallMethod(mon, "get_tool", "i", i);
        PyObject *item = holder ? PyUnicode_FromFormat("%d: %R", i, holder) : NULL;
        Py_XDECREF(holder);
        if (item == NULL || PyList_Append(names, item) < 0)
            Py_CLEAR(names);
        Py_XDECREF(item);
    }
    if (names == NULL)
        return -1;
    PyErr_Format(PyExc_RuntimeError,
                 "fastprof cannot profile: every sys.monitoring tool id is held (%S); "
                 "disable one of those tools first",
                 names);
    Py_DECREF(names);
    return -1;
}

/* See fp_profile.h. */
int
fp_hooks_install(fp_profiler *p, PyTypeObject *hook_type)
{
    PyObject *mon = fp_mon_module();
    if (mon == NULL)
        return -1;
    int id = fp_mon_claim(mon);
    if (id < 0)
        goto error;
    p->tool_id = id;
    p->missing = PyObject_GetAttrString(mon, "MISSING");
    if (p->missing == NULL)
        goto error;
    p->disable = PyObject_GetAttrString(mon, "DISABLE");
    if (p->disable == NULL)
        goto error;
    for (int k = 0; k < FP_MON_NCALLBACKS; k++) {
        p->callbacks[k] = fp_hook_new(hook_type, p, fp_mon_funcs[p->tsc ? 1 : 0][k]);
        if (p->callbacks[k] == NULL)
            goto error;
    }
    long mask = 0;
    for (int e = 0; e < FP_MON_NEVENTS; e++) {
        if (fp_mon_events[e].builtin && !p->builtins)
            continue;
        long bit = fp_mon_event_bit(mon, fp_mon_events[e].event);
        if (bit < 0)
            goto error;
        PyObject *r = PyObject_CallMethod(mon, "register_callback", "ilO", id, bit,
                                          p->callbacks[fp_mon_events[e].callback]);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
        mask |= bit;
    }
    PyObject *r = PyObject_CallMethod(mon, "set_events", "il", id, mask);
    if (r == NULL)
        goto error;
    Py_DECREF(r);
    Py_DECREF(mon);
    return 0;
error:
    Py_DECREF(mon);
    if (p->tool_id >= 0) {
        PyObject *exc = PyErr_GetRaisedException();
        fp_hooks_remove(p);
        PyErr_Clear();
        PyErr_SetRaisedException(exc);
    }
    for (int k = 0; k < FP_MON_NCALLBACKS; k++)
        Py_CLEAR(p->callbacks[k]);
    Py_CLEAR(p->missing);
    Py_CLEAR(p->disable);
    return -1;
}

/* See fp_profile.h. */
int
fp_hooks_remove(fp_profiler *p)
{
    int id = p->tool_id;
    if (id < 0)
        return 0;
    PyObject *exc = NULL; /* the first failure, raised at the end */
    PyObject *mon = fp_mon_module();
    if (mon == NULL)
        goto done;
    PyObject *r = PyObject_CallMethod(mon, "set_events", "ii", id, 0);
    if (r == NULL && exc == NULL)
        exc = PyErr_GetRaisedException();
    Py_XDECREF(r);
    for (int e = 0; e < FP_MON_NEVENTS; e++) {
        long bit = fp_mon_event_bit(mon, fp_mon_events[e].event);
        r = bit < 0 ? NULL : PyObject_CallMethod(mon, "register_callback", "ilO", id, bit, Py_None);
        if (r == NULL && exc == NULL)
            exc = PyErr_GetRaisedException();
        PyErr_Clear();
        Py_XDECREF(r);
    }
    r = PyObject_CallMethod(mon, "free_tool_id", "i", id);
    if (r == NULL && exc == NULL)
        exc = PyErr_GetRaisedException();
    PyErr_Clear();
    Py_XDECREF(r);
    /* Call sites switched off with DISABLE stay off for the tool id's next user (cProfile
     * too) unless restarted. */
    r = PyObject_CallMethod(mon, "restart_events", NULL);
    if (r == NULL && exc == NULL)
        exc = PyErr_GetRaisedException();
    PyErr_Clear();
    Py_XDECREF(r);
    Py_DECREF(mon);
done:
    if (mon == NULL)
        exc = PyErr_GetRaisedException();
    p->tool_id = -1;
    for (int k = 0; k < FP_MON_NCALLBACKS; k++)
        Py_CLEAR(p->callbacks[k]);
    Py_CLEAR(p->missing);
    Py_CLEAR(p->disable);
    if (exc != NULL) {
        PyErr_SetRaisedException(exc);
        return -1;
    }
    return 0;
}

#endif /* FP_PY312 */
