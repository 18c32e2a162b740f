// Tests of the fused backward + step (RowOptimizer::backward_step) on Embedding: the same bits as
// backward followed by step for every optimizer, thread count, padding row, frequency scaling and
// id width; the tied form; the fused-only options; bad input changes nothing.
// SPDX-License-Identifier: MIT
#include <ember/optim.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "support/matrix_compare.hpp"
#include "support/optim_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::same_bits;
using ember_test::xorshift_matrix;

namespace {

/// Zipf-like ids over [0, V): small ids repeat often, the tail once or never.
template <class Id = TokenId>
std::vector<Id> skewed_ids(Index n, Index V, std::uint64_t seed) {
  std::vector<Id> ids(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 2654435761u + 1;
  for (auto& id : ids) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double u = static_cast<double>(s % 1000003) / 1000003.0;
    id = static_cast<Id>(static_cast<Index>(std::pow(u, 3.0) * static_cast<double>(V)) % V);
  }
  return ids;
}

/// The state an optimizer keeps for `row`, flattened, for comparing two optimizers bit for bit.
template <class Opt, class T>
RowMatrix<T> state_of(const Opt& opt, Index row) {
  if constexpr (std::is_same_v<Opt, ember::optim::SGD<T>>) {
    return opt.momentum_buffer(row);
  } else if constexpr (std::is_same_v<Opt, ember::optim::Adam<T>>) {
    RowMatrix<T> both(1, 2 * opt.exp_avg(row).size() + 1);
    if (opt.exp_avg(row).size() > 0) both << opt.exp_avg(row), opt.exp_avg_sq(row), T(0);
    both(0, both.cols() - 1) = static_cast<T>(opt.row_steps(row));
    return both;
  } else {
    return RowMatrix<T>::Constant(1, 1, opt.accumulator(row));
  }
}

template <class Opt, class T>
void check_same_optimizer(const Opt& a, const Opt& b, Index V) {
  REQUIRE(a.step_count() == b.step_count());
  REQUIRE(a.state_rows() == b.state_rows());
  for (Index r = 0; r < V; ++r) {
    INFO("state of row " << r);
    REQUIRE(same_bits(state_of<Opt, T>(a, r), state_of<Opt, T>(b, r)));
  }
}

struct Setup {
  Index V = 300;
  Index d = 64;
  Index n = 700;  // n·d above the parallel threshold, so two threads really split the rows
  bool padding = false;
  bool freq = false;
  bool tied = false;
};

/// Runs `steps` steps on two copies of one table: fused on `a`, backward + step on `b`, and
/// checks table and optimizer state bit for bit after each.
template <class Id, class T, class Opt>
void check_fused_equals_unfused(const Setup& s, Opt fused, Opt unfused, int steps = 4) {
  ember::Embedding<T> a(s.V, s.d, 11);
  if (s.padding) a.set_padding_idx(0, false);  // id 0 is the most frequent id
  a.set_scale_grad_by_freq(s.freq);
  ember::Embedding<T> b = a;
  for (int k = 0; k < steps; ++k) {
    const auto ids = skewed_ids<Id>(s.n, s.V, static_cast<std::uint64_t>(k) + 1);
    const RowMatrix<T> grad_out = xorshift_matrix<T>(s.n, s.d, 50 + static_cast<std::uint64_t>(k));
    ember::SparseRowGrad<T> g;
    b.backward(ids, grad_out, g);
    if (s.tied) {
      const RowMatrix<T> dense = xorshift_matrix<T>(s.V, s.d, 90 + static_cast<std::uint64_t>(k));
      fused.backward_step(a, ids, grad_out, dense);
      unfused.step(b, g, dense);
    } else {
      fused.backward_step(a, ids, grad_out);
      unfused.step(b, g);
    }
    INFO("step " << k);
    REQUIRE(same_bits(a.weight(), b.weight()));
    check_same_optimizer<Opt, T>(fused, unfused, s.V);
  }
}

template <class T>
void for_each_optimizer(const auto& check) {
  using namespace ember::optim;
  check(SGD<T>({.lr = 0.1}));
  check(SGD<T>({.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}));
  check(SGD<T>({.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true}));
  check(Adam<T>({.lr = 0.01}));
  check(Adam<T>({.lr = 0.01, .weight_decay = 0.1, .decoupled = true}));
  check(Adam<T>({.lr = 0.01, .weight_decay = 0.05, .per_row_steps = true}));
  check(RowwiseAdagrad<T>({.lr = 0.1}));
  check(RowwiseAdagrad<T>({.lr = 0.1, .weight_decay = 0.01, .initial_accumulator_value = 0.5}));
}

}  // namespace

TEMPLATE_TEST_CASE("backward_step gives the bits of backward + step for every optimizer",
                   "[optim][fused]", float, double) {
  using T = TestType;
  Setup s;
  SECTION("plain") {}
  SECTION("padding row") { s.padding = true; }
  SECTION("scale_grad_by_freq") { s.freq = true; }
  SECTION("padding row and scale_grad_by_freq") {
    s.padding = true;
    s.freq = true;
  }
  SECTION("tied: a dense gradient on every row") {
    s.tied = true;
    s.padding = true;
  }
  SECTION("a width no vector divides") { s.d = 13; }
  for_each_optimizer<T>(
      [&](auto opt) { check_fused_equals_unfused<TokenId, T>(s, opt, decltype(opt)(opt)); });
}

TEST_CASE("backward_step takes int32 and int64 ids", "[optim][fused]") {
  const Setup s{.V = 50, .d = 8, .n = 40};
  for_each_optimizer<float>([&](auto opt) {
    check_fused_equals_unfused<std::int32_t, float>(s, opt, decltype(opt)(opt), 2);
    check_fused_equals_unfused<std::int64_t, float>(s, opt, decltype(opt)(opt), 2);
  });
}

