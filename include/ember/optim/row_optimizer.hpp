/// The part every row-wise optimizer of ember::optim shares: the three step() forms over a sparse
/// and/or dense gradient, their validation, the rows they visit, and the per-row state.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ember/check.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/optim/detail/row_state.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::optim {

namespace detail {

/// The gradient arguments of one step() call, validated.
template <class T>
struct StepInput {
  const SparseRowGrad<T>* sparse = nullptr;  ///< may be null or empty
  const T* dense = nullptr;                  ///< V x d row-major, or null
  Index dense_stride = 0;                    ///< row stride of `dense`
  Index skip_row = -1;                       ///< the padding row, or -1
};

/// Validates everything a step on `emb` needs, so the update can then run without throwing:
/// the table is not frozen, the sparse gradient (if any rows) is bound to the table's shape, the
/// dense gradient (if any) is vocab_size x d_model.
template <class T>
void check_step(const char* where, const Embedding<T>& emb, const SparseRowGrad<T>* sparse,
                const Eigen::Ref<const RowMatrix<T>>* dense) {
  if (emb.frozen()) {
    throw StateError(std::string(where) +
                     ": the table is frozen (freeze() / from_pretrained(freeze = true)); "
                     "unfreeze() it to train it");
  }
  if (sparse != nullptr && !sparse->empty()) {
    ember::detail::check_extent(where, "the sparse gradient", 0, emb.vocab_size(),
                                sparse->vocab_size(), "the table's vocab_size");
    ember::detail::check_extent(where, "the sparse gradient", 1, emb.d_model(), sparse->d_model(),
                                "the table's d_model");
  }
  if (dense != nullptr) {
    ember::detail::check_extent(where, "the dense gradient", 0, emb.vocab_size(), (*dense).rows(),
                                "the table's vocab_size");
    ember::detail::check_extent(where, "the dense gradient", 1, emb.d_model(), (*dense).cols(),
                                "the table's d_model");
  }
}

/// Validates a step (check_step + the state's row width `state_width`, and with `check_finite` a
/// scan of both gradients for NaN/inf) and returns the prepared input; the state is then bound to
/// the table's current shape (following a resize). Nothing is written if it throws.
template <class T>
StepInput<T> prepare_step(const char* where, const Embedding<T>& emb, RowState<T>* state,
                          Index state_width, const SparseRowGrad<T>* sparse,
                          const Eigen::Ref<const RowMatrix<T>>* dense, bool check_finite = false) {
  check_step(where, emb, sparse, dense);
  if (state != nullptr) state->check_table(where, state_width);
  if (check_finite) {  // the optimizer's opt-in scan: a NaN is reported, never applied
    if (sparse != nullptr) ember::check_finite(*sparse, std::string(where) + ": sparse gradient");
    if (dense != nullptr) ember::check_finite(*dense, std::string(where) + ": dense gradient");
  }
  StepInput<T> in;
  in.sparse = sparse;
  if (dense != nullptr) {
    in.dense = (*dense).data();
    in.dense_stride = (*dense).outerStride();
  }
  in.skip_row = emb.padding_idx() ? *emb.padding_idx() : Index{-1};
  if (state != nullptr) state->follow_table(emb.vocab_size(), state_width);
  return in;
}

/// Calls f(row, sparse_row_or_null, dense_row_or_null) for every row the step updates, in
/// ascending row order: the sparse gradient's rows, or all rows when a dense gradient is given.
/// The padding row is skipped.
template <class T, class F>
void for_each_row(const StepInput<T>& in, Index vocab, F&& f) {
  if (in.dense == nullptr) {
    if (in.sparse == nullptr) return;
    const auto rows = in.sparse->rows();
    const auto& values = in.sparse->values();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const auto row = static_cast<Index>(rows[k]);
      if (row == in.skip_row) continue;
      f(row, values.row(static_cast<Index>(k)).data(), static_cast<const T*>(nullptr));
    }
    return;
  }
  std::span<const TokenId> rows;
  const T* values = nullptr;
  Index values_stride = 0;
  if (in.sparse != nullptr && !in.sparse->empty()) {
    rows = in.sparse->rows();
    values = in.sparse->values().data();
    values_stride = in.sparse->values().cols();
  }
  std::size_t k = 0;
  for (Index row = 0; row < vocab; ++row) {
    const T* s = nullptr;
    if (k < rows.size() && static_cast<Index>(rows[k]) == row) {
      s = values + static_cast<Index>(k) * values_stride;
      ++k;
    }
    if (row == in.skip_row) continue;
    f(row, s, in.dense + row * in.dense_stride);
  }
}

