/// QuantizedEmbedding and QuantizedEmbeddingView: int8 row-quantized embedding tables in FBGEMM's
/// fused 8-bit row-wise layout (per row: d uint8 codes, a float scale, a float bias), owned or
/// over mapped memory, with dequantizing lookup and tied logits.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/codec/int8_rowwise.hpp"
#include "ember/config.hpp"
#include "ember/table.hpp"

namespace ember::inline EMBER_ISA {

/// A V x d table quantized row by row to 8 bits, laid out exactly as FBGEMM's
/// FloatToFused8BitRowwiseQuantized: Table<codec::Int8Rowwise, Owned>. Row r occupies
/// row_bytes() = d + 8 bytes, d uint8 codes q followed by a float32 scale and a float32 bias, and
/// stands for the values q · scale + bias.
/// Built by quantizing a float or double table (the constructor or from_float, optionally keeping
/// a float master), or from FBGEMM's bytes (from_fused_rows).
///
/// Quantization (FBGEMM's, see codec::Int8Rowwise) errs by at most scale / 2 per element (plus
/// float rounding; see max_row_error()); a constant row is stored exactly. d + 8 bytes per row
/// instead of 4·d: 28% of float at d = 128.
///
/// Lookup dequantizes each row times scale() into float in one pass; logits use a float master
/// copy when one is kept (recommended for a tied output layer), else rows dequantized 4096 at a
/// time; backward accumulates a float gradient (for the float table the int8 one was made from).
///
/// Example:
/// ```cpp
/// ember::QuantizedEmbedding q(emb.weight());          // from a float table
/// ember::RowMatrix<float> x = q.forward(ids);         // dequantized rows · √d
/// float worst = q.max_row_error(emb.weight()).maxCoeff();
/// ```
using QuantizedEmbedding = Table<codec::Int8Rowwise, Owned>;

/// The same int8 rows over memory ember does not own (an FBGEMM table in a file, mapped):
/// Table<codec::Int8Rowwise, Borrowed>, built from (const std::uint8_t* data, vocab_size, d_model,
/// row_stride = -1 (d_model + 8 bytes), keep_alive = {}) or from a QuantizedEmbedding.
using QuantizedEmbeddingView = Table<codec::Int8Rowwise, Borrowed>;

}  // namespace ember::inline EMBER_ISA
