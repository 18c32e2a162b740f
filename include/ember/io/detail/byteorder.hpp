/// Byte-order helpers for ember's file formats: host endianness, byte swaps and little-endian
/// integer loads/stores that are safe on unaligned memory.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// True when the host stores multi-byte numbers least significant byte first.
inline constexpr bool host_is_little_endian = std::endian::native == std::endian::little;

/// Reads an unsigned little-endian integer of sizeof(U) bytes from possibly unaligned memory.
template <class U>
[[nodiscard]] U load_le(const unsigned char* p) noexcept {
  static_assert(std::is_unsigned_v<U>);
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i)
    v = static_cast<U>(v | (static_cast<U>(p[i]) << (8 * i)));
  return v;
}

/// Writes an unsigned integer as sizeof(U) little-endian bytes.
template <class U>
void store_le(unsigned char* p, U v) noexcept {
  static_assert(std::is_unsigned_v<U>);
  for (std::size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

/// Reads a trivially copyable value stored in `little_endian` byte order from unaligned memory.
template <class V>
[[nodiscard]] V load_value(const unsigned char* p, bool little_endian) noexcept {
  static_assert(std::is_trivially_copyable_v<V>);
  unsigned char buf[sizeof(V)];
  std::memcpy(buf, p, sizeof(V));
  if (little_endian != host_is_little_endian) std::reverse(buf, buf + sizeof(V));
  V v;
  std::memcpy(&v, buf, sizeof(V));
  return v;
}

/// Writes a trivially copyable value in little-endian byte order to unaligned memory.
template <class V>
void store_value_le(unsigned char* p, V v) noexcept {
  static_assert(std::is_trivially_copyable_v<V>);
  std::memcpy(p, &v, sizeof(V));
  if (!host_is_little_endian) std::reverse(p, p + sizeof(V));
}

}  // namespace ember::inline EMBER_ISA::detail
