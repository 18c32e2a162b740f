/// safetensors files: validated reading of F32/F64/F16/BF16 tables by tensor name (owning or
/// zero-copy memory-mapped) and of integer arrays, and atomic writing with an 8-byte aligned header
/// and tied-weight aliases. Needs nlohmann/json: link the CMake target ember::io.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/half.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/mapped_table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {
struct SafetensorsAccess;
}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::io {

/// The dtypes of the safetensors specification. Any may appear in a file ember opens; only F16,
/// BF16, F32 and F64 can be loaded or saved as tables.
enum class SafetensorsDtype {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

/// The spec's name of `dtype` ("F32", "BF16", ...).
[[nodiscard]] constexpr std::string_view to_string(SafetensorsDtype dtype) noexcept {
  constexpr std::string_view names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                        "I16",  "U16", "F16", "BF16",    "I32",
                                        "U32",  "F32", "F64", "I64",     "U64"};
  return names[static_cast<int>(dtype)];
}

/// Size in bytes of one element of `dtype`.
[[nodiscard]] constexpr std::size_t dtype_size(SafetensorsDtype dtype) noexcept {
  constexpr std::size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
  return sizes[static_cast<int>(dtype)];
}

/// The dtype that stores values of type V (std::uint8_t ... std::int64_t, float, double), for
/// SafetensorsWriter::add_array and SafetensorsFile::load_array.
template <class V>
[[nodiscard]] constexpr SafetensorsDtype dtype_of() noexcept {
  // The types in the order of SafetensorsDtype's values (void where no C++ type is stored).
  constexpr int i = detail::type_index<V, void, std::uint8_t, std::int8_t, void, void, std::int16_t,
                                       std::uint16_t, void, void, std::int32_t, std::uint32_t,
                                       float, double, std::int64_t, std::uint64_t>;
  static_assert(i >= 0, "dtype_of<V>: V has no safetensors dtype");
  return static_cast<SafetensorsDtype>(i);
}

/// One tensor entry of a safetensors header. Offsets are relative to the start of the data
/// section, which begins at byte 8 + header length of the file.
struct SafetensorsTensorInfo {
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  ///< data_offsets[0]
  std::uint64_t end = 0;    ///< data_offsets[1]
};

/// Options of the safetensors loaders.
struct SafetensorsLoadOptions {
  /// Accept NaN and infinite values (by default a FormatError naming the byte offset, row and
  /// column; the check reads every value once).
  bool allow_non_finite = false;
};

/// Largest header ember accepts, as the reference implementation: 100 MB.
inline constexpr std::uint64_t safetensors_max_header_size = 100'000'000;

/// Prefix of the __metadata__ keys that record tied-weight aliases: "ember.alias.<name>" holds
/// the name of the stored tensor that <name> shares.
inline constexpr std::string_view safetensors_alias_prefix = "ember.alias.";

/// An open, validated safetensors file, memory-mapped read-only.
///
/// Opening checks everything the specification requires before any tensor is read: the header
/// length (at most 100 MB, inside the file), a JSON object of tensors (+ an optional
/// "__metadata__" string map) starting with '{', known dtypes, shapes whose byte size does not
/// overflow and equals end - begin, offsets that tile the data section exactly, and aliases that
/// name a stored tensor.
///
/// Example:
/// ```cpp
/// ember::io::SafetensorsFile f("gpt2/model.safetensors");
/// ember::RowMatrix<float> wte = f.load<float>("wte.weight");      // 50257 x 768, owning
/// ember::io::MappedTable<float> view = f.map<float>("wte.weight"); // zero-copy if F32 + aligned
/// ```
class SafetensorsFile {
 public:
  /// Opens and validates `path`.
  /// Throws: FormatError naming the file and the byte offset for any violation listed above, an
  /// unreadable or empty file, or JSON that does not parse (offset of the bad character).
  explicit SafetensorsFile(std::string path)
      : SafetensorsFile(std::move(path), "io::SafetensorsFile") {}

  /// The path the file was opened with.
  [[nodiscard]] const std::string& path() const noexcept { return file_->path(); }
  /// Names of the stored tensors, sorted.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, info] : tensors_) out.push_back(name);
    return out;
  }
  /// Tied-weight aliases (alias name -> stored tensor name).
  [[nodiscard]] const std::map<std::string, std::string>& aliases() const noexcept {
    return aliases_;
  }
  /// The "__metadata__" map (empty when absent), alias entries included.
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return metadata_;
  }
  /// True when `name` is a stored tensor or an alias of one.
  [[nodiscard]] bool contains(const std::string& name) const {
    return tensors_.count(name) != 0 || aliases_.count(name) != 0;
  }
  /// The stored tensor `name` refers to: itself, or its alias target.
  /// Throws: KeyError naming `name`, the file and the closest names it has when neither exists.
  [[nodiscard]] const std::string& resolve(const std::string& name) const {
    if (const auto it = tensors_.find(name); it != tensors_.end()) return it->first;
    if (const auto it = aliases_.find(name); it != aliases_.end()) return it->second;
    std::vector<std::string_view> have;
    for (const auto& t : tensors_) have.push_back(t.first);
    for (const auto& a : aliases_) have.push_back(a.first);
    throw KeyError(detail::text("SafetensorsFile: no tensor '", name, "' in ", path(),
                                detail::closest_hint(name, have)),
                   name);
  }
  /// Header entry of tensor `name` (aliases resolved). Throws: KeyError as resolve().
  [[nodiscard]] const SafetensorsTensorInfo& info(const std::string& name) const {
    return tensors_.at(resolve(name));
  }
  /// Byte offset of the data section (8 + header length).
  [[nodiscard]] std::size_t data_offset() const noexcept { return data_offset_; }

  /// Loads tensor `name` (aliases resolved) as an owning table[V, d], converting F16/BF16/F32/F64
  /// to T (F16/BF16 -> float is exact; F64 -> float rounds to nearest).
  /// Throws: KeyError if there is no such tensor; FormatError if it is not 2-D, its dtype is not a
  /// float type, or (by default) it holds NaN/inf.
  /// Complexity: O(V·d) conversion from the mapped file.
  template <class T>
  [[nodiscard]] RowMatrix<T> load(const std::string& name,
                                  const SafetensorsLoadOptions& options = {}) const {
    static_assert(Scalar<T>, "SafetensorsFile::load<T>: T must be float or double");
    const auto& [rows, cols] = check_table(name);
    const SafetensorsTensorInfo& ti = info(name);
    RowMatrix<T> out(rows, cols);
    convert(ti, out.data(), static_cast<std::size_t>(out.size()));
    if (!options.allow_non_finite) check_finite(name, out.data(), rows, cols);
    return out;
  }

  /// Tensor `name` as a read-only table: zero-copy over the memory map when its dtype is T's (F32,
  /// F64, F16 for Eigen::half, BF16 for Eigen::bfloat16) and its data is aligned for T, else a
  /// converted copy (a 16-bit T never converts: see MappedTable). The table keeps the mapping
  /// alive, even after this object is destroyed.
  /// Throws: as load(); FormatError naming the dtypes when T is 16-bit and the tensor's dtype is
  ///         not T's.
  /// Complexity: O(1) plus the finiteness scan (O(V·d) reads; off with allow_non_finite).
  template <class T>
  [[nodiscard]] MappedTable<T> map(const std::string& name,
                                   const SafetensorsLoadOptions& options = {}) const {
    static_assert(Scalar<T> || HalfStorage<T>,
                  "SafetensorsFile::map<T>: T must be float, double, Eigen::half or "
                  "Eigen::bfloat16");
    const auto& [rows, cols] = check_table(name);
    const SafetensorsTensorInfo& ti = info(name);
    const unsigned char* p = file_->data() + data_offset_ + ti.begin;
    const SafetensorsDtype want = std::is_same_v<T, float>         ? SafetensorsDtype::F32
                                  : std::is_same_v<T, double>      ? SafetensorsDtype::F64
                                  : std::is_same_v<T, Eigen::half> ? SafetensorsDtype::F16
                                                                   : SafetensorsDtype::BF16;
    if constexpr (HalfStorage<T>) {
      if (ti.dtype != want) {
        fail(data_offset_ + ti.begin, "tensor '", name, "' has dtype ", to_string(ti.dtype),
             ", map<", storage_name<T>, "> needs ", to_string(want),
             " (a 16-bit map never converts: use load_reduced to round it)");
      }
    }
    if (ti.dtype == want && detail::host_is_little_endian &&
        reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0) {
      MappedTable<T> t(file_, reinterpret_cast<const T*>(p), rows, cols);
      if (!options.allow_non_finite) check_finite(name, t.matrix().data(), rows, cols);
      return t;
    }
    // Converting (float/double) or byte-swapping / realigning (16-bit) copy.
    if constexpr (HalfStorage<T>) {
      return MappedTable<T>(load_reduced<T>(name, options));
    } else {
      return MappedTable<T>(load<T>(name, options));
    }
  }

  /// Loads tensor `name` as an owning table of 16-bit floats S (Eigen::half or Eigen::bfloat16)
  /// for ReducedEmbedding<S>: S's own dtype byte for byte, any other float dtype rounded through
  /// float to nearest even.
  /// Throws: as load() (non-finite values, and values that overflow S, are reported by default).
  /// Complexity: one O(V·d) copy (plus the finiteness check unless allowed).
  template <class S>
  [[nodiscard]] RowMatrix<S> load_reduced(const std::string& name,
                                          const SafetensorsLoadOptions& options = {}) const {
    static_assert(std::is_same_v<S, Eigen::half> || std::is_same_v<S, Eigen::bfloat16>,
                  "SafetensorsFile::load_reduced<S>: S must be Eigen::half or Eigen::bfloat16");
    const auto& [rows, cols] = check_table(name);
    const SafetensorsTensorInfo& ti = info(name);
    const unsigned char* p = file_->data() + data_offset_ + ti.begin;
    const SafetensorsDtype same =
        std::is_same_v<S, Eigen::half> ? SafetensorsDtype::F16 : SafetensorsDtype::BF16;
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    RowMatrix<S> out(rows, cols);
    if (ti.dtype == same) {
      if (detail::host_is_little_endian) {
        if (n > 0) std::memcpy(static_cast<void*>(out.data()), p, n * sizeof(S));
      } else {
        for (std::size_t i = 0; i < n; ++i) {
          out.data()[i] = Eigen::numext::bit_cast<S>(detail::load_le<std::uint16_t>(p + 2 * i));
        }
      }
    } else {
      RowMatrix<float> f(rows, cols);
      convert(ti, f.data(), n);
      out = f.cast<S>();
    }
    // Read from the 16-bit exponents (detail/half.hpp): no float copy of the table. A value that
    // overflowed S while rounding is an Inf here, so it is reported too.
    if (!options.allow_non_finite) check_finite(name, out.data(), rows, cols);
    return out;
  }

  /// The elements of tensor `name` (aliases resolved), of any shape, in storage order: integer
  /// and float arrays (a checkpoint's keys, steps, counts) read in their own dtype.
  /// Throws: KeyError if there is no such tensor; FormatError naming the tensor and both dtypes
  ///         unless its dtype is dtype_of<V>(). Values are not checked (NaN passes).
  /// Complexity: O(elements).
  template <class V>
  [[nodiscard]] std::vector<V> load_array(const std::string& name) const {
    const SafetensorsTensorInfo& ti = info(name);
    if (ti.dtype != dtype_of<V>()) {
      fail(data_offset_ + ti.begin, "tensor '", name, "' has dtype ", to_string(ti.dtype),
           ", expected ", to_string(dtype_of<V>()));
    }
    const auto n = static_cast<std::size_t>((ti.end - ti.begin) / sizeof(V));
    std::vector<V> out(n);
    const unsigned char* p = file_->data() + data_offset_ + ti.begin;
    for (std::size_t i = 0; i < n; ++i) out[i] = detail::load_value<V>(p + i * sizeof(V), true);
    return out;
  }

 private:
  friend struct detail::SafetensorsAccess;

  /// Opens and validates `path` for the public call `where`, which a FileError names.
  SafetensorsFile(std::string path, const detail::Where& where)
      : file_(std::make_shared<const detail::MappedFile>(std::move(path), where)) {
    parse();
  }

  template <class... What>
  [[noreturn]] void fail(std::uint64_t offset, const What&... what) const {
    detail::fail_at_byte(path(), offset, what...);
  }

  std::pair<Index, Index> check_table(const std::string& name) const {
    const SafetensorsTensorInfo& ti = info(name);
    const std::uint64_t at = data_offset_ + ti.begin;
    if (ti.shape.size() != 2) {
      fail(at, "tensor '", name, "' has ", ti.shape.size(), " dimensions, expected a 2-D table");
    }
    if (ti.dtype != SafetensorsDtype::F16 && ti.dtype != SafetensorsDtype::BF16 &&
        ti.dtype != SafetensorsDtype::F32 && ti.dtype != SafetensorsDtype::F64) {
      fail(at, "tensor '", name, "' has dtype ", to_string(ti.dtype),
           ", expected F16, BF16, F32 or F64");
    }
    if (ti.shape[0] > static_cast<std::uint64_t>(std::numeric_limits<Index>::max()) ||
        ti.shape[1] > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) {
      fail(at, "tensor '", name, "' is too large");
    }
    return {static_cast<Index>(ti.shape[0]), static_cast<Index>(ti.shape[1])};
  }

  template <class T>
  void convert(const SafetensorsTensorInfo& ti, T* out, std::size_t n) const {
    const unsigned char* p = file_->data() + data_offset_ + ti.begin;
    const SafetensorsDtype same =
        std::is_same_v<T, float> ? SafetensorsDtype::F32 : SafetensorsDtype::F64;
    if (ti.dtype == same && detail::host_is_little_endian) {  // fast path: one copy
      if (n > 0) std::memcpy(out, p, n * sizeof(T));
      return;
    }
    const std::size_t item = dtype_size(ti.dtype);
    const bool bf16 = ti.dtype == SafetensorsDtype::BF16;
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = bf16 ? detail::load_float<T, Eigen::bfloat16>(p + i * item, item, true)
                    : detail::load_float<T>(p + i * item, item, true);
    }
  }

  template <class T>
  void check_finite(const std::string& name, const T* data, Index rows, Index cols) const {
    const auto n = static_cast<std::size_t>(rows * cols);
    const std::size_t k = detail::first_non_finite(data, n);
    if (k == n) return;
    const SafetensorsTensorInfo& ti = info(name);
    fail(data_offset_ + ti.begin + k * dtype_size(ti.dtype), "tensor '", name,
         "': non-finite value at row ", k / static_cast<std::size_t>(cols), ", column ",
         k % static_cast<std::size_t>(cols));
  }

  static std::optional<SafetensorsDtype> parse_dtype(std::string_view s) {
    for (int i = 0; i <= static_cast<int>(SafetensorsDtype::U64); ++i) {
      if (to_string(static_cast<SafetensorsDtype>(i)) == s) return static_cast<SafetensorsDtype>(i);
    }
    return std::nullopt;
  }

  void parse() {
    const unsigned char* bytes = file_->data();
    const std::size_t size = file_->size();
    if (size == 0) fail(0, "empty file, expected a safetensors header");
    if (size < 8) fail(size, "truncated: ", size, " bytes, the header length alone needs 8");
    const auto n = detail::load_le<std::uint64_t>(bytes);
    if (n > safetensors_max_header_size) {
      fail(0, "header length ", n, " exceeds the limit of ", safetensors_max_header_size, " bytes");
    }
    if (n > size - 8) {
      fail(0, "header length ", n, " runs past the end of the ", size, "-byte file");
    }
    if (n < 2 || bytes[8] != '{') fail(8, "header does not start with '{'");
    data_offset_ = 8 + static_cast<std::size_t>(n);
    const std::uint64_t data_size = size - data_offset_;

    nlohmann::json header;
    try {
      header = nlohmann::json::parse(bytes + 8, bytes + data_offset_);
    } catch (const nlohmann::json::parse_error& e) {
      fail(8 + (e.byte > 0 ? e.byte - 1 : 0), std::string("header is not valid JSON: ") + e.what());
    } catch (const nlohmann::json::exception& e) {
      // Not only parse_error: a number too large for a double ("1e999") is out_of_range.406,
      // which reports no position, so name the header's start.
      fail(8, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) fail(8, "header is not a JSON object");

    auto as_u64 = [&](const nlohmann::json& j, std::uint64_t& out) {
      if (!j.is_number_integer() || (!j.is_number_unsigned() && j.get<std::int64_t>() < 0)) {
        return false;
      }
      out = j.get<std::uint64_t>();
      return true;
    };
    std::vector<std::pair<std::string, const SafetensorsTensorInfo*>> order;
    for (const auto& item : header.items()) {
      // Named copies, not structured bindings: clang < 16 cannot capture bindings in lambdas.
      const std::string& name = item.key();
      const nlohmann::json& entry = item.value();
      if (name == "__metadata__") {
        if (!entry.is_object()) fail(8, "__metadata__ is not a JSON object");
        for (const auto& [k, v] : entry.items()) {
          if (!v.is_string()) fail(8, "__metadata__ value of '", k, "' is not a string");
          metadata_[k] = v.get<std::string>();
        }
        continue;
      }
      auto bad = [&](const auto&... what) { fail(8, "tensor '", name, "': ", what...); };
      if (!entry.is_object()) bad("entry is not a JSON object");
      SafetensorsTensorInfo ti;
      const auto dt = entry.find("dtype");
      if (dt == entry.end() || !dt->is_string()) bad("missing dtype");
      const auto parsed = parse_dtype(dt->get<std::string>());
      if (!parsed) bad("unknown dtype '", dt->get<std::string>(), "'");
      ti.dtype = *parsed;
      const auto sh = entry.find("shape");
      if (sh == entry.end() || !sh->is_array()) bad("missing shape");
      std::uint64_t count = 1;
      for (const auto& e : *sh) {
        std::uint64_t v = 0;
        if (!as_u64(e, v)) bad("shape entries must be non-negative integers");
        ti.shape.push_back(v);
        const auto c = detail::checked_mul(count, v);
        if (!c) bad("shape overflows");
        count = *c;
      }
      const auto bytes_needed = detail::checked_mul(count, dtype_size(ti.dtype));
      if (!bytes_needed) bad("shape overflows");
      const auto off = entry.find("data_offsets");
      if (off == entry.end() || !off->is_array() || off->size() != 2 ||
          !as_u64((*off)[0], ti.begin) || !as_u64((*off)[1], ti.end)) {
        bad("data_offsets must be two non-negative integers");
      }
      if (ti.end < ti.begin) bad("data_offsets end before they begin");
      if (ti.end - ti.begin != *bytes_needed) {
        bad("data_offsets span ", ti.end - ti.begin, " bytes but shape x ", to_string(ti.dtype),
            " needs ", *bytes_needed);
      }
      tensors_[name] = std::move(ti);
    }
    for (const auto& [name, ti] : tensors_) order.emplace_back(name, &ti);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                                : a.second->end < b.second->end;
    });
    std::uint64_t cursor = 0;
    for (const auto& [name, ti] : order) {
      if (ti->begin != cursor) {
        fail(data_offset_ + std::min(ti->begin, cursor), "tensor '", name,
             "' starts at data offset ", ti->begin,
             (ti->begin < cursor ? " and overlaps the previous tensor, which ends at "
                                 : " leaving a gap after the previous tensor, which ends at "),
             cursor);
      }
      cursor = ti->end;
    }
    if (cursor != data_size) {
      fail(data_offset_ + std::min(cursor, data_size), "tensors cover ", cursor,
           " data bytes but the data section has ", data_size,
           (cursor > data_size ? " (truncated)" : ""));
    }
    for (const auto& [k, v] : metadata_) {
      if (k.rfind(safetensors_alias_prefix, 0) != 0) continue;
      const std::string alias = k.substr(safetensors_alias_prefix.size());
      if (tensors_.count(v) == 0) fail(8, "alias '", alias, "' refers to missing tensor '", v, "'");
      if (tensors_.count(alias) != 0) fail(8, "alias '", alias, "' is also a stored tensor");
      aliases_[alias] = v;
    }
  }

  std::shared_ptr<const detail::MappedFile> file_;
  std::size_t data_offset_ = 0;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::string> aliases_;
};

}  // namespace ember::inline EMBER_ISA::io

