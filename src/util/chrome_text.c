/* chrome_text.c - fastprof._fastprof._chrome_x_events: the Chrome trace's "X" events of a
 * timeline's span records (profile/timeline_read.c), written as text in C.  A trace holds up
 * to millions of spans; fastprof.report.chrome writes them in chunks through this function,
 * byte for byte what its Python writer gives (json.dumps of the same events with compact
 * separators), without a Python object per span. */
#include "profile/timeline.h"

#include <string.h>

/* A growing byte buffer (PyMem). */
typedef struct fp_ctbuf {
    char *data;
    size_t len, cap;
} fp_ctbuf;

/* Makes room for need more bytes in b.  Returns 0, or -1 with MemoryError set. */
static int
fp_ct_reserve(fp_ctbuf *b, size_t need)
{
    if (b->len + need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need) {
        if (cap > SIZE_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* Appends the n bytes at s to b, which has room for them.  Returns nothing. */
static void
fp_ct_put(fp_ctbuf *b, const char *s, size_t n)
{
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* Writes the decimal digits of v to out.  Returns how many (at most 20). */
static size_t
fp_ct_digits(uint64_t v, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Writes repr(ns / 1000.0), Python's text of the nanoseconds ns as a float number of
 * microseconds, to out (room for 32 bytes).  Under 10**15 in magnitude that float's shortest
 * round-trip text is the exact decimal (15 significant digits at most, which a double holds
 * apart); beyond, CPython's own formatter writes it.  Returns the length, or -1 with an
 * exception set. */
static Py_ssize_t
fp_ct_us(int64_t ns, char *out)
{
    if (ns > -1000000000000000LL && ns < 1000000000000000LL) {
        size_t n = 0;
        uint64_t v = ns < 0 ? (uint64_t)(-ns) : (uint64_t)ns;
        if (ns < 0)
            out[n++] = '-';
        n += fp_ct_digits(v / 1000, out + n);
        out[n++] = '.';
        unsigned frac = (unsigned)(v % 1000);
        char d[3] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                     (char)('0' + frac % 10)};
        size_t keep = d[2] != '0' ? 3 : d[1] != '0' ? 2 : 1;
        memcpy(out + n, d, keep);
        return (Py_ssize_t)(n + keep);
    }
    char *text = PyOS_double_to_string((double)ns / 1000.0, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL)
        return -1;
    size_t n = strlen(text);
    if (n > 31) {
        PyMem_Free(text);
        PyErr_SetString(PyExc_ValueError, "a time's text is too long");
        return -1;
    }
    memcpy(out, text, n);
    PyMem_Free(text);
    return (Py_ssize_t)n;
}

/* Returns the bytes of item i of list (which must be bytes) through *s and *n.  Returns 0, or
 * -1 with TypeError naming what (the argument). */
static int
fp_ct_bytes_at(PyObject *list, Py_ssize_t i, const char *what, const char **s, size_t *n)
{
    PyObject *item = PyList_GET_ITEM(list, i);
    if (!PyBytes_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of bytes, not holding %.100s", what,
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    *s = PyBytes_AS_STRING(item);
    *n = (size_t)PyBytes_GET_SIZE(item);
    return 0;
}

/* Appends span s's "X" event to b: name and args the JSON texts of its function's name and
 * of its ,"args":{...} part (empty for a builtin), pid and tid its process's and thread's.
 * Returns 0, or -1 with an exception set. */
static int
fp_ct_event(fp_ctbuf *b, const fp_span *s, const char *name, size_t nname, const char *args,
            size_t nargs, long long pid, long long tid)
{
    char num[2][32], ids[64]; /* ids: two int64 and the text between them, 47 at most */
    if ((s->t0 < 0 && s->t1 > INT64_MAX + s->t0) || (s->t0 > 0 && s->t1 < INT64_MIN + s->t0)) {
        PyErr_Format(PyExc_OverflowError,
                     "records must hold spans shorter than 2**63 ns, not %lld to %lld",
                     (long long)s->t0, (long long)s->t1);
        return -1;
    }
    Py_ssize_t nts = fp_ct_us(s->t0, num[0]);
    Py_ssize_t ndur = nts < 0 ? -1 : fp_ct_us(s->t1 - s->t0, num[1]);
    if (ndur < 0)
        return -1;
    int nid = PyOS_snprintf(ids, sizeof ids, "%lld,\"tid\":%lld", pid, tid);
    if (nid < 0 || nid >= (int)sizeof ids) {
        PyErr_SetString(PyExc_ValueError, "pid and tid do not fit the event's text");
        return -1;
    }
    static const char head[] = "{\"ph\":\"X\",\"cat\":\"python\",\"name\":";
    if (fp_ct_reserve(b, sizeof head + nname + (size_t)nid + (size_t)nts + (size_t)ndur + nargs +
                             32) < 0)
        return -1;
    fp_ct_put(b, head, sizeof head - 1);
    fp_ct_put(b, name, nname);
    fp_ct_put(b, ",\"pid\":", 7);
    fp_ct_put(b, ids, (size_t)nid);
    fp_ct_put(b, ",\"ts\":", 6);
    fp_ct_put(b, num[0], (size_t)nts);
    fp_ct_put(b, ",\"dur\":", 7);
    fp_ct_put(b, num[1], (size_t)ndur);
    fp_ct_put(b, args, nargs);
    fp_ct_put(b, "}", 1);
    return 0;
}

/* _chrome_x_events(records, lo, hi, names, args, tids, pid, origin=0).  Returns the bytes of
 * the "X" events of the span records lo to hi (exclusive) of records (fp_span records as
 * Profile._timeline_records gives them; times less origin), joined by commas: names and args
 * the lists, by
 * function index, of the JSON text of each function's name and of its ,"args":{...} part;
 * tids by thread index (a thread beyond it: index + 1).  NULL with an exception set
 * (ValueError for records of the wrong size, a function index beyond names or a range
 * outside the records). */
static PyObject *
fp_chrome_x_events(FP_UNUSED PyObject *m, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t lo, hi;
    PyObject *names, *argtexts, *tids, *result = NULL;
    long long pid, origin = 0;
    fp_ctbuf b = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "y*nnO!O!O!L|L:_chrome_x_events", &view, &lo, &hi, &PyList_Type,
                          &names, &PyList_Type, &argtexts, &PyList_Type, &tids, &pid, &origin))
        return NULL;
    Py_ssize_t count = view.len / (Py_ssize_t)sizeof(fp_span);
    if (view.len % (Py_ssize_t)sizeof(fp_span) != 0 || lo < 0 || hi < lo || hi > count) {
        PyErr_SetString(PyExc_ValueError, "records must be whole span records, lo..hi inside");
        goto error;
    }
    if (PyList_GET_SIZE(argtexts) != PyList_GET_SIZE(names)) {
        PyErr_SetString(PyExc_ValueError, "names and args must have one entry per function");
        goto error;
    }
    if (fp_ct_reserve(&b, 1) < 0)
        goto error;
    for (Py_ssize_t k = lo; k < hi; k++) {
        fp_span s;
        memcpy(&s, (const char *)view.buf + k * (Py_ssize_t)sizeof(fp_span), sizeof s);
        if (__builtin_sub_overflow(s.t0, origin, &s.t0) ||
            __builtin_sub_overflow(s.t1, origin, &s.t1)) {
            PyErr_SetString(PyExc_ValueError, "a span's time less origin does not fit 64 bits");
            goto error;
        }
        if (s.func < 0 || s.func >= PyList_GET_SIZE(names)) {
            PyErr_Format(PyExc_ValueError, "a span names function %d, beyond names", s.func);
            goto error;
        }
        const char *name, *arg;
        size_t nname, narg;
        if (fp_ct_bytes_at(names, s.func, "names", &name, &nname) < 0 ||
            fp_ct_bytes_at(argtexts, s.func, "args", &arg, &narg) < 0)
            goto error;
        long long tid = (long long)s.thread + 1;
        if (s.thread >= 0 && s.thread < PyList_GET_SIZE(tids)) {
            /* an int exactly: converting it runs no Python code that could free the texts */
            PyObject *item = PyList_GET_ITEM(tids, s.thread);
            if (!PyLong_CheckExact(item)) {
                PyErr_Format(PyExc_TypeError, "tids must be a list of int, not holding %.100s",
                             Py_TYPE(item)->tp_name);
                goto error;
            }
            tid = PyLong_AsLongLong(item);
            if (tid == -1 && PyErr_Occurred())
                goto error;
        }
        if (k > lo) {
            if (fp_ct_reserve(&b, 1) < 0)
                goto error;
            fp_ct_put(&b, ",", 1);
        }
        if (fp_ct_event(&b, &s, name, nname, arg, narg, pid, tid) < 0)
            goto error;
    }
    result = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.len);
error:
    PyMem_Free(b.data);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef fp_chrome_methods[] = {
    {"_chrome_x_events", fp_chrome_x_events, METH_VARARGS,
     "_chrome_x_events(records, lo, hi, names, args, tids, pid, origin=0) -> bytes: the Chrome "
     "trace's "
     "\"X\" events of span records lo..hi, joined by commas (fastprof.report.chrome)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_chrome_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_chrome_methods);
}
