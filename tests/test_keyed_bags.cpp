// Tests of ember/keyed/keyed_bags.hpp: KeyedEmbeddingBag and KeyedTableBatchedBags against the
// unkeyed bags on the mapped rows, the fallback's place in a pool, the fused steps, the strong
// guarantee of a multi-table map and bad input.
#include "ember/keyed/keyed_bags.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/optim.hpp>

#include "support/matrix_compare.hpp"
#include "support/sparse_optimizers.hpp"

namespace {

using ember::BagMode;
using ember::Index;
using ember::KeyedBatch;
using ember::RowMatrix;
using ember::TokenId;
using Keys = std::vector<std::uint64_t>;

RowMatrix<float> ramp(Index n, Index d, float base) {
  RowMatrix<float> g(n, d);
  for (Index i = 0; i < g.size(); ++i) g.data()[i] = base + 0.03f * static_cast<float>(i % 5);
  return g;
}

}  // namespace

TEST_CASE("a keyed bag pools the rows of its keys, as EmbeddingBag on the mapped rows",
          "[keyed_bags]") {
  for (const BagMode mode : {BagMode::sum, BagMode::mean, BagMode::max}) {
    INFO("mode " << ember::to_string(mode));
    ember::KeyedEmbeddingBag<float> bag(16, 4, mode, {.seed = 3});
    const Keys keys{7, 8, 7, 9, 10, 8};
    const std::vector<int> offsets{0, 2, 2, 5};
    const KeyedBatch batch = bag.map(keys, 0);
    const ember::EmbeddingBag<float> plain(bag.table(), mode);
    CHECK(bag.forward(batch, offsets) == plain.forward(batch.rows(), offsets));
    CHECK(bag.forward(keys, offsets) == plain.forward(batch.rows(), offsets));  // inference
    ember::BagArgmax argmax;
    RowMatrix<float> out(4, 4);
    bag.forward(batch, offsets, out, {}, mode == BagMode::max ? &argmax : nullptr);
    ember::SparseRowGrad<float> g1, g2;
    const RowMatrix<float> grad_out = ramp(4, 4, 0.5f);
    bag.backward(batch, offsets, grad_out, g1, {}, mode == BagMode::max ? &argmax : nullptr);
    plain.backward(batch.rows(), offsets, grad_out, g2, {},
                   mode == BagMode::max ? &argmax : nullptr);
    CHECK(g1 == g2);
    // The fused step gives the bits of backward + step.
    ember::KeyedEmbeddingBag<float> twin = bag;
    const KeyedBatch tb = twin.map(keys, 1);
    const KeyedBatch bb = bag.map(keys, 1);
    ember::optim::Adam<float> a1({.lr = 0.1}), a2({.lr = 0.1});
    ember::BagArgmax am;
    RowMatrix<float> o(4, 4);
    bag.forward(bb, offsets, o, {}, mode == BagMode::max ? &am : nullptr);
    bag.backward_step(bb, offsets, grad_out, a1, {}, mode == BagMode::max ? &am : nullptr);
    ember::SparseRowGrad<float> g;
    twin.backward(tb, offsets, grad_out, g, {}, mode == BagMode::max ? &am : nullptr);
    twin.step(a2, g);
    CHECK(bag.table().weight() == twin.table().weight());
  }
}

TEST_CASE("keys without a row are left out of a keyed bag's pool, or pool the shared row",
          "[keyed_bags]") {
  ember::KeyedEmbeddingBag<float> bag(8, 2, BagMode::mean,
                                      {.index = {.min_count = 2, .sketch_width = 256}});
  const Keys keys{1, 1, 2};  // 1 admitted (seen twice), 2 not
  const std::vector<int> lengths{3};
  const KeyedBatch b = bag.map(keys, 0);
  CHECK(b.rows()[2] == bag.fallback_row());
  const RowMatrix<float> pooled = bag.forward_lengths(keys, lengths);
  CHECK(pooled == bag.table().weight().row(b.rows()[0]));  // the mean of {1, 1}: 2 is not counted

  ember::KeyedEmbeddingBag<float> shared(
      8, 2, BagMode::sum,
      {.index = {.min_count = 9, .sketch_width = 256}, .fallback = ember::KeyFallback::shared_row});
  shared.set_fallback_values(RowMatrix<float>::Constant(1, 2, 0.25f));
  const RowMatrix<float> two = shared.forward_lengths(Keys{5, 6}, std::vector<int>{2});
  CHECK(two == RowMatrix<float>::Constant(1, 2, 0.5f));
}

