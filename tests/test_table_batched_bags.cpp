// Tests of TableBatchedBags: each feature's columns are EmbeddingBag's bits, offsets and lengths
// agree, shared tables sum their features' gradients, the fused step equals backward + step for
// every optimizer and thread count, every table kind looks up, bad input changes nothing.
// SPDX-License-Identifier: MIT
#include <ember/optim.hpp>
#include <ember/quantized.hpp>
#include <ember/reduced.hpp>
#include <ember/table_batched_bags.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::BagFeature;
using ember::BagMode;
using ember::Index;
using ember::RowMatrix;
using ember::TableBatchedBags;
using ember::TokenId;
using ember_test::random_table;
using ember_test::same_bits;

namespace {

/// A batch of B bags per feature: feature f's bag b has (b + f) % 4 ids (some empty), drawn
/// over [0, vocab of its table).
struct Batch {
  std::vector<TokenId> indices;
  std::vector<Index> offsets;  // F·B + 1
  std::vector<Index> lengths;  // F·B
};

Batch make_batch(const std::vector<Index>& vocab_of_feature, Index B, std::uint64_t seed,
                 Index max_len = 4) {
  Batch batch;
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  batch.offsets.push_back(0);
  for (std::size_t f = 0; f < vocab_of_feature.size(); ++f) {
    for (Index b = 0; b < B; ++b) {
      const Index len = (b + static_cast<Index>(f) + static_cast<Index>(seed)) % max_len;
      for (Index k = 0; k < len; ++k) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        // Skewed: low ids repeat (several bags share rows, and so do shared-table features).
        const auto u = static_cast<double>(s % 10007) / 10007.0;
        batch.indices.push_back(
            static_cast<TokenId>(u * u * static_cast<double>(vocab_of_feature[f])));
      }
      batch.lengths.push_back(len);
      batch.offsets.push_back(static_cast<Index>(batch.indices.size()));
    }
  }
  return batch;
}

std::vector<ember::Embedding<float>> make_tables(const std::vector<std::pair<Index, Index>>& shapes,
                                                 std::uint64_t seed) {
  std::vector<ember::Embedding<float>> tables;
  for (const auto& [v, d] : shapes) tables.emplace_back(v, d, seed++);
  return tables;
}

/// The ids, bounds and weights of feature f, as an EmbeddingBag call would take them.
struct FeatureSlice {
  std::vector<TokenId> ids;
  std::vector<Index> offsets;  // B entries (PyTorch's layout, last bag to the end)
  std::vector<float> weights;
};

FeatureSlice slice(const Batch& batch, Index f, Index B, const std::vector<float>& weights) {
  FeatureSlice s;
  const Index begin = batch.offsets[static_cast<std::size_t>(f * B)];
  const Index end = batch.offsets[static_cast<std::size_t>(f * B + B)];
  s.ids.assign(batch.indices.begin() + begin, batch.indices.begin() + end);
  if (!weights.empty()) s.weights.assign(weights.begin() + begin, weights.begin() + end);
  for (Index b = 0; b < B; ++b)
    s.offsets.push_back(batch.offsets[static_cast<std::size_t>(f * B + b)] - begin);
  return s;
}

// Three tables of different widths; five features, tables 0 and 2 read twice; every mode.
const std::vector<std::pair<Index, Index>> kShapes{{40, 8}, {7, 5}, {300, 16}};
const std::vector<BagFeature> kFeatures{{.table = 0, .mode = BagMode::sum},
                                        {.table = 2, .mode = BagMode::mean},
                                        {.table = 1, .mode = BagMode::max},
                                        {.table = 0, .mode = BagMode::sum, .weighted = true},
                                        {.table = 2, .mode = BagMode::sum}};

std::vector<Index> vocab_of(const std::vector<BagFeature>& features) {
  std::vector<Index> v;
  for (const auto& f : features) v.push_back(kShapes[static_cast<std::size_t>(f.table)].first);
  return v;
}

}  // namespace

