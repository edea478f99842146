/* cuda/cupti_callbacks.c - the Python stack at each launch.  CUPTI calls
 * fp_cupti_api_callback on the launching thread at the enter and exit of every runtime and
 * driver API call; on the enter of a launch, copy or memset call it notes the correlation id
 * (which the kernel, copy or memset record carries too), the thread and, when that thread
 * holds the GIL, the code objects and line numbers of its Python stack (references taken
 * under the GIL, dropped when the trace is taken).  A call made inside another noted call on
 * the same thread (the driver call under a runtime call) shares the outer call's stack.
 * CUDA builds only. */
#include "cuda/cupti_int.h"

#ifdef FP_HAVE_CUDA
#include <frameobject.h> /* PyFrame_GetBack on 3.9 */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Frames kept per launch, innermost first. */
#define FP_LAUNCH_DEPTH 32

typedef struct {
    uint32_t correlation, tid, alias, cbid;
    int domain, depth;
    PyObject *code[FP_LAUNCH_DEPTH];
    int line[FP_LAUNCH_DEPTH];
} fp_launch;

/* The launches noted, until fp_cupti_take_launches; its lock guards fp_launch_on too. */
static fp_cupti_list fp_launches = FP_CUPTI_LIST_INIT(fp_launch, 256);
static int fp_launch_on;       /* written under fp_launches.lock, read atomically */
static unsigned fp_launch_gen; /* bumped at each start: stale thread-local depths reset */

/* Per thread: how deep in noted calls it is, and the outermost one's correlation id. */
static _Thread_local int fp_tl_depth;
static _Thread_local uint32_t fp_tl_outer;
static _Thread_local unsigned fp_tl_gen;

/* See cupti_int.h. */
void
fp_cupti_launches_active(int on)
{
    pthread_mutex_lock(&fp_launches.lock);
    if (on)
        fp_launch_gen++;
    __atomic_store_n(&fp_launch_on, on, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fp_launches.lock);
}

/* Whether an API call puts work on the GPU (a launch, copy or memset). */
static int
fp_is_launch(const char *name)
{
    return name != NULL &&
           (strstr(name, "Launch") || strstr(name, "Memcpy") || strstr(name, "Memset"));
}

/* Notes the calling thread's Python stack into l; the thread holds the GIL.  Never fails
 * (a frame the interpreter cannot give ends the stack). */
static void
fp_capture_stack(fp_launch *l)
{
    PyFrameObject *f = PyEval_GetFrame();
    Py_XINCREF(f);
    while (f != NULL && l->depth < FP_LAUNCH_DEPTH) {
        PyFrameObject *back = PyFrame_GetBack(f);
        l->code[l->depth] = (PyObject *)PyFrame_GetCode(f);
        l->line[l->depth] = PyFrame_GetLineNumber(f);
        l->depth++;
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
}

/* Appends l (taking its references) if noting is on.  Returns 0, or -1 when it was not
 * kept (its references are then the caller's to drop). */
static int
fp_launch_push(const fp_launch *l)
{
    int rc = -1;
    pthread_mutex_lock(&fp_launches.lock);
    if (!fp_launch_on || fp_cupti_list_push(&fp_launches, l) < 0)
        goto error;
    rc = 0;
error:
    pthread_mutex_unlock(&fp_launches.lock);
    return rc;
}

/* See cupti_int.h. */
void CUPTIAPI
fp_cupti_api_callback(FP_UNUSED void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                      const void *cbdata)
{
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)cbdata;
    fp_launch l;
    unsigned gen;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return;
    if (!__atomic_load_n(&fp_launch_on, __ATOMIC_ACQUIRE) || !fp_is_launch(cb->functionName))
        return;
    gen = __atomic_load_n(&fp_launch_gen, __ATOMIC_RELAXED);
    if (fp_tl_gen != gen) {
        fp_tl_gen = gen;
        fp_tl_depth = 0;
    }
    if (cb->callbackSite == CUPTI_API_EXIT) {
        if (fp_tl_depth > 0)
            fp_tl_depth--;
        return;
    }
    l.correlation = cb->correlationId;
    l.tid = (uint32_t)syscall(SYS_gettid);
    l.cbid = (uint32_t)cbid;
    l.domain = (int)domain;
    l.depth = 0;
    l.alias = 0;
    if (fp_tl_depth++ > 0) {
        l.alias = fp_tl_outer;
        fp_launch_push(&l);
        return;
    }
    fp_tl_outer = l.correlation;
    /* PyGILState_Check() alone answers 1 on any thread once subinterpreters have turned its
     * check off: a thread that never ran Python has no thread state of its own. */
    if (PyGILState_GetThisThreadState() != NULL && PyGILState_Check()) {
        fp_capture_stack(&l);
        if (fp_launch_push(&l) != 0)
            for (int i = 0; i < l.depth; i++)
                Py_DECREF(l.code[i]);
    } else {
        fp_launch_push(&l);
    }
}

/* Drops the code objects one noted launch holds.  Returns nothing. */
static void
fp_launch_release(void *item)
{
    fp_launch *l = item;
    for (int j = 0; j < l->depth; j++)
        Py_DECREF(l->code[j]);
}

/* One noted launch as (correlation, tid, domain, cbid, alias, ((code, line), ...)).
 * Returns a new tuple, or NULL with an exception. */
static PyObject *
fp_launch_tuple(const void *item)
{
    const fp_launch *l = item;
    PyObject *stack = PyTuple_New(l->depth), *res = NULL;
    if (stack == NULL)
        goto error;
    for (int i = 0; i < l->depth; i++) {
        PyObject *fr = Py_BuildValue("(Oi)", l->code[i], l->line[i]);
        if (fr == NULL)
            goto error;
        PyTuple_SET_ITEM(stack, i, fr);
    }
    res = Py_BuildValue("(IIiIIO)", l->correlation, l->tid, l->domain, l->cbid, l->alias, stack);
error:
    Py_XDECREF(stack);
    return res;
}

/* See cupti_int.h. */
PyObject *
fp_cupti_take_launches(size_t *dropped)
{
    return fp_cupti_list_take_py(&fp_launches, dropped, fp_launch_tuple, fp_launch_release);
}
#endif
