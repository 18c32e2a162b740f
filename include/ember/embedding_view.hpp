/// EmbeddingView<T>: a non-owning, read-only V x d_model table of T over caller or memory-mapped
/// memory, with Embedding<T>'s lookup, backward and tied logits through the same kernels.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/codec/plain.hpp"
#include "ember/config.hpp"
#include "ember/table.hpp"

namespace ember::inline EMBER_ISA {

/// A table[V, d] of T (float or double) that ember reads but does not own:
/// Table<codec::Plain<T>, Borrowed>. forward, backward, logits and embed_with_positions behave
/// exactly as Embedding<T>'s and run the same kernels; weight() is an Eigen::Map of the memory.
///
/// Construction:
///   EmbeddingView<T>(data, vocab_size, d_model, row_stride = -1, keep_alive = {}, scale = {})
///   EmbeddingView<T>(matrix, keep_alive = {}, scale = {})   any row-major Eigen object of T
///   EmbeddingView<T>(embedding)                             an Embedding<T>, with its scale
///
/// Lifetime: the view never copies the table, so someone must keep the memory alive while the
/// view (or a Map from weight()) is used:
/// - over caller memory (a pointer, an Eigen matrix, an Embedding), the caller does: the view must
///   not outlive it (a view of a temporary does not compile);
/// - over a file, `io::MappedTable<T>::view()` (from `map_npy` or `SafetensorsFile::map`) returns
///   a view holding a shared reference to the mapping (keep_alive()), so the view alone keeps the
///   file mapped.
/// Nothing more than element alignment (alignof(T)) is assumed of the pointer. The view is
/// read-only: there is no padding row, freezing or resizing (they change the table).
///
/// Example (zero copy over a 10 GB safetensors table):
/// ```cpp
/// ember::io::SafetensorsFile f("model.safetensors");
/// ember::EmbeddingView<float> wte = f.map<float>("wte.weight").view();  // F32: no copy
/// ember::RowMatrix<float> x = wte.forward(ids);
/// ```
template <class T>
using EmbeddingView = Table<codec::Plain<T>, Borrowed>;

}  // namespace ember::inline EMBER_ISA
