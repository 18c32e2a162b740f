/// detail::resize_into: the body of KeyIndex::resize, which moves an index's keys into a new
/// capacity, dropping the smallest in the policy's order until they fit and moving the keys past
/// the new capacity to the lowest free rows.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/keys/detail/eviction_order.hpp"
#include "ember/keys/detail/key_index_state.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Fills `to`, an empty state over the new capacity with the options of `from` (the fallback row
/// aside), from `from`: its clocks and sketch; then every key in the policy's order, the
/// smallest dropped until the rest fit to.key_capacity(); every kept key stays on its row when
/// that row is below the new capacity, and the others take the lowest rows left free, in
/// ascending order of their old rows. Returns what KeyIndex::resize reports. KeyIndex::resize
/// checked that the keys fit (or that its policy evicts) and that the reserved row stays.
/// Complexity: O(C log C) for the old capacity C.
inline ResizeResult resize_into(const KeyIndexState& from, KeyIndexState& to) {
  const Index capacity = to.capacity_;
  const Index keep = to.key_capacity();
  ResizeResult result;
  // The keys in eviction order: drop the smallest until the rest fit.
  std::vector<Candidate> all;
  for (Index r = 0; r < from.capacity_; ++r)
    if (from.resident(r)) all.push_back(EvictionOrder::candidate(from, r));
  std::sort(all.begin(), all.end(), Candidate::Less{});
  const auto drop = static_cast<std::size_t>(std::max<Index>(0, from.size_ - keep));
  std::vector<std::pair<Index, Candidate>> kept;
  for (std::size_t k = 0; k < all.size(); ++k) {
    const Index r = all[k].row;
    if (k < drop) {
      result.evicted.push_back(
          {from.meta_[static_cast<std::size_t>(r)].key, static_cast<TokenId>(r)});
    } else {
      kept.emplace_back(r, all[k]);
    }
  }
  std::sort(kept.begin(), kept.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  to.clock_ = from.clock_;
  if (from.admission()) to.sketch_ = from.sketch_;
  std::vector<char> used(static_cast<std::size_t>(capacity), 0);
  if (to.reserved_ >= 0) used[static_cast<std::size_t>(to.reserved_)] = 1;
  for (const auto& [r, c] : kept)
    if (r < capacity) used[static_cast<std::size_t>(r)] = 1;
  Index lowest = 0;
  for (const auto& [r, c] : kept) {
    Index dest = r;
    if (r >= capacity) {
      while (used[static_cast<std::size_t>(lowest)] != 0) ++lowest;
      dest = lowest;
      used[static_cast<std::size_t>(dest)] = 1;
      result.moved.emplace_back(static_cast<TokenId>(r), static_cast<TokenId>(dest));
    }
    to.adopt(dest, from, r);
  }
  to.finish_adopt();
  return result;
}

}  // namespace ember::inline EMBER_ISA::detail
