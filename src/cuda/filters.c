/* cuda/filters.c - Python entry of the ndimage correlation kernels (ndimage.cu): argument
 * parsing into an fp_cu_geom, then the launch.  The Python side (fastprof.kernels.gpu) has
 * checked every argument already; this file checks again what could overrun memory.
 * CUDA builds only. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <string.h>

#include "cuda/fp_cuda.h"

/* Reads a tuple of ndim ints into out.  Returns 0, or -1 with an exception set. */
static int
fp_cuda_int_tuple(PyObject *t, int ndim, int64_t *out, const char *what)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must be a tuple of %d ints", what, ndim);
        return -1;
    }
    for (int i = 0; i < ndim; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred())
            return -1;
        out[i] = (int64_t)v;
    }
    return 0;
}

/* Fills g from the Python arguments shared by both entry points.  Returns 0, or -1 with an
 * exception set. */
static int
fp_cuda_geom(fp_cu_geom *g, int dtype, PyObject *shape, PyObject *strides, PyObject *wshape,
             PyObject *shift, int mode, double cval, double box_weight)
{
    int ndim;
    memset(g, 0, sizeof *g);
    if (dtype != FP_CU_F32 && dtype != FP_CU_F64) {
        PyErr_SetString(PyExc_ValueError, "dtype code must be 0 (float32) or 1 (float64)");
        return -1;
    }
    if (mode < FP_CU_REFLECT || mode > FP_CU_WRAP) {
        PyErr_SetString(PyExc_ValueError, "bad boundary mode code");
        return -1;
    }
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) < 1 ||
        PyTuple_GET_SIZE(shape) > FP_CU_MAXDIM) {
        PyErr_Format(PyExc_ValueError, "shape must be a tuple of 1 to %d ints", FP_CU_MAXDIM);
        return -1;
    }
    ndim = (int)PyTuple_GET_SIZE(shape);
    g->ndim = ndim;
    g->mode = mode;
    g->cval = cval;
    g->box_weight = box_weight;
    if (fp_cuda_int_tuple(shape, ndim, g->shape, "shape") < 0 ||
        fp_cuda_int_tuple(strides, ndim, g->in_strides, "strides") < 0 ||
        fp_cuda_int_tuple(wshape, ndim, g->wshape, "weights shape") < 0 ||
        fp_cuda_int_tuple(shift, ndim, g->shift, "shift") < 0)
        return -1;
    g->size = 1;
    for (int d = 0; d < ndim; d++) {
        if (g->shape[d] < 0 || g->wshape[d] < 1) {
            PyErr_SetString(PyExc_ValueError, "shape must be >= 0 and weights shape >= 1");
            return -1;
        }
        g->size *= g->shape[d];
    }
    return 0;
}

/* _cuda_correlate(dtype, in, out, weights, shape, in_strides, wshape, shift, mode, cval,
 * box_weight, stream[, host_weights[, exact]]) -> None: queues the correlation on stream
 * (device pointers; weights 0 for the box path).  host_weights (a buffer of the same weights on
 * the host, or None) lets the per-element kernel take them in its parameters.  exact 1 or 2
 * runs scipy's arithmetic instead (fp_cu_correlate_exact; the weights are float64 then).
 * Returns NULL with an exception. */
PyObject *
fp_cuda_correlate(PyObject *m, PyObject *args)
{
    int dtype, mode, err, exact = 0;
    PyObject *oin, *oout, *ow, *shape, *strides, *wshape, *shift, *os, *ohw = Py_None;
    PyObject *res = NULL;
    Py_buffer bhw = {0};
    double cval, boxw;
    void *in, *out, *w, *s;
    int64_t nw = 1;
    fp_cu_geom g;
    if (!PyArg_ParseTuple(args, "iOOOOOOOiddO|Oi", &dtype, &oin, &oout, &ow, &shape, &strides,
                          &wshape, &shift, &mode, &cval, &boxw, &os, &ohw, &exact))
        return NULL;
    if (exact < 0 || exact > 2) {
        PyErr_SetString(PyExc_ValueError, "exact must be 0, 1 or 2");
        return NULL;
    }
    if (fp_cuda_ptr(oin, &in) < 0 || fp_cuda_ptr(oout, &out) < 0 || fp_cuda_ptr(ow, &w) < 0 ||
        fp_cuda_ptr(os, &s) < 0)
        goto error;
    if (fp_cuda_geom(&g, dtype, shape, strides, wshape, shift, mode, cval, boxw) < 0)
        goto error;
    g.exact = exact;
    if (exact) {
        err = fp_cu_correlate_exact(dtype, in, out, (const double *)w, &g, 0, s);
        if (err != 0) {
            fp_cuda_raise(m, err, "correlate kernel launch");
            goto error;
        }
        res = Py_NewRef(Py_None);
        goto error;
    }
    if (ohw != Py_None) {
        if (PyObject_GetBuffer(ohw, &bhw, PyBUF_SIMPLE) < 0)
            goto error;
        for (int d = 0; d < g.ndim; d++)
            nw *= g.wshape[d];
        if ((int64_t)bhw.len < nw * (dtype == FP_CU_F32 ? 4 : 8)) {
            PyErr_SetString(PyExc_ValueError, "host_weights buffer too small for the weights");
            goto error;
        }
    }
    err = fp_cu_correlate(dtype, in, out, w, bhw.obj != NULL ? bhw.buf : NULL, &g, s);
    if (err != 0) {
        fp_cuda_raise(m, err, "correlate kernel launch");
        goto error;
    }
    res = Py_NewRef(Py_None);
error:
    if (bhw.obj != NULL)
        PyBuffer_Release(&bhw);
    return res;
}

