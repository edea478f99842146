/* cuda/cuda.c - entry of the CUDA layer part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_cuda_exec(FP_UNUSED PyObject *m)
{
    return 0;
}
