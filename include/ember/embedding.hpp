/// Embedding<T>: an owning V x d_model row-major token embedding table with lookup scaled by the
/// fixed constant sqrt(d_model), sparse-row backward and tied-transpose logits.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ember/detail/lookup.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/tied_logits.hpp"
#include "ember/types.hpp"

namespace ember {

/// How Embedding::resize initialises the rows it adds.
enum class ResizeInit {
  zeros,   ///< all zeros
  normal,  ///< ember's default initialiser, N(0, 1/d_model), from the given seed
  mean  ///< every new row is the mean of the old rows (Hugging Face's mean_resizing, first moment)
};

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
/// Training state (docs/training.md): an optional padding row (set_padding_idx), inverse-frequency
/// gradient scaling (set_scale_grad_by_freq), a frozen flag that ember's optimizers honour
/// (freeze, from_pretrained), explicit max-norm renormalisation (renorm_rows) and vocabulary
/// resizing (resize). Copies carry the flags with the table.
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
  [[nodiscard]] T scale() const noexcept { return detail::lookup_scale<T>(table_.cols()); }

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
    return detail::scaled_lookup(forward_name, detail::const_table(table_), scale(), ids);
  }

  /// Writes weight().row(ids[i]) · scale() into out.row(i); out may be a block of a larger matrix.
  ///
  /// Shapes:  ids[n] -> out[n, d].
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()); ShapeError if out is not
  ///          n x d. `out` is untouched when it throws.
  /// Complexity: O(n·d).
  void forward(std::span<const TokenId> ids, Eigen::Ref<RowMatrix<T>> out) const {
    detail::scaled_lookup(forward_name, detail::const_table(table_), scale(), ids, out);
  }

  /// forward(ids) for any other contiguous range of integer ids.
  template <class R>
  requires(!std::convertible_to<const R&, std::span<const TokenId>>)
      [[nodiscard]] RowMatrix<T> forward(const R& ids) const {
    if constexpr (IdRange<R>) {
      return detail::scaled_lookup(forward_name, detail::const_table(table_), scale(),
                                   detail::as_id_span(ids));
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
      detail::scaled_lookup(forward_name, detail::const_table(table_), scale(),
                            detail::as_id_span(ids), out);
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

  // ---- training state: padding row, frequency scaling, freezing ------------------------------

  /// Makes row `padding_idx` the padding row, or clears it with std::nullopt.
  ///
  /// The padding row is frozen, not hidden: forward returns it like any row; backward gives it no
  /// gradient (sparse entry never created); every ember optimizer skips it, for sparse and dense
  /// gradients alike; renorm_rows leaves it alone. Only you can change it, through weight().
  /// A negative value counts from the end (-1 is the last row), as in PyTorch. With `zero_row`
  /// (the default) the row is set to zeros, as nn.Embedding(padding_idx=...) initialises it.
  /// Throws:  IndexError if padding_idx is outside [-vocab_size(), vocab_size()); nothing changes.
  void set_padding_idx(std::optional<Index> padding_idx, bool zero_row = true) {
    if (!padding_idx) {
      padding_idx_.reset();
      return;
    }
    const Index row = normalise_padding_idx(*padding_idx, "Embedding::set_padding_idx");
    padding_idx_ = row;
    if (zero_row) table_.row(row).setZero();
  }
  /// The padding row, already normalised to [0, vocab_size()), or std::nullopt.
  [[nodiscard]] std::optional<Index> padding_idx() const noexcept { return padding_idx_; }

  /// With `on`, backward scales each row's gradient by 1 / (number of times its id occurs in the
  /// ids of that backward call), as PyTorch's scale_grad_by_freq - also on the sparse path, which
  /// PyTorch refuses. Default off.
  void set_scale_grad_by_freq(bool on) noexcept { scale_grad_by_freq_ = on; }
  /// Whether backward scales gradients by inverse in-batch frequency.
  [[nodiscard]] bool scale_grad_by_freq() const noexcept { return scale_grad_by_freq_; }

  /// Freezes the table: every ember optimizer step and renorm_rows on it throws StateError and
  /// changes nothing (from_pretrained(freeze = true)). forward/backward still work; backward
  /// still fills a gradient if you ask for one (skip the call to save the time).
  void freeze() noexcept { frozen_ = true; }
  /// Lets optimizers update the table again.
  void unfreeze() noexcept { frozen_ = false; }
  /// True while the table is frozen.
  [[nodiscard]] bool frozen() const noexcept { return frozen_; }

  /// Adopts a pretrained table, frozen by default, as torch.nn.Embedding.from_pretrained.
  /// The padding row (if any) keeps its pretrained values, as in PyTorch: it is frozen, not zeroed.
  /// Throws:  ShapeError if the table is empty; IndexError if padding_idx is out of range.
  [[nodiscard]] static Embedding from_pretrained(RowMatrix<T> table, bool freeze = true,
                                                 std::optional<Index> padding_idx = {}) {
    Embedding emb(std::move(table));
    emb.set_padding_idx(padding_idx, /*zero_row=*/false);
    emb.frozen_ = freeze;
    return emb;
  }

  /// Zeroes the padding row of a dense vocab_size() x d_model() gradient (e.g. from
  /// logits_backward); a no-op without a padding row. ember's optimizers already skip that row,
  /// so this is for your own update rules or for inspecting the gradient.
  /// Throws:  ShapeError if grad is not vocab_size() x d_model(); grad is untouched then.
  void zero_padding_grad(Eigen::Ref<RowMatrix<T>> grad) const {
    constexpr const char* where = "Embedding::zero_padding_grad";
    detail::check_extent(where, "grad", 0, vocab_size(), grad.rows(), "vocab_size");
    detail::check_extent(where, "grad", 1, d_model(), grad.cols(), "d_model");
    if (padding_idx_ && *padding_idx_ < vocab_size()) grad.row(*padding_idx_).setZero();
  }

  // ---- explicit max_norm renormalisation ------------------------------------------------------

  /// Rescales in place each distinct row among `ids` whose p-norm exceeds max_norm, with
  /// PyTorch's formula w *= max_norm / (norm + 1e-7) (norm and factor computed in double).
  /// Never a side effect of forward: call it where PyTorch's max_norm would have (before the
  /// lookup). The padding row is left unchanged. Returns the number of rows rescaled.
  ///
  /// Shapes:  ids[n] (repeats allowed; each row is renormalised once).
  /// Throws:  StateError if the table is frozen; ValueError unless max_norm is finite and > 0 and
  ///          p > 0 (p = infinity gives the max-abs norm); IndexError for an id outside
  ///          [0, vocab_size()). Nothing changes when it throws.
  /// Complexity: O(n log n + u·d) for u distinct ids.
  template <class R>
  Index renorm_rows(const R& ids, double max_norm, double p = 2.0) {
    if constexpr (IdRange<R>) {
      constexpr const char* where = "Embedding::renorm_rows";
      const auto span = detail::as_id_span(ids);
      check_not_frozen(where);
      detail::check_positive_finite(where, "max_norm", max_norm);
      if (!(p > 0.0)) {  // also rejects NaN; +infinity is the max norm
        throw ValueError(std::string(where) + ": p must be > 0, got " + std::to_string(p), p);
      }
      detail::check_ids(span, vocab_size(), where);
      std::vector<Index> rows(span.begin(), span.end());
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      Index rescaled = 0;
      for (const Index r : rows) {
        if (padding_idx_ && r == *padding_idx_) continue;
        auto row = table_.row(r);
        const double norm = row_norm(row, p);
        if (norm > max_norm) {
          const double factor = max_norm / (norm + 1e-7);
          row *= static_cast<T>(factor);
          ++rescaled;
        }
      }
      return rescaled;
    } else {
      static_assert(detail::always_false<R>, EMBER_ID_RANGE_MESSAGE);
      return 0;
    }
  }

  // ---- resizing -------------------------------------------------------------------------------

  /// Grows or shrinks the vocabulary to new_vocab_size rows. Rows [0, min(old, new)) keep their
  /// values bit for bit; added rows are initialised by `init` (ResizeInit::normal draws from
  /// Random(seed), ResizeInit::mean uses the mean of all old rows, computed in double). Ties
  /// survive: logits() reads the same (resized) table. Flags (padding row, frequency scaling,
  /// frozen) are kept; an ember optimizer used on this table follows the new size at its next
  /// step (state of removed rows is dropped, added rows start without state).
  ///
  /// Throws:  ShapeError if new_vocab_size <= 0; IndexError if the padding row would fall outside
  ///          the new vocabulary (clear it first). Nothing changes when it throws.
  /// Complexity: O(new_vocab_size · d); the table is reallocated.
  void resize(Index new_vocab_size, ResizeInit init = ResizeInit::normal, std::uint64_t seed = 0) {
    constexpr const char* where = "Embedding::resize";
    detail::check_positive_size(where, "new_vocab_size", new_vocab_size);
    if (padding_idx_ && *padding_idx_ >= new_vocab_size) {
      throw IndexError(std::string(where) + ": padding_idx " + std::to_string(*padding_idx_) +
                           " would be outside the new vocabulary [0, " +
                           std::to_string(new_vocab_size) + "); clear it first",
                       -1, *padding_idx_, new_vocab_size);
    }
    const Index old_v = vocab_size();
    const Index d = d_model();
    const Index kept = std::min(old_v, new_vocab_size);
    RowMatrix<T> grown(new_vocab_size, d);
    grown.topRows(kept) = table_.topRows(kept);
    const Index added = new_vocab_size - kept;
    if (added > 0) {
      switch (init) {
        case ResizeInit::zeros:
          grown.bottomRows(added).setZero();
          break;
        case ResizeInit::normal:
          Init::normal().fill(grown.bottomRows(added), seed);
          break;
        case ResizeInit::mean: {
          const RowVector<T> mean =
              (table_.template cast<double>().colwise().sum() / static_cast<double>(old_v))
                  .template cast<T>();
          grown.bottomRows(added).rowwise() = mean;
          break;
        }
      }
    }
    table_ = std::move(grown);
  }

 private:
  static constexpr const char* forward_name = "Embedding::forward";

  static Index checked_size(Index value, const char* name) {
    detail::check_positive_size("Embedding", name, value);
    return value;
  }

  template <class Id>
  void backward_impl(std::span<const Id> ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     SparseRowGrad<T>& grad) const {
    constexpr const char* where = "Embedding::backward";
    detail::check_backward_grad_out(where, static_cast<Index>(ids.size()), d_model(),
                                    grad_out.rows(), grad_out.cols());
    typename SparseRowGrad<T>::AccumulateOptions options;
    options.scale_grad_by_freq = scale_grad_by_freq_;
    options.skip_row = padding_idx_ ? static_cast<TokenId>(*padding_idx_) : TokenId{-1};
    grad.accumulate(ids, grad_out, scale(), vocab_size(), options, where);
  }

  void check_not_frozen(const char* where) const {
    if (frozen_)
      throw StateError(std::string(where) + ": the table is frozen; unfreeze() it first");
  }

  Index normalise_padding_idx(Index padding_idx, const char* where) const {
    const Index v = vocab_size();
    if (padding_idx < -v || padding_idx >= v) {
      throw IndexError(std::string(where) + ": padding_idx " + std::to_string(padding_idx) +
                           " is outside [" + std::to_string(-v) + ", " + std::to_string(v) + ")",
                       -1, padding_idx, v);
    }
    return padding_idx < 0 ? padding_idx + v : padding_idx;
  }

  template <class Row>
  static double row_norm(const Row& row, double p) {
    if (p == 2.0) return std::sqrt(row.template cast<double>().squaredNorm());
    if (p == 1.0) return row.template cast<double>().cwiseAbs().sum();
    if (std::isinf(p)) return static_cast<double>(row.cwiseAbs().maxCoeff());
    return std::pow(row.template cast<double>().cwiseAbs().array().pow(p).sum(), 1.0 / p);
  }

  RowMatrix<T> table_;
  std::optional<Index> padding_idx_;
  bool scale_grad_by_freq_ = false;
  bool frozen_ = false;
};

}  // namespace ember
