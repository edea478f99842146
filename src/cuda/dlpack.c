/* cuda/dlpack.c - DLPack export of device memory (a "dltensor" capsule that keeps its owner
 * alive) and import of a producer's capsule (device pointer, shape, strides, dtype, and a
 * keeper object that calls the producer's deleter when released).  The structures follow the
 * DLPack ABI (v0.x, unversioned).  CUDA builds only. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <string.h>

typedef struct {
    int32_t device_type;
    int32_t device_id;
} fp_dl_device;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} fp_dl_dtype;
typedef struct {
    void *data;
    fp_dl_device device;
    int32_t ndim;
    fp_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} fp_dl_tensor;
typedef struct fp_dl_managed {
    fp_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct fp_dl_managed *self);
} fp_dl_managed;

/* Deleter of exported tensors: drops the owner (taking the GIL) and frees the block. */
static void
fp_dl_delete(fp_dl_managed *t)
{
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)t->manager_ctx);
    PyMem_RawFree(t);
    PyGILState_Release(g);
}

/* Destructor of an exported capsule never consumed: deletes the tensor. */
static void
fp_dl_capsule_free(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        fp_dl_managed *t = PyCapsule_GetPointer(cap, "dltensor");
        if (t != NULL && t->deleter != NULL)
            t->deleter(t);
    }
}

/* _cuda_dlpack_export(ptr, shape, strides, code, bits, device_type, device_id, owner) ->
 * capsule "dltensor" (strides in elements).  Returns NULL with an exception. */
PyObject *
fp_cuda_dlpack_export(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *optr, *shape, *strides, *owner, *cap = NULL;
    int code, bits, devtype, devid;
    void *ptr;
    Py_ssize_t nd;
    fp_dl_managed *t = NULL;
    if (!PyArg_ParseTuple(args, "OO!O!iiiiO", &optr, &PyTuple_Type, &shape, &PyTuple_Type, &strides,
                          &code, &bits, &devtype, &devid, &owner) ||
        fp_cuda_ptr(optr, &ptr) < 0)
        goto error;
    nd = PyTuple_GET_SIZE(shape);
    if (PyTuple_GET_SIZE(strides) != nd || nd > 64) {
        PyErr_SetString(PyExc_ValueError, "shape and strides must have the same length");
        goto error;
    }
    t = PyMem_RawCalloc(1, sizeof *t + 2 * (size_t)(nd ? nd : 1) * sizeof(int64_t));
    if (t == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    t->dl_tensor.shape = (int64_t *)(t + 1);
    t->dl_tensor.strides = t->dl_tensor.shape + (nd ? nd : 1);
    for (Py_ssize_t i = 0; i < nd; i++) {
        t->dl_tensor.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        t->dl_tensor.strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    }
    if (PyErr_Occurred())
        goto error;
    t->dl_tensor.data = ptr;
    t->dl_tensor.device.device_type = devtype;
    t->dl_tensor.device.device_id = devid;
    t->dl_tensor.ndim = (int32_t)nd;
    t->dl_tensor.dtype.code = (uint8_t)code;
    t->dl_tensor.dtype.bits = (uint8_t)bits;
    t->dl_tensor.dtype.lanes = 1;
    t->manager_ctx = Py_NewRef(owner);
    t->deleter = fp_dl_delete;
    cap = PyCapsule_New(t, "dltensor", fp_dl_capsule_free);
    if (cap == NULL) {
        Py_DECREF(owner);
        goto error;
    }
    return cap;
error:
    PyMem_RawFree(t);
    return NULL;
}

/* Destructor of the keeper of an imported tensor: calls the producer's deleter. */
static void
fp_dl_keeper_free(PyObject *cap)
{
    fp_dl_managed *t = PyCapsule_GetPointer(cap, "fastprof.dlpack_keeper");
    if (t != NULL && t->deleter != NULL)
        t->deleter(t);
}

/* _cuda_dlpack_import(capsule) -> (ptr, shape, strides_or_None, (code, bits, lanes),
 * device_type, device_id, keeper): consumes a "dltensor" capsule (renamed "used_dltensor");
 * keep `keeper` alive while the memory is used.  ptr includes byte_offset; strides are in
 * elements.  Returns NULL with an exception. */
PyObject *
fp_cuda_dlpack_import(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *cap, *shape = NULL, *strides = NULL, *keeper = NULL, *res = NULL;
    fp_dl_managed *t;
    fp_dl_tensor *d;
    if (!PyArg_ParseTuple(args, "O", &cap))
        return NULL;
    if (!PyCapsule_IsValid(cap, "dltensor")) {
        PyErr_SetString(PyExc_ValueError,
                        "__dlpack__() did not return an unused \"dltensor\" capsule");
        return NULL;
    }
    t = PyCapsule_GetPointer(cap, "dltensor");
    d = &t->dl_tensor;
    if (d->ndim < 0 || d->ndim > 64 || d->dtype.lanes != 1) {
        PyErr_SetString(PyExc_ValueError, "unsupported DLPack tensor (ndim or lanes)");
        return NULL;
    }
    if (PyCapsule_SetName(cap, "used_dltensor") < 0)
        return NULL;
    keeper = PyCapsule_New(t, "fastprof.dlpack_keeper", fp_dl_keeper_free);
    if (keeper == NULL)
        goto error;
    if ((shape = PyTuple_New(d->ndim)) == NULL)
        goto error;
    for (int i = 0; i < d->ndim; i++) {
        PyObject *v = PyLong_FromLongLong(d->shape[i]);
        if (v == NULL)
            goto error;
        PyTuple_SET_ITEM(shape, i, v);
    }
    if (d->strides == NULL) {
        strides = Py_NewRef(Py_None);
    } else {
        if ((strides = PyTuple_New(d->ndim)) == NULL)
            goto error;
        for (int i = 0; i < d->ndim; i++) {
            PyObject *v = PyLong_FromLongLong(d->strides[i]);
            if (v == NULL)
                goto error;
            PyTuple_SET_ITEM(strides, i, v);
        }
    }
    res = Py_BuildValue("NOO(iii)iiO", PyLong_FromVoidPtr((char *)d->data + d->byte_offset), shape,
                        strides, (int)d->dtype.code, (int)d->dtype.bits, (int)d->dtype.lanes,
                        (int)d->device.device_type, (int)d->device.device_id, keeper);
error:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(keeper);
    return res;
}
#endif
