/* timeline.c - the call profiler's timeline (timeline.h): its ring of spans, the per-function
 * module filter decided once per function, and the export of its spans. */
#include "timeline.h"

#include <frameobject.h>
#include <stdlib.h>
#include <string.h>

/* See timeline.h. */
fp_timeline *
fp_tl_new(int64_t cap, double min_seconds, PyObject *include, PyObject *exclude)
{
    fp_timeline *tl = NULL;
    if (cap <= 0 || (uint64_t)cap >= SIZE_MAX / sizeof(fp_span)) {
        PyErr_Format(PyExc_ValueError, "timeline must be a positive number of spans, not %lld",
                     (long long)cap);
        goto error;
    }
    tl = PyMem_RawCalloc(1, sizeof(fp_timeline));
    if (tl == NULL)
        goto nomem;
    tl->ring = PyMem_RawMalloc(((size_t)cap + 1) * sizeof(fp_span));
    if (tl->ring == NULL)
        goto nomem;
    tl->cap = cap;
    tl->cur = tl->ring;
    tl->end = tl->ring + cap + 1;
    tl->min_seconds = min_seconds;
    tl->include = Py_NewRef(include);
    tl->exclude = Py_NewRef(exclude);
    return tl;
nomem:
    PyErr_Format(PyExc_MemoryError, "no memory for a timeline of %lld spans", (long long)cap);
error:
    fp_tl_free(tl);
    return NULL;
}

/* See timeline.h. */
void
fp_tl_free(fp_timeline *tl)
{
    if (tl == NULL)
        return;
    PyMem_RawFree(tl->ring);
    PyMem_RawFree(tl->keep);
    PyMem_RawFree(tl->thr);
    Py_XDECREF(tl->include);
    Py_XDECREF(tl->exclude);
    PyMem_RawFree(tl);
}

/* See timeline.h. */
void
fp_tl_clear(fp_timeline *tl)
{
    tl->cur = tl->ring;
    tl->n = 0;
    tl->nkeep = 0;
}

/* Returns 1 when module (a str) is pat or inside the package pat (pat followed by a dot),
 * else 0. */
static int
fp_tl_match(PyObject *module, PyObject *pat)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(pat);
    Py_ssize_t m = PyUnicode_GET_LENGTH(module);
    if (m < n || PyUnicode_Tailmatch(module, pat, 0, n, -1) != 1)
        return 0;
    return m == n || PyUnicode_ReadChar(module, n) == '.';
}

/* Returns 1 when any name of the tuple pats matches module (see fp_tl_match), else 0. */
static int
fp_tl_any(PyObject *module, PyObject *pats)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pats); i++)
        if (fp_tl_match(module, PyTuple_GET_ITEM(pats, i)))
            return 1;
    return 0;
}

/* Makes room in tl's per-function arrays for function index fi.  Returns 0, or -1 when out
 * of memory (no exception set; tl unchanged). */
static int
fp_tl_room(fp_timeline *tl, int32_t fi)
{
    if (fi < tl->capkeep)
        return 0;
    int32_t ncap = tl->capkeep ? tl->capkeep : 256;
    while (ncap <= fi)
        ncap *= 2;
    uint8_t *keep = PyMem_RawRealloc(tl->keep, (size_t)ncap);
    if (keep == NULL)
        return -1;
    tl->keep = keep;
    fp_tick *thr = PyMem_RawRealloc(tl->thr, (size_t)ncap * sizeof(fp_tick));
    if (thr == NULL)
        return -1; /* keep grew alone: capkeep still bounds both */
    tl->thr = thr;
    tl->capkeep = ncap;
    return 0;
}

/* Sets the verdict of function fi (< tl->capkeep): kept or not, and its threshold.  Returns
 * nothing. */
static void
fp_tl_set(fp_timeline *tl, int32_t fi, int keep)
{
    tl->keep[fi] = (uint8_t)keep;
    tl->thr[fi] = keep ? tl->min_ticks : INT64_MAX;
}

/* See timeline.h. */
int
fp_tl_decide(fp_timeline *tl, int32_t fi, PyObject *module)
{
    if (fp_tl_room(tl, fi) < 0)
        return -1;
    int keep;
    if (module == NULL)
        keep = PyTuple_GET_SIZE(tl->include) == 0;
    else
        keep = (PyTuple_GET_SIZE(tl->include) == 0 || fp_tl_any(module, tl->include)) &&
               !fp_tl_any(module, tl->exclude);
    /* a function left undecided by a failure is of an unknown module (see fp_tl_arm) */
    for (int32_t i = tl->nkeep; i < fi; i++)
        fp_tl_set(tl, i, PyTuple_GET_SIZE(tl->include) == 0);
    fp_tl_set(tl, fi, keep);
    if (fi >= tl->nkeep)
        tl->nkeep = fi + 1;
    return 0;
}

