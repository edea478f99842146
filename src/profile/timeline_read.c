/* timeline_read.c - the timeline's spans read back for a reader (timeline.h): copied out of the
 * ring oldest first, less the spans a caller leaves out, sorted by thread, start and depth
 * with a stable merge sort (spans of one depth starting at one tick keep the ring's order),
 * and put on the nanosecond axis, all without a Python object per span: a trace holds up to
 * millions of them, and fastprof.timeline builds its Span objects only when they are read. */
#include "timeline.h"

#include <math.h>
#include <string.h>

/* Returns whether span a goes before span b: by thread, then start, then depth. */
static int
fp_tlr_before(const fp_span *a, const fp_span *b)
{
    if (a->thread != b->thread)
        return a->thread < b->thread;
    if (a->t0 != b->t0)
        return a->t0 < b->t0;
    return a->depth < b->depth;
}

/* Sorts the n spans at a (tmp: room for n more) stably with fp_tlr_before, bottom-up.
 * Returns a or tmp, whichever holds the sorted spans. */
static fp_span *
fp_tlr_sort(fp_span *a, fp_span *tmp, int64_t n)
{
    fp_span *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) /* the right run's span goes first only when strictly */
                dst[k++] = fp_tlr_before(&src[j], &src[i]) ? src[j++] : src[i++]; /* before */
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        fp_span *swap = src;
        src = dst;
        dst = swap;
    }
    return src;
}

/* Puts the tick t on the nanosecond axis: m0 + round((t - k0) * scale), rounding half to
 * even as Python's round() does; in integers when scale is 1 or 1000 (a user timer's
 * nanoseconds or microseconds, which may be epoch-sized: a double holds 53 bits).  Returns 0,
 * or -1 with OverflowError set when the result leaves int64. */
static int
fp_tlr_ns(fp_tick t, int64_t m0, int64_t k0, double scale, fp_tick *out)
{
    if (scale == 1.0 || scale == 1000.0) { /* a timer's ns or us: exact beyond 2**53 too */
        int64_t ns;
        if (__builtin_mul_overflow(t - k0, (int64_t)scale, &ns) ||
            __builtin_add_overflow(m0, ns, out)) {
            PyErr_SetString(PyExc_OverflowError,
                            "a timeline span's time does not fit in 64-bit nanoseconds");
            return -1;
        }
        return 0;
    }
    double x = nearbyint((double)(t - k0) * scale);
    if (!(fabs(x) < 9.2e18)) {
        PyErr_SetString(PyExc_OverflowError,
                        "a timeline span's time does not fit in 64-bit nanoseconds");
        return -1;
    }
    int64_t ns = (int64_t)x;
    if ((ns > 0 && m0 > INT64_MAX - ns) || (ns < 0 && m0 < INT64_MIN - ns)) {
        PyErr_SetString(PyExc_OverflowError,
                        "a timeline span's time does not fit in 64-bit nanoseconds");
        return -1;
    }
    *out = m0 + ns;
    return 0;
}

