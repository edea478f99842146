/* marshal_reader.c - fastprof._fastprof._marshal_loads: a reader of the part of marshal's format
 * that pstats files use (dict, tuple, list, str, int, float, None, True, False and
 * back-references; bytes too, when asked, for fastprof's raw call trees), for files that may
 * be malformed or hostile: CPython's marshal is not meant for untrusted data (a size field can
 * ask it for gigabytes, and it builds code objects).
 *
 * The C twin of python/fastprof/_marshal_reader.py's _Reader, which stays as the reference
 * the tests compare it with: the same subset, the same limits (a nesting depth, each size
 * checked against what is left of the data before anything is allocated for it, a reference
 * only to an object already read, never to a tuple still being read nor to None), and the
 * same ValueError messages.  It reads nothing past the buffer, and a file can make it raise
 * ValueError (or MemoryError) only. */
#include "common.h"

#define FP_M_FLAG_REF 0x80
#define FP_M_MAX_DEPTH 64 /* pstats files nest four deep */

/* State of one _marshal_loads(): the bytes, the position and the objects a reference may
 * name (strong references; NULL for a slot a reference may not name: a tuple still being
 * read, or None, as the Python reader refuses both). */
typedef struct fp_mreader {
    const unsigned char *data;
    Py_ssize_t len;
    Py_ssize_t pos;
    int allow_bytes;
    PyObject **refs;
    Py_ssize_t nrefs;
    Py_ssize_t cap;
} fp_mreader;

static PyObject *fp_m_obj(fp_mreader *r, int depth);

/* Points *out at the next n bytes and moves past them.  Returns 0, or -1 with ValueError
 * when the data ends first. */
static int
fp_m_take(fp_mreader *r, Py_ssize_t n, const unsigned char **out)
{
    if (n < 0 || n > r->len - r->pos) {
        PyErr_SetString(PyExc_ValueError, "marshal data too short");
        return -1;
    }
    *out = r->data + r->pos;
    r->pos += n;
    return 0;
}

/* Reads one byte into *out.  Returns 0, or -1 with ValueError when the data has ended. */
static int
fp_m_byte(fp_mreader *r, long long *out)
{
    const unsigned char *p;
    if (fp_m_take(r, 1, &p) < 0)
        return -1;
    *out = p[0];
    return 0;
}

/* Reads a little-endian signed 32-bit integer into *out.  Returns 0, or -1 with ValueError
 * when the data ends first. */
static int
fp_m_i32(fp_mreader *r, long long *out)
{
    const unsigned char *p;
    if (fp_m_take(r, 4, &p) < 0)
        return -1;
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    *out = (long long)(int32_t)u;
    return 0;
}

/* Checks that n items of at least per_item bytes each fit in what is left of the data.
 * Returns 0, or -1 with ValueError. */
static int
fp_m_size(fp_mreader *r, long long n, long long per_item)
{
    if (n < 0 || n * per_item > (long long)(r->len - r->pos)) {
        PyErr_Format(PyExc_ValueError, "bad marshal data (size %lld beyond the end of the data)",
                     n);
        return -1;
    }
    return 0;
}

/* Appends obj (a new reference is taken; NULL or None makes a slot no reference may name)
 * to the reference table.  Returns the slot's index, or -1 with MemoryError. */
static Py_ssize_t
fp_m_ref_add(fp_mreader *r, PyObject *obj)
{
    if (r->nrefs == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 64;
        PyObject **grown = PyMem_Realloc(r->refs, (size_t)cap * sizeof(PyObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->refs = grown;
        r->cap = cap;
    }
    r->refs[r->nrefs] = obj == Py_None ? NULL : Py_XNewRef(obj);
    return r->nrefs++;
}

/* Fills the reserved slot with obj (a new reference is taken).  Returns nothing. */
static void
fp_m_ref_set(fp_mreader *r, Py_ssize_t slot, PyObject *obj)
{
    Py_XSETREF(r->refs[slot], Py_NewRef(obj));
}

/* Turns a UnicodeDecodeError being raised into ValueError("bad marshal data (bad text)");
 * leaves any other exception.  Returns NULL. */
static PyObject *
fp_m_bad_text(void)
{
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "bad marshal data (bad text)");
    }
    return NULL;
}

