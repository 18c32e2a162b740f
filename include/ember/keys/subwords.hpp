/// SubwordIndex: fastText's subword scheme as an index from words to table rows (a word's own row,
/// then the hashed rows of its character n-grams) and from a supervised line to its rows (words,
/// then hashed word n-grams), giving the ids fastText computes, bit for bit.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace detail {

/// fastText's 32-bit FNV-1a: offset basis and prime.
inline constexpr std::uint32_t fnv_offset = 2166136261u;
inline constexpr std::uint32_t fnv_prime = 16777619u;

/// One FNV-1a step as fastText takes it: the byte goes through int8_t before the xor, so a byte
/// >= 0x80 is xored as 0xFFFFFFxx (every released fastText model was trained that way).
[[nodiscard]] constexpr std::uint32_t fnv_step(std::uint32_t h, unsigned char byte) noexcept {
  return (h ^ static_cast<std::uint32_t>(static_cast<std::int8_t>(byte))) * fnv_prime;
}

/// True for a UTF-8 continuation byte (10xxxxxx), which an n-gram never starts with.
[[nodiscard]] constexpr bool is_continuation(unsigned char byte) noexcept {
  return (byte & 0xC0u) == 0x80u;
}

/// h % d for 32-bit h and a divisor d >= 1 fixed in advance, by one multiplication where the
/// compiler has 128-bit integers (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019: exact for every 32-bit h and d), else by the division.
class Modulo32 {
 public:
  constexpr Modulo32() noexcept = default;
  explicit constexpr Modulo32(std::uint32_t d) noexcept
      : d_(d), magic_(d == 0 ? 0 : std::numeric_limits<std::uint64_t>::max() / d + 1) {}
  /// h % d (d != 0, checked by the caller that built it).
  [[nodiscard]] EMBER_ALWAYS_INLINE std::uint32_t operator()(std::uint32_t h) const noexcept {
#if defined(__SIZEOF_INT128__)
    __extension__ using Wide = unsigned __int128;
    const std::uint64_t low = magic_ * h;
    return static_cast<std::uint32_t>((static_cast<Wide>(low) * d_) >> 64);
#else
    return h % d_;
#endif
  }

 private:
  std::uint32_t d_ = 0;
  std::uint64_t magic_ = 0;
};

/// Calls f(hash, begin, end) for each character n-gram of `w` (the word wrapped in "<" ">"), in
/// fastText's order (Dictionary::computeSubwords): by start position, then by length; lengths
/// minn..maxn counted in UTF-8 characters (continuation bytes are never split off), and the lone
/// "<" and ">" left out. `hash` is the FNV-1a of w[begin, end), built one byte at a time.
/// Called by SubwordIndex only (the lengths validated there).
template <class F>
EMBER_ALWAYS_INLINE void for_each_ngram(std::string_view w, std::size_t minn, std::size_t maxn,
                                        F&& f) {
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  const std::size_t len = w.size();
  for (std::size_t i = 0; i < len; ++i) {
    if (is_continuation(p[i])) continue;
    std::uint32_t h = fnv_offset;
    std::size_t j = i;
    for (std::size_t n = 1; j < len && n <= maxn; ++n) {
      h = fnv_step(h, p[j++]);
      while (j < len && is_continuation(p[j])) h = fnv_step(h, p[j++]);
      if (n >= minn && !(n == 1 && (i == 0 || j == len))) f(h, i, j);
    }
  }
}

/// `word` wrapped in "<" ">" in a buffer of the caller's frame (the heap only past 254 bytes).
class Wrapped {
 public:
  explicit Wrapped(std::string_view word) {
    const std::size_t n = word.size() + 2;
    char* out = n <= local_.size() ? local_.data() : (heap_.resize(n), heap_.data());
    out[0] = '<';
    std::copy(word.begin(), word.end(), out + 1);
    out[n - 1] = '>';
    view_ = std::string_view(out, n);
  }
  Wrapped(const Wrapped&) = delete;
  Wrapped& operator=(const Wrapped&) = delete;
  [[nodiscard]] std::string_view view() const noexcept { return view_; }

 private:
  std::array<char, 256> local_;
  std::string heap_;
  std::string_view view_;
};

}  // namespace detail

