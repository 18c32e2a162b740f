// Tests for ember/init.hpp: Init rules, Init::fill, and how Embedding uses them.
// SPDX-License-Identifier: MIT
#include "ember/init.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/random.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

template <class T>
double sample_stddev(const ember::RowMatrix<T>& m) {
  const Eigen::ArrayXd v = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(m.data(), m.size())
                               .template cast<double>()
                               .array();
  const double mean = v.mean();
  return std::sqrt((v - mean).square().sum() / static_cast<double>(v.size() - 1));
}

template <class T>
double sample_mean(const ember::RowMatrix<T>& m) {
  return m.template cast<double>().mean();
}

constexpr double kNaNd = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfd = std::numeric_limits<double>::infinity();

}  // namespace

TEMPLATE_TEST_CASE("normal() defaults to std 1/sqrt(d_model)", "[init]", float, double) {
  ember::RowMatrix<TestType> w(1000, 64);
  ember::Init::normal().fill(w, 1);
  const double want = 1.0 / std::sqrt(64.0);
  CHECK_THAT(sample_stddev(w), WithinRel(want, 0.03));
  CHECK_THAT(sample_mean(w), WithinAbs(0.0, 0.005));

  // The default depends on the width (columns), not on the vocabulary size (rows).
  ember::RowMatrix<TestType> narrow(64, 1000);
  ember::Init::normal().fill(narrow, 1);
  CHECK_THAT(sample_stddev(narrow), WithinRel(1.0 / std::sqrt(1000.0), 0.03));
}

TEMPLATE_TEST_CASE("normal(std) draws N(0, std^2)", "[init]", float, double) {
  ember::RowMatrix<TestType> w(500, 100);
  ember::Init::normal(0.02).fill(w, 3);
  CHECK_THAT(sample_stddev(w), WithinRel(0.02, 0.03));
  CHECK_THAT(sample_mean(w), WithinAbs(0.0, 0.001));

  // Values are Random(seed).normal(0, std) in row-major order, rounded once to T.
  ember::Random rng(3);
  for (ember::Index r = 0; r < 3; ++r) {
    for (ember::Index c = 0; c < w.cols(); ++c) {
      REQUIRE(w(r, c) == static_cast<TestType>(rng.normal(0.0, 0.02)));
    }
  }
}

TEMPLATE_TEST_CASE("truncated_normal keeps every value within cutoff * std", "[init]", float,
                   double) {
  ember::RowMatrix<TestType> w(400, 50);
  SECTION("default cutoff 2") {
    ember::Init::truncated_normal(0.02).fill(w, 4);
    CHECK(w.cwiseAbs().maxCoeff() <= TestType(0.04));
    CHECK(static_cast<double>(w.cwiseAbs().maxCoeff()) > 0.039);  // the tails are populated
    // Truncation at 2 std shrinks the standard deviation to 0.8796 std.
    CHECK_THAT(sample_stddev(w), WithinRel(0.02 * 0.8796, 0.03));
  }
  SECTION("cutoff 1.5") {
    ember::Init::truncated_normal(0.1, 1.5).fill(w, 4);
    CHECK(w.cwiseAbs().maxCoeff() <= TestType(0.15));
  }
}

TEMPLATE_TEST_CASE("xavier_uniform uses bound gain * sqrt(6 / (V + d))", "[init]", float, double) {
  constexpr ember::Index V = 300;
  constexpr ember::Index d = 100;
  for (const double gain : {1.0, 2.5}) {
    CAPTURE(gain);
    ember::RowMatrix<TestType> w(V, d);
    ember::Init::xavier_uniform(gain).fill(w, 8);
    const double bound = gain * std::sqrt(6.0 / static_cast<double>(V + d));
    const double max_abs = static_cast<double>(w.cwiseAbs().maxCoeff());
    CHECK(max_abs <= bound * (1.0 + 1e-6));
    CHECK(max_abs > 0.99 * bound);  // 30000 draws reach the edge
    CHECK(static_cast<double>(w.minCoeff()) < -0.99 * bound);
    CHECK(static_cast<double>(w.maxCoeff()) > 0.99 * bound);
    // U(-b, b) has standard deviation b / sqrt(3).
    CHECK_THAT(sample_stddev(w), WithinRel(bound / std::sqrt(3.0), 0.03));
  }
}

