/* fp_profile.h - the call profiler's records and its hot path (enter and leave a frame),
 * shared by the hooks of each Python version.
 *
 * Tables are shared by all threads (events arrive holding the GIL); each thread has its own
 * stack and its own recursion levels, so the stats of all threads are merged by construction.
 * Nothing on the hot path allocates once the tables and stacks have grown to fit. */
#ifndef FP_PROFILE_H
#define FP_PROFILE_H

#include "common.h"
#include "clock.h"
#include "timeline.h"

/* ---- an open-addressing map from non-zero 64-bit keys to int32 values -------------------- */

typedef struct fp_map {
    uint64_t *keys; /* 0 marks an empty slot */
    int32_t *vals;
    uint32_t mask; /* capacity - 1 (capacity a power of two), 0 when never allocated */
    uint32_t used;
    uint32_t shift; /* 64 - log2(capacity) */
} fp_map;

/* Returns key's home slot in m: the top bits of a Fibonacci product, which every bit of the
 * key moves (an edge key's two halves are small integers; lower bits of the product would
 * keep their sum's pattern and crowd some slots). */
FP_INLINE uint32_t
fp_map_slot(const fp_map *m, uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* Returns the value stored under key, or -1. */
FP_INLINE int32_t
fp_map_get(const fp_map *m, uint64_t key)
{
    if (FP_UNLIKELY(m->keys == NULL))
        return -1;
    uint32_t i = fp_map_slot(m, key);
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key)
            return m->vals[i];
        if (k == 0)
            return -1;
        i = (i + 1) & m->mask;
    }
}

/* Stores val under key (key != 0), growing the map.  Returns 0, or -1 when out of memory
 * (no exception set). */
int fp_map_put(fp_map *m, uint64_t key, int32_t val);
/* Frees the map's memory and empties it. */
void fp_map_free(fp_map *m);

/* ---- an open-addressing set of record indices, keyed by what each record holds ---------- */

/* The edge map and the code map hold only a record's index (4 bytes a slot): the key is read
 * back from the record itself (an edge's caller and callee, a function's code object), which
 * the hot path reads next anyway, so a probe touches no more cache lines than a map of keys
 * and values would, at a third of its memory. */
typedef struct fp_index_map {
    int32_t *slots; /* index + 1 of a record, 0 marks an empty slot */
    uint32_t mask;  /* capacity - 1 (capacity a power of two), 0 when never allocated */
    uint32_t used;
    uint32_t shift; /* 64 - log2(capacity) */
} fp_index_map;

