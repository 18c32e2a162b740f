/// codec::Ggml: rows stored in one of ggml's block formats (Q4_0 ... Q8_0, Q2_K ... Q6_K) or its
/// plain F32/F16/BF16, chosen at run time, decoded bit for bit as ggml dequantizes them: the codec
/// of GgmlEmbeddingView and of GgufFile::table.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/ggml/exact_dot.hpp"
#include "ember/ggml/lookup.hpp"
#include "ember/ggml/quant_dot.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::codec {

/// A row of d values stored as ggml stores a row of a tensor of type `type()`: d / block_size
/// blocks of ggml-common.h's layout (for Q4_K at d = 4096, 16 super-blocks of 144 bytes), or d
/// little-endian F32/F16/BF16 values. The members are the codec contract's (codec/concepts.hpp);
/// units are bytes, so a table of this codec is a view of row bytes (element_rows is false).
///
/// Decoding at lookup scale s gives float(ggml's dequantized value) · s: the value is exactly
/// ggml's dequantize_row_* output (ggml/decode.hpp, tested against ggml's own bytes and
/// floats), and s is applied to it in one more rounding, never folded into a block's scale.
///
/// Tied logits of up to 8 hidden rows (detail::max_pass_rows) read each encoded row once and dot it
/// with the hidden rows as it is decoded (dot_rows); more hidden rows decode blocks of rows for a
/// GEMM.
///
/// Thread safety: a codec is an immutable value.
class Ggml {
 public:
  using Unit = std::uint8_t;
  using Value = float;
  static constexpr bool element_rows = false;
  static constexpr bool is_plain = false;
  static constexpr const char* family = "GgmlEmbedding";
  static constexpr const char* view_family = "GgmlEmbeddingView";

  /// The codec of `type`.
  /// Throws: ValueError naming the type unless ember decodes it (ggml_type_decodes: F32, F16,
  ///         BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K ... Q6_K).
  explicit Ggml(GgmlType type) : type_(checked(type)) {}

  /// The ggml type of the rows.
  [[nodiscard]] GgmlType type() const noexcept { return type_; }
  /// ggml's name of the type ("q4_K", "f16", ...).
  [[nodiscard]] const char* name() const noexcept {
    return detail::ggml::traits(type_).name.data();
  }
  /// Bytes of a row of d values: d / block_size blocks (ggml_row_size).
  [[nodiscard]] Index units_per_row(Index d) const noexcept {
    return detail::ggml::row_bytes(type_, d);
  }
  /// True when d is a whole number of blocks (any d for F32, F16 and BF16).
  [[nodiscard]] bool holds_width(Index d) const noexcept {
    return d % detail::ggml::traits(type_).block_size == 0;
  }

  /// dst[c] = ggml's dequantized value c of the row · s, for the d columns.
  EMBER_ALWAYS_INLINE void decode_row(const std::uint8_t* row, Index d, float s, float* dst) const {
    detail::ggml::decode_row_scaled<false>(type_, row, d, s, dst);
  }

  /// decode_row with non-temporal stores (builds with AVX2 only, detail::ggml::lookup_streams:
  /// without, a lookup has nothing to stream), for outputs too large to stay in cache; dst must be
  /// 32-byte aligned, and the caller issues an sfence before the output is read by another thread.
  template <bool Streams = detail::ggml::lookup_streams>
  requires Streams EMBER_ALWAYS_INLINE void decode_row_streaming(const std::uint8_t* row, Index d,
                                                                 float s, float* dst) const {
    detail::ggml::decode_row_scaled<true>(type_, row, d, s, dst);
  }

  /// True unless the rows are F32 (whose dot type is F32: quantized_hidden computes as exact).
  [[nodiscard]] bool quantizes_hidden() const noexcept { return type_ != GgmlType::F32; }

  /// The n hidden rows h[n, d] (finite; row j at h + j · h_stride) rounded to the dot type ggml
  /// uses for type() (Q8_0, Q8_1, Q8_K, F16, BF16) by ggml's reference quantizers.
  [[nodiscard]] detail::QuantizedHidden quantize_hidden(const float* h, Index h_stride, Index n,
                                                        Index d) const {
    return detail::ggml::quantize_hidden(type_, h, h_stride, n, d);
  }

  /// out[(j - j0)·out_stride + r] = the dot product of row r of the `count` rows at `rows`
  /// (row_stride bytes apart) with hidden row j of qh, j0 <= j < j0 + nj <= j0 + 8:
  /// detail::ggml::qdot_rows, which documents the order (the same bits in every build).
  void dot_rows_quantized(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                          const detail::QuantizedHidden& qh, Index j0, Index nj, float* out,
                          Index out_stride) const {
    detail::ggml::qdot_rows(type_, rows, row_stride, count, d, qh, j0, nj, out, out_stride);
  }

  /// out[j·out_stride + r] = Σ_c decoded(row r)[c] · h[j·h_stride + c] for `count` rows starting
  /// at `rows` (row_stride bytes apart) and n vectors h: detail::ggml::dot_rows, which documents
  /// the summation order and its error bound.
  void dot_rows(const std::uint8_t* rows, Index row_stride, Index count, Index d, const float* h,
                Index h_stride, Index n, float* out, Index out_stride) const {
    detail::ggml::dot_rows(type_, rows, row_stride, count, d, h, h_stride, n, out, out_stride);
  }

 private:
  static GgmlType checked(GgmlType type) {
    if (!ggml_type_decodes(type)) {
      throw ValueError("codec::Ggml: ember does not decode ggml type " +
                           std::string(to_string(type)) + " (id " +
                           std::to_string(static_cast<std::uint32_t>(type)) + ")",
                       static_cast<double>(static_cast<std::uint32_t>(type)));
    }
    return type;
  }

  GgmlType type_;
};

}  // namespace ember::inline EMBER_ISA::codec
