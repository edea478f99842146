/* A stand-in libcupti for the tests: every CUPTI entry point fastprof resolves, with the
 * record layouts of the real library, plus stub_* controls.  The stub_api / stub_launch
 * controls call the subscribed API callback on the calling thread (enter, then exit) and
 * queue activity records that cuptiActivityFlushAll delivers through the registered buffer
 * callbacks.  Kinds, domains, subscription and detach are tracked so that the tests can see
 * what fastprof left enabled.  Built by the tests with the system C compiler. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int CUptiResult;
typedef void (*req_fn)(uint8_t **, size_t *, size_t *);
typedef void (*done_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef void (*api_cb)(void *, int, uint32_t, const void *);

typedef struct { /* CUpti_CallbackData */
    int site;
    const char *function_name;
    const void *params;
    void *ret;
    const char *symbol;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
} cb_data;

typedef struct { /* CUpti_ActivityKernel (leading fields, padded) */
    uint32_t kind;
    uint8_t cache_config, smem_config;
    uint16_t registers;
    uint32_t pgc_req, pgc_exec;
    uint64_t start, end, completed;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_smem, dynamic_smem;
    uint32_t local_per_thread, local_total;
    uint32_t correlation;
    int64_t grid_id;
    const char *name;
    uint64_t tail[8];
} rec_kernel;

typedef struct { /* CUpti_ActivityMemcpy / Memset (leading fields, padded) */
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
    uint64_t tail[4];
} rec_copy;

typedef struct { /* CUpti_ActivityAPI */
    uint32_t kind, cbid;
    uint64_t start, end;
    uint32_t pid, tid, correlation;
    int32_t ret;
} rec_api;

typedef struct { /* CUpti_ActivitySynchronization */
    uint32_t kind, type;
    uint64_t start, end;
    uint32_t correlation, context, stream, event;
} rec_sync;

typedef struct { /* CUpti_ActivityMarker2 */
    uint32_t kind, flags;
    uint64_t timestamp;
    uint32_t id, object_kind;
    uint32_t object[3];
    uint32_t pad;
    const char *name, *domain;
} rec_marker;

#define SLOT 160 /* every queued record occupies one slot of this size */
#define MAXQ 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static req_fn g_req;
static done_fn g_done;
static api_cb g_cb;
static void *g_cb_user;
static int g_subscribed, g_sub_result, g_finalized, g_tid_type = -1;
static unsigned g_domains; /* bit d: domain d enabled */
static int g_enabled[64];
static int64_t g_clock_offset;
static unsigned char g_queue[MAXQ][SLOT];
static size_t g_queue_n;
static char *g_names[MAXQ];
static size_t g_names_n;
static int g_enable_calls, g_disable_calls;
static int g_fail_kind = -1;
static uint64_t g_clock_fixed; /* nonzero: cuptiGetTimestamp returns it */

#define KIND_MEMCPY 1
#define KIND_MEMSET 2
#define KIND_DRIVER 4
#define KIND_RUNTIME 5
#define KIND_CKERNEL 10
#define KIND_MARKER 12
#define KIND_SYNC 38

/* ---- CUPTI's entry points ---- */

CUptiResult
cuptiActivityRegisterCallbacks(req_fn req, done_fn done)
{
    g_req = req;
    g_done = done;
    return 0;
}

CUptiResult
cuptiActivityEnable(int kind)
{
    g_enable_calls++;
    if (kind < 0 || kind >= 64)
        return 1;
    if (kind == g_fail_kind)
        return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
    g_enabled[kind] = 1;
    return 0;
}

CUptiResult
cuptiActivityDisable(int kind)
{
    g_disable_calls++;
    if (kind < 0 || kind >= 64)
        return 1;
    g_enabled[kind] = 0;
    return 0;
}

CUptiResult
cuptiActivityFlushAll(uint32_t flag)
{
    uint8_t *buf = NULL;
    size_t size = 0, max = 0, n;
    (void)flag;
    pthread_mutex_lock(&lock);
    n = g_queue_n;
    if (n == 0 || g_req == NULL || g_done == NULL) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    g_req(&buf, &size, &max);
    if (buf == NULL || size < n * SLOT) {
        pthread_mutex_unlock(&lock);
        return 1;
    }
    memcpy(buf, g_queue, n * SLOT);
    g_queue_n = 0;
    pthread_mutex_unlock(&lock);
    g_done(NULL, 0, buf, size, n * SLOT);
    return 0;
}

