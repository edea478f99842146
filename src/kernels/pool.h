/* kernels/pool.h - a small persistent pthread pool for the CPU kernels.
 *
 * fp_pool_run() splits nitems work items across the pool's threads and the calling thread;
 * it is called with the GIL released.  Calls from several threads are serialised. */
#ifndef FP_KERNELS_POOL_H
#define FP_KERNELS_POOL_H

#include <stddef.h>

/* A work function: runs item `item` of a job on worker `worker` (0 <= worker < nworkers).
 * Returns 0, or -1 on failure (out of memory); no Python exception is involved. */
typedef int (*fp_pool_fn)(void *ctx, ptrdiff_t item, int worker);

/* Runs fn(ctx, i, w) for every i in [0, nitems) on at most nthreads threads (the caller
 * included).  Returns 0, or -1 when any call failed or the threads could not be started
 * (the caller then reports MemoryError).  Never touches Python objects. */
int fp_pool_run(ptrdiff_t nitems, int nthreads, fp_pool_fn fn, void *ctx);

/* The number of threads kernels use (>= 1). */
int fp_pool_get_threads(void);

/* Sets the number of threads kernels use (n >= 1).  Returns nothing. */
void fp_pool_set_threads(int n);

/* The number of usable cores (sched affinity), >= 1. */
int fp_pool_usable_cores(void);

#endif
