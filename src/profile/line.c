/* profile/line.c - the line profiler's object, _fastprof.LineTracer: registration of code
 * objects, enable/disable bookkeeping, and the export of hits and ticks per line.  The hooks
 * themselves live in line_hooks.c; installing them (sys.monitoring on 3.12+) is done by
 * fastprof.lines, except the C trace function below 3.12, installed here. */
#include "line.h"
#include "legacy.h"

#include <string.h>
#if !FP_PY312 && FP_PY311
#include <structmember.h>
#endif

static uint64_t fp_line_next_id = 1; /* guarded by the GIL */

/* Frees a code object's map (the code-extra free function).  Every tracer that held an
 * entry has dropped it before (it kept the code alive), so only the map itself is left. */
static void
fp_line_map_free(void *p)
{
    PyMem_RawFree(p);
}

/* Returns the map of code in self's extra slot (NULL when it has none), or sets *failed and an
 * exception. */
static fp_lmap *
fp_line_map_get(fp_ltracer *self, PyObject *code, int *failed)
{
    void *p = NULL;
    *failed = 0;
    if (FP_CODE_GET_EXTRA(code, self->extra, &p) < 0)
        *failed = 1;
    return (fp_lmap *)p;
}

/* Frees rec's arrays and rec, dropping its code reference. */
static void
fp_line_rec_free(fp_lrec *rec)
{
    if (rec == NULL)
        return;
    Py_XDECREF(rec->code);
    PyMem_RawFree(rec->hits);
    PyMem_RawFree(rec->ticks);
    PyMem_RawFree(rec);
}

/* Removes self's entry from the map of rec->code, if any.  Never sets an exception. */
static void
fp_line_unmap(fp_ltracer *self, fp_lrec *rec)
{
    int failed;
    fp_lmap *map = fp_line_map_get(self, rec->code, &failed);
    if (failed) {
        PyErr_Clear();
        return;
    }
    if (map == NULL)
        return;
    for (int i = 0; i < map->n; i++) {
        if (map->e[i].tracer_id == self->id) {
            map->e[i] = map->e[map->n - 1];
            map->n--;
            break;
        }
    }
}

/* Empties every thread's frame stack (nothing is charged). */
static void
fp_line_clear_stacks(fp_ltracer *self)
{
    for (Py_ssize_t i = 0; i < self->nthreads; i++)
        self->threads[i]->depth = 0;
}

/* Returns the byte offset of f_trace_lines in a frame object on 3.11 (where the frame
 * struct is private but the attribute is a public T_BOOL member), else -1.  Never sets an
 * exception.  Writing there is what `frame.f_trace_lines = False` does, without the
 * attribute lookup on every call of code that is not registered. */
static Py_ssize_t
fp_line_trace_lines_offset(void)
{
    Py_ssize_t offset = -1;
#if !FP_PY312 && FP_PY311
    PyObject *d = PyObject_GetAttrString((PyObject *)&PyFrame_Type, "f_trace_lines");
    if (d == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *md = ((PyMemberDescrObject *)d)->d_member;
        if (md->type == T_BOOL && md->offset > 0)
            offset = md->offset;
    }
    Py_DECREF(d);
#endif
    return offset;
}

/* LineTracer(timer=None).  Returns the new tracer, or NULL with an exception set. */
static PyObject *
fp_line_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"timer", NULL};
    PyObject *timer = Py_None;
    fp_ltracer *self = NULL;
    /* LineTracer is no base type: type is the module's own, whose module is this one */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:LineTracer", kwlist, &timer))
        goto error;
    if (timer != Py_None && !PyCallable_Check(timer)) {
        PyErr_Format(PyExc_TypeError,
                     "LineTracer(): timer must be a callable returning an int or None, not %.100s",
                     Py_TYPE(timer)->tp_name);
        goto error;
    }
    self = (fp_ltracer *)type->tp_alloc(type, 0);
    if (self == NULL)
        goto error;
    self->id = fp_line_next_id++;
    self->extra = fp_state(PyType_GetModule(type))->line_extra;
    self->timer = timer == Py_None ? NULL : Py_NewRef(timer);
    self->name_trace_lines = PyUnicode_InternFromString("f_trace_lines");
    if (self->name_trace_lines == NULL)
        goto error;
    self->trace_lines_offset = fp_line_trace_lines_offset();
    return (PyObject *)self;
error:
    Py_XDECREF(self);
    return NULL;
}

