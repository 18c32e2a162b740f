// Tests of ember/keys/subwords.hpp: fastText's hash (its sign extension included), the n-grams
// and rows of words and lines against the plain reference (tests/support/subwords_reference.hpp)
// for random UTF-8 and invalid bytes, the prune index, bad options, and training subword
// embeddings with EmbeddingBag and an optimizer.
// SPDX-License-Identifier: MIT
#include "ember/keys/subwords.hpp"

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/bag.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/sparse_grad.hpp"

#include "support/error_checks.hpp"
#include "support/subwords_reference.hpp"

using ember::SubwordIndex;
using ember::SubwordOptions;
using ember::TokenId;

namespace {

/// Random words over ASCII, 2-, 3- and 4-byte characters and stray bytes (lone continuation
/// bytes, 0xFF), so the continuation rule and the sign extension are both exercised.
std::vector<std::string> random_words(std::size_t n, std::uint32_t seed) {
  const std::vector<std::string> pieces = {
      "a",  "b",  "z", "<",        ">",    "_",    "é",    "ß",       "ñ", "東",
      "京", "猫", "🍕", "👍🏽", "\x80", "\xBF", "\xFF", "e\u0301", " ", "</s>"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string w;
    const auto len = rng() % 9;
    for (std::uint32_t k = 0; k < len; ++k) w += pieces[rng() % pieces.size()];
    out.push_back(w);
  }
  return out;
}

ember_test::ReferenceDictionary reference_of(const std::vector<std::string>& words,
                                             const std::vector<std::string>& labels,
                                             const SubwordOptions& o) {
  ember_test::ReferenceDictionary ref;
  ref.entries = words;
  ref.entries.insert(ref.entries.end(), labels.begin(), labels.end());
  ref.nwords = words.size();
  ref.minn = o.minn;
  ref.maxn = o.maxn;
  ref.bucket = o.bucket;
  ref.word_ngrams = o.word_ngrams;
  return ref;
}

const std::vector<std::string> kWords = {"</s>", "the", "cat", "café", "東京", "🍕", "naïve"};
const std::vector<std::string> kLabels = {"__label__food", "__label__city"};

}  // namespace

TEST_CASE("hash is fastText's FNV-1a with each byte sign-extended", "[subwords]") {
  CHECK(SubwordIndex::hash("") == 2166136261u);
  CHECK(SubwordIndex::hash("a") == 0xe40c292cu);  // plain FNV-1a for ASCII
  CHECK(SubwordIndex::hash("foobar") == 0xbf9cf968u);
  // "é" is C3 A9: xored as FFFFFFC3 and FFFFFFA9, not C3 and A9.
  std::uint32_t h = 2166136261u;
  h = (h ^ 0xFFFFFFC3u) * 16777619u;
  h = (h ^ 0xFFFFFFA9u) * 16777619u;
  CHECK(SubwordIndex::hash("é") == h);
  std::uint32_t unsigned_fnv = 2166136261u;
  unsigned_fnv = (unsigned_fnv ^ 0xC3u) * 16777619u;
  unsigned_fnv = (unsigned_fnv ^ 0xA9u) * 16777619u;
  CHECK(SubwordIndex::hash("é") != unsigned_fnv);
  for (const auto& w : random_words(500, 3))
    CHECK(SubwordIndex::hash(w) == ember_test::reference_hash(w));
}

TEST_CASE("the 32-bit remainder by multiplication equals the division", "[subwords]") {
  std::mt19937 rng(11);
  for (const std::uint32_t d : {1u, 2u, 3u, 7u, 300u, 2000000u, 2147483647u, 4294967295u}) {
    const ember::detail::Modulo32 mod(d);
    for (const std::uint32_t h : {0u, 1u, d - 1, d, 4294967295u, 2166136261u})
      CHECK(mod(h) == h % d);
    for (int i = 0; i < 2000; ++i) {
      const auto h = static_cast<std::uint32_t>(rng());
      CHECK(mod(h) == h % d);
    }
  }
}

TEST_CASE("ids and subwords of words match the reference for every n-gram range", "[subwords]") {
  const auto words = random_words(300, 7);
  for (const auto& [minn, maxn] : std::vector<std::pair<int, int>>{
           {3, 6}, {2, 5}, {1, 1}, {0, 3}, {4, 2}, {0, 0}, {3, 3}, {1, 12}}) {
    const SubwordOptions o{.minn = minn, .maxn = maxn, .bucket = 1009, .word_ngrams = 3};
    INFO("minn " << minn << " maxn " << maxn);
    const SubwordIndex index(kWords, kLabels, o);
    const auto ref = reference_of(kWords, kLabels, o);
    CHECK(index.vocab_size() == 7 + 1009);
    std::vector<std::string> probes = words;
    probes.insert(probes.end(), kWords.begin(), kWords.end());
    probes.insert(probes.end(), kLabels.begin(), kLabels.end());
    for (const auto& w : probes) {
      INFO("word '" << w << "'");
      CHECK(index.ids(w) == ref.ids(w));
      const ember::Subwords s = index.subwords(w);
      std::vector<std::string> strings;
      std::vector<TokenId> ids;
      if (ref.find(w) >= 0) {
        strings.push_back(w);
        ids.push_back(ref.find(w));
      }
      if (w != "</s>") ref.compute_subwords("<" + w + ">", ids, &strings);
      CHECK(s.ngrams == strings);
      CHECK(s.ids == ids);
    }
  }
}

