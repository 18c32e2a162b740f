#include <ember/io/word2vec.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/io_files.hpp"

using ember::FormatError;
using ember::RowMatrix;
using ember::io::WordFormat;
using ember_test::data_file;
using ember_test::ScratchDir;

TEST_CASE("the three gensim fixtures load to the same vocabulary and table", "[io][word2vec]") {
  const auto bin = ember::io::load_word2vec_binary<float>(data_file("tiny_w2v.bin"));
  const auto txt = ember::io::load_word2vec_text<float>(data_file("tiny_w2v.txt"));
  const auto glove = ember::io::load_glove<float>(data_file("tiny_glove.txt"));
  REQUIRE(bin.vectors.rows() == 74);
  REQUIRE(bin.vectors.cols() == 16);
  CHECK(bin.vocab.size() == 74);
  CHECK(bin.vocab.token(0) == "the");
  CHECK(bin.vocab.contains("café"));
  CHECK(bin.vocab.contains("naïve"));
  CHECK(txt.vocab.tokens() == bin.vocab.tokens());
  CHECK(glove.vocab.tokens() == bin.vocab.tokens());
  // gensim writes float32 repr()s in text: they parse back to the same floats.
  CHECK(txt.vectors == bin.vectors);
  CHECK(glove.vectors == bin.vectors);
  CHECK_THAT(bin.vectors(0, 0), Catch::Matchers::WithinAbs(-0.1712435, 1e-7));
  const auto d =
      ember::io::load_word_vectors<double>(data_file("tiny_w2v.bin"), WordFormat::word2vec_binary);
  CHECK(d.vectors == bin.vectors.cast<double>());
}

TEST_CASE("save_word2vec_binary reproduces gensim's file byte for byte", "[io][word2vec]") {
  ScratchDir dir;
  const auto wv = ember::io::load_word2vec_binary<float>(data_file("tiny_w2v.bin"));
  ember::io::save_word2vec_binary(dir.file("out.bin"), wv.vocab, wv.vectors);
  CHECK(ember_test::read_bytes(dir.file("out.bin")) ==
        ember_test::read_bytes(data_file("tiny_w2v.bin")));
}

TEST_CASE("word-vector writers produce the documented bytes and round-trip", "[io][word2vec]") {
  ScratchDir dir;
  ember::io::Vocabulary vocab({"a", "b c"});
  RowMatrix<float> m(2, 2);
  m << 0.5f, -1.0f, 0.1f, 2.0f;
  ember::io::save_word2vec_text(dir.file("t.txt"), vocab, m);
  CHECK(ember_test::read_bytes(dir.file("t.txt")) ==
        ember_test::bytes_of("2 2\na 0.5 -1\nb c 0.1 2\n"));
  ember::io::save_glove(dir.file("g.txt"), vocab, m);
  CHECK(ember_test::read_bytes(dir.file("g.txt")) == ember_test::bytes_of("a 0.5 -1\nb c 0.1 2\n"));
  const auto t = ember::io::load_word2vec_text<float>(dir.file("t.txt"));
  const auto g = ember::io::load_glove<float>(dir.file("g.txt"));
  CHECK(t.vectors == m);
  CHECK(g.vectors == m);
  CHECK(g.vocab.token(1) == "b c");  // parsed from the right

  ember::io::Vocabulary v2({"x", "y"});
  ember::io::save_word2vec_binary(dir.file("b.bin"), v2, m);
  std::vector<unsigned char> expected = ember_test::bytes_of("2 2\nx ");
  ember_test::append_le(expected, 0.5f);
  ember_test::append_le(expected, -1.0f);
  ember_test::append(expected, ember_test::bytes_of("y "));
  ember_test::append_le(expected, 0.1f);
  ember_test::append_le(expected, 2.0f);
  CHECK(ember_test::read_bytes(dir.file("b.bin")) == expected);
  CHECK(ember::io::load_word2vec_binary<float>(dir.file("b.bin")).vectors == m);
  // A double table keeps its precision in text.
  RowMatrix<double> md(1, 1);
  md << 0.1;
  ember::io::save_word2vec_text(dir.file("d.txt"), ember::io::Vocabulary({"z"}), md);
  CHECK(ember::io::load_word2vec_text<double>(dir.file("d.txt")).vectors(0, 0) == 0.1);
  // Words a format cannot hold.
  CHECK_THROWS_AS(ember::io::save_word2vec_binary(dir.file("x.bin"), vocab, m), ember::ValueError);
  CHECK_THROWS_AS(ember::io::save_glove(dir.file("x.txt"), ember::io::Vocabulary({"a"}), m),
                  ember::ShapeError);
  CHECK(dir.entries() == 4);
}

