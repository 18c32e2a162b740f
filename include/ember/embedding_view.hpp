/// EmbeddingView<T>: a non-owning, read-only V x d_model table over caller or memory-mapped
/// memory, with the same lookup, backward and tied logits as Embedding<T>, through the same
/// kernels.
// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "ember/detail/lookup.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/tied_logits.hpp"
#include "ember/types.hpp"

namespace ember {

/// A table[V, d] that ember reads but does not own: a pointer, a row count, a row width and a row
/// stride (in elements, >= d), seen as an `Eigen::Map`. forward, backward, logits and
/// embed_with_positions (input_embedding.hpp) behave exactly as Embedding<T>'s and run the same
/// kernels; queries take `view.weight()` (query::Neighbours accepts any row-major table).
///
/// Lifetime: the view never copies the table, so someone must keep the memory alive while the
/// view (or a Map from weight()) is used:
/// - over caller memory (a pointer, an Eigen matrix, an Embedding's weight()), the caller does:
///   the view must not outlive it (a view of a temporary does not compile);
/// - over a file, `io::MappedTable<T>::view()` (from `map_npy` or `SafetensorsFile::map`) returns
///   a view holding a shared reference to the mapping (keep_alive()), so the view alone keeps the
///   file mapped, even after the MappedTable and the SafetensorsFile are gone.
/// Nothing more than element alignment (alignof(T)) is assumed of the pointer.
///
/// The √d_model scale is applied by forward and backward exactly as Embedding's. The view is
/// read-only: there is no padding row, freezing or resizing (they change the table).
///
/// Thread safety: every member is const; concurrent calls are safe while the memory is unchanged.
///
/// Example (zero copy over a 10 GB safetensors table):
/// ```cpp
/// ember::io::SafetensorsFile f("model.safetensors");
/// ember::EmbeddingView<float> wte = f.map<float>("wte.weight").view();  // F32: no copy
/// ember::RowMatrix<float> x = wte.forward(ids);
/// ```
template <class T>
class EmbeddingView {
  static_assert(Scalar<T>, "ember::EmbeddingView<T>: T must be float or double");

 public:
  using Scalar = T;
  /// The table as Eigen sees it: read-only, row-major, rows `row_stride()` elements apart.
  using Map = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

  /// A view of `vocab_size` rows of `d_model` values at `data`, row r starting at
  /// data + r · row_stride (row_stride = -1 means d_model: packed rows). `keep_alive`, when given,
  /// is held for the view's lifetime (the owner of the memory).
  /// Throws:  ShapeError if a size is not positive or row_stride < d_model (other than -1);
  ///          ValueError if data is null or not aligned to alignof(T).
  EmbeddingView(const T* data, Index vocab_size, Index d_model, Index row_stride = -1,
                std::shared_ptr<const void> keep_alive = {})
      : table_(detail::checked_view_table("EmbeddingView", data, vocab_size, d_model, row_stride)),
        keep_alive_(std::move(keep_alive)) {}

  /// A view of a row-major Eigen object with direct access (RowMatrix, a block of one, a Map,
  /// Embedding::weight(), MappedTable::matrix()). The object must outlive the view.
  /// Throws: as the pointer constructor (ShapeError if it has no rows or columns or its outer
  ///         stride is below its columns; ValueError if its data is null or misaligned).
  template <class Derived>
  explicit EmbeddingView(const Eigen::MatrixBase<Derived>& table,
                         std::shared_ptr<const void> keep_alive = {})
      : EmbeddingView(detail::const_table(table.derived()).data, table.rows(), table.cols(),
                      detail::const_table(table.derived()).stride, std::move(keep_alive)) {
    static_assert(std::is_same_v<typename Derived::Scalar, T>,
                  "ember::EmbeddingView<T>: the table must hold T");
  }

