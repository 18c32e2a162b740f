/// FusedStepOptions: what a fused backward + step may do to each row's gradient and to the row
/// after its update (the optimizers' backward_step, EmbeddingBag::backward_step,
/// InputStem::backward_step).
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::optim {

/// Options of a fused backward + step (RowOptimizer::backward_step), FBGEMM's for its fused
/// embedding updates. Both are off (0) by default, and neither exists on the unfused path.
struct FusedStepOptions {
  /// Clamp every element of each row's summed gradient to [-max_gradient, max_gradient] before
  /// the update (FBGEMM's gradient_clipping with max_gradient); 0 = off. Global-norm clipping
  /// (ClipGroup) needs the whole gradient before any row moves, so it stays on the unfused path.
  double max_gradient = 0.0;
  /// After a row's update, rescale it to L2 norm max_norm if it is longer (PyTorch's renorm
  /// formula, w *= max_norm / (norm + 1e-7), in double); 0 = off.
  double max_norm = 0.0;
};

}  // namespace ember::inline EMBER_ISA::optim
