/* session.c - the counted switch behind @fastprof.profile and `with fastprof.profile()`:
 * fastprof._fastprof._Session (the base of fastprof.profile.ProfileSession), _Guarded, the
 * wrapper of a decorated function, and _GuardedCall, what a decorated coroutine function's call
 * returns (an awaitable that steps the user's coroutine).  They run in C so that none of fastprof's
 * own frames runs while the profiler is on (a report shows the user's code alone), and so that the
 * exit path turns the profiler off on an exhausted stack too (a RecursionError): the profiler's
 * disable() is called with headroom on the recursion limit, a builtin one without the
 * interpreter's recursion check. */
#include "fp_profile.h"

#include <pythread.h>
#include <structmember.h>

/* Frames the exit path may use beyond the recursion limit. */
#define FP_HEADROOM 100

typedef struct fp_session {
    PyObject_HEAD PyObject *profiler; /* what enable() and disable() are called on */
    Py_ssize_t active;                /* open calls and blocks; the profiler is on while > 0 */
    PyThread_type_lock lock;          /* serialises the switch between threads */
    unsigned long owner;              /* the thread holding lock, 0 when none (under the GIL) */
    PyObject *dict;
    PyObject *weakreflist;
} fp_session;

typedef struct fp_guarded {
    PyObject_HEAD fp_session *session; /* strong */
    PyObject *func;                    /* strong: the decorated callable */
    PyObject *dict;                    /* functools.update_wrapper's attributes and the user's */
    PyObject *call_type;               /* strong: _GuardedCall for a coroutine function, or NULL */
} fp_guarded;

/* One call of a decorated coroutine function: the session is on from its first step to its
 * last, and no frame of fastprof's runs in between (a Python wrapper coroutine would show in
 * the profile once per resume). */
typedef struct fp_gcall {
    PyObject_HEAD fp_session *session; /* strong */
    PyObject *inner;                   /* strong: the iterator awaited; NULL once finished */
    PyObject *coro;                    /* strong: what the function returned (its cr_* and names) */
    int started;                       /* its first step counted a call of the session */
    int running;                       /* a step is under way (steps do not nest) */
} fp_gcall;

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

/* Takes the session's lock, letting other threads run while it waits.  Returns 0 once
 * taken, or 1 when the calling thread holds it already: a signal handler or a finalizer run
 * inside the switch's enable() or disable() called the session again; it must neither wait
 * for itself nor switch in the middle of that switch (nothing is taken then). */
