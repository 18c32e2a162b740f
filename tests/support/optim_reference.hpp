// Slow dense reference optimizers for the optimizer tests (optim.hpp, optim/*.hpp): the same rules
// as ember::optim, written as plain per-element loops over every row of a dense V x d gradient,
// with a "present" mask saying which rows the step updates (all rows = dense optimizer; the sparse
// rows = lazy); and a random sparse gradient to feed them.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <ember/sparse_grad.hpp>
#include <ember/types.hpp>

#include "support/inputs.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;

// torch.optim.SGD on the present rows.
template <class T>
struct RefSGD {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  RowMatrix<T> buf{};
  std::vector<bool> has_buf{};

  void step(RowMatrix<T>& w, const RowMatrix<T>& grad, const std::vector<bool>& present,
            Index skip = -1) {
    if (buf.size() == 0) {
      buf = RowMatrix<T>::Zero(w.rows(), w.cols());
      has_buf.assign(static_cast<std::size_t>(w.rows()), false);
    }
    for (Index r = 0; r < w.rows(); ++r) {
      if (!present[static_cast<std::size_t>(r)] || r == skip) continue;
      for (Index c = 0; c < w.cols(); ++c) {
        T g = grad(r, c);
        if (weight_decay != 0) g += static_cast<T>(weight_decay) * w(r, c);
        if (momentum != 0) {
          if (!has_buf[static_cast<std::size_t>(r)]) {
            buf(r, c) = g;
          } else {
            buf(r, c) = static_cast<T>(momentum) * buf(r, c) + static_cast<T>(1 - dampening) * g;
          }
          g = nesterov ? g + static_cast<T>(momentum) * buf(r, c) : buf(r, c);
        }
        w(r, c) -= static_cast<T>(lr) * g;
      }
      if (momentum != 0) has_buf[static_cast<std::size_t>(r)] = true;
    }
  }
};

// torch.optim.SparseAdam's formulas, written densely (m, v, bias correction from the global step).
template <class T>
struct RefAdam {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false, per_row_steps = false;
  RowMatrix<T> m{}, v{};
  std::vector<std::int64_t> row_t{};
  std::int64_t t = 0;

  void step(RowMatrix<T>& w, const RowMatrix<T>& grad, const std::vector<bool>& present,
            Index skip = -1) {
    if (m.size() == 0) {
      m = RowMatrix<T>::Zero(w.rows(), w.cols());
      v = RowMatrix<T>::Zero(w.rows(), w.cols());
      row_t.assign(static_cast<std::size_t>(w.rows()), 0);
    }
    ++t;
    for (Index r = 0; r < w.rows(); ++r) {
      if (!present[static_cast<std::size_t>(r)] || r == skip) continue;
      const std::int64_t tt = per_row_steps ? ++row_t[static_cast<std::size_t>(r)] : t;
      const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(tt));
      const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(tt));
      const T step_size = static_cast<T>(lr * std::sqrt(bc2) / bc1);
      for (Index c = 0; c < w.cols(); ++c) {
        T g = grad(r, c);
        if (weight_decay != 0 && !decoupled) g += static_cast<T>(weight_decay) * w(r, c);
        if (weight_decay != 0 && decoupled) w(r, c) *= static_cast<T>(1.0 - lr * weight_decay);
        m(r, c) += static_cast<T>(1 - beta1) * (g - m(r, c));
        v(r, c) += static_cast<T>(1 - beta2) * (g * g - v(r, c));
        w(r, c) -= step_size * m(r, c) / (std::sqrt(v(r, c)) + static_cast<T>(eps));
      }
    }
  }
};

// FBGEMM's row-wise Adagrad on the present rows.
template <class T>
struct RefRowwiseAdagrad {
  double lr = 0, eps = 1e-8, weight_decay = 0, init = 0;
  std::vector<T> acc{};

  void step(RowMatrix<T>& w, const RowMatrix<T>& grad, const std::vector<bool>& present,
            Index skip = -1) {
    if (acc.empty()) acc.assign(static_cast<std::size_t>(w.rows()), static_cast<T>(init));
    for (Index r = 0; r < w.rows(); ++r) {
      if (!present[static_cast<std::size_t>(r)] || r == skip) continue;
      std::vector<T> g(static_cast<std::size_t>(w.cols()));
      T sum = 0;
      for (Index c = 0; c < w.cols(); ++c) {
        g[static_cast<std::size_t>(c)] =
            grad(r, c) + static_cast<T>(weight_decay) * w(r, c) * (weight_decay != 0 ? 1 : 0);
        sum += g[static_cast<std::size_t>(c)] * g[static_cast<std::size_t>(c)];
      }
      T& a = acc[static_cast<std::size_t>(r)];
      a += sum / static_cast<T>(w.cols());
      const T mult = static_cast<T>(lr) / (std::sqrt(a) + static_cast<T>(eps));
      for (Index c = 0; c < w.cols(); ++c) w(r, c) -= mult * g[static_cast<std::size_t>(c)];
    }
  }
};

// Which rows a sparse step updates.
inline std::vector<bool> present_rows(Index vocab, const std::vector<ember::TokenId>& ids) {
  std::vector<bool> p(static_cast<std::size_t>(vocab), false);
  for (auto id : ids) p[static_cast<std::size_t>(id)] = true;
  return p;
}

/// A SparseRowGrad of a V x d table holding random gradient rows (random_table) for `ids`, scale 1.
template <class T>
ember::SparseRowGrad<T> random_sparse_grad(Index V, Index d, const std::vector<ember::TokenId>& ids,
                                           std::uint64_t seed) {
  ember::SparseRowGrad<T> g(V, d);
  g.accumulate(ids, random_table<T>(static_cast<Index>(ids.size()), d, seed), T(1), V);
  return g;
}

}  // namespace ember_test
