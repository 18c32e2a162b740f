// Tests of ember/fused_step.hpp: the fused backward + step (RowOptimizer::backward_step) on
// Embedding: the same bits as backward followed by step for every optimizer, thread count, padding
// row, frequency scaling and id width; the tied form; the fused-only options; bad input changes
// nothing.
// SPDX-License-Identifier: MIT
#include <ember/bag.hpp>
#include <ember/input_stem.hpp>
#include <ember/optim.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::random_table;
using ember_test::same_bits;

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
    const RowMatrix<T> grad_out = random_table<T>(s.n, s.d, 50 + static_cast<std::uint64_t>(k));
    ember::SparseRowGrad<T> g;
    b.backward(ids, grad_out, g);
    if (s.tied) {
      const RowMatrix<T> dense = random_table<T>(s.V, s.d, 90 + static_cast<std::uint64_t>(k));
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
  const RowMatrix<float> grad_out = 2.0F * random_table<float>(7, d, 4);
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
  const RowMatrix<double> grad_out = random_table<double>(3, d, 8);
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
  opt.backward_step(emb, std::vector<TokenId>{1, 2}, random_table<float>(2, d, 1));
  const RowMatrix<float> before = emb.weight();
  const auto unchanged = [&] {
    CHECK(same_bits(emb.weight(), before));
    CHECK(opt.step_count() == 1);
    CHECK(opt.state_rows() == 2);
  };
  const std::vector<TokenId> ids{1, 5, 3};
  const RowMatrix<float> grad_out = random_table<float>(3, d, 2);

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
    CHECK_THROWS_AS(opt.backward_step(emb, ids, random_table<float>(2, d, 2)), ember::ShapeError);
    CHECK_THROWS_AS(opt.backward_step(emb, ids, random_table<float>(3, d + 1, 2)),
                    ember::ShapeError);
  }
  SECTION("a dense gradient of the wrong shape") {
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out, random_table<float>(V - 1, d, 3)),
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
    CHECK_THROWS_AS(opt.backward_step(emb, ids, grad_out, random_table<float>(V, d, 3)),
                    ember::StateError);
  }
  unchanged();
}

// ---- EmbeddingBag::backward_step --------------------------------------------------------------

namespace {

/// Bags of the skewed ids: offsets every `width` ids, one empty bag in the middle.
std::vector<Index> bag_offsets(Index n, Index width) {
  std::vector<Index> offsets;
  for (Index o = 0; o < n; o += width) {
    offsets.push_back(o);
    if (o == width) offsets.push_back(o);  // an empty bag
  }
  return offsets;
}

template <class Opt>
void check_bag_fused(ember::BagMode mode, bool weighted, bool padding, bool freq, Opt fused,
                     Opt unfused) {
  using T = float;
  const Index V = 200, d = 48, n = 900, width = 9;
  ember::EmbeddingBag<T> a(V, d, mode, 4);
  if (padding) a.embedding().set_padding_idx(0, false);
  a.embedding().set_scale_grad_by_freq(freq);
  ember::EmbeddingBag<T> b = a;
  for (int k = 0; k < 3; ++k) {
    const auto ids = skewed_ids(n, V, static_cast<std::uint64_t>(k) + 7);
    const auto offsets = bag_offsets(n, width);
    const auto bags = static_cast<Index>(offsets.size());
    const RowMatrix<T> weights = random_table<T>(1, n, 3 + static_cast<std::uint64_t>(k));
    ember::BagOptions<T> options;
    if (weighted) options.per_sample_weights = std::span<const T>(weights.data(), n);
    ember::BagArgmax argmax;
    const RowMatrix<T> out = a.forward(ids, offsets, options);
    RowMatrix<T> out_b(bags, d);
    b.forward(ids, offsets, out_b, options, mode == ember::BagMode::max ? &argmax : nullptr);
    REQUIRE(same_bits(out, out_b));
    const RowMatrix<T> grad_out = random_table<T>(bags, d, 20 + static_cast<std::uint64_t>(k));
    std::vector<T> dw_a(weighted ? static_cast<std::size_t>(n) : 0);
    std::vector<T> dw_b(dw_a.size());
    const ember::BagArgmax* am = mode == ember::BagMode::max ? &argmax : nullptr;
    a.backward_step(ids, offsets, grad_out, fused, options, am, {}, std::span<T>(dw_a));
    ember::SparseRowGrad<T> g;
    b.backward(ids, offsets, grad_out, g, options, am, std::span<T>(dw_b));
    unfused.step(b.embedding(), g);
    INFO("step " << k);
    REQUIRE(same_bits(a.embedding().weight(), b.embedding().weight()));
    REQUIRE(dw_a == dw_b);
    check_same_optimizer<Opt, T>(fused, unfused, V);
  }
}

}  // namespace

