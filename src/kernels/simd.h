/* kernels/simd.h - FP_VECTOR: marks a hot loop function for AVX2/FMA and AVX-512 clones with
 * a baseline fallback, picked at load time by the CPU's features (GCC/Clang target_clones).
 * Elsewhere it expands to nothing and the baseline code runs. */
#ifndef FP_KERNELS_SIMD_H
#define FP_KERNELS_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute) && \
    !defined(FP_NO_CLONES)
#if __has_attribute(target_clones)
#define FP_VECTOR __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#endif
#endif
#ifndef FP_VECTOR
#define FP_VECTOR
#endif

#endif
