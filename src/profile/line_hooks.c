/* line_hooks.c - the line profiler's hot path: the sys.monitoring callbacks (3.12+) or the
 * C trace function (3.9-3.11) that count hits and charge ticks per line.
 *
 * Rule (line_profiler's): a line's time runs from its line event to the next line event of
 * the same frame, or to the frame's return, yield or unwind.  Time while a generator or
 * coroutine is suspended belongs to no line.  Hits are counted when a line begins. */
#include "line.h"
#include "legacy.h"

#if !FP_PY312
#include <frameobject.h>
#endif

/* Returns the calling thread's stack in self, or NULL (self->error recorded) when memory
 * runs out.  Never leaves an exception set. */
static inline fp_lthread *
fp_line_thread(fp_ltracer *self)
{
    if (FP_LIKELY(self->cache_key == FP_THREAD_KEY()))
        return self->cache_ts;
    return fp_line_thread_slow(self);
}

/* See line.h. */
fp_lthread *
fp_line_thread_slow(fp_ltracer *self)
{
    fp_lthread *ts = NULL;
    const void *key = FP_THREAD_KEY();
    for (Py_ssize_t i = 0; i < self->nthreads; i++) {
        if (self->threads[i]->key == key) {
            ts = self->threads[i];
            goto done;
        }
    }
    if (self->nthreads == self->capthreads) {
        Py_ssize_t cap = self->capthreads ? 2 * self->capthreads : 4;
        fp_lthread **grown = PyMem_RawRealloc(self->threads, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            goto error;
        self->threads = grown;
        self->capthreads = cap;
    }
    ts = PyMem_RawCalloc(1, sizeof(*ts));
    if (ts == NULL)
        goto error;
    ts->key = key;
    self->threads[self->nthreads++] = ts;
done:
    self->cache_key = key;
    self->cache_ts = ts;
    return ts;
error:
    fp_sticky_set_what(&self->error, PyExc_MemoryError, "out of memory for a thread's frame stack");
    return NULL;
}

/* See line.h. */
fp_tick
fp_line_now_slow(fp_ltracer *self)
{
    fp_tick t = 0;
    PyObject *r = PyObject_CallNoArgs(self->timer);
    if (r == NULL)
        goto error;
    t = (fp_tick)PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (t == -1 && PyErr_Occurred())
        goto error;
    self->last_tick = t;
    return t;
error:
    fp_sticky_set_what(&self->error, PyExc_RuntimeError,
                       "the timer raised or did not return an int");
    /* the last good reading: no interval around the failure comes out negative */
    return self->last_tick;
}

/* Returns the current time of self's timer.  Never sets an exception. */
FP_INLINE fp_tick
fp_line_now(fp_ltracer *self)
{
    if (FP_LIKELY(self->timer == NULL))
        return fp_clock_ticks();
    return fp_line_now_slow(self);
}

/* Adds dt ticks to the current line of f, if it has one. */
FP_INLINE void
fp_line_charge(fp_lframe *f, fp_tick now)
{
    int i = f->line - f->rec->first;
    if (f->line >= 0 && (unsigned)i < (unsigned)f->rec->nlines)
        f->rec->ticks[i] += now - f->t;
}

/* Counts a hit of line in rec. */
FP_INLINE void
fp_line_hit(fp_lrec *rec, int line)
{
    int i = line - rec->first;
    if ((unsigned)i < (unsigned)rec->nlines)
        rec->hits[i] += 1;
}

/* Pushes a frame of rec on ts, on `line` (-1: none yet) since now.  Returns the new top, or
 * NULL (self->error recorded) when memory runs out.  Never leaves an exception set. */
static fp_lframe *
fp_line_push(fp_ltracer *self, fp_lthread *ts, fp_lrec *rec, void *frame, int line, fp_tick now)
{
    if (FP_UNLIKELY(ts->depth == ts->cap)) {
        Py_ssize_t cap = ts->cap ? 2 * ts->cap : 64;
        fp_lframe *grown = PyMem_RawRealloc(ts->stack, (size_t)cap * sizeof(*grown));
        if (grown == NULL) {
            fp_sticky_set_what(&self->error, PyExc_MemoryError,
                               "out of memory for a thread's frame stack");
            return NULL;
        }
        ts->stack = grown;
        ts->cap = cap;
    }
    fp_lframe *f = &ts->stack[ts->depth++];
    f->rec = rec;
    f->frame = frame;
    f->line = line;
    f->t = now;
    return f;
}

/* A frame of rec (identified by `frame` below 3.12) leaves: charges its line and pops it.
 * When it is not on top (events missed while disabled), the nearest entry of rec below is
 * popped together with what lies above it; when there is none, nothing happens. */
static void
fp_line_leave(fp_lthread *ts, fp_lrec *rec, void *frame, fp_tick now)
{
    for (Py_ssize_t d = ts->depth - 1; d >= 0; d--) {
        fp_lframe *f = &ts->stack[d];
        if (f->rec == rec && f->frame == frame) {
            fp_line_charge(f, now);
            ts->depth = d;
            return;
        }
    }
}

/* A line event of rec (frame `frame` below 3.12): closes the previous line of that frame
 * and opens `line`.  A frame first seen here (running when profiling began) is pushed. */
FP_INLINE void
fp_line_event(fp_ltracer *self, fp_lthread *ts, fp_lrec *rec, void *frame, int line, fp_tick now)
{
    fp_lframe *f;
    if (FP_LIKELY(ts->depth > 0) && ts->stack[ts->depth - 1].rec == rec &&
        ts->stack[ts->depth - 1].frame == frame) {
        f = &ts->stack[ts->depth - 1];
        fp_line_charge(f, now);
        f->line = line;
        f->t = now;
    } else if (fp_line_push(self, ts, rec, frame, line, now) == NULL) {
        return;
    }
    fp_line_hit(rec, line);
}

#if FP_PY312

/* Reads args[i] as an int line number or offset; -1 when it is not one.  Never sets an
 * exception. */
FP_INLINE int
fp_line_int_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t i)
{
    if (nargs <= i)
        return -1;
    long v = PyLong_AsLong(args[i]);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return (int)v;
}

