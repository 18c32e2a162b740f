/// QuantizedEmbedding: an int8 row-quantized embedding table in FBGEMM's fused 8-bit row-wise
/// layout (per row: d uint8 codes, a float scale, a float bias), with dequantizing lookup and
/// tied logits, and the per-row error analysis of the quantization.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/detail/decoded_table.hpp"
#include "ember/detail/gather_convert.hpp"
#include "ember/detail/lookup.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember {

/// A V x d table quantized row by row to 8 bits, laid out exactly as FBGEMM's
/// FloatToFused8BitRowwiseQuantized (Caffe2's Fused8BitRowwise): row r occupies row_bytes() =
/// d + 8 bytes, d uint8 codes q followed by a float32 scale and a float32 bias (native byte order,
/// unaligned), and stands for the values q · scale + bias.
///
/// Quantization (FBGEMM's): per row, bias = min, scale = (max - min) / 255,
/// q = clamp(round((x - min) · 255 / (max - min + 1e-8)), 0, 255). Each element's error is at
/// most scale / 2 (plus float rounding): see max_row_error(). A constant row is stored exactly
/// (scale 0). The table takes d + 8 bytes per row instead of 4·d: 28% of float at d = 128.
///
/// Lookup dequantizes each row, multiplies it by scale() = √d_model and writes float, in one pass.
/// logits use a float master copy when one is kept (keep_float_master) - recommended for a tied
/// output layer - else rows dequantized 4096 at a time. There is no backward: an int8 table is for
/// serving; train in float and quantize the result.
///
/// Thread safety: const members may run concurrently.
///
/// Example:
/// ```cpp
/// ember::QuantizedEmbedding q(emb.weight());          // from a float table
/// ember::RowMatrix<float> x = q.forward(ids);         // dequantized rows · √d
/// float worst = q.max_row_error(emb.weight()).maxCoeff();
/// ```
class QuantizedEmbedding : public detail::DecodedTableOps<QuantizedEmbedding> {
 public:
  static constexpr const char* forward_name = "QuantizedEmbedding::forward";
  static constexpr const char* logits_name = "QuantizedEmbedding::logits";
  static constexpr const char* logits_backward_name = "QuantizedEmbedding::logits_backward";
  static constexpr const char* set_float_master_name = "QuantizedEmbedding::set_float_master";
  /// Bytes after the codes of each row: the float scale and the float bias.
  static constexpr Index row_overhead = 2 * static_cast<Index>(sizeof(float));

  /// Quantizes a float or double table[V, d] row by row, optionally keeping a float copy of it
  /// as the master for logits.
  /// Throws:  ShapeError if the table is empty; ValueError naming the row, column and value of a
  ///          non-finite entry. Nothing is built then.
  /// Complexity: O(V·d).
  template <class Derived>
  explicit QuantizedEmbedding(const Eigen::MatrixBase<Derived>& table,
                              bool keep_float_master = false)
      : rows_(table.rows()), cols_(table.cols()) {
    constexpr const char* where = "QuantizedEmbedding";
    detail::check_positive_size(where, "vocab_size (table rows)", rows_);
    detail::check_positive_size(where, "d_model (table columns)", cols_);
    RowMatrix<float> f = table.template cast<float>();
    for (Index r = 0; r < rows_; ++r) {
      for (Index c = 0; c < cols_; ++c) {
        if (!std::isfinite(f(r, c))) {
          throw ValueError(std::string(where) + ": value " + std::to_string(f(r, c)) + " at row " +
                               std::to_string(r) + ", column " + std::to_string(c) +
                               " is not finite",
                           static_cast<double>(f(r, c)));
        }
      }
    }
    bytes_.resize(static_cast<std::size_t>(rows_ * row_bytes()));
    for (Index r = 0; r < rows_; ++r) quantize_row(f.row(r).data(), row_ptr(r));
    if (keep_float_master) set_float_master(std::move(f));
  }