TEST_CASE("n-grams never split a UTF-8 character and skip the lone brackets", "[subwords]") {
  const SubwordIndex index(std::vector<std::string>{}, {.minn = 1, .maxn = 2, .bucket = 97});
  const ember::Subwords s = index.subwords("é猫");
  CHECK(s.ngrams == std::vector<std::string>{"<é", "é", "é猫", "猫", "猫>"});
  const ember::Subwords eos = index.subwords("</s>");
  CHECK(eos.ngrams.empty());
  CHECK(index.ids("</s>").empty());
  REQUIRE(index.ngram_row("é猫"));
  CHECK(*index.ngram_row("é猫") == static_cast<TokenId>(SubwordIndex::hash("é猫") % 97));
}

TEST_CASE("the word's own id comes first, labels give their fastText id", "[subwords]") {
  const SubwordIndex index(kWords, kLabels, {.minn = 2, .maxn = 3, .bucket = 50});
  const std::vector<TokenId> cat = index.ids("cat");
  REQUIRE_FALSE(cat.empty());
  CHECK(cat.front() == 2);
  CHECK(index.find("cat") == TokenId{2});
  CHECK(index.find("__label__city") == TokenId{8});
  CHECK(index.is_label(8));
  CHECK_FALSE(index.is_label(6));
  CHECK(index.token(8) == "__label__city");
  CHECK_FALSE(index.find("dog"));
  // fastText reads label j as input row nwords + j.
  CHECK(index.ids("__label__food").front() == 7);
  CHECK(index.subwords("__label__food").ids.front() == 7);
  CHECK_THROWS_AS(index.token(9), ember::IndexError);
  CHECK_THROWS_AS(index.token(-1), ember::IndexError);
}

TEST_CASE("line ids are the words' rows then the hashed word n-grams", "[subwords]") {
  std::mt19937 rng(5);
  const auto words = random_words(60, 9);
  for (const int n : {1, 2, 3, 5}) {
    const SubwordOptions o{.minn = 3, .maxn = 4, .bucket = 211, .word_ngrams = n};
    const SubwordIndex index(kWords, kLabels, o);
    const auto ref = reference_of(kWords, kLabels, o);
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<std::string> line;
      const auto len = rng() % 9;
      for (std::uint32_t k = 0; k < len; ++k) {
        const auto pick = rng() % 4;
        line.push_back(pick == 0   ? kWords[rng() % kWords.size()]
                       : pick == 1 ? kLabels[rng() % kLabels.size()]
                       : pick == 2 ? "__label__unknown"
                                   : words[rng() % words.size()]);
      }
      line.push_back("</s>");
      line.push_back("after-the-end");
      INFO("word_ngrams " << n << ", trial " << trial);
      CHECK(index.line_ids(line) == ref.line(line));
    }
  }
}

TEST_CASE("a pruned index keeps only the listed buckets", "[subwords]") {
  const SubwordOptions o{.minn = 2, .maxn = 3, .bucket = 13, .word_ngrams = 2};
  const std::vector<std::pair<std::int32_t, std::int32_t>> kept = {{5, 1}, {0, 0}, {12, 2}};
  std::vector<std::string_view> words(kWords.begin(), kWords.end());
  const SubwordIndex index(words, {}, o, kept);
  CHECK(index.pruned());
  CHECK(index.vocab_size() == 7 + 3);
  auto ref = reference_of(kWords, {}, o);
  ref.prune = std::map<std::int32_t, std::int32_t>{{5, 1}, {0, 0}, {12, 2}};
  for (const auto& w : random_words(200, 13)) {
    INFO("word '" << w << "'");
    const auto ids = index.ids(w);
    CHECK(ids == ref.ids(w));
    for (const TokenId r : ids) CHECK((r >= 0 && r < index.vocab_size()));
    // fastText lists every n-gram string but only the rows kept.
    std::vector<TokenId> ref_ids;
    std::vector<std::string> ref_strings;
    if (w != "</s>") ref.compute_subwords("<" + w + ">", ref_ids, &ref_strings);
    if (ref.find(w) < 0) {
      CHECK(index.subwords(w).ngrams == ref_strings);
      CHECK(index.subwords(w).ids == ref_ids);
    }
  }
  const SubwordIndex none(words, {}, o, std::vector<std::pair<std::int32_t, std::int32_t>>{});
  CHECK(none.ids("cats").empty());
  CHECK(none.ids("cat") == std::vector<TokenId>{2});
  CHECK(none.vocab_size() == 7);
}