/* Pushes a frame of the registered code args[0] entered at now; resumed: it goes on after a
 * yield, on the line of the yield at offset args[1] (which gets no new line event), or it is
 * thrown into before its first step (an offset below its first RESUME), on no line yet.
 * Returns None. */
static PyObject *
fp_line_begin(fp_ltracer *self, PyObject *const *args, Py_ssize_t nargs, int resumed, fp_tick now)
{
    fp_lrec *rec;
    fp_lthread *ts;
    if (nargs < 1 + resumed || !self->enabled || (rec = fp_line_lookup(self, args[0])) == NULL)
        goto done;
    if ((ts = fp_line_thread(self)) == NULL)
        goto done;
    int line = -1;
    if (resumed) {
        int offset = fp_line_int_arg(args, nargs, 1);
        if (offset >= rec->start)
            line = PyCode_Addr2Line((PyCodeObject *)args[0], offset);
    }
    fp_line_push(self, ts, rec, NULL, line, now);
done:
    Py_RETURN_NONE;
}

/* PY_START(code, offset): a registered frame begins.  Returns None. */
PyObject *
fp_line_cb_start(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    fp_ltracer *self = (fp_ltracer *)op;
    return fp_line_begin(self, args, nargs, 0, fp_line_now(self));
}

/* PY_RESUME / PY_THROW(code, offset, ...): a suspended generator or coroutine of a
 * registered code goes on.  Returns None. */
PyObject *
fp_line_cb_resume(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    fp_ltracer *self = (fp_ltracer *)op;
    return fp_line_begin(self, args, nargs, 1, fp_line_now(self));
}

/* LINE(code, line): the hot one.  Returns None. */
PyObject *
fp_line_cb_line(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    fp_ltracer *self = (fp_ltracer *)op;
    fp_tick now = fp_line_now(self);
    fp_lthread *ts;
    fp_lrec *rec;
    if (FP_UNLIKELY(nargs < 2 || !self->enabled))
        goto done;
    if ((ts = fp_line_thread(self)) == NULL)
        goto done;
    /* The frame on top is nearly always the one reporting: skip the lookup then. */
    if (FP_LIKELY(ts->depth > 0) && ts->stack[ts->depth - 1].rec->code == args[0])
        rec = ts->stack[ts->depth - 1].rec;
    else if ((rec = fp_line_lookup(self, args[0])) == NULL)
        goto done;
    fp_line_event(self, ts, rec, NULL, fp_line_int_arg(args, nargs, 1), now);
done:
    Py_RETURN_NONE;
}

