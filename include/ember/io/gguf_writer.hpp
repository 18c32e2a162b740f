/// GgufWriter: builds a GGUF (version 3) file from float/double tables and typed metadata, and
/// writes it atomically, quantizing each table exactly as ggml's reference quantizers do.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/ggml_type.hpp"
#include "ember/io/gguf.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// Builds a GGUF (version 3) file from row-major float/double tables and metadata, and writes it
/// atomically.
///
/// Layout, as ggml's gguf_write_to_file and gguf-py's GGUFWriter: header, metadata in the order
/// given, tensor infos in the order added (each 2-D: ne[0] = d, ne[1] = V), padding to the
/// alignment, then each tensor's data in the same order, each padded to the alignment
/// (general.alignment if set, else 32). Tables are quantized as ggml's reference quantizers do,
/// with no importance matrix, so the bytes equal ggml's quantize_row_*_ref output (and the same
/// table written by ggml's quantize without an imatrix). Tables are referenced, not copied: they
/// must outlive save().
///
/// Example:
/// ```cpp
/// ember::io::GgufWriter w;
/// w.metadata("general.architecture", "llama")
///     .metadata("tokenizer.ggml.tokens", vocab.tokens())
///     .add("token_embd.weight", emb.weight(), ember::io::GgmlType::Q4_K);
/// w.save("model.gguf");
/// ```
class GgufWriter {
 public:
  /// Adds the row-major table `table` (V x d, float or double) under `name`, to be stored as
  /// `type` (ne[0] = d, ne[1] = V).
  /// Throws: ValueError for an empty name, one longer than 63 bytes, one already added, or a type
  /// ember does not encode; ShapeError (dimension 1) when d is not a multiple of the type's block
  /// size (e.g. d = 96 for the 256-element K-quants). Nothing is added then.
  template <class Derived>
  GgufWriter& add(const std::string& name, const Eigen::DenseBase<Derived>& table, GgmlType type) {
    using S = typename Derived::Scalar;
    static_assert(Scalar<S>, "GgufWriter::add: the table must hold float or double");
    static_assert(static_cast<bool>(Derived::IsRowMajor) || Derived::ColsAtCompileTime == 1,
                  "GgufWriter::add: the table must be row-major");
    constexpr bool direct = static_cast<bool>(Derived::Flags & Eigen::DirectAccessBit);
    static_assert(direct,
                  "GgufWriter::add: pass a matrix that owns or maps its data (a RowMatrix, a Map, "
                  "a block of one), not an expression such as RowMatrix<float>::Zero(V, d): the "
                  "writer reads the rows at save(), so evaluate the expression into a RowMatrix "
                  "that lives until then");
    if (name.empty() || name.size() > gguf_max_name) {
      throw ValueError(detail::message("GgufWriter::add", "tensor name '", name,
                                       "' is empty or longer than ", gguf_max_name, " bytes"),
                       static_cast<double>(name.size()));
    }
    for (const Entry& e : entries_) {
      if (e.name == name) {
        throw ValueError(
            detail::message("GgufWriter::add", "tensor name '", name, "' is already used"), 0.0);
      }
    }
    if (!ggml_type_decodes(type)) {
      throw ValueError(detail::message("GgufWriter::add", "tensor '", name,
                                       "' cannot be stored as ", to_string(type),
                                       " (ember encodes f32, f16, bf16, q4_0, "
                                       "q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K and q6_K)"),
                       static_cast<double>(static_cast<std::uint32_t>(type)));
    }
    const Index d = table.cols();
    const Index block = ggml_block_size(type);
    if (d % block != 0) {
      throw ShapeError(detail::message("GgufWriter::add", "tensor '", name, "' has ", d,
                                       " columns, not a multiple of ", to_string(type),
                                       "'s block of ", block, " elements"),
                       1, block, d);
    }
    if constexpr (direct) entries_.push_back({name, type, detail::const_table(table)});
    return *this;
  }

