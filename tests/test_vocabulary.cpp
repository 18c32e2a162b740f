// Tests of ember/keys/vocabulary.hpp: a vocabulary maps tokens to rows without any file, queries
// take it from there, and io::Vocabulary is the same type for the loaders' users.
// SPDX-License-Identifier: MIT
#include "ember/keys/vocabulary.hpp"

#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/io/vocabulary.hpp"
#include "ember/query/similarity.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"

using ember::Vocabulary;

static_assert(std::is_same_v<ember::io::Vocabulary, ember::Vocabulary>,
              "io::Vocabulary names the keys layer's type");

TEST_CASE("a vocabulary maps tokens to rows and back, with an optional unknown row",
          "[vocabulary]") {
  Vocabulary vocab({"<unk>", "the", "cat"});
  CHECK(vocab.size() == 3);
  CHECK(vocab.id("cat") == 2);
  CHECK(vocab.token(1) == "the");
  CHECK_FALSE(vocab.find("dog"));
  const auto missing = ember_test::catch_as<ember::KeyError>([&] { (void)vocab.id("dog"); });
  REQUIRE(missing);
  CHECK(std::string(missing->what()) ==
        "Vocabulary::id: token 'dog' is not in the vocabulary (3 tokens)");
  CHECK(missing->key() == "dog");
  vocab.set_unk_id(0);
  CHECK(vocab.ids({"the", "dog"}) == std::vector<ember::TokenId>{1, 0});
  const auto bad = ember_test::catch_as<ember::IndexError>([&] { (void)vocab.token(3); });
  REQUIRE(bad);
  CHECK(std::string(bad->what()) == "Vocabulary::token: id 3 is outside [0, 3)");
  CHECK(bad->value() == 3);
  CHECK(bad->bound() == 3);
  const auto twice = ember_test::catch_as<ember::ValueError>([] { Vocabulary({"a", "b", "a"}); });
  REQUIRE(twice);
  CHECK(std::string(twice->what()) == "Vocabulary: token 'a' at position 2 duplicates position 0");
}

TEST_CASE("neighbour queries take words from a vocabulary, no file involved", "[vocabulary]") {
  const ember::RowMatrix<float> table = ember_test::random_table<float>(3, 4, 1);
  const ember::query::Neighbours<float> nn(table, Vocabulary({"a", "b", "c"}));
  REQUIRE(nn.vocabulary() != nullptr);
  CHECK(nn.id("c") == 2);
  CHECK(nn.word(1) == "b");
  CHECK(nn.nearest("a", 2).size() == 2);
}
