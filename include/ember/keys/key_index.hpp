/// KeyIndex: a capacity-bounded, collision-free map from raw 64-bit keys to the rows [0, capacity)
/// of a table, with admission by count, exact and deterministic eviction, and a report of every
/// (key, row) it evicts.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/errors.hpp"
#include "ember/keys/detail/batch_planner.hpp"
#include "ember/keys/detail/count_sketch.hpp"
#include "ember/keys/detail/decayed_count.hpp"
#include "ember/keys/detail/eviction_order.hpp"
#include "ember/keys/detail/key_index_state.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/keys/detail/resize.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

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
class KeyIndex : private detail::KeyIndexState {
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
      : KeyIndexState(checked(capacity, options), options), batch_(capacity) {}

  // ---- shape and options ----------------------------------------------------------------------

  /// Rows [0, capacity()) the index maps keys into (a reserved fallback row included).
  [[nodiscard]] Index capacity() const noexcept { return capacity_; }
  /// Rows keys may hold: capacity(), minus one with a reserved fallback row.
  [[nodiscard]] Index key_capacity() const noexcept { return KeyIndexState::key_capacity(); }
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
    CallGuard guard(*this);
    batch_.prepare(*this, order_, where, keys, rows.data(), step, scores, counts, true);
    return batch_.commit(*this, order_, keys, rows, step, scores, counts, true);
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
    CallGuard guard(*this);
    return batch_.prepare(*this, order_, where, keys, nullptr, step, scores, counts, true);
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
    CallGuard guard(*this);
    batch_.prepare(*this, order_, where, keys, rows.data(), step, {}, {}, false);
    return batch_.commit(*this, order_, keys, rows, step, {}, {}, false);
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
    KeyIndex next(capacity, o);
    ResizeResult result = detail::resize_into(*this, next);
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
           slots_.bytes() + bytes(free_) + order_.bytes() + batch_.marks_bytes();
  }
  /// Bytes of the admission sketch (0 without admission).
  [[nodiscard]] std::size_t sketch_bytes() const noexcept { return sketch_.bytes(); }
  /// Bytes of per-call scratch, about 70 per key of the largest batch so far.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return batch_.bytes() + order_.scratch_bytes();
  }

 private:
  // KeyIndex checks every input at its doors, then hands it to its parts under keys/detail/: the
  // state it derives from (key_index_state.hpp, with the rows' step clock in step_clock.hpp), the
  // batch planner (batch_planner.hpp: prepare, then commit), the eviction order
  // (eviction_order.hpp) and resize (resize.hpp).

  template <class V>
  static std::size_t bytes(const V& v) noexcept {
    return v.capacity() * sizeof(typename V::value_type);
  }

  friend struct detail::KeyIndexAccess;
  friend struct detail::KeyIndexHold;

  /// Ends every call that reached the planner (BatchPlanner::end), on every exit; a held batch
  /// keeps its marks and saved records until commit_held or release_held.
  struct CallGuard {
    KeyIndex& ix;
    bool keep = false;
    explicit CallGuard(KeyIndex& index) : ix(index) {}
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;
    ~CallGuard() {
      if (!keep) ix.batch_.end(ix);
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
    CallGuard guard(*this);
    const Index needed =
        batch_.prepare(*this, order_, where, keys, nullptr, step, scores, counts, true, true);
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
    CallGuard guard(*this);
    return batch_.commit(*this, order_, keys, rows, step, scores, counts, true);
  }
  /// Drops a held batch (the index is as before hold()).
  void release_held() noexcept {
    if (!held_) return;
    held_ = false;
    batch_.end(*this);
  }

  // ---- validation -----------------------------------------------------------------------------

  /// The checks of (capacity, options) the constructor and resize throw from (and the
  /// checkpoint's door, before it builds an index).
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

  /// capacity, once validate(capacity, o) passed (the state is built after the check).
  static Index checked(Index capacity, const KeyIndexOptions& o) {
    validate(capacity, o);
    return capacity;
  }

  /// The checks of a batch (find_or_insert, check_insert, insert, hold), before anything changes:
  /// sizes, scores, counts and the step. `rows` null: no rows to check (a dry run or a hold).
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

  detail::EvictionOrder order_;
  detail::BatchPlanner batch_;
  bool held_ = false;  // a batch is held (hold() until commit_held or release_held)
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
