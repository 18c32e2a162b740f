/// Gradient clipping by global norm over row-sparse and dense gradients together
/// (torch.nn.utils.clip_grad_norm_'s rule), including the tied case where a sparse and a dense
/// gradient are two halves of one table's gradient.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/row_norms.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// A set of gradients clipped together by their global norm.
///
/// The global p-norm is the p-norm of all gradient entries of all parameters, computed in double:
/// - add(sparse): the gradient of a parameter of its own (only its stored rows count);
/// - add(dense): a dense gradient of a parameter of its own;
/// - add_tied(sparse, dense): the two halves of ONE table's gradient (input lookup + tied
///   logits); their *sum* is the parameter's gradient, so the norm is taken of sparse + dense,
///   not of the two separately.
///
/// clip(max_norm) then scales every gradient by max_norm / (total + 1e-6) when that factor is
/// below 1, as torch.nn.utils.clip_grad_norm_. The group keeps references: the gradients must
/// outlive it, and their shapes must not change in between.
///
/// Example:
/// ```cpp
/// ember::ClipGroup<float> group;
/// group.add_tied(input_grad, grad_w).add(other_dense_grad);
/// const double norm = group.clip(/*max_norm=*/1.0);   // norm before clipping
/// ```
template <class T>
class ClipGroup {
  static_assert(Scalar<T>, "ember::ClipGroup<T>: T must be float or double");

 public:
  /// Adds a row-sparse gradient of its own parameter.
  ClipGroup& add(SparseRowGrad<T>& sparse) {
    items_.push_back({&sparse, {nullptr, 0, 0, 0}});
    return *this;
  }
  /// Adds a dense gradient of its own parameter (any row-major matrix or block).
  ClipGroup& add(Eigen::Ref<RowMatrix<T>> dense) {
    items_.push_back({nullptr, detail::mutable_table(dense)});
    return *this;
  }
  /// Adds the two halves of one table's gradient: the norm counts their sum.
  /// Throws:  ShapeError if sparse has rows and is bound to a shape other than dense's; the group
  ///          is unchanged then.
  ClipGroup& add_tied(SparseRowGrad<T>& sparse, Eigen::Ref<RowMatrix<T>> dense) {
    constexpr const char* where = "ClipGroup::add_tied";
    if (!sparse.empty()) {
      detail::check_dims(where, "dense", dense, sparse.vocab_size(),
                         "the sparse gradient's vocab_size", sparse.d_model(),
                         "the sparse gradient's d_model");
    }
    items_.push_back({&sparse, detail::mutable_table(dense)});
    return *this;
  }
  /// Number of gradients (a tied pair counts once).
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }

  /// The global p-norm (p > 0, or infinity for the max-abs norm).
  /// Throws:  ValueError unless p > 0.
  /// Complexity: O(stored entries).
  [[nodiscard]] double norm(double p = 2.0) const {
    detail::check_scalar(p > 0.0, "ClipGroup::norm", "p", p, "> 0");
    return total(p);
  }

  /// Scales all gradients by max_norm / (norm + 1e-6) if that is below 1; returns the norm
  /// before clipping.
  /// Throws:  ValueError unless max_norm is finite and > 0 and p > 0, or if the norm is not
  ///          finite (a NaN/inf gradient); nothing is scaled then.
  double clip(double max_norm, double p = 2.0) {
    constexpr const char* where = "ClipGroup::clip";
    detail::check_positive_finite(where, "max_norm", max_norm);
    detail::check_scalar(p > 0.0, where, "p", p, "> 0");  // rejects NaN; +inf: the max norm
    const double norm_value = total(p);
    if (!std::isfinite(norm_value)) {
      throw ValueError(detail::message(where, "the total gradient norm is not finite (", norm_value,
                                       "); no gradient was scaled"),
                       norm_value);
    }
    const double coef = max_norm / (norm_value + 1e-6);
    if (coef < 1.0) {
      const T c = static_cast<T>(coef);
      for (auto& item : items_) {
        if (item.sparse != nullptr) item.sparse->scale_by(c);
        if (item.dense.data != nullptr) as_map(item.dense) *= c;
      }
    }
    return norm_value;
  }

 private:
  struct Item {
    SparseRowGrad<T>* sparse;
    detail::TableRef<T> dense;
  };
  using Map = Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>>;
  static Map as_map(const detail::TableRef<T>& t) {
    return Map(t.data, t.rows, t.cols, Eigen::OuterStride<>(t.stride));
  }

  // Adds Σ|x|^p of row x[0, d) to acc (p = infinity: acc = max(acc, max |x|), a NaN kept): in
  // detail::ordered_sum's order within the row, rows in turn, so a row's share of the norm does
  // not depend on where it is in memory.
  static void add_row(const T* x, Index d, double p, double& acc) {
    if (std::isinf(p)) {
      const double m = detail::max_abs(x, d);
      if (!(m <= acc) && acc == acc) acc = m;
    } else {
      acc += detail::power_sum(x, d, p);
    }
  }
  // add_row for each row of a rows x d block whose rows are `stride` apart.
  static void add_rows(const T* x, Index rows, Index d, Index stride, double p, double& acc) {
    for (Index r = 0; r < rows; ++r) add_row(x + r * stride, d, p, acc);
  }

  double total(double p) const {
    double acc = 0.0;
    for (const auto& item : items_) {
      const bool has_dense = item.dense.data != nullptr;
      if (!has_dense) {
        const auto& values = item.sparse->values();
        add_rows(values.data(), values.rows(), values.cols(), values.cols(), p, acc);
        continue;
      }
      const detail::TableRef<T>& dense = item.dense;
      if (item.sparse == nullptr || item.sparse->empty()) {
        add_rows(dense.data, dense.rows, dense.cols, dense.stride, p, acc);
        continue;
      }
      // Tied: rows present in the sparse part count as dense + sparse.
      const auto rows = item.sparse->rows();
      const auto& values = item.sparse->values();
      const Index d = dense.cols;
      std::vector<T> sum(static_cast<std::size_t>(d));
      std::size_t k = 0;
      for (Index r = 0; r < dense.rows; ++r) {
        const T* dense_row = dense.row(r);
        if (k < rows.size() && static_cast<Index>(rows[k]) == r) {
          const T* sparse_row = values.data() + static_cast<Index>(k) * d;
          for (Index c = 0; c < d; ++c)
            sum[static_cast<std::size_t>(c)] = dense_row[c] + sparse_row[c];
          add_row(sum.data(), d, p, acc);
          ++k;
        } else {
          add_row(dense_row, d, p, acc);
        }
      }
    }
    if (std::isinf(p) || p == 1.0) return acc;
    if (p == 2.0) return std::sqrt(acc);
    return std::pow(acc, 1.0 / p);
  }

  std::vector<Item> items_;
};

}  // namespace ember::inline EMBER_ISA
