/* cuda/cuda.c - entry of the CUDA layer part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_cuda_exec(PyObject *FP_UNUSED m)
{
    return 0;
}
