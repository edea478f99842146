/* cuda/cupti.c - CUPTI tracing: libcupti dlopen'ed on first use, one trace at a time per
 * process.  _cuda_cupti_start() subscribes to the runtime and driver API callbacks (the
 * Python stack at each launch, cupti_callbacks.c), registers the activity buffers
 * (cupti_records.c) and enables the activity kinds; _cuda_cupti_stop() flushes, disables
 * every kind it enabled, unsubscribes and detaches CUPTI (cuptiFinalize) so that the program
 * runs at full speed after the trace, and returns the records with two samples of CUPTI's
 * clock against CLOCK_MONOTONIC, from which the Python side maps CUPTI's timestamps onto
 * time.monotonic_ns()'s axis.  CUDA builds only. */
#include "cuda/cupti_int.h"

#ifdef FP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

fp_cupti_api fp_cupti_fn;

static void *fp_cupti;           /* the dlopen handle, kept for the process */
static char fp_cupti_path[4096]; /* the file it came from */
static int fp_cupti_started;     /* a trace is running */
static CUpti_SubscriberHandle fp_cupti_sub;
static int fp_cupti_subscribed;
static unsigned fp_cupti_enabled; /* bit i: fp_cupti_kinds[i] is enabled */
static unsigned long long fp_clock0[3];
static int fp_cupti_set_nvtx; /* this trace set NVTX_INJECTION64_PATH */

/* The activity kinds a trace enables, and whether a refusal fails the start. */
static const struct {
    CUpti_ActivityKind kind;
    int required;
} fp_cupti_kinds[] = {
    {CUPTI_ACTIVITY_KIND_RUNTIME, 1},
    {CUPTI_ACTIVITY_KIND_DRIVER, 1},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1},
    {CUPTI_ACTIVITY_KIND_MEMCPY, 1},
    {CUPTI_ACTIVITY_KIND_MEMSET, 1},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, 0},
    {CUPTI_ACTIVITY_KIND_MARKER, 0},
};
#define FP_NKINDS (sizeof fp_cupti_kinds / sizeof fp_cupti_kinds[0])

/* CLOCK_MONOTONIC in ns. */
static unsigned long long
fp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Samples CUPTI's clock against CLOCK_MONOTONIC: out = {cupti_ns, monotonic_ns at the
 * middle of the tightest of five reads, that read's window in ns}.  Never fails (zeros
 * when the library has no cuptiGetTimestamp). */
static void
fp_cupti_clock(unsigned long long out[3])
{
    out[0] = out[1] = out[2] = 0;
    if (fp_cupti_fn.get_timestamp == NULL)
        return;
    for (int i = 0; i < 5; i++) {
        uint64_t ts = 0;
        unsigned long long a = fp_mono_ns(), b;
        fp_cupti_fn.get_timestamp(&ts);
        b = fp_mono_ns();
        if (i == 0 || b - a < out[2]) {
            out[0] = ts;
            out[1] = a + (b - a) / 2;
            out[2] = b - a;
        }
    }
}

/* Raises RuntimeError "what failed: NAME (code)", naming the likely other holders of CUPTI
 * when CUPTI says it has another subscriber.  Returns NULL. */
static PyObject *
fp_cupti_error(const char *what, CUptiResult rc)
{
    const char *name = NULL;
    if (fp_cupti_fn.result_string == NULL || fp_cupti_fn.result_string(rc, &name) != CUPTI_SUCCESS)
        name = NULL;
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %s (%d): another tool holds CUPTI in this process, most likely Nsight "
                     "Systems (nsys), Nsight Compute or torch.profiler (Kineto); stop it, or "
                     "trace with it instead of fastprof",
                     what, name ? name : "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", (int)rc);
    else
        PyErr_Format(PyExc_RuntimeError, "%s: %s (%d)", what, name ? name : "CUPTI error", (int)rc);
    return NULL;
}

