/* cuda/runtime.c - availability probe, device properties, synchronization, events and memory
 * through the (statically linked) CUDA runtime.  Every wait releases the GIL.  CUDA builds only. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <string.h>

#include "cuda/fp_cuda.h"

/* _cuda_probe() -> (count, err, reason): asks the runtime for the device count and, when that
 * fails, says why in words (no driver, driver too old, no device, or the CUDA error).  err is
 * 0 and reason "" when count > 0.  Returns NULL only on memory errors. */
PyObject *
fp_cuda_probe(FP_UNUSED PyObject *m, FP_UNUSED PyObject *args)
{
    int count = 0, driver = 0, runtime = 0;
    cudaError_t err;
    char reason[512];
    Py_BEGIN_ALLOW_THREADS err = cudaGetDeviceCount(&count);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    Py_END_ALLOW_THREADS reason[0] = '\0';
    if (err == cudaSuccess && count == 0)
        err = cudaErrorNoDevice;
    if (err == cudaErrorInsufficientDriver && driver == 0)
        snprintf(reason, sizeof reason,
                 "no NVIDIA driver: libcuda.so.1 could not be loaded (CUDA runtime %d.%d)",
                 runtime / 1000, (runtime % 1000) / 10);
    else if (err == cudaErrorInsufficientDriver)
        snprintf(
            reason, sizeof reason,
            "the NVIDIA driver is too old: it supports CUDA %d.%d, fastprof's runtime needs %d.%d",
            driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
    else if (err == cudaErrorNoDevice)
        snprintf(reason, sizeof reason, "no CUDA device found (driver CUDA %d.%d)", driver / 1000,
                 (driver % 1000) / 10);
    else if (err != cudaSuccess)
        snprintf(reason, sizeof reason, "CUDA initialization failed: %s (%s)",
                 cudaGetErrorString(err), cudaGetErrorName(err));
    if (err != cudaSuccess)
        count = 0;
    return Py_BuildValue("iis", count, (int)err, reason);
}

/* _cuda_versions() -> (driver, runtime) as CUDA encodes them (12040 = 12.4; driver 0 when
 * there is none).  Never fails. */
PyObject *
fp_cuda_versions(FP_UNUSED PyObject *m, FP_UNUSED PyObject *args)
{
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    return Py_BuildValue("ii", driver, runtime);
}

/* Returns attribute a of device dev, or -1 when the runtime cannot say. */
static int
fp_cuda_attr(enum cudaDeviceAttr a, int dev)
{
    int v = -1;
    if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess)
        return -1;
    return v;
}

/* _cuda_device_props(dev) -> dict of the device's properties.  Returns NULL with CudaError. */
PyObject *
fp_cuda_device_props(PyObject *m, PyObject *args)
{
    int dev;
    struct cudaDeviceProp p;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "i", &dev))
        return NULL;
    memset(&p, 0, sizeof p);
    err = cudaGetDeviceProperties(&p, dev);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaGetDeviceProperties");
    return Py_BuildValue("{s:i,s:s,s:(ii),s:i,s:K,s:i,s:i,s:i,s:i,s:i,s:i,s:K,s:i,s:i}", "index",
                         dev, "name", p.name, "compute_capability", p.major, p.minor,
                         "multiprocessors", p.multiProcessorCount, "total_memory",
                         (unsigned long long)p.totalGlobalMem, "l2_cache_bytes", p.l2CacheSize,
                         "clock_khz", fp_cuda_attr(cudaDevAttrClockRate, dev), "memory_clock_khz",
                         fp_cuda_attr(cudaDevAttrMemoryClockRate, dev), "memory_bus_bits",
                         fp_cuda_attr(cudaDevAttrGlobalMemoryBusWidth, dev), "warp_size",
                         p.warpSize, "max_threads_per_block", p.maxThreadsPerBlock,
                         "shared_memory_per_block", (unsigned long long)p.sharedMemPerBlock,
                         "pci_bus_id", p.pciBusID, "integrated", p.integrated);
}

/* _cuda_set_device(dev) -> None.  Returns NULL with CudaError. */
PyObject *
fp_cuda_set_device(PyObject *m, PyObject *args)
{
    int dev;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "i", &dev))
        return NULL;
    err = cudaSetDevice(dev);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaSetDevice");
    Py_RETURN_NONE;
}

