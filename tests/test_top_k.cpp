// Tests of ember/top_k.hpp: the k best entries of each row against a stable sort (bit for bit,
// with ties, NaNs, infinities and signed zeros), against torch.topk's own answers, at several
// thread counts, over blocks, maps and column-major inputs, and its errors.
// SPDX-License-Identifier: MIT
#include "ember/top_k.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/threads.hpp"
#include "support/top_k_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

/// Requires got == the reference top-k of x, values bit for bit and indices exactly.
template <class T, class Got>
void require_top_k_matches(const RowMatrix<T>& x, Index k, const Got& got) {
  const auto want = ember_test::ref_top_k(x, k);
  REQUIRE(got.values.rows() == x.rows());
  REQUIRE(got.values.cols() == k);
  REQUIRE(got.indices.rows() == x.rows());
  REQUIRE(got.indices.cols() == k);
  for (Index i = 0; i < x.rows(); ++i) {
    for (Index j = 0; j < k; ++j) {
      INFO("row " << i << ", rank " << j);
      REQUIRE(got.indices(i, j) == want.indices(i, j));
      REQUIRE(ember_test::bits_of(got.values(i, j)) == ember_test::bits_of(want.values(i, j)));
    }
  }
}

/// A row of values with many exact ties: integers in [0, levels).
template <class T>
RowMatrix<T> tied_rows(Index rows, Index cols, int levels, std::uint64_t seed) {
  ember::Random rng(seed);
  RowMatrix<T> x(rows, cols);
  for (Index i = 0; i < x.size(); ++i)
    x.data()[i] = static_cast<T>(rng.uniform_index(static_cast<std::uint64_t>(levels)));
  return x;
}

}  // namespace

TEMPLATE_TEST_CASE("top_k returns the k largest entries of each row, best first", "[top_k]", float,
                   double) {
  const RowMatrix<TestType> x = ember_test::random_table<TestType>(7, 1000, 11);
  for (const Index k :
       {Index{1}, Index{2}, Index{5}, Index{17}, Index{50}, Index{999}, Index{1000}}) {
    INFO("k = " << k);
    require_top_k_matches(x, k, ember::top_k(x, k));
  }
}

TEMPLATE_TEST_CASE("top_k breaks ties by the lower column, at the k-th place too", "[top_k]", float,
                   double) {
  // Ten levels over 3000 columns: every rank is a tie, the k-th place included.
  const RowMatrix<TestType> x = tied_rows<TestType>(5, 3000, 10, 3);
  for (const Index k : {Index{1}, Index{3}, Index{50}, Index{301}, Index{3000}}) {
    INFO("k = " << k);
    require_top_k_matches(x, k, ember::top_k(x, k));
  }
  RowMatrix<TestType> constant = RowMatrix<TestType>::Constant(2, 40, TestType(1.5));
  const auto best = ember::top_k(constant, 4);
  for (Index j = 0; j < 4; ++j) CHECK(best.indices(1, j) == j);
}

TEMPLATE_TEST_CASE("top_k ranks NaN above +inf, and -0 and +0 as equals", "[top_k]", float,
                   double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  RowMatrix<T> x(1, 9);
  x << T(1), -inf, nan, T(0), inf, T(-0.0), nan, T(2), T(0);
  const auto best = ember::top_k(x, 9);
  const std::vector<TokenId> order{2, 6, 4, 7, 0, 3, 5, 8, 1};  // NaN, NaN, inf, 2, 1, zeros, -inf
  for (Index j = 0; j < 9; ++j) CHECK(best.indices(0, j) == order[static_cast<std::size_t>(j)]);
  CHECK(std::isnan(best.values(0, 0)));
  CHECK(std::isnan(best.values(0, 1)));
  CHECK(best.values(0, 2) == inf);
  CHECK_FALSE(std::signbit(best.values(0, 5)));  // +0 at column 3 before -0 at column 5
  CHECK(std::signbit(best.values(0, 6)));
  require_top_k_matches(x, 9, best);
  require_top_k_matches(x, 3, ember::top_k(x, 3));

  // More NaNs than k: the first k of them, in column order.
  RowMatrix<T> nans = ember_test::random_table<T>(1, 500, 5);
  for (const Index c : {Index{7}, Index{100}, Index{101}, Index{480}}) nans(0, c) = nan;
  require_top_k_matches(nans, 3, ember::top_k(nans, 3));
  require_top_k_matches(nans, 6, ember::top_k(nans, 6));
}

