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

/// out.row(i) = decode(tokens row ids[i]) · tokens.scale() + positions.row(offset + i % seq_len),
/// for any table (Embedding, EmbeddingView, ReducedEmbedding, QuantizedEmbedding, their views).
///
/// Equals `tokens.forward(ids, out)` followed by `add_to(out, seq_len, offset)`, in one pass and
/// bit for bit (the product is rounded before the sum in every build). On a float/double table
/// built for AVX, an output of 2 MiB or more is written with non-temporal stores: it skips the
/// read-for-ownership of each output line and leaves the output out of the caches
/// (docs/performance.md). The scale is applied before positions are added, never to them.
/// `positions` is any max_len x d table of the table's value type: SinusoidalEncoding::table(), or
/// a learned position table (GPT-2 style, unscaled).
///
/// Backward: positions are constants here, so the gradient of the tokens' table is exactly
/// `tokens.backward(ids, grad_out, grad)`.
///
/// Shapes:  ids[B·seq_len] (batch-major), positions[max_len, d] -> out[B·seq_len, d].
/// Throws:  IndexError for an id outside [0, V) or offset + seq_len > max_len (or offset < 0);
///          ShapeError if seq_len <= 0, ids.size() is not a multiple of seq_len, out is not n x d,
///          or positions has not d columns. `out` is untouched when it throws.
/// Complexity: O(n·d), one pass.
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