TEMPLATE_TEST_CASE("uniform(low, high) stays within low and high", "[init]", float, double) {
  ember::RowMatrix<TestType> w(200, 50);
  ember::Init::uniform(-0.5, 1.5).fill(w, 9);
  CHECK(w.minCoeff() >= TestType(-0.5));
  CHECK(w.maxCoeff() <= TestType(1.5));  // < 1.5 in double; rounding to float may reach it
  CHECK(static_cast<double>(w.minCoeff()) < -0.49);
  CHECK(static_cast<double>(w.maxCoeff()) > 1.49);
  CHECK_THAT(sample_mean(w), WithinAbs(0.5, 0.02));
}

TEMPLATE_TEST_CASE("zeros() zeroes the table whatever it held", "[init]", float, double) {
  ember::RowMatrix<TestType> w = ember::RowMatrix<TestType>::Constant(7, 5, TestType(3));
  ember::Init::zeros().fill(w, 123);
  CHECK(w.isZero(0));
  const ember::Embedding<TestType> emb(7, 5, ember::Init::zeros(), 1);
  CHECK(emb.weight().isZero(0));
}

TEMPLATE_TEST_CASE("the same seed gives a bit-identical table, another seed a different one",
                   "[init]", float, double) {
  for (const ember::Init init :
       {ember::Init::normal(), ember::Init::normal(0.5), ember::Init::truncated_normal(0.02),
        ember::Init::xavier_uniform(), ember::Init::uniform(-1.0, 1.0)}) {
    ember::RowMatrix<TestType> a(20, 16);
    ember::RowMatrix<TestType> b(20, 16);
    ember::RowMatrix<TestType> c(20, 16);
    init.fill(a, 77);
    init.fill(b, 77);
    init.fill(c, 78);
    REQUIRE(a == b);
    REQUIRE(a != c);
  }
}

TEMPLATE_TEST_CASE("Embedding(V, d, seed) is initialised by Init::normal()", "[init]", float,
                   double) {
  const ember::Embedding<TestType> emb(50, 16, 42);
  ember::RowMatrix<TestType> want(50, 16);
  ember::Init::normal().fill(want, 42);
  CHECK(emb.weight() == want);

  // The default seed is 0.
  const ember::Embedding<TestType> dflt(50, 16);
  ember::Init::normal().fill(want, 0);
  CHECK(dflt.weight() == want);

  // Same arguments, same table.
  const ember::Embedding<TestType> again(50, 16, 42);
  CHECK(again.weight() == emb.weight());
}

TEMPLATE_TEST_CASE("Embedding(V, d, init, seed) fills the table with init", "[init]", float,
                   double) {
  const auto init = ember::Init::xavier_uniform(0.5);
  const ember::Embedding<TestType> emb(30, 8, init, 5);
  ember::RowMatrix<TestType> want(30, 8);
  init.fill(want, 5);
  CHECK(emb.weight() == want);
  CHECK(emb.vocab_size() == 30);
  CHECK(emb.d_model() == 8);
}

