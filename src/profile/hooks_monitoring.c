/* hooks_monitoring.c - the call profiler's hooks on Python 3.12+: sys.monitoring callbacks
 * written in C (METH_FASTCALL).  PY_START/PY_RESUME/PY_THROW enter a frame, PY_RETURN/PY_YIELD/
 * PY_UNWIND leave it, CALL/C_RETURN/C_RAISE account builtins (registered only when builtins
 * are on).  Every enabled call profiler shares one tool id (the profiler's, 2, when free),
 * claimed by the first and given back by the last. */
#include "fp_profile.h"

#if FP_PY312

#include <string.h>
#include <structmember.h>

/* A callback given to sys.monitoring: a small object called through vectorcall, so an event
 * reaches the profiler without the argument handling of a builtin function.  A profiler's own
 * hooks (prof set) serve it alone, registered while it is the only one enabled; the shared
 * tool's hooks (prof NULL) hand each event to every enabled profiler. */
typedef struct fp_hook {
    PyObject_HEAD vectorcallfunc vectorcall;
    fp_profiler *prof;        /* strong, or NULL in a hook of the shared tool */
    struct fp_mon_tool *tool; /* the shared tool (prof NULL), NULL once it is gone */
} fp_hook;

/* The tool id that every fastprof call profiler shares, and the profilers enabled on it (one
 * per interpreter: it lives in the module state).  Claimed when the first profiler is
 * enabled, given back when the last is disabled. */
typedef struct fp_mon_tool {
    int id; /* -1: not held */
    int n, cap;
    fp_profiler **profs; /* strong: the enabled profilers, in the order they were enabled */
    PyObject *shared[FP_MON_NCALLBACKS]; /* hooks calling every enabled profiler (n > 1) */
    int pruned; /* a pruning profiler was registered alone since the last restart */
} fp_mon_tool;

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
        /* the session's own __exit__ is never added, so it always comes here */
        if (!fp_session_is_own(ml) && (fi = fp_func_for_builtin(p, ml, callable, self_arg)) >= 0)
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
 * the TSC copy's common cases make no call; the leave callbacks in two more, with and
 * without the timeline (tl, a constant too), so that a profiler without one runs no
 * timeline code.  enable() registers the copies of its clock and timeline.  Each takes the
 * profiler p and sys.monitoring's arguments. */

/* PY_START, PY_RESUME, PY_THROW (code, offset[, exc]); the common case makes no call but the
 * clock.  Returns None. */
FP_INLINE PyObject *
fp_mon_start(fp_profiler *p, PyObject *const *args, Py_ssize_t nargs, int tsc)
{
    if (FP_UNLIKELY(nargs < 1))
        Py_RETURN_NONE;
    if (fp_enter_cached(p, fp_func_cached(p, args[0]), args[0], tsc))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_ENTER, args[0], NULL, NULL, NULL);
}

/* PY_RETURN, PY_YIELD, PY_UNWIND (code, offset, value); the common case makes no call but
 * the clock.  Returns None. */
FP_INLINE PyObject *
fp_mon_return(fp_profiler *p, PyObject *const *args, Py_ssize_t nargs, int tsc, int tl)
{
    if (FP_UNLIKELY(nargs < 1))
        Py_RETURN_NONE;
    if (fp_leave_cached(p, args[0], tsc, tl))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_LEAVE, args[0], NULL, NULL, NULL);
}

/* Returns the PyMethodDef of a C function being called, or NULL when the callable is not one
 * (a Python function, a class, ...) or is an unbound method descriptor called without self
 * or with a self of another type. */
