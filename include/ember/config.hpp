/// Version macros, the EMBER_ASSERT precondition hook, OpenMP detection, the prefetch settings and
/// the build-flavour namespace every ember name lives in.
// SPDX-License-Identifier: MIT
#pragma once

#include <span>
#include <type_traits>

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 1
#define EMBER_VERSION_PATCH 0
#define EMBER_VERSION \
  (EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH)

/// EMBER_ASSERT(cond) states a precondition of a detail kernel, which the public entry point that
/// calls it has already validated (bad user input is reported by exceptions in every build type).
/// It maps to `assert` unless defined before including ember (as with `eigen_assert`); the mode
/// (off under NDEBUG, `assert`, ember's tests' throwing form, or the user's own) is part of the
/// namespace tag below.
#define EMBER_STRINGIFY_(x) #x
#define EMBER_STRINGIFY(x) EMBER_STRINGIFY_(x)
#if defined(EMBER_ASSERT)
#define EMBER_DETAIL_ISA_ASSERT user_assert_
#elif defined(EMBER_TESTING)
#define EMBER_DETAIL_ISA_ASSERT test_assert_
#elif !defined(NDEBUG)
#define EMBER_DETAIL_ISA_ASSERT assert_
#else
#define EMBER_DETAIL_ISA_ASSERT
#endif
#ifndef EMBER_ASSERT
#if defined(EMBER_TESTING)  // ember's own tests: a violated precondition throws, to be observed
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

/// EMBER_HAS_OPENMP is 1 when the including translation unit is compiled with OpenMP (ember's
/// `#pragma omp` loops are inert otherwise; it never starts threads of its own).
#if defined(_OPENMP)
#define EMBER_HAS_OPENMP 1
#define EMBER_DETAIL_ISA_OPENMP omp_
#else
#define EMBER_HAS_OPENMP 0
#define EMBER_DETAIL_ISA_OPENMP
#endif

/// How far ahead kernels prefetch, in bytes of rows (the row of id i + prefetch_distance(row
/// bytes) is requested while row i is processed): about the same number of cache lines in flight
/// whatever the row width and storage format (detail/prefetch.hpp). A decimal integer literal;
/// another value than the default is part of the namespace tag below.
#ifndef EMBER_PREFETCH_BYTES
#define EMBER_PREFETCH_BYTES 8192
#endif

/// The locality hint of those prefetches (__builtin_prefetch's third argument): 3 asks for L1,
/// 2 or 1 for L2, 0 for a non-temporal fetch. A decimal integer literal, tagged as above.
#ifndef EMBER_PREFETCH_LOCALITY
#define EMBER_PREFETCH_LOCALITY 3
#endif

#if EMBER_PREFETCH_BYTES < 1 || EMBER_PREFETCH_LOCALITY < 0 || EMBER_PREFETCH_LOCALITY > 3
#error "ember: EMBER_PREFETCH_BYTES must be positive and EMBER_PREFETCH_LOCALITY in [0, 3]"
#endif
#define EMBER_DETAIL_ISA_PREFETCH_(bytes, locality) prefetch##bytes##_##locality##_
#define EMBER_DETAIL_ISA_PREFETCH_TAG(bytes, locality) EMBER_DETAIL_ISA_PREFETCH_(bytes, locality)
#if EMBER_PREFETCH_BYTES != 8192 || EMBER_PREFETCH_LOCALITY != 3
#define EMBER_DETAIL_ISA_PREFETCH \
  EMBER_DETAIL_ISA_PREFETCH_TAG(EMBER_PREFETCH_BYTES, EMBER_PREFETCH_LOCALITY)
#else
#define EMBER_DETAIL_ISA_PREFETCH
#endif

/// Forces a small helper inline. The per-row helpers of the gather loops need it: as out-of-line
/// calls they cut the number of rows in flight, and GCC may delete an out-of-line call to a
/// helper whose only statements are prefetches (it sees no side effect).
#if defined(__GNUC__) || defined(__clang__)
#define EMBER_ALWAYS_INLINE __attribute__((always_inline)) inline
/// The same for a lambda, written after its parameter list: `[&](auto j) EMBER_INLINE_LAMBDA {}`.
#define EMBER_INLINE_LAMBDA __attribute__((always_inline))
#else
#define EMBER_ALWAYS_INLINE inline
#define EMBER_INLINE_LAMBDA
#endif

