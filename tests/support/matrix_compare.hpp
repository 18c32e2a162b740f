// Matrix comparison helpers for ember's training tests.
// SPDX-License-Identifier: MIT
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include <ember/types.hpp>

namespace ember_test {

template <class T>
constexpr double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// max |a - b| <= tol · max(1, max |b|), with a readable failure.
template <class A, class B>
void require_close(const A& a, const B& b, double tolerance) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  const double diff = (a.template cast<double>() - b.template cast<double>()).cwiseAbs().maxCoeff();
  const double scale = std::max(1.0, b.template cast<double>().cwiseAbs().maxCoeff());
  INFO("max abs difference " << diff << ", scale " << scale);
  REQUIRE(diff <= tolerance * scale);
}

/// True when every element of m equals value: the untouched-buffer check (the sentinel was stored,
/// never computed, so == is the point).
template <class T>
bool all_equal_to(const ember::RowMatrix<T>& m, T value) {
  return (m.array() == value).all();
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

}  // namespace ember_test
