// Tests of ember/keyed/keyed_embedding.hpp: KeyedEmbedding's lookups, training, the reset of
// reused rows for every optimizer, deltas, resizing and bad input.
#include "ember/keyed/keyed_embedding.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/optim.hpp>

#include "support/error_checks.hpp"
#include "support/matrix_compare.hpp"
#include "support/sparse_optimizers.hpp"

namespace {

using ember::Index;
using ember::KeyedBatch;
using ember::KeyedEmbedding;
using ember::KeyedOptions;
using ember::RowMatrix;
using ember::TokenId;
using Keys = std::vector<std::uint64_t>;

/// What init gives the row of `key`: the plain definition of KeyedOptions::init.
RowMatrix<float> initial_row(const KeyedOptions& o, Index d, std::uint64_t key) {
  RowMatrix<float> row(1, d);
  o.init.fill(row, ember::key_seed(o.seed, key));
  return row;
}

RowMatrix<float> grad_for(Index n, Index d, float base) {
  RowMatrix<float> g(n, d);
  for (Index i = 0; i < g.size(); ++i) g.data()[i] = base + 0.01f * static_cast<float>(i % 7);
  return g;
}

/// Trains key `k1` after `k0` on a table of capacity `cap` (1: k1 reuses k0's row), one
/// backward_step each; returns k1's row.
template <class Opt>
RowMatrix<float> train_second_key(Index cap, const Opt& prototype, bool fused) {
  KeyedEmbedding<float> emb(cap, 4, {.scale = ember::LookupScale::none()});
  Opt opt = prototype;
  const Keys first{1001, 1001}, second{2002};
  for (int s = 0; s < 3; ++s) {  // k0 trains 3 steps: state to leak
    KeyedBatch b = emb.map(first, s);
    if (fused) {
      emb.backward_step(b, grad_for(2, 4, 0.5f), opt);
    } else {
      ember::SparseRowGrad<float> g;
      emb.backward(b, grad_for(2, 4, 0.5f), g);
      emb.step(opt, g);
    }
  }
  KeyedBatch b = emb.map(second, 3);
  if (cap == 1) REQUIRE(b.evicted().size() == 1);
  for (int s = 0; s < 2; ++s) {
    if (s == 1) b = emb.map(second, 4);
    if (fused) {
      emb.backward_step(b, grad_for(1, 4, -0.25f), opt);
    } else {
      ember::SparseRowGrad<float> g;
      emb.backward(b, grad_for(1, 4, -0.25f), g);
      emb.step(opt, g);
    }
  }
  return emb.forward(second);
}

}  // namespace

TEST_CASE("inference lookups never insert and read the fallback", "[keyed_embedding]") {
  KeyedEmbedding<float> emb(8, 4, {.scale = ember::LookupScale::none()});
  const RowMatrix<float> x = emb.forward(Keys{5, 6});
  CHECK(x.isZero());
  CHECK(emb.size() == 0);
  CHECK(emb.find(Keys{5}) == std::vector<TokenId>{8});
  CHECK(emb.fallback_row() == 8);
  CHECK(emb.table().vocab_size() == 9);
  CHECK(emb.table().padding_idx() == Index{8});
  RowMatrix<float> wrong(3, 4);
  CHECK_THROWS_AS(emb.forward(Keys{5, 6}, wrong), ember::ShapeError);
}

TEST_CASE("a key's row starts from init with the key's own seed, whatever row it gets",
          "[keyed_embedding]") {
  const KeyedOptions o{
      .init = ember::Init::uniform(-1.0, 1.0), .seed = 17, .scale = ember::LookupScale::none()};
  KeyedEmbedding<float> a(8, 5, o), b(8, 5, o);
  const Keys ka{10, 20, 30}, kb{30, 99, 10};
  const KeyedBatch ba = a.map(ka, 0);
  const KeyedBatch bb = b.map(kb, 0);
  CHECK(ba.rows()[2] == 2);
  CHECK(bb.rows()[0] == 0);
  for (const std::uint64_t k : {10u, 30u}) {
    const RowMatrix<float> ra = a.forward(Keys{k});
    const RowMatrix<float> rb = b.forward(Keys{k});
    CHECK(ra == rb);
    CHECK(ra == initial_row(o, 5, k));
  }
  // The lookup scale applies: √d by default.
  KeyedEmbedding<float> scaled(4, 16, {.seed = 3});
  const KeyedBatch bs = scaled.map(Keys{7}, 0);
  CHECK(scaled.forward(bs) == scaled.table().weight().row(bs.rows()[0]) * 4.0f);
}

