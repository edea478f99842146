/* timeline.h - the call profiler's optional timeline: one complete span per finished call
 * (start and end tick, function, thread, depth), kept in a fixed-size ring that drops the
 * oldest span first.  The profiler's leave path records a span (fp_tl_record); nothing on that
 * path allocates or runs Python code.  Which functions are kept (include/exclude by module) is
 * decided once per function, when the profiler first sees it (timeline.c). */
#ifndef FP_TIMELINE_H
#define FP_TIMELINE_H

#include "common.h"
#include "clock.h"

/* One finished call: 32 bytes. */
typedef struct fp_span {
    fp_tick t0, t1; /* entered, left (the profiler's ticks) */
    int32_t func;   /* the profiler's function index */
    int32_t thread; /* the thread's index (fp_thread.index) */
    int32_t depth;  /* open frames below it in its thread when it ran (0: top level) */
    int32_t pad;
} fp_span;
_Static_assert(sizeof(fp_span) == 32, "fp_span is 32 bytes");

typedef struct fp_timeline {
    fp_span *ring;      /* cap spans */
    int64_t cap;        /* the ring's size in spans (> 0) */
    int64_t next;       /* where the next span goes */
    int64_t count;      /* spans held (<= cap) */
    int64_t dropped;    /* spans overwritten by newer ones (the ring was full) */
    int64_t filtered;   /* calls of functions the module filter leaves out */
    int64_t too_short;  /* calls shorter than min_ticks */
    fp_tick min_ticks;  /* the minimum duration in ticks (0: keep all) */
    double min_seconds; /* ... as given, converted to ticks at enable */
    uint8_t *keep;      /* per function index: 1 when its calls are recorded */
    int32_t nkeep;      /* entries of keep */
    PyObject *include;  /* a tuple of module names (empty: every module) */
    PyObject *exclude;  /* a tuple of module names */
} fp_timeline;

/* Records a call of function fi in thread index th at depth, from t0 to t1, in tl.  Returns
 * nothing; never allocates. */
FP_INLINE void
fp_tl_record(fp_timeline *tl, int32_t fi, int32_t th, int32_t depth, fp_tick t0, fp_tick t1)
{
    if (FP_UNLIKELY(fi >= tl->nkeep || !tl->keep[fi])) {
        tl->filtered++;
        return;
    }
    if (FP_UNLIKELY(t1 - t0 < tl->min_ticks)) {
        tl->too_short++;
        return;
    }
    fp_span *s = &tl->ring[tl->next];
    s->t0 = t0;
    s->t1 = t1;
    s->func = fi;
    s->thread = th;
    s->depth = depth;
    s->pad = 0;
    if (++tl->next == tl->cap)
        tl->next = 0;
    if (tl->count == tl->cap)
        tl->dropped++;
    else
        tl->count++;
}

/* Returns a new timeline of cap spans keeping calls at least min_seconds long of the modules
 * include names (every module when empty) and exclude does not (both tuples of str, owned
 * references taken), or NULL with an exception set (MemoryError, or ValueError naming
 * timeline). */
fp_timeline *fp_tl_new(int64_t cap, double min_seconds, PyObject *include, PyObject *exclude);
/* Frees tl (NULL: nothing).  Returns nothing. */
void fp_tl_free(fp_timeline *tl);
/* Forgets every span, counter and per-function decision.  Returns nothing. */
void fp_tl_clear(fp_timeline *tl);
/* Decides whether calls of function fi, of the module named module (a str, or NULL when
 * unknown: kept unless include names modules), are recorded.  Returns 0, or -1 when out of
 * memory (no exception set). */
int fp_tl_decide(fp_timeline *tl, int32_t fi, PyObject *module);
/* Returns a new reference to the module name of the Python function whose code object code is
 * starting in the running frame (its globals' __name__), or NULL (no exception set) when the
 * running frame is not code's or has no name. */
PyObject *fp_tl_code_module(PyObject *code);
/* Returns a new reference to the module name of a builtin called through callable (its
 * __module__, its self's module or its type's), or NULL (no exception set) when unknown. */
PyObject *fp_tl_builtin_module(PyObject *callable, PyObject *self_arg);
/* Reads a timeline's module list argument (None, a str or an iterable of str) named name into
 * *out (a new tuple).  Returns 0, or -1 with a TypeError naming name. */
int fp_tl_modules_arg(PyObject *value, const char *name, PyObject **out);
/* Returns the spans of tl, oldest first, as a list of (t0, t1, func, thread, depth), or NULL
 * with an exception set. */
PyObject *fp_tl_spans(const fp_timeline *tl);

#endif
