// The plain definition of ember::KeyIndex (keys/key_index.hpp) that the fast index is tested
// against bit for bit: resident keys in a std::map, the free rows in a std::set, eviction by
// sorting every evictable key by its (score, last step, key) tuple, and the admission sketch as
// four arrays of counters. No slot table, no candidate pool, no prefetching.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include <ember/keys/key_index.hpp>

namespace ember_test {

class KeyIndexReference {
 public:
  struct Entry {
    ember::TokenId row = -1;
    std::int64_t last = 0;
    std::uint32_t count = 0;
    // Decayed lfu: the count is decay · 2^decay_epoch, each sighting at epoch E weighing 2^E,
    // added as a float relative to the epoch of the latest sighting.
    float decay = 0.0f;
    std::int64_t decay_epoch = 0;
    double score = 0.0;
  };

  KeyIndexReference(ember::Index capacity, ember::KeyIndexOptions o) : capacity_(capacity), o_(o) {
    reserved_ = o.fallback_row >= 0 && o.fallback_row < capacity ? o.fallback_row : -1;
    for (ember::Index r = 0; r < capacity; ++r)
      if (r != reserved_) free_.insert(r);
    if (o.min_count > 1) {
      const ember::Index w0 = o.sketch_width > 0 ? o.sketch_width : capacity;
      width_ = static_cast<ember::Index>(
          std::bit_ceil(static_cast<std::uint64_t>(std::max<ember::Index>(w0, 64))));
      counters_.assign(static_cast<std::size_t>(4 * width_), 0);
    }
  }

  [[nodiscard]] ember::Index key_capacity() const { return capacity_ - (reserved_ >= 0 ? 1 : 0); }
  [[nodiscard]] ember::Index size() const { return static_cast<ember::Index>(map_.size()); }

  [[nodiscard]] ember::TokenId find(std::uint64_t key) const {
    const auto it = map_.find(key);
    return it == map_.end() ? o_.fallback_row : it->second.row;
  }