TEST_CASE("backward and the optimizers see the rows of the batch", "[keyed_embedding]") {
  KeyedEmbedding<float> emb(6, 3, {.index = {.min_count = 2, .sketch_width = 256}});
  const Keys keys{1, 2, 1, 3, 1};
  const KeyedBatch b0 = emb.map(keys, 0);  // 1 seen 3 times: admitted; 2 and 3 read the zero row
  CHECK(b0.rows()[0] == 0);
  CHECK(b0.rows()[1] == emb.fallback_row());
  CHECK(b0.inserted() == 1);
  CHECK(b0.fallbacks() == 2);
  const RowMatrix<float> g = grad_for(5, 3, 1.0f);
  ember::SparseRowGrad<float> grad;
  emb.backward(b0, g, grad);
  ember::SparseRowGrad<float> expected;
  emb.table().backward(b0.rows(), g, expected);
  CHECK(grad == expected);
  CHECK(grad.rows().size() == 1);  // the padding row gets nothing
  ember::optim::SGD<float> sgd({.lr = 0.5});
  const RowMatrix<float> before = emb.table().weight();
  emb.step(sgd, grad);
  CHECK(emb.table().weight().row(emb.fallback_row()).isZero());
  CHECK(emb.table().weight().row(0) != before.row(0));

  // A shared fallback row trains with the sum of its keys.
  KeyedEmbedding<float> shared(
      4, 3,
      {.index = {.min_count = 5, .sketch_width = 256}, .fallback = ember::KeyFallback::shared_row});
  const KeyedBatch bs = shared.map(Keys{8, 9}, 0);
  CHECK(bs.fallbacks() == 2);
  ember::SparseRowGrad<float> gs;
  shared.backward(bs, grad_for(2, 3, 1.0f), gs);
  REQUIRE(gs.rows().size() == 1);
  CHECK(gs.rows()[0] == shared.fallback_row());
  shared.set_fallback_values(RowMatrix<float>::Ones(1, 3));
  CHECK(shared.forward(Keys{8}).isApprox(RowMatrix<float>::Ones(1, 3) * std::sqrt(3.0f)));
  CHECK_THROWS_AS(emb.set_fallback_values(RowMatrix<float>::Ones(1, 3)), ember::StateError);
}

TEST_CASE("a reused row starts fresh: values and optimizer state, for every optimizer",
          "[keyed_embedding]") {
  // Capacity 1: the second key reuses the first one's row, state and all. Capacity 2: it gets a
  // row nobody used. Both must train the second key to the same bits.
  const auto check = [](const auto& opt) {
    for (const bool fused : {false, true}) {
      INFO("fused " << fused);
      const RowMatrix<float> reused = train_second_key(1, opt, fused);
      const RowMatrix<float> fresh = train_second_key(2, opt, fused);
      CHECK(reused == fresh);
    }
  };
  ember_test::for_each_sparse_optimizer(check);
}

TEST_CASE("without the reset a reused row would carry the old key's state", "[keyed_embedding]") {
  // The control of the test above: stepping the table behind the keyed table's back leaks.
  KeyedEmbedding<float> emb(1, 2, {.scale = ember::LookupScale::none()});
  ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.9});
  KeyedBatch b = emb.map(Keys{1}, 0);
  emb.backward_step(b, grad_for(1, 2, 1.0f), sgd);
  CHECK(sgd.momentum_buffer(0).size() == 2);
  b = emb.map(Keys{2}, 1);                    // evicts 1: row 0 is reused
  CHECK(sgd.momentum_buffer(0).size() == 2);  // not reset yet: at the next step
  emb.backward_step(b, grad_for(1, 2, -1.0f), sgd);
  CHECK(sgd.momentum_buffer(0) == grad_for(1, 2, -1.0f));  // a first update: buf = g
}

