/// Embedding<T>: an owning V x d_model row-major token embedding table with lookup scaled by the
/// fixed constant sqrt(d_model), sparse-row backward and tied-transpose logits.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <utility>

#include "ember/detail/gather.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/tied_logits.hpp"
#include "ember/types.hpp"

namespace ember {

/// A token embedding layer: a vocab_size x d_model table W whose lookup returns W[id] · √d_model.
///
/// Conventions (Vaswani et al. 2017, §3.4):
/// - The √d_model factor is a constant of the lookup, never learned and never stored: weight()
///   holds the unscaled table. It is applied by forward (and by backward to the gradient), before
///   positions are added (see input_embedding.hpp), and never to logits().
/// - Lookup is row indexing, never a one-hot matmul.
/// - Ids are checked once at the door: any id outside [0, vocab_size) throws IndexError naming its
///   position, value and bound, in every build type, and nothing is written.
///
/// Ids: every call taking ids accepts std::span<const TokenId> and any other contiguous range of
/// integers (std::vector<int32_t>, std::array<int, N>, ...); floating-point ids do not compile.
///
/// Thread safety: const members (forward, logits, ...) may run concurrently on one table.
/// With OpenMP enabled by the including program, forward and backward split their loops across
/// threads; results are bit-identical for any thread count.
///
/// Example:
/// ```cpp
/// ember::Embedding<float> emb(50257, 768, /*seed=*/42);
/// std::vector<ember::TokenId> ids{15496, 11, 995};
/// ember::RowMatrix<float> x = emb.forward(ids);   // 3 x 768, rows scaled by sqrt(768)
/// ```
template <class T>
class Embedding {
  static_assert(Scalar<T>, "ember::Embedding<T>: T must be float or double");

 public:
  using Scalar = T;

  /// A vocab_size x d_model table initialised N(0, 1/d_model) (std = 1/√d_model) from `seed`.
  ///
  /// With this default, a scaled lookup has unit variance per element (√d · 1/√d = 1).
  /// Throws: ShapeError if vocab_size or d_model is not positive.
  Embedding(Index vocab_size, Index d_model, std::uint64_t seed = 0)
      : Embedding(vocab_size, d_model, Init::normal(), seed) {}

  /// A vocab_size x d_model table filled by `init` from `seed`.
  /// Throws: ShapeError if a size is not positive; ValueError if `init` is invalid.
  Embedding(Index vocab_size, Index d_model, const Init& init, std::uint64_t seed = 0)
      : table_(checked_size(vocab_size, "vocab_size"), checked_size(d_model, "d_model")) {
    init.fill(table_, seed);
  }

  /// Adopts a pretrained vocab_size x d_model table (moved in, not copied when an rvalue).
  /// Throws: ShapeError if the table has no rows or no columns.
  explicit Embedding(RowMatrix<T> table) : table_(std::move(table)) {
    detail::check_positive_size("Embedding", "vocab_size (table rows)", table_.rows());
    detail::check_positive_size("Embedding", "d_model (table columns)", table_.cols());
  }

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return table_.rows(); }
  /// Row width d_model.
  [[nodiscard]] Index d_model() const noexcept { return table_.cols(); }
  /// The lookup scale √d_model: a constant derived from d_model, never learned.
  [[nodiscard]] T scale() const noexcept {
    return static_cast<T>(std::sqrt(static_cast<double>(table_.cols())));
  }

  /// The unscaled table, V x d_model.
  [[nodiscard]] const RowMatrix<T>& weight() const noexcept { return table_; }
  /// The unscaled table for in-place updates (optimizer steps, loading). Re-shaping it re-shapes
  /// the layer: vocab_size(), d_model() and scale() always follow the table.
  [[nodiscard]] RowMatrix<T>& weight() noexcept { return table_; }

  // ---- lookup ---------------------------------------------------------------------------------

