/// Slow, obviously-correct reference implementations of ember's kernels, and table/id helpers
/// for the tests. Everything here is written as plain loops (or a one-hot matmul) so that it can
/// be checked by reading it; nothing here is shared with the library's own code paths.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"
#include "support/matrix_compare.hpp"

namespace ember_test {

using ember::Index;
using ember::Random;
using ember::RowMatrix;
using ember::RowVector;
using ember::TokenId;

// ---- Catch helpers ----------------------------------------------------------------------------

/// Runs f and returns the exception of type E it throws (empty if it throws nothing; any other
/// exception propagates and fails the test). Lets a test inspect an exception's fields.
template <class E, class F>
std::optional<E> catch_as(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  return std::nullopt;
}

/// Runs `call`, a backward given a grad_out of the wrong width, and checks the ShapeError it must
/// throw (message, dimension 1, expected and actual widths) and that `grad` - empty before - is
/// still empty and unbound, so a later call with the right width binds it to the table.
template <class Grad, class F>
void check_grad_out_width_refused(F&& call, const std::string& message, ember::Index expected,
                                  ember::Index actual, const Grad& grad) {
  const auto e = catch_as<ember::ShapeError>(std::forward<F>(call));
  REQUIRE(e);
  CHECK(std::string(e->what()) == message);
  CHECK(e->dimension() == 1);
  CHECK(e->expected() == expected);
  CHECK(e->actual() == actual);
  CHECK(grad.empty());
  CHECK(grad.d_model() == 0);
}

// ---- tables and ids
// ---------------------------------------------------------------------------------

/// V x d table whose row i is filled with i + column/1000: failures print readable values.
template <class T>
RowMatrix<T> hand_table(Index vocab_size, Index d_model) {
  RowMatrix<T> table(vocab_size, d_model);
  for (Index r = 0; r < vocab_size; ++r) {
    for (Index c = 0; c < d_model; ++c) {
      table(r, c) = static_cast<T>(static_cast<double>(r) + static_cast<double>(c) / 1000.0);
    }
  }
  return table;
}

/// V x d table of uniform values in [-1, 1) from Random(seed).
template <class T>
RowMatrix<T> random_table(Index rows, Index cols, std::uint64_t seed) {
  Random rng(seed);
  RowMatrix<T> table(rows, cols);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) table(r, c) = static_cast<T>(rng.uniform(-1.0, 1.0));
  }
  return table;
}

/// n ids uniform in [0, vocab_size) from Random(seed). With `distinct` > 0 they are drawn from the
/// first min(distinct, vocab_size) ids only, so rows repeat.
template <class Id = TokenId>
std::vector<Id> random_ids(Index n, Index vocab_size, std::uint64_t seed, Index distinct = 0) {
  const Index bound = distinct > 0 ? std::min(distinct, vocab_size) : vocab_size;
  Random rng(seed);
  std::vector<Id> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<Id>(rng.uniform_index(static_cast<std::uint64_t>(bound)));
  return ids;
}

/// Converts any span of integer ids to a vector of TokenId (for the reference functions).
template <class Id>
std::vector<TokenId> to_token_ids(std::span<const Id> ids) {
  std::vector<TokenId> out;
  out.reserve(ids.size());
  for (const Id id : ids) out.push_back(static_cast<TokenId>(id));
  return out;
}

// ---- lookup
// -----------------------------------------------------------------------------------------

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

// ---- lookup backward
// --------------------------------------------------------------------------------

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

// ---- tied logits
// --------------------------------------------------------------------------------------

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

// ---- fused input pipeline
// -----------------------------------------------------------------------------

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

// ---- tiny tied language model
// ---------------------------------------------------------------------------

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
