/// The input checks of ember's public entry points, in one place: the one way a call names itself
/// in its errors (Where, message), then ids, shapes, sizes, scalar arguments and the storage of
/// views. They throw; the kernels after them never re-check.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/logits_mode.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The public call a check reports in its message: an object and a call ("Embedding", "forward"),
/// or one full name ("ember::logits"). The text is built only when a check throws.
struct Where {
  const char* object = nullptr;  ///< "Embedding", "EmbeddingView", ... or null
  const char* call = nullptr;    ///< "forward", or the full name when object is null
  int rank = -1;                 ///< the MPI rank of a collective call (ShardedEmbedding), or -1
  int world = 0;                 ///< the number of ranks with a rank
  constexpr Where(const char* full) noexcept : call(full) {}  // NOLINT: implicit by design
  constexpr Where(const char* object_name, const char* call_name) noexcept
      : object(object_name), call(call_name) {}
  constexpr Where(const char* object_name, const char* call_name, int rank_of,
                  int world_of) noexcept
      : object(object_name), call(call_name), rank(rank_of), world(world_of) {}
  /// "Embedding::forward", "ember::logits", "ShardedEmbedding::backward (rank 1 of 4)".
  [[nodiscard]] std::string str() const {
    std::string out = object == nullptr ? std::string(call) : std::string(object);
    if (object != nullptr && call != nullptr) {
      out += "::";
      out += call;
    }
    if (rank >= 0) {
      out += " (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")";
    }
    return out;
  }
};

// ---- messages -----------------------------------------------------------------------------------

/// Appends one part of a message: text as it is, an integer in decimal, a floating-point value in
/// the shortest form that reads back to the same value (std::to_chars: -1e-07, 0.1, 65504, inf).
inline void append_part(std::string& out, std::string_view s) { out += s; }
inline void append_part(std::string& out, char c) { out += c; }
template <class N>
requires(std::is_arithmetic_v<N> && !std::same_as<N, bool> &&
         !std::same_as<N, char>) void append_part(std::string& out, N value) {
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out.append(buffer, end);
}

/// The parts one after the other (append_part), e.g. text(" (feature ", f, ")").
template <class... Parts>
[[nodiscard]] std::string text(const Parts&... parts) {
  std::string out;
  (append_part(out, parts), ...);
  return out;
}

/// The text of an error: "<where>: " and the parts (append_part). Built only when a check fails.
template <class... Parts>
[[nodiscard]] std::string message(const Where& where, const Parts&... parts) {
  std::string out = where.str();
  out += ": ";
  (append_part(out, parts), ...);
  return out;
}

/// Throws ValueError naming the value unless `mode` is one of LogitsMode's enumerators (a value
/// cast from an integer), before a logits call writes anything.
inline void check_logits_mode(const Where& where, LogitsMode mode) {
  if (mode == LogitsMode::exact || mode == LogitsMode::quantized_hidden) [[likely]] {
    return;
  }
  const auto v = static_cast<unsigned>(mode);
  throw ValueError(
      message(where, "mode ", v, " is not a LogitsMode (exact = 0, quantized_hidden = 1)"),
      static_cast<double>(v));
}

/// "entry" or "entries", for a count of `n` in a message.
[[nodiscard]] constexpr const char* entries(Index n) noexcept {
  return n == 1 ? " entry" : " entries";
}

/// Up to `k` of `names`, the closest to `name` first (Levenshtein distance, then order), for a
/// message about a name that is not there ("did you mean ...").
[[nodiscard]] inline std::vector<std::string_view> closest_names(
    std::string_view name, const std::vector<std::string_view>& names, std::size_t k = 3) {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // (distance, index)
  std::vector<std::size_t> row(name.size() + 1);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string_view other = names[i];
    for (std::size_t a = 0; a <= name.size(); ++a) row[a] = a;
    for (std::size_t b = 1; b <= other.size(); ++b) {
      std::size_t diagonal = row[0];
      row[0] = b;
      for (std::size_t a = 1; a <= name.size(); ++a) {
        const std::size_t up = row[a];
        row[a] = std::min(
            {row[a] + 1, row[a - 1] + 1, diagonal + (name[a - 1] == other[b - 1] ? 0u : 1u)});
        diagonal = up;
      }
    }
    ranked.emplace_back(row[name.size()], i);
  }
  if (ranked.empty()) return {};
  const std::size_t keep = std::min(k, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep),
                    ranked.end());
  std::vector<std::string_view> out;
  for (std::size_t j = 0; j < keep; ++j) out.push_back(names[ranked[j].second]);
  return out;
}

