/// LogitsMode: how the tied logits of a table treat the hidden rows, exactly or rounded to the
/// dot type ggml uses for the table's storage type.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA {

/// The arithmetic of logits(hidden[, out], mode) (docs/lm_head.md):
/// - exact (the default): the hidden rows as given, float products of the stored values
///   (decoded exactly) with them;
/// - quantized_hidden: each hidden row rounded once to the dot type ggml uses for the table's
///   storage type (ggml's Q8_0 for q4_0, q5_0, q8_0; Q8_1 for q4_1, q5_1; Q8_K for q2_K ... q6_K;
///   F16 for f16 and half tables; BF16 for bf16 tables; 8-bit blocks for int8 rows), bit for bit
///   as ggml's reference quantizers round it, and the products taken in integers (floats for the
///   16-bit types) in one fixed order: the same bits on every instruction set, 2-4x faster on
///   the block types. Plain float and double tables (and f32 tensors) compute as exact.
enum class LogitsMode : std::uint8_t { exact, quantized_hidden };

/// "exact" or "quantized_hidden"; "unknown" for any other value.
[[nodiscard]] constexpr const char* to_string(LogitsMode mode) noexcept {
  switch (mode) {
    case LogitsMode::exact:
      return "exact";
    case LogitsMode::quantized_hidden:
      return "quantized_hidden";
  }
  return "unknown";
}

}  // namespace ember::inline EMBER_ISA
