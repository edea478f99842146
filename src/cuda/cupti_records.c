/* cuda/cupti_records.c - CUPTI's activity buffers into plain C records.  CUPTI asks for a
 * buffer, fills it, and hands it back on its own thread (or inside a flush); the completion
 * callback copies each record it knows into a small fp_cupti_rec under a C mutex and frees
 * the buffer: it never touches a Python object.  fp_cupti_take_records() turns them into
 * tuples under the GIL.  Only the leading fields that every version of a record kind shares
 * are read, so the record version of the libcupti loaded at run time does not matter.
 * CUDA builds only. */
#include "cuda/cupti_int.h"

#ifdef FP_HAVE_CUDA
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The leading fields of CUPTI's kernel records (CUpti_ActivityKernel4 ... Kernel10 share them). */
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
} fp_raw_kernel;

/* The leading fields of the memcpy records (every version); memset records put their value
 * where memcpy has its four kind bytes and share the rest. */
typedef struct {
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, correlation;
} fp_raw_copy;

/* CUpti_ActivityAPI (runtime and driver calls). */
typedef struct {
    uint32_t kind, cbid;
    uint64_t start, end;
    uint32_t pid, tid, correlation;
    int32_t ret;
} fp_raw_api;

/* CUpti_ActivitySynchronization. */
typedef struct {
    uint32_t kind, type;
    uint64_t start, end;
    uint32_t correlation, context, stream, event;
} fp_raw_sync;

/* CUpti_ActivityMarker2 (objectId: process and thread ids, or device, context and stream). */
typedef struct {
    uint32_t kind, flags;
    uint64_t timestamp;
    uint32_t id, object_kind;
    uint32_t object[3];
    uint32_t pad;
    const char *name, *domain;
} fp_raw_marker;

_Static_assert(offsetof(fp_raw_kernel, start) == 16 && offsetof(fp_raw_kernel, device) == 40 &&
                   offsetof(fp_raw_kernel, stream) == 48 &&
                   offsetof(fp_raw_kernel, correlation) == 92 &&
                   offsetof(fp_raw_kernel, name) == 104,
               "CUPTI kernel record layout");
_Static_assert(offsetof(fp_raw_copy, bytes) == 8 && offsetof(fp_raw_copy, device) == 32 &&
                   offsetof(fp_raw_copy, correlation) == 44,
               "CUPTI memcpy/memset record layout");
_Static_assert(offsetof(fp_raw_api, start) == offsetof(CUpti_ActivityAPI, start) &&
                   offsetof(fp_raw_api, tid) == offsetof(CUpti_ActivityAPI, threadId) &&
                   offsetof(fp_raw_api, correlation) ==
                       offsetof(CUpti_ActivityAPI, correlationId) &&
                   offsetof(fp_raw_api, ret) == offsetof(CUpti_ActivityAPI, returnValue),
               "CUPTI API record layout");
_Static_assert(offsetof(fp_raw_sync, start) == offsetof(CUpti_ActivitySynchronization, start) &&
                   offsetof(fp_raw_sync, correlation) ==
                       offsetof(CUpti_ActivitySynchronization, correlationId) &&
                   offsetof(fp_raw_sync, stream) ==
                       offsetof(CUpti_ActivitySynchronization, streamId),
               "CUPTI synchronization record layout");
_Static_assert(offsetof(fp_raw_marker, timestamp) == offsetof(CUpti_ActivityMarker2, timestamp) &&
                   offsetof(fp_raw_marker, id) == offsetof(CUpti_ActivityMarker2, id) &&
                   offsetof(fp_raw_marker, object) == offsetof(CUpti_ActivityMarker2, objectId) &&
                   offsetof(fp_raw_marker, name) == offsetof(CUpti_ActivityMarker2, name),
               "CUPTI marker record layout");

/* The records copied out of the buffers CUPTI handed back, until fp_cupti_take_records. */
static fp_cupti_list fp_recs = FP_CUPTI_LIST_INIT(fp_cupti_rec, 1024);

#define FP_CUPTI_BUF (4u << 20)

/* See cupti_int.h.  Never fails (a NULL buffer makes CUPTI drop records). */
void CUPTIAPI
fp_cupti_buffer_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, FP_CUPTI_BUF) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? FP_CUPTI_BUF : 0;
    *max_records = 0;
}