TEST_CASE("TableBatchedBags: each feature's columns are EmbeddingBag's bits",
          "[table_batched_bags]") {
  const Index B = 9;
  TableBatchedBags<float> tbe(make_tables(kShapes, 3), kFeatures);
  tbe.table(0).set_padding_idx(0, false);
  REQUIRE(tbe.num_tables() == 3);
  REQUIRE(tbe.num_features() == 5);
  REQUIRE(tbe.width() == 8 + 16 + 5 + 8 + 16);
  CHECK(tbe.column(2) == 24);
  const Batch batch = make_batch(vocab_of(kFeatures), B, 1);
  const RowMatrix<float> w = random_table<float>(1, static_cast<Index>(batch.indices.size()), 5);
  const std::vector<float> weights(w.data(), w.data() + w.size());
  std::vector<ember::BagArgmax> argmax;
  RowMatrix<float> out(B, tbe.width());
  tbe.forward(batch.indices, batch.offsets, out, weights, &argmax);
  REQUIRE(argmax.size() == 5);
  CHECK(argmax[0].size() == 0);
  CHECK(argmax[2].rows() == B);
  for (Index f = 0; f < tbe.num_features(); ++f) {
    const BagFeature& feat = tbe.feature(f);
    ember::EmbeddingBag<float> bag(tbe.table(feat.table), feat.mode);
    const FeatureSlice s = slice(batch, f, B, feat.weighted ? weights : std::vector<float>{});
    ember::BagOptions<float> options;
    options.per_sample_weights = s.weights;
    ember::BagArgmax bag_argmax;
    RowMatrix<float> expected(B, tbe.table(feat.table).d_model());
    bag.forward(s.ids, s.offsets, expected, options,
                feat.mode == BagMode::max ? &bag_argmax : nullptr);
    INFO("feature " << f);
    CHECK(same_bits(out.middleCols(tbe.column(f), expected.cols()), expected));
    if (feat.mode == BagMode::max) CHECK(argmax[static_cast<std::size_t>(f)] == bag_argmax);
  }
  SECTION("lengths give the same output as offsets") {
    CHECK(same_bits(tbe.forward_lengths(batch.indices, batch.lengths, weights), out));
    CHECK(same_bits(tbe.forward(batch.indices, batch.offsets, weights), out));
  }
}

TEST_CASE("TableBatchedBags looks up half, bfloat16 and int8 tables as EmbeddingBag does",
          "[table_batched_bags]") {
  const Index B = 6;
  const std::vector<BagFeature> features{{.table = 0, .mode = BagMode::sum},
                                         {.table = 1, .mode = BagMode::mean},
                                         {.table = 0, .mode = BagMode::max}};
  const auto check_kind = [&](auto make) {
    using Tab = decltype(make(RowMatrix<float>()));
    std::vector<Tab> tables;
    tables.push_back(make(random_table<float>(30, 8, 1)));
    tables.push_back(make(random_table<float>(12, 16, 2)));
    TableBatchedBags<Tab> tbe(tables, features);
    const Batch batch = make_batch({30, 12, 30}, B, 2);
    const RowMatrix<float> out = tbe.forward(batch.indices, batch.offsets);
    for (Index f = 0; f < 3; ++f) {
      ember::EmbeddingBag<Tab> bag(
          tables[static_cast<std::size_t>(features[static_cast<std::size_t>(f)].table)],
          features[static_cast<std::size_t>(f)].mode);
      const FeatureSlice s = slice(batch, f, B, {});
      const RowMatrix<float> expected = bag.forward(s.ids, s.offsets);
      CHECK(same_bits(out.middleCols(tbe.column(f), expected.cols()), expected));
    }
  };
  check_kind([](const RowMatrix<float>& t) { return ember::HalfEmbedding::from_float(t); });
  check_kind([](const RowMatrix<float>& t) { return ember::BFloat16Embedding::from_float(t); });
  check_kind([](const RowMatrix<float>& t) { return ember::QuantizedEmbedding(t); });
}

