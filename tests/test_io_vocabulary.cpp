#include <ember/io/vocabulary.hpp>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/io_files.hpp"

using ember::io::Vocabulary;
using ember_test::ScratchDir;

TEST_CASE("Vocabulary maps tokens to ids and back", "[io][vocabulary]") {
  Vocabulary v({"<unk>", "the", "cat", "naïve"});
  CHECK(v.size() == 4);
  CHECK(v.id("cat") == 2);
  CHECK(v.token(3) == "naïve");
  CHECK(v.find("dog") == std::nullopt);
  CHECK(v.contains("the"));
  CHECK(v.add("dog") == 4);
  CHECK(v.add("the") == 1);  // existing id, nothing added
  CHECK(v.size() == 5);
  CHECK(v.ids({"the", "dog"}) == std::vector<ember::TokenId>{1, 4});
}

TEST_CASE("unknown tokens throw KeyError or map to the unk id, as the caller decides",
          "[io][vocabulary]") {
  Vocabulary v({"<unk>", "the", "cat"});
  try {
    (void)v.id("qeen");
    FAIL("no throw");
  } catch (const ember::KeyError& e) {
    CHECK(e.key() == "qeen");
    CHECK_THAT(e.what(), Catch::Contains("token 'qeen' is not in the vocabulary (3 tokens)"));
  }
  CHECK_THROWS_AS(v.ids(std::vector<std::string>{"the", "dog"}), ember::KeyError);
  v.set_unk_id(0);
  CHECK(v.id("qeen") == 0);
  CHECK(v.ids({"the", "dog"}) == std::vector<ember::TokenId>{1, 0});
  v.clear_unk_id();
  CHECK_THROWS_AS(v.id("qeen"), ember::KeyError);
  CHECK_THROWS_AS(v.set_unk_id(3), ember::IndexError);
  CHECK_THROWS_AS(v.token(-1), ember::IndexError);
  CHECK_THROWS_WITH(v.token(3), "Vocabulary::token: id 3 is outside [0, 3)");
  CHECK_THROWS_AS(Vocabulary({"a", "b", "a"}), ember::ValueError);
  CHECK_THROWS_WITH(Vocabulary({"a", "b", "a"}),
                    Catch::Contains("position 2 duplicates position 0"));
}

TEST_CASE("load_vocabulary reads one token per line and save_vocabulary writes it back",
          "[io][vocabulary]") {
  ScratchDir dir;
  ember_test::write_text(dir.file("v.txt"), "<unk>\nthe\r\nNew York\ncafé");
  ember::io::VocabularyLoadOptions opt;
  opt.unk_token = "<unk>";
  const auto v = ember::io::load_vocabulary(dir.file("v.txt"), opt);
  CHECK(v.tokens() == std::vector<std::string>{"<unk>", "the", "New York", "café"});
  CHECK(v.unk_id() == 0);
  CHECK(v.id("missing") == 0);
  ember::io::save_vocabulary(dir.file("out.txt"), v);
  CHECK(ember_test::read_bytes(dir.file("out.txt")) ==
        ember_test::bytes_of("<unk>\nthe\nNew York\ncafé\n"));
  CHECK(ember::io::load_vocabulary(dir.file("out.txt")).tokens() == v.tokens());
  CHECK(ember::io::load_vocabulary(dir.file("out.txt")).unk_id() == std::nullopt);
  CHECK_THROWS_AS(ember::io::save_vocabulary(dir.file("bad.txt"), Vocabulary({"a\nb"})),
                  ember::ValueError);
  CHECK(dir.entries() == 2);
}

TEST_CASE("load_vocabulary rejects bad files naming the line", "[io][vocabulary]") {
  ScratchDir dir;
  auto check = [&](const std::string& text, const std::string& fragment, std::uint64_t line,
                   ember::io::VocabularyLoadOptions opt = {}) {
    ember_test::write_text(dir.file("bad.txt"), text);
    try {
      (void)ember::io::load_vocabulary(dir.file("bad.txt"), opt);
      FAIL("no throw for " << fragment);
    } catch (const ember::FormatError& e) {
      CHECK_THAT(e.what(),
                 Catch::Contains(dir.file("bad.txt") + ":" + std::to_string(line) + ": "));
      CHECK_THAT(e.what(), Catch::Contains(fragment));
      CHECK(e.offset() == line);
      CHECK(e.is_line());
    }
  };
  check("a\nb\na\n", "duplicate token 'a' (first on line 1)", 3);
  check("a\n\nb\n", "empty token", 2);
  check("a\n\xc0\xaf\n", "not valid UTF-8", 2);
  ember::io::VocabularyLoadOptions opt;
  opt.unk_token = "<unk>";
  check("a\nb\n", "unk token '<unk>' is not in the file", 2, opt);
  check("", "empty file, expected one token per line", 1);
  CHECK_THROWS_AS(ember::io::load_vocabulary(dir.file("nope.txt")), ember::FormatError);
}

TEST_CASE("Vocabulary::with_repeats keeps every id's token and maps a repeat to its first id",
          "[io][vocabulary]") {
  auto v = ember::io::Vocabulary::with_repeats({"<unk>", "a", "b", "a", "c", "a"});
  CHECK(v.size() == 6);
  CHECK(v.token(3) == "a");
  CHECK(v.token(5) == "a");
  CHECK(v.id("a") == 1);
  CHECK(v.id("c") == 4);
  CHECK(v.ids({"b", "a"}) == std::vector<ember::TokenId>{2, 1});
  // add() of a repeated string returns its first id and appends nothing.
  CHECK(v.add("a") == 1);
  CHECK(v.size() == 6);
  // Truncating past a repeat keeps the first id's entry; truncating before it drops the token.
  v.truncate(4);
  CHECK(v.id("a") == 1);
  CHECK_FALSE(v.contains("c"));
  v.truncate(1);
  CHECK_FALSE(v.contains("a"));
  CHECK(v.id("<unk>") == 0);
  // The checked constructor still refuses repeats.
  CHECK_THROWS_AS(ember::io::Vocabulary({"a", "a"}), ember::ValueError);
}

TEST_CASE("a missing vocabulary file is a FileError naming the call that opened it",
          "[io][vocabulary]") {
  ember_test::check_missing_file("io::load_vocabulary", [](const std::string& p) {
    static_cast<void>(ember::io::load_vocabulary(p));
  });
}
