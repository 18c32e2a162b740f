/// KeyIndex: a capacity-bounded, collision-free map from raw 64-bit keys to the rows [0, capacity)
/// of a table, with admission by count, exact and deterministic eviction, and a report of every
/// (key, row) it evicts.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/keys/detail/count_sketch.hpp"
#include "ember/detail/huge_pages.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/errors.hpp"
#include "ember/keys/detail/decayed_count.hpp"
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

namespace detail {
struct KeyIndexAccess;
struct KeyIndexHold;
}  // namespace detail

/// A capacity-bounded, collision-free map from std::uint64_t keys to rows [0, capacity) of a
/// table: every 64-bit value is a valid key (nothing is reserved), two keys never share a row,
/// and when the index is full it evicts by a policy, exactly: the resident key that is smallest
/// in the policy's order (EvictionPolicy), never an approximation from a sample or a bucket.
///
/// Batches: find_or_insert(keys, rows, step) maps a batch at a training step (steps never
/// decrease). Keys already resident are hits; new keys are admitted once seen min_count times
/// (a count-min sketch of bounded size counts them until then; they read the fallback row); an
/// admitted key takes the lowest free row, else the row of the smallest resident key that is not
/// in the batch (a batch never evicts its own keys). New keys take rows in the order of their first
/// position in the batch. A batch needing more new rows than can be freed throws CapacityError
/// (capacity, rows needed) and changes nothing. Sightings: every position counts one (or
/// counts[i]); all positions of a key in a batch read the same row.
///
/// Determinism: the mapping, the evictions and the reported pairs depend only on the stream of
/// calls, never on the thread count or the table layout (tests/support/key_index_reference.hpp
/// is the plain definition every path is tested against).
///
/// Memory: 16 bytes per row (key, last step, sightings), about 5.6 bytes of slots per row, up to
/// 2 bytes per row of eviction candidates, 8 more per row with a decayed lfu and 8 with scores,
/// 16 per key last seen more than 2^31 - 1 steps before the latest base (rare: see docs/keyed.md),
/// plus the sketch (8 · sketch width bytes) with admission. See docs/keyed.md for measurements.
///
/// Thread safety: const members may run concurrently; find splits large batches across threads
/// with OpenMP.
///
/// Example:
/// ```cpp
/// ember::KeyIndex index(/*capacity=*/1 << 20, {.policy = ember::EvictionPolicy::lru});
/// std::vector<std::uint64_t> keys{0xFFFFFFFFFFFFFFFF, 42, 7'000'000'000'000};
/// std::vector<ember::TokenId> rows(keys.size());
/// auto result = index.find_or_insert(keys, rows, /*step=*/0);  // rows {0, 1, 2}
/// ```
class KeyIndex {
 public:
  /// The row find gives a key without a row when no fallback row is set.
  static constexpr TokenId no_row = -1;
  /// The largest capacity (rows must fit 31 bits).
  static constexpr Index max_capacity = (Index{1} << 31) - 3;

  /// An empty index over rows [0, capacity).
  /// Throws:  ValueError if capacity is not in [1, max_capacity], min_count is negative or above
  ///          65535, lfu_half_life or sketch_half_life is negative, lfu_half_life is set with
  ///          another policy, sketch_width is negative or above 2^30, or fallback_row < -1, or if
  ///          the fallback row would leave no row for keys (capacity 1 and fallback row 0).
  explicit KeyIndex(Index capacity, KeyIndexOptions options = {})
      : capacity_(capacity), options_(options) {
    validate(capacity, options);
    reserved_ = options.fallback_row >= 0 && options.fallback_row < capacity
                    ? static_cast<Index>(options.fallback_row)
                    : -1;
    meta_.assign(static_cast<std::size_t>(capacity), Stat{});
    if (decayed()) decay_.assign(static_cast<std::size_t>(capacity), 0);
    if (options.policy == EvictionPolicy::score)
      scores_.assign(static_cast<std::size_t>(capacity), 0.0);
    slots_.reset(capacity);
    if (admission()) sketch_.reset(sketch_width_for(capacity, options.sketch_width));
    marks_.assign(static_cast<std::size_t>((capacity + 63) / 64), 0);
  }

  // ---- shape and options ----------------------------------------------------------------------

  /// Rows [0, capacity()) the index maps keys into (a reserved fallback row included).
  [[nodiscard]] Index capacity() const noexcept { return capacity_; }
  /// Rows keys may hold: capacity(), minus one with a reserved fallback row.
  [[nodiscard]] Index key_capacity() const noexcept { return capacity_ - (reserved_ >= 0 ? 1 : 0); }
  /// Resident keys.
  [[nodiscard]] Index size() const noexcept { return size_; }
  /// True when no key is resident.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The options.
  [[nodiscard]] const KeyIndexOptions& options() const noexcept { return options_; }
  /// The step of the latest find_or_insert or insert (-1 before the first).
  [[nodiscard]] std::int64_t last_step() const noexcept { return clock_.last; }
  /// The row of keys without a row (options().fallback_row).
  [[nodiscard]] TokenId fallback_row() const noexcept { return options_.fallback_row; }

  // ---- lookups --------------------------------------------------------------------------------

  /// rows[i] = the row of keys[i], or fallback_row() for a key that is not resident. Read-only:
  /// no count, step or score changes (an inference lookup).
  /// Shapes:  keys[n] -> rows[n].
  /// Throws:  ShapeError if rows has not n entries; rows is untouched then.
  /// Complexity: O(n) expected, one probe per key, prefetched; threads split large batches.
  void find(std::span<const std::uint64_t> keys, std::span<TokenId> rows) const {
    detail::check_extent("KeyIndex::find", "rows", 0, static_cast<Index>(keys.size()),
                         static_cast<Index>(rows.size()), "the number of keys");
    const auto n = static_cast<Index>(keys.size());
    detail::parallel_rows(n, n * 16, [&](Index begin, Index end, int) {
      lookup(keys.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
             rows.data() + begin);
    });
  }

  /// Owning form of find(keys, rows).
  [[nodiscard]] std::vector<TokenId> find(std::span<const std::uint64_t> keys) const {
    std::vector<TokenId> rows(keys.size());
    find(keys, rows);
    return rows;
  }

  /// The row of one key, or fallback_row().
  [[nodiscard]] TokenId find(std::uint64_t key) const noexcept {
    const Index r = slot_find(key, detail::mix_key(key));
    return r >= 0 ? static_cast<TokenId>(r) : options_.fallback_row;
  }

  /// True when `key` has a row.
  [[nodiscard]] bool contains(std::uint64_t key) const noexcept {
    return slot_find(key, detail::mix_key(key)) >= 0;
  }

  /// The entry of a resident key, or std::nullopt.
  [[nodiscard]] std::optional<KeyEntry> entry(std::uint64_t key) const {
    const Index r = slot_find(key, detail::mix_key(key));
    if (r < 0) return std::nullopt;
    return entry_of(r);
  }

  /// The admission sketch's count of `key` (an estimate, never below the sightings counted while
  /// the key had no row, until a halving or the ceiling of 65535); 0 without admission.
  [[nodiscard]] std::int64_t admission_count(std::uint64_t key) const noexcept {
    return admission() ? sketch_.estimate(key) : 0;
  }

  // ---- batches ----------------------------------------------------------------------------------

  /// Maps a batch at `step`: rows[i] = the row of keys[i] after the call, or fallback_row() for a
  /// key not (yet) admitted. Counts the sightings, moves every key seen to `step`, admits keys
  /// that reach min_count, gives each admitted key the lowest free row or evicts the smallest
  /// resident key (policy order) outside the batch, reports the evicted (key, row) pairs.
  ///
  /// Shapes:  keys[n] -> rows[n]; scores[n] with EvictionPolicy::score (the key's score becomes
  ///          the largest of its positions'), empty otherwise; counts[n] or empty (= 1 each): the
  ///          sightings each position counts for (pre-aggregated batches).
  /// Throws:  ShapeError if rows, scores or counts has the wrong size; ValueError if step is
  ///          negative or below last_step() (or, with a decayed lfu, more than 2^39 half-lives
  ///          after the first step), a score is not finite or a count is below 1;
  ///          CapacityError if the batch needs more rows at once than the index can give it
  ///          (its resident keys plus the new admitted ones above key_capacity(), or with
  ///          EvictionPolicy::none above the free rows). Nothing changes when it throws.
  /// Complexity: O(n) expected for the lookups, plus for the e evictions O(e log C) amortized: the
  ///          candidates are the smallest C/12 keys, found by one scan of the index every C/12
  ///          evictions or fewer and sorted as far as eviction reaches (lfu and score keys that
  ///          fall below them go to a heap, folded into them when it fills).
  InsertResult find_or_insert(std::span<const std::uint64_t> keys, std::span<TokenId> rows,
                              std::int64_t step, std::span<const double> scores = {},
                              std::span<const std::int64_t> counts = {}) {
    constexpr const char* where = "KeyIndex::find_or_insert";
    check_batch(where, keys, &rows, step, scores, counts, true);
    MarkGuard guard(*this);
    prepare(where, keys, rows.data(), step, scores, counts, true);
    return commit(keys, rows, step, scores, counts, true);
  }

