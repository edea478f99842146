/* kernels/expr_vm.c - the compiled evaluator behind fastprof.kernels.evaluate.
 *
 * Python (kernels.py) turns a typed expression tree (fastprof._expr) into a straight-line
 * program over numbered registers (inputs, constants, temporaries), with the opcodes of
 * expr_ops.h, when every operand is a float32/float64/bool array or a scalar; this file runs it in
 * blocks of FP_VM_BLOCK elements on the thread pool with the GIL released.  Registers hold doubles;
 * a step whose NumPy dtype is float32 rounds its result to float32 (exact NumPy float32 arithmetic
 * for + - * / sqrt).  Transcendental functions use glibc's libmvec AVX2 variants when present
 * (loaded with dlopen), else libm. */
#include "common.h"
#include "kernels/expr_ops.h"
#include "kernels/kernels_py.h"
#include "kernels/numpy_api.h"
#include "kernels/pool.h"
#include "kernels/simd.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if FP_HAVE_AVX2_DISPATCH
#include <immintrin.h>
#endif

#define FP_VM_BLOCK 1024
#define FP_VM_MAXREG 512
#define FP_VM_PER_THREAD (64 * 1024) /* elements */

/* Opcodes, from the one table in expr_ops.h (fastprof._expr reads the same table). */
#define FP_OP_ENUM(id, name, mvec, two) FP_OP_##id,
enum { FP_EXPR_OPS(FP_OP_ENUM) FP_OP_COUNT };
#undef FP_OP_ENUM

typedef struct {
    int op, dst, a, b, c, round32;
} fp_vm_step;

/* libmvec's AVX2 entry points (4 doubles), by opcode; NULL where absent. */
typedef struct {
    int loaded;
    void *v1[FP_OP_COUNT]; /* __m256d f(__m256d) */
    void *v2[FP_OP_COUNT]; /* __m256d f(__m256d, __m256d) */
} fp_mvec_table;

static fp_mvec_table fp_mvec;

/* Loads libmvec's AVX2 functions once (safe to race: the table only ever gains the same
 * values).  Returns nothing. */
static void
fp_mvec_load(void)
{
    static const struct {
        int op;
        const char *name;
        int two;
    } names[] = {
#define FP_OP_MVEC(id, name, mvec, two) {FP_OP_##id, mvec, two},
        FP_EXPR_OPS(FP_OP_MVEC)
#undef FP_OP_MVEC
    };
    if (__atomic_load_n(&fp_mvec.loaded, __ATOMIC_ACQUIRE))
        return;
#if FP_HAVE_AVX2_DISPATCH
    if (fp_simd_level() > 0 && getenv("FASTPROF_NO_LIBMVEC") == NULL) {
        void *h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h != NULL)
            for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                void *f = names[i].name != NULL ? dlsym(h, names[i].name) : NULL;
                if (names[i].two)
                    fp_mvec.v2[names[i].op] = f;
                else
                    fp_mvec.v1[names[i].op] = f;
            }
        /* the handle stays open for the life of the process */
    }
#else
    (void)names;
#endif
    __atomic_store_n(&fp_mvec.loaded, 1, __ATOMIC_RELEASE);
}

#if FP_HAVE_AVX2_DISPATCH
typedef __m256d (*fp_mvec1)(__m256d);
typedef __m256d (*fp_mvec2)(__m256d, __m256d);

/* dst[i] = f(a[i]) (or f(a[i], b[i])) for i < n - n % 4 with a libmvec function.  Returns the
 * number of elements done. */
__attribute__((target("avx2,fma"))) static ptrdiff_t
fp_mvec_run(void *f, int two, double *dst, const double *a, const double *b, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    if (two) {
        fp_mvec2 g = (fp_mvec2)f;
        for (; i + 4 <= n; i += 4)
            _mm256_storeu_pd(dst + i, g(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i)));
    } else {
        fp_mvec1 g = (fp_mvec1)f;
        for (; i + 4 <= n; i += 4)
            _mm256_storeu_pd(dst + i, g(_mm256_loadu_pd(a + i)));
    }
    return i;
}
#endif