FP_INLINE PyMethodDef *
fp_mon_cfunc(fp_profiler *p, PyObject *callable, PyObject *self_arg)
{
    PyTypeObject *type = Py_TYPE(callable);
    /* exact types first: PyCFunction_Check walks the MRO for every other callable */
    if (type == &PyCFunction_Type || type == &PyCMethod_Type)
        return ((PyCFunctionObject *)callable)->m_ml;
    if (type == &PyMethodDescr_Type) {
        /* As cProfile binds it to its first argument: without one, or with one that is no
         * instance of the descriptor's type (str.upper(b"x")), the descriptor refuses the call
         * before its C function runs, so there is no call of it to count (nor a type to name
         * it by). */
        PyMethodDescrObject *descr = (PyMethodDescrObject *)callable;
        if (self_arg == p->missing || !PyObject_TypeCheck(self_arg, descr->d_common.d_type))
            return NULL;
        return descr->d_method;
    }
    if (type == &PyFunction_Type || type == &PyMethod_Type)
        return NULL;
    if (PyCFunction_Check(callable))
        return ((PyCFunctionObject *)callable)->m_ml;
    return NULL;
}

/* CALL (code, offset, callable, arg0): enters a builtin.  Returns None; with
 * prune_call_sites (p->prune), DISABLE for a call site whose callee is not a C function (a
 * Python function, a class...): such a site then costs nothing more, at the price of missing
 * every builtin called there later (the default keeps every site reporting: exact). */
FP_INLINE PyObject *
fp_mon_call(fp_profiler *p, PyObject *const *args, Py_ssize_t nargs, int tsc)
{
    if (FP_UNLIKELY(nargs < 4))
        Py_RETURN_NONE;
    PyMethodDef *ml = fp_mon_cfunc(p, args[2], args[3]);
    if (ml == NULL) {
        /* PY_START accounts a Python callee */
        if (FP_UNLIKELY(p->prune) && p->disable != NULL)
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
fp_mon_creturn(fp_profiler *p, PyObject *const *args, Py_ssize_t nargs, int tsc, int tl)
{
    if (FP_UNLIKELY(nargs < 4))
        Py_RETURN_NONE;
    PyMethodDef *ml = fp_mon_cfunc(p, args[2], args[3]);
    if (ml == NULL)
        Py_RETURN_NONE;
    if (fp_leave_cached(p, ml, tsc, tl))
        Py_RETURN_NONE;
    return fp_mon_slow(p, FP_MON_C_LEAVE, NULL, ml, NULL, NULL);
}

/* The index of each callback in a profiler's and in the shared tool's callbacks. */
enum { FP_MON_CB_START, FP_MON_CB_RETURN, FP_MON_CB_CALL, FP_MON_CB_CRETURN };

/* Defines the copy of callback name for the constants after sfx (the wall clock tsc, and for
 * a leave callback tl), as name_<sfx>, the vectorcall of a profiler's own hook. */
#define FP_MON_COPY(name, sfx, ...)                                                                \
    static PyObject *name##_##sfx(PyObject *self, PyObject *const *args, size_t nargsf,            \
                                  FP_UNUSED PyObject *kwnames)                                     \
    {                                                                                              \
        return name(((fp_hook *)self)->prof, args, PyVectorcall_NARGS(nargsf), __VA_ARGS__);       \
    }
FP_MON_COPY(fp_mon_start, tsc, 1)
FP_MON_COPY(fp_mon_return, tsc, 1, 0)
FP_MON_COPY(fp_mon_call, tsc, 1)
FP_MON_COPY(fp_mon_creturn, tsc, 1, 0)
FP_MON_COPY(fp_mon_start, mono, 0)
FP_MON_COPY(fp_mon_return, mono, 0, 0)
FP_MON_COPY(fp_mon_call, mono, 0)
FP_MON_COPY(fp_mon_creturn, mono, 0, 0)
FP_MON_COPY(fp_mon_return, tsc_tl, 1, 1)
FP_MON_COPY(fp_mon_creturn, tsc_tl, 1, 1)
FP_MON_COPY(fp_mon_return, mono_tl, 0, 1)
FP_MON_COPY(fp_mon_creturn, mono_tl, 0, 1)

/* The callbacks of each copy, indexed [timeline][tsc][callback]: the enter callbacks are the
 * same with a timeline or not. */
static const vectorcallfunc fp_mon_funcs[2][2][FP_MON_NCALLBACKS] = {
    {
        {fp_mon_start_mono, fp_mon_return_mono, fp_mon_call_mono, fp_mon_creturn_mono},
        {fp_mon_start_tsc, fp_mon_return_tsc, fp_mon_call_tsc, fp_mon_creturn_tsc},
    },
    {
        {fp_mon_start_mono, fp_mon_return_mono_tl, fp_mon_call_mono, fp_mon_creturn_mono_tl},
        {fp_mon_start_tsc, fp_mon_return_tsc_tl, fp_mon_call_tsc, fp_mon_creturn_tsc_tl},
    },
};

/* Hands one event (callback cb) to every profiler enabled on the shared tool, each through
 * its own clock's copy (the timeline tested per event); a profiler without builtins skips the
 * builtin events.  What a profiler answers (DISABLE included) is dropped: a site stays on for the
 * others.  Returns None. */
static PyObject *
fp_mon_each(PyObject *self, PyObject *const *args, size_t nargsf, int cb)
{
    fp_mon_tool *tool = ((fp_hook *)self)->tool;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* re-read n and profs each time: a user timer may enable or disable a profiler */
    for (int i = 0; tool != NULL && i < tool->n; i++) {
        fp_profiler *p = tool->profs[i];
        if (cb >= FP_MON_CB_CALL && !p->builtins)
            continue;
        Py_INCREF(p);
        PyObject *r;
        switch (cb) {
        case FP_MON_CB_START:
            r = p->tsc ? fp_mon_start(p, args, nargs, 1) : fp_mon_start(p, args, nargs, 0);
            break;
        case FP_MON_CB_RETURN:
            r = p->tsc ? fp_mon_return(p, args, nargs, 1, p->tl != NULL)
                       : fp_mon_return(p, args, nargs, 0, p->tl != NULL);
            break;
        case FP_MON_CB_CALL:
            r = p->tsc ? fp_mon_call(p, args, nargs, 1) : fp_mon_call(p, args, nargs, 0);
            break;
        default:
            r = p->tsc ? fp_mon_creturn(p, args, nargs, 1, p->tl != NULL)
                       : fp_mon_creturn(p, args, nargs, 0, p->tl != NULL);
            break;
        }
        Py_XDECREF(r);
        Py_DECREF(p);
    }
    Py_RETURN_NONE;
}

/* Defines the shared tool's vectorcall of callback cb, as fp_mon_each_<sfx>. */
#define FP_MON_EACH(sfx, cb)                                                                       \
    static PyObject *fp_mon_each_##sfx(PyObject *self, PyObject *const *args, size_t nargsf,       \
                                       FP_UNUSED PyObject *kwnames)                                \
    {                                                                                              \
        return fp_mon_each(self, args, nargsf, cb);                                                \
    }
