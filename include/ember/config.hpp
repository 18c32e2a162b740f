/// Version macros, the EMBER_ASSERT precondition hook, OpenMP detection and the instruction-set
/// namespace every ember name lives in.
// SPDX-License-Identifier: MIT
#pragma once

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 2
#define EMBER_VERSION_PATCH 0
#define EMBER_VERSION \
  (EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH)

/// EMBER_ASSERT(cond) states a precondition of a detail kernel, which the public entry point that
/// calls it has already validated. It maps to `assert` unless the user defines it before including
/// ember (as with `eigen_assert`); ember's own tests define it to throw so preconditions are
/// testable. Public API never relies on it: bad user input is reported by exceptions in every build
/// type.
#define EMBER_STRINGIFY_(x) #x
#define EMBER_STRINGIFY(x) EMBER_STRINGIFY_(x)
#ifndef EMBER_ASSERT
#if defined(EMBER_TESTING)
// ember's own test build: a violated precondition throws, so tests can observe it.
#include <stdexcept>
#define EMBER_ASSERT(cond)                                                       \
  ((cond) ? void(0)                                                              \
          : throw std::logic_error("EMBER_ASSERT(" #cond ") failed at " __FILE__ \
                                   ":" EMBER_STRINGIFY(__LINE__)))
#else
#include <cassert>
#define EMBER_ASSERT(cond) assert(cond)
#endif
#endif

/// EMBER_HAS_OPENMP is 1 when the including translation unit is compiled with OpenMP. ember's
/// parallel loops are plain `#pragma omp` loops (detail/parallel.hpp), inert otherwise; it never
/// starts threads of its own.
#if defined(_OPENMP)
#define EMBER_HAS_OPENMP 1
#else
#define EMBER_HAS_OPENMP 0
#endif

/// Forces a small helper inline. The per-row helpers of the gather loops need it: as out-of-line
/// calls they cut the number of rows in flight, and GCC may delete an out-of-line call to a
/// helper whose only statements are prefetches (it sees no side effect).
#if defined(__GNUC__) || defined(__clang__)
#define EMBER_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define EMBER_ALWAYS_INLINE inline
#endif

