/* tables.c - the call profiler's tables and the slow paths of its hot path: the map, function
 * and edge records, per-thread records, the non-wall clocks and the sticky error. */
#include "fp_profile.h"

#include <math.h>
#include <string.h>

/* ---- map ------------------------------------------------------------------------------- */

/* Inserts without growing; the map has a free slot.  Returns nothing. */
static void
fp_map_insert(fp_map *m, uint64_t key, int32_t val)
{
    uint32_t i = fp_map_slot(m, key);
    while (m->keys[i] != 0 && m->keys[i] != key)
        i = (i + 1) & m->mask;
    if (m->keys[i] == 0)
        m->used++;
    m->keys[i] = key;
    m->vals[i] = val;
}

/* See fp_profile.h. */
int
fp_map_put(fp_map *m, uint64_t key, int32_t val)
{
    uint32_t cap = m->keys ? m->mask + 1 : 0;
    if ((m->used + 1) * 2 > cap) {
        uint32_t ncap = cap ? cap * 2 : 64;
        fp_map grown = {0};
        grown.keys = PyMem_RawCalloc(ncap, sizeof(uint64_t));
        grown.vals = PyMem_RawMalloc(ncap * sizeof(int32_t));
        if (grown.keys == NULL || grown.vals == NULL) {
            PyMem_RawFree(grown.keys);
            PyMem_RawFree(grown.vals);
            return -1;
        }
        grown.mask = ncap - 1;
        grown.shift = 64 - (uint32_t)__builtin_ctz(ncap);
        for (uint32_t i = 0; i < cap; i++)
            if (m->keys[i] != 0)
                fp_map_insert(&grown, m->keys[i], m->vals[i]);
        fp_map_free(m);
        *m = grown;
    }
    fp_map_insert(m, key, val);
    return 0;
}

/* See fp_profile.h. */
void
fp_map_free(fp_map *m)
{
    PyMem_RawFree(m->keys);
    PyMem_RawFree(m->vals);
    memset(m, 0, sizeof(*m));
}

/* ---- index map -------------------------------------------------------------------------- */

/* Puts idx + 1 in the first empty slot from key's home; the map has one.  Returns nothing. */
static void
fp_index_insert(fp_index_map *m, uint64_t key, int32_t idx)
{
    uint32_t i = fp_index_slot(m, key);
    while (m->slots[i] != 0)
        i = (i + 1) & m->mask;
    m->slots[i] = idx + 1;
    m->used++;
}

/* See fp_profile.h. */
int
fp_index_put(const fp_profiler *p, fp_index_map *m, uint64_t key, int32_t idx,
             fp_index_key_fn key_of)
{
    uint32_t cap = m->slots ? m->mask + 1 : 0;
    if ((m->used + 1) * 2 > cap) {
        uint32_t ncap = cap ? cap * 2 : 32;
        fp_index_map grown = {0};
        grown.slots = PyMem_RawCalloc(ncap, sizeof(int32_t));
        if (grown.slots == NULL)
            return -1;
        grown.mask = ncap - 1;
        grown.shift = 64 - (uint32_t)__builtin_ctz(ncap);
        for (uint32_t i = 0; i < cap; i++)
            if (m->slots[i] != 0)
                fp_index_insert(&grown, key_of(p, m->slots[i] - 1), m->slots[i] - 1);
        fp_index_free(m);
        *m = grown;
    }
    fp_index_insert(m, key, idx);
    return 0;
}

/* See fp_profile.h. */
void
fp_index_free(fp_index_map *m)
{
    PyMem_RawFree(m->slots);
    memset(m, 0, sizeof(*m));
}

/* The edge map's key of edge ei.  Returns it. */
static uint64_t
fp_edge_key_of(const fp_profiler *p, int32_t ei)
{
    return FP_EDGE_KEY(p->edges[ei].caller, p->edges[ei].callee);
}

/* The code map's key of function fi (a code object's).  Returns it. */
static uint64_t
fp_code_key_of(const fp_profiler *p, int32_t fi)
{
    return (uint64_t)(uintptr_t)p->funcs[fi].key;
}

/* ---- sticky error ---------------------------------------------------------------------- */