  /// A temporary matrix would be gone by save(): refused at compile time (a block or map of a
  /// living table is fine).
  template <class S, int R, int C, int O, int MR, int MC>
  GgufWriter& add(const std::string& name, Eigen::Matrix<S, R, C, O, MR, MC>&& table,
                  GgmlType type) = delete;

  /// Adds a STRING value: anything a std::string_view is made from (a literal too: a
  /// `const char*` does not become a bool).
  template <class S>
  requires std::convertible_to<const S&, std::string_view> GgufWriter& metadata(
      const std::string& key, const S& value) {
    Value v{GgufValueType::STRING, GgufValueType::STRING, 1, {}};
    append_string(v.payload, std::string_view(value));
    return put(key, std::move(v));
  }
  /// Adds a BOOL value.
  GgufWriter& metadata(const std::string& key, bool value) {
    return put(key, Value{GgufValueType::BOOL,
                          GgufValueType::BOOL,
                          1,
                          {static_cast<unsigned char>(value ? 1 : 0)}});
  }
  /// Adds a number: an integer stored with the type of its width and signedness (int -> INT32,
  /// std::uint64_t -> UINT64, ...), a float as FLOAT32, a double as FLOAT64.
  template <class E>
  requires(!std::same_as<E, bool> && (std::is_arithmetic_v<E> || std::is_enum_v<E>))
      GgufWriter& metadata(const std::string& key, E value) {
    constexpr GgufValueType t = number_type<E>();
    Value v{t, t, 1, {}};
    append_scalar(v.payload, value);
    return put(key, std::move(v));
  }
  /// Adds an array of strings (a tokenizer's tokens, say).
  GgufWriter& metadata(const std::string& key, const std::vector<std::string>& values) {
    Value v{GgufValueType::ARRAY, GgufValueType::STRING, values.size(), {}};
    for (const auto& s : values) append_string(v.payload, s);
    return put(key, std::move(v));
  }
  /// Adds an array of numbers (element type as for a single number).
  template <class E>
  requires(std::is_arithmetic_v<E> &&
           !std::same_as<E, bool>) GgufWriter& metadata(const std::string& key,
                                                        const std::vector<E>& values) {
    Value v{GgufValueType::ARRAY, number_type<E>(), values.size(), {}};
    for (const E x : values) append_scalar(v.payload, x);
    return put(key, std::move(v));
  }
  /// Adds an array of bools.
  GgufWriter& metadata(const std::string& key, const std::vector<bool>& values) {
    Value v{GgufValueType::ARRAY, GgufValueType::BOOL, values.size(), {}};
    for (const bool x : values) v.payload.push_back(static_cast<unsigned char>(x ? 1 : 0));
    return put(key, std::move(v));
  }

