/// Embedding<T>: the trainable token embedding table, an owning V x d_model row-major table of T
/// (Table<codec::Plain<T>, Owned>) with its training state: padding row, frequency scaling,
/// freezing, renormalisation and resizing.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ember/codec/plain.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/row_norms.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// How Embedding::resize initialises the rows it adds.
enum class ResizeInit {
  zeros,   ///< all zeros
  normal,  ///< ember's default initialiser, N(0, 1/d_model), from the given seed
  mean  ///< every new row is the mean of the old rows (Hugging Face's mean_resizing, first moment)
};

/// A token embedding layer: a vocab_size x d_model table W whose lookup returns W[id] · scale(),
/// scale() = √d_model unless the table was built with another LookupScale (Vaswani et al. 2017,
/// §3.4). The scale is a constant of the lookup, never learned and never stored: weight() holds
/// the unscaled table; forward applies it (and backward to the gradient) before positions are
/// added, never logits(). Ids and thread safety: as Table.
///
/// Training state (docs/training.md): an optional padding row (set_padding_idx), inverse-frequency
/// gradient scaling (set_scale_grad_by_freq), a frozen flag that ember's optimizers honour
/// (freeze, from_pretrained), explicit max-norm renormalisation (renorm_rows) and vocabulary
/// resizing (resize). Copies carry the flags with the table.
///
/// Example:
/// ```cpp
/// ember::Embedding<float> emb(50257, 768, /*seed=*/42);
/// std::vector<ember::TokenId> ids{15496, 11, 995};
/// ember::RowMatrix<float> x = emb.forward(ids);   // 3 x 768, rows scaled by sqrt(768)
/// ```
template <class T>
class Embedding : public Table<codec::Plain<T>, Owned> {
  static_assert(ember::Scalar<T>, "ember::Embedding<T>: T must be float or double");
  using Base = Table<codec::Plain<T>, Owned>;

 public:
  // Table's owning constructors: (vocab_size, d_model, seed = 0), (vocab_size, d_model, init,
  // seed = 0) and (RowMatrix<T> table), each with an optional trailing LookupScale.
  using Base::Base;
  using Base::d_model;
  using Base::vocab_size;

  /// Table::backward honouring the training state: the padding row gets nothing (its entry is
  /// never created) and, with scale_grad_by_freq(), each row's sum is divided by its count in ids.
  /// Shapes, throws, complexity: as Table::backward.
  template <class R>
  void backward(const R& ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) const {
    this->backward_with(ids, grad_out, grad, accumulate_options());
  }

  /// The accumulation options of this table's gradients: its padding row and frequency scaling
  /// (what backward, EmbeddingBag and InputStem pass to SparseRowGrad).
  [[nodiscard]] AccumulateOptions accumulate_options() const noexcept {
    AccumulateOptions o;
    o.scale_grad_by_freq = scale_grad_by_freq_;
    o.skip_row = static_cast<TokenId>(padding_idx_.value_or(-1));
    return o;
  }

  // ---- training state: padding row, frequency scaling, freezing ------------------------------