/* PY_RETURN / PY_YIELD / PY_UNWIND(code, offset, value): a registered frame returns, is
 * suspended or is left by an exception.  PY_UNWIND is a global event, so it also comes for
 * codes not registered, which are ignored.  Returns None. */
PyObject *
fp_line_cb_leave(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    fp_ltracer *self = (fp_ltracer *)op;
    fp_tick now = fp_line_now(self);
    fp_lrec *rec;
    fp_lthread *ts;
    if (nargs < 1 || !self->enabled || (rec = fp_line_lookup(self, args[0])) == NULL)
        goto done;
    if ((ts = fp_line_thread(self)) == NULL)
        goto done;
    fp_line_leave(ts, rec, NULL, now);
done:
    Py_RETURN_NONE;
}

#else /* below 3.12: the C trace function */

/* Returns a borrowed reference to frame's code object. */
FP_INLINE PyObject *
fp_line_frame_code(PyFrameObject *frame)
{
#if FP_PY311
    PyCodeObject *code = PyFrame_GetCode(frame); /* strong; the frame keeps another */
    Py_DECREF(code);
    return (PyObject *)code;
#else
    return (PyObject *)frame->f_code;
#endif
}

#if FP_PY311
/* fp_line_set_lines where the offset of f_trace_lines is not known: through the attribute.
 * Never sets an exception. */
static FP_NOINLINE void
fp_line_set_lines_attr(fp_ltracer *self, PyFrameObject *frame, int on)
{
    if (PyObject_SetAttr((PyObject *)frame, self->name_trace_lines, on ? Py_True : Py_False) < 0)
        PyErr_Clear();
}
#endif

/* Sets frame's f_trace_lines to on (1: line events reach the trace function, 0: they do
 * not), writing the field directly where the frame's layout allows (self caches its offset
 * on 3.11).  Never sets an exception. */
FP_INLINE void
fp_line_set_lines(FP_UNUSED fp_ltracer *self, PyFrameObject *frame, int on)
{
#if FP_PY311
    if (FP_LIKELY(self->trace_lines_offset > 0))
        *((char *)frame + self->trace_lines_offset) = (char)on;
    else
        fp_line_set_lines_attr(self, frame, on);
#else
    frame->f_trace_lines = on;
#endif
}

/* Turns line events off for frame (a frame of a code not registered).  Never sets an
 * exception. */
FP_INLINE void
fp_line_mute(fp_ltracer *self, PyFrameObject *frame)
{
    fp_line_set_lines(self, frame, 0);
}

/* A frame of a code not registered leaves (returns, unwinds or yields): turns its line
 * events back on, so that a generator or coroutine muted here never waits suspended with
 * them off (a debugger or coverage.py that takes over later sees its lines; it is muted
 * again when it resumes under fastprof).  A frame that returns for good is done with them:
 * one store costs less than telling the two apart.  Never sets an exception. */
FP_INLINE void
fp_line_unmute_leaving(fp_ltracer *self, PyFrameObject *frame)
{
    fp_line_set_lines(self, frame, 1);
}

/* See line.h. */
void
fp_line_unmute_stack(fp_ltracer *self, PyThreadState *ts)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyFrameObject *frame = PyThreadState_GetFrame(ts); /* strong, or NULL */
    while (frame != NULL) {
        fp_line_set_lines(self, frame, 1);
        PyFrameObject *back = PyFrame_GetBack(frame); /* strong, or NULL */
        Py_DECREF(frame);
        frame = back;
    }
    PyErr_Clear(); /* 3.11 makes frame objects on the way, which may fail */
    PyErr_Restore(type, value, tb);
}

