// Slow, obviously correct references for the lookup (embedding.hpp, table.hpp) and the fused
// lookup + positions (input_embedding.hpp, detail/gather.hpp): plain loops or a one-hot matmul,
// checkable by reading, sharing nothing with the library's own code paths.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <span>

#include <Eigen/Core>

#include <ember/types.hpp>

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

// ---- lookup -------------------------------------------------------------------------------------

/// The n x V one-hot matrix of ids.
template <class T>
RowMatrix<T> one_hot(std::span<const TokenId> ids, Index vocab_size) {
  RowMatrix<T> oh = RowMatrix<T>::Zero(static_cast<Index>(ids.size()), vocab_size);
  for (std::size_t i = 0; i < ids.size(); ++i) oh(static_cast<Index>(i), ids[i]) = T(1);
  return oh;
}

/// Lookup as the textbook one-hot product: (one_hot(ids) * table) * scale.
template <class T>
RowMatrix<T> lookup_one_hot(const RowMatrix<T>& table, std::span<const TokenId> ids, T scale) {
  const RowMatrix<T> oh = one_hot<T>(ids, table.rows());
  RowMatrix<T> rows = oh * table;
  return rows * scale;
}

/// Lookup as explicit loops: out(i, c) = table(ids[i], c) * scale.
template <class T>
RowMatrix<T> lookup_loops(const RowMatrix<T>& table, std::span<const TokenId> ids, T scale) {
  const auto n = static_cast<Index>(ids.size());
  RowMatrix<T> out(n, table.cols());
  for (Index i = 0; i < n; ++i) {
    for (Index c = 0; c < table.cols(); ++c) {
      out(i, c) = table(ids[static_cast<std::size_t>(i)], c) * scale;
    }
  }
  return out;
}

// ---- lookup backward ----------------------------------------------------------------------------

/// Dense table gradient of the lookup: a V x d zero matrix, and for each position i in order,
/// row ids[i] += scale * grad_out.row(i).
template <class T>
RowMatrix<T> dense_grad(std::span<const TokenId> ids, const RowMatrix<T>& grad_out, T scale,
                        Index vocab_size) {
  RowMatrix<T> grad = RowMatrix<T>::Zero(vocab_size, grad_out.cols());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (Index c = 0; c < grad_out.cols(); ++c) {
      grad(ids[i], c) += scale * grad_out(static_cast<Index>(i), c);
    }
  }
  return grad;
}

// ---- fused input pipeline -----------------------------------------------------------------------

/// Lookup then positions, unfused: out(i, c) = table(ids[i], c) * scale, stored (so rounded), then
/// += pe(offset + i % seq_len, c) in a second loop - what forward followed by add_to computes. Two
/// separate loops cannot be contracted into FMAs, so this is the exact target of every fused path
/// on x86.
template <class T>
RowMatrix<T> embed_positions_loops(const RowMatrix<T>& table, std::span<const TokenId> ids, T scale,
                                   const RowMatrix<T>& pe, Index seq_len, Index offset) {
  RowMatrix<T> out = lookup_loops(table, ids, scale);
  for (Index i = 0; i < out.rows(); ++i) {
    const Index p = offset + i % seq_len;
    for (Index c = 0; c < out.cols(); ++c) {
      const T pos = pe(p, c);
      out(i, c) = out(i, c) + pos;
    }
  }
  return out;
}

}  // namespace ember_test
