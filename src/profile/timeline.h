/* timeline.h - the call profiler's optional timeline: one complete span per finished call
 * (start and end tick, function, thread, depth), kept in a fixed-size ring that drops the
 * oldest span first.  The profiler's leave path records a span (fp_tl_record) in the copy of
 * the hooks that enable() installs for a profiler with a timeline; nothing on that path
 * allocates or runs Python code, and it branches only where the ring wraps.  Which functions
 * are kept (include/exclude by module, and the minimum duration) is decided once per
 * function, when the profiler first sees it, and set again at enable() (timeline.c). */
#ifndef FP_TIMELINE_H
#define FP_TIMELINE_H

#include "common.h"
#include "clock.h"

/* One finished call: 32 bytes (pad is never written nor read). */
typedef struct fp_span {
    fp_tick t0, t1; /* entered, left (the profiler's ticks) */
    int32_t func;   /* the profiler's function index */
    int32_t thread; /* the thread's index (fp_thread.index) */
    int32_t depth;  /* open frames below it in its thread when it ran (0: top level) */
    int32_t pad;
} fp_span;
_Static_assert(sizeof(fp_span) == 32, "fp_span is 32 bytes");

/* The ring has one slot more than the spans it keeps: the slot at cur never holds a kept
 * span, so fp_tl_record writes every call there and only then decides, without a branch,
 * whether the span stays (cur moves on) or not (the next call overwrites it).  The counts of
 * calls left out are not kept on that path: the function records' call counts give them
 * (every completed call of a function passes fp_tl_record once).  The fields fp_tl_record
 * reads come first. */
typedef struct fp_timeline {
    fp_span *cur;       /* the slot the next span goes to */
    fp_span *end;       /* ring + cap + 1, where cur wraps to ring */
    fp_span *ring;      /* cap + 1 slots */
    fp_tick *thr;       /* per function index: the shortest call kept, min_ticks for a function
                         * kept, INT64_MAX for one the module filter leaves out */
    int64_t n;          /* spans written since the last clear (kept: the last min(n, cap)) */
    int64_t cap;        /* the spans kept (> 0) */
    fp_tick min_ticks;  /* the minimum duration in ticks (0: keep all), set by fp_tl_arm */
    double min_seconds; /* ... as given, converted to ticks at enable */
    uint8_t *keep;      /* per function index: 1 when the module filter keeps its calls */
    int32_t nkeep;      /* functions decided (entries of keep and thr in use) */
    int32_t capkeep;    /* entries allocated in keep and thr */
    PyObject *include;  /* a tuple of module names (empty: every module) */
    PyObject *exclude;  /* a tuple of module names */
} fp_timeline;

/* Records a call of function fi (< tl->nkeep) in thread index th at depth, from t0 to t1, in
 * tl: a span kept when the call lasted at least the function's threshold.  No call, and no
 * branch but the ring's wrap.  The span is written through a volatile pointer so that each
 * field is one plain store (the compiler would otherwise pack the fields into vector
 * registers first, which takes more instructions than it saves).  Returns nothing; never
 * allocates. */
FP_INLINE void
fp_tl_record(fp_timeline *tl, int32_t fi, int32_t th, int32_t depth, fp_tick t0, fp_tick t1)
{
    fp_span *cur = tl->cur;
    volatile fp_span *s = cur;
    s->t0 = t0;
    s->t1 = t1;
    s->func = fi;
    s->thread = th;
    s->depth = depth;
    int64_t kept = t1 - t0 >= tl->thr[fi];
    cur += kept;
    tl->cur = cur == tl->end ? tl->ring : cur;
    tl->n += kept;
}

/* Returns a new timeline of cap spans keeping calls at least min_seconds long of the modules
 * include names (every module when empty) and exclude does not (both tuples of str, owned
 * references taken), or NULL with an exception set (MemoryError, or ValueError naming
 * timeline). */
fp_timeline *fp_tl_new(int64_t cap, double min_seconds, PyObject *include, PyObject *exclude);
/* Frees tl (NULL: nothing).  Returns nothing. */
void fp_tl_free(fp_timeline *tl);
/* Forgets every span and per-function decision.  Returns nothing. */
void fp_tl_clear(fp_timeline *tl);
/* Decides whether calls of function fi (every function before it decided already, or left
 * undecided by a failure: see fp_tl_arm), of the module named module (a str, or NULL when
 * unknown: kept unless include names modules), are recorded.  Returns 0, or -1 when out of
 * memory (no exception set; fi stays undecided). */
int fp_tl_decide(fp_timeline *tl, int32_t fi, PyObject *module);
/* Readies tl for recording calls of at least min_ticks, for a profiler holding nfuncs
 * functions: sets every decided function's threshold and decides those a failed
 * fp_tl_decide left undecided as of an unknown module.  Returns 0, or -1 with MemoryError
 * set. */
int fp_tl_arm(fp_timeline *tl, fp_tick min_ticks, int32_t nfuncs);
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
/* Returns the spans of tl, oldest first (the last min(n, cap) written), as a list of (t0, t1, func,
 * thread, depth), or NULL with an exception set. */
PyObject *fp_tl_spans(const fp_timeline *tl);
/* Returns the spans of tl as a bytes object of fp_span records (timeline_read.c), with t0 and
 * t1 put on the nanosecond axis m0 + round((t - k0) * scale) and pad 0, sorted by thread,
 * start and depth (ties in the ring's order); NULL with an exception set (MemoryError,
 * OverflowError for a time beyond int64). */
PyObject *fp_tl_records(const fp_timeline *tl, int64_t m0, int64_t k0, double scale);

#endif
