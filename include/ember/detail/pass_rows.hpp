/// The one dispatch of the small-n logits kernels on the hidden rows of a pass (1 to 8), so each
/// pass size gets its own instantiation with its accumulators in registers.
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Calls f(std::integral_constant<Index, n>{}) for the n = nj hidden rows of one pass (8 for any
/// nj above 7). Precondition: 1 <= nj <= 8.
template <class F>
EMBER_ALWAYS_INLINE void visit_pass_rows(Index nj, F&& f) {
  switch (nj) {
    case 1:
      f(std::integral_constant<Index, 1>{});
      break;
    case 2:
      f(std::integral_constant<Index, 2>{});
      break;
    case 3:
      f(std::integral_constant<Index, 3>{});
      break;
    case 4:
      f(std::integral_constant<Index, 4>{});
      break;
    case 5:
      f(std::integral_constant<Index, 5>{});
      break;
    case 6:
      f(std::integral_constant<Index, 6>{});
      break;
    case 7:
      f(std::integral_constant<Index, 7>{});
      break;
    default:
      f(std::integral_constant<Index, 8>{});
      break;
  }
}

}  // namespace ember::inline EMBER_ISA::detail
