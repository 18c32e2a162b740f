// Tests of Embedding's training members: padding_idx, scale_grad_by_freq, freeze /
// from_pretrained, renorm_rows and resize.
// SPDX-License-Identifier: MIT
#include <ember/embedding.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::random_table;
using ember_test::same_bits;

TEST_CASE("padding_idx zeroes its row, counts from the end when negative and gets no gradient",
          "[embedding][padding]") {
  ember::Embedding<float> emb(6, 3, 1);
  emb.set_padding_idx(-2);
  REQUIRE(emb.padding_idx() == 4);
  CHECK(emb.weight().row(4).isZero(0));
  CHECK_FALSE(emb.weight().row(3).isZero(0));

  ember::SparseRowGrad<float> g;
  const std::vector<TokenId> ids{4, 1, 4, 2};
  RowMatrix<float> grad_out = RowMatrix<float>::Ones(4, 3);
  emb.backward(ids, grad_out, g);
  REQUIRE(g.size() == 2);
  CHECK(g.rows()[0] == 1);
  CHECK(g.rows()[1] == 2);
  // Forward still returns the padding row (zeros, as in PyTorch).
  CHECK(emb.forward(ids).row(0).isZero(0));

  emb.set_padding_idx(std::nullopt);
  CHECK_FALSE(emb.padding_idx().has_value());
  ember::SparseRowGrad<float> g2;
  emb.backward(ids, grad_out, g2);
  CHECK(g2.size() == 3);
}

TEST_CASE("padding_idx out of range throws IndexError and changes nothing",
          "[embedding][padding]") {
  ember::Embedding<double> emb(5, 2, 1);
  emb.set_padding_idx(1);
  const RowMatrix<double> before = emb.weight();
  for (Index bad : {Index{5}, Index{-6}, Index{100}}) {
    try {
      emb.set_padding_idx(bad);
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(e.value() == bad);
      CHECK(e.bound() == 5);
      CHECK_THAT(e.what(), Catch::Contains("Embedding::set_padding_idx") &&
                               Catch::Contains("padding_idx " + std::to_string(bad)) &&
                               Catch::Contains("[-5, 5)"));
    }
  }
  CHECK(emb.padding_idx() == 1);
  CHECK(same_bits(emb.weight(), before));
  REQUIRE_THROWS_AS(ember::Embedding<double>::from_pretrained(before, true, 7), ember::IndexError);
}

TEST_CASE("zero_padding_grad clears the padding row of a dense gradient", "[embedding][padding]") {
  ember::Embedding<float> emb(4, 2, 1);
  RowMatrix<float> dense = RowMatrix<float>::Ones(4, 2);
  emb.zero_padding_grad(dense);
  CHECK(dense.isOnes(0));
  emb.set_padding_idx(3);
  emb.zero_padding_grad(dense);
  CHECK(dense.row(3).isZero(0));
  CHECK(dense.topRows(3).isOnes(0));
  RowMatrix<float> wrong = RowMatrix<float>::Ones(3, 2);
  REQUIRE_THROWS_AS(emb.zero_padding_grad(wrong), ember::ShapeError);
  CHECK(wrong.isOnes(0));
}

TEMPLATE_TEST_CASE("scale_grad_by_freq divides each row's gradient by its count in the batch",
                   "[embedding][freq]", float, double) {
  using T = TestType;
  RowMatrix<T> table = RowMatrix<T>::Zero(5, 4);  // d = 4: scale() = 2
  ember::Embedding<T> emb(table);
  emb.set_scale_grad_by_freq(true);
  REQUIRE(emb.scale_grad_by_freq());
  const std::vector<TokenId> ids{3, 1, 3, 3};
  RowMatrix<T> grad_out(4, 4);
  grad_out << 1, 2, 3, 4, 10, 20, 30, 40, 5, 6, 7, 8, 0, 1, 0, 1;
  ember::SparseRowGrad<T> g;
  emb.backward(ids, grad_out, g);
  // Hand-computed: row 1 = 2·(10,20,30,40)/1; row 3 = 2·((1,2,3,4)+(5,6,7,8)+(0,1,0,1))/3.
  RowMatrix<T> expected = RowMatrix<T>::Zero(5, 4);
  expected.row(1) << 20, 40, 60, 80;
  expected.row(3) << T(12) / 3, T(18) / 3, T(20) / 3, T(26) / 3;
  ember_test::check_close(g.to_dense(), expected, 0.0,
                          ember_test::abs_tol_for(expected, ember_test::scaled_tol<T>()));

  // Against the dense reference: dense accumulation, then the division by count.
  RowMatrix<T> reference = RowMatrix<T>::Zero(5, 4);
  std::vector<int> count(5, 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    reference.row(static_cast<Index>(ids[i])) += grad_out.row(static_cast<Index>(i)) * T(2);
    ++count[static_cast<std::size_t>(ids[i])];
  }
  for (Index r = 0; r < 5; ++r)
    if (count[static_cast<std::size_t>(r)] > 0)
      reference.row(r) /= T(count[static_cast<std::size_t>(r)]);
  ember_test::check_close(g.to_dense(), reference, 0.0,
                          ember_test::abs_tol_for(reference, ember_test::scaled_tol<T>()));
}

