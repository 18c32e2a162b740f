/// codec::Int8Rowwise: FBGEMM's fused 8-bit row-wise layout (per row, d uint8 codes, a float
/// scale and a float bias), the codec of QuantizedEmbedding and QuantizedEmbeddingView.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ember/codec/detail/int8_dot.hpp"
#include "ember/config.hpp"
#include "ember/detail/simd.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::codec {

/// A row of d values stored as FBGEMM's FloatToFused8BitRowwiseQuantized (Caffe2's
/// Fused8BitRowwise) lays it out: d uint8 codes q followed by a float32 scale and a float32 bias
/// (native byte order, unaligned), standing for the values q · scale + bias. The members are
/// the codec contract's (codec/concepts.hpp).
///
/// Decoding at lookup scale s folds s into the row's scale and bias: (q · (scale·s)) + bias·s,
/// each product rounded before the sum; at s = 1 that is exactly q · scale + bias.
struct Int8Rowwise {
  using Unit = std::uint8_t;
  using Value = float;
  static constexpr bool element_rows = false;
  static constexpr bool is_plain = false;
  static constexpr const char* family = "QuantizedEmbedding";
  static constexpr const char* view_family = "QuantizedEmbeddingView";
  /// Bytes after the codes of each row: the float scale and the float bias.
  static constexpr Index row_overhead = detail::int8_row_overhead;

  [[nodiscard]] static constexpr const char* name() noexcept { return "int8_rowwise"; }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d + row_overhead; }
  [[nodiscard]] static constexpr bool holds_width(Index /*d*/) noexcept { return true; }

  /// The scale of a stored row of d codes.
  [[nodiscard]] static float row_scale(const std::uint8_t* row, Index d) noexcept {
    float v;
    std::memcpy(&v, row + d, sizeof v);
    return v;
  }
  /// The bias of a stored row of d codes.
  [[nodiscard]] static float row_bias(const std::uint8_t* row, Index d) noexcept {
    float v;
    std::memcpy(&v, row + d + static_cast<Index>(sizeof(float)), sizeof v);
    return v;
  }

  /// dst[c] = q[c] · (scale · s) + bias · s, each product rounded before the bias is added, so
  /// the bits are the same in every build (detail::codes_times_plus).
  EMBER_ALWAYS_INLINE static void decode_row(const std::uint8_t* row, Index d, float s,
                                             float* dst) noexcept {
    detail::codes_times_plus(row, d, row_scale(row, d) * s, row_bias(row, d) * s, dst);
  }

  /// LogitsMode::quantized_hidden: hidden rows rounded in blocks of 32 as ggml's Q8_1, integer
  /// dot products with the codes (codec/detail/int8_dot.hpp: the same bits in every build).
  [[nodiscard]] static constexpr bool quantizes_hidden() noexcept { return true; }
  [[nodiscard]] static detail::QuantizedHidden quantize_hidden(const float* h, Index h_stride,
                                                               Index n, Index d) {
    return detail::int8_rows_hidden(h, h_stride, n, d);
  }
  static void dot_rows_quantized(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                                 const detail::QuantizedHidden& qh, Index j0, Index nj, float* out,
                                 Index out_stride) {
    detail::int8_rows_qdot(rows, row_stride, count, d, qh, j0, nj, out, out_stride,
                           detail::default_row_parts());
  }

  /// FBGEMM's FloatToFused8BitRowwiseQuantizedSBFloat, reference (scalar) version: bias = min,
  /// scale = (max - min) / 255, q = clamp(round((x - min) · 255 / (max - min + 1e-8)), 0, 255).
  /// Precondition: the values are finite.
  static void encode_row(const float* x, Index d, std::uint8_t* out) noexcept {
    const auto [lo, hi] = std::minmax_element(x, x + d);
    const float minimum = *lo;
    const float range = *hi - minimum;
    const float scale = range / 255.0f;
    const float inverse_scale = 255.0f / (range + 1e-8f);
    for (Index c = 0; c < d; ++c) {
      const long q = std::lrintf((x[c] - minimum) * inverse_scale);
      out[c] = static_cast<std::uint8_t>(std::clamp(q, 0L, 255L));
    }
    std::memcpy(out + d, &scale, sizeof scale);
    std::memcpy(out + d + static_cast<Index>(sizeof scale), &minimum, sizeof minimum);
  }
};

}  // namespace ember::inline EMBER_ISA::codec
