/// QuantizedEmbedding and QuantizedEmbeddingView: int8 row-quantized embedding tables in FBGEMM's
/// fused 8-bit row-wise layout (per row: d uint8 codes, a float scale, a float bias), owned or
/// over mapped memory, with dequantizing lookup and tied logits.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/codec/int8_rowwise.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace detail {

/// What QuantizedEmbedding and its view add to Table for FBGEMM's rows: each row's codes, scale
/// and bias (CRTP: Tab is the table type deriving from it).
template <class Tab>
class Int8RowParts {
 public:
  /// The codes of row r. Throws: IndexError if r is out of range.
  [[nodiscard]] std::span<const std::uint8_t> codes(Index r) const {
    return {row(r, "codes"), static_cast<std::size_t>(self().d_model())};
  }
  /// The scale of row r: (max - min) / 255 of the original row. Throws: IndexError.
  [[nodiscard]] float row_scale(Index r) const {
    return codec::Int8Rowwise::row_scale(row(r, "row_scale"), self().d_model());
  }
  /// The bias of row r: the minimum of the original row. Throws: IndexError.
  [[nodiscard]] float row_bias(Index r) const {
    return codec::Int8Rowwise::row_bias(row(r, "row_bias"), self().d_model());
  }

 private:
  [[nodiscard]] const Tab& self() const noexcept { return static_cast<const Tab&>(*this); }
  // Row r after checking it, `call` naming the public call in the message.
  [[nodiscard]] const std::uint8_t* row(Index r, const char* call) const {
    constexpr bool view = std::derived_from<Tab, Table<codec::Int8Rowwise, Borrowed>>;
    constexpr const char* name =
        view ? codec::Int8Rowwise::view_family : codec::Int8Rowwise::family;
    check_row(r, self().vocab_size(), {name, call});
    return rows_of(self()).row(r);
  }
};

}  // namespace detail

/// A V x d table quantized row by row to 8 bits, laid out exactly as FBGEMM's
/// FloatToFused8BitRowwiseQuantized: a Table<codec::Int8Rowwise, Owned> with the accessors of that
/// layout. Row r occupies row_bytes() = d + 8 bytes, d uint8 codes q followed by a float32 scale
/// and a float32 bias, and stands for the values q · scale + bias.
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
class QuantizedEmbedding : public Table<codec::Int8Rowwise, Owned>,
                           public detail::Int8RowParts<QuantizedEmbedding> {
  using Base = Table<codec::Int8Rowwise, Owned>;

 public:
  /// Quantizes a float or double table[V, d], optionally keeping it (in float) as the master for
  /// logits, as from_float.
  /// Throws:  ShapeError if the table is empty; ValueError naming the row, column and value of a
  ///          non-finite entry. Complexity: O(V·d).
  template <class Derived>
  explicit QuantizedEmbedding(const Eigen::MatrixBase<Derived>& table,
                              bool keep_float_master = false, LookupScale scale = {})
      : Base(encoded(table, keep_float_master, {codec::Int8Rowwise::family, nullptr}), scale) {}

  /// QuantizedEmbedding(table, keep_float_master, scale), with "from_float" in its messages.
  template <class Derived>
  [[nodiscard]] static QuantizedEmbedding from_float(const Eigen::MatrixBase<Derived>& table,
                                                     bool keep_float_master = false,
                                                     LookupScale scale = {}) {
    return QuantizedEmbedding(encoded(table, keep_float_master, where("from_float")), scale);
  }

  /// Adopts rows already in FBGEMM's fused 8-bit layout: `bytes` holds vocab_size · (d_model + 8)
  /// bytes.
  /// Throws:  ShapeError if a size is not positive or bytes has the wrong size; ValueError if a
  ///          row's scale is negative or not finite, or its bias is not finite (naming the row).
  [[nodiscard]] static QuantizedEmbedding from_fused_rows(std::vector<std::uint8_t> bytes,
                                                          Index vocab_size, Index d_model,
                                                          LookupScale scale = {}) {
    using C = codec::Int8Rowwise;
    const detail::Where w = where("from_fused_rows");
    detail::check_sizes(w, vocab_size, d_model);
    const Index row = C::units_per_row(d_model);
    const Index expected = vocab_size * row;
    if (static_cast<Index>(bytes.size()) != expected) {
      throw ShapeError(detail::message(w, "bytes has ", bytes.size(),
                                       " bytes, expected vocab_size · (d_model + 8) = ", expected),
                       -1, expected, static_cast<Index>(bytes.size()));
    }
    RowMatrix<std::uint8_t> storage(vocab_size, row);
    std::memcpy(storage.data(), bytes.data(), bytes.size());
    for (Index r = 0; r < vocab_size; ++r) {
      const float s = C::row_scale(storage.row(r).data(), d_model);
      const float b = C::row_bias(storage.row(r).data(), d_model);
      if (!(std::isfinite(s) && s >= 0.0f) || !std::isfinite(b)) {
        throw ValueError(detail::message(w, "row ", r, " has scale ", s, " and bias ", b,
                                         "; expected a finite scale >= 0 and a finite bias"),
                         static_cast<double>(std::isfinite(s) ? b : s));
      }
    }
    return QuantizedEmbedding(Encoded{std::move(storage), d_model, nullptr}, scale);
  }

 private:
  QuantizedEmbedding(Encoded e, LookupScale scale) : Base(std::move(e), scale) {}
};

/// The same int8 rows over memory ember does not own (an FBGEMM table in a file, mapped): a
/// Table<codec::Int8Rowwise, Borrowed> with the accessors of the layout, built from
/// (const std::uint8_t* data, vocab_size, d_model, row_stride = -1 (d_model + 8 bytes),
/// keep_alive = {}, scale = {}) or from a QuantizedEmbedding.
class QuantizedEmbeddingView : public Table<codec::Int8Rowwise, Borrowed>,
                               public detail::Int8RowParts<QuantizedEmbeddingView> {
  using Base = Table<codec::Int8Rowwise, Borrowed>;

 public:
  // Table's view constructors: (data, vocab_size, d_model, row_stride, keep_alive, scale), with
  // a codec object first, and (owner) of a QuantizedEmbedding.
  using Base::Base;
};

}  // namespace ember::inline EMBER_ISA
