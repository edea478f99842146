/* profile/line.c - entry of the line profiler (issue: line timing) part: registers its types and functions. */
#include "common.h"

/* See common.h. */
int
fp_line_exec(FP_UNUSED PyObject *m)
{
    return 0;
}