/// The options of a SubwordIndex, as fastText's training flags name them.
struct SubwordOptions {
  /// Shortest character n-gram, in UTF-8 characters (fastText's -minn; 3 for its word vectors).
  std::int32_t minn = 3;
  /// Longest character n-gram (-maxn; 6 for word vectors, 0 for classifiers: no n-grams).
  std::int32_t maxn = 6;
  /// Number of hashed rows after the words' rows (-bucket). May be 0 only when no n-gram is
  /// hashed (maxn < max(minn, 1) and word_ngrams <= 1).
  std::int64_t bucket = 2000000;
  /// Longest word n-gram of a line (-wordNgrams; 1: words only). Used by line ids only.
  std::int32_t word_ngrams = 1;
  /// Tokens of a line that start with this and are not in the vocabulary are labels, which a line
  /// leaves out (-label). Empty: no such token.
  std::string label_prefix = "__label__";
};

/// A word's n-gram strings and rows, as fastText's get_subwords gives them: for a word of the
/// dictionary, first the word itself and its id, then the n-grams.
///
/// In a pruned index (fastText's `quantize -cutoff`) an n-gram whose bucket was dropped has no row:
/// like fastText, `ngrams` still lists its string but `ids` has no entry for it, so the two lists
/// differ in length (rows() gives the rows alone).
struct Subwords {
  std::vector<std::string> ngrams;
  std::vector<TokenId> ids;
};

/// The rows of a batch of words as EmbeddingBag takes them: bag b is
/// ids[offsets[b] .. offsets[b+1]) (the last bag runs to the end), PyTorch's offsets layout.
struct SubwordBags {
  std::vector<TokenId> ids;
  std::vector<TokenId> offsets;
};

/// fastText's subword scheme as an index from words to the rows of a table of vocab_size() rows:
/// rows [0, nwords()) are the words, rows nwords() + h (h in [0, bucket())) hashed n-grams.
///
/// The ids of a word (fastText's Dictionary::getSubwords): its own row when it is in the
/// vocabulary, then for each character n-gram of "<" word ">" (by start, then length; minn..maxn
/// UTF-8 characters, continuation bytes never split, the lone "<" and ">" left out) the row
/// nwords() + hash(ngram) % bucket(). hash() is fastText's 32-bit FNV-1a, each byte sign-extended
/// through int8_t before the xor, which changes the rows of non-ASCII n-grams and is kept. "</s>"
/// (fastText's end-of-line token) has no n-grams. The ids of a line (fastText's supervised
/// Dictionary::getLine) are the ids of its words in order, then one row per word n-gram of 2 ..
/// word_ngrams consecutive words: nwords() + (h[i]·116049371 + h[i+1]) ... % bucket() over the
/// words' hashes sign-extended to 64 bits, as fastText computes it.
///
/// A fastText dictionary also holds labels (ids nwords() .. nwords() + nlabels() - 1), which have
/// no rows of their own; looked up as a word, a label gives id nwords() + its index, which fastText
/// then reads as an input row: subwords() reproduces that, ids() keeps it only when it is a row.
///
/// With any ember table of vocab_size() rows and an EmbeddingBag, this gives fastText's word
/// vectors (bags() then mean pooling; FastTextModel::word_vector for fastText's exact bits) or
/// trains subword embeddings of one's own with ember's optimizers.
///
/// Thread safety: const members may be called concurrently. Copyable and movable.
///
/// Example:
/// ```cpp
/// ember::SubwordIndex index({"cat", "dog"}, {.minn = 3, .maxn = 5, .bucket = 100000});
/// std::vector<ember::TokenId> rows = index.ids("cats");   // no own row: n-grams only
/// ember::EmbeddingBag<float> bag(index.vocab_size(), 64, ember::BagMode::mean);
/// ember::SubwordBags b = index.bags(std::vector<std::string>{"cat", "cats"});
/// ember::RowMatrix<float> vectors = bag.forward(b.ids, b.offsets);  // 2 x 64
/// ```
class SubwordIndex {
 public:
  /// fastText's end-of-line token: in the vocabulary like any word, but without n-grams.
  static constexpr std::string_view eos = "</s>";

  /// An index of no words with the default options.
  SubwordIndex() : SubwordIndex(std::vector<std::string>{}) {}

  /// The index of `words` (word i gets row i) under `options`.
  /// Throws: ValueError (value() = the position) for an empty or repeated word; ValueError for
  /// options fastText could not use: minn, maxn or word_ngrams negative, bucket outside
  /// [0, 2^31 - 1] or 0 while n-grams are hashed, or more rows than fastText's 32-bit ids hold.
  /// Complexity: O(total length of the words).
  explicit SubwordIndex(const std::vector<std::string>& words, SubwordOptions options = {})
      : SubwordIndex(views(words), {}, std::move(options), std::nullopt) {}