  /// Writes the file (temporary in the same directory, fsync, rename).
  /// Throws: ValueError naming the tensor, row, column and value of a finite value of a double
  /// table beyond float's range (it would become an infinity; as from_float, checked before
  /// anything is written), or of a NaN or infinite value in a table stored as a block type
  /// (ggml's quantizers have no defined result for them; F32, F16 and BF16 store them as they
  /// are), found while the rows are written; FormatError on I/O failure. `path` is untouched when
  /// it throws (the temporary is removed).
  /// Complexity: O(total elements) quantization, streamed through a buffer of about 1 MB.
  void save(const std::string& path) const {
    const std::uint64_t align = alignment();
    // The magic by value: inserting it from a string_view trips GCC 12's -Wstringop-overflow.
    std::vector<unsigned char> head = {'G', 'G', 'U', 'F'};
    append_scalar(head, gguf_version);
    append_scalar(head, static_cast<std::uint64_t>(entries_.size()));
    append_scalar(head, static_cast<std::uint64_t>(values_.size()));
    for (const auto& [key, v] : values_) {
      append_string(head, key);
      append_scalar(head, static_cast<std::uint32_t>(v.type));
      if (v.type == GgufValueType::ARRAY) {
        append_scalar(head, static_cast<std::uint32_t>(v.element_type));
        append_scalar(head, static_cast<std::uint64_t>(v.count));
      }
      head.insert(head.end(), v.payload.begin(), v.payload.end());
    }
    std::uint64_t offset = 0;
    for (const Entry& e : entries_) {
      append_string(head, e.name);
      append_scalar(head, std::uint32_t{2});
      append_scalar(head, static_cast<std::uint64_t>(e.cols()));
      append_scalar(head, static_cast<std::uint64_t>(e.rows()));
      append_scalar(head, static_cast<std::uint32_t>(e.type));
      append_scalar(head, offset);
      offset += padded(bytes_of(e), align);
    }
    head.resize(static_cast<std::size_t>(padded(head.size(), align)), 0);

    for (const Entry& e : entries_) check_float_range(e);
    detail::AtomicFile out(path);
    out.write(head.data(), head.size());
    std::vector<float> row;
    std::vector<std::uint8_t> buf;
    const std::vector<unsigned char> zeros(static_cast<std::size_t>(align), 0);
    for (const Entry& e : entries_) {
      const Index rows = e.rows();
      const Index cols = e.cols();
      const bool blocks = ggml_block_size(e.type) > 1;  // F32, F16, BF16 store any value
      const auto rb = static_cast<std::size_t>(ggml_row_size(e.type, cols));
      const std::size_t rows_per_chunk =
          rb == 0 ? 1 : std::max<std::size_t>(1, (std::size_t{1} << 20) / rb);
      buf.resize(rows_per_chunk * rb);
      row.resize(static_cast<std::size_t>(cols));
      for (Index r0 = 0; r0 < rows; r0 += static_cast<Index>(rows_per_chunk)) {
        const Index r1 = std::min(rows, r0 + static_cast<Index>(rows_per_chunk));
        for (Index r = r0; r < r1; ++r) {
          const float* src = row_as_float(e, r, row);
          if (blocks) check_finite_row(e, r, src);
          detail::ggml::quantize(e.type, src, cols,
                                 buf.data() + static_cast<std::size_t>(r - r0) * rb);
        }
        out.write(buf.data(), static_cast<std::size_t>(r1 - r0) * rb);
      }
      const std::uint64_t bytes = bytes_of(e);
      out.write(zeros.data(), static_cast<std::size_t>(padded(bytes, align) - bytes));
    }
    out.commit();
  }

  /// The alignment save() will use: general.alignment if it was set, else 32.
  [[nodiscard]] std::uint64_t alignment() const {
    for (const auto& [key, v] : values_) {
      if (key == gguf_alignment_key) {
        return detail::load_le<std::uint32_t>(v.payload.data());
      }
    }
    return gguf_default_alignment;
  }

 private:
  struct Entry {
    std::string name;
    GgmlType type;
    std::variant<detail::ConstTableRef<float>, detail::ConstTableRef<double>> table;
    [[nodiscard]] Index rows() const {
      return std::visit([](const auto& t) { return t.rows; }, table);
    }
    [[nodiscard]] Index cols() const {
      return std::visit([](const auto& t) { return t.cols; }, table);
    }
  };
  struct Value {
    GgufValueType type;
    GgufValueType element_type;
    std::size_t count;
    std::vector<unsigned char> payload;  // the value's bytes as written (after the type fields)
  };

  template <class I>
  static constexpr GgufValueType number_type() {
    constexpr bool is_signed = std::is_signed_v<I>;  // named: cppcheck misparses it inline
    static_assert(!std::is_enum_v<I>, "GgufWriter::metadata: an enum has no GGUF type; cast it");
    if constexpr (std::is_floating_point_v<I>) {
      static_assert(sizeof(I) <= 8, "GgufWriter::metadata: floats and doubles, no long double");
      return sizeof(I) == 4 ? GgufValueType::FLOAT32 : GgufValueType::FLOAT64;
    } else if constexpr (sizeof(I) == 1) {
      return is_signed ? GgufValueType::INT8 : GgufValueType::UINT8;
    } else if constexpr (sizeof(I) == 2) {
      return is_signed ? GgufValueType::INT16 : GgufValueType::UINT16;
    } else if constexpr (sizeof(I) == 4) {
      return is_signed ? GgufValueType::INT32 : GgufValueType::UINT32;
    } else {
      static_assert(sizeof(I) == 8, "GgufWriter::metadata: integers of 1, 2, 4 or 8 bytes");
      return is_signed ? GgufValueType::INT64 : GgufValueType::UINT64;
    }
  }

