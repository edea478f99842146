/* session.c - the counted switch behind @fastprof.profile and `with fastprof.profile()`:
 * fastprof._fastprof._Session (the base of fastprof.profile.ProfileSession) and _Guarded, the
 * wrapper of a decorated function.  They run in C so that none of fastprof's own frames runs
 * while the profiler is on (a report shows the user's code alone), and so that the exit path
 * turns the profiler off on an exhausted stack too (a RecursionError): the profiler's
 * disable() is called with headroom on the recursion limit, a builtin one without the
 * interpreter's recursion check. */
#include "fp_profile.h"

#include <pythread.h>
#include <structmember.h>

#define FP_SLOT_SESSION_TYPE 3
#define FP_SLOT_GUARDED_TYPE 4

/* Frames the exit path may use beyond the recursion limit. */
#define FP_HEADROOM 100

typedef struct fp_session {
    PyObject_HEAD PyObject *profiler; /* what enable() and disable() are called on */
    Py_ssize_t active;                /* open calls and blocks; the profiler is on while > 0 */
    PyThread_type_lock lock;          /* serialises the switch between threads */
    PyObject *dict;
    PyObject *weakreflist;
} fp_session;

typedef struct fp_guarded {
    PyObject_HEAD fp_session *session; /* strong */
    PyObject *func;                    /* strong: the decorated callable */
    PyObject *dict;                    /* functools.update_wrapper's attributes and the user's */
} fp_guarded;

/* The current exception, set aside and put back (any Python version). */
typedef struct fp_saved {
#if FP_PY312
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} fp_saved;

/* Sets the current exception (if any) aside in s, clearing it.  Returns nothing. */
static void
fp_save(fp_saved *s)
{
#if FP_PY312
    s->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&s->type, &s->value, &s->tb);
    if (s->type != NULL) {
        PyErr_NormalizeException(&s->type, &s->value, &s->tb);
        if (s->tb != NULL)
            PyException_SetTraceback(s->value, s->tb);
    }
#endif
}

/* Puts s back; when a new exception is set meanwhile, it wins, with s as its context (as an
 * exception raised in a finally block).  Returns nothing. */
static void
fp_restore(fp_saved *s)
{
#if FP_PY312
    if (s->exc == NULL)
        return;
    if (!PyErr_Occurred()) {
        PyErr_SetRaisedException(s->exc);
        return;
    }
    PyObject *exc = PyErr_GetRaisedException();
    PyException_SetContext(exc, s->exc);
    PyErr_SetRaisedException(exc);
#else
    if (s->type == NULL)
        return;
    if (!PyErr_Occurred()) {
        PyErr_Restore(s->type, s->value, s->tb);
        return;
    }
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetContext(v, Py_NewRef(s->value));
    Py_DECREF(s->type);
    Py_DECREF(s->value);
    Py_XDECREF(s->tb);
    PyErr_Restore(t, v, tb);
#endif
}

