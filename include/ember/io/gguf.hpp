/// GGUF files (ggml's model format): a validated, memory-mapped reader of tensors and typed
/// metadata that decodes F32/F16/BF16, Q4_0...Q8_0 and Q2_K...Q6_K tables bit-identically to ggml
/// (loaded, or viewed in place as tables). The writer is io/gguf_writer.hpp.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/ggml/decode.hpp"
#include "ember/ggml_embedding.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/ggml_type.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// The value types of GGUF metadata, with gguf.h's numeric values (enum gguf_type).
enum class GgufValueType : std::uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

/// gguf-py's name of `type` ("UINT32", "STRING", ...); "unknown" for a value outside 0..12.
[[nodiscard]] constexpr std::string_view to_string(GgufValueType type) noexcept {
  constexpr std::string_view names[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                        "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                        "UINT64", "INT64",   "FLOAT64"};
  const auto i = static_cast<std::uint32_t>(type);
  return i < 13 ? names[i] : std::string_view("unknown");
}

/// Bytes of one value of a fixed-size GGUF type; 0 for STRING, ARRAY and unknown values.
[[nodiscard]] constexpr std::size_t gguf_value_size(GgufValueType type) noexcept {
  constexpr std::size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  const auto i = static_cast<std::uint32_t>(type);
  return i < 13 ? sizes[i] : 0;
}

/// The GGUF magic, the versions ember reads, the version it writes, and ggml's defaults.
inline constexpr std::string_view gguf_magic = "GGUF";
inline constexpr std::uint32_t gguf_version = 3;
inline constexpr std::uint32_t gguf_default_alignment = 32;
inline constexpr std::string_view gguf_alignment_key = "general.alignment";
/// ggml's GGML_MAX_NAME: a tensor name has at most 63 bytes.
inline constexpr std::size_t gguf_max_name = 63;

/// The GGUF value type that the C++ type V holds (std::string and std::string_view: STRING);
/// get<V> asks for exactly this type.
template <class V>
[[nodiscard]] constexpr GgufValueType gguf_type_of() noexcept {
  using S = std::conditional_t<std::is_same_v<V, std::string_view>, std::string, V>;
  // The types in the order of GgufValueType's values (void for ARRAY, which no scalar is).
  constexpr int i = detail::type_index<S, std::uint8_t, std::int8_t, std::uint16_t, std::int16_t,
                                       std::uint32_t, std::int32_t, float, bool, std::string, void,
                                       std::uint64_t, std::int64_t, double>;
  static_assert(i >= 0,
                "GgufFile::get<V>: V must be an exact GGUF scalar type (std::uint8_t ... "
                "std::int64_t, float, double, bool, std::string, std::string_view) or a "
                "std::vector of one");
  return static_cast<GgufValueType>(i);
}

/// A metadata value asked for as the wrong type: get<std::uint32_t>("general.alignment") on a key
/// that holds a STRING, or a scalar asked for as an array. A FormatError (the file does not hold
/// what the caller expects) whose offset() is the byte offset of the key's value.
/// Fields: key(), expected() and actual() (for an array, the ARRAY type and its element type).
class GgufTypeError : public FormatError {
 public:
  GgufTypeError(const std::string& what, std::string path, std::uint64_t offset, std::string key,
                std::string expected, std::string actual)
      : FormatError(what, std::move(path), offset),
        key_(std::move(key)),
        expected_(std::move(expected)),
        actual_(std::move(actual)) {}
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// The type asked for, as gguf_dump.py prints it: "UINT32", "[STRING]".
  [[nodiscard]] const std::string& expected() const noexcept { return expected_; }
  /// The type stored, in the same form.
  [[nodiscard]] const std::string& actual() const noexcept { return actual_; }

 private:
  std::string key_;
  std::string expected_;
  std::string actual_;
};

/// One tensor of a GGUF file. Shapes follow ggml: ne[0] is the fastest-moving dimension, so a
/// token table[V, d] has ne[0] = d (its row width) and ne[1] = V; unused dimensions are 1.
struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::uint32_t n_dims = 0;  ///< dimensions stored in the file (0..4)
  std::array<std::uint64_t, 4> ne{1, 1, 1, 1};
  std::uint64_t offset = 0;       ///< byte offset of the data in the file
  std::uint64_t data_offset = 0;  ///< as stored: relative to the data section
  std::uint64_t bytes = 0;        ///< byte size: rows() x row_bytes
  std::uint64_t row_bytes = 0;    ///< bytes of one row of ne[0] elements
  std::uint64_t info_offset = 0;  ///< byte offset of this tensor's entry in the header

  /// Elements per row, ne[0] (d_model for a token table).
  [[nodiscard]] Index cols() const noexcept { return static_cast<Index>(ne[0]); }
  /// Rows, ne[1] x ne[2] x ne[3] (the vocabulary size for a token table).
  [[nodiscard]] Index rows() const noexcept { return static_cast<Index>(ne[1] * ne[2] * ne[3]); }
  /// Elements, ne[0] x ... x ne[3].
  [[nodiscard]] std::uint64_t elements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

/// One metadata entry, as found in the file.
struct GgufKeyInfo {
  std::string key;
  GgufValueType type = GgufValueType::UINT8;          ///< ARRAY for arrays
  GgufValueType element_type = GgufValueType::UINT8;  ///< the element type (= type for scalars)
  std::uint64_t count = 1;                            ///< elements (1 for a scalar)
  std::uint64_t offset = 0;      ///< byte offset of the value (an array's first element)
  std::uint64_t key_offset = 0;  ///< byte offset of the entry (its key's length)

  [[nodiscard]] bool is_array() const noexcept { return type == GgufValueType::ARRAY; }
  /// gguf_dump.py's name of the type: "UINT32", "[STRING]".
  [[nodiscard]] std::string type_name() const {
    return is_array() ? "[" + std::string(to_string(element_type)) + "]"
                      : std::string(to_string(type));
  }
};

/// Options of GgufFile::load.
struct GgufLoadOptions {
  /// Accept NaN and infinite values (a FormatError naming the row and column by default).
  bool allow_non_finite = false;
};

/// An open, validated GGUF file (versions 2 and 3), memory-mapped read-only.
///
/// Opening checks the whole header before returning, each failure a FormatError naming the file,
/// the byte offset and what was expected: the magic "GGUF"; version 2 or 3 (1 and later versions
/// are refused, as a byte-swapped version is); tensor and key counts that the remaining bytes can
/// hold; every string and array length against the remaining bytes before anything is allocated;
/// value types 0..12, arrays of arrays refused (as ggml does); non-empty, distinct keys;
/// `general.alignment` (default 32) a UINT32 that is a non-zero power of two; distinct tensor names
/// of at most 63 bytes (ggml's limit); at most 4 dimensions; types that ggml defines; ne[0] a
/// multiple of the type's block size; element counts and byte sizes without 64-bit overflow;
/// offsets that are multiples of the alignment, data inside the file, and no two tensors
/// overlapping.
///
/// Conventions: a dimension may be 0, as in ggml (an empty tensor); the tensors may sit in any
/// order and with gaps in the data section (ggml's own reader insists on them packed in header
/// order, gguf-py does not); only a tensor's own bytes must lie inside the file, not the padding
/// after the last one. Strings are not checked for UTF-8 (ggml does not either). A tensor of a type
/// ember does not decode (Q8_1, Q8_K, IQ*, TQ*, MXFP4, NVFP4, Q1_0, Q2_0, I8...I64, F64) does not
/// make the file unreadable: its info and bytes are available, and load() of it throws.
///
/// Example:
/// ```cpp
/// ember::io::GgufFile f("model.gguf");
/// ember::RowMatrix<float> wte = f.load<float>("token_embd.weight");  // V x d, decoded
/// ember::GgmlEmbeddingView tok = f.table("token_embd.weight", ember::LookupScale::none());
/// ember::io::Vocabulary vocab = f.vocabulary();                     // tokenizer.ggml.tokens
/// auto ctx = f.get<std::uint32_t>("llama.context_length");
/// ```
class GgufFile {
 public:
  /// Opens and validates `path`.
  /// Throws: FormatError as listed above, or when the file cannot be opened or mapped.
  /// Complexity: O(header bytes); no tensor data is read.
  explicit GgufFile(std::string path)
      : file_(std::make_shared<const detail::MappedFile>(std::move(path), "io::GgufFile")) {
    parse();
  }

  /// The path the file was opened with.
  [[nodiscard]] const std::string& path() const noexcept { return file_->path(); }
  /// The file's GGUF version (2 or 3).
  [[nodiscard]] std::uint32_t version() const noexcept { return version_; }
  /// The alignment of the tensor data (general.alignment, default 32).
  [[nodiscard]] std::uint64_t alignment() const noexcept { return alignment_; }
  /// Byte offset of the data section.
  [[nodiscard]] std::uint64_t data_offset() const noexcept { return data_offset_; }
  /// The file size in bytes.
  [[nodiscard]] std::uint64_t size() const noexcept { return file_->size(); }

  // ---- tensors -------------------------------------------------------------------------------

  /// Tensor names in file (header) order.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& t : tensors_) out.push_back(t.name);
    return out;
  }
  /// All tensors in file order.
  [[nodiscard]] const std::vector<GgufTensorInfo>& tensors() const noexcept { return tensors_; }
  /// True when the file holds a tensor `name`.
  [[nodiscard]] bool contains(std::string_view name) const {
    return tensor_index_.find(std::string(name)) != tensor_index_.end();
  }
  /// The tensor `name`. Throws: KeyError naming the tensor, the file and the closest names it has.
  [[nodiscard]] const GgufTensorInfo& info(const std::string& name) const {
    const auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) {
      std::vector<std::string_view> have;
      for (const auto& t : tensors_) have.push_back(t.name);
      throw KeyError(detail::text("GgufFile: no tensor '", name, "' in ", path(),
                                  detail::closest_hint(name, have)),
                     name);
    }
    return tensors_[it->second];
  }
  /// The raw bytes of tensor `name` inside the mapping (valid while this object or a keep_alive()
  /// handle lives). Throws: KeyError as info().
  [[nodiscard]] std::span<const std::uint8_t> bytes(const std::string& name) const {
    const GgufTensorInfo& t = info(name);
    return {file_->data() + t.offset, static_cast<std::size_t>(t.bytes)};
  }
  /// A handle that keeps the memory map (and so every bytes() span) alive after this object is
  /// destroyed.
  [[nodiscard]] std::shared_ptr<const void> keep_alive() const noexcept { return file_; }

  /// Loads tensor `name` decoded to an owning table[rows, cols] with rows = ne[1]·ne[2]·ne[3] and
  /// cols = ne[0], for every type ember decodes; each value is bit for bit ggml's dequantization
  /// (then widened exactly for T = double).
  /// Throws: KeyError if there is no such tensor; FormatError (at the tensor's data offset) for a
  /// type ember does not decode, naming the type, or (by default) for a NaN/infinite value, naming
  /// its row and column.
  /// Complexity: O(rows·cols) decoding from the map.
  template <class T>
  [[nodiscard]] RowMatrix<T> load(const std::string& name,
                                  const GgufLoadOptions& options = {}) const {
    static_assert(Scalar<T>, "GgufFile::load<T>: T must be float or double");
    const GgufTensorInfo& t = decodable(name);
    const Index rows = t.rows();
    const Index cols = t.cols();
    RowMatrix<T> out(rows, cols);
    if (rows == 0 || cols == 0) return out;
    const std::uint8_t* p = file_->data() + t.offset;
    const auto rb = static_cast<std::size_t>(t.row_bytes);
    std::vector<float> buf(std::is_same_v<T, float> ? 0 : static_cast<std::size_t>(cols));
    for (Index r = 0; r < rows; ++r) {
      const std::uint8_t* src = p + static_cast<std::size_t>(r) * rb;
      if constexpr (std::is_same_v<T, float>) {
        detail::ggml::decode_row(t.type, src, cols, out.data() + r * cols);
      } else {
        detail::ggml::decode_row(t.type, src, cols, buf.data());
        for (Index c = 0; c < cols; ++c)
          out(r, c) = static_cast<double>(buf[static_cast<std::size_t>(c)]);
      }
    }
    if (!options.allow_non_finite) {
      const auto n = static_cast<std::size_t>(out.size());
      const std::size_t k = detail::first_non_finite(out.data(), n);
      if (k != n) {
        const auto c = static_cast<std::size_t>(cols);
        fail(t.offset + (k / c) * rb, "tensor '", name, "': non-finite value at row ", k / c,
             ", column ", k % c);
      }
    }
    return out;
  }

  /// A zero-copy table over tensor `name` (ne[0] = d_model values per row, rows() = ne[1]·ne[2]·
  /// ne[3] = vocab_size rows), its rows decoded on demand exactly as load<float> decodes them,
  /// times the lookup scale (√d_model unless `scale` says otherwise; LLaMA-style models use
  /// LookupScale::none()). The view holds the file mapping (keep_alive()), so it stays valid after
  /// this GgufFile is destroyed. Values are not checked for NaN or infinity (load() does).
  /// Throws: KeyError if there is no such tensor; FormatError (at the tensor's data offset) naming
  ///         the type for a type ember does not decode (IQ*, TQ*, Q8_1, Q8_K, MXFP4, ...);
  ///         ShapeError for an empty tensor.
  /// Complexity: O(1); nothing is read or decoded.
  [[nodiscard]] GgmlEmbeddingView table(const std::string& name, LookupScale scale = {}) const {
    const GgufTensorInfo& t = decodable(name);
    return GgmlEmbeddingView(codec::Ggml(t.type), file_->data() + t.offset, t.rows(), t.cols(),
                             static_cast<Index>(t.row_bytes), file_, scale);
  }
  /// table(name) with the lookup scale `scale` (LookupScale::constant(scale)).
  /// Throws: as table(name); ValueError unless scale is finite.
  [[nodiscard]] GgmlEmbeddingView table(const std::string& name, float scale) const {
    return table(name, LookupScale::constant(static_cast<double>(scale)));
  }

  // ---- metadata ------------------------------------------------------------------------------

  /// Metadata keys in file order.
  [[nodiscard]] std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(keys_.size());
    for (const auto& k : keys_) out.push_back(k.key);
    return out;
  }
  /// True when the file has metadata key `key`.
  [[nodiscard]] bool has_key(std::string_view key) const {
    return key_index_.find(std::string(key)) != key_index_.end();
  }
  /// The entry of `key`: its type, element type, count and offsets.
  /// Throws: KeyError naming the key and the file.
  [[nodiscard]] const GgufKeyInfo& key_info(const std::string& key) const {
    const auto it = key_index_.find(key);
    if (it == key_index_.end()) {
      throw KeyError(detail::text("GgufFile: no metadata key '", key, "' in ", path()), key);
    }
    return keys_[it->second];
  }
  /// All metadata entries in file order.
  [[nodiscard]] const std::vector<GgufKeyInfo>& key_infos() const noexcept { return keys_; }

  /// The value of `key` as V: a scalar type (std::uint8_t, std::int8_t, std::uint16_t,
  /// std::int16_t, std::uint32_t, std::int32_t, std::uint64_t, std::int64_t, float, double, bool,
  /// std::string, std::string_view) or a std::vector of one of them for an array. The stored type
  /// must be exactly V's: no conversion. A std::string_view points into the mapping (valid while
  /// this object or a keep_alive() handle lives).
  /// Throws: KeyError for a missing key; GgufTypeError when the stored type is another one.
  /// Complexity: O(1) for scalars, O(elements) for arrays (strings walk their lengths).
  template <class V>
  [[nodiscard]] V get(const std::string& key) const {
    const GgufKeyInfo& k = key_info(key);
    if constexpr (is_vector<V>::value) {
      using E = typename V::value_type;
      constexpr GgufValueType want = gguf_type_of<E>();
      if (!k.is_array() || k.element_type != want) {
        type_error(k, "[" + std::string(to_string(want)) + "]");
      }
      V out;
      out.reserve(static_cast<std::size_t>(k.count));
      std::uint64_t at = k.offset;
      for (std::uint64_t i = 0; i < k.count; ++i) out.push_back(read_value<E>(at));
      return out;
    } else {
      constexpr GgufValueType want = gguf_type_of<V>();
      if (k.is_array() || k.type != want) type_error(k, std::string(to_string(want)));
      std::uint64_t at = k.offset;
      return read_value<V>(at);
    }
  }

  /// The value of an integer key of any width and signedness, as std::int64_t (converters store
  /// counts as UINT32 or UINT64 alike).
  /// Throws: KeyError for a missing key; GgufTypeError for a non-integer type or a UINT64 above
  /// INT64_MAX.
  [[nodiscard]] std::int64_t get_integer(const std::string& key) const {
    const GgufKeyInfo& k = key_info(key);
    const std::optional<std::int64_t> v =
        integer_as<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t,
                   std::int32_t, std::int64_t, std::uint64_t>(k);
    if (!v) type_error(k, "an integer that fits INT64");
    return *v;
  }

  /// The vocabulary of `tokenizer.ggml.tokens`: token i at id i for every i. Real token lists
  /// repeat strings; a repeated string keeps every id's token and maps back to its first id
  /// (Vocabulary::with_repeats).
  /// Throws: KeyError when the key is missing; GgufTypeError when it is not an array of strings.
  [[nodiscard]] Vocabulary vocabulary() const {
    return Vocabulary::with_repeats(get<std::vector<std::string>>("tokenizer.ggml.tokens"));
  }

 private:
  template <class>
  struct is_vector : std::false_type {};
  template <class E>
  struct is_vector<std::vector<E>> : std::true_type {};

  template <class... What>
  [[noreturn]] void fail(std::uint64_t offset, const What&... what) const {
    detail::fail_at_byte(path(), offset, what...);
  }

  /// The tensor `name`, of a type ember decodes. Throws: KeyError; FormatError naming the type.
  const GgufTensorInfo& decodable(const std::string& name) const {
    const GgufTensorInfo& t = info(name);
    if (!ggml_type_decodes(t.type)) {
      fail(t.offset, "tensor '", name, "' has type ", to_string(t.type),
           ", which ember does not decode (it decodes f32, f16, bf16, q4_0, q4_1, "
           "q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K and q6_K)");
    }
    return t;
  }

  [[noreturn]] void type_error(const GgufKeyInfo& k, const std::string& expected) const {
    const std::string actual = k.type_name();
    throw GgufTypeError(detail::text(path(), ": metadata key '", k.key, "' holds ", actual,
                                     ", not ", expected, " (at byte ", k.offset, ")"),
                        path(), k.offset, k.key, expected, actual);
  }

  /// The scalar value of `k` read as the one of the integer types I that is its type, if it fits
  /// std::int64_t; std::nullopt for an array, another type or a UINT64 above INT64_MAX.
  template <class... I>
  std::optional<std::int64_t> integer_as(const GgufKeyInfo& k) const {
    std::optional<std::int64_t> v;
    const auto take = [&](auto x) {
      if (std::cmp_less_equal(x, std::numeric_limits<std::int64_t>::max())) {
        v = static_cast<std::int64_t>(x);
      }
    };
    std::uint64_t at = k.offset;
    ((!k.is_array() && k.type == gguf_type_of<I>() ? take(read_value<I>(at)) : void()), ...);
    return v;
  }

  // Reads one validated value at `at` and advances past it.
  template <class V>
  V read_value(std::uint64_t& at) const {
    const unsigned char* p = file_->data() + at;
    if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, std::string_view>) {
      const auto len = detail::load_le<std::uint64_t>(p);
      at += 8 + len;
      return V(reinterpret_cast<const char*>(p + 8), static_cast<std::size_t>(len));
    } else if constexpr (std::is_same_v<V, bool>) {
      at += 1;
      return p[0] != 0;
    } else {
      at += sizeof(V);
      return detail::load_value<V>(p, true);
    }
  }

  // ---- parsing -------------------------------------------------------------------------------

  /// A bounds-checked cursor over the mapping.
  struct Cursor {
    const GgufFile* file;
    std::uint64_t at = 0;
    [[nodiscard]] std::uint64_t remaining() const noexcept { return file->size() - at; }
    void need(std::uint64_t n, const char* what) const {
      if (n > remaining()) {
        file->fail(at, "truncated: ", what, " needs ", n, " bytes, ", remaining(),
                   " remain in the ", file->size(), "-byte file");
      }
    }
    template <class U>
    U u(const char* what) {
      need(sizeof(U), what);
      const U v = detail::load_le<U>(file->file_->data() + at);
      at += sizeof(U);
      return v;
    }
    std::string_view str(const char* what) {
      const std::uint64_t start = at;
      const auto len = u<std::uint64_t>(what);
      if (len > remaining()) {
        file->fail(start, what, " of ", len, " bytes runs past the end of the file (", remaining(),
                   " bytes remain)");
      }
      const auto* p = reinterpret_cast<const char*>(file->file_->data() + at);
      at += len;
      return {p, static_cast<std::size_t>(len)};
    }
  };

  static std::string quoted_name(std::string_view s) { return detail::quoted(s); }

  void parse() {
    const std::uint64_t size = file_->size();
    const unsigned char* b = file_->data();
    Cursor cur{this, 0};
    if (size == 0) fail(0, "empty file, expected the GGUF magic");
    cur.need(4, "the magic");
    if (std::memcmp(b, gguf_magic.data(), 4) != 0) {
      fail(0, "bad magic ", quoted_name({reinterpret_cast<const char*>(b), 4}),
           ", expected 'GGUF'");
    }
    cur.at = 4;
    version_ = cur.u<std::uint32_t>("the version");
    if (version_ != 2 && version_ != 3) {
      std::string why =
          "GGUF version " + std::to_string(version_) + " is not supported, expected 2 or 3";
      if (version_ == 1) why += " (version 1 is obsolete, as for ggml)";
      if (version_ != 0 && (version_ & 0xFFFFu) == 0) {
        why += " (a byte-swapped version: big-endian files are not supported)";
      }
      fail(4, why);
    }
    const auto n_tensors = cur.u<std::uint64_t>("the tensor count");
    const auto n_kv = cur.u<std::uint64_t>("the metadata count");
    // The smallest entries: a key is 8 (length) + 1 + 4 (type) + 1 (u8 value) bytes; a tensor
    // 8 (name length) + 4 (dims) + 4 (type) + 8 (offset). Checked before anything is reserved.
    constexpr std::uint64_t min_kv = 14;
    constexpr std::uint64_t min_tensor = 24;
    if (n_tensors > cur.remaining() / min_tensor) {
      fail(8, "tensor count ", n_tensors, " cannot fit in the ", cur.remaining(),
           " bytes after the header (", min_tensor, " bytes each at least)");
    }
    if (n_kv > (cur.remaining() - n_tensors * min_tensor) / min_kv) {
      fail(16, "metadata count ", n_kv, " cannot fit in the ", cur.remaining(),
           " bytes after the header (", min_kv, " bytes each at least)");
    }

    // Metadata.
    keys_.reserve(static_cast<std::size_t>(n_kv));
    bool has_alignment = false;
    for (std::uint64_t i = 0; i < n_kv; ++i) {
      GgufKeyInfo k;
      k.key_offset = cur.at;
      const std::string_view key = cur.str("a metadata key");
      if (key.empty()) fail(k.key_offset, "metadata key ", i, " is empty");
      k.key = std::string(key);
      if (key_index_.count(k.key) != 0) {
        fail(k.key_offset, "duplicate metadata key ", quoted_name(key), " (first at byte ",
             keys_[key_index_.at(k.key)].key_offset, ")");
      }
      const std::uint64_t type_at = cur.at;
      const auto type = cur.u<std::uint32_t>("a value type");
      if (type > 12) {
        fail(type_at, "metadata key ", quoted_name(key), " has value type ", type,
             ", expected 0..12");
      }
      k.type = static_cast<GgufValueType>(type);
      k.element_type = k.type;
      if (k.is_array()) {
        const std::uint64_t elem_at = cur.at;
        const auto elem = cur.u<std::uint32_t>("an array element type");
        if (elem == static_cast<std::uint32_t>(GgufValueType::ARRAY)) {
          fail(elem_at, "metadata key ", quoted_name(key),
               " is an array of arrays, which ember does not read (nor does ggml)");
        }
        if (elem > 12) {
          fail(elem_at, "metadata key ", quoted_name(key), " has array element type ", elem,
               ", expected 0..12");
        }
        k.element_type = static_cast<GgufValueType>(elem);
        const std::uint64_t count_at = cur.at;
        k.count = cur.u<std::uint64_t>("an array length");
        const std::uint64_t each =
            k.element_type == GgufValueType::STRING ? 8 : gguf_value_size(k.element_type);
        if (k.count > cur.remaining() / each) {
          fail(count_at, "array ", quoted_name(key), " of ", k.count, " ",
               to_string(k.element_type), " values cannot fit in the ", cur.remaining(),
               " remaining bytes");
        }
      }
      k.offset = cur.at;
      if (k.element_type == GgufValueType::STRING) {
        for (std::uint64_t e = 0; e < k.count; ++e) (void)cur.str("a string value");
      } else {
        const std::uint64_t n = k.count * gguf_value_size(k.element_type);
        cur.need(n, "a metadata value");
        cur.at += n;
      }
      key_index_.emplace(k.key, keys_.size());
      keys_.push_back(std::move(k));
      if (keys_.back().key == gguf_alignment_key) has_alignment = true;
    }
    if (has_alignment) {
      const GgufKeyInfo& k = keys_[key_index_.at(std::string(gguf_alignment_key))];
      if (k.is_array() || k.type != GgufValueType::UINT32) {
        fail(k.offset, "general.alignment holds ", k.type_name(), ", expected UINT32");
      }
      const auto a = detail::load_le<std::uint32_t>(b + k.offset);
      if (a == 0 || (a & (a - 1)) != 0) {
        fail(k.offset, "general.alignment is ", a, ", expected a non-zero power of two");
      }
      alignment_ = a;
    }

    // Tensor infos.
    tensors_.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensorInfo t;
      t.info_offset = cur.at;
      const std::string_view name = cur.str("a tensor name");
      if (name.size() > gguf_max_name) {
        fail(t.info_offset, "tensor name ", quoted_name(name), " has ", name.size(),
             " bytes, at most ", gguf_max_name, " allowed (ggml's limit)");
      }
      t.name = std::string(name);
      if (tensor_index_.count(t.name) != 0) {
        fail(t.info_offset, "duplicate tensor name ", quoted_name(name), " (first at byte ",
             tensors_[tensor_index_.at(t.name)].info_offset, ")");
      }
      const std::uint64_t dims_at = cur.at;
      t.n_dims = cur.u<std::uint32_t>("a dimension count");
      if (t.n_dims > 4) {
        fail(dims_at, "tensor ", quoted_name(name), " has ", t.n_dims,
             " dimensions, at most 4 allowed");
      }
      std::uint64_t elements = 1;
      std::uint64_t rows = 1;
      for (std::uint32_t j = 0; j < t.n_dims; ++j) {
        const std::uint64_t ne_at = cur.at;
        t.ne[j] = cur.u<std::uint64_t>("a dimension");
        const auto e = detail::checked_mul(elements, t.ne[j]);
        const auto r =
            j == 0 ? std::optional<std::uint64_t>(rows) : detail::checked_mul(rows, t.ne[j]);
        constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        if (t.ne[j] > max || !e || *e > max || !r || *r > max) {
          fail(ne_at, "tensor ", quoted_name(name), ": dimension ", j, " (", t.ne[j],
               ") makes the shape overflow 63 bits");
        }
        elements = *e;
        rows = *r;
      }
      const std::uint64_t type_at = cur.at;
      const auto type = cur.u<std::uint32_t>("a tensor type");
      if (!ggml_type_known(type)) {
        fail(type_at, "tensor ", quoted_name(name), " has type id ", type,
             ", which ggml does not define");
      }
      t.type = static_cast<GgmlType>(type);
      const auto block = static_cast<std::uint64_t>(ggml_block_size(t.type));
      if (t.ne[0] % block != 0) {
        fail(type_at, "tensor ", quoted_name(name), " has rows of ", t.ne[0],
             " elements, not a multiple of ", to_string(t.type), "'s block of ", block);
      }
      // A row of 2^62 f32 elements has a 63-bit element count but 2^64 bytes: the row's and the
      // tensor's byte sizes are checked against 63 bits as the shape is (an empty tensor too:
      // its row size is still an Index).
      constexpr auto max_bytes =
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      const auto row_bytes =
          detail::checked_mul(t.ne[0] / block, static_cast<std::uint64_t>(ggml_type_size(t.type)));
      const auto bytes = row_bytes ? detail::checked_mul(rows, *row_bytes) : std::nullopt;
      if (!row_bytes || *row_bytes > max_bytes || !bytes || *bytes > max_bytes) {
        fail(type_at, "tensor ", quoted_name(name), ": its byte size overflows 63 bits");
      }
      t.row_bytes = *row_bytes;
      t.bytes = *bytes;
      const std::uint64_t offset_at = cur.at;
      t.data_offset = cur.u<std::uint64_t>("a tensor offset");
      if (t.data_offset % alignment_ != 0) {
        fail(offset_at, "tensor ", quoted_name(name), " has data offset ", t.data_offset,
             ", not a multiple of the alignment ", alignment_);
      }
      tensor_index_.emplace(t.name, tensors_.size());
      tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment (none when no tensor).
    data_offset_ = cur.at;
    if (n_tensors > 0) {
      const std::uint64_t pad = (alignment_ - cur.at % alignment_) % alignment_;
      if (pad > cur.remaining()) {
        fail(cur.at, "truncated: the data section would start at byte ", cur.at + pad,
             ", past the end of the ", size, "-byte file");
      }
      data_offset_ = cur.at + pad;
    }
    for (GgufTensorInfo& t : tensors_) {
      const std::uint64_t avail = size - data_offset_;
      if (t.data_offset > avail || t.bytes > avail - t.data_offset) {
        fail(t.info_offset, "tensor ", quoted_name(t.name), " data [",
             data_offset_ + std::min(t.data_offset, avail), ", +", t.bytes,
             ") runs past the end of the ", size, "-byte file");
      }
      t.offset = data_offset_ + t.data_offset;
    }
    std::vector<const GgufTensorInfo*> order;
    for (const auto& t : tensors_)
      if (t.bytes > 0) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
      return x->data_offset != y->data_offset ? x->data_offset < y->data_offset
                                              : x->info_offset < y->info_offset;
    });
    for (std::size_t i = 1; i < order.size(); ++i) {
      const GgufTensorInfo& prev = *order[i - 1];
      const GgufTensorInfo& next = *order[i];
      if (next.data_offset < prev.data_offset + prev.bytes) {
        fail(next.info_offset, "tensor ", quoted_name(next.name), " data at offset ",
             next.data_offset, " overlaps tensor ", quoted_name(prev.name), " [", prev.data_offset,
             ", ", prev.data_offset + prev.bytes, ")");
      }
    }
  }

  std::shared_ptr<const detail::MappedFile> file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = gguf_default_alignment;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKeyInfo> keys_;
  std::unordered_map<std::string, std::size_t> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace ember::inline EMBER_ISA::io
