/* tree_snapshot.c - the calling-context tree as one block of integers (_tree_snapshot()), from
 * which fastprof.tree makes a node's children only when they are read: a view of a tree of a
 * million paths reads a few thousand of them. */
#include "fp_profile.h"

#include <string.h>

/* Fills the block out (see fp_tree_snapshot) of n nodes and t threads from p's first nnodes
 * nodes, given each node's index in the block (-1 for a root) and its parent's slot in slot[].
 * next is scratch room for n + t + 1 integers.  Returns nothing. */
static void
fp_snap_fill(const fp_profiler *p, int32_t nnodes, const int32_t *index, const int64_t *slot,
             int64_t n, int64_t t, int64_t *next, int64_t *out)
{
    int64_t *recs = out, *first = out + 5 * n, *kids = first + n + t + 1;
    memset(first, 0, (size_t)(n + t + 1) * sizeof(int64_t));
    for (int32_t ni = 0; ni < nnodes; ni++) {
        if (index[ni] < 0)
            continue;
        const fp_node *nd = &p->nodes[ni];
        int64_t *r = recs + 5 * (int64_t)index[ni];
        r[0] = slot[ni];
        r[1] = nd->func;
        r[2] = nd->ncalls;
        r[3] = nd->tt;
        r[4] = p->merged ? nd->tt : nd->it; /* past the cap: less the children's, below */
        first[slot[ni] + 1]++;
    }
    for (int64_t s = 0; s < n + t; s++)
        first[s + 1] += first[s];
    /* each slot's children in the order of their index (the order they were first met) */
    memcpy(next, first, (size_t)(n + t + 1) * sizeof(int64_t));
    for (int64_t k = 0; k < n; k++)
        kids[next[recs[5 * k]]++] = k;
    if (p->merged)
        for (int64_t k = 0; k < n; k++)
            if (recs[5 * k] < n)
                recs[5 * recs[5 * k] + 4] -= recs[5 * k + 3];
}

/* See fp_profile.h. */
PyObject *
fp_tree_snapshot(const fp_profiler *p, double spt)
{
    PyObject *threads = NULL, *block = NULL, *result = NULL;
    /* Until the block is filled no object is made but the block (bytes, which the collector
     * does not track), so no Python code runs and no hook adds nodes meanwhile. */
    int32_t nnodes = p->nnodes, nthreads = 0;
    size_t slots = (size_t)nnodes + 1;
    int32_t *index = PyMem_RawMalloc(slots * sizeof(int32_t));
    int32_t *thread = PyMem_RawMalloc(slots * sizeof(int32_t));
    int64_t *slot = PyMem_RawMalloc(slots * sizeof(int64_t));
    int64_t *idents = PyMem_RawMalloc(slots * sizeof(int64_t));
    int64_t *next = PyMem_RawMalloc(slots * sizeof(int64_t)); /* n + t + 1 == slots */
    if (index == NULL || thread == NULL || slot == NULL || idents == NULL || next == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    int64_t n = fp_tree_number(p, nnodes, index, thread, idents, &nthreads);
    for (int32_t ni = 0; ni < nnodes; ni++) {
        int32_t parent = p->nodes[ni].parent;
        if (index[ni] >= 0)
            slot[ni] = index[parent] < 0 ? n + thread[parent] : index[parent];
    }
    block = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((7 * n + nthreads + 1) * 8));
    if (block == NULL)
        goto error;
    fp_snap_fill(p, nnodes, index, slot, n, nthreads, next, (int64_t *)PyBytes_AS_STRING(block));
    threads = fp_tree_idents(idents, nthreads);
    if (threads != NULL)
        result = Py_BuildValue("(dOLO)", spt, threads, (long long)p->merged, block);
error:
    PyMem_RawFree(index);
    PyMem_RawFree(thread);
    PyMem_RawFree(slot);
    PyMem_RawFree(idents);
    PyMem_RawFree(next);
    Py_XDECREF(threads);
    Py_XDECREF(block);
    return result;
}