TEST_CASE("TableBatchedBags::backward: one feature per table is EmbeddingBag's backward",
          "[table_batched_bags]") {
  const Index B = 11;
  const std::vector<BagFeature> features{{.table = 0, .mode = BagMode::mean},
                                         {.table = 1, .mode = BagMode::max},
                                         {.table = 2, .mode = BagMode::sum, .weighted = true}};
  TableBatchedBags<float> tbe(make_tables(kShapes, 4), features);
  tbe.table(2).set_padding_idx(1, false);
  tbe.table(0).set_scale_grad_by_freq(true);
  const Batch batch = make_batch(vocab_of(features), B, 3);
  const RowMatrix<float> w = random_table<float>(1, static_cast<Index>(batch.indices.size()), 9);
  const std::vector<float> weights(w.data(), w.data() + w.size());
  std::vector<ember::BagArgmax> argmax;
  RowMatrix<float> out(B, tbe.width());
  tbe.forward(batch.indices, batch.offsets, out, weights, &argmax);
  const RowMatrix<float> grad_out = random_table<float>(B, tbe.width(), 10);
  std::vector<ember::SparseRowGrad<float>> grads;
  tbe.backward(batch.indices, batch.offsets, grad_out, grads, weights, &argmax);
  REQUIRE(grads.size() == 3);
  for (Index f = 0; f < 3; ++f) {
    const BagFeature& feat = tbe.feature(f);
    ember::EmbeddingBag<float> bag(tbe.table(feat.table), feat.mode);
    const FeatureSlice s = slice(batch, f, B, feat.weighted ? weights : std::vector<float>{});
    ember::BagOptions<float> options;
    options.per_sample_weights = s.weights;
    const Index d = tbe.table(feat.table).d_model();
    ember::SparseRowGrad<float> expected;
    bag.backward(s.ids, s.offsets, grad_out.middleCols(tbe.column(f), d), expected, options,
                 feat.mode == BagMode::max ? &argmax[static_cast<std::size_t>(f)] : nullptr);
    INFO("feature " << f);
    CHECK(grads[static_cast<std::size_t>(feat.table)] == expected);
  }
  SECTION("lengths give the same gradients") {
    std::vector<ember::SparseRowGrad<float>> by_lengths;
    tbe.backward_lengths(batch.indices, batch.lengths, grad_out, by_lengths, weights, &argmax);
    CHECK(by_lengths == grads);
  }
}

TEST_CASE("TableBatchedBags::backward reads grad_out through its stride", "[table_batched_bags]") {
  const Index B = 9;
  TableBatchedBags<float> tbe(make_tables(kShapes, 5), kFeatures);
  const Batch batch = make_batch(vocab_of(kFeatures), B, 6);
  const RowMatrix<float> w = random_table<float>(1, static_cast<Index>(batch.indices.size()), 3);
  const std::vector<float> weights(w.data(), w.data() + w.size());
  std::vector<ember::BagArgmax> argmax;
  RowMatrix<float> out(B, tbe.width());
  tbe.forward(batch.indices, batch.offsets, out, weights, &argmax);
  // grad_out as a block of a wider matrix: its rows lie width() + 5 values apart.
  const RowMatrix<float> wide = random_table<float>(B, tbe.width() + 5, 4);
  const RowMatrix<float> packed = wide.leftCols(tbe.width());
  std::vector<ember::SparseRowGrad<float>> from_block, from_packed;
  tbe.backward(batch.indices, batch.offsets, wide.leftCols(tbe.width()), from_block, weights,
               &argmax);
  tbe.backward(batch.indices, batch.offsets, packed, from_packed, weights, &argmax);
  CHECK(from_block == from_packed);
  SECTION("and so does backward_step") {
    TableBatchedBags<float> copy = tbe;
    std::vector<ember::optim::Adam<float>> opt_block(3), opt_packed(3);
    tbe.backward_step(batch.indices, batch.offsets, wide.leftCols(tbe.width()),
                      std::span(opt_block), weights, &argmax);
    copy.backward_step(batch.indices, batch.offsets, packed, std::span(opt_packed), weights,
                       &argmax);
    for (Index t = 0; t < 3; ++t) CHECK(same_bits(tbe.table(t).weight(), copy.table(t).weight()));
  }
}

