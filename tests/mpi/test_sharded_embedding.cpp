// Tests for ember/distributed/sharded_embedding.hpp, run at 1-4 ranks: every rank executes every
// test case in the same order, and results are compared with a single-process Embedding over the
// full table that each rank rebuilds locally.
// SPDX-License-Identifier: MIT
#include "ember/distributed/sharded_embedding.hpp"

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/input_embedding.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/positional.hpp"
#include "ember/sparse_grad.hpp"
#include "support/matrix_compare.hpp"
#include "support/sharded_embedding_reference.hpp"

using Catch::Matchers::Contains;
using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember::distributed::ShardedEmbedding;
using ember_test::same_bits;

namespace {

constexpr Index kVocab = 37;  // not a multiple of 2, 3 or 4: uneven shards
constexpr Index kDim = 8;

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

template <class T>
double max_abs_diff(const RowMatrix<T>& a, const RowMatrix<T>& b) {
  return static_cast<double>((a - b).cwiseAbs().maxCoeff());
}

}  // namespace

TEST_CASE("each rank holds exactly its contiguous range of rows", "[sharded_embedding]") {
  auto [w, table, single, emb] = ember_test::ShardedSetup<double>(kVocab, kDim);
  CHECK(emb.rank() == w.rank);
  CHECK(emb.world_size() == w.size);
  CHECK(emb.vocab_size() == kVocab);
  CHECK(emb.d_model() == kDim);
  CHECK(emb.local_rows() == emb.row_end() - emb.row_begin());
  CHECK(emb.shard().vocab_size() == emb.local_rows());
  CHECK(same_bits(emb.shard().weight(), table.middleRows(emb.row_begin(), emb.local_rows())));
  CHECK(emb.scale() == single.scale());
  CHECK(same_bits(emb.gather_table(), table));
  const ember::distributed::RowPartition rule(kVocab, w.size);
  CHECK(emb.row_begin() == rule.row_begin(w.rank));
}

TEMPLATE_TEST_CASE("forward is bit-identical to a single-process Embedding over the full table",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);
  const auto ids = ember_test::batch_of(w.rank, kVocab);

  SECTION("with de-duplication") {
    CHECK(same_bits(emb.forward(ids), single.forward(ids)));
    const auto& stats = emb.last_exchange();
    CHECK(stats.ids == static_cast<Index>(ids.size()));
    CHECK(stats.unique_ids <= stats.ids);
  }
  SECTION("without de-duplication") {
    emb.set_options({.deduplicate = false});
    CHECK(same_bits(emb.forward(ids), single.forward(ids)));
    CHECK(emb.last_exchange().unique_ids == static_cast<Index>(ids.size()));
  }
  SECTION("into a block of a larger matrix, with int32 ids") {
    const std::vector<std::int32_t> ids32(ids.begin(), ids.end());
    RowMatrix<T> big = RowMatrix<T>::Constant(static_cast<Index>(ids.size()) + 2, kDim + 3, T(-9));
    emb.forward(ids32, big.block(1, 2, static_cast<Index>(ids.size()), kDim));
    CHECK(same_bits(big.block(1, 2, static_cast<Index>(ids.size()), kDim), single.forward(ids)));
    CHECK((big.row(0).array() == T(-9)).all());
    CHECK((big.col(0).array() == T(-9)).all());
  }
  SECTION("some ranks pass an empty batch") {
    const std::vector<TokenId> mine = w.rank % 2 == 0 ? std::vector<TokenId>{} : ids;
    const RowMatrix<T> out = emb.forward(mine);
    CHECK(out.rows() == static_cast<Index>(mine.size()));
    CHECK(same_bits(out, single.forward(mine)));
  }
  SECTION("every rank asks for every row, including the first and last") {
    std::vector<TokenId> all(static_cast<std::size_t>(kVocab));
    for (Index i = 0; i < kVocab; ++i) all[static_cast<std::size_t>(i)] = kVocab - 1 - i;
    CHECK(same_bits(emb.forward(all), single.forward(all)));
  }
}