  /// Returns weight().row(ids[i]) · scale() for each i.
  ///
  /// Shapes:  ids[n] -> out[n, d].
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()).
  /// Complexity: O(n·d); ids are checked once before any copy.
  [[nodiscard]] RowMatrix<T> forward(std::span<const TokenId> ids) const {
    return forward_owning(ids);
  }

  /// Writes weight().row(ids[i]) · scale() into out.row(i); out may be a block of a larger matrix.
  ///
  /// Shapes:  ids[n] -> out[n, d].
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()); ShapeError if out is not
  ///          n x d. `out` is untouched when it throws.
  /// Complexity: O(n·d).
  void forward(std::span<const TokenId> ids, Eigen::Ref<RowMatrix<T>> out) const {
    forward_into(ids, out);
  }

  /// forward(ids) for any other contiguous range of integer ids.
  template <class R>
  requires(!std::convertible_to<const R&, std::span<const TokenId>>)
      [[nodiscard]] RowMatrix<T> forward(const R& ids) const {
    if constexpr (IdRange<R>) {
      return forward_owning(detail::as_id_span(ids));
    } else {
      static_assert(detail::always_false<R>, EMBER_ID_RANGE_MESSAGE);
      return {};
    }
  }

  /// forward(ids, out) for any other contiguous range of integer ids.
  template <class R>
  requires(!std::convertible_to<const R&, std::span<const TokenId>>) void forward(
      const R& ids, Eigen::Ref<RowMatrix<T>> out) const {
    if constexpr (IdRange<R>) {
      forward_into(detail::as_id_span(ids), out);
    } else {
      static_assert(detail::always_false<R>, EMBER_ID_RANGE_MESSAGE);
    }
  }

  // ---- backward -------------------------------------------------------------------------------

  /// Accumulates the table gradient of forward: grad[t] += scale() · Σ_{i : ids[i] = t}
  /// grad_out[i].
  ///
  /// Only rows present in ids are touched (row-sparse); repeated ids accumulate. The result is
  /// bit-identical for any thread count (see SparseRowGrad).
  /// Shapes:  ids[n], grad_out[n, d] -> grad (V x d, row-sparse).
  /// Throws:  IndexError for an id outside [0, vocab_size()); ShapeError if grad_out is not n x d
  ///          or grad is bound to another table shape. grad is unchanged when it throws.
  /// Complexity: O(n log n + n·d); memory O(touched rows · d).
  void backward(std::span<const TokenId> ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) const {
    backward_impl(ids, grad_out, grad);
  }

  /// backward for any other contiguous range of integer ids.
  template <class R>
  requires(!std::convertible_to<const R&, std::span<const TokenId>>) void backward(
      const R& ids, const Eigen::Ref<const RowMatrix<T>>& grad_out, SparseRowGrad<T>& grad) const {
    if constexpr (IdRange<R>) {
      backward_impl(detail::as_id_span(ids), grad_out, grad);
    } else {
      static_assert(detail::always_false<R>, EMBER_ID_RANGE_MESSAGE);
    }
  }

  // ---- tied logits ----------------------------------------------------------------------------

  /// hidden · weight()ᵀ, the tied output projection. No scale is applied.
  ///
  /// Shapes:  hidden[n, d] -> logits[n, V].
  /// Throws:  ShapeError if hidden has not d_model() columns.
  /// Complexity: one GEMM, 2·n·V·d flops.
  [[nodiscard]] RowMatrix<T> logits(const Eigen::Ref<const RowMatrix<T>>& hidden) const {
    return ember::logits(table_, hidden);
  }

  /// Writes hidden · weight()ᵀ into out (n x V), which must not overlap hidden or the table.
  /// Throws: ShapeError on a shape mismatch; out is untouched then.
  void logits(const Eigen::Ref<const RowMatrix<T>>& hidden, Eigen::Ref<RowMatrix<T>> out) const {
    ember::logits(table_, hidden, out);
  }

  /// Backward of logits(): grad_hidden = grad_logits · weight() (assigned) and
  /// grad_weight += grad_logitsᵀ · hidden (accumulated). For a tied model, add the input side's
  /// gradient into the same matrix with `SparseRowGrad::add_to(grad_weight)`.
  ///
  /// Shapes:  hidden[n, d], grad_logits[n, V] -> grad_hidden[n, d], grad_weight[V, d].
  /// Throws:  ShapeError on any mismatch; nothing is written then.
  void logits_backward(const Eigen::Ref<const RowMatrix<T>>& hidden,
                       const Eigen::Ref<const RowMatrix<T>>& grad_logits,
                       Eigen::Ref<RowMatrix<T>> grad_hidden,
                       Eigen::Ref<RowMatrix<T>> grad_weight) const {
    ember::logits_backward(table_, hidden, grad_logits, grad_hidden, grad_weight);
  }

 private:
  static Index checked_size(Index value, const char* name) {
    detail::check_positive_size("Embedding", name, value);
    return value;
  }

  template <class Id>
  RowMatrix<T> forward_owning(std::span<const Id> ids) const {
    detail::check_ids(ids, vocab_size(), "Embedding::forward");
    RowMatrix<T> out(static_cast<Index>(ids.size()), d_model());
    detail::gather_scaled(detail::const_table(table_), ids, scale(), detail::mutable_table(out));
    return out;
  }

  template <class Id>
  void forward_into(std::span<const Id> ids, Eigen::Ref<RowMatrix<T>> out) const {
    constexpr const char* where = "Embedding::forward";
    detail::check_extent(where, "out", 0, static_cast<Index>(ids.size()), out.rows(),
                         "the number of ids");
    detail::check_extent(where, "out", 1, d_model(), out.cols(), "d_model");
    detail::check_ids(ids, vocab_size(), where);
    detail::gather_scaled(detail::const_table(table_), ids, scale(), detail::mutable_table(out));
  }

  template <class Id>
  void backward_impl(std::span<const Id> ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     SparseRowGrad<T>& grad) const {
    constexpr const char* where = "Embedding::backward";
    detail::check_extent(where, "grad_out", 0, static_cast<Index>(ids.size()), grad_out.rows(),
                         "the number of ids");
    detail::check_extent(where, "grad_out", 1, d_model(), grad_out.cols(), "d_model");
    grad.accumulate(ids, grad_out, scale(), vocab_size(), {}, where);
  }

  RowMatrix<T> table_;
};

}  // namespace ember
