/* kernels/numpy_api.c - the one translation unit that owns the NumPy C API table of the
 * kernels part (the other kernel files use it through NO_IMPORT_ARRAY).  The table is filled
 * on the first kernel call, not when the module loads: `import fastprof` needs no NumPy. */
#include "common.h"
#include "kernels/numpy_api.h"

#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

#define FP_NUMPY_HINT                                                                              \
    "fastprof's kernels need NumPy, which could not be imported; install it with "                 \
    "pip install 'fastprof[kernels]'"

/* Replaces the pending exception with an ImportError that names the kernels extra, the
 * original one as its __cause__.  Returns nothing; an exception is set on return. */
static void
fp_numpy_reraise(void)
{
#if FP_PY312
    PyObject *cause = PyErr_GetRaisedException();
    PyObject *exc = NULL;
    PyErr_SetString(PyExc_ImportError, FP_NUMPY_HINT);
    exc = PyErr_GetRaisedException();
    if (exc != NULL && cause != NULL) {
        PyException_SetContext(exc, Py_NewRef(cause));
        PyException_SetCause(exc, cause); /* steals cause */
        cause = NULL;
    }
    PyErr_SetRaisedException(exc);
    Py_XDECREF(cause);
#else
    PyObject *type = NULL, *cause = NULL, *tb = NULL;
    PyObject *etype = NULL, *exc = NULL, *etb = NULL;
    PyErr_Fetch(&type, &cause, &tb);
    PyErr_NormalizeException(&type, &cause, &tb);
    if (cause != NULL && tb != NULL)
        PyException_SetTraceback(cause, tb);
    PyErr_SetString(PyExc_ImportError, FP_NUMPY_HINT);
    PyErr_Fetch(&etype, &exc, &etb);
    PyErr_NormalizeException(&etype, &exc, &etb);
    if (exc != NULL && cause != NULL) {
        PyException_SetContext(exc, Py_NewRef(cause));
        PyException_SetCause(exc, cause); /* steals cause */
        cause = NULL;
    }
    PyErr_Restore(etype, exc, etb);
    Py_XDECREF(type);
    Py_XDECREF(cause);
    Py_XDECREF(tb);
#endif
}

/* See numpy_api.h.  Runs holding the GIL; two threads racing here both store the same table. */
int
fp_numpy_ready(void)
{
    if (FP_LIKELY(PyArray_API != NULL))
        return 0;
    if (_import_array() < 0)
        goto error;
    return 0;
error:
    PyArray_API = NULL; /* NumPy may have stored its table before rejecting its version */
    fp_numpy_reraise();
    return -1;
}
