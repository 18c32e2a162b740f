// Tests of ember::optim::Adam: lazy Adam / AdamW against a dense reference of
// torch.optim.SparseAdam's formulas, untouched rows, per-row steps, bad input.
// SPDX-License-Identifier: MIT
#include <ember/optim/adam.hpp>

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
using ember_test::random_sparse_grad;
using ember_test::random_table;
using ember_test::same_bits;
using ember_test::scaled_tol;

namespace {

// Batches of ids; row 0 and row 1 appear in every batch, rows 7..9 never.
std::vector<std::vector<TokenId>> batches() {
  return {{0, 1, 3, 3}, {1, 0, 5}, {2, 0, 1, 4, 4, 4}, {0, 6, 1}, {1, 0}, {0, 1, 2, 3, 5, 6}};
}

}  // namespace

TEMPLATE_TEST_CASE("lazy Adam follows SparseAdam's formulas on the rows of each step", "[adam]",
                   float, double) {
  using T = TestType;
  const Index V = 10, d = 5;
  ember::Embedding<T> emb(V, d, 3);
  RowMatrix<T> ref_w = emb.weight();
  ember::optim::Adam<T> opt({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6});
  ember_test::RefAdam<T> ref{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6};
  std::uint64_t seed = 10;
  for (const auto& ids : batches()) {
    const auto g = random_sparse_grad<T>(V, d, ids, ++seed);
    opt.step(emb, g);
    ref.step(ref_w, g.to_dense(), present_rows(V, ids));
  }
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
  CHECK(opt.step_count() == 6);
  CHECK(opt.state_rows() == 7);  // rows 0..6 were touched
  check_close(opt.exp_avg(2), ref.m.row(2), 0.0, abs_tol_for(ref.m.row(2), scaled_tol<T>()));
  check_close(opt.exp_avg_sq(5), ref.v.row(5), 0.0, abs_tol_for(ref.v.row(5), scaled_tol<T>()));
  CHECK(opt.exp_avg(8).size() == 0);
}

TEMPLATE_TEST_CASE(
    "lazy Adam equals dense Adam on rows touched every step and leaves the others "
    "bit-identical",
    "[adam]", float, double) {
  using T = TestType;
  const Index V = 10, d = 4;
  ember::Embedding<T> lazy(V, d, 5);
  const RowMatrix<T> initial = lazy.weight();
  RowMatrix<T> dense_w = initial;
  ember::optim::Adam<T> opt({.lr = 0.01});
  ember_test::RefAdam<T> dense{.lr = 0.01};
  const std::vector<bool> all(static_cast<std::size_t>(V), true);
  std::uint64_t seed = 100;
  for (int rep = 0; rep < 5; ++rep) {
    for (const auto& ids : batches()) {
      const auto g = random_sparse_grad<T>(V, d, ids, ++seed);
      opt.step(lazy, g);
      dense.step(dense_w, g.to_dense(), all);  // dense Adam: every row, zero gradient included
    }
  }
  for (Index r : {0, 1})
    check_close(lazy.weight().row(r), dense_w.row(r), 0.0,
                abs_tol_for(dense_w.row(r), scaled_tol<T>()));
  for (Index r : {7, 8, 9}) CHECK(same_bits(lazy.weight().row(r), initial.row(r)));
  // Rows touched only sometimes differ between lazy and dense Adam (that is the point of lazy).
  CHECK((lazy.weight().row(4) - dense_w.row(4)).cwiseAbs().maxCoeff() > T(1e-6));
}

TEMPLATE_TEST_CASE("a dense Adam step equals the rule applied to every row", "[adam]", float,
                   double) {
  using T = TestType;
  const Index V = 6, d = 3;
  ember::Embedding<T> emb(V, d, 2);
  RowMatrix<T> ref_w = emb.weight();
  ember::optim::Adam<T> opt({.lr = 0.02, .weight_decay = 0.1});
  ember_test::RefAdam<T> ref{.lr = 0.02, .weight_decay = 0.1};
  const std::vector<bool> all(static_cast<std::size_t>(V), true);
  for (std::uint64_t s = 0; s < 4; ++s) {
    const RowMatrix<T> g = random_table<T>(V, d, s + 50);
    opt.step(emb, g);
    ref.step(ref_w, g, all);
  }
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
  CHECK(opt.state_rows() == V);
}

