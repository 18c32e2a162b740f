/// Sinusoidal positional encoding (Vaswani et al. 2017, §3.5), interleaved sin/cos from
/// position 0. Independent of embedding.hpp: it composes with any n x d activation.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The fixed sinusoidal position table of "Attention Is All You Need":
///
///   PE(p, 2i)   = sin(p / base^(2i / d))
///   PE(p, 2i+1) = cos(p / base^(2i / d)),   p = 0, 1, ..., max_len - 1
///
/// Layout: sin and cos are *interleaved* (even columns sine, odd columns cosine), as in the paper
/// and tensor2tensor/fairseq, not concatenated [sin | cos] (a permutation of columns). Positions
/// start at 0, so PE(0) = [0, 1, 0, 1, ...]; with an odd d the last column is a sine. Values are
/// computed in double and rounded to T once. All members are const after construction.
template <class T>
class SinusoidalEncoding {
  static_assert(Scalar<T>, "ember::SinusoidalEncoding<T>: T must be float or double");

 public:
  /// Precomputes max_len x d_model encodings.
  /// Throws: ShapeError if max_len or d_model is not positive; ValueError unless base is finite
  ///         and > 0.
  /// Complexity: O(max_len · d_model) sin/cos evaluations, once.
  SinusoidalEncoding(Index max_len, Index d_model, T base = T(10000)) : base_(base) {
    constexpr const char* where = "SinusoidalEncoding";
    detail::check_sizes(where, max_len, d_model, "max_len");
    detail::check_positive_finite(where, "base", static_cast<double>(base));
    table_.resize(max_len, d_model);
    const auto d = static_cast<double>(d_model);
    for (Index c = 0; c < d_model; ++c) {
      const auto two_i = static_cast<double>(c - c % 2);
      const double inv_freq = std::pow(static_cast<double>(base), -two_i / d);
      for (Index p = 0; p < max_len; ++p) {
        const double angle = static_cast<double>(p) * inv_freq;
        table_(p, c) = static_cast<T>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
      }
    }
  }

  /// max_len x d_model table; row p is the encoding of position p.
  [[nodiscard]] const RowMatrix<T>& table() const noexcept { return table_; }
  /// Number of positions encoded.
  [[nodiscard]] Index max_len() const noexcept { return table_.rows(); }
  /// Width of each encoding.
  [[nodiscard]] Index d_model() const noexcept { return table_.cols(); }
  /// The wavelength base (10000 in the paper).
  [[nodiscard]] T base() const noexcept { return base_; }

  /// x.row(r) += PE(offset + r % seq_len) for a batch of sequences flattened batch-major ((b, t)
  /// -> row b·seq_len + t); `offset` shifts positions (decoding token by token with a cache).
  /// Shapes:  x[B·seq_len, d].
  /// Throws:  ShapeError if seq_len <= 0, x has not d_model() columns, or x's rows are not a
  ///          multiple of seq_len; IndexError if offset < 0 or offset + seq_len > max_len().
  ///          x is untouched when it throws.
  /// Complexity: O(B·seq_len·d).
  void add_to(Eigen::Ref<RowMatrix<T>> x, Index seq_len, Index offset = 0) const {
    constexpr const char* where = "SinusoidalEncoding::add_to";
    detail::check_positions(where, seq_len, offset, max_len());
    detail::check_extent(where, "x", 1, d_model(), x.cols(), "d_model");
    detail::check_whole_sequences(where, "rows of x are", x.rows(), seq_len);
    const Index batches = x.rows() / seq_len;
    for (Index b = 0; b < batches; ++b) {
      x.middleRows(b * seq_len, seq_len) += table_.middleRows(offset, seq_len);
    }
  }

 private:
  RowMatrix<T> table_;
  T base_;
};

}  // namespace ember::inline EMBER_ISA