TEMPLATE_TEST_CASE("the fused positional add equals forward followed by add_to",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);
  const ember::SinusoidalEncoding<T> pe(16, kDim);
  const Index seq_len = 4;
  std::vector<TokenId> ids = ember_test::batch_of(w.rank, kVocab, 12);
  ids.resize(12);  // 3 sequences of 4 on every rank
  RowMatrix<T> out(12, kDim);
  emb.forward_with_positions(ids, pe, out, seq_len, /*offset=*/3);
  RowMatrix<T> expected = single.forward(ids);
  pe.add_to(expected, seq_len, 3);
  CHECK(same_bits(out, expected));
  // And the single-process fused pipeline, up to a possible FMA contraction.
  RowMatrix<T> fused(12, kDim);
  ember::embed_with_positions(single, pe, ids, fused, seq_len, 3);
  CHECK(max_abs_diff(out, fused) <= tolerance<T>());
  // Free-function spelling.
  RowMatrix<T> out2(12, kDim);
  ember::distributed::embed_with_positions(emb, pe.table(), ids, out2, seq_len, 3);
  CHECK(same_bits(out2, out));
}

TEMPLATE_TEST_CASE("backward and one SGD step leave exactly the table a single process would",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);
  const auto ids = ember_test::batch_of(w.rank, kVocab);
  const RowMatrix<T> g = ember_test::grad_of<T>(w.rank, static_cast<Index>(ids.size()), kDim);
  const T lr = T(0.125);

  ember::SparseRowGrad<T> grad;
  emb.backward(ids, g, grad);
  // Local row ids, bound to this shard.
  CHECK(grad.vocab_size() == emb.local_rows());
  CHECK(grad.d_model() == kDim);
  for (const TokenId r : grad.rows()) CHECK((r >= 0 && r < emb.local_rows()));
  CHECK(emb.last_exchange().unique_ids <= static_cast<Index>(ids.size()));

  for (Index k = 0; k < grad.size(); ++k) {
    emb.shard().weight().row(grad.rows()[static_cast<std::size_t>(k)]) -= lr * grad.values().row(k);
  }
  const RowMatrix<T> expected = ember_test::reference_sgd_step(table, w.size, lr);
  CHECK(same_bits(emb.gather_table(), expected));
}

TEMPLATE_TEST_CASE("the sharded gradient matches the gradient of the concatenated batch",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);
  std::vector<TokenId> all_ids;
  RowMatrix<T> all_grad(0, kDim);
  for (int r = 0; r < w.size; ++r) {
    const auto ids = ember_test::batch_of(r, kVocab);
    const RowMatrix<T> g = ember_test::grad_of<T>(r, static_cast<Index>(ids.size()), kDim);
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
    ember_test::append_rows(all_grad, g);
  }
  ember::SparseRowGrad<T> ref;
  single.backward(all_ids, all_grad, ref);
  const RowMatrix<T> dense = ref.to_dense();

  const auto ids = ember_test::batch_of(w.rank, kVocab);
  ember::SparseRowGrad<T> grad;
  emb.backward(ids, ember_test::grad_of<T>(w.rank, static_cast<Index>(ids.size()), kDim), grad);
  CHECK(max_abs_diff<T>(grad.to_dense(), dense.middleRows(emb.row_begin(), emb.local_rows())) <=
        tolerance<T>() * 10);
}

