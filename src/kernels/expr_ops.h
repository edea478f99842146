/* kernels/expr_ops.h - the opcodes of the expression VM, in the one place they are written.
 *
 * X(ID, name, mvec, two): FP_OP_<ID> is the opcode, name the NumPy ufunc the step computes
 * (as numpy.<name>.__name__; "where" for the select), mvec glibc's libmvec AVX2 symbol for it
 * (NULL when there is none) and two whether that symbol takes two vectors.  expr_vm.c builds
 * its enum and its libmvec table from this list, and _fastprof._expr_opcodes() exports it as
 * {name: opcode}, which fastprof._expr reads to compile expressions. */
#ifndef FP_KERNELS_EXPR_OPS_H
#define FP_KERNELS_EXPR_OPS_H

#define FP_EXPR_OPS(X)                                                                             \
    X(COPY, "positive", NULL, 0)                                                                   \
    X(NEG, "negative", NULL, 0)                                                                    \
    X(ADD, "add", NULL, 0)                                                                         \
    X(SUB, "subtract", NULL, 0)                                                                    \
    X(MUL, "multiply", NULL, 0)                                                                    \
    X(DIV, "divide", NULL, 0)                                                                      \
    X(POW, "power", "_ZGVdN4vv_pow", 1)                                                            \
    X(SQUARE, "square", NULL, 0)                                                                   \
    X(LT, "less", NULL, 0)                                                                         \
    X(LE, "less_equal", NULL, 0)                                                                   \
    X(GT, "greater", NULL, 0)                                                                      \
    X(GE, "greater_equal", NULL, 0)                                                                \
    X(EQ, "equal", NULL, 0)                                                                        \
    X(NE, "not_equal", NULL, 0)                                                                    \
    X(AND, "bitwise_and", NULL, 0)                                                                 \
    X(OR, "bitwise_or", NULL, 0)                                                                   \
    X(XOR, "bitwise_xor", NULL, 0)                                                                 \
    X(NOT, "invert", NULL, 0)                                                                      \
    X(WHERE, "where", NULL, 0)                                                                     \
    X(ABS, "absolute", NULL, 0)                                                                    \
    X(SQRT, "sqrt", NULL, 0)                                                                       \
    X(EXP, "exp", "_ZGVdN4v_exp", 0)                                                               \
    X(LOG, "log", "_ZGVdN4v_log", 0)                                                               \
    X(LOG10, "log10", "_ZGVdN4v_log10", 0)                                                         \
    X(LOG2, "log2", "_ZGVdN4v_log2", 0)                                                            \
    X(LOG1P, "log1p", "_ZGVdN4v_log1p", 0)                                                         \
    X(EXPM1, "expm1", "_ZGVdN4v_expm1", 0)                                                         \
    X(SIN, "sin", "_ZGVdN4v_sin", 0)                                                               \
    X(COS, "cos", "_ZGVdN4v_cos", 0)                                                               \
    X(TAN, "tan", "_ZGVdN4v_tan", 0)                                                               \
    X(ASIN, "arcsin", "_ZGVdN4v_asin", 0)                                                          \
    X(ACOS, "arccos", "_ZGVdN4v_acos", 0)                                                          \
    X(ATAN, "arctan", "_ZGVdN4v_atan", 0)                                                          \
    X(ATAN2, "arctan2", "_ZGVdN4vv_atan2", 1)                                                      \
    X(SINH, "sinh", "_ZGVdN4v_sinh", 0)                                                            \
    X(COSH, "cosh", "_ZGVdN4v_cosh", 0)                                                            \
    X(TANH, "tanh", "_ZGVdN4v_tanh", 0)                                                            \
    X(ASINH, "arcsinh", "_ZGVdN4v_asinh", 0)                                                       \
    X(ACOSH, "arccosh", "_ZGVdN4v_acosh", 0)                                                       \
    X(ATANH, "arctanh", "_ZGVdN4v_atanh", 0)                                                       \
    X(HYPOT, "hypot", "_ZGVdN4vv_hypot", 1)                                                        \
    X(FLOOR, "floor", NULL, 0)                                                                     \
    X(CEIL, "ceil", NULL, 0)                                                                       \
    X(FMOD, "fmod", NULL, 0)                                                                       \
    X(MOD, "remainder", NULL, 0)                                                                   \
    X(FLOORDIV, "floor_divide", NULL, 0)                                                           \
    X(MIN, "minimum", NULL, 0)                                                                     \
    X(MAX, "maximum", NULL, 0)

#endif