  /// Throws exactly what find_or_insert(keys, rows, step, scores, counts) would throw
  /// (CapacityError included), changing nothing; returns the rows the batch would need at once. For
  /// callers that must know a batch fits before they commit anything (to their own state or to
  /// other indexes).
  Index check_insert(std::span<const std::uint64_t> keys, std::int64_t step,
                     std::span<const double> scores = {},
                     std::span<const std::int64_t> counts = {}) {
    constexpr const char* where = "KeyIndex::find_or_insert";
    check_batch(where, keys, nullptr, step, scores, counts, true);
    MarkGuard guard(*this);
    return prepare(where, keys, nullptr, step, scores, counts, true);
  }

  /// Gives every key a row at `step` without admission or eviction (loading a vocabulary, applying
  /// a delta): rows[i] = the row of keys[i]; new keys take the lowest free rows in order of first
  /// position; sightings and steps move as in find_or_insert; with EvictionPolicy::score resident
  /// keys keep their score and new keys score 0.
  /// Throws:  ShapeError if rows has not n entries; ValueError for a bad step (as find_or_insert);
  ///          CapacityError if the new keys exceed the free rows. Nothing changes when it throws.
  /// Complexity: O(n) expected.
  InsertResult insert(std::span<const std::uint64_t> keys, std::span<TokenId> rows,
                      std::int64_t step) {
    constexpr const char* where = "KeyIndex::insert";
    check_batch(where, keys, &rows, step, {}, {}, false);
    MarkGuard guard(*this);
    prepare(where, keys, rows.data(), step, {}, {}, false);
    return commit(keys, rows, step, {}, {}, false);
  }

  /// Removes each resident key among `keys` (others are ignored); their rows become free.
  /// Returns the (key, row) pairs removed, in the order of `keys` (a key listed twice once).
  /// Complexity: O(n) expected.
  std::vector<KeyRow> erase(std::span<const std::uint64_t> keys) {
    std::vector<KeyRow> out;
    for (const std::uint64_t key : keys) {
      const std::uint64_t h = detail::mix_key(key);
      const Index r = slot_find(key, h);
      if (r < 0) continue;
      slots_.erase(h, r);
      release(r);
      out.push_back({key, static_cast<TokenId>(r)});
    }
    if (slots_.crowded()) rebuild_slots();
    return out;
  }

  /// Removes one key; true if it was resident.
  bool erase(std::uint64_t key) { return !erase(std::span<const std::uint64_t>(&key, 1)).empty(); }

  /// Removes every key and forgets the steps and the sketch counts (the options stay).
  void clear() {
    const KeyIndexOptions o = options_;
    const Index c = capacity_;
    *this = KeyIndex(c, o);
  }

  /// Changes the capacity: growing keeps every key on its row; shrinking evicts keys in policy
  /// order until they fit key_capacity(), then moves the keys whose rows are past the new
  /// capacity to the lowest free rows (in ascending order of their old rows). `fallback_row`
  /// (default: unchanged) may move a fallback row that is outside the index (>= capacity) to
  /// another row outside it (a keyed table's last row).
  /// Throws:  ValueError for a capacity outside [1, max_capacity], one that cuts off a reserved
  ///          fallback row, or a new fallback_row that is not outside the new capacity while the
  ///          old one was, or differs from a reserved one; CapacityError with
  ///          EvictionPolicy::none when the keys do not fit. Nothing changes when it throws.
  /// Complexity: O(C log C) for the old capacity C.
  ResizeResult resize(Index capacity, std::optional<TokenId> fallback_row = std::nullopt) {
    constexpr const char* where = "KeyIndex::resize";
    KeyIndexOptions o = options_;
    if (fallback_row) o.fallback_row = *fallback_row;
    validate(capacity, o);
    if (reserved_ >= 0 && reserved_ >= capacity) {
      throw ValueError(detail::message(where, "the reserved fallback row ", reserved_,
                                       " is outside the new capacity ", capacity),
                       static_cast<double>(capacity));
    }
    const bool was_reserved = reserved_ >= 0;
    const bool now_reserved = o.fallback_row >= 0 && o.fallback_row < capacity;
    if (was_reserved != now_reserved || (was_reserved && o.fallback_row != reserved_)) {
      throw ValueError(detail::message(where, "fallback_row ", o.fallback_row,
                                       " would change which row is reserved"),
                       static_cast<double>(o.fallback_row));
    }
    const Index keep = capacity - (reserved_ >= 0 ? 1 : 0);
    if (options_.policy == EvictionPolicy::none && size_ > keep) {
      throw CapacityError(
          detail::message(where, size_, " keys do not fit capacity ", keep, " and eviction is off"),
          keep, size_);
    }
    ResizeResult result;
    // The keys in eviction order: drop the smallest until the rest fit.
    std::vector<Candidate> all;
    for (Index r = 0; r < capacity_; ++r)
      if (resident(r)) all.push_back(candidate(r));
    std::sort(all.begin(), all.end(), Less{});
    const auto drop = static_cast<std::size_t>(std::max<Index>(0, size_ - keep));
    std::vector<std::pair<Index, Candidate>> kept;
    for (std::size_t k = 0; k < all.size(); ++k) {
      const Index r = all[k].row;
      if (k < drop) {
        result.evicted.push_back({meta_[static_cast<std::size_t>(r)].key, static_cast<TokenId>(r)});
      } else {
        kept.emplace_back(r, all[k]);
      }
    }
    std::sort(kept.begin(), kept.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    KeyIndex next(capacity, o);
    next.copy_clocks(*this);
    if (admission()) next.sketch_ = sketch_;
    std::vector<char> used(static_cast<std::size_t>(capacity), 0);
    if (next.reserved_ >= 0) used[static_cast<std::size_t>(next.reserved_)] = 1;
    for (const auto& [r, c] : kept)
      if (r < capacity) used[static_cast<std::size_t>(r)] = 1;
    Index lowest = 0;
    for (const auto& [r, c] : kept) {
      Index to = r;
      if (r >= capacity) {
        while (used[static_cast<std::size_t>(lowest)] != 0) ++lowest;
        to = lowest;
        used[static_cast<std::size_t>(to)] = 1;
        result.moved.emplace_back(static_cast<TokenId>(r), static_cast<TokenId>(to));
      }
      next.adopt(to, *this, r);
    }
    next.finish_adopt();
    *this = std::move(next);
    return result;
  }

  // ---- iteration ------------------------------------------------------------------------------

  /// Iterates the resident keys in ascending row order, yielding KeyEntry values.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = KeyEntry;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = KeyEntry;

    const_iterator() = default;
    [[nodiscard]] KeyEntry operator*() const { return index_->entry_of(row_); }
    const_iterator& operator++() {
      row_ = index_->next_resident(row_ + 1);
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++*this;
      return t;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) noexcept {
      return a.row_ == b.row_;
    }

   private:
    friend class KeyIndex;
    const_iterator(const KeyIndex* index, Index row) : index_(index), row_(row) {}
    const KeyIndex* index_ = nullptr;
    Index row_ = 0;
  };

  /// The first resident key (ascending rows).
  [[nodiscard]] const_iterator begin() const { return {this, next_resident(0)}; }
  /// Past the last resident key.
  [[nodiscard]] const_iterator end() const { return {this, capacity_}; }

  // ---- memory ---------------------------------------------------------------------------------