TEST_CASE("word2vec.c style files: newline after each binary record, trailing spaces in text",
          "[io][word2vec]") {
  ScratchDir dir;
  std::vector<unsigned char> b = ember_test::bytes_of("2 1\nx ");
  ember_test::append_le(b, 1.0f);
  ember_test::append(b, ember_test::bytes_of("\ny "));
  ember_test::append_le(b, 2.0f);
  ember_test::append(b, ember_test::bytes_of("\n"));
  ember_test::write_bytes(dir.file("c.bin"), b);
  const auto wb = ember::io::load_word2vec_binary<float>(dir.file("c.bin"));
  CHECK(wb.vocab.tokens() == std::vector<std::string>{"x", "y"});
  CHECK(wb.vectors(1, 0) == 2.0f);
  ember_test::write_text(dir.file("c.txt"), "2 2\r\nx 1.000000 2.000000 \r\ny 3 +4 \r\n");
  const auto wt = ember::io::load_word2vec_text<float>(dir.file("c.txt"));
  CHECK(wt.vectors(1, 1) == 4.0f);
  CHECK(wt.vocab.token(0) == "x");
}

TEST_CASE("limit reads only the first n vectors", "[io][word2vec]") {
  ember::io::WordVectorsLoadOptions opt;
  opt.limit = 5;
  for (auto fmt : {WordFormat::word2vec_binary, WordFormat::word2vec_text, WordFormat::glove}) {
    const char* file = fmt == WordFormat::word2vec_binary ? "tiny_w2v.bin"
                       : fmt == WordFormat::word2vec_text ? "tiny_w2v.txt"
                                                          : "tiny_glove.txt";
    const auto full = ember::io::load_word_vectors<float>(data_file(file), fmt);
    const auto wv = ember::io::load_word_vectors<float>(data_file(file), fmt, opt);
    CHECK(wv.vocab.size() == 5);
    CHECK(wv.vectors == full.vectors.topRows(5));
  }
  opt.limit = 0;
  CHECK(ember::io::load_word2vec_binary<float>(data_file("tiny_w2v.bin"), opt).vectors.rows() == 0);
  opt.limit = -1;
  CHECK_THROWS_AS(ember::io::load_glove<float>(data_file("tiny_glove.txt"), opt),
                  ember::ValueError);
}

namespace {

void check_w2v_error(const std::string& path, WordFormat fmt, const std::string& fragment,
                     std::uint64_t offset, bool is_line) {
  try {
    (void)ember::io::load_word_vectors<float>(path, fmt);
    FAIL("no exception for " << fragment);
  } catch (const FormatError& e) {
    CHECK_THAT(e.what(), Catch::Contains(fragment));
    CHECK_THAT(e.what(), Catch::Contains(path));
    CHECK(e.offset() == offset);
    CHECK(e.is_line() == is_line);
  }
}

}  // namespace

TEST_CASE("text loaders reject bad files naming the line", "[io][word2vec]") {
  ScratchDir dir;
  int n = 0;
  auto file = [&](const std::string& text) {
    const std::string p = dir.file("t" + std::to_string(n++) + ".txt");
    ember_test::write_text(p, text);
    return p;
  };
  const auto w2v = WordFormat::word2vec_text;
  const auto glove = WordFormat::glove;
  check_w2v_error(file(""), w2v, "empty file", 1, true);
  check_w2v_error(file(""), glove, "empty file", 1, true);
  check_w2v_error(file("hello world\n"), w2v, "bad word2vec header", 1, true);
  check_w2v_error(file("2 0\n"), w2v, "dimension 0", 1, true);
  check_w2v_error(file("1000000000000 300\nx 1\n"), w2v, "more than the", 1, true);
  check_w2v_error(file("99999999999999999999999 3\n"), w2v, "bad word2vec header", 1, true);
  check_w2v_error(file("3 2\na 1.0 2.0\nb 3.0 4.0\n"), w2v, "file ends after 2 of 3 vectors", 4,
                  true);
  check_w2v_error(file("2 2\na 1 2\na 3 4\n"), w2v, "duplicate word 'a'", 3, true);
  check_w2v_error(file("2 2\na 1 2\nb 3\n"), w2v, "expected a word and 2 values", 3, true);
  check_w2v_error(file("2 2\na 1 2\nb 3 x4\n"), w2v, "is not a number", 3, true);
  check_w2v_error(file("2 2\na 1 2\nb 3 nan\n"), w2v, "non-finite value nan at column 1", 3, true);
  check_w2v_error(file("2 2\na 1 2\n\xff\xfe 3 4\n"), w2v, "not valid UTF-8", 3, true);
  check_w2v_error(file("2 2\na 1 2\n\nb 1 2\n"), w2v, "empty line", 3, true);
  check_w2v_error(file("hello\n"), glove, "no vector values", 1, true);
  check_w2v_error(file("a 1 2\nb x\n"), glove, "expected a word and 2 values", 2, true);
  check_w2v_error(file("a 1 2\nb 1 inf\n"), glove, "non-finite value inf", 2, true);
  check_w2v_error(file("a 1 2\nb 1 2\na 0 0\n"), glove, "duplicate word 'a'", 3, true);
  // GloVe: a token made of several fields, one of them numeric, is kept whole.
  const auto g = ember::io::load_glove<float>(file(". . . 1 2\n1999 3 4\n"));
  CHECK(g.vocab.tokens() == std::vector<std::string>{". . .", "1999"});
  CHECK(g.vectors(1, 1) == 4.0f);
}

