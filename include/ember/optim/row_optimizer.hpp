/// The part every row-wise optimizer of ember::optim shares: the three step() forms over a sparse
/// and/or dense gradient, their validation, the rows they visit, and the per-row state.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ember/check.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/row_norms.hpp"
#include "ember/detail/scatter.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/optim/detail/row_state.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

struct RowOptimizerAccess;

/// The gradient arguments of one step() call, validated.
template <class T>
struct StepInput {
  std::span<const TokenId> rows;  ///< the sparse gradient's rows, ascending (may be none)
  const T* values = nullptr;      ///< their gradients, rows.size() x d row-major
  const T* dense = nullptr;       ///< V x d row-major, or null
  Index dense_stride = 0;         ///< row stride of `dense`
  Index skip_row = -1;            ///< the padding row, or -1
};

/// Validates everything a step on `emb` needs, so the update can then run without throwing:
/// the table is not frozen, the sparse gradient (if any rows) is bound to the table's shape, the
/// dense gradient (if any) is vocab_size x d_model.
template <class T>
void check_step(detail::Where where, const Embedding<T>& emb, const SparseRowGrad<T>* sparse,
                const Eigen::Ref<const RowMatrix<T>>* dense) {
  if (emb.frozen()) {
    throw StateError(detail::message(
        where,
        "the table is frozen (freeze() / from_pretrained(freeze = true)); unfreeze() it to train "
        "it"));
  }
  if (sparse != nullptr && !sparse->empty()) {
    detail::SparseRowGradAccess::check_shape(*sparse, where, emb.vocab_size(), emb.d_model());
  }
  if (dense != nullptr) {
    detail::check_dims(where, "the dense gradient", *dense, emb.vocab_size(),
                       "the table's vocab_size", emb.d_model(), "the table's d_model");
  }
}

/// Validates a step (check_step + the state's row width `state_width`, and with `check_finite` a
/// scan of both gradients for NaN/inf) and returns the prepared input; the state is then bound to
/// the table's current shape (following a resize). Nothing is written if it throws.
template <class T>
StepInput<T> prepare_step(detail::Where where, const Embedding<T>& emb, RowState<T>* state,
                          Index state_width, const SparseRowGrad<T>* sparse,
                          const Eigen::Ref<const RowMatrix<T>>* dense, bool check_finite = false) {
  check_step(where, emb, sparse, dense);
  if (state != nullptr) state->check_table(where, state_width);
  if (check_finite) {  // the optimizer's opt-in scan: a NaN is reported, never applied
    if (sparse != nullptr) detail::check_finite(*sparse, where, "sparse gradient");
    if (dense != nullptr) detail::check_finite(*dense, where, "dense gradient");
  }
  StepInput<T> in;
  if (sparse != nullptr) {
    in.rows = sparse->rows();
    in.values = sparse->values().data();
  }
  if (dense != nullptr) {
    in.dense = (*dense).data();
    in.dense_stride = (*dense).outerStride();
  }
  in.skip_row = emb.padding_idx() ? *emb.padding_idx() : Index{-1};
  if (state != nullptr) state->follow_table(emb.vocab_size(), state_width);
  return in;
}