  /// Bytes the index holds for its rows: keys, steps, counts, scores, slots, free rows, eviction
  /// candidates and per-row marks; the admission sketch (sketch_bytes()) and the scratch of the
  /// largest batch so far (scratch_bytes()) excluded.
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return sizeof(*this) + bytes(meta_) + bytes(ancient_) + bytes(decay_) + bytes(scores_) +
           slots_.bytes() + bytes(free_) + bytes(pool_) + bytes(late_) + bytes(marks_);
  }
  /// Bytes of the admission sketch (0 without admission).
  [[nodiscard]] std::size_t sketch_bytes() const noexcept { return sketch_.bytes(); }
  /// Bytes of per-call scratch, about 70 per key of the largest batch so far.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return bytes(work_) + bytes(hashes_) + bytes(touched_) + bytes(low_) + bytes(touch_first_) +
           bytes(saved_) + bytes(new_) + bytes(victims_) + bytes(evicted_) + bytes(added_) +
           bytes(sample_) + bytes(group_) + bytes(miss_at_);
  }

 private:
  template <class V>
  static std::size_t bytes(const V& v) noexcept {
    return v.capacity() * sizeof(typename V::value_type);
  }

  friend struct detail::KeyIndexAccess;
  friend struct detail::KeyIndexHold;

  /// A row's key, last step (relative_step) and sightings, in one 16-byte record (one cache line
  /// read per hit); count == 0 marks a free row.
  struct Stat {
    std::uint64_t key = 0;
    std::uint32_t last = 0;
    std::uint32_t count = 0;
  };
  /// The step of a row last seen before clock_.base (see relative_step).
  struct AncientStep {
    std::uint32_t row;
    std::int64_t step;
  };
  /// A key's place in the eviction order: (primary, last, key) ascending, with its row.
  struct Candidate {
    std::uint64_t primary = 0;
    std::uint32_t last = 0;
    std::uint32_t row = 0;
    std::uint64_t key = 0;
  };
  /// One distinct new key of a batch.
  struct NewKey {
    std::uint64_t key;
    std::uint64_t hash;
    std::uint64_t sightings;
    double score;
    Index first;
    TokenId row;
    bool admitted;
  };

  static bool less(const Candidate& a, const Candidate& b) noexcept {
    if (a.primary != b.primary) return a.primary < b.primary;
    if (a.last != b.last) return a.last < b.last;
    return a.key < b.key;
  }
  /// less as a function object (inlined by the sorts and heaps).
  struct Less {
    bool operator()(const Candidate& a, const Candidate& b) const noexcept { return less(a, b); }
  };
  /// The order of a min-heap (std::push_heap builds max-heaps).
  struct Greater {
    bool operator()(const Candidate& a, const Candidate& b) const noexcept { return less(b, a); }
  };

  /// Clears the per-call marks of the touched and chosen rows on every exit.
  struct MarkGuard {
    KeyIndex& ix;
    bool keep = false;  // a held batch keeps its marks
    explicit MarkGuard(KeyIndex& index) : ix(index) {}
    MarkGuard(const MarkGuard&) = delete;
    MarkGuard& operator=(const MarkGuard&) = delete;
    ~MarkGuard() {
      if (keep) return;
      if (ix.restore_) ix.restore_stats();
      ix.clear_marks();
    }
  };

  // ---- held batches: several indexes checked, then all committed (detail::KeyIndexHold) -------

  /// check_insert that keeps the batch's lookups and marks, so that commit_held maps it without
  /// looking it up again. Until commit_held or release_held, only const members may be called.
  Index hold(std::span<const std::uint64_t> keys, std::int64_t step, std::span<const double> scores,
             std::span<const std::int64_t> counts) {
    constexpr const char* where = "KeyIndex::find_or_insert";
    EMBER_ASSERT(!held_);
    check_batch(where, keys, nullptr, step, scores, counts, true);
    MarkGuard guard(*this);
    const Index needed = prepare(where, keys, nullptr, step, scores, counts, true, true);
    guard.keep = true;
    held_ = true;
    return needed;
  }
  /// find_or_insert of the batch hold() checked (the same keys, step, scores and counts).
  InsertResult commit_held(std::span<const std::uint64_t> keys, std::span<TokenId> rows,
                           std::int64_t step, std::span<const double> scores,
                           std::span<const std::int64_t> counts) {
    EMBER_ASSERT(held_ && rows.size() == keys.size());
    held_ = false;
    MarkGuard guard(*this);
    return commit(keys, rows, step, scores, counts, true);
  }
  /// Drops a held batch (the index is as before hold()).
  void release_held() noexcept {
    if (!held_) return;
    held_ = false;
    if (restore_) restore_stats();
    clear_marks();
  }

  // ---- validation -----------------------------------------------------------------------------

  [[nodiscard]] bool admission() const noexcept { return options_.min_count > 1; }
  [[nodiscard]] bool decayed() const noexcept {
    return options_.policy == EvictionPolicy::lfu && options_.lfu_half_life > 0;
  }

  static void validate(Index capacity, const KeyIndexOptions& o) {
    constexpr const char* where = "KeyIndex";
    if (capacity < 1 || capacity > max_capacity) {
      throw ValueError(
          detail::message(where, "capacity ", capacity, " is outside [1, ", max_capacity, "]"),
          static_cast<double>(capacity));
    }
    const auto bad = [&](const char* name, std::int64_t v, const char* rule) {
      throw ValueError(detail::message(where, name, " ", v, " ", rule), static_cast<double>(v));
    };
    if (o.min_count < 0 || o.min_count > detail::CountSketch::max_count)
      bad("min_count", o.min_count, "is outside [0, 65535]");
    if (o.lfu_half_life < 0) bad("lfu_half_life", o.lfu_half_life, "is negative");
    if (o.lfu_half_life > 0 && o.policy != EvictionPolicy::lfu)
      bad("lfu_half_life", o.lfu_half_life, "is set, but the policy is not lfu");
    if (o.sketch_half_life < 0) bad("sketch_half_life", o.sketch_half_life, "is negative");
    if (o.sketch_width < 0 || o.sketch_width > (Index{1} << 30))
      bad("sketch_width", o.sketch_width, "is outside [0, 2^30]");
    if (o.fallback_row < -1) bad("fallback_row", o.fallback_row, "is below -1");
    if (o.fallback_row >= 0 && o.fallback_row < capacity && capacity == 1)
      bad("fallback_row", o.fallback_row, "is the only row: no row is left for keys");
  }

  static Index sketch_width_for(Index capacity, Index requested) {
    const Index w = requested > 0 ? requested : capacity;
    return static_cast<Index>(std::bit_ceil(static_cast<std::uint64_t>(std::max<Index>(w, 64))));
  }

  void check_batch(const char* where, std::span<const std::uint64_t> keys,
                   const std::span<TokenId>* rows, std::int64_t step,
                   std::span<const double> scores, std::span<const std::int64_t> counts,
                   bool scored) const {
    const auto n = static_cast<Index>(keys.size());
    if (rows != nullptr)
      detail::check_extent(where, "rows", 0, n, static_cast<Index>(rows->size()),
                           "the number of keys");
    if (scored && options_.policy == EvictionPolicy::score) {
      detail::check_extent(where, "scores", 0, n, static_cast<Index>(scores.size()),
                           "the number of keys (policy score)");
      for (Index i = 0; i < n; ++i) {
        const double s = scores[static_cast<std::size_t>(i)];
        if (!std::isfinite(s)) {
          throw ValueError(
              detail::message(where, "score ", s, " at position ", i, " is not finite"), s);
        }
      }
    } else if (!scores.empty()) {
      detail::check_extent(where, "scores", 0, 0, static_cast<Index>(scores.size()),
                           "0 (only EvictionPolicy::score takes scores)");
    }
    if (!counts.empty()) {
      detail::check_extent(where, "counts", 0, n, static_cast<Index>(counts.size()),
                           "the number of keys");
      for (Index i = 0; i < n; ++i) {
        const std::int64_t c = counts[static_cast<std::size_t>(i)];
        if (c < 1) {
          throw ValueError(detail::message(where, "count ", c, " at position ", i, " is below 1"),
                           static_cast<double>(c));
        }
      }
    }
    if (step < 0 || step < clock_.last) {
      throw ValueError(
          step < 0 ? detail::message(where, "step ", step, " is negative; steps never decrease")
                   : detail::message(where, "step ", step, " is below the last step ", clock_.last,
                                     "; steps never decrease"),
          static_cast<double>(step));
    }
    if (decayed()) {
      const std::int64_t origin = clock_.origin < 0 ? step : clock_.origin;
      if ((step - origin) / options_.lfu_half_life > detail::DecayedCount::max_epoch) {
        throw ValueError(
            detail::message(where, "step ", step, " is more than 2^39 half-lives (",
                            options_.lfu_half_life, " steps each) after the first step ", origin,
                            "; decayed lfu counts end there"),
            static_cast<double>(step));
      }
    }
  }

  // ---- rows and their order -------------------------------------------------------------------

  [[nodiscard]] Index slot_find(std::uint64_t key, std::uint64_t h) const noexcept {
    return slots_.find(key, h, [this](Index r) { return meta_[static_cast<std::size_t>(r)].key; });
  }

  [[nodiscard]] bool resident(Index r) const noexcept {
    return meta_[static_cast<std::size_t>(r)].count != 0;
  }
  [[nodiscard]] Index next_resident(Index r) const noexcept {
    while (r < capacity_ && !resident(r)) ++r;
    return r;
  }

  /// f(primary_of), primary_of(r) being the policy's primary() without the policy's switch, for
  /// loops over every row.
  template <class F>
  decltype(auto) with_primary(F&& f) const {
    switch (options_.policy) {
      case EvictionPolicy::lfu:
        if (decayed()) {
          return f(
              [this](Index r) -> std::uint64_t { return decay_[static_cast<std::size_t>(r)]; });
        }
        return f(
            [this](Index r) -> std::uint64_t { return meta_[static_cast<std::size_t>(r)].count; });
      case EvictionPolicy::score:
        return f([this](Index r) -> std::uint64_t {
          return score_order(scores_[static_cast<std::size_t>(r)]);
        });
      default:
        return f([](Index) -> std::uint64_t { return 0; });
    }
  }
  /// A score as an unsigned order value: ascending with the score, -0 equal to +0.
  static std::uint64_t score_order(double score) noexcept {
    const auto b = std::bit_cast<std::uint64_t>(score + 0.0);  // -0 -> +0 above
    return (b >> 63) != 0 ? ~b : (b | (std::uint64_t{1} << 63));
  }
  /// The policy's primary order value of row r (ascending = evicted first).
  [[nodiscard]] std::uint64_t primary(Index r) const noexcept {
    return with_primary([r](auto primary_of) { return primary_of(r); });
  }
  [[nodiscard]] Candidate candidate(Index r) const noexcept {
    const auto u = static_cast<std::size_t>(r);
    return {primary(r), meta_[u].last, static_cast<std::uint32_t>(r), meta_[u].key};
  }

  [[nodiscard]] KeyEntry entry_of(Index r) const {
    const auto u = static_cast<std::size_t>(r);
    KeyEntry e;
    e.key = meta_[u].key;
    e.row = static_cast<TokenId>(r);
    e.count = meta_[u].count;
    e.last_step = step_of(r);
    switch (options_.policy) {
      case EvictionPolicy::lfu:
        e.score = decayed() ? detail::DecayedCount::value_at(decay_[u], epoch(clock_.last))
                            : static_cast<double>(e.count);
        break;
      case EvictionPolicy::score:
        e.score = scores_[u];
        break;
      default:
        e.score = static_cast<double>(e.last_step);
        break;
    }
    return e;
  }

  /// The decay epoch of step s (lfu with a half-life): floor((s - origin) / half_life).
  [[nodiscard]] std::int64_t epoch(std::int64_t s) const noexcept {
    if (!decayed() || clock_.origin < 0) return 0;
    return (s - clock_.origin) / options_.lfu_half_life;
  }

  // ---- last steps: 32 bits a row, exact over every int64 step ----------------------------------
  //
  // A row's Stat::last v stands for the step clock_.base + (v - kStepBand) when v >= kStepBand:
  // the steps [base, base + kStepSpan]. Rows last seen before the base hold their rank among
  // those rows' steps (v < kStepBand, equal steps equal rank) and their step in ancient_. The
  // order of v is then the order of the steps, and a step past base + kStepSpan rebases.

  static constexpr std::uint32_t kStepBand = std::uint32_t{1} << 31;
  static constexpr std::int64_t kStepSpan = std::int64_t{kStepBand} - 1;

  /// The Stat::last of `step` against `base` (base <= step <= base + kStepSpan).
  [[nodiscard]] static std::uint32_t relative_step(std::int64_t step, std::int64_t base) noexcept {
    return static_cast<std::uint32_t>(step - base + std::int64_t{kStepBand});
  }

  /// The base for `step` when the base is `base`: unchanged while step is within its span, else
  /// step - kStepSpan / 2 (room for as many steps again as the rows keep behind it).
  [[nodiscard]] static std::int64_t base_for(std::int64_t base, std::int64_t step) noexcept {
    return step - base <= kStepSpan ? base : step - kStepSpan / 2;
  }

  /// The last step of resident row r.
  [[nodiscard]] std::int64_t step_of(Index r) const {
    const std::uint32_t v = meta_[static_cast<std::size_t>(r)].last;
    if (v >= kStepBand) return clock_.base + (std::int64_t{v} - std::int64_t{kStepBand});
    const auto at = std::lower_bound(
        ancient_.begin(), ancient_.end(), r,
        [](const AncientStep& a, Index row) { return static_cast<Index>(a.row) < row; });
    EMBER_ASSERT(at != ancient_.end() && static_cast<Index>(at->row) == r);
    return at->step;
  }

  /// Rebases the resident rows' last steps to `base` (>= the old base): rows last seen before it
  /// are ranked into the band below kStepBand. O(C + A log A) for A such rows.
  void rebase(std::int64_t base) {
    std::vector<AncientStep> steps;
    for (Index r = 0; r < capacity_; ++r)
      if (resident(r)) steps.push_back({static_cast<std::uint32_t>(r), step_of(r)});
    encode_steps(steps, base);
  }

  /// Sets every resident row's Stat::last from `steps` (row, step: every resident row once, each
  /// step <= clock_.last) against `base`, and clock_.base = base.
  void encode_steps(std::vector<AncientStep>& steps, std::int64_t base) {
    std::vector<AncientStep> ancient;
    for (const AncientStep& s : steps) {
      if (s.step < base) {
        ancient.push_back(s);
      } else {
        meta_[s.row].last = relative_step(s.step, base);
      }
    }
    std::sort(ancient.begin(), ancient.end(), [](const AncientStep& a, const AncientStep& b) {
      return a.step != b.step ? a.step < b.step : a.row < b.row;
    });
    std::uint32_t rank = 0;
    for (std::size_t i = 0; i < ancient.size(); ++i) {
      if (i > 0 && ancient[i].step != ancient[i - 1].step) ++rank;
      meta_[ancient[i].row].last = rank;
    }
    std::sort(ancient.begin(), ancient.end(),
              [](const AncientStep& a, const AncientStep& b) { return a.row < b.row; });
    ancient_ = std::move(ancient);
    clock_.base = base;
    invalidate_pool();
  }

  // ---- marks: rows touched (protected) or chosen in the current call ---------------------------

  [[nodiscard]] bool marked(Index r) const noexcept {
    return ((marks_[static_cast<std::size_t>(r >> 6)] >> (r & 63)) & 1U) != 0;
  }
  void mark(Index r) noexcept {
    marks_[static_cast<std::size_t>(r >> 6)] |= std::uint64_t{1} << (r & 63);
  }
  /// Marks row r without a branch; true when it was not marked yet (its first sighting).
  bool mark_first(Index r) noexcept {
    std::uint64_t& word = marks_[static_cast<std::size_t>(r >> 6)];
    const std::uint64_t bit = std::uint64_t{1} << (r & 63);
    const bool first = (word & bit) == 0;
    word |= bit;
    return first;
  }
  /// Puts back the sightings and steps the lookup pass wrote (a refused or dry-run batch).
  void restore_stats() noexcept {
    for (std::size_t t = 0; t < touched_.size(); ++t)
      meta_[static_cast<std::size_t>(touched_[t])] = saved_[t];
    restore_ = false;
  }
  void clear_marks() noexcept {
    if (touched_.size() > marks_.size() / 4) {  // scattered stores would cost more than a fill
      std::fill(marks_.begin(), marks_.end(), std::uint64_t{0});
      return;
    }
    for (const Index r : touched_) marks_[static_cast<std::size_t>(r >> 6)] = 0;
    for (const KeyRow& v : victims_) marks_[static_cast<std::size_t>(v.row >> 6)] = 0;
  }

  // ---- the lookup pass ------------------------------------------------------------------------

  /// Calls f(i, hash, row) for each key in order (row -1 when it has none), through a software
  /// pipeline (prefetching, as in Chen et al. 2004's group prefetching): key i + kSlotLead is
  /// hashed and its first slot asked for; at key i + kRowLead, whose slots have arrived by then,
  /// the slots alone name its candidate row (the first with its tag) and that row is asked for;
  /// key i is then settled by comparing its key with the candidate's, so a hit waits on no load
  /// that was not asked for ahead (tags that agree on another key, 1 in 2^(32 - row bits) a slot,
  /// fall back to the full probe).
  /// With `also` set, also[r] is asked for with row r's record (the scores the lookup pass writes).
  template <class F>
  void probe_all(std::span<const std::uint64_t> keys, F&& f, const double* also = nullptr) const {
    constexpr Index kSlotLead = 64, kRowLead = 32, kRing = 128;
    static_assert(kSlotLead < kRing && kRowLead < kSlotLead);
    const auto n = static_cast<Index>(keys.size());
    std::uint64_t h[kRing];
    Index cand[kRing];
    const auto hash = [&](Index i) {
      const std::uint64_t x = detail::mix_key(keys[static_cast<std::size_t>(i)]);
      h[i & (kRing - 1)] = x;
      slots_.prefetch(x);
    };
    const auto fetch_row = [&](Index i) {
      const Index r = slots_.candidate(h[i & (kRing - 1)]);
      cand[i & (kRing - 1)] = r;
      if (r >= 0) {
        prefetch_row(r);
#if defined(__GNUC__) || defined(__clang__)
        if (also != nullptr) __builtin_prefetch(also + r, 1, 3);
#endif
      }
    };
    for (Index i = 0; i < std::min(n, kSlotLead); ++i) hash(i);
    for (Index i = 0; i < std::min(n, kRowLead); ++i) fetch_row(i);
    for (Index i = 0; i < n; ++i) {
      if (i + kSlotLead < n) hash(i + kSlotLead);
      if (i + kRowLead < n) fetch_row(i + kRowLead);
      const std::uint64_t key = keys[static_cast<std::size_t>(i)];
      const std::uint64_t x = h[i & (kRing - 1)];
      Index r = cand[i & (kRing - 1)];
      if (r >= 0 && meta_[static_cast<std::size_t>(r)].key != key) r = slot_find(key, x);
      f(i, x, r);
    }
  }

  /// rows[i] = the row of keys[i], or the fallback row.
  void lookup(std::span<const std::uint64_t> keys, TokenId* rows) const {
    const TokenId miss = options_.fallback_row;
    probe_all(keys, [&](Index i, std::uint64_t, Index r) {
      rows[i] = r >= 0 ? static_cast<TokenId>(r) : miss;
    });
  }

  void prefetch_row(Index r) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(meta_.data() + r, 1, 3);