  /// The index of `words` and `labels` (label j gets id nwords() + j, as in a fastText
  /// dictionary). Throws: as below.
  SubwordIndex(const std::vector<std::string>& words, const std::vector<std::string>& labels,
               SubwordOptions options)
      : SubwordIndex(views(words), views(labels), std::move(options), std::nullopt) {}

  /// A whole fastText dictionary: its words, its labels (ids nwords() + j) and, for a pruned model,
  /// `kept`: for each hashed row kept, the pair (bucket h, position p), so the n-grams of bucket h
  /// use row nwords() + p and those of any other bucket none (fastText's pruneidx; empty: every
  /// n-gram dropped). vocab_size() is then nwords() + kept->size(). The strings are copied.
  /// Throws: as above, labels like words (value() = the id of the empty or repeated entry: its
  /// position among the words, or nwords() + its position among the labels); ValueError for a
  /// kept bucket outside [0, bucket()) or repeated, or a position outside [0, kept->size()) or
  /// repeated.
  SubwordIndex(std::span<const std::string_view> words, std::span<const std::string_view> labels,
               SubwordOptions options,
               std::optional<std::vector<std::pair<std::int32_t, std::int32_t>>> kept)
      : options_(std::move(options)) {
    check_options();
    nwords_ = static_cast<Index>(words.size());
    nlabels_ = static_cast<Index>(labels.size());
    constexpr auto max_id = static_cast<Index>(std::numeric_limits<std::int32_t>::max());
    if (nwords_ + nlabels_ > max_id || nwords_ + options_.bucket > max_id) {
      throw ValueError("SubwordIndex: " + std::to_string(nwords_) + " words, " +
                           std::to_string(nlabels_) + " labels and " +
                           std::to_string(options_.bucket) +
                           " buckets need more ids than fastText's 32-bit ids hold",
                       static_cast<double>(nwords_ + options_.bucket));
    }
    modulo_ = detail::Modulo32(static_cast<std::uint32_t>(options_.bucket));
    rows_ = nwords_ + options_.bucket;
    build_table(words, labels);
    if (kept) set_kept(std::move(*kept));
  }

  /// fastText's 32-bit FNV-1a of `s` (Dictionary::hash), each byte sign-extended through int8_t.
  [[nodiscard]] static constexpr std::uint32_t hash(std::string_view s) noexcept {
    std::uint32_t h = detail::fnv_offset;
    for (const char c : s) h = detail::fnv_step(h, static_cast<unsigned char>(c));
    return h;
  }

  /// Number of words (rows [0, nwords()) of the table).
  [[nodiscard]] Index nwords() const noexcept { return nwords_; }
  /// Number of labels (ids [nwords(), nwords() + nlabels()), no rows of their own).
  [[nodiscard]] Index nlabels() const noexcept { return nlabels_; }
  /// Number of hash buckets.
  [[nodiscard]] Index bucket() const noexcept { return options_.bucket; }
  /// Rows of the table the ids index: nwords() + bucket(), or nwords() + the kept buckets.
  [[nodiscard]] Index vocab_size() const noexcept { return rows_; }
  /// The options the index was built with.
  [[nodiscard]] const SubwordOptions& options() const noexcept { return options_; }
  /// True for the index of a pruned fastText model (some buckets have no row).
  [[nodiscard]] bool pruned() const noexcept { return pruned_; }

  /// The id of a word (in [0, nwords())) or label (in [nwords(), nwords() + nlabels())), or
  /// std::nullopt. Complexity: one hash of `token` and, on average, about one comparison.
  [[nodiscard]] std::optional<TokenId> find(std::string_view token) const noexcept {
    return find(token, hash(token));
  }

  /// The word or label of `id`. Throws: IndexError if id is outside [0, nwords() + nlabels()).
  [[nodiscard]] std::string_view token(TokenId id) const {
    const Index n = nwords_ + nlabels_;
    if (id < 0 || id >= n) {
      throw IndexError("SubwordIndex::token: id " + std::to_string(id) + " is outside [0, " +
                           std::to_string(n) + ")",
                       -1, id, n);
    }
    return entry(id);
  }
  /// True when `id` is a label's id (in [nwords(), nwords() + nlabels())).
  [[nodiscard]] bool is_label(TokenId id) const noexcept {
    return id >= nwords_ && id < nwords_ + nlabels_;
  }

