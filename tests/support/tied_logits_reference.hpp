// Slow, obviously correct references for the tied logits (tied_logits.hpp): logits and their
// backward as loops accumulated in double, and the cross-entropy loss of a tiny tied model.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include <Eigen/Core>

#include <ember/types.hpp>

#include "support/embedding_reference.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

// ---- tied logits --------------------------------------------------------------------------------

/// logits(i, v) = sum_c hidden(i, c) * table(v, c), accumulated in double.
template <class T>
RowMatrix<T> logits_loops(const RowMatrix<T>& table, const RowMatrix<T>& hidden) {
  RowMatrix<T> out(hidden.rows(), table.rows());
  for (Index i = 0; i < hidden.rows(); ++i) {
    for (Index v = 0; v < table.rows(); ++v) {
      double acc = 0.0;
      for (Index c = 0; c < table.cols(); ++c) {
        acc += static_cast<double>(hidden(i, c)) * static_cast<double>(table(v, c));
      }
      out(i, v) = static_cast<T>(acc);
    }
  }
  return out;
}

/// Backward of logits = hidden * table^T by loops:
/// grad_hidden(i, c) = sum_v grad_logits(i, v) * table(v, c);
/// grad_weight(v, c) = sum_i grad_logits(i, v) * hidden(i, c).
template <class T>
void logits_backward_loops(const RowMatrix<T>& table, const RowMatrix<T>& hidden,
                           const RowMatrix<T>& grad_logits, RowMatrix<T>& grad_hidden,
                           RowMatrix<T>& grad_weight) {
  const Index n = hidden.rows();
  const Index vocab = table.rows();
  const Index d = table.cols();
  grad_hidden.resize(n, d);
  grad_weight.resize(vocab, d);
  for (Index i = 0; i < n; ++i) {
    for (Index c = 0; c < d; ++c) {
      double acc = 0.0;
      for (Index v = 0; v < vocab; ++v) {
        acc += static_cast<double>(grad_logits(i, v)) * static_cast<double>(table(v, c));
      }
      grad_hidden(i, c) = static_cast<T>(acc);
    }
  }
  for (Index v = 0; v < vocab; ++v) {
    for (Index c = 0; c < d; ++c) {
      double acc = 0.0;
      for (Index i = 0; i < n; ++i) {
        acc += static_cast<double>(grad_logits(i, v)) * static_cast<double>(hidden(i, c));
      }
      grad_weight(v, c) = static_cast<T>(acc);
    }
  }
}

// ---- tiny tied language model -------------------------------------------------------------------

/// Mean softmax cross-entropy of logits (n x V) against targets (n), computed in double.
template <class T>
double cross_entropy(const RowMatrix<T>& logits, std::span<const TokenId> targets) {
  double total = 0.0;
  for (Index i = 0; i < logits.rows(); ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (Index v = 0; v < logits.cols(); ++v) mx = std::max(mx, static_cast<double>(logits(i, v)));
    double z = 0.0;
    for (Index v = 0; v < logits.cols(); ++v) z += std::exp(static_cast<double>(logits(i, v)) - mx);
    const auto t = targets[static_cast<std::size_t>(i)];
    total += (std::log(z) + mx) - static_cast<double>(logits(i, t));
  }
  return total / static_cast<double>(logits.rows());
}

/// d(cross_entropy)/d(logits) = (softmax - one_hot(targets)) / n.
template <class T>
RowMatrix<T> cross_entropy_grad(const RowMatrix<T>& logits, std::span<const TokenId> targets) {
  const Index n = logits.rows();
  RowMatrix<T> g(n, logits.cols());
  for (Index i = 0; i < n; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (Index v = 0; v < logits.cols(); ++v) mx = std::max(mx, static_cast<double>(logits(i, v)));
    double z = 0.0;
    for (Index v = 0; v < logits.cols(); ++v) z += std::exp(static_cast<double>(logits(i, v)) - mx);
    for (Index v = 0; v < logits.cols(); ++v) {
      double p = std::exp(static_cast<double>(logits(i, v)) - mx) / z;
      if (v == targets[static_cast<std::size_t>(i)]) p -= 1.0;
      g(i, v) = static_cast<T>(p / static_cast<double>(n));
    }
  }
  return g;
}

/// Loss of the tiny tied model with table W: hidden = lookup(W, inputs) * sqrt(d),
/// logits = hidden * W^T, mean cross-entropy against targets. All loops, no ember code.
template <class T>
double tied_loss_reference(const RowMatrix<T>& table, std::span<const TokenId> inputs,
                           std::span<const TokenId> targets) {
  const T scale = static_cast<T>(std::sqrt(static_cast<double>(table.cols())));
  const RowMatrix<T> hidden = lookup_loops(table, inputs, scale);
  return cross_entropy(logits_loops(table, hidden), targets);
}

}  // namespace ember_test
