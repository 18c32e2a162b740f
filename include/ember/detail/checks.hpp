/// The input checks of ember's public entry points, in one place: ids, shapes, sizes, scalar
/// arguments and the storage of views. They throw; the kernels after them never re-check.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The public call a check reports in its message: an object and a call ("Embedding", "forward"),
/// or one full name ("ember::logits"). The text is built only when a check throws.
struct Where {
  const char* object = nullptr;  ///< "Embedding", "EmbeddingView", ... or null
  const char* call = nullptr;    ///< "forward", or the full name when object is null
  constexpr Where(const char* full) noexcept : call(full) {}  // NOLINT: implicit by design
  constexpr Where(const char* object_name, const char* call_name) noexcept
      : object(object_name), call(call_name) {}
  [[nodiscard]] std::string str() const {
    if (object == nullptr) return call;
    return call != nullptr ? std::string(object) + "::" + call : std::string(object);
  }
};

// ---- ids ----------------------------------------------------------------------------------------

/// The one way ember accepts ids: calls f(span) with `ids` viewed as a span of its integer type,
/// or fails to compile with ember's id message for anything that is not an IdRange.
template <class R, class F>
decltype(auto) with_ids(const R& ids, F&& f) {
  if constexpr (IdRange<R>) {
    return f(as_id_span(ids));
  } else {
    static_assert(always_false<R>, EMBER_ID_RANGE_MESSAGE);
  }
}

/// The exact decimal text of an integer (an id, offset or length of any integer type).
template <std::integral I>
[[nodiscard]] std::string int_text(I v) {
  if constexpr (std::is_signed_v<I>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    return std::to_string(static_cast<unsigned long long>(v));
  }
}

/// v as the int64 value() of an IndexError: v, or INT64_MAX for an unsigned value above it (out
/// of every bound; the message has the exact value).
template <std::integral I>
[[nodiscard]] constexpr std::int64_t int64_field(I v) noexcept {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  return std::cmp_greater(v, max) ? max : static_cast<std::int64_t>(v);
}

/// Throws ValueError for the first of `values` above INT64_MAX, which only an unsigned 64-bit
/// range can hold: no offset or length is that large, and after this check every value reads
/// exactly as an int64.
template <std::integral I>
void check_int64_range(std::span<const I> values, Where where, const char* name) {
  if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t)) {
    constexpr auto max = static_cast<I>(std::numeric_limits<std::int64_t>::max());
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (values[k] > max) [[unlikely]] {
        throw ValueError(where.str() + ": " + name + "[" + std::to_string(k) +
                             "] = " + int_text(values[k]) + " is above 2^63 - 1, the largest index",
                         static_cast<double>(values[k]));
      }
    }
  }
}

/// Throws IndexError for the first id outside [0, bound). One comparison pair per id, for every
/// id type (an unsigned id above INT64_MAX is outside like any id >= bound).
template <TokenIdType Id>
void check_ids(std::span<const Id> ids, Index bound, Where where) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const Id id = ids[static_cast<std::size_t>(i)];
    if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, bound)) [[unlikely]] {
      throw IndexError(where.str() + ": id " + int_text(id) + " at position " + std::to_string(i) +
                           " is outside [0, " + std::to_string(bound) + ")",
                       i, int64_field(id), bound);
    }
  }
}

/// Throws IndexError unless the single row index r is in [0, bound) (position -1: an argument).
inline void check_row(Index r, Index bound, Where where) {
  if (r < 0 || r >= bound) [[unlikely]] {
    throw IndexError(where.str() + ": row " + std::to_string(r) + " is outside [0, " +
                         std::to_string(bound) + ")",
                     -1, r, bound);
  }
}

// ---- shapes and sizes ---------------------------------------------------------------------------

