/// Square roots of a row, correctly rounded and vectorised: the √v of Adam's update
/// (optim/adam.hpp), with the same bits for every element, instruction set and EIGEN_FAST_MATH.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>

#include "ember/config.hpp"
#include "ember/types.hpp"

#if (defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)) && \
    (defined(__SSE2__) || defined(_M_X64))
#include <immintrin.h>
#define EMBER_DETAIL_EXACT_SQRT_X86 1
#else
#define EMBER_DETAIL_EXACT_SQRT_X86 0
#endif

namespace ember::inline EMBER_ISA::detail {

// sqrt_width<T>: the values of T in one vector of the widest instruction set the build targets
// (1 without one: then std::sqrt). sqrt_vectors(x, y, n): y[c] = √x[c] for c in [0, n), n a
// multiple of sqrt_width<T>, in such vectors. The AVX-512 forms are the masked ones with every lane
// on, the same instruction: GCC 12 warns (-Wmaybe-uninitialized, a false positive) about the
// undefined source of _mm512_sqrt_ps.
#if EMBER_DETAIL_EXACT_SQRT_X86 && defined(__AVX512F__)
template <class T>
inline constexpr Index sqrt_width = 64 / static_cast<Index>(sizeof(T));
EMBER_ALWAYS_INLINE void sqrt_vectors(const float* x, float* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 16) {
    const __m512 v = _mm512_loadu_ps(x + c);
    _mm512_storeu_ps(y + c, _mm512_mask_sqrt_ps(v, static_cast<__mmask16>(0xFFFF), v));
  }
}
EMBER_ALWAYS_INLINE void sqrt_vectors(const double* x, double* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 8) {
    const __m512d v = _mm512_loadu_pd(x + c);
    _mm512_storeu_pd(y + c, _mm512_mask_sqrt_pd(v, static_cast<__mmask8>(0xFF), v));
  }
}
#elif EMBER_DETAIL_EXACT_SQRT_X86 && defined(__AVX__)
template <class T>
inline constexpr Index sqrt_width = 32 / static_cast<Index>(sizeof(T));
EMBER_ALWAYS_INLINE void sqrt_vectors(const float* x, float* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 8) _mm256_storeu_ps(y + c, _mm256_sqrt_ps(_mm256_loadu_ps(x + c)));
}
EMBER_ALWAYS_INLINE void sqrt_vectors(const double* x, double* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 4) _mm256_storeu_pd(y + c, _mm256_sqrt_pd(_mm256_loadu_pd(x + c)));
}
#elif EMBER_DETAIL_EXACT_SQRT_X86
template <class T>
inline constexpr Index sqrt_width = 16 / static_cast<Index>(sizeof(T));
EMBER_ALWAYS_INLINE void sqrt_vectors(const float* x, float* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 4) _mm_storeu_ps(y + c, _mm_sqrt_ps(_mm_loadu_ps(x + c)));
}
EMBER_ALWAYS_INLINE void sqrt_vectors(const double* x, double* y, Index n) noexcept {
  for (Index c = 0; c < n; c += 2) _mm_storeu_pd(y + c, _mm_sqrt_pd(_mm_loadu_pd(x + c)));
}
#else
template <class T>
inline constexpr Index sqrt_width = 1;
template <class T>
EMBER_ALWAYS_INLINE void sqrt_vectors(const T* x, T* y, Index n) noexcept {
  for (Index c = 0; c < n; ++c) y[c] = std::sqrt(x[c]);
}
#endif

/// y[c] = √x[c] for c in [0, n): each root correctly rounded, as IEEE 754 requires of sqrt, so
/// the vector instructions and the scalar rest give the same bits. Neither alternative does both:
/// std::sqrt in a loop stays scalar (it may set errno, so compilers vectorise it only with
/// -fno-math-errno), and Eigen's vectorised sqrt of floats is an approximation under
/// EIGEN_FAST_MATH, its default, while Eigen's scalar sqrt is exact. For Adam's update of a row
/// that Adam::step or backward_step validated.
template <class T>
EMBER_ALWAYS_INLINE void exact_sqrt(const T* x, T* y, Index n) noexcept {
  const Index vectors = n - n % sqrt_width<T>;
  sqrt_vectors(x, y, vectors);
  for (Index c = vectors; c < n; ++c) y[c] = std::sqrt(x[c]);
}

}  // namespace ember::inline EMBER_ISA::detail