/* See fp_profile.h. */
void
fp_set_sticky(fp_profiler *p)
{
    fp_sticky_set(&p->error);
    /* Stop recording: from now on the hooks find no thread record. */
    fp_thread_cache_clear(p);
}

/* ---- clocks ---------------------------------------------------------------------------- */

/* See fp_profile.h. */
fp_tick
fp_now_slow(fp_profiler *p)
{
    switch (p->clock) {
    case FP_CLOCK_CPU:
        return fp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    case FP_CLOCK_PROCESS_CPU:
        return fp_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    case FP_CLOCK_USER:
        break;
    default:
        return fp_clock_ticks();
    }
    if (p->error != NULL)
        return p->last_user;
    p->busy++;
    PyObject *o = PyObject_CallNoArgs(p->timer);
    p->busy--;
    fp_tick t = p->last_user;
    if (o == NULL)
        goto error;
    if (p->timeunit > 0.0 && PyLong_Check(o)) {
        t = PyLong_AsLongLong(o);
    } else {
        /* In ticks: integer units, or float seconds in ns.  NaN, inf and what no fp_tick
         * holds are an error, never a cast (that would be undefined). */
        double d = PyFloat_AsDouble(o);
        double ticks = p->timeunit > 0.0 ? d : floor(d * 1e9);
        if (!PyErr_Occurred() && !(ticks > -9.2e18 && ticks < 9.2e18))
            PyErr_Format(PyExc_ValueError,
                         "the timer returned %R, not a finite time that fits in 64-bit %s", o,
                         p->timeunit > 0.0 ? "ticks" : "nanoseconds");
        else
            t = (fp_tick)ticks;
    }
    Py_DECREF(o);
    if (PyErr_Occurred())
        goto error;
    p->last_user = t;
    return t;
error:
    /* As cProfile: the timer's error goes to sys.unraisablehook (the hook that read it is not
     * a place to raise) and the reading counts as the last good one; recording goes on. */
    p->busy++;
    PyErr_WriteUnraisable(p->timer);
    p->busy--;
    return p->last_user;
}

/* ---- functions and edges ------------------------------------------------------------- */

/* Appends a function record owning key.  Returns its index, or -1 (sticky set; key released). */
static int32_t
fp_func_new(fp_profiler *p, PyObject *key)
{
    if (p->nfuncs == p->capfuncs) {
        int32_t ncap = p->capfuncs ? p->capfuncs * 2 : 16;
        fp_func *grown = PyMem_RawRealloc(p->funcs, (size_t)ncap * sizeof(fp_func));
        if (grown == NULL) {
            Py_DECREF(key);
            fp_set_sticky(p);
            return -1;
        }
        p->funcs = grown;
        p->capfuncs = ncap;
    }
    fp_func *f = &p->funcs[p->nfuncs];
    memset(f, 0, sizeof(*f));
    f->key = key;
    f->last_from = -1;
    return p->nfuncs++;
}

/* See fp_profile.h. */
int
fp_tl_func_added(fp_profiler *p, int32_t fi, PyObject *code, PyObject *callable, PyObject *self_arg)
{
    fp_timeline *tl = p->tl;
    PyObject *module = NULL;
    int rc;
    if (PyTuple_GET_SIZE(tl->include) > 0 || PyTuple_GET_SIZE(tl->exclude) > 0) {
        p->busy++; /* a type's __module__ could run Python code */
        module = code != NULL ? fp_tl_code_module(code) : fp_tl_builtin_module(callable, self_arg);
        p->busy--;
    }
    rc = fp_tl_decide(tl, fi, module);
    Py_XDECREF(module);
    return rc;
}

