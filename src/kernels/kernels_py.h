/* kernels/kernels_py.h - declarations shared by the C files of the CPU kernels part (Python
 * side): the functions that kernels.c binds on the module and that other files define. */
#ifndef FP_KERNELS_PY_H
#define FP_KERNELS_PY_H

#include "common.h"

/* kernels.c: reads the ints of sequence seq (named `what` in errors) into out: exactly n of
 * them with exact, else at most n.  Returns their count, or -1 with an exception set. */
int fp_kernels_ints(PyObject *seq, int n, int exact, const char *what, long *out);

/* kernels.c: checks that a sequence named `what` gave n values (got of them).  Returns 0, or
 * -1 with a ValueError set.  The entry points read their int sequences (which run Python code:
 * __index__) before they look at any array, then check the counts with this. */
int fp_kernels_count(int got, int n, const char *what);

/* kernels.c: checks that o is an aligned native float32/float64 ndarray; `what` names it.
 * Returns its "is float64" flag (0 or 1), or -1 with a TypeError set. */
int fp_kernels_float_kind(PyObject *o, const char *what);

/* expr_vm.c: _evaluate_program(steps, inputs, consts, nregs, result, out), the expression
 * VM.  Returns None, or NULL with an exception set. */
PyObject *fp_evaluate_program(PyObject *self, PyObject *args);

/* expr_vm.c: _expr_opcodes(), the opcode table of expr_ops.h as {name: number}.  Returns a new
 * dict, or NULL with an exception set. */
PyObject *fp_expr_opcodes(PyObject *self, PyObject *unused);

/* box_exact.c: _uniform_filter1d(input, output, size, axis, mode, cval, origin).  Returns
 * None, or NULL with an exception set. */
PyObject *fp_uniform_filter1d(PyObject *self, PyObject *args);

/* box_fused.c: _uniform_filter_exact(input, output, sizes, modes, origins, cval, order), scipy's
 * uniform_filter on float data bit for bit.  Returns None, or NULL with an exception set. */
PyObject *fp_uniform_filter_exact(PyObject *self, PyObject *args);

#endif
