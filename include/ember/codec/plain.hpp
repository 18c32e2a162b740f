/// codec::Plain<T>: rows stored as T (float or double) and used as they are, the codec of
/// Embedding<T> and EmbeddingView<T>.
// SPDX-License-Identifier: MIT
#pragma once

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::codec {

/// A row of d values of T stored as d values of T: nothing to decode. The members are the codec
/// contract's (codec/concepts.hpp).
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
