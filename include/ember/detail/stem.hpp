/// Fused kernels of the input stem: token row × scale + position row (+ segment row), times the
/// dropout mask, in one pass over each output row; and the dropout mask draw.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// keep[e] = (rng.uniform() >= p) for e = 0 .. count-1, in order: the dropout mask, drawn
/// row-major. Serial on purpose, so the mask depends only on the generator's state.
inline void draw_keep_mask(Random& rng, double p, std::size_t count,
                           std::vector<std::uint8_t>& keep) {
  keep.resize(count);
  for (std::size_t e = 0; e < count; ++e) keep[e] = rng.uniform() >= p ? 1 : 0;
}

/// out[i] = mask_i ⊙ (tokens[ids[i]] · scale + pos[offset + i % seq_len] + seg[seg_ids[i]]),
/// where the segment term is absent when seg.data is null, seg_ids empty means segment 0 for
/// every row, and mask_i is keep[i·d + c] · keep_scale (no mask when keep is null).
/// Validated by InputStem::forward (ids and segment ids in range, positions in range, out n x d).
template <class T, class Id, class SegId>
void stem_forward(ConstTableRef<T> tokens, std::span<const Id> ids, T scale, ConstTableRef<T> pos,
                  Index seq_len, Index offset, ConstTableRef<T> seg, std::span<const SegId> seg_ids,
                  const std::uint8_t* keep, T keep_scale, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = tokens.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d && pos.cols == d);
  EMBER_ASSERT(seq_len > 0 && offset >= 0 && offset + seq_len <= pos.rows);
  EMBER_ASSERT(seg.data == nullptr || seg_ids.empty() || static_cast<Index>(seg_ids.size()) == n);
  EMBER_OMP_FOR(n)
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    EMBER_ASSERT(id >= 0 && id < tokens.rows);
    Eigen::Map<RowVector<T>> o(out.row(i), d);
    o = Eigen::Map<const RowVector<T>>(tokens.row(id), d) * scale +
        Eigen::Map<const RowVector<T>>(pos.row(offset + i % seq_len), d);
    if (seg.data != nullptr) {
      const Index s =
          seg_ids.empty() ? 0 : static_cast<Index>(seg_ids[static_cast<std::size_t>(i)]);
      EMBER_ASSERT(s >= 0 && s < seg.rows);
      o += Eigen::Map<const RowVector<T>>(seg.row(s), d);
    }
    if (keep != nullptr) {
      const std::uint8_t* k = keep + i * d;
      for (Index c = 0; c < d; ++c) o[c] = k[c] != 0 ? o[c] * keep_scale : T(0);
    }
  }
}

/// out[i, c] = grad[i, c] · keep[i·d + c] · keep_scale: dropout's backward with the saved mask.
/// Validated by InputStem::backward (grad and out n x d, keep n·d entries).
template <class T>
void apply_keep_mask(ConstTableRef<T> grad, const std::uint8_t* keep, T keep_scale,
                     TableRef<T> out) {
  const Index n = grad.rows;
  const Index d = grad.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  EMBER_OMP_FOR(n)
  for (Index i = 0; i < n; ++i) {
    const T* g = grad.row(i);
    T* o = out.row(i);
    const std::uint8_t* k = keep + i * d;
    for (Index c = 0; c < d; ++c) o[c] = k[c] != 0 ? g[c] * keep_scale : T(0);
  }
}

}  // namespace ember::detail
