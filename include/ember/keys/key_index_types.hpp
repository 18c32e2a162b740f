/// The value types of KeyIndex's API: its eviction policies and options, the pairs and entries it
/// reports, what its batch and resize calls return, and the steps it keeps. key_index.hpp includes
/// this header; the parts of KeyIndex under keys/detail/ include it too.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// Which resident key a KeyIndex gives up when a batch needs a row and none is free. Every policy
/// orders the resident keys by a tuple and evicts the smallest first; ties of the policy's own
/// score fall to the older last step, then to the smaller key, so the order is total.
enum class EvictionPolicy {
  lru,    ///< least recently seen: (last step, key)
  lfu,    ///< least frequently seen: (sightings, or their decayed sum, last step, key)
  score,  ///< the caller's score: (score, last step, key); find_or_insert takes one per key
  none    ///< never evicts: a batch needing more rows than are free throws CapacityError
};

/// The policy's name ("lru", "lfu", "score", "none").
[[nodiscard]] constexpr const char* to_string(EvictionPolicy policy) noexcept {
  return policy == EvictionPolicy::lru     ? "lru"
         : policy == EvictionPolicy::lfu   ? "lfu"
         : policy == EvictionPolicy::score ? "score"
                                           : "none";
}

/// Options of a KeyIndex, fixed at construction.
struct KeyIndexOptions {
  /// Which key a full index evicts.
  EvictionPolicy policy = EvictionPolicy::lru;
  /// Sightings a key needs before it gets a row (0 or 1: at its first); until then it is counted
  /// in a bounded sketch, costs no row and reads the fallback. At most 65535.
  std::int64_t min_count = 1;
  /// lfu only, h > 0: decayed counts. Steps fall in epochs of h steps counted from the index's
  /// first step s0, and a sighting at step s weighs 2^floor((s - s0) / h): at each epoch boundary
  /// every earlier sighting halves against the new ones, whatever its step within its epoch.
  /// Counts keep their order however long a key is unseen; steps more than 2^39 epochs after s0
  /// are refused. 0: plain counts.
  std::int64_t lfu_half_life = 0;
  /// Counters per row of the admission sketch (4 rows, 2 bytes a counter), rounded up to a power
  /// of two, at least 64; 0: the power of two at or above the capacity. Unused when min_count <= 1.
  Index sketch_width = 0;
  /// The admission counts halve every this many steps (from the first step); 0: never.
  std::int64_t sketch_half_life = 0;
  /// The row find and find_or_insert give a key without a row: -1 (KeyIndex::no_row) or any row
  /// >= 0; a row inside [0, capacity) is then reserved, never given to a key.
  TokenId fallback_row = -1;
};

/// A key and the row it had (what find_or_insert reports for each key it evicts).
struct KeyRow {
  std::uint64_t key = 0;  ///< the key
  TokenId row = -1;       ///< its row
  friend bool operator==(const KeyRow&, const KeyRow&) = default;
};

/// What iteration over a KeyIndex yields for one resident key.
struct KeyEntry {
  std::uint64_t key = 0;   ///< the key
  TokenId row = -1;        ///< its row
  double score = 0.0;      ///< the policy's score: lru/none last step, lfu sightings (decayed to
                           ///< the latest step with a half-life), score: the caller's score
  std::int64_t count = 0;  ///< sightings since it got its row (saturating at 2^32 - 1)
  std::int64_t last_step = 0;  ///< the last step it was seen at
  friend bool operator==(const KeyEntry&, const KeyEntry&) = default;
};

/// What one find_or_insert (or insert) call did.
struct InsertResult {
  Index hits = 0;       ///< positions whose key already had a row
  Index inserted = 0;   ///< keys that got a row in this call
  Index fallbacks = 0;  ///< positions whose key has no row (not yet admitted): given the fallback
  /// The (key, row) pairs evicted, in eviction order (valid until the next call that changes the
  /// index); each row now belongs to a key of this batch.
  std::span<const KeyRow> evicted;
  /// The (key, row) pairs that got a row in this call, in order of first position (valid as
  /// `evicted`): the rows whose values a table must initialise.
  std::span<const KeyRow> added;
};

/// What KeyIndex::resize did.
struct ResizeResult {
  std::vector<KeyRow> evicted;  ///< keys dropped to fit (policy order), with their old rows
  /// (old row, new row) of every key moved because its row is past the new capacity, ascending.
  std::vector<std::pair<TokenId, TokenId>> moved;
};

/// The steps a KeyIndex keeps (part of its checkpointed state).
struct KeyIndexClocks {
  std::int64_t origin = -1;       ///< the first step (decay and sketch epochs count from it)
  std::int64_t base = 0;          ///< the step the rows' last steps count from (>= origin)
  std::int64_t last = -1;         ///< the latest step
  std::int64_t sketch_epoch = 0;  ///< halvings of the sketch done so far
  friend bool operator==(const KeyIndexClocks&, const KeyIndexClocks&) = default;
};

}  // namespace ember::inline EMBER_ISA
