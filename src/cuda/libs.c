/* cuda/libs.c - the CUDA libraries loaded lazily with dlopen on first use (NVRTC, cuBLAS),
 * modules loaded from compiled images through the runtime (cudaLibraryLoadData), and kernel
 * launches with packed arguments.  The handles of dlopen'ed libraries are process-wide, like
 * the libraries themselves; they are only touched with the GIL held.  CUDA builds only. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

enum { FP_LIB_NVRTC, FP_LIB_CUBLAS, FP_LIB_CUFILT, FP_NLIBS };
static void *fp_lib_handles[FP_NLIBS];

/* Returns the dlopen handle of library kind, trying each path of the tuple paths in turn, or
 * NULL with CudaUnavailableError set (naming the paths tried and the last dlerror). */
static void *
fp_cuda_lib(PyObject *m, int kind, PyObject *paths, const char *what)
{
    char msg[1024];
    const char *last = "";
    if (fp_lib_handles[kind] != NULL)
        return fp_lib_handles[kind];
    if (!PyTuple_Check(paths)) {
        PyErr_SetString(PyExc_TypeError, "library paths must be a tuple of str");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(paths); i++) {
        const char *p = PyUnicode_AsUTF8(PyTuple_GET_ITEM(paths, i));
        if (p == NULL)
            return NULL;
        fp_lib_handles[kind] = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (fp_lib_handles[kind] != NULL)
            return fp_lib_handles[kind];
        last = dlerror();
    }
    snprintf(msg, sizeof msg, "%s could not be loaded (tried %zd names; last error: %s)", what,
             PyTuple_GET_SIZE(paths), last ? last : "none");
    fp_cuda_unavailable(m, msg);
    return NULL;
}

/* Returns symbol name of handle h, or NULL with CudaUnavailableError set. */
static void *
fp_cuda_sym(PyObject *m, void *h, const char *name)
{
    char msg[256];
    void *f = dlsym(h, name);
    if (f == NULL) {
        snprintf(msg, sizeof msg, "symbol %s missing from the loaded CUDA library", name);
        fp_cuda_unavailable(m, msg);
    }
    return f;
}

typedef int (*fp_nvrtc_create_t)(void **, const char *, const char *, int, const char *const *,
                                 const char *const *);
typedef int (*fp_nvrtc_compile_t)(void *, int, const char *const *);
typedef int (*fp_nvrtc_size_t)(void *, size_t *);
typedef int (*fp_nvrtc_get_t)(void *, char *);
typedef int (*fp_nvrtc_destroy_t)(void **);

/* Sets RuntimeError for a failed NVRTC compile of name (error rc), with NVRTC's log when it
 * can be read, else saying that it could not be: a log that cannot be read (a failing size or
 * read, no memory, a size of 0) never stops the error from being raised.  Returns nothing;
 * always sets an exception. */
static void
fp_nvrtc_log_error(void *prog, const char *name, int rc, fp_nvrtc_size_t logsize,
                   fp_nvrtc_get_t getlog)
{
    size_t n = 0;
    char *buf = NULL;
    PyObject *log = NULL;
    if (logsize(prog, &n) == 0 && n > 0 && n < ((size_t)1 << 30) &&
        (buf = PyMem_Malloc(n + 1)) != NULL) {
        buf[0] = '\0';
        if (getlog(prog, buf) == 0) {
            buf[n] = '\0';
            log = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
        }
    }
    PyErr_Clear(); /* a failed decode leaves no exception behind the one raised here */
    if (log != NULL)
        PyErr_Format(PyExc_RuntimeError, "NVRTC could not compile %s (error %d):\n%U", name, rc,
                     log);
    else
        PyErr_Format(PyExc_RuntimeError,
                     "NVRTC could not compile %s (error %d; its log could not be read)", name, rc);
    Py_XDECREF(log);
    PyMem_Free(buf);
}