#else
    static_cast<void>(r);
#endif
  }

  // ---- prepare: everything a batch needs, without changing the index ---------------------------

  /// Looks the batch up, groups its new keys, decides their admission and checks the capacity;
  /// returns the rows needed at once. With `rows` null and not `hold` (a dry run) only the
  /// per-call scratch and marks change. Otherwise commit follows, and the lookup pass writes the
  /// hits' sightings and step while their records are in cache; when the batch could still be
  /// refused (or is held), saved_ keeps what they were (restored by MarkGuard or release_held),
  /// and when it cannot (it has no more keys than the rows it can be given), the hits' rows and,
  /// under EvictionPolicy::score, their scores go straight to `rows` and scores_, and nothing is
  /// saved.
  Index prepare(const char* where, std::span<const std::uint64_t> keys, TokenId* rows,
                std::int64_t step, std::span<const double> scores,
                std::span<const std::int64_t> counts, bool admit, bool hold = false) {
    const auto n = static_cast<Index>(keys.size());
    work_.resize(static_cast<std::size_t>(n));
    hashes_.resize(static_cast<std::size_t>(n));
    touched_.clear();
    touch_first_.clear();
    saved_.clear();
    victims_.clear();
    new_.clear();
    miss_at_.clear();
    // When the step would rebase the clock (or in a dry run), commit writes the hits instead.
    const std::int64_t base = clock_.origin < 0 ? step : clock_.base;
    fused_ = (rows != nullptr || hold) && step - base <= kStepSpan;
    const std::uint32_t now = fused_ ? relative_step(step, base) : 0;
    const bool evicting = admit && options_.policy != EvictionPolicy::none;
    const bool safe = n <= (evicting ? key_capacity() : key_capacity() - size_);
    direct_ = fused_ && safe && rows != nullptr;
    restore_ = fused_ && !direct_;
    const bool save = restore_;
    // Under undecayed lfu and under score, a hit only raises its row's order (a later step; more
    // sightings under lfu; under score the largest of its scores in the batch, or the old one
    // without scores), so a row above the threshold at its first sighting in the batch stays
    // above it: commit need offer only the rows of low_. (lru needs no sieve: commit's lru_above
    // skips the offers of a batch newer than the threshold.)
    const bool by_score = options_.policy == EvictionPolicy::score;
    const bool by_count = options_.policy == EvictionPolicy::lfu;
    sieved_ = fused_ && !decayed() && (by_score || by_count);
    sieve_tau_ = tau_;
    low_.clear();
    touched_.reserve(static_cast<std::size_t>(n));
    // touch_first_ serves the scores only; hashes_ the keys without a row only. A batch that
    // cannot be refused writes its hits' scores here, while their lines are in cache (the first
    // position's score, then the largest, as commit would).
    const bool scored = options_.policy == EvictionPolicy::score && !scores.empty();
    const bool scores_direct = scored && direct_;
    const bool keep_first = scored && !direct_;
    const auto body = [&](Index i, std::uint64_t h, Index r) {
      if (r < 0) {
        note_miss(i, h);
        return;
      }
      work_[static_cast<std::size_t>(i)] = r;
      if (direct_) rows[i] = static_cast<TokenId>(r);
      Stat& st = meta_[static_cast<std::size_t>(r)];
      const bool first = mark_first(r);
      if (first) {
        touched_.push_back(r);
        if (keep_first) touch_first_.push_back(i);
        if (save) saved_.push_back(st);
        if (fused_) st.last = now;
      }
      if (fused_) {
        st.count = saturating_add(
            st.count,
            counts.empty() ? 1 : static_cast<std::uint64_t>(counts[static_cast<std::size_t>(i)]));
      }
      if (scores_direct) {
        double& sc = scores_[static_cast<std::size_t>(r)];
        const double s = scores[static_cast<std::size_t>(i)];
        sc = first ? s : std::max(sc, s);
      }
      if (first && sieved_) {
        const std::uint64_t p = by_score
                                    ? score_order(scored ? scores[static_cast<std::size_t>(i)]
                                                         : scores_[static_cast<std::size_t>(r)])
                                    : st.count;
        sieve(p, st, r);
      }
    };
    if (direct_ && !decayed() && (!by_score || scored)) {
      if (by_score) {
        probe_direct<DirectOrder::score>(keys, rows, now, scores, counts);
      } else if (sieved_) {
        probe_direct<DirectOrder::count>(keys, rows, now, scores, counts);
      } else {
        probe_direct<DirectOrder::step>(keys, rows, now, scores, counts);
      }
    } else {
      probe_all(keys, body, scores_direct ? scores_.data() : nullptr);
    }
    misses_ = static_cast<Index>(miss_at_.size());
    group_new_keys(keys, scores, counts);
    const int halvings = pending_halvings(step);
    admitted_ = 0;
    for (NewKey& k : new_) {
      k.admitted = !admit || !admission() ||
                   std::min<std::uint64_t>(sketch_.estimate(k.key, halvings) + k.sightings,
                                           detail::CountSketch::max_count) >=
                       static_cast<std::uint64_t>(options_.min_count);
      if (k.admitted) ++admitted_;
    }
    const Index free_rows = key_capacity() - size_;
    const bool evicts = admit && options_.policy != EvictionPolicy::none;
    const Index evictable = evicts ? size_ - static_cast<Index>(touched_.size()) : 0;
    const Index held = evicts ? static_cast<Index>(touched_.size()) : size_;
    const Index needed = held + admitted_;
    if (admitted_ > free_rows + evictable) {
      throw CapacityError(
          evicts ? detail::message(where, "the batch needs ", needed, " rows at once (",
                                   touched_.size(), " of its keys resident, ", admitted_,
                                   " new), capacity ", key_capacity())
                 : detail::message(where, "the batch needs ", needed, " rows at once (",
                                   touched_.size(), " of its keys resident, ", admitted_,
                                   " new, no eviction: ", size_, " keys resident), capacity ",
                                   key_capacity()),
          key_capacity(), needed);
    }
    return needed;
  }

  /// What moves a row in the eviction order, for probe_direct: the step alone (lru, none), the
  /// sightings too (lfu without decay), or the batch's scores (score).
  enum class DirectOrder { step, count, score };

  /// The lookup pass of a batch that cannot be refused (direct_), without decay, with scores
  /// under EvictionPolicy::score: what `body` in prepare() does for such a batch, without its
  /// run-time switches, so that each key costs few enough instructions for the out-of-order
  /// window to hold the prefetches of the keys ahead (1.1-1.2x more keys a second at a 90-99% hit
  /// rate than the general pass). work_ gets the misses only: commit reads nothing else of it
  /// without decay when the batch cannot be refused. Under the count and score orders a hit at or
  /// below sieve_tau_ at its first position joins low_ (sieve).
  template <DirectOrder Order>
  void probe_direct(std::span<const std::uint64_t> keys, TokenId* rows, std::uint32_t now,
                    std::span<const double> scores, std::span<const std::int64_t> counts) {
    touched_.resize(keys.size());
    Index* const touched = touched_.data();
    Stat* const meta = meta_.data();
    double* const row_scores = Order == DirectOrder::score ? scores_.data() : nullptr;
    std::size_t distinct = 0;
    probe_all(
        keys,
        [&](Index i, std::uint64_t h, Index r) {
          const auto at = static_cast<std::size_t>(i);
          if (r < 0) {
            note_miss(i, h);
            return;
          }
          rows[at] = static_cast<TokenId>(r);
          const auto u = static_cast<std::size_t>(r);
          const bool first = mark_first(r);
          touched[distinct] = r;
          distinct += first ? 1 : 0;
          Stat& st = meta[u];
          st.last = now;  // the same value at every position of the key
          st.count =
              saturating_add(st.count, counts.empty() ? 1 : static_cast<std::uint64_t>(counts[at]));
          if constexpr (Order == DirectOrder::count) {
            if (first) sieve(st.count, st, r);
          }
          if constexpr (Order == DirectOrder::score) {
            double& score = row_scores[u];
            const double s = scores[at];
            score = first ? s : std::max(score, s);
            if (first) sieve(score_order(s), st, r);
          }
        },
        row_scores);
    touched_.resize(distinct);
  }

  /// The lookup pass's sieve: row r (record st, primary order value p after this sighting) joins
  /// low_ when it is at or below sieve_tau_.
  void sieve(std::uint64_t p, const Stat& st, Index r) {
    if (!less(sieve_tau_, Candidate{p, st.last, static_cast<std::uint32_t>(r), st.key}))
      low_.push_back(r);
  }

  /// Position i (hash h) holds a key without a row: group_new_keys() takes it from here.
  void note_miss(Index i, std::uint64_t h) {
    work_[static_cast<std::size_t>(i)] = -1;
    hashes_[static_cast<std::size_t>(i)] = h;
    miss_at_.push_back(i);
  }

  /// new_ = the distinct keys of the batch without a row, in order of first position, with their
  /// sightings and largest score; work_[i] = -(their index + 2) at their positions.
  void group_new_keys(std::span<const std::uint64_t> keys, std::span<const double> scores,
                      std::span<const std::int64_t> counts) {
    if (misses_ == 0) return;
    const auto want = std::bit_ceil(static_cast<std::uint64_t>(misses_) * 2);
    if (group_.size() < want) {
      group_.assign(static_cast<std::size_t>(want), GroupSlot{0, 0, 0});
      stamp_ = 0;
    }
    if (++stamp_ == 0) {
      for (GroupSlot& g : group_) g.stamp = 0;
      stamp_ = 1;
    }
    const std::uint64_t mask = group_.size() - 1;
    constexpr std::size_t ahead = 8;  // slots asked for before they are probed
    for (std::size_t j = 0; j < miss_at_.size(); ++j) {
#if defined(__GNUC__) || defined(__clang__)
      if (j + ahead < miss_at_.size()) {
        const std::uint64_t next = hashes_[static_cast<std::size_t>(miss_at_[j + ahead])];
        __builtin_prefetch(group_.data() + (next & mask), 1, 3);
      }
#endif
      const Index i = miss_at_[j];
      auto& w = work_[static_cast<std::size_t>(i)];
      const std::uint64_t key = keys[static_cast<std::size_t>(i)];
      const std::uint64_t h = hashes_[static_cast<std::size_t>(i)];
      auto p = static_cast<std::size_t>(h & mask);
      Index u = -1;
      while (group_[p].stamp == stamp_) {
        if (group_[p].key == key) {
          u = static_cast<Index>(group_[p].index);
          break;
        }
        p = (p + 1) & mask;
      }
      const std::uint64_t c =
          counts.empty() ? 1 : static_cast<std::uint64_t>(counts[static_cast<std::size_t>(i)]);
      const double s = scores.empty() ? 0.0 : scores[static_cast<std::size_t>(i)];
      if (u < 0) {
        u = static_cast<Index>(new_.size());
        group_[p] = GroupSlot{key, stamp_, static_cast<std::uint32_t>(u)};
        new_.push_back({key, h, c, s, i, -1, false});
      } else {
        NewKey& k = new_[static_cast<std::size_t>(u)];
        k.sightings += c;
        k.score = std::max(k.score, s);
      }
      w = -(u + 2);
    }
  }

  /// Halvings of the sketch owed at `step` (0 without a sketch half-life).
  [[nodiscard]] int pending_halvings(std::int64_t step) const noexcept {
    if (!admission() || options_.sketch_half_life <= 0) return 0;
    const std::int64_t origin = clock_.origin < 0 ? step : clock_.origin;
    const std::int64_t due = (step - origin) / options_.sketch_half_life;
    return static_cast<int>(std::min<std::int64_t>(due - clock_.sketch_epoch, 16));
  }

  // ---- commit: the batch's changes ------------------------------------------------------------

  InsertResult commit(std::span<const std::uint64_t> keys, std::span<TokenId> rows,
                      std::int64_t step, std::span<const double> scores,
                      std::span<const std::int64_t> counts, bool evicts) {
    advance_clock(step);
    const auto n = static_cast<Index>(keys.size());
    const std::uint32_t now = relative_step(step, clock_.base);
    const bool has_decay = decayed();
    const std::int64_t now_epoch = epoch(step);
    if (admission()) {
      for (const NewKey& k : new_) sketch_.add(k.key, k.sightings);
    }
    // Hits: sightings and the step (unless the lookup pass wrote them), decayed weights.
    restore_ = false;
    const Index hits = static_cast<Index>(keys.size()) - misses_;
    if (!fused_ || has_decay) {
      for (Index i = 0; i < n; ++i) {
        const TokenId r = work_[static_cast<std::size_t>(i)];
        if (r < 0) continue;
        const std::uint64_t c =
            counts.empty() ? 1 : static_cast<std::uint64_t>(counts[static_cast<std::size_t>(i)]);
        if (!fused_) {
          Stat& st = meta_[static_cast<std::size_t>(r)];
          st.count = saturating_add(st.count, c);
        }
        if (has_decay) {
          std::uint64_t& d = decay_[static_cast<std::size_t>(r)];
          d = detail::DecayedCount::add(d, c, now_epoch);
        }
      }
    }
    // A batch that cannot be refused (direct_) had its hits' scores written by the lookup pass.
    if (options_.policy == EvictionPolicy::score && !scores.empty() && !direct_) {
      for (std::size_t t = 0; t < touched_.size(); ++t)
        scores_[static_cast<std::size_t>(touched_[t])] =
            scores[static_cast<std::size_t>(touch_first_[t])];
      for (Index i = 0; i < n; ++i) {
        const TokenId r = work_[static_cast<std::size_t>(i)];
        if (r < 0) continue;
        double& s = scores_[static_cast<std::size_t>(r)];
        s = std::max(s, scores[static_cast<std::size_t>(i)]);
      }
    }
    if (!fused_) {
      for (const Index r : touched_) meta_[static_cast<std::size_t>(r)].last = now;
    }
    // Victims, then rows for the admitted keys in order of first position.
    const Index free_rows = key_capacity() - size_;
    if (evicts && admitted_ > free_rows) {
      choose_victims(admitted_ - free_rows);
      trim_pool();
    }
    evicted_.clear();
    added_.clear();
    std::size_t next_victim = 0;
    constexpr std::size_t kLead = 8;
    for (std::size_t u = 0; u < new_.size(); ++u) {
      NewKey& k = new_[u];
      if (u + kLead < new_.size()) slots_.prefetch(new_[u + kLead].hash);
      if (next_victim + kLead < victims_.size())
        slots_.prefetch(detail::mix_key(victims_[next_victim + kLead].key));
      if (!k.admitted) continue;
      Index r = 0;
      if (size_ < key_capacity()) {
        r = take_free();
        ++size_;
      } else {
        const KeyRow v = victims_[next_victim++];
        r = static_cast<Index>(v.row);
        slots_.erase(detail::mix_key(v.key), r);
        evicted_.push_back(v);
      }
      const auto at = static_cast<std::size_t>(r);
      meta_[at] = Stat{k.key, now, saturating_add(0, k.sightings)};
      if (has_decay) decay_[at] = detail::DecayedCount::first(k.sightings, now_epoch);
      if (options_.policy == EvictionPolicy::score) scores_[at] = k.score;
      slots_.insert(k.hash, r);
      k.row = static_cast<TokenId>(r);
      added_.push_back({k.key, k.row});
    }
    // Rows whose place in the order changed may now fall below the candidates' threshold.
    // (Under lru every key of the batch is now at this step, above a threshold of older steps.)
    const bool lru_above =
        (options_.policy == EvictionPolicy::lru || options_.policy == EvictionPolicy::none) &&
        tau_.primary == 0 && now > tau_.last;
    if (pool_valid_ && !lru_above) {
      // low_ holds every touched row at or below sieve_tau_, so it covers a threshold that
      // stayed or fell (a trim); one that rose (a scan in choose_victims) needs them all.
      const bool sieve_covers = sieved_ && !less(sieve_tau_, tau_);
      for (const Index r : sieve_covers ? low_ : touched_) offer(r);
      for (const NewKey& k : new_)
        if (k.row >= 0) offer(static_cast<Index>(k.row));
    }
    InsertResult result;
    result.hits = hits;
    const auto settle = [&](Index i) {
      const TokenId w = work_[static_cast<std::size_t>(i)];
      if (w >= 0) {
        rows[static_cast<std::size_t>(i)] = w;
        return;
      }
      const NewKey& k = new_[static_cast<std::size_t>(-w - 2)];
      if (k.row >= 0) {
        rows[static_cast<std::size_t>(i)] = k.row;
      } else {
        rows[static_cast<std::size_t>(i)] = options_.fallback_row;
        ++result.fallbacks;
      }
    };
    if (direct_) {  // the lookup pass wrote the hits' rows
      for (const Index i : miss_at_) settle(i);
    } else {
      for (Index i = 0; i < n; ++i) settle(i);
    }
    result.inserted = admitted_;
    result.evicted = evicted_;
    result.added = added_;
    if (slots_.crowded()) rebuild_slots();
    return result;
  }

  static std::uint32_t saturating_add(std::uint32_t a, std::uint64_t b) noexcept {
    return static_cast<std::uint32_t>(
        std::min<std::uint64_t>(std::uint64_t{a} + b, std::numeric_limits<std::uint32_t>::max()));
  }

  /// Moves the index's clocks to `step` (validated: step >= clock_.last): the first step sets the
  /// origin and the base; a step past the base's span rebases the rows' last steps (rebase), and
  /// the sketch is halved as its half-life says. Decayed counts carry their own exponents
  /// (detail::DecayedCount), so nothing is rescaled.
  void advance_clock(std::int64_t step) {
    if (clock_.origin < 0) {
      clock_.origin = step;
      clock_.base = step;
    }
    if (const std::int64_t base = base_for(clock_.base, step); base != clock_.base) rebase(base);
    const int h = pending_halvings(step);
    if (h > 0) {
      sketch_.halve(h);
      clock_.sketch_epoch = (step - clock_.origin) / options_.sketch_half_life;
    }
    clock_.last = step;
  }

  /// The lowest free row (free_ holds freed rows below next_unused_, as a min-heap).
  Index take_free() {
    if (!free_.empty()) {
      std::pop_heap(free_.begin(), free_.end(), std::greater<>());
      const Index r = free_.back();
      free_.pop_back();
      return r;
    }
    if (next_unused_ == reserved_) ++next_unused_;
    return next_unused_++;
  }

  /// Frees row r (its slot already erased).
  void release(Index r) {
    meta_[static_cast<std::size_t>(r)] = Stat{};
    meta_[static_cast<std::size_t>(r)].key = 0;
    if (decayed()) decay_[static_cast<std::size_t>(r)] = 0;
    if (options_.policy == EvictionPolicy::score) scores_[static_cast<std::size_t>(r)] = 0.0;
    free_.push_back(static_cast<std::int32_t>(r));
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
    --size_;
  }

  /// Rewrites the slots from the live rows (purging the tombstones), each row's first slot asked
  /// for kLead rows ahead: the inserts land all over the table.
  void rebuild_slots() {
    slots_.clear();
    constexpr Index kLead = 16;
    std::uint64_t h[kLead];
    for (Index r = 0; r < std::min(kLead, capacity_); ++r) {
      h[r] = detail::mix_key(meta_[static_cast<std::size_t>(r)].key);
      slots_.prefetch(h[r]);
    }
    for (Index r = 0; r < capacity_; ++r) {
      const std::uint64_t x = h[r % kLead];
      if (r + kLead < capacity_) {
        std::uint64_t& ahead = h[r % kLead];
        ahead = detail::mix_key(meta_[static_cast<std::size_t>(r + kLead)].key);
        slots_.prefetch(ahead);
      }
      if (resident(r)) slots_.insert(x, r);
    }
  }

  // ---- eviction candidates --------------------------------------------------------------------
  //
  // pool_ holds every evictable key whose order is <= tau_ (the largest entry of pool_, set by
  // the last scan, fold or trim); late_ (a min-heap) the keys that fell to or below tau_ since.
  // Every other resident key is above tau_, so the smallest valid candidate is the smallest
  // evictable key. An entry is stale once its key's order changed, its key left, or its row was
  // reused: popping skips it. Under score pool_ is sorted lazily (lru and lfu sort it whole, see
  // reset_pool): [0, pool_sorted_) is sorted and holds the smallest entries, the rest is in no
  // order until popping reaches it (a batch consumes a few hundred to a few thousand of about
  // C/12); pool_next_ <= pool_sorted_ is the next to pop. When late_ outgrows its bound it is
  // folded into pool_, which keeps the smallest pool_target() entries and lowers tau_ to the
  // largest of them, instead of a scan of every row.

  void invalidate_pool() noexcept {
    pool_.clear();
    late_.clear();
    pool_next_ = 0;
    pool_sorted_ = 0;
    pool_valid_ = false;
  }

  /// pool_ has just been filled (unsorted): tau_ = its largest entry, nothing popped. Under lru
  /// and lfu it is sorted whole now: their tuples share most bytes (a radix sort of a few passes)
  /// and eviction mostly consumes them before the next scan; a score's 8 bytes all vary, and at a
  /// high hit rate the heap's traffic refreshes the pool long before eviction reaches its end.
  void reset_pool() {
    tau_ = *std::max_element(pool_.begin(), pool_.end(), Less{});
    pool_next_ = 0;
    pool_sorted_ = 0;
    pool_chunk_ = std::max<std::size_t>(512, pool_target() / 32);
    if (options_.policy != EvictionPolicy::score) {
      sort_candidates(pool_.data(), pool_.size());
      pool_sorted_ = pool_.size();
    }
  }

  /// Extends the sorted prefix of pool_ by the smallest pool_chunk_ unsorted entries (the chunk
  /// doubling each time, so the total cost stays proportional to a full sort at worst).
  void sort_more() {
    const std::size_t rest = pool_.size() - pool_sorted_;
    const std::size_t take = std::min(rest, pool_chunk_);
    pool_chunk_ *= 2;
    const auto first = pool_.begin() + static_cast<std::ptrdiff_t>(pool_sorted_);
    if (take < rest)
      std::nth_element(first, first + static_cast<std::ptrdiff_t>(take), pool_.end(), Less{});
    sort_candidates(pool_.data() + pool_sorted_, take);
    pool_sorted_ += take;
  }

  /// Moves late_ into pool_ (late_ outgrew its bound): the smallest pool_target() of the unpopped
  /// pool entries and the late ones stay, unsorted, and tau_ drops to the largest of them. Every
  /// evictable key at or below the new tau_ was in pool_ or late_, so it is in pool_ now.
  void fold_late() {
    pool_.erase(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_));
    pool_.insert(pool_.end(), late_.begin(), late_.end());
    late_.clear();
    const std::size_t keep = std::min(pool_.size(), pool_target());
    if (keep < pool_.size()) {
      std::nth_element(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(keep),
                       pool_.end(), Less{});
      pool_.resize(keep);
    }
    reset_pool();
  }

  [[nodiscard]] bool current(const Candidate& c) const noexcept {
    const auto u = static_cast<std::size_t>(c.row);
    return meta_[u].count != 0 && meta_[u].key == c.key && meta_[u].last == c.last &&
           primary(static_cast<Index>(c.row)) == c.primary;
  }

  void offer(Index r) {
    const Candidate c = candidate(r);
    if (!less(tau_, c)) {
      late_.push_back(c);
      std::push_heap(late_.begin(), late_.end(), Greater{});
      if (late_.size() > std::max<std::size_t>(1024, pool_target() / 4)) fold_late();
    }
  }

  bool pop_candidate(Candidate& out) {
    const bool has_pool = pool_next_ < pool_.size();
    const bool has_late = !late_.empty();
    if (!has_pool && !has_late) return false;
    if (has_pool && pool_next_ == pool_sorted_) sort_more();
    if (has_pool && (!has_late || less(pool_[pool_next_], late_.front()))) {
      out = pool_[pool_next_++];
      return true;
    }
    out = late_.front();
    std::pop_heap(late_.begin(), late_.end(), Greater{});
    late_.pop_back();
    return true;
  }

  /// Keeps the candidates' memory near pool_target() after a batch that needed many: the smallest
  /// pool_target() remaining candidates stay, the threshold drops to the largest of them, and
  /// late entries above it go (the keys they name are above the threshold, where a scan finds
  /// them).
  void trim_pool() {
    const std::size_t limit = 2 * pool_target();
    if (pool_.capacity() <= limit && late_.capacity() <= limit) return;
    const std::size_t keep = std::min(pool_.size() - pool_next_, pool_target());
    if (keep == 0) {
      invalidate_pool();
      std::vector<Candidate>().swap(pool_);
      std::vector<Candidate>().swap(late_);
      return;
    }
    // The smallest `keep` remaining: the sorted ones, then the smallest of the unsorted rest.
    const std::size_t end = pool_next_ + keep;
    if (end > pool_sorted_ && end < pool_.size()) {
      std::nth_element(pool_.begin() + static_cast<std::ptrdiff_t>(pool_sorted_),
                       pool_.begin() + static_cast<std::ptrdiff_t>(end), pool_.end(), Less{});
    }
    std::vector<Candidate> kept(pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_),
                                pool_.begin() + static_cast<std::ptrdiff_t>(end));
    tau_ = *std::max_element(kept.begin(), kept.end(), Less{});
    const std::size_t sorted = std::min(pool_sorted_, end) - pool_next_;
    std::vector<Candidate> late;
    for (const Candidate& c : late_)
      if (!less(tau_, c)) late.push_back(c);
    std::make_heap(late.begin(), late.end(), Greater{});
    pool_.swap(kept);
    late_.swap(late);
    pool_next_ = 0;
    pool_sorted_ = sorted;
    EMBER_ASSERT(within_tau());
  }

  /// True when no entry of pool_ left to pop is above tau_ (the candidates' invariant).
  [[nodiscard]] bool within_tau() const noexcept {
    return std::none_of(pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_), pool_.end(),
                        [this](const Candidate& c) { return less(tau_, c); });
  }

  [[nodiscard]] std::size_t pool_target() const noexcept {
    return static_cast<std::size_t>(std::max<Index>(256, key_capacity() / 12));
  }

  /// victims_ = the `need` smallest evictable keys (resident, not touched by the batch), in
  /// order; each is marked so a duplicate entry is never chosen twice.
  void choose_victims(Index need) {
    constexpr std::size_t kLead = 8;
    while (static_cast<Index>(victims_.size()) < need) {
      if (pool_next_ + kLead < pool_sorted_) prefetch_row(pool_[pool_next_ + kLead].row);
      Candidate c;
      if (!pool_valid_ || !pop_candidate(c)) {
        scan(need - static_cast<Index>(victims_.size()));
        continue;
      }
      if (!current(c) || marked(static_cast<Index>(c.row))) continue;
      mark(static_cast<Index>(c.row));
      victims_.push_back({c.key, static_cast<TokenId>(c.row)});
    }
  }

  /// Rebuilds the candidates: at least `need` (and about pool_target()) of the smallest
  /// evictable keys, all of those at or below the new threshold.
  void scan(Index need) {
    invalidate_pool();
    const std::size_t target = std::max<std::size_t>(pool_target(), static_cast<std::size_t>(need));
    const Index evictable =
        size_ - static_cast<Index>(touched_.size()) - static_cast<Index>(victims_.size());
    EMBER_ASSERT(evictable >= need);
    // An estimate of the threshold from a strided sample of the rows.
    bool everything = static_cast<std::size_t>(evictable) <= target + target / 2;
    Candidate guess;
    if (!everything) {
      sample_.clear();
      const Index stride = std::max<Index>(1, capacity_ / 4096);
      for (Index r = 0; r < capacity_; r += stride)
        if (resident(r) && !marked(r)) sample_.push_back(candidate(r));
      const double share = static_cast<double>(target) * 1.25 / static_cast<double>(evictable);
      const auto q = static_cast<std::size_t>(share * static_cast<double>(sample_.size()));
      if (sample_.empty() || q + 1 >= sample_.size()) {
        everything = true;
      } else {
        std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(q),
                         sample_.end(), Less{});
        guess = sample_[q];
      }
    }
    pool_.clear();
    with_primary([&](auto primary_of) {
      for (Index r = 0; r < capacity_; ++r) {
        const Stat& st = meta_[static_cast<std::size_t>(r)];
        if (st.count == 0) continue;  // not resident
        const std::uint64_t p = primary_of(r);
        // Cheap rejections on the primary value and the last step first.
        if (!everything && (p > guess.primary || (p == guess.primary && st.last > guess.last)))
          continue;
        if (marked(r)) continue;
        const Candidate c{p, st.last, static_cast<std::uint32_t>(r), st.key};
        if (everything || !less(guess, c)) pool_.push_back(c);
      }
    });
    if (static_cast<Index>(pool_.size()) < need) {
      // The sample guessed too low: take every evictable key.
      pool_.clear();
      for (Index r = 0; r < capacity_; ++r)
        if (resident(r) && !marked(r)) pool_.push_back(candidate(r));
    }
    if (pool_.size() > target) {
      std::nth_element(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(target - 1),
                       pool_.end(), Less{});
      pool_.resize(target);
    }
    if (pool_.capacity() > pool_.size() + pool_.size() / 4 + 64) pool_.shrink_to_fit();
    reset_pool();
    pool_valid_ = true;
  }

  /// Sorts data[0, n) by less(): a least-significant-digit radix sort over the 20 bytes of
  /// (primary, last, key), skipping the bytes all candidates share (under lru the primary is 0 and
  /// the steps and keys' high bytes mostly agree), through a buffer freed on return. Candidates
  /// that less() does not order are equal in every field but the row, and at most one of them is
  /// current (a key has one row), so whichever comes first the same victims are chosen.
  static void sort_candidates(Candidate* data, std::size_t n) {
    if (n < 1024) {
      std::sort(data, data + n, Less{});
      return;
    }
    const Candidate& f = data[0];
    std::uint64_t vary_key = 0, vary_primary = 0;
    std::uint32_t vary_last = 0;
    for (const Candidate& c : std::span<const Candidate>(data, n)) {
      vary_key |= c.key ^ f.key;
      vary_last |= c.last ^ f.last;
      vary_primary |= c.primary ^ f.primary;
    }
    std::vector<Candidate> buffer(n);
    Candidate* from = data;
    Candidate* to = buffer.data();
    std::size_t start[256];
    const auto pass = [&](auto field, std::uint64_t vary, int bytes) {
      for (int b = 0; b < bytes; ++b) {
        const int shift = 8 * b;
        if (((vary >> shift) & 0xFF) == 0) continue;
        std::fill(std::begin(start), std::end(start), std::size_t{0});
        for (std::size_t i = 0; i < n; ++i) ++start[(field(from[i]) >> shift) & 0xFF];
        std::size_t sum = 0;
        for (std::size_t& c : start) sum += std::exchange(c, sum);
        for (std::size_t i = 0; i < n; ++i) to[start[(field(from[i]) >> shift) & 0xFF]++] = from[i];
        std::swap(from, to);
      }
    };
    pass([](const Candidate& c) { return c.key; }, vary_key, 8);
    pass([](const Candidate& c) -> std::uint64_t { return c.last; }, vary_last, 4);
    pass([](const Candidate& c) { return c.primary; }, vary_primary, 8);
    if (from != data) std::copy(from, from + n, data);
  }

  // ---- resize and restore helpers -------------------------------------------------------------

  void copy_clocks(const KeyIndex& o) noexcept { clock_ = o.clock_; }

  /// Puts key of row `from` of `o` on row `to` (this index is being built; finish_adopt after).
  void adopt(Index to, const KeyIndex& o, Index from) {
    const auto t = static_cast<std::size_t>(to);
    const auto f = static_cast<std::size_t>(from);
    meta_[t] = o.meta_[f];
    if (meta_[t].last < kStepBand)
      ancient_.push_back({static_cast<std::uint32_t>(to), o.step_of(from)});
    if (decayed()) decay_[t] = o.decay_[f];
    if (options_.policy == EvictionPolicy::score) scores_[t] = o.scores_[f];
    slots_.insert(detail::mix_key(meta_[t].key), to);
    ++size_;
  }

  /// After adopting: the free rows are the rows not taken, lowest first.
  void finish_adopt() {
    std::sort(ancient_.begin(), ancient_.end(),
              [](const AncientStep& a, const AncientStep& b) { return a.row < b.row; });
    free_.clear();
    Index top = 0;
    for (Index r = 0; r < capacity_; ++r)
      if (resident(r)) top = r + 1;
    next_unused_ = top;
    for (Index r = 0; r < top; ++r)
      if (!resident(r) && r != reserved_) free_.push_back(static_cast<std::int32_t>(r));
    std::make_heap(free_.begin(), free_.end(), std::greater<>());
    invalidate_pool();
  }

  Index capacity_;
  KeyIndexOptions options_;
  Index reserved_ = -1;
  detail::HugePageVector<Stat> meta_;
  std::vector<AncientStep> ancient_;  // rows last seen before clock_.base, ascending rows
  detail::HugePageVector<std::uint64_t> decay_;  // decayed lfu: detail::DecayedCount values
  detail::HugePageVector<double> scores_;
  detail::KeySlots slots_;
  detail::CountSketch sketch_;
  Index size_ = 0;
  Index next_unused_ = 0;
  std::vector<std::int32_t> free_;
  KeyIndexClocks clock_;
  // Eviction candidates.
  std::vector<Candidate> pool_;
  std::size_t pool_next_ = 0;
  std::size_t pool_sorted_ = 0;
  std::size_t pool_chunk_ = 0;
  std::vector<Candidate> late_;
  Candidate tau_;
  bool pool_valid_ = false;
  // Per-call scratch.
  std::vector<std::uint64_t> marks_;
  std::vector<TokenId> work_;
  std::vector<std::uint64_t> hashes_;
  std::vector<Index> touched_;
  std::vector<Index> touch_first_;
  std::vector<Stat> saved_;
  bool fused_ = true;    // the lookup pass writes the hits' records
  bool direct_ = false;  // ... and their rows: the batch cannot be refused
  bool restore_ = false;
  bool held_ = false;
  bool sieved_ = false;  // low_ holds the touched rows that may be at or below sieve_tau_
  Candidate sieve_tau_;  // tau_ when the lookup pass sieved
  std::vector<Index> low_;
  Index misses_ = 0;
  std::vector<NewKey> new_;
  Index admitted_ = 0;
  std::vector<KeyRow> victims_;
  std::vector<KeyRow> evicted_;
  std::vector<KeyRow> added_;
  std::vector<Candidate> sample_;
  /// One slot of the batch's table of new keys: the key beside its stamp, so a probe reads one
  /// line (stamp != stamp_ is an empty slot; bumping stamp_ empties the table).
  struct GroupSlot {
    std::uint64_t key;
    std::uint32_t stamp;
    std::uint32_t index;
  };
  std::vector<GroupSlot> group_;
  std::vector<Index> miss_at_;  // the batch's positions without a row, ascending
  std::uint32_t stamp_ = 0;
};