TEST_CASE("TableBatchedBags::backward pools a weighted feature without weights as its forward",
          "[table_batched_bags]") {
  // Without per_sample_weights a weighted feature pools unweighted, forward and backward alike.
  const Index B = 6;
  TableBatchedBags<float> weighted(
      make_tables(kShapes, 7),
      {{.table = 0, .mode = BagMode::sum, .weighted = true}, {.table = 1, .mode = BagMode::mean}});
  TableBatchedBags<float> plain(make_tables(kShapes, 7), {{.table = 0, .mode = BagMode::sum},
                                                          {.table = 1, .mode = BagMode::mean}});
  const Batch batch = make_batch({kShapes[0].first, kShapes[1].first}, B, 8);
  CHECK(same_bits(weighted.forward(batch.indices, batch.offsets),
                  plain.forward(batch.indices, batch.offsets)));
  const RowMatrix<float> grad_out = random_table<float>(B, weighted.width(), 9);
  std::vector<ember::SparseRowGrad<float>> a, b;
  weighted.backward(batch.indices, batch.offsets, grad_out, a);
  plain.backward(batch.indices, batch.offsets, grad_out, b);
  CHECK(a == b);
}

TEST_CASE("TableBatchedBags::backward sums the features that share a table",
          "[table_batched_bags]") {
  const Index B = 7;
  TableBatchedBags<double> tbe(
      [] {
        std::vector<ember::Embedding<double>> t;
        for (const auto& [v, d] : kShapes) t.emplace_back(v, d, 2);
        return t;
      }(),
      kFeatures);
  const Batch batch = make_batch(vocab_of(kFeatures), B, 4);
  const RowMatrix<double> w = random_table<double>(1, static_cast<Index>(batch.indices.size()), 1);
  const std::vector<double> weights(w.data(), w.data() + w.size());
  std::vector<ember::BagArgmax> argmax;
  RowMatrix<double> out(B, tbe.width());
  tbe.forward(batch.indices, batch.offsets, out, weights, &argmax);
  const RowMatrix<double> grad_out = random_table<double>(B, tbe.width(), 2);
  std::vector<ember::SparseRowGrad<double>> grads;
  tbe.backward(batch.indices, batch.offsets, grad_out, grads, weights, &argmax);
  std::vector<RowMatrix<double>> expected;
  for (const auto& [v, d] : kShapes) expected.push_back(RowMatrix<double>::Zero(v, d));
  for (Index f = 0; f < tbe.num_features(); ++f) {
    const BagFeature& feat = tbe.feature(f);
    ember::EmbeddingBag<double> bag(tbe.table(feat.table), feat.mode);
    const FeatureSlice s = slice(batch, f, B, {});
    ember::BagOptions<double> options;
    std::vector<double> fw;
    if (feat.weighted) {
      const Index begin = batch.offsets[static_cast<std::size_t>(f * B)];
      fw.assign(weights.begin() + begin,
                weights.begin() + begin + static_cast<Index>(s.ids.size()));
      options.per_sample_weights = fw;
    }
    ember::SparseRowGrad<double> g;
    bag.backward(s.ids, s.offsets,
                 grad_out.middleCols(tbe.column(f), tbe.table(feat.table).d_model()), g, options,
                 feat.mode == BagMode::max ? &argmax[static_cast<std::size_t>(f)] : nullptr);
    g.add_to(expected[static_cast<std::size_t>(feat.table)]);
  }
  for (std::size_t t = 0; t < 3; ++t) {
    INFO("table " << t);
    CHECK(grads[t].to_dense().isApprox(expected[t], 1e-12));
  }
}