  /// The row of one n-gram string (fastText's getSubwordId): nwords() + hash(ngram) % bucket(),
  /// through the kept buckets of a pruned index (std::nullopt when dropped, or when bucket() is 0).
  [[nodiscard]] std::optional<TokenId> ngram_row(std::string_view ngram) const noexcept {
    if (options_.bucket == 0) return std::nullopt;
    return bucket_row(modulo_(hash(ngram)));
  }

  /// Calls f(row) for each row of `word`, in fastText's order (its own row, then the n-grams),
  /// without allocating for words up to 254 bytes. Rows are in [0, vocab_size()).
  /// Throws: only what f throws. Complexity: one hash of the word and one per n-gram, about
  /// length · (maxn - minn + 1) rows.
  template <class F>
  void for_each_id(std::string_view word, F&& f) const {
    const std::uint32_t h = hash(word);
    if (const auto id = find(word, h); id && *id < rows_) f(*id);
    for_each_ngram_row(word, f);
  }

  /// Appends the rows of `word` to `out` (see for_each_id).
  void append_ids(std::string_view word, std::vector<TokenId>& out) const {
    for_each_id(word, [&](TokenId r) { out.push_back(r); });
  }
  /// The rows of `word`: fastText's getSubwords, its word vector being their mean.
  /// Shapes: word → ids[n], n = (1 when the word has a row of its own) + the n-grams whose bucket
  /// has a row. Complexity: as for_each_id.
  [[nodiscard]] std::vector<TokenId> ids(std::string_view word) const {
    std::vector<TokenId> out;
    append_ids(word, out);
    return out;
  }

  /// The n-gram strings and ids of `word`, as fastText's get_subwords returns them (see
  /// Subwords): a word or label of the dictionary first, with its id (a label's id nwords() + j
  /// even when that is no row: fastText's value), then its n-grams.
  /// Shapes: ngrams[m], ids[m'] with m' <= m (m' < m only in a pruned index).
  /// Complexity: as for_each_id, plus a string per n-gram.
  [[nodiscard]] Subwords subwords(std::string_view word) const {
    Subwords out;
    if (const auto id = find(word)) {
      out.ngrams.emplace_back(word);
      out.ids.push_back(*id);
    }
    if (word == eos) return out;
    const detail::Wrapped w(word);
    detail::for_each_ngram(w.view(), umin(), umax(),
                           [&](std::uint32_t h, std::size_t begin, std::size_t end) {
                             out.ngrams.emplace_back(w.view().substr(begin, end - begin));
                             if (const auto r = bucket_row(modulo_(h))) out.ids.push_back(*r);
                           });
    return out;
  }

  /// The rows of each word of `words` (any range of strings), as bags for EmbeddingBag.
  /// Complexity: O(total length · maxn).
  template <std::ranges::input_range R>
  requires std::convertible_to<std::ranges::range_reference_t<R>, std::string_view>
  [[nodiscard]] SubwordBags bags(const R& words) const {
    SubwordBags out;
    for (const auto& w : words) {
      out.offsets.push_back(static_cast<TokenId>(out.ids.size()));
      append_ids(std::string_view(w), out.ids);
    }
    return out;
  }