/* NumPy's float divmod (npy_divmod): returns the floor quotient, stores the remainder with
 * the sign of b in *mod.  Sets no exception. */
static inline double
fp_vm_divmod(double a, double b, double *mod)
{
    double m = fmod(a, b), div, fl;
    if (b == 0.0) {
        *mod = m;
        return a / b;
    }
    div = (a - m) / b;
    if (m != 0.0) {
        if ((b < 0.0) != (m < 0.0)) {
            m += b;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, b);
    }
    if (div != 0.0) {
        fl = floor(div);
        if (div - fl > 0.5)
            fl += 1.0;
    } else {
        fl = copysign(0.0, a / b);
    }
    *mod = m;
    return fl;
}

/* numpy.remainder of two doubles.  Returns it; sets no exception. */
static inline double
fp_vm_remainder(double a, double b)
{
    double m;
    if (b == 0.0)
        return fmod(a, b);
    (void)fp_vm_divmod(a, b, &m);
    return m;
}

/* numpy.floor_divide of two doubles.  Returns it; sets no exception. */
static inline double
fp_vm_floor_divide(double a, double b)
{
    double m;
    if (b == 0.0)
        return a / b;
    return fp_vm_divmod(a, b, &m);
}

/* One step over n elements: dst = op(a, b, c).  Returns nothing. */
FP_BODY void
fp_vm_step_simple_body(int op, int round32, double *restrict dst, const double *a, const double *b,
                       const double *c, ptrdiff_t n)
{
    ptrdiff_t i = 0;
#define FP_LOOP(expr)                                                                              \
    for (; i < n; i++)                                                                             \
        dst[i] = (expr);                                                                           \
    break
    switch (op) {
    case FP_OP_COPY:
        FP_LOOP(a[i]);
    case FP_OP_NEG:
        FP_LOOP(-a[i]);
    case FP_OP_ADD:
        FP_LOOP(a[i] + b[i]);
    case FP_OP_SUB:
        FP_LOOP(a[i] - b[i]);
    case FP_OP_MUL:
        FP_LOOP(a[i] * b[i]);
    case FP_OP_DIV:
        FP_LOOP(a[i] / b[i]);
    case FP_OP_SQUARE:
        FP_LOOP(a[i] * a[i]);
    case FP_OP_LT:
        FP_LOOP(a[i] < b[i] ? 1.0 : 0.0);
    case FP_OP_LE:
        FP_LOOP(a[i] <= b[i] ? 1.0 : 0.0);
    case FP_OP_GT:
        FP_LOOP(a[i] > b[i] ? 1.0 : 0.0);
    case FP_OP_GE:
        FP_LOOP(a[i] >= b[i] ? 1.0 : 0.0);
    case FP_OP_EQ:
        FP_LOOP(a[i] == b[i] ? 1.0 : 0.0);
    case FP_OP_NE:
        FP_LOOP(a[i] != b[i] ? 1.0 : 0.0);
    case FP_OP_AND:
        FP_LOOP((a[i] != 0.0) & (b[i] != 0.0) ? 1.0 : 0.0);
    case FP_OP_OR:
        FP_LOOP((a[i] != 0.0) | (b[i] != 0.0) ? 1.0 : 0.0);
    case FP_OP_XOR:
        FP_LOOP((a[i] != 0.0) != (b[i] != 0.0) ? 1.0 : 0.0);
    case FP_OP_NOT:
        FP_LOOP(a[i] == 0.0 ? 1.0 : 0.0);
    case FP_OP_WHERE:
        FP_LOOP(a[i] != 0.0 ? b[i] : c[i]);
    case FP_OP_ABS:
        FP_LOOP(fabs(a[i]));
    case FP_OP_SQRT:
        FP_LOOP(sqrt(a[i]));
    case FP_OP_FLOOR:
        FP_LOOP(floor(a[i]));
    case FP_OP_CEIL:
        FP_LOOP(ceil(a[i]));
    case FP_OP_FMOD:
        FP_LOOP(fmod(a[i], b[i]));
    case FP_OP_MOD:
        FP_LOOP(fp_vm_remainder(a[i], b[i]));
    case FP_OP_FLOORDIV:
        FP_LOOP(fp_vm_floor_divide(a[i], b[i]));
    case FP_OP_MIN:
        FP_LOOP(a[i] != a[i] || b[i] != b[i] ? a[i] + b[i] : (a[i] < b[i] ? a[i] : b[i]));
    case FP_OP_MAX:
        FP_LOOP(a[i] != a[i] || b[i] != b[i] ? a[i] + b[i] : (a[i] > b[i] ? a[i] : b[i]));
    default:
        break;
    }
#undef FP_LOOP
    if (round32)
        for (i = 0; i < n; i++)
            dst[i] = (double)(float)dst[i];
}