TEST_CASE("EmbeddingBag::backward_step gives the bits of backward + step in every mode",
          "[optim][fused][bag]") {
  using ember::BagMode;
  struct Case {
    BagMode mode;
    bool weighted, padding, freq;
  };
  for (const Case c :
       {Case{BagMode::sum, false, false, false}, Case{BagMode::sum, true, true, false},
        Case{BagMode::sum, false, true, true}, Case{BagMode::mean, false, true, false},
        Case{BagMode::mean, false, false, true}, Case{BagMode::max, false, false, false},
        Case{BagMode::max, false, true, false}}) {
    INFO("mode " << ember::to_string(c.mode) << ", weighted " << c.weighted << ", padding "
                 << c.padding << ", freq " << c.freq);
    for_each_optimizer<float>([&](auto opt) {
      check_bag_fused(c.mode, c.weighted, c.padding, c.freq, opt, decltype(opt)(opt));
    });
  }
}

TEST_CASE("EmbeddingBag::backward_step_lengths equals backward_lengths + step",
          "[optim][fused][bag]") {
  ember::EmbeddingBag<double> a(30, 5, ember::BagMode::mean, 2);
  ember::EmbeddingBag<double> b = a;
  ember::optim::RowwiseAdagrad<double> fused({.lr = 0.3});
  ember::optim::RowwiseAdagrad<double> unfused({.lr = 0.3});
  const std::vector<TokenId> ids{1, 4, 4, 29, 0, 1, 7};
  const std::vector<int> lengths{2, 0, 3, 2};
  const RowMatrix<double> grad_out = random_table<double>(4, 5, 6);
  a.backward_step_lengths(ids, lengths, grad_out, fused);
  ember::SparseRowGrad<double> g;
  b.backward_lengths(ids, lengths, grad_out, g);
  unfused.step(b.embedding(), g);
  CHECK(same_bits(a.embedding().weight(), b.embedding().weight()));
}

TEST_CASE("EmbeddingBag::backward_step on bad input throws and changes nothing",
          "[optim][fused][bag][errors]") {
  ember::EmbeddingBag<float> bag(10, 4, ember::BagMode::max, 1);
  ember::optim::SGD<float> opt({.lr = 0.1});
  const std::vector<TokenId> ids{1, 2, 3, 4};
  const std::vector<Index> offsets{0, 2};
  ember::BagArgmax argmax;
  RowMatrix<float> out(2, 4);
  bag.forward(ids, offsets, out, {}, &argmax);
  const RowMatrix<float> before = bag.embedding().weight();
  const RowMatrix<float> grad_out = random_table<float>(2, 4, 1);
  CHECK_THROWS_AS(bag.backward_step(ids, offsets, grad_out, opt), ember::StateError);  // no argmax
  CHECK_THROWS_AS(bag.backward_step(ids, offsets, random_table<float>(3, 4, 1), opt, {}, &argmax),
                  ember::ShapeError);
  CHECK_THROWS_AS(
      bag.backward_step(std::vector<TokenId>{1, 2, 3, 10}, offsets, grad_out, opt, {}, &argmax),
      ember::IndexError);
  bag.embedding().freeze();
  CHECK_THROWS_AS(bag.backward_step(ids, offsets, grad_out, opt, {}, &argmax), ember::StateError);
  CHECK(same_bits(bag.embedding().weight(), before));
  CHECK(opt.step_count() == 0);
}

// ---- InputStem::backward_step -----------------------------------------------------------------

