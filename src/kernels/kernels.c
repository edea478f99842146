/* kernels/kernels.c - entry of the CPU kernels part: the private functions behind
 * fastprof.kernels (_correlate_separable, _correlate_general, thread settings).
 *
 * Python (fastprof/kernels.py) validates and normalises the user's arguments; these functions
 * still check what they rely on, so a wrong call raises instead of crashing. */
#include "common.h"
#include "kernels/conv.h"
#include "kernels/kernels_py.h"
#include "kernels/numpy_api.h"
#include "kernels/pool.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

#include <stdlib.h>

/* float32 data with at most this many taps per axis is summed in float (direct sums of a few
 * taps per pass, the same rounding as scipy's float32 passes); longer kernels in double. */
#define FP_SINGLE_MAX_TAPS 16

/* See kernels_py.h.  The items are read from a tuple copy of seq: an item's __index__ that
 * changes seq (clears a list) changes nothing here. */
int
fp_kernels_ints(PyObject *seq, int n, int exact, const char *what, long *out)
{
    PyObject *items = NULL;
    Py_ssize_t len;
    int result = -1;
    if (!PySequence_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of ints, not %.100s", what,
                     Py_TYPE(seq)->tp_name);
        goto error;
    }
    items = PySequence_Tuple(seq);
    if (items == NULL)
        goto error;
    len = PyTuple_GET_SIZE(items);
    if (exact ? len != n : len > n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %s%d values, got %zd", what,
                     exact ? "" : "at most ", n, len);
        goto error;
    }
    for (Py_ssize_t d = 0; d < len; d++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(items, d));
        if (v == -1 && PyErr_Occurred())
            goto error;
        out[d] = v;
    }
    result = (int)len;
error:
    Py_XDECREF(items);
    return result;
}

/* See kernels_py.h. */
int
fp_kernels_count(int got, int n, const char *what)
{
    if (got == n)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: expected %d values, got %d", what, n, got);
    return -1;
}

/* See kernels_py.h. */
int
fp_kernels_float_kind(PyObject *o, const char *what)
{
    int t, result = -1;
    if (!PyArray_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray", what);
        goto done;
    }
    t = PyArray_TYPE((PyArrayObject *)o);
    if ((t != NPY_DOUBLE && t != NPY_FLOAT) || !PyArray_ISNOTSWAPPED((PyArrayObject *)o) ||
        !PyArray_ISALIGNED((PyArrayObject *)o)) {
        PyErr_Format(PyExc_TypeError, "%s must be aligned native float32 or float64", what);
        goto done;
    }
    result = t == NPY_DOUBLE;
done:
    return result;
}

/* The modes and origins of a convolution, read before any array is looked at. */
typedef struct {
    long mode[FP_MAXDIM], origin[FP_MAXDIM];
    int nmode, norigin;
} fp_conv_ints;

/* Reads the sequences modes and origins into ci (their __index__ may run Python code that
 * changes any array argument, so this comes first).  Returns 0, or -1 with an exception set. */
static int
fp_conv_read_ints(PyObject *modes, PyObject *origins, fp_conv_ints *ci)
{
    ci->nmode = fp_kernels_ints(modes, FP_MAXDIM, 0, "modes", ci->mode);
    if (ci->nmode < 0)
        return -1;
    ci->norigin = fp_kernels_ints(origins, FP_MAXDIM, 0, "origins", ci->origin);
    return ci->norigin < 0 ? -1 : 0;
}

/* Fills c from the common arguments, with axes ordered by decreasing input stride, and
 * builds the index maps (ntaps must be filled in by the caller for the original axis order in
 * ntaps_in).  perm receives the order.  Returns 1 when there is work, 0 for an empty array,
 * or -1 with an exception set. */