/* _cuda_get_device() -> int.  Returns NULL with CudaError. */
PyObject *
fp_cuda_get_device(PyObject *m, FP_UNUSED PyObject *args)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaGetDevice");
    return PyLong_FromLong(dev);
}

/* _cuda_synchronize() -> None, waiting for the current device with the GIL released.
 * Returns NULL with CudaError (a failed kernel reports here). */
PyObject *
fp_cuda_synchronize(PyObject *m, FP_UNUSED PyObject *args)
{
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS err = cudaDeviceSynchronize();
    Py_END_ALLOW_THREADS if (err != cudaSuccess) return fp_cuda_raise(m, err,
                                                                      "cudaDeviceSynchronize");
    Py_RETURN_NONE;
}

/* _cuda_stream_synchronize(stream) -> None, GIL released.  Returns NULL with CudaError. */
PyObject *
fp_cuda_stream_synchronize(PyObject *m, PyObject *args)
{
    PyObject *o;
    void *s;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "O", &o) || fp_cuda_ptr(o, &s) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS err = cudaStreamSynchronize((cudaStream_t)s);
    Py_END_ALLOW_THREADS if (err != cudaSuccess) return fp_cuda_raise(m, err,
                                                                      "cudaStreamSynchronize");
    Py_RETURN_NONE;
}

/* _cuda_event_create() -> int handle of a timing event.  Returns NULL with CudaError. */
PyObject *
fp_cuda_event_create(PyObject *m, FP_UNUSED PyObject *args)
{
    cudaEvent_t ev = NULL;
    cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDefault);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaEventCreate");
    return PyLong_FromVoidPtr((void *)ev);
}

/* _cuda_event_destroy(ev) -> None.  Returns NULL with an exception on a bad argument only:
 * destroy errors (a context already gone at exit) are ignored. */
PyObject *
fp_cuda_event_destroy(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *o;
    void *ev;
    if (!PyArg_ParseTuple(args, "O", &o) || fp_cuda_ptr(o, &ev) < 0)
        return NULL;
    if (ev != NULL)
        cudaEventDestroy((cudaEvent_t)ev);
    Py_RETURN_NONE;
}

/* _cuda_event_record(ev, stream) -> None.  Returns NULL with CudaError. */
PyObject *
fp_cuda_event_record(PyObject *m, PyObject *args)
{
    PyObject *oe, *os;
    void *ev, *s;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "OO", &oe, &os) || fp_cuda_ptr(oe, &ev) < 0 ||
        fp_cuda_ptr(os, &s) < 0)
        return NULL;
    err = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaEventRecord");
    Py_RETURN_NONE;
}

/* _cuda_event_elapsed(start, end) -> float ms, waiting for end with the GIL released.
 * Returns NULL with CudaError. */
PyObject *
fp_cuda_event_elapsed(PyObject *m, PyObject *args)
{
    PyObject *o0, *o1;
    void *e0, *e1;
    float ms = 0.0f;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "OO", &o0, &o1) || fp_cuda_ptr(o0, &e0) < 0 ||
        fp_cuda_ptr(o1, &e1) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS err = cudaEventSynchronize((cudaEvent_t)e1);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&ms, (cudaEvent_t)e0, (cudaEvent_t)e1);
    Py_END_ALLOW_THREADS if (err != cudaSuccess) return fp_cuda_raise(m, err,
                                                                      "cudaEventElapsedTime");
    return PyFloat_FromDouble((double)ms);
}

#define FP_MAX_TIMED_EVENTS 16

/* _cuda_event_times(events) -> tuple of the ms from each event of the tuple to the next
 * (len(events) - 1 floats, 2 to 16 events), waiting for each event with the GIL released: the
 * timings of one kernel call in one call.  Returns NULL with CudaError, or TypeError /
 * ValueError for a bad argument. */
