/* profiler.c - the call profiler type, fastprof._fastprof.Profiler: its options, enable and
 * disable (with the hooks of hooks_monitoring.c or hooks_legacy.c), clear, and the raw export
 * of its tables that python/fastprof/profile.py turns into cProfile's and pstats' shapes. */
#include "fp_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

static double fp_profiler_unit(fp_profiler *p);

/* Frees every thread record and empties the thread cache.  Returns nothing. */
static void
fp_threads_free(fp_profiler *p)
{
    for (int32_t i = 0; i < p->nthreads; i++) {
        fp_thread *t = p->thread_at[i];
        PyMem_RawFree(t->stack);
        PyMem_RawFree(t->func_rec);
        PyMem_RawFree(t->edge_rec);
        Py_XDECREF(t->name);
        PyMem_RawFree(t);
    }
    p->nthreads = 0;
    PyMem_RawFree(p->thread_at);
    p->thread_at = NULL;
    p->capthread_at = 0;
    fp_map_free(&p->thread_map);
    p->generation++;
    fp_thread_cache_clear(p);
}

/* Drops every record (functions, edges, maps, threads).  Returns nothing. */
static void
fp_tables_clear(fp_profiler *p)
{
    fp_threads_free(p);
    for (int32_t i = 0; i < p->nfuncs; i++)
        Py_CLEAR(p->funcs[i].key);
    PyMem_RawFree(p->funcs);
    PyMem_RawFree(p->edges);
    PyMem_RawFree(p->nodes);
    p->funcs = NULL;
    p->edges = NULL;
    p->nodes = NULL;
    p->nfuncs = p->capfuncs = p->nedges = p->capedges = 0;
    p->nnodes = p->capnodes = p->ntree = 0;
    p->merged = 0;
    fp_index_free(&p->node_map);
    fp_index_free(&p->code_map);
    fp_index_free(&p->edge_map);
    fp_map_free(&p->builtin_map);
    fp_map_free(&p->root_map);
    memset(p->code_cache, 0, sizeof(p->code_cache));
    if (p->tl != NULL)
        fp_tl_clear(p->tl); /* its spans name the functions and threads just dropped */
}

/* Returns 0 when p may change state now, or -1 with a RuntimeError when called from code that
 * a hook is running (the profiler's own timer): that would pull the tables from under it. */
static int
fp_profiler_check_idle(fp_profiler *p, const char *what)
{
    if (p->busy == 0)
        return 0;
    PyErr_Format(PyExc_RuntimeError, "cannot %s the profiler from inside its own timer", what);
    return -1;
}

