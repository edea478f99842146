/* tree_fold.c - fastprof._fastprof._tree_fold: the views' folding of a call tree's rows
 * (fastprof.report.display.display_tree) run straight over the block of _tree_snapshot(), so
 * that a row folding a library's internals or a recursion reads the records below it without
 * a node object made for each. */
#include "profile/tree_block.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* One path being walked: a record and the recursion level it is at. */
typedef struct fp_fold_item {
    int64_t k, level;
} fp_fold_item;

/* Pushes the children of slot s of b (in reverse, so the first is taken first) at level onto
 * the stack *st of *len items and *cap room.  Returns 0, or -1 with an exception set. */
static int
fp_fold_push(const fp_tree_block *b, int64_t s, int64_t level, fp_fold_item **st, size_t *len,
             size_t *cap)
{
    int64_t lo, hi;
    if (fp_tree_block_kids(b, s, &lo, &hi) < 0 ||
        fp_tree_block_grow((void **)st, cap, *len + (size_t)(hi - lo), sizeof(fp_fold_item)) < 0)
        return -1;
    for (int64_t j = hi - 1; j >= lo; j--) {
        int64_t k = fp_tree_block_kid(b, s, j);
        if (k < 0)
            return -1;
        (*st)[(*len)++] = (fp_fold_item){k, level};
    }
    return 0;
}

/* Whether function func (whose key is key) is a library's, by the cache libs (0: not asked
 * yet, 1: no, 2: yes), asking is_lib(key) the first time.  Returns 1 or 0, or -1 with an exception
 * set. */
static int
fp_fold_is_lib(PyObject *key, int64_t func, unsigned char *libs, PyObject *is_lib)
{
    if (libs[func] == 0) {
        PyObject *r = PyObject_CallOneArg(is_lib, key);
        int yes = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
        if (yes < 0)
            return -1;
        libs[func] = yes ? 2 : 1;
    }
    return libs[func] == 2;
}

/* _tree_fold(block, threads, slot, level, keys, libs, is_lib, row_key, fold_rec, fold_lib, spt,
 * ncalls, tottime, levels, hidden) -> (ncalls, tottime, levels, hidden, made): display_tree's
 * walk below one row over the records below slot, depth first in order: a record of the row's
 * function (fold_rec) adds its calls and own time to the row and a level, one of a library
 * (fold_lib, is_lib(key) true; libs its bytearray cache by function) adds its own time and one
 * hidden frame and starts the levels again, and both go on below; any other record makes a
 * row of its own, and its index is added to made.  Returns the row's new sums, or NULL with
 * an exception set. */
static PyObject *
fp_tree_fold(FP_UNUSED PyObject *module, PyObject *args)
{
    Py_buffer view = {0}, cache = {0};
    PyObject *keys, *is_lib, *row_key, *made = NULL, *result = NULL;
    Py_ssize_t threads;
    long long slot, level, ncalls, levels, hidden;
    int fold_rec, fold_lib;
    double spt, tottime;
    fp_tree_block b;
    fp_fold_item *st = NULL;
    size_t len = 0, cap = 0;
    if (!PyArg_ParseTuple(args, "y*nLLO!w*OOppdLdLL:_tree_fold", &view, &threads, &slot, &level,
                          &PyList_Type, &keys, &cache, &is_lib, &row_key, &fold_rec, &fold_lib,
                          &spt, &ncalls, &tottime, &levels, &hidden))
        return NULL;
    if (fp_tree_block_read(&view, threads, &b) < 0)
        goto error;
    if (cache.len != PyList_GET_SIZE(keys)) {
        PyErr_SetString(PyExc_ValueError, "libs must have one byte a key");
        goto error;
    }
    if (level < 1 || level > b.n + 1 || hidden < 0 || hidden > LLONG_MAX - b.n) {
        PyErr_SetString(PyExc_ValueError,
                        "level must be between 1 and the records' count + 1, hidden >= 0");
        goto error;
    }
    made = PyList_New(0);
    if (made == NULL || fp_fold_push(&b, slot, level, &st, &len, &cap) < 0)
        goto error;
    /* each record has one parent: a walk of a snapshot meets each at most once */
    int64_t visits = 0;
    while (len > 0) {
        fp_fold_item it = st[--len];
        const int64_t *r = b.recs + 5 * it.k;
        int64_t func = r[1];
        if (++visits > b.n) {
            PyErr_SetString(PyExc_ValueError, "block is not a call tree snapshot");
            goto error;
        }
        if (func < 0 || func >= cache.len || func >= PyList_GET_SIZE(keys)) {
            PyErr_SetString(PyExc_ValueError, "a record names no key");
            goto error;
        }
        /* held: a key's __eq__ or is_lib may drop the list's reference */
        PyObject *key = Py_NewRef(PyList_GET_ITEM(keys, func));
        int same = 0;
        if (fold_rec)
            same = key == row_key ? 1 : PyObject_RichCompareBool(key, row_key, Py_EQ);
        int lib = 0;
        if (same == 0 && fold_lib)
            lib = fp_fold_is_lib(key, func, (unsigned char *)cache.buf, is_lib);
        Py_DECREF(key);
        if (same < 0 || lib < 0)
            goto error;
        if (same) {
            it.level++; /* at most level + n: no overflow (level <= n + 1, checked above) */
            levels = it.level > levels ? it.level : levels;
            if (__builtin_add_overflow(ncalls, r[2], &ncalls)) {
                PyErr_SetString(PyExc_OverflowError, "the calls' sum does not fit 64 bits");
                goto error;
            }
            tottime += fp_tree_block_secs(r[4], spt);
        } else {
            if (!lib) {
                PyObject *k = PyLong_FromLongLong(it.k);
                if (k == NULL || PyList_Append(made, k) < 0) {
                    Py_XDECREF(k);
                    goto error;
                }
                Py_DECREF(k);
                continue;
            }
            hidden++;
            tottime += fp_tree_block_secs(r[4], spt);
            it.level = 1;
        }
        if (fp_fold_push(&b, it.k, it.level, &st, &len, &cap) < 0)
            goto error;
    }
    result = Py_BuildValue("(LdLLO)", ncalls, tottime, levels, hidden, made);
error:
    PyMem_RawFree(st);
    Py_XDECREF(made);
    PyBuffer_Release(&view);
    PyBuffer_Release(&cache);
    return result;
}

static PyMethodDef fp_fold_methods[] = {
    {"_tree_fold", fp_tree_fold, METH_VARARGS,
     "_tree_fold(block, threads, slot, level, keys, libs, is_lib, row_key, fold_rec, fold_lib, "
     "spt, ncalls, tottime, levels, hidden) -> (ncalls, tottime, levels, hidden, made): a "
     "view's row folded over a call tree snapshot's records."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_tree_fold_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_fold_methods);
}
