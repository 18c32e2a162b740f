/// The fused input pipeline: token lookup × √d_model + positional encoding, in one pass over the
/// output (each table row and each position row read once, each output row written once).
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include "ember/detail/gather.hpp"
#include "ember/detail/lookup.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/positional.hpp"
#include "ember/types.hpp"

namespace ember {

namespace detail {
/// The validated door of every embed_with_positions overload over a float/double table.
template <class T, class R>
void embed_with_positions_impl(ConstTableRef<T> table, T scale,
                               const Eigen::Ref<const RowMatrix<T>>& positions, const R& ids,
                               Eigen::Ref<RowMatrix<T>> out, Index seq_len, Index offset) {
  with_ids(ids, [&](auto span) {
    constexpr const char* where = "ember::embed_with_positions";
    check_fused(where, static_cast<Index>(span.size()), table.cols, positions.rows(),
                positions.cols(), out.rows(), out.cols(), seq_len, offset);
    check_ids(span, table.rows, where);
    gather_scaled_add(table, span, scale, const_table(positions), seq_len, offset,
                      mutable_table(out));
  });
}
}  // namespace detail

/// out.row(i) = tokens.weight().row(ids[i]) · tokens.scale() + positions.row(offset + i % seq_len).
///
/// Equals `tokens.forward(ids, out)` followed by `add_to(out, seq_len, offset)`, in one pass:
/// bit-equal on x86 (the product is rounded before the sum in every build); elsewhere up to the
/// rounding of one fused multiply-add if the compiler contracts `w·s + p`. Built for AVX, an
/// output of 2 MiB or more is written with non-temporal stores: it skips the read-for-ownership
/// of each output line, and leaves the output out of the caches (docs/performance.md). The scale is
/// applied before positions are added, never to them. `positions` is any max_len x d table:
/// SinusoidalEncoding::table(), or a learned position Embedding's weight() (GPT-2 style, unscaled).
///
/// Backward: positions are constants here, so the gradient of the tokens' table is exactly
/// `tokens.backward(ids, grad_out, grad)`.
///
/// Shapes:  ids[B·seq_len] (batch-major), positions[max_len, d] -> out[B·seq_len, d].
/// Throws:  IndexError for an id outside [0, V) or offset + seq_len > max_len (or offset < 0);
///          ShapeError if seq_len <= 0, ids.size() is not a multiple of seq_len, out is not n x d,
///          or positions has not d columns. `out` is untouched when it throws.
/// Complexity: O(n·d), one pass.
template <class T, class R>
void embed_with_positions(const Embedding<T>& tokens,
                          const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& positions,
                          const R& ids, Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out,
                          Index seq_len, Index offset = 0) {
  detail::embed_with_positions_impl(detail::const_table(tokens.weight()), tokens.scale(), positions,
                                    ids, out, seq_len, offset);
}

/// embed_with_positions over a table viewed in foreign memory (EmbeddingView): same result,
/// same kernel, no copy of the table.
template <class T, class R>
void embed_with_positions(const EmbeddingView<T>& tokens,
                          const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& positions,
                          const R& ids, Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out,
                          Index seq_len, Index offset = 0) {
  detail::embed_with_positions_impl(tokens.table(), tokens.scale(), positions, ids, out, seq_len,
                                    offset);
}

/// embed_with_positions over a sinusoidal encoding.
template <class T, class R>
void embed_with_positions(const Embedding<T>& tokens, const SinusoidalEncoding<T>& positions,
                          const R& ids, Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out,
                          Index seq_len, Index offset = 0) {
  embed_with_positions(tokens, positions.table(), ids, out, seq_len, offset);
}

/// Owning form: returns the n x d result of embed_with_positions over a sinusoidal encoding.
template <class T, class R>
[[nodiscard]] RowMatrix<T> embed_with_positions(const Embedding<T>& tokens,
                                                const SinusoidalEncoding<T>& positions,
                                                const R& ids, Index seq_len, Index offset = 0) {
  RowMatrix<T> out(static_cast<Index>(std::size(ids)), tokens.d_model());
  embed_with_positions(tokens, positions.table(), ids, out, seq_len, offset);
  return out;
}

}  // namespace ember
