/// detail::EvictionOrder: the eviction candidates of a KeyIndex (the smallest resident keys in the
/// policy's order, sorted as far as eviction reaches, and a heap of keys that fell below them
/// since), from which a batch takes its victims exactly in the policy's order.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/keys/detail/key_index_state.hpp"
#include "ember/keys/detail/row_marks.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// A key's place in the eviction order: (primary, last, key) ascending, with its row. `primary`
/// is the policy's score as an order value (EvictionOrder::primary), `last` the row's
/// StepClock value.
struct Candidate {
  std::uint64_t primary = 0;
  std::uint32_t last = 0;
  std::uint32_t row = 0;
  std::uint64_t key = 0;

  /// The eviction order: a before b.
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
};

/// A score as an unsigned order value: ascending with the score, -0 equal to +0.
[[nodiscard]] inline std::uint64_t score_order(double score) noexcept {
  const auto b = std::bit_cast<std::uint64_t>(score + 0.0);  // -0 -> +0 above
  return (b >> 63) != 0 ? ~b : (b | (std::uint64_t{1} << 63));
}

/// The candidates of one KeyIndex. pool_ holds every evictable key whose order is <= tau_ (the
/// largest entry of pool_, set by the last scan, fold or trim); late_ (a min-heap) the keys that
/// fell to or below tau_ since. Every other resident key is above tau_, so the smallest valid
/// candidate is the smallest evictable key. An entry is stale once its key's order changed, its
/// key left, or its row was reused: popping skips it. Under score pool_ is sorted lazily (lru and
/// lfu sort it whole, see reset): [0, pool_sorted_) is sorted and holds the smallest entries, the
/// rest is in no order until popping reaches it (a batch consumes a few hundred to a few thousand
/// of about C/12); pool_next_ <= pool_sorted_ is the next to pop. When late_ outgrows its bound it
/// is folded into pool_, which keeps the smallest pool_target() entries and lowers tau_ to the
/// largest of them, instead of a scan of every row.
///
/// The rows are the caller's KeyIndexState, passed to each call; the candidates stay valid across
/// calls until the rows' last values are re-encoded (StepClock rebase, restore, resize), when the
/// owner calls invalidate().
class EvictionOrder {
 public:
  /// f(primary_of), primary_of(r) being the policy's primary order value of row r without the
  /// policy's switch, for loops over every row.
  template <class F>
  static decltype(auto) with_primary(const KeyIndexState& s, F&& f) {
    switch (s.options_.policy) {
      case EvictionPolicy::lfu:
        if (s.decayed()) {
          return f(
              [&s](Index r) -> std::uint64_t { return s.decay_[static_cast<std::size_t>(r)]; });
        }
        return f(
            [&s](Index r) -> std::uint64_t { return s.meta_[static_cast<std::size_t>(r)].count; });
      case EvictionPolicy::score:
        return f([&s](Index r) -> std::uint64_t {
          return score_order(s.scores_[static_cast<std::size_t>(r)]);
        });
      default:
        return f([](Index) -> std::uint64_t { return 0; });
    }
  }
  /// The policy's primary order value of row r (ascending = evicted first).
  [[nodiscard]] static std::uint64_t primary(const KeyIndexState& s, Index r) noexcept {
    return with_primary(s, [r](auto primary_of) { return primary_of(r); });
  }
  /// Row r's place in the order.
  [[nodiscard]] static Candidate candidate(const KeyIndexState& s, Index r) noexcept {
    const auto u = static_cast<std::size_t>(r);
    return {primary(s, r), s.meta_[u].last, static_cast<std::uint32_t>(r), s.meta_[u].key};
  }

  /// Forgets the candidates (the next choose_victims scans the rows).
  void invalidate() noexcept {
    pool_.clear();
    late_.clear();
    pool_next_ = 0;
    pool_sorted_ = 0;
    pool_valid_ = false;
  }
  /// True when the candidates hold (offer keeps them so).
  [[nodiscard]] bool valid() const noexcept { return pool_valid_; }
  /// tau_: every evictable key at or below it is a candidate.
  [[nodiscard]] const Candidate& threshold() const noexcept { return tau_; }

  /// Row r's place in the order changed (it was seen, or it got a key): it joins the late heap
  /// if it fell to or below the threshold. Small, so that the loops of commit inline the test;
  /// most rows stay above the threshold.
  EMBER_ALWAYS_INLINE void offer(const KeyIndexState& s, Index r) {
    const Candidate c = candidate(s, r);
    if (!Candidate::less(tau_, c)) add_late(s, c);
  }

