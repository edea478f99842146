/* tree.c - reading the calling-context tree: the caller -> callee edges derived from its nodes
 * (what _raw() reports) and its raw export (_raw_tree()). */
#include "fp_profile.h"

#include <string.h>

/* Returns 1 when a proper ancestor M of node ni (M's parent not a thread's root) is a call of
 * function f from function g, so that ni's calls of edge g -> f are recursive; else 0. */
static int
fp_tree_edge_nested(const fp_profiler *p, int32_t ni, int32_t g, int32_t f)
{
    const fp_node *nodes = p->nodes;
    for (int32_t m = nodes[ni].parent; nodes[m].func >= 0; m = nodes[m].parent) {
        int32_t up = nodes[m].parent;
        if (nodes[up].func < 0)
            return 0;
        if (nodes[m].func == f && nodes[up].func == g)
            return 1;
    }
    return 0;
}

/* Adds counts c of edge caller -> callee to out (of *n records, indexed by map).  Returns 0,
 * or -1 when out of memory (no exception set). */
static int
fp_tree_edge_add(fp_edge *out, int32_t *n, fp_map *map, int32_t caller, int32_t callee,
                 const fp_counts *c)
{
    uint64_t key = FP_EDGE_KEY(caller, callee);
    int32_t i = fp_map_get(map, key);
    if (i < 0) {
        i = (*n)++;
        memset(&out[i], 0, sizeof(out[i]));
        out[i].caller = caller;
        out[i].callee = callee;
        if (fp_map_put(map, key, i) < 0)
            return -1;
    }
    out[i].c.ncalls += c->ncalls;
    out[i].c.nrec += c->nrec;
    out[i].c.tt += c->tt;
    out[i].c.it += c->it;
    return 0;
}

/* See fp_profile.h. */
int
fp_tree_edges(const fp_profiler *p, fp_edge **out, int32_t *nout)
{
    fp_map map = {0};
    int32_t n = 0;
    size_t most = (size_t)p->nnodes + (size_t)p->nedges;
    fp_edge *edges = PyMem_RawMalloc((most ? most : 1) * sizeof(fp_edge));
    if (edges == NULL)
        goto error;
    for (int32_t ni = 0; ni < p->nnodes; ni++) {
        const fp_node *nd = &p->nodes[ni];
        if (nd->func < 0 || p->nodes[nd->parent].func < 0)
            continue; /* a thread's root, or a top-level frame (no edge) */
        int32_t g = p->nodes[nd->parent].func;
        fp_counts c = {nd->ncalls, 0, nd->tt, nd->it};
        if (fp_tree_edge_nested(p, ni, g, nd->func)) {
            c.nrec = c.ncalls;
            c.tt = 0;
        }
        if (fp_tree_edge_add(edges, &n, &map, g, nd->func, &c) < 0)
            goto error;
    }
    for (int32_t ei = 0; ei < p->nedges; ei++) {
        const fp_edge *e = &p->edges[ei];
        if (fp_tree_edge_add(edges, &n, &map, e->caller, e->callee, &e->c) < 0)
            goto error;
    }
    fp_map_free(&map);
    *out = edges;
    *nout = n;
    return 0;
error:
    fp_map_free(&map);
    PyMem_RawFree(edges);
    PyErr_NoMemory();
    return -1;
}

/* See fp_profile.h. */
int32_t
fp_tree_thread_slot(int64_t *idents, int32_t *n, int64_t ident)
{
    int32_t t = 0;
    while (t < *n && idents[t] != ident)
        t++;
    if (t == *n)
        idents[(*n)++] = ident;
    return t;
}

/* See fp_profile.h. */
int64_t
fp_tree_number(const fp_profiler *p, int32_t nn, int32_t *index, int32_t *thread, int64_t *idents,
               int32_t *nthreads)
{
    int64_t n = 0;
    *nthreads = 0;
    for (int32_t ni = 0; ni < nn; ni++) {
        const fp_node *nd = &p->nodes[ni];
        if (nd->func < 0) {
            index[ni] = -1;
            thread[ni] = fp_tree_thread_slot(idents, nthreads, nd->ncalls);
            continue;
        }
        thread[ni] = thread[nd->parent];
        index[ni] = (int32_t)n++;
    }
    return n;
}

/* See fp_profile.h. */
PyObject *
fp_tree_idents(const int64_t *idents, int32_t n)
{
    PyObject *out = PyList_New(n);
    for (int32_t i = 0; out != NULL && i < n; i++) {
        PyObject *o = PyLong_FromUnsignedLong((unsigned long)idents[i]);
        if (o == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, o);
    }
    return out;
}

/* See fp_profile.h. */
PyObject *
fp_tree_raw(const fp_profiler *p, double spt)
{
    PyObject *nodes = NULL, *threads = NULL, *result = NULL;
    /* Making an object can run a collection, and a finalizer's Python code can add nodes (an
     * enabled profiler, read without quiet) or clear them: the nn nodes there now are numbered
     * before any object is made and read (the arrays have room for those alone), or none when
     * they were cleared. */
    int32_t nn = p->nnodes, nthreads;
    size_t slots = (size_t)nn + 1;
    /* per node: its index in the export (-1 for a root), and its thread's index */
    int32_t *index = PyMem_RawMalloc(slots * sizeof(int32_t));
    int32_t *thread = PyMem_RawMalloc(slots * sizeof(int32_t));
    int64_t *idents = PyMem_RawMalloc(slots * sizeof(int64_t));
    if (index == NULL || thread == NULL || idents == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    fp_tree_number(p, nn, index, thread, idents, &nthreads);
    nodes = PyList_New(0);
    threads = fp_tree_idents(idents, nthreads);
    if (nodes == NULL || threads == NULL)
        goto error;
    for (int32_t ni = 0; ni < nn; ni++) {
        if (ni >= p->nnodes) {
            fp_read_cleared();
            goto error;
        }
        if (index[ni] < 0)
            continue; /* a thread's root */
        const fp_node *nd = &p->nodes[ni];
        PyObject *row = Py_BuildValue("(iiiLLL)", index[nd->parent], nd->func, thread[ni],
                                      (long long)nd->ncalls, (long long)nd->tt, (long long)nd->it);
        if (row == NULL || PyList_Append(nodes, row) < 0) {
            Py_XDECREF(row);
            goto error;
        }
        Py_DECREF(row);
    }
    result = Py_BuildValue("(dOOL)", spt, nodes, threads, (long long)p->merged);
error:
    PyMem_RawFree(index);
    PyMem_RawFree(thread);
    PyMem_RawFree(idents);
    Py_XDECREF(nodes);
    Py_XDECREF(threads);
    return result;
}
