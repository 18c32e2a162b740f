/// Strict parsing of the numbers ember's loaders read as text (safetensors __metadata__ values,
/// .npy shapes, checkpoint file names): the whole string is one number, or it is refused.
// SPDX-License-Identifier: MIT
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The number that is all of `s`, or std::nullopt. An integral N takes decimal digits, with a
/// leading '-' only when N is signed, in N's range. A floating N takes a decimal number or a
/// hexadecimal one after "0x" (as printf's "%a" writes it), with an optional leading '-', finite
/// and in N's range (a value that would round to 0 or to infinity is refused).
/// Refused, whatever N: the empty string, whitespace anywhere, a '+', a second sign, trailing
/// characters, "inf" and "nan". The C locale's syntax, whatever the global locale.
/// Why so strict: a loader that took "1.5x" as 1.5, " 2" as 2 or "" as 0 would load a file its
/// writer never wrote, silently; the callers throw FormatError naming the field instead.
template <class N>
[[nodiscard]] std::optional<N> whole_number(std::string_view s) noexcept {
  static_assert((std::is_integral_v<N> && !std::is_same_v<N, bool>) || std::is_floating_point_v<N>,
                "whole_number: N must be an integer or floating-point type");
  N value{};
  if constexpr (std::is_integral_v<N>) {
    // from_chars takes no '+' and no whitespace, and no '-' for an unsigned N.
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 10);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  } else {
    // from_chars reads hexadecimal only without its "0x", and would take a '-' after one, so
    // the sign and the prefix are taken here and the rest must start with neither.
    const bool negative = !s.empty() && s.front() == '-';
    if (negative) s.remove_prefix(1);
    const bool hex = s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex) s.remove_prefix(2);
    if (s.empty() || s.front() == '-') return std::nullopt;
    const auto [end, ec] =
        std::from_chars(s.data(), s.data() + s.size(), value,
                        hex ? std::chars_format::hex : std::chars_format::general);
    if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(value))
      return std::nullopt;
    if (negative) value = -value;
  }
  return value;
}

}  // namespace ember::inline EMBER_ISA::detail
