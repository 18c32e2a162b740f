/// IEEE half (binary16) and bfloat16 <-> float conversion for ember's loaders, through Eigen's
/// Eigen::half and Eigen::bfloat16 (round to nearest even on the way down).
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The float value of the bit pattern `bits` of S (Eigen::half or Eigen::bfloat16): exact.
template <class S>
[[nodiscard]] float bits_to_float(std::uint16_t bits) noexcept {
  return static_cast<float>(Eigen::numext::bit_cast<S>(bits));
}

/// The bit pattern of the S nearest to `v` (round to nearest even; overflow gives infinity).
template <class S>
[[nodiscard]] std::uint16_t float_to_bits(float v) noexcept {
  return Eigen::numext::bit_cast<std::uint16_t>(S(v));
}

/// Index of the first NaN or infinity (all exponent bits set) among data[0, n), or n: the
/// first_non_finite of checks.hpp for 16-bit tables, read from the bits without conversion.
template <class S>
[[nodiscard]] std::size_t first_non_finite(const S* data, std::size_t n) noexcept
    requires(std::same_as<S, Eigen::half> || std::same_as<S, Eigen::bfloat16>) {
  constexpr std::uint16_t exponent = std::same_as<S, Eigen::half> ? 0x7C00u : 0x7F80u;
  for (std::size_t i = 0; i < n; ++i) {
    if ((Eigen::numext::bit_cast<std::uint16_t>(data[i]) & exponent) == exponent) return i;
  }
  return n;
}

}  // namespace ember::inline EMBER_ISA::detail