TEMPLATE_TEST_CASE("top_k of rows in ascending order, where every entry enters the heap", "[top_k]",
                   float, double) {
  RowMatrix<TestType> x(3, 5000);
  for (Index j = 0; j < x.cols(); ++j) {
    x(0, j) = static_cast<TestType>(j);
    x(1, j) = static_cast<TestType>(x.cols() - j);
    x(2, j) = static_cast<TestType>(j / 7);  // ascending with ties
  }
  for (const Index k : {Index{1}, Index{16}, Index{50}})
    require_top_k_matches(x, k, ember::top_k(x, k));
}

TEST_CASE("top_k gives the same bits for any thread count, one long row or many", "[top_k]") {
  // One decoding row long enough to be split into column chunks when threads are many, and
  // rows enough to be split by rows (both above the kernels' serial threshold).
  const RowMatrix<float> one = ember_test::random_table<float>(1, 300000, 21);
  RowMatrix<float> many = tied_rows<float>(24, 12000, 100, 22);
  many.row(5).setConstant(0.25f);
  const auto one_50 = ember_test::ref_top_k(one, 50);
  const auto one_1 = ember_test::ref_top_k(one, 1);
  const auto many_40 = ember_test::ref_top_k(many, 40);
  for (const int threads : {1, 2, 3, 8}) {
    INFO("threads = " << threads);
    const ember_test::ScopedThreads scoped(threads);
    const auto a = ember::top_k(one, 50);
    CHECK(a.indices == one_50.indices);
    CHECK(a.values == one_50.values);
    CHECK(ember::top_k(one, 1).indices == one_1.indices);
    const auto b = ember::top_k(many, 40);
    CHECK(b.indices == many_40.indices);
    CHECK(b.values == many_40.values);
  }
}

TEST_CASE("top_k equals torch.topk's values, and its indices wherever there is no tie", "[top_k]") {
  const auto torch = ember_test::load_torch_top_k(EMBER_TEST_DATA_DIR "/top_k/torch_topk.txt");
  const RowMatrix<float>& x = torch.x;
  for (const auto& [k, want] : torch.by_k) {
    const auto got = ember::top_k(x, k);
    for (Index i = 0; i < x.rows(); ++i) {
      for (Index j = 0; j < k; ++j) {
        INFO("k = " << k << ", row " << i << ", rank " << j);
        // Equal as numbers (NaN to NaN); where -0 and +0 tie, the sign at a rank is tie order.
        const float g = got.values(i, j), w = want.values(i, j);
        REQUIRE(((std::isnan(g) && std::isnan(w)) || g == w));
        REQUIRE(ember_test::bits_of(x(i, got.indices(i, j))) == ember_test::bits_of(g));
        // Where torch chose another column, it holds an equal value: a tie torch leaves open.
        if (got.indices(i, j) != want.indices(i, j)) {
          const float other = x(i, want.indices(i, j));
          REQUIRE(((std::isnan(other) && std::isnan(g)) || other == g));
        }
      }
    }
    require_top_k_matches(x, k, got);
  }
  // The rows without ties (0-2) give torch's indices exactly.
  const auto& want = torch.by_k.at(40);
  const auto got = ember::top_k(x.topRows(3), 40);
  CHECK(got.indices == want.indices.topRows(3));
}