CUptiResult
cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record)
{
    uint8_t *next = *record == NULL ? buffer : (uint8_t *)*record + SLOT;
    if (next + SLOT > buffer + valid)
        return 3; /* CUPTI_ERROR_MAX_LIMIT_REACHED */
    *record = next;
    return 0;
}

CUptiResult
cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    *dropped = 0;
    return 0;
}

CUptiResult
cuptiSubscribe(void **sub, api_cb cb, void *user)
{
    if (g_sub_result != 0)
        return g_sub_result;
    if (g_subscribed)
        return 39; /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
    g_subscribed = 1;
    g_cb = cb;
    g_cb_user = user;
    *sub = (void *)&g_cb;
    return 0;
}

CUptiResult
cuptiUnsubscribe(void *sub)
{
    if (sub != (void *)&g_cb || !g_subscribed)
        return 1;
    g_subscribed = 0;
    g_cb = NULL;
    return 0;
}

CUptiResult
cuptiEnableDomain(uint32_t enable, void *sub, int domain)
{
    if (sub != (void *)&g_cb || domain < 0 || domain > 31)
        return 1;
    if (enable)
        g_domains |= 1u << domain;
    else
        g_domains &= ~(1u << domain);
    return 0;
}

CUptiResult
cuptiFinalize(void)
{
    g_finalized++;
    g_req = NULL;
    g_done = NULL;
    return 0;
}

CUptiResult
cuptiGetTimestamp(uint64_t *ts)
{
    struct timespec t;
    if (g_clock_fixed != 0) {
        *ts = g_clock_fixed;
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    *ts = (uint64_t)((int64_t)t.tv_sec * 1000000000 + t.tv_nsec + g_clock_offset);
    return 0;
}

CUptiResult
cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == 39 ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "CUPTI_ERROR_STUB";
    return 0;
}

CUptiResult
cuptiActivitySetThreadIdType(int type)
{
    g_tid_type = type;
    return 0;
}

CUptiResult
cuptiGetCallbackName(int domain, uint32_t cbid, const char **name)
{
    static const char *rt[] = {"cudaLaunchKernel",      "cudaMemcpyAsync",       "cudaMemsetAsync",
                               "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMalloc"};
    static const char *drv[] = {"cuLaunchKernel",   "cuMemcpyHtoDAsync_v2", "cuMemsetD8Async",
                                "cuCtxSynchronize", "cuStreamSynchronize",  "cuMemAlloc_v2"};
    if (cbid >= 6 || (domain != 1 && domain != 2))
        return 1;
    *name = domain == 2 ? rt[cbid] : drv[cbid];
    return 0;
}

/* ---- test controls ---- */

static unsigned char *
slot(void)
{
    unsigned char *s = g_queue_n < MAXQ ? g_queue[g_queue_n++] : NULL;
    if (s != NULL)
        memset(s, 0, SLOT);
    return s;
}

static const char *
keep(const char *name)
{
    char *c = name ? strdup(name) : NULL;
    if (c != NULL && g_names_n < MAXQ)
        g_names[g_names_n++] = c;
    return c;
}

/* Forgets everything (kinds, domains, subscription, queue, counters). */
void
stub_reset(void)
{
    pthread_mutex_lock(&lock);
    g_queue_n = 0;
    for (size_t i = 0; i < g_names_n; i++)
        free(g_names[i]);
    g_names_n = 0;
    memset(g_enabled, 0, sizeof g_enabled);
    g_domains = 0;
    g_subscribed = 0;
    g_cb = NULL;
    g_sub_result = 0;
    g_finalized = 0;
    g_tid_type = -1;
    g_enable_calls = g_disable_calls = 0;
    g_clock_offset = 0;
    g_clock_fixed = 0;
    g_fail_kind = -1;
    pthread_mutex_unlock(&lock);
}

void
stub_set_subscribe_result(int r)
{
    g_sub_result = r;
}

void
stub_set_clock_offset(int64_t off)
{
    g_clock_offset = off;
}

/* cuptiGetTimestamp returns ts from now on (0: the live clock again). */
void
stub_set_clock_fixed(uint64_t ts)
{
    g_clock_fixed = ts;
}

/* cuptiActivityEnable(kind) fails from now on (-1: none does). */
void
stub_fail_enable(int kind)
{
    g_fail_kind = kind;
}