/// "; the closest it has: 'a', 'b', 'c'" for a message about `name`, missing among `names` (empty
/// when there are none).
[[nodiscard]] inline std::string closest_hint(std::string_view name,
                                              const std::vector<std::string_view>& names) {
  std::string out;
  for (const std::string_view n : closest_names(name, names)) {
    out += out.empty() ? "; the closest it has: '" : ", '";
    out += n;
    out += '\'';
  }
  return out;
}

/// Index of the first non-finite value among data[0, n), or n when all are finite.
template <class T>
[[nodiscard]] std::size_t first_non_finite(const T* data, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) return i;
  }
  return n;
}

/// Quotes a token for an error message, escaping control and non-ASCII bytes as \xNN.
[[nodiscard]] inline std::string quoted(std::string_view s, std::size_t max_len = 64) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7F || c == '\'') {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "...";
  out += "'";
  return out;
}

// ---- ids ----------------------------------------------------------------------------------------

// The message of a call given ids of the wrong type (a static_assert needs a string literal).
#define EMBER_DETAIL_ID_RANGE_MESSAGE                                                         \
  "ember: token ids must be a contiguous range of integers (e.g. std::vector<std::int64_t>, " \
  "std::span<const std::int32_t>, std::vector<std::size_t>); floating-point, bool and "       \
  "character ids are rejected"

/// The one way ember accepts ids: calls f(span) with `ids` viewed as a span of its integer type,
/// or fails to compile with ember's id message for anything that is not an IdRange.
template <class R, class F>
decltype(auto) with_ids(const R& ids, F&& f) {
  if constexpr (IdRange<R>) {
    return f(as_id_span(ids));
  } else {
    static_assert(always_false<R>, EMBER_DETAIL_ID_RANGE_MESSAGE);
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
void check_int64_range(std::span<const I> values, const Where& where, const char* name) {
  if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t)) {
    constexpr auto max = static_cast<I>(std::numeric_limits<std::int64_t>::max());
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (values[k] > max) [[unlikely]] {
        throw ValueError(message(where, name, "[", k, "] = ", values[k],
                                 " is above 2^63 - 1, the largest index"),
                         static_cast<double>(values[k]));
      }
    }
  }
}

/// Where checked ids sit in the caller's input, for the message and position() of a bad one: ids
/// that start at `first_position` of a longer input, one feature's ids over one of several tables
/// (TableBatchedBags); feature and table -1 when there is only one.
struct IdOrigin {
  Index first_position = 0;
  Index feature = -1;
  Index table = -1;
};

/// Throws IndexError for the first id outside [0, bound): "<where>: id <v> at position <p>
/// [(feature f, table t)] is outside [0, <bound>)". One comparison pair per id, for every id type
/// (an unsigned id above INT64_MAX is outside like any id >= bound; the message has its exact
/// value, value() is INT64_MAX).
template <TokenIdType Id>
void check_ids(std::span<const Id> ids, Index bound, const Where& where, IdOrigin origin = {}) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const Id id = ids[static_cast<std::size_t>(i)];
    if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, bound)) [[unlikely]] {
      const Index position = origin.first_position + i;
      const std::string of =
          origin.feature < 0 ? ""
                             : text(" (feature ", origin.feature, ", table ", origin.table, ")");
      throw IndexError(
          message(where, "id ", id, " at position ", position, of, " is outside [0, ", bound, ")"),
          position, int64_field(id), bound);
    }
  }
}

/// Throws IndexError "<where>: <name> <value> is outside [0, <bound>)" unless the single index
/// argument `value` is in [0, bound) (position -1: an argument, not an element of an input).
inline void check_index(const Where& where, const char* name, Index value, Index bound) {
  if (value < 0 || value >= bound) [[unlikely]] {
    throw IndexError(message(where, name, " ", value, " is outside [0, ", bound, ")"), -1, value,
                     bound);
  }
}

/// Throws IndexError unless the single row index r is in [0, bound): check_index of "row".
inline void check_row(Index r, Index bound, const Where& where) {
  check_index(where, "row", r, bound);
}

// ---- shapes and sizes ---------------------------------------------------------------------------

/// Throws ShapeError unless `actual == expected` for dimension `dim` (0 rows, 1 cols) of the
/// matrix `name`: "<where>: <name> has <actual> rows, expected <expected_what> = <expected>".
inline void check_extent(const Where& where, const char* name, int dim, Index expected,
                         Index actual, const char* expected_what) {
  if (actual != expected) [[unlikely]] {
    throw ShapeError(message(where, name, " has ", actual, dim == 0 ? " rows" : " columns",
                             ", expected ", expected_what, " = ", expected),
                     dim, expected, actual);
  }
}

