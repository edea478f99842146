/* cuda/cuda.c - entry of the CUDA part: binds its functions on the module and holds the
 * error helpers.  In a CPU-only build every function exists and raises CudaUnavailableError
 * ("fastprof was built without CUDA"); no CUDA call is ever made at import time. */
#include "cuda/cuda_py.h"

#define FP_CUDA_NOT_BUILT                                                                          \
    "fastprof was built without CUDA (no CUDA toolkit at build time, or FASTPROF_CUDA=0)"

/* See cuda_py.h. */
PyObject *
fp_cuda_unavailable(PyObject *m, const char *reason)
{
    PyObject *type = fp_state(m)->cuda_unavailable;
    PyErr_SetString(type != NULL ? type : PyExc_RuntimeError, reason);
    return NULL;
}

/* See cuda_py.h. */
int
fp_cuda_ptr(PyObject *o, void **out)
{
    unsigned long long v;
    if (o == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected an int pointer or handle, got %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* _cuda_register_errors(CudaError, CudaUnavailableError): keeps the classes fastprof.cuda
 * defines, so that C raises them.  Returns None, or NULL with an exception set. */
static PyObject *
fp_cuda_register_errors(PyObject *m, PyObject *args)
{
    PyObject *err, *unavail;
    fp_module_state *st = fp_state(m);
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &err, &PyType_Type, &unavail))
        return NULL;
    Py_XSETREF(st->cuda_error, Py_NewRef(err));
    Py_XSETREF(st->cuda_unavailable, Py_NewRef(unavail));
    Py_RETURN_NONE;
}

