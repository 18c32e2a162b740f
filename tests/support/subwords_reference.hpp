// The plain reference of keys/subwords.hpp and of FastTextModel's word vectors: fastText's
// dictionary written the slow, obvious way (every n-gram built as a string and hashed from
// scratch, entries found by a linear search, rows summed in plain loops), which the fast index
// and the model must match bit for bit.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ember/types.hpp>

namespace ember_test {

/// fastText's Dictionary::hash, byte by byte: FNV-1a with each byte sign-extended through int8_t.
inline std::uint32_t reference_hash(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (const char c : s) {
    const std::int8_t signed_byte = static_cast<std::int8_t>(c);
    h = h ^ static_cast<std::uint32_t>(signed_byte);
    h = h * 16777619u;
  }
  return h;
}

struct ReferenceDictionary {
  std::vector<std::string> entries;  // words, then labels
  std::size_t nwords = 0;
  int minn = 3;
  int maxn = 6;
  std::int64_t bucket = 2000000;
  int word_ngrams = 1;
  std::optional<std::map<std::int32_t, std::int32_t>> prune;  // bucket -> kept row

  [[nodiscard]] std::int64_t find(const std::string& w) const {
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (entries[i] == w) return static_cast<std::int64_t>(i);
    return -1;
  }

  void push_hash(std::vector<ember::TokenId>& out, std::int32_t id) const {
    if (prune) {
      const auto it = prune->find(id);
      if (it == prune->end()) return;
      id = it->second;
    }
    out.push_back(static_cast<ember::TokenId>(nwords) + id);
  }

  /// The n-grams of `word` (already wrapped in < >): ids and, when asked, their strings.
  void compute_subwords(const std::string& word, std::vector<ember::TokenId>& ids,
                        std::vector<std::string>* strings) const {
    auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (continuation(word[i])) continue;
      std::string ngram;
      std::size_t j = i;
      for (int n = 1; j < word.size() && n <= maxn; ++n) {
        ngram.push_back(word[j++]);
        while (j < word.size() && continuation(word[j])) ngram.push_back(word[j++]);
        const bool edge = n == 1 && (i == 0 || j == word.size());
        if (n >= minn && !edge) {
          const std::uint32_t h = reference_hash(ngram) % static_cast<std::uint32_t>(bucket);
          push_hash(ids, static_cast<std::int32_t>(h));
          if (strings != nullptr) strings->push_back(ngram);
        }
      }
    }
  }

  /// fastText's getSubwords(word): the entry's id first when known, then the n-grams.
  [[nodiscard]] std::vector<ember::TokenId> ids(const std::string& word) const {
    std::vector<ember::TokenId> out;
    const std::int64_t id = find(word);
    if (id >= 0) out.push_back(id);
    if (word != "</s>") compute_subwords("<" + word + ">", out, nullptr);
    return out;
  }

  /// fastText's supervised getLine over tokens (the words, then the word n-grams).
  [[nodiscard]] std::vector<ember::TokenId> line(const std::vector<std::string>& tokens) const {
    std::vector<ember::TokenId> out;
    std::vector<std::int32_t> hashes;
    for (const auto& t : tokens) {
      const std::uint32_t h = reference_hash(t);
      const std::int64_t id = find(t);
      const bool label =
          id >= 0 ? id >= static_cast<std::int64_t>(nwords) : t.rfind("__label__", 0) == 0;
      if (!label) {
        const std::vector<ember::TokenId> w = ids(t);
        out.insert(out.end(), w.begin(), w.end());
        hashes.push_back(static_cast<std::int32_t>(h));
      }
      if (t == "</s>") break;
    }
    for (std::size_t i = 0; i < hashes.size(); ++i) {
      std::uint64_t h = static_cast<std::uint64_t>(static_cast<std::int64_t>(hashes[i]));
      for (std::size_t j = i + 1;
           j < hashes.size() && j < i + static_cast<std::size_t>(word_ngrams); ++j) {
        h = h * 116049371u + static_cast<std::uint64_t>(static_cast<std::int64_t>(hashes[j]));
        push_hash(out, static_cast<std::int32_t>(h % static_cast<std::uint64_t>(bucket)));
      }
    }
    return out;
  }
};

/// fastText's getWordVector over a dense input matrix: zero, add the rows in order, multiply by
/// the float of 1.0 / n.
inline ember::RowVector<float> reference_word_vector(const ember::RowMatrix<float>& input,
                                                     const std::vector<ember::TokenId>& ids) {
  ember::RowVector<float> v(input.cols());
  for (ember::Index j = 0; j < v.size(); ++j) v(j) = 0.0f;
  for (const ember::TokenId r : ids)
    for (ember::Index j = 0; j < v.size(); ++j) v(j) = v(j) + input(r, j);
  if (!ids.empty()) {
    const auto s = static_cast<float>(1.0 / static_cast<double>(ids.size()));
    for (ember::Index j = 0; j < v.size(); ++j) v(j) = v(j) * s;
  }
  return v;
}

}  // namespace ember_test