/* fp_vm_step_simple(): the body above, AVX2/FMA or baseline build by the CPU.  Returns
 * nothing. */
FP_DISPATCH(void, fp_vm_step_simple,
            (int op, int round32, double *restrict dst, const double *a, const double *b,
             const double *c, ptrdiff_t n),
            (op, round32, dst, a, b, c, n))

/* One step, transcendental functions included.  Returns nothing. */
static void
fp_vm_run_step(const fp_vm_step *st, double *dst, const double *a, const double *b, const double *c,
               ptrdiff_t n)
{
    ptrdiff_t i = 0;
    double (*f1)(double) = NULL;
    int op = st->op;
    switch (op) {
    case FP_OP_EXP:
        f1 = exp;
        break;
    case FP_OP_LOG:
        f1 = log;
        break;
    case FP_OP_LOG1P:
        f1 = log1p;
        break;
    case FP_OP_EXPM1:
        f1 = expm1;
        break;
    case FP_OP_SIN:
        f1 = sin;
        break;
    case FP_OP_COS:
        f1 = cos;
        break;
    case FP_OP_TAN:
        f1 = tan;
        break;
    case FP_OP_ASIN:
        f1 = asin;
        break;
    case FP_OP_ACOS:
        f1 = acos;
        break;
    case FP_OP_ATAN:
        f1 = atan;
        break;
    case FP_OP_SINH:
        f1 = sinh;
        break;
    case FP_OP_COSH:
        f1 = cosh;
        break;
    case FP_OP_TANH:
        f1 = tanh;
        break;
    case FP_OP_LOG10:
        f1 = log10;
        break;
    case FP_OP_LOG2:
        f1 = log2;
        break;
    case FP_OP_ASINH:
        f1 = asinh;
        break;
    case FP_OP_ACOSH:
        f1 = acosh;
        break;
    case FP_OP_ATANH:
        f1 = atanh;
        break;
    case FP_OP_POW:
    case FP_OP_ATAN2:
    case FP_OP_HYPOT:
        break;
    default:
        fp_vm_step_simple(op, st->round32, dst, a, b, c, n);
        return;
    }
#if FP_HAVE_AVX2_DISPATCH
    if (op == FP_OP_POW || op == FP_OP_ATAN2 || op == FP_OP_HYPOT) {
        if (fp_mvec.v2[op] != NULL)
            i = fp_mvec_run(fp_mvec.v2[op], 1, dst, a, b, n);
    } else if (fp_mvec.v1[op] != NULL) {
        i = fp_mvec_run(fp_mvec.v1[op], 0, dst, a, NULL, n);
    }
#endif
    if (op == FP_OP_POW)
        for (; i < n; i++)
            dst[i] = pow(a[i], b[i]);
    else if (op == FP_OP_ATAN2)
        for (; i < n; i++)
            dst[i] = atan2(a[i], b[i]);
    else if (op == FP_OP_HYPOT)
        for (; i < n; i++)
            dst[i] = hypot(a[i], b[i]);
    else
        for (; i < n; i++)
            dst[i] = f1(a[i]);
    if (st->round32)
        for (i = 0; i < n; i++)
            dst[i] = (double)(float)dst[i];
}

typedef struct {
    int kind; /* 0 float64, 1 float32, 2 bool */
    const char *data;
    ptrdiff_t len; /* N, or 1 for a broadcast scalar */
} fp_vm_input;

typedef struct {
    const fp_vm_step *steps;
    int nsteps, nregs, ninputs, nconsts, result;
    const fp_vm_input *inputs;
    const double *consts;
    char *out;
    int outkind;
    ptrdiff_t n;
    double **scratch; /* per worker: nregs * FP_VM_BLOCK doubles, NULL until used */
} fp_vm_job;