  /// The rows of the batch and the evicted pairs, or std::nullopt when it needs too many rows
  /// (the reference then changes nothing either).
  std::optional<std::vector<ember::TokenId>> find_or_insert(
      std::span<const std::uint64_t> keys, std::int64_t step, std::span<const double> scores = {},
      std::span<const std::int64_t> counts = {}, bool admit = true) {
    evicted.clear();
    added.clear();
    // Distinct keys in order of first position.
    std::vector<std::uint64_t> order;
    std::map<std::uint64_t, std::uint64_t> sightings;
    std::map<std::uint64_t, double> best;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::uint64_t c = counts.empty() ? 1 : static_cast<std::uint64_t>(counts[i]);
      if (sightings.count(keys[i]) == 0) order.push_back(keys[i]);
      sightings[keys[i]] += c;
      const double s = scores.empty() ? 0.0 : scores[i];
      best[keys[i]] = best.count(keys[i]) ? std::max(best[keys[i]], s) : s;
    }
    const bool sketch = o_.min_count > 1 && admit;
    int halvings = 0;
    const std::int64_t origin = origin_ < 0 ? step : origin_;
    if (o_.min_count > 1 && o_.sketch_half_life > 0) {
      halvings = static_cast<int>(
          std::min<std::int64_t>((step - origin) / o_.sketch_half_life - sketch_epoch_, 16));
    }
    std::vector<std::uint64_t> fresh;
    std::set<std::uint64_t> admitted, protected_keys;
    for (const std::uint64_t k : order) {
      if (map_.count(k) != 0) {
        protected_keys.insert(k);
        continue;
      }
      fresh.push_back(k);
      const std::uint64_t est = sketch ? estimate(k, halvings) : 0;
      if (!sketch || std::min<std::uint64_t>(est + sightings[k], 0xFFFF) >=
                         static_cast<std::uint64_t>(o_.min_count)) {
        admitted.insert(k);
      }
    }
    const auto a = static_cast<ember::Index>(admitted.size());
    const ember::Index free_rows = key_capacity() - size();
    const bool evicts = admit && o_.policy != ember::EvictionPolicy::none;
    const ember::Index evictable =
        evicts ? size() - static_cast<ember::Index>(protected_keys.size()) : 0;
    if (a > free_rows + evictable) return std::nullopt;
    // The clocks.
    if (origin_ < 0) origin_ = step;
    if (halvings > 0) {
      for (auto& x : counters_) x = static_cast<std::uint16_t>(x >> std::min(halvings, 16));
      sketch_epoch_ = (step - origin_) / o_.sketch_half_life;
    }
    last_step = step;
    const std::int64_t now_epoch = epoch(step);
    if (o_.min_count > 1) {
      for (const std::uint64_t k : fresh) add(k, sightings[k]);
    }
    // Hits, position by position.
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (protected_keys.count(keys[i]) == 0) continue;
      Entry& e = map_[keys[i]];
      const std::uint64_t c = counts.empty() ? 1 : static_cast<std::uint64_t>(counts[i]);
      e.count = sat(e.count, c);
      if (decayed()) {
        e.decay = std::ldexp(e.decay, shift(e.decay_epoch - now_epoch)) + static_cast<float>(c);
        e.decay_epoch = now_epoch;
      }
    }
    for (const std::uint64_t k : protected_keys) {
      map_[k].last = step;
      if (o_.policy == ember::EvictionPolicy::score && !scores.empty()) map_[k].score = best[k];
    }
    // Victims: every evictable key, sorted by its tuple.
    std::vector<std::tuple<std::int64_t, double, std::int64_t, std::uint64_t>> all;
    for (const auto& [k, e] : map_) {
      if (protected_keys.count(k) == 0) {
        const auto [exponent, value] = primary(e);
        all.emplace_back(exponent, value, e.last, k);
      }
    }
    std::sort(all.begin(), all.end());
    std::size_t next = 0;
    std::map<std::uint64_t, ember::TokenId> row_of_new;
    for (const std::uint64_t k : fresh) {
      if (admitted.count(k) == 0) continue;
      ember::TokenId r = 0;
      if (size() < key_capacity()) {
        r = *free_.begin();
        free_.erase(free_.begin());
      } else {
        const std::uint64_t victim = std::get<3>(all[next++]);
        r = map_[victim].row;
        evicted.push_back({victim, r});
        map_.erase(victim);
      }
      Entry e;
      e.row = r;
      e.last = step;
      e.count = sat(0, sightings[k]);
      if (decayed()) {
        e.decay = static_cast<float>(sightings[k]);
        e.decay_epoch = now_epoch;
      }
      if (o_.policy == ember::EvictionPolicy::score) e.score = best[k];
      map_[k] = e;
      row_of_new[k] = r;
      added.push_back({k, r});
    }
    std::vector<ember::TokenId> rows(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) rows[i] = find(keys[i]);
    return rows;
  }

  void erase(std::uint64_t key) {
    const auto it = map_.find(key);
    if (it == map_.end()) return;
    free_.insert(it->second.row);
    map_.erase(it);
  }

  /// The entries in ascending row order, as KeyIndex's iteration yields them.
  [[nodiscard]] std::vector<ember::KeyEntry> entries() const {
    std::vector<ember::KeyEntry> out;
    for (const auto& [k, e] : map_) {
      ember::KeyEntry x;
      x.key = k;
      x.row = e.row;
      x.count = e.count;
      x.last_step = e.last;
      switch (o_.policy) {
        case ember::EvictionPolicy::lfu:
          x.score = decayed() ? std::ldexp(static_cast<double>(e.decay),
                                           shift(e.decay_epoch - epoch(last_step)))
                              : static_cast<double>(e.count);
          break;
        case ember::EvictionPolicy::score:
          x.score = e.score;
          break;
        default:
          x.score = static_cast<double>(e.last);
      }
      out.push_back(x);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.row < b.row; });
    return out;
  }

  [[nodiscard]] std::int64_t admission_count(std::uint64_t key) const {
    return o_.min_count > 1 ? static_cast<std::int64_t>(estimate(key, 0)) : 0;
  }

  std::vector<ember::KeyRow> evicted;
  std::vector<ember::KeyRow> added;
  std::int64_t last_step = -1;

 private:
  [[nodiscard]] bool decayed() const {
    return o_.policy == ember::EvictionPolicy::lfu && o_.lfu_half_life > 0;
  }
  [[nodiscard]] std::int64_t epoch(std::int64_t s) const {
    return decayed() && origin_ >= 0 ? (s - origin_) / o_.lfu_half_life : 0;
  }
  /// The policy's primary order as (binary exponent, value): a decayed count as its exponent
  /// and significand in [0.5, 1), anything else as (0, value).
  [[nodiscard]] std::pair<std::int64_t, double> primary(const Entry& e) const {
    switch (o_.policy) {
      case ember::EvictionPolicy::lfu:
        if (decayed()) {
          int exponent = 0;
          const double significand = std::frexp(static_cast<double>(e.decay), &exponent);
          return {e.decay_epoch + exponent, significand};
        }
        return {0, static_cast<double>(e.count)};
      case ember::EvictionPolicy::score:
        return {0, e.score};
      default:
        return {0, 0.0};
    }
  }
  /// A power-of-two shift for ldexp: beyond +-2000 every float and double is 0 or infinite.
  static int shift(std::int64_t k) {
    return static_cast<int>(std::clamp<std::int64_t>(k, -2000, 2000));
  }
  static std::uint32_t sat(std::uint32_t a, std::uint64_t b) {
    return static_cast<std::uint32_t>(
        std::min<std::uint64_t>(std::uint64_t{a} + b, std::numeric_limits<std::uint32_t>::max()));
  }
  [[nodiscard]] std::size_t cell(int j, std::uint64_t key) const {
    const int bits = std::countr_zero(static_cast<std::uint64_t>(width_));
    const std::uint64_t salt =
        std::uint64_t{0x9E3779B97F4A7C15U} * (static_cast<std::uint64_t>(j) + 1U);
    std::uint64_t x = key ^ salt;  // SplitMix64's finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<std::size_t>(j) * static_cast<std::size_t>(width_) +
           static_cast<std::size_t>(x >> (64 - bits));
  }
  [[nodiscard]] std::uint64_t estimate(std::uint64_t key, int halvings) const {
    std::uint64_t best = 0xFFFF;
    for (int j = 0; j < 4; ++j)
      best = std::min<std::uint64_t>(best, counters_[cell(j, key)] >> halvings);
    return best;
  }
  void add(std::uint64_t key, std::uint64_t c) {
    const std::uint64_t target = std::min<std::uint64_t>(estimate(key, 0) + c, 0xFFFF);
    for (int j = 0; j < 4; ++j) {
      auto& x = counters_[cell(j, key)];
      x = static_cast<std::uint16_t>(std::max<std::uint64_t>(x, target));
    }
  }

  ember::Index capacity_;
  ember::KeyIndexOptions o_;
  ember::TokenId reserved_ = -1;
  std::map<std::uint64_t, Entry> map_;
  std::set<ember::TokenId> free_;
  ember::Index width_ = 0;
  std::vector<std::uint16_t> counters_;
  std::int64_t origin_ = -1;
  std::int64_t sketch_epoch_ = 0;
};

}  // namespace ember_test
