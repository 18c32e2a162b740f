/// The bounded counter of KeyIndex's admission: a count-min sketch (Cormode & Muthukrishnan 2005)
/// of 16-bit saturating counters with conservative update, halved on request.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// depth x width counters (width a power of two, validated by KeyIndex). Key k's counter in row j
/// is column mix_key(k ^ salt(j)) >> (64 - log2(width)), salt(j) = 0x9E3779B97F4A7C15 · (j + 1).
/// The estimate of k is the smallest of its depth counters: never below its true count (until a
/// counter saturates at 65535 or a halving), above it only where other keys share all its columns.
/// Conservative update (Estan & Varghese 2002): adding c sightings raises each of k's counters to
/// at least min(estimate + c, 65535), and no further, which keeps the overestimates small.
class CountSketch {
 public:
  /// Rows of counters.
  static constexpr int depth = 4;
  /// The counters' ceiling.
  static constexpr std::uint32_t max_count = 0xFFFF;

  /// depth x width zero counters.
  void reset(Index width) {
    EMBER_ASSERT(width > 0 && std::has_single_bit(static_cast<std::uint64_t>(width)));
    width_ = width;
    shift_ = 64 - std::countr_zero(static_cast<std::uint64_t>(width));
    counters_.assign(static_cast<std::size_t>(width * depth), 0);
  }

  /// Counters per row (0 while unused).
  [[nodiscard]] Index width() const noexcept { return width_; }
  /// Bytes the counters hold.
  [[nodiscard]] std::size_t bytes() const noexcept { return counters_.capacity() * 2; }
  /// The counters, row after row.
  [[nodiscard]] std::span<const std::uint16_t> counters() const noexcept { return counters_; }
  /// The counters, writable (to restore a saved sketch).
  [[nodiscard]] std::span<std::uint16_t> counters() noexcept { return counters_; }

  /// The estimate of `key` after `halvings` pending halvings.
  [[nodiscard]] std::uint32_t estimate(std::uint64_t key, int halvings = 0) const noexcept {
    std::uint32_t best = max_count;
    for (int j = 0; j < depth; ++j)
      best = std::min<std::uint32_t>(best, static_cast<std::uint32_t>(cell(j, key)) >> halvings);
    return best;
  }

  /// Adds c sightings of `key` (conservative update); returns its new estimate.
  std::uint32_t add(std::uint64_t key, std::uint64_t c) noexcept {
    const std::uint64_t target = std::min<std::uint64_t>(estimate(key) + c, max_count);
    for (int j = 0; j < depth; ++j) {
      std::uint16_t& x = cell(j, key);
      x = static_cast<std::uint16_t>(std::max<std::uint64_t>(x, target));
    }
    return static_cast<std::uint32_t>(target);
  }

  /// Halves every counter `times` times (rounding down).
  void halve(int times) noexcept {
    if (times <= 0) return;
    const int s = std::min(times, 16);
    for (auto& x : counters_) x = static_cast<std::uint16_t>(x >> s);
  }

  /// The salt of row j.
  [[nodiscard]] static constexpr std::uint64_t salt(int j) noexcept {
    constexpr std::uint64_t golden = 0x9E3779B97F4A7C15U;
    return golden * (static_cast<std::uint64_t>(j) + 1U);
  }

 private:
  [[nodiscard]] std::size_t column(int j, std::uint64_t key) const noexcept {
    return static_cast<std::size_t>(mix_key(key ^ salt(j)) >> shift_);
  }
  [[nodiscard]] std::uint16_t cell(int j, std::uint64_t key) const noexcept {
    return counters_[static_cast<std::size_t>(j) * static_cast<std::size_t>(width_) +
                     column(j, key)];
  }
  [[nodiscard]] std::uint16_t& cell(int j, std::uint64_t key) noexcept {
    return counters_[static_cast<std::size_t>(j) * static_cast<std::size_t>(width_) +
                     column(j, key)];
  }

  std::vector<std::uint16_t> counters_;
  Index width_ = 0;
  int shift_ = 64;
};

}  // namespace ember::inline EMBER_ISA::detail