/* Fills r from one CUPTI record.  Returns 1 for a kind fastprof keeps, 0 for another. */
static int
fp_rec_read(const CUpti_Activity *rec, fp_cupti_rec *r)
{
    memset(r, 0, sizeof *r);
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
        const fp_raw_kernel *k = (const fp_raw_kernel *)rec;
        r->kind = FP_REC_KERNEL;
        r->start = k->start;
        r->end = k->end;
        r->device = k->device;
        r->context = k->context;
        r->stream = k->stream;
        r->correlation = k->correlation;
        r->name = k->name ? strdup(k->name) : NULL;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const fp_raw_copy *c = (const fp_raw_copy *)rec;
        int copy = rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY;
        r->kind = copy ? FP_REC_MEMCPY : FP_REC_MEMSET;
        r->start = c->start;
        r->end = c->end;
        r->bytes = c->bytes;
        r->device = c->device;
        r->context = c->context;
        r->stream = c->stream;
        r->correlation = c->correlation;
        r->extra = copy ? c->copy_kind : 0;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const fp_raw_api *a = (const fp_raw_api *)rec;
        r->kind = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? FP_REC_RUNTIME : FP_REC_DRIVER;
        r->start = a->start;
        r->end = a->end;
        r->tid = a->tid;
        r->correlation = a->correlation;
        r->id = a->cbid;
        r->extra = a->ret;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const fp_raw_sync *s = (const fp_raw_sync *)rec;
        r->kind = FP_REC_SYNC;
        r->start = s->start;
        r->end = s->end;
        r->correlation = s->correlation;
        r->context = s->context;
        r->stream = s->stream;
        r->extra = (int32_t)s->type;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
        const fp_raw_marker *mk = (const fp_raw_marker *)rec;
        r->kind = FP_REC_MARKER;
        r->start = r->end = mk->timestamp;
        r->id = mk->id;
        r->extra = (int32_t)mk->flags;
        if (mk->object_kind == CUPTI_ACTIVITY_OBJECT_THREAD ||
            mk->object_kind == CUPTI_ACTIVITY_OBJECT_PROCESS)
            r->tid = mk->object[1];
        else
            r->device = mk->object[0];
        r->name = mk->name ? strdup(mk->name) : NULL;
        return 1;
    }
    default:
        return 0;
    }
}

/* See cupti_int.h. */
void CUPTIAPI
fp_cupti_buffer_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, FP_UNUSED size_t size,
                         size_t valid)
{
    CUpti_Activity *rec = NULL;
    size_t dropped = 0;
    pthread_mutex_lock(&fp_recs.lock);
    while (valid > 0 && fp_cupti_fn.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        fp_cupti_rec r;
        if (fp_rec_read(rec, &r) && fp_cupti_list_push(&fp_recs, &r) < 0)
            free(r.name); /* counted as dropped */
    }
    if (fp_cupti_fn.dropped != NULL &&
        fp_cupti_fn.dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        fp_recs.dropped += dropped;
    pthread_mutex_unlock(&fp_recs.lock);
    free(buffer);
}

/* The name CUPTI gives an API call (e.g. "cudaLaunchKernel_v7000"), or NULL. */
static const char *
fp_api_name(const fp_cupti_rec *r)
{
    const char *name = NULL;
    CUpti_CallbackDomain dom =
        r->kind == FP_REC_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (fp_cupti_fn.callback_name == NULL ||
        fp_cupti_fn.callback_name(dom, r->id, &name) != CUPTI_SUCCESS)
        name = NULL;
    return name;
}

/* One record as (kind, name, start, end, device, context, stream, correlation, bytes, extra,
 * tid, id).  Returns a new tuple, or NULL with an exception. */
static PyObject *
fp_rec_tuple(const void *item)
{
    const fp_cupti_rec *r = item;
    const char *name = r->name;
    if (r->kind == FP_REC_RUNTIME || r->kind == FP_REC_DRIVER)
        name = fp_api_name(r);
    return Py_BuildValue("(izKKIIIIKiII)", r->kind, name, (unsigned long long)r->start,
                         (unsigned long long)r->end, r->device, r->context, r->stream,
                         r->correlation, (unsigned long long)r->bytes, (int)r->extra, r->tid,
                         r->id);
}

/* Frees the name one record holds.  Returns nothing. */
static void
fp_rec_release(void *item)
{
    free(((fp_cupti_rec *)item)->name);
}

/* See cupti_int.h. */
PyObject *
fp_cupti_take_records(size_t *dropped)
{
    return fp_cupti_list_take_py(&fp_recs, dropped, fp_rec_tuple, fp_rec_release);
}
#endif
