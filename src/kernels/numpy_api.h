/* kernels/numpy_api.h - the NumPy C API on first use: the kernel entry points call
 * fp_numpy_ready() before any PyArray_* call, so loading fastprof._fastprof never imports NumPy. */
#ifndef FP_NUMPY_API_H
#define FP_NUMPY_API_H

/* Imports NumPy's C API the first time (later calls only read a pointer).  Returns 0, or -1
 * with ImportError set, naming `pip install 'fastprof[kernels]'` and chained to NumPy's own
 * error, when NumPy is missing or cannot load. */
int fp_numpy_ready(void);

#endif
