/// word2vec (binary and text) and GloVe (text) word-vector files: read into a Vocabulary plus a
/// RowMatrix<float|double>, write back atomically; the conventions are those of word2vec.c and
/// gensim's KeyedVectors.load_word2vec_format / save_word2vec_format.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// Word-vector file formats.
///
/// - word2vec_binary: a text header line "V d\n", then V records: the word's UTF-8 bytes, one
///   space, d little-endian float32 values, and a '\n' (word2vec.c) or not (gensim, the writer).
/// - word2vec_text: the header line "V d\n", then V lines "word v1 ... vd".
/// - glove: no header; lines "word v1 ... vd" with d inferred from the first line.
/// Text lines are parsed from the right: the last d space-separated fields are the values and the
/// rest is the word (GloVe 840B has words with spaces). Trailing spaces, tabs and '\r' are
/// ignored.
enum class WordFormat { word2vec_binary, word2vec_text, glove };

/// A vocabulary and its table: vectors.row(vocab.id(w)) is the vector of w.
template <class T>
struct WordVectors {
  Vocabulary vocab;
  RowMatrix<T> vectors;
};

/// Options of the word-vector loaders.
struct WordVectorsLoadOptions {
  /// Read only the first `limit` vectors (gensim's `limit`); the rest of the file is not parsed.
  std::optional<Index> limit;
  /// Accept NaN and infinite values (rejected by default, naming the line or record).
  bool allow_non_finite = false;
};

}  // namespace ember::inline EMBER_ISA::io

namespace ember::inline EMBER_ISA::detail {

/// Parses one number occupying all of `s` (a floating value may be non-finite or start with '+').
template <class T>
bool parse_number(std::string_view s, T& out) {
  if (std::is_floating_point_v<T> && !s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size() && !s.empty();
}

inline std::string_view rstrip(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// Splits `line` into the word and its last d space-separated value fields (parsed from the
/// right). Returns false when the line has fewer than d + 1 fields.
inline bool split_from_right(std::string_view line, Index d, std::string_view& word,
                             std::vector<std::string_view>& fields) {
  fields.assign(static_cast<std::size_t>(d), {});
  std::size_t end = line.size();
  for (Index k = d - 1; k >= 0; --k) {
    const std::size_t sp = line.rfind(' ', end == 0 ? 0 : end - 1);
    if (sp == std::string_view::npos || end == 0) return false;
    fields[static_cast<std::size_t>(k)] = line.substr(sp + 1, end - sp - 1);
    end = sp;
  }
  word = line.substr(0, end);
  return !word.empty();
}

/// Parses the "V d" header line of a word2vec file.
inline std::pair<std::uint64_t, std::uint64_t> parse_w2v_header(std::string_view line,
                                                                const std::string& path) {
  line = rstrip(line);
  const std::size_t sp = line.find(' ');
  std::uint64_t v = 0;
  std::uint64_t d = 0;
  if (sp == std::string_view::npos || !parse_number(line.substr(0, sp), v) ||
      !parse_number(line.substr(sp + 1), d)) {
    fail_at_line(path, 1, "bad word2vec header ", detail::quoted(line),
                 ", expected \"<vocab size> <dimension>\"");
  }
  if (d == 0) fail_at_line(path, 1, "word2vec header gives dimension 0");
  if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
    fail_at_line(path, 1, "word2vec header gives an absurd dimension ", d);
  }
  return {v, d};
}

/// Adds `word` to `vocab`, failing (via `fail`) for invalid UTF-8 or a duplicate.
template <class Fail>
void add_word(Vocabulary& vocab, std::string_view word, Fail&& fail) {
  if (!is_valid_utf8(word)) fail("word ", detail::quoted(word), " is not valid UTF-8");
  const TokenId before = vocab.size();
  const TokenId id = vocab.add(std::string(word));
  if (id != before) {
    fail("duplicate word '", word, "' (first seen as vector ", id, ")");
  }
}

template <class T>
io::WordVectors<T> load_text(const std::string& path, bool has_header,
                             const io::WordVectorsLoadOptions& options, const Where& where) {
  const MappedFile file(path, where);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  if (text.empty()) fail_at_line(path, 1, "empty file");
  if (options.limit && *options.limit < 0) {
    throw ValueError(
        detail::message("load_word_vectors", "limit must be >= 0, got ", *options.limit),
        static_cast<double>(*options.limit));
  }
  std::size_t pos = 0;
  std::uint64_t line_no = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= text.size()) return false;
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    return true;
  };