FP_MON_EACH(start, FP_MON_CB_START)
FP_MON_EACH(return, FP_MON_CB_RETURN)
FP_MON_EACH(call, FP_MON_CB_CALL)
FP_MON_EACH(creturn, FP_MON_CB_CRETURN)

static const vectorcallfunc fp_mon_each_funcs[FP_MON_NCALLBACKS] = {
    fp_mon_each_start, fp_mon_each_return, fp_mon_each_call, fp_mon_each_creturn};

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

/* Returns a new hook calling func for p (NULL: a hook of the shared tool), or NULL with an
 * exception set. */
static PyObject *
fp_hook_new(PyTypeObject *type, fp_profiler *p, fp_mon_tool *tool, vectorcallfunc func)
{
    fp_hook *h = PyObject_New(fp_hook, type);
    if (h == NULL)
        return NULL;
    h->vectorcall = func;
    h->prof = (fp_profiler *)Py_XNewRef(p);
    h->tool = tool;
    return (PyObject *)h;
}

/* Which callback each event gets, and whether it belongs to builtins. */
static const struct {
    const char *event;
    int callback;
    int builtin;
} fp_mon_events[] = {
    {"PY_START", 0, 0},  {"PY_RESUME", 0, 0}, {"PY_THROW", 0, 0},
    {"PY_RETURN", 1, 0}, {"PY_YIELD", 1, 0},  {"PY_UNWIND", 1, 0},
    {"CALL", 2, 1},      {"C_RETURN", 3, 1},  {"C_RAISE", 3, 1},
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

/* Calls sys.monitoring.<name>(*args) (nargs of them).  A builtin is called through its C
 * function directly, without the interpreter's recursion check: giving a tool id back must
 * work on an exhausted stack too (an exit path of a RecursionError).  Returns a new
 * reference to the result, or NULL with an exception set. */
static PyObject *
fp_mon_invoke(PyObject *mon, const char *name, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *r = NULL;
    PyObject *f = PyObject_GetAttrString(mon, name);
    if (f == NULL)
        goto error;
    if (PyCFunction_Check(f)) {
        PyCFunction meth = PyCFunction_GetFunction(f);
        PyObject *self = PyCFunction_GetSelf(f);
        int flags = PyCFunction_GetFlags(f) & ~(METH_CLASS | METH_STATIC | METH_COEXIST);
        if (flags == METH_FASTCALL) {
            r = ((PyObject * (*)(PyObject *, PyObject *const *, Py_ssize_t))(void (*)(void))meth)(
                self, args, nargs);
            goto done;
        }
        if (flags == METH_O && nargs == 1) {
            r = meth(self, args[0]);
            goto done;
        }
        if (flags == METH_NOARGS && nargs == 0) {
            r = meth(self, NULL);
            goto done;
        }
    }
    r = PyObject_Vectorcall(f, args, (size_t)nargs, NULL);
done:
    Py_DECREF(f);
    return r;
error:
    return NULL;
}

/* Calls sys.monitoring.<name>(id[, a][, obj]): a (an int) when has_a, obj when not NULL.
 * Returns 0, or -1 with an exception set. */
static int
fp_mon_do(PyObject *mon, const char *name, int id, int has_a, long a, PyObject *obj)
{
    int rc = -1;
    Py_ssize_t nargs = 1;
    PyObject *args[3] = {PyLong_FromLong(id), NULL, NULL};
    if (args[0] == NULL)
        goto done;
    if (has_a && (args[nargs++] = PyLong_FromLong(a)) == NULL)
        goto done;
    if (obj != NULL)
        args[nargs++] = obj;
    PyObject *r = fp_mon_invoke(mon, name, args, nargs);
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    rc = 0;
done:
    Py_XDECREF(args[0]);
    if (has_a)
        Py_XDECREF(args[1]);
    return rc;
}

/* See fp_profile.h.  The order keeps the ids that PEP 669 reserves for debuggers (0) and
 * coverage (1) for last. */
int
fp_mon_claim(PyObject *mon, const char *name, int profiler_first)
{
    static const int first[] = {2, 3, 4, 5, 0, 1}, later[] = {3, 4, 5, 2, 0, 1};
    const int *order = profiler_first ? first : later;
    PyObject *names = NULL, *joined = NULL;
    PyObject *uname = PyUnicode_FromString(name);
    if (uname == NULL)
        goto error;
    for (int i = 0; i < 6; i++) {
        PyObject *id = PyLong_FromLong(order[i]);
        PyObject *holder = id ? fp_mon_invoke(mon, "get_tool", &id, 1) : NULL;
        Py_XDECREF(id);
        if (holder == NULL)
            goto error;
        int free_id = holder == Py_None;
        Py_DECREF(holder);
        if (!free_id)
            continue;
        if (fp_mon_do(mon, "use_tool_id", order[i], 0, 0, uname) == 0) {
            Py_DECREF(uname);
            return order[i];
        }
        PyErr_Clear(); /* taken meanwhile: try the next */
    }
    names = PyList_New(0);
    for (int i = 0; names != NULL && i < 6; i++) {
        PyObject *id = PyLong_FromLong(i);
        PyObject *holder = id ? fp_mon_invoke(mon, "get_tool", &id, 1) : NULL;
        Py_XDECREF(id);
        PyObject *item = holder ? PyUnicode_FromFormat("%d: %R", i, holder) : NULL;
        Py_XDECREF(holder);
        if (item == NULL || PyList_Append(names, item) < 0)
            Py_CLEAR(names);
        Py_XDECREF(item);
    }
    PyObject *sep = names ? PyUnicode_FromString(", ") : NULL;
    joined = sep ? PyUnicode_Join(sep, names) : NULL;
    Py_XDECREF(sep);
    if (joined == NULL)
        goto error;
    PyErr_Format(PyExc_RuntimeError,
                 "fastprof cannot profile: every sys.monitoring tool id is held (%U); "
                 "disable one of those tools first",
                 joined);
error:
    Py_XDECREF(joined);
    Py_XDECREF(names);
    Py_XDECREF(uname);
    return -1;
}

/* Who holds tool id: 1 when it is held under name, 0 when it is free (another tool freed it:
 * VizTracer's stop does; on 3.12 the events and callbacks stay), 2 when another tool holds
 * it.  Returns that, or -1 with an exception set; *holder gets a new reference to the
 * holder's name (or None). */
static int
fp_mon_holder(PyObject *mon, int id, const char *name, PyObject **holder)
{
    PyObject *pid = PyLong_FromLong(id);
    *holder = pid ? fp_mon_invoke(mon, "get_tool", &pid, 1) : NULL;
    Py_XDECREF(pid);
    if (*holder == NULL)
        return -1;
    if (*holder == Py_None)
        return 0;
    return PyUnicode_Check(*holder) && PyUnicode_CompareWithASCIIString(*holder, name) == 0 ? 1 : 2;
}

/* See fp_profile.h. */
int
fp_mon_release(PyObject *mon, int id, long events, const char *name, int reclaimed)
{
    PyObject *exc = NULL, *holder = NULL, *uname = NULL; /* exc: the first failure */
    int held = fp_mon_holder(mon, id, name, &holder);
    if (held < 0)
        goto error;
    if (held == 2) { /* another tool's now: its events and callbacks are its own */
        held = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                "fastprof: sys.monitoring tool id %d was freed while %s was on "
                                "and is now held by %R; fastprof leaves it to that tool",
                                id, name, holder);
        goto error;
    }
    /* a freed id keeps fastprof's events and callbacks: claimed back to clear them */
    if (held == 0 && ((uname = PyUnicode_FromString(name)) == NULL ||
                      fp_mon_do(mon, "use_tool_id", id, 0, 0, uname) < 0))
        exc = PyErr_GetRaisedException();
    if (fp_mon_do(mon, "set_events", id, 1, 0, NULL) < 0 && exc == NULL)
        exc = PyErr_GetRaisedException();
    PyErr_Clear();
    for (long bit = 1; bit > 0 && bit <= events; bit <<= 1) {
        if (!(events & bit))
            continue;
        if (fp_mon_do(mon, "register_callback", id, 1, bit, Py_None) < 0 && exc == NULL)
            exc = PyErr_GetRaisedException();
        PyErr_Clear();
    }
    if (fp_mon_do(mon, "free_tool_id", id, 0, 0, NULL) < 0 && exc == NULL)
        exc = PyErr_GetRaisedException();
    PyErr_Clear();
    if (exc != NULL) {
        PyErr_SetRaisedException(exc);
        held = -1;
    } else if (held == 0 || reclaimed) { /* warned once nothing of fastprof's is left */
        held = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                "fastprof: sys.monitoring tool id %d was freed while %s was on; "
                                "fastprof cleared its events there",
                                id, name);
    }