/// Calls f(row, sparse_row_or_null, dense_row_or_null) for every row the step updates, in
/// ascending row order: the sparse rows, or all rows when a dense gradient is given (rows of
/// width d). The padding row is skipped.
template <class T, class F>
void for_each_row(const StepInput<T>& in, Index vocab, Index d, F&& f) {
  std::size_t k = 0;
  if (in.dense == nullptr) {
    for (; k < in.rows.size(); ++k) {
      const auto row = static_cast<Index>(in.rows[k]);
      if (row != in.skip_row) f(row, in.values + static_cast<Index>(k) * d, in.dense);
    }
    return;
  }
  for (Index row = 0; row < vocab; ++row) {
    const T* s = nullptr;
    if (k < in.rows.size() && static_cast<Index>(in.rows[k]) == row) {
      s = in.values + static_cast<Index>(k++) * d;
    }
    if (row != in.skip_row) f(row, s, in.dense + row * in.dense_stride);
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
inline void check_lr(detail::Where where, double lr) {
  detail::check_positive_finite(where, "lr", lr);
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::optim {

/// The part every row-wise optimizer shares: the hyper-parameters, the step() forms, the fused
/// backward + step, the step count and the per-row state. `Derived` provides its `name`
/// ("Adam"), a static `Options validated(const Options&)` that throws ValueError for a bad
/// hyper-parameter, `Index state_width(Index d) const` (values of state per row and plane; 0 for
/// none), `Step begin_step(std::int64_t t, Index d) const` (the constants of step t) and
/// `void update_row(const Step&, T* w, T* g, Index slot, bool fresh, Index d)`: the rule applied
/// to one row w with its gradient g (scratch the rule may change) and its state slot (-1 without
/// state; `fresh` on the row's first update). Both paths run that one function, so they give the
/// same bits.
template <class Derived, class T, class Options>
class RowOptimizer {
 public:
  /// The hyper-parameters.
  [[nodiscard]] const Options& options() const noexcept { return options_; }
  /// Changes the learning rate (schedules). Throws ValueError unless finite and > 0.
  void set_lr(double lr) {
    detail::check_lr({Derived::name, "set_lr"}, lr);
    options_.lr = lr;
  }

  /// Updates the rows of a sparse gradient; rows absent from it are left exactly as they were.
  /// Throws:  StateError if emb is frozen; ShapeError if grad is bound to another table shape.
  ///          Nothing changes (not even the step count) when it throws.
  /// Complexity: O(k·d) for k gradient rows (plus a one-off O(V) int32 slot map with state).
  void step(Embedding<T>& emb, const SparseRowGrad<T>& grad) { run(emb, &grad, nullptr); }

  /// Updates every row with dense + sparse: the tied case (sparse input part + dense logits part)
  /// in one call. Equals step(emb, D) with D = dense + grad.to_dense(), bit for bit.
  /// Throws:  as step(emb, grad), and ShapeError if dense is not vocab_size x d_model.
  /// Complexity: O(V·d).
  void step(Embedding<T>& emb, const SparseRowGrad<T>& grad,
            const Eigen::Ref<const RowMatrix<T>>& dense) {
    run(emb, &grad, &dense);
  }

  /// Updates every row with a dense vocab_size x d_model gradient.
  /// Throws:  StateError if frozen; ShapeError on a shape mismatch. Nothing changes then.
  void step(Embedding<T>& emb, const Eigen::Ref<const RowMatrix<T>>& dense) {
    run(emb, nullptr, &dense);
  }

  /// The backward of emb.forward(ids) fused with a step: each distinct row's gradient is summed
  /// and the row updated at once, with no SparseRowGrad written. Bit-identical to
  /// `emb.backward(ids, grad_out, g); step(emb, g)` with an empty g, for any thread count, padding
  /// row and scale_grad_by_freq (with `fused` left at its defaults).
  ///
  /// Shapes:  ids[n], grad_out[n, d].
  /// Throws:  StateError if emb is frozen; IndexError for an id outside [0, vocab_size());
  ///          ShapeError if grad_out is not n x d; ValueError for a negative or non-finite
  ///          option, or (with options().check_finite) a non-finite grad_out element (a sum that
  ///          overflows is not detected: the unfused path checks the sums). Nothing changes then.
  /// Complexity: O(n + u log u + n·d + u·d) for u distinct ids; threads split the rows.
  template <class R>
  void backward_step(Embedding<T>& emb, const R& ids,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     const FusedStepOptions& fused = {}) {
    fused_backward_step(emb, ids, grad_out, nullptr, fused);
  }

  /// The tied case fused: the backward of emb.forward(ids) plus a dense gradient of the whole
  /// table (the tied logits' part), every row updated in one pass. Bit-identical to
  /// `emb.backward(ids, grad_out, g); step(emb, g, dense)` with an empty g.
  /// Shapes:  ids[n], grad_out[n, d], dense[V, d].
  /// Throws:  as backward_step(emb, ids, grad_out), and ShapeError if dense is not V x d.
  /// Complexity: O(V·d + n·d).
  template <class R>
  void backward_step(Embedding<T>& emb, const R& ids,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     const Eigen::Ref<const RowMatrix<T>>& dense,
                     const FusedStepOptions& fused = {}) {
    fused_backward_step(emb, ids, grad_out, &dense, fused);
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
  /// Forgets the per-row state of `rows` (rows without state, or outside the table, are
  /// ignored): each starts over as a row never updated, while the step count and every other
  /// row keep theirs. For tables whose rows change owner (a KeyedEmbedding reusing the row of an
  /// evicted key). Complexity: O(rows.size() · state per row).
  void reset_rows(std::span<const TokenId> rows) {
    for (const TokenId r : rows) state_.erase(static_cast<Index>(r));
  }

 protected:
  RowOptimizer(const Options& options, int planes, bool per_row_steps)
      : options_(Derived::validated(options)), state_(planes, per_row_steps) {}

  Options options_;
  detail::RowState<T> state_;
  std::int64_t steps_ = 0;

 private:
  friend struct detail::FusedStepAccess;
  friend struct detail::RowOptimizerAccess;

  // Values of state per row and plane for a table of width d (for RowOptimizerAccess).
  [[nodiscard]] Index state_width_of(Index d) const noexcept { return self().state_width(d); }

  // Both backward_step overloads: checks ids and grad_out at the door, then the fused pass
  // (dense: the tied logits' gradient, or null).
  template <class R>
  void fused_backward_step(Embedding<T>& emb, const R& ids,
                           const Eigen::Ref<const RowMatrix<T>>& grad_out,
                           const Eigen::Ref<const RowMatrix<T>>* dense,
                           const FusedStepOptions& fused) {
    detail::with_ids(ids, [&](auto span) {
      const detail::Where w{Derived::name, "backward_step"};
      detail::check_backward_grad_out(w, static_cast<Index>(span.size()), emb.d_model(),
                                      grad_out.rows(), grad_out.cols());
      detail::check_ids(span, emb.vocab_size(), w);
      const detail::DirectRows<T> rows{detail::const_table(grad_out)};
      const detail::FusedStepChecks<T> checks{&grad_out, dense, &fused, w};
      fused_check(emb, checks);
      fused_apply(emb, detail::fused_rows(span, rows, false, emb.scale(), emb.accumulate_options()),
                  dense, fused);
    });
  }

  /// Validates a fused step on `emb` before anything changes: the table is not frozen, the
  /// dense gradient (if any) is V x d, the state fits the table's width, the options are finite
  /// and >= 0, and with options().check_finite the caller's gradient input (if given) and the
  /// dense gradient hold no NaN or infinity. Throws as backward_step.
  void fused_check(const Embedding<T>& emb, const detail::FusedStepChecks<T>& c) const {
    detail::check_non_negative(c.where, "max_gradient", c.fused->max_gradient);
    detail::check_non_negative(c.where, "max_norm", c.fused->max_norm);
    detail::check_step(c.where, emb, static_cast<const SparseRowGrad<T>*>(nullptr), c.dense);
    const Index width = self().state_width(emb.d_model());
    if (width > 0) state_.check_table(c.where, width);
    if (options_.check_finite) {
      if (c.checked != nullptr) detail::check_finite(*c.checked, c.where, "grad_out");
      if (c.dense != nullptr) detail::check_finite(*c.dense, c.where, "dense gradient");
    }
  }

  /// The update of a fused step whose fused_check passed: the rows of `in` (see FusedStepRows),
  /// plus `dense` (V x d, or null), clamped and renormed as `fused` says. Throws nothing but
  /// std::bad_alloc.
  template <class Id, class Rows>
  void fused_apply(Embedding<T>& emb, const detail::FusedStepRows<T, Id, Rows>& in_rows,
                   const Eigen::Ref<const RowMatrix<T>>* dense, const FusedStepOptions& fused) {
    const std::span<const Id> ids = in_rows.ids;
    const Rows& rows = *in_rows.rows;
    const bool needs_scratch = in_rows.needs_scratch;
    const T scale = in_rows.scale;
    const AccumulateOptions acc = in_rows.options;
    const Index d = emb.d_model();
    const Index v = emb.vocab_size();
    const Index width = self().state_width(d);
    if (width > 0) state_.follow_table(v, width);
    detail::StepInput<T> in;
    if (dense != nullptr) {
      in.dense = dense->data();
      in.dense_stride = dense->outerStride();
    }
    in.skip_row = emb.padding_idx() ? *emb.padding_idx() : Index{-1};
    const auto step = self().begin_step(steps_ + 1, d);
    auto table = emb.weight();
    const T clip = static_cast<T>(fused.max_gradient);
    // One row's update, shared by the sparse and the tied forms: g is the summed gradient
    // (clamped if asked), w the row.
    const auto apply = [&](Index row, T* g, Index slot, bool fresh) {
      if (clip > T(0)) {
        for (Index c = 0; c < d; ++c) g[c] = std::min(std::max(g[c], -clip), clip);
      }
      T* wr = table.row(row).data();
      self().update_row(step, wr, g, slot, fresh, d);
      if (fused.max_norm > 0.0) renorm(wr, d, fused.max_norm);
    };
    // Slots are made on the calling thread in ascending row order, as step() makes them.
    scratch_.slots.clear();
    scratch_.fresh.clear();
    std::span<const TokenId> batch;
    // Rows of lead for the prefetches of the rows an update touches at random.
    const Index lead = detail::prefetch_distance(d * static_cast<Index>(sizeof(T)));
    const auto make_slots = [&](std::span<const TokenId> batch_rows) {
      batch = batch_rows;
      const std::size_t ahead = static_cast<std::size_t>(lead) * 4;  // a slot entry is 4 bytes
      for (std::size_t k = 0; k < batch_rows.size(); ++k) {
        if (width > 0 && k + ahead < batch_rows.size())
          state_.prefetch_slot(static_cast<Index>(batch_rows[k + ahead]));
        add_slot(static_cast<Index>(batch_rows[k]), width);
      }
    };
    const int threads = detail::kernel_threads(static_cast<Index>(ids.size()) * d);
    if (dense == nullptr) {
      T* const* g_rows = gradient_rows(threads, d);
      detail::for_each_grouped_row(
          v, ids, rows, needs_scratch, d, scale, acc.scale_grad_by_freq, acc.skip_row, make_slots,
          [&](Index j, std::span<const Index> positions, T row_scale, T* sum, T* product,
              int worker) {
            T* g = g_rows[worker];
            const auto uj = static_cast<std::size_t>(j);
            // The table and state rows of the rows to come are random too: ask for them
            // `lead` rows ahead, while this row's gradient is summed and its update runs.
            const auto next = uj + static_cast<std::size_t>(lead);
            if (next < batch.size())
              prefetch_update(table, batch[next], scratch_.slots[next], width);
            detail::add_row_sum(rows, d, positions, row_scale, true, g, sum, product);
            apply(static_cast<Index>(batch[uj]), g, scratch_.slots[uj], scratch_.fresh[uj] != 0);
          });
    } else {
      // Tied: every row moves. The batch rows' sums are kept (k x d) and added to their dense rows.
      scratch_.batch_rows.clear();
      detail::for_each_grouped_row(
          v, ids, rows, needs_scratch, d, scale, acc.scale_grad_by_freq, acc.skip_row,
          [&](std::span<const TokenId> batch_rows) {
            scratch_.batch_rows.assign(batch_rows.begin(), batch_rows.end());
            scratch_.sums.resize(static_cast<Index>(batch_rows.size()), d);
          },
          [&](Index j, std::span<const Index> positions, T row_scale, T* sum, T* product, int) {
            detail::add_row_sum(rows, d, positions, row_scale, true, scratch_.sums.row(j).data(),
                                sum, product);
          });
      for (Index row = 0; row < v; ++row) {
        if (row != in.skip_row) add_slot(row, width);
      }
      T* g = *gradient_rows(1, d);
      in.rows = scratch_.batch_rows;
      in.values = scratch_.sums.data();
      std::size_t slot = 0;  // serial: O(V·d) like step(emb, grad, dense)
      detail::for_each_row(in, v, d, [&](Index row, const T* s, const T* g_dense) {
        detail::combine(s, g_dense, d, g);
        apply(row, g, scratch_.slots[slot], scratch_.fresh[slot] != 0);
        ++slot;
      });
    }
    steps_ += 1;
  }

  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  /// The unfused step: the gradient rows the step visits (sparse, dense or both, ascending),
  /// each combined into one row and handed to the rule.
  void run(Embedding<T>& emb, const SparseRowGrad<T>* sparse,
           const Eigen::Ref<const RowMatrix<T>>* dense) {
    const detail::Where where{Derived::name, "step"};
    const Index d = emb.d_model();
    const Index width = self().state_width(d);
    const auto in = detail::prepare_step(where, emb, width > 0 ? &state_ : nullptr, width, sparse,
                                         dense, options_.check_finite);
    const auto step = self().begin_step(steps_ + 1, d);
    T* g = *gradient_rows(1, d);
    auto table = emb.weight();
    detail::for_each_row(in, emb.vocab_size(), d, [&](Index row, const T* s, const T* g_dense) {
      detail::combine(s, g_dense, d, g);
      const auto [slot, fresh] = ensure_slot(row, width);
      self().update_row(step, table.row(row).data(), g, slot, fresh, d);
    });
    steps_ += 1;
  }

  // The state slot of `row` (made if new) and whether it is new; -1 without state (width 0).
  std::pair<Index, bool> ensure_slot(Index row, Index width) {
    if (width == 0) return {-1, false};
    const Index before = state_.size();
    const Index slot = state_.ensure(row);
    return {slot, state_.size() > before};
  }
  // ensure_slot(row, width), appended to scratch_.slots / scratch_.fresh.
  void add_slot(Index row, Index width) {
    const auto [slot, fresh] = ensure_slot(row, width);
    scratch_.slots.push_back(slot);
    scratch_.fresh.push_back(fresh ? 1 : 0);
  }

  T* const* gradient_rows(int threads, Index d) {
    if (scratch_.g.size() < static_cast<std::size_t>(threads) ||
        (!scratch_.g.empty() && scratch_.g[0].size() != d)) {
      scratch_.g.assign(static_cast<std::size_t>(std::max(threads, 1)), RowVector<T>(d));
      scratch_.g_rows.clear();
      for (auto& row : scratch_.g) scratch_.g_rows.push_back(row.data());
    }
    return scratch_.g_rows.data();
  }

  // Prefetches the rows an update of `row` (state slot `slot`) reads and writes.
  template <class Table>
  void prefetch_update(const Table& table, TokenId row, Index slot, Index width) const noexcept {
    const Index d = table.cols();
    const Index bytes = d * static_cast<Index>(sizeof(T));
    detail::prefetch_row(table.row(static_cast<Index>(row)).data(), bytes, bytes);
    if (slot < 0) return;
    const Index state_bytes = width * static_cast<Index>(sizeof(T));
    for (int p = 0; p < state_.planes(); ++p)
      detail::prefetch_row(state_.data(p, slot), state_bytes, state_bytes);
  }

  // PyTorch's renorm of one row: w *= max_norm / (norm + 1e-7) when its L2 norm (in double, in
  // detail::ordered_sum's order) exceeds max_norm.
  static void renorm(T* w, Index d, double max_norm) {
    const double norm = detail::row_norm(w, d, 2.0);
    if (norm <= max_norm) return;
    const auto f = static_cast<T>(max_norm / (norm + 1e-7));
    for (Index c = 0; c < d; ++c) w[c] *= f;
  }

  // The scratch of a step, kept for the next one. A copy of the optimizer starts without it: the
  // copied pointers would name the original's rows, which the original (another table's
  // optimizer, maybe on another thread) goes on writing, or frees.
  struct Scratch {
    // One gradient row per worker, each its own allocation.
    std::vector<RowVector<T>> g;
    std::vector<T*> g_rows;
    RowMatrix<T> sums;  // the batch rows' sums of a tied fused step
    std::vector<Index> slots;
    std::vector<unsigned char> fresh;
    std::vector<TokenId> batch_rows;

    Scratch() = default;
    Scratch(const Scratch& /*other*/) noexcept {}
    Scratch& operator=(const Scratch& /*other*/) noexcept { return *this; }
    Scratch(Scratch&&) noexcept = default;
    Scratch& operator=(Scratch&&) noexcept = default;
    ~Scratch() = default;
  };
  Scratch scratch_;
};

}  // namespace ember::inline EMBER_ISA::optim