TEST_CASE("keyed table-batched bags: one map per table, the bags of TableBatchedBags",
          "[keyed_bags]") {
  // Table 0 (users) read by features 0 and 2; table 1 (items) by feature 1. B = 2.
  std::vector<ember::KeyedTableConfig> tables{
      {.capacity = 8, .d_model = 3, .options = {.seed = 1}},
      {.capacity = 4, .d_model = 2, .options = {.seed = 2}}};
  ember::KeyedTableBatchedBags<float> kbb(
      tables, {{.table = 0}, {.table = 1, .mode = BagMode::mean}, {.table = 0}});
  CHECK(kbb.width() == 8);
  const std::uint64_t u = 0xDEADBEEFCAFEF00DULL;
  const Keys keys{u, 42, 100, 101, 100, 42, u, u};  // f0: {u}, {42}; f1: {100, 101}, {100}; f2
  const std::vector<int> offsets{0, 1, 2, 4, 5, 6, 8};
  const KeyedBatch batch = kbb.map(keys, offsets, 0);
  CHECK(batch.rows()[0] == batch.rows()[6]);  // u has one row in table 0, for both features
  CHECK(batch.rows()[1] == batch.rows()[5]);
  CHECK(kbb.index(0).size() == 2);
  CHECK(kbb.index(1).size() == 2);
  const RowMatrix<float> out = kbb.forward(batch, offsets);
  CHECK(out == kbb.bags().forward(batch.rows(), offsets));
  CHECK(kbb.forward(keys, offsets) == out);  // inference over the same keys

  // The fused step equals backward + step, one optimizer per table.
  ember::KeyedTableBatchedBags<float> twin = kbb;
  const KeyedBatch tb = twin.map(keys, offsets, 1);
  const KeyedBatch kb = kbb.map(keys, offsets, 1);
  using Adagrad = ember::optim::RowwiseAdagrad<float>;
  std::vector<Adagrad> o1(2, Adagrad({.lr = 0.1})), o2(2, Adagrad({.lr = 0.1}));
  const RowMatrix<float> grad_out = ramp(2, 8, -0.2f);
  kbb.backward_step(kb, offsets, grad_out, std::span<Adagrad>(o1));
  std::vector<ember::SparseRowGrad<float>> grads;
  twin.backward(tb, offsets, grad_out, grads);
  twin.step(std::span<Adagrad>(o2), grads);
  for (Index t = 0; t < 2; ++t) CHECK(kbb.table(t).weight() == twin.table(t).weight());
  CHECK_THROWS_AS(kbb.forward(tb, offsets), ember::StateError);

  // Deltas per table.
  const ember::KeyedDelta<float> d = kbb.export_delta(0, -1);
  CHECK(d.keys.size() == 2);
}

TEST_CASE("a keyed multi-table map that cannot fit changes no table", "[keyed_bags]") {
  std::vector<ember::KeyedTableConfig> tables{
      {.capacity = 8, .d_model = 2},
      {.capacity = 2, .d_model = 2, .options = {.index = {.policy = ember::EvictionPolicy::none}}}};
  ember::KeyedTableBatchedBags<float> kbb(tables, {{.table = 0}, {.table = 1}});
  const std::vector<int> offsets{0, 1, 4};  // B = 1: f0 {1}, f1 {2, 3, 4}
  CHECK_THROWS_AS(kbb.map(Keys{1, 2, 3, 4}, offsets, 0), ember::CapacityError);
  CHECK(kbb.index(0).empty());
  CHECK(kbb.index(1).empty());
  const std::vector<int> bad{0, 2, 1};
  CHECK_THROWS_AS(kbb.map(Keys{1, 2, 3, 4}, bad, 0), ember::ValueError);
  const std::vector<int> short_offsets{0, 4};
  CHECK_THROWS_AS(kbb.map(Keys{1, 2, 3, 4}, short_offsets, 0), ember::ShapeError);
  const std::vector<int> lengths{1, 1};
  CHECK_THROWS_AS(kbb.map_lengths(Keys{1, 2, 3, 4}, lengths, 0), ember::ValueError);
  const KeyedBatch b = kbb.map_lengths(Keys{1, 2}, lengths, 3);
  CHECK(b.rows()[1] == 0);
  CHECK_THROWS_AS(kbb.map_lengths(Keys{1, 2}, lengths, 2), ember::ValueError);  // step went back
  CHECK(kbb.index(0).size() == 1);
  CHECK_THROWS_AS(kbb.index(2), ember::IndexError);
  CHECK_THROWS_WITH(
      kbb.export_delta(-1, 0),
      Catch::Contains("KeyedTableBatchedBags::export_delta: table -1 is outside [0, 2)"));
  CHECK_THROWS_AS(kbb.erase(2, Keys{1}), ember::IndexError);
  CHECK(kbb.index(0).size() == 1);
}

