/// LogitsKind: how the tied logits (detail/logits.hpp) read a table's rows, which the codec
/// contract derives from each codec's optional hooks (codec::logits_kind_v, codec/concepts.hpp).
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// How the tied logits read the rows of a codec:
/// - plain: as stored (the codec's is_plain);
/// - decoded: decoded by decode_row, a block at a time for a GEMM, or a few rows at a time for
///   up to max_pass_rows hidden rows of a float codec;
/// - streaming_dot: as decoded, except that up to max_pass_rows hidden rows are dotted with the
///   stored rows by the codec's dot_rows (codec::StreamingDot);
/// - quantized_dot: as decoded, except that LogitsMode::quantized_hidden rounds the hidden rows
///   and dots them with the stored rows through the codec's dot_rows_quantized
///   (codec::QuantizedDot);
/// - streaming_and_quantized_dot: both hooks.
enum class LogitsKind { plain, decoded, streaming_dot, quantized_dot, streaming_and_quantized_dot };

/// Whether a codec of this kind has dot_rows (codec::StreamingDot).
[[nodiscard]] constexpr bool has_streaming_dot(LogitsKind kind) noexcept {
  return kind == LogitsKind::streaming_dot || kind == LogitsKind::streaming_and_quantized_dot;
}

/// Whether a codec of this kind has dot_rows_quantized (codec::QuantizedDot).
[[nodiscard]] constexpr bool has_quantized_dot(LogitsKind kind) noexcept {
  return kind == LogitsKind::quantized_dot || kind == LogitsKind::streaming_and_quantized_dot;
}

}  // namespace ember::inline EMBER_ISA::detail
