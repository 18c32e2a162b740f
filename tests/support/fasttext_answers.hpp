// fastText's own answers for a model (tests/data/fasttext/<model>.tsv, written by
// make_fixtures.py with fastText's Python module) and the check that a FastTextModel gives them:
// dictionary, word vectors and sentence vectors bit for bit, subwords exactly, neighbours and
// analogies with the same words in the same order and the same float scores, predictions with
// the same labels in the same order and probabilities within 1e-6.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/io/fasttext.hpp>

namespace ember_test {

/// Splits s at every `sep` (empty fields kept).
inline std::vector<std::string> split_fields(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

/// The space-separated words of s (none for an empty s).
inline std::vector<std::string> words_of(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  return split_fields(s, ' ');
}

/// A float printed with %.9g: parses back to the same float.
inline float parse_float(const std::string& s) { return std::strtof(s.c_str(), nullptr); }

inline std::vector<float> parse_floats(const std::string& s) {
  std::vector<float> out;
  for (const auto& w : words_of(s)) out.push_back(parse_float(w));
  return out;
}

/// Bitwise equality of float vectors (so -0 and 0 differ, as fastText's bits do).
inline bool same_bits(const ember::RowVector<float>& got, const std::vector<float>& want) {
  if (static_cast<std::size_t>(got.size()) != want.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float g = got(static_cast<ember::Index>(i));
    if (std::memcmp(&g, &want[i], sizeof g) != 0) return false;
  }
  return true;
}

inline std::string show(const ember::RowVector<float>& v) {
  std::ostringstream os;
  os.precision(9);
  for (ember::Index i = 0; i < v.size(); ++i) os << (i ? " " : "") << v(i);
  return os.str();
}

/// Counts of what was compared, so a test can require that the answers were not empty.
struct AnswerCounts {
  std::size_t vectors = 0, subwords = 0, neighbours = 0, analogies = 0, sentences = 0,
              predictions = 0, words = 0;
};

/// Compares `model` with fastText's answers in `tsv_path` record by record.
inline AnswerCounts check_fasttext_answers(const ember::io::FastTextModel& model,
                                           const std::string& tsv_path) {
  std::ifstream in(tsv_path, std::ios::binary);
  REQUIRE(in.good());
  AnswerCounts n;
  std::string line;
  ember::Index next_word = 0, next_label = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split_fields(line, '\t');
    const std::string& kind = f[0];
    INFO(tsv_path << ": " << line.substr(0, 200));
    if (kind == "args") {
      const auto& a = model.args();
      CHECK(std::stoi(f[1]) == a.dim);
      CHECK(std::stoi(f[6]) == a.word_ngrams);
      CHECK(std::stoi(f[7]) == static_cast<int>(a.loss));
      CHECK(std::stoi(f[8]) == static_cast<int>(a.model));
      CHECK(std::stoi(f[9]) == a.bucket);
      CHECK(std::stoi(f[10]) == a.minn);
      CHECK(std::stoi(f[11]) == a.maxn);
    } else if (kind == "quant") {
      CHECK(model.quantized() == (f[1] == "1"));
    } else if (kind == "word") {
      CHECK(model.word(next_word) == f[1]);
      CHECK(model.word_count(next_word) == std::stoll(f[2]));
      ++next_word;
      ++n.words;
    } else if (kind == "label") {
      CHECK(model.label(next_label) == f[1]);
      CHECK(model.label_count(next_label) == std::stoll(f[2]));
      ++next_label;
    } else if (kind == "vector") {
      const ember::RowVector<float> v = model.word_vector(f[1]);
      INFO("ember: " << show(v));
      CHECK(same_bits(v, parse_floats(f[2])));
      ++n.vectors;
    } else if (kind == "subwords") {
      const ember::Subwords s = model.subwords(f[1]);
      CHECK(s.ngrams == words_of(f[2]));
      std::vector<ember::TokenId> ids;
      for (const auto& w : words_of(f[3])) ids.push_back(std::stoll(w));
      CHECK(s.ids == ids);
      ++n.subwords;
    } else if (kind == "nn" || kind == "analogy") {
      const bool nn = kind == "nn";
      const std::size_t k_field = nn ? 2 : 4;
      const auto k = static_cast<ember::Index>(std::stoi(f[k_field]));
      const auto got = nn ? model.nearest(f[1], k) : model.analogies(f[1], f[2], f[3], k);
      const std::vector<std::string> want = words_of(f[k_field + 1]);
      REQUIRE(got.size() * 2 == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("rank " << i);
        CHECK(model.word(got[i].id) == want[2 * i]);
        CHECK(got[i].score == parse_float(want[2 * i + 1]));
      }
      ++(nn ? n.neighbours : n.analogies);
    } else if (kind == "sentence") {
      const ember::RowVector<float> v = model.sentence_vector(f[1]);
      INFO("ember: " << show(v));
      CHECK(same_bits(v, parse_floats(f[2])));
      ++n.sentences;
    } else if (kind == "predict") {
      const auto k = static_cast<ember::Index>(std::stoi(f[2]));
      const float threshold = parse_float(f[3]);
      const auto got = model.predict(f[1], k, threshold);
      const std::vector<std::string> want = words_of(f[4]);
      REQUIRE(got.size() * 2 == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("rank " << i);
        CHECK(got[i].label == want[2 * i]);
        CHECK(model.label(got[i].id) == got[i].label);
        CHECK(std::abs(got[i].probability - parse_float(want[2 * i + 1])) <= 1e-6f);
      }
      ++n.predictions;
    } else {
      FAIL("unknown record kind " << kind);
    }
  }
  CHECK(next_word == model.nwords());
  if (model.supervised()) CHECK(next_label == model.nlabels());
  return n;
}

}  // namespace ember_test
