/// The AVX2 kernel of float_row_dots (float_dots.hpp): 256-bit fused multiply-adds, half rows
/// through F16C, one stored row at a time.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/detail/float_dots_portable.hpp"
#include "ember/types.hpp"

// 1 where the build targets AVX2, F16C and FMA (GCC and clang): the kernel below is compiled.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX2__) && defined(__F16C__) && \
    defined(__FMA__)
#include <immintrin.h>
#define EMBER_DETAIL_FLOAT_DOTS_AVX2 1
#else
#define EMBER_DETAIL_FLOAT_DOTS_AVX2 0
#endif

#if EMBER_DETAIL_FLOAT_DOTS_AVX2
namespace ember::inline EMBER_ISA::detail::avx2 {

/// 8 stored values from element c on, as floats.
EMBER_ALWAYS_INLINE __m256 load8(Fp16Element, const std::uint8_t* row, Index c) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
}
EMBER_ALWAYS_INLINE __m256 load8(Bf16Element, const std::uint8_t* row, Index c) noexcept {
  const __m256i wide =
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
EMBER_ALWAYS_INLINE __m256 load8(F32Element, const std::uint8_t* row, Index c) noexcept {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * c));
}

template <Index N, class E>
EMBER_ALWAYS_INLINE void dots_n(E e, const std::uint8_t* rows, Index row_stride, Index count,
                                Index d, const float* v, Index v_stride, float* out,
                                Index out_stride) {
  const Index whole = d - d % dots_lanes;
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    constexpr auto n = static_cast<std::size_t>(N);
    __m256 acc[n][4];
    EMBER_UNROLL for (Index j = 0; j < N; ++j) EMBER_UNROLL for (int k = 0; k < 4; ++k) acc[j][k] =
        _mm256_setzero_ps();
    for (Index c = 0; c < whole; c += dots_lanes) {
      __m256 w[4];
      EMBER_UNROLL for (int k = 0; k < 4; ++k) w[k] = load8(e, row, c + 8 * k);
      EMBER_UNROLL for (Index j = 0; j < N; ++j) {
        const float* x = v + j * v_stride + c;
        EMBER_UNROLL for (int k = 0; k < 4; ++k) acc[j][k] =
            _mm256_fmadd_ps(w[k], _mm256_loadu_ps(x + 8 * k), acc[j][k]);
      }
    }
    EMBER_UNROLL for (Index j = 0; j < N; ++j) {
      float lanes[dots_lanes];
      EMBER_UNROLL for (int k = 0; k < 4; ++k) _mm256_storeu_ps(lanes + 8 * k, acc[j][k]);
      const float* x = v + j * v_stride;
      for (Index c = whole; c < d; ++c)
        lanes[c - whole] = std::fma(E::at(row, c), x[c], lanes[c - whole]);
      out[j * out_stride + r] = detail::tree32(lanes);
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail::avx2
#endif
