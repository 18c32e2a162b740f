// The matrix comparisons of ember's tests, one helper per job: same_bits (bit identity),
// check_close (closeness within a tolerance) and all_equal_to (a buffer left untouched).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include <ember/types.hpp>

namespace ember_test {

// ---- tolerances ---------------------------------------------------------------------------------

/// Relative tolerance for comparing a computed value with a reference computed in a different
/// order (a few dozen roundings at most in these tests).
template <class T>
constexpr double rel_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

/// Absolute tolerance for values of magnitude about one that may legitimately be near zero.
template <class T>
constexpr double abs_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

/// Tolerance relative to the size of a whole result (see abs_tol_for), for values that went
/// through many roundings of their largest element: optimizer steps, training, a composed stem.
template <class T>
constexpr double scaled_tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

/// The absolute tolerance `tol` · max(1, max |expected|). With it (and rel = 0), check_close passes
/// when the largest difference is at most `tol` times the size of `expected`.
template <class B>
double abs_tol_for(const Eigen::MatrixBase<B>& expected, double tol) {
  const double largest =
      expected.size() == 0 ? 0.0 : expected.template cast<double>().cwiseAbs().maxCoeff();
  return tol * std::max(1.0, largest);
}

// ---- comparisons --------------------------------------------------------------------------------

/// The tolerance comparison. Checks every element of `actual` against `expected`: an element passes
/// when |a - e| <= rel · max(|a|, |e|) or |a - e| <= abs (Catch's WithinRel || WithinAbs), and is
/// named on failure. Shapes are REQUIREd equal first.
template <class A, class B>
void check_close(const Eigen::MatrixBase<A>& actual, const Eigen::MatrixBase<B>& expected,
                 double rel, double abs) {
  REQUIRE(actual.rows() == expected.rows());
  REQUIRE(actual.cols() == expected.cols());
  for (Eigen::Index r = 0; r < actual.rows(); ++r) {
    for (Eigen::Index c = 0; c < actual.cols(); ++c) {
      INFO("element (" << r << ", " << c << ")");
      CHECK_THAT(static_cast<double>(actual(r, c)),
                 Catch::Matchers::WithinRel(static_cast<double>(expected(r, c)), rel) ||
                     Catch::Matchers::WithinAbs(static_cast<double>(expected(r, c)), abs));
    }
  }
}

/// check_close with the per-type default tolerances (rel_tol, abs_tol) of the scalar type of
/// `actual`.
template <class A, class B>
void check_close(const Eigen::MatrixBase<A>& actual, const Eigen::MatrixBase<B>& expected) {
  using T = typename A::Scalar;
  check_close(actual, expected, rel_tol<T>(), abs_tol<T>());
}

/// The bitwise comparison: true when `a` and `b` have the same shape and every element the same
/// bytes (bit identity on purpose: NaN payloads and the sign of zero count). Takes anything with
/// rows(), cols() and (r, c): Eigen matrices, blocks, maps and expressions.
template <class A, class B>
bool same_bits(const A& a, const B& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index r = 0; r < a.rows(); ++r) {
    for (Eigen::Index c = 0; c < a.cols(); ++c) {
      const auto x = a(r, c);
      const auto y = b(r, c);
      static_assert(std::is_same_v<decltype(x), decltype(y)>, "same_bits compares one scalar type");
      if (std::memcmp(&x, &y, sizeof(x)) != 0) return false;
    }
  }
  return true;
}

/// True when every element of m equals value: the untouched-buffer check (the sentinel was stored,
/// never computed, so == is the point).
template <class T>
bool all_equal_to(const ember::RowMatrix<T>& m, T value) {
  return (m.array() == value).all();
}

/// True when a and b have the same size and the same values: the unchanged-state check of a row
/// of optimizer state that a throwing call must not touch (Eigen's == asserts equal sizes).
inline bool same_row_values(const ember::RowVector<float>& a, const ember::RowVector<float>& b) {
  return a.size() == b.size() && a == b;
}

}  // namespace ember_test
