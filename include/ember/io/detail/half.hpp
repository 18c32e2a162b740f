/// Half and bfloat16 values in files: loads and stores of 2-, 4- and 8-byte floats for ember's
/// loaders, with the 16-bit conversions of detail/half.hpp (round to nearest even on the way down).
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/half.hpp"
#include "ember/io/detail/byteorder.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The float value of the bit pattern `bits` of S (Eigen::half or Eigen::bfloat16): exact.
template <class S>
[[nodiscard]] float bits_to_float(std::uint16_t bits) noexcept {
  if constexpr (std::same_as<S, Eigen::half>) {
    return fp16_to_fp32(bits);
  } else {
    static_assert(std::same_as<S, Eigen::bfloat16>, "S is Eigen::half or Eigen::bfloat16");
    return bf16_to_fp32(bits);
  }
}

/// The bit pattern of the S nearest to `v` (round to nearest even; overflow gives infinity).
template <class S>
[[nodiscard]] std::uint16_t float_to_bits(float v) noexcept {
  if constexpr (std::same_as<S, Eigen::half>) {
    return fp32_to_fp16(v);
  } else {
    static_assert(std::same_as<S, Eigen::bfloat16>, "S is Eigen::half or Eigen::bfloat16");
    return fp32_to_bf16(v);
  }
}

/// The value at p of a float of `bytes` bytes (2: S, 4: float, 8: double) in `little_endian`
/// byte order, as T (exact but for a double narrowed to a float T).
template <class T, class S = Eigen::half>
[[nodiscard]] T load_float(const unsigned char* p, std::size_t bytes, bool little_endian) noexcept {
  if (bytes == 2)
    return static_cast<T>(bits_to_float<S>(load_value<std::uint16_t>(p, little_endian)));
  if (bytes == 4) return static_cast<T>(load_value<float>(p, little_endian));
  return static_cast<T>(load_value<double>(p, little_endian));
}

/// Stores v at p as a little-endian float of `bytes` bytes (2: S, rounded to nearest even;
/// 4: float; 8: double).
template <class S = Eigen::half, class V>
void store_float_le(unsigned char* p, std::size_t bytes, V v) noexcept {
  if (bytes == 2) {
    store_value_le(p, float_to_bits<S>(static_cast<float>(v)));
  } else if (bytes == 4) {
    store_value_le(p, static_cast<float>(v));
  } else {
    store_value_le(p, static_cast<double>(v));
  }
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
