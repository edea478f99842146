/* profile/line.c - entry of the line profiler (issue: line timing) part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_line_exec(PyObject *FP_UNUSED m)
{
    return 0;
}