/// Written before a kernel's loop whose trip count is a small compile-time constant (over hidden
/// rows, accumulators, a block's registers): `EMBER_UNROLL for (int k = 0; k < 8; ++k)`. The loop
/// is unrolled whole at every optimisation level, so its arrays of vectors live in registers. GCC
/// unrolls such loops whole only from -O3 (-fpeel-loops): at -O2 it kept them rolled with the
/// arrays on the stack, and the quantized logits ran 2-4x slower than at -O3.
#if defined(__GNUC__) || defined(__clang__)
#define EMBER_UNROLL _Pragma("GCC unroll 16")
#else
#define EMBER_UNROLL
#endif

// ---- the build-flavour namespace ---------------------------------------------------------------
//
// ember is header-only: each translation unit compiles its own copy of each kernel with its flags,
// and the linker keeps one copy of each inline function for all units, so a unit built without
// AVX-512 could run another unit's AVX-512 code, and a unit built without OpenMP could size a
// kernel's per-thread scratch for one thread and hand it to another unit's copy that runs two.
// Everything ember declares therefore lives in an inline namespace named after whatever changes
// ember's inline code in the unit (ember::Embedding is ember::EMBER_ISA::Embedding): units built
// differently get different symbols. The price: an ember type cannot cross between such units
// (that fails to link; it never runs the wrong code).
//
// The tag is isa_ + <flavour> + <instruction sets>. The flavour lists, in this order:
//   omp_                      the unit is compiled with OpenMP
//   assert_ / test_assert_ / user_assert_
//                             EMBER_ASSERT is assert (no NDEBUG), ember's tests' throwing form
//                             (EMBER_TESTING), or defined by the user; nothing under NDEBUG
//   prefetch<bytes>_<loc>_    EMBER_PREFETCH_BYTES / EMBER_PREFETCH_LOCALITY differ from the
//                             defaults (8192, 3)
// The instruction sets are one letter each, the features that change the code of ember and Eigen:
//   x86: a sse3, b ssse3, c sse4.1, d sse4.2, e popcnt, f avx, g avx2, h fma, i f16c, j bmi,
//        k bmi2, l lzcnt, m avx512f, n avx512bw, o avx512dq, p avx512vl, q avx512bf16,
//        r avx512fp16, s avx512vnni
//   arm: a neon, b fp16 arithmetic, c sve, d dot product, e bf16
// e.g. isa_x86_ (baseline x86-64, NDEBUG, no OpenMP), isa_omp_x86_abcdefghijkl (x86-64-v3 with
// OpenMP). EMBER_ISA_NAME is the same tag as a string, and ember::isa_name() returns it at run
// time.
#define EMBER_ISA_CAT_(a, b) a##b
#define EMBER_ISA_CAT(a, b) EMBER_ISA_CAT_(a, b)
#define EMBER_ISA_CAT4_(a, b, c, d) a##b##c##d
#define EMBER_ISA_CAT4(a, b, c, d) EMBER_ISA_CAT4_(a, b, c, d)
// EMBER_ISA_IF(x, letter): `letter` when the feature macro x is defined as 1, else nothing (the
// Linux kernel's IS_ENABLED idiom: only a defined x pastes into the probe that adds an argument).
#define EMBER_ISA_PROBE_1 ~,
#define EMBER_ISA_SECOND_(a, b, ...) b
#define EMBER_ISA_SECOND(...) EMBER_ISA_SECOND_(__VA_ARGS__)
#define EMBER_ISA_IS_1(x) EMBER_ISA_SECOND(EMBER_ISA_CAT(EMBER_ISA_PROBE_, x) 1, 0, 0)
#define EMBER_ISA_IF_1(letter) letter
#define EMBER_ISA_IF_0(letter)
#define EMBER_ISA_IF(x, letter) EMBER_ISA_CAT(EMBER_ISA_IF_, EMBER_ISA_IS_1(x))(letter)
#define EMBER_ISA_PASTE_(arch, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s) \
  arch##a##b##c##d##e##f##g##h##i##j##k##l##m##n##o##p##q##r##s
#define EMBER_ISA_PASTE(...) EMBER_ISA_PASTE_(__VA_ARGS__)
// isa_ + the flavour, then the architecture's own prefix (x86_, arm_, generic).
#define EMBER_ISA_PREFIX(arch)                                                         \
  EMBER_ISA_CAT(EMBER_ISA_CAT4(isa_, EMBER_DETAIL_ISA_OPENMP, EMBER_DETAIL_ISA_ASSERT, \
                               EMBER_DETAIL_ISA_PREFETCH),                             \
                arch)

