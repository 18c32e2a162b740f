// Tests for ember/positional.hpp: SinusoidalEncoding's table and add_to.
// SPDX-License-Identifier: MIT
#include "ember/positional.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/random.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

namespace {

// PE(p, c) from the paper's formula, computed independently of ember in long double.
long double reference_pe(ember::Index p, ember::Index c, ember::Index d, long double base) {
  const long double two_i = static_cast<long double>(c - c % 2);
  const long double angle =
      static_cast<long double>(p) / std::pow(base, two_i / static_cast<long double>(d));
  return c % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

// Tolerance for a value computed in double and rounded once to T.
template <class T>
double pe_tolerance() {
  return std::is_same_v<T, float> ? 1e-6 : 1e-11;
}

template <class T>
ember::RowMatrix<T> sentinel_matrix(ember::Index rows, ember::Index cols) {
  return ember::RowMatrix<T>::Constant(rows, cols, T(-7.25));
}

template <class T>
bool is_sentinel(const ember::RowMatrix<T>& m) {
  return (m.array() == T(-7.25)).all();
}

}  // namespace

TEMPLATE_TEST_CASE("the first rows for d = 4 match the worked example", "[positional]", float,
                   double) {
  const ember::SinusoidalEncoding<TestType> pe(3, 4);
  const double expected[3][4] = {
      {0.0, 1.0, 0.0, 1.0},
      {0.841, 0.540, 0.010, 1.000},
      {0.909, -0.416, 0.020, 1.000},
  };
  REQUIRE(pe.max_len() == 3);
  REQUIRE(pe.d_model() == 4);
  REQUIRE(pe.table().rows() == 3);
  REQUIRE(pe.table().cols() == 4);
  for (ember::Index p = 0; p < 3; ++p) {
    for (ember::Index c = 0; c < 4; ++c) {
      CAPTURE(p, c);
      CHECK_THAT(static_cast<double>(pe.table()(p, c)), WithinAbs(expected[p][c], 1e-3));
    }
  }
}

TEMPLATE_TEST_CASE("encodings equal the paper's formula computed in long double", "[positional]",
                   float, double) {
  constexpr ember::Index max_len = 2048;
  constexpr ember::Index d = 512;
  const ember::SinusoidalEncoding<TestType> pe(max_len, d);
  REQUIRE(pe.base() == TestType(10000));
  ember::Random rng(2024);
  const double tol = pe_tolerance<TestType>();
  for (int k = 0; k < 2000; ++k) {
    const auto p = static_cast<ember::Index>(rng.uniform_index(max_len));
    const auto c = static_cast<ember::Index>(rng.uniform_index(d));
    CAPTURE(p, c);
    const auto want = static_cast<double>(reference_pe(p, c, d, 10000.0L));
    REQUIRE_THAT(static_cast<double>(pe.table()(p, c)), WithinAbs(want, tol));
  }
  // The extreme corners too.
  for (const ember::Index p : {ember::Index{0}, ember::Index{1}, max_len - 1}) {
    for (const ember::Index c : {ember::Index{0}, ember::Index{1}, d - 2, d - 1}) {
      CAPTURE(p, c);
      REQUIRE_THAT(static_cast<double>(pe.table()(p, c)),
                   WithinAbs(static_cast<double>(reference_pe(p, c, d, 10000.0L)), tol));
    }
  }
}

TEMPLATE_TEST_CASE("sine and cosine are interleaved and position 0 is 0, 1, 0, 1, ...",
                   "[positional]", float, double) {
  constexpr ember::Index d = 16;
  const ember::SinusoidalEncoding<TestType> pe(50, d);
  for (ember::Index c = 0; c < d; ++c) {
    CAPTURE(c);
    CHECK(pe.table()(0, c) == TestType(c % 2 == 0 ? 0 : 1));
  }
  // Even column 2i and odd column 2i+1 share one frequency: sin^2 + cos^2 = 1. A split
  // [sin | cos] layout would pair columns i and i + d/2 instead and fail this.
  for (ember::Index p = 0; p < 50; ++p) {
    for (ember::Index i = 0; i < d / 2; ++i) {
      const double s = static_cast<double>(pe.table()(p, 2 * i));
      const double c = static_cast<double>(pe.table()(p, 2 * i + 1));
      CAPTURE(p, i);
      REQUIRE_THAT(s * s + c * c, WithinAbs(1.0, 1e-6));
    }
  }
  // Column 0 is sin(p) and column 1 is cos(p) (frequency 1).
  CHECK_THAT(static_cast<double>(pe.table()(7, 0)), WithinAbs(std::sin(7.0), 1e-6));
  CHECK_THAT(static_cast<double>(pe.table()(7, 1)), WithinAbs(std::cos(7.0), 1e-6));
}

TEMPLATE_TEST_CASE("an odd d_model works and its last column is a sine", "[positional]", float,
                   double) {
  constexpr ember::Index d = 7;
  const ember::SinusoidalEncoding<TestType> pe(20, d);
  REQUIRE(pe.d_model() == d);
  CHECK(pe.table()(0, d - 1) == TestType(0));  // sin(0); a cosine would be 1
  for (ember::Index p = 0; p < 20; ++p) {
    for (ember::Index c = 0; c < d; ++c) {
      CAPTURE(p, c);
      REQUIRE_THAT(static_cast<double>(pe.table()(p, c)),
                   WithinAbs(static_cast<double>(reference_pe(p, c, d, 10000.0L)),
                             pe_tolerance<TestType>()));
    }
  }
  // d = 1: a single sine column.
  const ember::SinusoidalEncoding<TestType> one(5, 1);
  CHECK_THAT(static_cast<double>(one.table()(3, 0)), WithinAbs(std::sin(3.0), 1e-6));
}

TEMPLATE_TEST_CASE("a custom base changes the frequencies", "[positional]", float, double) {
  constexpr ember::Index d = 8;
  const ember::SinusoidalEncoding<TestType> pe(30, d, TestType(100));
  REQUIRE(pe.base() == TestType(100));
  for (ember::Index p = 0; p < 30; ++p) {
    for (ember::Index c = 0; c < d; ++c) {
      CAPTURE(p, c);
      REQUIRE_THAT(
          static_cast<double>(pe.table()(p, c)),
          WithinAbs(static_cast<double>(reference_pe(p, c, d, 100.0L)), pe_tolerance<TestType>()));
    }
  }
  // Column 2 (i = 1) has frequency base^(-2/8): differs from the default base's.
  const ember::SinusoidalEncoding<TestType> standard(30, d);
  CHECK(std::abs(static_cast<double>(pe.table()(5, 2) - standard.table()(5, 2))) > 1e-2);
}

TEMPLATE_TEST_CASE("add_to adds PE(offset + r % seq_len) to each row of a batch", "[positional]",
                   float, double) {
  constexpr ember::Index batch = 3;
  constexpr ember::Index seq_len = 4;
  constexpr ember::Index d = 6;
  const ember::SinusoidalEncoding<TestType> pe(10, d);
  ember::RowMatrix<TestType> x(batch * seq_len, d);
  for (ember::Index r = 0; r < x.rows(); ++r) {
    for (ember::Index c = 0; c < d; ++c) x(r, c) = static_cast<TestType>(r * 10 + c);
  }
  const ember::RowMatrix<TestType> original = x;

  SECTION("offset 0") {
    pe.add_to(x, seq_len);
    for (ember::Index r = 0; r < x.rows(); ++r) {
      for (ember::Index c = 0; c < d; ++c) {
        CAPTURE(r, c);
        REQUIRE(x(r, c) == original(r, c) + pe.table()(r % seq_len, c));
      }
    }
  }
  SECTION("offset 5 shifts every position") {
    pe.add_to(x, seq_len, 5);
    for (ember::Index r = 0; r < x.rows(); ++r) {
      for (ember::Index c = 0; c < d; ++c) {
        CAPTURE(r, c);
        REQUIRE(x(r, c) == original(r, c) + pe.table()(5 + r % seq_len, c));
      }
    }
  }
  SECTION("offset + seq_len == max_len is the last valid window") {
    pe.add_to(x, seq_len, 10 - seq_len);
    CHECK(x(seq_len - 1, 0) == original(seq_len - 1, 0) + pe.table()(9, 0));
  }
  SECTION("seq_len 1 with an offset: token-by-token decoding") {
    ember::RowMatrix<TestType> step = ember::RowMatrix<TestType>::Zero(1, d);
    pe.add_to(step, 1, 9);
    CHECK(step == pe.table().row(9));
  }
}

TEMPLATE_TEST_CASE("add_to into a block of a larger matrix leaves the rest untouched",
                   "[positional]", float, double) {
  const ember::SinusoidalEncoding<TestType> pe(8, 4);
  ember::RowMatrix<TestType> big = sentinel_matrix<TestType>(10, 9);
  // Rows 3..8 (two sequences of 3), columns 2..5: a non-unit-stride view.
  pe.add_to(big.block(3, 2, 6, 4), 3, 1);
  for (ember::Index r = 0; r < big.rows(); ++r) {
    for (ember::Index c = 0; c < big.cols(); ++c) {
      CAPTURE(r, c);
      const bool inside = r >= 3 && r < 9 && c >= 2 && c < 6;
      const TestType want =
          inside ? TestType(-7.25) + pe.table()(1 + (r - 3) % 3, c - 2) : TestType(-7.25);
      REQUIRE(big(r, c) == want);
    }
  }
}

TEST_CASE("SinusoidalEncoding rejects bad construction arguments", "[positional]") {
  using PE = ember::SinusoidalEncoding<double>;
  CHECK_THROWS_AS(PE(0, 4), ember::ShapeError);
  CHECK_THROWS_AS(PE(-3, 4), ember::ShapeError);
  CHECK_THROWS_AS(PE(4, 0), ember::ShapeError);
  CHECK_THROWS_AS(PE(4, -1), ember::ShapeError);
  CHECK_THROWS_WITH(PE(0, 4), Contains("max_len"));
  CHECK_THROWS_WITH(PE(4, 0), Contains("d_model"));
  try {
    PE(4, -2);
    FAIL("no throw");
  } catch (const ember::ShapeError& e) {
    CHECK(e.dimension() == -1);
    CHECK(e.actual() == -2);
  }

  CHECK_THROWS_AS(PE(4, 4, 0.0), ember::ValueError);
  CHECK_THROWS_AS(PE(4, 4, -10.0), ember::ValueError);
  CHECK_THROWS_AS(PE(4, 4, std::numeric_limits<double>::quiet_NaN()), ember::ValueError);
  CHECK_THROWS_AS(PE(4, 4, std::numeric_limits<double>::infinity()), ember::ValueError);
  CHECK_THROWS_WITH(PE(4, 4, -10.0), Contains("base"));
  try {
    PE(4, 4, -10.0);
    FAIL("no throw");
  } catch (const ember::ValueError& e) {
    CHECK(e.value() == -10.0);
  }
  CHECK_THROWS_AS(ember::SinusoidalEncoding<float>(4, 4, std::numeric_limits<float>::quiet_NaN()),
                  ember::ValueError);
}

TEMPLATE_TEST_CASE("add_to rejects bad arguments and leaves x unchanged", "[positional]", float,
                   double) {
  const ember::SinusoidalEncoding<TestType> pe(8, 4);
  ember::RowMatrix<TestType> x = sentinel_matrix<TestType>(6, 4);

  SECTION("seq_len <= 0 is a ShapeError") {
    CHECK_THROWS_AS(pe.add_to(x, 0), ember::ShapeError);
    CHECK_THROWS_AS(pe.add_to(x, -2), ember::ShapeError);
    CHECK_THROWS_WITH(pe.add_to(x, 0), Contains("seq_len"));
  }
  SECTION("a negative offset is an IndexError") {
    CHECK_THROWS_AS(pe.add_to(x, 3, -1), ember::IndexError);
    try {
      pe.add_to(x, 3, -1);
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(e.value() == -1);
      CHECK(e.bound() == 8);
      CHECK_THAT(std::string(e.what()), Contains("offset -1"));
    }
  }
  SECTION(
      "offset + seq_len > max_len is an IndexError naming position, offset + seq_len, max_len") {
    CHECK_THROWS_AS(pe.add_to(x, 3, 6), ember::IndexError);
    try {
      pe.add_to(x, 3, 6);  // positions 6, 7, 8: 8 is outside [0, 8)
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(e.position() == 2);  // index within the sequence of the first bad position
      CHECK(e.value() == 8);     // the bad position offset + seq_len - 1
      CHECK(e.bound() == 8);     // max_len
      CHECK_THAT(msg, Contains("position 8"));
      CHECK_THAT(msg, Contains("offset 6"));
      CHECK_THAT(msg, Contains("seq_len 3"));
      CHECK_THAT(msg, Contains("[0, 8)"));
      CHECK_THAT(msg, Contains("max_len"));
      CHECK(std::string(e.message()) == msg);
    }
    // seq_len longer than the table, offset 0.
    ember::RowMatrix<TestType> long_x = sentinel_matrix<TestType>(9, 4);
    CHECK_THROWS_AS(pe.add_to(long_x, 9), ember::IndexError);
    CHECK(is_sentinel(long_x));
  }
  SECTION("x with the wrong number of columns is a ShapeError") {
    ember::RowMatrix<TestType> wide = sentinel_matrix<TestType>(6, 5);
    CHECK_THROWS_AS(pe.add_to(wide, 3), ember::ShapeError);
    try {
      pe.add_to(wide, 3);
      FAIL("no throw");
    } catch (const ember::ShapeError& e) {
      CHECK(e.dimension() == 1);
      CHECK(e.expected() == 4);
      CHECK(e.actual() == 5);
    }
    CHECK(is_sentinel(wide));
  }
  SECTION("rows that are not a multiple of seq_len are a ShapeError") {
    CHECK_THROWS_AS(pe.add_to(x, 4), ember::ShapeError);
    try {
      pe.add_to(x, 4);
      FAIL("no throw");
    } catch (const ember::ShapeError& e) {
      CHECK(e.dimension() == 0);
      CHECK(e.actual() == 6);
      CHECK_THAT(std::string(e.what()), Contains("seq_len = 4"));
    }
  }
  CHECK(is_sentinel(x));
}