  /// Appends the rows of a tokenized line to `out`, as fastText's supervised getLine: up to and
  /// including the first "</s>", each token that is a word (of the vocabulary or not) gives its
  /// rows, a label of the dictionary or a token starting with label_prefix nothing; then one row
  /// per word n-gram (2 .. word_ngrams consecutive words, by start then length).
  /// Shapes: tokens[t] → out += the rows of the words, then, when word_ngrams > 1, at most
  /// (t - 1)·(word_ngrams - 1) word n-gram rows. Complexity: O(total length · (maxn - minn + 1) + t
  /// · word_ngrams).
  void append_line_ids(std::span<const std::string_view> tokens, std::vector<TokenId>& out) const {
    std::vector<std::int32_t> hashes;  // fastText keeps the hashes as int32
    hashes.reserve(tokens.size());
    for (const std::string_view tok : tokens) {
      const std::uint32_t h = hash(tok);
      const auto id = find(tok, h);
      const bool label = id ? *id >= nwords_ : is_label_token(tok);
      if (!label) {
        if (id) out.push_back(*id);
        for_each_ngram_row(tok, [&](TokenId r) { out.push_back(r); });
        hashes.push_back(static_cast<std::int32_t>(h));
      }
      if (tok == eos) break;
    }
    if (options_.word_ngrams <= 1 || hashes.empty()) return;
    const auto n = static_cast<std::size_t>(options_.word_ngrams);
    const auto b = static_cast<std::uint64_t>(options_.bucket);
    for (std::size_t i = 0; i < hashes.size(); ++i) {
      auto h = static_cast<std::uint64_t>(static_cast<std::int64_t>(hashes[i]));
      for (std::size_t j = i + 1; j < hashes.size() && j - i < n; ++j) {
        h = h * 116049371u + static_cast<std::uint64_t>(static_cast<std::int64_t>(hashes[j]));
        if (const auto r = bucket_row(static_cast<std::uint32_t>(h % b))) out.push_back(*r);
      }
    }
  }
  /// The rows of a tokenized line (any range of strings); see append_line_ids.
  /// Complexity: as append_line_ids.
  template <std::ranges::input_range R>
  requires std::convertible_to<std::ranges::range_reference_t<R>, std::string_view>
  [[nodiscard]] std::vector<TokenId> line_ids(const R& tokens) const {
    std::vector<std::string_view> views;
    for (const auto& t : tokens) views.emplace_back(t);
    std::vector<TokenId> out;
    append_line_ids(views, out);
    return out;
  }

 private:
  [[nodiscard]] std::size_t umin() const noexcept {
    return static_cast<std::size_t>(options_.minn);
  }
  [[nodiscard]] std::size_t umax() const noexcept {
    return static_cast<std::size_t>(options_.maxn);
  }

  [[nodiscard]] std::string_view entry(Index i) const noexcept {
    const std::uint64_t begin = i == 0 ? 0 : ends_[static_cast<std::size_t>(i - 1)];
    const std::uint64_t end = ends_[static_cast<std::size_t>(i)];
    return std::string_view(chars_).substr(begin, end - begin);
  }