TEST_CASE("a batch is valid until the next map", "[keyed_embedding]") {
  KeyedEmbedding<float> emb(4, 2), other(4, 2);
  const KeyedBatch b0 = emb.map(Keys{1, 2}, 0);
  const KeyedBatch b1 = emb.map(Keys{3}, 0);
  ember::SparseRowGrad<float> g;
  CHECK_THROWS_AS(emb.backward(b0, grad_for(2, 2, 1.0f), g), ember::StateError);
  CHECK_THROWS_WITH(emb.forward(b0), Catch::Contains("latest map()"));
  CHECK_NOTHROW(emb.backward(b1, grad_for(1, 2, 1.0f), g));
  CHECK_THROWS_AS(other.backward(b1, grad_for(1, 2, 1.0f), g), ember::StateError);
  ember::optim::SGD<float> sgd;
  CHECK_THROWS_AS(emb.backward_step(b1, grad_for(2, 2, 1.0f), sgd), ember::ShapeError);
}

TEST_CASE("deltas bring a serving copy to the trained rows", "[keyed_embedding]") {
  const KeyedOptions o{.index = {.policy = ember::EvictionPolicy::lru}, .seed = 5};
  KeyedEmbedding<float> train(12, 3, o), serve(12, 3, o);
  ember::optim::Adam<float> adam({.lr = 0.05});
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<std::uint64_t> pick(0, 30);
  Keys seen;
  const auto run = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t s = from; s < to; ++s) {
      Keys keys(6);
      for (auto& k : keys) k = pick(rng) * 0x100000001ULL;
      seen.insert(seen.end(), keys.begin(), keys.end());
      const KeyedBatch b = train.map(keys, s);
      train.backward_step(b, grad_for(6, 3, 0.1f * static_cast<float>(s % 3) - 0.1f), adam);
    }
  };
  const auto same = [&] {
    for (const std::uint64_t k : seen) {
      INFO("key " << k);
      CHECK(train.index().contains(k) == serve.index().contains(k));
      CHECK(train.forward(Keys{k}) == serve.forward(Keys{k}));
    }
  };
  run(0, 10);
  serve.apply_delta(train.export_delta(-1));
  same();
  run(10, 20);
  const ember::KeyedDelta<float> d = train.export_delta(9);
  CHECK(d.step == 19);
  CHECK(!d.evicted.empty());
  for (const std::uint64_t k : d.keys) CHECK(train.index().entry(k)->last_step > 9);
  serve.apply_delta(d);
  same();
  // The log can be trimmed once consumers are past it.
  const auto logged = train.eviction_log().size();
  train.trim_eviction_log(15);
  CHECK(train.eviction_log().size() < logged);
  // A delta of another width, or too large for the copy, changes nothing.
  KeyedEmbedding<float> narrow(12, 2, o), small(2, 3, o);
  CHECK_THROWS_AS(narrow.apply_delta(d), ember::ShapeError);
  CHECK_THROWS_AS(small.apply_delta(d), ember::CapacityError);
  CHECK(small.size() == 0);
}

TEST_CASE("resize keeps the rows and moves their optimizer state", "[keyed_embedding]") {
  KeyedEmbedding<float> a(6, 2, {.index = {.policy = ember::EvictionPolicy::lru}});
  KeyedEmbedding<float> b = a;
  ember::optim::Adam<float> oa({.lr = 0.1}), ob({.lr = 0.1});
  for (std::int64_t s = 0; s < 6; ++s) {
    const Keys keys{static_cast<std::uint64_t>(100 + s), 100};
    const KeyedBatch ba = a.map(keys, s);
    a.backward_step(ba, grad_for(2, 2, 0.3f), oa);
    const KeyedBatch bb = b.map(keys, s);
    b.backward_step(bb, grad_for(2, 2, 0.3f), ob);
  }
  // Growing changes nothing observable: training on gives the same bits.
  const auto grown = a.resize(10, oa);
  CHECK(grown.evicted.empty());
  for (std::int64_t s = 6; s < 9; ++s) {
    const Keys keys{100, 101};
    const KeyedBatch ba = a.map(keys, s);
    a.backward_step(ba, grad_for(2, 2, -0.2f), oa);
    const KeyedBatch bb = b.map(keys, s);
    b.backward_step(bb, grad_for(2, 2, -0.2f), ob);
  }
  for (std::uint64_t k = 100; k < 106; ++k) CHECK(a.forward(Keys{k}) == b.forward(Keys{k}));
  // Shrinking evicts the least recent and moves the rest with their moments.
  const TokenId row_105 = a.find(Keys{105})[0];
  const auto m_105 = oa.exp_avg(row_105);
  const auto shrunk = a.resize(3, oa);
  CHECK(shrunk.evicted.size() == 3);
  CHECK(a.capacity() == 3);
  CHECK(a.table().vocab_size() == 4);
  const TokenId now_105 = a.find(Keys{105})[0];
  REQUIRE(now_105 < 3);
  CHECK(oa.exp_avg(now_105) == m_105);
  CHECK(a.forward(Keys{105}) == b.forward(Keys{105}));
  CHECK(a.table().padding_idx() == Index{3});
  CHECK(a.eviction_log().size() == 3);
}