/* Takes the session's lock, letting other threads run while it waits.  Returns nothing. */
static void
fp_session_lock(fp_session *s)
{
    if (!PyThread_acquire_lock(s->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(s->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* Calls obj.<name>() (no arguments); a builtin method is called through its C function,
 * without the recursion check.  Returns a new reference or NULL with an exception set. */
static PyObject *
fp_call_method_direct(PyObject *obj, const char *name)
{
    PyObject *f = PyObject_GetAttrString(obj, name);
    if (f == NULL)
        return NULL;
    PyObject *r;
    if (PyCFunction_Check(f) &&
        (PyCFunction_GetFlags(f) & ~(METH_CLASS | METH_STATIC | METH_COEXIST)) == METH_NOARGS)
        r = PyCFunction_GetFunction(f)(PyCFunction_GetSelf(f), NULL);
    else
        r = PyObject_CallNoArgs(f);
    Py_DECREF(f);
    return r;
}

/* Counts one more open call or block, enabling the profiler for the first.  Returns 0, or -1
 * with an exception set (nothing counted: the profiler stays as it was). */
static int
fp_session_start(fp_session *s)
{
    int rc = 0;
    if (s->profiler == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the session has no profiler");
        return -1;
    }
    fp_session_lock(s);
    if (s->active == 0) {
        PyObject *r = PyObject_CallMethod(s->profiler, "enable", NULL);
        if (r == NULL)
            rc = -1;
        Py_XDECREF(r);
    }
    if (rc == 0)
        s->active++;
    PyThread_release_lock(s->lock);
    return rc;
}

/* Counts one open call or block less, disabling the profiler with the last, with FP_HEADROOM
 * frames beyond the recursion limit and the current exception set aside.  Returns 0, or -1
 * with disable()'s exception set (chained onto the one set aside). */
static int
fp_session_stop(fp_session *s)
{
    int rc = 0;
    fp_saved saved;
    fp_save(&saved);
    fp_session_lock(s);
    if (s->active > 0 && --s->active == 0 && s->profiler != NULL) {
        int limit = Py_GetRecursionLimit();
        Py_SetRecursionLimit(limit + FP_HEADROOM);
        PyObject *r = fp_call_method_direct(s->profiler, "disable");
        Py_SetRecursionLimit(limit);
        if (r == NULL)
            rc = -1;
        Py_XDECREF(r);
    }
    PyThread_release_lock(s->lock);
    fp_restore(&saved);
    return rc;
}

/* Calls self.<name>() (a hook of the Python subclass, run with the profiler off) when the
 * session has no open call left and the hook exists, with the current exception set aside.
 * Returns 0, or -1 with the hook's exception set (chained onto the one set aside). */
static int
fp_session_ended(fp_session *s, const char *name)
{
    if (s->active != 0)
        return 0;
    int rc = 0;
    fp_saved saved;
    fp_save(&saved);
    PyObject *r = PyObject_CallMethod((PyObject *)s, name, NULL);
    if (r == NULL)
        rc = -1;
    Py_XDECREF(r);
    fp_restore(&saved);
    return rc;
}

/* _start(): counts a call, enabling the profiler for the first.  Returns None or NULL. */
static PyObject *
fp_session_py_start(PyObject *self, FP_UNUSED PyObject *unused)
{
    if (fp_session_start((fp_session *)self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _stop(): counts a call less, disabling the profiler with the last.  Returns None or NULL. */
static PyObject *
fp_session_py_stop(PyObject *self, FP_UNUSED PyObject *unused)
{
    if (fp_session_stop((fp_session *)self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* __enter__(): _start(), then returns the profiler (a new reference), or NULL. */
static PyObject *
fp_session_enter(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_session *s = (fp_session *)self;
    if (fp_session_start(s) < 0)
        return NULL;
    return Py_NewRef(s->profiler);
}

/* __exit__(*exc_info): _stop(), then self._block_ended() once no call is open; when _stop()
 * failed (the profiler's disable() raised), self._block_failed() instead where the subclass
 * defines it (to release what it started beside the profiler).  Returns None (the block's
 * exception goes on), or NULL. */
static PyObject *
fp_session_exit(PyObject *self, FP_UNUSED PyObject *args)
{
    fp_session *s = (fp_session *)self;
    if (fp_session_stop(s) < 0) {
        fp_saved saved; /* the lookup runs with no exception set */
        fp_save(&saved);
        int has = PyObject_HasAttrString((PyObject *)Py_TYPE(self), "_block_failed");
        fp_restore(&saved);
        if (has)
            (void)fp_session_ended(s, "_block_failed"); /* chains onto disable()'s error */
        return NULL;
    }
    if (fp_session_ended(s, "_block_ended") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _active: open calls and blocks.  Returns an int. */
static PyObject *
fp_session_get_active(PyObject *self, FP_UNUSED void *closure)
{
    return PyLong_FromSsize_t(((fp_session *)self)->active);
}

/* tp_new: a session with no profiler and no open call.  Returns it, or NULL. */
static PyObject *
fp_session_new(PyTypeObject *type, FP_UNUSED PyObject *args, FP_UNUSED PyObject *kwds)
{
    fp_session *s = (fp_session *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    s->lock = PyThread_allocate_lock();
    if (s->lock == NULL) {
        Py_DECREF(s);
        return PyErr_NoMemory();
    }
    return (PyObject *)s;
}

/* GC: the profiler and the instance dict.  Returns the visitor's result. */
static int
fp_session_traverse(PyObject *self, visitproc visit, void *arg)
{
    fp_session *s = (fp_session *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(s->profiler);
    Py_VISIT(s->dict);
    return 0;
}

/* Returns 0 after dropping what GC may need to break. */
static int
fp_session_clear(PyObject *self)
{
    fp_session *s = (fp_session *)self;
    Py_CLEAR(s->profiler);
    Py_CLEAR(s->dict);
    return 0;
}

static void
fp_session_dealloc(PyObject *self)
{
    fp_session *s = (fp_session *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (s->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    fp_session_clear(self);
    if (s->lock != NULL)
        PyThread_free_lock(s->lock);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef fp_session_methods[] = {
    {"_start", fp_session_py_start, METH_NOARGS, "Count a call; the first enables."},
    {"_stop", fp_session_py_stop, METH_NOARGS, "Count a call less; the last disables."},
    {"__enter__", fp_session_enter, METH_NOARGS, "_start(); returns the profiler."},
    {"__exit__", fp_session_exit, METH_VARARGS, "_stop(); self._block_ended() at the last."},
    {NULL, NULL, 0, NULL},
};

/* See fp_profile.h. */
int
fp_session_is_own(const PyMethodDef *ml)
{
    /* __exit__ (a with statement calls it while on) and _stop (the async wrapper's) */
    return ml->ml_meth == fp_session_exit || ml->ml_meth == fp_session_py_stop;
}

static PyMemberDef fp_session_members[] = {
    {"profiler", T_OBJECT, offsetof(fp_session, profiler), 0, "What the session enables."},
    {"__dictoffset__", T_PYSSIZET, offsetof(fp_session, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(fp_session, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef fp_session_getset[] = {
    {"_active", fp_session_get_active, NULL, "Open calls and blocks.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fp_session_slots[] = {
    {Py_tp_doc, "The counted switch of fastprof.profile (ProfileSession's base)."},
    {Py_tp_new, fp_session_new},
    {Py_tp_dealloc, fp_session_dealloc},
    {Py_tp_traverse, fp_session_traverse},
    {Py_tp_clear, fp_session_clear},
    {Py_tp_methods, fp_session_methods},
    {Py_tp_members, fp_session_members},
    {Py_tp_getset, fp_session_getset},
    {0, NULL},
};

static PyType_Spec fp_session_spec = {
    .name = "fastprof._fastprof._Session",
    .basicsize = sizeof(fp_session),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = fp_session_slots,
};

/* _Guarded.__call__(*args, **kwargs): the session's _start(), the call, its _stop() (on every
 * exit, stack exhausted or not), then session._call_ended() once no call is open.  Returns
 * the call's result, or NULL with an exception set. */
static PyObject *
fp_guarded_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    fp_guarded *g = (fp_guarded *)self;
    fp_session *s = g->session;
    if (fp_session_start(s) < 0)
        return NULL;
    PyObject *r = PyObject_Call(g->func, args, kwargs);
    if (fp_session_stop(s) < 0 || fp_session_ended(s, "_call_ended") < 0)
        Py_CLEAR(r);
    return r;
}

/* _Guarded(session, func): the wrapper of a decorated callable.  Returns a new _Guarded, or
 * NULL with a TypeError. */
static PyObject *
fp_guarded_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *session, *func;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "_Guarded(session, func) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO:_Guarded", &session, &func))
        return NULL;
    PyObject *m = PyType_GetModule(type);
    if (m == NULL)
        return NULL;
    PyTypeObject *st = (PyTypeObject *)fp_state(m)->slots[FP_PART_PROFILE][FP_SLOT_SESSION_TYPE];
    if (!PyObject_TypeCheck(session, st)) {
        PyErr_Format(PyExc_TypeError, "session must be a fastprof.profile session, not %.80s",
                     Py_TYPE(session)->tp_name);
        return NULL;
    }
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError, "fastprof.profile decorates a callable, got %.80s",
                     Py_TYPE(func)->tp_name);
        return NULL;
    }
    fp_guarded *g = (fp_guarded *)type->tp_alloc(type, 0);
    if (g == NULL)
        return NULL;
    g->session = (fp_session *)Py_NewRef(session);
    g->func = Py_NewRef(func);
    return (PyObject *)g;
}

/* Binds the wrapper to an instance, as a function would.  Returns a new reference. */
static PyObject *
fp_guarded_get(PyObject *self, PyObject *obj, FP_UNUSED PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

/* session: the ProfileSession.  Returns a new reference. */
static PyObject *
fp_guarded_get_session(PyObject *self, FP_UNUSED void *closure)
{
    return Py_NewRef(((fp_guarded *)self)->session);
}

/* Returns the visitor's result over what the wrapper holds. */
static int
fp_guarded_traverse(PyObject *self, visitproc visit, void *arg)
{
    fp_guarded *g = (fp_guarded *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(g->session);
    Py_VISIT(g->func);
    Py_VISIT(g->dict);
    return 0;
}

/* Returns 0 after dropping what GC may need to break. */
static int
fp_guarded_clear(PyObject *self)
{
    fp_guarded *g = (fp_guarded *)self;
    Py_CLEAR(g->session);
    Py_CLEAR(g->func);
    Py_CLEAR(g->dict);
    return 0;
}

static void
fp_guarded_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fp_guarded_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* __reduce__(): pickled by reference, as a function is: its __qualname__.  Returns a str, or
 * NULL with an exception set. */
static PyObject *
fp_guarded_reduce(PyObject *self, FP_UNUSED PyObject *unused)
{
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef fp_guarded_methods[] = {
    {"__reduce__", fp_guarded_reduce, METH_NOARGS, "Pickled by its qualified name."},
    {NULL, NULL, 0, NULL},
};

/* repr: names the function wrapped.  Returns a str or NULL. */
static PyObject *
fp_guarded_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<fastprof.profile of %R>", ((fp_guarded *)self)->func);
}

static PyMemberDef fp_guarded_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(fp_guarded, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef fp_guarded_getset[] = {
    {"session", fp_guarded_get_session, NULL, "The fastprof.profile session.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fp_guarded_slots[] = {
    {Py_tp_doc, "A function profiled by fastprof.profile."},
    {Py_tp_new, fp_guarded_new},
    {Py_tp_call, fp_guarded_call},
    {Py_tp_descr_get, fp_guarded_get},
    {Py_tp_repr, fp_guarded_repr},
    {Py_tp_dealloc, fp_guarded_dealloc},
    {Py_tp_traverse, fp_guarded_traverse},
    {Py_tp_clear, fp_guarded_clear},
    {Py_tp_members, fp_guarded_members},
    {Py_tp_methods, fp_guarded_methods},
    {Py_tp_getset, fp_guarded_getset},
    {0, NULL},
};

static PyType_Spec fp_guarded_spec = {
    .name = "fastprof._fastprof._Guarded",
    .basicsize = sizeof(fp_guarded),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = fp_guarded_slots,
};

/* See fp_profile.h. */
int
fp_session_exec(PyObject *m)
{
    if (fp_add_type(m, FP_PART_PROFILE, FP_SLOT_SESSION_TYPE, &fp_session_spec, NULL) == NULL)
        return -1;
    if (fp_add_type(m, FP_PART_PROFILE, FP_SLOT_GUARDED_TYPE, &fp_guarded_spec, NULL) == NULL)
        return -1;
    return 0;
}
