/// ember::optim::Adam<T>: lazy Adam / AdamW over row-sparse (and dense) embedding gradients, with
/// torch.optim.SparseAdam's arithmetic: moments move only for the rows present in a step.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/optim/detail/exact_sqrt.hpp"
#include "ember/optim/row_optimizer.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::optim {

/// Hyper-parameters of Adam, with torch.optim.SparseAdam's defaults.
struct AdamOptions {
  double lr = 1e-3;            ///< learning rate, finite and > 0
  double beta1 = 0.9;          ///< first-moment decay, in [0, 1)
  double beta2 = 0.999;        ///< second-moment decay, in [0, 1)
  double eps = 1e-8;           ///< added to sqrt(v), finite and > 0
  double weight_decay = 0.0;   ///< >= 0; L2 (added to g) or decoupled (AdamW), see below
  bool decoupled = false;      ///< true: AdamW's decoupled decay w *= 1 - lr·weight_decay
  bool per_row_steps = false;  ///< bias correction from each row's own update count (variant)
  bool check_finite = false;   ///< scan gradients for NaN/inf first, as SGDOptions::check_finite
};

/// Lazy Adam over one embedding table. Each step() call increments the global step count t
/// (torch.optim.SparseAdam's `state['step']`), then for each updated row r with gradient g:
///
///   g += weight_decay · w_r                       (decoupled = false, weight_decay > 0)
///   w_r *= 1 - lr · weight_decay                  (decoupled = true: AdamW)
///   m_r += (1 - beta1) · (g - m_r)
///   v_r += (1 - beta2) · (g² - v_r)
///   step_size = lr · sqrt(1 - beta2^t) / (1 - beta1^t)      (in double)
///   w_r -= step_size · m_r / (sqrt(v_r) + eps)
///
/// which is SparseAdam's arithmetic (note: eps is added to sqrt(v) *before* bias correction, not
/// after as in dense torch.optim.Adam). "Updated rows" are the rows of the sparse gradient, or
/// every row when a dense gradient is given. Rows absent from a step keep their values, their
/// moments and - this is the lazy part - are *not* decayed by weight decay either: weight decay is
/// applied to a row only when it is updated (as in SparseAdam/TensorFlow's LazyAdam, and unlike
/// dense AdamW, which shrinks every row every step). So on rows present in every step, lazy Adam
/// equals dense Adam; absent rows stay bit-identical.
///
/// Variant per_row_steps: t is replaced by the row's own update count t_r (so a rare row's first
/// update gets the full bias correction of a first step). Not SparseAdam; off by default.
///
/// The padding row is never updated. A frozen table makes step() throw StateError. One
/// optimizer per table; the state follows Embedding::resize.
///
/// State: m and v (d values each) for every row ever updated, plus a V-sized int32 slot map
/// (and one int64 per row with per_row_steps); nothing for rows never updated.
///
/// Example:
/// ```cpp
/// ember::optim::Adam<float> opt({.lr = 1e-3});
/// opt.step(emb, sparse_grad);               // lazy: only the rows in sparse_grad move
/// ember::optim::Adam<float> adamw({.lr = 1e-3, .weight_decay = 0.01, .decoupled = true});
/// ```
template <class T>
class Adam : public RowOptimizer<Adam<T>, T, AdamOptions> {
  using Base = RowOptimizer<Adam<T>, T, AdamOptions>;
  friend Base;
  using Base::options_;
  using Base::state_;

  static_assert(Scalar<T>, "ember::optim::Adam<T>: T must be float or double");

 public:
  /// The optimizer's name in messages.
  static constexpr const char* name = "Adam";

  /// Throws ValueError naming the first invalid hyper-parameter and its value.
  explicit Adam(const AdamOptions& options = {}) : Base(options, 2, options.per_row_steps) {}

  /// First moment of `row` (empty if the row was never updated).
  [[nodiscard]] RowVector<T> exp_avg(Index row) const { return plane(0, row); }
  /// Second moment of `row` (empty if the row was never updated).
  [[nodiscard]] RowVector<T> exp_avg_sq(Index row) const { return plane(1, row); }
  /// The row's own update count (0 if never updated; tracked only with per_row_steps).
  [[nodiscard]] std::int64_t row_steps(Index row) const {
    const Index s = state_.slot(row);
    return (s < 0 || !options_.per_row_steps) ? 0 : state_.steps(s);
  }

 private:
  static AdamOptions validated(const AdamOptions& o) {
    detail::check_lr(name, o.lr);
    detail::check_unit_interval(name, "beta1", o.beta1);
    detail::check_unit_interval(name, "beta2", o.beta2);
    detail::check_positive_finite(name, "eps", o.eps);
    detail::check_non_negative(name, "weight_decay", o.weight_decay);
    return o;
  }

  RowVector<T> plane(int p, Index row) const {
    const Index s = state_.slot(row);
    if (s < 0) return {};
    return Eigen::Map<const RowVector<T>>(state_.data(p, s), state_.width());
  }

  static T step_size(double lr, double beta1, double beta2, std::int64_t t) {
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(t));
    return static_cast<T>(lr * std::sqrt(bc2) / bc1);
  }

  [[nodiscard]] Index state_width(Index d) const noexcept { return d; }

  /// The constants of step t.
  struct Step {
    T step_size, c1, c2, eps, wd, shrink;
    bool l2, decay;
  };
  [[nodiscard]] Step begin_step(std::int64_t t, Index) const {
    const auto& o = options_;
    return {step_size(o.lr, o.beta1, o.beta2, t),  static_cast<T>(1.0 - o.beta1),
            static_cast<T>(1.0 - o.beta2),         static_cast<T>(o.eps),
            static_cast<T>(o.weight_decay),        static_cast<T>(1.0 - o.lr * o.weight_decay),
            o.weight_decay != 0.0 && !o.decoupled, o.weight_decay != 0.0 && o.decoupled};
  }

  /// Adam on one row: g += wd·w (L2) or w *= 1 - lr·wd (decoupled); m += (1-β1)(g - m);
  /// v += (1-β2)(g² - v); w -= step_size·m / (√v + eps).
  /// The element-wise operations are Eigen's (+, -, ·, / give the same bits in its vector and
  /// scalar forms, wherever a row starts); √v is detail::exact_sqrt's, written into g once g is
  /// used, since Eigen's vectorised float √ is an approximation under EIGEN_FAST_MATH.
  void update_row(const Step& c, T* w_row, T* g_row, Index slot, bool, Index d) {
    using Array = Eigen::Array<T, 1, Eigen::Dynamic>;
    Eigen::Map<Array> w(w_row, d);
    Eigen::Map<Array> g(g_row, d);
    if (c.l2) g += c.wd * w;
    if (c.decay) w *= c.shrink;
    Eigen::Map<Array> m(state_.data(0, slot), d);
    Eigen::Map<Array> v(state_.data(1, slot), d);
    m += c.c1 * (g - m);
    v += c.c2 * (g.square() - v);
    T ss = c.step_size;
    const auto& o = options_;
    if (o.per_row_steps) ss = step_size(o.lr, o.beta1, o.beta2, ++state_.steps(slot));
    detail::exact_sqrt(v.data(), g_row, d);
    w -= ss * m / (g + c.eps);
  }
};

}  // namespace ember::inline EMBER_ISA::optim
