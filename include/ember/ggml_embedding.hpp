/// GgmlEmbeddingView: a read-only embedding table over rows in one of ggml's formats (a GGUF
/// file's token table, mapped), with lookups, fused positions, bags and tied logits that decode
/// only what they read.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/codec/ggml.hpp"
#include "ember/config.hpp"
#include "ember/table.hpp"

namespace ember::inline EMBER_ISA {

/// A V x d table whose rows are stored as ggml stores them (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
/// Q2_K ... Q6_K, F16, BF16, F32; codec::Ggml), over memory ember does not own:
/// Table<codec::Ggml, Borrowed>. GgufFile::table(name) builds one over a mapped GGUF tensor and
/// keeps the mapping alive; it can also be built from any ggml row bytes:
/// GgmlEmbeddingView(codec::Ggml(type), data, vocab_size, d_model, row_stride (bytes; -1:
/// packed), keep_alive = {}, scale = LookupScale()).
///
/// Lookup decodes each requested row straight into the output, multiplied by scale(): the values
/// are ggml's dequantization bit for bit, times the scale in one more rounding (√d_model by
/// default; LookupScale::none() for LLaMA-style models). Outputs of 2 MiB or more are written
/// with streaming stores. Nothing else is decoded: no float copy of the table is ever made.
///
/// Tied logits (hidden · Wᵀ, no scale): up to 8 hidden rows stream the encoded table once,
/// dotting each row with the hidden rows as it is decoded (a float sum of d products per logit,
/// in an order fixed per build: identical for any thread count); more hidden rows decode 4096
/// rows at a time for a GEMM (the bits of the GEMM over the decoded table, Table::dequantize()).
/// set_float_master(W) makes logits exact float GEMMs over W instead.
///
/// Example:
/// ```cpp
/// ember::io::GgufFile f("model.gguf");
/// ember::GgmlEmbeddingView wte = f.table("token_embd.weight", ember::LookupScale::none());
/// ember::RowMatrix<float> x = wte.forward(ids);   // ids[n] -> x[n, d]
/// ember::RowMatrix<float> z = wte.logits(h);      // h[1, d] -> z[1, V]
/// ```
using GgmlEmbeddingView = Table<codec::Ggml, Borrowed>;

}  // namespace ember::inline EMBER_ISA
