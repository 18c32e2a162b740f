/// Core vocabulary types of ember: Index, TokenId, RowMatrix, RowVector and the IdRange concept.
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <cstdint>
#include <ranges>
#include <span>
#include <type_traits>

#include <Eigen/Core>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA {

/// Signed size and index type, identical to Eigen's, so loops over Eigen sizes need no casts.
using Index = Eigen::Index;

/// The integer id of a token: a row number of an embedding table.
using TokenId = std::int64_t;

/// Row-major dynamic matrix: rows are contiguous, so a lookup is a row copy.
template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Dynamic row vector (one embedding row).
template <class T>
using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic, Eigen::RowMajor>;

/// An integer type usable as a token id: any integral type except bool and the character types.
/// Unsigned 64-bit ids (std::size_t, std::uint64_t) are ids like any other: a value above
/// INT64_MAX is out of range for every table, and the door that checks ids says so.
template <class I>
concept TokenIdType =
    std::integral<I> && !std::same_as<std::remove_cv_t<I>, bool> &&
    !std::same_as<std::remove_cv_t<I>, char> && !std::same_as<std::remove_cv_t<I>, char8_t> &&
    !std::same_as<std::remove_cv_t<I>, char16_t> && !std::same_as<std::remove_cv_t<I>, char32_t> &&
    !std::same_as<std::remove_cv_t<I>, wchar_t>;

/// A contiguous, sized range of token ids: std::vector<int64_t>, std::span<const int32_t>,
/// std::vector<std::size_t>, std::array<int, N>, ... Ember views it as a std::span internally and
/// never copies it.
template <class R>
concept IdRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    TokenIdType<std::ranges::range_value_t<R>>;

/// The scalar types an ember table may hold today.
template <class T>
concept Scalar = std::same_as<T, float> || std::same_as<T, double>;

namespace detail {

/// Views any IdRange as a span of its (const) element type.
template <IdRange R>
[[nodiscard]] constexpr auto as_id_span(const R& ids) noexcept {
  using Id = std::remove_cv_t<std::ranges::range_value_t<R>>;
  return std::span<const Id>(std::ranges::data(ids), std::ranges::size(ids));
}

/// Helper for static_assert in templates that must never be instantiated.
template <class>
inline constexpr bool always_false = false;

/// The position of V among Ts (the first match), or -1: an enum whose values follow a list of
/// types (a file format's type codes) maps a C++ type to its code with it.
template <class V, class... Ts>
inline constexpr int type_index = [] {
  int i = 0;
  int found = -1;
  ((found = found < 0 && std::is_same_v<V, Ts> ? i : found, ++i), ...);
  return found;
}();

}  // namespace detail

}  // namespace ember::inline EMBER_ISA