/* See timeline.h. */
int
fp_tl_arm(fp_timeline *tl, fp_tick min_ticks, int32_t nfuncs)
{
    if (nfuncs > 0 && fp_tl_room(tl, nfuncs - 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    tl->min_ticks = min_ticks;
    for (int32_t i = 0; i < tl->nkeep; i++)
        fp_tl_set(tl, i, tl->keep[i]);
    for (int32_t i = tl->nkeep; i < nfuncs; i++)
        fp_tl_set(tl, i, PyTuple_GET_SIZE(tl->include) == 0);
    if (nfuncs > tl->nkeep)
        tl->nkeep = nfuncs;
    return 0;
}

/* Returns a new reference to o when it is a str, else to a module's name when it is a module,
 * else NULL; no exception set either way. */
static PyObject *
fp_tl_name_of(PyObject *o)
{
    if (o == NULL)
        return NULL;
    if (PyUnicode_Check(o))
        return Py_NewRef(o);
    if (PyModule_Check(o)) {
        PyObject *name = PyModule_GetNameObject(o);
        if (name == NULL)
            PyErr_Clear();
        return name;
    }
    return NULL;
}

/* See timeline.h. */
PyObject *
fp_tl_code_module(PyObject *code)
{
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    if (frame == NULL)
        return NULL;
    PyCodeObject *fcode = PyFrame_GetCode(frame);
    int same = (PyObject *)fcode == code;
    Py_DECREF(fcode);
    if (!same)
        return NULL;
    PyObject *globals = PyEval_GetGlobals(); /* borrowed: the running frame's */
    if (globals == NULL || !PyDict_Check(globals))
        return NULL;
    PyObject *name = PyDict_GetItemString(globals, "__name__"); /* borrowed, never raises */
    return name != NULL && PyUnicode_Check(name) ? Py_NewRef(name) : NULL;
}

/* See timeline.h. */
PyObject *
fp_tl_builtin_module(PyObject *callable, PyObject *self_arg)
{
    PyObject *type = NULL, *name = NULL;
    if (PyCFunction_Check(callable)) {
        PyCFunctionObject *f = (PyCFunctionObject *)callable;
        if ((name = fp_tl_name_of(f->m_module)) != NULL)
            return name;
        PyObject *self = PyCFunction_GET_SELF(callable);
        if (self != NULL && PyModule_Check(self))
            return fp_tl_name_of(self);
        if (self != NULL)
            type = PyType_Check(self) ? self : (PyObject *)Py_TYPE(self);
    } else if (Py_IS_TYPE(callable, &PyMethodDescr_Type)) {
        type = (PyObject *)PyDescr_TYPE(callable);
    } else if (self_arg != NULL) {
        type = (PyObject *)Py_TYPE(self_arg);
    }
    if (type == NULL)
        return NULL;
    name = PyObject_GetAttrString(type, "__module__");
    if (name == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_Check(name))
        Py_CLEAR(name);
    return name;
}

/* See timeline.h. */
int
fp_tl_modules_arg(PyObject *value, const char *name, PyObject **out)
{
    PyObject *tuple = NULL;
    if (value == NULL || value == Py_None) {
        tuple = PyTuple_New(0);
    } else if (PyUnicode_Check(value)) {
        tuple = PyTuple_Pack(1, value);
    } else {
        PyObject *seq = PySequence_Tuple(value);
        if (seq == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s must be a module name or an iterable of module names, not %.80s", name,
                         Py_TYPE(value)->tp_name);
            goto error;
        }
        tuple = seq;
    }
    if (tuple == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyUnicode_Check(item) || PyUnicode_GET_LENGTH(item) == 0) {
            PyErr_Format(PyExc_TypeError, "%s must hold non-empty module names (str), not %R", name,
                         item);
            goto error;
        }
    }
    *out = tuple;
    return 0;
error:
    Py_XDECREF(tuple);
    return -1;
}

/* See timeline.h. */
PyObject *
fp_tl_spans(const fp_timeline *tl)
{
    int64_t count = tl->n < tl->cap ? tl->n : tl->cap;
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL)
        goto error;
    int64_t slots = tl->cap + 1, next = tl->cur - tl->ring;
    int64_t first = (next - count + slots) % slots;
    for (int64_t k = 0; k < count; k++) {
        const fp_span *s = &tl->ring[(first + k) % slots];
        PyObject *row = Py_BuildValue("(LLiii)", (long long)s->t0, (long long)s->t1, s->func,
                                      s->thread, s->depth);
        if (row == NULL)
            goto error;
        PyList_SET_ITEM(list, (Py_ssize_t)k, row);
    }
    return list;
error:
    Py_XDECREF(list);
    return NULL;
}