TEST_CASE("Adam's sparse + dense step equals the step on the combined dense gradient", "[adam]") {
  const Index V = 8, d = 4;
  ember::Embedding<float> a(V, d, 1);
  ember::Embedding<float> b = a;
  ember::optim::Adam<float> opt_a({.lr = 0.03});
  ember::optim::Adam<float> opt_b({.lr = 0.03});
  for (std::uint64_t s = 0; s < 3; ++s) {
    const auto sparse = random_sparse_grad<float>(V, d, {1, 4, 4, 6}, s + 1);
    const RowMatrix<float> dense = random_table<float>(V, d, s + 20);
    opt_a.step(a, sparse, dense);
    RowMatrix<float> combined = dense;
    sparse.add_to(combined);
    opt_b.step(b, combined);
  }
  CHECK(same_bits(a.weight(), b.weight()));
}

TEMPLATE_TEST_CASE("AdamW decays only the rows it updates, after the rule of decoupled decay",
                   "[adam]", float, double) {
  using T = TestType;
  const Index V = 8, d = 3;  // row 7 is never in a batch
  ember::Embedding<T> emb(V, d, 9);
  const RowMatrix<T> initial = emb.weight();
  RowMatrix<T> ref_w = initial;
  ember::optim::Adam<T> opt({.lr = 0.1, .weight_decay = 0.5, .decoupled = true});
  ember_test::RefAdam<T> ref{.lr = 0.1, .weight_decay = 0.5, .decoupled = true};
  std::uint64_t seed = 0;
  for (const auto& ids : batches()) {
    std::vector<TokenId> clipped;
    for (auto id : ids)
      if (id < V) clipped.push_back(id);
    const auto g = random_sparse_grad<T>(V, d, clipped, ++seed);
    opt.step(emb, g);
    ref.step(ref_w, g.to_dense(), present_rows(V, clipped));
  }
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
  CHECK(same_bits(emb.weight().row(V - 1), initial.row(V - 1)));  // never present, never decayed
}

TEST_CASE("Adam with per-row steps bias-corrects each row by its own update count", "[adam]") {
  const Index V = 10, d = 3;
  ember::Embedding<double> emb(V, d, 4);
  RowMatrix<double> ref_w = emb.weight();
  ember::optim::Adam<double> opt({.lr = 0.05, .per_row_steps = true});
  ember_test::RefAdam<double> ref{.lr = 0.05, .per_row_steps = true};
  std::uint64_t seed = 0;
  for (const auto& ids : batches()) {
    const auto g = random_sparse_grad<double>(V, d, ids, ++seed);
    opt.step(emb, g);
    ref.step(ref_w, g.to_dense(), present_rows(V, ids));
  }
  check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, 1e-12));
  CHECK(opt.row_steps(0) == 6);
  CHECK(opt.row_steps(4) == 1);
  CHECK(opt.row_steps(9) == 0);
}

TEST_CASE("Adam's first step moves each present row by about lr against its gradient sign",
          "[adam]") {
  // Hand-computed: t = 1, m = (1-b1) g, v = (1-b2) g², step_size = lr sqrt(1-b2)/(1-b1),
  // so w -= lr · g / (|g| + eps/sqrt(1-b2)) ≈ lr · sign(g).
  ember::Embedding<double> emb(RowMatrix<double>::Zero(3, 2));
  ember::SparseRowGrad<double> g(3, 2);
  RowMatrix<double> rows(1, 2);
  rows << 2.0, -0.5;
  g.accumulate(std::vector<TokenId>{1}, rows, 1.0, 3);
  ember::optim::Adam<double> opt({.lr = 0.1, .eps = 1e-8});
  opt.step(emb, g);
  const double e = 1e-8 / std::sqrt(1 - 0.999);
  CHECK_THAT(emb.weight()(1, 0), Catch::Matchers::WithinRel(-0.1 * 2.0 / (2.0 + e), 1e-12));
  CHECK_THAT(emb.weight()(1, 1), Catch::Matchers::WithinRel(0.1 * 0.5 / (0.5 + e), 1e-12));
  CHECK(emb.weight().row(0).isZero(0));
  CHECK(emb.weight().row(2).isZero(0));
}

TEST_CASE("Adam never moves the padding row and rejects a frozen table", "[adam]") {
  const Index V = 6, d = 3;
  ember::Embedding<float> emb(V, d, 1);
  emb.set_padding_idx(2);
  emb.weight().row(2).setConstant(0.25f);  // the user may set its value
  ember::optim::Adam<float> opt({.lr = 0.1});
  for (std::uint64_t s = 0; s < 50; ++s) {
    // Sparse gradient built by hand with an entry for the padding row, plus a dense part.
    ember::SparseRowGrad<float> g(V, d);
    g.accumulate(std::vector<TokenId>{2, 3}, random_table<float>(2, d, s), 1.0f, V);
    opt.step(emb, g, random_table<float>(V, d, s + 1000));
  }
  CHECK((emb.weight().row(2).array() == 0.25f).all());

  emb.freeze();
  const RowMatrix<float> before = emb.weight();
  ember::SparseRowGrad<float> g(V, d);
  g.accumulate(std::vector<TokenId>{1}, random_table<float>(1, d, 1), 1.0f, V);
  REQUIRE_THROWS_AS(opt.step(emb, g), ember::StateError);
  REQUIRE_THROWS_WITH(opt.step(emb, g), Catch::Contains("Adam::step") && Catch::Contains("frozen"));
  CHECK(same_bits(emb.weight(), before));
  CHECK(opt.step_count() == 50);
}

