/// codec::Reduced<S>: rows stored as 16-bit floats (Eigen::half, IEEE binary16, or
/// Eigen::bfloat16) and decoded to float, the codec of ReducedEmbedding<S> and its view.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/float_dots.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The 16-bit storage types of ReducedEmbedding: IEEE binary16 and bfloat16.
template <class S>
concept HalfStorage = std::same_as<S, Eigen::half> || std::same_as<S, Eigen::bfloat16>;

/// The name of a 16-bit storage type in messages ("half", "bfloat16").
template <HalfStorage S>
inline constexpr const char* storage_name = std::is_same_v<S, Eigen::half> ? "half" : "bfloat16";

}  // namespace ember::inline EMBER_ISA

namespace ember::inline EMBER_ISA::detail {

namespace portable {

/// dst[c] = float(row[c]) · s for the d halves at `row` (Eigen's exact conversion).
EMBER_ALWAYS_INLINE void half_row_times(const Eigen::half* row, Index d, float s,
                                        float* dst) noexcept {
  for (Index c = 0; c < d; ++c) dst[c] = static_cast<float>(row[c]) * s;
}

}  // namespace portable

#if defined(__F16C__) && defined(__AVX__)
namespace f16c {

/// half_row_times with F16C's vcvtph2ps (exact, as the portable conversion), the rest by
/// portable::half_row_times.
EMBER_ALWAYS_INLINE void half_row_times(const Eigen::half* row, Index d, float s,
                                        float* dst) noexcept {
  Index c = 0;
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
  portable::half_row_times(row + c, d - c, s, dst + c);
}

}  // namespace f16c
#endif

/// dst[c] = float(row[c]) · s for the d halves at `row`: F16C's conversion where the build has
/// it, else Eigen's (both exact).
/// Signature: half_row_times(const Eigen::half* row, Index d, float s, float* dst).
#if defined(__F16C__) && defined(__AVX__)
using f16c::half_row_times;
#else
using portable::half_row_times;
#endif

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::codec {

/// A row of d values stored as d 16-bit floats S and decoded exactly to float (every half and
/// bfloat16 value is a float), then multiplied by the lookup scale in float. Encoding rounds to
/// nearest even. The members are the codec contract's (codec/concepts.hpp).
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
      detail::half_row_times(row, d, s, dst);
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

  /// out[c] = S(x[c]), rounded to nearest even (a value beyond S's range becomes ±inf: from_float
  /// calls check_encodable first).
  static void encode_row(const float* x, Index d, S* out) noexcept {
    for (Index c = 0; c < d; ++c) out[c] = S(x[c]);
  }

  /// Throws ValueError for the first value of `table` (float or double, row-major order) that is
  /// not finite or rounds to ±inf in S, naming its row, column and value, and S's largest value:
  /// values that round down to the largest finite S are stored as it (from_float's check).
  template <class Derived>
  static void check_encodable(const Eigen::MatrixBase<Derived>& table, detail::Where where) {
    const auto limit = static_cast<double>(std::numeric_limits<S>::max());
    for (Index r = 0; r < table.rows(); ++r) {
      for (Index c = 0; c < table.cols(); ++c) {
        const auto x = static_cast<double>(table(r, c));
        // Beyond float's range the double -> float cast itself would be undefined.
        const bool fits = std::isfinite(x) &&
                          std::abs(x) <= static_cast<double>(std::numeric_limits<float>::max()) &&
                          std::isfinite(static_cast<float>(S(static_cast<float>(x))));
        if (!fits) {
          throw ValueError(detail::message(where, "value ", x, " at row ", r, ", column ", c,
                                           std::isfinite(x) ? " overflows " : " is not finite in ",
                                           storage_name<S>, " (largest ", limit, ")"),
                           x);
        }
      }
    }
  }
};

}  // namespace ember::inline EMBER_ISA::codec