  [[nodiscard]] std::size_t slot_of(std::uint32_t h) const noexcept {
    return static_cast<std::size_t>((std::uint64_t{h} * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  [[nodiscard]] std::optional<TokenId> find(std::string_view token,
                                            std::uint32_t h) const noexcept {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = slot_of(h);; s = (s + 1) & mask) {
      const std::int32_t id = slots_[s];
      if (id < 0) return std::nullopt;
      if (hashes_[static_cast<std::size_t>(id)] == h && entry(id) == token) return TokenId{id};
    }
  }

  [[nodiscard]] bool is_label_token(std::string_view tok) const noexcept {
    return !options_.label_prefix.empty() && tok.starts_with(options_.label_prefix);
  }

  /// The row of bucket h (fastText's pushHash): nwords() + h, or through the kept buckets.
  [[nodiscard]] std::optional<TokenId> bucket_row(std::uint32_t h) const noexcept {
    if (!pruned_) return nwords_ + static_cast<TokenId>(h);
    const auto key = static_cast<std::int32_t>(h);
    const auto it = std::lower_bound(kept_.begin(), kept_.end(), key,
                                     [](const auto& e, std::int32_t k) { return e.first < k; });
    if (it == kept_.end() || it->first != key) return std::nullopt;
    return nwords_ + static_cast<TokenId>(it->second);
  }

  /// Calls f(row) for each n-gram row of `word` ("</s>" has none).
  template <class F>
  void for_each_ngram_row(std::string_view word, F&& f) const {
    if (word == eos || !has_char_ngrams()) return;
    const detail::Wrapped w(word);
    detail::for_each_ngram(w.view(), umin(), umax(),
                           [&](std::uint32_t h, std::size_t, std::size_t) {
                             if (const auto r = bucket_row(modulo_(h))) f(*r);
                           });
  }

  [[nodiscard]] bool has_char_ngrams() const noexcept {
    return options_.maxn >= 1 && options_.maxn >= options_.minn;
  }

  void check_options() const {
    auto fail = [](const std::string& what, double value) {
      throw ValueError("SubwordIndex: " + what, value);
    };
    for (const auto& [name, value] : {std::pair{"minn", options_.minn},
                                      {"maxn", options_.maxn},
                                      {"word_ngrams", options_.word_ngrams}}) {
      if (value < 0) fail(name + (" " + std::to_string(value)) + " is negative", value);
    }
    const std::int64_t b = options_.bucket;
    if (b < 0 || b > std::numeric_limits<std::int32_t>::max()) {
      fail("bucket " + std::to_string(b) + " is outside [0, 2147483647]", static_cast<double>(b));
    }
    if (b == 0 && (has_char_ngrams() || options_.word_ngrams > 1)) {
      fail("bucket 0 leaves no row for the n-grams (minn " + std::to_string(options_.minn) +
               ", maxn " + std::to_string(options_.maxn) + ", word_ngrams " +
               std::to_string(options_.word_ngrams) + ")",
           0.0);
    }
  }

  static std::vector<std::string_view> views(const std::vector<std::string>& words) {
    return {words.begin(), words.end()};
  }

  void build_table(std::span<const std::string_view> words,
                   std::span<const std::string_view> labels) {
    const std::size_t n = words.size() + labels.size();
    std::size_t total = 0;
    for (const auto w : words) total += w.size();
    for (const auto l : labels) total += l.size();
    chars_.reserve(total);
    ends_.reserve(n);
    hashes_.reserve(n);
    std::size_t size = 2;
    int bits = 1;
    while (size < 2 * n) {
      size *= 2;
      ++bits;
    }
    slots_.assign(size, -1);
    shift_ = 64 - bits;
    auto add = [&](std::string_view s, std::size_t pos, const char* kind) {
      const auto id = static_cast<std::int32_t>(ends_.size());
      if (s.empty()) {
        throw ValueError("SubwordIndex: the " + std::string(kind) + " at position " +
                             std::to_string(pos) + " is empty",
                         static_cast<double>(id));
      }
      const std::uint32_t h = hash(s);
      if (const auto other = find(s, h)) {
        throw ValueError("SubwordIndex: the " + std::string(kind) + " '" + std::string(s) +
                             "' at position " + std::to_string(pos) + " repeats id " +
                             std::to_string(*other),
                         static_cast<double>(id));
      }
      std::size_t slot = slot_of(h);  // the first free slot of h's probe
      while (slots_[slot] >= 0) slot = (slot + 1) & (size - 1);
      slots_[slot] = id;
      chars_ += s;
      ends_.push_back(chars_.size());
      hashes_.push_back(h);
    };
    for (std::size_t i = 0; i < words.size(); ++i) add(words[i], i, "word");
    for (std::size_t i = 0; i < labels.size(); ++i) add(labels[i], i, "label");
  }

  void set_kept(std::vector<std::pair<std::int32_t, std::int32_t>> kept) {
    const auto n = static_cast<std::int64_t>(kept.size());
    std::vector<bool> seen(kept.size(), false);
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const auto [h, p] = kept[i];
      if (h < 0 || h >= options_.bucket) {
        throw ValueError("SubwordIndex: kept bucket " + std::to_string(h) + " at position " +
                             std::to_string(i) + " is outside [0, " +
                             std::to_string(options_.bucket) + ")",
                         static_cast<double>(i));
      }
      if (p < 0 || p >= n || seen[static_cast<std::size_t>(p)]) {
        throw ValueError("SubwordIndex: kept row " + std::to_string(p) + " at position " +
                             std::to_string(i) + " is outside [0, " + std::to_string(n) +
                             ") or repeated",
                         static_cast<double>(i));
      }
      seen[static_cast<std::size_t>(p)] = true;
    }
    std::sort(kept.begin(), kept.end());
    for (std::size_t i = 1; i < kept.size(); ++i) {
      if (kept[i].first == kept[i - 1].first) {
        throw ValueError(
            "SubwordIndex: kept bucket " + std::to_string(kept[i].first) + " is listed twice",
            static_cast<double>(kept[i].first));
      }
    }
    kept_ = std::move(kept);
    pruned_ = true;
    rows_ = nwords_ + n;
  }

  SubwordOptions options_;
  Index nwords_ = 0;
  Index nlabels_ = 0;
  Index rows_ = 0;
  detail::Modulo32 modulo_;
  std::string chars_;                  // every word, then every label, back to back
  std::vector<std::uint64_t> ends_;    // end of entry i in chars_
  std::vector<std::uint32_t> hashes_;  // hash() of entry i
  std::vector<std::int32_t> slots_;    // open addressing: an entry id, or -1
  int shift_ = 63;
  bool pruned_ = false;
  std::vector<std::pair<std::int32_t, std::int32_t>> kept_;  // sorted by bucket
};

}  // namespace ember::inline EMBER_ISA
