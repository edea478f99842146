/* tree_block.c - the checked reading of a call tree snapshot's block shared by the C walkers
 * that take it back from Python (see tree_block.h). */
#include "profile/tree_block.h"

/* See tree_block.h. */
int
fp_tree_block_read(const Py_buffer *view, Py_ssize_t threads, fp_tree_block *b)
{
    Py_ssize_t words = view->len / 8;
    if (view->len % 8 != 0 || threads < 0 || threads >= words || (words - threads - 1) % 7) {
        PyErr_SetString(PyExc_ValueError, "block is not a call tree snapshot");
        return -1;
    }
    if ((uintptr_t)view->buf % _Alignof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "block must start at a multiple of 8 bytes");
        return -1;
    }
    b->n = (words - threads - 1) / 7;
    b->t = threads;
    b->recs = (const int64_t *)view->buf;
    b->first = b->recs + 5 * b->n;
    b->kids = b->first + b->n + b->t + 1;
    return 0;
}

/* See tree_block.h. */
int
fp_tree_block_kids(const fp_tree_block *b, int64_t s, int64_t *lo, int64_t *hi)
{
    if (s < 0 || s >= b->n + b->t) {
        PyErr_SetString(PyExc_ValueError, "slot out of the snapshot's range");
        return -1;
    }
    *lo = b->first[s];
    *hi = b->first[s + 1];
    if (*lo < 0 || *hi < *lo || *hi > b->n) {
        PyErr_SetString(PyExc_ValueError, "block is not a call tree snapshot");
        return -1;
    }
    return 0;
}

/* See tree_block.h. */
int64_t
fp_tree_block_kid(const fp_tree_block *b, int64_t s, int64_t j)
{
    int64_t k = b->kids[j];
    if (k < 0 || k >= b->n || (s < b->n && k <= s)) {
        PyErr_SetString(PyExc_ValueError, "block is not a call tree snapshot");
        return -1;
    }
    return k;
}

/* See tree_block.h. */
int
fp_tree_block_grow(void **items, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t room = *cap ? *cap : 64;
    while (room < need)
        room *= 2;
    void *grown = room > SIZE_MAX / size ? NULL : PyMem_RawRealloc(*items, room * size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *cap = room;
    return 0;
}