  /// A view of a temporary would dangle at once: it does not compile.
  explicit EmbeddingView(RowMatrix<T>&&) = delete;

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return table_.rows; }
  /// Row width d_model.
  [[nodiscard]] Index d_model() const noexcept { return table_.cols; }
  /// Elements between the starts of consecutive rows (>= d_model).
  [[nodiscard]] Index row_stride() const noexcept { return table_.stride; }
  /// The lookup scale √d_model, as Embedding::scale().
  [[nodiscard]] T scale() const noexcept { return detail::lookup_scale<T>(table_.cols); }
  /// The viewed table, V x d_model, unscaled.
  [[nodiscard]] Map weight() const noexcept {
    return Map(table_.data, table_.rows, table_.cols, Eigen::OuterStride<>(table_.stride));
  }
  /// First element of row 0.
  [[nodiscard]] const T* data() const noexcept { return table_.data; }
  /// The owner the view keeps alive (null for caller memory).
  [[nodiscard]] const std::shared_ptr<const void>& keep_alive() const noexcept {
    return keep_alive_;
  }

  /// Returns weight().row(ids[i]) · scale() for each i (as Embedding::forward).
  /// Shapes:  ids[n] -> out[n, d].
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()).
  /// Complexity: O(n·d).
  template <class R>
  [[nodiscard]] RowMatrix<T> forward(const R& ids) const {
    return detail::with_ids(ids, [&](auto span) {
      return detail::scaled_lookup("EmbeddingView::forward", table(), scale(), span);
    });
  }

  /// Writes weight().row(ids[i]) · scale() into out.row(i).
  /// Throws:  IndexError for an id out of range; ShapeError if out is not n x d. `out` is
  ///          untouched when it throws.
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<T>> out) const {
    detail::with_ids(ids, [&](auto span) {
      detail::scaled_lookup("EmbeddingView::forward", table(), scale(), span, out);
    });
  }

  /// grad[t] += scale() · Σ_{i : ids[i] = t} grad_out[i], as Embedding::backward (the view itself
  /// is never written: apply the gradient to the memory yourself).
  /// Throws:  IndexError, ShapeError as Embedding::backward; grad is unchanged when it throws.
  template <class R>
  void backward(const R& ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) const {
    detail::with_ids(ids, [&](auto span) {
      constexpr const char* where = "EmbeddingView::backward";
      detail::check_backward_grad_out(where, static_cast<Index>(span.size()), table_.cols,
                                      grad_out.rows(), grad_out.cols());
      grad.accumulate(span, grad_out, scale(), table_.rows, {}, where);
    });
  }

  /// hidden · weight()ᵀ, the tied output projection (no scale).
  /// Shapes:  hidden[n, d] -> logits[n, V].  Throws: ShapeError on a shape mismatch.
  [[nodiscard]] RowMatrix<T> logits(const Eigen::Ref<const RowMatrix<T>>& hidden) const {
    return ember::logits(weight(), hidden);
  }
  /// Writes hidden · weight()ᵀ into out (n x V), which must not overlap hidden or the table.
  void logits(const Eigen::Ref<const RowMatrix<T>>& hidden, Eigen::Ref<RowMatrix<T>> out) const {
    ember::logits(weight(), hidden, out);
  }
  /// Backward of logits(), as Embedding::logits_backward (grad_weight is accumulated).
  void logits_backward(const Eigen::Ref<const RowMatrix<T>>& hidden,
                       const Eigen::Ref<const RowMatrix<T>>& grad_logits,
                       Eigen::Ref<RowMatrix<T>> grad_hidden,
                       Eigen::Ref<RowMatrix<T>> grad_weight) const {
    ember::logits_backward(weight(), hidden, grad_logits, grad_hidden, grad_weight);
  }

  /// The table as the kernels take it.
  [[nodiscard]] detail::ConstTableRef<T> table() const noexcept { return table_; }

 private:
  detail::ConstTableRef<T> table_;
  std::shared_ptr<const void> keep_alive_;
};

}  // namespace ember