/* Returns a new str of the n ASCII bytes at p, or NULL with ValueError (a byte above 127). */
static PyObject *
fp_m_ascii(const unsigned char *p, Py_ssize_t n)
{
    PyObject *res = PyUnicode_DecodeASCII((const char *)p, n, NULL);
    return res ? res : fp_m_bad_text();
}

/* Returns the int of n 15-bit digits at p (little-endian, two bytes each, already checked to
 * be in range), negated when neg: a new reference, or NULL with an exception set. */
static PyObject *
fp_m_long_digits(const unsigned char *p, long long n, int neg)
{
    PyObject *bytes = NULL, *value = NULL, *res = NULL;
    if (n <= 4) { /* 60 bits: no need of a big integer */
        unsigned long long v = 0;
        for (long long i = 0; i < n; i++)
            v |= (unsigned long long)(p[2 * i] | p[2 * i + 1] << 8) << (15 * i);
        return PyLong_FromLongLong(neg ? -(long long)v : (long long)v);
    }
    /* packed into little-endian bytes, made an int by int.from_bytes */
    Py_ssize_t size = (Py_ssize_t)((15 * n + 7) / 8);
    bytes = PyBytes_FromStringAndSize(NULL, size);
    if (bytes == NULL)
        goto error;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(bytes);
    memset(out, 0, (size_t)size);
    for (long long i = 0; i < n; i++) {
        unsigned int digit = p[2 * i] | p[2 * i + 1] << 8;
        long long bit = 15 * i;
        for (int b = 0; b < 15; b++, bit++)
            if (digit >> b & 1)
                out[bit >> 3] |= (unsigned char)(1u << (bit & 7));
    }
    value = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "Os", bytes, "little");
    if (value == NULL)
        goto error;
    res = neg ? PyNumber_Negative(value) : Py_NewRef(value);
error:
    Py_XDECREF(bytes);
    Py_XDECREF(value);
    return res;
}

/* 'l': an int of 15-bit digits.  Returns a new reference, or NULL with ValueError (data too
 * short, a digit out of range) or MemoryError. */
static PyObject *
fp_m_long(fp_mreader *r)
{
    long long n;
    const unsigned char *p;
    if (fp_m_i32(r, &n) < 0)
        return NULL;
    long long digits = n < 0 ? -n : n;
    if (fp_m_size(r, digits, 2) < 0 || fp_m_take(r, (Py_ssize_t)(2 * digits), &p) < 0)
        return NULL;
    for (long long i = 0; i < digits; i++) {
        if (p[2 * i + 1] & 0x80) {
            PyErr_SetString(PyExc_ValueError, "bad marshal data (digit out of range)");
            return NULL;
        }
    }
    return fp_m_long_digits(p, digits, n < 0);
}

/* 'g': a binary double.  Returns a new float, or NULL with ValueError (data too short). */
static PyObject *
fp_m_binary_float(fp_mreader *r)
{
    const unsigned char *p;
    if (fp_m_take(r, 8, &p) < 0)
        return NULL;
#if FP_PY311
    double x = PyFloat_Unpack8((const char *)p, 1);
#else
    double x = _PyFloat_Unpack8(p, 1);
#endif
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(x);
}

/* 'f': a float written as text (one length byte).  Returns a new float, or NULL with
 * ValueError: data too short, bad text, or float()'s own message for text it cannot read. */
static PyObject *
fp_m_text_float(fp_mreader *r)
{
    long long n;
    const unsigned char *p;
    if (fp_m_byte(r, &n) < 0 || fp_m_take(r, (Py_ssize_t)n, &p) < 0)
        return NULL;
    PyObject *text = fp_m_ascii(p, (Py_ssize_t)n);
    if (text == NULL)
        return NULL;
    PyObject *res = PyFloat_FromString(text);
    Py_DECREF(text);
    return res;
}

/* 'u' 't' 'a' 'A' (a 32-bit size) and 'z' 'Z' (a one-byte size) text, 's' bytes.  Returns a
 * new str (bytes for 's'), or NULL with ValueError (a size beyond the data, bad text). */