TEST_CASE("KeyedEmbedding refuses bad options", "[keyed_embedding]") {
  CHECK_THROWS_AS(KeyedEmbedding<float>(0, 4), ember::ValueError);
  CHECK_THROWS_AS(KeyedEmbedding<float>(4, 0), ember::ShapeError);
  CHECK_THROWS_AS(KeyedEmbedding<float>(4, 2, {.index = {.min_count = -2}}), ember::ValueError);
  CHECK_THROWS_WITH(KeyedEmbedding<float>(4, 2, {.index = {.fallback_row = 1}}),
                    Catch::Contains("owns its fallback row"));
  CHECK_THROWS_AS(KeyedEmbedding<float>(4, 2, {.init = ember::Init::normal(-1.0)}),
                  ember::ValueError);
  CHECK_THROWS_AS(KeyedEmbedding<float>(4, 2, {.init_rows = -1}), ember::ValueError);
  KeyedEmbedding<double> emb(2, 2, {.index = {.policy = ember::EvictionPolicy::none}});
  const KeyedBatch b = emb.map(Keys{1, 2}, 0);
  CHECK_THROWS_AS(emb.map(Keys{3}, 1), ember::CapacityError);
  CHECK_NOTHROW(emb.forward(b));  // the refused map changed nothing, b is still current
  KeyedEmbedding<float> scored(2, 2, {.index = {.policy = ember::EvictionPolicy::score}});
  CHECK_THROWS_AS(scored.map(Keys{1}, 0), ember::ShapeError);
  const std::vector<double> s{2.0};
  CHECK_NOTHROW(scored.map(Keys{1}, 0, s));
}

TEST_CASE("a batch of a destroyed table fails the check of a table built at its address",
          "[keyed_embedding]") {
  std::optional<KeyedEmbedding<float>> slot;
  slot.emplace(4, 2);
  const KeyedEmbedding<float>* first = &*slot;
  const KeyedBatch old = slot->map(Keys{1, 2}, 0);
  slot.reset();
  slot.emplace(4, 2);  // the same storage, the same number of map calls
  REQUIRE(&*slot == first);
  const KeyedBatch fresh = slot->map(Keys{3}, 0);
  CHECK_THROWS_AS(slot->forward(old), ember::StateError);
  ember::SparseRowGrad<float> g;
  CHECK_THROWS_AS(slot->backward(old, grad_for(2, 2, 1.0f), g), ember::StateError);
  CHECK(g.empty());
  CHECK_NOTHROW(slot->forward(fresh));
}

