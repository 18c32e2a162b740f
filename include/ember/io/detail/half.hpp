/// IEEE half (binary16) and bfloat16 <-> float conversion for ember's loaders, through Eigen's
/// Eigen::half and Eigen::bfloat16 (round to nearest even on the way down).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::io::detail {

/// The float value of the binary16 bit pattern `bits`.
[[nodiscard]] inline float half_bits_to_float(std::uint16_t bits) noexcept {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

/// The float value of the bfloat16 bit pattern `bits`.
[[nodiscard]] inline float bf16_bits_to_float(std::uint16_t bits) noexcept {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

/// The binary16 bit pattern nearest to `v` (round to nearest even; overflow gives infinity).
[[nodiscard]] inline std::uint16_t float_to_half_bits(float v) noexcept {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(v));
}

/// The bfloat16 bit pattern nearest to `v` (round to nearest even).
[[nodiscard]] inline std::uint16_t float_to_bf16_bits(float v) noexcept {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(v));
}

/// Index of the first NaN or infinity (all exponent bits set) among data[0, n), or n: the
/// first_non_finite of checks.hpp for 16-bit tables, read from the bits without conversion.
[[nodiscard]] inline std::size_t first_non_finite(const Eigen::half* data, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if ((Eigen::numext::bit_cast<std::uint16_t>(data[i]) & 0x7C00u) == 0x7C00u) return i;
  }
  return n;
}

/// As above, for bfloat16 (8 exponent bits).
[[nodiscard]] inline std::size_t first_non_finite(const Eigen::bfloat16* data,
                                                  std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if ((Eigen::numext::bit_cast<std::uint16_t>(data[i]) & 0x7F80u) == 0x7F80u) return i;
  }
  return n;
}

}  // namespace ember::inline EMBER_ISA::io::detail