TEST_CASE("top_k reads blocks, maps and column-major matrices", "[top_k]") {
  const RowMatrix<double> big = ember_test::random_table<double>(10, 700, 31);
  const RowMatrix<double> middle = big.block(2, 50, 5, 600);
  require_top_k_matches(middle, 9, ember::top_k(big.block(2, 50, 5, 600), 9));
  const Eigen::Map<const RowMatrix<double>> map(big.data(), 4, 1750);  // 4 rows of 1750
  require_top_k_matches(RowMatrix<double>(map), 7, ember::top_k(map, 7));
  const Eigen::MatrixXd column_major = middle;
  require_top_k_matches(middle, 9, ember::top_k(column_major, 9));
  const ember::RowVector<double> one_row = big.row(3);
  require_top_k_matches(RowMatrix<double>(one_row), 4, ember::top_k(one_row, 4));
}

TEST_CASE("top_k writes into caller buffers, blocks of larger matrices too", "[top_k]") {
  const RowMatrix<float> x = ember_test::random_table<float>(6, 400, 41);
  RowMatrix<float> values(6, 5);
  RowMatrix<TokenId> indices(6, 5);
  ember::top_k(x, 5, values, indices);
  const auto owning = ember::top_k(x, 5);
  CHECK(values == owning.values);
  CHECK(indices == owning.indices);

  RowMatrix<float> wide_values = RowMatrix<float>::Constant(8, 9, -7.0f);
  RowMatrix<TokenId> wide_indices = RowMatrix<TokenId>::Constant(8, 9, -7);
  ember::top_k(x, 5, wide_values.block(1, 2, 6, 5), wide_indices.block(1, 2, 6, 5));
  CHECK(wide_values.block(1, 2, 6, 5) == owning.values);
  CHECK(wide_indices.block(1, 2, 6, 5) == owning.indices);
  CHECK(wide_values.col(0).isConstant(-7.0f));
  CHECK(wide_indices.row(0).isConstant(-7));
}

TEST_CASE("top_k of k = 0 and of no rows is empty", "[top_k]") {
  const RowMatrix<float> x = ember_test::random_table<float>(3, 10, 1);
  const auto none = ember::top_k(x, 0);
  CHECK(none.values.rows() == 3);
  CHECK(none.values.cols() == 0);
  CHECK(none.indices.cols() == 0);
  const RowMatrix<float> empty(0, 10);
  const auto rows = ember::top_k(empty, 4);
  CHECK(rows.values.rows() == 0);
  CHECK(rows.values.cols() == 4);
}

TEST_CASE("top_k refuses k outside [0, V] and buffers of the wrong shape, writing nothing",
          "[top_k]") {
  const RowMatrix<float> x = ember_test::random_table<float>(3, 10, 1);
  for (const Index k : {Index{11}, Index{-1}}) {
    const auto e = ember_test::catch_as<ember::ShapeError>([&] { (void)ember::top_k(x, k); });
    REQUIRE(e);
    CHECK(std::string(e->what()) ==
          "ember::top_k: k = " + std::to_string(k) + " is outside [0, 10], the columns of scores");
    CHECK(e->dimension() == -1);
    CHECK(e->expected() == 10);
    CHECK(e->actual() == k);
  }
  RowMatrix<float> values = RowMatrix<float>::Constant(3, 4, 9.0f);
  RowMatrix<TokenId> indices = RowMatrix<TokenId>::Constant(3, 5, 9);
  REQUIRE_THROWS_WITH(ember::top_k(x, 5, values, indices),
                      "ember::top_k: values has 4 columns, expected k = 5");
  RowMatrix<float> good_values(3, 5);
  RowMatrix<TokenId> short_indices = RowMatrix<TokenId>::Constant(2, 5, 9);
  REQUIRE_THROWS_WITH(ember::top_k(x, 5, good_values, short_indices),
                      "ember::top_k: indices has 2 rows, expected scores' rows = 3");
  CHECK(values.isConstant(9.0f));
  CHECK(indices.isConstant(9));
  CHECK(short_indices.isConstant(9));
}