namespace {

template <class Opt>
void check_tbe_fused(Opt proto, int steps = 3) {
  const Index B = 64;
  auto tables = make_tables({{400, 16}, {7, 8}, {3000, 32}}, 6);
  tables[0].set_padding_idx(0, false);
  tables[2].set_scale_grad_by_freq(true);
  const std::vector<BagFeature> features{{.table = 0, .mode = BagMode::sum},
                                         {.table = 2, .mode = BagMode::mean},
                                         {.table = 1, .mode = BagMode::max},
                                         {.table = 0, .mode = BagMode::sum, .weighted = true},
                                         {.table = 2, .mode = BagMode::sum}};
  TableBatchedBags<float> a(tables, features);
  TableBatchedBags<float> b(tables, features);
  std::vector<Opt> fused(3, proto);
  std::vector<Opt> unfused(3, proto);
  for (int k = 0; k < steps; ++k) {
    const Batch batch =
        make_batch({400, 3000, 7, 400, 3000}, B, static_cast<std::uint64_t>(k) + 5, 40);
    const RowMatrix<float> w = random_table<float>(1, static_cast<Index>(batch.indices.size()), 3);
    const std::vector<float> weights(w.data(), w.data() + w.size());
    std::vector<ember::BagArgmax> am_a;
    std::vector<ember::BagArgmax> am_b;
    RowMatrix<float> out_a(B, a.width());
    RowMatrix<float> out_b(B, b.width());
    a.forward(batch.indices, batch.offsets, out_a, weights, &am_a);
    b.forward(batch.indices, batch.offsets, out_b, weights, &am_b);
    REQUIRE(same_bits(out_a, out_b));
    const RowMatrix<float> grad_out =
        random_table<float>(B, a.width(), 30 + static_cast<std::uint64_t>(k));
    a.backward_step(batch.indices, batch.offsets, grad_out, std::span<Opt>(fused), weights, &am_a);
    std::vector<ember::SparseRowGrad<float>> grads;
    b.backward(batch.indices, batch.offsets, grad_out, grads, weights, &am_b);
    for (Index t = 0; t < 3; ++t)
      unfused[static_cast<std::size_t>(t)].step(b.table(t), grads[static_cast<std::size_t>(t)]);
    for (Index t = 0; t < 3; ++t) {
      INFO("step " << k << ", table " << t);
      REQUIRE(same_bits(a.table(t).weight(), b.table(t).weight()));
      REQUIRE(fused[static_cast<std::size_t>(t)].step_count() ==
              unfused[static_cast<std::size_t>(t)].step_count());
      REQUIRE(fused[static_cast<std::size_t>(t)].state_rows() ==
              unfused[static_cast<std::size_t>(t)].state_rows());
    }
  }
}

template <class F>
void for_each_thread_count(F&& f) {
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    INFO("threads = " << threads);
    f();
  }
  omp_set_num_threads(saved);
#else
  f();
#endif
}

}  // namespace

TEST_CASE("TableBatchedBags::backward_step gives the bits of backward + step",
          "[table_batched_bags][optim][fused]") {
  using namespace ember::optim;
  for_each_thread_count([] {
    check_tbe_fused(SGD<float>({.lr = 0.1}));
    check_tbe_fused(SGD<float>({.lr = 0.05, .momentum = 0.9}));
    check_tbe_fused(Adam<float>({.lr = 0.01}));
    check_tbe_fused(Adam<float>({.lr = 0.01, .weight_decay = 0.1, .decoupled = true}));
    check_tbe_fused(RowwiseAdagrad<float>({.lr = 0.1}));
  });
}

TEST_CASE("TableBatchedBags runs many tables in parallel with the same bits",
          "[table_batched_bags][optim][fused]") {
  // 12 tables: enough for the tables themselves to run in parallel at 2 and 4 threads.
  std::vector<std::pair<Index, Index>> shapes;
  for (Index t = 0; t < 12; ++t) shapes.emplace_back(50 + 40 * t, 8 + 8 * (t % 3));
  const Index B = 256;
  std::vector<Index> vocab;
  for (const auto& s : shapes) vocab.push_back(s.first);
  const Batch batch = make_batch(vocab, B, 7, 12);
  RowMatrix<float> reference;
  for_each_thread_count([&] {
    TableBatchedBags<float> tbe(make_tables(shapes, 1), BagMode::sum);
    std::vector<ember::optim::RowwiseAdagrad<float>> opts(
        12, ember::optim::RowwiseAdagrad<float>({.lr = 0.2}));
    RowMatrix<float> out(B, tbe.width());
    for (int k = 0; k < 3; ++k) {
      tbe.forward(batch.indices, batch.offsets, out);
      tbe.backward_step(batch.indices, batch.offsets, out, std::span(opts));
    }
    tbe.forward(batch.indices, batch.offsets, out);
    if (reference.size() == 0) reference = out;
    CHECK(same_bits(out, reference));
  });
}