/* _cuda_tiled_ok(dtype, shape, wshape) -> bool: whether the device takes the shared-memory
 * tiled path for this geometry.  Returns NULL with an exception for bad arguments. */
PyObject *
fp_cuda_tiled_ok(FP_UNUSED PyObject *m, PyObject *args)
{
    int dtype;
    PyObject *shape, *wshape, *zeros = NULL, *res = NULL;
    fp_cu_geom g;
    if (!PyArg_ParseTuple(args, "iO!O!", &dtype, &PyTuple_Type, &shape, &PyTuple_Type, &wshape))
        return NULL;
    zeros = PyTuple_New(PyTuple_GET_SIZE(shape));
    if (zeros == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++)
        PyTuple_SET_ITEM(zeros, i, PyLong_FromLong(0));
    if (fp_cuda_geom(&g, dtype, shape, zeros, wshape, zeros, 0, 0.0, 0.0) < 0)
        goto error;
    res = PyBool_FromLong(fp_cu_tiled_ok(dtype, &g));
error:
    Py_XDECREF(zeros);
    return res;
}

/* _cuda_correlate_host(dtype, in_buffer, in_offset, out_buffer, weights_buffer_or_None, shape,
 * in_strides, wshape, shift, mode, cval, box_weight, path[, exact]) -> int: runs the device
 * code on the host (test hook; path 0 as the device would, 1 the direct per-element path;
 * exact 1 or 2 scipy's arithmetic, float64 weights) and returns the number of input elements
 * it loaded (the device's memory reads; 0 for exact).  Every read is bounds-checked against the
 * buffers first.  Returns NULL with an exception. */
PyObject *
fp_cuda_correlate_host(FP_UNUSED PyObject *m, PyObject *args)
{
    int dtype, mode, path, exact = 0;
    Py_ssize_t in_off;
    PyObject *ow, *shape, *strides, *wshape, *shift;
    Py_buffer bin = {0}, bout = {0}, bw = {0};
    double cval, boxw;
    fp_cu_geom g;
    int64_t lo, hi, nw = 1, reads = 0;
    size_t item;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "iy*nw*OOOOOiddi|i", &dtype, &bin, &in_off, &bout, &ow, &shape,
                          &strides, &wshape, &shift, &mode, &cval, &boxw, &path, &exact))
        return NULL;
    if (exact < 0 || exact > 2) {
        PyErr_SetString(PyExc_ValueError, "exact must be 0, 1 or 2");
        goto error;
    }
    if (ow != Py_None && PyObject_GetBuffer(ow, &bw, PyBUF_SIMPLE) < 0)
        goto error;
    if (fp_cuda_geom(&g, dtype, shape, strides, wshape, shift, mode, cval, boxw) < 0)
        goto error;
    item = dtype == FP_CU_F32 ? 4 : 8;
    lo = hi = in_off;
    for (int d = 0; d < g.ndim; d++) {
        int64_t ext = g.shape[d] > 0 ? (g.shape[d] - 1) * g.in_strides[d] : 0;
        if (ext < 0)
            lo += ext;
        else
            hi += ext;
        nw *= g.wshape[d];
    }
    if (g.size > 0 && (lo < 0 || (hi + 1) * (int64_t)item > (int64_t)bin.len)) {
        PyErr_SetString(PyExc_ValueError, "input strides reach outside the input buffer");
        goto error;
    }
    if ((int64_t)bout.len < g.size * (int64_t)item ||
        (ow != Py_None && (int64_t)bw.len < nw * (int64_t)(exact ? sizeof(double) : item))) {
        PyErr_SetString(PyExc_ValueError, "output or weights buffer too small");
        goto error;
    }
    g.exact = exact;
    if (exact) {
        fp_cu_correlate_exact(dtype, (const char *)bin.buf + in_off * (Py_ssize_t)item, bout.buf,
                              ow != Py_None ? (const double *)bw.buf : NULL, &g, 1, NULL);
    } else if (fp_cu_correlate_host(dtype, (const char *)bin.buf + in_off * (Py_ssize_t)item,
                                    bout.buf, ow != Py_None ? bw.buf : NULL, &g, path,
                                    &reads) < 0) {
        PyErr_NoMemory();
        goto error;
    }
    res = PyLong_FromLongLong((long long)reads);
error:
    PyBuffer_Release(&bin);
    PyBuffer_Release(&bout);
    if (bw.obj != NULL)
        PyBuffer_Release(&bw);
    return res;
}
#endif
