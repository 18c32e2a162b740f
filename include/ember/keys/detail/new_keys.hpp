/// detail::NewKeys: the distinct keys of a KeyIndex batch that have no row, in order of first
/// position, with their sightings and largest score, grouped through a table that one stamp
/// empties.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// One distinct new key of a batch.
struct NewKey {
  std::uint64_t key;
  std::uint64_t hash;       // mix_key(key)
  std::uint64_t sightings;  // summed over its positions
  double score;             // the largest of its positions' (0 without scores)
  Index first;              // its first position
  TokenId row;              // the row it got (-1: none, or not yet)
  bool admitted;            // it gets a row in this batch
};

/// The new keys of the latest batch, reused from batch to batch (KeyIndex's planner owns one).
class NewKeys {
 public:
  /// The keys the last group() found, in order of first position.
  [[nodiscard]] std::vector<NewKey>& items() noexcept { return items_; }
  [[nodiscard]] const std::vector<NewKey>& items() const noexcept { return items_; }

  /// items() = the distinct keys at the positions `miss_at` (ascending) of `keys`, hashes[i] the
  /// hash of keys[i] there, with their sightings (counts[i], or 1 each when empty) and largest
  /// score (scores[i], or 0 when empty); work[i] = -(the key's index in items() + 2) at each
  /// of those positions.
  void group(std::span<const std::uint64_t> keys, std::span<const double> scores,
             std::span<const std::int64_t> counts, std::span<const Index> miss_at,
             std::span<const std::uint64_t> hashes, std::span<TokenId> work) {
    items_.clear();
    if (miss_at.empty()) return;
    const auto want = std::bit_ceil(static_cast<std::uint64_t>(miss_at.size()) * 2);
    if (table_.size() < want) {
      table_.assign(static_cast<std::size_t>(want), Slot{0, 0, 0});
      stamp_ = 0;
    }
    if (++stamp_ == 0) {
      for (Slot& g : table_) g.stamp = 0;
      stamp_ = 1;
    }
    const std::uint64_t mask = table_.size() - 1;
    constexpr std::size_t ahead = 8;  // slots asked for before they are probed
    for (std::size_t j = 0; j < miss_at.size(); ++j) {
#if defined(__GNUC__) || defined(__clang__)
      if (j + ahead < miss_at.size()) {
        const std::uint64_t next = hashes[static_cast<std::size_t>(miss_at[j + ahead])];
        __builtin_prefetch(table_.data() + (next & mask), 1, 3);
      }
#endif
      const Index i = miss_at[j];
      auto& w = work[static_cast<std::size_t>(i)];
      const std::uint64_t key = keys[static_cast<std::size_t>(i)];
      const std::uint64_t h = hashes[static_cast<std::size_t>(i)];
      auto p = static_cast<std::size_t>(h & mask);
      Index u = -1;
      while (table_[p].stamp == stamp_) {
        if (table_[p].key == key) {
          u = static_cast<Index>(table_[p].index);
          break;
        }
        p = (p + 1) & mask;
      }
      const std::uint64_t c =
          counts.empty() ? 1 : static_cast<std::uint64_t>(counts[static_cast<std::size_t>(i)]);
      const double s = scores.empty() ? 0.0 : scores[static_cast<std::size_t>(i)];
      if (u < 0) {
        u = static_cast<Index>(items_.size());
        table_[p] = Slot{key, stamp_, static_cast<std::uint32_t>(u)};
        items_.push_back({key, h, c, s, i, -1, false});
      } else {
        NewKey& k = items_[static_cast<std::size_t>(u)];
        k.sightings += c;
        k.score = std::max(k.score, s);
      }
      w = -(u + 2);
    }
  }

  /// Bytes held (part of KeyIndex::scratch_bytes).
  [[nodiscard]] std::size_t bytes() const noexcept {
    return items_.capacity() * sizeof(NewKey) + table_.capacity() * sizeof(Slot);
  }

 private:
  /// One slot of the table: the key beside its stamp, so a probe reads one line (stamp != stamp_
  /// is an empty slot; bumping stamp_ empties the table).
  struct Slot {
    std::uint64_t key;
    std::uint32_t stamp;
    std::uint32_t index;
  };
  std::vector<NewKey> items_;
  std::vector<Slot> table_;
  std::uint32_t stamp_ = 0;
};

}  // namespace ember::inline EMBER_ISA::detail