/* See timeline.h. */
PyObject *
fp_tl_records(const fp_timeline *tl, int64_t m0, int64_t k0, double scale)
{
    fp_span *buf = NULL;
    PyObject *bytes = NULL;
    int64_t count = tl->n < tl->cap ? tl->n : tl->cap;
    buf = PyMem_RawMalloc(((size_t)count * 2 + 1) * sizeof(fp_span));
    if (buf == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    int64_t slots = tl->cap + 1, next = tl->cur - tl->ring;
    int64_t first = (next - count + slots) % slots;
    for (int64_t k = 0; k < count; k++)
        buf[k] = tl->ring[(first + k) % slots];
    fp_span *sorted = fp_tlr_sort(buf, buf + count, count);
    for (int64_t k = 0; k < count; k++) {
        fp_span *s = &sorted[k];
        if (fp_tlr_ns(s->t0, m0, k0, scale, &s->t0) < 0 ||
            fp_tlr_ns(s->t1, m0, k0, scale, &s->t1) < 0)
            goto error;
        s->pad = 0;
    }
    bytes = PyBytes_FromStringAndSize((const char *)sorted, (Py_ssize_t)(count * sizeof(fp_span)));
error:
    PyMem_RawFree(buf);
    return bytes;
}

/* Checks that type is a tuple subclass whose objects are plain tuples of their items (as a
 * class statement or collections.namedtuple makes): not a struct sequence (os.stat_result),
 * whose hidden fields a five-item allocation would not hold.  Returns 0, or -1 with
 * TypeError. */
static int
fp_tlr_plain_tuple_type(PyTypeObject *type)
{
    int structseq = 0;
    if (Py_IS_TYPE(type, &PyType_Type) && PyType_IsSubtype(type, &PyTuple_Type) &&
        type->tp_alloc != NULL && type->tp_itemsize == PyTuple_Type.tp_itemsize) {
        structseq = PyObject_HasAttrString((PyObject *)type, "n_sequence_fields");
        if (!structseq)
            return 0;
    }
    PyErr_Format(PyExc_TypeError, "span_type must be a plain subclass of tuple%s, not %.100s",
                 structseq ? " (not a struct sequence)" : "", type->tp_name);
    return -1;
}

/* _spans_of_records(records, keys, span_type) -> list: a span_type (a tuple subclass of five
 * fields, fastprof.timeline.Span) per record of records (as _timeline_records gives them):
 * (start_ns, end_ns, keys[func], thread, depth).  Returns the list, or NULL with an exception
 * set (TypeError for a span_type that is no tuple subclass, ValueError for records of the
 * wrong size or a function index beyond keys). */
static PyObject *
fp_tlr_spans_of_records(FP_UNUSED PyObject *m, PyObject *args)
{
    Py_buffer view;
    PyObject *keys, *list = NULL;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "y*O!O!:_spans_of_records", &view, &PyList_Type, &keys,
                          &PyType_Type, &type))
        return NULL;
    if (fp_tlr_plain_tuple_type(type) < 0)
        goto error;
    if (view.len % (Py_ssize_t)sizeof(fp_span) != 0) {
        PyErr_SetString(PyExc_ValueError, "records must be whole span records");
        goto error;
    }
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(fp_span);
    list = PyList_New(n);
    if (list == NULL)
        goto error;
    for (Py_ssize_t k = 0; k < n; k++) {
        fp_span s;
        memcpy(&s, (const char *)view.buf + k * (Py_ssize_t)sizeof(fp_span), sizeof s);
        if (s.func < 0 || s.func >= PyList_GET_SIZE(keys)) {
            PyErr_Format(PyExc_ValueError, "a span names function %d, beyond keys", s.func);
            goto error;
        }
        PyObject *span = type->tp_alloc(type, 5);
        if (span == NULL)
            goto error;
        PyList_SET_ITEM(list, k, span); /* the list owns it, filled below */
        PyObject *fields[5] = {PyLong_FromLongLong(s.t0), PyLong_FromLongLong(s.t1),
                               Py_NewRef(PyList_GET_ITEM(keys, s.func)), PyLong_FromLong(s.thread),
                               PyLong_FromLong(s.depth)};
        int failed = 0;
        for (int i = 0; i < 5; i++) {
            if (fields[i] == NULL)
                failed = 1;
            else
                PyTuple_SET_ITEM(span, i, fields[i]);
        }
        if (failed)
            goto error;
    }
    PyBuffer_Release(&view);
    return list;
error:
    Py_XDECREF(list); /* its spans, filled or not, go with it */
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef fp_tlr_methods[] = {
    {"_spans_of_records", fp_tlr_spans_of_records, METH_VARARGS,
     "_spans_of_records(records, keys, span_type) -> list of span_type(start_ns, end_ns, "
     "keys[func], thread, depth) (fastprof.timeline's Span objects)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h: adds _spans_of_records and TIMELINE_RECORD_SIZE (the bytes of one record, which
 * fastprof.timeline and the Chrome writer read).  Returns 0, or -1 with an exception set. */
int
fp_tl_read_exec(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "TIMELINE_RECORD_SIZE", (long)sizeof(fp_span)) < 0)
        return -1;
    return PyModule_AddFunctions(m, fp_tlr_methods);
}
