/* module.c - fastprof._fastprof: multi-phase init, module state, and the registration of
 * each part (clock, call profiler, line profiler, CPU kernels, CUDA, the pstats reader). */
#include "common.h"

/* See common.h. */
PyTypeObject *
fp_add_type(PyObject *m, PyTypeObject **field, PyType_Spec *spec, PyObject *base)
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
    Py_XSETREF(*field, (PyTypeObject *)type); /* takes the reference */
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
    if (fp_exit_gate_exec(m) < 0)
        return -1;
    if (fp_marshal_exec(m) < 0)
        return -1;
    if (fp_chrome_exec(m) < 0)
        return -1;
    if (fp_quiet_exec(m) < 0)
        return -1;
    if (fp_tl_read_exec(m) < 0)
        return -1;
    if (fp_tree_fold_exec(m) < 0)
        return -1;
    if (fp_tree_columns_exec(m) < 0)
        return -1;
    return 0;
}

/* GC support of the module state: visits every object field.  Returns 0 or the visitor's
 * result. */
static int
fp_module_traverse(PyObject *m, visitproc visit, void *arg)
{
    fp_module_state *st = fp_state(m);
    if (st == NULL)
        return 0;
    Py_VISIT(st->profiler_type);
    Py_VISIT(st->session_type);
    Py_VISIT(st->guarded_type);
    Py_VISIT(st->guarded_call_type);
    Py_VISIT(st->hook_type);
    Py_VISIT(st->empty_callback_type);
    Py_VISIT(st->line_tracer_type);
    Py_VISIT(st->cuda_error);
    Py_VISIT(st->cuda_unavailable);
    return 0;
}

/* Drops the references held by the module state and frees the shared tool.  Returns 0. */
static int
fp_module_clear(PyObject *m)
{
    fp_module_state *st = fp_state(m);
    if (st == NULL)
        return 0;
#if FP_PY312
    struct fp_mon_tool *tool = st->mon_tool;
    st->mon_tool = NULL;
    fp_mon_tool_free(tool);
#endif
    Py_CLEAR(st->profiler_type);
    Py_CLEAR(st->session_type);
    Py_CLEAR(st->guarded_type);
    Py_CLEAR(st->guarded_call_type);
    Py_CLEAR(st->hook_type);
    Py_CLEAR(st->empty_callback_type);
    Py_CLEAR(st->line_tracer_type);
    Py_CLEAR(st->cuda_error);
    Py_CLEAR(st->cuda_unavailable);
    return 0;
}

/* m_free: drops what the state holds (as clear does).  Returns nothing. */
static void
fp_module_free(void *m)
{
    fp_module_clear((PyObject *)m);
}

/* What the module supports of multiple interpreters and free-threading.  Each interpreter that
 * imports it gets its own module state (types, the call profilers' shared sys.monitoring
 * tool, the line profiler's code-object extra index), but some state is the process's alone,
 * shared by every interpreter and guarded by nothing but the GIL they share: the clock's
 * calibration (clock.c), the kernels' thread pool and SIMD tables (kernels/pool.c,
 * expr_vm.c), the CUDA runtime, cuBLAS handles and CUPTI buffers (cuda/), the line tracers'
 * id counter (line.c), the benchmark floor's stamps (floors.c) and the SIGTERM watchdog's
 * signal handlers (profile/exit_watchdog.c).  So: legacy
 * subinterpreters, which share the main interpreter's GIL, may import it; one with its own
 * GIL may not (the import raises ImportError); and the GIL is used (a free-threaded build
 * turns it back on when the module is imported). */
static PyModuleDef_Slot fp_module_slots[] = {
    {Py_mod_exec, (void *)fp_module_exec},
#if FP_PY312
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_SUPPORTED},
#endif
#if FP_PY313
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
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
