/// ember::optim::RowwiseAdagrad<T>: Adagrad with one accumulator per row (FBGEMM's rowwise sparse
/// Adagrad), the memory-light optimizer of large recommendation embedding tables.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/detail/row_norms.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/optim/row_optimizer.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::optim {

/// Hyper-parameters of RowwiseAdagrad (FBGEMM's defaults for eps).
struct AdagradOptions {
  double lr = 0.01;                        ///< learning rate, finite and > 0
  double eps = 1e-8;                       ///< added to sqrt(G), finite and > 0
  double weight_decay = 0.0;               ///< L2 penalty added to g of updated rows, >= 0
  double initial_accumulator_value = 0.0;  ///< G of a row at its first update, >= 0
  bool check_finite = false;  ///< scan gradients for NaN/inf first, as SGDOptions::check_finite
};

/// Row-wise Adagrad over one embedding table: for each updated row r with gradient g (d values),
///
///   g   += weight_decay · w_r
///   G_r += mean(g²)                 (one scalar per row, mean over the d columns)
///   w_r -= lr · g / (sqrt(G_r) + eps)
///
/// as FBGEMM's rowwise Adagrad (split_embedding_codegen, optimizer EXACT_ROWWISE_ADAGRAD with
/// weight_decay_mode L2). "Updated rows" are the rows of the sparse gradient, or all rows with a
/// dense gradient. Absent rows keep their values and accumulators. The padding row is never
/// updated; a frozen table makes step() throw StateError. One optimizer per table.
///
/// State: one T per row ever updated plus a V-sized int32 slot map: V·4 + k·sizeof(T) bytes,
/// instead of V·d·sizeof(T) for element-wise Adagrad.
template <class T>
class RowwiseAdagrad : public RowOptimizer<RowwiseAdagrad<T>, T, AdagradOptions> {
  using Base = RowOptimizer<RowwiseAdagrad<T>, T, AdagradOptions>;
  friend Base;
  using Base::options_;
  using Base::state_;

  static_assert(Scalar<T>, "ember::optim::RowwiseAdagrad<T>: T must be float or double");

 public:
  /// The optimizer's name in messages.
  static constexpr const char* name = "RowwiseAdagrad";

  /// Throws ValueError naming the first invalid hyper-parameter and its value.
  explicit RowwiseAdagrad(const AdagradOptions& options = {}) : Base(options, 1, false) {}

  /// The accumulator G of `row`, or initial_accumulator_value if it was never updated.
  [[nodiscard]] T accumulator(Index row) const {
    const Index s = state_.slot(row);
    return s < 0 ? static_cast<T>(options_.initial_accumulator_value) : *state_.data(0, s);
  }

 private:
  static AdagradOptions validated(const AdagradOptions& o) {
    detail::check_lr(name, o.lr);
    detail::check_positive_finite(name, "eps", o.eps);
    detail::check_non_negative(name, "weight_decay", o.weight_decay);
    detail::check_non_negative(name, "initial_accumulator_value", o.initial_accumulator_value);
    return o;
  }

  /// The state is one scalar per row, whatever the table width.
  [[nodiscard]] Index state_width(Index) const noexcept { return 1; }

  /// The constants of one step.
  struct Step {
    T lr, eps, wd, init, inv_d;
  };
  [[nodiscard]] Step begin_step(std::int64_t, Index d) const noexcept {
    return {static_cast<T>(options_.lr), static_cast<T>(options_.eps),
            static_cast<T>(options_.weight_decay),
            static_cast<T>(options_.initial_accumulator_value), T(1) / static_cast<T>(d)};
  }

  /// FBGEMM's row-wise Adagrad on one row: g += wd·w; G += mean(g²) (G starts at
  /// initial_accumulator_value); w -= lr / (√G + eps) · g.
  void update_row(const Step& c, T* w_row, T* g_row, Index slot, bool fresh, Index d) {
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> w(w_row, d);
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> g(g_row, d);
    if (options_.weight_decay != 0.0) g += c.wd * w;
    T& acc = *state_.data(0, slot);
    if (fresh) acc = c.init;
    // Σ g² in an order fixed by d, so the accumulator never depends on where the row is.
    acc += detail::ordered_sum<T>(g_row, d, [](const auto& b) { return b.square(); }) * c.inv_d;
    const T multiplier = c.lr / (std::sqrt(acc) + c.eps);
    w -= multiplier * g;
  }
};

}  // namespace ember::inline EMBER_ISA::optim