  /// Adopts rows already in the fused layout (e.g. produced by FBGEMM): `bytes` holds
  /// vocab_size · (d_model + 8) bytes.
  /// Throws:  ShapeError if a size is not positive or bytes has the wrong size; ValueError if a
  ///          row's scale is negative or not finite, or its bias is not finite (naming the row).
  [[nodiscard]] static QuantizedEmbedding from_fused_rows(std::vector<std::uint8_t> bytes,
                                                          Index vocab_size, Index d_model) {
    constexpr const char* where = "QuantizedEmbedding::from_fused_rows";
    detail::check_positive_size(where, "vocab_size", vocab_size);
    detail::check_positive_size(where, "d_model", d_model);
    const Index expected = vocab_size * (d_model + row_overhead);
    if (static_cast<Index>(bytes.size()) != expected) {
      throw ShapeError(
          std::string(where) + ": bytes has " + std::to_string(bytes.size()) +
              " bytes, expected vocab_size · (d_model + 8) = " + std::to_string(expected),
          -1, expected, static_cast<Index>(bytes.size()));
    }
    QuantizedEmbedding q(vocab_size, d_model, std::move(bytes));
    const detail::Int8Rows rows = q.table();
    for (Index r = 0; r < vocab_size; ++r) {
      const float s = rows.row_scale(r);
      const float b = rows.row_bias(r);
      if (!(std::isfinite(s) && s >= 0.0f) || !std::isfinite(b)) {
        throw ValueError(std::string(where) + ": row " + std::to_string(r) + " has scale " +
                             std::to_string(s) + " and bias " + std::to_string(b) +
                             "; expected a finite scale >= 0 and a finite bias",
                         static_cast<double>(std::isfinite(s) ? b : s));
      }
    }
    return q;
  }

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return rows_; }
  /// Row width d_model (codes per row).
  [[nodiscard]] Index d_model() const noexcept { return cols_; }
  /// The lookup scale √d_model, in float.
  [[nodiscard]] float scale() const noexcept { return detail::lookup_scale<float>(cols_); }
  /// Bytes per stored row: d_model + 8.
  [[nodiscard]] Index row_bytes() const noexcept { return cols_ + row_overhead; }
  /// The whole fused table, vocab_size · row_bytes() bytes.
  [[nodiscard]] std::span<const std::uint8_t> bytes() const noexcept { return bytes_; }
  /// Bytes of the stored table (codes, scales and biases).
  [[nodiscard]] std::size_t storage_bytes() const noexcept { return bytes_.size(); }

  /// The codes of row r, scale and bias of row r. Throws: IndexError if r is out of range.
  [[nodiscard]] std::span<const std::uint8_t> codes(Index r) const {
    check_row(r, "QuantizedEmbedding::codes");
    return {row_ptr(r), static_cast<std::size_t>(cols_)};
  }
  /// The scale of row r: (max - min) / 255 of the original row.
  [[nodiscard]] float row_scale(Index r) const {
    check_row(r, "QuantizedEmbedding::row_scale");
    return table().row_scale(r);
  }
  /// The bias of row r: the minimum of the original row.
  [[nodiscard]] float row_bias(Index r) const {
    check_row(r, "QuantizedEmbedding::row_bias");
    return table().row_bias(r);
  }

  /// Row r dequantized: codes · scale + bias, unscaled by √d. Throws: IndexError out of range.
  [[nodiscard]] RowVector<float> dequantize_row(Index r) const {
    check_row(r, "QuantizedEmbedding::dequantize_row");
    RowVector<float> out(cols_);
    table().decode_scaled(r, 1.0f, out.data());
    return out;
  }
  /// The whole table dequantized, V x d (O(V·d) memory: for analysis and small tables).
  [[nodiscard]] RowMatrix<float> dequantize() const {
    RowMatrix<float> out(rows_, cols_);
    for (Index r = 0; r < rows_; ++r) table().decode_scaled(r, 1.0f, out.row(r).data());
    return out;
  }

  /// Per-row analysis of the quantization: entry r is max_c |original(r, c) - dequantized(r, c)|,
  /// computed in double. Compare with row_scale(r) / 2, the bound of round-to-nearest.
  /// Shapes:  original[V, d] -> V.
  /// Throws:  ShapeError if original is not vocab_size() x d_model().
  template <class Derived>
  [[nodiscard]] Eigen::VectorXd max_row_error(const Eigen::MatrixBase<Derived>& original) const {
    constexpr const char* where = "QuantizedEmbedding::max_row_error";
    detail::check_extent(where, "original", 0, rows_, original.rows(), "vocab_size");
    detail::check_extent(where, "original", 1, cols_, original.cols(), "d_model");
    Eigen::VectorXd out(rows_);
    RowVector<float> row(cols_);
    for (Index r = 0; r < rows_; ++r) {
      table().decode_scaled(r, 1.0f, row.data());
      double worst = 0.0;
      for (Index c = 0; c < cols_; ++c) {
        worst = std::max(
            worst, std::abs(static_cast<double>(original(r, c)) - static_cast<double>(row[c])));
      }
      out[r] = worst;
    }
    return out;
  }

  /// The table as the kernels take it: a row decoder to float (EmbeddingView::table()'s role).
  [[nodiscard]] detail::Int8Rows table() const noexcept {
    return {bytes_.data(), rows_, cols_, row_bytes()};
  }

 private:
  QuantizedEmbedding(Index rows, Index cols, std::vector<std::uint8_t> bytes)
      : rows_(rows), cols_(cols), bytes_(std::move(bytes)) {}

  [[nodiscard]] std::uint8_t* row_ptr(Index r) noexcept { return bytes_.data() + r * row_bytes(); }
  [[nodiscard]] const std::uint8_t* row_ptr(Index r) const noexcept {
    return bytes_.data() + r * row_bytes();
  }

  void check_row(Index r, const char* where) const {
    if (r < 0 || r >= rows_) {
      throw IndexError(std::string(where) + ": row " + std::to_string(r) + " is outside [0, " +
                           std::to_string(rows_) + ")",
                       -1, r, rows_);
    }
  }

  /// FBGEMM's FloatToFused8BitRowwiseQuantizedSBFloat, reference (scalar) version.
  void quantize_row(const float* x, std::uint8_t* out) const {
    const auto [lo, hi] = std::minmax_element(x, x + cols_);
    const float minimum = *lo;
    const float range = *hi - minimum;
    const float scale = range / 255.0f;
    const float inverse_scale = 255.0f / (range + 1e-8f);
    for (Index c = 0; c < cols_; ++c) {
      const long q = std::lrintf((x[c] - minimum) * inverse_scale);
      out[c] = static_cast<std::uint8_t>(std::clamp(q, 0L, 255L));
    }
    std::memcpy(out + cols_, &scale, sizeof scale);
    std::memcpy(out + cols_ + static_cast<Index>(sizeof scale), &minimum, sizeof minimum);
  }

  Index rows_;
  Index cols_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace ember