TEST_CASE("TableBatchedBags on bad input throws and changes nothing",
          "[table_batched_bags][errors]") {
  TableBatchedBags<float> tbe(make_tables(kShapes, 1), kFeatures);
  const Index B = 3;
  const Batch batch = make_batch(vocab_of(kFeatures), B, 2);
  const auto n = static_cast<Index>(batch.indices.size());
  const std::vector<float> weights(static_cast<std::size_t>(n), 0.5F);
  std::vector<ember::BagArgmax> argmax;
  RowMatrix<float> out(B, tbe.width());
  tbe.forward(batch.indices, batch.offsets, out, weights, &argmax);
  const RowMatrix<float> grad_out = random_table<float>(B, tbe.width(), 1);
  std::vector<ember::optim::SGD<float>> opts(3, ember::optim::SGD<float>({.lr = 0.1}));
  std::vector<RowMatrix<float>> before;
  for (Index t = 0; t < 3; ++t) before.push_back(tbe.table(t).weight());

  SECTION("construction") {
    CHECK_THROWS_AS(TableBatchedBags<float>(make_tables(kShapes, 1), std::vector<BagFeature>{}),
                    ember::ValueError);
    CHECK_THROWS_AS(TableBatchedBags<float>(make_tables(kShapes, 1), {{.table = 3}}),
                    ember::IndexError);
    CHECK_THROWS_AS(
        TableBatchedBags<float>(make_tables(kShapes, 1),
                                {{.table = 0, .mode = BagMode::mean, .weighted = true}}),
        ember::ValueError);
  }
  SECTION("offsets") {
    std::vector<Index> short_offsets(batch.offsets.begin(), batch.offsets.end() - 1);
    CHECK_THROWS_AS(tbe.forward(batch.indices, short_offsets, weights), ember::ShapeError);
    std::vector<Index> bad = batch.offsets;
    bad[0] = 1;
    CHECK_THROWS_AS(tbe.forward(batch.indices, bad, weights), ember::ValueError);
    bad = batch.offsets;
    bad[4] = bad[3] - 1;
    CHECK_THROWS_AS(tbe.forward(batch.indices, bad, weights), ember::ValueError);
    bad = batch.offsets;
    bad.back() = n - 1;
    CHECK_THROWS_AS(tbe.forward(batch.indices, bad, weights), ember::ValueError);
    std::vector<Index> lengths = batch.lengths;
    lengths[2] += 1;
    CHECK_THROWS_AS(tbe.forward_lengths(batch.indices, lengths, weights), ember::ShapeError);
    lengths = batch.lengths;
    lengths[1] = -1;
    CHECK_THROWS_AS(tbe.forward_lengths(batch.indices, lengths, weights), ember::ValueError);
  }
  SECTION("an id outside its feature's table names position, feature and table") {
    std::vector<TokenId> ids = batch.indices;
    const Index f2 = batch.offsets[static_cast<std::size_t>(2 * B)];  // feature 2: table 1, V = 7
    REQUIRE(f2 < batch.offsets[static_cast<std::size_t>(3 * B)]);
    ids[static_cast<std::size_t>(f2)] = 7;
    try {
      static_cast<void>(tbe.forward(ids, batch.offsets, weights));
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(e.position() == f2);
      CHECK(e.value() == 7);
      CHECK(e.bound() == 7);
      CHECK(std::string(e.what()).find("feature 2, table 1") != std::string::npos);
    }
    std::vector<ember::SparseRowGrad<float>> grads;
    CHECK_THROWS_AS(tbe.backward(ids, batch.offsets, grad_out, grads, weights, &argmax),
                    ember::IndexError);
    CHECK(grads.empty());
  }
  SECTION("weights") {
    CHECK_THROWS_AS(
        tbe.forward(batch.indices, batch.offsets, std::span<const float>(weights).first(2)),
        ember::ShapeError);
    TableBatchedBags<float> unweighted(make_tables(kShapes, 1), BagMode::sum);
    const Batch b3 = make_batch({40, 7, 300}, B, 2);
    const std::vector<float> w3(b3.indices.size(), 1.0F);
    CHECK_THROWS_AS(unweighted.forward(b3.indices, b3.offsets, w3), ember::ValueError);
  }
  SECTION("shapes of out, grad_out, grads and optimizers") {
    RowMatrix<float> narrow(B, tbe.width() - 1);
    CHECK_THROWS_AS(tbe.forward(batch.indices, batch.offsets, narrow, weights), ember::ShapeError);
    std::vector<ember::SparseRowGrad<float>> grads;
    CHECK_THROWS_AS(
        tbe.backward(batch.indices, batch.offsets, random_table<float>(B + 1, tbe.width(), 1),
                     grads, weights, &argmax),
        ember::ShapeError);
    std::vector<ember::SparseRowGrad<float>> wrong(3);
    wrong[1] = ember::SparseRowGrad<float>(8, 5);
    CHECK_THROWS_AS(tbe.backward(batch.indices, batch.offsets, grad_out, wrong, weights, &argmax),
                    ember::ShapeError);
    CHECK(wrong[0].empty());
    CHECK_THROWS_AS(tbe.backward_step(batch.indices, batch.offsets, grad_out,
                                      std::span(opts).first(2), weights, &argmax),
                    ember::ShapeError);
  }
  SECTION("max features need their argmax") {
    CHECK_THROWS_AS(
        tbe.backward_step(batch.indices, batch.offsets, grad_out, std::span(opts), weights),
        ember::StateError);
    std::vector<ember::BagArgmax> bad = argmax;
    bad[2](0, 0) = 7;
    CHECK_THROWS_AS(
        tbe.backward_step(batch.indices, batch.offsets, grad_out, std::span(opts), weights, &bad),
        ember::IndexError);
  }
  SECTION("a frozen table stops the whole step") {
    tbe.table(2).freeze();
    CHECK_THROWS_AS(tbe.backward_step(batch.indices, batch.offsets, grad_out, std::span(opts),
                                      weights, &argmax),
                    ember::StateError);
  }
  for (Index t = 0; t < 3; ++t)
    CHECK(same_bits(tbe.table(t).weight(), before[static_cast<std::size_t>(t)]));
  for (const auto& o : opts) CHECK(o.step_count() == 0);
}

