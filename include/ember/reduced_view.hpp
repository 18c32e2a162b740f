/// ReducedEmbeddingView<S>: a non-owning, read-only V x d_model table of Eigen::half or
/// Eigen::bfloat16 values over caller or memory-mapped memory, with ReducedEmbedding<S>'s lookup,
/// fused positions, float backward and tied logits through the same decode kernels.
// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "ember/detail/decoded_table.hpp"
#include "ember/detail/gather_convert.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/reduced.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember {

/// A table[V, d] of 16-bit floats S (Eigen::half or Eigen::bfloat16) that ember reads but does not
/// own: a pointer, a row count, a row width and a row stride (in elements, >= d). It is to
/// ReducedEmbedding<S> what EmbeddingView<T> is to Embedding<T>: forward (float, or S on request),
/// embed_with_positions, backward (into a SparseRowGrad<float>), logits and logits_backward behave
/// exactly as ReducedEmbedding<S>'s and run the same decode kernels (detail/gather_convert.hpp);
/// results on the same bytes are bit-identical. Queries take `view.weight()` (query::Neighbours
/// accepts any row-major table and converts it to float).
///
/// Why a type of its own rather than EmbeddingView<Eigen::half>: EmbeddingView<T> computes in T
/// and returns T (its logits are one GEMM over the stored T), while a half table computes and
/// returns float and decodes blocks for logits - the contract of ReducedEmbedding, whose
/// operations this view shares through detail::ReducedTableOps.
///
/// Lifetime: the view never copies the table. Over caller memory (a pointer, a RowMatrix<S>, a
/// ReducedEmbedding), the caller keeps it alive; over a file, `io::MappedTable<S>::view()` (from
/// `SafetensorsFile::map<S>` or `io::map_npy<Eigen::half>`) returns a view that holds the mapping
/// (keep_alive()). Any 2-byte-aligned pointer works.
///
/// Float master: logits decode the stored rows 4096 at a time unless a float copy is set with
/// set_float_master (owned by the view, shared by its copies); a view of a ReducedEmbedding shares
/// that table's master, if it has one.
///
/// Thread safety: const members may run concurrently while the memory is unchanged.
///
/// Example (zero copy over an F16 safetensors table):
/// ```cpp
/// ember::io::SafetensorsFile f("model.safetensors");
/// ember::HalfEmbeddingView wte = f.map<Eigen::half>("wte.weight").view();  // F16: no copy
/// ember::RowMatrix<float> x = wte.forward(ids);                           // float rows · √d
/// ```
template <class S>
class ReducedEmbeddingView : public detail::ReducedTableOps<ReducedEmbeddingView<S>, S> {
  static_assert(HalfStorage<S>,
                "ember::ReducedEmbeddingView<S>: S must be Eigen::half or Eigen::bfloat16");
  using Base = detail::ReducedTableOps<ReducedEmbeddingView<S>, S>;

 public:
  using Storage = S;
  /// The table as Eigen sees it: read-only, row-major, rows `row_stride()` elements apart.
  using Map = Eigen::Map<const RowMatrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
  static constexpr const char* forward_name = "ReducedEmbeddingView::forward";
  static constexpr const char* logits_name = "ReducedEmbeddingView::logits";
  static constexpr const char* logits_backward_name = "ReducedEmbeddingView::logits_backward";
  static constexpr const char* backward_name = "ReducedEmbeddingView::backward";
  static constexpr const char* set_float_master_name = "ReducedEmbeddingView::set_float_master";

  /// A view of `vocab_size` rows of `d_model` values at `data`, row r starting at
  /// data + r · row_stride (row_stride = -1 means d_model: packed rows). `keep_alive`, when given,
  /// is held for the view's lifetime (the owner of the memory).
  /// Throws:  ShapeError if a size is not positive or row_stride < d_model (other than -1);
  ///          ValueError if data is null or not aligned to 2 bytes.
  ReducedEmbeddingView(const S* data, Index vocab_size, Index d_model, Index row_stride = -1,
                       std::shared_ptr<const void> keep_alive = {})
      : table_(detail::checked_view_table("ReducedEmbeddingView", data, vocab_size, d_model,
                                          row_stride)),
        keep_alive_(std::move(keep_alive)) {}

  /// A view of a row-major Eigen object of S with direct access (RowMatrix<S>, a block of one, a
  /// Map, MappedTable<S>::matrix()). The object must outlive the view.
  /// Throws: as the pointer constructor (ShapeError if it has no rows or columns or its outer
  ///         stride is below its columns; ValueError if its data is null or misaligned).
  template <class Derived>
  explicit ReducedEmbeddingView(const Eigen::MatrixBase<Derived>& table,
                                std::shared_ptr<const void> keep_alive = {})
      : ReducedEmbeddingView(detail::const_table(table.derived()).data, table.rows(), table.cols(),
                             detail::const_table(table.derived()).stride, std::move(keep_alive)) {
    static_assert(std::is_same_v<typename Derived::Scalar, S>,
                  "ember::ReducedEmbeddingView<S>: the table must hold S");
  }

  /// A view of a ReducedEmbedding's stored table, sharing the float master the table has now (if
  /// any; the view keeps it alive, and a later set_float_master or clear_float_master on either
  /// side does not reach the other). The table must outlive the view and keep its shape.
  explicit ReducedEmbeddingView(const ReducedEmbedding<S>& table)
      : ReducedEmbeddingView(table.weight()) {
    this->share_float_master(table);
  }

  /// Views of temporaries would dangle at once: they do not compile.
  explicit ReducedEmbeddingView(RowMatrix<S>&&) = delete;
  explicit ReducedEmbeddingView(ReducedEmbedding<S>&&) = delete;

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return table_.rows; }
  /// Row width d_model.
  [[nodiscard]] Index d_model() const noexcept { return table_.cols; }
  /// Elements between the starts of consecutive rows (>= d_model).
  [[nodiscard]] Index row_stride() const noexcept { return table_.stride; }
  /// The viewed table, V x d_model, unscaled.
  [[nodiscard]] Map weight() const noexcept {
    return Map(table_.data, table_.rows, table_.cols, Eigen::OuterStride<>(table_.stride));
  }
  /// First element of row 0.
  [[nodiscard]] const S* data() const noexcept { return table_.data; }
  /// The owner the view keeps alive (null for caller memory).
  [[nodiscard]] const std::shared_ptr<const void>& keep_alive() const noexcept {
    return keep_alive_;
  }

  // scale(), to_float(), forward and table() come from detail::ReducedTableOps, and the float
  // master (set_float_master, clear_float_master, float_master) from detail::DecodedTableOps.

  /// Accumulates the table gradient of forward in float: grad[t] += scale() · Σ_{i : ids[i] = t}
  /// grad_out[i] (the view itself is never written: apply the gradient to the memory yourself).
  /// Shapes:  ids[n], grad_out[n, d] (float) -> grad (V x d, row-sparse, float).
  /// Throws:  IndexError, ShapeError as Embedding::backward; grad is unchanged when it throws.
  using Base::backward;

 private:
  detail::ConstTableRef<S> table_;
  std::shared_ptr<const void> keep_alive_;
};

/// A non-owning fp16 table.
using HalfEmbeddingView = ReducedEmbeddingView<Eigen::half>;
/// A non-owning bfloat16 table.
using BFloat16EmbeddingView = ReducedEmbeddingView<Eigen::bfloat16>;

}  // namespace ember
