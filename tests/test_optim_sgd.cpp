// Tests of ember::optim::SGD: plain and momentum SGD over sparse and dense gradients against a
// dense reference of torch.optim.SGD's rule, padding rows, frozen tables, bad input.
// SPDX-License-Identifier: MIT
#include <ember/optim/sgd.hpp>

#include <catch2/catch.hpp>

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
const std::vector<std::vector<TokenId>> kBatches = {{0, 1, 3, 3}, {1, 0, 5}, {2, 0, 1, 4, 4},
                                                    {0, 6, 1},    {1, 0},    {0, 1, 2, 3, 5, 6}};
}  // namespace

TEST_CASE("plain SGD subtracts lr times the gradient from the touched rows only", "[sgd]") {
  RowMatrix<double> table(3, 2);
  table << 1, 2, 3, 4, 5, 6;
  ember::Embedding<double> emb(table);
  ember::SparseRowGrad<double> g(3, 2);
  RowMatrix<double> rows(3, 2);
  rows << 1, 1, 0.5, -1, 2, 0;
  g.accumulate(std::vector<TokenId>{2, 0, 2}, rows, 1.0, 3);  // row 2: (3, 1), row 0: (0.5, -1)
  ember::optim::SGD<double> opt({.lr = 0.5});
  opt.step(emb, g);
  RowMatrix<double> expected(3, 2);
  expected << 0.75, 2.5, 3, 4, 3.5, 5.5;
  CHECK(emb.weight().isApprox(expected, 1e-15));
  CHECK(opt.state_rows() == 0);  // no momentum, no state
  CHECK(opt.state_bytes() == 0);
}

TEMPLATE_TEST_CASE(
    "SGD with momentum, dampening, nesterov and weight decay matches the dense "
    "reference on the present rows",
    "[sgd]", float, double) {
  using T = TestType;
  const Index V = 8, d = 4;
  struct Case {
    ember::optim::SGDOptions o;
  };
  const std::vector<ember::optim::SGDOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.1, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.7, .weight_decay = 0.2, .nesterov = true}};
  for (const auto& o : cases) {
    ember::Embedding<T> emb(V, d, 7);
    RowMatrix<T> ref_w = emb.weight();
    ember::optim::SGD<T> opt(o);
    ember_test::RefSGD<T> ref{.lr = o.lr,
                              .momentum = o.momentum,
                              .dampening = o.dampening,
                              .weight_decay = o.weight_decay,
                              .nesterov = o.nesterov};
    std::uint64_t seed = 0;
    for (const auto& ids : kBatches) {
      const auto g = random_sparse_grad<T>(V, d, ids, ++seed);
      opt.step(emb, g);
      ref.step(ref_w, g.to_dense(), present_rows(V, ids));
    }
    check_close(emb.weight(), ref_w, 0.0, abs_tol_for(ref_w, scaled_tol<T>()));
    CHECK(same_bits(emb.weight().row(7), emb.weight().row(7)));
    if (o.momentum > 0) {
      CHECK(opt.state_rows() == 7);
      check_close(opt.momentum_buffer(3), ref.buf.row(3), 0.0,
                  abs_tol_for(ref.buf.row(3), scaled_tol<T>()));
      CHECK(opt.momentum_buffer(7).size() == 0);
    }
  }
}

TEST_CASE("lazy momentum equals dense momentum on rows touched every step", "[sgd]") {
  const Index V = 8, d = 3;
  ember::Embedding<double> lazy(V, d, 2);
  const RowMatrix<double> initial = lazy.weight();
  RowMatrix<double> dense_w = initial;
  ember::optim::SGD<double> opt({.lr = 0.1, .momentum = 0.9});
  ember_test::RefSGD<double> dense{.lr = 0.1, .momentum = 0.9};
  const std::vector<bool> all(static_cast<std::size_t>(V), true);
  std::uint64_t seed = 0;
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& ids : kBatches) {
      const auto g = random_sparse_grad<double>(V, d, ids, ++seed);
      opt.step(lazy, g);
      dense.step(dense_w, g.to_dense(), all);
    }
  }
  check_close(lazy.weight().topRows(2), dense_w.topRows(2), 0.0,
              abs_tol_for(dense_w.topRows(2), 1e-12));
  CHECK(same_bits(lazy.weight().row(7), initial.row(7)));
}

