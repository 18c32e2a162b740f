/// ReducedEmbeddingView<S>: a non-owning, read-only V x d_model table of Eigen::half or
/// Eigen::bfloat16 values over caller or memory-mapped memory, with ReducedEmbedding<S>'s lookup,
/// fused positions, float backward and tied logits through the same kernels.
// SPDX-License-Identifier: MIT
#pragma once

#include <Eigen/Core>

#include "ember/codec/reduced.hpp"
#include "ember/config.hpp"
#include "ember/table.hpp"

namespace ember::inline EMBER_ISA {

/// A table[V, d] of 16-bit floats S that ember reads but does not own:
/// Table<codec::Reduced<S>, Borrowed>. It is to ReducedEmbedding<S> what EmbeddingView<T> is to
/// Embedding<T>: results on the same bytes are bit-identical.
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
