/* kernels/kernels.c - entry of the CPU kernels part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_kernels_exec(PyObject *FP_UNUSED m)
{
    return 0;
}