static int
fp_session_lock(fp_session *s)
{
    unsigned long me = PyThread_get_thread_ident();
    if (s->owner == me)
        return 1;
    if (!PyThread_acquire_lock(s->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(s->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    s->owner = me;
    return 0;
}

/* Releases the lock fp_session_lock took (not when it returned 1).  Returns nothing. */
static void
fp_session_unlock(fp_session *s, int nested)
{
    if (nested)
        return;
    s->owner = 0;
    PyThread_release_lock(s->lock);
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
    int nested = fp_session_lock(s);
    if (s->active == 0 && !nested) { /* nested: the switch under way settles it */
        PyObject *r = PyObject_CallMethod(s->profiler, "enable", NULL);
        if (r == NULL)
            rc = -1;
        Py_XDECREF(r);
    }
    if (rc == 0)
        s->active++;
    fp_session_unlock(s, nested);
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
    int nested = fp_session_lock(s);
    if (s->active > 0 && --s->active == 0 && s->profiler != NULL && !nested) {
        int limit = Py_GetRecursionLimit();
        Py_SetRecursionLimit(limit + FP_HEADROOM);
        PyObject *r = fp_call_method_direct(s->profiler, "disable");
        Py_SetRecursionLimit(limit);
        if (r == NULL)
            rc = -1;
        Py_XDECREF(r);
    }
    fp_session_unlock(s, nested);
    fp_restore(&saved);
    return rc;
}

/* Calls self.<name>() (a hook of the Python subclass, run with the profiler off) when the
 * session has no open call left and the hook is not None (a session with nothing to do then
 * sets it to None, so that no frame of it runs under another session's profiler), with the
 * current exception set aside.  Returns 0, or -1 with the hook's exception set (chained onto
 * the one set aside). */
static int
fp_session_ended(fp_session *s, const char *name)
{
    if (s->active != 0)
        return 0;
    int rc = 0;
    fp_saved saved;
    fp_save(&saved);
    PyObject *hook = PyObject_GetAttrString((PyObject *)s, name);
    PyObject *r = hook == NULL || hook == Py_None ? Py_XNewRef(hook) : PyObject_CallNoArgs(hook);
    if (r == NULL)
        rc = -1;
    Py_XDECREF(r);
    Py_XDECREF(hook);
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

/* -- _GuardedCall: one call of a decorated coroutine function ------------------------------ */

enum { FP_STEP_SEND, FP_STEP_THROW, FP_STEP_CLOSE };

/* After a step of the inner iterator failed: when the exception is StopIteration (the
 * iterator returned), clears it and sets *out to its value.  Returns 1 then, else -1 with the
 * exception left set. */
static int
fp_call_stopped(PyObject **out)
{
    if (!PyErr_ExceptionMatches(PyExc_StopIteration))
        return -1;
#if FP_PY312
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *t, *exc, *tb;
    PyErr_Fetch(&t, &exc, &tb);
    PyErr_NormalizeException(&t, &exc, &tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
#endif
    *out = exc == NULL ? NULL : PyObject_GetAttrString(exc, "value");
    Py_XDECREF(exc);
    if (*out == NULL) {
        PyErr_Clear();
        *out = Py_NewRef(Py_None);
    }
    return 1;
}

/* Raises the exception that throw(*args) names, as a finished coroutine does.  Returns -1. */
static int
fp_call_raise_thrown(PyObject *args)
{
    PyObject *typ = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0) : Py_None;
    if (PyExceptionInstance_Check(typ))
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    else if (PyExceptionClass_Check(typ))
        PyErr_SetObject(typ, PyTuple_GET_SIZE(args) > 1 ? PyTuple_GET_ITEM(args, 1) : NULL);
    else
        PyErr_SetString(PyExc_TypeError,
                        "throw() expects an exception type or instance as its first argument");
    return -1;
}

/* One step of the inner iterator: send(arg), throw(*arg) or close().  Returns 0 with *out the
 * value it yielded, 1 with *out the value it returned (None for close), or -1 with an
 * exception set (*out NULL).  *out is a new reference. */
static int
fp_call_inner_step(PyObject *inner, int how, PyObject *arg, PyObject **out)
{
    *out = NULL;
    if (how == FP_STEP_SEND) {
#if FP_PY310
        PySendResult r = PyIter_Send(inner, arg, out);
        return r == PYGEN_NEXT ? 0 : r == PYGEN_RETURN ? 1 : -1;
#else
        *out = PyObject_CallMethod(inner, "send", "(O)", arg);
        return *out != NULL ? 0 : fp_call_stopped(out);
#endif
    }
    PyObject *meth = PyObject_GetAttrString(inner, how == FP_STEP_THROW ? "throw" : "close");
    if (meth == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear(); /* an awaitable without throw() or close(): as `yield from` treats it */
        if (how == FP_STEP_THROW)
            return fp_call_raise_thrown(arg);
        *out = Py_NewRef(Py_None);
        return 1;
    }
    *out = how == FP_STEP_THROW ? PyObject_Call(meth, arg, NULL) : PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (*out == NULL)
        return fp_call_stopped(out);
    if (how == FP_STEP_CLOSE) {
        Py_SETREF(*out, Py_NewRef(Py_None));
        return 1;
    }
    return 0;
}

/* One step of call c: its first send() turns the session on (a throw() or close() before it
 * runs none of the coroutine, so the session stays as it was), and the step that ends the
 * coroutine (a return or an exception) turns it off and then calls the session's
 * _call_ended().  Returns as fp_call_inner_step: 0 (yielded), 1 (returned) or -1 with an
 * exception set; *out is a new reference or NULL. */
static int
fp_call_step(fp_gcall *c, int how, PyObject *arg, PyObject **out)
{
    *out = NULL;
    if (c->inner == NULL) {
        if (how == FP_STEP_CLOSE) {
            *out = Py_NewRef(Py_None);
            return 1;
        }
        if (how == FP_STEP_THROW)
            return fp_call_raise_thrown(arg);
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        return -1;
    }
    if (c->running) { /* the coroutine stepped itself (or closed itself) from inside */
        PyErr_SetString(PyExc_ValueError, "coroutine already executing");
        return -1;
    }
    if (!c->started && how == FP_STEP_SEND) {
        if (fp_session_start(c->session) < 0)
            return -1;
        c->started = 1;
    }
    PyObject *inner = Py_NewRef(c->inner); /* kept alive through the step */
    c->running = 1;
    int r = fp_call_inner_step(inner, how, arg, out);
    c->running = 0;
    Py_DECREF(inner);
    if (r == 0)
        return 0;
    Py_CLEAR(c->inner);
    if (c->started) {
        c->started = 0;
        if (fp_session_stop(c->session) < 0 || fp_session_ended(c->session, "_call_ended") < 0) {
            Py_CLEAR(*out);
            r = -1;
        }
    }
    return r;
}

/* Sets StopIteration(value) as a coroutine's return does.  Returns NULL. */
static PyObject *
fp_call_set_stop(PyObject *value)
{
    if (value == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
    } else {
        PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, value);
        if (e != NULL) {
            PyErr_SetObject(PyExc_StopIteration, e);
            Py_DECREF(e);
        }
    }
    Py_DECREF(value);
    return NULL;
}

/* send(value): one step.  Returns the value yielded, or NULL with StopIteration (returned) or
 * the coroutine's exception set. */
static PyObject *
fp_call_send(PyObject *self, PyObject *value)
{
    PyObject *out;
    int r = fp_call_step((fp_gcall *)self, FP_STEP_SEND, value, &out);
    return r == 1 ? fp_call_set_stop(out) : out;
}

/* __next__: send(None); returns as send(). */
static PyObject *
fp_call_next(PyObject *self)
{
    return fp_call_send(self, Py_None);
}

/* throw(type[, value[, tb]]) or throw(exc): raises it at the coroutine's await.  Returns as
 * send(). */
static PyObject *
fp_call_throw(PyObject *self, PyObject *args)
{
    PyObject *out;
    if (PyTuple_GET_SIZE(args) < 1 || PyTuple_GET_SIZE(args) > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes from 1 to 3 arguments");
        return NULL;
    }
    int r = fp_call_step((fp_gcall *)self, FP_STEP_THROW, args, &out);
    return r == 1 ? fp_call_set_stop(out) : out;
}

/* close(): closes the coroutine.  Returns None, or NULL with an exception set. */
static PyObject *
fp_call_close(PyObject *self, FP_UNUSED PyObject *unused)
{
    PyObject *out;
    int r = fp_call_step((fp_gcall *)self, FP_STEP_CLOSE, NULL, &out);
    if (r == 0) { /* it yielded on GeneratorExit: close() gives no value back */
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "coroutine ignored GeneratorExit");
        return NULL;
    }
    return out;
}

#if FP_PY310
/* am_send: send(arg) without StopIteration.  Returns PYGEN_NEXT (*result yielded),
 * PYGEN_RETURN (*result returned) or PYGEN_ERROR (exception set, *result NULL). */
static PySendResult
fp_call_am_send(PyObject *self, PyObject *arg, PyObject **result)
{
    int r = fp_call_step((fp_gcall *)self, FP_STEP_SEND, arg, result);
    return r == 0 ? PYGEN_NEXT : r == 1 ? PYGEN_RETURN : PYGEN_ERROR;
}
#endif

/* Whether call c is suspended at an await, its first awaiter pending: for a coroutine, as
 * CPython tells (its cr_await is set), else once a step ran and the iterator has not ended.
 * Returns 1 or 0, or -1 with an exception set. */
static int
fp_call_is_awaited(fp_gcall *c)
{
    if (c->inner == NULL || c->running)
        return 0; /* finished: the step says so; running: the step refuses it */
    if (!PyCoro_CheckExact(c->inner))
        return c->started;
    PyObject *yf = PyObject_GetAttrString(c->inner, "cr_await");
    if (yf == NULL)
        return -1;
    int r = yf != Py_None;
    Py_DECREF(yf);
    return r;
}

/* __await__(): the call itself is the iterator awaited; while an await of it is pending, a
 * second one raises RuntimeError, as for a coroutine (a finished call raises at its first
 * step, as a finished coroutine does).  Returns a new reference, or NULL with an exception
 * set. */
static PyObject *
fp_call_await(PyObject *self)
{
    int awaited = fp_call_is_awaited((fp_gcall *)self);
    if (awaited < 0)
        return NULL;
    if (awaited) {
        PyErr_SetString(PyExc_RuntimeError, "coroutine is being awaited already");
        return NULL;
    }
    return Py_NewRef(self);
}

/* What an attribute of the coroutine gives where what the function returned has none (an
 * awaitable that is not a coroutine). */
enum { FP_CR_NONE, FP_CR_RUNNING, FP_CR_SUSPENDED, FP_CR_TYPE_NAME };

/* One read-only attribute of the coroutine a call stands for (the closure of its getter). */
typedef struct fp_cr_attr {
    const char *name;
    int fallback; /* FP_CR_* */
} fp_cr_attr;

static fp_cr_attr fp_cr_name = {"__name__", FP_CR_TYPE_NAME};
static fp_cr_attr fp_cr_qualname = {"__qualname__", FP_CR_TYPE_NAME};
static fp_cr_attr fp_cr_frame = {"cr_frame", FP_CR_NONE};
static fp_cr_attr fp_cr_await = {"cr_await", FP_CR_NONE};
static fp_cr_attr fp_cr_code = {"cr_code", FP_CR_NONE};
static fp_cr_attr fp_cr_origin = {"cr_origin", FP_CR_NONE};
static fp_cr_attr fp_cr_running = {"cr_running", FP_CR_RUNNING};
#if FP_PY311
static fp_cr_attr fp_cr_suspended = {"cr_suspended", FP_CR_SUSPENDED};
#endif

/* The default of attribute a for call c (see FP_CR_*).  Returns a new reference or NULL. */
static PyObject *
fp_call_cr_default(fp_gcall *c, const fp_cr_attr *a)
{
    switch (a->fallback) {
    case FP_CR_RUNNING:
        return PyBool_FromLong(c->running);
    case FP_CR_SUSPENDED:
        return PyBool_FromLong(c->started && c->inner != NULL && !c->running);
    case FP_CR_TYPE_NAME:
        return PyUnicode_FromString(c->coro != NULL ? Py_TYPE(c->coro)->tp_name : "coroutine");
    default:
        Py_RETURN_NONE;
    }
}

/* cr_frame, cr_await, cr_code, cr_origin, cr_running, cr_suspended (3.11+), __name__ and
 * __qualname__: the coroutine's, read from what the function returned (asyncio's task repr
 * and get_stack() and inspect.getcoroutinestate() read them), or a default (see FP_CR_*).
 * Returns a new reference, or NULL with an exception set. */
static PyObject *
fp_call_get_cr(PyObject *self, void *closure)
{
    fp_gcall *c = (fp_gcall *)self;
    const fp_cr_attr *a = closure;
    if (c->coro != NULL) {
        PyObject *v = PyObject_GetAttrString(c->coro, a->name);
        if (v != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
            return v;
        PyErr_Clear();
    }
    return fp_call_cr_default(c, a);
}

/* repr: names the coroutine.  Returns a str or NULL. */
static PyObject *
fp_call_repr(PyObject *self)
{
    PyObject *name = fp_call_get_cr(self, &fp_cr_qualname);
    if (name == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<fastprof.profile coroutine %S>", name);
    Py_DECREF(name);
    return r;
}

/* tp_finalize: a call dropped while its coroutine is suspended is closed, as a coroutine is,
 * so the session counts it off.  Returns nothing (an error is reported as unraisable). */
static void
fp_call_finalize(PyObject *self)
{
    fp_gcall *c = (fp_gcall *)self;
    if (c->inner == NULL || !c->started)
        return;
    fp_saved saved;
    fp_save(&saved);
    PyObject *out = fp_call_close(self, NULL);
    if (out == NULL)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(out);
    fp_restore(&saved);
}

/* Returns the visitor's result over what the call holds. */
static int
fp_call_traverse(PyObject *self, visitproc visit, void *arg)
{
    fp_gcall *c = (fp_gcall *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(c->session);
    Py_VISIT(c->inner);
    Py_VISIT(c->coro);
    return 0;
}

/* Returns 0 after dropping what GC may need to break. */
static int
fp_call_clear(PyObject *self)
{
    fp_gcall *c = (fp_gcall *)self;
    Py_CLEAR(c->session);
    Py_CLEAR(c->inner);
    Py_CLEAR(c->coro);
    return 0;
}

static void
fp_call_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0)
        return; /* resurrected */
    PyObject_GC_UnTrack(self);
    fp_call_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef fp_call_methods[] = {
    {"send", fp_call_send, METH_O, "Resume the coroutine with a value."},
    {"throw", fp_call_throw, METH_VARARGS, "Raise an exception at the coroutine's await."},
    {"close", fp_call_close, METH_NOARGS, "Close the coroutine."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef fp_call_getset[] = {
    {"__name__", fp_call_get_cr, NULL, "The coroutine's name.", &fp_cr_name},
    {"__qualname__", fp_call_get_cr, NULL, "The coroutine's qualified name.", &fp_cr_qualname},
    {"cr_frame", fp_call_get_cr, NULL, "The coroutine's frame (None once finished).", &fp_cr_frame},
    {"cr_await", fp_call_get_cr, NULL, "What the coroutine awaits, or None.", &fp_cr_await},
    {"cr_code", fp_call_get_cr, NULL, "The coroutine's code object.", &fp_cr_code},
    {"cr_origin", fp_call_get_cr, NULL, "Where the coroutine was created, or None.", &fp_cr_origin},
    {"cr_running", fp_call_get_cr, NULL, "Whether the coroutine runs now.", &fp_cr_running},
#if FP_PY311
    {"cr_suspended", fp_call_get_cr, NULL, "Whether it is suspended at an await.",
     &fp_cr_suspended},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fp_call_slots[] = {
    {Py_tp_doc, "A call of a coroutine function profiled by fastprof.profile."},
    {Py_am_await, fp_call_await},
#if FP_PY310
    {Py_am_send, fp_call_am_send},
#endif
    {Py_tp_iternext, fp_call_next},
    {Py_tp_repr, fp_call_repr},
    {Py_tp_finalize, fp_call_finalize},
    {Py_tp_dealloc, fp_call_dealloc},
    {Py_tp_traverse, fp_call_traverse},
    {Py_tp_clear, fp_call_clear},
    {Py_tp_methods, fp_call_methods},
    {Py_tp_getset, fp_call_getset},
    {0, NULL},
};

static PyType_Spec fp_call_spec = {
    .name = "fastprof._fastprof._GuardedCall",
    .basicsize = sizeof(fp_gcall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = fp_call_slots,
};

/* The iterator that awaiting res steps: res itself for a coroutine, else what its __await__
 * returns.  Returns a new reference, or NULL with a TypeError naming func. */
static PyObject *
fp_call_awaited(PyObject *func, PyObject *res)
{
    if (PyCoro_CheckExact(res))
        return Py_NewRef(res);
    PyAsyncMethods *am = Py_TYPE(res)->tp_as_async;
    if (am == NULL || am->am_await == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "fastprof.profile: coroutine function %R returned %.80s, not an awaitable",
                     func, Py_TYPE(res)->tp_name);
        return NULL;
    }
    return am->am_await(res);
}

/* A new _GuardedCall of type tp stepping what func(*args, **kwargs) returned, the session not
 * yet on.  Returns it, or NULL with an exception set. */
static PyObject *
fp_call_new(PyTypeObject *tp, fp_guarded *g, PyObject *args, PyObject *kwargs)
{
    fp_gcall *c = NULL;
    PyObject *inner = NULL;
    PyObject *res = PyObject_Call(g->func, args, kwargs);
    if (res == NULL)
        goto error;
    inner = fp_call_awaited(g->func, res);
    if (inner == NULL)
        goto error;
    c = (fp_gcall *)tp->tp_alloc(tp, 0);
    if (c == NULL)
        goto error;
    c->session = (fp_session *)Py_NewRef(g->session);
    c->inner = inner;
    c->coro = res;
    return (PyObject *)c;
error:
    Py_XDECREF(c);
    Py_XDECREF(inner);
    Py_XDECREF(res);
    return NULL;
}

/* See fp_profile.h. */
int
fp_session_is_own(const PyMethodDef *ml)
{
    /* __exit__ (a with statement calls it while on), _stop, and the steps of a decorated
     * coroutine's call when Python code makes them (a task written in Python, a driver loop) */
    return ml->ml_meth == fp_session_exit || ml->ml_meth == fp_session_py_stop ||
           ml->ml_meth == fp_call_send || ml->ml_meth == fp_call_throw ||
           ml->ml_meth == fp_call_close;
}

/* _Guarded.__call__(*args, **kwargs): the session's _start(), the call, its _stop() (on every
 * exit, stack exhausted or not), then session._call_ended() once no call is open.  For a
 * coroutine function, a _GuardedCall of what the call returned (see fp_call_step).  Returns
 * the call's result, or NULL with an exception set. */
static PyObject *
fp_guarded_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    fp_guarded *g = (fp_guarded *)self;
    fp_session *s = g->session;
    if (g->call_type != NULL) /* a coroutine function: the session starts at its first step */
        return fp_call_new((PyTypeObject *)g->call_type, g, args, kwargs);
    if (fp_session_start(s) < 0)
        return NULL;
    PyObject *r = PyObject_Call(g->func, args, kwargs);
    if (fp_session_stop(s) < 0 || fp_session_ended(s, "_call_ended") < 0)
        Py_CLEAR(r);
    return r;
}

/* _Guarded(session, func, coroutine=False): the wrapper of a decorated callable (with
 * coroutine true, of a coroutine function: its calls return a _GuardedCall).  Returns a new
 * _Guarded, or NULL with a TypeError. */
static PyObject *
fp_guarded_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *session, *func;
    int coroutine = 0;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError,
                        "_Guarded(session, func, coroutine=False) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO|p:_Guarded", &session, &func, &coroutine))
        return NULL;
    PyObject *m = PyType_GetModule(type);
    if (m == NULL)
        return NULL;
    PyTypeObject *st = fp_state(m)->session_type;
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
    PyObject *call_type = coroutine ? Py_NewRef(fp_state(m)->guarded_call_type) : NULL;
    fp_guarded *g = (fp_guarded *)type->tp_alloc(type, 0);
    if (g == NULL) {
        Py_XDECREF(call_type);
        return NULL;
    }
    g->session = (fp_session *)Py_NewRef(session);
    g->func = Py_NewRef(func);
    g->call_type = call_type;
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
    Py_VISIT(g->call_type);
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
    Py_CLEAR(g->call_type);
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
    if (fp_add_type(m, &fp_state(m)->session_type, &fp_session_spec, NULL) == NULL)
        return -1;
    if (fp_add_type(m, &fp_state(m)->guarded_type, &fp_guarded_spec, NULL) == NULL)
        return -1;
    if (fp_add_type(m, &fp_state(m)->guarded_call_type, &fp_call_spec, NULL) == NULL)
        return -1;
    return 0;
}