TEST_CASE("bad options, words and prune indexes are refused", "[subwords]") {
  using V = std::vector<std::string>;
  using ember::ValueError;
  CHECK_THROWS_WITH(SubwordIndex(V{}, {.minn = -1}), Catch::Contains("minn -1 is negative"));
  CHECK_THROWS_AS(SubwordIndex(V{}, {.maxn = -2}), ValueError);
  CHECK_THROWS_AS(SubwordIndex(V{}, {.word_ngrams = -1}), ValueError);
  CHECK_THROWS_WITH(SubwordIndex(V{}, {.bucket = -5}), Catch::Contains("bucket -5 is outside"));
  CHECK_THROWS_AS(SubwordIndex(V{}, {.bucket = std::int64_t{1} << 31}), ValueError);
  CHECK_THROWS_WITH(SubwordIndex(V{}, {.minn = 3, .maxn = 6, .bucket = 0}),
                    Catch::Contains("bucket 0 leaves no row"));
  CHECK_THROWS_AS(SubwordIndex(V{}, {.minn = 0, .maxn = 0, .bucket = 0, .word_ngrams = 2}),
                  ValueError);
  CHECK_NOTHROW(SubwordIndex(V{"a"}, {.minn = 0, .maxn = 0, .bucket = 0}));
  CHECK_NOTHROW(SubwordIndex(V{"a"}, {.minn = 4, .maxn = 3, .bucket = 0}));
  const auto dup = ember_test::catch_as<ValueError>([] { SubwordIndex(V{"a", "b", "a"}); });
  REQUIRE(dup);
  CHECK(dup->value() == 2);
  CHECK_THAT(dup->what(), Catch::Contains("'a' at position 2 repeats id 0"));
  CHECK_THROWS_WITH(SubwordIndex(V{"a", ""}), Catch::Contains("at position 1 is empty"));
  const std::vector<std::string_view> w = {"a"};
  const std::vector<std::string_view> l = {"a"};
  const auto label_dup =
      ember_test::catch_as<ValueError>([&] { SubwordIndex(w, l, {}, std::nullopt); });
  REQUIRE(label_dup);
  CHECK(label_dup->value() == 1);
  using Kept = std::vector<std::pair<std::int32_t, std::int32_t>>;
  const SubwordOptions o{.bucket = 10};
  CHECK_THROWS_WITH(SubwordIndex(w, {}, o, Kept{{10, 0}}), Catch::Contains("kept bucket 10"));
  CHECK_THROWS_WITH(SubwordIndex(w, {}, o, Kept{{1, 1}}), Catch::Contains("kept row 1"));
  CHECK_THROWS_AS(SubwordIndex(w, {}, o, Kept{{1, 0}, {2, 0}}), ValueError);
  CHECK_THROWS_WITH(SubwordIndex(w, {}, o, Kept{{1, 0}, {1, 1}}), Catch::Contains("listed twice"));
}

TEST_CASE("bags of subword ids train subword embeddings with EmbeddingBag and SGD",
          "[subwords][bag]") {
  const SubwordIndex index(kWords, {.minn = 2, .maxn = 4, .bucket = 64});
  ember::EmbeddingBag<float> bag(index.vocab_size(), 8, ember::BagMode::mean, /*seed=*/3);
  const std::vector<std::string> batch = {"cat", "café", "東京"};
  const ember::SubwordBags b = index.bags(batch);
  REQUIRE(b.offsets == std::vector<TokenId>{0, static_cast<TokenId>(index.ids("cat").size()),
                                            static_cast<TokenId>(index.ids("cat").size() +
                                                                 index.ids("café").size())});
  // Pull every word's vector towards the all-ones target: L = 1/2 sum |v - 1|^2.
  auto loss = [&] {
    const ember::RowMatrix<float> v = bag.forward(b.ids, b.offsets);
    return 0.5 * (v.array() - 1.0f).square().sum();
  };
  const ember::RowVector<float> cats_before = bag.forward(index.ids("cats"), std::vector<int>{0});
  const double before = loss();
  ember::optim::SGD<float> sgd({.lr = 0.5});
  for (int step = 0; step < 20; ++step) {
    const ember::RowMatrix<float> v = bag.forward(b.ids, b.offsets);
    const ember::RowMatrix<float> grad_out = v.array() - 1.0f;
    ember::SparseRowGrad<float> grad;
    bag.backward(b.ids, b.offsets, grad_out, grad);
    sgd.step(bag.embedding(), grad);
  }
  CHECK(loss() < 0.05 * before);
  // "cats" was never trained but shares n-grams with "cat": its vector moved too.
  const ember::RowVector<float> cats_after = bag.forward(index.ids("cats"), std::vector<int>{0});
  CHECK((cats_after - cats_before).norm() > 0.1f);
}
