/// detail::KeyIndexState: what a KeyIndex keeps between calls (each row's key, last step and
/// sightings, the slots, the admission sketch, the free rows and the clocks) and the queries and
/// row moves that the batch planner, the eviction order and resize share.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/huge_pages.hpp"
#include "ember/keys/detail/count_sketch.hpp"
#include "ember/keys/detail/decayed_count.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/keys/detail/step_clock.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// a + b, saturating at the largest uint32 (a row's sightings).
[[nodiscard]] inline std::uint32_t saturating_add(std::uint32_t a, std::uint64_t b) noexcept {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(std::uint64_t{a} + b, std::numeric_limits<std::uint32_t>::max()));
}

/// The state of a KeyIndex over rows [0, capacity_). KeyIndex derives from it privately, so its
/// members are KeyIndex's own (hence their trailing underscores), under the names that KeyIndex's
/// internal doors use (detail::KeyIndexAccess, which rebuilds an index from a checkpoint). The
/// parts that change it (batch_planner.hpp, eviction_order.hpp, resize.hpp) take it by
/// reference; KeyIndex validated their inputs.
struct KeyIndexState {
  /// A row's key, last step (StepClock) and sightings, in one 16-byte record (one cache line read
  /// per hit); count == 0 marks a free row.
  struct Stat {
    std::uint64_t key = 0;
    std::uint32_t last = 0;
    std::uint32_t count = 0;
  };
  using AncientStep = detail::AncientStep;

  /// An empty state (capacity and options validated by KeyIndex).
  KeyIndexState(Index capacity, const KeyIndexOptions& options)
      : capacity_(capacity),
        options_(options),
        reserved_(options.fallback_row >= 0 && options.fallback_row < capacity
                      ? static_cast<Index>(options.fallback_row)
                      : -1) {
    meta_.assign(static_cast<std::size_t>(capacity), Stat{});
    if (decayed()) decay_.assign(static_cast<std::size_t>(capacity), 0);
    if (options.policy == EvictionPolicy::score)
      scores_.assign(static_cast<std::size_t>(capacity), 0.0);
    slots_.reset(capacity);
    if (admission()) sketch_.reset(sketch_width_for(capacity, options.sketch_width));
  }

  /// The admission sketch's width for `requested` (KeyIndexOptions::sketch_width).
  static Index sketch_width_for(Index capacity, Index requested) {
    const Index w = requested > 0 ? requested : capacity;
    return static_cast<Index>(std::bit_ceil(static_cast<std::uint64_t>(std::max<Index>(w, 64))));
  }

  [[nodiscard]] bool admission() const noexcept { return options_.min_count > 1; }
  [[nodiscard]] bool decayed() const noexcept {
    return options_.policy == EvictionPolicy::lfu && options_.lfu_half_life > 0;
  }
  /// Rows keys may hold (KeyIndex::key_capacity).
  [[nodiscard]] Index key_capacity() const noexcept { return capacity_ - (reserved_ >= 0 ? 1 : 0); }

  // ---- rows -----------------------------------------------------------------------------------

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

