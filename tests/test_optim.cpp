// Tests across ember's optimizers through the umbrella header: the tied (sparse + dense) step,
// frozen tables and padding rows for every optimizer, bits that do not depend on where a row
// starts in memory, and a tiny model whose loss must fall below a stated threshold with lazy Adam.
// SPDX-License-Identifier: MIT
#include <ember/optim.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::random_table;
using ember_test::same_bits;

namespace {

template <class Opt>
void check_tied_equals_combined(Opt a_opt, Opt b_opt) {
  const Index V = 9, d = 4;
  ember::Embedding<float> a(V, d, 1);
  a.set_padding_idx(8, false);
  ember::Embedding<float> b = a;
  for (std::uint64_t s = 0; s < 5; ++s) {
    ember::SparseRowGrad<float> sparse;
    a.backward(std::vector<TokenId>{0, 3, 3, 8, 5}, random_table<float>(5, d, s), sparse);
    const RowMatrix<float> dense = random_table<float>(V, d, s + 99);
    a_opt.step(a, sparse, dense);
    RowMatrix<float> combined = dense;
    sparse.add_to(combined);
    b_opt.step(b, combined);
  }
  CHECK(same_bits(a.weight(), b.weight()));
}

template <class Opt>
void check_frozen_and_padding(Opt opt) {
  const Index V = 6, d = 3;
  auto emb = ember::Embedding<double>::from_pretrained(random_table<double>(V, d, 3), true, 1);
  const RowMatrix<double> before = emb.weight();
  for (int k = 0; k < 10; ++k) {
    ember::SparseRowGrad<double> g;
    emb.backward(std::vector<TokenId>{0, 1, 2}, random_table<double>(3, d, 1), g);
    REQUIRE_THROWS_AS(opt.step(emb, g), ember::StateError);
    REQUIRE_THROWS_AS(opt.step(emb, g, random_table<double>(V, d, 2)), ember::StateError);
  }
  CHECK(same_bits(emb.weight(), before));
  CHECK(opt.step_count() == 0);
  emb.unfreeze();
  for (std::uint64_t s = 0; s < 200; ++s) {
    ember::SparseRowGrad<double> g;
    emb.backward(std::vector<TokenId>{0, 1, 1, 5}, random_table<double>(4, d, s), g);
    opt.step(emb, g, random_table<double>(V, d, s + 7));
  }
  CHECK(same_bits(emb.weight().row(1), before.row(1)));  // padding row: pretrained, never moved
  CHECK_FALSE(same_bits(emb.weight().row(0), before.row(0)));
}

// The first row of `w` (besides row 0) whose bits differ from row 0's, or -1.
template <class M>
Index first_row_unlike_row_0(const M& w) {
  for (Index r = 1; r < w.rows(); ++r) {
    if (!same_bits(w.row(r), w.row(0))) return r;
  }
  return -1;
}

// The first row (besides row 0) whose optimizer state differs in bits from row 0's, or -1.
template <class T, class Opt>
Index first_state_unlike_row_0(const Opt& opt, Index rows) {
  for (Index r = 1; r < rows; ++r) {
    bool same = true;
    if constexpr (requires { opt.momentum_buffer(r); }) {
      same = same_bits(opt.momentum_buffer(r), opt.momentum_buffer(0));
    } else if constexpr (requires { opt.exp_avg(r); }) {
      same = same_bits(opt.exp_avg(r), opt.exp_avg(0)) &&
             same_bits(opt.exp_avg_sq(r), opt.exp_avg_sq(0)) &&
             opt.row_steps(r) == opt.row_steps(0);
    } else {
      const T a = opt.accumulator(r), b = opt.accumulator(0);
      same = std::memcmp(&a, &b, sizeof a) == 0;
    }
    if (!same) return r;
  }
  return -1;
}

// Trains the 16 rows of a 16 x d table (d odd) that start out equal, giving every row the same
// gradient, through every step form: sparse, dense, tied, fused, fused with max_gradient and
// max_norm, fused tied. Row r starts d·r elements into the table, so the rows start at every
// offset modulo 16 elements (one 64-byte vector of floats, or two of doubles); after each step
// every row and its state must hold the bits of row 0.
template <class T, class Opt>
void check_bits_free_of_row_address(const Opt& proto, Index d) {
  const Index V = 16;
  const RowMatrix<T> first = random_table<T>(1, d, 11);
  ember::Embedding<T> emb(RowMatrix<T>(first.replicate(V, 1)));
  Opt opt = proto;
  std::vector<TokenId> ids;  // every row twice, so the fused step sums two rows for each
  for (int k = 0; k < 2; ++k) {
    for (Index r = 0; r < V; ++r) ids.push_back(static_cast<TokenId>(r));
  }
  // The rows a fused step renormalises to: below every row's norm (√(d/3) on average).
  const double max_norm = 0.3 * std::sqrt(static_cast<double>(d));
  for (std::uint64_t s = 0; s < 18; ++s) {
    const RowMatrix<T> g = random_table<T>(2, d, 100 + s);
    RowMatrix<T> grad_out(2 * V, d);  // row r's two positions: g.row(0) at r, g.row(1) at V + r
    grad_out.topRows(V).rowwise() = g.row(0);
    grad_out.bottomRows(V).rowwise() = g.row(1);
    RowMatrix<T> dense(V, d);
    dense.rowwise() = g.row(1);
    ember::SparseRowGrad<T> sparse;
    emb.backward(ids, grad_out, sparse);
    std::string form;
    switch (s % 6) {
      case 0:
        form = "sparse step";
        opt.step(emb, sparse);
        break;
      case 1:
        form = "dense step";
        opt.step(emb, dense);
        break;
      case 2:
        form = "tied step";
        opt.step(emb, sparse, dense);
        break;
      case 3:
        form = "fused step";
        opt.backward_step(emb, ids, grad_out);
        break;
      case 4:
        form = "fused step with max_gradient and max_norm";
        opt.backward_step(emb, ids, grad_out, {.max_gradient = 0.3, .max_norm = max_norm});
        break;
      default:
        form = "fused tied step with max_norm";
        opt.backward_step(emb, ids, grad_out, dense, {.max_norm = max_norm});
        break;
    }
    INFO("d = " << d << ", step " << s + 1 << " (" << form << ")");
    const Index w_row = first_row_unlike_row_0(emb.weight());
    INFO("row " << w_row << " starts at element " << w_row * d << " (offset " << (w_row * d) % 16
                << " mod 16)");
    REQUIRE(w_row == -1);
    REQUIRE(first_state_unlike_row_0<T>(opt, V) == -1);
  }
}

// A tiny tied model (as examples/train_adam.cpp): h = tanh(E[id]·√d · M), logits = h·Eᵀ, next
// token (3t + 1) mod V. Returns the full-data loss after `steps` mini-batch steps, E and M each
// trained by a copy of `proto`.
template <class Opt>
double train_tiny(const Opt& proto, int steps) {
  const Index V = 24, d = 16, n = 16;
  ember::Embedding<double> emb(V, d, 1);
  ember::Embedding<double> mix(d, d, 2);
  Opt opt = proto;
  Opt opt_m = proto;
  ember::Random rng(5);
  std::vector<TokenId> all(static_cast<std::size_t>(V)), all_next(static_cast<std::size_t>(V));
  for (Index t = 0; t < V; ++t) {
    all[static_cast<std::size_t>(t)] = t;
    all_next[static_cast<std::size_t>(t)] = (3 * t + 1) % V;
  }
  const auto loss_grad = [](const RowMatrix<double>& logits, const std::vector<TokenId>& next,
                            RowMatrix<double>& grad) {
    double loss = 0;
    grad.resize(logits.rows(), logits.cols());
    const auto rows = static_cast<double>(logits.rows());
    for (Index i = 0; i < logits.rows(); ++i) {
      const double max = logits.row(i).maxCoeff();
      const auto p = (logits.row(i).array() - max).exp().eval();
      const auto target = static_cast<Index>(next[static_cast<std::size_t>(i)]);
      loss += std::log(p.sum()) - (logits(i, target) - max);
      grad.row(i) = p / (p.sum() * rows);
      grad(i, target) -= 1.0 / rows;
    }
    return loss / rows;
  };
  std::vector<TokenId> in(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  RowMatrix<double> gl, gh(n, d), gw(V, d);
  ember::SparseRowGrad<double> gin;
  for (int s = 0; s < steps; ++s) {
    for (auto& id : in) id = static_cast<TokenId>(rng.uniform_index(V));
    for (std::size_t i = 0; i < in.size(); ++i) next[i] = (3 * in[i] + 1) % V;
    const RowMatrix<double> x = emb.forward(in);
    const RowMatrix<double> h = (x * mix.weight()).array().tanh().matrix();
    loss_grad(emb.logits(h), next, gl);
    gw.setZero();
    emb.logits_backward(h, gl, gh, gw);
    const RowMatrix<double> gpre = gh.array() * (1.0 - h.array().square());
    gin.clear();
    emb.backward(in, gpre * mix.weight().transpose(), gin);
    opt.step(emb, gin, gw);
    opt_m.step(mix, x.transpose() * gpre);
  }
  const RowMatrix<double> h = (emb.forward(all) * mix.weight()).array().tanh().matrix();
  return loss_grad(emb.logits(h), all_next, gl);
}

}  // namespace

TEST_CASE("every optimizer's tied step equals its step on the combined dense gradient", "[optim]") {
  check_tied_equals_combined(ember::optim::SGD<float>({.lr = 0.1, .momentum = 0.9}),
                             ember::optim::SGD<float>({.lr = 0.1, .momentum = 0.9}));
  check_tied_equals_combined(ember::optim::Adam<float>({.lr = 0.01, .weight_decay = 0.1}),
                             ember::optim::Adam<float>({.lr = 0.01, .weight_decay = 0.1}));
  check_tied_equals_combined(ember::optim::RowwiseAdagrad<float>({.lr = 0.1}),
                             ember::optim::RowwiseAdagrad<float>({.lr = 0.1}));
}

TEST_CASE("every optimizer refuses a frozen table and never moves the padding row", "[optim]") {
  check_frozen_and_padding(ember::optim::SGD<double>({.lr = 0.1, .momentum = 0.5}));
  check_frozen_and_padding(ember::optim::Adam<double>({.lr = 0.1, .decoupled = true}));
  check_frozen_and_padding(ember::optim::RowwiseAdagrad<double>({.lr = 0.1}));
}

TEST_CASE(
    "a tiny tied model trained with lazy Adam gets below 0.1 nats in 200 steps and beats "
    "SGD",
    "[optim]") {
  const double adam_loss = train_tiny(ember::optim::Adam<double>({.lr = 0.05}), 200);
  const double sgd_loss = train_tiny(ember::optim::SGD<double>({.lr = 1.0}), 200);
  INFO("adam " << adam_loss << ", sgd " << sgd_loss << ", initial ln(24) = " << std::log(24.0));
  CHECK(adam_loss < 0.1);
  CHECK(adam_loss < sgd_loss);
}

TEST_CASE("clipping then stepping: ClipGroup bounds the update of a tied step", "[optim][clip]") {
  const Index V = 5, d = 2;
  ember::Embedding<double> emb(RowMatrix<double>::Zero(V, d));
  ember::SparseRowGrad<double> sparse;
  emb.backward(std::vector<TokenId>{1}, RowMatrix<double>::Constant(1, d, 100.0), sparse);
  RowMatrix<double> dense = RowMatrix<double>::Constant(V, d, 50.0);
  ember::ClipGroup<double> group;
  group.add_tied(sparse, dense);
  group.clip(1.0);
  ember::optim::SGD<double> opt({.lr = 1.0});
  opt.step(emb, sparse, dense);
  CHECK(emb.weight().norm() <= 1.0 + 1e-9);
}

TEMPLATE_TEST_CASE("every optimizer gives a row the same bits wherever the row starts in memory",
                   "[optim]", float, double) {
  using T = TestType;
  using ember::optim::Adam;
  using ember::optim::RowwiseAdagrad;
  using ember::optim::SGD;
  const auto check = [](const auto& opt) {
    for (const Index d : {5, 37}) check_bits_free_of_row_address<T>(opt, d);
  };
  SECTION("plain SGD") { check(SGD<T>({.lr = 0.1})); }
  SECTION("SGD with momentum and dampening") {
    check(SGD<T>({.lr = 0.1, .momentum = 0.9, .dampening = 0.1}));
  }
  SECTION("SGD, Nesterov") { check(SGD<T>({.lr = 0.1, .momentum = 0.9, .nesterov = true})); }
  SECTION("SGD with weight decay") { check(SGD<T>({.lr = 0.1, .weight_decay = 0.01})); }
  SECTION("Adam") { check(Adam<T>({.lr = 0.05})); }
  SECTION("Adam with L2 weight decay") { check(Adam<T>({.lr = 0.05, .weight_decay = 0.01})); }
  SECTION("AdamW") { check(Adam<T>({.lr = 0.05, .weight_decay = 0.1, .decoupled = true})); }
  SECTION("Adam with per-row steps") { check(Adam<T>({.lr = 0.05, .per_row_steps = true})); }
  SECTION("row-wise Adagrad") {
    check(RowwiseAdagrad<T>({.lr = 0.1, .initial_accumulator_value = 0.1}));
  }
  SECTION("row-wise Adagrad with weight decay") {
    check(RowwiseAdagrad<T>({.lr = 0.1, .weight_decay = 0.01}));
  }
}