/* See fp_profile.h. */
int32_t
fp_func_for_code_slow(fp_profiler *p, PyObject *code)
{
    /* The code map's records hold their code objects, so an address found there is still
     * that code object's. */
    const fp_index_map *m = &p->code_map;
    if (m->slots != NULL) {
        for (uint32_t i = fp_index_slot(m, (uint64_t)(uintptr_t)code); m->slots[i] != 0;
             i = (i + 1) & m->mask)
            if (p->funcs[m->slots[i] - 1].key == code)
                return m->slots[i] - 1;
    }
    int32_t fi = fp_func_new(p, Py_NewRef(code));
    if (fi < 0)
        return -1;
    if (fp_index_put(p, &p->code_map, (uint64_t)(uintptr_t)code, fi, fp_code_key_of) < 0)
        goto error;
    if (p->tl != NULL && fp_tl_func_added(p, fi, code, NULL, NULL) < 0)
        goto error;
    return fi;
error:
    fp_set_sticky(p);
    return -1;
}

/* See fp_profile.h. */
int32_t
fp_func_for_builtin_slow(fp_profiler *p, PyMethodDef *ml, PyObject *callable, PyObject *self_arg)
{
    int32_t fi;
    p->busy++;
    PyObject *label = fp_builtin_label(ml, callable, self_arg);
    p->busy--;
    if (label == NULL)
        goto error;
    fi = fp_func_new(p, label);
    if (fi < 0)
        return -1;
    if (fp_map_put(&p->builtin_map, (uint64_t)(uintptr_t)ml, fi) < 0)
        goto error;
    if (p->tl != NULL && fp_tl_func_added(p, fi, NULL, callable, self_arg) < 0)
        goto error;
    return fi;
error:
    fp_set_sticky(p);
    return -1;
}

/* See fp_profile.h. */
int32_t
fp_edge_add(fp_profiler *p, int32_t caller, int32_t callee)
{
    int32_t ei;
    if (p->nedges == p->capedges) {
        int32_t ncap = p->capedges ? p->capedges * 2 : 16;
        fp_edge *grown = PyMem_RawRealloc(p->edges, (size_t)ncap * sizeof(fp_edge));
        if (grown == NULL)
            goto error;
        p->edges = grown;
        p->capedges = ncap;
    }
    ei = p->nedges;
    fp_edge *e = &p->edges[ei];
    memset(e, 0, sizeof(*e));
    e->caller = caller;
    e->callee = callee;
    /* the map reads the key back from the record, so the record is written first */
    if (fp_index_put(p, &p->edge_map, FP_EDGE_KEY(caller, callee), ei, fp_edge_key_of) < 0)
        goto error;
    p->nedges++;
    return ei;
error:
    fp_set_sticky(p);
    return -1;
}

/* ---- the calling-context tree ---------------------------------------------------------- */

/* The node map's key of node ni.  Returns it. */
static uint64_t
fp_node_key_of(const fp_profiler *p, int32_t ni)
{
    return FP_EDGE_KEY(p->nodes[ni].parent, p->nodes[ni].func);
}

/* Appends a node of func under parent (zero counts).  Returns its index, or -1 (sticky set). */
static int32_t
fp_node_new(fp_profiler *p, int32_t parent, int32_t func)
{
    if (p->nnodes == p->capnodes) {
        if (p->capnodes > INT32_MAX / 2)
            goto error;
        int32_t ncap = p->capnodes ? p->capnodes * 2 : 16;
        fp_node *grown = PyMem_RawRealloc(p->nodes, (size_t)ncap * sizeof(fp_node));
        if (grown == NULL)
            goto error;
        p->nodes = grown;
        p->capnodes = ncap;
    }
    fp_node *n = &p->nodes[p->nnodes];
    memset(n, 0, sizeof(*n));
    n->parent = parent;
    n->func = func;
    return p->nnodes++;
error:
    fp_set_sticky(p);
    return -1;
}