TEMPLATE_TEST_CASE("fill on a block writes the block only, in the same order as a full table",
                   "[init]", float, double) {
  const auto init = ember::Init::normal(1.0);
  ember::RowMatrix<TestType> big = ember::RowMatrix<TestType>::Constant(10, 12, TestType(-9));
  init.fill(big.block(2, 3, 5, 6), 17);

  ember::RowMatrix<TestType> alone(5, 6);
  init.fill(alone, 17);
  CHECK(big.block(2, 3, 5, 6) == alone);
  for (ember::Index r = 0; r < big.rows(); ++r) {
    for (ember::Index c = 0; c < big.cols(); ++c) {
      const bool inside = r >= 2 && r < 7 && c >= 3 && c < 9;
      if (!inside) {
        CAPTURE(r, c);
        REQUIRE(big(r, c) == TestType(-9));
      }
    }
  }

  // The default normal std follows the block's width (6), not the matrix's (12).
  ember::RowMatrix<TestType> wide = ember::RowMatrix<TestType>::Zero(2000, 40);
  ember::Init::normal().fill(wide.leftCols(16), 2);
  const ember::RowMatrix<TestType> left = wide.leftCols(16);
  CHECK_THAT(sample_stddev(left), WithinRel(0.25, 0.03));
  CHECK(wide.rightCols(24).isZero(0));

  // A column-major destination gets the same value at each (row, column).
  Eigen::Matrix<TestType, Eigen::Dynamic, Eigen::Dynamic> col_major(5, 6);
  init.fill(col_major, 17);
  CHECK(col_major == alone);
}

TEMPLATE_TEST_CASE("invalid Init parameters throw ValueError and leave the table untouched",
                   "[init]", float, double) {
  const ember::RowMatrix<TestType> sentinel =
      ember::RowMatrix<TestType>::Constant(4, 3, TestType(-7.25));
  ember::RowMatrix<TestType> w = sentinel;

  const ember::Init bad[] = {
      ember::Init::normal(-1.0),
      ember::Init::normal(kNaNd),
      ember::Init::normal(kInfd),
      ember::Init::truncated_normal(0.0),
      ember::Init::truncated_normal(-0.02),
      ember::Init::truncated_normal(kNaNd),
      ember::Init::truncated_normal(0.02, 0.0),
      ember::Init::truncated_normal(0.02, -1.0),
      ember::Init::truncated_normal(0.02, kNaNd),
      ember::Init::xavier_uniform(0.0),
      ember::Init::xavier_uniform(-1.0),
      ember::Init::xavier_uniform(kNaNd),
      ember::Init::uniform(1.0, 1.0),
      ember::Init::uniform(2.0, 1.0),
      ember::Init::uniform(kNaNd, 1.0),
      ember::Init::uniform(0.0, kInfd),
  };
  for (std::size_t k = 0; k < std::size(bad); ++k) {
    CAPTURE(k);
    CHECK_THROWS_AS(bad[k].validate(), ember::ValueError);
    CHECK_THROWS_AS(bad[k].fill(w, 1), ember::ValueError);
    CHECK_THROWS_AS(ember::Embedding<TestType>(4, 3, bad[k], 1), ember::ValueError);
    REQUIRE(w == sentinel);
  }

  // Messages name the parameter, fields hold the value.
  CHECK_THROWS_WITH(ember::Init::normal(-1.0).fill(w, 1), Contains("std"));
  CHECK_THROWS_WITH(ember::Init::truncated_normal(0.02, 0.0).fill(w, 1), Contains("cutoff"));
  CHECK_THROWS_WITH(ember::Init::xavier_uniform(0.0).fill(w, 1), Contains("gain"));
  CHECK_THROWS_WITH(ember::Init::uniform(2.0, 1.0).fill(w, 1), Contains("low < high"));
  try {
    ember::Init::xavier_uniform(-3.0).fill(w, 1);
    FAIL("no throw");
  } catch (const ember::ValueError& e) {
    CHECK(e.value() == -3.0);
  }
  CHECK(w == sentinel);

  // Valid edge cases do not throw.
  CHECK_NOTHROW(ember::Init::normal(0.0).validate());
  CHECK_NOTHROW(ember::Init::zeros().validate());
  CHECK_NOTHROW(ember::Init::uniform(-1e-9, 1e-9).validate());
}

TEST_CASE("Embedding rejects non-positive sizes with ShapeError", "[init]") {
  CHECK_THROWS_AS(ember::Embedding<float>(0, 4), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<float>(4, 0), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<double>(-1, 4, ember::Init::zeros()), ember::ShapeError);
}
