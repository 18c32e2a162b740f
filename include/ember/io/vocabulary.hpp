/// Vocabulary: the token string <-> id mapping of an embedding table, built in memory, returned by
/// the word2vec/GloVe loaders, or read from a one-token-per-line file.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// A bijection between V distinct tokens and the ids 0 .. V-1 (id = row of the table), or, when
/// built by with_repeats(), V tokens some of which repeat: every id keeps its token and a repeated
/// token maps to its first id (GGUF token lists repeat strings; a table row exists for each id).
///
/// Unknown tokens: id() throws KeyError unless an unk id was set with set_unk_id(), in which case
/// it returns that id; find() never throws and returns std::nullopt. The caller decides.
///
/// Example:
/// ```cpp
/// ember::io::Vocabulary vocab({"<unk>", "the", "cat"});
/// vocab.set_unk_id(0);
/// std::vector<ember::TokenId> ids = vocab.ids({"the", "dog"});  // {1, 0}
/// ```
class Vocabulary {
 public:
  Vocabulary() = default;

  /// The vocabulary with token i at id i.
  /// Throws: ValueError if a token occurs twice (message names both positions).
  explicit Vocabulary(std::vector<std::string> tokens) {
    index_.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto [it, inserted] = index_.try_emplace(tokens[i], static_cast<TokenId>(i));
      if (!inserted) {
        throw ValueError("Vocabulary: token " + detail::quoted(tokens[i]) + " at position " +
                             std::to_string(i) + " duplicates position " +
                             std::to_string(it->second),
                         static_cast<double>(i));
      }
    }
    tokens_ = std::move(tokens);
  }

  /// The vocabulary with token i at id i, repeats allowed: token(i) is tokens[i] for every i, and
  /// id()/find() of a repeated string give its first id.
  /// Complexity: O(V) hash insertions.
  [[nodiscard]] static Vocabulary with_repeats(std::vector<std::string> tokens) {
    Vocabulary v;
    v.index_.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i)
      v.index_.try_emplace(tokens[i], static_cast<TokenId>(i));
    v.tokens_ = std::move(tokens);
    return v;
  }

  /// Number of tokens V.
  [[nodiscard]] Index size() const noexcept { return static_cast<Index>(tokens_.size()); }
  /// True when the vocabulary has no token.
  [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }

  /// Appends `token` with id size() and returns that id; returns the existing (first) id if
  /// present.
  TokenId add(std::string token) {
    const auto id = static_cast<TokenId>(tokens_.size());
    const auto [it, inserted] = index_.try_emplace(token, id);
    if (!inserted) return it->second;
    tokens_.push_back(std::move(token));
    return id;
  }

  /// The id of `token`, or std::nullopt. Never throws.
  [[nodiscard]] std::optional<TokenId> find(std::string_view token) const {
    const auto it = index_.find(token);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  /// True when `token` is in the vocabulary.
  [[nodiscard]] bool contains(std::string_view token) const { return find(token).has_value(); }

  /// The id of `token`; the unk id if it is unknown and one is set.
  /// Throws: KeyError naming the token when it is unknown and no unk id is set.
  /// Complexity: one hash lookup.
  [[nodiscard]] TokenId id(std::string_view token) const {
    if (const auto found = find(token)) return *found;
    if (unk_) return *unk_;
    throw KeyError("Vocabulary::id: token '" + std::string(token) + "' is not in the vocabulary (" +
                       std::to_string(tokens_.size()) + " tokens)",
                   std::string(token));
  }

  /// id() of each token, in order. Throws as id(); returns nothing partially.
  template <class Range>
  [[nodiscard]] std::vector<TokenId> ids(const Range& tokens) const {
    std::vector<TokenId> out;
    for (const auto& t : tokens) out.push_back(id(std::string_view(t)));
    return out;
  }
  [[nodiscard]] std::vector<TokenId> ids(std::initializer_list<std::string_view> tokens) const {
    return ids<std::initializer_list<std::string_view>>(tokens);
  }

  /// The token with id `id`.
  /// Throws: IndexError if id is outside [0, size()).
  [[nodiscard]] const std::string& token(TokenId id) const {
    if (id < 0 || id >= static_cast<TokenId>(tokens_.size())) {
      throw IndexError("Vocabulary::token: id " + std::to_string(id) + " is outside [0, " +
                           std::to_string(tokens_.size()) + ")",
                       -1, id, static_cast<std::int64_t>(tokens_.size()));
    }
    return tokens_[static_cast<std::size_t>(id)];
  }
  /// All tokens, in id order.
  [[nodiscard]] const std::vector<std::string>& tokens() const noexcept { return tokens_; }

  /// Makes id() return `id` for unknown tokens.
  /// Throws: IndexError if id is outside [0, size()).
  void set_unk_id(TokenId id) {
    (void)token(id);
    unk_ = id;
  }
  /// Makes id() throw for unknown tokens again.
  void clear_unk_id() noexcept { unk_.reset(); }
  /// The id returned for unknown tokens, if any.
  [[nodiscard]] std::optional<TokenId> unk_id() const noexcept { return unk_; }

  /// Keeps only the first n tokens (and drops the unk id if it is >= n).
  void truncate(Index n) {
    if (n < 0 || n >= size()) return;
    for (auto i = static_cast<std::size_t>(n); i < tokens_.size(); ++i) {
      // A repeat of an earlier token must not drop that token's entry (with_repeats()).
      const auto it = index_.find(tokens_[i]);
      if (it != index_.end() && it->second >= n) index_.erase(it);
    }
    tokens_.resize(static_cast<std::size_t>(n));
    if (unk_ && *unk_ >= n) unk_.reset();
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, TokenId, Hash, std::equal_to<>> index_;
  std::optional<TokenId> unk_;
};

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
  const detail::MappedFile file(path);
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
      detail::fail_at_line(path, line, "token " + detail::quoted(tok) + " is not valid UTF-8");
    }
    const TokenId before = vocab.size();
    const TokenId id = vocab.add(std::string(tok));
    if (id != before) {
      detail::fail_at_line(path, line,
                           "duplicate token '" + std::string(tok) + "' (first on line " +
                               std::to_string(id + 1) + ")");
    }
    pos = end + 1;
  }
  if (options.unk_token) {
    const auto unk = vocab.find(*options.unk_token);
    if (!unk) {
      detail::fail_at_line(path, line, "unk token '" + *options.unk_token + "' is not in the file");
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
      throw ValueError("save_vocabulary: token " + detail::quoted(t) + " at id " +
                           std::to_string(i) + " cannot be stored one per line",
                       static_cast<double>(i));
    }
  }
  detail::AtomicFile out(path);
  for (const auto& t : vocab.tokens()) out.write(t + '\n');
  out.commit();
}

}  // namespace ember::inline EMBER_ISA::io