/// Throws ShapeError unless the matrix `name` is rows x cols: check_extent of its rows, then of
/// its columns (`rows_what`, `cols_what` name the expected extents in the message).
template <class M>
void check_dims(const Where& where, const char* name, const M& m, Index rows, const char* rows_what,
                Index cols, const char* cols_what) {
  check_extent(where, name, 0, rows, m.rows(), rows_what);
  check_extent(where, name, 1, cols, m.cols(), cols_what);
}

/// Throws ShapeError unless the list `name` (ids, weights, optimizers, gradients) has `expected`
/// entries: "<where>: <name> has <actual> entries, expected <expected_what> = <expected>"
/// (dimension 0).
inline void check_entries(const Where& where, const char* name, Index expected, Index actual,
                          const char* expected_what) {
  if (actual != expected) [[unlikely]] {
    throw ShapeError(message(where, name, " has ", actual, entries(actual), ", expected ",
                             expected_what, " = ", expected),
                     0, expected, actual);
  }
}

/// Throws ShapeError unless the size argument `value` is strictly positive.
inline void check_positive_size(const Where& where, const char* name, Index value) {
  if (value <= 0) [[unlikely]] {
    throw ShapeError(message(where, name, " must be positive, got ", value), -1, 1, value);
  }
}

/// Throws ShapeError unless a table's sizes are positive: check_positive_size of v (`v_name`),
/// then of d (`d_name`).
inline void check_sizes(const Where& where, Index v, Index d, const char* v_name = "vocab_size",
                        const char* d_name = "d_model") {
  check_positive_size(where, v_name, v);
  check_positive_size(where, d_name, d);
}

/// Throws ShapeError unless the size argument `value` is >= 0 (`zero_means` says what 0 asks for).
inline void check_non_negative_size(const Where& where, const char* name, Index value,
                                    const char* zero_means) {
  if (value < 0) [[unlikely]] {
    throw ShapeError(message(where, name, " must be >= 0 (0: ", zero_means, "), got ", value), -1,
                     0, value);
  }
}

/// Throws ShapeError unless n is a multiple of seq_len (> 0): a batch of whole sequences.
inline void check_whole_sequences(const Where& where, const char* what, Index n, Index seq_len) {
  if (n % seq_len != 0) [[unlikely]] {
    throw ShapeError(message(where, n, " ", what, " not a multiple of seq_len = ", seq_len), 0,
                     (n / seq_len + 1) * seq_len, n);
  }
}

/// Throws unless seq_len > 0, offset >= 0 and offset + seq_len <= max_len: the position rows a
/// batch of sequences uses exist.
inline void check_positions(const Where& where, Index seq_len, Index offset, Index max_len) {
  check_positive_size(where, "seq_len", seq_len);
  if (offset < 0) {
    throw IndexError(message(where, "offset ", offset, " is outside [0, ", max_len, ")"), -1,
                     offset, max_len);
  }
  if (seq_len > max_len - offset) {
    const Index last = offset + seq_len - 1;
    throw IndexError(message(where, "position ", last, " (offset ", offset, " + seq_len ", seq_len,
                             " - 1) is outside [0, ", max_len, ") = max_len"),
                     seq_len - 1, last, max_len);
  }
}

/// Throws ShapeError unless the output of an n-id lookup is n x d.
inline void check_lookup_out(const Where& where, Index n, Index d, Index out_rows, Index out_cols) {
  check_extent(where, "out", 0, n, out_rows, "the number of ids");
  check_extent(where, "out", 1, d, out_cols, "d_model");
}

/// Throws ShapeError unless the grad_out of an n-id backward is n x d (checked before the
/// gradient's own checks, so a wrong width never binds an empty SparseRowGrad to it).
inline void check_backward_grad_out(const Where& where, Index n, Index d, Index grad_rows,
                                    Index grad_cols) {
  check_extent(where, "grad_out", 0, n, grad_rows, "the number of ids");
  check_extent(where, "grad_out", 1, d, grad_cols, "d_model");
}

/// The checks of a lookup with positions added: positions[max_len, d] cover seq_len rows from
/// offset, out is n x d and n is a multiple of seq_len.
inline void check_fused(const Where& where, Index n, Index d, Index pos_rows, Index pos_cols,
                        Index out_rows, Index out_cols, Index seq_len, Index offset) {
  check_positions(where, seq_len, offset, pos_rows);
  check_extent(where, "positions", 1, d, pos_cols, "d_model");
  check_lookup_out(where, n, d, out_rows, out_cols);
  check_whole_sequences(where, "ids are", n, seq_len);
}