/* What cuptiGetTimestamp returns now. */
uint64_t
stub_now(void)
{
    uint64_t t;
    cuptiGetTimestamp(&t);
    return t;
}

int
stub_enabled(int kind)
{
    return kind >= 0 && kind < 64 ? g_enabled[kind] : 0;
}

int
stub_enabled_count(void)
{
    int n = 0;
    for (int i = 0; i < 64; i++)
        n += g_enabled[i];
    return n;
}

int
stub_enable_calls(void)
{
    return g_enable_calls;
}

int
stub_subscribed(void)
{
    return g_subscribed;
}

unsigned
stub_domains(void)
{
    return g_domains;
}

int
stub_finalized(void)
{
    return g_finalized;
}

int
stub_thread_id_type(void)
{
    return g_tid_type;
}

uint32_t
stub_gettid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

/* One API call on the calling thread: the enter callback, the nested driver call when
 * driver_cbid >= 0 (correlation corr + 1000000), the exit callback, and the API activity
 * record(s) (runtime: domain 2, driver: domain 1). */
void
stub_api(int domain, uint32_t cbid, const char *fname, uint32_t corr, uint64_t start, uint64_t end,
         int driver_cbid, const char *driver_name)
{
    cb_data d;
    uint32_t tid = stub_gettid();
    memset(&d, 0, sizeof d);
    d.function_name = fname;
    d.correlation_id = corr;
    if (g_cb != NULL && (g_domains & (1u << domain))) {
        d.site = 0;
        g_cb(g_cb_user, domain, cbid, &d);
    }
    if (driver_cbid >= 0) {
        cb_data dd = d;
        dd.function_name = driver_name;
        dd.correlation_id = corr + 1000000;
        if (g_cb != NULL && (g_domains & 2u)) {
            dd.site = 0;
            g_cb(g_cb_user, 1, (uint32_t)driver_cbid, &dd);
            dd.site = 1;
            g_cb(g_cb_user, 1, (uint32_t)driver_cbid, &dd);
        }
    }
    if (g_cb != NULL && (g_domains & (1u << domain))) {
        d.site = 1;
        g_cb(g_cb_user, domain, cbid, &d);
    }
    pthread_mutex_lock(&lock);
    if (g_enabled[domain == 2 ? KIND_RUNTIME : KIND_DRIVER]) {
        rec_api *a = (rec_api *)slot();
        if (a != NULL) {
            a->kind = domain == 2 ? KIND_RUNTIME : KIND_DRIVER;
            a->cbid = cbid;
            a->start = start;
            a->end = end;
            a->pid = (uint32_t)getpid();
            a->tid = tid;
            a->correlation = corr;
        }
    }
    if (driver_cbid >= 0 && g_enabled[KIND_DRIVER]) {
        rec_api *a = (rec_api *)slot();
        if (a != NULL) {
            a->kind = KIND_DRIVER;
            a->cbid = (uint32_t)driver_cbid;
            a->start = start + 1;
            a->end = end > start + 1 ? end - 1 : end;
            a->pid = (uint32_t)getpid();
            a->tid = tid;
            a->correlation = corr + 1000000;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* A kernel activity record (queued when kernels are enabled). */
void
stub_kernel(const char *name, uint32_t device, uint32_t context, uint32_t stream, uint32_t corr,
            uint64_t start, uint64_t end)
{
    pthread_mutex_lock(&lock);
    if (g_enabled[KIND_CKERNEL]) {
        rec_kernel *k = (rec_kernel *)slot();
        if (k != NULL) {
            k->kind = KIND_CKERNEL;
            k->start = start;
            k->end = end;
            k->device = device;
            k->context = context;
            k->stream = stream;
            k->correlation = corr;
            k->name = keep(name);
        }
    }
    pthread_mutex_unlock(&lock);
}

/* A memcpy (copy_kind >= 0) or memset (copy_kind < 0) activity record. */
void
stub_copy(int copy_kind, uint64_t bytes, uint32_t device, uint32_t context, uint32_t stream,
          uint32_t corr, uint64_t start, uint64_t end)
{
    int kind = copy_kind >= 0 ? KIND_MEMCPY : KIND_MEMSET;
    pthread_mutex_lock(&lock);
    if (g_enabled[kind]) {
        rec_copy *c = (rec_copy *)slot();
        if (c != NULL) {
            c->kind = (uint32_t)kind;
            c->copy_kind = copy_kind >= 0 ? (uint8_t)copy_kind : 0;
            c->bytes = bytes;
            c->start = start;
            c->end = end;
            c->device = device;
            c->context = context;
            c->stream = stream;
            c->correlation = corr;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* A synchronization activity record. */
void
stub_sync(uint32_t type, uint32_t context, uint32_t stream, uint32_t corr, uint64_t start,
          uint64_t end)
{
    pthread_mutex_lock(&lock);
    if (g_enabled[KIND_SYNC]) {
        rec_sync *s = (rec_sync *)slot();
        if (s != NULL) {
            s->kind = KIND_SYNC;
            s->type = type;
            s->start = start;
            s->end = end;
            s->correlation = corr;
            s->context = context;
            s->stream = stream;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* An NVTX marker record (flags 2: range start with name, 4: range end) on thread tid. */
void
stub_marker(uint32_t flags, uint32_t id, uint32_t tid, const char *name, uint64_t ts)
{
    pthread_mutex_lock(&lock);
    if (g_enabled[KIND_MARKER]) {
        rec_marker *m = (rec_marker *)slot();
        if (m != NULL) {
            m->kind = KIND_MARKER;
            m->flags = flags;
            m->timestamp = ts;
            m->id = id;
            m->object_kind = 2; /* thread */
            m->object[0] = (uint32_t)getpid();
            m->object[1] = tid;
            m->name = keep(name);
        }
    }
    pthread_mutex_unlock(&lock);
}

typedef struct {
    uint32_t corr;
    uint64_t start, end;
    uint32_t tid;
} thread_args;

static void *
thread_main(void *p)
{
    thread_args *a = p;
    a->tid = stub_gettid();
    stub_api(2, 0, "cudaLaunchKernel", a->corr, a->start, a->end, 0, "cuLaunchKernel");
    return NULL;
}

/* cudaLaunchKernel (runtime, with its nested driver call) from a fresh thread that has never
 * run Python; returns that thread's id. */
uint32_t
stub_launch_on_new_thread(uint32_t corr, uint64_t start, uint64_t end)
{
    pthread_t t;
    thread_args a = {corr, start, end, 0};
    if (pthread_create(&t, NULL, thread_main, &a) != 0)
        return 0;
    pthread_join(t, NULL);
    return a.tid;
}

/* ---- NVTX injection, as libcupti offers it: NVTX loads the library named by
 * NVTX_INJECTION64_PATH at its first call and hands it its function table; the stand-in
 * turns nvtxRangePushA / nvtxRangePop into marker records. ---- */

typedef void (*nvtx_fp)(void);
typedef struct {
    size_t struct_size;
    int (*get_module_table)(int module, nvtx_fp ***table, unsigned *size);
} nvtx_callbacks_table;
typedef const void *(*nvtx_get_export_table)(uint32_t id);

static uint32_t g_nvtx_ids;
static int g_nvtx_injected;
static _Thread_local uint32_t t_nvtx_stack[64];
static _Thread_local int t_nvtx_depth;

static int
nvtx_push_a(const char *message)
{
    uint32_t id = __atomic_add_fetch(&g_nvtx_ids, 1, __ATOMIC_RELAXED);
    if (t_nvtx_depth < 64)
        t_nvtx_stack[t_nvtx_depth] = id;
    stub_marker(2, id, stub_gettid(), message, stub_now());
    return t_nvtx_depth++;
}

static int
nvtx_pop(void)
{
    if (t_nvtx_depth <= 0)
        return -1;
    t_nvtx_depth--;
    if (t_nvtx_depth < 64)
        stub_marker(4, t_nvtx_stack[t_nvtx_depth], stub_gettid(), NULL, stub_now());
    return t_nvtx_depth;
}

int
InitializeInjectionNvtx2(nvtx_get_export_table get)
{
    const nvtx_callbacks_table *cb = get(1); /* NVTX_ETID_CALLBACKS */
    nvtx_fp **table = NULL;
    unsigned size = 0;
    if (cb == NULL || !cb->get_module_table(1, &table, &size) || size < 11) /* core module */
        return 0;
    *table[9] = (nvtx_fp)nvtx_push_a; /* NVTX_CBID_CORE_RangePushA */
    *table[11] = (nvtx_fp)nvtx_pop;   /* NVTX_CBID_CORE_RangePop */
    g_nvtx_injected = 1;
    return 1;
}

int
stub_nvtx_injected(void)
{
    return g_nvtx_injected;
}