/// The inline namespace of this translation unit (isa_x86_..., isa_omp_x86_..., isa_arm_...,
/// isa_generic). A program may define EMBER_ISA itself, to one name in every unit, only if all its
/// units are built alike: the same instruction sets, OpenMP, assertion mode and prefetch settings.
#ifndef EMBER_ISA
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define EMBER_ISA                                                                                  \
  EMBER_ISA_PASTE(EMBER_ISA_PREFIX(x86_), EMBER_ISA_IF(__SSE3__, a), EMBER_ISA_IF(__SSSE3__, b),   \
                  EMBER_ISA_IF(__SSE4_1__, c), EMBER_ISA_IF(__SSE4_2__, d),                        \
                  EMBER_ISA_IF(__POPCNT__, e), EMBER_ISA_IF(__AVX__, f),                           \
                  EMBER_ISA_IF(__AVX2__, g), EMBER_ISA_IF(__FMA__, h), EMBER_ISA_IF(__F16C__, i),  \
                  EMBER_ISA_IF(__BMI__, j), EMBER_ISA_IF(__BMI2__, k), EMBER_ISA_IF(__LZCNT__, l), \
                  EMBER_ISA_IF(__AVX512F__, m), EMBER_ISA_IF(__AVX512BW__, n),                     \
                  EMBER_ISA_IF(__AVX512DQ__, o), EMBER_ISA_IF(__AVX512VL__, p),                    \
                  EMBER_ISA_IF(__AVX512BF16__, q), EMBER_ISA_IF(__AVX512FP16__, r),                \
                  EMBER_ISA_IF(__AVX512VNNI__, s))
#elif defined(__aarch64__) || defined(__arm__) || defined(_M_ARM64)
#define EMBER_ISA                                                                                \
  EMBER_ISA_PASTE(EMBER_ISA_PREFIX(arm_), EMBER_ISA_IF(__ARM_NEON, a),                           \
                  EMBER_ISA_IF(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC, b),                         \
                  EMBER_ISA_IF(__ARM_FEATURE_SVE, c), EMBER_ISA_IF(__ARM_FEATURE_DOTPROD, d),    \
                  EMBER_ISA_IF(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC, e), , , , , , , , , , , , , \
                  , )
#else
#define EMBER_ISA EMBER_ISA_PREFIX(generic)
#endif
#endif

/// The namespace tag of this translation unit as a string literal ("isa_x86_...").
#define EMBER_ISA_NAME EMBER_STRINGIFY(EMBER_ISA)

namespace ember::inline EMBER_ISA {

/// The namespace tag ember was compiled with in the calling translation unit (see EMBER_ISA in
/// config.hpp): two units built with different -m flags, OpenMP or assertion modes see different
/// tags.
[[nodiscard]] constexpr const char* isa_name() noexcept { return EMBER_ISA_NAME; }

namespace detail {

/// The one way ember keeps a product rounded before it is added: pass it through rounded(). GCC
/// contracts a product and a later add into a fused multiply-add across statements by default
/// (even in ISO mode), clang within one; either changes the bits, and units built with and without
/// FMA would disagree. rounded(x) returns x as computed, through a register the compiler cannot
/// see into (a scalar or a SIMD vector) or through memory (an Eigen tile of products);
/// rounded(buffer) does the same in place for products stored in a buffer (a local array or a
/// row: the loops before and after it still vectorise; detail/simd.hpp adds it for the AVX
/// vectors of its target-attributed kernels). Kernels with a rounding contract (ggml's
/// reference arithmetic, the fused lookups, bags and backward) use this and nothing else; a product
/// that is only stored needs nothing, and explicit FMA intrinsics say what they fuse.
/// One definition per architecture: on x86 a scalar or vector goes through an SSE/AVX register
/// ("+x") and a class through memory; on other targets of GCC and clang everything goes through
/// memory; other compilers have no such inline assembly and get x back as is.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
template <class T>
[[nodiscard]] EMBER_ALWAYS_INLINE T rounded(T x) noexcept {
  if constexpr (std::is_class_v<T>) {
    asm volatile("" : "+m"(x));
  } else {
    asm("" : "+x"(x));
  }
  return x;
}
#elif defined(__GNUC__) || defined(__clang__)
template <class T>
[[nodiscard]] EMBER_ALWAYS_INLINE T rounded(T x) noexcept {
  asm volatile("" : "+m"(x));
  return x;
}
#else
template <class T>
[[nodiscard]] EMBER_ALWAYS_INLINE T rounded(T x) noexcept {
  return x;
}
#endif

/// rounded() for the values of a buffer, in place: they are in memory, as computed, before any
/// later read of them.
template <class T>
EMBER_ALWAYS_INLINE void rounded(std::span<T> buffer) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  asm volatile("" : : "r"(buffer.data()) : "memory");
#else
  static_cast<void>(buffer);
#endif
}

}  // namespace detail

}  // namespace ember::inline EMBER_ISA
