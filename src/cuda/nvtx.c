/* cuda/nvtx.c - NVTX ranges (header-only NVTX3: without an attached tool such as Nsight
 * Systems each call is a check of a null function pointer).  CUDA builds only; the CPU-only
 * build makes fastprof.nvtx a no-op in Python. */
#include "cuda/cuda_py.h"

#ifdef FP_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>

/* _cuda_nvtx_push(name) -> int depth (negative when no tool is attached).  Returns NULL
 * only for a bad argument. */
PyObject *
fp_cuda_nvtx_push(FP_UNUSED PyObject *m, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    return PyLong_FromLong(nvtxRangePushA(name));
}

/* _cuda_nvtx_pop() -> int depth.  Never fails. */
PyObject *
fp_cuda_nvtx_pop(FP_UNUSED PyObject *m, FP_UNUSED PyObject *args)
{
    return PyLong_FromLong(nvtxRangePop());
}
#endif
