// The fuzz harness of ember's fastText loader (io/fasttext.hpp), shared like those of harness.hpp
// by the libFuzzer binary (fuzz_fasttext.cpp) and the Catch2 replay (test_fuzz_regressions.cpp).
// Whatever the bytes: a FastTextModel whose sizes agree and whose answers stay in bounds (rows,
// label ids, neighbour ids), or an ember exception naming the file.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/io/fasttext.hpp"
#include "fuzz/harness.hpp"

namespace ember_fuzz {

/// Loads the bytes as a fastText model and asks it every kind of question.
inline void fuzz_fasttext(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const ember::io::FastTextModel m = ember::io::load_fasttext(path);
    require(m.dim() >= 1, "a model of dimension < 1 accepted");
    require(m.input_rows() == m.subword_index().vocab_size(), "input rows differ from the index");
    require(m.output_rows() == (m.supervised() ? m.nlabels() : m.nwords()),
            "output rows differ from the dictionary");
    if (!m.quantized()) require(all_finite(m.input_matrix()), "non-finite input accepted");
    for (const char* w : {"a", "ab", "\xc3\xa9t\xc3\xa9", "</s>", "__label__a", ""}) {
      for (const ember::TokenId r : m.subword_index().ids(w)) {
        require(r >= 0 && r < m.input_rows(), "a subword row outside the input matrix");
      }
      require(m.word_vector(w).size() == m.dim(), "word vector of the wrong size");
      const ember::Subwords s = m.subwords(w);
      require(s.ids.size() <= s.ngrams.size(), "more subword ids than n-grams");
    }
    require(m.sentence_vector("a \xc3\xa9 b").size() == m.dim(), "sentence vector size");
    if (m.supervised()) {
      expect_ok_or_ember_error(path, [&] {
        const auto p = m.predict("a b ab", -1);
        require(static_cast<ember::Index>(p.size()) <= m.nlabels(), "more predictions than labels");
        for (const auto& x : p) {
          require(x.id >= 0 && x.id < m.nlabels(), "a prediction's label outside the labels");
          require(!std::isnan(x.probability), "a NaN probability");
        }
      });
    }
    expect_ok_or_ember_error(path, [&] {
      const auto nn = m.nearest("ab", 3);
      require(nn.size() <= 3, "more neighbours than asked for");
      for (const auto& x : nn)
        require(x.id >= 0 && x.id < m.nwords(), "a neighbour outside the words");
    });
  });
  expect_ok_or_ember_error(path, [&] {
    const auto m = ember::io::load_fasttext(path, {.allow_non_finite = true});
    require(m.input_rows() == m.subword_index().vocab_size(), "input rows differ from the index");
  });
}

}  // namespace ember_fuzz
