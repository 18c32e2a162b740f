/// Validation helpers used by ember's public entry points: they throw, kernels never re-check.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

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

}  // namespace ember::detail
