/// Opt-in finiteness checks: find or report the first NaN or infinity in a matrix or a sparse
/// gradient before it spreads into a table (ember does not scan values on its hot paths).
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// Where a non-finite value was found: its row and column, and the value itself.
struct NonFinite {
  Index row;
  Index col;
  double value;
};

/// The first non-finite value of `m` (any dense Eigen expression) in row-major order, or nullopt.
/// Complexity: O(rows·cols) reads, stops at the first hit.
template <class Derived>
[[nodiscard]] std::optional<NonFinite> find_non_finite(const Eigen::DenseBase<Derived>& m) {
  for (Index r = 0; r < m.rows(); ++r) {
    for (Index c = 0; c < m.cols(); ++c) {
      const auto v = m.coeff(r, c);
      if (!std::isfinite(v)) [[unlikely]] {
        return NonFinite{r, c, static_cast<double>(v)};
      }
    }
  }
  return std::nullopt;
}

namespace detail {

[[noreturn]] inline void throw_non_finite(std::string_view what, std::string_view row_kind,
                                          const NonFinite& at) {
  throw ValueError(text(what, ": value at ", row_kind, " ", at.row, ", column ", at.col, " is ",
                        at.value, " (not finite)"),
                   at.value);
}

}  // namespace detail

/// Throws ValueError if `m` holds a NaN or an infinity, naming `what`, the row and the column of
/// the first one (row-major order); value() is the offending value. Complexity: O(rows·cols).
/// Example message: `grad_hidden: value at row 3, column 7 is nan (not finite)`.
template <class Derived>
void check_finite(const Eigen::DenseBase<Derived>& m, std::string_view what) {
  if (const auto at = find_non_finite(m)) detail::throw_non_finite(what, "row", *at);
}

/// Throws ValueError if a stored row of the sparse gradient `grad` holds a NaN or an infinity;
/// the message names `what`, the *table* row id (not the slot) and the column.
/// Complexity: O(k·d) for k stored rows.
template <class T>
void check_finite(const SparseRowGrad<T>& grad, std::string_view what) {
  if (auto at = find_non_finite(grad.values())) {
    at->row = static_cast<Index>(grad.rows()[static_cast<std::size_t>(at->row)]);
    detail::throw_non_finite(what, "table row", *at);
  }
}

namespace detail {

/// check_finite of a sparse gradient for ember's own calls (the name built only when it throws).
template <class T>
void check_finite(const SparseRowGrad<T>& grad, Where where, const char* name) {
  if (find_non_finite(grad.values())) ember::check_finite(grad, message(where, name));
}

/// check_finite for ember's own calls: the name, "<where>: <name>", is built only when it throws.
template <class Derived>
void check_finite(const Eigen::DenseBase<Derived>& m, Where where, const char* name) {
  if (const auto at = find_non_finite(m)) throw_non_finite(message(where, name), "row", *at);
}

}  // namespace detail

/// True when every stored value of `grad` is finite. Complexity: O(k·d).
template <class T>
[[nodiscard]] bool all_finite(const SparseRowGrad<T>& grad) {
  return !find_non_finite(grad.values()).has_value();
}

}  // namespace ember::inline EMBER_ISA
