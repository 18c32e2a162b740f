/// The codec contract as concepts: what every storage format of ember/codec/ provides (RowCodec),
/// what owning tables and from_float need of it (OwnedCodec, EncodingCodec), and the optional
/// members the shared code uses when a codec has them (ChecksEncodable, StreamingDecode,
/// StreamingDot, QuantizedDot), and what the tied logits make of them (logits_kind_v).
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/logits_kind.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::codec {

/// How one row of d values is stored and decoded; Table<C, Holder> static_asserts it.
///
/// - `Unit`: the element type of the stored rows; `Value`: what rows decode to (float or double).
/// - `element_rows`: a row is d units, each convertible from float (the table is a matrix of
///   Unit: weight(), seeded construction, lookups into a Unit buffer).
/// - `is_plain`: rows are Value[d] as stored (no decoding; Unit is Value).
/// - `family`, `view_family`: the owning and the viewing table's names in messages
///   ("QuantizedEmbedding::forward: id ...").
/// - `name()`: the storage format ("f32", "q4_K"); `units_per_row(d)`: units of a row of d
///   values; `holds_width(d)`: whether rows of d values can be stored (a block format needs
///   whole blocks).
/// - `decode_row(row, d, s, dst)`: dst[c] = the value of column c times s, for the d columns,
///   each product rounded to Value before anything is added to it; must not throw. It runs once
///   per row a kernel reads: mark it EMBER_ALWAYS_INLINE.
template <class C>
concept RowCodec = std::copy_constructible<C> &&
    requires(const C& c, const typename C::Unit* row, Index d, typename C::Value s,
             typename C::Value* dst) {
  requires Scalar<typename C::Value>;
  typename std::bool_constant<C::element_rows>;
  typename std::bool_constant<C::is_plain>;
  requires !C::is_plain || std::same_as<typename C::Unit, typename C::Value>;
  requires !C::element_rows || std::constructible_from<typename C::Unit, float>;
  { C::family } -> std::convertible_to<const char*>;
  { C::view_family } -> std::convertible_to<const char*>;
  { c.name() } -> std::convertible_to<const char*>;
  { c.units_per_row(d) } -> std::same_as<Index>;
  { c.holds_width(d) } -> std::same_as<bool>;
  c.decode_row(row, d, s, dst);
};

/// A codec an owning table can hold: built as C{}, its row size known from the type alone (owning
/// tables allocate before any codec object exists).
template <class C>
concept OwnedCodec = RowCodec<C> && std::default_initializable<C> && requires(Index d) {
  { C::units_per_row(d) } -> std::same_as<Index>;
};

/// An owning codec that can encode floats (Table::from_float): encode_row(x, d, out) stores the
/// d finite floats x as one row of units_per_row(d) units; must not throw.
template <class C>
concept EncodingCodec = OwnedCodec<C> && requires(const float* x, Index d, typename C::Unit* out) {
  C::encode_row(x, d, out);
};

/// Optional: check_encodable(table, where) throws ValueError naming the row, column and value of
/// the first entry of a float or double matrix that the codec cannot store (codec::Reduced: NaN,
/// infinity, or beyond the 16-bit type's range). from_float calls it on the values as given,
/// instead of checking the floats it encodes for NaN and infinity (what it does for other codecs).
template <class C>
concept ChecksEncodable = EncodingCodec<C> &&
    requires(const RowMatrix<double>& table, const char* where) {
  C::check_encodable(table, where);
};

/// Optional: decode_row_streaming(row, d, s, dst) writes what decode_row writes with non-temporal
/// stores (dst 32-byte aligned; the caller fences). Lookups of 2 MiB or more use it (codec::Ggml).
template <class C>
concept StreamingDecode = RowCodec<C> && requires(const C& c, const typename C::Unit* row, Index d,
                                                  typename C::Value s, typename C::Value* dst) {
  c.decode_row_streaming(row, d, s, dst);
};

/// Optional: dot_rows(rows, row_stride, count, d, h, h_stride, n, out, out_stride) writes
/// out[j·out_stride + r] = Σ_c decoded(row r)[c] · h[j·h_stride + c] for `count` rows from `rows`
/// (row_stride units apart) and n float vectors h, without storing the rows decoded. Tied logits
/// of a few hidden rows use it instead of decoding blocks for a GEMM (codec::Ggml).
template <class C>
concept StreamingDot = RowCodec<C> &&
    requires(const C& c, const typename C::Unit* rows, Index i, const float* h, float* out) {
  c.dot_rows(rows, i, i, i, h, i, i, out, i);
};

/// Optional: the hidden rows rounded to a dot type and dotted with the stored rows, for
/// LogitsMode::quantized_hidden (codec::Ggml, the 16-bit and int8 codecs): quantizes_hidden()
/// (false: the codec computes quantized_hidden as exact), quantize_hidden(h, h_stride, n, d) ->
/// detail::QuantizedHidden, and dot_rows_quantized(rows, row_stride, count, d, qh, j0, nj, out,
/// out_stride), which writes out[(j - j0)·out_stride + r] for nj <= 8 hidden rows from j0.
template <class C>
concept QuantizedDot = RowCodec<C> &&
    requires(const C& c, const typename C::Unit* rows, Index i, const float* h,
             const detail::QuantizedHidden& qh, float* out) {
  { c.quantizes_hidden() } -> std::convertible_to<bool>;
  { c.quantize_hidden(h, i, i, i) } -> std::same_as<detail::QuantizedHidden>;
  c.dot_rows_quantized(rows, i, i, i, qh, i, i, out, i);
};

/// How the tied logits read the rows of a codec (detail/logits_kind.hpp): plain, decoded,
/// streaming_dot, quantized_dot or streaming_and_quantized_dot.
using LogitsKind = detail::LogitsKind;

/// The LogitsKind of codec C, from the hooks it has: `plain` for is_plain; otherwise
/// StreamingDot<C> gives dot_rows to the logits of up to 8 hidden rows and QuantizedDot<C> gives
/// dot_rows_quantized to LogitsMode::quantized_hidden. Derived here once: the tables hand it to
/// the logits kernels with their rows (detail::LogitsTable).
template <RowCodec C>
struct logits_kind {
  static constexpr LogitsKind value = [] {
    if constexpr (C::is_plain) {
      return LogitsKind::plain;
    } else if constexpr (StreamingDot<C> && QuantizedDot<C>) {
      return LogitsKind::streaming_and_quantized_dot;
    } else if constexpr (StreamingDot<C>) {
      return LogitsKind::streaming_dot;
    } else if constexpr (QuantizedDot<C>) {
      return LogitsKind::quantized_dot;
    } else {
      return LogitsKind::decoded;
    }
  }();
};

/// logits_kind<C>::value.
template <RowCodec C>
inline constexpr LogitsKind logits_kind_v = logits_kind<C>::value;

}  // namespace ember::inline EMBER_ISA::codec
