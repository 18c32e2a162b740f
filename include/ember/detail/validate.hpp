/// Validation helpers used by ember's public entry points: they throw, kernels never re-check.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// Throws IndexError for the first id outside [0, bound). One comparison pair per id.
template <TokenIdType Id>
void check_ids(std::span<const Id> ids, Index bound, const char* where) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const Id id = ids[static_cast<std::size_t>(i)];
    if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, bound)) [[unlikely]] {
      const auto value = static_cast<std::int64_t>(id);
      throw IndexError(std::string(where) + ": id " + std::to_string(value) + " at position " +
                           std::to_string(i) + " is outside [0, " + std::to_string(bound) + ")",
                       i, value, bound);
    }
  }
}

/// Throws ShapeError unless `actual == expected` for dimension `dim` (0 rows, 1 cols) of `name`.
inline void check_extent(const char* where, const char* name, int dim, Index expected, Index actual,
                         const char* expected_what) {
  if (actual != expected) [[unlikely]] {
    throw ShapeError(std::string(where) + ": " + name + " has " + std::to_string(actual) +
                         (dim == 0 ? " rows" : " columns") + ", expected " + expected_what + " = " +
                         std::to_string(expected),
                     dim, expected, actual);
  }
}

/// Throws ShapeError unless the size argument `value` is strictly positive.
inline void check_positive_size(const char* where, const char* name, Index value) {
  if (value <= 0) [[unlikely]] {
    throw ShapeError(
        std::string(where) + ": " + name + " must be positive, got " + std::to_string(value), -1, 1,
        value);
  }
}

/// Throws ValueError unless `value` is finite and strictly positive.
inline void check_positive_finite(const char* where, const char* name, double value) {
  if (!(std::isfinite(value) && value > 0.0)) [[unlikely]] {
    throw ValueError(std::string(where) + ": " + name + " must be finite and positive, got " +
                         std::to_string(value),
                     value);
  }
}

/// Throws ValueError unless `value` is finite.
inline void check_finite_value(const char* where, const char* name, double value) {
  if (!std::isfinite(value)) [[unlikely]] {
    throw ValueError(
        std::string(where) + ": " + name + " must be finite, got " + std::to_string(value), value);
  }
}

/// The constructor checks of a view over caller memory (EmbeddingView, ReducedEmbeddingView), in
/// this order: vocab_size and d_model positive, row_stride (-1: d_model) at least d_model, data
/// not null and aligned to alignof(T). Returns the checked table.
/// Throws: ShapeError for a size or the stride, ValueError for the pointer, naming `where`.
template <class T>
[[nodiscard]] ConstTableRef<T> checked_view_table(const char* where, const T* data,
                                                  Index vocab_size, Index d_model,
                                                  Index row_stride) {
  check_positive_size(where, "vocab_size", vocab_size);
  check_positive_size(where, "d_model", d_model);
  const Index stride = row_stride == -1 ? d_model : row_stride;
  if (stride < 0) {
    throw ShapeError(std::string(where) + ": row_stride " + std::to_string(stride) +
                         " is negative (the only negative value allowed is -1, meaning d_model = " +
                         std::to_string(d_model) + ")",
                     -1, d_model, stride);
  }
  if (stride < d_model) {
    throw ShapeError(std::string(where) + ": row_stride " + std::to_string(stride) +
                         " is smaller than d_model = " + std::to_string(d_model),
                     -1, d_model, stride);
  }
  if (data == nullptr) throw ValueError(std::string(where) + ": data is null", 0.0);
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address % alignof(T) != 0) {
    throw ValueError(std::string(where) + ": data address " + std::to_string(address) +
                         " is not aligned to " + std::to_string(alignof(T)) + " bytes",
                     static_cast<double>(address % alignof(T)));
  }
  return {data, vocab_size, d_model, stride};
}

}  // namespace ember::detail
