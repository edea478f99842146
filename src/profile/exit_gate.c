/* exit_gate.c - the os._exit of a child of `fastprof run --subprocesses`: it stops the child's
 * profile, lets the child write it, then ends the process with the real os._exit.
 *
 * A wrapper written in Python would be a Python call of the profiled program (it, the write
 * function it calls and their builtins would show in the child's profile, above the program's
 * own call of os._exit).  The gate is a builtin that looks as the real one does to a profiler
 * ("<built-in method posix._exit>"), and it calls the profile's disable from C: a call made from
 * C reaches no profile hook, so the profile ends inside the program's own call of os._exit, as
 * a profile of that process by cProfile would, and what the write then runs is not recorded. */
#include "../common.h"

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

static PyMethodDef fp_gate_methods[] = {
    {"_exit_gate", fp_exit_gate, METH_VARARGS,
     "_exit_gate(stop, before, exit): an os._exit that calls stop() and before() from C "
     "(unseen by the profilers), then exit."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_exit_gate_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_gate_methods);
}