  /// victims = the `need` smallest evictable keys (resident, neither marked nor among the
  /// `touched` rows the batch marked), in order; each is marked so a duplicate entry is never
  /// chosen twice.
  void choose_victims(const KeyIndexState& s, RowMarks& marks, Index need, Index touched,
                      std::vector<KeyRow>& victims) {
    constexpr std::size_t kLead = 8;
    while (static_cast<Index>(victims.size()) < need) {
      if (pool_next_ + kLead < pool_sorted_) s.prefetch_row(pool_[pool_next_ + kLead].row);
      Candidate c;
      if (!pool_valid_ || !pop(c)) {
        scan(s, marks, need - static_cast<Index>(victims.size()),
             s.size_ - touched - static_cast<Index>(victims.size()));
        continue;
      }
      if (!current(s, c) || marks.marked(static_cast<Index>(c.row))) continue;
      marks.mark(static_cast<Index>(c.row));
      victims.push_back({c.key, static_cast<TokenId>(c.row)});
    }
  }

  /// Keeps the candidates' memory near pool_target() after a batch that needed many: the smallest
  /// pool_target() remaining candidates stay, the threshold drops to the largest of them, and
  /// late entries above it go (the keys they name are above the threshold, where a scan finds
  /// them).
  void trim(const KeyIndexState& s) {
    const std::size_t limit = 2 * pool_target(s);
    if (pool_.capacity() <= limit && late_.capacity() <= limit) return;
    const std::size_t keep = std::min(pool_.size() - pool_next_, pool_target(s));
    if (keep == 0) {
      invalidate();
      std::vector<Candidate>().swap(pool_);
      std::vector<Candidate>().swap(late_);
      return;
    }
    // The smallest `keep` remaining: the sorted ones, then the smallest of the unsorted rest.
    const std::size_t end = pool_next_ + keep;
    if (end > pool_sorted_ && end < pool_.size()) {
      std::nth_element(pool_.begin() + static_cast<std::ptrdiff_t>(pool_sorted_),
                       pool_.begin() + static_cast<std::ptrdiff_t>(end), pool_.end(),
                       Candidate::Less{});
    }
    std::vector<Candidate> kept(pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_),
                                pool_.begin() + static_cast<std::ptrdiff_t>(end));
    tau_ = *std::max_element(kept.begin(), kept.end(), Candidate::Less{});
    const std::size_t sorted = std::min(pool_sorted_, end) - pool_next_;
    std::vector<Candidate> late;
    for (const Candidate& c : late_)
      if (!Candidate::less(tau_, c)) late.push_back(c);
    std::make_heap(late.begin(), late.end(), Candidate::Greater{});
    pool_.swap(kept);
    late_.swap(late);
    pool_next_ = 0;
    pool_sorted_ = sorted;
    EMBER_ASSERT(within_tau());
  }

  /// Sorts data[0, n) by Candidate::less: a least-significant-digit radix sort over the 20 bytes
  /// of (primary, last, key), skipping the bytes all candidates share (under lru the primary is 0
  /// and the steps and keys' high bytes mostly agree), through a buffer freed on return.
  /// Candidates that less does not order are equal in every field but the row, and at most one of
  /// them is current (a key has one row), so whichever comes first the same victims are chosen.
  static void sort_candidates(Candidate* data, std::size_t n) {
    if (n < 1024) {
      std::sort(data, data + n, Candidate::Less{});
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

  /// Bytes of the candidates (part of KeyIndex::memory_bytes).
  [[nodiscard]] std::size_t bytes() const noexcept {
    return (pool_.capacity() + late_.capacity()) * sizeof(Candidate);
  }
  /// Bytes of the scan's sample (part of KeyIndex::scratch_bytes).
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return sample_.capacity() * sizeof(Candidate);
  }

 private:
  /// About C/12 candidates for C key rows: a batch's evictions rarely exhaust them.
  [[nodiscard]] static std::size_t pool_target(const KeyIndexState& s) noexcept {
    return static_cast<std::size_t>(std::max<Index>(256, s.key_capacity() / 12));
  }

  /// offer's rarer half: c joins the late heap, folded into the pool when it outgrows its bound.
  void add_late(const KeyIndexState& s, const Candidate& c) {
    late_.push_back(c);
    std::push_heap(late_.begin(), late_.end(), Candidate::Greater{});
    if (late_.size() > std::max<std::size_t>(1024, pool_target(s) / 4)) fold_late(s);
  }

  /// pool_ has just been filled (unsorted): tau_ = its largest entry, nothing popped. Under lru
  /// and lfu it is sorted whole now: their tuples share most bytes (a radix sort of a few passes)
  /// and eviction mostly consumes them before the next scan; a score's 8 bytes all vary, and at a
  /// high hit rate the heap's traffic refreshes the pool long before eviction reaches its end.
  void reset(const KeyIndexState& s) {
    tau_ = *std::max_element(pool_.begin(), pool_.end(), Candidate::Less{});
    pool_next_ = 0;
    pool_sorted_ = 0;
    pool_chunk_ = std::max<std::size_t>(512, pool_target(s) / 32);
    if (s.options_.policy != EvictionPolicy::score) {
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
    if (take < rest) {
      std::nth_element(first, first + static_cast<std::ptrdiff_t>(take), pool_.end(),
                       Candidate::Less{});
    }
    sort_candidates(pool_.data() + pool_sorted_, take);
    pool_sorted_ += take;
  }

  /// Moves late_ into pool_ (late_ outgrew its bound): the smallest pool_target() of the unpopped
  /// pool entries and the late ones stay, unsorted, and tau_ drops to the largest of them. Every
  /// evictable key at or below the new tau_ was in pool_ or late_, so it is in pool_ now.
  void fold_late(const KeyIndexState& s) {
    pool_.erase(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_));
    pool_.insert(pool_.end(), late_.begin(), late_.end());
    late_.clear();
    const std::size_t keep = std::min(pool_.size(), pool_target(s));
    if (keep < pool_.size()) {
      std::nth_element(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(keep),
                       pool_.end(), Candidate::Less{});
      pool_.resize(keep);
    }
    reset(s);
  }

  /// True when c still describes its row: the same key, resident, in the same place.
  [[nodiscard]] static bool current(const KeyIndexState& s, const Candidate& c) noexcept {
    const auto u = static_cast<std::size_t>(c.row);
    return s.meta_[u].count != 0 && s.meta_[u].key == c.key && s.meta_[u].last == c.last &&
           primary(s, static_cast<Index>(c.row)) == c.primary;
  }

  /// The smallest candidate left, from the pool or the late heap; false when both are empty.
  bool pop(Candidate& out) {
    const bool has_pool = pool_next_ < pool_.size();
    const bool has_late = !late_.empty();
    if (!has_pool && !has_late) return false;
    if (has_pool && pool_next_ == pool_sorted_) sort_more();
    if (has_pool && (!has_late || Candidate::less(pool_[pool_next_], late_.front()))) {
      out = pool_[pool_next_++];
      return true;
    }
    out = late_.front();
    std::pop_heap(late_.begin(), late_.end(), Candidate::Greater{});
    late_.pop_back();
    return true;
  }

  /// True when no entry of pool_ left to pop is above tau_ (the candidates' invariant).
  [[nodiscard]] bool within_tau() const noexcept {
    return std::none_of(pool_.begin() + static_cast<std::ptrdiff_t>(pool_next_), pool_.end(),
                        [this](const Candidate& c) { return Candidate::less(tau_, c); });
  }

  /// Rebuilds the candidates: at least `need` (and about pool_target()) of the smallest of the
  /// `evictable` unmarked resident keys, all of those at or below the new threshold.
  void scan(const KeyIndexState& s, const RowMarks& marks, Index need, Index evictable) {
    invalidate();
    const std::size_t target =
        std::max<std::size_t>(pool_target(s), static_cast<std::size_t>(need));
    EMBER_ASSERT(evictable >= need);
    // An estimate of the threshold from a strided sample of the rows.
    bool everything = static_cast<std::size_t>(evictable) <= target + target / 2;
    Candidate guess;
    if (!everything) {
      sample_.clear();
      const Index stride = std::max<Index>(1, s.capacity_ / 4096);
      for (Index r = 0; r < s.capacity_; r += stride)
        if (s.resident(r) && !marks.marked(r)) sample_.push_back(candidate(s, r));
      const double share = static_cast<double>(target) * 1.25 / static_cast<double>(evictable);
      const auto q = static_cast<std::size_t>(share * static_cast<double>(sample_.size()));
      if (sample_.empty() || q + 1 >= sample_.size()) {
        everything = true;
      } else {
        std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(q),
                         sample_.end(), Candidate::Less{});
        guess = sample_[q];
      }
    }
    pool_.clear();
    with_primary(s, [&](auto primary_of) {
      for (Index r = 0; r < s.capacity_; ++r) {
        const KeyIndexState::Stat& st = s.meta_[static_cast<std::size_t>(r)];
        if (st.count == 0) continue;  // not resident
        const std::uint64_t p = primary_of(r);
        // Cheap rejections on the primary value and the last step first.
        if (!everything && (p > guess.primary || (p == guess.primary && st.last > guess.last)))
          continue;
        if (marks.marked(r)) continue;
        const Candidate c{p, st.last, static_cast<std::uint32_t>(r), st.key};
        if (everything || !Candidate::less(guess, c)) pool_.push_back(c);
      }
    });
    if (static_cast<Index>(pool_.size()) < need) {
      // The sample guessed too low: take every evictable key.
      pool_.clear();
      for (Index r = 0; r < s.capacity_; ++r)
        if (s.resident(r) && !marks.marked(r)) pool_.push_back(candidate(s, r));
    }
    if (pool_.size() > target) {
      std::nth_element(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(target - 1),
                       pool_.end(), Candidate::Less{});
      pool_.resize(target);
    }
    if (pool_.capacity() > pool_.size() + pool_.size() / 4 + 64) pool_.shrink_to_fit();
    reset(s);
    pool_valid_ = true;
  }

  std::vector<Candidate> pool_;
  std::size_t pool_next_ = 0;
  std::size_t pool_sorted_ = 0;
  std::size_t pool_chunk_ = 0;
  std::vector<Candidate> late_;
  Candidate tau_;
  bool pool_valid_ = false;
  std::vector<Candidate> sample_;  // the scan's strided sample
};

}  // namespace ember::inline EMBER_ISA::detail