namespace {

enum class BagStep { unfused, fused, fused_lengths, batched };

/// Trains key 2002 after key 1001 through a keyed bag of capacity `cap` (1: 2002 reuses 1001's
/// row); returns the pool of 2002 alone.
template <class Opt>
RowMatrix<float> train_second_bag_key(Index cap, const Opt& prototype, BagStep how) {
  const Keys first{1001, 1001}, second{2002};
  const std::vector<int> first_offsets{0, 2}, second_offsets{0, 1};
  const std::vector<int> first_lengths{2}, second_lengths{1};
  std::vector<Opt> opts(1, prototype);
  if (how == BagStep::batched) {
    ember::KeyedTableBatchedBags<float> kbb({{.capacity = cap, .d_model = 4}}, {{.table = 0}});
    for (std::int64_t s = 0; s < 5; ++s) {
      const bool early = s < 3;  // 1001 trains 3 steps: state to leak
      const Keys& keys = early ? first : second;
      const KeyedBatch b = kbb.map(keys, early ? first_offsets : second_offsets, s);
      kbb.backward_step(b, early ? first_offsets : second_offsets,
                        ramp(1, 4, early ? 0.5f : -0.25f), std::span<Opt>(opts));
    }
    return kbb.forward(second, second_offsets);
  }
  ember::KeyedEmbeddingBag<float> bag(cap, 4, BagMode::sum);
  const std::vector<int> one_bag{0};  // EmbeddingBag's offsets: one start per bag
  for (std::int64_t s = 0; s < 5; ++s) {
    const bool early = s < 3;
    const KeyedBatch b = bag.map(early ? first : second, s);
    if (!early && cap == 1 && s == 3) REQUIRE(b.evicted().size() == 1);
    const auto& offsets = one_bag;
    const RowMatrix<float> g = ramp(1, 4, early ? 0.5f : -0.25f);
    if (how == BagStep::unfused) {
      ember::SparseRowGrad<float> grad;
      bag.backward(b, offsets, g, grad);
      bag.step(opts[0], grad);
    } else if (how == BagStep::fused) {
      bag.backward_step(b, offsets, g, opts[0]);
    } else {
      bag.backward_step_lengths(b, early ? first_lengths : second_lengths, g, opts[0]);
    }
  }
  return bag.forward(second, one_bag);
}

}  // namespace

TEST_CASE("a reused row of a keyed bag starts fresh, for every optimizer", "[keyed_bags]") {
  const auto check = [](const auto& opt) {
    for (const BagStep how :
         {BagStep::unfused, BagStep::fused, BagStep::fused_lengths, BagStep::batched}) {
      INFO("form " << static_cast<int>(how));
      CHECK(train_second_bag_key(1, opt, how) == train_second_bag_key(2, opt, how));
    }
  };
  ember_test::for_each_sparse_optimizer(check);
}