  // Vectors to read: the limit, capped by the header's count when there is one.
  std::uint64_t expected = options.limit ? static_cast<std::uint64_t>(*options.limit)
                                         : std::numeric_limits<std::uint64_t>::max();
  Index d = 0;
  std::string_view line;
  if (has_header) {
    next_line(line);
    const auto [v, dim] = parse_w2v_header(line, path);
    d = static_cast<Index>(dim);
    expected = std::min(v, expected);
    // Each record needs at least "w" + d times " 0": cap the allocation by the file size.
    const auto need = checked_mul(expected, 2 * dim + 1);
    if (!need || *need > text.size() - std::min(pos, text.size()) + 1) {
      fail_at_line(path, 1, "header claims ", v, " vectors of dimension ", dim, ", more than the ",
                   text.size(), "-byte file can hold");
    }
  }

  io::WordVectors<T> out;
  std::vector<T> values;
  if (has_header) values.reserve(static_cast<std::size_t>(expected) * static_cast<std::size_t>(d));
  std::vector<std::string_view> fields;
  std::uint64_t count = 0;
  while (count < expected && next_line(line)) {
    line = rstrip(line);
    if (line.empty()) {
      if (!has_header && pos >= text.size()) break;  // trailing blank line
      fail_at_line(path, line_no, "empty line");
    }
    if (!has_header && d == 0) {
      // Infer d from the first line: the trailing fields that are numbers, leaving >= 1 for the
      // word.
      std::size_t n_fields = 1, numeric = 0;
      for (char c : line) n_fields += c == ' ';
      std::size_t end = line.size();
      while (numeric + 1 < n_fields) {
        const std::size_t sp = line.rfind(' ', end - 1);
        T tmp;
        if (!parse_number(line.substr(sp + 1, end - sp - 1), tmp)) break;
        ++numeric;
        end = sp;
      }
      if (numeric == 0)
        fail_at_line(path, line_no, "no vector values on the first line (is this a GloVe file?)");
      d = static_cast<Index>(numeric);
    }
    auto fail = [&](const auto&... what) { fail_at_line(path, line_no, what...); };
    std::string_view word;
    if (!split_from_right(line, d, word, fields)) {
      fail("expected a word and ", d, " values");
    }
    add_word(out.vocab, word, fail);
    for (Index k = 0; k < d; ++k) {
      T v;
      const std::string_view f = fields[static_cast<std::size_t>(k)];
      if (!parse_number(f, v)) {
        fail("value ", k + 1, " of word '", word, "' (", detail::quoted(f), ") is not a number");
      }
      if (!options.allow_non_finite && !std::isfinite(v)) {
        fail("non-finite value ", f, " at column ", k, " of word '", word, "'");
      }
      values.push_back(v);
    }
    ++count;
  }
  if (has_header && count < expected) {
    fail_at_line(path, line_no + 1, "file ends after ", count, " of ", expected,
                 " vectors (truncated)");
  }
  out.vectors.resize(static_cast<Index>(count), d);
  if (count > 0) {
    out.vectors = Eigen::Map<const RowMatrix<T>>(values.data(), static_cast<Index>(count), d);
  }
  return out;
}