/* Returns key's home slot in m (see fp_map_slot). */
FP_INLINE uint32_t
fp_index_slot(const fp_index_map *m, uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* The edge map's key of caller -> callee. */
#define FP_EDGE_KEY(caller, callee)                                                                \
    (((uint64_t)(uint32_t)((caller) + 1) << 32) | (uint32_t)((callee) + 1))

struct fp_profiler;
/* Returns the key of record idx of p (what fp_index_put hashes when the map grows). */
typedef uint64_t (*fp_index_key_fn)(const struct fp_profiler *p, int32_t idx);

/* Stores idx under key in m (key not in m yet), growing the map and re-hashing each record
 * by key_of.  Returns 0, or -1 when out of memory (no exception set; m unchanged). */
int fp_index_put(const struct fp_profiler *p, fp_index_map *m, uint64_t key, int32_t idx,
                 fp_index_key_fn key_of);
/* Frees the map's memory and empties it. */
void fp_index_free(fp_index_map *m);

/* ---- records ---------------------------------------------------------------------------- */

/* What a function or a caller -> callee edge accumulates. */
typedef struct fp_counts {
    int64_t ncalls; /* every completed call */
    int64_t nrec;   /* calls made while already active (not primitive) */
    fp_tick tt;     /* cumulative time, counted at the outermost activation */
    fp_tick it;     /* own time */
} fp_counts;

/* A function's record: 48 bytes, what cProfile's entry holds less its tree links (a program
 * that makes code objects without end keeps one per code object, as cProfile does). */
typedef struct fp_func {
    PyObject *key; /* strong: the code object, or the label str of a builtin (whose
                    * frames are keyed by its PyMethodDef, see fp_frame) */
    fp_counts c;
    int32_t last_from; /* cache: what this function was last entered from (-1: none): the
                        * parent node with the tree on, else the caller function ... */
    int32_t last_to;   /* ... and the node, or the edge, that entry reached */
} fp_func;
_Static_assert(sizeof(fp_func) == 48, "fp_func is 48 bytes");

typedef struct fp_edge {
    int32_t caller, callee;
    fp_counts c;
} fp_edge;

/* A node of the calling-context tree: one path of functions from a thread's root.  A node is
 * never active twice at once in its thread, so its charge needs no recursion count.  A
 * thread's root is a node too (func -1, parent -1, ncalls the thread's ident), kept out of the
 * node map and of the node cap; _raw_tree() leaves it out. */
typedef struct fp_node {
    int32_t parent; /* the parent node (a thread's root for a top-level frame) */
    int32_t func;   /* the function at the path's end, -1 for a thread's root */
    int64_t ncalls; /* completed calls on this path */
    fp_tick tt;     /* their total time */
    fp_tick it;     /* their own time */
} fp_node;

typedef struct fp_frame {
    int32_t func;
    int32_t node;    /* its tree node, -1 without one (tree off, or merged: see fp_enter) */
    int32_t edge;    /* a frame without a node: its edge, -1 without a recorded caller */
    int32_t inner;   /* ... 1 when a framed ancestor pair of the same edge is open (the
                      * edge's time is counted there) */
    fp_tick t0;      /* when it was entered */
    fp_tick subt;    /* time of its completed children */
    const void *key; /* what the leave event will name: the frame object (3.9-3.11), the
                      * code object (3.12+) or the PyMethodDef of a builtin */
} fp_frame;

typedef struct fp_thread {
    PyThreadState *tstate;
    unsigned long ident;
    uint64_t tsid; /* PyThreadState_GetID: unique, unlike tstate and ident, which a later
                    * thread may reuse */
    fp_frame *stack;
    int32_t depth, cap;
    int32_t *func_rec; /* active activations per function, in this thread */
    int32_t nfunc_rec;
    int32_t *edge_rec; /* active activations per edge, in this thread */
    int32_t nedge_rec;
    int32_t root;            /* the thread's root node, -1 until the tree first needs it */
    int32_t index;           /* its place among the profiler's threads, in first-seen order */
    unsigned long native_id; /* the operating system's thread id */
    PyObject *name;          /* strong: the name threading gave the thread, NULL until known */
    int32_t name_tries;      /* lookups of it so far (see fp_thread_lookup) */
} fp_thread;

enum { FP_CLOCK_WALL, FP_CLOCK_CPU, FP_CLOCK_PROCESS_CPU, FP_CLOCK_USER };

/* ---- the profiler object ------------------------------------------------------------------ */

#define FP_MON_NCALLBACKS 4
#define FP_CODE_SET_BITS 9 /* the code cache has 2 << FP_CODE_SET_BITS entries */

typedef struct fp_profiler {
    PyObject_HEAD int enabled;
    int subcalls;
    int builtins;
    int threads;
    int prune;         /* 3.12+ prune_call_sites: DISABLE a CALL site whose callee was a
                        * Python function (loses builtins called there later) */
    int clock;         /* FP_CLOCK_* */
    int tsc;           /* the wall clock reads the TSC: fp_now's one test, and the copy of
                        * the hooks' fast paths that enable() installs */
    PyObject *timer;   /* FP_CLOCK_USER: the callable */
    double timeunit;   /* FP_CLOCK_USER: seconds per integer tick, 0 for float seconds */
    fp_tick last_user; /* the user timer's last good reading */
    int busy;          /* running Python code from a hook (the timer, a label's repr) */

    fp_func *funcs;
    int32_t nfuncs, capfuncs;
    fp_edge *edges;
    int32_t nedges, capedges;
    fp_index_map edge_map; /* edges, keyed by FP_EDGE_KEY(caller, callee) */
    fp_node *nodes;
    int32_t nnodes, capnodes;
    int32_t ntree;         /* nodes other than the threads' roots (what the cap bounds) */
    int32_t tree_cap;      /* the node cap (tree_nodes=), 0: no tree */
    int tree;              /* recording into the tree (tree_cap > 0 and subcalls, at enable) */
    int64_t merged;        /* completed calls given no node because the cap was reached */
    fp_timeline *tl;       /* the timeline of finished calls, NULL when off (timeline.h) */
    int32_t nthreads;      /* thread records made (the next one's index) */
    fp_index_map node_map; /* tree nodes, keyed by FP_EDGE_KEY(parent, func) */
    fp_index_map code_map; /* functions of code objects, keyed by the code object's address */
    fp_map builtin_map;    /* PyMethodDef* -> func */
    /* A two-way set-associative cache in front of code_map, the most recent way first: the
     * code objects are held by funcs, so a cached pointer stays that code object's until
     * clear() empties the cache. */
    struct {
        const void *code;
        int32_t func;
    } code_cache[1 << FP_CODE_SET_BITS][2];

    fp_thread **thread_at; /* the thread records by index (first-seen order) */
    int32_t capthread_at;
    fp_map thread_map;       /* PyThreadState address -> index of the newest record made for
                              * it (a finished thread's tstate memory goes to a later thread) */
    fp_map root_map;         /* thread ident + 1 -> the root node of the threads of that ident */
    uint64_t generation;     /* counts clear()s: what a finished thread's note names (tables.c) */
    PyThreadState *owner;    /* threads == 0: the one thread profiled ... */
    uint64_t owner_tsid;     /* ... and its PyThreadState_GetID, which a later thread given
                              * the same tstate memory does not share */
    const void *cache_key;   /* the thread last looked up (FP_THREAD_KEY), NULL when the
                              * cache is empty ... */
    fp_thread *cache_thread; /* ... and its record (NULL: not profiled) */
    const void *fast_key;    /* cache_key where the hooks' fast paths may run (the wall
                              * clock, a profiled thread), else NULL */
    PyObject *error;         /* sticky: the first error a hook met (see common.h) */

    /* 3.12+: sys.monitoring */
    int tool_id;       /* the shared tool id while enabled, else -1 */
    PyObject *missing; /* sys.monitoring.MISSING */
    PyObject *disable; /* sys.monitoring.DISABLE */
    PyObject *callbacks[FP_MON_NCALLBACKS];
    /* 3.9-3.11: threading.setprofile hook */
    int thread_hook_set;
    PyObject *thread_prev; /* the threading.setprofile hook that enable() found (or NULL) */
    int taken_warned;      /* a warning said another tool took the hook (once per enable) */
    PyObject *weakreflist;
} fp_profiler;

/* Returns the thread record of the running thread for p, creating it, or NULL when this thread
 * is not profiled (threads=False) or out of memory (sticky error set).  Slow path: fills the
 * profiler's thread cache. */
fp_thread *fp_thread_lookup(fp_profiler *p);

/* Returns p's record of the live thread ts, or NULL when p has none (not yet seen, or not
 * profiled).  Does not create one. */
fp_thread *fp_thread_find(const fp_profiler *p, PyThreadState *ts);

/* Returns the running thread's record for p, or NULL when it is not profiled.  The cache is
 * the profiler's last thread (threads take turns holding the GIL, so it rarely misses); no
 * thread-local storage, whose static block the CUDA runtime linked in already fills.
 * Disabling p empties the cache, so this also answers NULL once p is disabled. */
FP_INLINE fp_thread *
fp_thread_get(fp_profiler *p)
{
    if (FP_LIKELY(p->cache_key == FP_THREAD_KEY()))
        return p->cache_thread;
    return fp_thread_lookup(p);
}

/* Empties p's thread cache: called when thread records are freed and when recording starts
 * or stops.  Returns nothing. */
void fp_thread_cache_clear(fp_profiler *p);

/* Returns the time of the profiler's clock in its ticks; a user timer that raises or returns
 * no number is reported through sys.unraisablehook (as cProfile does) and its last good
 * reading is returned.  Never leaves an exception set. */
fp_tick fp_now_slow(fp_profiler *p);

FP_INLINE fp_tick
fp_now(fp_profiler *p)
{
    if (FP_LIKELY(p->tsc))
        return fp_clock_tsc();
    return fp_now_slow(p);
}

/* Records the current exception (a MemoryError when none is set) as p's sticky error (see
 * common.h) and stops recording: the call profiler records nothing after its first error.
 * Returns nothing; never leaves an exception set. */
void fp_set_sticky(fp_profiler *p);

/* Decides whether the timeline (p->tl, not NULL) records calls of the function fi just added:
 * a code object's (code), or a builtin's called through callable with self_arg.  Returns 0,
 * or -1 when out of memory (no exception set). */
int fp_tl_func_added(fp_profiler *p, int32_t fi, PyObject *code, PyObject *callable,
                     PyObject *self_arg);

/* fp_func_for_code's slow path (the code cache missed).  Returns the function index, or -1
 * on failure (sticky set). */
int32_t fp_func_for_code_slow(fp_profiler *p, PyObject *code);

/* The code cache's set for code: the top bits of a Fibonacci product of its address. */
#define FP_CODE_SET(code)                                                                          \
    ((size_t)(((uint64_t)(uintptr_t)(code)*0x9E3779B97F4A7C15ull) >> (64 - FP_CODE_SET_BITS)))

/* Returns the function index of code when the code cache holds it, else -1 (no lookup). */
FP_INLINE int32_t
fp_func_cached(const fp_profiler *p, const void *code)
{
    size_t set = FP_CODE_SET(code);
    if (FP_LIKELY(p->code_cache[set][0].code == code))
        return p->code_cache[set][0].func;
    return p->code_cache[set][1].code == code ? p->code_cache[set][1].func : -1;
}

/* Returns the function index for a code object, adding it and caching it as its set's most
 * recent entry; -1 on failure (sticky set). */
FP_INLINE int32_t
fp_func_for_code(fp_profiler *p, PyObject *code)
{
    int32_t fi = fp_func_cached(p, code);
    if (FP_LIKELY(fi >= 0))
        return fi;
    fi = fp_func_for_code_slow(p, code);
    if (FP_LIKELY(fi >= 0)) {
        size_t set = FP_CODE_SET(code);
        p->code_cache[set][1] = p->code_cache[set][0];
        p->code_cache[set][0].code = code;
        p->code_cache[set][0].func = fi;
    }
    return fi;
}

/* fp_func_for_builtin's slow path: adds the builtin ml with the label made from callable and
 * self_arg.  Returns its function index, or -1 on failure (sticky set). */
int32_t fp_func_for_builtin_slow(fp_profiler *p, PyMethodDef *ml, PyObject *callable,
                                 PyObject *self_arg);

/* Returns the function index for a builtin, adding it on first sight; -1 on failure (sticky
 * set). */
FP_INLINE int32_t
fp_func_for_builtin(fp_profiler *p, PyMethodDef *ml, PyObject *callable, PyObject *self_arg)
{
    int32_t fi = fp_map_get(&p->builtin_map, (uint64_t)(uintptr_t)ml);
    if (FP_LIKELY(fi >= 0))
        return fi;
    return fp_func_for_builtin_slow(p, ml, callable, self_arg);
}

/* Slow paths of fp_enter: grow the stack or a recursion array.  Each returns 0, or -1 on
 * failure (sticky set). */
int fp_grow_stack(fp_profiler *p, fp_thread *t);
int fp_grow_func_rec(fp_profiler *p, fp_thread *t, int32_t fi);
int fp_grow_edge_rec(fp_profiler *p, fp_thread *t, int32_t ei);
/* fp_enter's other slow path: records the edge caller -> callee, not in the edge map yet.
 * Returns its index, or -1 on failure (sticky set). */
int32_t fp_edge_add(fp_profiler *p, int32_t caller, int32_t callee);

/* fp_enter's slow paths with the tree on.  fp_node_enter returns the node of a frame of fi
 * pushed on t now (adding it, and the thread's root), -1 when the call gets none (its caller
 * has none, or the cap is reached), or -2 on failure (sticky set).  fp_edge_inner returns 1
 * when a frame with a node, below t's top, is an activation of caller -> fi (then a merged
 * call of that edge is recursive), else 0. */
int32_t fp_node_enter(fp_profiler *p, fp_thread *t, int32_t fi);
int fp_edge_inner(const fp_thread *t, int32_t caller, int32_t fi);

/* Pushes a frame of function fi, entered at now at node ni or else through edge ei (-1:
 * none; inner: see fp_frame), on t's stack, which has room, as do its recursion arrays.
 * Returns nothing. */
FP_INLINE void
fp_push(fp_thread *t, int32_t fi, int32_t ni, int32_t ei, int32_t inner, fp_tick now,
        const void *key)
{
    if (ei >= 0)
        t->edge_rec[ei]++;
    t->func_rec[fi]++;
    fp_frame *f = &t->stack[t->depth++];
    f->func = fi;
    f->node = ni;
    f->edge = ei;
    f->inner = inner;
    f->t0 = now;
    f->subt = 0;
    f->key = key;
}

/* Returns the edge caller -> callee when the edge map holds it, else -1: probing only the
 * key's home slot unless full (a constant), where most edges sit (the map is at most half
 * full). */
FP_INLINE int32_t
fp_edge_probe(const fp_profiler *p, int32_t caller, int32_t callee, int full)
{
    const fp_index_map *m = &p->edge_map;
    if (FP_UNLIKELY(m->slots == NULL))
        return -1;
    uint32_t i = fp_index_slot(m, FP_EDGE_KEY(caller, callee));
    for (;;) {
        int32_t s = m->slots[i];
        if (s == 0)
            return -1;
        const fp_edge *e = &p->edges[s - 1];
        if (e->caller == caller && e->callee == callee)
            return s - 1;
        if (!full)
            return -1;
        i = (i + 1) & m->mask;
    }
}

/* Returns the edge caller -> fi when the callee's cache or the edge map holds it (probing the
 * map's first slot only unless full, a constant), caching it in the callee; else -1. */
FP_INLINE int32_t
fp_edge_find(fp_profiler *p, int32_t caller, int32_t fi, int full)
{
    fp_func *callee = &p->funcs[fi];
    if (FP_LIKELY(callee->last_from == caller))
        return callee->last_to;
    int32_t ei = fp_edge_probe(p, caller, fi, full);
    if (ei >= 0) {
        callee->last_from = caller;
        callee->last_to = ei;
    }
    return ei;
}

/* Returns the child of node parent for function fi when the node map holds it, else -1:
 * probing only the key's home slot unless full (a constant). */
FP_INLINE int32_t
fp_node_probe(const fp_profiler *p, int32_t parent, int32_t fi, int full)
{
    const fp_index_map *m = &p->node_map;
    if (FP_UNLIKELY(m->slots == NULL))
        return -1;
    uint32_t i = fp_index_slot(m, FP_EDGE_KEY(parent, fi));
    for (;;) {
        int32_t s = m->slots[i];
        if (s == 0)
            return -1;
        const fp_node *n = &p->nodes[s - 1];
        if (n->parent == parent && n->func == fi)
            return s - 1;
        if (!full)
            return -1;
        i = (i + 1) & m->mask;
    }
}

/* Returns the child of node parent for fi when the callee's cache or the node map holds it
 * (probing the map's first slot only unless full, a constant), caching it in the callee;
 * else -1. */
FP_INLINE int32_t
fp_node_find(fp_profiler *p, int32_t parent, int32_t fi, int full)
{
    fp_func *callee = &p->funcs[fi];
    if (FP_LIKELY(callee->last_from == parent))
        return callee->last_to;
    int32_t ni = fp_node_probe(p, parent, fi, full);
    if (ni >= 0) {
        callee->last_from = parent;
        callee->last_to = ni;
    }
    return ni;
}

/* fp_enter's common case, for hooks that keep a fast path free of calls: the stack and the
 * recursion arrays have room and the node (tree on) or the edge is known.  Returns 1 when it
 * pushed the frame, 0 (having pushed nothing) when fp_enter must do it. */
FP_INLINE int
fp_enter_fast(fp_profiler *p, fp_thread *t, int32_t fi, fp_tick now, const void *key)
{
    if (FP_UNLIKELY(t->depth == t->cap || fi >= t->nfunc_rec))
        return 0;
    int32_t ni = -1, ei = -1;
    if (FP_LIKELY(p->tree)) {
        int32_t parent = t->depth > 0 ? t->stack[t->depth - 1].node : t->root;
        if (FP_UNLIKELY(parent < 0))
            return 0;
        ni = fp_node_find(p, parent, fi, 0);
        if (FP_UNLIKELY(ni < 0))
            return 0;
    } else if (p->subcalls && t->depth > 0) {
        ei = fp_edge_find(p, t->stack[t->depth - 1].func, fi, 0);
        if (FP_UNLIKELY(ei < 0 || ei >= t->nedge_rec))
            return 0;
    }
    fp_push(t, fi, ni, ei, 0, now, key);
    return 1;
}

/* Pushes a frame of function fi entered at now; key is what its leave event will name (see
 * fp_frame), so that the common leave needs no lookup.  With the tree on, the frame gets its
 * node; a call past the node cap (or below such a call) gets none and is recorded through its
 * edge, as with the tree off (the edge's cache then holds nodes, so the map is probed). */
FP_INLINE void
fp_enter(fp_profiler *p, fp_thread *t, int32_t fi, fp_tick now, const void *key)
{
    if (FP_UNLIKELY(t->depth == t->cap) && fp_grow_stack(p, t) < 0)
        return;
    if (FP_UNLIKELY(fi >= t->nfunc_rec) && fp_grow_func_rec(p, t, fi) < 0)
        return;
    int32_t ni = -1, ei = -1, inner = 0;
    if (p->tree && (ni = fp_node_enter(p, t, fi)) == -2)
        return;
    if (ni < 0 && p->subcalls && t->depth > 0) {
        int32_t caller = t->stack[t->depth - 1].func;
        ei = p->tree ? fp_edge_probe(p, caller, fi, 1) : fp_edge_find(p, caller, fi, 1);
        if (FP_UNLIKELY(ei < 0) && (ei = fp_edge_add(p, caller, fi)) < 0)
            return;
        if (FP_UNLIKELY(ei >= t->nedge_rec) && fp_grow_edge_rec(p, t, ei) < 0)
            return;
        inner = p->tree && t->edge_rec[ei] == 0 && fp_edge_inner(t, caller, fi);
    }
    fp_push(t, fi, ni, ei, inner, now, key);
}

/* Charges a completed call of total time tt and own time it to c; *active counts this
 * thread's open activations, this one included, and inner says an outer one is open
 * elsewhere (see fp_frame).  Returns nothing. */
FP_INLINE void
fp_charge(fp_counts *c, int32_t *active, int32_t inner, fp_tick tt, fp_tick it)
{
    if (--*active == 0 && !inner)
        c->tt += tt; /* the outermost activation */
    else
        c->nrec++;
    c->it += it;
    c->ncalls++;
}

/* Pops the top frame at now, charging its time: the call profiler alone (a profiler with a
 * timeline pops through fp_leave_top_tl). */
FP_INLINE void
fp_leave_top(fp_profiler *p, fp_thread *t, fp_tick now)
{
    fp_frame *f = &t->stack[--t->depth];
    fp_tick tt = now - f->t0;
    fp_tick it = tt - f->subt;
    if (t->depth > 0)
        t->stack[t->depth - 1].subt += tt;
    fp_charge(&p->funcs[f->func].c, &t->func_rec[f->func], 0, tt, it);
    if (FP_LIKELY(f->node >= 0)) {
        fp_node *n = &p->nodes[f->node];
        n->ncalls++;
        n->tt += tt;
        n->it += it;
        return;
    }
    if (f->edge >= 0)
        fp_charge(&p->edges[f->edge].c, &t->edge_rec[f->edge], f->inner, tt, it);
    if (p->tree)
        p->merged++;
}

/* Pops the top frame at now as fp_leave_top does, and records the call in p's timeline (p->tl,
 * not NULL).  Returns nothing. */
FP_INLINE void
fp_leave_top_tl(fp_profiler *p, fp_thread *t, fp_tick now)
{
    const fp_frame *f = &t->stack[t->depth - 1];
    fp_tl_record(p->tl, f->func, t->index, t->depth - 1, f->t0, now);
    fp_leave_top(p, t, now);
}

/* Pops the top frame at now: through fp_leave_top_tl when tl (a constant in each copy of a
 * hook: the profiler has a timeline), else fp_leave_top.  Returns nothing. */
FP_INLINE void
fp_leave_top_as(fp_profiler *p, fp_thread *t, fp_tick now, int tl)
{
    if (tl)
        fp_leave_top_tl(p, t, now);
    else
        fp_leave_top(p, t, now);
}

/* Returns 1 when t's top frame is the one a leave event naming key ends (see fp_frame), else
 * 0. */
FP_INLINE int
fp_top_is(const fp_thread *t, const void *key)
{
    return t->depth > 0 && t->stack[t->depth - 1].key == key;
}

/* Returns the wall clock's time for the hooks' fast paths: the TSC when tsc (a constant in
 * each copy of a hook, see p->tsc), else CLOCK_MONOTONIC (a call), on a machine without an
 * invariant TSC. */
FP_INLINE fp_tick
fp_wall_now(int tsc)
{
    return tsc ? fp_clock_tsc() : fp_clock_ns(CLOCK_MONOTONIC);
}

/* The hooks' fast enter: when the fast path may run in this thread (p->fast_key) and fi is
 * the function's index from a cache (-1: it missed), pushes a frame keyed key at the wall
 * clock's time.  Returns 1 when it did, 0 (nothing done) when the hook must take its general
 * path. */
FP_INLINE int
fp_enter_cached(fp_profiler *p, int32_t fi, const void *key, int tsc)
{
    return FP_LIKELY(p->fast_key == FP_THREAD_KEY()) && FP_LIKELY(fi >= 0) &&
           FP_LIKELY(fp_enter_fast(p, p->cache_thread, fi, fp_wall_now(tsc), key));
}

/* The hooks' fast leave: when the fast path may run in this thread and the top frame is
 * key's, pops it at the wall clock's time (recording it in the timeline when tl, a constant
 * in each copy of a hook: see fp_leave_top_as).  Returns 1 when it did, 0 (nothing done) when
 * the hook must take its general path. */
FP_INLINE int
fp_leave_cached(fp_profiler *p, const void *key, int tsc, int tl)
{
    fp_thread *t = p->cache_thread;
    if (FP_LIKELY(p->fast_key == FP_THREAD_KEY() && fp_top_is(t, key))) {
        fp_leave_top_as(p, t, fp_wall_now(tsc), tl);
        return 1;
    }
    return 0;
}

/* fp_leave's rare path: pops frames down to and including the nearest one of ident (a code
 * object, the key of its function's record, or a builtin's PyMethodDef, its frames' key);
 * does nothing when no open frame has that ident (a frame entered before profiling began). */
void fp_leave_search(fp_profiler *p, fp_thread *t, const void *ident, fp_tick now);

/* Pops the frame that a leave event naming key (see fp_frame) or ident (the function's code
 * object or PyMethodDef) ends. */
FP_INLINE void
fp_leave(fp_profiler *p, fp_thread *t, const void *key, const void *ident, fp_tick now)
{
    if (FP_LIKELY(fp_top_is(t, key)))
        fp_leave_top_as(p, t, now, p->tl != NULL);
    else
        fp_leave_search(p, t, ident, now);
}

/* Pops every open frame of every thread at time now.  Returns nothing. */
void fp_flush_all(fp_profiler *p, fp_tick now);

/* ---- reading the tree (tree.c) ---------------------------------------------------------- */

/* The caller -> callee edges of p: those derived from the tree's nodes (a node of f whose
 * parent is of g gives g -> f its calls and own time, and its total time unless an ancestor
 * of the node is also a call of f from g, when its calls are recursive) plus the edge table's
 * (calls past the node cap, or all of them with the tree off).  Sets *out to an array of *nout
 * edges from PyMem_RawMalloc (the caller frees it with PyMem_RawFree).  Returns 0, or -1 with
 * MemoryError set. */
int fp_tree_edges(const fp_profiler *p, fp_edge **out, int32_t *nout);
/* Returns the index of ident among the *n of idents, appending it when new (threads by ident
 * in first-seen order, as every reader of the tree numbers them). */
int32_t fp_tree_thread_slot(int64_t *idents, int32_t *n, int64_t ident);
/* Numbers p's first nn nodes as the tree's readers export them: index[ni] their order among the
 * nodes that are no thread's root (-1 for a root), thread[ni] their thread's slot in idents (of
 * *nthreads, room for nn).  Makes no object.  Returns the count of nodes numbered. */
int64_t fp_tree_number(const fp_profiler *p, int32_t nn, int32_t *index, int32_t *thread,
                       int64_t *idents, int32_t *nthreads);
/* Returns a list of the n idents as Python ints, or NULL with an exception set. */
PyObject *fp_tree_idents(const int64_t *idents, int32_t n);
/* Sets RuntimeError saying the profiler was cleared while one of its readers made its rows (a
 * finalizer run by a collection can call clear()).  Returns NULL. */
PyObject *fp_read_cleared(void);
/* Returns _raw_tree()'s tuple (spt, nodes, threads, merged), see profiler.c, or NULL with an
 * exception set. */
PyObject *fp_tree_raw(const fp_profiler *p, double spt);
/* Returns _tree_snapshot()'s tuple (spt, threads, merged, block), see profiler.c, or NULL with
 * an exception set. */
PyObject *fp_tree_snapshot(const fp_profiler *p, double spt);
/* Returns _tree_json(keys, drop)'s tuple (threads, merged): threads a list of (ident, text),
 * one per thread of _raw_tree() in its order, merged _raw_tree()'s; text the thread's node records
 * "[parent,key,ncalls,own,total],..." as the tree file holds them (parent the record's index within
 * the thread, -1 at the top; key keys[func]; own and total in seconds, as "%.17g" writes them; own
 * past the node cap the total less the children's), leaving out a top-level node without children
 * of a function whose byte in drop is not 0.  NULL with an exception set. */
PyObject *fp_tree_json(const fp_profiler *p, double spt, PyObject *keys, PyObject *drop);

/* ---- hooks, one implementation per interpreter family ---------------------------------- */

/* Whether p may take the hooks now, checked before any Python code of enable() runs: 3.12+,
 * no other fastprof profiler holds a sys.monitoring tool id (unless nests: the core's own
 * Profiler (1) and a session's profiler (2) join the shared id); below 3.12, the thread's
 * profile hook is free or p's.  Returns 0; 1 below 3.12 when p is a session's profiler
 * (nests 2) and another profiler (fastprof's or another tool's) holds the hook (a
 * RuntimeWarning said p stays off);
 * or -1 with ValueError (cProfile's "Another profiling tool is already active"), or the
 * warning made an error. */
int fp_hooks_check_free(fp_profiler *p, int nests);
/* Installs the hooks (hook_type: the type of the 3.12+ callback objects, unused below 3.12).
 * Returns 0, or -1 with an exception set (nothing left installed). */
int fp_hooks_install(fp_profiler *p, PyTypeObject *hook_type);
/* The spec of the 3.12+ callback objects' type. */
extern PyType_Spec fp_hook_spec;
/* Removes the hooks.  Returns 0, or -1 with an exception set (still removes all it can). */
int fp_hooks_remove(fp_profiler *p);
/* Adds _Session and _Guarded (session.c) to m.  Returns 0, or -1 with an exception set. */
int fp_session_exec(PyObject *m);
/* Returns 1 when ml is a method of fastprof's session that is called while the profiler is
 * on (a with statement calls __exit__ through a CALL event on 3.12+), which no profile
 * records; else 0. */
int fp_session_is_own(const PyMethodDef *ml);

#if !FP_PY312
/* Warns (RuntimeWarning, once per enable) when another tool has taken or removed the
 * profile hook of a thread p profiles, so that p records nothing there any more.  Returns 0,
 * or -1 with an exception set (the warning was turned into an error). */
int fp_hooks_check(fp_profiler *p);
#else
/* Creates the tool id shared by the call profilers (in m's state) and adds
 * _monitoring_claim / _monitoring_release to m.  Returns 0, or -1 with an exception set. */
int fp_mon_exec(PyObject *m);
/* Claims a free sys.monitoring tool id under name: 2 (the profiler's id, first when
 * profiler_first; else after 3, 4 and 5, and left to cProfile and line_profiler, which want
 * it), 3, 4, 5, then 0 (debuggers) and 1 (coverage).  The one way fastprof's profilers claim
 * an id.  Returns it, or -1 with a RuntimeError naming the tools holding every id. */
int fp_mon_claim(PyObject *mon, const char *name, int profiler_first);
/* Gives tool id back: clears its global events, unregisters its callbacks of events (a
 * mask) and frees it, without the interpreter's recursion check (it works on an exhausted
 * stack).  An id another tool now holds is left alone, with a RuntimeWarning; one another
 * tool freed (or that the caller reclaimed after that, to clear its local events) is cleared
 * and freed, with a RuntimeWarning.  Returns 0, or -1 with the first failure set (every step
 * is tried). */
int fp_mon_release(PyObject *mon, int id, long events, const char *name, int reclaimed);
#endif

/* Returns a new reference to cProfile's label for a builtin (see names.c), never NULL unless
 * out of memory (exception set). */
PyObject *fp_builtin_label(PyMethodDef *ml, PyObject *callable, PyObject *self_arg);

#endif
