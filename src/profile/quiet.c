/* quiet.c - fastprof._fastprof._Quiet: a function wrapper (bound as a method when it is a class
 * attribute) that runs its function with the calling thread's tracing and profiling
 * suspended, as CPython suspends them while a hook runs.  fastprof's readers of a live
 * profiler (Profile.getstats, Stats(profile), profile.tree(), ...) are Python code: without
 * this, reading an enabled profiler records the reader's own calls into the profile being
 * read.  Calling a _Quiet is no call of a C function (no c_call or CALL event names it), so
 * the read leaves no trace in the profile at all; other threads record as before. */
#include "common.h"

#include <structmember.h>

/* A wrapped function, and the object it is bound to (NULL: unbound). */
typedef struct fp_quiet {
    PyObject_HEAD PyObject *func;
    PyObject *self;
    vectorcallfunc vectorcall;
} fp_quiet;

/* See common.h. */
void
fp_quiet_enter(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyThreadState_EnterTracing(ts);
#else
    ts->tracing++; /* what call_trace tests before calling a hook (3.9, 3.10) */
#endif
}

/* See common.h. */
void
fp_quiet_leave(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyThreadState_LeaveTracing(ts);
#else
    ts->tracing--;
#endif
}

/* Calls the function (with the bound object first) with the hooks suspended.  Returns its
 * result, or NULL with an exception set. */
static PyObject *
fp_quiet_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    fp_quiet *q = (fp_quiet *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *result = NULL, *small[8], **all = small;
    PyThreadState *ts = PyThreadState_Get();
    if (q->self == NULL) {
        fp_quiet_enter(ts);
        result = PyObject_Vectorcall(q->func, args, nargsf, kwnames);
        fp_quiet_leave(ts);
        return result;
    }
    if (nargs + nkw + 1 > 8) {
        all = PyMem_Malloc(((size_t)(nargs + nkw) + 1) * sizeof(PyObject *));
        if (all == NULL)
            return PyErr_NoMemory();
    }
    all[0] = q->self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        all[i + 1] = args[i];
    fp_quiet_enter(ts);
    result = PyObject_Vectorcall(q->func, all, (size_t)(nargs + 1), kwnames);
    fp_quiet_leave(ts);
    if (all != small)
        PyMem_Free(all);
    return result;
}

/* Returns a new _Quiet of func bound to self (NULL: unbound), or NULL with an exception set. */
static PyObject *
fp_quiet_make(PyTypeObject *type, PyObject *func, PyObject *self)
{
    fp_quiet *q = PyObject_GC_New(fp_quiet, type);
    if (q == NULL)
        return NULL;
    q->func = Py_NewRef(func);
    q->self = Py_XNewRef(self);
    q->vectorcall = fp_quiet_vectorcall;
    PyObject_GC_Track(q);
    return (PyObject *)q;
}

/* _Quiet(func).  Returns the wrapper, or NULL with a TypeError when func is not callable. */
static PyObject *
fp_quiet_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *func;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "_Quiet() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "_Quiet", 1, 1, &func))
        return NULL;
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError, "_Quiet wraps a callable, not %.80s", Py_TYPE(func)->tp_name);
        return NULL;
    }
    return fp_quiet_make(type, func, NULL);
}

/* The descriptor's get: the wrapper bound to obj, as a function becomes a method.  Returns a
 * new reference. */
static PyObject *
fp_quiet_get(PyObject *self, PyObject *obj, FP_UNUSED PyObject *type)
{
    fp_quiet *q = (fp_quiet *)self;
    if (obj == NULL || obj == Py_None || q->self != NULL)
        return Py_NewRef(self);
    return fp_quiet_make(Py_TYPE(self), q->func, obj);
}

/* Attributes not the wrapper's own (__doc__, __name__, __qualname__, __module__, ...) are
 * the function's, as functools.wraps would copy them.  Returns a new reference, or NULL with
 * AttributeError. */
static PyObject *
fp_quiet_getattro(PyObject *self, PyObject *name)
{
    PyObject *got = PyObject_GenericGetAttr(self, name);
    if (got != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return got;
    PyErr_Clear();
    return PyObject_GetAttr(((fp_quiet *)self)->func, name);
}

/* __doc__: the function's.  Returns a new reference, or NULL with an exception set. */
static PyObject *
fp_quiet_doc(PyObject *self, FP_UNUSED void *closure)
{
    return PyObject_GetAttrString(((fp_quiet *)self)->func, "__doc__");
}

/* GC: visits the references held.  Returns 0 or the visitor's result. */
static int
fp_quiet_traverse(PyObject *self, visitproc visit, void *arg)
{
    fp_quiet *q = (fp_quiet *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(q->func);
    Py_VISIT(q->self);
    return 0;
}

/* GC: drops the references held.  Returns 0. */
static int
fp_quiet_clear(PyObject *self)
{
    fp_quiet *q = (fp_quiet *)self;
    Py_CLEAR(q->func);
    Py_CLEAR(q->self);
    return 0;
}

/* Frees the wrapper.  Returns nothing. */
static void
fp_quiet_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fp_quiet_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* __wrapped__: the function wrapped, as a method of the object bound when there is one (so
 * that inspect.signature of a bound wrapper leaves self out, as of a bound method).  Returns a
 * new reference, or NULL with an exception set. */
static PyObject *
fp_quiet_wrapped(PyObject *self, FP_UNUSED void *closure)
{
    fp_quiet *q = (fp_quiet *)self;
    if (q->self == NULL)
        return Py_NewRef(q->func);
    return PyMethod_New(q->func, q->self);
}

static PyMemberDef fp_quiet_members[] = {
    {"__self__", T_OBJECT, offsetof(fp_quiet, self), READONLY, "The object bound, or None."},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(fp_quiet, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* No Py_tp_doc: the type's doc string would stand for its instances' __doc__, which is the
 * function's (_Quiet(func): func run with this thread's profiling and tracing suspended; a
 * method when a class attribute). */
static PyGetSetDef fp_quiet_getset[] = {
    {"__doc__", fp_quiet_doc, NULL, NULL, NULL},
    {"__wrapped__", fp_quiet_wrapped, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fp_quiet_slots[] = {
    {Py_tp_new, fp_quiet_new},           {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, fp_quiet_get},     {Py_tp_getattro, fp_quiet_getattro},
    {Py_tp_traverse, fp_quiet_traverse}, {Py_tp_clear, fp_quiet_clear},
    {Py_tp_dealloc, fp_quiet_dealloc},   {Py_tp_members, fp_quiet_members},
    {Py_tp_getset, fp_quiet_getset},     {0, NULL},
};

static PyType_Spec fp_quiet_spec = {
    .name = "fastprof._fastprof._Quiet",
    .basicsize = sizeof(fp_quiet),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = fp_quiet_slots,
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_quiet_exec(PyObject *m)
{
    PyTypeObject *type = NULL;
    if (fp_add_type(m, &type, &fp_quiet_spec, NULL) == NULL)
        return -1;
    Py_DECREF(type); /* the module holds it */
    return 0;
}
