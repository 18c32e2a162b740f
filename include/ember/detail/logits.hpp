/// The tied-logits kernels of every table kind: out = hidden · Wᵀ and its backward, with W a plain
/// table used as stored, a float master copy, or a table of any codec decoded block by block
/// (never the whole table at once). Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Rows decoded per block by the decoding logits: block_rows x d values live at once (4096 x 768
/// floats = 12 MB for GPT-2 small), never the whole table.
inline constexpr Index logits_block_rows = 4096;

/// A plain table[V, d] as the Eigen matrix the GEMMs take.
template <class Codec>
[[nodiscard]] auto as_matrix(const CodecRows<Codec>& t) noexcept {
  using Map =
      Eigen::Map<const RowMatrix<typename Codec::Unit>, Eigen::Unaligned, Eigen::OuterStride<>>;
  return Map(t.data, t.rows, t.d, Eigen::OuterStride<>(t.stride));
}

/// The table W of the tied logits: a plain table (used as stored), a float master, or the rows
/// of `table` decoded (master null, codec not plain). DotRows: the codec has dot_rows
/// (codec::StreamingDot), which the logits of a few hidden rows use.
template <class Codec, bool DotRows = false>
struct LogitsTable {
  CodecRows<Codec> table;
  const RowMatrix<float>* master = nullptr;
};

/// Decodes rows [r0, r0 + len) of `table` (at scale 1) into block.topRows(len).
template <class Codec>
void decode_block(const CodecRows<Codec>& table, Index r0, Index len,
                  RowMatrix<typename Codec::Value>& block) {
  for (Index r = 0; r < len; ++r)
    table.decode(r0 + r, typename Codec::Value(1), block.row(r).data());
}

/// Hidden rows up to which a codec with its own dot product (dot_rows) reads the encoded table
/// once, row by row, instead of decoding blocks of rows for a GEMM: the decode-time case, where
/// a GEMM of a few rows is bound by reading W anyway.
inline constexpr Index logits_stream_max_rows = 8;

/// hidden[n, d], W[V, d] -> out[n, V] = hidden · Wᵀ: one GEMM over a plain table or the master,
/// the codec's dot_rows over the encoded rows for n <= logits_stream_max_rows (DotRows; chunks of
/// rows split across threads, each logit computed alike whatever the split),
/// else one GEMM per block of logits_block_rows decoded rows.
/// Validated by the public logits() callers (hidden n x d, out n x V, out overlapping neither).
template <class Codec, bool DotRows>
void logits(const LogitsTable<Codec, DotRows>& w,
            const Eigen::Ref<const RowMatrix<typename Codec::Value>>& hidden,
            Eigen::Ref<RowMatrix<typename Codec::Value>> out) {
  using V = typename Codec::Value;
  const CodecRows<Codec>& table = w.table;
  EMBER_ASSERT(hidden.cols() == table.d && out.rows() == hidden.rows() && out.cols() == table.rows);
  if constexpr (Codec::is_plain) {
    out.noalias() = hidden * as_matrix(table).transpose();
  } else {
    if (w.master != nullptr) {
      out.noalias() = hidden * w.master->transpose();
      return;
    }
    const Index v = table.rows;
    if constexpr (DotRows) {
      if (hidden.rows() <= logits_stream_max_rows) {
        parallel_rows(v, v * table.d * hidden.rows(), [&](Index begin, Index end, int /*worker*/) {
          table.codec.dot_rows(table.row(begin), table.stride, end - begin, table.d, hidden.data(),
                               hidden.outerStride(), hidden.rows(), out.data() + begin,
                               out.outerStride());
        });
        return;
      }
    }
    RowMatrix<V> block(std::min(v, logits_block_rows), table.d);
    for (Index r0 = 0; r0 < v; r0 += logits_block_rows) {
      const Index len = std::min(logits_block_rows, v - r0);
      decode_block(table, r0, len, block);
      out.middleCols(r0, len).noalias() = hidden * block.topRows(len).transpose();
    }
  }
}

/// Backward of logits: grad_hidden[n, d] = grad_logits[n, V] · W (assigned) and
/// grad_weight[V, d] += grad_logitsᵀ · hidden (accumulated). W as in logits(); validated by the
/// public logits_backward() callers.
template <class Codec, bool DotRows>
void logits_backward(const LogitsTable<Codec, DotRows>& w,
                     const Eigen::Ref<const RowMatrix<typename Codec::Value>>& hidden,
                     const Eigen::Ref<const RowMatrix<typename Codec::Value>>& grad_logits,
                     Eigen::Ref<RowMatrix<typename Codec::Value>> grad_hidden,
                     Eigen::Ref<RowMatrix<typename Codec::Value>> grad_weight) {
  using V = typename Codec::Value;
  const CodecRows<Codec>& table = w.table;
  EMBER_ASSERT(grad_logits.cols() == table.rows && grad_hidden.cols() == table.d &&
               grad_hidden.rows() == grad_logits.rows());
  if constexpr (Codec::is_plain) {
    grad_hidden.noalias() = grad_logits * as_matrix(table);
  } else {
    if (w.master != nullptr) {
      grad_hidden.noalias() = grad_logits * *w.master;
    } else {
      const Index v = table.rows;
      grad_hidden.setZero();
      RowMatrix<V> block(std::min(v, logits_block_rows), table.d);
      for (Index r0 = 0; r0 < v; r0 += logits_block_rows) {
        const Index len = std::min(logits_block_rows, v - r0);
        decode_block(table, r0, len, block);
        grad_hidden.noalias() += grad_logits.middleCols(r0, len) * block.topRows(len);
      }
    }
  }
  grad_weight.noalias() += grad_logits.transpose() * hidden;
}

}  // namespace ember::inline EMBER_ISA::detail
