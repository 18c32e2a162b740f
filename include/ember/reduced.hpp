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
/// Built from a RowMatrix<S>, from (vocab_size, d_model[, init], seed) drawn in float and
/// rounded, or by from_float(table, keep_float_master).
///
/// forward returns float rows (each value converted exactly, times scale() in float); forward into
/// a RowMatrix<S> buffer rounds that result to S. backward accumulates a SparseRowGrad<float>,
/// never rounded to S. logits use the float master copy when one is kept, else the rows decoded
/// 4096 at a time: keep a master when the tied output matters (docs/reduced_precision.md). The
/// master is not updated when weight() changes the stored values.
///
/// Storage error (round to nearest even): |x - S(x)| <= 2^-11 |x| for half within its normal
/// range [2^-14, 65504], <= 2^-8 |x| for bfloat16 (float's exponent range).
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
/// ReducedEmbedding<S> what EmbeddingView<T> is to Embedding<T> (same kernels, same bits; built
/// the same ways, from a ReducedEmbedding sharing its float master). Over a file,
/// `io::MappedTable<S>::view()` returns a view that keeps the mapping alive.
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
