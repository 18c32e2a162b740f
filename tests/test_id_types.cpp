// Every kind of door that takes ids (types.hpp's IdRange) takes std::vector<std::size_t> (unsigned
// 64-bit) ids, offsets and lengths: the same results as int64 ids, and ids above INT64_MAX are out
// of range like any id >= V (IndexError with the exact value in the message, nothing written).
// Lookup, fused positions, backward, sparse accumulation, bags, the input stem, the fused step and
// TableBatchedBags.
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/bag.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/input_embedding.hpp"
#include "ember/input_stem.hpp"
#include "ember/optim.hpp"
#include "ember/positional.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table_batched_bags.hpp"
#include "ember/types.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using Sizes = std::vector<std::size_t>;
using Ids = std::vector<TokenId>;

namespace {

constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max();  // 2^64 - 1
constexpr std::size_t kJustAbove = std::size_t{1} << 63;                // INT64_MAX + 1
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

Sizes to_sizes(const Ids& ids) { return Sizes(ids.begin(), ids.end()); }

/// Requires `call` to throw IndexError for an unsigned id `bad` at `position`, bound `bound`,
/// with the exact decimal value in the message and value() saturated at INT64_MAX.
template <class F>
void require_huge_id_refused(F&& call, std::size_t bad, Index position, Index bound) {
  const auto e = ember_test::catch_as<ember::IndexError>(call);
  REQUIRE(e);
  CHECK(e->position() == position);
  CHECK(e->value() == kInt64Max);
  CHECK(e->bound() == bound);
  CHECK_THAT(std::string(e->what()), Catch::Contains("id " + std::to_string(bad) + " at position " +
                                                     std::to_string(position)) &&
                                         Catch::Contains("[0, " + std::to_string(bound) + ")"));
}

}  // namespace

TEST_CASE("std::size_t ids look up, fuse positions and accumulate as int64 ids do",
          "[types][embedding]") {
  const ember::Embedding<float> emb(ember_test::random_table<float>(50, 8, 1));
  const Ids ids{3, 49, 0, 3, 7, 12};
  const Sizes sizes = to_sizes(ids);
  CHECK(emb.forward(sizes) == emb.forward(ids));

  const ember::SinusoidalEncoding<float> pe(16, 8);
  CHECK(ember::embed_with_positions(emb, pe, sizes, 3) ==
        ember::embed_with_positions(emb, pe, ids, 3));

  const RowMatrix<float> g = ember_test::random_table<float>(6, 8, 2);
  ember::SparseRowGrad<float> by_size, by_id;
  emb.backward(sizes, g, by_size);
  emb.backward(ids, g, by_id);
  CHECK(by_size == by_id);

  ember::SparseRowGrad<float> acc_size, acc_id;
  acc_size.accumulate(sizes, g, 1.0f, 50);
  acc_id.accumulate(ids, g, 1.0f, 50);
  CHECK(acc_size == acc_id);
}

TEST_CASE("std::size_t ids at or above V, and above INT64_MAX, are out of range at every door",
          "[types][embedding][errors]") {
  ember::Embedding<float> emb(ember_test::random_table<float>(50, 8, 1));
  const RowMatrix<float> g = ember_test::random_table<float>(3, 8, 2);
  for (const std::size_t bad : {std::size_t{50}, kJustAbove, kHuge}) {
    CAPTURE(bad);
    const Sizes sizes{1, 2, bad};
    RowMatrix<float> out = RowMatrix<float>::Constant(3, 8, 5.0f);
    const auto lookup = ember_test::catch_as<ember::IndexError>([&] { emb.forward(sizes, out); });
    REQUIRE(lookup);
    CHECK(lookup->position() == 2);
    CHECK(lookup->value() == (bad == 50 ? 50 : kInt64Max));
    CHECK_THAT(std::string(lookup->what()),
               Catch::Contains("Embedding::forward: id " + std::to_string(bad) +
                               " at position 2 is outside [0, 50)"));
    CHECK(ember_test::all_equal_to(out, 5.0f));

    ember::SparseRowGrad<float> grad;
    CHECK_THROWS_AS(emb.backward(sizes, g, grad), ember::IndexError);
    CHECK(grad.empty());
    CHECK_THROWS_AS(grad.accumulate(sizes, g, 1.0f, 50), ember::IndexError);
    CHECK(grad.empty());
  }
  require_huge_id_refused([&] { (void)emb.forward(Sizes{kHuge}); }, kHuge, 0, 50);
  require_huge_id_refused(
      [&] {
        ember::SparseRowGrad<float> grad;
        emb.backward(Sizes{4, kJustAbove, 1}, g, grad);
      },
      kJustAbove, 1, 50);
}