/* See line.h. */
void
fp_line_unmute_calling_thread(void)
{
    PyThreadState *ts = PyThreadState_Get();
    PyObject *obj = ts->c_traceobj;
    if (obj == NULL || Py_TYPE(obj)->tp_call != fp_line_trace_call)
        return; /* not a LineTracer's thread: nothing was muted by fastprof here */
    fp_ltracer *tracer = (fp_ltracer *)obj;
    if (tracer->chain_func != NULL && tracer->chain_key == FP_THREAD_KEY())
        return; /* the thread it chains in: nothing is muted there */
    fp_line_unmute_stack(tracer, ts);
}

/* Returns 1 when frame is a generator or coroutine going on after a yield (its line then is
 * the yield's, which gets no new line event), else 0. */
static int
fp_line_resumed(PyFrameObject *frame, PyObject *code)
{
    int flags = ((PyCodeObject *)code)->co_flags;
    if (!(flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)))
        return 0;
    return PyFrame_GetLineNumber(frame) != ((PyCodeObject *)code)->co_firstlineno;
}

/* Handles one trace event for tracer self.  Returns 1 when frame belongs to a code
 * registered in self (so its line events must stay on), else 0.  Never sets an exception. */
static int
fp_line_trace_one(fp_ltracer *self, PyFrameObject *frame, int what)
{
    fp_tick now;
    fp_lthread *ts;
    fp_lrec *rec;
    PyObject *code;
    int known = 0;
    /* The clock is read only for frames of registered codes: the calls and returns of other
     * code (most events, often) cost a lookup and nothing more. */
    switch (what) {
    case PyTrace_LINE:
        now = fp_line_now(self);
        if ((ts = fp_line_thread(self)) == NULL)
            goto done;
        if (FP_LIKELY(ts->depth > 0) && ts->stack[ts->depth - 1].frame == (void *)frame)
            rec = ts->stack[ts->depth - 1].rec;
        else if ((rec = fp_line_lookup(self, fp_line_frame_code(frame))) == NULL)
            goto done;
        known = 1;
#if FP_PY311
        fp_line_event(self, ts, rec, frame, PyFrame_GetLineNumber(frame), now);
#else
        fp_line_event(self, ts, rec, frame, frame->f_lineno, now); /* set for the event */
#endif
        break;
    case PyTrace_CALL:
        code = fp_line_frame_code(frame);
        if ((rec = fp_line_lookup(self, code)) == NULL)
            goto done;
        known = 1;
        now = fp_line_now(self);
        if ((ts = fp_line_thread(self)) == NULL)
            goto done;
        fp_line_push(self, ts, rec, frame,
                     fp_line_resumed(frame, code) ? PyFrame_GetLineNumber(frame) : -1, now);
        break;
    case PyTrace_RETURN:
        if ((ts = fp_line_thread(self)) == NULL)
            goto done;
        if (FP_LIKELY(ts->depth > 0) && ts->stack[ts->depth - 1].frame == (void *)frame)
            rec = ts->stack[ts->depth - 1].rec;
        else if ((rec = fp_line_lookup(self, fp_line_frame_code(frame))) == NULL)
            goto done;
        known = 1;
        fp_line_leave(ts, rec, frame, fp_line_now(self));
        break;
    default:
        break;
    }
done:
    return known;
}

/* Hands a call, line or return event to self and its passengers.  Returns 1 when frame
 * belongs to a code one of them registered (its line events must stay on), else 0. */
FP_INLINE int
fp_line_trace_events(fp_ltracer *self, PyFrameObject *frame, int what)
{
    int known = 0;
    if (what != PyTrace_CALL && what != PyTrace_LINE && what != PyTrace_RETURN)
        return 1; /* not an event that mutes */
    if (FP_LIKELY(self->enabled))
        known = fp_line_trace_one(self, frame, what);
    for (Py_ssize_t i = 0; i < self->npassengers; i++) {
        fp_ltracer *p = self->passengers[i];
        if (p->enabled)
            known |= fp_line_trace_one(p, frame, what);
    }
    return known;
}

/* After a call, line or return event of frame, a frame of no code registered: mutes it
 * (call, line), or turns its line events back on as it leaves (return; see
 * fp_line_unmute_leaving). */
FP_INLINE void
fp_line_mute_or_not(fp_ltracer *self, PyFrameObject *frame, int what)
{
    if (what != PyTrace_RETURN)
        fp_line_mute(self, frame);
    else
        fp_line_unmute_leaving(self, frame);
}

