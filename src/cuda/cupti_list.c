/* cuda/cupti_list.c - the one growable list behind CUPTI's collections: the activity records
 * that the buffer callback copies out of CUPTI's buffers (cupti_records.c) and the launches
 * that the API callback notes (cupti_callbacks.c).  CUPTI's threads append under the list's
 * mutex; the thread holding the GIL takes the whole list at once.  CUDA builds only. */
#include "cuda/cupti_int.h"

#ifdef FP_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

/* See cupti_int.h. */
int
fp_cupti_list_push(fp_cupti_list *l, const void *item)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : l->first;
        void *grown = cap > SIZE_MAX / l->size ? NULL : realloc(l->items, cap * l->size);
        if (grown == NULL)
            goto error;
        l->items = grown;
        l->cap = cap;
    }
    memcpy((char *)l->items + l->n * l->size, item, l->size);
    l->n++;
    return 0;
error:
    l->dropped++;
    return -1;
}

/* See cupti_int.h. */
size_t
fp_cupti_list_take(fp_cupti_list *l, void **items, size_t *dropped)
{
    pthread_mutex_lock(&l->lock);
    size_t n = l->n;
    *items = l->items;
    *dropped = l->dropped;
    l->items = NULL;
    l->n = l->cap = l->dropped = 0;
    pthread_mutex_unlock(&l->lock);
    return n;
}

/* See cupti_int.h. */
PyObject *
fp_cupti_list_take_py(fp_cupti_list *l, size_t *dropped, PyObject *(*to_py)(const void *item),
                      void (*release)(void *item))
{
    void *items;
    size_t n = fp_cupti_list_take(l, &items, dropped);
    char *at = items;
    PyObject *list = NULL, *res = NULL;
    list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        goto error;
    for (size_t i = 0; i < n; i++) {
        PyObject *t = to_py(at + i * l->size);
        if (t == NULL)
            goto error;
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    res = list;
    list = NULL;
error:
    Py_XDECREF(list);
    for (size_t i = 0; i < n; i++)
        release(at + i * l->size);
    free(items);
    return res;
}
#endif
