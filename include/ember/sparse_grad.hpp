/// SparseRowGrad<T>: the gradient of an embedding table kept only for the rows that were looked
/// up, accumulated deterministically whatever the thread count.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember {

/// The rows of dL/dW touched so far and their accumulated gradients: a row-sparse V x d matrix.
///
/// Layout: rows() is sorted ascending and unique; values().row(k) is the gradient of row rows()[k].
/// Memory is O(k·d + n) for k touched rows and n ids per call, never O(V·d).
///
/// Determinism: each row's contributions from one call are summed in the order of their positions
/// in the batch, then scaled and added to the row's running value. Parallel loops split the unique
/// rows, never a sum, so the bits are identical for any thread count; and because a call adds one
/// finished sum per row, two calls give the same bits in either order.
///
/// A default-constructed gradient binds to the table shape (vocab_size, d_model) of the first
/// accumulate call; later calls with another shape throw ShapeError.
///
/// Thread safety: const members may be called concurrently; accumulate/merge/clear may not.
/// Per-thread gradients can be combined with merge().
template <class T>
class SparseRowGrad {
  static_assert(Scalar<T>, "ember::SparseRowGrad<T>: T must be float or double");

 public:
  /// An empty gradient, bound to a table shape by its first accumulate call.
  SparseRowGrad() = default;

  /// An empty gradient for a vocab_size x d_model table.
  /// Throws: ShapeError if either size is not positive.
  SparseRowGrad(Index vocab_size, Index d_model) : vocab_size_(vocab_size), d_model_(d_model) {
    detail::check_positive_size("SparseRowGrad", "vocab_size", vocab_size);
    detail::check_positive_size("SparseRowGrad", "d_model", d_model);
    values_.resize(0, d_model);
  }

  /// Touched row ids, sorted ascending, unique.
  [[nodiscard]] std::span<const TokenId> rows() const noexcept { return rows_; }
  /// rows().size() x d_model gradients; values().row(k) belongs to rows()[k].
  [[nodiscard]] const RowMatrix<T>& values() const noexcept { return values_; }
  /// Number of touched rows.
  [[nodiscard]] Index size() const noexcept { return static_cast<Index>(rows_.size()); }
  /// True when no row has been touched.
  [[nodiscard]] bool empty() const noexcept { return rows_.empty(); }
  /// The table height this gradient is bound to (0 while unbound).
  [[nodiscard]] Index vocab_size() const noexcept { return vocab_size_; }
  /// The table width this gradient is bound to (0 while unbound).
  [[nodiscard]] Index d_model() const noexcept { return d_model_; }

  /// Forgets every row, keeping the bound shape.
  void clear() noexcept {
    rows_.clear();
    values_.resize(0, d_model_);
  }

  /// Options of one accumulate call (PyTorch's nn.Embedding flags, on the sparse path).
  struct AccumulateOptions {
    /// Multiply each row's summed contribution by 1 / (number of times its id occurs in this
    /// call), as PyTorch's scale_grad_by_freq (which PyTorch refuses on sparse gradients).
    bool scale_grad_by_freq = false;
    /// Positions whose id equals this row contribute nothing and the row is not created
    /// (padding_idx); -1 disables it.
    TokenId skip_row = -1;
  };

  /// grad[ids[i]] += scale * grad_rows[i] for each i (repeated ids accumulate).
  ///
  /// Shapes:  ids[n], grad_rows[n, d] with d == d_model().
  /// Throws:  IndexError if some id is outside [0, vocab_size); ShapeError if grad_rows is not
  ///          n x d or (vocab_size, d) differs from the bound shape. Nothing changes when it
  ///          throws.
  /// Complexity: O(n log n + (k + u)·d) for u new rows; threads split the unique rows.
  /// `where` names the public call in error messages (e.g. "Embedding::backward").
  template <IdRange R>
  void accumulate(const R& ids, const Eigen::Ref<const RowMatrix<T>>& grad_rows, T scale,
                  Index vocab_size, AccumulateOptions options = {},
                  const char* where = "SparseRowGrad::accumulate") {
    const auto span = detail::as_id_span(ids);
    check_shape(where, vocab_size, grad_rows.cols());
    detail::check_extent(where, "grad_rows", 0, static_cast<Index>(span.size()), grad_rows.rows(),
                         "the number of ids");
    detail::check_ids(span, vocab_size, where);
    bind(vocab_size, grad_rows.cols());
    accumulate_unchecked(span, detail::const_table(grad_rows), scale, options);
  }

