// Tests of ember::ClipGroup: global norm over sparse, dense and tied gradients, clipping.
// SPDX-License-Identifier: MIT
#include <ember/clip.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using Catch::Matchers::WithinRel;
using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

TEST_CASE("the global norm counts sparse and dense gradients of separate parameters", "[clip]") {
  ember::SparseRowGrad<double> sparse(4, 2);
  RowMatrix<double> rows(1, 2);
  rows << 3, 4;  // norm 5
  sparse.accumulate(std::vector<TokenId>{2}, rows, 1.0, 4);
  RowMatrix<double> dense = RowMatrix<double>::Zero(2, 3);
  dense(1, 2) = 12;  // norm 12
  ember::ClipGroup<double> group;
  group.add(sparse).add(dense);
  CHECK(group.size() == 2);
  CHECK_THAT(group.norm(), WithinRel(13.0, 1e-15));
  CHECK_THAT(group.norm(1.0), WithinRel(19.0, 1e-15));
  CHECK_THAT(group.norm(std::numeric_limits<double>::infinity()), WithinRel(12.0, 1e-15));

  const double before = group.clip(6.5);
  CHECK_THAT(before, WithinRel(13.0, 1e-15));
  const double c = 6.5 / (13.0 + 1e-6);
  CHECK_THAT(sparse.values()(0, 0), WithinRel(3 * c, 1e-14));
  CHECK_THAT(dense(1, 2), WithinRel(12 * c, 1e-14));
  CHECK_THAT(group.norm(), WithinRel(6.5, 1e-6));
  // Below max_norm: nothing changes.
  const RowMatrix<double> kept = dense;
  group.clip(100.0);
  CHECK(ember_test::same_bits(dense, kept));
}

TEMPLATE_TEST_CASE("a tied pair's norm is the norm of sparse + dense", "[clip]", float, double) {
  using T = TestType;
  const Index V = 6, d = 3;
  ember::SparseRowGrad<T> sparse(V, d);
  sparse.accumulate(std::vector<TokenId>{1, 4, 4}, ember_test::random_table<T>(3, d, 1), T(1), V);
  RowMatrix<T> dense = ember_test::random_table<T>(V, d, 2);
  RowMatrix<T> combined = dense;
  sparse.add_to(combined);
  ember::ClipGroup<T> group;
  group.add_tied(sparse, dense);
  CHECK_THAT(group.norm(), WithinRel(combined.template cast<double>().norm(), 1e-6));
  group.clip(0.5);
  RowMatrix<T> after = dense;
  sparse.add_to(after);
  CHECK_THAT(after.template cast<double>().norm(), WithinRel(0.5, 1e-5));
}

TEMPLATE_TEST_CASE("a row's share of the global norm does not depend on where the row is", "[clip]",
                   float, double) {
  using T = TestType;
  const Index V = 16;
  const auto same_norm = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    for (const Index d : {5, 37}) {
      RowMatrix<T> row = ember_test::random_table<T>(1, d, seed);
      for (const double p : {1.0, 2.0, 3.0, std::numeric_limits<double>::infinity()}) {
        ember::ClipGroup<T> alone;
        alone.add(row);
        const double expected = alone.norm(p);
        // The row as row r of V x d zeros, d·r elements in (every offset modulo 16): dense alone,
        // and as the sparse half of a tied pair. Adding the zero rows changes no bit.
        for (Index r = 0; r < V; ++r) {
          INFO("seed " << seed << ", d = " << d << ", p = " << p << ", row " << r);
          RowMatrix<T> dense = RowMatrix<T>::Zero(V, d);
          dense.row(r) = row;
          ember::ClipGroup<T> group;
          group.add(dense);
          CHECK(same_norm(group.norm(p), expected));
          ember::SparseRowGrad<T> sparse(V, d);
          sparse.accumulate(std::vector<TokenId>{static_cast<TokenId>(r)}, row, T(1), V);
          RowMatrix<T> zeros = RowMatrix<T>::Zero(V, d);
          ember::ClipGroup<T> tied;
          tied.add_tied(sparse, zeros);
          CHECK(same_norm(tied.norm(p), expected));
        }
      }
    }
  }
}

TEST_CASE("the max-abs norm of a gradient holding a NaN is NaN, and clip refuses it", "[clip]") {
  const double inf = std::numeric_limits<double>::infinity();
  RowMatrix<float> dense = RowMatrix<float>::Ones(2, 3);
  dense(1, 1) = std::numeric_limits<float>::quiet_NaN();
  ember::ClipGroup<float> group;
  group.add(dense);
  CHECK(std::isnan(group.norm(inf)));
  REQUIRE_THROWS_WITH(group.clip(0.5, inf), Catch::Contains("not finite"));
  CHECK(dense(0, 0) == 1.0f);  // nothing scaled
}

TEST_CASE("clip rejects bad arguments and non-finite norms without scaling", "[clip]") {
  RowMatrix<float> dense = RowMatrix<float>::Ones(2, 2);
  ember::ClipGroup<float> group;
  group.add(dense);
  REQUIRE_THROWS_WITH(group.clip(0.0),
                      Catch::Contains("ClipGroup::clip") && Catch::Contains("max_norm"));
  REQUIRE_THROWS_AS(group.clip(std::nan("")), ember::ValueError);
  REQUIRE_THROWS_AS(group.clip(1.0, 0.0), ember::ValueError);
  dense(0, 0) = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(group.clip(1.0), Catch::Contains("not finite"));
  CHECK(dense(0, 1) == 1.0f);

  ember::SparseRowGrad<float> sparse(4, 2);
  sparse.accumulate(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, 2), 1.0f, 4);
  RowMatrix<float> wrong = RowMatrix<float>::Ones(3, 2);
  ember::ClipGroup<float> g2;
  REQUIRE_THROWS_AS(g2.add_tied(sparse, wrong), ember::ShapeError);
  CHECK(g2.size() == 0);
}