error:
    Py_XDECREF(uname);
    Py_XDECREF(holder);
    return held < 0 ? -1 : 0;
}

/* Returns the events of the call profiler for a profiler with builtins or not (every one when
 * builtins < 0), or -1 with an exception set. */
static long
fp_mon_mask(PyObject *mon, int builtins)
{
    long mask = 0;
    for (int e = 0; e < FP_MON_NEVENTS; e++) {
        if (fp_mon_events[e].builtin && builtins == 0)
            continue;
        long bit = fp_mon_event_bit(mon, fp_mon_events[e].event);
        if (bit < 0)
            return -1;
        mask |= bit;
    }
    return mask;
}

/* Returns the shared tool of p's module, or NULL (no exception set) when the module or its
 * state is gone (at interpreter exit). */
static fp_mon_tool *
fp_mon_tool_of(fp_profiler *p)
{
    PyObject *m = PyType_GetModuleByDef(Py_TYPE(p), &fp_module_def);
    if (m == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return fp_state(m)->mon_tool;
}

/* Registers the callbacks and events that the tool's enabled profilers need: a lone
 * profiler's own hooks (its fast path, as if it held the id alone), else the shared hooks of
 * hook_type calling each.  Sites a lone pruning profiler switched off are switched back on
 * when others join.  Returns 0, or -1 with an exception set. */
static int
fp_mon_sync(PyObject *mon, fp_mon_tool *tool, PyTypeObject *hook_type)
{
    int builtins = 0, prune = tool->n == 1 && tool->profs[0]->prune;
    for (int i = 0; i < tool->n; i++)
        builtins |= tool->profs[i]->builtins;
    PyObject **callbacks = tool->profs[0]->callbacks;
    if (tool->n > 1) {
        for (int k = 0; k < FP_MON_NCALLBACKS; k++) {
            if (tool->shared[k] == NULL)
                tool->shared[k] = fp_hook_new(hook_type, NULL, tool, fp_mon_each_funcs[k]);
            if (tool->shared[k] == NULL)
                goto error;
        }
        callbacks = tool->shared;
    }
    long mask = 0;
    for (int e = 0; e < FP_MON_NEVENTS; e++) {
        long bit = fp_mon_event_bit(mon, fp_mon_events[e].event);
        if (bit < 0)
            goto error;
        int on = !fp_mon_events[e].builtin || builtins;
        PyObject *cb = on ? callbacks[fp_mon_events[e].callback] : Py_None;
        if (fp_mon_do(mon, "register_callback", tool->id, 1, bit, cb) < 0)
            goto error;
        if (on)
            mask |= bit;
    }
    if (tool->pruned && !prune) {
        PyObject *r = fp_mon_invoke(mon, "restart_events", NULL, 0);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
        tool->pruned = 0;
    }
    tool->pruned |= prune;
    return fp_mon_do(mon, "set_events", tool->id, 1, mask, NULL);
error:
    return -1;
}

/* Takes p off the tool's list (if there) and gives the id back once the list is empty,
 * switching pruned sites back on.  Returns 0, or -1 with an exception set (all is undone
 * anyway). */
static int
fp_mon_leave(PyObject *mon, fp_mon_tool *tool, fp_profiler *p, PyTypeObject *hook_type)
{
    int i = 0;
    while (i < tool->n && tool->profs[i] != p)
        i++;
    if (i == tool->n)
        return 0;
    memmove(&tool->profs[i], &tool->profs[i + 1], (size_t)(tool->n - i - 1) * sizeof(p));
    tool->n--;
    int rc = 0;
    if (tool->n > 0) {
        rc = fp_mon_sync(mon, tool, hook_type);
    } else if (tool->id >= 0) {
        long mask = fp_mon_mask(mon, -1);
        rc = mask < 0 ? -1 : fp_mon_release(mon, tool->id, mask, "fastprof", 0);
        tool->id = -1;
        if (tool->pruned) {
            PyObject *exc = rc < 0 ? PyErr_GetRaisedException() : NULL;
            PyObject *r = fp_mon_invoke(mon, "restart_events", NULL, 0);
            Py_XDECREF(r);
            if (r == NULL) {
                rc = -1;
                if (exc != NULL)
                    PyErr_Clear();
            }
            if (exc != NULL)
                PyErr_SetRaisedException(exc);
            tool->pruned = 0;
        }
        for (int k = 0; k < FP_MON_NCALLBACKS; k++)
            Py_CLEAR(tool->shared[k]);
    }
    Py_DECREF(p);
    return rc;
}

/* Drops p's references to its hooks and to sys.monitoring's sentinels.  Returns nothing. */
static void
fp_mon_forget(fp_profiler *p)
{
    p->tool_id = -1;
    for (int k = 0; k < FP_MON_NCALLBACKS; k++)
        Py_CLEAR(p->callbacks[k]);
    Py_CLEAR(p->missing);
    Py_CLEAR(p->disable);
}

/* See fp_profile.h.  Reads sys.monitoring.get_tool from C: no bytecode runs, so an enabled
 * profiler records only the enable() call that this refuses. */
int
fp_hooks_check_free(FP_UNUSED fp_profiler *p, int nests)
{
    if (nests)
        return 0;
    PyObject *mon = fp_mon_module();
    if (mon == NULL)
        return -1;
    for (int i = 0; i < 6; i++) {
        PyObject *holder;
        int held = fp_mon_holder(mon, i, "fastprof", &holder);
        Py_XDECREF(holder);
        if (held < 0) {
            Py_DECREF(mon);
            return -1;
        }
        if (held == 1) {
            Py_DECREF(mon);
            PyErr_Format(PyExc_ValueError,
                         "Another profiling tool is already active: a fastprof profiler holds "
                         "sys.monitoring tool id %d; disable it first",
                         i);
            return -1;
        }
    }
    Py_DECREF(mon);
    return 0;
}

/* See fp_profile.h.  The first profiler enabled claims the shared tool id; the others join
 * it. */
int
fp_hooks_install(fp_profiler *p, PyTypeObject *hook_type)
{
    fp_mon_tool *tool = fp_mon_tool_of(p);
    PyObject *mon = fp_mon_module();
    if (mon == NULL)
        return -1;
    if (tool == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "fastprof's module state is gone");
        goto error;
    }
    p->missing = PyObject_GetAttrString(mon, "MISSING");
    if (p->missing == NULL)
        goto error;
    p->disable = PyObject_GetAttrString(mon, "DISABLE");
    if (p->disable == NULL)
        goto error;
    for (int k = 0; k < FP_MON_NCALLBACKS; k++) {
        p->callbacks[k] =
            fp_hook_new(hook_type, p, NULL, fp_mon_funcs[p->tl != NULL][p->tsc ? 1 : 0][k]);
        if (p->callbacks[k] == NULL)
            goto error;
    }
    if (tool->n == tool->cap) {
        int cap = tool->cap ? 2 * tool->cap : 4;
        fp_profiler **grown = PyMem_RawRealloc(tool->profs, (size_t)cap * sizeof(*grown));
        if (grown == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        tool->profs = grown;
        tool->cap = cap;
    }
    if (tool->id < 0 && (tool->id = fp_mon_claim(mon, "fastprof", 1)) < 0)
        goto error;
    tool->profs[tool->n++] = (fp_profiler *)Py_NewRef(p);
    p->tool_id = tool->id;
    if (fp_mon_sync(mon, tool, hook_type) < 0) {
        PyObject *exc = PyErr_GetRaisedException();
        fp_mon_leave(mon, tool, p, hook_type);
        PyErr_Clear();
        PyErr_SetRaisedException(exc);
        goto error;
    }
    Py_DECREF(mon);
    return 0;
error:
    Py_DECREF(mon);
    fp_mon_forget(p);
    return -1;
}

/* See fp_profile.h. */
int
fp_hooks_remove(fp_profiler *p)
{
    int rc = 0;
    if (p->tool_id < 0)
        return 0;
    fp_mon_tool *tool = fp_mon_tool_of(p);
    PyObject *mon = fp_mon_module();
    if (mon == NULL)
        rc = -1;
    else if (tool != NULL && p->callbacks[0] != NULL)
        rc = fp_mon_leave(mon, tool, p, Py_TYPE(p->callbacks[0]));
    Py_XDECREF(mon);
    fp_mon_forget(p);
    return rc;
}

/* _monitoring_claim(name) -> int: claims a free sys.monitoring tool id under name, in
 * fastprof's order with the profiler's id (2) after 3, 4 and 5 (what the line profiler uses:
 * cProfile insists on 2, and line_profiler takes over the callbacks of whatever tool holds
 * it).  Returns it, or NULL with RuntimeError when every id is held. */
static PyObject *
fp_mon_py_claim(FP_UNUSED PyObject *module, PyObject *name)
{
    PyObject *mon = NULL;
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be a str, not %.80s", Py_TYPE(name)->tp_name);
        goto error;
    }
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL || (mon = fp_mon_module()) == NULL)
        goto error;
    int id = fp_mon_claim(mon, s, 0);
    if (id < 0)
        goto error;
    Py_DECREF(mon);
    return PyLong_FromLong(id);
