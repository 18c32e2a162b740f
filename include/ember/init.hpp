/// Initialisers for embedding tables: normal, truncated normal, Xavier uniform, uniform, zeros,
/// all driven by ember's portable Random so a seed gives the same table everywhere.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// An initialisation rule for a V x d table, built by the named factories: `fill` draws values in
/// row-major order from one `Random(seed)`, in double, rounded to the table's scalar type.
/// Example: `ember::Init::truncated_normal(0.02).fill(table, 42);`
struct Init {
  /// The rule's family.
  enum class Kind { normal, truncated_normal, xavier_uniform, uniform, zeros };

  Kind kind = Kind::normal;
  double a = 0.0;  ///< normal: std (0 = 1/sqrt(d)); xavier: gain; uniform: low bound
  double b = 0.0;  ///< truncated normal: cut-off in std units; uniform: high bound

  /// N(0, std^2); `std = 0` (the default) means 1/sqrt(d_model), ember's default initialiser.
  static Init normal(double std = 0.0) { return {Kind::normal, std, 0.0}; }
  /// N(0, std^2) with samples beyond `cutoff` standard deviations redrawn (default 2, as BERT).
  static Init truncated_normal(double std, double cutoff = 2.0) {
    return {Kind::truncated_normal, std, cutoff};
  }
  /// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)) with fan_in = d and
  /// fan_out = V, as torch.nn.init.xavier_uniform_ on a [V, d] weight.
  static Init xavier_uniform(double gain = 1.0) { return {Kind::xavier_uniform, gain, 0.0}; }
  /// U(low, high).
  static Init uniform(double low, double high) { return {Kind::uniform, low, high}; }
  /// All zeros.
  static Init zeros() { return {Kind::zeros, 0.0, 0.0}; }

  /// Throws ValueError if the parameters are not usable (negative or non-finite std, an empty or
  /// reversed uniform interval, a non-positive cut-off or gain).
  void validate() const {
    constexpr const char* where = "ember::Init";
    switch (kind) {
      case Kind::normal:
        detail::check_finite_value(where, "normal std", a);
        detail::check_scalar(a >= 0.0, where, "normal std", a, ">= 0");
        break;
      case Kind::truncated_normal:
        detail::check_positive_finite(where, "truncated_normal std", a);
        detail::check_positive_finite(where, "truncated_normal cutoff", b);
        break;
      case Kind::xavier_uniform:
        detail::check_positive_finite(where, "xavier_uniform gain", a);
        break;
      case Kind::uniform:
        detail::check_finite_value(where, "uniform low", a);
        detail::check_finite_value(where, "uniform high", b);
        if (!(a < b)) {
          throw ValueError(
              detail::message(where, "uniform needs low < high, got [", a, ", ", b, ")"), b);
        }
        break;
      case Kind::zeros:
        break;
    }
  }

  /// Fills `table` (V x d: a matrix, a block or a Map, any strides) by this rule from
  /// `Random(seed)`; a const reference, so temporaries such as `w.topRows(10)` bind (Eigen's
  /// idiom). Throws: ValueError from validate(); the table is untouched then. Complexity: O(V·d),
  /// serial.
  template <class Derived>
  void fill(const Eigen::DenseBase<Derived>& out, std::uint64_t seed) const {
    using T = typename Derived::Scalar;
    static_assert(Scalar<T>, "ember::Init::fill: the table must hold float or double");
    validate();
    auto& table = const_cast<Eigen::DenseBase<Derived>&>(out);
    const Index rows = table.rows();
    const Index cols = table.cols();
    if (kind == Kind::zeros) {
      table.setZero();
      return;
    }
    Random rng(seed);
    double lo = a;
    double hi = b;
    double std = a;
    if (kind == Kind::normal && std == 0.0) std = 1.0 / std::sqrt(static_cast<double>(cols));
    if (kind == Kind::xavier_uniform) {
      hi = a * std::sqrt(6.0 / static_cast<double>(rows + cols));
      lo = -hi;
    }
    for (Index r = 0; r < rows; ++r) {
      for (Index c = 0; c < cols; ++c) {
        const double v = kind == Kind::normal             ? rng.normal(0.0, std)
                         : kind == Kind::truncated_normal ? rng.truncated_normal(0.0, std, b)
                                                          : rng.uniform(lo, hi);  // xavier, uniform
        table(r, c) = static_cast<T>(v);
      }
    }
  }
};

}  // namespace ember::inline EMBER_ISA
