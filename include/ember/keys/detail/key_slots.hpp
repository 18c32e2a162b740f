/// The open-addressing slot table behind KeyIndex: 32-bit slots that each hold a row and a few
/// bits of its key's hash, probed linearly, with tombstones purged by an in-place rebuild.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/huge_pages.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// SplitMix64's finalizer: a bijection of the 64-bit values (distinct keys never share a hash),
/// mixing every input bit into every output bit.
[[nodiscard]] constexpr std::uint64_t mix_key(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// The high 64 bits of the 128-bit product a · b (maps a hash onto [0, b) by multiply-shift).
[[nodiscard]] constexpr std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ using u128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#else
  const std::uint64_t a_lo = a & 0xFFFFFFFFU, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xFFFFFFFFU, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFU) + lo_hi;
  return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
#endif
}

/// The slots of a KeyIndex over `capacity` rows (validated by KeyIndex: 1 <= capacity < 2^31 - 1).
///
/// A slot is 0 (empty), 1 (a tombstone: a key was erased there) or (tag << row_bits) | (row + 2),
/// the tag being the low bits of the key's hash: a probe compares the key itself (in the caller's
/// key array) only when the tags agree. A key's probe starts at the slot the high bits of its
/// hash name (multiply-shift onto [0, slot_count)) and walks forward, wrapping, to an empty slot.
/// Erasing leaves a tombstone; inserts reuse the first tombstone or empty slot of the probe; when
/// empty slots fall below an eighth of the table, rebuild() rewrites it from the live rows.
///
/// The layout decides nothing observable: which row a key has, and every order, is KeyIndex's.
/// Memory: 4 bytes a slot, slot_count ≈ 1.4 · capacity.
class KeySlots {
 public:
  /// An empty table for rows [0, capacity).
  void reset(Index capacity) {
    row_bits_ = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(capacity) + 1));
    EMBER_ASSERT(row_bits_ <= 31);
    row_mask_ = (1U << row_bits_) - 1U;
    tag_mask_ = 0xFFFFFFFFU >> row_bits_;
    count_ = static_cast<std::uint64_t>(std::max<Index>(16, capacity + capacity * 2 / 5 + 1));
    slots_.assign(static_cast<std::size_t>(count_), 0U);
    used_ = 0;
    live_ = 0;
  }

  /// Number of slots.
  [[nodiscard]] Index slot_count() const noexcept { return static_cast<Index>(count_); }
  /// Bytes the slots hold.
  [[nodiscard]] std::size_t bytes() const noexcept { return slots_.capacity() * 4; }
  /// Live keys.
  [[nodiscard]] Index live() const noexcept { return live_; }

  /// The first slot of hash h.
  [[nodiscard]] std::size_t home(std::uint64_t h) const noexcept {
    return static_cast<std::size_t>(mul_high(h, count_));
  }

  /// Asks for the cache line of h's first slot.
  void prefetch(std::uint64_t h) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(slots_.data() + home(h), 0, 3);
#else
    static_cast<void>(h);
#endif
  }

  /// The row of the first slot on h's probe whose tag is h's, or -1 when an empty slot comes
  /// first: the only row a key of hash h can have unless that row's key is another one (then
  /// find() walks on). Reads the slots only, so it can run ahead of the rows' loads.
  [[nodiscard]] Index candidate(std::uint64_t h) const noexcept {
    const std::uint32_t tag = tag_of(h);
    std::size_t p = home(h);
    for (;;) {
      const std::uint32_t w = slots_[p];
      if (w == 0) return -1;
      if (w >= 2 && (w >> row_bits_) == tag) return row_of(w);
      if (++p == count_) p = 0;
    }
  }

  /// The row a slot word names (precondition: w >= 2).
  [[nodiscard]] Index row_of(std::uint32_t w) const noexcept {
    return static_cast<Index>(w & row_mask_) - 2;
  }

  /// The row of `key` (hash h) or -1, comparing candidates against key_of(row).
  template <class KeyOf>
  [[nodiscard]] Index find(std::uint64_t key, std::uint64_t h, KeyOf&& key_of) const noexcept {
    const std::uint32_t tag = tag_of(h);
    std::size_t p = home(h);
    for (;;) {
      const std::uint32_t w = slots_[p];
      if (w == 0) return -1;
      if (w >= 2 && (w >> row_bits_) == tag) {
        const Index row = row_of(w);
        if (key_of(row) == key) return row;
      }
      if (++p == count_) p = 0;
    }
  }

  /// Enters `row` for a key (hash h) that is not in the table.
  void insert(std::uint64_t h, Index row) noexcept {
    std::size_t p = home(h);
    while (slots_[p] >= 2) {
      if (++p == count_) p = 0;
    }
    if (slots_[p] == 0) ++used_;
    slots_[p] = word(tag_of(h), row);
    ++live_;
  }

  /// Removes the slot of `row`, whose key has hash h (precondition: it is in the table).
  void erase(std::uint64_t h, Index row) {
    std::size_t p = home(h);
    const std::uint32_t w = word(tag_of(h), row);
    while (slots_[p] != w) {
      EMBER_ASSERT(slots_[p] != 0);
      if (++p == count_) p = 0;
    }
    slots_[p] = 1;
    --live_;
  }

  /// True when tombstones have eaten enough empty slots that probes grow long: rebuild().
  [[nodiscard]] bool crowded() const noexcept { return (count_ - used_) * 8 < count_; }

  /// Empties the table (keeping its size); the caller re-inserts the live rows.
  void clear() noexcept {
    std::fill(slots_.begin(), slots_.end(), 0U);
    used_ = 0;
    live_ = 0;
  }

 private:
  [[nodiscard]] std::uint32_t tag_of(std::uint64_t h) const noexcept {
    return static_cast<std::uint32_t>(h) & tag_mask_;
  }
  [[nodiscard]] std::uint32_t word(std::uint32_t tag, Index row) const noexcept {
    return (tag << row_bits_) | static_cast<std::uint32_t>(row + 2);
  }

  HugePageVector<std::uint32_t> slots_;
  std::uint64_t count_ = 0;
  std::uint64_t used_ = 0;  // slots not empty: live + tombstones
  Index live_ = 0;
  int row_bits_ = 1;
  std::uint32_t row_mask_ = 1;
  std::uint32_t tag_mask_ = 0;
};

}  // namespace ember::inline EMBER_ISA::detail