error:
    Py_XDECREF(mon);
    return NULL;
}

/* _monitoring_release(tool_id, events, name, reclaimed=False): clears the tool's global
 * events, unregisters its callbacks of those events and frees the id, each step tried even
 * when one fails (local events are the caller's to clear first); an id no longer held under
 * name is left alone, with a RuntimeWarning; one another tool freed is cleared and freed,
 * with a RuntimeWarning, also when the caller took it back (reclaimed) to clear its local
 * events.  Returns None, or NULL with the first failure. */
static PyObject *
fp_mon_py_release(FP_UNUSED PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *mon = NULL;
    const char *name;
    int reclaimed = 0;
    if (nargs < 3 || nargs > 4 || !PyLong_Check(args[0]) || !PyLong_Check(args[1]) ||
        !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_monitoring_release(tool_id, events, name, "
                                         "reclaimed=False) takes two ints, a str and a bool");
        goto error;
    }
    if (nargs == 4 && (reclaimed = PyObject_IsTrue(args[3])) < 0)
        goto error;
    long id = PyLong_AsLong(args[0]), events = PyLong_AsLong(args[1]);
    if ((id == -1 || events == -1) && PyErr_Occurred())
        goto error;
    if (id < 0 || id > 5) {
        PyErr_Format(PyExc_ValueError, "tool_id must be 0 to 5, not %ld", id);
        goto error;
    }
    if ((name = PyUnicode_AsUTF8(args[2])) == NULL || (mon = fp_mon_module()) == NULL ||
        fp_mon_release(mon, (int)id, events, name, reclaimed) < 0)
        goto error;
    Py_DECREF(mon);
    Py_RETURN_NONE;
error:
    Py_XDECREF(mon);
    return NULL;
}