  /// this += other, row by row (merge of sorted row lists).
  /// Throws: ShapeError if the two are bound to different table shapes; nothing changes then.
  void merge(const SparseRowGrad& other) {
    if (other.vocab_size_ == 0) return;
    check_shape("SparseRowGrad::merge", other.vocab_size_, other.d_model_);
    bind(other.vocab_size_, other.d_model_);
    std::vector<Index> slot_of_other(other.rows_.size());
    grow_to_include(other.rows_, slot_of_other);
    const auto k = static_cast<Index>(other.rows_.size());
    for (Index j = 0; j < k; ++j)
      values_.row(slot_of_other[static_cast<std::size_t>(j)]) += other.values_.row(j);
  }

  /// Multiplies every stored gradient by `factor` (gradient clipping, loss scaling).
  void scale_by(T factor) noexcept { values_ *= factor; }

  /// dense += this, for a dense vocab_size x d_model gradient (e.g. the tied logits' part).
  /// Throws: ShapeError if dense is not vocab_size() x d_model(); dense is untouched then.
  void add_to(Eigen::Ref<RowMatrix<T>> dense) const {
    constexpr const char* where = "SparseRowGrad::add_to";
    if (vocab_size_ == 0) return;
    detail::check_extent(where, "dense", 0, vocab_size_, dense.rows(), "vocab_size");
    detail::check_extent(where, "dense", 1, d_model_, dense.cols(), "d_model");
    const auto k = static_cast<Index>(rows_.size());
    for (Index j = 0; j < k; ++j)
      dense.row(static_cast<Index>(rows_[static_cast<std::size_t>(j)])) += values_.row(j);
  }

  /// The gradient as a dense vocab_size x d_model matrix (zeros for untouched rows). O(V·d):
  /// for tests and small tables.
  [[nodiscard]] RowMatrix<T> to_dense() const {
    RowMatrix<T> dense = RowMatrix<T>::Zero(vocab_size_, d_model_);
    add_to(dense);
    return dense;
  }