static PyObject *
fp_m_text(fp_mreader *r, int kind)
{
    long long n;
    const unsigned char *p;
    if (kind == 'z' || kind == 'Z') {
        if (fp_m_byte(r, &n) < 0 || fp_m_take(r, (Py_ssize_t)n, &p) < 0)
            return NULL;
        return fp_m_ascii(p, (Py_ssize_t)n);
    }
    if (fp_m_i32(r, &n) < 0 || fp_m_size(r, n, 1) < 0 || fp_m_take(r, (Py_ssize_t)n, &p) < 0)
        return NULL;
    if (kind == 's')
        return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
    if (kind == 'a' || kind == 'A')
        return fp_m_ascii(p, (Py_ssize_t)n);
    PyObject *res = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "surrogatepass");
    return res ? res : fp_m_bad_text();
}

/* '(' (a 32-bit size) and ')' (a one-byte size): a tuple, which a reference may name once it
 * is whole (slot: its reserved slot, or -1).  The items are read first and the tuple made of
 * them, so no tuple with an empty slot is ever seen (by a gc callback, say).  Returns a new
 * reference, or NULL with an exception set. */
static PyObject *
fp_m_tuple(fp_mreader *r, int kind, int depth, Py_ssize_t slot)
{
    long long n, got = 0;
    PyObject *few[16], **items = few, *tuple = NULL;
    if ((kind == ')' ? fp_m_byte(r, &n) : fp_m_i32(r, &n)) < 0 || fp_m_size(r, n, 1) < 0)
        goto error;
    if (n > 16) {
        items = PyMem_Malloc((size_t)n * sizeof(PyObject *)); /* n <= the bytes left */
        if (items == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    for (; got < n; got++) {
        items[got] = fp_m_obj(r, depth + 1);
        if (items[got] == NULL)
            goto error;
    }
    tuple = PyTuple_New((Py_ssize_t)n);
    if (tuple == NULL)
        goto error;
    for (long long i = 0; i < n; i++)
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, items[i]); /* takes the reference */
    got = 0;
    if (slot >= 0)
        fp_m_ref_set(r, slot, tuple);
error:
    for (long long i = 0; i < got; i++)
        Py_DECREF(items[i]);
    if (items != few)
        PyMem_Free(items);
    return tuple;
}

/* '[': a list, which a reference may name from the start, as in the Python reader (slot: its
 * reserved slot, or -1).  Returns a new reference, or NULL with an exception set. */
static PyObject *
fp_m_list(fp_mreader *r, int depth, Py_ssize_t slot)
{
    long long n;
    PyObject *list = NULL, *item = NULL;
    if (fp_m_i32(r, &n) < 0 || fp_m_size(r, n, 1) < 0)
        goto error;
    /* grown item by item: a list that a reference names can be seen while it is read (by a
     * gc callback, say), so it never holds an empty slot */
    list = PyList_New(0);
    if (list == NULL)
        goto error;
    if (slot >= 0)
        fp_m_ref_set(r, slot, list);
    for (long long i = 0; i < n; i++) {
        item = fp_m_obj(r, depth + 1);
        if (item == NULL || PyList_Append(list, item) < 0)
            goto error;
        Py_CLEAR(item);
    }
    return list;
error:
    Py_XDECREF(item);
    Py_XDECREF(list);
    return NULL;
}

/* Turns a TypeError being raised (an unhashable key) into ValueError; leaves any other
 * exception.  Returns -1. */
static int
fp_m_unhashable(void)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "bad marshal data (unhashable dict key)");
    }
    return -1;
}

/* '{': key, value pairs up to a '0', which a reference may name from the start (slot: its
 * reserved slot, or -1).  Returns a new reference, or NULL with an exception set. */
static PyObject *
fp_m_dict(fp_mreader *r, int depth, Py_ssize_t slot)
{
    PyObject *table = PyDict_New(), *key = NULL, *value = NULL;
    if (table == NULL)
        goto error;
    if (slot >= 0)
        fp_m_ref_set(r, slot, table);
    while (r->pos >= r->len || r->data[r->pos] != '0') {
        key = fp_m_obj(r, depth + 1);
        if (key == NULL)
            goto error;
        value = fp_m_obj(r, depth + 1);
        if (value == NULL) {
            fp_m_unhashable(); /* as the Python reader's try around the value and the store */
            goto error;
        }
        if (PyDict_SetItem(table, key, value) < 0) {
            fp_m_unhashable();
            goto error;
        }
        Py_CLEAR(key);
        Py_CLEAR(value);
    }
    r->pos++; /* the '0' */
    return table;
error:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(table);
    return NULL;
}

/* 'r': the object of an earlier slot.  Returns a new reference, or NULL with ValueError (no
 * such slot, or one that may not be named). */