/* _cuda_nvrtc_compile(source, name, options, cubin, lib_paths) -> bytes: compiles CUDA C++
 * source with NVRTC into a CUBIN (cubin true; options must name an sm_ arch) or PTX.  Needs no
 * device.  Returns NULL with CudaUnavailableError (no NVRTC) or RuntimeError (with the log). */
PyObject *
fp_cuda_nvrtc_compile(PyObject *m, PyObject *args)
{
    const char *src, *name;
    PyObject *opts, *paths, *res = NULL;
    int cubin, rc;
    void *h, *prog = NULL;
    const char **cop = NULL;
    char *buf = NULL;
    size_t n = 0;
    Py_ssize_t nopt;
    fp_nvrtc_create_t create;
    fp_nvrtc_compile_t compile;
    fp_nvrtc_size_t logsize, outsize;
    fp_nvrtc_get_t getlog, getout;
    fp_nvrtc_destroy_t destroy = NULL;
    if (!PyArg_ParseTuple(args, "ssO!pO", &src, &name, &PyTuple_Type, &opts, &cubin, &paths))
        return NULL;
    if ((h = fp_cuda_lib(m, FP_LIB_NVRTC, paths, "NVRTC (libnvrtc)")) == NULL)
        goto error;
    if (!(create = (fp_nvrtc_create_t)fp_cuda_sym(m, h, "nvrtcCreateProgram")) ||
        !(compile = (fp_nvrtc_compile_t)fp_cuda_sym(m, h, "nvrtcCompileProgram")) ||
        !(logsize = (fp_nvrtc_size_t)fp_cuda_sym(m, h, "nvrtcGetProgramLogSize")) ||
        !(getlog = (fp_nvrtc_get_t)fp_cuda_sym(m, h, "nvrtcGetProgramLog")) ||
        !(outsize = (fp_nvrtc_size_t)fp_cuda_sym(
              m, h, cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize")) ||
        !(getout = (fp_nvrtc_get_t)fp_cuda_sym(m, h, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX")) ||
        !(destroy = (fp_nvrtc_destroy_t)fp_cuda_sym(m, h, "nvrtcDestroyProgram")))
        goto error;
    nopt = PyTuple_GET_SIZE(opts);
    cop = PyMem_Calloc((size_t)nopt + 1, sizeof *cop);
    if (cop == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < nopt; i++)
        if ((cop[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(opts, i))) == NULL)
            goto error;
    if ((rc = create(&prog, src, name, 0, NULL, NULL)) != 0) {
        PyErr_Format(PyExc_RuntimeError, "nvrtcCreateProgram failed (%d)", rc);
        goto error;
    }
    Py_BEGIN_ALLOW_THREADS rc = compile(prog, (int)nopt, cop);
    Py_END_ALLOW_THREADS if (rc != 0)
    {
        fp_nvrtc_log_error(prog, name, rc, logsize, getlog);
        goto error;
    }
    if (outsize(prog, &n) != 0 || (buf = PyMem_Malloc(n + 1)) == NULL || getout(prog, buf) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "NVRTC compiled but returned no image");
        goto error;
    }
    res = PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
error:
    if (prog != NULL && destroy != NULL)
        destroy(&prog);
    PyMem_Free(buf);
    PyMem_Free(cop);
    return res;
}

/* _cuda_library_load(image, kernel_name) -> (library, kernel) handles: loads a CUBIN/PTX
 * image into the current context with the runtime and finds kernel_name (an extern "C" name).
 * The library stays loaded for the life of the process.  Returns NULL with CudaError. */
PyObject *
fp_cuda_library_load(PyObject *m, PyObject *args)
{
    Py_buffer img;
    const char *kname;
    cudaLibrary_t lib = NULL;
    cudaKernel_t k = NULL;
    cudaError_t err;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*s", &img, &kname))
        return NULL;
    err = cudaLibraryLoadData(&lib, img.buf, NULL, NULL, 0, NULL, NULL, 0);
    if (err != cudaSuccess) {
        fp_cuda_raise(m, err, "cudaLibraryLoadData");
        goto error;
    }
    err = cudaLibraryGetKernel(&k, lib, kname);
    if (err != cudaSuccess) {
        cudaLibraryUnload(lib);
        fp_cuda_raise(m, err, "cudaLibraryGetKernel");
        goto error;
    }
    res = Py_BuildValue("NN", PyLong_FromVoidPtr((void *)lib), PyLong_FromVoidPtr((void *)k));
error:
    PyBuffer_Release(&img);
    return res;
}

#define FP_MAX_ARGS 64

/* _cuda_launch(kernel, grid, block, fmt, args, stream) -> None: launches kernel (from
 * _cuda_library_load) with one argument per character of fmt: 'p' pointer (int), 'q' int64,
 * 'd' double, 'f' float.  Returns NULL with an exception. */
PyObject *
fp_cuda_launch(PyObject *m, PyObject *args)
{
    PyObject *ok, *vals, *os;
    const char *fmt;
    unsigned int grid, block;
    void *k, *s;
    union {
        void *p;
        long long q;
        double d;
        float f;
    } slots[FP_MAX_ARGS];
    void *argv[FP_MAX_ARGS];
    Py_ssize_t n;
    cudaError_t err;
    dim3 g, b;
    if (!PyArg_ParseTuple(args, "OIIsO!O", &ok, &grid, &block, &fmt, &PyTuple_Type, &vals, &os) ||
        fp_cuda_ptr(ok, &k) < 0 || fp_cuda_ptr(os, &s) < 0)
        return NULL;
    n = PyTuple_GET_SIZE(vals);
    if (n > FP_MAX_ARGS || (Py_ssize_t)strlen(fmt) != n || k == NULL) {
        PyErr_SetString(PyExc_ValueError, "kernel arguments do not match their format");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(vals, i);
        switch (fmt[i]) {
        case 'p':
            if (fp_cuda_ptr(v, &slots[i].p) < 0)
                return NULL;
            break;
        case 'q':
            slots[i].q = PyLong_AsLongLong(v);
            break;
        case 'd':
            slots[i].d = PyFloat_AsDouble(v);
            break;
        case 'f':
            slots[i].f = (float)PyFloat_AsDouble(v);
            break;
        default:
            PyErr_Format(PyExc_ValueError, "unknown kernel argument code %c", fmt[i]);
            return NULL;
        }
        if (PyErr_Occurred())
            return NULL;
        argv[i] = &slots[i];
    }
    g.x = grid;
    g.y = 1;
    g.z = 1;
    b.x = block;
    b.y = 1;
    b.z = 1;
    err = cudaLaunchKernel((const void *)k, g, b, argv, 0, (cudaStream_t)s);
    if (err != cudaSuccess)
        return fp_cuda_raise(m, err, "cudaLaunchKernel");
    Py_RETURN_NONE;
}

typedef int (*fp_cublas_create_t)(void **);
typedef int (*fp_cublas_stream_t)(void *, void *);
typedef int (*fp_sgemm_t)(void *, int, int, int, int, int, const float *, const float *, int,
                          const float *, int, const float *, float *, int);
typedef int (*fp_dgemm_t)(void *, int, int, int, int, int, const double *, const double *, int,
                          const double *, int, const double *, double *, int);

#define FP_MAX_DEVICES 64
static void *fp_cublas_handles[FP_MAX_DEVICES];

/* _cuda_gemm(dtype, m, n, k, a, b, c, stream, lib_paths) -> None: C = A @ B for C-contiguous
 * row-major A (m x k), B (k x n), C (m x n) on the device (dtype 0 float32, 1 float64), with
 * cuBLAS (column-major) computing C^T = B^T A^T.  Returns NULL with an exception. */
PyObject *
fp_cuda_gemm(PyObject *m, PyObject *args)
{
    int dtype, dev = 0, st;
    long long M, N, K;
    PyObject *oa, *ob, *oc, *os, *paths;
    void *a, *b, *c, *s, *h;
    fp_cublas_stream_t set_stream;
    if (!PyArg_ParseTuple(args, "iLLLOOOOO", &dtype, &M, &N, &K, &oa, &ob, &oc, &os, &paths) ||
        fp_cuda_ptr(oa, &a) < 0 || fp_cuda_ptr(ob, &b) < 0 || fp_cuda_ptr(oc, &c) < 0 ||
        fp_cuda_ptr(os, &s) < 0)
        return NULL;
    if (M > 0x7fffffff || N > 0x7fffffff || K > 0x7fffffff || M < 0 || N < 0 || K < 0) {
        PyErr_SetString(PyExc_ValueError, "matmul dimensions must fit in 32-bit ints");
        return NULL;
    }
    if ((h = fp_cuda_lib(m, FP_LIB_CUBLAS, paths, "cuBLAS (libcublas)")) == NULL)
        return NULL;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= FP_MAX_DEVICES)
        dev = 0;
    if (fp_cublas_handles[dev] == NULL) {
        fp_cublas_create_t create = (fp_cublas_create_t)fp_cuda_sym(m, h, "cublasCreate_v2");
        if (create == NULL)
            return NULL;
        if ((st = create(&fp_cublas_handles[dev])) != 0) {
            fp_cublas_handles[dev] = NULL;
            PyErr_Format(PyExc_RuntimeError, "cublasCreate failed (cuBLAS status %d)", st);
            return NULL;
        }
    }
    set_stream = (fp_cublas_stream_t)fp_cuda_sym(m, h, "cublasSetStream_v2");
    if (set_stream == NULL)
        return NULL;
    set_stream(fp_cublas_handles[dev], s);
    if (dtype == 0) {
        const float one = 1.0f, zero = 0.0f;
        fp_sgemm_t f = (fp_sgemm_t)fp_cuda_sym(m, h, "cublasSgemm_v2");
        if (f == NULL)
            return NULL;
        st = f(fp_cublas_handles[dev], 0, 0, (int)N, (int)M, (int)K, &one, b, (int)(N ? N : 1), a,
               (int)(K ? K : 1), &zero, c, (int)(N ? N : 1));
    } else {
        const double one = 1.0, zero = 0.0;
        fp_dgemm_t f = (fp_dgemm_t)fp_cuda_sym(m, h, "cublasDgemm_v2");
        if (f == NULL)
            return NULL;
        st = f(fp_cublas_handles[dev], 0, 0, (int)N, (int)M, (int)K, &one, b, (int)(N ? N : 1), a,
               (int)(K ? K : 1), &zero, c, (int)(N ? N : 1));
    }
    if (st != 0) {
        PyErr_Format(PyExc_RuntimeError, "cuBLAS gemm failed (cuBLAS status %d)", st);
        return NULL;
    }
    Py_RETURN_NONE;
}
typedef char *(*fp_cu_demangle_t)(const char *, char *, size_t *, int *);

/* _cuda_demangle(name, lib_paths) -> str or None: name demangled by the toolkit's cu++filt
 * library (__cu_demangle of libcufilt, opened from lib_paths like the other libraries), or
 * None when name is not a mangled name it knows.  Returns NULL with CudaUnavailableError when
 * no libcufilt can be loaded (the caller then demangles another way). */
PyObject *
fp_cuda_demangle(PyObject *m, PyObject *args)
{
    const char *name;
    PyObject *paths, *res = NULL;
    void *h;
    char *out = NULL;
    int status = -1;
    fp_cu_demangle_t demangle;
    if (!PyArg_ParseTuple(args, "sO", &name, &paths))
        return NULL;
    if ((h = fp_cuda_lib(m, FP_LIB_CUFILT, paths, "cu++filt (libcufilt)")) == NULL)
        return NULL;
    if ((demangle = (fp_cu_demangle_t)fp_cuda_sym(m, h, "__cu_demangle")) == NULL)
        return NULL;
    out = demangle(name, NULL, NULL, &status);
    if (out != NULL && status == 0)
        res = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
    else
        res = Py_NewRef(Py_None);
    free(out);
    return res;
}
#endif
