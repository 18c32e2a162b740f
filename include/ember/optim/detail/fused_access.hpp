/// ember's own door into an optimizer's fused step (not for users): EmbeddingBag, InputStem and
/// TableBatchedBags hand their backward's rows to any optimizer through it.
// SPDX-License-Identifier: MIT
#pragma once

#include <utility>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::optim::detail {

/// Forwards to the private fused_check / fused_apply / fused_run of a RowOptimizer (see
/// optim/row_optimizer.hpp for what each takes and guarantees).
struct FusedStepAccess {
  template <class Opt, class... Args>
  static void check(const Opt& opt, Args&&... args) {
    opt.fused_check(std::forward<Args>(args)...);
  }
  template <class Opt, class... Args>
  static void apply(Opt& opt, Args&&... args) {
    opt.fused_apply(std::forward<Args>(args)...);
  }
  template <class Opt, class... Args>
  static void run(Opt& opt, Args&&... args) {
    opt.fused_run(std::forward<Args>(args)...);
  }
};

}  // namespace ember::inline EMBER_ISA::optim::detail
