/// NumPy .npy files (format versions 1.0, 2.0, 3.0): read 2-D float16/32/64 arrays of either
/// byte order and either memory order into RowMatrix<float|double>; write them atomically.
// SPDX-License-Identifier: MIT
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/half.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/mapped_table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// Element types ember reads from and writes to .npy files: IEEE binary16, binary32, binary64.
enum class NpyDtype { f2, f4, f8 };

/// Size in bytes of one element of `dtype`.
[[nodiscard]] constexpr std::size_t npy_itemsize(NpyDtype dtype) noexcept {
  return dtype == NpyDtype::f2 ? 2 : dtype == NpyDtype::f4 ? 4 : 8;
}

/// What a .npy header says, plus where the data starts.
struct NpyHeader {
  int major_version = 1;  ///< 1, 2 or 3
  int minor_version = 0;  ///< 0
  NpyDtype dtype = NpyDtype::f4;
  bool little_endian = true;    ///< '<' (true) or '>' (false) in the descr
  bool fortran_order = false;   ///< true: column-major data
  Index rows = 0;               ///< shape[0]
  Index cols = 0;               ///< shape[1]
  std::size_t data_offset = 0;  ///< byte offset of the first element (a multiple of 16, or of 64)
};

/// Options of load_npy() and map_npy().
struct NpyLoadOptions {
  /// Accept NaN and infinite values. Off by default: a non-finite value is a FormatError naming
  /// the byte offset, row and column, since it poisons every similarity query it touches.
  bool allow_non_finite = false;
};

/// Options of save_npy().
struct NpySaveOptions {
  /// Stored element type; by default the table's own (float -> f4, double -> f8). f2 rounds to
  /// nearest even (values beyond ±65504 become infinities).
  std::optional<NpyDtype> dtype;
};

}  // namespace ember::inline EMBER_ISA::io