/* GC traversal.  Returns 0 or the visitor's result. */
static int
fp_line_traverse(fp_ltracer *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->timer);
    Py_VISIT(self->error);
#if !FP_PY312
    Py_VISIT(self->chain_obj);
#endif
    for (Py_ssize_t i = 0; i < self->nrecs; i++)
        Py_VISIT(self->recs[i]->code);
    for (Py_ssize_t i = 0; i < self->npassengers; i++)
        Py_VISIT(self->passengers[i]);
    return 0;
}

/* Drops the passengers held by self.  Never fails. */
static void
fp_line_drop_passengers(fp_ltracer *self)
{
    Py_ssize_t n = self->npassengers;
    fp_ltracer **list = self->passengers;
    self->npassengers = self->cappassengers = 0;
    self->passengers = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(list[i]);
    PyMem_RawFree(list);
}

/* Forgets the trace function chained to (below 3.12; the hook stops calling it first).
 * Never fails. */
static void
fp_line_drop_chain(FP_UNUSED fp_ltracer *self)
{
#if !FP_PY312
    self->chain_func = NULL;
    self->chain_key = NULL;
    self->chain_ts = NULL;
    Py_CLEAR(self->chain_obj);
#endif
}

/* tp_clear: stops counting first, then drops the timer, the passengers and the chained trace
 * function (the codes stay: they never refer back to a tracer).  Returns 0. */
static int
fp_line_clear(fp_ltracer *self)
{
    self->enabled = 0;
    fp_line_drop_chain(self);
    Py_CLEAR(self->timer);
    Py_CLEAR(self->error);
    fp_line_drop_passengers(self);
    return 0;
}

/* Deallocation: stops counting, unregisters every code and frees the arrays.  (While its
 * trace function is installed a thread holds the tracer: it is not freed then.) */
