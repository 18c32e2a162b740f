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
/// Built over (data, vocab_size, d_model, row_stride = -1), any row-major Eigen object of T, or
/// an Embedding<T> (with its scale).
///
/// Lifetime: the view never copies the table. Over caller memory (a pointer, an Eigen matrix, an
/// Embedding) the view must not outlive it (a view of a temporary does not compile); over a file,
/// `io::MappedTable<T>::view()` returns a view that keeps the mapping alive (keep_alive()).
/// Only element alignment (alignof(T)) is assumed of the pointer. The view is read-only: no
/// padding row, freezing or resizing.
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
