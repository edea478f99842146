/* cuda/cupti.c - CUPTI activity tracing of kernels, copies and memsets, with libcupti
 * dlopen'ed on first use.  CUPTI hands completed buffers to a callback (on its own thread, or
 * inside the flush); the callback turns each record into a small plain record under a mutex,
 * and _cuda_cupti_stop() returns them as tuples.  Only the leading fields that every CUPTI
 * record version shares are read.  CUDA builds only. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The leading fields of CUPTI's kernel records (CUpti_ActivityKernel4 ... Kernel10 share them)
 * and of its memcpy and memset records (every version), so that the record version of the
 * libcupti loaded at run time does not matter. */
typedef struct {
    uint32_t kind;
    uint8_t cache_config, shared_memory_config;
    uint16_t registers;
    uint32_t pgc_requested, pgc_executed;
    uint64_t start, end, completed;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_smem, dynamic_smem;
    uint32_t local_per_thread, local_total;
    uint32_t correlation;
    int64_t grid_id;
    const char *name;
} fp_cupti_kernel;

typedef struct {
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
} fp_cupti_copy;

_Static_assert(offsetof(fp_cupti_kernel, start) == 16 && offsetof(fp_cupti_kernel, device) == 40 &&
                   offsetof(fp_cupti_kernel, stream) == 48 &&
                   offsetof(fp_cupti_kernel, correlation) == 92 &&
                   offsetof(fp_cupti_kernel, name) == 104,
               "CUPTI kernel record layout");
_Static_assert(offsetof(fp_cupti_copy, bytes) == 8 && offsetof(fp_cupti_copy, device) == 32 &&
                   offsetof(fp_cupti_copy, correlation) == 44,
               "CUPTI memcpy/memset record layout");

typedef struct fp_trace_rec {
    int kind; /* 0 kernel, 1 memcpy, 2 memset */
    uint64_t start, end, bytes;
    uint32_t device, stream, correlation;
    int copy_kind;
    char *name;
} fp_trace_rec;

/* Process-wide trace buffer (CUPTI's callbacks carry no user pointer). */
static pthread_mutex_t fp_trace_lock = PTHREAD_MUTEX_INITIALIZER;
static fp_trace_rec *fp_trace_recs;
static size_t fp_trace_n, fp_trace_cap;
static size_t fp_trace_dropped;
static void *fp_cupti;
static int fp_cupti_registered;

typedef CUptiResult (*fp_reg_t)(CUpti_BuffersCallbackRequestFunc,
                                CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*fp_kind_t)(CUpti_ActivityKind);
typedef CUptiResult (*fp_flush_t)(uint32_t);
typedef CUptiResult (*fp_next_t)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*fp_dropped_t)(CUcontext, uint32_t, size_t *);
static fp_next_t fp_cupti_next;
static fp_dropped_t fp_cupti_dropped;

#define FP_TRACE_BUF (4u << 20)

/* CUPTI asks for a buffer.  Never fails (a NULL buffer makes CUPTI drop records). */
static void CUPTIAPI
fp_trace_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, FP_TRACE_BUF) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? FP_TRACE_BUF : 0;
    *max_records = 0;
}

/* Appends r under the lock (drops it when memory runs out). */
static void
fp_trace_push(const fp_trace_rec *r)
{
    if (fp_trace_n == fp_trace_cap) {
        size_t cap = fp_trace_cap ? 2 * fp_trace_cap : 1024;
        fp_trace_rec *p = realloc(fp_trace_recs, cap * sizeof *p);
        if (p == NULL) {
            fp_trace_dropped++;
            free(r->name);
            return;
        }
        fp_trace_recs = p;
        fp_trace_cap = cap;
    }
    fp_trace_recs[fp_trace_n++] = *r;
}

