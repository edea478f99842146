/* exit_gate.c - the os._exit of a child of `fastprof run --subprocesses`: it stops the child's
 * profile, lets the child write it, then ends the process with the real os._exit; and the
 * same stop-then-write for the child's atexit callback and SIGTERM handler (_stop_first).
 *
 * A wrapper written in Python would be a Python call of the profiled program (it, the write
 * function it calls and their builtins would show in the child's profile, above the program's
 * own call of os._exit).  The gate is a builtin that looks as the real one does to a profiler
 * ("<built-in method posix._exit>"), and it calls the profile's disable from C: a call made from
 * C reaches no profile hook, so the profile ends inside the program's own call of os._exit, as
 * a profile of that process by cProfile would, and what the write then runs is not recorded. */
#include "../common.h"

#include <frameobject.h>

/* Calls fn() (when it is not None) and drops its result or error: the process is ending, and
 * the write reports its own failures.  Returns nothing. */
static void
fp_gate_step(PyObject *fn)
{
    if (fn == Py_None)
        return;
    PyObject *res = PyObject_CallNoArgs(fn);
    if (res == NULL)
        PyErr_Clear();
    Py_XDECREF(res);
}

/* The gate's call: self is (stop, before, exit).  Runs stop(), then before(), then returns
 * exit(*args, **kwargs), which ends the process or raises as os._exit does (a bad status). */
static PyObject *
fp_gate_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    fp_gate_step(PyTuple_GET_ITEM(self, 0));
    fp_gate_step(PyTuple_GET_ITEM(self, 1));
    return PyObject_Call(PyTuple_GET_ITEM(self, 2), args, kwargs);
}

static PyMethodDef fp_gate_def = {
    "_exit",
    (PyCFunction)(void (*)(void))fp_gate_call,
    METH_VARARGS | METH_KEYWORDS,
    "_exit(status): writes this process's profile (fastprof run --subprocesses), then exits "
    "with status at once, as os._exit does.",
};

/* _exit_gate(stop, before, exit).  Returns a new builtin named "_exit" of exit's module that
 * calls stop() and before() (each a callable or None), then exit; NULL with TypeError when
 * an argument is of the wrong kind. */
static PyObject *
fp_exit_gate(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *stop, *before, *exit_fn, *state = NULL, *module = NULL, *res = NULL;
    if (!PyArg_ParseTuple(args, "OOO:_exit_gate", &stop, &before, &exit_fn))
        return NULL;
    if ((stop != Py_None && !PyCallable_Check(stop)) ||
        (before != Py_None && !PyCallable_Check(before)) || !PyCallable_Check(exit_fn)) {
        PyErr_SetString(PyExc_TypeError,
                        "_exit_gate: stop and before must be callables or None, exit a callable");
        return NULL;
    }
    module = PyObject_GetAttrString(exit_fn, "__module__");
    if (module == NULL)
        PyErr_Clear();
    if (module == NULL || !PyUnicode_Check(module)) {
        Py_XDECREF(module);
        module = PyUnicode_FromString("posix");
        if (module == NULL)
            goto error;
    }
    state = PyTuple_Pack(3, stop, before, exit_fn);
    if (state == NULL)
        goto error;
    res = PyCFunction_NewEx(&fp_gate_def, state, module);
error:
    Py_XDECREF(state);
    Py_XDECREF(module);
    return res;
}

/* Whether a _stop_first builtin (its state self) called with args (signum, frame or None) and
 * no keywords, as a signal handler is, is signum's handler now.  A program that installed its own
 * handler over it and calls it as "the previous handler" (signal.getsignal gave it fastprof's,
 * where without fastprof it would have been SIG_DFL, which no program calls) gets 0.  Returns 1 for
 * any other call (atexit's, no arguments) or when it cannot tell (the error cleared). */
static int
fp_stop_first_is_current(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 2 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) ||
        !PyLong_Check(PyTuple_GET_ITEM(args, 0)))
        return 1;
    PyObject *frame = PyTuple_GET_ITEM(args, 1);
    if (frame != Py_None && !Py_IS_TYPE(frame, &PyFrame_Type))
        return 1; /* not a signal handler's call: (signum, frame or None) */
    PyObject *now = NULL, *sig = PyImport_ImportModule("_signal");
    if (sig != NULL)
        now = PyObject_CallMethod(sig, "getsignal", "O", PyTuple_GET_ITEM(args, 0));
    Py_XDECREF(sig);
    if (now == NULL) {
        PyErr_Clear();
        return 1;
    }
    int current = PyCFunction_Check(now) && PyCFunction_GET_SELF(now) == self;
    Py_DECREF(now);
    return current;
}

/* The call of a _stop_first builtin: self is (cell, then).  Calls cell[0]() when it is not
 * None (a profile's disable, from C), then returns then(*args, **kwargs); returns None at
 * once when a program's own signal handler calls it as the handler it replaced (see
 * fp_stop_first_is_current): as without fastprof, that handler's own code decides what
 * follows. */
static PyObject *
fp_stop_first_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (!fp_stop_first_is_current(self, args, kwargs))
        Py_RETURN_NONE;
    PyObject *cell = PyTuple_GET_ITEM(self, 0);
    PyObject *stop = PyList_GET_SIZE(cell) > 0 ? PyList_GET_ITEM(cell, 0) : Py_None;
    Py_INCREF(stop); /* the cell may change while stop runs */
    fp_gate_step(stop);
    Py_DECREF(stop);
    return PyObject_Call(PyTuple_GET_ITEM(self, 1), args, kwargs);
}

static PyMethodDef fp_stop_first_def = {
    "_stop_first",
    (PyCFunction)(void (*)(void))fp_stop_first_call,
    METH_VARARGS | METH_KEYWORDS,
    "Stops this process's profile of fastprof run --subprocesses, then writes it.",
};

/* _stop_first(cell, then).  Returns a new builtin that, each time it is called, calls cell[0]
 * from C when it is not None, then then(*args, **kwargs): a callback for atexit or a signal
 * handler whose own work no profile records (a builtin called from C reaches no profile hook,
 * and the profile is stopped before then runs).  NULL with TypeError when cell is not a list or
 * then not callable. */
static PyObject *
fp_stop_first(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *cell, *then, *state, *res;
    if (!PyArg_ParseTuple(args, "O!O:_stop_first", &PyList_Type, &cell, &then))
        return NULL;
    if (!PyCallable_Check(then)) {
        PyErr_SetString(PyExc_TypeError, "_stop_first: then must be callable");
        return NULL;
    }
    state = PyTuple_Pack(2, cell, then);
    if (state == NULL)
        return NULL;
    res = PyCFunction_NewEx(&fp_stop_first_def, state, NULL);
    Py_DECREF(state);
    return res;
}

static PyMethodDef fp_gate_methods[] = {
    {"_exit_gate", fp_exit_gate, METH_VARARGS,
     "_exit_gate(stop, before, exit): an os._exit that calls stop() and before() from C "
     "(unseen by the profilers), then exit."},
    {"_stop_first", fp_stop_first, METH_VARARGS,
     "_stop_first(cell, then): a callable that calls cell[0]() from C (when not None), then "
     "then(*args)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_exit_gate_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_gate_methods);
}