PyObject *
fp_cuda_event_times(PyObject *m, PyObject *args)
{
    PyObject *evs, *res = NULL, *f;
    void *ev[FP_MAX_TIMED_EVENTS];
    float ms[FP_MAX_TIMED_EVENTS];
    Py_ssize_t n = 0;
    cudaError_t err = cudaSuccess;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &evs))
        goto error;
    n = PyTuple_GET_SIZE(evs);
    if (n < 2 || n > FP_MAX_TIMED_EVENTS) {
        PyErr_Format(PyExc_ValueError, "events must hold 2 to %d events, got %zd",
                     FP_MAX_TIMED_EVENTS, n);
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (fp_cuda_ptr(PyTuple_GET_ITEM(evs, i), &ev[i]) < 0)
            goto error;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n && err == cudaSuccess; i++) err =
        cudaEventSynchronize((cudaEvent_t)ev[i]);
    for (Py_ssize_t i = 0; i + 1 < n && err == cudaSuccess; i++)
        err = cudaEventElapsedTime(&ms[i], (cudaEvent_t)ev[i], (cudaEvent_t)ev[i + 1]);
    Py_END_ALLOW_THREADS if (err != cudaSuccess)
    {
        fp_cuda_raise(m, err, "cudaEventElapsedTime");
        goto error;
    }
    if ((res = PyTuple_New(n - 1)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if ((f = PyFloat_FromDouble((double)ms[i])) == NULL)
            goto error;
        PyTuple_SET_ITEM(res, i, f);
    }
    return res;
error:
    Py_XDECREF(res);
    return NULL;
}

/* _cuda_stream_wait_event(stream, ev) -> None: work later queued on stream waits for ev.
 * Returns NULL with CudaError. */
PyObject *
fp_cuda_stream_wait_event(PyObject *m, PyObject *args)
{
    PyObject *os, *oe;
    void *s, *ev;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "OO", &os, &oe) || fp_cuda_ptr(os, &s) < 0 ||
        fp_cuda_ptr(oe, &ev) < 0)
        return NULL;
    err = cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaStreamWaitEvent");
    Py_RETURN_NONE;
}

#define FP_MAX_POOL_DEVICES 64
/* Per device: 0 not asked yet, 1 fastprof's own pool made (fp_pools[dev]), -1 no pools. */
static signed char fp_pool_state[FP_MAX_POOL_DEVICES];
static cudaMemPool_t fp_pools[FP_MAX_POOL_DEVICES];

/* Returns fastprof's own memory pool of device dev, made on first use (device memory, kept
 * cached instead of handed back at every sync), or NULL when the device has no stream-ordered
 * pools (then cudaMalloc).  The device's default pool, which other libraries share, is left
 * as it is.  Sets no exception. */
static cudaMemPool_t
fp_cuda_pool(int dev)
{
    if (dev < 0 || dev >= FP_MAX_POOL_DEVICES)
        return NULL;
    if (fp_pool_state[dev] == 0) {
        int ok = 0;
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        fp_pool_state[dev] = -1;
        if (cudaDeviceGetAttribute(&ok, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess &&
            ok && cudaMemPoolCreate(&fp_pools[dev], &props) == cudaSuccess) {
            uint64_t keep = UINT64_MAX;
            cudaMemPoolSetAttribute(fp_pools[dev], cudaMemPoolAttrReleaseThreshold, &keep);
            fp_pool_state[dev] = 1;
        }
        cudaGetLastError();
    }
    return fp_pool_state[dev] == 1 ? fp_pools[dev] : NULL;
}

/* _cuda_malloc(nbytes, stream) -> (int device pointer, stream_ordered): allocates on the
 * current device, stream-ordered (cudaMallocFromPoolAsync on stream, from fastprof's own pool)
 * where the device supports memory pools, else with cudaMalloc.  (0, False) for 0 bytes.  Returns
 * NULL with CudaError (cudaErrorMemoryAllocation when the device is full). */
PyObject *
fp_cuda_malloc(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    PyObject *os;
    void *p = NULL, *s;
    int dev = 0, async;
    cudaMemPool_t pool;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "nO", &n, &os) || fp_cuda_ptr(os, &s) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be >= 0");
        return NULL;
    }
    if (n == 0)
        return Py_BuildValue("iO", 0, Py_False);
    err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaGetDevice");
    pool = fp_cuda_pool(dev);
    async = pool != NULL;
    if (async)
        err = cudaMallocFromPoolAsync(&p, (size_t)n, pool, (cudaStream_t)s);
    else
        err = cudaMalloc(&p, (size_t)n);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* allocation errors are not sticky: clear them */
        return fp_cuda_raise(m, err, async ? "cudaMallocFromPoolAsync" : "cudaMalloc");
    }
    return Py_BuildValue("NO", PyLong_FromVoidPtr(p), async ? Py_True : Py_False);
}