TEST_CASE("scale_grad_by_freq counts per backward call and combines with padding",
          "[embedding][freq]") {
  ember::Embedding<double> emb(RowMatrix<double>::Zero(4, 1));  // scale 1
  emb.set_scale_grad_by_freq(true);
  emb.set_padding_idx(0);
  ember::SparseRowGrad<double> g;
  RowMatrix<double> ones = RowMatrix<double>::Ones(4, 1);
  emb.backward(std::vector<TokenId>{2, 2, 0, 0}, ones, g);  // row 2: (1+1)/2 = 1
  emb.backward(std::vector<TokenId>{2, 1, 1, 1}, ones, g);  // row 2: +1, row 1: 3/3 = 1
  CHECK(g.size() == 2);
  CHECK(g.to_dense()(2, 0) == 2.0);
  CHECK(g.to_dense()(1, 0) == 1.0);
}

TEST_CASE("freeze and from_pretrained", "[embedding][freeze]") {
  RowMatrix<float> pretrained = random_table<float>(5, 3, 4);
  auto emb = ember::Embedding<float>::from_pretrained(pretrained, true, 2);
  CHECK(emb.frozen());
  CHECK(emb.padding_idx() == 2);
  CHECK(same_bits(emb.weight(), pretrained));  // the padding row keeps its pretrained values
  auto trainable = ember::Embedding<float>::from_pretrained(pretrained, false);
  CHECK_FALSE(trainable.frozen());
  trainable.freeze();
  CHECK(trainable.frozen());
  trainable.unfreeze();
  CHECK_FALSE(trainable.frozen());
  // A frozen table still computes forward/backward.
  ember::SparseRowGrad<float> g;
  emb.backward(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, 3), g);
  CHECK(g.size() == 1);
}

TEMPLATE_TEST_CASE("renorm_rows rescales rows above max_norm with PyTorch's formula",
                   "[embedding][renorm]", float, double) {
  using T = TestType;
  RowMatrix<T> table(4, 2);
  table << 3, 4,       // norm 5
      T(0.3), T(0.4),  // norm 0.5
      -6, 8,           // norm 10
      1, 1;
  ember::Embedding<T> emb(table);
  const Index rescaled = emb.renorm_rows(std::vector<TokenId>{0, 1, 2, 0, 2}, 1.0);
  CHECK(rescaled == 2);
  const double f0 = 1.0 / (5.0 + 1e-7);
  const double f2 = 1.0 / (10.0 + 1e-7);
  CHECK_THAT(double(emb.weight()(0, 0)), Catch::Matchers::WithinRel(3 * f0, 1e-6));
  CHECK_THAT(double(emb.weight()(0, 1)), Catch::Matchers::WithinRel(4 * f0, 1e-6));
  CHECK_THAT(double(emb.weight()(2, 0)), Catch::Matchers::WithinRel(-6 * f2, 1e-6));
  CHECK(same_bits(emb.weight().row(1), table.row(1)));  // below max_norm: untouched
  CHECK(same_bits(emb.weight().row(3), table.row(3)));  // not in ids: untouched
  CHECK(emb.weight().row(0).norm() <= T(1));

  // p = 1 and p = infinity.
  ember::Embedding<T> e1(table);
  e1.renorm_rows(std::vector<int>{0}, 3.5, 1.0);  // |3| + |4| = 7
  CHECK_THAT(double(e1.weight()(0, 1)), Catch::Matchers::WithinRel(4 * 3.5 / (7 + 1e-7), 1e-6));
  ember::Embedding<T> einf(table);
  einf.renorm_rows(std::vector<int>{2}, 2.0, std::numeric_limits<double>::infinity());  // max 8
  CHECK_THAT(double(einf.weight()(2, 1)), Catch::Matchers::WithinRel(8 * 2.0 / (8 + 1e-7), 1e-6));
  // General p = 3.
  ember::Embedding<T> e3(table);
  e3.renorm_rows(std::vector<int>{0}, 1.0, 3.0);
  const double n3 = std::cbrt(27.0 + 64.0);
  CHECK_THAT(double(e3.weight()(0, 0)), Catch::Matchers::WithinRel(3 / (n3 + 1e-7), 1e-6));
}

