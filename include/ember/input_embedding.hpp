/// The fused input pipeline: token lookup × √d_model + positional encoding, in one pass over the
/// output (each table row and each position row read once, each output row written once).
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include "ember/detail/gather.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/embedding.hpp"
#include "ember/positional.hpp"
#include "ember/types.hpp"

namespace ember {

/// out.row(i) = tokens.weight().row(ids[i]) · tokens.scale() + positions.row(offset + i % seq_len).
///
/// Equals `tokens.forward(ids, out)` followed by `add_to(out, seq_len, offset)` up to the
/// rounding of one fused multiply-add (bit-equal unless the compiler contracts `w·s + p` into an
/// FMA), in one pass. The scale is applied before positions are added, never to them. `positions`
/// is any max_len x d table: SinusoidalEncoding::table(), or a learned position Embedding's
/// weight() (GPT-2 style, unscaled).
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
  if constexpr (IdRange<R>) {
    constexpr const char* where = "ember::embed_with_positions";
    const auto span = detail::as_id_span(ids);
    const auto n = static_cast<Index>(span.size());
    detail::check_positions(where, seq_len, offset, positions.rows());
    detail::check_extent(where, "positions", 1, tokens.d_model(), positions.cols(), "d_model");
    detail::check_extent(where, "out", 0, n, out.rows(), "the number of ids");
    detail::check_extent(where, "out", 1, tokens.d_model(), out.cols(), "d_model");
    if (n % seq_len != 0) {
      throw ShapeError(std::string(where) + ": " + std::to_string(n) +
                           " ids are not a multiple of seq_len = " + std::to_string(seq_len),
                       0, (n / seq_len + 1) * seq_len, n);
    }
    detail::check_ids(span, tokens.vocab_size(), where);
    detail::gather_scaled_add(detail::const_table(tokens.weight()), span, tokens.scale(),
                              detail::const_table(positions), seq_len, offset,
                              detail::mutable_table(out));
  } else {
    static_assert(detail::always_false<R>, EMBER_ID_RANGE_MESSAGE);
  }
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
