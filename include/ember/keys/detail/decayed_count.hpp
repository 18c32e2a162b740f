/// detail::DecayedCount: a KeyIndex row's decayed lfu count as one order-preserving uint64, with an
/// exponent wide enough that counts of keys unseen for any number of half-lives never underflow.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// A decayed count D = sum over a key's sightings of c · 2^epoch (epoch: whole half-lives from the
/// index's first step to the sighting's step), kept as a float significand with an exponent of
/// its own: the value (e << 23) | f stands for (1 + f / 2^23) · 2^e. Every count is at least one
/// sighting (D >= 1, e >= 0), so the values compare as unsigned integers in the order of the
/// counts, and a count never underflows however long its key is unseen.
///
/// Each addition rounds as one float addition of the count relative to 2^epoch and c: the bits
/// of float arithmetic on counts relative to the latest epoch, without its range limits. Epochs
/// are at most max_epoch (KeyIndex refuses later steps), so e < 2^40 and the value < 2^63.
struct DecayedCount {
  /// The latest epoch a count may be added at.
  static constexpr std::int64_t max_epoch = std::int64_t{1} << 39;

  /// The count of c >= 1 sightings at `epoch`.
  [[nodiscard]] static std::uint64_t first(std::uint64_t c, std::int64_t epoch) noexcept {
    return encode(static_cast<float>(c), epoch);
  }

  /// `count` plus c >= 1 sightings at `epoch`, which is at or after every epoch in `count`.
  [[nodiscard]] static std::uint64_t add(std::uint64_t count, std::uint64_t c,
                                         std::int64_t epoch) noexcept {
    // The count relative to 2^epoch, as float bits. Below the smallest normal float it is under
    // half an ulp of c >= 1, so the sum rounds to c whether it is kept or not.
    const std::int64_t bits = static_cast<std::int64_t>(count) - (epoch << 23) + kOneBits;
    const float relative =
        bits >= kMinNormalBits ? std::bit_cast<float>(static_cast<std::uint32_t>(bits)) : 0.0f;
    return encode(relative + static_cast<float>(c), epoch);
  }

  /// The count relative to 2^epoch, as a double (0 below the smallest subnormal double: a key
  /// unseen for more than about 1075 half-lives reads 0, though its order is kept).
  [[nodiscard]] static double value_at(std::uint64_t count, std::int64_t epoch) noexcept {
    const std::int64_t e = static_cast<std::int64_t>(count >> 23) - epoch;
    const double significand = 1.0 + static_cast<double>(count & 0x7FFFFF) * 0x1p-23;
    return std::ldexp(significand, static_cast<int>(std::clamp<std::int64_t>(e, -1100, 1100)));
  }

  /// The count whose value relative to 2^epoch is `value` (value_at's inverse for the values a
  /// float holds). A value under one sighting at epoch 0 (which no count has) becomes that one
  /// sighting, the smallest count.
  [[nodiscard]] static std::uint64_t of_value(double value, std::int64_t epoch) noexcept {
    if (!(value > 0.0)) return 0;
    int e = 0;
    const auto significand = static_cast<float>(2.0 * std::frexp(value, &e));  // in [1, 2)
    const std::int64_t exponent = epoch + e - 1;
    if (exponent < 0) return 0;
    return (static_cast<std::uint64_t>(exponent) << 23) |
           (std::bit_cast<std::uint32_t>(significand) & 0x7FFFFFU);
  }

  /// The largest count whose value relative to 2^epoch a float holds (FLT_MAX).
  [[nodiscard]] static std::uint64_t largest_at(std::int64_t epoch) noexcept {
    return (static_cast<std::uint64_t>(epoch + 127) << 23) | 0x7FFFFFU;
  }

 private:
  static constexpr std::int64_t kOneBits = 0x3F800000;        // the bits of 1.0f
  static constexpr std::int64_t kMinNormalBits = 0x00800000;  // the bits of FLT_MIN

  // x >= 1, a count relative to 2^epoch: its biased exponent less 127 is added to the epoch.
  [[nodiscard]] static std::uint64_t encode(float x, std::int64_t epoch) noexcept {
    return static_cast<std::uint64_t>(
        (epoch << 23) + static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(x)) - kOneBits);
  }
};

}  // namespace ember::inline EMBER_ISA::detail