/// Throws ShapeError unless `actual == expected` for dimension `dim` (0 rows, 1 cols) of `name`.
inline void check_extent(Where where, const char* name, int dim, Index expected, Index actual,
                         const char* expected_what) {
  if (actual != expected) [[unlikely]] {
    throw ShapeError(where.str() + ": " + name + " has " + std::to_string(actual) +
                         (dim == 0 ? " rows" : " columns") + ", expected " + expected_what + " = " +
                         std::to_string(expected),
                     dim, expected, actual);
  }
}

/// Throws ShapeError unless the size argument `value` is strictly positive.
inline void check_positive_size(Where where, const char* name, Index value) {
  if (value <= 0) [[unlikely]] {
    throw ShapeError(where.str() + ": " + name + " must be positive, got " + std::to_string(value),
                     -1, 1, value);
  }
}

/// Throws ShapeError unless n is a multiple of seq_len (> 0): a batch of whole sequences.
inline void check_whole_sequences(Where where, const char* what, Index n, Index seq_len) {
  if (n % seq_len != 0) [[unlikely]] {
    throw ShapeError(where.str() + ": " + std::to_string(n) + " " + what +
                         " not a multiple of seq_len = " + std::to_string(seq_len),
                     0, (n / seq_len + 1) * seq_len, n);
  }
}

/// Throws unless seq_len > 0, offset >= 0 and offset + seq_len <= max_len: the position rows a
/// batch of sequences uses exist.
inline void check_positions(Where where, Index seq_len, Index offset, Index max_len) {
  check_positive_size(where, "seq_len", seq_len);
  if (offset < 0) {
    throw IndexError(where.str() + ": offset " + std::to_string(offset) + " is outside [0, " +
                         std::to_string(max_len) + ")",
                     -1, offset, max_len);
  }
  if (seq_len > max_len - offset) {
    const Index last = offset + seq_len - 1;
    throw IndexError(where.str() + ": position " + std::to_string(last) + " (offset " +
                         std::to_string(offset) + " + seq_len " + std::to_string(seq_len) +
                         " - 1) is outside [0, " + std::to_string(max_len) + ") = max_len",
                     seq_len - 1, last, max_len);
  }
}

/// Throws ShapeError unless the output of an n-id lookup is n x d.
inline void check_lookup_out(Where where, Index n, Index d, Index out_rows, Index out_cols) {
  check_extent(where, "out", 0, n, out_rows, "the number of ids");
  check_extent(where, "out", 1, d, out_cols, "d_model");
}

/// Throws ShapeError unless the grad_out of an n-id backward is n x d (checked before the
/// gradient's own checks, so a wrong width never binds an empty SparseRowGrad to it).
inline void check_backward_grad_out(Where where, Index n, Index d, Index grad_rows,
                                    Index grad_cols) {
  check_extent(where, "grad_out", 0, n, grad_rows, "the number of ids");
  check_extent(where, "grad_out", 1, d, grad_cols, "d_model");
}

/// The checks of a lookup with positions added: positions[max_len, d] cover seq_len rows from
/// offset, out is n x d and n is a multiple of seq_len.
inline void check_fused(Where where, Index n, Index d, Index pos_rows, Index pos_cols,
                        Index out_rows, Index out_cols, Index seq_len, Index offset) {
  check_positions(where, seq_len, offset, pos_rows);
  check_extent(where, "positions", 1, d, pos_cols, "d_model");
  check_lookup_out(where, n, d, out_rows, out_cols);
  check_whole_sequences(where, "ids are", n, seq_len);
}

/// The checks of tied logits over a V x d table: hidden has d columns, out is hidden.rows() x V.
inline void check_logits(Where where, Index v, Index d, Index hidden_rows, Index hidden_cols,
                         Index out_rows, Index out_cols) {
  check_extent(where, "hidden", 1, d, hidden_cols, "d_model");
  check_extent(where, "out", 0, hidden_rows, out_rows, "hidden's rows");
  check_extent(where, "out", 1, v, out_cols, "vocab_size");
}