// ---- the instruction-set namespace ------------------------------------------------------------
//
// ember is header-only, so every translation unit compiles its own copy of each kernel, with that
// unit's -m flags. If two units of one program were built with different flags (one with
// -mavx512f, one without), the linker would keep one copy of each inline function for both, and
// the unit built without AVX-512 could run AVX-512 code. So everything ember declares lives in an
// inline namespace named after the instruction sets the unit is compiled for: ember::Embedding is
// ember::EMBER_ISA::Embedding, and units with different flags get different symbols, never each
// other's code. Names are spelled as always (ember::Embedding<float>); only the linker sees the
// tag. The price: an ember type cannot cross between units built with different instruction
// sets (a function taking ember::Embedding<float>& defined in one and called from the other fails
// to link, it never runs the wrong code).
//
// The tag lists, one letter each, the features that change the code of ember and Eigen:
//   x86: a sse3, b ssse3, c sse4.1, d sse4.2, e popcnt, f avx, g avx2, h fma, i f16c, j bmi,
//        k bmi2, l lzcnt, m avx512f, n avx512bw, o avx512dq, p avx512vl, q avx512bf16,
//        r avx512fp16, s avx512vnni
//   arm: a neon, b fp16 arithmetic, c sve, d dot product, e bf16
// e.g. isa_x86_ (baseline x86-64), isa_x86_abcdefghijkl (x86-64-v3). EMBER_ISA_NAME is the same
// tag as a string, and ember::isa_name() returns it at run time.
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define EMBER_ISA_ARCH_ isa_x86_
#if defined(__SSE3__)
#define EMBER_ISA_A_ a
#else
#define EMBER_ISA_A_
#endif
#if defined(__SSSE3__)
#define EMBER_ISA_B_ b
#else
#define EMBER_ISA_B_
#endif
#if defined(__SSE4_1__)
#define EMBER_ISA_C_ c
#else
#define EMBER_ISA_C_
#endif
#if defined(__SSE4_2__)
#define EMBER_ISA_D_ d
#else
#define EMBER_ISA_D_
#endif
#if defined(__POPCNT__)
#define EMBER_ISA_E_ e
#else
#define EMBER_ISA_E_
#endif
#if defined(__AVX__)
#define EMBER_ISA_F_ f
#else
#define EMBER_ISA_F_
#endif
#if defined(__AVX2__)
#define EMBER_ISA_G_ g
#else
#define EMBER_ISA_G_
#endif
#if defined(__FMA__)
#define EMBER_ISA_H_ h
#else
#define EMBER_ISA_H_
#endif
#if defined(__F16C__)
#define EMBER_ISA_I_ i
#else
#define EMBER_ISA_I_
#endif
#if defined(__BMI__)
#define EMBER_ISA_J_ j
#else
#define EMBER_ISA_J_
#endif
#if defined(__BMI2__)
#define EMBER_ISA_K_ k
#else
#define EMBER_ISA_K_
#endif
#if defined(__LZCNT__)
#define EMBER_ISA_L_ l
#else
#define EMBER_ISA_L_
#endif
#if defined(__AVX512F__)
#define EMBER_ISA_M_ m
#else
#define EMBER_ISA_M_
#endif
#if defined(__AVX512BW__)
#define EMBER_ISA_N_ n
#else
#define EMBER_ISA_N_
#endif
#if defined(__AVX512DQ__)
#define EMBER_ISA_O_ o
#else
#define EMBER_ISA_O_
#endif
#if defined(__AVX512VL__)
#define EMBER_ISA_P_ p
#else
#define EMBER_ISA_P_
#endif
#if defined(__AVX512BF16__)
#define EMBER_ISA_Q_ q
#else
#define EMBER_ISA_Q_
#endif
#if defined(__AVX512FP16__)
#define EMBER_ISA_R_ r
#else
#define EMBER_ISA_R_
#endif
#if defined(__AVX512VNNI__)
#define EMBER_ISA_S_ s
#else
#define EMBER_ISA_S_
#endif
#elif defined(__aarch64__) || defined(__arm__) || defined(_M_ARM64)
#define EMBER_ISA_ARCH_ isa_arm_
#if defined(__ARM_NEON)
#define EMBER_ISA_A_ a
#else
#define EMBER_ISA_A_
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
#define EMBER_ISA_B_ b
#else
#define EMBER_ISA_B_
#endif
#if defined(__ARM_FEATURE_SVE)
#define EMBER_ISA_C_ c
#else
#define EMBER_ISA_C_
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define EMBER_ISA_D_ d
#else
#define EMBER_ISA_D_
#endif
#if defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#define EMBER_ISA_E_ e
#else
#define EMBER_ISA_E_
#endif
#define EMBER_ISA_F_
#define EMBER_ISA_G_
#define EMBER_ISA_H_
#define EMBER_ISA_I_
#define EMBER_ISA_J_
#define EMBER_ISA_K_
#define EMBER_ISA_L_
#define EMBER_ISA_M_
#define EMBER_ISA_N_
#define EMBER_ISA_O_
#define EMBER_ISA_P_
#define EMBER_ISA_Q_
#define EMBER_ISA_R_
#define EMBER_ISA_S_
#else
#define EMBER_ISA_ARCH_ isa_generic
#define EMBER_ISA_A_
#define EMBER_ISA_B_
#define EMBER_ISA_C_
#define EMBER_ISA_D_
#define EMBER_ISA_E_
#define EMBER_ISA_F_
#define EMBER_ISA_G_
#define EMBER_ISA_H_
#define EMBER_ISA_I_
#define EMBER_ISA_J_
#define EMBER_ISA_K_
#define EMBER_ISA_L_
#define EMBER_ISA_M_
#define EMBER_ISA_N_
#define EMBER_ISA_O_
#define EMBER_ISA_P_
#define EMBER_ISA_Q_
#define EMBER_ISA_R_
#define EMBER_ISA_S_
#endif
#define EMBER_ISA_PASTE_(arch, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s) \
  arch##a##b##c##d##e##f##g##h##i##j##k##l##m##n##o##p##q##r##s
#define EMBER_ISA_PASTE(...) EMBER_ISA_PASTE_(__VA_ARGS__)
/// The inline namespace of this translation unit (isa_x86_..., isa_arm_..., isa_generic).
#define EMBER_ISA                                                                          \
  EMBER_ISA_PASTE(EMBER_ISA_ARCH_, EMBER_ISA_A_, EMBER_ISA_B_, EMBER_ISA_C_, EMBER_ISA_D_, \
                  EMBER_ISA_E_, EMBER_ISA_F_, EMBER_ISA_G_, EMBER_ISA_H_, EMBER_ISA_I_,    \
                  EMBER_ISA_J_, EMBER_ISA_K_, EMBER_ISA_L_, EMBER_ISA_M_, EMBER_ISA_N_,    \
                  EMBER_ISA_O_, EMBER_ISA_P_, EMBER_ISA_Q_, EMBER_ISA_R_, EMBER_ISA_S_)

/// The instruction-set tag of this translation unit as a string literal ("isa_x86_...").
#define EMBER_ISA_NAME EMBER_STRINGIFY(EMBER_ISA)

namespace ember::inline EMBER_ISA {

/// The instruction-set tag ember was compiled with in the calling translation unit (see
/// EMBER_ISA in config.hpp): two units built with different -m flags see different tags.
[[nodiscard]] constexpr const char* isa_name() noexcept { return EMBER_ISA_NAME; }

}  // namespace ember::inline EMBER_ISA