TEST_CASE("a keyed bag's refused step changes no optimizer state and no row", "[keyed_bags]") {
  // Row 0 holds key 1's momentum; key 2 takes row 0, queueing its reset.
  ember::KeyedEmbeddingBag<float> bag(1, 2, BagMode::sum);
  ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.9});
  const std::vector<int> offsets{0};
  KeyedBatch b = bag.map(Keys{1}, 0);
  bag.backward_step(b, offsets, ramp(1, 2, 1.0f), sgd);
  b = bag.map(Keys{2}, 1);
  const ember::RowVector<float> momentum = sgd.momentum_buffer(0);
  REQUIRE(momentum.size() == 2);
  const RowMatrix<float> table = bag.table().weight();
  ember::SparseRowGrad<float> wrong(5, 2);  // bound to another table's shape
  wrong.accumulate(std::vector<TokenId>{0}, ramp(1, 2, 1.0f), 1.0f, 5);
  CHECK_THROWS_AS(bag.step(sgd, wrong), ember::ShapeError);
  CHECK_THROWS_WITH(bag.step(sgd, wrong),
                    Catch::Contains("KeyedEmbeddingBag::step: grad has 5 rows, expected "
                                    "capacity() + 1 = 2"));
  CHECK(ember_test::same_row_values(sgd.momentum_buffer(0), momentum));
  CHECK(sgd.step_count() == 1);
  CHECK(bag.table().weight() == table);
  // The fused steps: offsets or lengths past the keys, a grad_out of another width.
  CHECK_THROWS_WITH(bag.backward_step(b, std::vector<int>{0, 2}, ramp(2, 2, 1.0f), sgd),
                    Catch::Contains("offsets[1] = 2"));
  CHECK_THROWS_AS(bag.backward_step(b, offsets, ramp(1, 3, 1.0f), sgd), ember::ShapeError);
  CHECK_THROWS_WITH(bag.backward_step_lengths(b, std::vector<int>{2}, ramp(1, 2, 1.0f), sgd),
                    Catch::Contains("lengths sum to 2"));
  CHECK(ember_test::same_row_values(sgd.momentum_buffer(0), momentum));
  CHECK(sgd.step_count() == 1);
  CHECK(bag.table().weight() == table);
  // The good step then resets row 0 first: its momentum starts from the new key's gradient.
  ember::SparseRowGrad<float> g;
  bag.backward(b, offsets, ramp(1, 2, -1.0f), g);
  bag.step(sgd, g);
  CHECK(sgd.momentum_buffer(0) == ramp(1, 2, -1.0f));
}

TEST_CASE("a keyed collection's refused step changes no optimizer state", "[keyed_bags]") {
  std::vector<ember::KeyedTableConfig> tables{{.capacity = 1, .d_model = 2},
                                              {.capacity = 4, .d_model = 2}};
  ember::KeyedTableBatchedBags<float> kbb(tables, {{.table = 0}, {.table = 1}});
  const std::vector<int> offsets{0, 1, 2};
  using SGD = ember::optim::SGD<float>;
  std::vector<SGD> opts(2, SGD({.lr = 0.1, .momentum = 0.9}));
  KeyedBatch b = kbb.map(Keys{1, 5}, offsets, 0);
  kbb.backward_step(b, offsets, ramp(1, 4, 1.0f), std::span<SGD>(opts));
  b = kbb.map(Keys{2, 5}, offsets, 1);  // key 2 takes row 0 of table 0
  const ember::RowVector<float> momentum = opts[0].momentum_buffer(0);
  REQUIRE(momentum.size() == 2);
  std::vector<ember::SparseRowGrad<float>> grads;
  kbb.backward(b, offsets, ramp(1, 4, 1.0f), grads);
  grads[1] = ember::SparseRowGrad<float>(9, 2);  // table 1 has 5 rows
  grads[1].accumulate(std::vector<TokenId>{0}, ramp(1, 2, 1.0f), 1.0f, 9);
  CHECK_THROWS_WITH(kbb.step(std::span<SGD>(opts), grads),
                    Catch::Contains("KeyedTableBatchedBags::step: grads[1] has 9 rows"));
  CHECK(ember_test::same_row_values(opts[0].momentum_buffer(0), momentum));
  CHECK(opts[0].step_count() == 1);
  // The fused step refuses a grad_out of another width before any reset.
  CHECK_THROWS_AS(kbb.backward_step(b, offsets, ramp(1, 3, 1.0f), std::span<SGD>(opts)),
                  ember::ShapeError);
  CHECK(ember_test::same_row_values(opts[0].momentum_buffer(0), momentum));
  CHECK(opts[0].step_count() == 1);
  // A good fused step resets row 0 of table 0 first.
  kbb.backward_step(b, offsets, ramp(1, 4, -1.0f), std::span<SGD>(opts));
  CHECK(opts[0].momentum_buffer(0) == ramp(1, 4, -1.0f).leftCols(2));
}

