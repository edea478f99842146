/* cuda/cuda_py.h - declarations shared by the C files of the CUDA part (Python side).
 * The functions below exist only in CUDA builds; cuda.c binds them, or, in a CPU-only build,
 * binds every name to one function that raises "built without CUDA". */
#ifndef FP_CUDA_PY_H
#define FP_CUDA_PY_H

#include "common.h"

/* Raises fastprof.cuda.CudaError(code, name, "what: message") for the cudaError_t err (or a
 * RuntimeError before fastprof.cuda registered its classes).  Returns NULL. */
PyObject *fp_cuda_raise(PyObject *m, int err, const char *what);

/* Raises fastprof.cuda.CudaUnavailableError(reason).  Returns NULL. */
PyObject *fp_cuda_unavailable(PyObject *m, const char *reason);

/* Parses a Python int into a device pointer / handle.  Returns 0, or -1 with an exception. */
int fp_cuda_ptr(PyObject *o, void **out);

#ifdef FP_HAVE_CUDA
/* runtime.c */
PyObject *fp_cuda_probe(PyObject *m, PyObject *args);
PyObject *fp_cuda_versions(PyObject *m, PyObject *args);
PyObject *fp_cuda_device_props(PyObject *m, PyObject *args);
PyObject *fp_cuda_set_device(PyObject *m, PyObject *args);
PyObject *fp_cuda_get_device(PyObject *m, PyObject *args);
PyObject *fp_cuda_synchronize(PyObject *m, PyObject *args);
PyObject *fp_cuda_stream_synchronize(PyObject *m, PyObject *args);
PyObject *fp_cuda_event_create(PyObject *m, PyObject *args);
PyObject *fp_cuda_event_destroy(PyObject *m, PyObject *args);
PyObject *fp_cuda_event_record(PyObject *m, PyObject *args);
PyObject *fp_cuda_event_elapsed(PyObject *m, PyObject *args);
PyObject *fp_cuda_stream_wait_event(PyObject *m, PyObject *args);
PyObject *fp_cuda_event_times(PyObject *m, PyObject *args);
PyObject *fp_cuda_malloc(PyObject *m, PyObject *args);
PyObject *fp_cuda_free(PyObject *m, PyObject *args);
PyObject *fp_cuda_release(PyObject *m, PyObject *args);
PyObject *fp_cuda_mem_info(PyObject *m, PyObject *args);
PyObject *fp_cuda_pointer_device(PyObject *m, PyObject *args);
PyObject *fp_cuda_memcpy_htod(PyObject *m, PyObject *args);
PyObject *fp_cuda_memcpy_dtoh(PyObject *m, PyObject *args);
PyObject *fp_cuda_memcpy_dtod(PyObject *m, PyObject *args);
PyObject *fp_cuda_upload(PyObject *m, PyObject *args);
PyObject *fp_cuda_download(PyObject *m, PyObject *args);
PyObject *fp_cuda_scrub(PyObject *m, PyObject *args);
PyObject *fp_cuda_spin(PyObject *m, PyObject *args);
/* filters.c */
PyObject *fp_cuda_correlate(PyObject *m, PyObject *args);
PyObject *fp_cuda_correlate_host(PyObject *m, PyObject *args);
PyObject *fp_cuda_tiled_ok(PyObject *m, PyObject *args);
/* libs.c */
PyObject *fp_cuda_nvrtc_compile(PyObject *m, PyObject *args);
PyObject *fp_cuda_library_load(PyObject *m, PyObject *args);
PyObject *fp_cuda_launch(PyObject *m, PyObject *args);
PyObject *fp_cuda_gemm(PyObject *m, PyObject *args);
PyObject *fp_cuda_demangle(PyObject *m, PyObject *args);
/* dlpack.c */
PyObject *fp_cuda_dlpack_export(PyObject *m, PyObject *args);
PyObject *fp_cuda_dlpack_import(PyObject *m, PyObject *args);
/* cupti.c */
PyObject *fp_cuda_cupti_start(PyObject *m, PyObject *args);
PyObject *fp_cuda_cupti_stop(PyObject *m, PyObject *args);
PyObject *fp_cuda_cupti_version(PyObject *m, PyObject *args);
/* nvtx.c */
PyObject *fp_cuda_nvtx_push(PyObject *m, PyObject *args);
PyObject *fp_cuda_nvtx_pop(PyObject *m, PyObject *args);
#endif

#endif
