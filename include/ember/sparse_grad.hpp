/// SparseRowGrad<T>: the gradient of an embedding table kept only for the rows that were looked
/// up, accumulated deterministically whatever the thread count.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/scatter.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// Options of one accumulation into a SparseRowGrad (PyTorch's nn.Embedding flags, on the sparse
/// path). A trainable table (Embedding) hands its own as accumulate_options().
struct AccumulateOptions {
  /// Multiply each row's summed contribution by 1 / (number of times its id occurs in this
  /// call), as PyTorch's scale_grad_by_freq (which PyTorch refuses on sparse gradients).
  bool scale_grad_by_freq = false;
  /// Positions whose id equals this row contribute nothing and the row is not created
  /// (padding_idx); -1 disables it.
  TokenId skip_row = -1;
};

template <class T>
class SparseRowGrad;

namespace detail {
struct SparseRowGradAccess;
}  // namespace detail

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
/// A gradient is a value: its rows and their values, nothing else (the grouping scratch of the
/// accumulation is kept per thread, see detail/scatter.hpp), so copies are cheap to reason about
/// and two gradients compare by their rows and values.
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
    detail::check_sizes("SparseRowGrad", vocab_size, d_model);
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

  /// The options of an accumulation (also spelled ember::AccumulateOptions).
  using AccumulateOptions = ember::AccumulateOptions;

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
    accumulate_checked(detail::as_id_span(ids), grad_rows, scale, vocab_size, options, where);
  }

  /// this += other, row by row (merge of sorted row lists).
  /// Throws: ShapeError if the two are bound to different table shapes; nothing changes then.
  void merge(const SparseRowGrad& other) {
    if (other.vocab_size_ == 0) return;
    check_shape("SparseRowGrad::merge", other.vocab_size_, other.d_model_);
    bind(other.vocab_size_, other.d_model_);
    std::vector<Index> slot_of_other(other.rows_.size());
    detail::grow_to_include(detail::SparseRowsRef<T>{rows_, values_, d_model_}, other.rows_,
                            std::span<Index>(slot_of_other), nullptr,
                            detail::grad_workspace().merged);
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
    detail::check_dims(where, "dense", dense, vocab_size_, "vocab_size", d_model_, "d_model");
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
        throw IndexError(
            detail::message(where, "src_rows[", i, "] = ", r, " is outside [0, ", src.rows(), ")"),
            i, detail::int64_field(r), src.rows());
      }
    }
    bind(vocab_size, src.cols());
    using SrcId = std::remove_cv_t<std::ranges::range_value_t<S>>;
    const T* c = coef.empty() ? nullptr : coef.data();
    accumulate_rows(span, detail::GatheredRows<T, SrcId>{detail::const_table(src), from.data(), c},
                    c != nullptr, scale, options);
  }

  [[nodiscard]] friend bool operator==(const SparseRowGrad& a, const SparseRowGrad& b) noexcept {
    return a.vocab_size_ == b.vocab_size_ && a.d_model_ == b.d_model_ && a.rows_ == b.rows_ &&
           a.values_.rows() == b.values_.rows() && a.values_.cols() == b.values_.cols() &&
           a.values_ == b.values_;
  }

 private:
  friend struct detail::SparseRowGradAccess;

  template <class Id>
  void accumulate_checked(std::span<const Id> ids, const Eigen::Ref<const RowMatrix<T>>& grad_rows,
                          T scale, Index vocab_size, AccumulateOptions options,
                          detail::Where where) {
    check_shape(where, vocab_size, grad_rows.cols());
    detail::check_extent(where, "grad_rows", 0, static_cast<Index>(ids.size()), grad_rows.rows(),
                         "the number of ids");
    detail::check_ids(ids, vocab_size, where);
    bind(vocab_size, grad_rows.cols());
    accumulate_rows(ids, detail::DirectRows<T>{detail::const_table(grad_rows)}, false, scale,
                    options);
  }

  // Accumulation without validation, through the one kernel of detail/scatter.hpp: `rows` says
  // what position p contributes; `needs_scratch` if it writes a product per row.
  template <class Id, class Rows>
  void accumulate_rows(std::span<const Id> ids, const Rows& rows, bool needs_scratch, T scale,
                       AccumulateOptions options) {
    detail::accumulate_rows(detail::SparseRowsRef<T>{rows_, values_, d_model_}, vocab_size_, ids,
                            rows, needs_scratch, scale, options.scale_grad_by_freq,
                            options.skip_row);
  }

  // Throws ShapeError unless the sizes are positive and the gradient is unbound or bound to
  // vocab_size x d_model: "<where>: the table has 5 rows, expected the gradient's bound vocab_size
  // = 6" (`table` names the table, "table" with `index` >= 0: "table 2 has ...").
  void check_shape(detail::Where where, Index vocab_size, Index d_model,
                   const char* table = "the table", Index index = -1) const {
    detail::check_sizes(where, vocab_size, d_model);
    if (vocab_size_ == 0) return;
    if (vocab_size != vocab_size_ || d_model != d_model_) [[unlikely]] {
      const std::string name = index < 0 ? std::string(table) : detail::text(table, " ", index);
      detail::check_extent(where, name.c_str(), 0, vocab_size_, vocab_size,
                           "the gradient's bound vocab_size");
      detail::check_extent(where, name.c_str(), 1, d_model_, d_model,
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

  Index vocab_size_ = 0;
  Index d_model_ = 0;
  std::vector<TokenId> rows_;
  RowMatrix<T> values_;
};

namespace detail {

/// ember's own kernels' door into a SparseRowGrad (not for users, who call accumulate and
/// accumulate_indirect): accumulation named after the calling table, and, for callers that
/// validated their ids themselves, the check of the gradient's shape apart from an accumulation
/// that checks nothing again.
struct SparseRowGradAccess {
  /// SparseRowGrad::accumulate with a table's own name in its messages (Where is built lazily).
  template <class T, class Id>
  static void accumulate(SparseRowGrad<T>& grad, std::span<const Id> ids,
                         const Eigen::Ref<const RowMatrix<T>>& grad_rows, T scale, Index vocab_size,
                         AccumulateOptions options, Where where) {
    grad.accumulate_checked(ids, grad_rows, scale, vocab_size, options, where);
  }

  /// SparseRowGrad::check_shape: ShapeError unless `grad` may take rows of a vocab_size x d table.
  template <class T>
  static void check_shape(const SparseRowGrad<T>& grad, Where where, Index vocab_size, Index d,
                          const char* table = "the table", Index index = -1) {
    grad.check_shape(where, vocab_size, d, table, index);
  }

  /// grad[ids[i]] += scale * (what `rows` says position i contributes), after the caller checked
  /// every id against vocab_size and the gradient with check_shape: binds an unbound gradient and
  /// accumulates without checking again. `rows` is a row policy of detail/scatter.hpp whose
  /// contribution(i, scratch) returns d values for every i < n. Same grouping, order of sums,
  /// threads and strong guarantee as accumulate; throws nothing but std::bad_alloc.
  template <class T, class Id, class Rows>
  static void accumulate_validated(SparseRowGrad<T>& grad, std::span<const Id> ids,
                                   const Rows& rows, Index d, T scale, Index vocab_size,
                                   AccumulateOptions options, bool needs_scratch) {
    EMBER_ASSERT(grad.vocab_size_ == 0 || (grad.vocab_size_ == vocab_size && grad.d_model_ == d));
    grad.bind(vocab_size, d);
    grad.accumulate_rows(ids, rows, needs_scratch, scale, options);
  }
};

}  // namespace detail

}  // namespace ember::inline EMBER_ISA
