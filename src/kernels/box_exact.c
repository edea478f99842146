/* kernels/box_exact.c - scipy.ndimage's uniform_filter1d arithmetic, operation for operation.
 *
 * An integer result of uniform_filter truncates a double, so it equals scipy's only when the
 * double does.  scipy extends each line by the boundary mode into a buffer of doubles, sums the
 * first window from 0.0, then moves it with sum += (entering - leaving) and stores sum / size.
 * This file does the same, line by line (a line buffer stays in L1/L2 as scipy's do), so the
 * doubles are scipy's bit for bit; Python casts them into the output dtype. */
#include "common.h"
#include "kernels/conv.h"
#include "kernels/kernels_py.h"
#include "kernels/numpy_api.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

#include <stdlib.h>

/* One axis' running means of every line of a float64 array into a float64 array of the same
 * shape (byte strides; before = size / 2 + origin).  Runs without the GIL.  Returns 0, or -1
 * when out of memory (no exception set). */
static int
fp_box_lines(const char *idata, char *odata, int ndim, const npy_intp *shape, const npy_intp *istr,
             const npy_intp *ostr, int axis, npy_intp size, npy_intp before, int mode, double cval)
{
    npy_intp n = shape[axis], ext = n + size - 1, idx[FP_MAXDIM] = {0};
    ptrdiff_t *map = NULL;
    double *line = NULL;
    int d, result = -1;
    for (d = 0; d < ndim; d++)
        if (shape[d] == 0)
            return 0;
    map = malloc((size_t)ext * sizeof *map);
    line = malloc((size_t)ext * sizeof *line);
    if (map == NULL || line == NULL)
        goto error;
    for (npy_intp j = 0; j < ext; j++)
        map[j] = fp_conv_extend(j - before, n, mode);
    for (;;) {
        const char *ip = idata;
        char *op = odata;
        double tmp = 0.0;
        for (d = 0; d < ndim; d++) {
            if (d != axis) {
                ip += idx[d] * istr[d];
                op += idx[d] * ostr[d];
            }
        }
        for (npy_intp j = 0; j < ext; j++)
            line[j] = map[j] < 0 ? cval : *(const double *)(ip + map[j] * istr[axis]);
        for (npy_intp k = 0; k < size; k++)
            tmp += line[k];
        *(double *)op = tmp / (double)size;
        for (npy_intp k = 1; k < n; k++) {
            tmp += line[k + size - 1] - line[k - 1];
            *(double *)(op + k * ostr[axis]) = tmp / (double)size;
        }
        for (d = ndim - 1; d >= 0; d--) { /* the next line: odometer over the other axes */
            if (d == axis)
                continue;
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
        if (d < 0)
            break;
    }
    result = 0;
error:
    free(map);
    free(line);
    return result;
}

/* Whether a is an aligned, native-order float64 ndarray.  Returns 1 or 0; sets nothing. */
static int
fp_is_double_array(PyObject *a)
{
    return PyArray_Check(a) && PyArray_TYPE((PyArrayObject *)a) == NPY_DOUBLE &&
           PyArray_ISALIGNED((PyArrayObject *)a) && PyArray_ISNOTSWAPPED((PyArrayObject *)a);
}

/* _uniform_filter1d(input, output, size, axis, mode, cval, origin): output = scipy's
 * uniform_filter1d of input along axis, as doubles (both float64 arrays of one shape; output
 * writeable).  Returns None, or NULL with an exception set. */
PyObject *
fp_uniform_filter1d(FP_UNUSED PyObject *self, PyObject *args)
{
    PyObject *in, *out, *result = NULL;
    PyArrayObject *a, *b;
    Py_ssize_t size, axis, origin;
    int mode, nd, rc;
    double cval;
    if (!PyArg_ParseTuple(args, "OOnnidn:_uniform_filter1d", &in, &out, &size, &axis, &mode, &cval,
                          &origin))
        goto error;
    if (fp_numpy_ready() < 0)
        goto error;
    if (!fp_is_double_array(in) || !fp_is_double_array(out)) {
        PyErr_SetString(PyExc_TypeError,
                        "input and output must be aligned native float64 numpy arrays");
        goto error;
    }
    a = (PyArrayObject *)in;
    b = (PyArrayObject *)out;
    nd = PyArray_NDIM(a);
    if (nd < 1 || nd > FP_MAXDIM || PyArray_NDIM(b) != nd ||
        !PyArray_CompareLists(PyArray_DIMS(a), PyArray_DIMS(b), nd)) {
        PyErr_Format(PyExc_ValueError, "input and output must have one shape of 1 to %d axes",
                     FP_MAXDIM);
        goto error;
    }
    if (!PyArray_ISWRITEABLE(b)) {
        PyErr_SetString(PyExc_ValueError, "output is read-only");
        goto error;
    }
    if (axis < 0 || axis >= nd || size < 1 || mode < 0 || mode > FP_MODE_WRAP ||
        size / 2 + origin < 0 || size / 2 + origin >= size) {
        PyErr_SetString(PyExc_ValueError, "axis, size, mode or origin out of range");
        goto error;
    }
    if (size > FP_BOX_MAX_EXT - PyArray_DIM(a, (int)axis)) { /* its line buffer: no wrap */
        PyErr_NoMemory();
        goto error;
    }
    Py_BEGIN_ALLOW_THREADS rc =
        fp_box_lines(PyArray_BYTES(a), PyArray_BYTES(b), nd, PyArray_DIMS(a), PyArray_STRIDES(a),
                     PyArray_STRIDES(b), (int)axis, size, size / 2 + origin, mode, cval);
    Py_END_ALLOW_THREADS if (rc < 0)
    {
        PyErr_NoMemory();
        goto error;
    }
    result = Py_NewRef(Py_None);
error:
    return result;
}
