/* module.c - fastprof._fastprof: multi-phase init, module state, and the registration of
 * each part (clock, call profiler, line profiler, CPU kernels, CUDA). */
#include "common.h"

/* See common.h. */
PyTypeObject *
fp_add_type(PyObject *m, int part, int slot, PyType_Spec *spec, PyObject *base)
{
    PyObject *bases = NULL;
    PyObject *type = NULL;
    if (base != NULL) {
        bases = PyTuple_Pack(1, base);
        if (bases == NULL)
            goto error;
    }
    type = PyType_FromModuleAndSpec(m, spec, bases);
    if (type == NULL)
        goto error;
    if (PyModule_AddObject(m, strrchr(spec->name, '.') + 1, Py_NewRef(type)) < 0) {
        Py_DECREF(type);
        goto error;
    }
    fp_state(m)->slots[part][slot] = type; /* takes the reference */
    Py_XDECREF(bases);
    return (PyTypeObject *)type;
error:
    Py_XDECREF(type);
    Py_XDECREF(bases);
    return NULL;
}

/* Runs each part's exec.  Returns 0, or -1 with an exception set. */
static int
fp_module_exec(PyObject *m)
{
    if (fp_clock_exec(m) < 0)
        return -1;
    if (fp_profile_exec(m) < 0)
        return -1;
    if (fp_line_exec(m) < 0)
        return -1;
    if (fp_kernels_exec(m) < 0)
        return -1;
    if (fp_cuda_exec(m) < 0)
        return -1;
    if (fp_floors_exec(m) < 0)
        return -1;
    if (fp_watchdog_exec(m) < 0)
        return -1;
    return 0;
}

/* GC support of the module state.  Returns 0 or the visitor's result. */
static int
fp_module_traverse(PyObject *m, visitproc visit, void *arg)
{
    fp_module_state *st = fp_state(m);
    if (st == NULL)
        return 0;
    for (int p = 0; p < FP_NPARTS; p++)
        for (int s = 0; s < FP_SLOTS_PER_PART; s++)
            Py_VISIT(st->slots[p][s]);
    return 0;
}

/* Drops the references held by the module state.  Returns 0. */
static int
fp_module_clear(PyObject *m)
{
    fp_module_state *st = fp_state(m);
    if (st == NULL)
        return 0;
    for (int p = 0; p < FP_NPARTS; p++)
        for (int s = 0; s < FP_SLOTS_PER_PART; s++)
            Py_CLEAR(st->slots[p][s]);
    return 0;
}

static void
fp_module_free(void *m)
{
    fp_module_clear((PyObject *)m);
}

static PyModuleDef_Slot fp_module_slots[] = {
    {Py_mod_exec, (void *)fp_module_exec},
    {0, NULL},
};

struct PyModuleDef fp_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fastprof._fastprof",
    .m_doc = "fastprof's compiled core: clocks, call and line profilers, kernels, CUDA.",
    .m_size = sizeof(fp_module_state),
    .m_slots = fp_module_slots,
    .m_traverse = fp_module_traverse,
    .m_clear = fp_module_clear,
    .m_free = fp_module_free,
};

PyMODINIT_FUNC
PyInit__fastprof(void)
{
    return PyModuleDef_Init(&fp_module_def);
}