static PyObject *
fp_m_backref(fp_mreader *r)
{
    long long index;
    if (fp_m_i32(r, &index) < 0)
        return NULL;
    if (index < 0 || index >= (long long)r->nrefs || r->refs[index] == NULL) {
        PyErr_SetString(PyExc_ValueError, "bad marshal data (invalid reference)");
        return NULL;
    }
    return Py_NewRef(r->refs[index]);
}

/* The value of type code kind (the flag taken off) at depth; slot: the reserved reference
 * slot of a flagged container, or -1.  Returns a new reference, or NULL with ValueError for
 * anything a pstats file does not hold (or another exception: MemoryError). */
static PyObject *
fp_m_value(fp_mreader *r, int kind, int depth, Py_ssize_t slot)
{
    switch (kind) {
    case 'N':
        return Py_NewRef(Py_None);
    case 'T':
        return Py_NewRef(Py_True);
    case 'F':
        return Py_NewRef(Py_False);
    case 'i': {
        long long v;
        return fp_m_i32(r, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    }
    case 'l':
        return fp_m_long(r);
    case 'g':
        return fp_m_binary_float(r);
    case 'f':
        return fp_m_text_float(r);
    case 's':
        if (!r->allow_bytes)
            break;
        return fp_m_text(r, kind);
    case 'u':
    case 't':
    case 'a':
    case 'A':
    case 'z':
    case 'Z':
        return fp_m_text(r, kind);
    case '(':
    case ')':
        return fp_m_tuple(r, kind, depth, slot);
    case '[':
        return fp_m_list(r, depth, slot);
    case '{':
        return fp_m_dict(r, depth, slot);
    case 'r':
        return fp_m_backref(r);
    default:
        break;
    }
    PyObject *code = PyUnicode_FromOrdinal(kind);
    if (code != NULL) {
        PyErr_Format(PyExc_ValueError, "bad marshal data (type code %R has no place in a profile)",
                     code);
        Py_DECREF(code);
    }
    return NULL;
}

/* The next object at depth.  Returns a new reference, or NULL with ValueError on anything a
 * pstats file does not hold (or MemoryError). */
static PyObject *
fp_m_obj(fp_mreader *r, int depth)
{
    long long code;
    if (depth > FP_M_MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "bad marshal data (nested too deeply)");
        return NULL;
    }
    if (fp_m_byte(r, &code) < 0)
        return NULL;
    int flag = (int)code & FP_M_FLAG_REF, kind = (int)code & ~FP_M_FLAG_REF;
    Py_ssize_t slot = -1;
    if (flag && (kind == '(' || kind == ')' || kind == '[' || kind == '{')) {
        slot = fp_m_ref_add(r, NULL); /* filled when a reference may name it */
        if (slot < 0)
            return NULL;
    }
    PyObject *value = fp_m_value(r, kind, depth, slot);
    if (value != NULL && flag && slot < 0 && fp_m_ref_add(r, value) < 0)
        Py_CLEAR(value);
    return value;
}

/* _marshal_loads(data, /, *, allow_bytes=False).  Returns the object marshal.dumps wrote to
 * the bytes-like data (trailing bytes ignored), or NULL with ValueError for anything else
 * (TypeError when data is not bytes-like). */
static PyObject *
fp_marshal_loads(FP_UNUSED PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "allow_bytes", NULL};
    Py_buffer view;
    int allow_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|$p:_marshal_loads", kwlist, &view,
                                     &allow_bytes))
        return NULL;
    fp_mreader r = {view.buf, view.len, 0, allow_bytes, NULL, 0, 0};
    PyObject *res = fp_m_obj(&r, 0);
    for (Py_ssize_t i = 0; i < r.nrefs; i++)
        Py_XDECREF(r.refs[i]);
    PyMem_Free(r.refs);
    PyBuffer_Release(&view);
    return res;
}

static PyMethodDef fp_marshal_methods[] = {
    {"_marshal_loads", (PyCFunction)(void (*)(void))fp_marshal_loads, METH_VARARGS | METH_KEYWORDS,
     "_marshal_loads(data, /, *, allow_bytes=False): the object marshal.dumps wrote to data, "
     "when it is built of dict, tuple, list, str, int, float, None and bools (and bytes with "
     "allow_bytes); ValueError for anything else (fastprof._marshal_reader.loads)."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_marshal_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_marshal_methods);
}
