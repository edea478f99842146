/* kernels/simd.h - runtime dispatch of the hot loops between an AVX2/FMA build and the
 * baseline build of the same code.
 *
 * FP_DISPATCH(void, name, params, args) turns an always-inline body `name##_body` into
 * name##_avx2 (target "avx2,fma"), name##_base and a public `name` that calls the one picked
 * by fp_simd_level() (the CPU's features, read once with __builtin_cpu_supports). */
#ifndef FP_KERNELS_SIMD_H
#define FP_KERNELS_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP_NO_SIMD)
#define FP_HAVE_AVX2_DISPATCH 1
#else
#define FP_HAVE_AVX2_DISPATCH 0
#endif

#define FP_BODY static inline __attribute__((always_inline))
#define FP_CAT_(a, b) a##b
#define FP_CAT(a, b) FP_CAT_(a, b)

/* 1 when the AVX2/FMA variants run on this CPU, else 0. */
int fp_simd_level(void);

#if FP_HAVE_AVX2_DISPATCH
#define FP_DISPATCH_(ret, name, params, args)                                                      \
    __attribute__((target("avx2,fma"))) static ret FP_CAT(name, _avx2) params                      \
    {                                                                                              \
        FP_CAT(name, _body) args;                                                                  \
    }                                                                                              \
    static ret FP_CAT(name, _base) params                                                          \
    {                                                                                              \
        FP_CAT(name, _body) args;                                                                  \
    }                                                                                              \
    ret name params                                                                                \
    {                                                                                              \
        if (fp_simd_level() > 0)                                                                   \
            FP_CAT(name, _avx2) args;                                                              \
        else                                                                                       \
            FP_CAT(name, _base) args;                                                              \
    }
#define FP_DISPATCH(ret, name, params, args) FP_DISPATCH_(ret, name, params, args)
#else
#define FP_DISPATCH_(ret, name, params, args)                                                      \
    ret name params                                                                                \
    {                                                                                              \
        FP_CAT(name, _body) args;                                                                  \
    }
#define FP_DISPATCH(ret, name, params, args) FP_DISPATCH_(ret, name, params, args)
#endif

#endif
