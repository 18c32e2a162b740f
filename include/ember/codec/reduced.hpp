/// codec::Reduced<S>: rows stored as 16-bit floats (Eigen::half, IEEE binary16, or
/// Eigen::bfloat16) and decoded to float, the codec of ReducedEmbedding<S> and its view.
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

#include "ember/config.hpp"
#include "ember/detail/float_dots.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The 16-bit storage types of ReducedEmbedding: IEEE binary16 and bfloat16.
template <class S>
concept HalfStorage = std::same_as<S, Eigen::half> || std::same_as<S, Eigen::bfloat16>;

/// The name of a 16-bit storage type in messages ("half", "bfloat16").
template <HalfStorage S>
inline constexpr const char* storage_name = std::is_same_v<S, Eigen::half> ? "half" : "bfloat16";

}  // namespace ember::inline EMBER_ISA

namespace ember::inline EMBER_ISA::codec {

/// A row of d values stored as d 16-bit floats S and decoded exactly to float (every half and
/// bfloat16 value is a float), then multiplied by the lookup scale in float. Encoding rounds to
/// nearest even. The interface is described in codec/plain.hpp.
template <class S>
struct Reduced {
  static_assert(HalfStorage<S>,
                "ember::codec::Reduced<S>: S must be Eigen::half or Eigen::bfloat16");
  using Unit = S;
  using Value = float;
  static constexpr bool element_rows = true;
  static constexpr bool is_plain = false;
  static constexpr const char* family = "ReducedEmbedding";
  static constexpr const char* view_family = "ReducedEmbeddingView";

  [[nodiscard]] static constexpr const char* name() noexcept {
    return std::is_same_v<S, Eigen::half> ? "f16" : "bf16";
  }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d; }
  [[nodiscard]] static constexpr bool holds_width(Index /*d*/) noexcept { return true; }

  /// dst[c] = float(row[c]) · s. bfloat16 is the top half of a float (a 16-bit shift, which
  /// compilers vectorise); half uses F16C's vcvtph2ps when the target has it, else Eigen's
  /// conversion (both exact).
  EMBER_ALWAYS_INLINE static void decode_row(const S* row, Index d, float s, float* dst) noexcept {
    if constexpr (std::is_same_v<S, Eigen::bfloat16>) {
      const auto* bits = reinterpret_cast<const std::uint16_t*>(row);
      for (Index c = 0; c < d; ++c) {
        const std::uint32_t w = static_cast<std::uint32_t>(bits[c]) << 16;
        float f;
        std::memcpy(&f, &w, sizeof f);
        dst[c] = f * s;
      }
    } else {
      Index c = 0;
#if defined(__F16C__) && defined(__AVX__)
      const __m256 vs = _mm256_set1_ps(s);
      for (; c + 16 <= d; c += 16) {  // two conversions per step: more loads in flight
        const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c));
        const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c + 8));
        _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtph_ps(h0), vs));
        _mm256_storeu_ps(dst + c + 8, _mm256_mul_ps(_mm256_cvtph_ps(h1), vs));
      }
      for (; c + 8 <= d; c += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c));
        _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtph_ps(h), vs));
      }
#endif
      for (; c < d; ++c) dst[c] = static_cast<float>(row[c]) * s;
    }
  }

  /// LogitsMode::quantized_hidden: hidden rows rounded to S (ggml's F16 / BF16 dot types), then
  /// float products with the stored values, which are exact: the same bits in every build
  /// (detail/float_dots.hpp).
  [[nodiscard]] static constexpr bool quantizes_hidden() noexcept { return true; }
  [[nodiscard]] static detail::QuantizedHidden quantize_hidden(const float* h, Index h_stride,
                                                               Index n, Index d) {
    return detail::round_hidden(dot_element(), h, h_stride, n, d);
  }
  static void dot_rows_quantized(const S* rows, Index row_stride, Index count, Index d,
                                 const detail::QuantizedHidden& qh, Index j0, Index nj, float* out,
                                 Index out_stride) {
    detail::rounded_row_dots(dot_element(), reinterpret_cast<const std::uint8_t*>(rows),
                             row_stride * Index{sizeof(S)}, count, d, qh, j0, nj, out, out_stride);
  }
  /// How the float dot kernels read a stored value (exactly: every S is a float).
  static constexpr auto dot_element() noexcept {
    if constexpr (std::is_same_v<S, Eigen::half>) {
      return detail::Fp16Element{};
    } else {
      return detail::Bf16Element{};
    }
  }

  /// out[c] = S(x[c]), rounded to nearest even (a value beyond S's range becomes ±inf: callers
  /// check the range first).
  static void encode_row(const float* x, Index d, S* out) noexcept {
    for (Index c = 0; c < d; ++c) out[c] = S(x[c]);
  }
};

}  // namespace ember::inline EMBER_ISA::codec
