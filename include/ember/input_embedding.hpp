/// The fused input pipeline over any table: token lookup × scale + positional encoding, in one
/// pass over the output (each table row and each position row read once, each output row written
/// once).
// SPDX-License-Identifier: MIT
#pragma once

#include <iterator>

#include "ember/config.hpp"
#include "ember/positional.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// out.row(i) = decode(tokens row ids[i]) · tokens.scale() + positions.row(offset + i % seq_len)
/// for any table: tokens.embed_with_positions(positions, ids, out, seq_len, offset), bit for bit
/// `tokens.forward(ids, out)` then `add_to(out, seq_len, offset)` in one pass (a float/double
/// output of 2 MiB or more built for AVX is written with non-temporal stores). Positions are
/// constants here: the table's gradient is `tokens.backward(ids, grad_out, grad)`.
/// Shapes, throws, complexity: as Table::embed_with_positions.
template <EmbeddingTable Tab, class R>
void embed_with_positions(const Tab& tokens,
                          const Eigen::Ref<const RowMatrix<typename Tab::Value>>& positions,
                          const R& ids, Eigen::Ref<RowMatrix<typename Tab::Value>> out,
                          Index seq_len, Index offset = 0) {
  tokens.embed_with_positions(positions, ids, out, seq_len, offset);
}

/// embed_with_positions over a sinusoidal encoding.
template <EmbeddingTable Tab, class R>
void embed_with_positions(const Tab& tokens,
                          const SinusoidalEncoding<typename Tab::Value>& positions, const R& ids,
                          Eigen::Ref<RowMatrix<typename Tab::Value>> out, Index seq_len,
                          Index offset = 0) {
  tokens.embed_with_positions(positions.table(), ids, out, seq_len, offset);
}

/// Owning form: returns the n x d result of embed_with_positions over a sinusoidal encoding.
template <EmbeddingTable Tab, class R>
[[nodiscard]] RowMatrix<typename Tab::Value> embed_with_positions(
    const Tab& tokens, const SinusoidalEncoding<typename Tab::Value>& positions, const R& ids,
    Index seq_len, Index offset = 0) {
  RowMatrix<typename Tab::Value> out(static_cast<Index>(std::size(ids)), tokens.d_model());
  tokens.embed_with_positions(positions.table(), ids, out, seq_len, offset);
  return out;
}

}  // namespace ember::inline EMBER_ISA