/* _cuda_free(ptr, stream, stream_ordered) -> None: cudaFreeAsync on stream for stream-ordered
 * blocks, else cudaFree.  Errors at free (a context gone at exit) are ignored. */
PyObject *
fp_cuda_free(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *o, *os;
    void *p, *s;
    int async;
    if (!PyArg_ParseTuple(args, "OOp", &o, &os, &async) || fp_cuda_ptr(o, &p) < 0 ||
        fp_cuda_ptr(os, &s) < 0)
        return NULL;
    if (p != NULL) {
        if (async)
            cudaFreeAsync(p, (cudaStream_t)s);
        else
            cudaFree(p);
        cudaGetLastError();
    }
    Py_RETURN_NONE;
}

/* _cuda_release(ptr, device, fence, stream_ordered) -> None: frees a block of fastprof's on
 * the null stream of its device, which always exists: makes device current when it is not, makes
 * the null stream wait for the event fence first (0: none), frees (cudaFreeAsync for
 * stream-ordered blocks, else cudaFree) and makes the previous device current again.  One call
 * for what a dropped array needs.  Errors of the CUDA calls (a context gone at exit) are
 * ignored.  Returns NULL with an exception for bad arguments only. */
PyObject *
fp_cuda_release(FP_UNUSED PyObject *m, PyObject *args)
{
    PyObject *o, *of;
    void *p = NULL, *fence = NULL;
    int dev, async, current = -1;
    if (!PyArg_ParseTuple(args, "OiOp", &o, &dev, &of, &async) || fp_cuda_ptr(o, &p) < 0 ||
        fp_cuda_ptr(of, &fence) < 0)
        goto error;
    if (p != NULL) {
        if (cudaGetDevice(&current) != cudaSuccess)
            current = -1;
        if (current != dev)
            cudaSetDevice(dev);
        if (fence != NULL)
            cudaStreamWaitEvent((cudaStream_t)0, (cudaEvent_t)fence, 0);
        if (async)
            cudaFreeAsync(p, (cudaStream_t)0);
        else
            cudaFree(p);
        if (current >= 0 && current != dev)
            cudaSetDevice(current);
        cudaGetLastError();
    }
    Py_RETURN_NONE;
error:
    return NULL;
}

/* _cuda_pointer_device(ptr) -> int: the device a device pointer belongs to (the current
 * device for host or unregistered memory).  Returns NULL with CudaError. */
PyObject *
fp_cuda_pointer_device(PyObject *m, PyObject *args)
{
    PyObject *o;
    void *p;
    struct cudaPointerAttributes a;
    cudaError_t err;
    int dev = 0;
    if (!PyArg_ParseTuple(args, "O", &o) || fp_cuda_ptr(o, &p) < 0)
        return NULL;
    memset(&a, 0, sizeof a);
    err = cudaPointerGetAttributes(&a, p);
    if (err != cudaSuccess || a.type == cudaMemoryTypeUnregistered ||
        a.type == cudaMemoryTypeHost) {
        cudaGetLastError();
        err = cudaGetDevice(&dev);
        if (err != cudaSuccess)
            return fp_cuda_raise(m, err, "cudaGetDevice");
        return PyLong_FromLong(dev);
    }
    return PyLong_FromLong(a.device);
}

/* _cuda_mem_info() -> (free, total) bytes of the current device.  Returns NULL with CudaError. */
PyObject *
fp_cuda_mem_info(PyObject *m, FP_UNUSED PyObject *args)
{
    size_t fr = 0, tot = 0;
    cudaError_t err = cudaMemGetInfo(&fr, &tot);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaMemGetInfo");
    return Py_BuildValue("KK", (unsigned long long)fr, (unsigned long long)tot);
}

/* _cuda_memcpy_htod(dst, src_buffer, stream) -> None: copies the C-contiguous buffer to the
 * device and waits for the copy (pageable memory).  Returns NULL with an exception. */
PyObject *
fp_cuda_memcpy_htod(PyObject *m, PyObject *args)
{
    PyObject *od, *os;
    Py_buffer b;
    void *d, *s;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "Oy*O", &od, &b, &os))
        return NULL;
    if (fp_cuda_ptr(od, &d) < 0 || fp_cuda_ptr(os, &s) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS err =
        cudaMemcpyAsync(d, b.buf, (size_t)b.len, cudaMemcpyHostToDevice, (cudaStream_t)s);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize((cudaStream_t)s);
    Py_END_ALLOW_THREADS PyBuffer_Release(&b);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaMemcpy host to device");
    Py_RETURN_NONE;
}

