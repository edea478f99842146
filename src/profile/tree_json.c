/* tree_json.c - the node records of the call tree file (FILE.tree.json, fastprof._tree_file)
 * written as JSON text straight from the profiler's nodes, one text per thread, so that saving
 * the tree of a wide program costs what writing its pstats file costs, not a Python pass over
 * every node. */
#include "fp_profile.h"

#include <string.h>

/* A growing ASCII text. */
typedef struct fp_text {
    char *buf;
    size_t len, cap;
} fp_text;

/* Appends the n bytes at s to t.  Returns 0, or -1 when out of memory (no exception set). */
static int
fp_text_add(fp_text *t, const char *s, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n)
            cap *= 2;
        char *buf = PyMem_RawRealloc(t->buf, cap);
        if (buf == NULL)
            return -1;
        t->buf = buf;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    return 0;
}

/* The text of each distinct tick count met so far (a tree's times repeat: of a wide
 * program's 54,000 times, 7,000 differ). */
typedef struct fp_secs {
    double spt;     /* seconds per tick */
    fp_map map;     /* ticks + 1 -> the index of their text */
    fp_text arena;  /* the texts, one after the other */
    size_t *start;  /* text i is arena[start[i], start[i + 1]) */
    int32_t n, cap; /* texts made, and room in start for cap of them */
} fp_secs;

/* Makes text number c->n, of ticks, as Python's "%.17g" % (ticks * spt) writes it (the text
 * reads back as the same float).  Returns 0, or -1 with an exception set. */