/* Reads a bool-like argument into *out.  Returns 0, or -1 with a TypeError naming it. */
static int
fp_arg_flag(PyObject *value, const char *name, int *out)
{
    if (value == NULL || value == Py_None)
        return 0;
    if (!PyBool_Check(value) && !PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be a bool, not %.80s", name,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    int v = PyObject_IsTrue(value);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Reads cProfile's subcalls= or builtins= into *out: as fp_arg_flag, but None is false, as
 * cProfile reads it (Profile(builtins=None) records no builtins there).  Returns 0, or -1
 * with a TypeError naming it. */
static int
fp_arg_cprofile_flag(PyObject *value, const char *name, int *out)
{
    if (value == Py_None) {
        *out = 0;
        return 0;
    }
    return fp_arg_flag(value, name, out);
}

/* Reads prune_call_sites and its old, inverted name strict (either may be NULL or None) into
 * *prune.  Returns 0, or -1 with a TypeError or a ValueError (the two contradict). */
static int
fp_arg_prune(PyObject *prune_call_sites, PyObject *strict, int *prune)
{
    int pr = 0, st = 1;
    if (fp_arg_flag(prune_call_sites, "prune_call_sites", &pr) < 0 ||
        fp_arg_flag(strict, "strict", &st) < 0)
        return -1;
    int given = prune_call_sites != NULL && prune_call_sites != Py_None;
    if (strict != NULL && strict != Py_None) {
        if (given && pr == st) {
            PyErr_SetString(PyExc_ValueError,
                            "strict contradicts prune_call_sites (strict=False is the old name "
                            "of prune_call_sites=True): give prune_call_sites alone");
            return -1;
        }
        pr = !st;
    }
    *prune = pr;
    return 0;
}

/* Reads tree_nodes (NULL: the default) into *cap.  Returns 0, or -1 with a TypeError or a
 * ValueError naming it. */
static int
fp_arg_tree_nodes(PyObject *value, int32_t *cap)
{
    if (value == NULL)
        return 0;
    if (PyBool_Check(value) || !PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "tree_nodes must be an int (the node cap, 0: no tree), not %.80s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 0 || v > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "tree_nodes must be between 0 and %d, not %R", INT32_MAX / 2,
                     value);
        return -1;
    }
    *cap = (int32_t)v;
    return 0;
}

#define FP_TREE_NODES_DEFAULT 1000000

/* Reads the timeline options: timeline (NULL or None: off; else the ring's size in spans),
 * timeline_min (seconds, NULL or None: 0), timeline_include and timeline_exclude (module
 * names) into *out (NULL when off).  Returns 0, or -1 with a TypeError or a ValueError naming
 * the argument. */
static int
fp_arg_timeline(PyObject *size, PyObject *min, PyObject *include, PyObject *exclude,
                fp_timeline **out)
{
    PyObject *inc = NULL, *exc = NULL;
    double min_s = 0.0;
    long long cap = 0;
    *out = NULL;
    if (size != NULL && size != Py_None) {
        if (PyBool_Check(size) || !PyLong_Check(size)) {
            PyErr_Format(PyExc_TypeError,
                         "timeline must be an int (the ring's size in spans) or None, not %.80s",
                         Py_TYPE(size)->tp_name);
            goto error;
        }
        int overflow = 0;
        cap = PyLong_AsLongLongAndOverflow(size, &overflow);
        if (cap == -1 && PyErr_Occurred())
            goto error;
        if (overflow || cap <= 0 || cap > ((long long)1 << 40)) {
            PyErr_Format(PyExc_ValueError,
                         "timeline must be a number of spans between 1 and 2**40, not %R", size);
            goto error;
        }
    }
    if (min != NULL && min != Py_None) {
        if (PyBool_Check(min) || (!PyFloat_Check(min) && !PyLong_Check(min))) {
            PyErr_Format(PyExc_TypeError, "timeline_min must be a number of seconds, not %.80s",
                         Py_TYPE(min)->tp_name);
            goto error;
        }
        min_s = PyFloat_AsDouble(min);
        if (min_s == -1.0 && PyErr_Occurred())
            goto error;
        if (!(min_s >= 0.0 && min_s < 1e9)) {
            PyErr_Format(PyExc_ValueError,
                         "timeline_min must be a finite number of seconds >= 0, not %R", min);
            goto error;
        }
    }
    if (fp_tl_modules_arg(include, "timeline_include", &inc) < 0 ||
        fp_tl_modules_arg(exclude, "timeline_exclude", &exc) < 0)
        goto error;
    if (cap == 0) {
        int given = (min != NULL && min != Py_None) || PyTuple_GET_SIZE(inc) > 0 ||
                    PyTuple_GET_SIZE(exc) > 0;
        if (given) {
            PyErr_SetString(PyExc_ValueError, "timeline_min, timeline_include and "
                                              "timeline_exclude need timeline (the ring's size)");
            goto error;
        }
    } else if ((*out = fp_tl_new(cap, min_s, inc, exc)) == NULL) {
        goto error;
    }
    Py_DECREF(inc);
    Py_DECREF(exc);
    return 0;
error:
    Py_XDECREF(inc);
    Py_XDECREF(exc);
    return -1;
}

/* Profiler.__init__(timer=None, timeunit=0.0, subcalls=True, builtins=True, *, clock="wall",
 * threads=True, strict=None, prune_call_sites=False, tree_nodes=1000000).  Returns 0, or -1
 * with an exception set. */
static int
fp_profiler_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    fp_profiler *p = (fp_profiler *)self;
    static char *kwlist[] = {
        "timer",        "timeunit",         "subcalls",         "builtins",   "clock",
        "threads",      "strict",           "prune_call_sites", "tree_nodes", "timeline",
        "timeline_min", "timeline_include", "timeline_exclude", NULL};
    PyObject *timer = Py_None, *timeunit = NULL, *subcalls = NULL, *builtins = NULL;
    PyObject *threads = NULL, *strict = NULL, *prune = NULL, *tree_nodes = NULL;
    PyObject *tl_size = NULL, *tl_min = NULL, *tl_include = NULL, *tl_exclude = NULL;
    fp_timeline *tl = NULL;
    const char *clock = "wall";
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOOO$sOOOOOOOO:Profiler", kwlist, &timer,
                                     &timeunit, &subcalls, &builtins, &clock, &threads, &strict,
                                     &prune, &tree_nodes, &tl_size, &tl_min, &tl_include,
                                     &tl_exclude))
        return -1;
    if (p->enabled) {
        PyErr_SetString(PyExc_RuntimeError, "cannot re-initialise an enabled profiler");
        return -1;
    }
    if (fp_profiler_check_idle(p, "re-initialise") < 0)
        return -1;
    int sub = 1, bi = 1, th = 1, pr = 0;
    int32_t cap = FP_TREE_NODES_DEFAULT;
    if (fp_arg_cprofile_flag(subcalls, "subcalls", &sub) < 0 ||
        fp_arg_cprofile_flag(builtins, "builtins", &bi) < 0 ||
        fp_arg_flag(threads, "threads", &th) < 0 || fp_arg_prune(prune, strict, &pr) < 0 ||
        fp_arg_tree_nodes(tree_nodes, &cap) < 0)
        return -1;
    double unit = 0.0;
    if (timeunit != NULL && timeunit != Py_None) {
        if (!PyFloat_Check(timeunit) && !PyLong_Check(timeunit)) {
            PyErr_Format(PyExc_TypeError, "timeunit must be a number of seconds, not %.80s",
                         Py_TYPE(timeunit)->tp_name);
            return -1;
        }
        unit = PyFloat_AsDouble(timeunit);
        if (unit == -1.0 && PyErr_Occurred())
            return -1;
        if (!(unit >= 0.0)) {
            PyErr_SetString(PyExc_ValueError,
                            "timeunit must be >= 0 (0: the timer returns seconds)");
            return -1;
        }
    }
    int kind;
    if (strcmp(clock, "wall") == 0)
        kind = FP_CLOCK_WALL;
    else if (strcmp(clock, "cpu") == 0)
        kind = FP_CLOCK_CPU;
    else if (strcmp(clock, "process_cpu") == 0)
        kind = FP_CLOCK_PROCESS_CPU;
    else {
        PyErr_Format(PyExc_ValueError, "clock must be 'wall', 'cpu' or 'process_cpu', not '%s'",
                     clock);
        return -1;
    }
    if (timer != Py_None) {
        if (!PyCallable_Check(timer)) {
            PyErr_Format(PyExc_TypeError, "timer must be a callable returning the time, not %.80s",
                         Py_TYPE(timer)->tp_name);
            return -1;
        }
        if (kind != FP_CLOCK_WALL) {
            PyErr_SetString(PyExc_ValueError, "give either timer or clock, not both");
            return -1;
        }
        kind = FP_CLOCK_USER;
    }
    if (fp_arg_timeline(tl_size, tl_min, tl_include, tl_exclude, &tl) < 0)
        return -1;
    fp_tables_clear(p);
    fp_tl_free(p->tl);
    p->tl = tl;
    Py_CLEAR(p->error);
    Py_XSETREF(p->timer, timer == Py_None ? NULL : Py_NewRef(timer));
    p->timeunit = unit;
    p->clock = kind;
    p->tsc = kind == FP_CLOCK_WALL && fp_clock_use_tsc;
    p->subcalls = sub;
    p->builtins = bi;
    p->threads = th;
    p->prune = pr;
    p->tree_cap = cap;
    p->last_user = 0;
    return 0;
}