/// The checks of tied logits over a V x d table: hidden has d columns, out is hidden.rows() x V.
inline void check_logits(const Where& where, Index v, Index d, Index hidden_rows, Index hidden_cols,
                         Index out_rows, Index out_cols) {
  check_extent(where, "hidden", 1, d, hidden_cols, "d_model");
  check_extent(where, "out", 0, hidden_rows, out_rows, "hidden's rows");
  check_extent(where, "out", 1, v, out_cols, "vocab_size");
}

/// The memory of a row-major view: `rows` rows of `cols` values of T, `stride` values apart, as
/// byte addresses (integers, so that views of unrelated arrays compare). Empty when it holds no
/// value.
struct MemoryRange {
  std::uintptr_t first = 0;         ///< the first byte of row 0
  std::uintptr_t row_bytes = 0;     ///< bytes of one row
  std::uintptr_t stride_bytes = 0;  ///< from one row to the next
  Index rows = 0;

  template <class T>
  [[nodiscard]] static MemoryRange of(const T* data, Index rows, Index cols,
                                      Index stride) noexcept {
    if (data == nullptr || rows <= 0 || cols <= 0) return {};
    return {reinterpret_cast<std::uintptr_t>(data), static_cast<std::uintptr_t>(cols) * sizeof(T),
            static_cast<std::uintptr_t>(stride) * sizeof(T), rows};
  }
  /// The memory of a row-major Eigen matrix, Map, Ref or block.
  template <class M>
  [[nodiscard]] static MemoryRange of_matrix(const M& m) noexcept {
    return of(m.data(), m.rows(), m.cols(), m.outerStride());
  }
  /// One past the last byte of the last row.
  [[nodiscard]] std::uintptr_t last() const noexcept {
    return rows == 0 ? first
                     : first + static_cast<std::uintptr_t>(rows - 1) * stride_bytes + row_bytes;
  }
  /// True when the two views share a byte. Views whose spans interleave without sharing one (two
  /// column blocks of one matrix) do not overlap: their rows, both in address order, are walked
  /// side by side, which happens only when the spans meet.
  [[nodiscard]] bool overlaps(const MemoryRange& o) const noexcept {
    if (rows == 0 || o.rows == 0 || !(first < o.last() && o.first < last())) return false;
    Index i = 0;
    Index j = 0;
    while (i < rows && j < o.rows) {
      const std::uintptr_t a = first + static_cast<std::uintptr_t>(i) * stride_bytes;
      const std::uintptr_t b = o.first + static_cast<std::uintptr_t>(j) * o.stride_bytes;
      if (a + row_bytes <= b) {
        ++i;
      } else if (b + o.row_bytes <= a) {
        ++j;
      } else {
        return true;
      }
    }
    return false;
  }
};

/// Throws OverlapError "<where>: <output> overlaps <input> in memory (...)" when the two ranges
/// share a byte: a kernel that writes `output` while it reads `input` needs them apart.
inline void check_no_overlap(const Where& where, const char* output, const MemoryRange& out,
                             const char* input, const MemoryRange& in) {
  if (out.overlaps(in)) [[unlikely]] {
    throw OverlapError(message(where, output, " overlaps ", input, " in memory (", output,
                               " needs its own buffer)"),
                       output, input);
  }
}

/// The output of the tied logits needs its own memory: `out` overlaps neither hidden nor the table
/// (named `table_name`) nor its float master (`master`, empty when there is none). Throws
/// OverlapError naming the pair.
template <class H, class O>
void check_logits_apart(const Where& where, const H& hidden, const O& out, const char* table_name,
                        const MemoryRange& table, const MemoryRange& master = {}) {
  const MemoryRange o = MemoryRange::of_matrix(out);
  check_no_overlap(where, "out", o, "hidden", MemoryRange::of_matrix(hidden));
  check_no_overlap(where, "out", o, table_name, table);
  check_no_overlap(where, "out", o, "the float master", master);
}