static int
fp_secs_make(fp_secs *c, fp_tick ticks)
{
    if (c->n + 1 >= c->cap) {
        int32_t cap = c->cap ? c->cap * 2 : 1024;
        size_t *start = PyMem_RawRealloc(c->start, (size_t)cap * sizeof(size_t));
        if (start == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->start = start;
        c->cap = cap;
        c->start[0] = 0;
    }
    char *s = PyOS_double_to_string((double)ticks * c->spt, 'g', 17, 0, NULL);
    if (s == NULL)
        return -1;
    int rc = fp_text_add(&c->arena, s, strlen(s));
    PyMem_Free(s);
    if (rc < 0) {
        PyErr_NoMemory();
        return -1;
    }
    c->start[++c->n] = c->arena.len;
    return 0;
}

/* Appends the text of ticks (in seconds) to t, made once per distinct value.  Returns 0, or
 * -1 with an exception set. */
static int
fp_text_ticks(fp_text *t, fp_secs *c, fp_tick ticks)
{
    uint64_t key = (uint64_t)ticks + 1; /* 0 marks an empty slot of the map */
    int32_t i = key ? fp_map_get(&c->map, key) : -1;
    if (i < 0) {
        if (fp_secs_make(c, ticks) < 0)
            return -1;
        i = c->n - 1;
        if (key && fp_map_put(&c->map, key, i) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (fp_text_add(t, c->arena.buf + c->start[i], c->start[i + 1] - c->start[i]) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Appends one record "[parent,key,ncalls,own,total]" (with a comma before it unless it is the
 * thread's first), the times given in ticks.  Returns 0, or -1 with an exception set. */
static int
fp_text_record(fp_text *t, fp_secs *c, int32_t parent, int32_t key, int64_t ncalls, fp_tick own,
               fp_tick total)
{
    char head[80];
    int n = PyOS_snprintf(head, sizeof(head), "%s[%ld,%ld,%lld,", t->len ? "," : "", (long)parent,
                          (long)key, (long long)ncalls);
    if (fp_text_add(t, head, (size_t)n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (fp_text_ticks(t, c, own) < 0)
        return -1;
    if (fp_text_add(t, ",", 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (fp_text_ticks(t, c, total) < 0)
        return -1;
    if (fp_text_add(t, "]", 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Reads keys (a list of ints, one per function of _raw()) into out.  Returns 0, or -1 with an
 * exception set. */
static int
fp_tree_json_keys(PyObject *keys, int32_t nfuncs, int32_t *out)
{
    if (!PyList_Check(keys) || PyList_GET_SIZE(keys) != nfuncs) {
        PyErr_Format(PyExc_ValueError, "keys must be a list of %d ints (one per function)",
                     (int)nfuncs);
        return -1;
    }
    for (int32_t i = 0; i < nfuncs; i++) {
        PyObject *item = PyList_GET_ITEM(keys, i);
        if (!PyLong_CheckExact(item)) { /* no __index__ of Python code: nodes may not move */
            PyErr_SetString(PyExc_TypeError, "keys must hold ints");
            return -1;
        }
        long k = PyLong_AsLong(item);
        if (k == -1 && PyErr_Occurred())
            return -1;
        if (k < 0 || k > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "keys must hold ints from 0 to 2**31 - 1");
            return -1;
        }
        out[i] = (int32_t)k;
    }
    return 0;
}

/* See fp_profile.h. */
PyObject *
fp_tree_json(const fp_profiler *p, double spt, PyObject *keys, PyObject *drop)
{
    const fp_node *nodes = NULL;
    int32_t n = 0, nthreads = 0;
    int32_t *key = NULL, *thread = NULL, *local = NULL, *count = NULL;
    int64_t *idents = NULL;
    fp_tick *below = NULL;
    unsigned char *has_kids = NULL;
    fp_text *texts = NULL;
    PyObject *result = NULL;
    Py_buffer flags = {0};
    fp_secs secs = {.spt = spt};
    if (PyObject_GetBuffer(drop, &flags, PyBUF_SIMPLE) < 0)
        return NULL;
    if (flags.len != p->nfuncs) {
        PyErr_Format(PyExc_ValueError, "drop must be %d bytes (one per function)", (int)p->nfuncs);
        goto error;
    }
    key = PyMem_RawMalloc(((size_t)p->nfuncs + 1) * sizeof(int32_t));
    if (key == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (fp_tree_json_keys(keys, p->nfuncs, key) < 0)
        goto error;
    /* From here until the records are made no Python code runs (no object is made, so no
     * collection either), so no hook of this profiler can add nodes or functions meanwhile. */
    nodes = p->nodes;
    n = p->nnodes;
    size_t slots = (size_t)n + 1;
    thread = PyMem_RawMalloc(slots * sizeof(int32_t));
    local = PyMem_RawMalloc(slots * sizeof(int32_t));
    count = PyMem_RawCalloc(slots, sizeof(int32_t));
    below = PyMem_RawCalloc(slots, sizeof(fp_tick));
    has_kids = PyMem_RawCalloc(slots, 1);
    texts = PyMem_RawCalloc(slots, sizeof(fp_text));
    idents = PyMem_RawMalloc(slots * sizeof(int64_t));
    if (!thread || !local || !count || !below || !has_kids || !texts || !idents) {
        PyErr_NoMemory();
        goto error;
    }
    /* each node's thread (a root starts one, in first-seen order), whether it has children,
     * and past the node cap the total time of its children (its own time is the rest) */
    for (int32_t ni = 0; ni < n; ni++) {
        const fp_node *nd = &nodes[ni];
        if (nd->func < 0) {
            /* as _raw_tree() lists them (a thread whose ident an earlier one had is the same
             * thread there) */
            thread[ni] = fp_tree_thread_slot(idents, &nthreads, nd->ncalls);
            continue;
        }
        thread[ni] = thread[nd->parent];
        has_kids[nd->parent] = 1;
        if (nodes[nd->parent].func >= 0)
            below[nd->parent] += nd->tt;
    }
    for (int32_t ni = 0; ni < n; ni++) {
        const fp_node *nd = &nodes[ni];
        if (nd->func < 0)
            continue;
        int top = nodes[nd->parent].func < 0;
        if (top && !has_kids[ni] && ((const unsigned char *)flags.buf)[nd->func])
            continue; /* the runner's own call of disable */
        int32_t t = thread[ni];
        local[ni] = count[t]++;
        fp_tick own = p->merged ? nd->tt - below[ni] : nd->it;
        if (fp_text_record(&texts[t], &secs, top ? -1 : local[nd->parent], key[nd->func],
                           nd->ncalls, own, nd->tt) < 0)
            goto error;
    }
    result = PyList_New(0);
    if (result == NULL)
        goto error;
    for (int32_t t = 0; t < nthreads; t++) {
        PyObject *text =
            PyUnicode_DecodeASCII(texts[t].buf ? texts[t].buf : "", (Py_ssize_t)texts[t].len, NULL);
        PyObject *ident = text ? PyLong_FromUnsignedLong((unsigned long)idents[t]) : NULL;
        PyObject *item = ident ? PyTuple_Pack(2, ident, text) : NULL;
        Py_XDECREF(ident);
        Py_XDECREF(text);
        if (item == NULL || PyList_Append(result, item) < 0) {
            Py_XDECREF(item);
            goto error;
        }
        Py_DECREF(item);
    }
    PyObject *pair = Py_BuildValue("(NL)", result, (long long)p->merged);
    result = pair; /* NULL with an exception set when it could not be made */
    goto done;
error:
    Py_CLEAR(result);
done:
    if (texts != NULL)
        for (int32_t t = 0; t < nthreads; t++)
            PyMem_RawFree(texts[t].buf);
    PyMem_RawFree(texts);
    PyMem_RawFree(has_kids);
    PyMem_RawFree(below);
    PyMem_RawFree(count);
    PyMem_RawFree(local);
    PyMem_RawFree(thread);
    PyMem_RawFree(key);
    PyMem_RawFree(idents);
    fp_map_free(&secs.map);
    PyMem_RawFree(secs.arena.buf);
    PyMem_RawFree(secs.start);
    PyBuffer_Release(&flags);
    return result;
}