/* Loads libcupti from the first of paths that opens and resolves its entry points.
 * Returns 0, or -1 with CudaUnavailableError. */
static int
fp_cupti_load(PyObject *m, PyObject *paths)
{
    const char *last = "";
    char msg[768];
    Dl_info info;
    void *h = NULL;
    for (Py_ssize_t i = 0; h == NULL && i < PyTuple_GET_SIZE(paths); i++) {
        const char *p = PyUnicode_AsUTF8(PyTuple_GET_ITEM(paths, i));
        if (p == NULL)
            goto error;
        h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            last = dlerror();
    }
    if (h == NULL) {
        snprintf(msg, sizeof msg, "CUPTI (libcupti) could not be loaded (last error: %s)",
                 last ? last : "none");
        fp_cuda_unavailable(m, msg);
        goto error;
    }
#define FP_SYM(field, sym) *(void **)(&fp_cupti_fn.field) = dlsym(h, sym)
    FP_SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    FP_SYM(enable, "cuptiActivityEnable");
    FP_SYM(disable, "cuptiActivityDisable");
    FP_SYM(flush_all, "cuptiActivityFlushAll");
    FP_SYM(next_record, "cuptiActivityGetNextRecord");
    FP_SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    FP_SYM(subscribe, "cuptiSubscribe");
    FP_SYM(unsubscribe, "cuptiUnsubscribe");
    FP_SYM(enable_domain, "cuptiEnableDomain");
    FP_SYM(finalize, "cuptiFinalize");
    FP_SYM(get_timestamp, "cuptiGetTimestamp");
    FP_SYM(result_string, "cuptiGetResultString");
    FP_SYM(set_thread_id_type, "cuptiActivitySetThreadIdType");
    FP_SYM(callback_name, "cuptiGetCallbackName");
    FP_SYM(get_version, "cuptiGetVersion");
#undef FP_SYM
    if (!fp_cupti_fn.register_callbacks || !fp_cupti_fn.enable || !fp_cupti_fn.disable ||
        !fp_cupti_fn.flush_all || !fp_cupti_fn.next_record || !fp_cupti_fn.subscribe ||
        !fp_cupti_fn.unsubscribe || !fp_cupti_fn.enable_domain) {
        memset(&fp_cupti_fn, 0, sizeof fp_cupti_fn);
        dlclose(h);
        fp_cuda_unavailable(m, "the loaded libcupti lacks the activity or callback API");
        goto error;
    }
    fp_cupti = h;
    fp_cupti_path[0] = '\0';
    if (dladdr(*(void **)&fp_cupti_fn.enable, &info) && info.dli_fname != NULL)
        snprintf(fp_cupti_path, sizeof fp_cupti_path, "%s", info.dli_fname);
    return 0;
error:
    return -1;
}

/* Undoes what a start did, in CUPTI's order: no more API callbacks, the buffers flushed,
 * every enabled kind disabled, a last flush, then CUPTI detached when this trace subscribed
 * (so never when another tool holds it).  Call without the GIL.  Never fails. */
static void
fp_cupti_release(void)
{
    int owned = fp_cupti_subscribed;
    fp_cupti_launches_active(0);
    if (fp_cupti_subscribed) {
        fp_cupti_fn.enable_domain(0, fp_cupti_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
        fp_cupti_fn.enable_domain(0, fp_cupti_sub, CUPTI_CB_DOMAIN_DRIVER_API);
        fp_cupti_fn.unsubscribe(fp_cupti_sub);
        fp_cupti_subscribed = 0;
    }
    if (owned)
        fp_cupti_fn.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < FP_NKINDS; i++)
        if (fp_cupti_enabled & (1u << i))
            fp_cupti_fn.disable(fp_cupti_kinds[i].kind);
    if (owned) {
        fp_cupti_fn.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        if (fp_cupti_fn.finalize != NULL)
            fp_cupti_fn.finalize();
    }
    fp_cupti_enabled = 0;
}