static int
fp_conv_setup(fp_conv *c, PyObject *in, PyObject *out, const fp_conv_ints *ci, double cval,
              const ptrdiff_t *ntaps_in, int *perm)
{
    PyArrayObject *a = (PyArrayObject *)in, *o = (PyArrayObject *)out;
    int nd, empty = 0;
    const long *mode_in = ci->mode, *origin_in = ci->origin;
    int mode[FP_MAXDIM];
    ptrdiff_t shift[FP_MAXDIM];
    int result = -1;
    if ((c->idouble = fp_kernels_float_kind(in, "input")) < 0)
        goto done;
    if ((c->odouble = fp_kernels_float_kind(out, "output")) < 0)
        goto done;
    nd = PyArray_NDIM(a);
    if (nd < 1 || nd > FP_MAXDIM) {
        PyErr_Format(PyExc_ValueError, "input must have 1 to %d dimensions", FP_MAXDIM);
        goto done;
    }
    if (PyArray_NDIM(o) != nd || !PyArray_CompareLists(PyArray_DIMS(a), PyArray_DIMS(o), nd)) {
        PyErr_SetString(PyExc_ValueError, "output must have the shape of input");
        goto done;
    }
    if (!PyArray_ISWRITEABLE(o)) {
        PyErr_SetString(PyExc_ValueError, "output must be writeable");
        goto done;
    }
    if (fp_kernels_count(ci->nmode, nd, "modes") < 0 ||
        fp_kernels_count(ci->norigin, nd, "origins") < 0)
        goto done;
    for (int d = 0; d < nd; d++) {
        if (mode_in[d] < FP_MODE_REFLECT || mode_in[d] > FP_MODE_WRAP) {
            PyErr_Format(PyExc_ValueError, "modes: unknown mode code %ld", mode_in[d]);
            goto done;
        }
        if (ntaps_in[d] < 1 || ntaps_in[d] / 2 + origin_in[d] < 0 ||
            ntaps_in[d] / 2 + origin_in[d] >= ntaps_in[d]) {
            PyErr_Format(PyExc_ValueError, "origins: invalid origin %ld for %zd taps on axis %d",
                         origin_in[d], (Py_ssize_t)ntaps_in[d], d);
            goto done;
        }
        if (PyArray_DIM(a, d) == 0)
            empty = 1;
        perm[d] = d;
    }
    /* insertion sort of the axes by decreasing |input stride| (stable) */
    for (int i = 1; i < nd; i++) {
        int p = perm[i], j = i;
        npy_intp sp = PyArray_STRIDE(a, p) < 0 ? -PyArray_STRIDE(a, p) : PyArray_STRIDE(a, p);
        while (j > 0) {
            npy_intp sq = PyArray_STRIDE(a, perm[j - 1]);
            if (sq < 0)
                sq = -sq;
            if (sq >= sp)
                break;
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    c->ndim = nd;
    c->exact = 0;
    c->idata = PyArray_BYTES(a);
    c->odata = PyArray_BYTES(o);
    c->cval = cval;
    for (int d = 0; d < nd; d++) {
        int p = perm[d];
        c->shape[d] = PyArray_DIM(a, p);
        c->istride[d] = PyArray_STRIDE(a, p);
        c->ostride[d] = PyArray_STRIDE(o, p);
        c->ntaps[d] = ntaps_in[p];
        mode[d] = (int)mode_in[p];
        shift[d] = ntaps_in[p] / 2 + origin_in[p];
        c->map[d] = NULL;
    }
    if (empty) {
        result = 0;
        goto done;
    }
    c->nthreads = fp_pool_get_threads();
    if (fp_conv_make_maps(c, mode, shift) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = 1;
done:
    return result;
}

/* _correlate_separable(input, output, factors, modes, cval, origins): output = correlation
 * of input with the outer product of the 1-D float64 arrays in factors.  The factors are held
 * by a tuple copy, and every argument that runs Python code is read before any data pointer is
 * taken.  Returns None, or NULL with an exception set. */
static PyObject *
fp_correlate_separable(FP_UNUSED PyObject *self, PyObject *args)
{
    PyObject *in, *out, *factors, *modes, *origins, *fast = NULL, *result = NULL;
    double cval;
    fp_conv c;
    fp_conv_ints ci;
    ptrdiff_t ntaps[FP_MAXDIM];
    const double *fac[FP_MAXDIM];
    int perm[FP_MAXDIM], rc = 0, nd;
    c.ndim = 0;
    if (!PyArg_ParseTuple(args, "OOOOdO:_correlate_separable", &in, &out, &factors, &modes, &cval,
                          &origins))
        return NULL;
    if (fp_numpy_ready() < 0)
        return NULL;
    if (!PySequence_Check(factors)) {
        PyErr_SetString(PyExc_TypeError, "factors must be a sequence of arrays");
        return NULL;
    }
    fast = PySequence_Tuple(factors);
    if (fast == NULL)
        return NULL;
    if (fp_conv_read_ints(modes, origins, &ci) < 0)
        goto done;
    if (!PyArray_Check(in)) {
        PyErr_SetString(PyExc_TypeError, "input must be a numpy.ndarray");
        goto done;
    }
    nd = PyArray_NDIM((PyArrayObject *)in);
    if (nd < 1 || nd > FP_MAXDIM || PyTuple_GET_SIZE(fast) != nd) {
        PyErr_SetString(PyExc_ValueError, "factors: expected one 1-D array per input axis");
        goto done;
    }
    for (int d = 0; d < nd; d++) {
        PyArrayObject *f = (PyArrayObject *)PyTuple_GET_ITEM(fast, d);
        if (!PyArray_Check(f) || PyArray_TYPE(f) != NPY_DOUBLE || PyArray_NDIM(f) != 1 ||
            !PyArray_IS_C_CONTIGUOUS(f) || PyArray_DIM(f, 0) < 1) {
            PyErr_SetString(PyExc_TypeError,
                            "factors: each must be a non-empty contiguous 1-D float64 array");
            goto done;
        }
        ntaps[d] = PyArray_DIM(f, 0);
        fac[d] = (const double *)PyArray_DATA(f);
    }
    rc = fp_conv_setup(&c, in, out, &ci, cval, ntaps, perm);
    if (rc < 0)
        goto done;
    if (rc > 0) {
        c.single = !c.idouble && !c.odouble;
        for (int d = 0; d < nd; d++) {
            c.factors[d] = fac[perm[d]];
            if (c.ntaps[d] > FP_SINGLE_MAX_TAPS)
                c.single = 0;
        }
        Py_BEGIN_ALLOW_THREADS rc = fp_conv_separable(&c);
        Py_END_ALLOW_THREADS fp_conv_free_maps(&c);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(fast);
    return result;
}

/* _correlate_general(input, output, weights, modes, cval, origins): output = correlation of
 * input with the float64 C-contiguous weights (same rank).  modes and origins are read
 * before any array is looked at.  Returns None, or NULL with an exception set. */
static PyObject *
fp_correlate_general(FP_UNUSED PyObject *self, PyObject *args)
{
    PyObject *in, *out, *wobj, *modes, *origins, *result = NULL;
    PyArrayObject *w, *wt = NULL;
    double cval;
    fp_conv c;
    fp_conv_ints ci;
    ptrdiff_t ntaps[FP_MAXDIM];
    int perm[FP_MAXDIM], rc, nd, exact = 0, maps = 0;
    c.ndim = 0;
    c.single = 0;
    c.map[0] = NULL;
    if (!PyArg_ParseTuple(args, "OOOOdO|p:_correlate_general", &in, &out, &wobj, &modes, &cval,
                          &origins, &exact))
        return NULL;
    if (fp_numpy_ready() < 0)
        return NULL;
    if (fp_conv_read_ints(modes, origins, &ci) < 0)
        return NULL;
    if (!PyArray_Check(in) || !PyArray_Check(wobj)) {
        PyErr_SetString(PyExc_TypeError, "input and weights must be numpy.ndarray");
        return NULL;
    }
    w = (PyArrayObject *)wobj;
    nd = PyArray_NDIM((PyArrayObject *)in);
    if (PyArray_TYPE(w) != NPY_DOUBLE || PyArray_NDIM(w) != nd || nd < 2 || nd > FP_MAXDIM) {
        PyErr_SetString(PyExc_ValueError,
                        "weights must be float64 with the rank of input (2 or more)");
        return NULL;
    }
    for (int d = 0; d < nd; d++)
        ntaps[d] = PyArray_DIM(w, d);
    rc = fp_conv_setup(&c, in, out, &ci, cval, ntaps, perm);
    if (rc < 0)
        return NULL;
    maps = rc > 0; /* the index maps setup made, freed at done (rc is the run's next) */
    if (rc > 0) {
        /* weights in the permuted axis order, C-contiguous */
        PyArray_Dims pd;
        npy_intp pv[FP_MAXDIM];
        PyObject *tr;
        for (int d = 0; d < nd; d++)
            pv[d] = perm[d];
        pd.ptr = pv;
        pd.len = nd;
        tr = PyArray_Transpose(w, &pd);
        if (tr == NULL)
            goto done;
        wt = (PyArrayObject *)PyArray_FROM_OTF(tr, NPY_DOUBLE,
                                               NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
        Py_DECREF(tr);
        if (wt == NULL)
            goto done;
        c.weights = (const double *)PyArray_DATA(wt);
        c.exact = exact;
        Py_BEGIN_ALLOW_THREADS rc = fp_conv_general(&c);
        Py_END_ALLOW_THREADS if (rc < 0)
        {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    if (maps)
        fp_conv_free_maps(&c);
    Py_XDECREF(wt);
    return result;
}

/* _set_num_threads(n): sets the kernels' thread count.  Returns None, or NULL with an
 * exception set. */
static PyObject *
fp_set_num_threads(FP_UNUSED PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1 || n > 256) {
        PyErr_SetString(PyExc_ValueError, "n must be an int between 1 and 256");
        return NULL;
    }
    fp_pool_set_threads((int)n);
    Py_RETURN_NONE;
}

/* _get_num_threads(): the kernels' thread count.  Returns an int (never fails but on
 * memory). */
static PyObject *
fp_get_num_threads(FP_UNUSED PyObject *self, FP_UNUSED PyObject *unused)
{
    return PyLong_FromLong(fp_pool_get_threads());
}

/* _usable_cores(): the cores this process may run on.  Returns an int. */
static PyObject *
fp_usable_cores(FP_UNUSED PyObject *self, FP_UNUSED PyObject *unused)
{
    return PyLong_FromLong(fp_pool_usable_cores());
}

static PyMethodDef fp_kernels_methods[] = {
    {"_correlate_separable", fp_correlate_separable, METH_VARARGS,
     "_correlate_separable(input, output, factors, modes, cval, origins)"},
    {"_correlate_general", fp_correlate_general, METH_VARARGS,
     "_correlate_general(input, output, weights, modes, cval, origins, exact=False)"},
    {"_uniform_filter1d", fp_uniform_filter1d, METH_VARARGS,
     "_uniform_filter1d(input, output, size, axis, mode, cval, origin)"},
    {"_uniform_filter_exact", fp_uniform_filter_exact, METH_VARARGS,
     "_uniform_filter_exact(input, output, sizes, modes, origins, cval, order)"},
    {"_evaluate_program", fp_evaluate_program, METH_VARARGS,
     "_evaluate_program(steps, inputs, consts, nregs, result, out)"},
    {"_expr_opcodes", fp_expr_opcodes, METH_NOARGS, "_expr_opcodes() -> {name: opcode}"},
    {"_set_num_threads", fp_set_num_threads, METH_O, "_set_num_threads(n)"},
    {"_get_num_threads", fp_get_num_threads, METH_NOARGS, "_get_num_threads()"},
    {"_usable_cores", fp_usable_cores, METH_NOARGS, "_usable_cores()"},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  NumPy is not imported here: each entry point above that reads arrays calls
 * fp_numpy_ready() first. */
int
fp_kernels_exec(FP_UNUSED PyObject *m)
{
    if (PyModule_AddFunctions(m, fp_kernels_methods) < 0)
        return -1;
    return 0;
}
