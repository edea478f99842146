/* tree_block.h - reading the block of Profiler._tree_snapshot() (see tree_snapshot.c) from
 * the C walkers that take it back from Python (tree_fold.c, tree_columns.c): the sizes and
 * every index checked, since the block reaches them as any bytes-like object. */
#ifndef FP_TREE_BLOCK_H
#define FP_TREE_BLOCK_H

#include "common.h"

#include <stdint.h>

/* The block of n records and t thread roots, read as int64s: record k is recs[5k..5k+4]
 * (parent slot, function, calls, total ticks, own ticks); slot s's children are
 * kids[first[s]..first[s + 1]) (the slot of thread i's root is n + i). */
typedef struct fp_tree_block {
    const int64_t *recs, *first, *kids;
    int64_t n, t;
} fp_tree_block;

/* Reads buffer view, of threads thread roots, into b, checking that its sizes agree and that
 * it is aligned for int64s.  Returns 0, or -1 with ValueError. */
int fp_tree_block_read(const Py_buffer *view, Py_ssize_t threads, fp_tree_block *b);

/* Sets [*lo, *hi) to the range of kids holding slot s's children, checked against the
 * block.  Returns 0, or -1 with ValueError. */
int fp_tree_block_kids(const fp_tree_block *b, int64_t s, int64_t *lo, int64_t *hi);

/* Returns the record that kids[j] (a child of slot s) names, checked to be a record after s
 * (the snapshot numbers parents first: no walk meets a cycle), or -1 with ValueError. */
int64_t fp_tree_block_kid(const fp_tree_block *b, int64_t s, int64_t j);

/* Grows *items (of *cap items of size bytes) to room for need items, doubling.  Returns 0,
 * or -1 with MemoryError. */
int fp_tree_block_grow(void **items, size_t *cap, size_t need, size_t size);

/* Returns ticks * spt rounded to a double before any sum takes it, as Python's node.tottime is
 * (a multiply-add fused by the compiler would round once, and differ in the last bit). */
FP_INLINE double
fp_tree_block_secs(int64_t ticks, double spt)
{
    volatile double secs = (double)ticks * spt;
    return secs;
}

#endif