/* See fp_profile.h. */
int32_t
fp_node_enter(fp_profiler *p, fp_thread *t, int32_t fi)
{
    int32_t parent, ni;
    if (t->depth > 0) {
        parent = t->stack[t->depth - 1].node;
    } else {
        /* a thread that reuses a finished thread's ident shares its root: one node per path
         * under each ident */
        uint64_t key = (uint64_t)t->ident + 1;
        if (t->root < 0)
            t->root = fp_map_get(&p->root_map, key);
        if (t->root < 0) {
            if ((t->root = fp_node_new(p, -1, -1)) < 0)
                return -2;
            p->nodes[t->root].ncalls = (int64_t)t->ident;
            if (fp_map_put(&p->root_map, key, t->root) < 0) {
                fp_set_sticky(p);
                return -2;
            }
        }
        parent = t->root;
    }
    if (parent < 0)
        return -1; /* below a merged call */
    ni = fp_node_find(p, parent, fi, 1);
    if (ni >= 0)
        return ni;
    if (p->ntree >= p->tree_cap)
        return -1;
    ni = fp_node_new(p, parent, fi);
    if (ni < 0)
        return -2;
    /* the map reads the key back from the record, so the record is written first */
    if (fp_index_put(p, &p->node_map, FP_EDGE_KEY(parent, fi), ni, fp_node_key_of) < 0)
        goto error;
    p->ntree++;
    return ni;
error:
    p->nnodes--;
    fp_set_sticky(p);
    return -2;
}

/* See fp_profile.h. */
int
fp_edge_inner(const fp_thread *t, int32_t caller, int32_t fi)
{
    for (int32_t d = t->depth - 1; d > 0; d--)
        if (t->stack[d].node >= 0 && t->stack[d].func == fi && t->stack[d - 1].func == caller)
            return 1;
    return 0;
}

/* ---- per-thread records ---------------------------------------------------------------- */

/* Grows *arr (of *n int32 zeros-extended) to hold index i.  Returns 0 or -1. */
static int
fp_grow_zeroed(int32_t **arr, int32_t *n, int32_t i)
{
    int32_t ncap = *n ? *n : 16;
    while (ncap <= i)
        ncap *= 2;
    int32_t *grown = PyMem_RawRealloc(*arr, (size_t)ncap * sizeof(int32_t));
    if (grown == NULL)
        return -1;
    memset(grown + *n, 0, (size_t)(ncap - *n) * sizeof(int32_t));
    *arr = grown;
    *n = ncap;
    return 0;
}

/* See fp_profile.h. */
int
fp_grow_func_rec(fp_profiler *p, fp_thread *t, int32_t fi)
{
    if (fp_grow_zeroed(&t->func_rec, &t->nfunc_rec, fi) == 0)
        return 0;
    fp_set_sticky(p);
    return -1;
}

/* See fp_profile.h. */
int
fp_grow_edge_rec(fp_profiler *p, fp_thread *t, int32_t ei)
{
    if (fp_grow_zeroed(&t->edge_rec, &t->nedge_rec, ei) == 0)
        return 0;
    fp_set_sticky(p);
    return -1;
}

/* See fp_profile.h. */
int
fp_grow_stack(fp_profiler *p, fp_thread *t)
{
    int32_t ncap = t->cap ? t->cap * 2 : 32;
    fp_frame *grown = PyMem_RawRealloc(t->stack, (size_t)ncap * sizeof(fp_frame));
    if (grown == NULL) {
        fp_set_sticky(p);
        return -1;
    }
    t->stack = grown;
    t->cap = ncap;
    return 0;
}

/* See fp_profile.h. */
void
fp_thread_cache_clear(fp_profiler *p)
{
    p->cache_key = NULL;
    p->cache_thread = NULL;
    p->fast_key = NULL;
}

/* Returns a new record of thread ts (id tsid) for p, indexed and mapped as ts's newest
 * record, or NULL when out of memory (sticky error set). */
static fp_thread *
fp_thread_new(fp_profiler *p, PyThreadState *ts, uint64_t tsid)
{
    if (p->nthreads == p->capthread_at) {
        int32_t ncap = p->capthread_at ? p->capthread_at * 2 : 16;
        fp_thread **grown = PyMem_RawRealloc(p->thread_at, (size_t)ncap * sizeof(fp_thread *));
        if (grown == NULL)
            goto error;
        p->thread_at = grown;
        p->capthread_at = ncap;
    }
    fp_thread *t = PyMem_RawCalloc(1, sizeof(fp_thread));
    if (t == NULL)
        goto error;
    if (fp_map_put(&p->thread_map, (uint64_t)(uintptr_t)ts, p->nthreads) < 0) {
        PyMem_RawFree(t);
        goto error;
    }
    t->tstate = ts;
    t->ident = PyThread_get_thread_ident();
    t->tsid = tsid;
    t->root = -1;
    t->index = p->nthreads++;
    t->native_id = PyThread_get_thread_native_id();
    p->thread_at[t->index] = t;
    return t;
error:
    fp_set_sticky(p);
    return NULL;
}