/* _cuda_memcpy_dtoh(dst_buffer, src, stream) -> None: fills the writable C-contiguous buffer
 * from the device, waiting for it.  Returns NULL with an exception. */
PyObject *
fp_cuda_memcpy_dtoh(PyObject *m, PyObject *args)
{
    PyObject *osrc, *os;
    Py_buffer b;
    void *src, *s;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "w*OO", &b, &osrc, &os))
        return NULL;
    if (fp_cuda_ptr(osrc, &src) < 0 || fp_cuda_ptr(os, &s) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS err =
        cudaMemcpyAsync(b.buf, src, (size_t)b.len, cudaMemcpyDeviceToHost, (cudaStream_t)s);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize((cudaStream_t)s);
    Py_END_ALLOW_THREADS PyBuffer_Release(&b);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaMemcpy device to host");
    Py_RETURN_NONE;
}

/* _cuda_upload(ptrs, buffers, stream, event=None) -> None: copies each C-contiguous buffer of
 * the sequence buffers to the device pointer of the same index in ptrs (as many), queued on
 * stream, records event (when given) on stream after them, and then waits once for the stream
 * (pageable memory): the uploads of one kernel call in one call.  Empty buffers are skipped.
 * Returns NULL with an exception (TypeError or ValueError for bad arguments, BufferError for a
 * buffer that is not C-contiguous, CudaError). */
PyObject *
fp_cuda_upload(PyObject *m, PyObject *args)
{
    PyObject *optrs, *obufs, *os, *oev = Py_None, *ptrs = NULL, *bufs = NULL, *res = NULL;
    Py_buffer b;
    void *d, *s, *ev;
    Py_ssize_t n;
    cudaError_t err = cudaSuccess;
    if (!PyArg_ParseTuple(args, "OOO|O", &optrs, &obufs, &os, &oev) || fp_cuda_ptr(os, &s) < 0 ||
        fp_cuda_ptr(oev, &ev) < 0)
        goto error;
    ptrs = PySequence_Fast(optrs, "ptrs must be a sequence of device pointers");
    if (ptrs == NULL)
        goto error;
    bufs = PySequence_Fast(obufs, "buffers must be a sequence of host buffers");
    if (bufs == NULL)
        goto error;
    n = PySequence_Fast_GET_SIZE(bufs);
    if (PySequence_Fast_GET_SIZE(ptrs) != n) {
        PyErr_Format(PyExc_ValueError, "%zd device pointers for %zd buffers",
                     PySequence_Fast_GET_SIZE(ptrs), n);
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fp_cuda_ptr(PySequence_Fast_GET_ITEM(ptrs, i), &d) < 0)
            goto error;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(bufs, i), &b, PyBUF_C_CONTIGUOUS) < 0)
            goto error;
        if (b.len > 0) {
            Py_BEGIN_ALLOW_THREADS err =
                cudaMemcpyAsync(d, b.buf, (size_t)b.len, cudaMemcpyHostToDevice, (cudaStream_t)s);
            Py_END_ALLOW_THREADS
        }
        PyBuffer_Release(&b);
        if (err != cudaSuccess) {
            fp_cuda_raise(m, err, "cudaMemcpy host to device");
            goto error;
        }
    }
    if (ev != NULL && (err = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s)) != cudaSuccess) {
        fp_cuda_raise(m, err, "cudaEventRecord");
        goto error;
    }
    Py_BEGIN_ALLOW_THREADS err = cudaStreamSynchronize((cudaStream_t)s);
    Py_END_ALLOW_THREADS if (err != cudaSuccess)
    {
        fp_cuda_raise(m, err, "cudaMemcpy host to device");
        goto error;
    }
    res = Py_NewRef(Py_None);
error:
    Py_XDECREF(ptrs);
    Py_XDECREF(bufs);
    return res;
}

