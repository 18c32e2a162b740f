// Tests for ember/types.hpp: Index, TokenId, RowMatrix, RowVector, TokenIdType, IdRange and
// detail::as_id_span.
// SPDX-License-Identifier: MIT
#include "ember/types.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <list>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

// ---- vocabulary types --------------------------------------------------------------------------

static_assert(std::is_same_v<ember::Index, Eigen::Index>);
static_assert(std::is_signed_v<ember::Index>);
static_assert(std::is_same_v<ember::TokenId, std::int64_t>);

static_assert(ember::RowMatrix<float>::IsRowMajor);
static_assert(ember::RowMatrix<double>::RowsAtCompileTime == Eigen::Dynamic);
static_assert(ember::RowMatrix<double>::ColsAtCompileTime == Eigen::Dynamic);
static_assert(std::is_same_v<ember::RowMatrix<float>::Scalar, float>);
static_assert(ember::RowVector<double>::RowsAtCompileTime == 1);
static_assert(ember::RowVector<double>::ColsAtCompileTime == Eigen::Dynamic);

static_assert(ember::Scalar<float>);
static_assert(ember::Scalar<double>);
static_assert(!ember::Scalar<long double>);
static_assert(!ember::Scalar<int>);
static_assert(!ember::Scalar<Eigen::half>);

// ---- TokenIdType: every integer type, minus bool and characters ---------------------------------

static_assert(ember::TokenIdType<std::int64_t>);
static_assert(ember::TokenIdType<std::int32_t>);
static_assert(ember::TokenIdType<std::int16_t>);
static_assert(ember::TokenIdType<std::int8_t>);  // signed char is a small integer, not a character
static_assert(ember::TokenIdType<std::uint32_t>);
static_assert(ember::TokenIdType<std::uint16_t>);
static_assert(ember::TokenIdType<std::uint8_t>);
static_assert(ember::TokenIdType<long long>);
static_assert(ember::TokenIdType<const int>);

static_assert(ember::TokenIdType<std::uint64_t>);  // values >= 2^63: out of range at the door
static_assert(ember::TokenIdType<std::size_t>);
static_assert(ember::TokenIdType<unsigned long long>);
static_assert(!ember::TokenIdType<bool>);
static_assert(!ember::TokenIdType<char>);
static_assert(!ember::TokenIdType<const char>);
static_assert(!ember::TokenIdType<wchar_t>);
static_assert(!ember::TokenIdType<char8_t>);
static_assert(!ember::TokenIdType<char16_t>);
static_assert(!ember::TokenIdType<char32_t>);
static_assert(!ember::TokenIdType<float>);
static_assert(!ember::TokenIdType<double>);

// ---- IdRange: contiguous, sized ranges of TokenIdType ------------------------------------------

static_assert(ember::IdRange<std::vector<std::int64_t>>);
static_assert(ember::IdRange<std::vector<std::int32_t>>);
static_assert(ember::IdRange<const std::vector<std::int32_t>>);
static_assert(ember::IdRange<std::array<int, 3>>);
static_assert(ember::IdRange<std::span<const short>>);
static_assert(ember::IdRange<std::span<const ember::TokenId>>);
static_assert(ember::IdRange<std::span<std::uint32_t, 4>>);
static_assert(ember::IdRange<int[5]>);

static_assert(!ember::IdRange<std::vector<double>>);  // floating-point ids
static_assert(!ember::IdRange<std::vector<float>>);
static_assert(!ember::IdRange<std::vector<bool>>);  // bool, and not contiguous either
static_assert(!std::ranges::contiguous_range<std::vector<bool>>);
static_assert(ember::IdRange<std::vector<std::uint64_t>>);  // checked at the door like any ids
static_assert(ember::IdRange<std::vector<std::size_t>>);
static_assert(!ember::IdRange<std::vector<char>>);  // characters, not ids
static_assert(!ember::IdRange<std::string>);
static_assert(!ember::IdRange<std::list<int>>);   // not contiguous
static_assert(!ember::IdRange<std::deque<int>>);  // random access, not contiguous
static_assert(!ember::IdRange<int>);              // not a range

// ---- detail::as_id_span ------------------------------------------------------------------------

// Usable in constant expressions.
constexpr std::array<int, 3> kConstIds{4, 5, 6};
static_assert(ember::detail::as_id_span(kConstIds).size() == 3);
static_assert(ember::detail::as_id_span(kConstIds)[2] == 6);

TEST_CASE("as_id_span views the caller's ids without copying", "[types]") {
  SECTION("vector<int64_t>") {
    const std::vector<std::int64_t> ids{3, 1, 4, 1, 5};
    const auto span = ember::detail::as_id_span(ids);
    static_assert(std::is_same_v<decltype(span), const std::span<const std::int64_t>>);
    CHECK(span.data() == ids.data());
    CHECK(span.size() == ids.size());
  }
  SECTION("vector<int32_t> keeps its element type") {
    std::vector<std::int32_t> ids{9, 8, 7};
    const auto span = ember::detail::as_id_span(ids);
    static_assert(std::is_same_v<decltype(span), const std::span<const std::int32_t>>);
    CHECK(span.data() == ids.data());
    ids[1] = 42;  // a view: the change is visible
    CHECK(span[1] == 42);
  }
  SECTION("array<int, 3>") {
    const std::array<int, 3> ids{0, 1, 2};
    const auto span = ember::detail::as_id_span(ids);
    CHECK(span.data() == ids.data());
    CHECK(span.size() == 3);
  }
  SECTION("span<const short> taken from the middle of a larger buffer") {
    const std::vector<short> buffer{-1, -1, 10, 11, 12, -1};
    const std::span<const short> middle(buffer.data() + 2, 3);
    const auto span = ember::detail::as_id_span(middle);
    static_assert(std::is_same_v<decltype(span), const std::span<const short>>);
    CHECK(span.data() == buffer.data() + 2);
    CHECK(span.size() == 3);
    CHECK(span[0] == 10);
    CHECK(span[2] == 12);
  }
  SECTION("an empty range gives an empty span") {
    const std::vector<int> none;
    CHECK(ember::detail::as_id_span(none).empty());
  }
  SECTION("an Eigen vector through std::span") {
    const Eigen::VectorXi v = Eigen::VectorXi::LinSpaced(4, 0, 3);
    const std::span<const int> ids(v.data(), static_cast<std::size_t>(v.size()));
    static_assert(ember::IdRange<std::span<const int>>);
    const auto span = ember::detail::as_id_span(ids);
    CHECK(span.data() == v.data());
    CHECK(span[3] == 3);
  }
}
