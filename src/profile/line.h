/* line.h - the line profiler's data: per-code dense arrays of hits and ticks, per-thread
 * stacks of the registered frames being run, and the LineTracer object that owns them.
 *
 * A registered code object carries, in its own code-object extra slot, a small map from
 * tracer id to that tracer's record of the code, so a hook finds the record of a code with
 * one pointer read and a (nearly always one-entry) scan: no hashing, no allocation. */
#ifndef FP_LINE_H
#define FP_LINE_H

#include "common.h"
#include "clock.h"

/* One registered code object in one tracer: hits and ticks per line, dense from `first`. */
typedef struct fp_lrec {
    PyObject *code; /* strong reference */
    int first;      /* smallest line number of the code */
    int nlines;     /* lines first .. first + nlines - 1 */
    int start;      /* 3.12+: offset of the code's first RESUME; a frame thrown into before
                     * its first step (PY_THROW) reports an offset below it, on no line */
    int64_t *hits;
    int64_t *ticks;
} fp_lrec;

/* One running frame of a registered code: the line it is on and when that line began. */
typedef struct fp_lframe {
    fp_lrec *rec;
    void *frame; /* the frame object below 3.12 (identity only), NULL on 3.12+ */
    int line;    /* -1 before the frame's first line event */
    fp_tick t;   /* time of the last line event (or of the start/resume) */
} fp_lframe;

/* One thread's stack of running registered frames. */
typedef struct fp_lthread {
    const void *key; /* FP_THREAD_KEY() of the thread: unique among live threads */
    fp_lframe *stack;
    Py_ssize_t depth, cap;
} fp_lthread;

/* The entries of a code object's extra slot: which tracer holds which record. */
typedef struct fp_lmap {
    int n, cap;
    struct {
        uint64_t tracer_id;
        fp_lrec *rec;
    } e[];
} fp_lmap;

/* _fastprof.LineTracer. */
typedef struct fp_ltracer {
    PyObject ob_base; /* PyObject_HEAD */
    uint64_t id;      /* unique for the process's lifetime */
    Py_ssize_t extra; /* the code-object extra index of the line profiler in this interpreter */
    fp_lrec **recs;   /* registered codes, stable pointers */
    Py_ssize_t nrecs, caprecs;
    fp_lthread **threads;
    Py_ssize_t nthreads, capthreads;
    const void *cache_key;          /* the thread last looked up ... */
    fp_lthread *cache_ts;           /* ... and its stack (threads live as long as the tracer) */
    PyObject *timer;                /* NULL: fp_clock_ticks(); else a callable returning an int */
    fp_tick last_tick;              /* the injected timer's last good reading */
    PyObject *name_trace_lines;     /* "f_trace_lines" (used below 3.12) */
    Py_ssize_t trace_lines_offset;  /* 3.11: offset of the frame's f_trace_lines, or -1 */
    struct fp_ltracer **passengers; /* below 3.12: tracers fed by this one's trace function */
    Py_ssize_t npassengers, cappassengers;
    int enabled;
    PyObject *error; /* sticky: the first error a hook met (see common.h); recording goes on */
#if !FP_PY312
    /* The trace function (coverage.py's, a debugger's) that _install_trace(True) found in the
     * enabling thread: the C trace function hands it every event there first, and
     * _uninstall_trace puts it back. */
    Py_tracefunc chain_func;
    PyObject *chain_obj;     /* strong */
    const void *chain_key;   /* FP_THREAD_KEY() of that thread ... */
    PyThreadState *chain_ts; /* ... its thread state ... */
    unsigned long chain_tid; /* ... and its id (a thread state may be reused) */
#endif
} fp_ltracer;

/* Returns the record of code in tracer self, or NULL when code is not registered there.
 * Never sets an exception. */
static inline fp_lrec *
fp_line_lookup(fp_ltracer *self, PyObject *code)
{
    void *p = NULL;
    if (FP_CODE_GET_EXTRA(code, self->extra, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (FP_LIKELY(p == NULL))
        return NULL;
    fp_lmap *map = (fp_lmap *)p;
    for (int i = 0; i < map->n; i++)
        if (map->e[i].tracer_id == self->id)
            return map->e[i].rec;
    return NULL;
}

/* Returns the calling thread's stack in self, creating it on the thread's first event, or
 * NULL (self->error recorded) when memory runs out.  Never leaves an exception set. */
fp_lthread *fp_line_thread_slow(fp_ltracer *self);

/* Returns the current time in ticks of self's timer (the tick clock unless a timer was
 * injected).  A failing injected timer gives its last good reading (0 before any), recorded
 * in self->error; never leaves an exception set. */
fp_tick fp_line_now_slow(fp_ltracer *self);

/* enable() and disable()'s walks over the registered codes (line_toggle.c): see there. */
PyObject *fp_line_unregistered(fp_ltracer *self, PyObject *functions);
PyObject *fp_line_set_local_events(fp_ltracer *self, PyObject *const *args, Py_ssize_t nargs);
#if !FP_PY312
PyObject *fp_line_settrace_unmuting(PyObject *unused, PyObject *prev);

/* After a failed attempt (number attempt, from 0) to install a trace function: when the
 * exception set is Python 3.11's refusal while another thread installs one (with an audit
 * hook on) and attempts are left, clears it and lets other threads run for a moment (that
 * thread finishes), returning 1: try again.  Else returns 0 with the exception left set. */
int fp_line_try_again(int attempt);
#endif

/* The hooks (line_hooks.c).  Each returns what the interpreter expects and never leaves an
 * exception set. */
#if FP_PY312
PyObject *fp_line_cb_start(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
PyObject *fp_line_cb_resume(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
PyObject *fp_line_cb_line(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
PyObject *fp_line_cb_leave(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
#else
int fp_line_trace(PyObject *op, PyFrameObject *frame, int what, PyObject *arg);
PyObject *fp_line_trace_call(PyObject *op, PyObject *args, PyObject *kwargs);

/* Muting.  The trace function turns line events off (f_trace_lines) in the frames of code
 * no tracer registered, and never leaves a frame so once it is no longer the thread's trace
 * function: a generator or coroutine gets them back when it yields; a thread's whole stack
 * when the trace function is taken out (_uninstall_trace, or itself at its next event once
 * off) or replaced through sys.settrace while on (_unmute_thread, which fastprof.lines calls
 * from the sys.settrace it puts in place meanwhile). */

/* Turns line events back on in every frame of ts's stack (self gives the field's offset).
 * Returns nothing; never leaves an exception set (one set before is kept). */
void fp_line_unmute_stack(fp_ltracer *self, PyThreadState *ts);

/* Turns line events back on in every frame of the calling thread's stack when its trace
 * function is a LineTracer's (the C one, or the tracer as a Python trace function), except in
 * the thread whose own trace function it chains to (nothing is muted there).  Returns
 * nothing; never leaves an exception set (one set before is kept). */
void fp_line_unmute_calling_thread(void);
#endif

#endif