/* _cuda_built() -> bool: whether this build has the CUDA part. Never fails. */
static PyObject *
fp_cuda_built(FP_UNUSED PyObject *m, FP_UNUSED PyObject *args)
{
#ifdef FP_HAVE_CUDA
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

#ifdef FP_HAVE_CUDA
#include <cuda_runtime_api.h>

/* See cuda_py.h. */
PyObject *
fp_cuda_raise(PyObject *m, int err, const char *what)
{
    PyObject *type = fp_state(m)->cuda_error;
    const char *name = cudaGetErrorName((cudaError_t)err);
    const char *msg = cudaGetErrorString((cudaError_t)err);
    PyObject *exc = NULL;
    if (type == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s (%s, %d)", what, msg, name, err);
        return NULL;
    }
    exc = PyObject_CallFunction(type, "iss", err, name ? name : "cudaErrorUnknown", msg ? msg : "");
    if (exc != NULL) {
        PyObject *ctx = PyUnicode_FromString(what);
        if (ctx != NULL) {
            PyObject_SetAttrString(exc, "context", ctx);
            Py_DECREF(ctx);
        }
        PyErr_Clear();
        PyErr_SetObject(type, exc);
        Py_DECREF(exc);
    }
    return NULL;
}
#define FP_CUDA_FN(name, fn)                                                                       \
    {                                                                                              \
        name, (PyCFunction)(void (*)(void))fn, METH_VARARGS, NULL                                  \
    }
#else
/* Every CUDA function of a CPU-only build.  Returns NULL with CudaUnavailableError set. */
static PyObject *
fp_cuda_not_built(PyObject *m, FP_UNUSED PyObject *args)
{
    return fp_cuda_unavailable(m, FP_CUDA_NOT_BUILT);
}

/* See cuda_py.h. */
PyObject *
fp_cuda_raise(PyObject *m, FP_UNUSED int err, FP_UNUSED const char *what)
{
    return fp_cuda_unavailable(m, FP_CUDA_NOT_BUILT);
}
#define FP_CUDA_FN(name, fn)                                                                       \
    {                                                                                              \
        name, (PyCFunction)(void (*)(void))fp_cuda_not_built, METH_VARARGS, NULL                   \
    }
#endif

static PyMethodDef fp_cuda_methods[] = {
    {"_cuda_built", (PyCFunction)fp_cuda_built, METH_NOARGS, "Whether this build has CUDA."},
    {"_cuda_register_errors", (PyCFunction)fp_cuda_register_errors, METH_VARARGS, NULL},
    FP_CUDA_FN("_cuda_probe", fp_cuda_probe),
    FP_CUDA_FN("_cuda_versions", fp_cuda_versions),
    FP_CUDA_FN("_cuda_device_props", fp_cuda_device_props),
    FP_CUDA_FN("_cuda_set_device", fp_cuda_set_device),
    FP_CUDA_FN("_cuda_get_device", fp_cuda_get_device),
    FP_CUDA_FN("_cuda_synchronize", fp_cuda_synchronize),
    FP_CUDA_FN("_cuda_stream_synchronize", fp_cuda_stream_synchronize),
    FP_CUDA_FN("_cuda_event_create", fp_cuda_event_create),
    FP_CUDA_FN("_cuda_event_destroy", fp_cuda_event_destroy),
    FP_CUDA_FN("_cuda_event_record", fp_cuda_event_record),
    FP_CUDA_FN("_cuda_event_elapsed", fp_cuda_event_elapsed),
    FP_CUDA_FN("_cuda_stream_wait_event", fp_cuda_stream_wait_event),
    FP_CUDA_FN("_cuda_event_times", fp_cuda_event_times),
    FP_CUDA_FN("_cuda_malloc", fp_cuda_malloc),
    FP_CUDA_FN("_cuda_free", fp_cuda_free),
    FP_CUDA_FN("_cuda_release", fp_cuda_release),
    FP_CUDA_FN("_cuda_mem_info", fp_cuda_mem_info),
    FP_CUDA_FN("_cuda_pointer_device", fp_cuda_pointer_device),
    FP_CUDA_FN("_cuda_memcpy_htod", fp_cuda_memcpy_htod),
    FP_CUDA_FN("_cuda_memcpy_dtoh", fp_cuda_memcpy_dtoh),
    FP_CUDA_FN("_cuda_memcpy_dtod", fp_cuda_memcpy_dtod),
    FP_CUDA_FN("_cuda_upload", fp_cuda_upload),
    FP_CUDA_FN("_cuda_download", fp_cuda_download),
    FP_CUDA_FN("_cuda_scrub", fp_cuda_scrub),
    FP_CUDA_FN("_cuda_spin", fp_cuda_spin),
    FP_CUDA_FN("_cuda_correlate", fp_cuda_correlate),
    FP_CUDA_FN("_cuda_correlate_host", fp_cuda_correlate_host),
    FP_CUDA_FN("_cuda_tiled_ok", fp_cuda_tiled_ok),
    FP_CUDA_FN("_cuda_nvrtc_compile", fp_cuda_nvrtc_compile),
    FP_CUDA_FN("_cuda_library_load", fp_cuda_library_load),
    FP_CUDA_FN("_cuda_launch", fp_cuda_launch),
    FP_CUDA_FN("_cuda_gemm", fp_cuda_gemm),
    FP_CUDA_FN("_cuda_dlpack_export", fp_cuda_dlpack_export),
    FP_CUDA_FN("_cuda_dlpack_import", fp_cuda_dlpack_import),
    FP_CUDA_FN("_cuda_cupti_start", fp_cuda_cupti_start),
    FP_CUDA_FN("_cuda_cupti_stop", fp_cuda_cupti_stop),
    FP_CUDA_FN("_cuda_cupti_version", fp_cuda_cupti_version),
    FP_CUDA_FN("_cuda_demangle", fp_cuda_demangle),
    FP_CUDA_FN("_cuda_nvtx_push", fp_cuda_nvtx_push),
    FP_CUDA_FN("_cuda_nvtx_pop", fp_cuda_nvtx_pop),
    {NULL, NULL, 0, NULL},
};

/* See common.h. */
int
fp_cuda_exec(FP_UNUSED PyObject *m)
{
    return PyModule_AddFunctions(m, fp_cuda_methods);
}