TEMPLATE_TEST_CASE("tied logits are vocabulary-parallel blocks of the single-process logits",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);

  // H = all ranks' hidden rows in rank order.
  std::vector<Index> offsets{0};
  RowMatrix<T> all_h(0, kDim);
  for (int r = 0; r < w.size; ++r) {
    const RowMatrix<T> h = ember_test::hidden_of<T>(r, kDim);
    ember_test::append_rows(all_h, h);
    offsets.push_back(all_h.rows());
  }
  const RowMatrix<T> h = ember_test::hidden_of<T>(w.rank, kDim);
  CHECK(emb.hidden_offsets(h.rows()) == offsets);

  const RowMatrix<T> logits = emb.logits(h);
  const RowMatrix<T> full = single.logits(all_h);
  REQUIRE(logits.rows() == all_h.rows());
  REQUIRE(logits.cols() == emb.local_rows());
  CHECK(max_abs_diff<T>(logits, full.middleCols(emb.row_begin(), emb.local_rows())) <=
        tolerance<T>());
  // A strided hidden (a block of a wider matrix) gives the same block.
  RowMatrix<T> wide = RowMatrix<T>::Zero(h.rows(), kDim + 2);
  wide.leftCols(kDim) = h;
  CHECK(same_bits(emb.logits(wide.leftCols(kDim)), logits));

  // Backward against the single-process logits_backward with dL = a fixed N x V matrix.
  RowMatrix<T> dl(all_h.rows(), kVocab);
  ember::Init::uniform(-1.0, 1.0).fill(dl, 5);
  RowMatrix<T> ref_dh(all_h.rows(), kDim);
  RowMatrix<T> ref_dw = RowMatrix<T>::Zero(kVocab, kDim);
  single.logits_backward(all_h, dl, ref_dh, ref_dw);

  const RowMatrix<T> my_dl = dl.middleCols(emb.row_begin(), emb.local_rows());
  RowMatrix<T> dh(h.rows(), kDim);
  RowMatrix<T> dw = RowMatrix<T>::Zero(emb.local_rows(), kDim);
  emb.logits_backward(h, my_dl, dh, dw);
  CHECK(max_abs_diff<T>(dw, ref_dw.middleRows(emb.row_begin(), emb.local_rows())) <=
        tolerance<T>() * 10);
  CHECK(max_abs_diff<T>(dh, ref_dh.middleRows(offsets[static_cast<std::size_t>(w.rank)],
                                              h.rows())) <= tolerance<T>() * 10);
}

TEST_CASE("a bad id on one rank raises the same IndexError on every rank, promptly",
          "[sharded_embedding]") {
  auto [w, table, single, emb] = ember_test::ShardedSetup<float>(kVocab, kDim);
  const int bad_rank = w.size - 1;
  auto ids = ember_test::batch_of(w.rank, kVocab);
  if (w.rank == bad_rank) ids[2] = kVocab + 5;
  const std::string rank_text =
      "rank " + std::to_string(bad_rank) + " of " + std::to_string(w.size);

  SECTION("forward") {
    RowMatrix<float> out = RowMatrix<float>::Constant(static_cast<Index>(ids.size()), kDim, 3.f);
    const double start = MPI_Wtime();
    bool thrown = false;
    try {
      emb.forward(ids, out);
    } catch (const ember::IndexError& e) {
      thrown = true;
      CHECK(e.position() == 2);
      CHECK(e.value() == kVocab + 5);
      CHECK(e.bound() == kVocab);
      CHECK_THAT(e.what(), Contains(rank_text) && Contains("id 42 at position 2") &&
                               Contains("outside [0, 37)") &&
                               Contains("ShardedEmbedding::forward"));
    }
    CHECK(thrown);
    CHECK(MPI_Wtime() - start < 5.0);
    CHECK((out.array() == 3.f).all());
    // No rank was left inside a collective: the next call works everywhere.
    const auto good = ember_test::batch_of(w.rank, kVocab);
    CHECK(same_bits(emb.forward(good), single.forward(good)));
  }
  SECTION("backward leaves every gradient unchanged") {
    ember::SparseRowGrad<float> grad;
    const auto good = ember_test::batch_of(w.rank, kVocab);
    emb.backward(good, ember_test::grad_of<float>(w.rank, static_cast<Index>(good.size()), kDim),
                 grad);
    const RowMatrix<float> before = grad.to_dense();
    REQUIRE_THROWS_AS(
        emb.backward(ids, ember_test::grad_of<float>(w.rank, static_cast<Index>(ids.size()), kDim),
                     grad),
        ember::IndexError);
    CHECK(same_bits(grad.to_dense(), before));
  }
  SECTION("a negative id") {
    if (w.rank == bad_rank) ids[2] = -1;
    REQUIRE_THROWS_WITH(emb.forward(ids), Contains(rank_text) && Contains("id -1 at position 2"));
  }
}