TEST_CASE("TableBatchedBags' accessors refuse a feature or a table that does not exist",
          "[table_batched_bags]") {
  TableBatchedBags<float> tbe(make_tables(kShapes, 1), kFeatures);
  const TableBatchedBags<float>& ctbe = tbe;
  const auto refused = [](auto&& call, const std::string& message, Index value, Index bound) {
    try {
      static_cast<void>(call());
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(std::string(e.what()) == message);
      CHECK(e.position() == -1);
      CHECK(e.value() == value);
      CHECK(e.bound() == bound);
    }
  };
  const Index nf = tbe.num_features();
  const Index nt = tbe.num_tables();
  const std::string features = " is outside [0, " + std::to_string(nf) + ")";
  const std::string tables = " is outside [0, " + std::to_string(nt) + ")";
  refused([&] { return tbe.column(nf); },
          "TableBatchedBags::column: feature " + std::to_string(nf) + features, nf, nf);
  refused([&] { return tbe.column(-1); }, "TableBatchedBags::column: feature -1" + features, -1,
          nf);
  refused([&] { return tbe.feature(nf); },
          "TableBatchedBags::feature: feature " + std::to_string(nf) + features, nf, nf);
  refused([&] { return ctbe.table(nt); },
          "TableBatchedBags::table: table " + std::to_string(nt) + tables, nt, nt);
  refused([&] { return tbe.table(-2).vocab_size(); }, "TableBatchedBags::table: table -2" + tables,
          -2, nt);
  // The valid ones are what the layout says.
  CHECK(tbe.column(0) == 0);
  CHECK(tbe.column(nf - 1) + tbe.table(tbe.feature(nf - 1).table).d_model() == tbe.width());
}