/* Hands one event to the trace function self chained to (see fp_line_install_trace).
 * Returns 1 when the event was handed over, 0 when this thread has none to hand it to, -1
 * with an exception set when that function failed (the interpreter then propagates it as
 * from any trace function). */
static FP_NOINLINE int
fp_line_chain(fp_ltracer *self, PyFrameObject *frame, int what, PyObject *arg)
{
    if (self->chain_key != FP_THREAD_KEY())
        return 0;
    PyObject *obj = self->chain_obj;
    Py_XINCREF(obj); /* that function may replace the trace functions, dropping references */
    int r = self->chain_func(obj, frame, what, arg);
    Py_XDECREF(obj);
    return r < 0 ? -1 : 1;
}

/* The trace function installed with PyEval_SetTrace: op is the installed tracer, which also
 * hands each event to the tracers riding along with it (enabled while it was installed), and
 * first to the trace function it found in the enabling thread (coverage.py's, say), if any:
 * that one sees every event and line as without fastprof, so line events stay on there.
 * Returns 0, or -1 when the chained trace function failed (its exception then propagates as
 * it would without fastprof; fastprof's own work never fails). */
int
fp_line_trace(PyObject *op, PyFrameObject *frame, int what, PyObject *arg)
{
    fp_ltracer *self = (fp_ltracer *)op;
    int chained, rc = 0;
    if (FP_UNLIKELY(!self->enabled && self->npassengers == 0)) {
        /* Off while this thread still had it installed: remove it here (putting back the
         * one it chained to in its thread). */
        int mine = self->chain_func != NULL && self->chain_key == FP_THREAD_KEY();
        Py_INCREF(op);
        if (!mine) /* leaving: no frame of this thread stays muted */
            fp_line_unmute_stack(self, PyThreadState_Get());
        fp_legacy_set_quiet(1, mine ? self->chain_func : NULL, mine ? self->chain_obj : NULL);
        Py_DECREF(op);
        goto done;
    }
    if (FP_UNLIKELY(self->chain_func != NULL)) {
        /* The chained function may replace the trace functions, dropping a reference. */
        Py_INCREF(op);
        chained = fp_line_chain(self, frame, what, arg);
        /* Line events stay on where a chained function may want them. */
        if (chained >= 0 && !fp_line_trace_events(self, frame, what) && chained == 0)
            fp_line_mute_or_not(self, frame, what);
        Py_DECREF(op);
        rc = chained < 0 ? -1 : 0;
        goto done;
    }
    if (!fp_line_trace_events(self, frame, what))
        fp_line_mute_or_not(self, frame, what);
done:
    return rc;
}

/* tracer(frame, event, arg): the tracer as a Python trace function, for code that saves
 * sys.gettrace() and hands it back to sys.settrace (doctest, benchmark fixtures): each event
 * goes to fp_line_trace as from the C hook.  Returns the tracer (the frame's local trace
 * function), or NULL with an exception set (bad arguments, or the chained function failed). */
PyObject *
fp_line_trace_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static const char *const names[] = {"call", "exception", "line", "return", "opcode"};
    static const int events[] = {PyTrace_CALL, PyTrace_EXCEPTION, PyTrace_LINE, PyTrace_RETURN,
                                 PyTrace_OPCODE};
    PyObject *frame, *event, *arg, *result = NULL;
    int what = -1;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "LineTracer() takes no keyword arguments");
        goto error;
    }
    if (!PyArg_ParseTuple(args, "O!UO:LineTracer", &PyFrame_Type, &frame, &event, &arg))
        goto error;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (PyUnicode_CompareWithASCIIString(event, names[i]) == 0)
            what = events[i];
    if (what < 0) {
        PyErr_Format(PyExc_ValueError, "LineTracer(): unknown trace event %R", event);
        goto error;
    }
    Py_INCREF(op); /* the trace function may drop the references its thread holds */
    if (fp_line_trace(op, (PyFrameObject *)frame, what, arg) == 0)
        result = Py_NewRef(op);
    Py_DECREF(op);
error:
    return result;
}

#endif
