// Tests of ember::optim::RowwiseAdagrad against FBGEMM's row-wise rule, hand-computed values,
// its O(rows) state and bad input.
// SPDX-License-Identifier: MIT
#include <ember/optim/adagrad.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/optim_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::abs_tol_for;
using ember_test::check_close;
using ember_test::present_rows;
using ember_test::random_table;
using ember_test::same_bits;
using ember_test::scaled_tol;

TEST_CASE("row-wise Adagrad's first step, computed by hand", "[adagrad]") {
  ember::Embedding<double> emb(RowMatrix<double>::Zero(3, 2));
  ember::SparseRowGrad<double> g(3, 2);
  RowMatrix<double> rows(1, 2);
  rows << 3.0, 4.0;  // mean(g²) = 12.5
  g.accumulate(std::vector<TokenId>{1}, rows, 1.0, 3);
  ember::optim::RowwiseAdagrad<double> opt({.lr = 0.1, .eps = 1e-10});
  opt.step(emb, g);
  CHECK_THAT(opt.accumulator(1), Catch::Matchers::WithinRel(12.5, 1e-15));
  const double mult = 0.1 / (std::sqrt(12.5) + 1e-10);
  CHECK_THAT(emb.weight()(1, 0), Catch::Matchers::WithinRel(-3.0 * mult, 1e-14));
  CHECK_THAT(emb.weight()(1, 1), Catch::Matchers::WithinRel(-4.0 * mult, 1e-14));
  CHECK(emb.weight().row(0).isZero(0));
  CHECK(opt.accumulator(0) == 0.0);
  opt.step(emb, g);
  CHECK_THAT(opt.accumulator(1), Catch::Matchers::WithinRel(25.0, 1e-15));
}

TEMPLATE_TEST_CASE(
    "row-wise Adagrad matches the dense reference over sparse, dense and tied "
    "steps",
    "[adagrad]", float, double) {
  using T = TestType;
  const Index V = 9, d = 6;
  ember::Embedding<T> emb(V, d, 5);
  RowMatrix<T> ref_w = emb.weight();
  ember::optim::RowwiseAdagrad<T> opt(
      {.lr = 0.05, .eps = 1e-6, .weight_decay = 0.01, .initial_accumulator_value = 0.1});
  ember_test::RefRowwiseAdagrad<T> ref{.lr = 0.05, .eps = 1e-6, .weight_decay = 0.01, .init = 0.1};
  const std::vector<bool> all(static_cast<std::size_t>(V), true);
  const std::vector<std::vector<TokenId>> batches = {{0, 2, 2}, {8, 1}, {3, 0, 0, 0}, {5}};
  std::uint64_t seed = 0;
  for (const auto& ids : batches) {
    ember::SparseRowGrad<T> g(V, d);
    g.accumulate(ids, random_table<T>(static_cast<Index>(ids.size()), d, ++seed), T(1), V);
    opt.step(emb, g);
    ref.step(ref_w, g.to_dense(), present_rows(V, ids));
  }
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
  const RowMatrix<T> dense = random_table<T>(V, d, 77);
  opt.step(emb, dense);
  ref.step(ref_w, dense, all);
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
  for (Index r = 0; r < V; ++r)
    CHECK_THAT(static_cast<double>(opt.accumulator(r)),
               Catch::Matchers::WithinRel(static_cast<double>(ref.acc[static_cast<std::size_t>(r)]),
                                          scaled_tol<T>()));
}

TEST_CASE("row-wise Adagrad keeps one scalar per touched row", "[adagrad]") {
  const Index V = 50257, d = 64;
  ember::Embedding<float> emb(V, d, 1);
  ember::optim::RowwiseAdagrad<float> opt;
  ember::SparseRowGrad<float> g(V, d);
  g.accumulate(std::vector<TokenId>{1, 2, 50256}, random_table<float>(3, d, 1), 1.0f, V);
  opt.step(emb, g);
  CHECK(opt.state_rows() == 3);
  // slot map + one float per row: about 4·V bytes, vs V·d·4 for element-wise Adagrad.
  CHECK(opt.state_bytes() < static_cast<std::size_t>(V) * 4 + 1024);
  opt.step(emb, g);
  CHECK(opt.state_rows() == 3);
}

TEST_CASE("row-wise Adagrad skips the padding row, refuses frozen tables and bad options",
          "[adagrad]") {
  const Index V = 4, d = 3;
  ember::Embedding<double> emb(V, d, 2);
  emb.set_padding_idx(0);
  ember::optim::RowwiseAdagrad<double> opt({.lr = 0.5});
  for (std::uint64_t s = 0; s < 30; ++s) opt.step(emb, random_table<double>(V, d, s));
  CHECK(emb.weight().row(0).isZero(0));
  CHECK(opt.state_rows() == V - 1);

  emb.freeze();
  const RowMatrix<double> before = emb.weight();
  REQUIRE_THROWS_AS(opt.step(emb, random_table<double>(V, d, 1)), ember::StateError);
  CHECK(same_bits(emb.weight(), before));

  using ember::optim::AdagradOptions;
  using ember::optim::RowwiseAdagrad;
  REQUIRE_THROWS_WITH(RowwiseAdagrad<float>(AdagradOptions{.lr = -0.1}),
                      Catch::Contains("RowwiseAdagrad") && Catch::Contains("lr"));
  REQUIRE_THROWS_WITH(RowwiseAdagrad<float>(AdagradOptions{.eps = 0}), Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(RowwiseAdagrad<float>(AdagradOptions{
                          .initial_accumulator_value = std::numeric_limits<double>::infinity()}),
                      Catch::Contains("initial_accumulator_value"));
}
