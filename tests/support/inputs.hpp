// The inputs ember's tests feed the library: hand-built tables, seeded random tables and ids (one
// generator for both, ember::Random), ids of other widths, and a plain matrix as the kernels take
// a stored table.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <ember/codec/plain.hpp>
#include <ember/detail/table_ref.hpp>
#include <ember/random.hpp>
#include <ember/types.hpp>

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

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

/// rows x cols matrix of uniform values in [-1, 1) from Random(seed): tables, gradients, hidden
/// states (unlike Eigen's Random, which draws from the global std::rand state).
template <class T>
RowMatrix<T> random_table(Index rows, Index cols, std::uint64_t seed) {
  ember::Random rng(seed);
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
  ember::Random rng(seed);
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

/// A plain float/double matrix as the kernels (detail/gather.hpp) take a stored table.
template <class T>
ember::detail::CodecRows<ember::codec::Plain<T>> plain_rows(const RowMatrix<T>& table) {
  return {{}, table.data(), table.rows(), table.cols(), table.cols()};
}

}  // namespace ember_test