/* Pool callback: one block.  Returns 0, or -1 when out of memory. */
static int
fp_vm_item(void *ctx, ptrdiff_t item, int worker)
{
    fp_vm_job *job = (fp_vm_job *)ctx;
    double *regs = job->scratch[worker];
    const double *ptr[FP_VM_MAXREG];
    ptrdiff_t start = item * FP_VM_BLOCK;
    ptrdiff_t n = job->n - start < FP_VM_BLOCK ? job->n - start : FP_VM_BLOCK;
    if (regs == NULL) {
        regs = (double *)malloc(sizeof(double) * (size_t)job->nregs * FP_VM_BLOCK);
        if (regs == NULL)
            return -1;
        job->scratch[worker] = regs;
        /* constants and broadcast scalars, once per worker */
        for (int r = 0; r < job->ninputs; r++) {
            const fp_vm_input *in = &job->inputs[r];
            if (in->len == 1) {
                double v = in->kind == 0   ? *(const double *)in->data
                           : in->kind == 1 ? (double)*(const float *)in->data
                                           : (double)(*(const npy_bool *)in->data != 0);
                for (ptrdiff_t i = 0; i < FP_VM_BLOCK; i++)
                    regs[(size_t)r * FP_VM_BLOCK + i] = v;
            }
        }
        for (int k = 0; k < job->nconsts; k++)
            for (ptrdiff_t i = 0; i < FP_VM_BLOCK; i++)
                regs[(size_t)(job->ninputs + k) * FP_VM_BLOCK + i] = job->consts[k];
    }
    for (int r = 0; r < job->nregs; r++)
        ptr[r] = regs + (size_t)r * FP_VM_BLOCK;
    for (int r = 0; r < job->ninputs; r++) {
        const fp_vm_input *in = &job->inputs[r];
        double *buf = regs + (size_t)r * FP_VM_BLOCK;
        if (in->len == 1)
            continue;
        if (in->kind == 0) {
            ptr[r] = (const double *)in->data + start; /* read in place */
        } else if (in->kind == 1) {
            const float *f = (const float *)in->data + start;
            for (ptrdiff_t i = 0; i < n; i++)
                buf[i] = (double)f[i];
        } else {
            const npy_bool *bo = (const npy_bool *)in->data + start;
            for (ptrdiff_t i = 0; i < n; i++)
                buf[i] = bo[i] ? 1.0 : 0.0;
        }
    }
    for (int s = 0; s < job->nsteps; s++) {
        const fp_vm_step *st = &job->steps[s];
        double *dst = regs + (size_t)st->dst * FP_VM_BLOCK;
        if (st->dst == job->result && job->outkind == 0)
            dst = (double *)job->out + start; /* the last step writes the output directly */
        fp_vm_run_step(st, dst, ptr[st->a], ptr[st->b], ptr[st->c], n);
        ptr[st->dst] = dst;
    }
    {
        const double *res = ptr[job->result];
        if (job->outkind == 0) {
            double *o = (double *)job->out + start;
            if (res != o)
                memcpy(o, res, sizeof(double) * (size_t)n);
        } else if (job->outkind == 1) {
            float *o = (float *)job->out + start;
            for (ptrdiff_t i = 0; i < n; i++)
                o[i] = (float)res[i];
        } else {
            npy_bool *o = (npy_bool *)job->out + start;
            for (ptrdiff_t i = 0; i < n; i++)
                o[i] = res[i] != 0.0;
        }
    }
    return 0;
}

/* The kind code of a 1-D contiguous array (0 float64, 1 float32, 2 bool), or -1 with a
 * TypeError/ValueError naming `what`. */
static int
fp_vm_kind(PyObject *o, const char *what)
{
    PyArrayObject *a = (PyArrayObject *)o;
    if (!PyArray_Check(o) || PyArray_NDIM(a) != 1 || !PyArray_IS_C_CONTIGUOUS(a) ||
        !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a)) {
        PyErr_Format(PyExc_TypeError, "%s must be an aligned native contiguous 1-D array", what);
        return -1;
    }
    switch (PyArray_TYPE(a)) {
    case NPY_DOUBLE:
        return 0;
    case NPY_FLOAT:
        return 1;
    case NPY_BOOL:
        return 2;
    default:
        PyErr_Format(PyExc_TypeError, "%s must be float64, float32 or bool", what);
        return -1;
    }
}

