/// ember::optim::SGD<T>: stochastic gradient descent over row-sparse and dense embedding
/// gradients, with optional momentum kept only for the rows that were updated.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "ember/config.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/optim/row_optimizer.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::optim {

/// Hyper-parameters of SGD, with torch.optim.SGD's meanings and defaults (lr has no default in
/// PyTorch; 0.01 here).
struct SGDOptions {
  double lr = 0.01;           ///< learning rate, finite and > 0
  double momentum = 0.0;      ///< in [0, 1); 0 keeps no state at all
  double dampening = 0.0;     ///< in [0, 1)
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient of updated rows, >= 0
  bool nesterov = false;      ///< Nesterov momentum (needs momentum > 0 and dampening = 0)
  /// Scan the gradient for NaN/inf before each step and throw ValueError (naming the row and
  /// column) instead of applying it; nothing changes then. Off by default: it reads every
  /// gradient value once more (docs/reliability.md).
  bool check_finite = false;
};

/// SGD over one embedding table: for each updated row r with gradient g,
///
///   g += weight_decay · w_r
///   buf_r = g on the row's first update, else momentum · buf_r + (1 - dampening) · g
///   g = nesterov ? g + momentum · buf_r : buf_r               (only with momentum > 0)
///   w_r -= lr · g
///
/// exactly torch.optim.SGD's rule, applied lazily: "updated rows" are the rows of the sparse
/// gradient, or every row when a dense gradient is given (dense SGD). Untouched rows keep their
/// values and their momentum buffer (which is not decayed while the row is absent), so lazy
/// momentum equals dense momentum on rows touched every step.
///
/// The padding row (Embedding::set_padding_idx) is never updated, whatever the gradients hold.
/// A frozen table makes step() throw StateError. One optimizer instance per table: the state is
/// per row of that table and follows it through Embedding::resize.
///
/// State: with momentum, one d-vector per row ever updated plus a V-sized int32 slot map, both
/// allocated on the first step; without momentum, none.
///
/// Example:
/// ```cpp
/// ember::optim::SGD<float> opt({.lr = 0.1, .momentum = 0.9});
/// opt.step(emb, sparse_grad);               // input side only
/// opt.step(emb, sparse_grad, dense_grad);   // tied: sparse input part + dense logits part
/// ```
template <class T>
class SGD : public RowOptimizer<SGD<T>, T, SGDOptions> {
  using Base = RowOptimizer<SGD<T>, T, SGDOptions>;
  friend Base;
  using Base::options_;
  using Base::state_;

  static_assert(Scalar<T>, "ember::optim::SGD<T>: T must be float or double");

 public:
  /// The optimizer's name in messages.
  static constexpr const char* name = "SGD";

  /// Throws ValueError naming the first invalid hyper-parameter and its value.
  explicit SGD(const SGDOptions& options = {}) : Base(options, 1, false) {}

  /// The momentum buffer of `row`, or an empty vector if it has none.
  [[nodiscard]] RowVector<T> momentum_buffer(Index row) const {
    const Index s = state_.slot(row);
    if (s < 0) return {};
    return Eigen::Map<const RowVector<T>>(state_.data(0, s), state_.width());
  }

 private:
  static SGDOptions validated(const SGDOptions& o) {
    detail::check_lr(name, o.lr);
    detail::check_unit_interval(name, "momentum", o.momentum);
    detail::check_unit_interval(name, "dampening", o.dampening);
    detail::check_non_negative(name, "weight_decay", o.weight_decay);
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
      throw ValueError(detail::message(name,
                                       "nesterov needs momentum > 0 and dampening = 0, got "
                                       "momentum ",
                                       o.momentum, ", dampening ", o.dampening),
                       o.momentum);
    }
    return o;
  }

  [[nodiscard]] Index state_width(Index d) const noexcept {
    return options_.momentum > 0.0 ? d : 0;
  }

  /// The constants of one step.
  struct Step {
    T lr, wd, mom, damp;
  };
  [[nodiscard]] Step begin_step(std::int64_t, Index) const noexcept {
    return {static_cast<T>(options_.lr), static_cast<T>(options_.weight_decay),
            static_cast<T>(options_.momentum), static_cast<T>(1.0 - options_.dampening)};
  }

  /// PyTorch's SGD on one row: g += wd·w; buf = g on the row's first update, else
  /// mom·buf + (1 - dampening)·g; g = buf (or g + mom·buf with Nesterov); w -= lr·g.
  void update_row(const Step& c, T* w_row, T* g_row, Index slot, bool fresh, Index d) {
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> w(w_row, d);
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> g(g_row, d);
    if (options_.weight_decay != 0.0) g += c.wd * w;
    if (slot >= 0) {
      Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> buf(state_.data(0, slot), d);
      if (fresh) {
        buf = g;
      } else {
        buf = c.mom * buf + c.damp * g;
      }
      if (options_.nesterov) {
        g += c.mom * buf;
      } else {
        g = buf;
      }
    }
    w -= c.lr * g;
  }
};

}  // namespace ember::inline EMBER_ISA::optim
