/* kernels/kernels.c - entry of the CPU kernels part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_kernels_exec(FP_UNUSED PyObject *m)
{
    return 0;
}