namespace ember::inline EMBER_ISA::detail {

inline constexpr unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/// Parses a .npy header out of `bytes[0, size)`; `path` only names the file in errors.
inline io::NpyHeader parse_npy_header(const unsigned char* bytes, std::size_t size,
                                      const std::string& path) {
  if (size == 0) fail_at_byte(path, 0, "empty file, expected a .npy magic string");
  if (size < 10)
    fail_at_byte(path, size, "truncated .npy preamble (", size, " bytes, need at least 10)");
  if (std::memcmp(bytes, npy_magic, 6) != 0) {
    fail_at_byte(path, 0, "not a .npy file: wrong magic (expected \\x93NUMPY)");
  }
  io::NpyHeader h;
  h.major_version = bytes[6];
  h.minor_version = bytes[7];
  if (h.major_version < 1 || h.major_version > 3 || h.minor_version != 0) {
    fail_at_byte(path, 6, "unsupported .npy format version ", h.major_version, ".", h.minor_version,
                 " (ember reads 1.0, 2.0, 3.0)");
  }
  std::size_t prefix = 10;
  std::uint64_t header_len = load_le<std::uint16_t>(bytes + 8);
  if (h.major_version >= 2) {
    prefix = 12;
    if (size < 12) fail_at_byte(path, size, "truncated .npy preamble (need 12 bytes)");
    header_len = load_le<std::uint32_t>(bytes + 8);
  }
  if (header_len > size - prefix) {
    fail_at_byte(path, 8, "header length ", header_len, " runs past the end of the ", size,
                 "-byte file");
  }
  h.data_offset = prefix + static_cast<std::size_t>(header_len);
  const std::string_view text(reinterpret_cast<const char*>(bytes + prefix),
                              static_cast<std::size_t>(header_len));

  // A Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
  std::size_t i = 0;
  auto here = [&] { return static_cast<std::uint64_t>(prefix + i); };
  auto bad = [&](const auto&... what) { fail_at_byte(path, here(), "bad .npy header: ", what...); };
  auto skip_ws = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
  };
  // Skips spaces, then takes `c` if it comes next.
  auto take = [&](char c) {
    skip_ws();
    if (i >= text.size() || text[i] != c) return false;
    ++i;
    return true;
  };
  auto expect = [&](char c) {
    if (!take(c)) bad("expected '", c, "'");
  };
  auto parse_string = [&]() -> std::string_view {
    skip_ws();
    if (i >= text.size() || (text[i] != '\'' && text[i] != '"')) bad("expected a quoted string");
    const char q = text[i++];
    const std::size_t start = i;
    while (i < text.size() && text[i] != q) ++i;
    if (i >= text.size()) bad("unterminated string");
    return text.substr(start, i++ - start);
  };
  bool have_descr = false, have_order = false, have_shape = false;
  std::vector<std::uint64_t> shape;
  expect('{');
  while (!take('}')) {
    const std::size_t key_pos = i;
    const std::string_view key = parse_string();
    expect(':');
    skip_ws();
    if (key == "descr") {
      const std::size_t pos = i;
      const std::string_view d = parse_string();
      if (d.size() != 3 || (d[0] != '<' && d[0] != '>') || d[1] != 'f' ||
          (d[2] != '2' && d[2] != '4' && d[2] != '8')) {
        i = pos;
        bad("unsupported dtype '", d, "' (ember reads float arrays: <f2 <f4 <f8 >f2 >f4 >f8)");
      }
      h.little_endian = d[0] == '<';
      h.dtype = d[2] == '2' ? io::NpyDtype::f2 : d[2] == '4' ? io::NpyDtype::f4 : io::NpyDtype::f8;
      have_descr = true;
    } else if (key == "fortran_order") {
      h.fortran_order = text.substr(i, 4) == "True";
      if (!h.fortran_order && text.substr(i, 5) != "False") {
        bad("fortran_order must be True or False");
      }
      i += h.fortran_order ? 4 : 5;
      have_order = true;
    } else if (key == "shape") {
      expect('(');
      while (!take(')')) {
        std::uint64_t v = 0;
        const char* first = text.data() + i;
        const auto [ptr, ec] = std::from_chars(first, text.data() + text.size(), v);
        if (ec != std::errc{} || ptr == first) bad("shape entries must be non-negative integers");
        i += static_cast<std::size_t>(ptr - first);
        shape.push_back(v);
        // A Python tuple: each entry ends at a ',' or the ')' ("(2 3)" is not (2, 3)).
        if (!take(',') && (i >= text.size() || text[i] != ')'))
          bad("expected ',' or ')' after a shape entry");
      }
      have_shape = true;
    } else {
      i = key_pos;
      bad("unexpected key '", key, "'");
    }
    take(',');
  }
  if (!have_descr || !have_order || !have_shape) bad("missing descr, fortran_order or shape");
  if (shape.size() != 2) {
    std::string s = "(";
    for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
    fail_at_byte(path, prefix, "expected a 2-D array, got shape ", s,
                 (shape.size() == 1 ? ",)" : ")"));
  }
  const auto count = checked_mul(shape[0], shape[1]);
  const auto bytes_needed = count ? checked_mul(*count, npy_itemsize(h.dtype)) : std::nullopt;
  if (!bytes_needed || shape[0] > static_cast<std::uint64_t>(std::numeric_limits<Index>::max()) ||
      shape[1] > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) {
    fail_at_byte(path, prefix, "shape (", shape[0], ", ", shape[1],
                 ") overflows the size of the data");
  }
  const std::size_t available = size - h.data_offset;
  if (*bytes_needed != available) {
    fail_at_byte(path, h.data_offset, "shape (", shape[0], ", ", shape[1], ") needs ",
                 *bytes_needed, " data bytes but the file has ", available,
                 (*bytes_needed > available ? " (truncated)" : ""));
  }
  h.rows = static_cast<Index>(shape[0]);
  h.cols = static_cast<Index>(shape[1]);
  return h;
}