TEMPLATE_TEST_CASE("renorm_rows gives a row the same bits wherever the row starts in memory",
                   "[embedding][renorm]", float, double) {
  using T = TestType;
  const Index V = 16;
  std::vector<TokenId> all;
  for (Index r = 0; r < V; ++r) all.push_back(static_cast<TokenId>(r));
  for (const Index d : {5, 37}) {  // row r starts d·r elements in: every offset modulo 16
    const RowMatrix<T> table = random_table<T>(1, d, 4).replicate(V, 1);
    for (const double p : {1.0, 2.0, 3.0, std::numeric_limits<double>::infinity()}) {
      INFO("d = " << d << ", p = " << p);
      ember::Embedding<T> emb(table);
      REQUIRE(emb.renorm_rows(all, 0.1, p) == V);
      for (Index r = 1; r < V; ++r) CHECK(same_bits(emb.weight().row(r), emb.weight().row(0)));
    }
  }
}

TEST_CASE("renorm_rows skips the padding row and rejects bad input without changing anything",
          "[embedding][renorm]") {
  RowMatrix<double> table = RowMatrix<double>::Constant(3, 2, 10.0);
  ember::Embedding<double> emb(table);
  emb.set_padding_idx(1, /*zero_row=*/false);
  CHECK(emb.renorm_rows(std::vector<TokenId>{0, 1}, 1.0) == 1);
  CHECK(emb.weight()(1, 0) == 10.0);

  ember::Embedding<double> fresh(table);
  REQUIRE_THROWS_AS(fresh.renorm_rows(std::vector<TokenId>{0, 3}, 1.0), ember::IndexError);
  REQUIRE_THROWS_WITH(fresh.renorm_rows(std::vector<TokenId>{0}, 0.0),
                      Catch::Contains("renorm_rows") && Catch::Contains("max_norm"));
  REQUIRE_THROWS_AS(fresh.renorm_rows(std::vector<TokenId>{0}, std::nan("")), ember::ValueError);
  REQUIRE_THROWS_WITH(fresh.renorm_rows(std::vector<TokenId>{0}, 1.0, -2.0), Catch::Contains("p"));
  fresh.freeze();
  REQUIRE_THROWS_AS(fresh.renorm_rows(std::vector<TokenId>{0}, 1.0), ember::StateError);
  CHECK(same_bits(fresh.weight(), table));
}

TEST_CASE("resize grows with zeros, the normal initialiser or the mean, and keeps old rows",
          "[embedding][resize]") {
  RowMatrix<double> table(3, 2);
  table << 1, 2, 3, 4, 5, 9;
  {
    ember::Embedding<double> emb(table);
    emb.resize(5, ember::ResizeInit::zeros);
    CHECK(emb.vocab_size() == 5);
    CHECK(same_bits(emb.weight().topRows(3), table));
    CHECK(emb.weight().bottomRows(2).isZero(0));
  }
  {
    ember::Embedding<double> emb(table);
    emb.resize(6, ember::ResizeInit::mean);
    for (Index r = 3; r < 6; ++r) {
      CHECK(emb.weight()(r, 0) == 3.0);
      CHECK(emb.weight()(r, 1) == 5.0);
    }
  }
  {
    ember::Embedding<double> emb(table);
    emb.resize(4, ember::ResizeInit::normal, 42);
    RowMatrix<double> expected(1, 2);
    ember::Init::normal().fill(expected, 42);
    CHECK(same_bits(emb.weight().row(3), expected.row(0)));
    CHECK(same_bits(emb.weight().topRows(3), table));
    // Ties follow: logits now have 4 columns.
    CHECK(emb.logits(RowMatrix<double>::Ones(2, 2)).cols() == 4);
  }
}

TEST_CASE("resize shrinks, keeps flags and refuses to drop the padding row",
          "[embedding][resize]") {
  ember::Embedding<float> emb(10, 3, 1);
  const RowMatrix<float> before = emb.weight();
  emb.set_padding_idx(8, false);
  emb.set_scale_grad_by_freq(true);
  try {
    emb.resize(5);
    FAIL("no throw");
  } catch (const ember::IndexError& e) {
    CHECK(e.value() == 8);
    CHECK(e.bound() == 5);
    CHECK_THAT(e.what(), Catch::Contains("Embedding::resize") && Catch::Contains("padding_idx 8"));
  }
  CHECK(same_bits(emb.weight(), before));
  REQUIRE_THROWS_AS(emb.resize(0), ember::ShapeError);
  emb.set_padding_idx(2, false);
  emb.resize(5);
  CHECK(emb.vocab_size() == 5);
  CHECK(same_bits(emb.weight(), before.topRows(5)));
  CHECK(emb.padding_idx() == 2);
  CHECK(emb.scale_grad_by_freq());
}
