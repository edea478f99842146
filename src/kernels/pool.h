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

/* A gang function: worker `worker` of `nworkers` runs its whole share of a job.  Returns 0,
 * or -1 on failure; it must still reach every fp_pool_barrier_wait() of the job. */
typedef int (*fp_pool_gang_fn)(void *ctx, int worker, int nworkers);

/* Runs fn(ctx, w, n) once on each of n <= nthreads distinct threads at the same time (the
 * caller is worker 0), so the workers may wait for each other with a barrier.  Returns 0, or
 * -1 when any call failed.  Never touches Python objects. */
int fp_pool_gang(int nthreads, fp_pool_gang_fn fn, void *ctx);

/* A spin barrier for the workers of one gang; zero-initialise it before the gang starts. */
typedef struct fp_pool_barrier {
    int count;
    unsigned gen;
} fp_pool_barrier;

/* Waits until all n workers of a gang have called it for this round.  Returns nothing. */
void fp_pool_barrier_wait(fp_pool_barrier *b, int n);

/* The number of threads kernels use (>= 1). */
int fp_pool_get_threads(void);

/* Sets the number of threads kernels use (n >= 1).  Returns nothing. */
void fp_pool_set_threads(int n);

/* The number of usable cores (sched affinity), >= 1. */
int fp_pool_usable_cores(void);

#endif
