/// Dropout kernels of the input stem: drawing the keep mask, and applying it to a gradient.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// keep[e] = (rng.uniform() >= p) for e = 0 .. count-1, in order: the dropout mask, drawn
/// row-major. Serial on purpose, so the mask depends only on the generator's state.
inline void draw_keep_mask(Random& rng, double p, std::size_t count,
                           std::vector<std::uint8_t>& keep) {
  keep.resize(count);
  for (std::size_t e = 0; e < count; ++e) keep[e] = rng.uniform() >= p ? 1 : 0;
}

/// out[i, c] = grad[i, c] · keep_scale where keep[i·d + c], else 0: dropout's backward with the
/// mask its forward drew. Validated by InputStem::backward (grad and out n x d, keep n·d entries).
template <class T>
void apply_keep_mask(ConstTableRef<T> grad, const std::uint8_t* keep, T keep_scale,
                     TableRef<T> out) {
  const Index n = grad.rows;
  const Index d = grad.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    for (Index i = begin; i < end; ++i) {
      const T* g = grad.row(i);
      T* o = out.row(i);
      const std::uint8_t* k = keep + i * d;
      for (Index c = 0; c < d; ++c) o[c] = k[c] != 0 ? g[c] * keep_scale : T(0);
    }
  });
}

}  // namespace ember::inline EMBER_ISA::detail
