/* names.c - the labels of C functions, made once per function the way cProfile makes them, so
 * pstats tables and tools that read them show the same names for both profilers. */
#include "fp_profile.h"

/* Returns a new reference to the attribute name found in the dicts along type's MRO (no
 * descriptor called), or NULL without an exception when none has it. */
static PyObject *
fp_mro_lookup(PyTypeObject *type, PyObject *name)
{
    PyObject *mro = type->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *base = PyTuple_GET_ITEM(mro, i);
        if (!PyType_Check(base))
            continue;
#if FP_PY312
        PyObject *dict = PyType_GetDict((PyTypeObject *)base);
#else
        PyObject *dict = Py_XNewRef(((PyTypeObject *)base)->tp_dict);
#endif
        if (dict == NULL)
            continue;
        PyObject *found = PyDict_GetItemWithError(dict, name);
        Py_XINCREF(found);
        Py_DECREF(dict);
        if (found != NULL)
            return found;
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return NULL;
        }
    }
    return NULL;
}

/* Returns a new reference to "<module.name>" or "<name>" for a function without self, as
 * cProfile labels it. */
static PyObject *
fp_label_function(PyMethodDef *ml, PyObject *module)
{
    PyObject *modname = NULL;
    if (module != NULL) {
        if (PyUnicode_Check(module))
            modname = Py_NewRef(module);
        else if (PyModule_Check(module)) {
            modname = PyModule_GetNameObject(module);
            if (modname == NULL)
                PyErr_Clear();
        }
    }
    PyObject *res;
    if (modname != NULL && PyUnicode_CompareWithASCIIString(modname, "builtins") != 0)
        res = PyUnicode_FromFormat("<%U.%s>", modname, ml->ml_name);
    else
        res = PyUnicode_FromFormat("<%s>", ml->ml_name);
    Py_XDECREF(modname);
    return res;
}

/* The core profiler type's name (profiler.c's spec) and the public class users hold it as. */
#define FP_CORE_PROFILER_NAME "fastprof._fastprof.Profiler"
#define FP_PUBLIC_PROFILER_NAME "fastprof.Profile"

/* Returns 1 when attr is a method of the core profiler type (say the disable() call that ends a
 * profile), else 0.  Never sets an exception. */
static int
fp_is_profiler_method(PyObject *attr)
{
    return Py_IS_TYPE(attr, &PyMethodDescr_Type) &&
           strcmp(PyDescr_TYPE(attr)->tp_name, FP_CORE_PROFILER_NAME) == 0;
}

/* Returns a new reference to the label of method ml bound to self: the repr of the attribute of
 * that name on type(self), else "<built-in method module.name>" or "<built-in method name>".
 * The profiler's own methods are labelled after the public class, "<method 'disable' of
 * 'fastprof.Profile' objects>", as cProfile's are after "_lsprof.Profiler". */
static PyObject *
fp_label_method(PyMethodDef *ml, PyObject *self, PyObject *module)
{
    PyObject *name = PyUnicode_FromString(ml->ml_name);
    if (name == NULL)
        return NULL;
    PyObject *attr = fp_mro_lookup(Py_TYPE(self), name);
    Py_DECREF(name);
    if (attr != NULL && fp_is_profiler_method(attr)) {
        Py_DECREF(attr);
        return PyUnicode_FromFormat("<method '%s' of '" FP_PUBLIC_PROFILER_NAME "' objects>",
                                    ml->ml_name);
    }
    if (attr != NULL) {
        PyObject *res = PyObject_Repr(attr);
        Py_DECREF(attr);
        if (res != NULL)
            return res;
        PyErr_Clear();
    }
    if (module != NULL && PyUnicode_Check(module))
        return PyUnicode_FromFormat("<built-in method %U.%s>", module, ml->ml_name);
    return PyUnicode_FromFormat("<built-in method %s>", ml->ml_name);
}

/* See fp_profile.h. */
PyObject *
fp_builtin_label(PyMethodDef *ml, PyObject *callable, PyObject *self_arg)
{
    if (PyCFunction_Check(callable)) {
        PyCFunctionObject *fn = (PyCFunctionObject *)callable;
        if (fn->m_self == NULL)
            return fp_label_function(ml, fn->m_module);
        return fp_label_method(ml, fn->m_self, fn->m_module);
    }
    /* A method descriptor called with self_arg as its first argument. */
    if (self_arg != NULL)
        return fp_label_method(ml, self_arg, NULL);
    return PyObject_Repr(callable);
}