TEST_CASE("TableBatchedBags names a wrong count of offsets or lengths by the counts that would do",
          "[table_batched_bags]") {
  // Two features over two tables: offsets need 2·B + 1 entries, lengths 2·B.
  TableBatchedBags<float> tbe(make_tables({{10, 4}, {6, 3}}, 1), BagMode::sum);
  const std::vector<int> ids{1, 2, 3, 4, 5, 6, 7};
  const auto offsets = ember_test::catch_as<ember::ShapeError>([&] {
    static_cast<void>(tbe.forward(ids, std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  });
  REQUIRE(offsets);
  CHECK(std::string(offsets->what()) ==
        "TableBatchedBags::forward: offsets has 8 entries, expected F·B + 1 for the 2 features: "
        "7 (B = 3) or 9 (B = 4)");
  CHECK(offsets->dimension() == 0);
  CHECK(offsets->expected() == 7);
  CHECK(offsets->actual() == 8);
  const auto none = ember_test::catch_as<ember::ShapeError>(
      [&] { static_cast<void>(tbe.forward(ids, std::vector<int>{})); });
  REQUIRE(none);
  CHECK(std::string(none->what()) ==
        "TableBatchedBags::forward: offsets has 0 entries, expected F·B + 1 for the 2 features: 1 "
        "(B = 0)");
  CHECK(none->expected() == 1);
  const auto lengths = ember_test::catch_as<ember::ShapeError>([&] {
    static_cast<void>(tbe.forward_lengths(ids, std::vector<int>{3, 4, 0}));
  });
  REQUIRE(lengths);
  CHECK(std::string(lengths->what()) ==
        "TableBatchedBags::forward_lengths: lengths has 3 entries, expected F·B for the 2 "
        "features: 2 (B = 1) or 4 (B = 2)");
  CHECK(lengths->expected() == 2);
  CHECK(lengths->actual() == 3);
}

TEST_CASE("TableBatchedBags words a bag mistake as EmbeddingBag does", "[table_batched_bags]") {
  // One feature over one table: the same bags through both, the same message after the caller.
  std::vector<ember::Embedding<float>> one;
  one.emplace_back(10, 4, 1);
  TableBatchedBags<float> tbe(std::move(one), BagMode::sum);
  const ember::EmbeddingBag<float> bag(ember::Embedding<float>(10, 4, 1), BagMode::sum);
  const std::vector<int> ids{1, 2, 3};
  const ember::BagOptions<float> csr{.include_last_offset = true};
  const auto same = [&](const std::vector<int>& offsets, auto error) {
    using E = decltype(error);
    const auto a = ember_test::catch_as<E>([&] { static_cast<void>(tbe.forward(ids, offsets)); });
    const auto b =
        ember_test::catch_as<E>([&] { static_cast<void>(bag.forward(ids, offsets, csr)); });
    REQUIRE(a);
    REQUIRE(b);
    const std::string ta = a->what();
    const std::string tb = b->what();
    CHECK(ta.substr(ta.find(':')) == tb.substr(tb.find(':')));
    CHECK(ta.rfind("TableBatchedBags::forward: ", 0) == 0);
    return ta;
  };
  CHECK_THAT(same({1, 2, 3}, ember::ValueError{"", 0.0}),
             Catch::Contains("offsets[0] has to be 0") && Catch::Contains("However, got 1"));
  CHECK_THAT(same({0, 2, 1, 3}, ember::ValueError{"", 0.0}),
             Catch::Contains("offsets must be non-decreasing, but offsets[2] = 1"));
  CHECK_THAT(same({0, 2}, ember::ValueError{"", 0.0}),
             Catch::Contains("ids [2, 3) lie after the last offset"));
  CHECK_THAT(same({0, 4}, ember::IndexError{"", 0, 0, 0}),
             Catch::Contains("offsets[1] = 4 can not be greater than input's length (3)"));
  // Lists are counted in entries, for optimizers as for weights.
  std::vector<ember::optim::SGD<float>> opts(1);
  const auto count = ember_test::catch_as<ember::ShapeError>([&] {
    tbe.backward_step(ids, std::vector<int>{0, 3}, RowMatrix<float>::Zero(1, 4),
                      std::span(opts).first(0));
  });
  REQUIRE(count);
  CHECK(std::string(count->what()) ==
        "TableBatchedBags::backward_step: optimizers has 0 entries, expected num_tables() = 1");
}