TEST_CASE("KeyedEmbedding names itself and the width in its shape errors", "[keyed_embedding]") {
  KeyedEmbedding<float> emb(4, 3, {.fallback = ember::KeyFallback::shared_row});
  const KeyedBatch b = emb.map(Keys{1, 2}, 0);
  RowMatrix<float> narrow(2, 2);
  const RowMatrix<float> before = narrow;
  CHECK_THROWS_AS(emb.forward(b, narrow), ember::ShapeError);
  CHECK_THROWS_WITH(emb.forward(b, narrow),
                    Catch::Contains("KeyedEmbedding::forward: out has 2 columns, expected the "
                                    "width = 3"));
  CHECK(narrow == before);
  RowMatrix<float> tall(3, 3);
  CHECK_THROWS_WITH(emb.forward(b, tall), Catch::Contains("KeyedEmbedding::forward: out has 3 "
                                                          "rows, expected the number of keys = 2"));
  CHECK_THROWS_WITH(emb.forward(Keys{1, 2}, narrow),
                    Catch::Contains("KeyedEmbedding::forward: out has 2 columns"));
  ember::SparseRowGrad<float> g;
  CHECK_THROWS_WITH(emb.backward(b, grad_for(2, 2, 1.0f), g),
                    Catch::Contains("KeyedEmbedding::backward: grad_out has 2 columns, expected "
                                    "the width = 3"));
  CHECK(g.empty());
  ember::optim::SGD<float> sgd;
  CHECK_THROWS_WITH(emb.backward_step(b, grad_for(2, 2, 1.0f), sgd),
                    Catch::Contains("KeyedEmbedding::backward_step: grad_out has 2 columns, "
                                    "expected the width = 3"));
  CHECK_THROWS_WITH(KeyedEmbedding<float>(4, 0), Catch::Contains("width must be positive"));
  CHECK_THROWS_WITH(emb.set_fallback_values(ember::RowVector<float>::Ones(2)),
                    Catch::Contains("values has 2 columns, expected the width = 3"));
  KeyedEmbedding<float> narrow_copy(4, 2);
  CHECK_THROWS_WITH(narrow_copy.apply_delta(emb.export_delta(-1)),
                    Catch::Contains("expected the width = 2"));
  // The gradient's own shape: the keyed layer's rows and width.
  ember::SparseRowGrad<float> other(9, 3);
  other.accumulate(std::vector<TokenId>{0}, grad_for(1, 3, 1.0f), 1.0f, 9);
  CHECK_THROWS_WITH(emb.step(sgd, other),
                    Catch::Contains("KeyedEmbedding::step: grad has 9 rows, expected capacity() "
                                    "+ 1 = 5"));
}

TEST_CASE("a refused step or backward_step leaves the optimizer state and the table unchanged",
          "[keyed_embedding]") {
  // Row 0 holds key 1's momentum; key 2 takes row 0, queueing its reset. A step that throws
  // must run no reset.
  KeyedEmbedding<float> emb(1, 2, {.scale = ember::LookupScale::none()});
  ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.9, .check_finite = true});
  KeyedBatch b = emb.map(Keys{1}, 0);
  emb.backward_step(b, grad_for(1, 2, 1.0f), sgd);
  b = emb.map(Keys{2}, 1);
  const ember::RowVector<float> momentum = sgd.momentum_buffer(0);
  REQUIRE(momentum.size() == 2);
  const RowMatrix<float> table = emb.table().weight();
  RowMatrix<float> bad = grad_for(1, 2, 1.0f);
  bad(0, 1) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(emb.backward_step(b, bad, sgd), ember::ValueError);
  CHECK_THROWS_WITH(emb.backward_step(b, bad, sgd),
                    Catch::Contains("KeyedEmbedding::backward_step"));
  CHECK(ember_test::same_row_values(sgd.momentum_buffer(0), momentum));
  CHECK(emb.table().weight() == table);
  ember::SparseRowGrad<float> g;
  emb.backward(b, bad, g);
  CHECK_THROWS_AS(emb.step(sgd, g), ember::ValueError);
  CHECK(ember_test::same_row_values(sgd.momentum_buffer(0), momentum));
  CHECK(sgd.step_count() == 1);
  CHECK(emb.table().weight() == table);
  // An optimizer whose state was built for another width.
  KeyedEmbedding<float> wide(1, 3);
  ember::optim::SGD<float> used({.lr = 0.1, .momentum = 0.9});
  KeyedBatch wb = wide.map(Keys{1}, 0);
  wide.backward_step(wb, grad_for(1, 3, 1.0f), used);
  wb = wide.map(Keys{2}, 1);  // row 0 queued for a reset
  CHECK_THROWS_AS(wide.backward_step(wb, grad_for(1, 3, 1.0f), sgd), ember::ShapeError);
  CHECK(ember_test::same_row_values(sgd.momentum_buffer(0), momentum));
  // The refused calls reset nothing, and the next good step still resets row 0 first.
  emb.backward_step(b, grad_for(1, 2, -1.0f), sgd);
  CHECK(sgd.momentum_buffer(0) == grad_for(1, 2, -1.0f));
}