/* tp_new: an empty, disabled profiler with the defaults.  Returns it or NULL. */
static PyObject *
fp_profiler_new(PyTypeObject *type, FP_UNUSED PyObject *args, FP_UNUSED PyObject *kwds)
{
    fp_profiler *p = (fp_profiler *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->subcalls = p->builtins = p->threads = 1;
    p->tree_cap = FP_TREE_NODES_DEFAULT;
    p->clock = FP_CLOCK_WALL;
    p->tsc = fp_clock_use_tsc;
    p->tool_id = -1;
    fp_thread_cache_clear(p);
    return (PyObject *)p;
}

/* Removes the hooks, flushes open frames and reports a sticky error.  Returns 0, or -1 with
 * an exception set (the hooks are gone either way). */
static int
fp_profiler_stop(fp_profiler *p)
{
    if (!p->enabled)
        return 0;
    /* The open frames end now, not after the hooks' removal (on 3.12+ the interpreter takes
     * the instrumentation out of every code object: tens of microseconds that no frame
     * spent).  A user timer is Python code: it is called once no hook can see it. */
    fp_tick now = p->clock != FP_CLOCK_USER ? fp_now(p) : 0;
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    int rc = fp_hooks_remove(p);
    if (rc < 0) /* set aside (a KeyboardInterrupt, say): the user timer is Python code */
        PyErr_Fetch(&et, &ev, &etb);
    /* A user timer that GC's clear step dropped is never called (see fp_profiler_release). */
    if (p->error == NULL && (p->clock != FP_CLOCK_USER || p->timer != NULL))
        fp_flush_all(p, p->clock != FP_CLOCK_USER ? now : fp_now(p));
    p->enabled = 0;
    fp_thread_cache_clear(p);
    if (rc < 0) {
        PyErr_Restore(et, ev, etb);
        return -1;
    }
    return fp_sticky_raise(&p->error,
                           "the profiler stopped recording: a hook met an error (see __cause__)");
}

/* Stops p from a destructor (tp_dealloc, or GC's tp_clear): removes the hooks without
 * charging open frames (nobody can read them any more, and the timer may be gone), and
 * reports a failed removal or a hook's sticky error as unraisable against p's type, never
 * against p, whose refcount may be 0 (reporting it would resurrect it and free it twice).
 * Leaves the current exception as it was.  Returns nothing. */
static void
fp_profiler_release(fp_profiler *p)
{
    if (!p->enabled)
        return;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *where = (PyObject *)Py_TYPE(p);
    if (fp_hooks_remove(p) < 0)
        PyErr_WriteUnraisable(where);
    p->enabled = 0;
    fp_thread_cache_clear(p);
    if (fp_sticky_raise(&p->error, "a profiler freed while enabled had stopped recording: a "
                                   "hook met an error (see __cause__)") < 0)
        PyErr_WriteUnraisable(where);
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* tp_dealloc: disables p first (hooks removed, errors reported as unraisable), then frees
 * its records.  Returns nothing. */
static void
fp_profiler_dealloc(PyObject *self)
{
    fp_profiler *p = (fp_profiler *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (p->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    fp_profiler_release(p);
    fp_tables_clear(p);
    fp_tl_free(p->tl);
    p->tl = NULL;
    Py_CLEAR(p->timer);
    Py_CLEAR(p->error);
    Py_CLEAR(p->thread_prev);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* GC: the timer and the sticky error may reference anything.  Returns the visitor's result. */
static int
fp_profiler_traverse(PyObject *self, visitproc visit, void *arg)
{
    fp_profiler *p = (fp_profiler *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(p->timer);
    Py_VISIT(p->error);
    Py_VISIT(p->thread_prev);
    return 0;
}

/* tp_clear: disables p, then drops the references GC may need to break.  Returns 0. */
static int
fp_profiler_tp_clear(PyObject *self)
{
    fp_profiler *p = (fp_profiler *)self;
    fp_profiler_release(p); /* disable first: the hooks must not call a dropped timer */
    Py_CLEAR(p->timer);
    Py_CLEAR(p->error);
    Py_CLEAR(p->thread_prev);
    return 0;
}

/* Checks that p may take the hooks (fp_hooks_check_free; fastprof.Profile's _nests is
 * false but for a session's profiler, which joins the others, as the core's own Profiler
 * without the attribute does), then, unless it nests, runs a subclass's
 * _before_enable() (fastprof.Profile's: the running threads' names): Python code, run only
 * where no other fastprof profiler of this thread would record it.  Returns 0; 1 when p is
 * to stay off (a nested session below 3.12, warned); or -1 with an exception set. */
static int
fp_profiler_before_enable(PyObject *self)
{
    PyObject *n = PyObject_GetAttrString(self, "_nests");
    int nests = 1; /* the core's own Profiler, without fastprof.Profile's rule: they share */
    if (n == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    } else {
        nests = PyObject_IsTrue(n);
        Py_DECREF(n);
        if (nests < 0)
            return -1;
        nests *= 2; /* a session's profiler (see fp_hooks_check_free) */
    }
    int taken = fp_hooks_check_free((fp_profiler *)self, nests);
    if (taken != 0)
        return taken;
    if (nests)
        return 0;
    PyObject *hook = PyObject_GetAttrString(self, "_before_enable");
    if (hook == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *r = PyObject_CallNoArgs(hook);
    Py_DECREF(hook);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* enable(subcalls=None, builtins=None): starts profiling; a second call is a no-op (recorded
 * as one C call, as cProfile records its own).  Returns None, or NULL with ValueError when
 * the hook is held by another profiler. */
static PyObject *
fp_profiler_enable(PyObject *self, PyObject *args, PyObject *kwds)
{
    fp_profiler *p = (fp_profiler *)self;
    static char *kwlist[] = {"subcalls", "builtins", NULL};
    PyObject *subcalls = NULL, *builtins = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:enable", kwlist, &subcalls, &builtins))
        return NULL;
    int sub = p->subcalls, bi = p->builtins;
    if (fp_arg_cprofile_flag(subcalls, "subcalls", &sub) < 0 ||
        fp_arg_cprofile_flag(builtins, "builtins", &bi) < 0)
        return NULL;
    if (p->enabled)
        Py_RETURN_NONE;
    if (fp_profiler_check_idle(p, "enable") < 0)
        return NULL;
    int before = fp_profiler_before_enable(self);
    if (before < 0)
        return NULL;
    if (before > 0 || p->enabled) /* it stays off (see above), or the hook enabled it */
        Py_RETURN_NONE;
    p->subcalls = sub;
    p->builtins = bi;
    p->tree = p->tree_cap > 0 && sub; /* no callers recorded: no tree either */
    if (p->tl != NULL) {
        /* a call of d ticks lasts d * unit seconds: kept when that is at least min_seconds */
        double ticks = ceil(p->tl->min_seconds / fp_profiler_unit(p) * (1.0 - 1e-12));
        if (fp_tl_arm(p->tl, ticks < 9e18 ? (fp_tick)ticks : INT64_MAX, p->nfuncs) < 0)
            return NULL;
    }
    p->owner = PyThreadState_Get();
    p->owner_tsid = PyThreadState_GetID(p->owner);
    fp_thread_cache_clear(p);
    Py_CLEAR(p->error);
    PyTypeObject *hook_type = NULL;
#if FP_PY312
    PyObject *m = PyType_GetModuleByDef(Py_TYPE(self), &fp_module_def);
    if (m == NULL)
        return NULL;
    hook_type = fp_state(m)->hook_type;
#endif
    p->enabled = 1;
    if (fp_hooks_install(p, hook_type) < 0) {
        p->enabled = 0;
        return NULL;
    }
    Py_RETURN_NONE;
}

/* disable(): stops profiling, charging open frames up to now; below 3.12 first warns
 * (RuntimeWarning) when another tool took the profile hook meanwhile.  Returns None, or NULL
 * when a hook had met an error (RuntimeError with that error as its cause), the hooks could
 * not be removed cleanly, or the warning was turned into an error (disabled all the same). */
static PyObject *
fp_profiler_disable(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    if (fp_profiler_check_idle(p, "disable") < 0)
        return NULL;
    int rc = 0;
#if !FP_PY312
    rc = fp_hooks_check(p); /* a warning turned into an error: still stop, then raise it */
#endif
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (fp_profiler_stop(p) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    PyErr_Restore(type, value, tb);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* clear(): forgets every record.  Returns None. */
static PyObject *
fp_profiler_clear(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    if (fp_profiler_check_idle(p, "clear") < 0)
        return NULL;
    fp_tables_clear(p);
    Py_RETURN_NONE;
}

/* Returns the seconds per tick of the profiler's clock. */
static double
fp_profiler_unit(fp_profiler *p)
{
    switch (p->clock) {
    case FP_CLOCK_WALL:
        return fp_clock_seconds_per_tick();
    case FP_CLOCK_USER:
        return p->timeunit > 0.0 ? p->timeunit : 1e-9;
    default:
        return 1e-9;
    }
}

/* See fp_profile.h. */
PyObject *
fp_read_cleared(void)
{
    PyErr_SetString(PyExc_RuntimeError,
                    "the profiler was cleared while it was being read (by a finalizer?)");
    return NULL;
}

/* _raw() -> (seconds_per_tick, funcs, edges): funcs a list of (key, ncalls, nrec, tt, it),
 * edges a list of (caller, callee, ncalls, nrec, tt, it), times in ticks; below 3.12, read
 * while enabled, it first warns when another tool took the profile hook.  Returns the tuple
 * or NULL with an exception set. */
static PyObject *
fp_profiler_raw(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    PyObject *funcs = NULL, *edges = NULL;
    fp_edge *derived = NULL;
    int32_t nderived = 0;
#if !FP_PY312
    if (fp_hooks_check(p) < 0) /* read while enabled: say when nothing is recorded any more */
        goto error;
#endif
    /* Making a row can run a collection whose finalizers' Python code this profiler records
     * (an enabled profiler read without quiet): the n functions there now are read, and the
     * edges among them, taken before any object is made. */
    int32_t n = p->nfuncs;
    if (fp_tree_edges(p, &derived, &nderived) < 0)
        goto error;
    funcs = PyList_New(n);
    if (funcs == NULL)
        goto error;
    for (int32_t i = 0; i < n; i++) {
        if (i >= p->nfuncs) {
            fp_read_cleared();
            goto error;
        }
        fp_func *f = &p->funcs[i];
        /* held: a clear() run by the row's allocation would drop the table's reference */
        PyObject *key = Py_NewRef(f->key);
        PyObject *row = Py_BuildValue("(OLLLL)", key, (long long)f->c.ncalls, (long long)f->c.nrec,
                                      (long long)f->c.tt, (long long)f->c.it);
        Py_DECREF(key);
        if (row == NULL)
            goto error;
        PyList_SET_ITEM(funcs, i, row);
    }
    edges = PyList_New(nderived);
    if (edges == NULL)
        goto error;
    for (int32_t i = 0; i < nderived; i++) {
        fp_edge *e = &derived[i];
        PyObject *row = Py_BuildValue("(iiLLLL)", e->caller, e->callee, (long long)e->c.ncalls,
                                      (long long)e->c.nrec, (long long)e->c.tt, (long long)e->c.it);
        if (row == NULL)
            goto error;
        PyList_SET_ITEM(edges, i, row);
    }
    PyMem_RawFree(derived);
    return Py_BuildValue("(dNN)", fp_profiler_unit(p), funcs, edges);
error:
    PyMem_RawFree(derived);
    Py_XDECREF(funcs);
    Py_XDECREF(edges);
    return NULL;
}

/* _raw_tree() -> (seconds_per_tick, nodes, threads, merged): the calling-context tree in the
 * ticks of _raw(), whose function list the nodes index; nodes a list of (parent, func, thread,
 * ncalls, tt, it), a parent before its children (-1: a top-level frame), threads the idents
 * of the threads in first-seen order, merged the completed calls that got no node (the cap was
 * reached).  Returns the tuple or NULL with an exception set. */
static PyObject *
fp_profiler_raw_tree(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    return fp_tree_raw(p, fp_profiler_unit(p));
}

/* _tree_snapshot() -> (seconds_per_tick, threads, merged, block): the tree of _raw_tree() as one
 * bytes object of native int64s, for fastprof.tree to read a node's children when asked: for the
 * n nodes (numbered as _raw_tree() numbers them) n records (slot of the parent, func, ncalls,
 * tt, own), where the slot of a top-level frame's parent is n + its thread's index and own past
 * the node cap is tt less the children's tt; then n + len(threads) + 1 offsets into the last
 * part, where slot s's children are [first[s], first[s + 1]); then the n children's indexes, of
 * each slot in the order of their index.  Returns the tuple or NULL with an exception set. */
static PyObject *
fp_profiler_tree_snapshot(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    return fp_tree_snapshot(p, fp_profiler_unit(p));
}

/* _tree_json(keys, drop) -> ([(ident, text), ...], merged): the tree file's node records of
 * each thread (see fp_tree_json).  Returns the tuple or NULL with an exception set. */
static PyObject *
fp_profiler_tree_json(PyObject *self, PyObject *args)
{
    fp_profiler *p = (fp_profiler *)self;
    PyObject *keys, *drop;
    if (!PyArg_ParseTuple(args, "OO:_tree_json", &keys, &drop))
        return NULL;
    return fp_tree_json(p, fp_profiler_unit(p), keys, drop);
}

/* The calls p's timeline (not NULL) left out since the last clear: *filtered, those of
 * functions the module filter leaves out, and *too_short, the other calls not kept.  Every
 * completed call of a function passed fp_tl_record once, so the functions' call counts give
 * both.  Returns nothing. */
static void
fp_profiler_tl_counts(const fp_profiler *p, int64_t *filtered, int64_t *too_short)
{
    const fp_timeline *tl = p->tl;
    int64_t left_out = 0, kept_calls = 0;
    for (int32_t i = 0; i < p->nfuncs && i < tl->nkeep; i++) {
        if (tl->keep[i])
            kept_calls += p->funcs[i].c.ncalls;
        else
            left_out += p->funcs[i].c.ncalls;
    }
    *filtered = left_out;
    *too_short = kept_calls - tl->n;
}

/* _raw_timeline(spans=True) -> (seconds_per_tick, spans, threads, counts) or None without a
 * timeline: spans a list of (t0, t1, func, thread, depth) in the ticks and function indices of
 * _raw(), oldest first (empty when spans is false: _timeline_records reads them then);
 * threads a list of (ident, native_id) by thread index; counts a dict of capacity, dropped,
 * filtered and too_short.  Returns it, or NULL with an exception set. */
static PyObject *
fp_profiler_raw_timeline(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"spans", NULL};
    fp_profiler *p = (fp_profiler *)self;
    PyObject *spans = NULL, *threads = NULL, *result = NULL;
    int64_t filtered, too_short;
    int with_spans = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:_raw_timeline", kwlist, &with_spans))
        return NULL;
    if (p->tl == NULL)
        Py_RETURN_NONE;
    fp_profiler_tl_counts(p, &filtered, &too_short);
    spans = with_spans ? fp_tl_spans(p->tl) : PyList_New(0);
    int32_t n = p->nthreads;
    threads = PyList_New(n);
    if (spans == NULL || threads == NULL)
        goto error;
    for (int32_t i = 0; i < n; i++) {
        if (i >= p->nthreads) { /* a finalizer cleared the profiler (see fp_profiler_raw) */
            fp_read_cleared();
            goto error;
        }
        PyObject *row = Py_BuildValue("(kk)", p->thread_at[i]->ident, p->thread_at[i]->native_id);
        if (row == NULL)
            goto error;
        PyList_SET_ITEM(threads, i, row);
    }
    int64_t dropped = p->tl->n > p->tl->cap ? p->tl->n - p->tl->cap : 0;
    result = Py_BuildValue("(dOO{sLsLsLsL})", fp_profiler_unit(p), spans, threads, "capacity",
                           (long long)p->tl->cap, "dropped", (long long)dropped, "filtered",
                           (long long)filtered, "too_short", (long long)too_short);
error:
    Py_XDECREF(spans);
    Py_XDECREF(threads);
    return result;
}

/* _timeline_records(m0, k0, scale) -> bytes or None without a timeline: the spans as
 * fp_tl_records reads them (timeline.h).  Returns it, or NULL with an exception set. */
static PyObject *
fp_profiler_timeline_records(PyObject *self, PyObject *args)
{
    fp_profiler *p = (fp_profiler *)self;
    long long m0, k0;
    double scale;
    if (!PyArg_ParseTuple(args, "LLd:_timeline_records", &m0, &k0, &scale))
        return NULL;
    if (p->tl == NULL)
        Py_RETURN_NONE;
    return fp_tl_records(p->tl, m0, k0, scale);
}

/* timeline: the timeline's size in spans, None without one.  Returns an int or None. */
static PyObject *
fp_profiler_get_timeline(PyObject *self, FP_UNUSED void *closure)
{
    fp_profiler *p = (fp_profiler *)self;
    if (p->tl == NULL)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)p->tl->cap);
}

/* tree_nodes: the node cap (0: no tree).  Returns an int. */
static PyObject *
fp_profiler_get_tree_nodes(PyObject *self, FP_UNUSED void *closure)
{
    return PyLong_FromLong(((fp_profiler *)self)->tree_cap);
}

/* enabled: whether the hooks are installed.  Returns a bool. */
static PyObject *
fp_profiler_get_enabled(PyObject *self, FP_UNUSED void *closure)
{
    return PyBool_FromLong(((fp_profiler *)self)->enabled);
}

/* clock: the clock's name.  Returns a str. */
static PyObject *
fp_profiler_get_clock(PyObject *self, FP_UNUSED void *closure)
{
    static const char *names[] = {"wall", "cpu", "process_cpu", "user"};
    return PyUnicode_FromString(names[((fp_profiler *)self)->clock]);
}

/* tool_id: the sys.monitoring tool id in use (3.12+ while enabled), else None. */
static PyObject *
fp_profiler_get_tool_id(PyObject *self, FP_UNUSED void *closure)
{
    fp_profiler *p = (fp_profiler *)self;
    if (p->tool_id < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(p->tool_id);
}

/* _raw_thread_names() -> a list, by thread index, of (ident, native_id, name): the name threading
 * gave each thread profiled, read when the thread was first seen after threading registered
 * it (None when it never was).  Returns it, or NULL with an exception set. */
static PyObject *
fp_profiler_thread_names(PyObject *self, FP_UNUSED PyObject *unused)
{
    fp_profiler *p = (fp_profiler *)self;
    int32_t n = p->nthreads;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        if (i >= p->nthreads) { /* a finalizer cleared the profiler (see fp_profiler_raw) */
            Py_DECREF(out);
            return fp_read_cleared();
        }
        const fp_thread *t = p->thread_at[i];
        /* held: a clear() run by the row's allocation would free t and its name */
        PyObject *name = Py_NewRef(t->name != NULL ? t->name : Py_None);
        PyObject *row = Py_BuildValue("(kkO)", t->ident, t->native_id, name);
        Py_DECREF(name);
        if (row == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyMethodDef fp_profiler_methods[] = {
    {"enable", (PyCFunction)(void (*)(void))fp_profiler_enable, METH_VARARGS | METH_KEYWORDS,
     "enable($self, /, subcalls=None, builtins=None)\n--\n\nStart collecting profiling "
     "information."},
    {"disable", fp_profiler_disable, METH_NOARGS,
     "disable($self, /)\n--\n\nStop collecting profiling information."},
    {"clear", fp_profiler_clear, METH_NOARGS,
     "clear($self, /)\n--\n\nClear all profiling information collected so far."},
    {"_raw", fp_profiler_raw, METH_NOARGS,
     "_raw() -> (seconds_per_tick, funcs, edges): the tables in ticks."},
    {"_raw_tree", fp_profiler_raw_tree, METH_NOARGS,
     "_raw_tree() -> (seconds_per_tick, nodes, threads, merged): the calling-context tree in "
     "ticks."},
    {"_tree_snapshot", fp_profiler_tree_snapshot, METH_NOARGS,
     "_tree_snapshot() -> (seconds_per_tick, threads, merged, block): the calling-context tree "
     "as int64 records, offsets and children."},
    {"_tree_json", fp_profiler_tree_json, METH_VARARGS,
     "_tree_json(keys, drop) -> ([(ident, text)], merged): each thread's node records as the "
     "tree file holds them."},
    {"_raw_thread_names", fp_profiler_thread_names, METH_NOARGS,
     "_raw_thread_names() -> [(ident, native_id, name or None)] by thread index."},
    {"_raw_timeline", (PyCFunction)(void (*)(void))fp_profiler_raw_timeline,
     METH_VARARGS | METH_KEYWORDS,
     "_raw_timeline(spans=True) -> (seconds_per_tick, spans, threads, counts) or None: the "
     "timeline in ticks."},
    {"_timeline_records", fp_profiler_timeline_records, METH_VARARGS,
     "_timeline_records(m0, k0, scale) -> bytes or None: the spans sorted, on the nanosecond "
     "axis, as 32-byte records."},
    {NULL, NULL, 0, NULL},
};

/* The _busy getter.  Returns True while one of p's hooks runs Python code (a user timer, a
 * builtin's name), when p cannot be disabled, else False. */
static PyObject *
fp_profiler_get_busy(PyObject *self, FP_UNUSED void *closure)
{
    return PyBool_FromLong(((fp_profiler *)self)->busy != 0);
}

static PyGetSetDef fp_profiler_getset[] = {
    {"_busy", fp_profiler_get_busy, NULL,
     "Whether a hook is running Python code now (the profiler cannot be disabled then).", NULL},
    {"enabled", fp_profiler_get_enabled, NULL, "Whether the profiler is collecting.", NULL},
    {"clock", fp_profiler_get_clock, NULL, "The clock: wall, cpu, process_cpu or user.", NULL},
    {"tool_id", fp_profiler_get_tool_id, NULL, "The sys.monitoring tool id in use, or None.", NULL},
    {"tree_nodes", fp_profiler_get_tree_nodes, NULL,
     "The calling-context tree's node cap (0: no tree).", NULL},
    {"timeline", fp_profiler_get_timeline, NULL,
     "The timeline's size in spans, or None without a timeline.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef fp_profiler_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(fp_profiler, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot fp_profiler_slots[] = {
    {Py_tp_doc, "Profiler(timer=None, timeunit=0.0, subcalls=True, builtins=True, *, "
                "clock='wall', threads=True, strict=None, prune_call_sites=False, "
                "tree_nodes=1000000, timeline=None, timeline_min=None, timeline_include=None, "
                "timeline_exclude=None)\n--\n\n"
                "The call profiler's collector (fastprof.Profile builds on it)."},
    {Py_tp_new, fp_profiler_new},
    {Py_tp_init, fp_profiler_init},
    {Py_tp_dealloc, fp_profiler_dealloc},
    {Py_tp_traverse, fp_profiler_traverse},
    {Py_tp_clear, fp_profiler_tp_clear},
    {Py_tp_methods, fp_profiler_methods},
    {Py_tp_getset, fp_profiler_getset},
    {Py_tp_members, fp_profiler_members},
    {0, NULL},
};

static PyType_Spec fp_profiler_spec = {
    .name = "fastprof._fastprof.Profiler",
    .basicsize = sizeof(fp_profiler),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = fp_profiler_slots,
};

/* See common.h. */
int
fp_profile_exec(PyObject *m)
{
    fp_module_state *st = fp_state(m);
    if (fp_add_type(m, &st->profiler_type, &fp_profiler_spec, NULL) == NULL)
        return -1;
    if (fp_session_exec(m) < 0) /* session_type and guarded_type */
        return -1;
#if FP_PY312
    if (fp_add_type(m, &st->hook_type, &fp_hook_spec, NULL) == NULL)
        return -1;
    if (fp_mon_exec(m) < 0) /* mon_tool: the shared tool id */
        return -1;
#endif
    return 0;
}