  /// Accumulate without validation. Precondition (checked by the public callers, e.g.
  /// Embedding::backward): the gradient is bound to (V, d), ids are in [0, V), grad_rows is n x d.
  template <class Id>
  void accumulate_unchecked(std::span<const Id> ids, detail::ConstTableRef<T> grad_rows, T scale,
                            AccumulateOptions options = {}) {
    const auto n = static_cast<Index>(ids.size());
    EMBER_ASSERT(grad_rows.rows == n && grad_rows.cols == d_model_);
    if (n == 0) return;
    // Sort (id, position) pairs: groups each id's positions in ascending order.
    order_.resize(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) {
      order_[static_cast<std::size_t>(i)] = {static_cast<TokenId>(ids[static_cast<std::size_t>(i)]),
                                             i};
    }
    std::sort(order_.begin(), order_.end());
    // One segment [begin, end) of `order_` per distinct id; the skipped row gets none.
    batch_rows_.clear();
    segments_.clear();
    for (Index i = 0; i < n;) {
      const TokenId id = order_[static_cast<std::size_t>(i)].first;
      Index end = i + 1;
      while (end < n && order_[static_cast<std::size_t>(end)].first == id) ++end;
      if (id != options.skip_row) {
        batch_rows_.push_back(id);
        segments_.emplace_back(i, end);
      }
      i = end;
    }
    if (batch_rows_.empty()) return;
    batch_slots_.resize(batch_rows_.size());
    grow_to_include(batch_rows_, batch_slots_);

    const auto u = static_cast<Index>(batch_rows_.size());
    const Index d = d_model_;
    const auto* order = order_.data();
    const auto* segments = segments_.data();
    const auto* slots = batch_slots_.data();
    const bool freq = options.scale_grad_by_freq;
#if EMBER_HAS_OPENMP
#pragma omp parallel if (u >= 64)
#endif
    {
      RowVector<T> sum(d);
#if EMBER_HAS_OPENMP
#pragma omp for schedule(static)
#endif
      for (Index j = 0; j < u; ++j) {
        const auto [begin, end] = segments[j];
        auto dst = values_.row(slots[j]);
        const auto first = Eigen::Map<const RowVector<T>>(grad_rows.row(order[begin].second), d);
        const T row_scale = freq ? scale / static_cast<T>(end - begin) : scale;
        sum = first;
        for (Index p = begin + 1; p < end; ++p) {
          sum += Eigen::Map<const RowVector<T>>(grad_rows.row(order[p].second), d);
        }
        // Scale in its own pass over `sum`, then add: two loops through memory, so no compiler
        // (GCC contracts by default in C++, even at -std=c++20) can fuse them into an FMA whose
        // single rounding would make the result depend on the order of calls.
        sum *= row_scale;
        dst += sum;
      }
    }
  }

 private:
  void check_shape(const char* where, Index vocab_size, Index d_model) const {
    detail::check_positive_size(where, "vocab_size", vocab_size);
    detail::check_positive_size(where, "d_model", d_model);
    if (vocab_size_ != 0) {
      detail::check_extent(where, "the table", 0, vocab_size_, vocab_size,
                           "the gradient's bound vocab_size");
      detail::check_extent(where, "the table", 1, d_model_, d_model,
                           "the gradient's bound d_model");
    }
  }

  void bind(Index vocab_size, Index d_model) {
    if (vocab_size_ == 0) {
      vocab_size_ = vocab_size;
      d_model_ = d_model;
      values_.resize(0, d_model);
    }
  }

  // Makes rows_ the sorted union of rows_ and `incoming` (sorted, unique), moving existing values
  // to their new slots and zeroing new rows; writes the slot of each incoming row.
  void grow_to_include(std::span<const TokenId> incoming, std::span<Index> slot_of) {
    const std::size_t k = rows_.size();
    merged_.clear();
    merged_.reserve(k + incoming.size());
    std::size_t a = 0;
    std::size_t b = 0;
    while (a < k || b < incoming.size()) {
      if (b == incoming.size() || (a < k && rows_[a] < incoming[b])) {
        merged_.push_back(rows_[a++]);
      } else {
        if (a < k && rows_[a] == incoming[b]) ++a;
        slot_of[b] = static_cast<Index>(merged_.size());
        merged_.push_back(incoming[b++]);
      }
    }
    if (merged_.size() == k) return;  // no new rows: slots index the existing layout
    RowMatrix<T> grown = RowMatrix<T>::Zero(static_cast<Index>(merged_.size()), d_model_);
    std::size_t m = 0;
    for (std::size_t r = 0; r < k; ++r) {
      while (merged_[m] != rows_[r]) ++m;
      grown.row(static_cast<Index>(m)) = values_.row(static_cast<Index>(r));
    }
    values_ = std::move(grown);
    rows_.swap(merged_);
  }

  Index vocab_size_ = 0;
  Index d_model_ = 0;
  std::vector<TokenId> rows_;
  RowMatrix<T> values_;
  // Scratch reused across calls so steady-state accumulation does not allocate them again.
  std::vector<std::pair<TokenId, Index>> order_;
  std::vector<TokenId> batch_rows_;
  std::vector<std::pair<Index, Index>> segments_;
  std::vector<Index> batch_slots_;
  std::vector<TokenId> merged_;
};

}  // namespace ember