/* Reads the tuple of steps into steps: each a tuple (op, dst, a, b, c, round32) of ints, dst
 * past the first nfixed registers (inputs and consts), all below nregs.  Returns 0, or -1 with
 * an exception set (TypeError for a step that is not a tuple of 6 ints). */
static int
fp_vm_read_steps(PyObject *tuple, int nfixed, int nregs, fp_vm_step *steps)
{
    Py_ssize_t nsteps = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t s = 0; s < nsteps; s++) {
        int v[6];
        PyObject *t = PyTuple_GET_ITEM(tuple, s);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) {
            PyErr_Format(PyExc_TypeError,
                         "_evaluate_program: step %zd must be a tuple of 6 ints "
                         "(op, dst, a, b, c, round32), not %.100s",
                         s, PyTuple_Check(t) ? "a tuple of another length" : Py_TYPE(t)->tp_name);
            return -1;
        }
        if (!PyArg_ParseTuple(t, "iiiiii", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]))
            return -1;
        if (v[0] < 0 || v[0] >= FP_OP_COUNT || v[1] < nfixed || v[1] >= nregs || v[2] < 0 ||
            v[2] >= nregs || v[3] < 0 || v[3] >= nregs || v[4] < 0 || v[4] >= nregs) {
            PyErr_Format(PyExc_ValueError, "_evaluate_program: bad step %zd", s);
            return -1;
        }
        steps[s] = (fp_vm_step){v[0], v[1], v[2], v[3], v[4], v[5]};
    }
    return 0;
}

/* _evaluate_program(steps, inputs, consts, nregs, result, out): runs a register program (see
 * the file comment); steps is a sequence of (op, dst, a, b, c, round32) tuples.  Steps and
 * consts are converted before any array is looked at, and tuple copies hold the arrays.
 * Returns None, or NULL with an exception set. */
