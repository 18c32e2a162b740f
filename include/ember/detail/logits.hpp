/// The tied-logits kernels of every table kind: out = hidden · Wᵀ and its backward, with W a plain
/// table used as stored, a float master copy, or a table of any codec decoded block by block
/// (never the whole table at once) or dotted with the hidden rows as stored, exactly or with the
/// hidden rows rounded to the codec's dot type (LogitsMode). Inputs were validated by the public
/// caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/float_dots.hpp"
#include "ember/detail/logits_kind.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/logits_mode.hpp"
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
/// of `table` read as Kind says (master null, codec not plain). Kind is the codec's
/// codec::logits_kind_v, which the table that builds this passes.
template <class Codec, LogitsKind Kind>
struct LogitsTable {
  static_assert((Kind == LogitsKind::plain) == Codec::is_plain,
                "LogitsTable: Kind is plain exactly for a plain codec (codec::logits_kind_v)");
  static constexpr LogitsKind kind = Kind;
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

/// Table rows per chunk of the quantized and streaming logits: about 256 KB of encoded rows, so
/// that a chunk stays in L2 while every tile of 8 hidden rows passes over it.
[[nodiscard]] inline Index logits_chunk_rows(Index row_bytes) noexcept {
  return std::max<Index>(16, (Index{256} << 10) / std::max<Index>(row_bytes, 1));
}

/// out = hidden · tableᵀ over a plain table or a float master (rows `stride` values apart): up to
/// max_pass_rows float hidden rows stream the table once (float_row_dots, chunks of rows split
/// across threads: each logit computed alike whatever the split), more go to one GEMM.
template <class T>
void plain_logits(const T* data, Index rows, Index d, Index stride,
                  const Eigen::Ref<const RowMatrix<T>>& hidden, Eigen::Ref<RowMatrix<T>> out) {
  const Index n = hidden.rows();
  if constexpr (std::is_same_v<T, float>) {
    if (n <= max_pass_rows) {
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
      const Index row_bytes = stride * Index{sizeof(float)};
      parallel_rows(rows, rows * d * n, [&](Index begin, Index end, int /*worker*/) {
        float_row_dots(F32Element{}, bytes + begin * row_bytes, row_bytes, end - begin, d,
                       hidden.data(), hidden.outerStride(), n, out.data() + begin,
                       out.outerStride());
      });
      return;
    }
  }
  using Map = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
  out.noalias() = hidden * Map(data, rows, d, Eigen::OuterStride<>(stride)).transpose();
}

/// hidden[n, d], W[V, d] -> out[n, V] = hidden · Wᵀ, as W's LogitsKind says:
/// - a plain table or the master: plain_logits;
/// - quantized_hidden on a codec that rounds hidden rows (has_quantized_dot, quantizes_hidden()):
///   the hidden rows rounded once, then
///   chunks of rows (split across threads) dotted with tiles of 8 of them;
/// - the codec's dot_rows over the encoded rows for n <= max_pass_rows (has_streaming_dot;
///   chunks of rows split across threads, each logit computed alike whatever the split);
///   float_row_dots over the decoded rows for the other float codecs (the bits of plain_logits
///   over the decoded table);
/// - else one GEMM per block of logits_block_rows decoded rows.
/// Validated by the public logits() callers (hidden n x d, finite for quantized_hidden; out n x V,
/// overlapping neither; mode an enumerator).
template <class Codec, LogitsKind Kind>
void logits(const LogitsTable<Codec, Kind>& w,
            const Eigen::Ref<const RowMatrix<typename Codec::Value>>& hidden,
            Eigen::Ref<RowMatrix<typename Codec::Value>> out, LogitsMode mode = LogitsMode::exact) {
  using V = typename Codec::Value;
  const CodecRows<Codec>& table = w.table;
  EMBER_ASSERT(hidden.cols() == table.d && out.rows() == hidden.rows() && out.cols() == table.rows);
  static_cast<void>(mode);  // plain tables compute quantized_hidden as exact
  if (hidden.rows() == 0) return;
  if constexpr (Kind == LogitsKind::plain) {
    plain_logits<V>(table.data, table.rows, table.d, table.stride, hidden, out);
  } else {
    if (w.master != nullptr) {
      plain_logits<float>(w.master->data(), w.master->rows(), w.master->cols(),
                          w.master->outerStride(), hidden, out);
      return;
    }
    const Index v = table.rows;
    if constexpr (has_quantized_dot(Kind)) {
      if (mode == LogitsMode::quantized_hidden && table.codec.quantizes_hidden()) {
        const Index n = hidden.rows();
        const QuantizedHidden qh =
            table.codec.quantize_hidden(hidden.data(), hidden.outerStride(), n, table.d);
        const Index chunk = logits_chunk_rows(table.row_bytes());
        parallel_rows(v, v * table.d * n, [&](Index begin, Index end, int /*worker*/) {
          for (Index r0 = begin; r0 < end; r0 += chunk) {
            const Index len = std::min(chunk, end - r0);
            for (Index j0 = 0; j0 < n; j0 += max_pass_rows) {
              table.codec.dot_rows_quantized(table.row(r0), table.stride, len, table.d, qh, j0,
                                             std::min(max_pass_rows, n - j0),
                                             out.data() + j0 * out.outerStride() + r0,
                                             out.outerStride());
            }
          }
        });
        return;
      }
    }
    if constexpr (has_streaming_dot(Kind)) {
      if (hidden.rows() <= max_pass_rows) {
        parallel_rows(v, v * table.d * hidden.rows(), [&](Index begin, Index end, int /*worker*/) {
          table.codec.dot_rows(table.row(begin), table.stride, end - begin, table.d, hidden.data(),
                               hidden.outerStride(), hidden.rows(), out.data() + begin,
                               out.outerStride());
        });
        return;
      }
    } else if constexpr (std::is_same_v<V, float>) {
      // The plain kernel over the decoded rows (the bits of a plain table holding them): read
      // through the codec's element type where it has one, else decoded a chunk at a time.
      if (hidden.rows() <= max_pass_rows) {
        const Index n = hidden.rows();
        parallel_rows(v, v * table.d * n, [&](Index begin, Index end, int /*worker*/) {
          if constexpr (requires { Codec::dot_element(); }) {
            float_row_dots(
                Codec::dot_element(), reinterpret_cast<const std::uint8_t*>(table.row(begin)),
                table.stride * Index{sizeof(typename Codec::Unit)}, end - begin, table.d,
                hidden.data(), hidden.outerStride(), n, out.data() + begin, out.outerStride());
          } else {
            constexpr Index chunk = 16;
            RowMatrix<float> rows(std::min(chunk, end - begin), table.d);
            for (Index r0 = begin; r0 < end; r0 += chunk) {
              const Index len = std::min(chunk, end - r0);
              for (Index r = 0; r < len; ++r) table.decode(r0 + r, 1.0f, rows.row(r).data());
              float_row_dots(F32Element{}, reinterpret_cast<const std::uint8_t*>(rows.data()),
                             table.d * Index{sizeof(float)}, len, table.d, hidden.data(),
                             hidden.outerStride(), n, out.data() + r0, out.outerStride());
            }
          }
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
template <class Codec, LogitsKind Kind>
void logits_backward(const LogitsTable<Codec, Kind>& w,
                     const Eigen::Ref<const RowMatrix<typename Codec::Value>>& hidden,
                     const Eigen::Ref<const RowMatrix<typename Codec::Value>>& grad_logits,
                     Eigen::Ref<RowMatrix<typename Codec::Value>> grad_hidden,
                     Eigen::Ref<RowMatrix<typename Codec::Value>> grad_weight) {
  using V = typename Codec::Value;
  const CodecRows<Codec>& table = w.table;
  EMBER_ASSERT(grad_logits.cols() == table.rows && grad_hidden.cols() == table.d &&
               grad_hidden.rows() == grad_logits.rows());
  if constexpr (Kind == LogitsKind::plain) {
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