static void
fp_line_dealloc(fp_ltracer *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    self->enabled = 0;
    for (Py_ssize_t i = 0; i < self->nrecs; i++) {
        fp_line_unmap(self, self->recs[i]);
        fp_line_rec_free(self->recs[i]);
    }
    PyMem_RawFree(self->recs);
    for (Py_ssize_t i = 0; i < self->nthreads; i++) {
        PyMem_RawFree(self->threads[i]->stack);
        PyMem_RawFree(self->threads[i]);
    }
    PyMem_RawFree(self->threads);
    fp_line_drop_passengers(self);
    fp_line_drop_chain(self);
    Py_CLEAR(self->timer);
    Py_CLEAR(self->error);
    Py_CLEAR(self->name_trace_lines);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* add_code(code, first, last, start=0): registers code with line numbers first..last, its
 * first RESUME at offset start.  Returns True when it was new here, False when already
 * registered, or NULL with an exception set. */
static PyObject *
fp_line_add_code(fp_ltracer *self, PyObject *args)
{
    PyObject *code;
    int first, last, start = 0, failed;
    fp_lrec *rec = NULL;
    fp_lmap *map, *grown;
    if (!PyArg_ParseTuple(args, "Oii|i:add_code", &code, &first, &last, &start))
        goto error;
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "add_code(): code must be a code object, not %.100s",
                     Py_TYPE(code)->tp_name);
        goto error;
    }
    if (first < 0 || last < first || last - first > 10000000) {
        PyErr_Format(PyExc_ValueError,
                     "add_code(): first and last must be line numbers with 0 <= first <= last, "
                     "got %d and %d",
                     first, last);
        goto error;
    }
    if (fp_line_lookup(self, code) != NULL)
        Py_RETURN_FALSE;
    map = fp_line_map_get(self, code, &failed);
    if (failed)
        goto error;
    if (self->nrecs == self->caprecs) {
        Py_ssize_t cap = self->caprecs ? 2 * self->caprecs : 16;
        fp_lrec **more = PyMem_RawRealloc(self->recs, (size_t)cap * sizeof(*more));
        if (more == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        self->recs = more;
        self->caprecs = cap;
    }
    rec = PyMem_RawCalloc(1, sizeof(*rec));
    if (rec == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    rec->first = first;
    rec->nlines = last - first + 1;
    rec->start = start;
    rec->hits = PyMem_RawCalloc((size_t)rec->nlines, sizeof(int64_t));
    rec->ticks = PyMem_RawCalloc((size_t)rec->nlines, sizeof(int64_t));
    if (rec->hits == NULL || rec->ticks == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (map == NULL || map->n == map->cap) {
        /* A bigger copy replaces the map: setting the extra frees the old one. */
        int cap = map ? 2 * map->cap : 2;
        grown = PyMem_RawMalloc(sizeof(fp_lmap) + (size_t)cap * sizeof(grown->e[0]));
        if (grown == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        grown->n = map ? map->n : 0;
        grown->cap = cap;
        if (map != NULL)
            memcpy(grown->e, map->e, (size_t)map->n * sizeof(map->e[0]));
        if (FP_CODE_SET_EXTRA(code, self->extra, grown) < 0) {
            PyMem_RawFree(grown);
            goto error;
        }
        map = grown;
    }
    map->e[map->n].tracer_id = self->id;
    map->e[map->n].rec = rec;
    map->n++;
    rec->code = Py_NewRef(code);
    self->recs[self->nrecs++] = rec;
    Py_RETURN_TRUE;
error:
    fp_line_rec_free(rec);
    return NULL;
}

/* codes(): returns a new list of the registered code objects, or NULL with an exception. */
static PyObject *
fp_line_codes(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    PyObject *out = PyList_New(self->nrecs);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nrecs; i++)
        PyList_SET_ITEM(out, i, Py_NewRef(self->recs[i]->code));
    return out;
}

/* get_timings(): returns a new list of (code, [(lineno, hits, ticks), ...]) with the lines
 * that were hit or charged, in line order, or NULL with an exception set. */
static PyObject *
fp_line_get_timings(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    PyObject *out = PyList_New(0), *lines = NULL, *item = NULL;
    if (out == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < self->nrecs; i++) {
        fp_lrec *rec = self->recs[i];
        lines = PyList_New(0);
        if (lines == NULL)
            goto error;
        for (int k = 0; k < rec->nlines; k++) {
            if (rec->hits[k] == 0 && rec->ticks[k] == 0)
                continue;
            item = Py_BuildValue("(iLL)", rec->first + k, (long long)rec->hits[k],
                                 (long long)rec->ticks[k]);
            if (item == NULL || PyList_Append(lines, item) < 0)
                goto error;
            Py_CLEAR(item);
        }
        item = PyTuple_Pack(2, rec->code, lines);
        if (item == NULL || PyList_Append(out, item) < 0)
            goto error;
        Py_CLEAR(item);
        Py_CLEAR(lines);
    }
    return out;
error:
    Py_XDECREF(item);
    Py_XDECREF(lines);
    Py_XDECREF(out);
    return NULL;
}

/* reset(): zeroes every count and empties the frame stacks.  Returns None. */
static PyObject *
fp_line_reset(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    for (Py_ssize_t i = 0; i < self->nrecs; i++) {
        memset(self->recs[i]->hits, 0, (size_t)self->recs[i]->nlines * sizeof(int64_t));
        memset(self->recs[i]->ticks, 0, (size_t)self->recs[i]->nlines * sizeof(int64_t));
    }
    fp_line_clear_stacks(self);
    Py_RETURN_NONE;
}

/* _start(): lets the hooks count (empty stacks, no error).  Returns None. */
static PyObject *
fp_line_start(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    fp_line_clear_stacks(self);
    Py_CLEAR(self->error);
    self->enabled = 1;
    Py_RETURN_NONE;
}

/* _stop(): stops the hooks counting and empties the stacks.  Returns the run's sticky error
 * (the exception the hooks recorded, handed over: see common.h) or None. */
static PyObject *
fp_line_stop(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    PyObject *error = self->error;
    self->enabled = 0;
    fp_line_clear_stacks(self);
    self->error = NULL;
    return error != NULL ? error : Py_NewRef(Py_None);
}

#if !FP_PY312
/* _install_trace(others=False): installs the C trace function in the calling thread and,
 * when others is true (enable(), not a new thread's bootstrap), in every other thread that
 * has no trace function, chaining to the calling thread's own trace function if it has one
 * (coverage.py's, a debugger's: see fp_line_trace).  Returns None, or NULL with an exception
 * set (nothing left installed). */
static PyObject *
fp_line_install_trace(fp_ltracer *self, PyObject *const *args, Py_ssize_t nargs)
{
    int others = 0;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_install_trace() takes at most one argument");
        return NULL;
    }
    if (nargs == 1 && (others = PyObject_IsTrue(args[0])) < 0)
        return NULL;
    if (others && fp_legacy_set_others(1, NULL, NULL, fp_line_trace, (PyObject *)self) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        fp_legacy_set_others(1, fp_line_trace, (PyObject *)self, NULL, NULL);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    PyThreadState *ts = PyThreadState_Get();
    if (others && ts->c_tracefunc != NULL && ts->c_tracefunc != fp_line_trace) {
        fp_line_drop_chain(self);
        self->chain_func = ts->c_tracefunc;
        self->chain_obj = Py_XNewRef(ts->c_traceobj);
        self->chain_key = FP_THREAD_KEY();
        self->chain_ts = ts;
        self->chain_tid = ts->thread_id;
    }
    /* not PyEval_SetTrace, which prints a refusal and returns as if done: 3.11 refuses while
     * another thread is inside sys.settrace (with an audit hook on); that one finishes once
     * this thread lets it run */
    for (int attempt = 0; _PyEval_SetTrace(ts, fp_line_trace, (PyObject *)self) < 0; attempt++)
        if (!fp_line_try_again(attempt))
            return NULL;
    Py_RETURN_NONE;
}

/* _add_passenger(tracer): lets self's trace function feed tracer too.  Returns None, or
 * NULL with an exception set. */
static PyObject *
fp_line_add_passenger(fp_ltracer *self, PyObject *other)
{
    if (Py_TYPE(other) != Py_TYPE(self) || other == (PyObject *)self) {
        PyErr_SetString(PyExc_TypeError, "_add_passenger(): expected another LineTracer");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->npassengers; i++)
        if (self->passengers[i] == (fp_ltracer *)other)
            Py_RETURN_NONE;
    if (self->npassengers == self->cappassengers) {
        Py_ssize_t cap = self->cappassengers ? 2 * self->cappassengers : 4;
        fp_ltracer **grown = PyMem_RawRealloc(self->passengers, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return PyErr_NoMemory();
        self->passengers = grown;
        self->cappassengers = cap;
    }
    self->passengers[self->npassengers++] = (fp_ltracer *)Py_NewRef(other);
    Py_RETURN_NONE;
}

/* _remove_passenger(tracer): stops feeding tracer.  Returns None. */
static PyObject *
fp_line_remove_passenger(fp_ltracer *self, PyObject *other)
{
    for (Py_ssize_t i = 0; i < self->npassengers; i++) {
        if (self->passengers[i] == (fp_ltracer *)other) {
            memmove(&self->passengers[i], &self->passengers[i + 1],
                    (size_t)(self->npassengers - i - 1) * sizeof(self->passengers[0]));
            self->npassengers--;
            Py_DECREF(other);
            break;
        }
    }
    Py_RETURN_NONE;
}

/* _active(): returns True when the trace function still has work (counting itself or
 * feeding passengers). */
static PyObject *
fp_line_active(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    return PyBool_FromLong(self->enabled || self->npassengers > 0);
}

/* Takes self's trace function out of thread ts (calling: the calling thread's state),
 * putting back (chain_func, chain_obj) when chained (ts is the thread it chained in), and
 * turns line events back on in every frame of ts's stack unless chained (nothing is muted
 * there).  A thread that has self as a Python trace function (sys.settrace(sys.gettrace())
 * while on) keeps it, and drops it at its next event.  Returns nothing; never leaves an
 * exception set. */
static void
fp_line_uninstall_one(fp_ltracer *self, PyThreadState *ts, PyThreadState *calling, int chained,
                      Py_tracefunc chain_func, PyObject *chain_obj)
{
    if (ts->c_traceobj != (PyObject *)self)
        return;
    if (!chained)
        fp_line_unmute_stack(self, ts);
    if (ts->c_tracefunc != fp_line_trace)
        return;
    Py_tracefunc func = chained ? chain_func : NULL;
    PyObject *obj = chained ? chain_obj : NULL;
    if (ts == calling)
        fp_legacy_set_quiet(1, func, obj);
    else if (fp_legacy_set_on(ts, 1, func, obj) < 0)
        PyErr_Clear(); /* that thread's trace function leaves at its next event (off) */
}

/* What fp_line_uninstall_trace takes out, and what it puts back where. */
typedef struct fp_uninstall_args {
    fp_ltracer *self;
    PyThreadState *calling, *chain_ts;
    unsigned long chain_tid;
    Py_tracefunc chain_func;
    PyObject *chain_obj;
} fp_uninstall_args;

/* fp_legacy_each_thread's step of fp_line_uninstall_trace.  Returns 0 (never fails). */
static int
fp_line_uninstall_step(PyThreadState *ts, void *arg)
{
    fp_uninstall_args *a = arg;
    int chained = ts == a->chain_ts && ts->thread_id == a->chain_tid && a->chain_func != NULL;
    fp_line_uninstall_one(a->self, ts, a->calling, chained, a->chain_func, a->chain_obj);
    return 0;
}

/* _uninstall_trace(): removes self's trace function from every thread that has it (the
 * calling one included), putting back the trace function it chained to in the thread it
 * found it in, and turns line events back on in the frames of those threads (see
 * fp_line_uninstall_one); a thread where Python refuses (an audit hook, or 3.11's race with
 * another thread's sys.settrace) removes it at its next event, finding self inactive.
 * Returns None, or NULL with MemoryError. */
static PyObject *
fp_line_uninstall_trace(fp_ltracer *self, FP_UNUSED PyObject *unused)
{
    PyThreadState *self_ts = PyThreadState_Get();
    Py_tracefunc chain_func = self->chain_func;
    PyObject *chain_obj = self->chain_obj; /* owned here from now on */
    PyThreadState *chain_ts = self->chain_ts;
    unsigned long chain_tid = self->chain_tid;
    self->chain_obj = NULL;
    fp_line_drop_chain(self);
    Py_INCREF(self); /* the last thread to drop it may hold the last reference */
    fp_uninstall_args a = {self, self_ts, chain_ts, chain_tid, chain_func, chain_obj};
    int rc = fp_legacy_each_thread(fp_line_uninstall_step, &a);
    Py_XDECREF(chain_obj);
    Py_DECREF(self);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _unmute_thread(): turns line events back on in the frames of the calling thread when its
 * trace function is a LineTracer's (fastprof.lines calls it from sys.settrace while on,
 * before another trace function replaces it).  Returns None. */
static PyObject *
fp_line_unmute_thread(FP_UNUSED PyObject *unused, FP_UNUSED PyObject *unused2)
{
    fp_line_unmute_calling_thread();
    Py_RETURN_NONE;
}
#endif

/* seconds_per_tick(): returns the seconds of one tick of the tick clock (float). */
static PyObject *
fp_line_seconds_per_tick(FP_UNUSED PyObject *unused, FP_UNUSED PyObject *unused2)
{
    return PyFloat_FromDouble(fp_clock_seconds_per_tick());
}

static PyMethodDef fp_line_methods[] = {
    {"add_code", (PyCFunction)fp_line_add_code, METH_VARARGS,
     "add_code(code, first, last) -> bool: register code, lines first..last."},
    {"codes", (PyCFunction)fp_line_codes, METH_NOARGS, "codes() -> list of registered codes."},
    {"get_timings", (PyCFunction)fp_line_get_timings, METH_NOARGS,
     "get_timings() -> [(code, [(lineno, hits, ticks), ...]), ...]."},
    {"_unregistered", (PyCFunction)fp_line_unregistered, METH_O,
     "_unregistered(functions) -> the functions whose __code__ is not registered."},
    {"_set_local_events", (PyCFunction)(void (*)(void))fp_line_set_local_events, METH_FASTCALL,
     "_set_local_events(set_local_events, tool, events): call it for every registered code."},
    {"reset", (PyCFunction)fp_line_reset, METH_NOARGS, "reset(): zero every count."},
    {"_start", (PyCFunction)fp_line_start, METH_NOARGS, "Let the hooks count."},
    {"_stop", (PyCFunction)fp_line_stop, METH_NOARGS,
     "Stop counting; returns the hooks' first error (an exception) or None."},
#if FP_PY312
    {"_on_start", (PyCFunction)(void (*)(void))fp_line_cb_start, METH_FASTCALL,
     "sys.monitoring PY_START callback."},
    {"_on_resume", (PyCFunction)(void (*)(void))fp_line_cb_resume, METH_FASTCALL,
     "sys.monitoring PY_RESUME / PY_THROW callback."},
    {"_on_line", (PyCFunction)(void (*)(void))fp_line_cb_line, METH_FASTCALL,
     "sys.monitoring LINE callback."},
    {"_on_leave", (PyCFunction)(void (*)(void))fp_line_cb_leave, METH_FASTCALL,
     "sys.monitoring PY_RETURN / PY_YIELD / PY_UNWIND callback."},
#else
    {"_install_trace", (PyCFunction)(void (*)(void))fp_line_install_trace, METH_FASTCALL,
     "Install the C trace function in the calling thread (and, given True, in every other "
     "thread that has none)."},
    {"_uninstall_trace", (PyCFunction)fp_line_uninstall_trace, METH_NOARGS,
     "Remove the trace function of the calling thread."},
    {"_add_passenger", (PyCFunction)fp_line_add_passenger, METH_O,
     "Feed another tracer from this one's trace function."},
    {"_remove_passenger", (PyCFunction)fp_line_remove_passenger, METH_O, "Stop feeding a tracer."},
    {"_active", (PyCFunction)fp_line_active, METH_NOARGS,
     "Whether the trace function still counts or feeds others."},
    {"_unmute_thread", (PyCFunction)fp_line_unmute_thread, METH_NOARGS | METH_STATIC,
     "Turn line events back on in the calling thread's frames when a LineTracer traces it."},
    {"_settrace_unmuting", (PyCFunction)fp_line_settrace_unmuting, METH_O | METH_STATIC,
     "_settrace_unmuting(prev) -> prev behind a C callable that first unmutes the thread."},
#endif
    {"seconds_per_tick", (PyCFunction)fp_line_seconds_per_tick, METH_NOARGS | METH_STATIC,
     "seconds_per_tick() -> float: seconds of one tick of the tick clock."},
    {NULL, NULL, 0, NULL},
};

/* enabled: whether the hooks count. */
static PyObject *
fp_line_get_enabled(fp_ltracer *self, FP_UNUSED void *closure)
{
    return PyBool_FromLong(self->enabled);
}

/* has_timer: whether an injected timer replaces the tick clock. */
static PyObject *
fp_line_get_has_timer(fp_ltracer *self, FP_UNUSED void *closure)
{
    return PyBool_FromLong(self->timer != NULL);
}

static PyGetSetDef fp_line_getset[] = {
    {"enabled", (getter)fp_line_get_enabled, NULL, "Whether the hooks count.", NULL},
    {"has_timer", (getter)fp_line_get_has_timer, NULL, "Whether a timer was injected.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fp_line_slots[] = {
    {Py_tp_new, (void *)fp_line_new},
    {Py_tp_dealloc, (void *)fp_line_dealloc},
    {Py_tp_traverse, (void *)fp_line_traverse},
    {Py_tp_clear, (void *)fp_line_clear},
    {Py_tp_methods, fp_line_methods},
    {Py_tp_getset, fp_line_getset},
#if !FP_PY312
    {Py_tp_call, (void *)fp_line_trace_call},
#endif
    {Py_tp_doc, (void *)"LineTracer(timer=None): hits and ticks per line of registered code "
                        "objects (fastprof.LineProfiler is the public face)."},
    {0, NULL},
};

static PyType_Spec fp_line_spec = {
    .name = "fastprof._fastprof.LineTracer",
    .basicsize = sizeof(fp_ltracer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = fp_line_slots,
};

/* Returns the line profiler's code-object extra index in the running interpreter, requesting
 * it on the interpreter's first import of the module (an index is the interpreter's, and a
 * module imported again there reuses it: the interpreter has few of them).  Returns it, or
 * -1 with an exception set. */
static Py_ssize_t
fp_line_extra_index(void)
{
    Py_ssize_t index = -1;
    PyObject *key = NULL, *value = NULL;
    PyObject *dict = PyInterpreterState_GetDict(PyInterpreterState_Get());
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the interpreter has no dict for fastprof's state");
        goto error;
    }
    key = PyUnicode_FromString("fastprof._fastprof.line_extra_index");
    if (key == NULL)
        goto error;
    value = PyDict_GetItemWithError(dict, key); /* borrowed */
    if (value != NULL) {
        index = PyLong_AsSsize_t(value);
        goto done;
    }
    if (PyErr_Occurred())
        goto error;
    index = FP_REQUEST_CODE_EXTRA(fp_line_map_free);
    if (index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "no code-object extra index left");
        goto error;
    }
    value = PyLong_FromSsize_t(index);
    if (value == NULL || PyDict_SetItem(dict, key, value) < 0) {
        Py_XDECREF(value);
        goto error;
    }
    Py_DECREF(value);
done:
    Py_DECREF(key);
    return index;
error:
    Py_XDECREF(key);
    return -1;
}

/* See common.h. */
int
fp_line_exec(PyObject *m)
{
    fp_module_state *st = fp_state(m);
    st->line_extra = fp_line_extra_index();
    if (st->line_extra < 0)
        return -1;
    if (fp_add_type(m, &st->line_tracer_type, &fp_line_spec, NULL) == NULL)
        return -1;
    return 0;
}