/* _cuda_download(buffer, src, stream, before=None, after=None) -> None: records event before
 * (when given) on stream, copies the device memory at src into the writable C-contiguous
 * buffer (nothing for an empty one), records event after (when given), and waits for the
 * stream with the GIL released: the download of one kernel call's result, straight into the
 * array the call returns, with the events around it.  Returns NULL with an exception
 * (TypeError for bad arguments, BufferError for a buffer not writable or not C-contiguous,
 * CudaError). */
PyObject *
fp_cuda_download(PyObject *m, PyObject *args)
{
    PyObject *obuf, *osrc, *os, *ob = Py_None, *oa = Py_None;
    Py_buffer b;
    void *src, *s, *before, *after;
    int have = 0;
    const char *what = "cudaEventRecord";
    cudaError_t err = cudaSuccess;
    if (!PyArg_ParseTuple(args, "OOO|OO", &obuf, &osrc, &os, &ob, &oa) ||
        fp_cuda_ptr(osrc, &src) < 0 || fp_cuda_ptr(os, &s) < 0 || fp_cuda_ptr(ob, &before) < 0 ||
        fp_cuda_ptr(oa, &after) < 0)
        goto error;
    if (PyObject_GetBuffer(obuf, &b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto error;
    have = 1;
    Py_BEGIN_ALLOW_THREADS if (before != NULL) err =
        cudaEventRecord((cudaEvent_t)before, (cudaStream_t)s);
    if (err == cudaSuccess && b.len > 0) {
        what = "cudaMemcpy device to host";
        err = cudaMemcpyAsync(b.buf, src, (size_t)b.len, cudaMemcpyDeviceToHost, (cudaStream_t)s);
    }
    if (err == cudaSuccess && after != NULL) {
        what = "cudaEventRecord";
        err = cudaEventRecord((cudaEvent_t)after, (cudaStream_t)s);
    }
    if (err == cudaSuccess) {
        what = "cudaMemcpy device to host";
        err = cudaStreamSynchronize((cudaStream_t)s);
    }
    Py_END_ALLOW_THREADS if (err != cudaSuccess)
    {
        fp_cuda_raise(m, err, what);
        goto error;
    }
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
error:
    if (have)
        PyBuffer_Release(&b);
    return NULL;
}

/* _cuda_memcpy_dtod(dst, src, nbytes, stream) -> None, asynchronous on stream.
 * Returns NULL with an exception. */
PyObject *
fp_cuda_memcpy_dtod(PyObject *m, PyObject *args)
{
    PyObject *od, *osrc, *os;
    Py_ssize_t n;
    void *d, *src, *s;
    cudaError_t err;
    if (!PyArg_ParseTuple(args, "OOnO", &od, &osrc, &n, &os) || fp_cuda_ptr(od, &d) < 0 ||
        fp_cuda_ptr(osrc, &src) < 0 || fp_cuda_ptr(os, &s) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be >= 0");
        return NULL;
    }
    err = cudaMemcpyAsync(d, src, (size_t)n, cudaMemcpyDeviceToDevice, (cudaStream_t)s);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaMemcpy device to device");
    Py_RETURN_NONE;
}

/* _cuda_scrub(ptr, nbytes, stream) -> None: overwrites the buffer with a kernel (L2 flush).
 * Returns NULL with CudaError. */
PyObject *
fp_cuda_scrub(PyObject *m, PyObject *args)
{
    PyObject *op, *os;
    Py_ssize_t n;
    void *p, *s;
    int err;
    if (!PyArg_ParseTuple(args, "OnO", &op, &n, &os) || fp_cuda_ptr(op, &p) < 0 ||
        fp_cuda_ptr(os, &s) < 0)
        return NULL;
    err = fp_cu_scrub(p, (int64_t)n, s);
    if (err != 0)
        return fp_cuda_raise(m, err, "L2 flush kernel");
    Py_RETURN_NONE;
}

/* _cuda_spin(cycles, stream) -> None: queues a one-thread kernel that runs about cycles
 * clock cycles.  Returns NULL with CudaError. */
PyObject *
fp_cuda_spin(PyObject *m, PyObject *args)
{
    long long cycles;
    PyObject *os;
    void *s;
    int err;
    if (!PyArg_ParseTuple(args, "LO", &cycles, &os) || fp_cuda_ptr(os, &s) < 0)
        return NULL;
    err = fp_cu_spin((int64_t)cycles, s);
    if (err != 0)
        return fp_cuda_raise(m, err, "spin kernel");
    Py_RETURN_NONE;
}
#endif