  [[nodiscard]] KeyEntry entry_of(Index r) const {
    const auto u = static_cast<std::size_t>(r);
    KeyEntry e;
    e.key = meta_[u].key;
    e.row = static_cast<TokenId>(r);
    e.count = meta_[u].count;
    e.last_step = step_of(r);
    switch (options_.policy) {
      case EvictionPolicy::lfu:
        e.score = decayed() ? DecayedCount::value_at(decay_[u], epoch(clock_.last))
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

  void prefetch_row(Index r) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(meta_.data() + r, 1, 3);
#else
    static_cast<void>(r);
#endif
  }

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
      const std::uint64_t x = mix_key(keys[static_cast<std::size_t>(i)]);
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
      h[r] = mix_key(meta_[static_cast<std::size_t>(r)].key);
      slots_.prefetch(h[r]);
    }
    for (Index r = 0; r < capacity_; ++r) {
      const std::uint64_t x = h[r % kLead];
      if (r + kLead < capacity_) {
        std::uint64_t& ahead = h[r % kLead];
        ahead = mix_key(meta_[static_cast<std::size_t>(r + kLead)].key);
        slots_.prefetch(ahead);
      }
      if (resident(r)) slots_.insert(x, r);
    }
  }

  /// Puts the key of row `from` of `o` on row `to` (this state is being built; finish_adopt
  /// after).
  void adopt(Index to, const KeyIndexState& o, Index from) {
    const auto t = static_cast<std::size_t>(to);
    const auto f = static_cast<std::size_t>(from);
    meta_[t] = o.meta_[f];
    if (meta_[t].last < StepClock::band)
      ancient_.push_back({static_cast<std::uint32_t>(to), o.step_of(from)});
    if (decayed()) decay_[t] = o.decay_[f];
    if (options_.policy == EvictionPolicy::score) scores_[t] = o.scores_[f];
    slots_.insert(mix_key(meta_[t].key), to);
    ++size_;
  }

  /// After adopting: the free rows are the rows not taken, lowest first.
  void finish_adopt() {
    StepClock::sort_by_row(ancient_);
    free_.clear();
    Index top = 0;
    for (Index r = 0; r < capacity_; ++r)
      if (resident(r)) top = r + 1;
    next_unused_ = top;
    for (Index r = 0; r < top; ++r)
      if (!resident(r) && r != reserved_) free_.push_back(static_cast<std::int32_t>(r));
    std::make_heap(free_.begin(), free_.end(), std::greater<>());
  }

  // ---- clocks ---------------------------------------------------------------------------------

  /// The last step of resident row r.
  [[nodiscard]] std::int64_t step_of(Index r) const {
    return StepClock::step_of(meta_[static_cast<std::size_t>(r)].last, r, clock_.base, ancient_);
  }

  /// The base for `step` when the base is `base` (StepClock::base_for).
  [[nodiscard]] static std::int64_t base_for(std::int64_t base, std::int64_t step) noexcept {
    return StepClock::base_for(base, step);
  }

  /// Sets every resident row's last value from `steps` (row, step: every resident row once, each
  /// step <= clock_.last) against `base`, and clock_.base = base. The rows' order values change:
  /// the caller drops the eviction candidates.
  void encode_steps(std::span<const AncientStep> steps, std::int64_t base) {
    ancient_ = StepClock::encode(
        steps, base, [this](std::uint32_t row, std::uint32_t v) { meta_[row].last = v; });
    clock_.base = base;
  }

  /// Rebases the resident rows' last steps to `base` (>= the old base): rows last seen before it
  /// are ranked into the band below StepClock::band. O(C + A log A) for A such rows.
  void rebase(std::int64_t base) {
    std::vector<AncientStep> steps;
    for (Index r = 0; r < capacity_; ++r)
      if (resident(r)) steps.push_back({static_cast<std::uint32_t>(r), step_of(r)});
    encode_steps(steps, base);
  }

  /// Moves the clocks to `step` (validated: step >= clock_.last): the first step sets the origin
  /// and the base; a step past the base's span rebases the rows' last steps, and the sketch is
  /// halved as its half-life says. Decayed counts carry their own exponents (DecayedCount), so
  /// nothing is rescaled. True when it rebased (the eviction candidates are then stale).
  [[nodiscard]] bool advance_clock(std::int64_t step) {
    if (clock_.origin < 0) {
      clock_.origin = step;
      clock_.base = step;
    }
    bool rebased = false;
    if (const std::int64_t base = base_for(clock_.base, step); base != clock_.base) {
      rebase(base);
      rebased = true;
    }
    const int h = pending_halvings(step);
    if (h > 0) {
      sketch_.halve(h);
      clock_.sketch_epoch = (step - clock_.origin) / options_.sketch_half_life;
    }
    clock_.last = step;
    return rebased;
  }

  /// Halvings of the sketch owed at `step` (0 without a sketch half-life).
  [[nodiscard]] int pending_halvings(std::int64_t step) const noexcept {
    if (!admission() || options_.sketch_half_life <= 0) return 0;
    const std::int64_t origin = clock_.origin < 0 ? step : clock_.origin;
    const std::int64_t due = (step - origin) / options_.sketch_half_life;
    return static_cast<int>(std::min<std::int64_t>(due - clock_.sketch_epoch, 16));
  }

  /// The decay epoch of step s (lfu with a half-life): floor((s - origin) / half_life).
  [[nodiscard]] std::int64_t epoch(std::int64_t s) const noexcept {
    if (!decayed() || clock_.origin < 0) return 0;
    return (s - clock_.origin) / options_.lfu_half_life;
  }

  Index capacity_;
  KeyIndexOptions options_;
  Index reserved_ = -1;  // the fallback row when it is inside [0, capacity_), else -1
  HugePageVector<Stat> meta_;
  std::vector<AncientStep> ancient_;     // rows last seen before clock_.base, ascending rows
  HugePageVector<std::uint64_t> decay_;  // decayed lfu: DecayedCount values
  HugePageVector<double> scores_;
  KeySlots slots_;
  CountSketch sketch_;
  Index size_ = 0;
  Index next_unused_ = 0;
  std::vector<std::int32_t> free_;
  KeyIndexClocks clock_;
};

}  // namespace ember::inline EMBER_ISA::detail