template <class T>
io::WordVectors<T> load_binary(const std::string& path, const io::WordVectorsLoadOptions& options,
                               const Where& where) {
  const MappedFile file(path, where);
  const unsigned char* p = file.data();
  const std::size_t size = file.size();
  if (size == 0) fail_at_byte(path, 0, "empty file, expected a word2vec header \"V d\"");
  if (options.limit && *options.limit < 0) {
    throw ValueError(
        detail::message("load_word_vectors", "limit must be >= 0, got ", *options.limit),
        static_cast<double>(*options.limit));
  }
  const std::string_view all(reinterpret_cast<const char*>(p), size);
  const std::size_t nl = all.find('\n');
  if (nl == std::string_view::npos) fail_at_byte(path, size, "no end of line after the header");
  const auto [v, dim] = parse_w2v_header(all.substr(0, nl), path);
  const std::uint64_t claimed =
      options.limit ? std::min<std::uint64_t>(v, static_cast<std::uint64_t>(*options.limit)) : v;
  const auto record_min = checked_mul(dim, 4);
  const auto need = record_min ? checked_mul(claimed, *record_min + 2) : std::nullopt;
  if (!need || *need > size - (nl + 1)) {
    fail_at_byte(path, 0, "header claims ", v, " vectors of dimension ", dim, ", more than the ",
                 size, "-byte file can hold");
  }
  const auto d = static_cast<Index>(dim);
  io::WordVectors<T> out;
  out.vectors.resize(static_cast<Index>(claimed), d);
  std::size_t pos = nl + 1;
  for (std::uint64_t r = 0; r < claimed; ++r) {
    const std::size_t record_start = pos;
    auto fail = [&](const auto&... what) {
      fail_at_byte(path, record_start, "record ", r, ": ", what...);
    };
    while (pos < size && (p[pos] == '\n' || p[pos] == '\r')) ++pos;
    const std::size_t sp = all.find(' ', pos);
    if (sp == std::string_view::npos) {
      fail("file ends inside the word (truncated after ", r, " of ", claimed, " vectors)");
    }
    const std::string_view word = all.substr(pos, sp - pos);
    if (word.empty()) fail("empty word");
    add_word(out.vocab, word, fail);
    pos = sp + 1;
    if (size - pos < *record_min) {
      fail("file ends inside the vector of '", word, "' (truncated after ", r, " of ", claimed,
           " vectors)");
    }
    for (Index k = 0; k < d; ++k) {
      const auto f = load_value<float>(p + pos + static_cast<std::size_t>(k) * 4, true);
      if (!options.allow_non_finite && !std::isfinite(f)) {
        fail_at_byte(path, pos + static_cast<std::size_t>(k) * 4, "record ", r,
                     ": non-finite value at column ", k, " of word '", word, "'");
      }
      out.vectors(static_cast<Index>(r), k) = static_cast<T>(f);
    }
    pos += *record_min;
  }
  return out;
}

