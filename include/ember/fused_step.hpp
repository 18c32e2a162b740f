/// The fused backward + step between the layers and the optimizers: its options
/// (optim::FusedStepOptions) and ember's own door into an optimizer's fused step (not for users),
/// through which EmbeddingBag, InputStem and TableBatchedBags hand their backward's rows to any
/// optimizer. Both sides include this header; neither includes the other.
// SPDX-License-Identifier: MIT
#pragma once

#include <span>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace optim {

/// Options of a fused backward + step (RowOptimizer::backward_step, EmbeddingBag::backward_step,
/// InputStem::backward_step, TableBatchedBags::backward_step), FBGEMM's for its fused embedding
/// updates. Both are off (0) by default, and neither exists on the unfused path.
struct FusedStepOptions {
  /// Clamp every element of each row's summed gradient to [-max_gradient, max_gradient] before
  /// the update (FBGEMM's gradient_clipping with max_gradient); 0 = off. Global-norm clipping
  /// (ClipGroup) needs the whole gradient before any row moves, so it stays on the unfused path.
  double max_gradient = 0.0;
  /// After a row's update, rescale it to L2 norm max_norm if it is longer (PyTorch's renorm
  /// formula, w *= max_norm / (norm + 1e-7), in double); 0 = off.
  double max_norm = 0.0;
};

}  // namespace optim

namespace detail {

/// What a fused step validates before anything changes (besides the table itself): the caller's
/// gradient input, scanned for NaN and infinity when the optimizer's check_finite is on, the
/// tied part, the options, and the public call named in messages.
template <class T>
struct FusedStepChecks {
  const Eigen::Ref<const RowMatrix<T>>* checked = nullptr;  ///< the caller's grad_out, or null
  const Eigen::Ref<const RowMatrix<T>>* dense = nullptr;    ///< a V x d tied gradient, or null
  const optim::FusedStepOptions* fused = nullptr;           ///< never null
  Where where;                                              ///< "EmbeddingBag::backward_step", ...
};

/// The rows a fused step sums and applies, validated by its caller: position p of `ids` (every id
/// in range) contributes what `rows` says, as for SparseRowGrad's accumulation (a row policy of
/// detail/scatter.hpp), times `scale`, with the padding row and frequency scaling of `options`.
template <class T, class Id, class Rows>
struct FusedStepRows {
  std::span<const Id> ids;
  const Rows* rows = nullptr;
  bool needs_scratch = false;  ///< rows writes a product per position
  T scale = T(1);
  AccumulateOptions options{};
};

/// The FusedStepRows of ids, rows and the rest (the types deduced).
template <class T, class Id, class Rows>
[[nodiscard]] FusedStepRows<T, Id, Rows> fused_rows(std::span<const Id> ids, const Rows& rows,
                                                    bool needs_scratch, T scale,
                                                    AccumulateOptions options) noexcept {
  return {ids, &rows, needs_scratch, scale, options};
}

/// Forwards to the private fused_check and fused_apply of a RowOptimizer (see
/// optim/row_optimizer.hpp for what each guarantees).
struct FusedStepAccess {
  /// Validates a fused step on `emb`; throws as backward_step, changes nothing.
  template <class Opt, class Tab, class T>
  static void check(const Opt& opt, const Tab& emb, const FusedStepChecks<T>& checks) {
    opt.fused_check(emb, checks);
  }
  /// The update of a fused step whose check passed; throws nothing but std::bad_alloc.
  template <class Opt, class Tab, class T, class Id, class Rows>
  static void apply(Opt& opt, Tab& emb, const FusedStepRows<T, Id, Rows>& rows,
                    const FusedStepChecks<T>& checks) {
    opt.fused_apply(emb, rows, checks.dense, *checks.fused);
  }
  /// check, then apply.
  template <class Opt, class Tab, class T, class Id, class Rows>
  static void run(Opt& opt, Tab& emb, const FusedStepRows<T, Id, Rows>& rows,
                  const FusedStepChecks<T>& checks) {
    check(opt, emb, checks);
    apply(opt, emb, rows, checks);
  }
};

}  // namespace detail

}  // namespace ember::inline EMBER_ISA