TEST_CASE("EmbeddingBag takes std::size_t ids, offsets and lengths", "[types][bag]") {
  ember::EmbeddingBag<float> bag(ember::Embedding<float>(ember_test::random_table<float>(40, 4, 3)),
                                 ember::BagMode::mean);
  const Ids ids{4, 8, 15, 16, 23, 39};
  const Ids offsets{0, 2, 2}, lengths{2, 0, 4};
  const RowMatrix<float> want = bag.forward(ids, offsets);
  CHECK(bag.forward(to_sizes(ids), to_sizes(offsets)) == want);
  CHECK(bag.forward(to_sizes(ids), offsets) == want);
  CHECK(bag.forward_lengths(to_sizes(ids), to_sizes(lengths)) == want);

  const RowMatrix<float> g = ember_test::random_table<float>(3, 4, 4);
  ember::SparseRowGrad<float> by_size, by_id;
  bag.backward(to_sizes(ids), to_sizes(offsets), g, by_size);
  bag.backward(ids, offsets, g, by_id);
  CHECK(by_size == by_id);

  require_huge_id_refused(
      [&] {
        (void)bag.forward(Sizes{4, kHuge, 1}, Sizes{0, 2});
      },
      kHuge, 1, 40);
  // An offset or length no index can reach is refused before anything else is read.
  const auto off = ember_test::catch_as<ember::ValueError>([&] {
    (void)bag.forward(to_sizes(ids), Sizes{0, 2, kHuge});
  });
  REQUIRE(off);
  CHECK(std::string(off->what()) == "EmbeddingBag::forward: offsets[2] = " + std::to_string(kHuge) +
                                        " is above 2^63 - 1, the largest index");
  const auto len = ember_test::catch_as<ember::ValueError>([&] {
    (void)bag.forward_lengths(to_sizes(ids), Sizes{2, kJustAbove, 4});
  });
  REQUIRE(len);
  CHECK_THAT(std::string(len->what()),
             Catch::Contains("lengths[1] = " + std::to_string(kJustAbove)));
  // A plain out-of-range offset keeps its message.
  CHECK_THROWS_WITH(bag.forward(to_sizes(ids), Sizes{0, 7}),
                    Catch::Contains("offsets[1] = 7 can not be greater than input's length (6)"));
}

TEST_CASE("InputStem takes std::size_t token and segment ids", "[types][input_stem]") {
  ember::InputStem<float> stem(
      30, 8, {.max_len = 4, .positions = ember::PositionKind::learned, .type_vocab_size = 2});
  const Ids ids{5, 6, 7, 8, 9, 29}, segs{0, 0, 1, 1, 0, 1};
  RowMatrix<float> a(6, 8), b(6, 8);
  (void)stem.forward(to_sizes(ids), to_sizes(segs), 3, a);
  (void)stem.forward(ids, segs, 3, b);
  CHECK(a == b);

  const RowMatrix<float> g = ember_test::random_table<float>(6, 8, 5);
  ember::InputStemGrads<float> by_size, by_id;
  stem.backward(to_sizes(ids), to_sizes(segs), 3, g, by_size);
  stem.backward(ids, segs, 3, g, by_id);
  CHECK(by_size.tokens == by_id.tokens);
  CHECK(by_size.positions == by_id.positions);
  CHECK(by_size.segments == by_id.segments);

  RowMatrix<float> out = RowMatrix<float>::Constant(3, 8, 2.0f);
  require_huge_id_refused([&] { (void)stem.forward(Sizes{1, kHuge, 2}, 3, out); }, kHuge, 1, 30);
  CHECK(ember_test::all_equal_to(out, 2.0f));
  const auto seg = ember_test::catch_as<ember::IndexError>([&] {
    (void)stem.forward(Sizes{1, 2, 3}, Sizes{0, kJustAbove, 1}, 3, out);
  });
  REQUIRE(seg);
  CHECK(seg->position() == 1);
  CHECK(seg->value() == kInt64Max);
  CHECK(seg->bound() == 2);
  CHECK(ember_test::all_equal_to(out, 2.0f));
}