namespace detail {

/// ember's keyed layers' door into KeyIndex's held batches (not for users): a layer mapping one
/// batch into several indexes holds each index that could refuse it, then commits them all, so
/// a refusal changes nothing and no batch is looked up twice.
struct KeyIndexHold {
  /// The batches held in one map call: each one not committed when the scope ends (a refusal
  /// anywhere, an exception) is released, its index left as before the hold.
  class Scope {
   public:
    Scope() = default;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      for (KeyIndex* ix : held_) ix->release_held();
    }
    /// KeyIndex::hold: checks the batch and keeps its lookups for commit(); throws what
    /// find_or_insert would throw, the index unchanged.
    Index hold(KeyIndex& ix, std::span<const std::uint64_t> keys, std::int64_t step,
               std::span<const double> scores = {}, std::span<const std::int64_t> counts = {}) {
      held_.push_back(&ix);
      return ix.hold(keys, step, scores, counts);
    }

   private:
    std::vector<KeyIndex*> held_;
  };
  static InsertResult commit(KeyIndex& ix, std::span<const std::uint64_t> keys,
                             std::span<TokenId> rows, std::int64_t step,
                             std::span<const double> scores = {},
                             std::span<const std::int64_t> counts = {}) {
    return ix.commit_held(keys, rows, step, scores, counts);
  }
  [[nodiscard]] static bool held(const KeyIndex& ix) noexcept { return ix.held_; }
};

}  // namespace detail

}  // namespace ember::inline EMBER_ISA
