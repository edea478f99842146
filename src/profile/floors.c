/* floors.c - what the benchmarks measure fastprof's hooks against: callbacks that do nothing.
 * Not used by the profilers; benchmarks/floors.py registers them for the events a profiler
 * takes, so that the interpreter's own cost of delivering those events shows apart from what
 * fastprof's callbacks do with them. */
#include "common.h"

/* _empty_callback(*args): a C callable that does nothing, for any event's arguments.  Returns
 * None (never fails). */
static PyObject *
fp_empty_callback(FP_UNUSED PyObject *module, FP_UNUSED PyObject *const *args,
                  FP_UNUSED Py_ssize_t nargs)
{
    Py_RETURN_NONE;
}

static PyMethodDef fp_floor_functions[] = {
    {"_empty_callback", (PyCFunction)(void (*)(void))fp_empty_callback, METH_FASTCALL,
     "_empty_callback(*args): do nothing and return None (a benchmark floor: the cost of an "
     "event delivered to a C callback)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_floors_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_floor_functions);
}
