/* profiler.c - the call profiler type (being written). */
#include "common.h"

/* See common.h. */
int
fp_profile_exec(PyObject *m)
{
    return 0;
}