/* Frees the stack and activation counts of t, a thread that has ended, when no frame of it is
 * open: its counts stay in the tables and its record stays for the per-thread views, but a
 * program that starts threads without end keeps a few dozen bytes per finished thread instead
 * of kilobytes.  Returns nothing. */
static void
fp_thread_retire(fp_thread *t)
{
    if (t->depth != 0)
        return;
    PyMem_RawFree(t->stack);
    PyMem_RawFree(t->func_rec);
    PyMem_RawFree(t->edge_rec);
    t->stack = NULL;
    t->func_rec = t->edge_rec = NULL;
    t->cap = t->nfunc_rec = t->nedge_rec = 0;
}

/* What a thread's dict holds for each profiler that has a record of the thread: when the
 * thread ends, Python clears its dict (PyThreadState_Clear, holding the GIL) and the capsule's
 * destructor retires the record, if the profiler and that record still exist. */
typedef struct fp_thread_end {
    PyObject *profiler; /* a weak reference */
    uint64_t generation;
    int32_t index;
    uint64_t tsid;
} fp_thread_end;

#define FP_THREAD_END_NAME "fastprof.thread_end"

/* The capsule's destructor: retires the record it names.  Returns nothing; never leaves an
 * exception set. */
static void
fp_thread_end_run(PyObject *capsule)
{
    fp_thread_end *e = PyCapsule_GetPointer(capsule, FP_THREAD_END_NAME);
    if (e == NULL) {
        PyErr_Clear();
        return;
    }
#if FP_PY313
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(e->profiler, &obj) < 0)
        PyErr_Clear();
#else
    PyObject *obj = Py_XNewRef(PyWeakref_GetObject(e->profiler));
    if (obj == Py_None)
        Py_CLEAR(obj);
#endif
    fp_profiler *p = (fp_profiler *)obj;
    if (p != NULL && p->generation == e->generation && e->index < p->nthreads &&
        p->thread_at[e->index]->tsid == e->tsid)
        fp_thread_retire(p->thread_at[e->index]);
    Py_XDECREF(obj);
    Py_DECREF(e->profiler);
    PyMem_RawFree(e);
}

/* Puts in the running thread's dict what retires t when the thread ends.  Returns nothing:
 * without it (no memory, a profiler without weak references) t is retired when another
 * thread takes its tstate memory, or never. */
static void
fp_thread_watch(fp_profiler *p, fp_thread *t)
{
    PyObject *dict = PyThreadState_GetDict(), *key = NULL, *capsule = NULL;
    fp_thread_end *e = NULL;
    if (dict == NULL)
        return;
    e = PyMem_RawMalloc(sizeof(*e));
    if (e == NULL)
        goto error;
    e->profiler = PyWeakref_NewRef((PyObject *)p, NULL);
    if (e->profiler == NULL)
        goto error;
    e->generation = p->generation;
    e->index = t->index;
    e->tsid = t->tsid;
    capsule = PyCapsule_New(e, FP_THREAD_END_NAME, fp_thread_end_run);
    if (capsule == NULL) {
        Py_DECREF(e->profiler);
        goto error;
    }
    e = NULL; /* the capsule's now */
    key = PyUnicode_FromFormat("fastprof.thread_end.%p", (void *)p);
    if (key == NULL || PyDict_SetItem(dict, key, capsule) < 0)
        goto error;
    Py_DECREF(key);
    Py_DECREF(capsule);
    return;
error:
    PyErr_Clear();
    PyMem_RawFree(e);
    Py_XDECREF(key);
    Py_XDECREF(capsule);
}

/* See fp_profile.h. */
fp_thread *
fp_thread_find(const fp_profiler *p, PyThreadState *ts)
{
    int32_t i = fp_map_get(&p->thread_map, (uint64_t)(uintptr_t)ts);
    if (i < 0 || p->thread_at[i]->tsid != PyThreadState_GetID(ts))
        return NULL;
    return p->thread_at[i];
}