TEST_CASE("InputStem::backward_step steps the token table with the bits of backward + step",
          "[optim][fused][input_stem]") {
  using ember::InputStem;
  for (const bool with_segments : {false, true}) {
    InputStem<float> a(120, 32,
                       {.max_len = 16,
                        .positions = ember::PositionKind::learned,
                        .type_vocab_size = 2,
                        .dropout = 0.2,
                        .seed = 5,
                        .dropout_seed = 9});
    a.tokens().set_padding_idx(3, false);
    InputStem<float> b = a;
    ember::optim::Adam<float> fused({.lr = 0.01});
    ember::optim::Adam<float> unfused({.lr = 0.01});
    const Index seq_len = 16, n = 4 * seq_len;
    for (int k = 0; k < 3; ++k) {
      const auto ids = skewed_ids(n, 120, static_cast<std::uint64_t>(k) + 3);
      std::vector<TokenId> segs(static_cast<std::size_t>(n));
      for (Index i = 0; i < n; ++i) segs[static_cast<std::size_t>(i)] = (i / 5) % 2;
      RowMatrix<float> out_a(n, 32);
      RowMatrix<float> out_b(n, 32);
      const auto mask_a =
          with_segments ? a.forward(ids, segs, seq_len, out_a) : a.forward(ids, seq_len, out_a);
      const auto mask_b =
          with_segments ? b.forward(ids, segs, seq_len, out_b) : b.forward(ids, seq_len, out_b);
      REQUIRE(mask_a.active());
      REQUIRE(same_bits(out_a, out_b));
      const RowMatrix<float> grad_out =
          random_table<float>(n, 32, 40 + static_cast<std::uint64_t>(k));
      ember::InputStemGrads<float> ga;
      ember::InputStemGrads<float> gb;
      if (with_segments) {
        a.backward_step(ids, segs, seq_len, grad_out, ga, mask_a, fused);
        b.backward(ids, segs, seq_len, grad_out, gb, mask_b);
      } else {
        a.backward_step(ids, seq_len, grad_out, ga, mask_a, fused);
        b.backward(ids, seq_len, grad_out, gb, mask_b);
      }
      unfused.step(b.tokens(), gb.tokens);
      INFO("segments " << with_segments << ", step " << k);
      CHECK(ga.tokens.empty());
      REQUIRE(same_bits(a.tokens().weight(), b.tokens().weight()));
      REQUIRE(ga.positions == gb.positions);
      REQUIRE(ga.segments == gb.segments);
      check_same_optimizer<ember::optim::Adam<float>, float>(fused, unfused, 120);
    }
  }
}

TEST_CASE("InputStem::backward_step on a frozen token table throws and changes nothing",
          "[optim][fused][input_stem][errors]") {
  ember::InputStem<float> stem(10, 8, {.max_len = 4, .positions = ember::PositionKind::learned});
  stem.tokens().freeze();
  ember::optim::SGD<float> opt({.lr = 0.1});
  const std::vector<TokenId> ids{1, 2, 3, 4};
  RowMatrix<float> out(4, 8);
  const auto mask = stem.forward(ids, 4, out);
  const RowMatrix<float> before = stem.tokens().weight();
  ember::InputStemGrads<float> grads;
  CHECK_THROWS_AS(stem.backward_step(ids, 4, random_table<float>(4, 8, 1), grads, mask, opt),
                  ember::StateError);
  CHECK(same_bits(stem.tokens().weight(), before));
  CHECK(grads.positions.empty());
  CHECK(opt.step_count() == 0);
}

TEST_CASE("a copy of an optimizer after a fused step shares no scratch with the original",
          "[optim][fused]") {
  // The copy used to keep pointers to the original's gradient rows: two tables' optimizers copied
  // from one wrote into the same rows (from two threads in TableBatchedBags), and a copy outliving
  // its original wrote into freed memory.
  const RowMatrix<float> w = random_table<float>(30, 8, 1);
  const auto ids = ember_test::random_ids(40, 30, 2);
  const RowMatrix<float> g = random_table<float>(40, 8, 3);
  ember::Embedding<float> first(w);
  std::optional<ember::optim::RowwiseAdagrad<float>> original(std::in_place,
                                                              ember::optim::AdagradOptions{});
  original->backward_step(first, ids, g);
  ember::optim::RowwiseAdagrad<float> copy = *original;
  ember::optim::RowwiseAdagrad<float> reference = *original;
  original.reset();  // frees the original's scratch
  ember::Embedding<float> a(w);
  ember::Embedding<float> b(w);
  copy.backward_step(a, ids, g);
  reference.backward_step(b, ids, g);
  CHECK(same_bits(a.weight(), b.weight()));
  CHECK(copy.accumulator(static_cast<Index>(ids[0])) ==
        reference.accumulator(static_cast<Index>(ids[0])));
}