/// Converts the validated data of `h` into a row-major table (byte swaps, transposes, widens).
template <class T>
RowMatrix<T> npy_convert(const unsigned char* data, const io::NpyHeader& h) {
  RowMatrix<T> out(h.rows, h.cols);
  // An empty table (a legal shape such as (10^12, 0)) has nothing to convert; the loops below
  // would still walk its rows.
  if (out.size() == 0) return out;
  const std::size_t item = npy_itemsize(h.dtype);
  const bool le = h.little_endian;
  const bool same_type = item == sizeof(T);                            // f4 float, f8 double
  if (same_type && !h.fortran_order && le == host_is_little_endian) {  // fast path: one copy
    std::memcpy(out.data(), data, static_cast<std::size_t>(out.size()) * item);
    return out;
  }
  for (Index r = 0; r < h.rows; ++r) {
    for (Index c = 0; c < h.cols; ++c) {
      const Index linear = h.fortran_order ? c * h.rows + r : r * h.cols + c;
      const unsigned char* p = data + static_cast<std::size_t>(linear) * item;
      out(r, c) = load_float<T>(p, item, le);
    }
  }
  return out;
}

/// Throws FormatError at the first non-finite element of the row-major h.rows x h.cols table at
/// `data` (read from .npy layout `h`).
template <class T>
void npy_check_finite(const T* data, const io::NpyHeader& h, const std::string& path) {
  const auto n = static_cast<std::size_t>(h.rows * h.cols);
  const std::size_t k = first_non_finite(data, n);
  if (k == n) return;
  const auto r = static_cast<Index>(k) / h.cols, c = static_cast<Index>(k) % h.cols;
  const Index linear = h.fortran_order ? c * h.rows + r : r * h.cols + c;
  fail_at_byte(path, h.data_offset + static_cast<std::size_t>(linear) * npy_itemsize(h.dtype),
               "non-finite value at row ", r, ", column ", c);
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::io {

/// Reads the header of the .npy file at `path` (the data is validated for size, not read).
/// Throws: FormatError naming the file and byte offset for a missing or unreadable file, wrong
/// magic, unsupported version or dtype, a header length past the end of the file, a shape that is
/// not 2-D or whose byte size overflows, or data that is truncated or has trailing bytes.
[[nodiscard]] inline NpyHeader read_npy_header(const std::string& path) {
  const detail::MappedFile file(path, "io::read_npy_header");
  return detail::parse_npy_header(file.data(), file.size(), path);
}

/// Loads the 2-D float array in the .npy file at `path` as a row-major table[rows, cols]: versions
/// 1.0/2.0/3.0, dtypes <f2 <f4 <f8 >f2 >f4 >f8 (f2 widened exactly, f8 rounded to a float T), C
/// or Fortran order.
/// Throws: FormatError as read_npy_header(), and for a NaN or infinity (unless
/// options.allow_non_finite), naming the value's byte offset, row and column.
/// Complexity: one pass over the file (memory-mapped), O(rows·cols).
template <class T>
[[nodiscard]] RowMatrix<T> load_npy(const std::string& path, const NpyLoadOptions& options = {}) {
  static_assert(Scalar<T>, "ember::io::load_npy<T>: T must be float or double");
  const detail::MappedFile file(path, "io::load_npy");
  const NpyHeader h = detail::parse_npy_header(file.data(), file.size(), path);
  RowMatrix<T> out = detail::npy_convert<T>(file.data() + h.data_offset, h);
  if (!options.allow_non_finite) detail::npy_check_finite(out.data(), h, path);
  return out;
}

/// Memory-maps the .npy file at `path` as a read-only table, without copying when possible.
///
/// Zero-copy (result.zero_copy() == true) when the file holds T in little-endian C order and the
/// data offset is aligned for T (numpy's writer pads headers to 64 bytes); otherwise a converted
/// copy, as load_npy(). The finite check reads every value once (off: options.allow_non_finite).
/// T = Eigen::half maps f2 data (view() is a HalfEmbeddingView) and never converts (see
/// MappedTable); numpy has no bfloat16.
/// Throws: FormatError as load_npy(); for T = Eigen::half, FormatError naming the stored dtype
///         unless it is f2.
template <class T>
[[nodiscard]] MappedTable<T> map_npy(const std::string& path, const NpyLoadOptions& options = {}) {
  static_assert(Scalar<T> || std::is_same_v<T, Eigen::half>,
                "ember::io::map_npy<T>: T must be float, double or Eigen::half (numpy has no "
                "bfloat16)");
  auto file = std::make_shared<const detail::MappedFile>(path, "io::map_npy");
  const NpyHeader h = detail::parse_npy_header(file->data(), file->size(), path);
  const unsigned char* data = file->data() + h.data_offset;
  if constexpr (std::is_same_v<T, Eigen::half>) {
    if (h.dtype != NpyDtype::f2) {
      detail::fail_at_byte(path, h.data_offset, "the data is ",
                           (h.dtype == NpyDtype::f4 ? "f4" : "f8"),
                           ", map_npy<half> needs f2 (a 16-bit map never converts: load_npy "
                           "and round with ReducedEmbedding::from_float instead)");
    }
  }
  const bool same_type = npy_itemsize(h.dtype) == sizeof(T);  // f2 half, f4 float, f8 double
  const bool aligned = reinterpret_cast<std::uintptr_t>(data) % alignof(T) == 0;
  MappedTable<T> t = [&] {
    if (same_type && aligned && !h.fortran_order &&
        h.little_endian == detail::host_is_little_endian) {
      return MappedTable<T>(file, reinterpret_cast<const T*>(data), h.rows, h.cols);
    }
    if constexpr (std::is_same_v<T, Eigen::half>) {  // f2 -> float -> f2 is exact
      return MappedTable<T>(RowMatrix<T>(detail::npy_convert<float>(data, h).template cast<T>()));
    } else {
      return MappedTable<T>(detail::npy_convert<T>(data, h));
    }
  }();
  if (!options.allow_non_finite) detail::npy_check_finite(t.matrix().data(), h, path);
  return t;
}

/// Writes `table` (any Eigen matrix of float or double) to `path` as a version 1.0 .npy file
/// (2.0 if the header would exceed 65535 bytes), little-endian, C order, exactly as numpy.save
/// does (header padded so the data starts at a multiple of 64 bytes). The write is atomic
/// (temporary file, fsync, rename): on failure `path` is untouched.
/// Throws: FormatError naming the path on any I/O failure.
template <class Derived>
void save_npy(const std::string& path, const Eigen::MatrixBase<Derived>& table,
              const NpySaveOptions& options = {}) {
  using S = typename Derived::Scalar;
  static_assert(Scalar<S>, "ember::io::save_npy: the table must hold float or double");
  const NpyDtype dtype =
      options.dtype.value_or(std::is_same_v<S, float> ? NpyDtype::f4 : NpyDtype::f8);
  const char* descr = dtype == NpyDtype::f2 ? "<f2" : dtype == NpyDtype::f4 ? "<f4" : "<f8";
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(table.rows()) + ", " + std::to_string(table.cols()) + "), }";
  // The padded header length must fit 2 bytes in version 1.0, else version 2.0 stores 4.
  const int version = (10 + dict.size() + 1 + 63) / 64 * 64 - 10 > 65535 ? 2 : 1;
  const std::size_t prefix = version == 1 ? 10 : 12;
  const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');

  unsigned char pre[12];
  std::memcpy(pre, detail::npy_magic, 6);
  pre[6] = static_cast<unsigned char>(version);
  pre[7] = 0;
  if (version == 1) {
    detail::store_le<std::uint16_t>(pre + 8, static_cast<std::uint16_t>(dict.size()));
  } else {
    detail::store_le<std::uint32_t>(pre + 8, static_cast<std::uint32_t>(dict.size()));
  }
  detail::AtomicFile out(path);
  out.write(pre, prefix);
  out.write(dict);
  const std::size_t item = npy_itemsize(dtype);
  std::vector<unsigned char> row(static_cast<std::size_t>(table.cols()) * item);
  for (Index r = 0; r < table.rows(); ++r) {
    for (Index c = 0; c < table.cols(); ++c) {
      detail::store_float_le(row.data() + static_cast<std::size_t>(c) * item, item, table(r, c));
    }
    out.write(row.data(), row.size());
  }
  out.commit();
}

}  // namespace ember::inline EMBER_ISA::io
