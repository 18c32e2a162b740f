/// ReducedEmbedding<S> and ReducedEmbeddingView<S>: embedding tables stored as Eigen::half or
/// Eigen::bfloat16 (half the bytes of float), owned or over memory ember does not own, with
/// lookup, positions and tied logits computed in float and a backward that accumulates in float.
// SPDX-License-Identifier: MIT
#pragma once

#include <Eigen/Core>

#include "ember/codec/reduced.hpp"
#include "ember/config.hpp"
#include "ember/table.hpp"

namespace ember::inline EMBER_ISA {

/// An embedding table whose V x d values are stored as S (Eigen::half or Eigen::bfloat16) and
/// computed with in float: Table<codec::Reduced<S>, Owned>.
///
/// Construction (each with an optional trailing LookupScale, √d_model by default):
///   ReducedEmbedding<S>(RowMatrix<S> table)                   adopts a table already in S
///   ReducedEmbedding<S>(vocab_size, d_model, seed = 0)        N(0, 1/d_model) in float, rounded
///   ReducedEmbedding<S>(vocab_size, d_model, init, seed = 0)  filled by an Init in float, rounded
///   ReducedEmbedding<S>::from_float(table, keep_float_master = false)
///
/// Conventions:
/// - forward(ids) returns float: each row is converted exactly, multiplied by scale() in float
///   and written as float; forward into a RowMatrix<S> buffer rounds that float result to S.
/// - backward accumulates into a SparseRowGrad<float>: the gradient is never rounded to S.
/// - logits use the float master copy when one is kept (from_float(.., true), set_float_master),
///   else the stored rows decoded to float 4096 at a time. Keep a master when the tied output
///   matters (docs/reduced_precision.md has the measured logits error of each format).
/// - weight() can change the stored values but not the table's shape; the master copy is the
///   user's and is not updated when weight() changes.
///
/// Error bound of storage (round to nearest even): |x - S(x)| <= 2^-11 |x| for half within its
/// normal range [2^-14, 65504], <= 2^-8 |x| for bfloat16 (same exponent range as float).
///
/// Example:
/// ```cpp
/// auto half = ember::HalfEmbedding::from_float(emb.weight());
/// ember::RowMatrix<float> x = half.forward(ids);   // float rows, · √d
/// ```
template <class S>
using ReducedEmbedding = Table<codec::Reduced<S>, Owned>;

/// An fp16 table (IEEE binary16: 5 exponent bits, 10 mantissa bits).
using HalfEmbedding = ReducedEmbedding<Eigen::half>;
/// A bfloat16 table (8 exponent bits, 7 mantissa bits: float's range, less precision).
using BFloat16Embedding = ReducedEmbedding<Eigen::bfloat16>;

/// The same 16-bit rows over memory ember does not own: Table<codec::Reduced<S>, Borrowed>, to
/// ReducedEmbedding<S> what EmbeddingView<T> is to Embedding<T> (same kernels, same bits).
///
/// Construction:
///   ReducedEmbeddingView<S>(data, vocab_size, d_model, row_stride = -1, keep_alive = {})
///   ReducedEmbeddingView<S>(matrix, keep_alive = {})   any row-major Eigen object of S
///   ReducedEmbeddingView<S>(reduced_embedding)         shares its float master, if any
///
/// Lifetime: over caller memory, the caller keeps it alive; over a file,
/// `io::MappedTable<S>::view()` (from `SafetensorsFile::map<S>` or `io::map_npy<Eigen::half>`)
/// returns a view that holds the mapping (keep_alive()). Any 2-byte-aligned pointer works.
///
/// Example (zero copy over an F16 safetensors table):
/// ```cpp
/// ember::io::SafetensorsFile f("model.safetensors");
/// ember::HalfEmbeddingView wte = f.map<Eigen::half>("wte.weight").view();  // F16: no copy
/// ember::RowMatrix<float> x = wte.forward(ids);                           // float rows · √d
/// ```
template <class S>
using ReducedEmbeddingView = Table<codec::Reduced<S>, Borrowed>;

/// A non-owning fp16 table.
using HalfEmbeddingView = ReducedEmbeddingView<Eigen::half>;
/// A non-owning bfloat16 table.
using BFloat16EmbeddingView = ReducedEmbeddingView<Eigen::bfloat16>;

}  // namespace ember::inline EMBER_ISA
