/* tree_columns.c - fastprof._fastprof._tree_columns: the HTML report's columns of a call tree
 * (fastprof.report.html._tree_threads) made straight from the block of _tree_snapshot() for the
 * records below a node whose children were never read, so that a report of a wide program
 * makes no node object for each of its paths. */
#include "profile/tree_block.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* One record to visit: the row its node hangs below, that row's key and the level of direct
 * recursion the record's parent is at in it. */
typedef struct fp_col_item {
    int64_t k, row, key, level;
} fp_col_item;

/* The rows made by one call, kept in C until the walk ends. */
typedef struct fp_col_rows {
    int64_t *parent, *key, *calls, *levels;
    double *own, *total;
    size_t n, cap;
} fp_col_rows;

/* Frees the arrays of r.  Returns nothing. */
static void
fp_col_rows_free(fp_col_rows *r)
{
    PyMem_RawFree(r->parent);
    PyMem_RawFree(r->key);
    PyMem_RawFree(r->calls);
    PyMem_RawFree(r->levels);
    PyMem_RawFree(r->own);
    PyMem_RawFree(r->total);
}

/* Makes room in r for one more row.  Returns 0, or -1 with MemoryError. */
static int
fp_col_rows_room(fp_col_rows *r)
{
    if (r->n < r->cap)
        return 0;
    size_t cap = r->cap, n = r->n + 1;
    void **cols[] = {(void **)&r->parent, (void **)&r->key, (void **)&r->calls,
                     (void **)&r->levels, (void **)&r->own, (void **)&r->total};
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        size_t c = r->cap;
        if (fp_tree_block_grow(cols[i], &c, n, 8) < 0)
            return -1;
        cap = c;
    }
    r->cap = cap;
    return 0;
}

/* The page's key index of function func: keymap's cache (index + 1, 0 when not asked yet),
 * else number(keys[func]), which must give an int >= 0.  Returns it, or -1 with an exception
 * set. */
static int64_t
fp_col_key(int64_t func, PyObject *keys, int64_t *keymap, Py_ssize_t nmap, PyObject *number)
{
    if (func < 0 || func >= nmap || func >= PyList_GET_SIZE(keys)) {
        PyErr_SetString(PyExc_ValueError, "a record names no key");
        return -1;
    }
    if (keymap[func] > 0)
        return keymap[func] - 1;
    /* held: number may run a key's __hash__ and __eq__, which may drop the list's reference */
    PyObject *key = Py_NewRef(PyList_GET_ITEM(keys, func));
    PyObject *r = PyObject_CallOneArg(number, key);
    Py_DECREF(key);
    if (r == NULL)
        return -1;
    long long i = PyLong_Check(r) ? PyLong_AsLongLong(r) : -1;
    Py_DECREF(r);
    if (i < 0 || i == LLONG_MAX) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "number must give an int >= 0 for each key");
        return -1;
    }
    keymap[func] = i + 1;
    return i;
}

/* Pushes the children of slot s (in reverse: the first is taken first) below row (of key key,
 * the parent at level) onto the stack.  Returns 0, or -1 with an exception set. */
static int
fp_col_push(const fp_tree_block *b, int64_t s, int64_t row, int64_t key, int64_t level,
            fp_col_item **st, size_t *len, size_t *cap)
{
    int64_t lo, hi;
    if (fp_tree_block_kids(b, s, &lo, &hi) < 0 ||
        fp_tree_block_grow((void **)st, cap, *len + (size_t)(hi - lo), sizeof(fp_col_item)) < 0)
        return -1;
    for (int64_t j = hi - 1; j >= lo; j--) {
        int64_t k = fp_tree_block_kid(b, s, j);
        if (k < 0)
            return -1;
        (*st)[(*len)++] = (fp_col_item){k, row, key, level};
    }
    return 0;
}

/* Appends n values of col (int64s, or doubles when dbl) to list.  Returns 0, or -1 with an
 * exception set. */