#if defined(_OPENMP)
TEST_CASE("backward_step gives the same bits at 1, 2 and 4 threads", "[optim][fused][threads]") {
  const int saved = omp_get_max_threads();
  Setup s;
  s.padding = true;
  s.freq = true;
  for (const int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    INFO("threads = " << threads);
    for_each_optimizer<float>(
        [&](auto opt) { check_fused_equals_unfused<TokenId, float>(s, opt, decltype(opt)(opt)); });
  }
  omp_set_num_threads(saved);
}
#endif

TEST_CASE("backward_step's max_gradient clamps each row's summed gradient before the update",
          "[optim][fused]") {
  const Index V = 20, d = 6;
  ember::Embedding<float> a(V, d, 5);
  ember::Embedding<float> b = a;
  ember::optim::Adam<float> fused({.lr = 0.01});
  ember::optim::Adam<float> unfused({.lr = 0.01});
  const std::vector<TokenId> ids{3, 3, 3, 7, 1, 3, 7};
  const RowMatrix<float> grad_out = 2.0F * xorshift_matrix<float>(7, d, 4);
  fused.backward_step(a, ids, grad_out, {.max_gradient = 0.5});
  ember::SparseRowGrad<float> g;
  b.backward(ids, grad_out, g);
  RowMatrix<float> clamped = g.values().cwiseMax(-0.5F).cwiseMin(0.5F);
  REQUIRE((clamped.array() != g.values().array()).any());  // the clamp really bites
  ember::SparseRowGrad<float> g_clamped;
  g_clamped.accumulate(g.rows(), clamped, 1.0F, V);
  unfused.step(b, g_clamped);
  CHECK(same_bits(a.weight(), b.weight()));
}

TEST_CASE("backward_step's max_norm renormalises each updated row after the update",
          "[optim][fused]") {
  const Index V = 10, d = 4;
  ember::Embedding<double> a(V, d, 2);
  ember::Embedding<double> b = a;
  ember::optim::SGD<double> fused({.lr = 5.0});
  ember::optim::SGD<double> unfused({.lr = 5.0});
  const std::vector<TokenId> ids{2, 4, 4};
  const RowMatrix<double> grad_out = xorshift_matrix<double>(3, d, 8);
  fused.backward_step(a, ids, grad_out, {.max_norm = 0.75});
  ember::SparseRowGrad<double> g;
  b.backward(ids, grad_out, g);
  unfused.step(b, g);
  const auto w = b.weight();
  RowMatrix<double> expected = w;
  for (const TokenId r : {2, 4}) {
    const double norm = expected.row(r).norm();
    REQUIRE(norm > 0.75);  // the lr is large enough that the rows grow past the bound
    expected.row(r) *= 0.75 / (norm + 1e-7);
  }
  CHECK(same_bits(a.weight(), expected));
  for (const TokenId r : {2, 4}) CHECK(a.weight().row(r).norm() <= 0.75 + 1e-12);
}

TEST_CASE("backward_step with no ids counts the step and moves nothing", "[optim][fused]") {
  ember::Embedding<float> emb(5, 3, 1);
  const RowMatrix<float> before = emb.weight();
  ember::optim::Adam<float> opt;
  opt.backward_step(emb, std::vector<TokenId>{}, RowMatrix<float>(0, 3));
  CHECK(opt.step_count() == 1);
  CHECK(opt.state_rows() == 0);
  CHECK(same_bits(emb.weight(), before));
}

TEST_CASE("backward_step on bad input throws and changes nothing", "[optim][fused][errors]") {
  const Index V = 8, d = 3;
  ember::Embedding<float> emb(V, d, 1);
  ember::optim::Adam<float> opt({.lr = 0.1, .check_finite = true});
  opt.backward_step(emb, std::vector<TokenId>{1, 2}, xorshift_matrix<float>(2, d, 1));
  const RowMatrix<float> before = emb.weight();
  const auto unchanged = [&] {
    CHECK(same_bits(emb.weight(), before));
    CHECK(opt.step_count() == 1);
    CHECK(opt.state_rows() == 2);
  };
  const std::vector<TokenId> ids{1, 5, 3};
  const RowMatrix<float> grad_out = xorshift_matrix<float>(3, d, 2);

  SECTION("an id outside the table") {
    try {
      opt.backward_step(emb, std::vector<TokenId>{1, 8, 3}, grad_out);
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(std::string(e.what()).find("Adam::backward_step") != std::string::npos);
      CHECK(e.position() == 1);
      CHECK(e.value() == 8);
    }
  }
  SECTION("grad_out of the wrong shape") {
    CHECK_THROWS_AS(opt.backward_step(emb, ids, xorshift_matrix<float>(2, d, 2)),
                    ember::ShapeError);
    CHECK_THROWS_AS(opt.backward_step(emb, ids, xorshift_matrix<float>(3, d + 1, 2)),
                    ember::ShapeError);
  }
  SECTION("a dense gradient of the wrong shape") {
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out, xorshift_matrix<float>(V - 1, d, 3)),
                    ember::ShapeError);
  }
  SECTION("negative or non-finite fused options") {
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out, {.max_gradient = -1.0}),
                    ember::ValueError);
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out,
                                      {.max_norm = std::numeric_limits<double>::infinity()}),
                    ember::ValueError);
  }
  SECTION("a non-finite grad_out element with check_finite") {
    RowMatrix<float> bad = grad_out;
    bad(2, 1) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_AS(opt.backward_step(emb, ids, bad), ember::ValueError);
  }
  SECTION("a frozen table") {
    emb.freeze();
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out), ember::StateError);
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out, xorshift_matrix<float>(V, d, 3)),
                    ember::StateError);
  }
  unchanged();
}