PyObject *
fp_evaluate_program(FP_UNUSED PyObject *self, PyObject *args)
{
    PyObject *steps_obj, *inputs_obj, *consts_obj, *out, *sfast = NULL, *ifast = NULL,
                                                         *cfast = NULL, *result = NULL;
    int nregs, res;
    fp_vm_job job;
    fp_vm_step *steps = NULL;
    fp_vm_input *inputs = NULL;
    double *consts = NULL;
    int rc;
    memset(&job, 0, sizeof(job));
    if (!PyArg_ParseTuple(args, "OOOiiO:_evaluate_program", &steps_obj, &inputs_obj, &consts_obj,
                          &nregs, &res, &out))
        return NULL;
    if (fp_numpy_ready() < 0)
        return NULL;
    if (!PySequence_Check(steps_obj) || !PySequence_Check(inputs_obj) ||
        !PySequence_Check(consts_obj)) {
        PyErr_SetString(PyExc_TypeError, "_evaluate_program: steps, inputs and consts must be "
                                         "sequences");
        goto done;
    }
    /* tuple copies hold every item (the input arrays included) for the whole run */
    sfast = PySequence_Tuple(steps_obj);
    ifast = sfast == NULL ? NULL : PySequence_Tuple(inputs_obj);
    cfast = ifast == NULL ? NULL : PySequence_Tuple(consts_obj);
    if (sfast == NULL || ifast == NULL || cfast == NULL)
        goto done;
    job.nsteps = (int)PyTuple_GET_SIZE(sfast);
    job.ninputs = (int)PyTuple_GET_SIZE(ifast);
    job.nconsts = (int)PyTuple_GET_SIZE(cfast);
    if (nregs < 1 || nregs > FP_VM_MAXREG || job.ninputs + job.nconsts > nregs || res < 0 ||
        res >= nregs || job.nsteps < 1) {
        PyErr_SetString(PyExc_ValueError, "_evaluate_program: bad register counts");
        goto done;
    }
    steps = (fp_vm_step *)calloc((size_t)job.nsteps, sizeof(fp_vm_step));
    inputs = (fp_vm_input *)calloc((size_t)job.ninputs + 1, sizeof(fp_vm_input));
    consts = (double *)calloc((size_t)job.nconsts + 1, sizeof(double));
    if (steps == NULL || inputs == NULL || consts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* steps and consts first: their __index__/__float__ may run Python code that changes the
     * arrays, which are looked at only after */
    if (fp_vm_read_steps(sfast, job.ninputs + job.nconsts, nregs, steps) < 0)
        goto done;
    for (int k = 0; k < job.nconsts; k++) {
        consts[k] = PyFloat_AsDouble(PyTuple_GET_ITEM(cfast, k));
        if (consts[k] == -1.0 && PyErr_Occurred())
            goto done;
    }
    if ((job.outkind = fp_vm_kind(out, "out")) < 0)
        goto done;
    if (!PyArray_ISWRITEABLE((PyArrayObject *)out)) {
        PyErr_SetString(PyExc_ValueError, "out must be writeable");
        goto done;
    }
    job.n = PyArray_DIM((PyArrayObject *)out, 0);
    for (int r = 0; r < job.ninputs; r++) {
        PyArrayObject *a = (PyArrayObject *)PyTuple_GET_ITEM(ifast, r);
        int kind = fp_vm_kind((PyObject *)a, "inputs");
        if (kind < 0)
            goto done;
        if (PyArray_DIM(a, 0) != job.n && PyArray_DIM(a, 0) != 1) {
            PyErr_SetString(PyExc_ValueError, "inputs must have out's length or length 1");
            goto done;
        }
        inputs[r].kind = kind;
        inputs[r].data = PyArray_BYTES(a);
        inputs[r].len = PyArray_DIM(a, 0) == job.n ? job.n : 1;
        if (job.n == 1)
            inputs[r].len = 2; /* "full length": read in place */
    }
    job.steps = steps;
    job.inputs = inputs;
    job.consts = consts;
    job.nregs = nregs;
    job.result = res;
    job.out = PyArray_BYTES((PyArrayObject *)out);
    if (job.n > 0) {
        int nthreads = fp_pool_get_threads();
        ptrdiff_t nblocks = (job.n + FP_VM_BLOCK - 1) / FP_VM_BLOCK;
        /* waking a thread costs tens of microseconds: give each at least FP_VM_PER_THREAD */
        if ((ptrdiff_t)nthreads > 1 + job.n / FP_VM_PER_THREAD)
            nthreads = (int)(1 + job.n / FP_VM_PER_THREAD);
        job.scratch = (double **)calloc((size_t)nthreads, sizeof(double *));
        if (job.scratch == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        fp_mvec_load();
        Py_BEGIN_ALLOW_THREADS rc = fp_pool_run(nblocks, nthreads, fp_vm_item, &job);
        Py_END_ALLOW_THREADS for (int w = 0; w < nthreads; w++) free(job.scratch[w]);
        free(job.scratch);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    free(steps);
    free(inputs);
    free(consts);
    Py_XDECREF(sfast);
    Py_XDECREF(ifast);
    Py_XDECREF(cfast);
    return result;
}

/* _expr_opcodes(): {ufunc name: opcode} of the table in expr_ops.h.  Returns a new dict, or
 * NULL with an exception set. */
PyObject *
fp_expr_opcodes(FP_UNUSED PyObject *self, FP_UNUSED PyObject *unused)
{
    static const char *const names[] = {
#define FP_OP_NAME(id, name, mvec, two) name,
        FP_EXPR_OPS(FP_OP_NAME)
#undef FP_OP_NAME
    };
    PyObject *d = PyDict_New(), *num = NULL;
    if (d == NULL)
        goto error;
    for (int op = 0; op < FP_OP_COUNT; op++) {
        num = PyLong_FromLong(op);
        if (num == NULL || PyDict_SetItemString(d, names[op], num) < 0)
            goto error;
        Py_CLEAR(num);
    }
    return d;
error:
    Py_XDECREF(num);
    Py_XDECREF(d);
    return NULL;
}