TEST_CASE("a wrong output shape on one rank raises ShapeError on every rank",
          "[sharded_embedding]") {
  const auto w = ember_test::world();
  auto emb = ShardedEmbedding<double>::from_full_table(
      MPI_COMM_WORLD, ember_test::full_table<double>(kVocab, kDim));
  const auto ids = ember_test::batch_of(w.rank, kVocab);
  const Index cols = w.rank == 0 ? kDim + 1 : kDim;
  RowMatrix<double> out = RowMatrix<double>::Zero(static_cast<Index>(ids.size()), cols);
  try {
    emb.forward(ids, out);
    FAIL("no exception");
  } catch (const ember::ShapeError& e) {
    CHECK(e.dimension() == 1);
    CHECK(e.expected() == kDim);
    CHECK(e.actual() == kDim + 1);
    CHECK_THAT(e.what(), Contains("rank 0 of"));
  }
  CHECK((out.array() == 0.0).all());
  // Tied logits: hidden of the wrong width on the last rank.
  const RowMatrix<double> h = RowMatrix<double>::Ones(2, w.rank == w.size - 1 ? kDim - 1 : kDim);
  REQUIRE_THROWS_AS(emb.logits(h), ember::ShapeError);
}

TEST_CASE("tables of different shapes across ranks are rejected at construction",
          "[sharded_embedding]") {
  const auto w = ember_test::world();
  SECTION("d_model differs on the last rank") {
    if (w.size >= 2) {
      const Index d = w.rank == w.size - 1 ? kDim + 1 : kDim;
      REQUIRE_THROWS_WITH(ShardedEmbedding<float>(MPI_COMM_WORLD, kVocab, d),
                          Contains("rank " + std::to_string(w.size - 1) + " has d_model = 9") &&
                              Contains("rank 0 has d_model = 8"));
    }
  }
  SECTION("vocab_size differs on rank 0") {
    if (w.size >= 2) {
      const Index v = w.rank == 0 ? kVocab + 1 : kVocab;
      REQUIRE_THROWS_AS(ShardedEmbedding<float>(MPI_COMM_WORLD, v, kDim), ember::ShapeError);
    }
  }
  SECTION("more ranks than rows") {
    if (w.size >= 2) {
      REQUIRE_THROWS_WITH(ShardedEmbedding<float>(MPI_COMM_WORLD, 1, kDim),
                          Contains("exceeds vocab_size 1"));
    }
  }
  SECTION("a non-positive size on one rank") {
    const Index d = w.rank == 0 ? 0 : kDim;
    REQUIRE_THROWS_WITH(ShardedEmbedding<float>(MPI_COMM_WORLD, kVocab, d),
                        Contains("rank 0 of") && Contains("d_model must be positive"));
  }
  SECTION("an adopted shard of the wrong height") {
    const ember::distributed::RowPartition rule(kVocab, w.size);
    const Index rows = rule.rows(w.rank) + (w.rank == w.size - 1 ? 1 : 0);
    REQUIRE_THROWS_WITH(
        ShardedEmbedding<float>(MPI_COMM_WORLD, kVocab, RowMatrix<float>::Zero(rows, kDim)),
        Contains("shard has") && Contains("the rows this rank owns"));
  }
}

TEST_CASE("an adopted shard and the seeded constructor build the expected table",
          "[sharded_embedding]") {
  const auto w = ember_test::world();
  const ember::distributed::RowPartition rule(kVocab, w.size);
  const RowMatrix<double> table = ember_test::full_table<double>(kVocab, kDim);
  ShardedEmbedding<double> adopted(MPI_COMM_WORLD, kVocab,
                                   table.middleRows(rule.row_begin(w.rank), rule.rows(w.rank)));
  CHECK(same_bits(adopted.gather_table(), table));

  // Row r comes from its own stream, so the table is the same for any number of ranks.
  const auto init = ember::Init::truncated_normal(0.02);
  ShardedEmbedding<double> seeded(MPI_COMM_WORLD, kVocab, kDim, init, 99);
  RowMatrix<double> expected(kVocab, kDim);
  for (Index r = 0; r < kVocab; ++r) {
    init.fill(expected.row(r), ShardedEmbedding<double>::row_seed(99, r));
  }
  CHECK(same_bits(seeded.gather_table(), expected));
  // Xavier uses the full table's fan-out.
  ShardedEmbedding<double> xavier(MPI_COMM_WORLD, kVocab, kDim, ember::Init::xavier_uniform(), 1);
  const double bound = std::sqrt(6.0 / static_cast<double>(kVocab + kDim));
  CHECK(xavier.shard().weight().cwiseAbs().maxCoeff() <= bound);
}

