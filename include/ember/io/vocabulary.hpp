/// Vocabularies as files: load_vocabulary and save_vocabulary read and write an ember::Vocabulary
/// (ember/keys/vocabulary.hpp) one token per line.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/keys/vocabulary.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// The vocabulary type of ember's loaders: ember::Vocabulary (ember/keys/vocabulary.hpp), named
/// here too so code written as io::Vocabulary keeps compiling.
using Vocabulary = ember::Vocabulary;

/// Options of load_vocabulary().
struct VocabularyLoadOptions {
  /// When set, this token must be in the file and becomes the unk id.
  std::optional<std::string> unk_token;
};

/// Reads a vocabulary from a UTF-8 text file with one token per line (line i+1 holds id i): the
/// whole line without its '\n' (and a '\r' before it), spaces included; the last '\n' is optional.
/// Throws: FormatError "<path>:<line>: ..." for a 0-byte file, an empty line, a duplicate token
/// (naming the earlier line), invalid UTF-8, or a missing unk_token; FormatError if the file
/// cannot be read.
[[nodiscard]] inline Vocabulary load_vocabulary(const std::string& path,
                                                const VocabularyLoadOptions& options = {}) {
  const detail::MappedFile file(path, "io::load_vocabulary");
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  // A 0-byte vocabulary is a truncated download or a wrong path far more often than a deliberate
  // empty vocabulary (build that with Vocabulary{} instead).
  if (text.empty()) detail::fail_at_line(path, 1, "empty file, expected one token per line");
  Vocabulary vocab;
  std::size_t pos = 0;
  std::uint64_t line = 0;
  while (pos < text.size()) {
    ++line;
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view tok = text.substr(pos, end - pos);
    if (!tok.empty() && tok.back() == '\r') tok.remove_suffix(1);
    if (tok.empty()) detail::fail_at_line(path, line, "empty token");
    if (!detail::is_valid_utf8(tok)) {
      detail::fail_at_line(path, line, "token ", detail::quoted(tok), " is not valid UTF-8");
    }
    const TokenId before = vocab.size();
    const TokenId id = vocab.add(std::string(tok));
    if (id != before) {
      detail::fail_at_line(path, line, "duplicate token '", tok, "' (first on line ", id + 1, ")");
    }
    pos = end + 1;
  }
  if (options.unk_token) {
    const auto unk = vocab.find(*options.unk_token);
    if (!unk) {
      detail::fail_at_line(path, line, "unk token '", *options.unk_token, "' is not in the file");
    }
    vocab.set_unk_id(*unk);
  }
  return vocab;
}

/// Writes `vocab` one token per line, atomically (temporary file + rename).
/// Throws: ValueError if a token contains '\n' or is empty (it could not be read back);
/// FormatError on I/O failure. `path` is untouched when it throws.
inline void save_vocabulary(const std::string& path, const Vocabulary& vocab) {
  for (Index i = 0; i < vocab.size(); ++i) {
    const std::string& t = vocab.token(i);
    if (t.empty() || t.find('\n') != std::string::npos || t.back() == '\r') {
      throw ValueError(detail::message("save_vocabulary", "token ", detail::quoted(t), " at id ", i,
                                       " cannot be stored one per line"),
                       static_cast<double>(i));
    }
  }
  detail::AtomicFile out(path);
  for (const auto& t : vocab.tokens()) out.write(t + '\n');
  out.commit();
}

}  // namespace ember::inline EMBER_ISA::io
