/* profile/sticky.c - the hooks' sticky error, shared by the call profiler and the line
 * profiler: see the convention in common.h. */
#include "common.h"

/* Takes the current exception, normalised and holding its traceback.  Returns it (a new
 * reference; the indicator is then clear), or NULL when none is set. */
static PyObject *
fp_exc_take(void)
{
#if FP_PY312
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

/* Sets exc (a reference it steals, not NULL) as the current exception.  Returns nothing. */
static void
fp_exc_put(PyObject *exc)
{
#if FP_PY312
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* See common.h. */
void
fp_sticky_set(PyObject **error)
{
    if (*error == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        *error = fp_exc_take();
    }
    PyErr_Clear();
}

/* See common.h. */
void
fp_sticky_set_what(PyObject **error, PyObject *type, const char *what)
{
    if (*error == NULL) {
        PyObject *cause = fp_exc_take();
        PyErr_SetString(type, what);
        if (cause != NULL) {
            PyObject *exc = fp_exc_take();
            PyException_SetCause(exc, Py_NewRef(cause));
            PyException_SetContext(exc, cause);
            fp_exc_put(exc);
        }
    }
    fp_sticky_set(error);
}

/* See common.h. */
int
fp_sticky_raise(PyObject **error, const char *message)
{
    PyObject *err = *error;
    if (err == NULL)
        return 0;
    *error = NULL;
    PyErr_SetString(PyExc_RuntimeError, message);
    PyObject *exc = fp_exc_take();
    PyException_SetCause(exc, Py_NewRef(err));
    PyException_SetContext(exc, err);
    fp_exc_put(exc);
    return -1;
}
