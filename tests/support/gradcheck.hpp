/// Numerical gradients by central finite differences, in double, for checking ember's backward
/// passes (as mlpack's CheckGradient and ggml's gradient mode do).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>

#include <Eigen/Core>

#include "ember/types.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::RowVector;
using ember::TokenId;

/// Default step of the central differences. With a smooth loss of order one, the truncation error
/// is O(eps^2) ~ 1e-12 and the rounding error O(1e-16 / eps) ~ 1e-10, so 1e-6 is a good compromise.
inline constexpr double gradcheck_eps = 1e-6;

/// Returns dL/dX at X = x by central differences: (L(x + eps e_k) - L(x - eps e_k)) / (2 eps)
/// for every element k. `loss` takes the perturbed matrix (const RowMatrix<double>&) and returns
/// the scalar loss; x itself is restored exactly after each element.
template <class Loss>
requires std::invocable < Loss&, const RowMatrix<double>
& > RowMatrix<double> numerical_gradient(Loss&& loss, const RowMatrix<double>& x,
                                         double eps = gradcheck_eps) {
  RowMatrix<double> point = x;
  RowMatrix<double> grad(x.rows(), x.cols());
  for (Index r = 0; r < x.rows(); ++r) {
    for (Index c = 0; c < x.cols(); ++c) {
      const double original = point(r, c);
      point(r, c) = original + eps;
      const double plus = static_cast<double>(loss(static_cast<const RowMatrix<double>&>(point)));
      point(r, c) = original - eps;
      const double minus = static_cast<double>(loss(static_cast<const RowMatrix<double>&>(point)));
      point(r, c) = original;
      grad(r, c) = (plus - minus) / (2.0 * eps);
    }
  }
  return grad;
}

/// Largest |a - b| relative to max(1, |b|) over all elements: the error measure used when comparing
/// an analytic gradient (a) with a numerical one (b).
template <class A, class B>
double max_rel_error(const Eigen::MatrixBase<A>& a, const Eigen::MatrixBase<B>& b) {
  double worst = 0.0;
  for (Index r = 0; r < a.rows(); ++r) {
    for (Index c = 0; c < a.cols(); ++c) {
      const double x = static_cast<double>(a(r, c));
      const double y = static_cast<double>(b(r, c));
      const double denom = std::max(1.0, std::abs(y));
      worst = std::max(worst, std::abs(x - y) / denom);
    }
  }
  return worst;
}

}  // namespace ember_test