TEMPLATE_TEST_CASE("ember's optimizers step each shard to exactly the single-process table",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  // ShardedSetup's parts by name, not as a structured binding: `run` captures them, which clang
  // before 16 refuses for structured bindings.
  ember_test::ShardedSetup<T> setup(kVocab, kDim);
  const auto& w = setup.w;
  auto& single = setup.single;
  auto& emb = setup.emb;

  auto run = [&](auto& single_opt, auto& shard_opt) {
    for (std::uint64_t step = 0; step < 3; ++step) {
      ember::SparseRowGrad<T> ref;
      for (int r = 0; r < w.size; ++r) {
        const auto ids = ember_test::batch_of(r, kVocab, 9, 11 + step);
        single.backward(ids, ember_test::grad_of<T>(r, static_cast<Index>(ids.size()), kDim, step),
                        ref);
      }
      single_opt.step(single, ref);
      const auto ids = ember_test::batch_of(w.rank, kVocab, 9, 11 + step);
      ember::SparseRowGrad<T> grad;
      emb.backward(ids, ember_test::grad_of<T>(w.rank, static_cast<Index>(ids.size()), kDim, step),
                   grad);
      shard_opt.step(emb.shard(), grad);
    }
    CHECK(same_bits(emb.gather_table(), single.weight()));
  };
  SECTION("SGD with momentum") {
    ember::optim::SGD<T> a({.lr = 0.1, .momentum = 0.9});
    ember::optim::SGD<T> b({.lr = 0.1, .momentum = 0.9});
    run(a, b);
  }
  SECTION("lazy Adam") {
    ember::optim::Adam<T> a({.lr = 0.01});
    ember::optim::Adam<T> b({.lr = 0.01});
    run(a, b);
  }
}

TEMPLATE_TEST_CASE("a tied step on a sharded table matches the single-process tied step",
                   "[sharded_embedding]", float, double) {
  using T = TestType;
  auto [w, table, single, emb] = ember_test::ShardedSetup<T>(kVocab, kDim);

  // Single process: input side over all ranks' batches + dense logits side over all hidden rows.
  ember::SparseRowGrad<T> ref_sparse;
  RowMatrix<T> all_h(0, kDim);
  for (int r = 0; r < w.size; ++r) {
    const auto ids = ember_test::batch_of(r, kVocab);
    single.backward(ids, ember_test::grad_of<T>(r, static_cast<Index>(ids.size()), kDim),
                    ref_sparse);
    const RowMatrix<T> h = ember_test::hidden_of<T>(r, kDim);
    ember_test::append_rows(all_h, h);
  }
  RowMatrix<T> dl(all_h.rows(), kVocab);
  ember::Init::uniform(-1.0, 1.0).fill(dl, 9);
  RowMatrix<T> ref_dh(all_h.rows(), kDim);
  RowMatrix<T> ref_dw = RowMatrix<T>::Zero(kVocab, kDim);
  single.logits_backward(all_h, dl, ref_dh, ref_dw);
  ember::optim::Adam<T> single_opt({.lr = 0.01});
  single_opt.step(single, ref_sparse, ref_dw);

  // Sharded: the same two halves, each rank stepping its own rows.
  const auto ids = ember_test::batch_of(w.rank, kVocab);
  ember::SparseRowGrad<T> sparse;
  emb.backward(ids, ember_test::grad_of<T>(w.rank, static_cast<Index>(ids.size()), kDim), sparse);
  const RowMatrix<T> h = ember_test::hidden_of<T>(w.rank, kDim);
  RowMatrix<T> dh(h.rows(), kDim);
  RowMatrix<T> dw = RowMatrix<T>::Zero(emb.local_rows(), kDim);
  const RowMatrix<T> my_dl = dl.middleCols(emb.row_begin(), emb.local_rows());
  emb.logits_backward(h, my_dl, dh, dw);
  ember::optim::Adam<T> opt({.lr = 0.01});
  opt.step(emb.shard(), sparse, dw);
  CHECK(max_abs_diff<T>(emb.gather_table(), single.weight()) <= tolerance<T>() * 10);
}