namespace ember::inline EMBER_ISA::detail {

/// ember's internal door to a SafetensorsFile opened for another public call (load_safetensors,
/// the keyed checkpoints' loaders), so that a file that cannot be opened is reported under the
/// name of the call the user made.
struct SafetensorsAccess {
  [[nodiscard]] static io::SafetensorsFile open(std::string path, const Where& where) {
    return io::SafetensorsFile(std::move(path), where);
  }
};

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::io {

/// SafetensorsFile(path).load<T>(name, options).
template <class T>
[[nodiscard]] RowMatrix<T> load_safetensors(const std::string& path, const std::string& name,
                                            const SafetensorsLoadOptions& options = {}) {
  return detail::SafetensorsAccess::open(path, "io::load_safetensors").load<T>(name, options);
}

/// Builds a safetensors file from row-major float/double tables and writes it atomically, in the
/// layout of the reference writer ("__metadata__" first, then the tensors sorted by name, data in
/// that order, header padded to a multiple of 8 bytes). Tables are referenced, not copied: they
/// must outlive save().
///
/// Tied weights: alias("lm_head.weight", "wte.weight") stores the table once and records
/// "ember.alias.lm_head.weight": "wte.weight" in __metadata__; SafetensorsFile resolves it.
///
/// Example: `w.add("wte.weight", emb.weight()).alias("lm_head.weight", "wte.weight").save(path);`
class SafetensorsWriter {
 public:
  /// Adds the row-major table `table` under `name`, stored as `dtype` (default: F32 for float, F64
  /// for double; F16/BF16 round to nearest even).
  /// Throws: ValueError for an empty name, "__metadata__", a name already used, or a dtype that is
  /// not F16, BF16, F32 or F64. Nothing is added then.
  template <class Derived>
  SafetensorsWriter& add(const std::string& name, const Eigen::DenseBase<Derived>& table,
                         std::optional<SafetensorsDtype> dtype = std::nullopt) {
    using S = typename Derived::Scalar;
    static_assert(Scalar<S>, "SafetensorsWriter::add: the table must hold float or double");
    const SafetensorsDtype dt =
        dtype.value_or(std::is_same_v<S, float> ? SafetensorsDtype::F32 : SafetensorsDtype::F64);
    check_name(name);
    if (dt != SafetensorsDtype::F16 && dt != SafetensorsDtype::BF16 &&
        dt != SafetensorsDtype::F32 && dt != SafetensorsDtype::F64) {
      throw ValueError(detail::message("SafetensorsWriter::add", "tensor '", name,
                                       "' cannot be stored as ", to_string(dt)),
                       static_cast<double>(static_cast<int>(dt)));
    }
    entries_.emplace(name,
                     Entry{detail::const_table(table), dt, static_cast<std::uint64_t>(table.rows()),
                           static_cast<std::uint64_t>(table.cols())});
    return *this;
  }

  /// Adds `data` (integers or floats) under `name` in its own dtype (dtype_of<V>()), with
  /// `shape` (default: one dimension of data.size() elements). Referenced, not copied: data must
  /// outlive save().
  /// Throws: ValueError for an invalid or used name, or a shape whose product is not data.size().
  template <class V>
  SafetensorsWriter& add_array(const std::string& name, std::span<const V> data,
                               std::vector<std::uint64_t> shape = {}) {
    check_name(name);
    if (shape.empty()) shape.push_back(data.size());
    std::uint64_t count = 1;
    for (const std::uint64_t e : shape) count *= e;
    if (count != data.size()) {
      throw ValueError(detail::message("SafetensorsWriter::add_array", "tensor '", name, "' has ",
                                       data.size(), " elements, its shape ", count),
                       static_cast<double>(count));
    }
    Entry e{RawArray{reinterpret_cast<const unsigned char*>(data.data()), data.size(), sizeof(V)},
            dtype_of<V>(), 0, 0, std::move(shape)};
    entries_.emplace(name, std::move(e));
    return *this;
  }

  /// Records that `name` shares the stored tensor `target` (tied weights): stored once.
  /// Throws: ValueError for an invalid or already used name. `target` is checked by save().
  SafetensorsWriter& alias(const std::string& name, const std::string& target) {
    check_name(name);
    aliases_[name] = target;
    return *this;
  }

  /// Adds the __metadata__ entry key -> value.
  /// Throws: ValueError for a key starting with "ember.alias." (use alias()).
  SafetensorsWriter& metadata(const std::string& key, const std::string& value) {
    if (key.rfind(safetensors_alias_prefix, 0) == 0) {
      throw ValueError(
          detail::message("SafetensorsWriter::metadata", "key '", key, "' is reserved for aliases"),
          0.0);
    }
    metadata_[key] = value;
    return *this;
  }

  /// Writes the file (temporary in the same directory, fsync, rename).
  /// Throws: ValueError if an alias names a tensor that was not added; FormatError on I/O
  /// failure. `path` is untouched when it throws.
  void save(const std::string& path) const {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    std::map<std::string, std::string> meta = metadata_;
    for (const auto& [name, target] : aliases_) {
      if (entries_.count(target) == 0) {
        throw ValueError(detail::message("SafetensorsWriter::save", "alias '", name,
                                         "' refers to '", target, "', which was not added"),
                         0.0);
      }
      meta[std::string(safetensors_alias_prefix) + name] = target;
    }
    if (!meta.empty()) {
      nlohmann::ordered_json m = nlohmann::ordered_json::object();
      for (const auto& [k, v] : meta) m[k] = v;
      header["__metadata__"] = std::move(m);
    }
    std::uint64_t offset = 0;
    for (const auto& [name, e] : entries_) {
      const bool raw = std::holds_alternative<RawArray>(e.table);
      const std::uint64_t bytes = raw ? std::get<RawArray>(e.table).count * dtype_size(e.dtype)
                                      : e.rows * e.cols * dtype_size(e.dtype);
      nlohmann::ordered_json t = nlohmann::ordered_json::object();
      t["dtype"] = std::string(to_string(e.dtype));
      if (raw) {
        t["shape"] = e.shape;
      } else {
        t["shape"] = {e.rows, e.cols};
      }
      t["data_offsets"] = {offset, offset + bytes};
      header[name] = std::move(t);
      offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    unsigned char len[8];
    detail::store_le<std::uint64_t>(len, text.size());
    detail::AtomicFile out(path);
    out.write(len, 8);
    out.write(text);
    std::vector<unsigned char> row;
    for (const auto& entry : entries_) {
      const Entry& e = entry.second;  // not a binding: clang < 16 cannot capture one
      std::visit([&](const auto& t) { write_rows(out, t, e.dtype, row); }, e.table);
    }
    out.commit();
  }

 private:
  /// An add_array entry: count items of `item` bytes, host order.
  struct RawArray {
    const unsigned char* data;
    std::uint64_t count;
    std::size_t item;
  };
  struct Entry {
    std::variant<detail::ConstTableRef<float>, detail::ConstTableRef<double>, RawArray> table;
    SafetensorsDtype dtype;
    std::uint64_t rows;
    std::uint64_t cols;
    std::vector<std::uint64_t> shape = {};  // add_array entries
  };

  void check_name(const std::string& name) const {
    if (name.empty() || name == "__metadata__" || entries_.count(name) != 0 ||
        aliases_.count(name) != 0) {
      throw ValueError(detail::message("SafetensorsWriter", "tensor name '", name,
                                       "' is empty, reserved or already used"),
                       0.0);
    }
  }

  static void write_rows(detail::AtomicFile& out, const RawArray& a, SafetensorsDtype,
                         std::vector<unsigned char>& row) {
    if (detail::host_is_little_endian) {
      if (a.count > 0) out.write(a.data, static_cast<std::size_t>(a.count) * a.item);
      return;
    }
    row.resize(a.item);
    for (std::uint64_t i = 0; i < a.count; ++i) {
      std::reverse_copy(a.data + i * a.item, a.data + (i + 1) * a.item, row.begin());
      out.write(row.data(), a.item);
    }
  }

  template <class S>
  static void write_rows(detail::AtomicFile& out, const detail::ConstTableRef<S>& t,
                         SafetensorsDtype dtype, std::vector<unsigned char>& row) {
    const std::size_t item = dtype_size(dtype);
    row.resize(static_cast<std::size_t>(t.cols) * item);
    for (Index r = 0; r < t.rows; ++r) {
      const S* src = t.row(r);
      for (Index c = 0; c < t.cols; ++c) {
        unsigned char* p = row.data() + static_cast<std::size_t>(c) * item;
        if (dtype == SafetensorsDtype::BF16) {
          detail::store_float_le<Eigen::bfloat16>(p, item, src[c]);
        } else {
          detail::store_float_le(p, item, src[c]);
        }
      }
      out.write(row.data(), row.size());
    }
  }

  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, std::string> metadata_;
};

/// Writes the single table `table` under `name` (e.g. "wte.weight"), atomically.
/// Throws: as SafetensorsWriter::add and save.
template <class Derived>
void save_safetensors(const std::string& path, const std::string& name,
                      const Eigen::DenseBase<Derived>& table,
                      std::optional<SafetensorsDtype> dtype = std::nullopt) {
  SafetensorsWriter w;
  w.add(name, table, dtype);
  w.save(path);
}

}  // namespace ember::inline EMBER_ISA::io
