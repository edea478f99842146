/* line_toggle.c - what the line profiler's enable() and disable() do for every registered
 * code object, in one C loop: a decorated function toggles the profiler on every outermost
 * call, so the per-code step costs what the interpreter's own work costs and no more.  Below
 * 3.12, also the sys.settrace put in place while the profiler is on. */
#include "line.h"

#include <time.h>

/* _unregistered(functions): returns a new list of the items of the sequence functions that
 * are Python functions whose __code__ is not registered in self (another line profiler, or a
 * reloader, replaced it since it was added), or NULL with an exception set.  One code-object
 * extra read per function. */
PyObject *
fp_line_unregistered(fp_ltracer *self, PyObject *functions)
{
    PyObject *out = NULL,
             *seq = PySequence_Fast(functions, "_unregistered(): functions must be a sequence");
    if (seq == NULL)
        goto error;
    out = PyList_New(0);
    if (out == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *f = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyFunction_Check(f) || fp_line_lookup(self, PyFunction_GET_CODE(f)) != NULL)
            continue;
        if (PyList_Append(out, f) < 0)
            goto error;
    }
    Py_DECREF(seq);
    return out;
error:
    Py_XDECREF(seq);
    Py_XDECREF(out);
    return NULL;
}

/* _set_local_events(set_local_events, tool, events): calls set_local_events(tool, code,
 * events) for every registered code, going on past a failure.  Returns None, or NULL with
 * the first failure's exception set. */
PyObject *
fp_line_set_local_events(fp_ltracer *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *first_type = NULL, *first_value = NULL, *first_tb = NULL;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "_set_local_events() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->nrecs; i++) {
        PyObject *call[3] = {args[1], self->recs[i]->code, args[2]};
        PyObject *res = PyObject_Vectorcall(args[0], call, 3, NULL);
        if (res != NULL) {
            Py_DECREF(res);
            continue;
        }
        if (first_type == NULL)
            PyErr_Fetch(&first_type, &first_value, &first_tb);
        else
            PyErr_Clear(); /* the first failure is the one reported */
    }
    if (first_type != NULL) {
        PyErr_Restore(first_type, first_value, first_tb);
        return NULL;
    }
    Py_RETURN_NONE;
}

#if !FP_PY312
/* Returns 1 when the exception set is the RuntimeError of Python 3.11 and below refusing a
 * trace function while another thread installs one (with an audit hook on), else 0.  Leaves
 * the exception set. */
static int
fp_line_settrace_refused(void)
{
    if (!PyErr_ExceptionMatches(PyExc_RuntimeError))
        return 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    PyObject *needle = PyUnicode_FromString("while another trace function is being installed");
    int refused =
        text != NULL && needle != NULL && PyUnicode_Find(text, needle, 0, PY_SSIZE_T_MAX, 1) >= 0;
    PyErr_Clear(); /* a failed str() or search: not the refusal */
    Py_XDECREF(text);
    Py_XDECREF(needle);
    PyErr_Restore(type, value, tb);
    return refused;
}

/* See line.h. */
int
fp_line_try_again(int attempt)
{
    if (attempt >= 200 || !fp_line_settrace_refused())
        return 0;
    PyErr_Clear();
    struct timespec pause = {0, 20000};
    Py_BEGIN_ALLOW_THREADS nanosleep(&pause, NULL);
    Py_END_ALLOW_THREADS return 1;
}

/* The sys.settrace a LineTracer's enable() puts in place below 3.12 (self: the sys.settrace it
 * stands for): turns line events back on in the calling thread's frames, then calls it.
 * Returns what it returns, or NULL with an exception set.  C, so that a tracer being
 * installed sees no frame of fastprof's. */
static PyObject *
fp_line_settrace_call(PyObject *prev, PyObject *const *args, Py_ssize_t nargs)
{
    fp_line_unmute_calling_thread();
    /* Python 3.11 and below refuse while another thread is inside sys.settrace with an audit
     * hook on (the line profiler switching, in its enable() or disable()): a thread starting
     * then (threading calls sys.settrace before its target) would die.  That other thread
     * finishes once this one lets it run. */
    PyObject *res;
    for (int attempt = 0; (res = PyObject_Vectorcall(prev, args, (size_t)nargs, NULL)) == NULL;
         attempt++)
        if (!fp_line_try_again(attempt))
            return NULL;
    return res;
}

static PyMethodDef fp_line_settrace_def = {
    "settrace", (PyCFunction)(void (*)(void))fp_line_settrace_call, METH_FASTCALL,
    "settrace($module, function, /)\n--\n\nSet the global debug tracing function (while "
    "fastprof's line profiler is on, line events are first turned back on in this thread's "
    "frames)."};

/* _settrace_unmuting(prev): returns a new callable that turns line events back on in the
 * calling thread's frames and then calls prev, or NULL with an exception set. */
PyObject *
fp_line_settrace_unmuting(FP_UNUSED PyObject *unused, PyObject *prev)
{
    if (!PyCallable_Check(prev)) {
        PyErr_Format(PyExc_TypeError, "_settrace_unmuting(): prev must be callable, not %.100s",
                     Py_TYPE(prev)->tp_name);
        return NULL;
    }
    return PyCFunction_New(&fp_line_settrace_def, prev);
}
#endif
