/// Vocabulary: the mapping between the tokens (words) of a table and its rows, built in memory or
/// by a loader (io/vocabulary.hpp reads and writes it one token per line; the word2vec, GloVe and
/// GGUF loaders return one).
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
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// A bijection between V distinct tokens and the ids 0 .. V-1 (id = row of the table), or, when
/// built by with_repeats(), V tokens some of which repeat: every id keeps its token and a repeated
/// token maps to its first id (GGUF token lists repeat strings; a table row exists for each id).
///
/// Unknown tokens: id() throws KeyError unless an unk id was set with set_unk_id(), in which case
/// it returns that id; find() never throws and returns std::nullopt. The caller decides.
///
/// Example:
/// ```cpp
/// ember::Vocabulary vocab({"<unk>", "the", "cat"});
/// vocab.set_unk_id(0);
/// std::vector<ember::TokenId> ids = vocab.ids({"the", "dog"});  // {1, 0}
/// ```
class Vocabulary {
 public:
  Vocabulary() = default;

  /// The vocabulary with token i at id i.
  /// Throws: ValueError if a token occurs twice (message names both positions).
  explicit Vocabulary(std::vector<std::string> tokens) : Vocabulary(std::move(tokens), false) {}

  /// The vocabulary with token i at id i, repeats allowed: token(i) is tokens[i] for every i, and
  /// id()/find() of a repeated string give its first id.
  /// Complexity: O(V) hash insertions.
  [[nodiscard]] static Vocabulary with_repeats(std::vector<std::string> tokens) {
    return Vocabulary(std::move(tokens), true);
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
    throw KeyError(detail::message("Vocabulary::id", "token '", token,
                                   "' is not in the vocabulary (", tokens_.size(), " tokens)"),
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
      throw IndexError(
          detail::message("Vocabulary::token", "id ", id, " is outside [0, ", tokens_.size(), ")"),
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
  // Token i at id i; a repeat keeps its first id or, unless `repeats`, throws ValueError.
  Vocabulary(std::vector<std::string> tokens, bool repeats) {
    index_.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto [it, inserted] = index_.try_emplace(tokens[i], static_cast<TokenId>(i));
      if (!inserted && !repeats) {
        throw ValueError(detail::message("Vocabulary", "token ", detail::quoted(tokens[i]),
                                         " at position ", i, " duplicates position ", it->second),
                         static_cast<double>(i));
      }
    }
    tokens_ = std::move(tokens);
  }

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

}  // namespace ember::inline EMBER_ISA
