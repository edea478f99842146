/* floors.c - what the benchmarks measure fastprof's hooks against: callbacks that do nothing.
 * Not used by the profilers; benchmarks/floors.py registers one for the events a profiler
 * takes, so that the interpreter's own cost of delivering those events shows apart from what
 * fastprof's callbacks do with them.  The callback is called the way fastprof's hooks are
 * (through its own vectorcall, without a builtin function's argument handling), so what lies
 * between it and a hook is the hook's work alone. */
#include "common.h"

#include <structmember.h>

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

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_floors_exec(PyObject *m)
{
    if (fp_add_type(m, &fp_state(m)->empty_callback_type, &fp_empty_spec, NULL) == NULL)
        return -1;
    return 0;
}
