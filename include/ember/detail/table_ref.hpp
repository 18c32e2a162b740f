/// A plain (pointer, rows, cols, row stride) view of a row-major table, the one shape every
/// ember kernel takes so owning tables, views and blocks share the same code.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/types.hpp"

// Forced inlining of the per-row helpers of the gather loops: as out-of-line calls they cut the
// number of rows in flight and halved int8 lookup throughput in bench_reduced.
// A helper whose only statements are prefetches needs it most: GCC may delete an out-of-line
// call to it as having no side effect, and with it every prefetch (seen while reworking the
// gathers: a plain-inline prefetch helper made the reduced-precision lookups 2.5x slower).
#ifndef EMBER_DETAIL_ALWAYS_INLINE
#if defined(__GNUC__) || defined(__clang__)
#define EMBER_DETAIL_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define EMBER_DETAIL_ALWAYS_INLINE inline
#endif
#endif

namespace ember::detail {

/// Read-only row-major table: element (r, c) is data[r * stride + c].
template <class T>
struct ConstTableRef {
  const T* data;
  Index rows;
  Index cols;
  Index stride;
  [[nodiscard]] const T* row(Index r) const noexcept { return data + r * stride; }
};

/// Writable row-major table: element (r, c) is data[r * stride + c].
template <class T>
struct TableRef {
  T* data;
  Index rows;
  Index cols;
  Index stride;
  [[nodiscard]] T* row(Index r) const noexcept { return data + r * stride; }
};

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

/// Asks for the cache lines of the first `reach` elements (at most d) of `row` ahead of use. A
/// hint only: no effect on results, and nothing at all on compilers without __builtin_prefetch.
/// The default reach of 4 lines lets the streaming prefetcher pick up the rest of a long row.
template <class T>
EMBER_DETAIL_ALWAYS_INLINE void prefetch_row(const T* row, Index d,
                                             Index reach = static_cast<Index>(256 /
                                                                              sizeof(T))) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  constexpr Index line = 64 / static_cast<Index>(sizeof(T));
  const Index last = d < reach ? d : reach;
  for (Index c = 0; c < last; c += line) __builtin_prefetch(row + c, 0, 3);
#else
  static_cast<void>(row);
  static_cast<void>(d);
  static_cast<void>(reach);
#endif
}

}  // namespace ember::detail