static PyMethodDef fp_mon_functions[] = {
    {"_monitoring_claim", fp_mon_py_claim, METH_O,
     "_monitoring_claim(name) -> int: claim a free sys.monitoring tool id (2, 3, 4, 5, then 0 "
     "and 1)."},
    {"_monitoring_release", (PyCFunction)(void (*)(void))fp_mon_py_release, METH_FASTCALL,
     "_monitoring_release(tool_id, events, name, reclaimed=False): clear a tool's events and "
     "callbacks, free it (an id no longer held under name is left alone, with a "
     "RuntimeWarning; a freed one, or one reclaimed after another tool freed it, warns)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  The profilers still on the tool (at interpreter exit) are let go. */
void
fp_mon_tool_free(fp_mon_tool *tool)
{
    if (tool == NULL)
        return;
    for (int k = 0; k < FP_MON_NCALLBACKS; k++) {
        if (tool->shared[k] != NULL)
            ((fp_hook *)tool->shared[k])->tool = NULL;
        Py_CLEAR(tool->shared[k]);
    }
    for (int i = 0; i < tool->n; i++)
        Py_DECREF(tool->profs[i]);
    PyMem_RawFree(tool->profs);
    PyMem_RawFree(tool);
}

/* See fp_profile.h. */
int
fp_mon_exec(PyObject *m)
{
    fp_module_state *st = fp_state(m);
    fp_mon_tool *tool = PyMem_RawCalloc(1, sizeof(*tool));
    if (tool == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    tool->id = -1;
    fp_mon_tool_free(st->mon_tool);
    st->mon_tool = tool; /* the state owns it */
    return PyModule_AddFunctions(m, fp_mon_functions);
error:
    return -1;
}

#endif /* FP_PY312 */