TEST_CASE("the binary loader rejects bad files naming the byte offset and record",
          "[io][word2vec]") {
  ScratchDir dir;
  int n = 0;
  auto file = [&](const std::vector<unsigned char>& bytes) {
    const std::string p = dir.file("b" + std::to_string(n++) + ".bin");
    ember_test::write_bytes(p, bytes);
    return p;
  };
  const auto bin = WordFormat::word2vec_binary;
  auto record = [](const std::string& word, std::initializer_list<float> v) {
    std::vector<unsigned char> b = ember_test::bytes_of(word + " ");
    for (float f : v) ember_test::append_le(b, f);
    return b;
  };
  check_w2v_error(file({}), bin, "empty file", 0, false);
  check_w2v_error(file(ember_test::bytes_of("2 2")), bin, "no end of line", 3, false);
  check_w2v_error(file(ember_test::bytes_of("x y\n")), bin, "bad word2vec header", 1, true);
  check_w2v_error(file(ember_test::bytes_of("4611686018427387904 2\n")), bin, "more than the", 0,
                  false);
  auto b = ember_test::bytes_of("2 2\n");
  // A long first word leaves room for the size check (2 x (8 + 2) bytes) but not for record 1,
  // which starts at byte 4 + 6 + 8 = 18.
  ember_test::append(b, record("alpha", {1, 2}));
  auto truncated = b;
  ember_test::append(truncated, ember_test::bytes_of("b "));
  truncated.resize(truncated.size() + 5, 0);
  check_w2v_error(file(truncated), bin, "record 1: file ends inside the vector of 'b'", 18, false);
  auto noword = b;
  noword.resize(b.size() + 10, 'z');
  check_w2v_error(file(noword), bin, "record 1: file ends inside the word", 18, false);
  auto dup = b;
  ember_test::append(dup, record("alpha", {3, 4}));
  check_w2v_error(file(dup), bin, "record 1: duplicate word 'alpha'", 18, false);
  auto bad_utf8 = b;
  ember_test::append(bad_utf8, record("\xc3\x28", {3, 4}));
  check_w2v_error(file(bad_utf8), bin, "record 1: word '\\xc3(' is not valid UTF-8", 18, false);
  auto nan = b;
  ember_test::append(nan, record("b", {3, std::numeric_limits<float>::quiet_NaN()}));
  check_w2v_error(file(nan), bin, "record 1: non-finite value at column 1 of word 'b'", 18 + 2 + 4,
                  false);
  ember::io::WordVectorsLoadOptions allow;
  allow.allow_non_finite = true;
  CHECK(std::isnan(ember::io::load_word2vec_binary<float>(file(nan), allow).vectors(1, 1)));
}

TEST_CASE("a missing word-vector file is a FileError naming the call that opened it",
          "[io][word2vec]") {
  ember_test::check_missing_file("io::load_word2vec_binary", [](const std::string& p) {
    static_cast<void>(ember::io::load_word2vec_binary<float>(p));
  });
  ember_test::check_missing_file("io::load_word2vec_text", [](const std::string& p) {
    static_cast<void>(ember::io::load_word2vec_text<float>(p));
  });
  ember_test::check_missing_file("io::load_glove", [](const std::string& p) {
    static_cast<void>(ember::io::load_glove<float>(p));
  });
  for (const WordFormat format :
       {WordFormat::word2vec_binary, WordFormat::word2vec_text, WordFormat::glove}) {
    ember_test::check_missing_file("io::load_word_vectors", [&](const std::string& p) {
      static_cast<void>(ember::io::load_word_vectors<float>(p, format));
    });
  }
}
