/// Sums and p-norms over one row, added in an order fixed by the row's length alone: a row gives
/// the same bits wherever it is in memory.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The partial sums (lanes) of ordered_sum: two SIMD registers of floats with AVX-512.
inline constexpr Index ordered_sum_lanes = 32;

/// The sum over c in [0, n) of op(x[c]), in type Acc: x is read in blocks of 32 values (the last
/// one padded with zeros) and op maps a block, an Eigen::Array<T, 32, 1>, to 32 values of type Acc
/// one by one, 0 to +0; value c goes into partial sum (lane) c % 32, each lane adding in ascending
/// c, then the lanes are combined pairwise (lane i + lane i + 16, then + 8, + 4, + 2, + 1). The
/// order depends on n only, never on where x is: Eigen's sum() starts its vectors at an aligned
/// address where it can, and its packet size changes with the instruction set. Every block is
/// computed by the same vector code (32 is a whole number of packets on every instruction set), so
/// the padded last block too. For the callers below and RowwiseAdagrad's update, which take rows
/// their public callers validated.
template <class Acc, class T, class Op>
[[nodiscard]] Acc ordered_sum(const T* x, Index n, Op op) noexcept {
  constexpr Index lanes = ordered_sum_lanes;
  using Block = Eigen::Array<T, lanes, 1>;
  Eigen::Array<Acc, lanes, 1> acc = Eigen::Array<Acc, lanes, 1>::Zero();
  Index c = 0;
  for (; c + lanes <= n; c += lanes) acc += op(Eigen::Map<const Block>(x + c));
  if (c < n) {
    Block last = Block::Zero();
    std::copy_n(x + c, n - c, last.data());
    acc += op(last);
  }
  const Eigen::Array<Acc, 16, 1> sum16 = acc.template head<16>() + acc.template tail<16>();
  const Eigen::Array<Acc, 8, 1> sum8 = sum16.template head<8>() + sum16.template tail<8>();
  const Eigen::Array<Acc, 4, 1> sum4 = sum8.template head<4>() + sum8.template tail<4>();
  return (sum4[0] + sum4[2]) + (sum4[1] + sum4[3]);
}

/// The sum of |x[c]|^p over x[0, n), in double (ordered_sum; p = 1 and 2 without pow).
/// For Embedding::renorm_rows, ClipGroup::norm and the fused step's max_norm, which validated p.
template <class T>
[[nodiscard]] double power_sum(const T* x, Index n, double p) noexcept {
  if (p == 2.0) {
    return ordered_sum<double>(x, n,
                               [](const auto& b) { return b.template cast<double>().square(); });
  }
  if (p == 1.0) {
    return ordered_sum<double>(x, n, [](const auto& b) { return b.template cast<double>().abs(); });
  }
  return ordered_sum<double>(x, n,
                             [p](const auto& b) { return b.template cast<double>().abs().pow(p); });
}

/// The largest |x[c]| of x[0, n) in double: NaN if any element is NaN, 0 for n = 0.
template <class T>
[[nodiscard]] double max_abs(const T* x, Index n) noexcept {
  double m = 0.0;
  for (Index c = 0; c < n; ++c) {
    const double a = std::abs(static_cast<double>(x[c]));
    if (!(a <= m) && m == m) m = a;  // a NaN, once taken, stays
  }
  return m;
}

/// The p-norm of x[0, n) in double: power_sum^(1/p) (std::sqrt for p = 2), or max_abs for
/// p = infinity. For Embedding::renorm_rows and the fused step's max_norm, which validated p > 0.
template <class T>
[[nodiscard]] double row_norm(const T* x, Index n, double p) noexcept {
  if (p == 2.0) return std::sqrt(power_sum(x, n, 2.0));
  if (p == 1.0) return power_sum(x, n, 1.0);
  if (std::isinf(p)) return max_abs(x, n);
  return std::pow(power_sum(x, n, p), 1.0 / p);
}

}  // namespace ember::inline EMBER_ISA::detail