TEST_CASE("The fused backward + step takes std::size_t ids", "[types][optim]") {
  ember::Embedding<float> a(ember_test::random_table<float>(60, 8, 6));
  ember::Embedding<float> b = a;
  ember::optim::Adam<float> opt_a({.lr = 0.01}), opt_b({.lr = 0.01});
  const Ids ids{4, 59, 4, 11};
  const RowMatrix<float> g = ember_test::random_table<float>(4, 8, 7);
  opt_a.backward_step(a, to_sizes(ids), g);
  opt_b.backward_step(b, ids, g);
  CHECK(a.weight() == b.weight());

  const RowMatrix<float> before = a.weight();
  require_huge_id_refused([&] { opt_a.backward_step(a, Sizes{1, 2, 3, kHuge}, g); }, kHuge, 3, 60);
  CHECK(a.weight() == before);

  ember::EmbeddingBag<float> bag(ember::Embedding<float>(ember_test::random_table<float>(60, 8, 8)),
                                 ember::BagMode::sum);
  const RowMatrix<float> gb = ember_test::random_table<float>(2, 8, 9);
  const RowMatrix<float> bag_before = bag.embedding().weight();
  ember::optim::SGD<float> sgd({.lr = 0.1});
  CHECK_THROWS_AS(bag.backward_step(Sizes{1, kJustAbove}, Sizes{0, 1}, gb, sgd), ember::IndexError);
  CHECK(bag.embedding().weight() == bag_before);
  bag.backward_step(Sizes{1, 2}, Sizes{0, 1}, gb, sgd);
  CHECK(bag.embedding().weight() != bag_before);
}

TEST_CASE("TableBatchedBags takes std::size_t indices, offsets and lengths",
          "[types][table_batched_bags]") {
  std::vector<ember::Embedding<float>> tables;
  tables.emplace_back(ember_test::random_table<float>(30, 4, 10));
  tables.emplace_back(ember_test::random_table<float>(20, 4, 11));
  ember::TableBatchedBags<float> tbe(std::move(tables), ember::BagMode::sum);
  const Ids indices{3, 7, 10, 19, 1}, offsets{0, 1, 2, 4, 5}, lengths{1, 1, 2, 1};
  const RowMatrix<float> want = tbe.forward(indices, offsets);
  CHECK(tbe.forward(to_sizes(indices), to_sizes(offsets)) == want);
  CHECK(tbe.forward_lengths(to_sizes(indices), to_sizes(lengths)) == want);

  const RowMatrix<float> g = ember_test::random_table<float>(2, 8, 12);
  std::vector<ember::SparseRowGrad<float>> by_size, by_id;
  tbe.backward(to_sizes(indices), to_sizes(offsets), g, by_size);
  tbe.backward(indices, offsets, g, by_id);
  REQUIRE(by_size.size() == by_id.size());
  for (std::size_t t = 0; t < by_id.size(); ++t) CHECK(by_size[t] == by_id[t]);

  const auto e = ember_test::catch_as<ember::IndexError>([&] {
    (void)tbe.forward(Sizes{3, 7, kHuge, 19, 1}, to_sizes(offsets));
  });
  REQUIRE(e);
  CHECK(e->position() == 2);
  CHECK(e->value() == kInt64Max);
  CHECK(e->bound() == 20);
  CHECK_THAT(std::string(e->what()), Catch::Contains("id " + std::to_string(kHuge) +
                                                     " at position 2 (feature 1, table 1)"));
  CHECK_THROWS_WITH(tbe.forward(to_sizes(indices), Sizes{0, 1, kJustAbove, 4, 5}),
                    "TableBatchedBags::forward: offsets[2] = " + std::to_string(kJustAbove) +
                        " is above 2^63 - 1, the largest index");
  CHECK_THROWS_AS(tbe.forward_lengths(to_sizes(indices), Sizes{1, 1, kHuge, 1}), ember::ValueError);

  std::vector<ember::optim::RowwiseAdagrad<float>> opts(
      2, ember::optim::RowwiseAdagrad<float>({.lr = 0.1}));
  const RowMatrix<float> table0 = tbe.table(0).weight();
  CHECK_THROWS_AS(
      tbe.backward_step(Sizes{3, 7, 10, kHuge, 1}, to_sizes(offsets), g, std::span(opts)),
      ember::IndexError);
  CHECK(tbe.table(0).weight() == table0);
  tbe.backward_step(to_sizes(indices), to_sizes(offsets), g, std::span(opts));
  CHECK(tbe.table(0).weight() != table0);
}