template <class Derived>
void check_words_for_save(const char* where, const Vocabulary& vocab,
                          const Eigen::MatrixBase<Derived>& table, bool binary) {
  detail::check_extent(where, "table", 0, vocab.size(), table.rows(), "vocab size");
  for (Index i = 0; i < vocab.size(); ++i) {
    const std::string& w = vocab.token(i);
    const bool bad = w.empty() || w.find('\n') != std::string::npos ||
                     (binary && w.find(' ') != std::string::npos) || w.front() == ' ' ||
                     w.back() == ' ' || w.back() == '\r';
    if (bad) {
      throw ValueError(detail::text(where, ": word ", detail::quoted(w), " at id ", i,
                                    " cannot be stored in this format"),
                       static_cast<double>(i));
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::io {

/// Loads a word2vec binary file (word2vec.c `-binary 1`, gensim `binary=True`): the vocabulary in
/// file order and table[V, d] (V = min(header V, limit)).
/// Throws: FormatError naming the file and the byte offset (and record) for an empty file, a bad
/// header, a header whose V x d cannot fit in the file (checked before allocating), a truncated
/// record, an empty, duplicate or non-UTF-8 word, or a NaN/inf value; ValueError for a negative
/// limit.
/// Complexity: one pass over the memory-mapped file.
template <class T>
[[nodiscard]] WordVectors<T> load_word2vec_binary(const std::string& path,
                                                  const WordVectorsLoadOptions& options = {}) {
  static_assert(Scalar<T>, "ember::io::load_word2vec_binary<T>: T must be float or double");
  return detail::load_binary<T>(path, options, "io::load_word2vec_binary");
}

/// Loads a word2vec text file (header "V d", then "word v1 ... vd" lines).
/// Throws: FormatError "<path>:<line>: ..." for an empty file, a bad header, a line with the wrong
/// number of values, a value that is not a number or (by default) not finite, an empty, duplicate
/// or non-UTF-8 word, or fewer lines than the header claims; ValueError for a negative limit.
template <class T>
[[nodiscard]] WordVectors<T> load_word2vec_text(const std::string& path,
                                                const WordVectorsLoadOptions& options = {}) {
  static_assert(Scalar<T>, "ember::io::load_word2vec_text<T>: T must be float or double");
  return detail::load_text<T>(path, true, options, "io::load_word2vec_text");
}

/// Loads a GloVe text file (no header; d is the number of trailing numeric fields of line 1,
/// leaving at least one field for the word). Throws as load_word2vec_text().
template <class T>
[[nodiscard]] WordVectors<T> load_glove(const std::string& path,
                                        const WordVectorsLoadOptions& options = {}) {
  static_assert(Scalar<T>, "ember::io::load_glove<T>: T must be float or double");
  return detail::load_text<T>(path, false, options, "io::load_glove");
}

/// Loads `path` in `format`.
template <class T>
[[nodiscard]] WordVectors<T> load_word_vectors(const std::string& path, WordFormat format,
                                               const WordVectorsLoadOptions& options = {}) {
  static_assert(Scalar<T>, "ember::io::load_word_vectors<T>: T must be float or double");
  constexpr const char* where = "io::load_word_vectors";
  return format == WordFormat::word2vec_binary ? detail::load_binary<T>(path, options, where)
         : format == WordFormat::word2vec_text ? detail::load_text<T>(path, true, options, where)
                                               : detail::load_text<T>(path, false, options, where);
}

/// Writes `vocab` and `table` (rows in id order) in `format`, atomically (temporary file in the
/// same directory, fsync, rename). Binary records are written as gensim does (no '\n' after the
/// vector; values as little-endian float32); text values use the shortest decimal form that reads
/// back to the same float (double for a double table).
/// Throws: ShapeError if table.rows() != vocab.size(); ValueError for a word that the format cannot
/// hold (empty, containing '\n', leading/trailing space, or a space in the binary format);
/// FormatError on I/O failure. `path` is untouched when it throws.
template <class Derived>
void save_word_vectors(const std::string& path, WordFormat format, const Vocabulary& vocab,
                       const Eigen::MatrixBase<Derived>& table) {
  using S = typename Derived::Scalar;
  static_assert(Scalar<S>, "ember::io::save_word_vectors: the table must hold float or double");
  const bool binary = format == WordFormat::word2vec_binary;
  detail::check_words_for_save("save_word_vectors", vocab, table, binary);
  detail::AtomicFile out(path);
  if (format != WordFormat::glove) {
    out.write(std::to_string(table.rows()) + " " + std::to_string(table.cols()) + "\n");
  }
  std::string line;
  for (Index r = 0; r < table.rows(); ++r) {
    line.assign(vocab.token(r));
    line.push_back(' ');
    if (binary) {
      const std::size_t start = line.size();
      line.resize(start + static_cast<std::size_t>(table.cols()) * 4);
      for (Index c = 0; c < table.cols(); ++c) {
        detail::store_value_le(
            reinterpret_cast<unsigned char*>(line.data() + start + static_cast<std::size_t>(c) * 4),
            static_cast<float>(table(r, c)));
      }
    } else {
      for (Index c = 0; c < table.cols(); ++c) {
        if (c > 0) line.push_back(' ');
        detail::append_part(line, table(r, c));  // shortest round-trip form
      }
      line.push_back('\n');
    }
    out.write(line);
  }
  out.commit();
}

/// save_word_vectors(path, WordFormat::word2vec_binary, vocab, table).
template <class Derived>
void save_word2vec_binary(const std::string& path, const Vocabulary& vocab,
                          const Eigen::MatrixBase<Derived>& table) {
  save_word_vectors(path, WordFormat::word2vec_binary, vocab, table);
}
/// save_word_vectors(path, WordFormat::word2vec_text, vocab, table).
template <class Derived>
void save_word2vec_text(const std::string& path, const Vocabulary& vocab,
                        const Eigen::MatrixBase<Derived>& table) {
  save_word_vectors(path, WordFormat::word2vec_text, vocab, table);
}
/// save_word_vectors(path, WordFormat::glove, vocab, table).
template <class Derived>
void save_glove(const std::string& path, const Vocabulary& vocab,
                const Eigen::MatrixBase<Derived>& table) {
  save_word_vectors(path, WordFormat::glove, vocab, table);
}

}  // namespace ember::inline EMBER_ISA::io