TEST_CASE("Adam validates its hyper-parameters and gradient shapes", "[adam]") {
  using ember::optim::Adam;
  using ember::optim::AdamOptions;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_AS(Adam<float>(AdamOptions{.lr = 0.0}), ember::ValueError);
  REQUIRE_THROWS_WITH(Adam<float>(AdamOptions{.lr = -1.0}),
                      Catch::Contains("Adam") && Catch::Contains("lr") && Catch::Contains("-1"));
  REQUIRE_THROWS_AS(Adam<float>(AdamOptions{.lr = nan}), ember::ValueError);
  REQUIRE_THROWS_AS(Adam<float>(AdamOptions{.lr = inf}), ember::ValueError);
  REQUIRE_THROWS_WITH(Adam<float>(AdamOptions{.beta1 = 1.0}), Catch::Contains("beta1"));
  REQUIRE_THROWS_WITH(Adam<float>(AdamOptions{.beta2 = -0.1}), Catch::Contains("beta2"));
  REQUIRE_THROWS_WITH(Adam<float>(AdamOptions{.eps = 0.0}), Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(Adam<float>(AdamOptions{.weight_decay = nan}),
                      Catch::Contains("weight_decay"));
  try {
    Adam<float> bad(AdamOptions{.lr = -2.5});
    FAIL("no throw");
  } catch (const ember::ValueError& e) {
    CHECK(e.value() == -2.5);
  }
  Adam<float> opt;
  REQUIRE_THROWS_AS(opt.set_lr(nan), ember::ValueError);

  const Index V = 5, d = 3;
  ember::Embedding<float> emb(V, d, 1);
  const RowMatrix<float> before = emb.weight();
  ember::SparseRowGrad<float> wrong_width(V, d + 1);
  wrong_width.accumulate(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, d + 1), 1.0f, V);
  REQUIRE_THROWS_AS(opt.step(emb, wrong_width), ember::ShapeError);
  ember::SparseRowGrad<float> wrong_vocab(V + 2, d);
  wrong_vocab.accumulate(std::vector<TokenId>{6}, RowMatrix<float>::Ones(1, d), 1.0f, V + 2);
  REQUIRE_THROWS_WITH(opt.step(emb, wrong_vocab), Catch::Contains("vocab_size"));
  const RowMatrix<float> dense_bad = RowMatrix<float>::Ones(V, d + 2);
  try {
    opt.step(emb, dense_bad);
    FAIL("no throw");
  } catch (const ember::ShapeError& e) {
    CHECK(e.dimension() == 1);
    CHECK(e.expected() == d);
    CHECK(e.actual() == d + 2);
  }
  CHECK(same_bits(emb.weight(), before));
  CHECK(opt.step_count() == 0);
  CHECK(opt.state_rows() == 0);
}

TEST_CASE("Adam state is O(rows touched) and follows a resized table", "[adam]") {
  const Index V = 50000, d = 16;
  ember::Embedding<float> emb(V, d, 1);
  ember::optim::Adam<float> opt;
  const auto g = random_sparse_grad<float>(V, d, {5, 49999, 123}, 1);
  opt.step(emb, g);
  CHECK(opt.state_rows() == 3);
  // Slot map (4 bytes per row) + 2 moments of 3 rows; far below the 2·V·d·4 bytes of dense state.
  CHECK(opt.state_bytes() < static_cast<std::size_t>(V) * 8 + 4096);

  emb.resize(1000, ember::ResizeInit::zeros);
  const auto g2 = random_sparse_grad<float>(1000, d, {5, 999}, 2);
  const ember::RowVector<float> m5_before = opt.exp_avg(5);
  opt.step(emb, g2);
  CHECK(opt.state_rows() == 3);  // 49999 dropped, 999 added
  CHECK(opt.exp_avg(49999).size() == 0);
  CHECK(opt.exp_avg(5).size() == d);
  CHECK_FALSE(same_bits(opt.exp_avg(5), m5_before));
}