/// The outputs of the tied logits' backward need their own memory: grad_hidden and grad_weight
/// overlap neither each other nor hidden, grad_logits, the table (named `table_name`) or its
/// float master (`master`, empty when there is none). Throws OverlapError naming the pair.
template <class H, class GL, class GH, class GW>
void check_logits_backward_apart(const Where& where, const H& hidden, const GL& grad_logits,
                                 const GH& grad_hidden, const GW& grad_weight,
                                 const char* table_name, const MemoryRange& table,
                                 const MemoryRange& master = {}) {
  const MemoryRange gh = MemoryRange::of_matrix(grad_hidden);
  const MemoryRange gw = MemoryRange::of_matrix(grad_weight);
  check_no_overlap(where, "grad_hidden", gh, "grad_weight", gw);
  const MemoryRange h = MemoryRange::of_matrix(hidden);
  const MemoryRange gl = MemoryRange::of_matrix(grad_logits);
  for (const auto& [name, out] : {std::pair{"grad_hidden", gh}, std::pair{"grad_weight", gw}}) {
    check_no_overlap(where, name, out, "hidden", h);
    check_no_overlap(where, name, out, "grad_logits", gl);
    check_no_overlap(where, name, out, table_name, table);
    check_no_overlap(where, name, out, "the float master", master);
  }
}

/// The checks of the tied logits' backward over a V x d table: hidden[n, d], grad_logits[n, V],
/// grad_hidden[n, d], grad_weight[V, d].
template <class H, class GL, class GH, class GW>
void check_logits_backward(const Where& where, Index v, Index d, const H& hidden,
                           const GL& grad_logits, const GH& grad_hidden, const GW& grad_weight) {
  const Index n = hidden.rows();
  check_extent(where, "hidden", 1, d, hidden.cols(), "d_model");
  check_dims(where, "grad_logits", grad_logits, n, "hidden's rows", v, "vocab_size");
  check_dims(where, "grad_hidden", grad_hidden, n, "hidden's rows", d, "d_model");
  check_dims(where, "grad_weight", grad_weight, v, "vocab_size", d, "d_model");
}

// ---- scalar arguments ---------------------------------------------------------------------------

/// Throws ValueError "<where>: <name> must be <rule>, got <value>" unless `ok`.
inline void check_scalar(bool ok, const Where& where, const char* name, double value,
                         const char* rule) {
  if (!ok) [[unlikely]] {
    throw ValueError(message(where, name, " must be ", rule, ", got ", value), value);
  }
}

/// Throws ValueError unless `value` is finite and strictly positive.
inline void check_positive_finite(const Where& where, const char* name, double value) {
  check_scalar(std::isfinite(value) && value > 0.0, where, name, value, "finite and positive");
}

/// Throws ValueError unless `value` is finite.
inline void check_finite_value(const Where& where, const char* name, double value) {
  check_scalar(std::isfinite(value), where, name, value, "finite");
}

/// Throws ValueError unless `value` is finite and >= 0.
inline void check_non_negative(const Where& where, const char* name, double value) {
  check_scalar(std::isfinite(value) && value >= 0.0, where, name, value, "finite and >= 0");
}

/// Throws ValueError unless value is in [0, 1).
inline void check_unit_interval(const Where& where, const char* name, double value) {
  check_scalar(value >= 0.0 && value < 1.0, where, name, value, "in [0, 1)");
}

/// The constructor checks of a view over caller memory, in this order: vocab_size and d_model
/// positive (ShapeError), row_stride (-1: `packed`, the units of a packed row) at least `packed`
/// (ShapeError), data not null and aligned to alignof(Unit) (ValueError). Returns the stride.
template <class Unit>
[[nodiscard]] Index checked_view_stride(const Where& where, const Unit* data, Index vocab_size,
                                        Index d_model, Index packed, Index row_stride) {
  check_sizes(where, vocab_size, d_model);
  const Index stride = row_stride == -1 ? packed : row_stride;
  const char* packed_name = packed == d_model ? "d_model" : "the bytes of a row";
  if (stride < 0) {
    throw ShapeError(message(where, "row_stride ", stride,
                             " is negative (the only negative value allowed is -1, meaning ",
                             packed_name, " = ", packed, ")"),
                     -1, packed, stride);
  }
  if (stride < packed) {
    throw ShapeError(
        message(where, "row_stride ", stride, " is smaller than ", packed_name, " = ", packed), -1,
        packed, stride);
  }
  if (data == nullptr) throw ValueError(message(where, "data is null"), 0.0);
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address % alignof(Unit) != 0) {
    throw ValueError(
        message(where, "data address ", address, " is not aligned to ", alignof(Unit), " bytes"),
        static_cast<double>(address % alignof(Unit)));
  }
  return stride;
}

}  // namespace ember::inline EMBER_ISA::detail

#undef EMBER_DETAIL_ID_RANGE_MESSAGE