/* NVTX ranges reach CUPTI through NVTX's injection hook, which each NVTX user reads at its
 * first NVTX call: on (1) points NVTX_INJECTION64_PATH at this libcupti unless the user chose
 * another; off (0) takes back what on set, so that processes started after the trace do not
 * load libcupti.  Call with the GIL (the environment is shared with os.environ's writers).
 * Never fails. */
static void
fp_cupti_nvtx_env(int on)
{
    if (on && fp_cupti_path[0] != '\0' && getenv("NVTX_INJECTION64_PATH") == NULL) {
        fp_cupti_set_nvtx = setenv("NVTX_INJECTION64_PATH", fp_cupti_path, 0) == 0;
    } else if (!on && fp_cupti_set_nvtx) {
        const char *v = getenv("NVTX_INJECTION64_PATH");
        if (v != NULL && strcmp(v, fp_cupti_path) == 0)
            unsetenv("NVTX_INJECTION64_PATH");
        fp_cupti_set_nvtx = 0;
    }
}

/* Subscribes, points NVTX at CUPTI, registers the buffers and enables the kinds.  Returns 0, or -1
 * with a RuntimeError (the caller releases what was done). */
static int
fp_cupti_begin(void)
{
    CUptiResult rc = fp_cupti_fn.subscribe(&fp_cupti_sub, fp_cupti_api_callback, NULL);
    if (rc != CUPTI_SUCCESS) {
        fp_cupti_error("cuptiSubscribe failed", rc);
        goto error;
    }
    fp_cupti_subscribed = 1;
    fp_cupti_nvtx_env(1);
    rc = fp_cupti_fn.register_callbacks(fp_cupti_buffer_request, fp_cupti_buffer_complete);
    if (rc != CUPTI_SUCCESS) {
        fp_cupti_error("cuptiActivityRegisterCallbacks failed", rc);
        goto error;
    }
    if (fp_cupti_fn.set_thread_id_type != NULL) /* thread ids as threading.get_native_id() */
        fp_cupti_fn.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    fp_cupti_launches_active(1);
    rc = fp_cupti_fn.enable_domain(1, fp_cupti_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (rc == CUPTI_SUCCESS)
        rc = fp_cupti_fn.enable_domain(1, fp_cupti_sub, CUPTI_CB_DOMAIN_DRIVER_API);
    if (rc != CUPTI_SUCCESS) {
        fp_cupti_error("cuptiEnableDomain failed", rc);
        goto error;
    }
    for (size_t i = 0; i < FP_NKINDS; i++) {
        rc = fp_cupti_fn.enable(fp_cupti_kinds[i].kind);
        if (rc == CUPTI_SUCCESS) {
            fp_cupti_enabled |= 1u << i;
        } else if (fp_cupti_kinds[i].required) {
            char what[64];
            snprintf(what, sizeof what, "cuptiActivityEnable(%d) failed",
                     (int)fp_cupti_kinds[i].kind);
            fp_cupti_error(what, rc);
            goto error;
        }
    }
    return 0;
error:
    return -1;
}

/* _cuda_cupti_start(lib_paths) -> (library path, enabled kinds, (cupti_ns, monotonic_ns,
 * window_ns)): loads CUPTI (first time) and starts a trace.  Returns NULL with
 * CudaUnavailableError (no CUPTI) or RuntimeError (a trace is running, a CUPTI failure:
 * everything done so far is undone). */
PyObject *
fp_cuda_cupti_start(PyObject *m, PyObject *args)
{
    PyObject *paths, *kinds = NULL, *res = NULL;
    int rc;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &paths))
        goto error;
    if (fp_cupti_started) {
        PyErr_SetString(PyExc_RuntimeError, "a CUPTI trace is already running in this process");
        goto error;
    }
    if (fp_cupti == NULL && fp_cupti_load(m, paths) != 0)
        goto error;
    fp_cupti_clock(fp_clock0);
    rc = fp_cupti_begin();
    if (rc != 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        Py_BEGIN_ALLOW_THREADS fp_cupti_release();
        Py_END_ALLOW_THREADS fp_cupti_nvtx_env(0);
        PyErr_Restore(et, ev, tb);
        goto error;
    }
    fp_cupti_started = 1;
    kinds = PyTuple_New(0);
    for (size_t i = 0; kinds != NULL && i < FP_NKINDS; i++) {
        PyObject *k;
        if (!(fp_cupti_enabled & (1u << i)))
            continue;
        k = PyLong_FromLong((long)fp_cupti_kinds[i].kind);
        if (k == NULL || _PyTuple_Resize(&kinds, PyTuple_GET_SIZE(kinds) + 1) != 0) {
            Py_XDECREF(k);
            Py_CLEAR(kinds);
            break;
        }
        PyTuple_SET_ITEM(kinds, PyTuple_GET_SIZE(kinds) - 1, k);
    }
    if (kinds == NULL)
        goto error;
    res =
        Py_BuildValue("(sO(KKK))", fp_cupti_path, kinds, fp_clock0[0], fp_clock0[1], fp_clock0[2]);
