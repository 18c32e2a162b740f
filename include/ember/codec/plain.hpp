/// codec::Plain<T>: rows stored as T (float or double) and used as they are, the codec of
/// Embedding<T> and EmbeddingView<T>.
// SPDX-License-Identifier: MIT
#pragma once

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::codec {

/// A row of d values of T stored as d values of T: nothing to decode.
///
/// The codec interface, which every codec of `ember/codec/` implements: `Unit` (the element type
/// of the stored rows), `Value` (what rows decode to: T here, float otherwise), `element_rows` (a
/// row is d units, so the table is a matrix of Unit), `is_plain` (rows are Value[d] as stored),
/// `family` and `view_family` (the table names in messages), `name()` (the storage format),
/// `units_per_row(d)`, `holds_width(d)` (block formats need a multiple of their block) and
/// `decode_row(row, d, s, dst)`: dst[c] = value c times s, each product rounded to Value before
/// anything is added to it. Owning tables also need a default-constructible codec with static
/// `units_per_row` and, for from_float, a static `encode_row(x, d, out)`.
template <class T>
struct Plain {
  static_assert(Scalar<T>, "ember::codec::Plain<T>: T must be float or double");
  using Unit = T;
  using Value = T;
  static constexpr bool element_rows = true;
  static constexpr bool is_plain = true;
  static constexpr const char* family = "Embedding";
  static constexpr const char* view_family = "EmbeddingView";

  [[nodiscard]] static constexpr const char* name() noexcept {
    return sizeof(T) == 4 ? "f32" : "f64";
  }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d; }
  [[nodiscard]] static constexpr bool holds_width(Index /*d*/) noexcept { return true; }

  /// dst[c] = row[c] · s.
  EMBER_ALWAYS_INLINE static void decode_row(const T* row, Index d, T s, T* dst) noexcept {
    Eigen::Map<RowVector<T>>(dst, d) = Eigen::Map<const RowVector<T>>(row, d) * s;
  }
};

}  // namespace ember::inline EMBER_ISA::codec
