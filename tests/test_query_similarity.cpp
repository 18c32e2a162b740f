#include <ember/query/similarity.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/init.hpp>
#include <ember/io/word2vec.hpp>

#include "support/io_files.hpp"
#include "support/similarity_reference.hpp"

using ember::RowMatrix;
using ember::TokenId;
using ember::query::Neighbours;

namespace {

template <class T>
RowMatrix<T> normal_table(ember::Index v, ember::Index d, std::uint64_t seed) {
  RowMatrix<T> m(v, d);
  ember::Init::normal(1.0).fill(m, seed);
  return m;
}

template <class T>
void check_same(const std::vector<ember::query::Neighbour<T>>& got,
                const std::vector<ember_test::RefNeighbour>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("rank " << i);
    CHECK(got[i].id == want[i].id);
    CHECK_THAT(static_cast<double>(got[i].score), Catch::Matchers::WithinAbs(want[i].score, tol));
  }
}

}  // namespace

TEST_CASE("queries reproduce gensim's most_similar and most_similar_cosmul answers",
          "[query][similarity]") {
  const auto wv = ember::io::load_word2vec_binary<float>(ember_test::data_file("tiny_w2v.bin"));
  const Neighbours<float> nn(wv.vectors, wv.vocab);
  const auto queries = ember_test::read_gensim_answers(ember_test::data_file("gensim_answers.tsv"));
  REQUIRE(queries.size() >= 15);
  int compared = 0;
  for (const auto& q : queries) {
    INFO(q.kind << " +" << q.positive.size() << " -" << q.negative.size() << " first "
                << (q.positive.empty() ? "" : q.positive[0]));
    if (q.kind == "similarity") {
      CHECK_THAT(nn.similarity(q.positive[0], q.negative[0]),
                 Catch::Matchers::WithinAbs(q.answers[0].second, 1e-5));
      continue;
    }
    const auto pos = wv.vocab.ids(q.positive);
    const auto neg = wv.vocab.ids(q.negative);
    ember::query::QueryOptions opt;
    opt.restrict_to = q.restrict_vocab;
    const auto got = q.kind == "most_similar" ? nn.most_similar(pos, neg, q.topn, opt)
                                              : nn.most_similar_cosmul(pos, neg, q.topn, opt);
    REQUIRE(got.size() == q.answers.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("rank " << i);
      CHECK(nn.word(got[i].id) == q.answers[i].first);
      CHECK_THAT(got[i].score, Catch::Matchers::WithinAbs(q.answers[i].second, 1e-5));
      ++compared;
    }
  }
  CHECK(compared > 150);
  // The convenience forms agree with the general one.
  CHECK(nn.nearest("king", 10) == nn.most_similar(wv.vocab.ids({"king"}), {}, 10));
  CHECK(nn.analogy("man", "king", "woman", 3) ==
        nn.most_similar(wv.vocab.ids({"king", "woman"}), wv.vocab.ids({"man"}), 3));
  CHECK(nn.word(nn.analogy("man", "king", "woman", 1, ember::query::AnalogyMethod::mul)[0].id) ==
        "queen");
}

TEMPLATE_TEST_CASE("nearest, most_similar and cosmul match the slow reference",
                   "[query][similarity]", float, double) {
  const auto table = normal_table<TestType>(300, 17, 11);
  const Neighbours<TestType> nn(table);
  const double tol = std::is_same_v<TestType, float> ? 1e-5 : 1e-12;
  for (TokenId id : {0, 7, 299}) {
    check_same(nn.nearest(id, 12), ember_test::ref_most_similar(table, {id}, {}, 12), tol);
  }
  check_same(nn.most_similar(std::vector<TokenId>{3, 4}, std::vector<TokenId>{5}, 9),
             ember_test::ref_most_similar(table, {3, 4}, {5}, 9), tol);
  check_same(nn.most_similar(std::vector<TokenId>{}, std::vector<TokenId>{8}, 4),
             ember_test::ref_most_similar(table, {}, {8}, 4), tol);
  check_same(nn.most_similar_cosmul(std::vector<TokenId>{3, 4}, std::vector<TokenId>{5, 6}, 9),
             ember_test::ref_most_similar_cosmul(table, {3, 4}, {5, 6}, 9), tol);
  ember::query::QueryOptions opt;
  opt.restrict_to = 50;
  check_same(nn.nearest(2, 8, opt), ember_test::ref_most_similar(table, {2}, {}, 8, 50), tol);
  // k larger than the candidates: every other row, sorted.
  CHECK(nn.nearest(1, 1000).size() == 299);
  CHECK(nn.nearest(1, 0).empty());
  CHECK_THAT(static_cast<double>(nn.similarity(3, 9)),
             Catch::Matchers::WithinAbs(ember_test::ref_cosine(ember_test::ref_row(table, 3),
                                                               ember_test::ref_row(table, 9)),
                                        tol));
  CHECK_THAT(static_cast<double>(ember::query::cosine(table, 3, 9)),
             Catch::Matchers::WithinAbs(static_cast<double>(nn.similarity(3, 9)), tol));
}