TEMPLATE_TEST_CASE("SGD's sparse + dense step equals the step on the combined dense gradient",
                   "[sgd]", float, double) {
  using T = TestType;
  const Index V = 6, d = 5;
  ember::Embedding<T> a(V, d, 1);
  ember::Embedding<T> b = a;
  ember::optim::SGD<T> opt_a({.lr = 0.2, .momentum = 0.5});
  ember::optim::SGD<T> opt_b({.lr = 0.2, .momentum = 0.5});
  for (std::uint64_t s = 0; s < 4; ++s) {
    const auto sparse = random_sparse_grad<T>(V, d, {0, 3, 3, 5}, s + 1);
    const RowMatrix<T> dense = random_table<T>(V, d, s + 40);
    opt_a.step(a, sparse, dense);
    RowMatrix<T> combined = dense;
    sparse.add_to(combined);
    opt_b.step(b, combined);
  }
  CHECK(same_bits(a.weight(), b.weight()));
}

TEST_CASE("SGD leaves the padding row and a frozen table unchanged after many steps", "[sgd]") {
  const Index V = 5, d = 4;
  ember::Embedding<float> emb(V, d, 3);
  emb.set_padding_idx(-1);  // row 4
  REQUIRE(emb.padding_idx() == 4);
  ember::optim::SGD<float> opt({.lr = 0.3, .momentum = 0.9});
  for (std::uint64_t s = 0; s < 100; ++s) {
    ember::SparseRowGrad<float> g(V, d);
    emb.backward(std::vector<TokenId>{4, 1, 4}, random_table<float>(3, d, s), g);
    CHECK(g.size() == 1);  // backward gives the padding row no entry
    g.accumulate(std::vector<TokenId>{4}, random_table<float>(1, d, s + 7), 1.0f, V);  // by hand
    opt.step(emb, g, random_table<float>(V, d, s + 300));
  }
  CHECK(emb.weight().row(4).isZero(0));

  ember::Embedding<float> frozen =
      ember::Embedding<float>::from_pretrained(random_table<float>(V, d, 1));
  REQUIRE(frozen.frozen());
  const RowMatrix<float> before = frozen.weight();
  ember::optim::SGD<float> opt2({.lr = 0.3});
  for (int k = 0; k < 20; ++k) {
    ember::SparseRowGrad<float> g;
    frozen.backward(std::vector<TokenId>{0, 1}, random_table<float>(2, d, 1), g);
    REQUIRE_THROWS_AS(opt2.step(frozen, g), ember::StateError);
    REQUIRE_THROWS_AS(opt2.step(frozen, RowMatrix<float>::Ones(V, d)), ember::StateError);
  }
  CHECK(same_bits(frozen.weight(), before));
  frozen.unfreeze();
  opt2.step(frozen, RowMatrix<float>::Ones(V, d));
  CHECK_FALSE(same_bits(frozen.weight(), before));
}

TEST_CASE("SGD validates hyper-parameters and gradients, changing nothing on a throw", "[sgd]") {
  using ember::optim::SGD;
  using ember::optim::SGDOptions;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(SGD<float>(SGDOptions{.lr = 0.0}),
                      Catch::Contains("SGD") && Catch::Contains("lr"));
  REQUIRE_THROWS_AS(SGD<float>(SGDOptions{.lr = nan}), ember::ValueError);
  REQUIRE_THROWS_WITH(SGD<float>(SGDOptions{.momentum = 1.5}), Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH(SGD<float>(SGDOptions{.dampening = nan}), Catch::Contains("dampening"));
  REQUIRE_THROWS_WITH(SGD<float>(SGDOptions{.weight_decay = -1}), Catch::Contains("weight_decay"));
  REQUIRE_THROWS_WITH(SGD<float>(SGDOptions{.nesterov = true}), Catch::Contains("nesterov"));

  const Index V = 4, d = 2;
  ember::Embedding<float> emb(V, d, 1);
  const RowMatrix<float> before = emb.weight();
  SGD<float> opt({.lr = 0.1, .momentum = 0.9});
  ember::SparseRowGrad<float> wide(V, 3);
  wide.accumulate(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, 3), 1.0f, V);
  REQUIRE_THROWS_AS(opt.step(emb, wide), ember::ShapeError);
  const RowMatrix<float> tall = RowMatrix<float>::Ones(V + 1, d);
  ember::SparseRowGrad<float> ok(V, d);
  ok.accumulate(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, d), 1.0f, V);
  REQUIRE_THROWS_WITH(opt.step(emb, ok, tall), Catch::Contains("dense gradient"));
  CHECK(same_bits(emb.weight(), before));
  CHECK(opt.state_rows() == 0);
  CHECK(opt.step_count() == 0);
}
