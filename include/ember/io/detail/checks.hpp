/// Shared checks of ember's loaders: FormatError construction, overflow-safe size arithmetic and
/// UTF-8 validation (the non-finite scan and the quoting of tokens are ember/detail/checks.hpp's).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Throws FormatError "<path>: <what> (at byte <offset>)", `what` the parts one after the other
/// (detail::text: "tensor ", i, " is empty").
template <class... What>
[[noreturn]] void fail_at_byte(const std::string& path, std::uint64_t offset, const What&... what) {
  throw FormatError(text(path, ": ", what..., " (at byte ", offset, ")"), path, offset, false);
}

/// Throws FormatError "<path>:<line>: <what>" (the compiler-style file:line prefix), `what` as
/// for fail_at_byte.
template <class... What>
[[noreturn]] void fail_at_line(const std::string& path, std::uint64_t line, const What&... what) {
  throw FormatError(text(path, ":", line, ": ", what...), path, line, true);
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

}  // namespace ember::inline EMBER_ISA::detail