/* CUPTI returns a filled buffer: copy its records out, free it. */
static void CUPTIAPI
fp_trace_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, FP_UNUSED size_t size,
                  size_t valid)
{
    CUpti_Activity *rec = NULL;
    size_t dropped = 0;
    pthread_mutex_lock(&fp_trace_lock);
    while (valid > 0 && fp_cupti_next(buffer, valid, &rec) == CUPTI_SUCCESS) {
        fp_trace_rec r;
        memset(&r, 0, sizeof r);
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const fp_cupti_kernel *k = (const fp_cupti_kernel *)rec;
            r.kind = 0;
            r.start = k->start;
            r.end = k->end;
            r.device = k->device;
            r.stream = k->stream;
            r.correlation = k->correlation;
            r.name = k->name ? strdup(k->name) : NULL;
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY ||
                   rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const fp_cupti_copy *c = (const fp_cupti_copy *)rec;
            r.kind = rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY ? 1 : 2;
            r.start = c->start;
            r.end = c->end;
            r.bytes = c->bytes;
            r.device = c->device;
            r.stream = c->stream;
            r.correlation = c->correlation;
            r.copy_kind = r.kind == 1 ? c->copy_kind : 0;
        } else {
            continue;
        }
        fp_trace_push(&r);
    }
    if (fp_cupti_dropped != NULL && fp_cupti_dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        fp_trace_dropped += dropped;
    pthread_mutex_unlock(&fp_trace_lock);
    free(buffer);
}

static const CUpti_ActivityKind fp_trace_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

/* _cuda_cupti_start(lib_paths) -> None: loads CUPTI (first time), registers the buffer
 * callbacks and enables kernel, memcpy and memset activity.  Returns NULL with
 * CudaUnavailableError (no CUPTI) or RuntimeError (a CUPTI failure, with its code). */