error:
    Py_XDECREF(kinds);
    return res;
}

/* _cuda_cupti_stop() -> (records, dropped, launches, launches_dropped, clock_start,
 * clock_stop): ends the trace and releases CUPTI (GIL released meanwhile); records and
 * launches as fp_cupti_take_records / fp_cupti_take_launches describe them, each clock a
 * (cupti_ns, monotonic_ns, window_ns) sample.  Returns NULL with an exception (CUPTI is
 * released either way). */
PyObject *
fp_cuda_cupti_stop(PyObject *m, FP_UNUSED PyObject *args)
{
    unsigned long long clock1[3];
    size_t dropped = 0, ldropped = 0;
    PyObject *recs = NULL, *launches = NULL, *res = NULL;
    if (!fp_cupti_started) {
        fp_cuda_unavailable(m, "CUPTI tracing was not started");
        goto error;
    }
    fp_cupti_started = 0;
    Py_BEGIN_ALLOW_THREADS fp_cupti_clock(clock1);
    fp_cupti_release();
    Py_END_ALLOW_THREADS fp_cupti_nvtx_env(0);
    recs = fp_cupti_take_records(&dropped);
    launches = fp_cupti_take_launches(&ldropped);
    if (recs == NULL || launches == NULL)
        goto error;
    res =
        Py_BuildValue("(OnOn(KKK)(KKK))", recs, (Py_ssize_t)dropped, launches, (Py_ssize_t)ldropped,
                      fp_clock0[0], fp_clock0[1], fp_clock0[2], clock1[0], clock1[1], clock1[2]);
error:
    Py_XDECREF(recs);
    Py_XDECREF(launches);
    return res;
}

/* _cuda_cupti_version(lib_paths) -> (cupti_api_version, driver_cuda_version): loads CUPTI as
 * _cuda_cupti_start does (fp_cupti_load, the first of lib_paths that opens, once per process)
 * and returns its API version (cuptiGetVersion; 0 when it cannot say) and the driver's CUDA
 * version (0 without a driver), so that the caller can refuse a libcupti newer than the driver
 * before starting it.  Returns NULL with CudaUnavailableError when no CUPTI can be loaded. */
PyObject *
fp_cuda_cupti_version(PyObject *m, PyObject *args)
{
    PyObject *paths, *res = NULL;
    uint32_t version = 0;
    int driver = 0;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &paths))
        goto error;
    if (fp_cupti == NULL && fp_cupti_load(m, paths) != 0)
        goto error;
    if (fp_cupti_fn.get_version == NULL || fp_cupti_fn.get_version(&version) != CUPTI_SUCCESS)
        version = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    res = Py_BuildValue("(kI)", (unsigned long)version, (unsigned int)driver);
error:
    return res;
}
#endif
