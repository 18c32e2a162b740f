/// IEEE half (binary16) and bfloat16 <-> float conversion for ember's loaders, through Eigen's
/// Eigen::half and Eigen::bfloat16 (round to nearest even on the way down).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <Eigen/Core>

namespace ember::io::detail {

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

}  // namespace ember::io::detail
