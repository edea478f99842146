/* kernels/numpy_api.c - the one translation unit that owns the NumPy C API table of the
 * kernels part (the other kernel files use it through NO_IMPORT_ARRAY). */
#include "common.h"

#define PY_ARRAY_UNIQUE_SYMBOL fp_kernels_ARRAY_API
#include <numpy/arrayobject.h>

int fp_kernels_import_numpy(void);

/* Imports numpy's C API.  Returns 0, or -1 with an exception set. */
int
fp_kernels_import_numpy(void)
{
    if (PyArray_API == NULL && _import_array() < 0)
        return -1;
    return 0;
}
