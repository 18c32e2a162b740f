// Tests of the EMBER_ASSERT hook (ember/config.hpp): ember's test build defines EMBER_TESTING, so a
// detail kernel called directly with input its public caller would have rejected throws
// std::logic_error instead of asserting.
// SPDX-License-Identifier: MIT
#include "ember/config.hpp"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/detail/gather.hpp"
#include "ember/detail/scatter.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"
#include "support/embedding_reference.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

#if !defined(EMBER_TESTING)
#error "test_assert.cpp needs EMBER_TESTING so that EMBER_ASSERT throws std::logic_error"
#endif

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
namespace detail = ember::detail;

TEST_CASE("EMBER_ASSERT throws std::logic_error naming the condition under EMBER_TESTING",
          "[config][assert]") {
  CHECK_THROWS_AS(EMBER_ASSERT(1 + 1 == 3), std::logic_error);
  CHECK_THROWS_WITH(EMBER_ASSERT(1 + 1 == 3),
                    Catch::Contains("EMBER_ASSERT(1 + 1 == 3) failed") && Catch::Contains(":"));
  CHECK_NOTHROW(EMBER_ASSERT(1 + 1 == 2));
}

TEST_CASE("gather called directly with an out of the wrong shape throws std::logic_error",
          "[config][assert]") {
  const RowMatrix<double> table = ember_test::hand_table<double>(5, 4);
  const std::vector<TokenId> ids{0, 1, 2};
  RowMatrix<double> out = RowMatrix<double>::Constant(2, 4, 7.0);  // needs 3 x 4
  CHECK_THROWS_AS(
      detail::gather<double>(ember_test::plain_rows(table), std::span<const TokenId>(ids), 2.0,
                             nullptr, detail::mutable_table(out)),
      std::logic_error);
  CHECK_THROWS_WITH(
      detail::gather<double>(ember_test::plain_rows(table), std::span<const TokenId>(ids), 2.0,
                             nullptr, detail::mutable_table(out)),
      Catch::Contains("EMBER_ASSERT") && Catch::Contains("gather.hpp"));
  CHECK((out.array() == 7.0).all());

  RowMatrix<double> wide = RowMatrix<double>::Constant(3, 5, 7.0);
  CHECK_THROWS_AS(
      detail::gather<double>(ember_test::plain_rows(table), std::span<const TokenId>(ids), 2.0,
                             nullptr, detail::mutable_table(wide)),
      std::logic_error);

  // Valid input goes through: the kernel is the one Embedding::forward uses.
  RowMatrix<double> good(3, 4);
  detail::gather<double>(ember_test::plain_rows(table), std::span<const TokenId>(ids), 2.0, nullptr,
                         detail::mutable_table(good));
  ember_test::check_close(good, ember_test::lookup_loops<double>(table, ids, 2.0));
}

// An id check inside the kernel's (OpenMP) loop: an exception must not escape a parallel region,
// so this case only runs in builds without OpenMP.
#if !defined(_OPENMP)
TEST_CASE("gather called directly with an out-of-range id throws std::logic_error",
          "[config][assert]") {
  const RowMatrix<float> table = ember_test::hand_table<float>(5, 4);
  RowMatrix<float> out(2, 4);
  const std::vector<std::int32_t> ids{1, 5};
  CHECK_THROWS_AS(
      detail::gather<float>(ember_test::plain_rows(table), std::span<const std::int32_t>(ids), 2.0f,
                            nullptr, detail::mutable_table(out)),
      std::logic_error);
  const std::vector<std::int32_t> negative{-1};
  RowMatrix<float> one(1, 4);
  CHECK_THROWS_AS(
      detail::gather<float>(ember_test::plain_rows(table), std::span<const std::int32_t>(negative),
                            2.0f, nullptr, detail::mutable_table(one)),
      std::logic_error);
}
#endif

TEST_CASE("gather called directly with bad positions arguments throws std::logic_error",
          "[config][assert]") {
  const RowMatrix<double> table = ember_test::hand_table<double>(5, 4);
  const RowMatrix<double> pe = RowMatrix<double>::Zero(6, 4);
  const std::vector<TokenId> ids{0, 1, 2, 3};
  RowMatrix<double> out(4, 4);
  const auto call = [&](const RowMatrix<double>& positions, Index seq_len, Index offset,
                        RowMatrix<double>& dst) {
    detail::RowAddends<double> add;
    add.positions = detail::const_table(positions);
    add.seq_len = seq_len;
    add.offset = offset;
    detail::gather<double>(ember_test::plain_rows(table), std::span<const TokenId>(ids), 2.0, add,
                           detail::mutable_table(dst));
  };
  CHECK_THROWS_AS(call(pe, 0, 0, out), std::logic_error);   // seq_len <= 0
  CHECK_THROWS_AS(call(pe, 2, -1, out), std::logic_error);  // offset < 0
  CHECK_THROWS_AS(call(pe, 4, 3, out), std::logic_error);   // offset + seq_len > max_len
  const RowMatrix<double> narrow = RowMatrix<double>::Zero(6, 3);
  CHECK_THROWS_AS(call(narrow, 2, 0, out), std::logic_error);  // positions width != d
  RowMatrix<double> short_out(3, 4);
  CHECK_THROWS_AS(call(pe, 2, 0, short_out), std::logic_error);  // out rows != n
  CHECK_NOTHROW(call(pe, 2, 4, out));
}

TEST_CASE("grouping ids called directly with an id outside the table throws std::logic_error",
          "[config][assert]") {
  // The sparse backward's grouping trusts ids its public callers checked.
  detail::RowGrouper grouper;
  const std::vector<TokenId> ids{0, 7, 1};
  CHECK_THROWS_AS(grouper.group(std::span<const TokenId>(ids), 5, -1), std::logic_error);
  detail::RowGrouper fresh;  // a violated precondition leaves no promise about the first one
  const std::vector<TokenId> good{0, 4, 1, 4};
  fresh.group(std::span<const TokenId>(good), 5, -1);
  REQUIRE(fresh.rows().size() == 3);
  CHECK(fresh.positions(2).size() == 2);  // id 4 at positions 1 and 3
}