  /// Makes row `padding_idx` the padding row (negative: from the end, as in PyTorch), or clears it
  /// with std::nullopt. The padding row is frozen, not hidden: forward returns it; backward gives
  /// it no gradient; ember's optimizers and renorm_rows skip it; only weight() changes it. With
  /// `zero_row` (the default) it is set to zeros, as nn.Embedding(padding_idx=...) does.
  /// Throws:  IndexError if padding_idx is outside [-vocab_size(), vocab_size()); nothing changes.
  void set_padding_idx(std::optional<Index> padding_idx, bool zero_row = true) {
    if (!padding_idx) {
      padding_idx_.reset();
      return;
    }
    const Index v = vocab_size();
    if (*padding_idx < -v || *padding_idx >= v) {
      throw IndexError(detail::message("Embedding::set_padding_idx", "padding_idx ", *padding_idx,
                                       " is outside [", -v, ", ", v, ")"),
                       -1, *padding_idx, v);
    }
    padding_idx_ = *padding_idx < 0 ? *padding_idx + v : *padding_idx;
    if (zero_row) this->storage_.row(*padding_idx_).setZero();
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
  /// changes nothing (forward and backward still work).
  void freeze() noexcept { frozen_ = true; }
  /// Lets optimizers update the table again.
  void unfreeze() noexcept { frozen_ = false; }
  /// True while the table is frozen.
  [[nodiscard]] bool frozen() const noexcept { return frozen_; }

  /// Adopts a pretrained table, frozen by default, as torch.nn.Embedding.from_pretrained (the
  /// padding row keeps its values), with the lookup scale of the model it comes from.
  /// Throws:  ShapeError if the table is empty; IndexError if padding_idx is out of range.
  [[nodiscard]] static Embedding from_pretrained(RowMatrix<T> table, bool freeze = true,
                                                 std::optional<Index> padding_idx = {},
                                                 LookupScale scale = {}) {
    Embedding emb(std::move(table), scale);
    emb.set_padding_idx(padding_idx, /*zero_row=*/false);
    emb.frozen_ = freeze;
    return emb;
  }

  /// Zeroes the padding row (if any) of a dense vocab_size() x d_model() gradient, e.g. from
  /// logits_backward, for your own update rules (ember's optimizers already skip that row).
  /// Throws:  ShapeError if grad is not vocab_size() x d_model(); grad is untouched then.
  void zero_padding_grad(Eigen::Ref<RowMatrix<T>> grad) const {
    constexpr const char* where = "Embedding::zero_padding_grad";
    detail::check_dims(where, "grad", grad, vocab_size(), "vocab_size", d_model(), "d_model");
    if (padding_idx_) grad.row(*padding_idx_).setZero();  // resize keeps it below vocab_size()
  }

  /// Rescales in place each distinct row among `ids` (except the padding row) whose p-norm exceeds
  /// max_norm, with PyTorch's formula w *= max_norm / (norm + 1e-7) computed in double; call it
  /// where PyTorch's max_norm would act (before the lookup). Returns the number of rows rescaled.
  /// Shapes:  ids[n] (repeats allowed; each row is renormalised once).
  /// Throws:  StateError if the table is frozen; ValueError unless max_norm is finite and > 0 and
  ///          p > 0 (p = infinity gives the max-abs norm); IndexError for an id outside
  ///          [0, vocab_size()). Nothing changes when it throws.
  /// Complexity: O(n log n + u·d) for u distinct ids.
  template <class R>
  Index renorm_rows(const R& ids, double max_norm, double p = 2.0) {
    return detail::with_ids(ids, [&](auto span) {
      constexpr const char* where = "Embedding::renorm_rows";
      if (frozen_) {
        throw StateError(detail::message(where, "the table is frozen; unfreeze() it first"));
      }
      detail::check_positive_finite(where, "max_norm", max_norm);
      detail::check_scalar(p > 0.0, where, "p", p, "> 0");  // rejects NaN; +inf: the max norm
      detail::check_ids(span, vocab_size(), where);
      std::vector<Index> rows(span.begin(), span.end());
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      Index rescaled = 0;
      for (const Index r : rows) {
        if (padding_idx_ && r == *padding_idx_) continue;
        auto row = this->storage_.row(r);
        const double norm = detail::row_norm(row.data(), d_model(), p);
        if (norm > max_norm) {
          row *= static_cast<T>(max_norm / (norm + 1e-7));
          ++rescaled;
        }
      }
      return rescaled;
    });
  }

  /// Grows or shrinks the vocabulary to new_vocab_size rows. Rows [0, min(old, new)) keep their
  /// values bit for bit; added rows are initialised by `init` (normal: from Random(seed); mean: the
  /// mean of all old rows, in double). Flags are kept; an ember optimizer of this table follows the
  /// new size at its next step (state of removed rows dropped, added rows start without state).
  /// Throws:  ShapeError if new_vocab_size <= 0; IndexError if the padding row would fall outside
  ///          the new vocabulary (clear it first). Nothing changes when it throws.
  /// Complexity: O(new_vocab_size · d); the table is reallocated.
  void resize(Index new_vocab_size, ResizeInit init = ResizeInit::normal, std::uint64_t seed = 0) {
    constexpr const char* where = "Embedding::resize";
    detail::check_positive_size(where, "new_vocab_size", new_vocab_size);
    if (padding_idx_ && *padding_idx_ >= new_vocab_size) {
      throw IndexError(detail::message(where, "padding_idx ", *padding_idx_,
                                       " would be outside the new vocabulary [0, ", new_vocab_size,
                                       "); clear it first"),
                       -1, *padding_idx_, new_vocab_size);
    }
    const Index old_v = vocab_size();
    const Index kept = std::min(old_v, new_vocab_size);
    RowMatrix<T> grown(new_vocab_size, d_model());
    grown.topRows(kept) = this->storage_.topRows(kept);
    auto added = grown.bottomRows(new_vocab_size - kept);
    if (init == ResizeInit::mean && added.rows() > 0) {
      const RowVector<T> mean =
          (this->storage_.template cast<double>().colwise().sum() / static_cast<double>(old_v))
              .template cast<T>();
      added.rowwise() = mean;
    } else if (init != ResizeInit::mean) {
      (init == ResizeInit::zeros ? Init::zeros() : Init::normal()).fill(added, seed);
    }
    this->storage_ = std::move(grown);
  }

 private:
  std::optional<Index> padding_idx_;
  bool scale_grad_by_freq_ = false;
  bool frozen_ = false;
};

}  // namespace ember::inline EMBER_ISA
