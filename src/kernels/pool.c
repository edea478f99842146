/* kernels/pool.c - persistent pthread pool behind the CPU kernels.
 *
 * Workers sleep on a condition variable; a job hands out items through an atomic counter and
 * the calling thread takes items too.  After fork() the child forgets the parent's workers
 * (they do not exist there) and starts fresh ones on its next job. */
#define _GNU_SOURCE
#include "kernels/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define FP_POOL_MAX 256

typedef struct {
    pthread_mutex_t lock;     /* guards everything below */
    pthread_cond_t wake;      /* a new job (generation changed) or shutdown */
    pthread_cond_t done;      /* a worker finished its part of the job */
    pthread_mutex_t run_lock; /* one job at a time */
    pthread_t threads[FP_POOL_MAX];
    unsigned long born[FP_POOL_MAX]; /* generation when each worker was started */
    int nstarted;                    /* worker threads alive */
    int nwanted;                     /* workers taking part in the current job */
    int nbusy;                       /* workers still inside the current job */
    unsigned long generation;
    int shutdown;
    /* the current job */
    fp_pool_fn fn;
    fp_pool_gang_fn gang; /* non-NULL: a gang job, fn(ctx, worker, nwanted) once per worker */
    void *ctx;
    ptrdiff_t nitems;
    ptrdiff_t next; /* atomic */
    int failed;     /* atomic */
} fp_pool;

static fp_pool fp_the_pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .run_lock = PTHREAD_MUTEX_INITIALIZER,
};
static int fp_pool_threads = 0; /* 0: not chosen yet (usable cores) */
static pthread_once_t fp_pool_once = PTHREAD_ONCE_INIT;

/* Takes items of the current job until none is left (a gang job: runs this worker's share).
 * Returns nothing. */
static void
fp_pool_drain(fp_pool *p, int worker)
{
    if (p->gang != NULL) {
        if (p->gang(p->ctx, worker, p->nwanted) < 0)
            __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (;;) {
        ptrdiff_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= p->nitems)
            break;
        if (p->fn(p->ctx, i, worker) < 0)
            __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
    }
}

/* Worker thread body.  Returns NULL. */
static void *
fp_pool_main(void *arg)
{
    fp_pool *p = &fp_the_pool;
    int index = (int)(ptrdiff_t)arg; /* 1 .. FP_POOL_MAX-1; 0 is the caller */
    unsigned long seen;
    pthread_mutex_lock(&p->lock);
    seen = p->born[index];
    for (;;) {
        while (!p->shutdown && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->shutdown)
            break;
        seen = p->generation;
        if (index >= p->nwanted)
            continue;
        pthread_mutex_unlock(&p->lock);
        fp_pool_drain(p, index);
        pthread_mutex_lock(&p->lock);
        if (--p->nbusy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* fork() child handler: the workers did not survive; forget them and reset the locks.
 * Returns nothing. */
static void
fp_pool_atfork_child(void)
{
    fp_pool *p = &fp_the_pool;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->nstarted = 0;
    p->nbusy = 0;
    p->shutdown = 0;
}

/* Registers the fork handler (once).  Returns nothing. */
static void
fp_pool_init_once(void)
{
    pthread_atfork(NULL, NULL, fp_pool_atfork_child);
}

/* See pool.h. */
int
fp_pool_usable_cores(void)
{
    int n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n > FP_POOL_MAX ? FP_POOL_MAX : n;
}

/* See pool.h. */
int
fp_pool_get_threads(void)
{
    int n = __atomic_load_n(&fp_pool_threads, __ATOMIC_RELAXED);
    return n > 0 ? n : fp_pool_usable_cores();
}

/* See pool.h. */
void
fp_pool_set_threads(int n)
{
    if (n < 1)
        n = 1;
    if (n > FP_POOL_MAX)
        n = FP_POOL_MAX;
    __atomic_store_n(&fp_pool_threads, n, __ATOMIC_RELAXED);
}

/* Starts a job on up to nthreads threads (the caller included) and takes part in it: items of
 * fn through the shared counter, or, with gang, one share per thread.  Returns 0, or -1 when
 * any call failed. */
static int
fp_pool_start(ptrdiff_t nitems, int nthreads, fp_pool_fn fn, fp_pool_gang_fn gang, void *ctx)
{
    fp_pool *p = &fp_the_pool;
    int result = 0;
    pthread_once(&fp_pool_once, fp_pool_init_once);
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->lock);
    while (p->nstarted < nthreads - 1) {
        p->born[p->nstarted + 1] = p->generation;
        if (pthread_create(&p->threads[p->nstarted], NULL, fp_pool_main,
                           (void *)(ptrdiff_t)(p->nstarted + 1)) != 0)
            break;
        p->nstarted++;
    }
    if (nthreads - 1 > p->nstarted)
        nthreads = p->nstarted + 1; /* run with the threads we could start */
    p->fn = fn;
    p->gang = gang;
    p->ctx = ctx;
    p->nitems = nitems;
    p->next = 0;
    p->failed = 0;
    p->nwanted = nthreads;
    p->nbusy = nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    fp_pool_drain(p, 0);

    pthread_mutex_lock(&p->lock);
    while (p->nbusy > 0)
        pthread_cond_wait(&p->done, &p->lock);
    result = __atomic_load_n(&p->failed, __ATOMIC_RELAXED) ? -1 : 0;
    p->gang = NULL;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->run_lock);
    return result;
}

/* See pool.h. */
int
fp_pool_run(ptrdiff_t nitems, int nthreads, fp_pool_fn fn, void *ctx)
{
    int result = 0;
    if (nitems <= 0)
        return 0;
    if (nthreads > FP_POOL_MAX)
        nthreads = FP_POOL_MAX;
    if (nthreads > nitems)
        nthreads = (int)nitems;
    if (nthreads <= 1) {
        for (ptrdiff_t i = 0; i < nitems; i++)
            if (fn(ctx, i, 0) < 0)
                result = -1;
        return result;
    }
    return fp_pool_start(nitems, nthreads, fn, NULL, ctx);
}

/* See pool.h. */
int
fp_pool_gang(int nthreads, fp_pool_gang_fn fn, void *ctx)
{
    if (nthreads > FP_POOL_MAX)
        nthreads = FP_POOL_MAX;
    if (nthreads <= 1)
        return fn(ctx, 0, 1);
    return fp_pool_start(0, nthreads, NULL, fn, ctx);
}

/* See pool.h: the last to arrive opens the round; the others spin, then yield the core (a
 * worker may be waiting for a core on a busy machine). */
void
fp_pool_barrier_wait(fp_pool_barrier *b, int n)
{
    unsigned gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    int spins = 0;
    if (n <= 1)
        return;
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) {
        if (++spins < 2000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
}
