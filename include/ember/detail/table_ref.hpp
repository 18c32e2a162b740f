/// The plain views of tables that ember's kernels take: (pointer, rows, cols, row stride) for
/// matrices of values, and (codec, pointer, rows, d_model, row stride) for stored tables of any
/// codec, so owning tables, views and blocks share the same kernels.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/config.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Row-major table: element (r, c) is data[r * stride + c].
template <class T>
struct TableRef {
  T* data;
  Index rows;
  Index cols;
  Index stride;
  [[nodiscard]] T* row(Index r) const noexcept { return data + r * stride; }
};

/// Read-only row-major table.
template <class T>
using ConstTableRef = TableRef<const T>;

/// Views a row-major Eigen object (matrix, block, Ref, Map with inner stride 1) as a table.
template <class Derived>
[[nodiscard]] auto const_table(const Eigen::DenseBase<Derived>& m) noexcept {
  static_assert(static_cast<bool>(Derived::IsRowMajor) || Derived::ColsAtCompileTime == 1,
                "ember: tables must be row-major");
  using T = typename Derived::Scalar;
  return ConstTableRef<T>{m.derived().data(), m.rows(), m.cols(), m.derived().outerStride()};
}

/// Views a writable row-major Eigen object as a table.
template <class Derived>
[[nodiscard]] auto mutable_table(Eigen::DenseBase<Derived>& m) noexcept {
  static_assert(static_cast<bool>(Derived::IsRowMajor), "ember: tables must be row-major");
  using T = typename Derived::Scalar;
  return TableRef<T>{m.derived().data(), m.rows(), m.cols(), m.derived().outerStride()};
}

/// A stored table as the kernels take it: `rows` rows of `d` values, each encoded by `codec` in
/// units_per_row(d) units, rows `stride` units apart.
template <class Codec>
struct CodecRows {
  using Unit = typename Codec::Unit;
  using Value = typename Codec::Value;
  Codec codec;
  const Unit* data;
  Index rows;
  Index d;
  Index stride;
  [[nodiscard]] const Unit* row(Index r) const noexcept { return data + r * stride; }
  /// Bytes of one encoded row (what a lookup reads).
  [[nodiscard]] Index row_bytes() const noexcept {
    return codec.units_per_row(d) * static_cast<Index>(sizeof(Unit));
  }
  /// How many ids ahead a kernel prefetches these rows: prefetch_distance(row_bytes()).
  [[nodiscard]] Index ahead() const noexcept { return prefetch_distance(row_bytes()); }
  /// decoded(row r) · s into dst[d].
  EMBER_ALWAYS_INLINE void decode(Index r, Value s, Value* dst) const {
    codec.decode_row(row(r), d, s, dst);
  }
};

}  // namespace ember::inline EMBER_ISA::detail
