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
#include "ember/detail/scatter.hpp"
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
  /// Complexity: O(n + u log u + n·d) for u distinct ids, plus O(k·d) to move the k stored rows
  /// when some id is new; threads split the distinct rows.
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

  /// grad[ids[i]] += scale * coef[i] * src.row(src_rows[i]) for each i: accumulate with the
  /// gradient rows gathered from `src` on the fly instead of materialised as an n x d matrix
  /// (EmbeddingBag's backward: src = the bags' output gradients, src_rows[i] = the bag of id i,
  /// coef[i] = its sample weight or 1 / bag size). Gives the same bits as accumulate(ids, G,
  /// scale, ...) with G.row(i) = coef[i] * src.row(src_rows[i]): each product is rounded on its
  /// own, then each row's products are summed in position order.
  ///
  /// Shapes:  ids[n], src[m, d] with d == d_model(), src_rows[n] in [0, m), coef[n] or empty (= 1).
  /// Throws:  IndexError if some id is outside [0, vocab_size) or some src_rows[i] outside
  ///          [0, m); ShapeError if src_rows or a non-empty coef has not n entries, src has not
  ///          d_model() columns or (vocab_size, d) differs from the bound shape. Nothing changes
  ///          when it throws.
  /// Complexity: as accumulate, O(n + u log u + n·d), with O(n + m·d) memory read instead of
  /// O(n·d) written and read back; threads split the distinct rows.
  /// `where` names the public call in error messages (e.g. "EmbeddingBag::backward").
  template <IdRange R, IdRange S>
  void accumulate_indirect(const R& ids, const Eigen::Ref<const RowMatrix<T>>& src,
                           const S& src_rows, std::span<const T> coef, T scale, Index vocab_size,
                           AccumulateOptions options = {},
                           const char* where = "SparseRowGrad::accumulate_indirect") {
    const auto span = detail::as_id_span(ids);
    const auto from = detail::as_id_span(src_rows);
    const auto n = static_cast<Index>(span.size());
    check_shape(where, vocab_size, src.cols());
    detail::check_extent(where, "src_rows", 0, n, static_cast<Index>(from.size()),
                         "the number of ids");
    if (!coef.empty()) {
      detail::check_extent(where, "coef", 0, n, static_cast<Index>(coef.size()),
                           "the number of ids");
    }
    detail::check_ids(span, vocab_size, where);
    for (Index i = 0; i < n; ++i) {
      const auto r = from[static_cast<std::size_t>(i)];
      if (std::cmp_less(r, 0) || std::cmp_greater_equal(r, src.rows())) [[unlikely]] {
        const auto value = static_cast<std::int64_t>(r);
        throw IndexError(std::string(where) + ": src_rows[" + std::to_string(i) +
                             "] = " + std::to_string(value) + " is outside [0, " +
                             std::to_string(src.rows()) + ")",
                         i, value, src.rows());
      }
    }
    bind(vocab_size, src.cols());
    accumulate_indirect_unchecked(span, detail::const_table(src), from.data(),
                                  coef.empty() ? nullptr : coef.data(), scale, options);
  }

  /// grad[ids[i]] += scale * (what `rows` says position i contributes). Internal: for ember's own
  /// kernels, not the user API (users call accumulate / accumulate_indirect). `rows` is a row
  /// policy of detail/scatter.hpp (EmbeddingBag's max backward passes detail::MaxBagRows) whose
  /// contribution(i, scratch) returns d values for every i < n: a precondition on the caller,
  /// which this call cannot check. Same grouping, order of sums, threads and strong guarantee
  /// as accumulate.
  ///
  /// Throws:  IndexError if some id is outside [0, vocab_size); ShapeError if (vocab_size, d)
  ///          differs from the bound shape. Nothing changes when it throws.
  /// Complexity: as accumulate, O(n + u log u + n·d) plus the policy's own work per position.
  template <class Id, class Rows>
  void accumulate_rows_of(std::span<const Id> ids, const Rows& rows, Index d, T scale,
                          Index vocab_size, AccumulateOptions options = {},
                          const char* where = "SparseRowGrad::accumulate_rows_of") {
    check_shape(where, vocab_size, d);
    detail::check_ids(ids, vocab_size, where);
    bind(vocab_size, d);
    accumulate_rows(ids, rows, true, scale, options);
  }

  /// Accumulate without validation. Precondition (checked by the public callers, e.g.
  /// Embedding::backward): the gradient is bound to (V, d), ids are in [0, V), grad_rows is n x d.
  template <class Id>
  void accumulate_unchecked(std::span<const Id> ids, detail::ConstTableRef<T> grad_rows, T scale,
                            AccumulateOptions options = {}) {
    EMBER_ASSERT(grad_rows.rows == static_cast<Index>(ids.size()) && grad_rows.cols == d_model_);
    accumulate_rows(ids, detail::DirectRows<T>{grad_rows}, false, scale, options);
  }

  /// accumulate_indirect without validation. Precondition (checked by accumulate_indirect): the
  /// gradient is bound to (V, d), ids are in [0, V), src is m x d, src_rows[n] are in [0, m),
  /// coef is null or has n entries.
  template <class Id, class SrcId>
  void accumulate_indirect_unchecked(std::span<const Id> ids, detail::ConstTableRef<T> src,
                                     const SrcId* src_rows, const T* coef, T scale,
                                     AccumulateOptions options = {}) {
    EMBER_ASSERT(src.cols == d_model_);
    accumulate_rows(ids, detail::GatheredRows<T, SrcId>{src, src_rows, coef}, coef != nullptr,
                    scale, options);
  }

 private:
  // The one accumulation kernel: `rows` says what position p contributes (its own row of an
  // n x d matrix, or a gathered and scaled one); `needs_scratch` if it writes a product per row.
  template <class Id, class Rows>
  void accumulate_rows(std::span<const Id> ids, const Rows& rows, bool needs_scratch, T scale,
                       AccumulateOptions options) {
    const auto n = static_cast<Index>(ids.size());
    if (n == 0) return;
    // Distinct ids (ascending) and each one's positions (ascending), without sorting positions.
    grouper_.group(ids, vocab_size_, options.skip_row);
    const auto batch_rows = grouper_.rows();
    if (batch_rows.empty()) return;
    const auto u = static_cast<Index>(batch_rows.size());
    const Index d = d_model_;
    // All scratch is sized before grow_to_include changes the layout, so an allocation failure
    // leaves the gradient as it was.
    batch_slots_.resize(batch_rows.size());
    batch_fresh_.resize(batch_rows.size());
    const int threads = detail::kernel_threads(n * d);
    sums_.resize(threads, d);
    if (needs_scratch) products_.resize(threads, d);
    grow_to_include(batch_rows, batch_slots_, batch_fresh_.data());

    const bool freq = options.scale_grad_by_freq;
    detail::parallel_rows(u, n * d, [&](Index begin, Index end, int worker) {
      T* sum = sums_.row(worker).data();
      T* product = needs_scratch ? products_.row(worker).data() : nullptr;
      for (Index j = begin; j < end; ++j) {
        const auto uj = static_cast<std::size_t>(j);
        if (j + 1 < end) {
          // Groups visit the rows in id order, i.e. at random positions: fetch the next ahead.
          detail::prefetch_row(rows.source_row(grouper_.positions(uj + 1)[0]), d, d);
        }
        const auto positions = grouper_.positions(uj);
        const T row_scale = freq ? scale / static_cast<T>(positions.size()) : scale;
        detail::add_row_sum(rows, d, positions, row_scale, batch_fresh_[uj] != 0,
                            values_.row(batch_slots_[uj]).data(), sum, product);
      }
    });
  }

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
  // to their new slots; writes the slot of each incoming row. New rows are zeroed, unless `fresh`
  // is given: then they are left unwritten and fresh[b] says whether incoming[b] is new (the
  // caller assigns those rows instead of adding to them).
  void grow_to_include(std::span<const TokenId> incoming, std::span<Index> slot_of,
                       unsigned char* fresh = nullptr) {
    const std::size_t k = rows_.size();
    merged_.clear();
    merged_.reserve(k + incoming.size());
    std::size_t a = 0;
    std::size_t b = 0;
    while (a < k || b < incoming.size()) {
      if (b == incoming.size() || (a < k && rows_[a] < incoming[b])) {
        merged_.push_back(rows_[a++]);
      } else {
        const bool existing = a < k && rows_[a] == incoming[b];
        if (existing) ++a;
        if (fresh != nullptr) fresh[b] = existing ? 0 : 1;
        slot_of[b] = static_cast<Index>(merged_.size());
        merged_.push_back(incoming[b++]);
      }
    }
    if (merged_.size() == k) return;  // no new rows: slots index the existing layout
    const auto grown_rows = static_cast<Index>(merged_.size());
    if (k == 0) {
      // First rows since clear(): nothing to move.
      values_.resize(grown_rows, d_model_);
      if (fresh == nullptr) values_.setZero();
    } else {
      RowMatrix<T> grown(grown_rows, d_model_);
      std::size_t m = 0;
      for (std::size_t r = 0; r < k; ++r) {
        while (merged_[m] != rows_[r]) {
          if (fresh == nullptr) grown.row(static_cast<Index>(m)).setZero();
          ++m;
        }
        grown.row(static_cast<Index>(m++)) = values_.row(static_cast<Index>(r));
      }
      if (fresh == nullptr) {
        grown.bottomRows(grown_rows - static_cast<Index>(m)).setZero();
      }
      values_ = std::move(grown);
    }
    rows_.swap(merged_);
  }

  Index vocab_size_ = 0;
  Index d_model_ = 0;
  std::vector<TokenId> rows_;
  RowMatrix<T> values_;
  // Scratch reused across calls so steady-state accumulation does not allocate them again.
  detail::RowGrouper grouper_;
  std::vector<Index> batch_slots_;
  std::vector<unsigned char> batch_fresh_;
  RowMatrix<T> sums_;      // one row of running sums per worker thread
  RowMatrix<T> products_;  // one row of coef · src row per worker thread (accumulate_indirect)
  std::vector<TokenId> merged_;
};

}  // namespace ember
