/* cuda/cupti_int.h - what the CUPTI files share: cupti.c (loading, start and stop, the
 * clock, release), cupti_records.c (activity buffers into plain C records),
 * cupti_callbacks.c (the API callback that notes the Python stack of each launch) and
 * cupti_list.c (the list each of those two collects into and hands out).
 * CUDA builds only.  Everything here is process-wide: CUPTI's callbacks carry no module. */
#ifndef FP_CUPTI_INT_H
#define FP_CUPTI_INT_H

#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Kinds of fp_cupti_rec, as the Python side reads them (fastprof.cuda_timeline). */
enum {
    FP_REC_KERNEL = 0,
    FP_REC_MEMCPY = 1,
    FP_REC_MEMSET = 2,
    FP_REC_RUNTIME = 3,
    FP_REC_DRIVER = 4,
    FP_REC_SYNC = 5,
    FP_REC_MARKER = 6,
};

/* One activity in plain C: a kernel, copy or memset (device, context, stream), a runtime or
 * driver API call (thread, cbid), a synchronisation (context, stream, type in extra) or an
 * NVTX marker (id, flags in extra, thread; start == end).  name is malloc'ed or NULL. */
typedef struct fp_cupti_rec {
    int kind;
    int32_t extra; /* copy kind, sync type, marker flags or API return value */
    uint64_t start, end, bytes;
    uint32_t device, context, stream, correlation;
    uint32_t tid;
    uint32_t id; /* cbid of an API call, marker id */
    char *name;
} fp_cupti_rec;

/* The entry points of the loaded libcupti (NULL where it lacks an optional one). */
typedef struct fp_cupti_api {
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*finalize)(void);
    CUptiResult (*get_timestamp)(uint64_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType);
    CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*get_version)(uint32_t *);
} fp_cupti_api;

/* The loaded library's entry points (cupti.c fills it before any callback can run). */
extern fp_cupti_api fp_cupti_fn;

/* cupti_list.c */
/* A list of fixed-size items that CUPTI's threads append to under lock and the thread
 * holding the GIL takes whole (the activity records, the launches noted). */
typedef struct fp_cupti_list {
    pthread_mutex_t lock;
    void *items;    /* n items of size bytes (malloc'ed; NULL before the first push) */
    size_t n, cap;  /* items held, and room for */
    size_t dropped; /* items lost since the last take (memory ran out, or the owner's own) */
    size_t size;    /* bytes per item */
    size_t first;   /* the room the first push makes, in items */
} fp_cupti_list;

/* The initialiser of a static, empty list of items of type, whose first push makes room for
 * first of them. */
#define FP_CUPTI_LIST_INIT(type, first)                                                            \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, sizeof(type), (first)                            \
    }

/* Appends a copy of item (l->size bytes) to l, whose lock the caller holds, growing l.
 * Returns 0, or -1 when memory ran out (the item is counted in l->dropped and what it points
 * to stays the caller's to free).  Never touches a Python object. */
int fp_cupti_list_push(fp_cupti_list *l, const void *item);
/* Takes every item of l under its lock, leaving l empty: *items gets them (malloc'ed, the
 * caller frees them; NULL when none) and *dropped the items lost since the last take.
 * Returns how many items *items holds.  Never fails. */
size_t fp_cupti_list_take(fp_cupti_list *l, void **items, size_t *dropped);
/* Takes every item of l (as fp_cupti_list_take) and returns them as a new list of
 * to_py(item) (each a new reference, or NULL with an exception), releasing each item with
 * release(item) whatever happens; *dropped as fp_cupti_list_take's.  Returns NULL with an
 * exception when a conversion or the list fails.  Needs the GIL. */
PyObject *fp_cupti_list_take_py(fp_cupti_list *l, size_t *dropped,
                                PyObject *(*to_py)(const void *item), void (*release)(void *item));

/* cupti_records.c */
/* CUPTI's buffer callbacks: hand out 8-byte aligned buffers; copy completed records into the
 * C record list under a mutex.  They run on CUPTI's thread and touch no Python object. */
void CUPTIAPI fp_cupti_buffer_request(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI fp_cupti_buffer_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t size, size_t valid);
/* Takes every record collected so far and returns them as a list of tuples
 * (kind, name, start, end, device, context, stream, correlation, bytes, extra, tid, id),
 * API calls named through cuptiGetCallbackName; *dropped gets the records CUPTI lost.
 * Needs the GIL.  Returns a new list, or NULL with an exception (the records are freed
 * either way). */
PyObject *fp_cupti_take_records(size_t *dropped);

/* cupti_callbacks.c */
/* CUPTI's API callback (runtime and driver domains): on the enter site of a launch, copy or
 * memset call, notes the correlation id, the thread and, when the calling thread holds the
 * GIL, its Python stack.  Never raises; allocates only when its table grows. */
void CUPTIAPI fp_cupti_api_callback(void *userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId cbid, const void *cbdata);
/* Turns the noting on (1) or off (0) for new callbacks.  Never fails. */
void fp_cupti_launches_active(int on);
/* Takes the launches noted so far as a list of tuples (correlation, tid, domain, cbid, alias,
 * ((code, line), ...) innermost first; alias is the correlation id of the outer call on the
 * same thread whose stack this nested call shares, or 0), dropping the C references.  Needs
 * the GIL.  Returns a new list, or NULL with an exception (the table is emptied either way). */
PyObject *fp_cupti_take_launches(size_t *dropped);

#endif
#endif