PyObject *
fp_cuda_cupti_start(PyObject *m, PyObject *args)
{
    PyObject *paths;
    const char *last = "";
    char msg[768];
    CUptiResult rc;
    fp_kind_t enable;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &paths))
        return NULL;
    for (Py_ssize_t i = 0; fp_cupti == NULL && i < PyTuple_GET_SIZE(paths); i++) {
        const char *p = PyUnicode_AsUTF8(PyTuple_GET_ITEM(paths, i));
        if (p == NULL)
            return NULL;
        fp_cupti = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (fp_cupti == NULL)
            last = dlerror();
    }
    if (fp_cupti == NULL) {
        snprintf(msg, sizeof msg, "CUPTI (libcupti) could not be loaded (last error: %s)",
                 last ? last : "none");
        return fp_cuda_unavailable(m, msg);
    }
    fp_cupti_next = (fp_next_t)dlsym(fp_cupti, "cuptiActivityGetNextRecord");
    fp_cupti_dropped = (fp_dropped_t)dlsym(fp_cupti, "cuptiActivityGetNumDroppedRecords");
    enable = (fp_kind_t)dlsym(fp_cupti, "cuptiActivityEnable");
    if (fp_cupti_next == NULL || enable == NULL)
        return fp_cuda_unavailable(m, "the loaded libcupti lacks the activity API");
    if (!fp_cupti_registered) {
        fp_reg_t reg = (fp_reg_t)dlsym(fp_cupti, "cuptiActivityRegisterCallbacks");
        if (reg == NULL)
            return fp_cuda_unavailable(m,
                                       "the loaded libcupti lacks cuptiActivityRegisterCallbacks");
        rc = reg(fp_trace_request, fp_trace_complete);
        if (rc != CUPTI_SUCCESS) {
            PyErr_Format(PyExc_RuntimeError, "cuptiActivityRegisterCallbacks failed (CUPTI %d)",
                         (int)rc);
            return NULL;
        }
        fp_cupti_registered = 1;
    }
    for (size_t i = 0; i < sizeof fp_trace_kinds / sizeof fp_trace_kinds[0]; i++) {
        rc = enable(fp_trace_kinds[i]);
        if (rc != CUPTI_SUCCESS) {
            PyErr_Format(PyExc_RuntimeError,
                         "cuptiActivityEnable(%d) failed (CUPTI %d; another profiler attached?)",
                         (int)fp_trace_kinds[i], (int)rc);
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* _cuda_cupti_stop() -> (records, dropped): flushes CUPTI (GIL released), disables the
 * activity kinds and returns every record collected since the last stop, as tuples
 * (kind, name, start_ns, end_ns, device, stream, correlation, bytes, copy_kind).
 * Returns NULL with an exception. */
PyObject *
fp_cuda_cupti_stop(PyObject *m, FP_UNUSED PyObject *args)
{
    fp_flush_t flush;
    fp_kind_t disable;
    fp_trace_rec *recs;
    size_t n, dropped;
    PyObject *list = NULL, *res = NULL;
    if (fp_cupti == NULL)
        return fp_cuda_unavailable(m, "CUPTI tracing was not started");
    flush = (fp_flush_t)dlsym(fp_cupti, "cuptiActivityFlushAll");
    disable = (fp_kind_t)dlsym(fp_cupti, "cuptiActivityDisable");
    Py_BEGIN_ALLOW_THREADS if (flush != NULL) flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (disable != NULL)
        for (size_t i = 0; i < sizeof fp_trace_kinds / sizeof fp_trace_kinds[0]; i++)
            disable(fp_trace_kinds[i]);
    if (flush != NULL)
        flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    Py_END_ALLOW_THREADS pthread_mutex_lock(&fp_trace_lock);
    recs = fp_trace_recs;
    n = fp_trace_n;
    dropped = fp_trace_dropped;
    fp_trace_recs = NULL;
    fp_trace_n = fp_trace_cap = fp_trace_dropped = 0;
    pthread_mutex_unlock(&fp_trace_lock);
    list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        goto error;
    for (size_t i = 0; i < n; i++) {
        fp_trace_rec *r = &recs[i];
        PyObject *t = Py_BuildValue("izKKIIIKi", r->kind, r->name, (unsigned long long)r->start,
                                    (unsigned long long)r->end, r->device, r->stream,
                                    r->correlation, (unsigned long long)r->bytes, r->copy_kind);
        if (t == NULL)
            goto error;
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    res = Py_BuildValue("On", list, (Py_ssize_t)dropped);
error:
    Py_XDECREF(list);
    for (size_t i = 0; i < n; i++)
        free(recs[i].name);
    free(recs);
    return res;
}
typedef CUptiResult (*fp_version_t)(uint32_t *);

/* _cuda_cupti_version(lib_paths) -> (cupti_api_version, driver_cuda_version): loads CUPTI as
 * _cuda_cupti_start does (the first of lib_paths that opens) and returns its API version
 * (cuptiGetVersion; 0 when it cannot say) and the driver's CUDA version (0 without a driver),
 * so that the caller can refuse a libcupti newer than the driver before starting it.
 * Returns NULL with CudaUnavailableError when no CUPTI can be loaded. */
PyObject *
fp_cuda_cupti_version(PyObject *m, PyObject *args)
{
    PyObject *paths;
    const char *last = "";
    char msg[768];
    uint32_t version = 0;
    int driver = 0;
    fp_version_t get;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &paths))
        return NULL;
    for (Py_ssize_t i = 0; fp_cupti == NULL && i < PyTuple_GET_SIZE(paths); i++) {
        const char *p = PyUnicode_AsUTF8(PyTuple_GET_ITEM(paths, i));
        if (p == NULL)
            return NULL;
        fp_cupti = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (fp_cupti == NULL)
            last = dlerror();
    }
    if (fp_cupti == NULL) {
        snprintf(msg, sizeof msg, "CUPTI (libcupti) could not be loaded (last error: %s)",
                 last ? last : "none");
        return fp_cuda_unavailable(m, msg);
    }
    get = (fp_version_t)dlsym(fp_cupti, "cuptiGetVersion");
    if (get == NULL || get(&version) != CUPTI_SUCCESS)
        version = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    return Py_BuildValue("kI", (unsigned long)version, (unsigned int)driver);
}
#endif