TEST_CASE("the batched blocked GEMM path equals the single-query path", "[query][similarity]") {
  // More rows than one block so the merge across blocks is exercised.
  const auto table = normal_table<float>(Neighbours<float>::block_rows * 2 + 123, 8, 5);
  const Neighbours<float> nn(table);
  const auto queries = normal_table<float>(6, 8, 99);
  ember::query::QueryOptions opt;
  opt.exclude = {0, 5000, 8300};
  const auto batch = nn.nearest_batch(queries, 15, opt);
  REQUIRE(batch.size() == 6);
  for (ember::Index i = 0; i < queries.rows(); ++i) {
    const auto single = nn.nearest(queries.row(i), 15, opt);
    REQUIRE(single.size() == 15);
    for (std::size_t r = 0; r < single.size(); ++r) {
      CHECK(batch[static_cast<std::size_t>(i)][r].id == single[r].id);
      CHECK_THAT(batch[static_cast<std::size_t>(i)][r].score,
                 Catch::Matchers::WithinAbs(single[r].score, 1e-5));
      CHECK(single[r].id != 5000);
    }
  }
  // A vector query equal to a row finds that row first with cosine 1 (nothing excluded).
  const auto self = nn.nearest(table.row(42), 1);
  CHECK(self[0].id == 42);
  CHECK_THAT(self[0].score, Catch::Matchers::WithinAbs(1.0, 1e-6));
}

TEST_CASE("zero-norm rows have cosine 0 with everything, never NaN", "[query][similarity]") {
  RowMatrix<float> t(4, 2);
  t << 1, 0, 0, 0, -1, 0, 0.5f, 0.5f;  // row 1 is zero
  const Neighbours<float> nn(t);
  CHECK(nn.norms()(1) == 0.0f);
  CHECK(nn.similarity(0, 1) == 0.0f);
  CHECK(nn.similarity(1, 1) == 0.0f);
  const auto a = nn.nearest(0, 3);
  REQUIRE(a.size() == 3);
  CHECK(a[0].id == 3);
  CHECK(a[1].id == 1);  // cosine 0
  CHECK(a[1].score == 0.0f);
  CHECK(a[2].id == 2);  // cosine -1
  // A zero query scores 0 everywhere: ties broken by lower id.
  const auto z = nn.nearest(1, 3);
  CHECK(z == std::vector<ember::query::Neighbour<float>>{{0, 0.0f}, {2, 0.0f}, {3, 0.0f}});
  const auto zv = nn.nearest(Eigen::RowVector2f(0, 0), 2);
  CHECK(zv[0].id == 0);
  for (const auto& r :
       nn.most_similar_cosmul(std::vector<TokenId>{1}, std::vector<TokenId>{0}, 3)) {
    CHECK_FALSE(std::isnan(r.score));
  }
  CHECK(ember::query::cosine(Eigen::RowVector2f(0, 0), Eigen::RowVector2f(1, 0)) == 0.0f);
}

TEST_CASE("ties are broken by the lower id", "[query][similarity]") {
  RowMatrix<double> t(5, 2);
  t << 1, 0, 0, 1, 2, 0, 3, 0, 0, 2;
  const Neighbours<double> nn(t);
  const auto r = nn.nearest(Eigen::RowVector2d(1, 0), 5);
  CHECK(r[0].id == 0);
  CHECK(r[1].id == 2);
  CHECK(r[2].id == 3);
  CHECK(r[3].id == 1);
  CHECK(r[4].id == 4);
}

TEST_CASE("queries validate their input and name the problem", "[query][similarity]") {
  RowMatrix<float> t(3, 2);
  t << 1, 0, 0, 1, 1, 1;
  const Neighbours<float> nn(t);
  CHECK_THROWS_AS(nn.nearest(3, 1), ember::IndexError);
  CHECK_THROWS_WITH(nn.nearest(-1, 1), Catch::Contains("id -1 at position 0 is outside [0, 3)"));
  CHECK_THROWS_AS(nn.nearest(0, -1), ember::ValueError);
  ember::query::QueryOptions opt;
  opt.restrict_to = 4;
  CHECK_THROWS_AS(nn.nearest(0, 1, opt), ember::ValueError);
  opt.restrict_to = 0;
  opt.exclude = {7};
  CHECK_THROWS_AS(nn.nearest(0, 1, opt), ember::IndexError);
  CHECK_THROWS_AS(nn.nearest(Eigen::RowVector3f(1, 2, 3), 1), ember::ShapeError);
  CHECK_THROWS_AS(nn.nearest(Eigen::RowVector2f(1, NAN), 1), ember::ValueError);
  CHECK_THROWS_AS(nn.most_similar({}, {}, 1), ember::ValueError);
  CHECK_THROWS_AS(nn.most_similar_cosmul({}, std::vector<TokenId>{1}, 1), ember::ValueError);
  CHECK_THROWS_AS(nn.nearest("word", 1), ember::ValueError);  // no vocabulary
  const Neighbours<float> named(t, ember::io::Vocabulary({"a", "b", "c"}));
  CHECK_THROWS_AS(named.nearest("zzz", 1), ember::KeyError);
  CHECK_THROWS_WITH(named.nearest("zzz", 1), Catch::Contains("'zzz'"));
  CHECK_THROWS_AS(Neighbours<float>(t, ember::io::Vocabulary({"a"})), ember::ShapeError);
  RowMatrix<float> bad = t;
  bad(2, 1) = INFINITY;
  CHECK_THROWS_WITH(Neighbours<float>(bad), Catch::Contains("row 2, column 1"));
}