/* How many events of a thread look its name up before giving up: a new thread's first
 * events (threading's bootstrap) come before threading registers it; a thread that threading
 * never registers (a C library's) stops asking after these. */
#define FP_NAME_TRIES 64

/* Sets t->name, once threading has registered the running thread t, to the name its Thread
 * was given: threading._active[ident].__dict__["_name"], read from the dicts so that no
 * Python code runs (this is a hook's slow path).  Counts the try.  Returns nothing; never
 * leaves an exception set. */
static void
fp_thread_find_name(fp_thread *t)
{
    PyObject *modname = NULL, *mod = NULL, *active = NULL, *key = NULL, *dict = NULL;
    t->name_tries++;
    modname = PyUnicode_InternFromString("threading");
    if (modname == NULL)
        goto done;
    mod = PyImport_GetModule(modname); /* a module already imported, or NULL */
    if (mod == NULL)
        goto done;
    active = PyObject_GetAttrString(mod, "_active");
    key = PyLong_FromUnsignedLong(t->ident);
    if (active == NULL || key == NULL || !PyDict_Check(active))
        goto done;
    PyObject *thread = PyDict_GetItemWithError(active, key); /* borrowed */
    if (thread == NULL)
        goto done;
    dict = PyObject_GenericGetDict(thread, NULL);
    if (dict == NULL || !PyDict_Check(dict))
        goto done;
    PyObject *name = PyDict_GetItemString(dict, "_name"); /* borrowed */
    if (name != NULL && PyUnicode_CheckExact(name))
        t->name = Py_NewRef(name);
done:
    PyErr_Clear();
    Py_XDECREF(modname);
    Py_XDECREF(mod);
    Py_XDECREF(active);
    Py_XDECREF(key);
    Py_XDECREF(dict);
}

/* See fp_profile.h. */
fp_thread *
fp_thread_lookup(fp_profiler *p)
{
    if (!p->enabled || p->error != NULL)
        return NULL; /* not cached: enable() empties the cache */
    PyThreadState *ts = PyThreadState_Get();
    uint64_t tsid = PyThreadState_GetID(ts);
    fp_thread *t = NULL;
    /* the id alone tells a later thread, given a finished one's tstate memory, apart */
    if (!p->threads && (ts != p->owner || tsid != p->owner_tsid))
        goto done;
    int32_t i = fp_map_get(&p->thread_map, (uint64_t)(uintptr_t)ts);
    fp_thread *newest = i >= 0 ? p->thread_at[i] : NULL;
    if (newest != NULL && newest->tsid == tsid) {
        t = newest;
        goto done;
    }
    if ((t = fp_thread_new(p, ts, tsid)) == NULL)
        return NULL;
    if (newest != NULL)
        fp_thread_retire(newest); /* its thread has ended: its tstate memory is this one's */
    fp_thread_watch(p, t);
done:
    if (t != NULL && t->name == NULL && t->name_tries < FP_NAME_TRIES) {
        fp_thread_find_name(t);
        if (t->name == NULL && t->name_tries < FP_NAME_TRIES) {
            fp_thread_cache_clear(p); /* the thread's next event asks again */
            return t;
        }
    }
    p->cache_key = FP_THREAD_KEY();
    p->cache_thread = t;
    p->fast_key = p->clock == FP_CLOCK_WALL && t != NULL ? p->cache_key : NULL;
    return t;
}

/* See fp_profile.h. */
void
fp_leave_search(fp_profiler *p, fp_thread *t, const void *ident, fp_tick now)
{
    int32_t d = t->depth - 1;
    while (d >= 0 && t->stack[d].key != ident && p->funcs[t->stack[d].func].key != ident)
        d--;
    if (d < 0)
        return;
    while (t->depth > d)
        fp_leave_top_as(p, t, now, p->tl != NULL);
}

/* See fp_profile.h. */
void
fp_flush_all(fp_profiler *p, fp_tick now)
{
    for (int32_t i = 0; i < p->nthreads; i++)
        while (p->thread_at[i]->depth > 0)
            fp_leave_top_as(p, p->thread_at[i], now, p->tl != NULL);
}
