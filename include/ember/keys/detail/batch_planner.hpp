/// detail::BatchPlanner: how a KeyIndex maps one batch in two phases, prepare (look every key up,
/// group the new ones, decide their admission, check the capacity: nothing observable changes)
/// and commit (count, evict, give rows, report), over the index's state and eviction order.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/keys/detail/count_sketch.hpp"
#include "ember/keys/detail/decayed_count.hpp"
#include "ember/keys/detail/eviction_order.hpp"
#include "ember/keys/detail/key_index_state.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/keys/detail/new_keys.hpp"
#include "ember/keys/detail/row_marks.hpp"
#include "ember/keys/detail/step_clock.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The per-call scratch of a KeyIndex and the two phases of a batch. KeyIndex validates the batch
/// (keys, rows, scores, counts, step) at its door, then calls prepare, then (unless it was a dry
/// run) commit with the same arguments, and end() on every exit: a batch refused by prepare, or
/// held and released, leaves the state as it was. Between prepare and commit only const members
/// of the index may run (a held batch keeps its lookups and marks).
class BatchPlanner {
 public:
  BatchPlanner() = default;
  /// The scratch of an index over rows [0, capacity).
  explicit BatchPlanner(Index capacity) : marks_(capacity) {}

  /// Looks the batch up, groups its new keys, decides their admission and checks the capacity;
  /// returns the rows needed at once. With `rows` null and not `hold` (a dry run) only the
  /// per-call scratch and marks change. Otherwise commit follows, and the lookup pass writes the
  /// hits' sightings and step while their records are in cache; when the batch could still be
  /// refused (or is held), saved_ keeps what they were (restored by end()), and when it cannot (it
  /// has no more keys than the rows it can be given), the hits' rows and, under
  /// EvictionPolicy::score, their scores go straight to `rows` and s.scores_, and nothing is
  /// saved.
  /// Throws:  CapacityError (as KeyIndex::find_or_insert, naming `where`).
  Index prepare(KeyIndexState& s, const EvictionOrder& order, const char* where,
                std::span<const std::uint64_t> keys, TokenId* rows, std::int64_t step,
                std::span<const double> scores, std::span<const std::int64_t> counts, bool admit,
                bool hold = false) {
    const auto n = static_cast<Index>(keys.size());
    work_.resize(static_cast<std::size_t>(n));
    hashes_.resize(static_cast<std::size_t>(n));
    touched_.clear();
    touch_first_.clear();
    saved_.clear();
    victims_.clear();
    miss_at_.clear();
    // When the step would rebase the clock (or in a dry run), commit writes the hits instead.
    const std::int64_t base = s.clock_.origin < 0 ? step : s.clock_.base;
    fused_ = (rows != nullptr || hold) && step - base <= StepClock::span;
    const std::uint32_t now = fused_ ? StepClock::relative(step, base) : 0;
    const bool evicting = admit && s.options_.policy != EvictionPolicy::none;
    const bool safe = n <= (evicting ? s.key_capacity() : s.key_capacity() - s.size_);
    direct_ = fused_ && safe && rows != nullptr;
    restore_ = fused_ && !direct_;
    const bool save = restore_;
    // Under undecayed lfu and under score, a hit only raises its row's order (a later step; more
    // sightings under lfu; under score the largest of its scores in the batch, or the old one
    // without scores), so a row above the threshold at its first sighting in the batch stays
    // above it: commit need offer only the rows of low_. (lru needs no sieve: commit's lru_above
    // skips the offers of a batch newer than the threshold.)
    const bool by_score = s.options_.policy == EvictionPolicy::score;
    const bool by_count = s.options_.policy == EvictionPolicy::lfu;
    sieved_ = fused_ && !s.decayed() && (by_score || by_count);
    sieve_tau_ = order.threshold();
    low_.clear();
    touched_.reserve(static_cast<std::size_t>(n));
    // touch_first_ serves the scores only; hashes_ the keys without a row only. A batch that
    // cannot be refused writes its hits' scores here, while their lines are in cache (the first
    // position's score, then the largest, as commit would).
    const bool scored = by_score && !scores.empty();
    const bool scores_direct = scored && direct_;
    const bool keep_first = scored && !direct_;
    const auto body = [&](Index i, std::uint64_t h, Index r) {
      if (r < 0) {
        note_miss(i, h);
        return;
      }
      work_[static_cast<std::size_t>(i)] = r;
      if (direct_) rows[i] = static_cast<TokenId>(r);
      KeyIndexState::Stat& st = s.meta_[static_cast<std::size_t>(r)];
      const bool first = marks_.mark_first(r);
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
        double& sc = s.scores_[static_cast<std::size_t>(r)];
        const double x = scores[static_cast<std::size_t>(i)];
        sc = first ? x : std::max(sc, x);
      }
      if (first && sieved_) {
        const std::uint64_t p = by_score
                                    ? score_order(scored ? scores[static_cast<std::size_t>(i)]
                                                         : s.scores_[static_cast<std::size_t>(r)])
                                    : st.count;
        sieve(p, st, r);
      }
    };
    if (direct_ && !s.decayed() && (!by_score || scored)) {
      if (by_score) {
        probe_direct<DirectOrder::score>(s, keys, rows, now, scores, counts);
      } else if (sieved_) {
        probe_direct<DirectOrder::count>(s, keys, rows, now, scores, counts);
      } else {
        probe_direct<DirectOrder::step>(s, keys, rows, now, scores, counts);
      }
    } else {
      s.probe_all(keys, body, scores_direct ? s.scores_.data() : nullptr);
    }
    misses_ = static_cast<Index>(miss_at_.size());
    new_.group(keys, scores, counts, miss_at_, hashes_, work_);
    const int halvings = s.pending_halvings(step);
    admitted_ = 0;
    for (NewKey& k : new_.items()) {
      k.admitted = !admit || !s.admission() ||
                   std::min<std::uint64_t>(s.sketch_.estimate(k.key, halvings) + k.sightings,
                                           CountSketch::max_count) >=
                       static_cast<std::uint64_t>(s.options_.min_count);
      if (k.admitted) ++admitted_;
    }
    const Index free_rows = s.key_capacity() - s.size_;
    const bool evicts = admit && s.options_.policy != EvictionPolicy::none;
    const Index evictable = evicts ? s.size_ - static_cast<Index>(touched_.size()) : 0;
    const Index held = evicts ? static_cast<Index>(touched_.size()) : s.size_;
    const Index needed = held + admitted_;
    if (admitted_ > free_rows + evictable) {
      throw CapacityError(
          evicts
              ? message(where, "the batch needs ", needed, " rows at once (", touched_.size(),
                        " of its keys resident, ", admitted_, " new), capacity ", s.key_capacity())
              : message(where, "the batch needs ", needed, " rows at once (", touched_.size(),
                        " of its keys resident, ", admitted_, " new, no eviction: ", s.size_,
                        " keys resident), capacity ", s.key_capacity()),
          s.key_capacity(), needed);
    }
    return needed;
  }

  /// Applies the batch prepare checked (the same arguments, `rows` now given): counts the
  /// sightings, moves the clocks, evicts, gives the admitted keys rows in order of first
  /// position, offers the rows that moved in the order to the candidates, and writes `rows`.
  /// The spans of the result point into this planner.
  InsertResult commit(KeyIndexState& s, EvictionOrder& order, std::span<const std::uint64_t> keys,
                      std::span<TokenId> rows, std::int64_t step, std::span<const double> scores,
                      std::span<const std::int64_t> counts, bool evicts) {
    if (s.advance_clock(step)) order.invalidate();
    const auto n = static_cast<Index>(keys.size());
    const std::uint32_t now = StepClock::relative(step, s.clock_.base);
    const bool has_decay = s.decayed();
    const std::int64_t now_epoch = s.epoch(step);
    std::vector<NewKey>& fresh = new_.items();
    if (s.admission()) {
      for (const NewKey& k : fresh) s.sketch_.add(k.key, k.sightings);
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
          KeyIndexState::Stat& st = s.meta_[static_cast<std::size_t>(r)];
          st.count = saturating_add(st.count, c);
        }
        if (has_decay) {
          std::uint64_t& d = s.decay_[static_cast<std::size_t>(r)];
          d = DecayedCount::add(d, c, now_epoch);
        }
      }
    }
    // A batch that cannot be refused (direct_) had its hits' scores written by the lookup pass.
    if (s.options_.policy == EvictionPolicy::score && !scores.empty() && !direct_) {
      for (std::size_t t = 0; t < touched_.size(); ++t)
        s.scores_[static_cast<std::size_t>(touched_[t])] =
            scores[static_cast<std::size_t>(touch_first_[t])];
      for (Index i = 0; i < n; ++i) {
        const TokenId r = work_[static_cast<std::size_t>(i)];
        if (r < 0) continue;
        double& x = s.scores_[static_cast<std::size_t>(r)];
        x = std::max(x, scores[static_cast<std::size_t>(i)]);
      }
    }
    if (!fused_) {
      for (const Index r : touched_) s.meta_[static_cast<std::size_t>(r)].last = now;
    }
    // Victims, then rows for the admitted keys in order of first position.
    const Index free_rows = s.key_capacity() - s.size_;
    if (evicts && admitted_ > free_rows) {
      order.choose_victims(s, marks_, admitted_ - free_rows, static_cast<Index>(touched_.size()),
                           victims_);
      order.trim(s);
    }
    evicted_.clear();
    added_.clear();
    std::size_t next_victim = 0;
    constexpr std::size_t kLead = 8;
    for (std::size_t u = 0; u < fresh.size(); ++u) {
      NewKey& k = fresh[u];
      if (u + kLead < fresh.size()) s.slots_.prefetch(fresh[u + kLead].hash);
      if (next_victim + kLead < victims_.size())
        s.slots_.prefetch(mix_key(victims_[next_victim + kLead].key));
      if (!k.admitted) continue;
      Index r = 0;
      if (s.size_ < s.key_capacity()) {
        r = s.take_free();
        ++s.size_;
      } else {
        const KeyRow v = victims_[next_victim++];
        r = static_cast<Index>(v.row);
        s.slots_.erase(mix_key(v.key), r);
        evicted_.push_back(v);
      }
      const auto at = static_cast<std::size_t>(r);
      s.meta_[at] = KeyIndexState::Stat{k.key, now, saturating_add(0, k.sightings)};
      if (has_decay) s.decay_[at] = DecayedCount::first(k.sightings, now_epoch);
      if (s.options_.policy == EvictionPolicy::score) s.scores_[at] = k.score;
      s.slots_.insert(k.hash, r);
      k.row = static_cast<TokenId>(r);
      added_.push_back({k.key, k.row});
    }
    // Rows whose place in the order changed may now fall below the candidates' threshold.
    // (Under lru every key of the batch is now at this step, above a threshold of older steps.)
    const Candidate& tau = order.threshold();
    const bool lru_above =
        (s.options_.policy == EvictionPolicy::lru || s.options_.policy == EvictionPolicy::none) &&
        tau.primary == 0 && now > tau.last;
    if (order.valid() && !lru_above) {
      // low_ holds every touched row at or below sieve_tau_, so it covers a threshold that
      // stayed or fell (a trim); one that rose (a scan in choose_victims) needs them all.
      const bool sieve_covers = sieved_ && !Candidate::less(sieve_tau_, tau);
      for (const Index r : sieve_covers ? low_ : touched_) order.offer(s, r);
      for (const NewKey& k : fresh)
        if (k.row >= 0) order.offer(s, static_cast<Index>(k.row));
    }
    InsertResult result;
    result.hits = hits;
    const auto settle = [&](Index i) {
      const TokenId w = work_[static_cast<std::size_t>(i)];
      if (w >= 0) {
        rows[static_cast<std::size_t>(i)] = w;
        return;
      }
      const NewKey& k = fresh[static_cast<std::size_t>(-w - 2)];
      if (k.row >= 0) {
        rows[static_cast<std::size_t>(i)] = k.row;
      } else {
        rows[static_cast<std::size_t>(i)] = s.options_.fallback_row;
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
    if (s.slots_.crowded()) s.rebuild_slots();
    return result;
  }

  /// Ends a call: puts back the sightings and steps a refused, dry-run or released batch's lookup
  /// pass wrote, and clears the marks.
  void end(KeyIndexState& s) noexcept {
    if (restore_) {
      for (std::size_t t = 0; t < touched_.size(); ++t)
        s.meta_[static_cast<std::size_t>(touched_[t])] = saved_[t];
      restore_ = false;
    }
    marks_.clear(touched_, victims_);
  }

  /// Bytes of the marks (part of KeyIndex::memory_bytes).
  [[nodiscard]] std::size_t marks_bytes() const noexcept { return marks_.bytes(); }
  /// Bytes of the per-call scratch (KeyIndex::scratch_bytes, with the order's sample).
  [[nodiscard]] std::size_t bytes() const noexcept {
    return bytes_of(work_) + bytes_of(hashes_) + bytes_of(touched_) + bytes_of(low_) +
           bytes_of(touch_first_) + bytes_of(saved_) + new_.bytes() + bytes_of(victims_) +
           bytes_of(evicted_) + bytes_of(added_) + bytes_of(miss_at_);
  }

 private:
  template <class V>
  static std::size_t bytes_of(const V& v) noexcept {
    return v.capacity() * sizeof(typename V::value_type);
  }

  /// What moves a row in the eviction order, for probe_direct: the step alone (lru, none), the
  /// sightings too (lfu without decay), or the batch's scores (score).
  enum class DirectOrder { step, count, score };

  /// The lookup pass of a batch that cannot be refused (direct_), without decay, with scores
  /// under EvictionPolicy::score: what `body` in prepare() does for such a batch, without its
  /// run-time switches, so that each key costs few enough instructions for the out-of-order
  /// window to hold the prefetches of the keys ahead. work_ gets the misses only: commit reads
  /// nothing else of it without decay when the batch cannot be refused. Under the count and score
  /// orders a hit at or below sieve_tau_ at its first position joins low_ (sieve).
  template <DirectOrder Order>
  void probe_direct(KeyIndexState& s, std::span<const std::uint64_t> keys, TokenId* rows,
                    std::uint32_t now, std::span<const double> scores,
                    std::span<const std::int64_t> counts) {
    touched_.resize(keys.size());
    Index* const touched = touched_.data();
    KeyIndexState::Stat* const meta = s.meta_.data();
    double* const row_scores = Order == DirectOrder::score ? s.scores_.data() : nullptr;
    std::size_t distinct = 0;
    s.probe_all(
        keys,
        [&](Index i, std::uint64_t h, Index r) {
          const auto at = static_cast<std::size_t>(i);
          if (r < 0) {
            note_miss(i, h);
            return;
          }
          rows[at] = static_cast<TokenId>(r);
          const auto u = static_cast<std::size_t>(r);
          const bool first = marks_.mark_first(r);
          touched[distinct] = r;
          distinct += first ? 1 : 0;
          KeyIndexState::Stat& st = meta[u];
          st.last = now;  // the same value at every position of the key
          st.count =
              saturating_add(st.count, counts.empty() ? 1 : static_cast<std::uint64_t>(counts[at]));
          if constexpr (Order == DirectOrder::count) {
            if (first) sieve(st.count, st, r);
          }
          if constexpr (Order == DirectOrder::score) {
            double& score = row_scores[u];
            const double x = scores[at];
            score = first ? x : std::max(score, x);
            if (first) sieve(score_order(x), st, r);
          }
        },
        row_scores);
    touched_.resize(distinct);
  }

  /// The lookup pass's sieve: row r (record st, primary order value p after this sighting) joins
  /// low_ when it is at or below sieve_tau_.
  void sieve(std::uint64_t p, const KeyIndexState::Stat& st, Index r) {
    if (!Candidate::less(sieve_tau_, Candidate{p, st.last, static_cast<std::uint32_t>(r), st.key}))
      low_.push_back(r);
  }

  /// Position i (hash h) holds a key without a row: new_.group() takes it from here.
  void note_miss(Index i, std::uint64_t h) {
    work_[static_cast<std::size_t>(i)] = -1;
    hashes_[static_cast<std::size_t>(i)] = h;
    miss_at_.push_back(i);
  }

  RowMarks marks_;             // rows touched (protected) or chosen in the current call
  std::vector<TokenId> work_;  // per position: its row, -1 (a miss), or -(new key + 2)
  std::vector<std::uint64_t> hashes_;
  std::vector<Index> touched_;  // the batch's resident rows, in order of first position
  std::vector<Index> touch_first_;
  std::vector<KeyIndexState::Stat> saved_;
  bool fused_ = true;    // the lookup pass writes the hits' records
  bool direct_ = false;  // ... and their rows: the batch cannot be refused
  bool restore_ = false;
  bool sieved_ = false;  // low_ holds the touched rows that may be at or below sieve_tau_
  Candidate sieve_tau_;  // the order's threshold when the lookup pass sieved
  std::vector<Index> low_;
  Index misses_ = 0;
  NewKeys new_;
  Index admitted_ = 0;
  std::vector<KeyRow> victims_;
  std::vector<KeyRow> evicted_;
  std::vector<KeyRow> added_;
  std::vector<Index> miss_at_;  // the batch's positions without a row, ascending
};

}  // namespace ember::inline EMBER_ISA::detail