/// The checks of the tied logits' backward over a V x d table: hidden[n, d], grad_logits[n, V],
/// grad_hidden[n, d], grad_weight[V, d].
template <class H, class GL, class GH, class GW>
void check_logits_backward(Where where, Index v, Index d, const H& hidden, const GL& grad_logits,
                           const GH& grad_hidden, const GW& grad_weight) {
  const Index n = hidden.rows();
  check_extent(where, "hidden", 1, d, hidden.cols(), "d_model");
  check_extent(where, "grad_logits", 0, n, grad_logits.rows(), "hidden's rows");
  check_extent(where, "grad_logits", 1, v, grad_logits.cols(), "vocab_size");
  check_extent(where, "grad_hidden", 0, n, grad_hidden.rows(), "hidden's rows");
  check_extent(where, "grad_hidden", 1, d, grad_hidden.cols(), "d_model");
  check_extent(where, "grad_weight", 0, v, grad_weight.rows(), "vocab_size");
  check_extent(where, "grad_weight", 1, d, grad_weight.cols(), "d_model");
}

// ---- scalar arguments ---------------------------------------------------------------------------

/// Throws ValueError "<where>: <name> must be <rule>, got <value>" unless `ok`.
inline void check_scalar(bool ok, Where where, const char* name, double value, const char* rule) {
  if (!ok) [[unlikely]] {
    throw ValueError(
        where.str() + ": " + name + " must be " + rule + ", got " + std::to_string(value), value);
  }
}

/// Throws ValueError unless `value` is finite and strictly positive.
inline void check_positive_finite(Where where, const char* name, double value) {
  check_scalar(std::isfinite(value) && value > 0.0, where, name, value, "finite and positive");
}

/// Throws ValueError unless `value` is finite.
inline void check_finite_value(Where where, const char* name, double value) {
  check_scalar(std::isfinite(value), where, name, value, "finite");
}

/// Throws ValueError unless `value` is finite and >= 0.
inline void check_non_negative(Where where, const char* name, double value) {
  check_scalar(std::isfinite(value) && value >= 0.0, where, name, value, "finite and >= 0");
}

/// Throws ValueError unless value is in [0, 1).
inline void check_unit_interval(Where where, const char* name, double value) {
  check_scalar(value >= 0.0 && value < 1.0, where, name, value, "in [0, 1)");
}

/// The constructor checks of a view over caller memory, in this order: vocab_size and d_model
/// positive (ShapeError), row_stride (-1: `packed`, the units of a packed row) at least `packed`
/// (ShapeError), data not null and aligned to alignof(Unit) (ValueError). Returns the stride.
template <class Unit>
[[nodiscard]] Index checked_view_stride(Where where, const Unit* data, Index vocab_size,
                                        Index d_model, Index packed, Index row_stride) {
  check_positive_size(where, "vocab_size", vocab_size);
  check_positive_size(where, "d_model", d_model);
  const Index stride = row_stride == -1 ? packed : row_stride;
  const char* packed_name = packed == d_model ? "d_model" : "the bytes of a row";
  if (stride < 0) {
    throw ShapeError(where.str() + ": row_stride " + std::to_string(stride) +
                         " is negative (the only negative value allowed is -1, meaning " +
                         packed_name + " = " + std::to_string(packed) + ")",
                     -1, packed, stride);
  }
  if (stride < packed) {
    throw ShapeError(where.str() + ": row_stride " + std::to_string(stride) + " is smaller than " +
                         packed_name + " = " + std::to_string(packed),
                     -1, packed, stride);
  }
  if (data == nullptr) throw ValueError(where.str() + ": data is null", 0.0);
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address % alignof(Unit) != 0) {
    throw ValueError(where.str() + ": data address " + std::to_string(address) +
                         " is not aligned to " + std::to_string(alignof(Unit)) + " bytes",
                     static_cast<double>(address % alignof(Unit)));
  }
  return stride;
}

}  // namespace ember::inline EMBER_ISA::detail
