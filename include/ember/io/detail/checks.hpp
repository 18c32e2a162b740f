/// Shared checks of ember's loaders: FormatError construction, overflow-safe size arithmetic,
/// UTF-8 validation and the non-finite value scan.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ember/config.hpp"
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::io::detail {

/// Throws FormatError "<path>: <what> at byte <offset>".
[[noreturn]] inline void fail_at_byte(const std::string& path, std::uint64_t offset,
                                      const std::string& what) {
  throw FormatError(path + ": " + what + " (at byte " + std::to_string(offset) + ")", path, offset,
                    false);
}

/// Throws FormatError "<path>:<line>: <what>" (the compiler-style file:line prefix).
[[noreturn]] inline void fail_at_line(const std::string& path, std::uint64_t line,
                                      const std::string& what) {
  throw FormatError(path + ":" + std::to_string(line) + ": " + what, path, line, true);
}

/// a * b, or nullopt when the product overflows std::uint64_t.
[[nodiscard]] inline std::optional<std::uint64_t> checked_mul(std::uint64_t a,
                                                              std::uint64_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

/// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
[[nodiscard]] inline bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

/// Index of the first non-finite value among data[0, n), or n when all are finite.
template <class T>
[[nodiscard]] std::size_t first_non_finite(const T* data, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) return i;
  }
  return n;
}

/// Quotes a token for an error message, escaping control and non-ASCII bytes as \xNN.
[[nodiscard]] inline std::string quoted(std::string_view s, std::size_t max_len = 64) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7F || c == '\'') {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "...";
  out += "'";
  return out;
}

}  // namespace ember::inline EMBER_ISA::io::detail