static int
fp_col_extend(PyObject *list, const void *col, size_t n, int dbl)
{
    for (size_t i = 0; i < n; i++) {
        PyObject *v = dbl ? PyFloat_FromDouble(((const double *)col)[i])
                          : PyLong_FromLongLong(((const int64_t *)col)[i]);
        int rc = v == NULL ? -1 : PyList_Append(list, v);
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Reads row's calls, own time and levels from the lists.  Returns 0, or -1 with an exception
 * set. */
static int
fp_col_read_row(PyObject *calls, PyObject *own, PyObject *levels, Py_ssize_t row, int64_t *c,
                double *o, int64_t *lv)
{
    *c = PyLong_AsLongLong(PyList_GET_ITEM(calls, row));
    if (*c == -1 && PyErr_Occurred())
        return -1;
    *o = PyFloat_AsDouble(PyList_GET_ITEM(own, row));
    if (*o == -1.0 && PyErr_Occurred())
        return -1;
    *lv = PyLong_AsLongLong(PyList_GET_ITEM(levels, row));
    if (*lv == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

/* _tree_columns(block, threads, slot, row, level, keys, keymap, number, spt, parent, key,
 * calls, own, total, levels) -> None: html._tree_threads' walk below the node of record (or
 * thread root) slot, whose row is row at recursion level level, over the records: depth first
 * in order, a record of its parent row's function (direct recursion) adds its calls and own
 * time to that row and a level; any other makes a row (its parent row, key index, calls, own
 * and total time, level 1) appended to the six column lists.  A function's key index is
 * number(keys[func]), asked once a function (keymap: writable int64s, one a key, index + 1 or
 * 0).  Times are ticks * spt.  Returns None, or NULL with an exception set (the columns then
 * as they were). */
static PyObject *
fp_tree_columns(FP_UNUSED PyObject *module, PyObject *args)
{
    Py_buffer view = {0}, cache = {0};
    PyObject *keys, *number, *cols[6], *result = NULL;
    PyObject *new_calls = NULL, *new_own = NULL, *new_levels = NULL;
    Py_ssize_t threads, row;
    long long slot, level;
    double spt;
    fp_tree_block b;
    fp_col_item *st = NULL;
    size_t len = 0, cap = 0;
    fp_col_rows made = {0};
    if (!PyArg_ParseTuple(args, "y*nLnLO!w*OdO!O!O!O!O!O!:_tree_columns", &view, &threads, &slot,
                          &row, &level, &PyList_Type, &keys, &cache, &number, &spt, &PyList_Type,
                          &cols[0], &PyList_Type, &cols[1], &PyList_Type, &cols[2], &PyList_Type,
                          &cols[3], &PyList_Type, &cols[4], &PyList_Type, &cols[5]))
        return NULL;
    PyObject *parent = cols[0], *key = cols[1], *calls = cols[2], *own = cols[3], *total = cols[4],
             *levels = cols[5];
    if (fp_tree_block_read(&view, threads, &b) < 0)
        goto error;
    if (cache.len % 8 != 0 || (cache.len && (uintptr_t)cache.buf % _Alignof(int64_t) != 0)) {
        PyErr_SetString(PyExc_ValueError, "keymap must be aligned int64s, one a key");
        goto error;
    }
    Py_ssize_t rows = PyList_GET_SIZE(parent);
    for (int i = 1; i < 6; i++)
        if (PyList_GET_SIZE(cols[i]) != rows) {
            PyErr_SetString(PyExc_ValueError, "the columns must be lists of one length");
            goto error;
        }
    if (row < 0 || row >= rows || level < 1 || level > b.n + 1) {
        PyErr_SetString(PyExc_ValueError,
                        "row must be a row of the columns, level between 1 and the records' "
                        "count + 1");
        goto error;
    }
    int64_t row_calls, row_levels, row_key;
    double row_own;
    PyObject *k0 = PyList_GET_ITEM(key, row);
    row_key = PyLong_AsLongLong(k0);
    if (row_key == -1 && PyErr_Occurred())
        goto error;
    if (fp_col_read_row(calls, own, levels, row, &row_calls, &row_own, &row_levels) < 0)
        goto error;
    if (fp_col_push(&b, slot, -1, row_key, level, &st, &len, &cap) < 0)
        goto error;
    int64_t *keymap = (int64_t *)cache.buf, visits = 0;
    Py_ssize_t nmap = cache.len / 8;
    /* rows made here are numbered rows + their index in made; -1 stands for row */
    while (len > 0) {
        fp_col_item it = st[--len];
        const int64_t *r = b.recs + 5 * it.k;
        /* each record has one parent: a walk of a snapshot meets each at most once */
        if (++visits > b.n) {
            PyErr_SetString(PyExc_ValueError, "block is not a call tree snapshot");
            goto error;
        }
        int64_t ki = fp_col_key(r[1], keys, keymap, nmap, number);
        if (ki < 0)
            goto error;
        double secs = fp_tree_block_secs(r[4], spt);
        int64_t next_row = it.row, next_level = it.level + 1;
        if (ki == it.key) { /* direct recursion: into the parent's row, a level deeper */
            int64_t *c = it.row < 0 ? &row_calls : &made.calls[it.row];
            int64_t *lv = it.row < 0 ? &row_levels : &made.levels[it.row];
            double *o = it.row < 0 ? &row_own : &made.own[it.row];
            if (__builtin_add_overflow(*c, r[2], c)) {
                PyErr_SetString(PyExc_OverflowError, "the calls' sum does not fit 64 bits");
                goto error;
            }
            *o += secs;
            *lv = next_level > *lv ? next_level : *lv;
        } else {
            if (fp_col_rows_room(&made) < 0)
                goto error;
            size_t i = made.n++;
            made.parent[i] = it.row < 0 ? (int64_t)row : (int64_t)rows + it.row;
            made.key[i] = ki;
            made.calls[i] = r[2];
            made.own[i] = secs;
            made.total[i] = fp_tree_block_secs(r[3], spt);
            made.levels[i] = 1;
            next_row = (int64_t)i;
            next_level = 1;
        }
        if (fp_col_push(&b, it.k, next_row, ki, next_level, &st, &len, &cap) < 0)
            goto error;
    }
    /* number ran Python code: the lists may have changed meanwhile */
    for (int i = 0; i < 6; i++)
        if (PyList_GET_SIZE(cols[i]) != rows) {
            PyErr_SetString(PyExc_RuntimeError, "the columns changed during the walk");
            goto error;
        }
    new_calls = PyLong_FromLongLong(row_calls);
    new_own = PyFloat_FromDouble(row_own);
    new_levels = PyLong_FromLongLong(row_levels);
    if (new_calls == NULL || new_own == NULL || new_levels == NULL)
        goto error;
    if (fp_col_extend(parent, made.parent, made.n, 0) < 0 ||
        fp_col_extend(key, made.key, made.n, 0) < 0 ||
        fp_col_extend(calls, made.calls, made.n, 0) < 0 ||
        fp_col_extend(own, made.own, made.n, 1) < 0 ||
        fp_col_extend(total, made.total, made.n, 1) < 0 ||
        fp_col_extend(levels, made.levels, made.n, 0) < 0) {
        /* the columns as they were: no half-made row */
        for (int i = 0; i < 6; i++)
            if (PyList_GET_SIZE(cols[i]) > rows)
                PyList_SetSlice(cols[i], rows, PyList_GET_SIZE(cols[i]), NULL);
        goto error;
    }
    /* in range (checked above): these take the references and cannot fail */
    PyList_SetItem(calls, row, new_calls);
    PyList_SetItem(own, row, new_own);
    PyList_SetItem(levels, row, new_levels);
    new_calls = new_own = new_levels = NULL;
    result = Py_NewRef(Py_None);
error:
    Py_XDECREF(new_calls);
    Py_XDECREF(new_own);
    Py_XDECREF(new_levels);
    PyMem_RawFree(st);
    fp_col_rows_free(&made);
    PyBuffer_Release(&view);
    PyBuffer_Release(&cache);
    return result;
}

static PyMethodDef fp_columns_methods[] = {
    {"_tree_columns", fp_tree_columns, METH_VARARGS,
     "_tree_columns(block, threads, slot, row, level, keys, keymap, number, spt, parent, key, "
     "calls, own, total, levels) -> None: the HTML report's rows below a node, made from a call "
     "tree snapshot's records."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_tree_columns_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_columns_methods);
}