TEST_CASE("a batch of a destroyed collection fails the check of one built at its address",
          "[keyed_bags]") {
  const std::vector<ember::KeyedTableConfig> tables{{.capacity = 4, .d_model = 2}};
  const std::vector<int> offsets{0, 2};
  std::optional<ember::KeyedTableBatchedBags<float>> slot;
  slot.emplace(tables, std::vector<ember::BagFeature>{{.table = 0}});
  const auto* first = &*slot;
  const KeyedBatch old = slot->map(Keys{1, 2}, offsets, 0);
  slot.reset();
  slot.emplace(tables, std::vector<ember::BagFeature>{{.table = 0}});
  REQUIRE(&*slot == first);
  const KeyedBatch fresh = slot->map(Keys{3, 4}, offsets, 0);
  CHECK_THROWS_AS(slot->forward(old, offsets), ember::StateError);
  CHECK_NOTHROW(slot->forward(fresh, offsets));
  // And for a keyed bag.
  std::optional<ember::KeyedEmbeddingBag<float>> bag;
  bag.emplace(4, 2, BagMode::sum);
  const KeyedBatch old_bag = bag->map(Keys{1, 2}, 0);
  bag.reset();
  bag.emplace(4, 2, BagMode::sum);
  static_cast<void>(bag->map(Keys{3}, 0));
  CHECK_THROWS_AS(bag->forward(old_bag, offsets), ember::StateError);
}

TEST_CASE("every keyed layer refuses a stale batch with the same words", "[keyed_bags]") {
  ember::KeyedEmbeddingBag<float> bag(4, 2, BagMode::sum);
  ember::KeyedTableBatchedBags<float> kbb({{.capacity = 4, .d_model = 2}}, {{.table = 0}});
  const std::vector<int> offsets{0, 1};
  const KeyedBatch stale_bag = bag.map(Keys{1}, 0);
  const KeyedBatch stale_kbb = kbb.map(Keys{1}, offsets, 0);
  static_cast<void>(bag.map(Keys{2}, 1));
  static_cast<void>(kbb.map(Keys{2}, offsets, 1));
  const std::string words = "the batch was not mapped by this layer's latest map()";
  CHECK_THROWS_WITH(bag.forward(stale_bag, offsets),
                    Catch::Contains("KeyedEmbeddingBag::forward: " + words));
  CHECK_THROWS_WITH(kbb.forward(stale_kbb, offsets),
                    Catch::Contains("KeyedTableBatchedBags::forward: " + words));
}

TEST_CASE("a keyed bag's bad offsets and gradients are reported under the keyed layer's name",
          "[keyed_bags]") {
  ember::KeyedEmbeddingBag<float> bag(8, 3, BagMode::sum, {.seed = 5});
  const Keys keys{10, 11, 12};
  const KeyedBatch batch = bag.map(keys, 0);
  const std::vector<int> decreasing{0, 2, 1};
  CHECK_THROWS_WITH(bag.forward(batch, decreasing),
                    Catch::StartsWith("KeyedEmbeddingBag::forward: "));
  CHECK_THROWS_WITH(bag.forward(keys, decreasing),
                    Catch::StartsWith("KeyedEmbeddingBag::forward: "));
  const std::vector<int> offsets{0, 2};
  ember::SparseRowGrad<float> grad;
  const RowMatrix<float> narrow = RowMatrix<float>::Zero(2, 2);  // width 3 expected
  CHECK_THROWS_WITH(bag.backward(batch, offsets, narrow, grad),
                    Catch::StartsWith("KeyedEmbeddingBag::backward: "));

  std::vector<ember::KeyedTableConfig> tables{{.capacity = 8, .d_model = 2}};
  ember::KeyedTableBatchedBags<float> kbb(tables, {{.table = 0}});
  const std::vector<int> kbb_offsets{0, 1, 3};  // B = 2: {20}, {21, 22}
  const KeyedBatch kb = kbb.map(Keys{20, 21, 22}, kbb_offsets, 0);
  const std::vector<int> kbb_decreasing{0, 2, 1};
  CHECK_THROWS_WITH(kbb.forward(kb, kbb_decreasing),
                    Catch::StartsWith("KeyedTableBatchedBags::forward: "));
}