/// g = sparse + dense (either may be null: then the other alone, or zeros), written into `out`.
/// The sum is formed as dense + sparse, the order SparseRowGrad::add_to uses, so a step on
/// (sparse, dense) equals the step on the combined dense gradient bit for bit.
template <class T>
void combine(const T* sparse, const T* dense, Index d, T* out) {
  Eigen::Map<RowVector<T>> g(out, d);
  if (sparse != nullptr && dense != nullptr) {
    g = Eigen::Map<const RowVector<T>>(dense, d) + Eigen::Map<const RowVector<T>>(sparse, d);
  } else if (sparse != nullptr) {
    g = Eigen::Map<const RowVector<T>>(sparse, d);
  } else if (dense != nullptr) {
    g = Eigen::Map<const RowVector<T>>(dense, d);
  } else {
    g.setZero();
  }
}

/// Throws ValueError unless lr is finite and > 0.
inline void check_lr(const char* where, double lr) {
  ember::detail::check_positive_finite(where, "lr", lr);
}

}  // namespace detail

/// The part every row-wise optimizer shares: the three step() forms, the step count and the
/// per-row state. `Derived` implements
/// `void run(Embedding<T>&, const SparseRowGrad<T>*, const Eigen::Ref<const RowMatrix<T>>*)`,
/// which validates (through prepare_step) before it writes anything.
template <class Derived, class T>
class RowOptimizer {
 public:
  /// Updates the rows of a sparse gradient; rows absent from it are left exactly as they were.
  /// Throws:  StateError if emb is frozen; ShapeError if grad is bound to another table shape.
  ///          Nothing changes (not even the step count) when it throws.
  /// Complexity: O(k·d) for k gradient rows (plus a one-off O(V) int32 slot map with state).
  void step(Embedding<T>& emb, const SparseRowGrad<T>& grad) { self().run(emb, &grad, nullptr); }

  /// Updates every row with dense + sparse: the tied case (sparse input part + dense logits part)
  /// in one call. Equals step(emb, D) with D = dense + grad.to_dense(), bit for bit.
  /// Throws:  as step(emb, grad), and ShapeError if dense is not vocab_size x d_model.
  /// Complexity: O(V·d).
  void step(Embedding<T>& emb, const SparseRowGrad<T>& grad,
            const Eigen::Ref<const RowMatrix<T>>& dense) {
    self().run(emb, &grad, &dense);
  }

  /// Updates every row with a dense vocab_size x d_model gradient.
  /// Throws:  StateError if frozen; ShapeError on a shape mismatch. Nothing changes then.
  void step(Embedding<T>& emb, const Eigen::Ref<const RowMatrix<T>>& dense) {
    self().run(emb, nullptr, &dense);
  }

  /// Number of completed step() calls (Adam's global t).
  [[nodiscard]] std::int64_t step_count() const noexcept { return steps_; }
  /// Rows holding optimizer state.
  [[nodiscard]] Index state_rows() const noexcept { return state_.size(); }
  /// Bytes of optimizer state.
  [[nodiscard]] std::size_t state_bytes() const noexcept { return state_.bytes(); }
  /// Forgets all per-row state and the step count.
  void reset() noexcept {
    state_.clear();
    steps_ = 0;
  }

 protected:
  RowOptimizer(int planes, bool per_row_steps) : state_(planes, per_row_steps) {}

  detail::RowState<T> state_;
  RowVector<T> scratch_;  ///< one combined gradient row
  std::int64_t steps_ = 0;

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
};


}  // namespace ember::inline EMBER_ISA::optim