  template <class V>
  static void append_scalar(std::vector<unsigned char>& out, V v) {
    unsigned char b[sizeof(V)];
    detail::store_value_le(b, v);
    out.insert(out.end(), b, b + sizeof(V));
  }
  static void append_string(std::vector<unsigned char>& out, std::string_view s) {
    append_scalar(out, static_cast<std::uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  static std::uint64_t padded(std::uint64_t n, std::uint64_t align) {
    return (n + align - 1) / align * align;
  }
  static std::uint64_t bytes_of(const Entry& e) {
    return static_cast<std::uint64_t>(e.rows()) *
           static_cast<std::uint64_t>(ggml_row_size(e.type, e.cols()));
  }

  GgufWriter& put(const std::string& key, Value v) {
    if (key.empty()) throw ValueError("GgufWriter::metadata: empty key", 0.0);
    for (const auto& kv : values_) {
      if (kv.first == key) {
        throw ValueError(detail::message("GgufWriter::metadata", "key '", key, "' is already set"),
                         0.0);
      }
    }
    if (key == gguf_alignment_key) {
      std::uint32_t a = 0;
      if (v.type == GgufValueType::UINT32) a = detail::load_le<std::uint32_t>(v.payload.data());
      if (v.type != GgufValueType::UINT32 || a == 0 || (a & (a - 1)) != 0) {
        throw ValueError(
            "GgufWriter::metadata: general.alignment must be a std::uint32_t power of two",
            static_cast<double>(a));
      }
    }
    values_.emplace_back(key, std::move(v));
    return *this;
  }

  /// Row r of e's table in float: the row itself, or a float copy of a double row in buf.
  static const float* row_as_float(const Entry& e, Index r, std::vector<float>& buf) {
    if (const auto* f = std::get_if<detail::ConstTableRef<float>>(&e.table)) {
      return f->row(r);
    }
    const double* src = std::get<detail::ConstTableRef<double>>(e.table).row(r);
    for (std::size_t c = 0; c < buf.size(); ++c) buf[c] = static_cast<float>(src[c]);
    return buf.data();
  }

  /// Throws the ValueError of save() when a double table holds a finite value beyond float's range.
  static void check_float_range(const Entry& e) {
    const auto* t = std::get_if<detail::ConstTableRef<double>>(&e.table);
    if (t == nullptr) return;
    constexpr auto limit = static_cast<double>(std::numeric_limits<float>::max());
    for (Index r = 0; r < t->rows; ++r) {
      for (Index c = 0; c < t->cols; ++c) {
        const double x = t->row(r)[c];
        if (!std::isfinite(x) || std::abs(x) <= limit) continue;
        throw ValueError(
            detail::message("GgufWriter::save", "tensor '", e.name, "' has value ",
                            std::to_string(x), " at row ", r, ", column ", c,
                            ", which overflows float (largest ", std::to_string(limit), ")"),
            x);
      }
    }
  }

  /// Throws the ValueError of save() when row r (in float) of a block-type tensor holds a NaN or
  /// an infinity, which ggml's quantizers have no defined result for.
  static void check_finite_row(const Entry& e, Index r, const float* row) {
    const auto cols = static_cast<std::size_t>(e.cols());
    const std::size_t c = detail::first_non_finite(row, cols);
    if (c == cols) return;
    throw ValueError(
        detail::message("GgufWriter::save", "tensor '", e.name, "' has a non-finite value at row ",
                        r, ", column ", c, ", which ", to_string(e.type), " cannot store"),
        static_cast<double>(row[c]));
  }

  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, Value>> values_;
};

}  // namespace ember::inline EMBER_ISA::io
